/*
 * FUSE low-level callbacks: each turns one kernel request into one master
 * request (none costs more than one round trip) and the reply back.
 *
 * Requests go out with mconn_send() and a completion; the completion
 * replies to the kernel from the connection's receiver thread, so FUSE
 * workers never wait for the master. Anything a completion needs beyond
 * the fuse_req_t (a copy of the fuse_file_info, a size) travels in a
 * small malloc'd context.
 *
 * Inode numbers are the master's, except that the exported root is
 * FUSE_ROOT_ID; a subtree export's root never contains the master's inode
 * 1, so the mapping is one-to-one.
 *
 * Lookup counts: every reply that hands the kernel an entry (lookup,
 * mknod, mkdir, symlink, link, create, and each readdirplus entry but "."
 * and "..") counts one in the inode table before it is sent, and is
 * uncounted if sending fails, so the table matches the kernel's.
 *
 * File contents are data.c's: reads and writes go to the chunkservers.
 *
 * The kernel hears only from here and from reply.c, this layer's reply
 * point: deleg.c returns a verdict (done here, an error, or "ask the
 * master"), entry.c attributes, and lock.c, readdir.c and data.c either
 * an error to answer at once or 0 when their completion will hand the
 * result to reply.h (started()).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "data.h"
#include "deleg.h"
#include "dircache.h"
#include "entries.h"
#include "frame.h"
#include "inval.h"
#include "log.h"
#include "mount_i.h"
#include "reply.h"
#include "util.h"

#define TAG "ops"

static struct mount *mnt(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static uint64_t to_master(const struct mount *m, fuse_ino_t ino)
{
	return mount_to_master(m, ino);
}

static ProtobufCBinaryData bytes(const char *s)
{
	ProtobufCBinaryData b = { strlen(s), (uint8_t *)s };

	return b;
}

/* Completions for replies that are an entry (a name in @parent),
 * attributes, or a status. */
static void entry_reply(fuse_req_t req, uint64_t parent, bool changed, int rc,
			ProtobufCMessage **reply)
{
	struct mount *m = mnt(req); /* req is gone once replied to */
	Sweepfs__EntryReply *r = (Sweepfs__EntryReply *)*reply;

	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	/* The parents' new attributes before the reply: once it has the
	 * reply the kernel may ask for them (stat, the next path walk), and
	 * must not get the ones from before. The entry's own after: the
	 * table only caches what the kernel knows. */
	if (changed)
		mount_cache_attrs(m, NULL, r->changed, r->n_changed);
	reply_entry(req, parent, r->attr);
	mount_cache_attrs(m, r->attr, NULL, 0);
}

static void entry_done(fuse_req_t req, uint64_t parent, int rc,
		       ProtobufCMessage **reply)
{
	entry_reply(req, parent, true, rc, reply);
}

static void attr_done(void *arg, int rc, ProtobufCMessage **reply)
{
	fuse_req_t req = arg;
	struct mount *m = mnt(req);
	const Sweepfs__Attr *a;
	struct stat st;

	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	/* AttrReply and OpenReply both carry the attributes as field 2. */
	a = ((Sweepfs__AttrReply *)*reply)->attr;
	if (!a) {
		fuse_reply_err(req, EIO);
		return;
	}
	mount_cache_attrs(m, a, NULL, 0);
	mount_attr_to_stat(m, a, MOUNT_ATTR_NOW, &st);
	fuse_reply_attr(req, &st, m->attr_timeout);
}

static void status_done(void *arg, int rc, ProtobufCMessage **reply)
{
	fuse_req_t req = arg;

	if (rc == 0) {
		Sweepfs__StatusReply *r = (Sweepfs__StatusReply *)*reply;

		mount_cache_attrs(mnt(req), NULL, r->changed, r->n_changed);
	}
	fuse_reply_err(req, -rc);
}

/* A name this mount adds or removes: what its listing cache must learn. */
struct namectx {
	fuse_req_t req;
	uint64_t parent;
	uint64_t newparent; /* rename */
	unsigned flags;	    /* rename */
	char name[SW_NAME_MAX + 1];
	char newname[SW_NAME_MAX + 1];
};

static struct namectx *namectx_new(fuse_req_t req, uint64_t parent,
				   const char *name)
{
	struct namectx *c = malloc(sizeof(*c));

	if (!c) {
		fuse_reply_err(req, ENOMEM);
		return NULL;
	}
	c->req = req;
	c->parent = parent;
	snprintf(c->name, sizeof(c->name), "%s", name);
	return c;
}

/*
 * namectx_new() for a request that names @name in @parent (a fuse inode)
 * and nothing else about it: also fills the request's @qparent and @qname
 * with them. NULL after answering ENOMEM.
 */
static struct namectx *name_req(fuse_req_t req, fuse_ino_t parent,
				const char *name, uint64_t *qparent,
				ProtobufCBinaryData *qname)
{
	struct namectx *c = namectx_new(req, to_master(mnt(req), parent), name);

	if (c) {
		*qparent = c->parent;
		*qname = bytes(name);
	}
	return c;
}

/*
 * A new name: into the cached listing, then the reply (a readdir right
 * after mkdir must list it).
 */
static void added_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct namectx *c = arg;
	struct mount *m = mnt(c->req);
	Sweepfs__EntryReply *r = (Sweepfs__EntryReply *)*reply;
	const Sweepfs__Attr *a = rc == 0 ? r->attr : NULL;

	if (a && r->has_cookie)
		dircache_add(m->dcache, c->parent, c->name, r->cookie, a->ino,
			     (uint8_t)((a->mode >> 12) & 15), a);
	if (a && S_ISDIR(a->mode)) {
		dircache_new_empty(m->dcache, a->ino);
		deleg_note_dir(m->deleg, c->parent, c->name, a->ino);
	}
	entry_done(c->req, c->parent, rc, reply);
	free(c);
}

/* A name removed: dropped from the cached listing, then the reply. */
static void removed_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct namectx *c = arg;
	struct mount *m = mnt(c->req);

	/* Out of the cache before the kernel hears of it: its next lookup
	 * of the name (mkdir right after rmdir) must not find it here. */
	if (rc == 0)
		dircache_remove(m->dcache, c->parent, c->name);
	status_done(c->req, rc, reply);
	free(c);
}

static void renamed_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct namectx *c = arg;
	struct mount *m = mnt(c->req);
	Sweepfs__StatusReply *r = (Sweepfs__StatusReply *)*reply;

	if (rc == 0 && !(c->flags & RENAME_EXCHANGE) && r->has_cookie) {
		dircache_rename(m->dcache, c->parent, c->name, c->newparent,
				c->newname, r->cookie);
	} else if (rc == 0) {
		dircache_drop(m->dcache, c->parent);
		dircache_drop(m->dcache, c->newparent);
	}
	if (rc == 0)
		deleg_renamed(m->deleg, c->parent, c->name, c->newparent,
			      c->newname, c->flags & RENAME_EXCHANGE);
	status_done(c->req, rc, reply);
	free(c);
}

static struct mount_opctx *opctx_new(fuse_req_t req, uint64_t ino,
				     const struct fuse_file_info *fi)
{
	struct mount_opctx *c = calloc(1, sizeof(*c));

	if (!c) {
		fuse_reply_err(req, ENOMEM);
		return NULL;
	}
	c->req = req;
	c->ino = ino;
	if (fi)
		c->fi = *fi;
	return c;
}

/*
 * What a module that answers later (lock.c, readdir.c, data.c, deleg.c)
 * returned: 0, the request is under way and its completion answers it;
 * -errno, nothing was sent and the operation answers the error now; 1,
 * nothing to do, it answers 0 now.
 */
static void started(fuse_req_t req, int rc)
{
	if (rc != 0)
		fuse_reply_err(req, rc < 0 ? -rc : 0);
}

/* ---- names ---------------------------------------------------------- */

static void ll_init(void *userdata, struct fuse_conn_info *conn)
{
	struct mount *m = userdata;

	if ((conn->capable & FUSE_CAP_READDIRPLUS) &&
	    m->readdirplus != RDPLUS_NEVER) {
		conn->want |= FUSE_CAP_READDIRPLUS;
		/* auto: the kernel asks for attributes when lookups follow
		 * (ls -l); always: every page carries them, so that the
		 * names a reader goes on to unlink or stat are known to the
		 * kernel without a lookup each. */
		if (m->readdirplus == RDPLUS_AUTO)
			conn->want |= FUSE_CAP_READDIRPLUS_AUTO;
		else
			conn->want &= ~(unsigned)FUSE_CAP_READDIRPLUS_AUTO;
	} else {
		conn->want &= ~(unsigned)(FUSE_CAP_READDIRPLUS |
					  FUSE_CAP_READDIRPLUS_AUTO);
	}
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* The epoch notice came with protocol 7.44 (Linux 6.16): known
	 * before the first recall, which relies on it (deleg.c). */
	if (conn->proto_major == 7 && conn->proto_minor < 44)
		m->no_epoch = true;
	/*
	 * The kernel's writeback cache buffers and gathers small writes, but
	 * then trusts its own size and mtime of a cached file for good,
	 * whatever another client does to the file: only on request
	 * (-o writeback_cache), for files one client writes. Requests carry
	 * up to 1 MiB, and the kernel reads ahead as far.
	 */
	if (m->writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	m->writeback = (conn->want & FUSE_CAP_WRITEBACK_CACHE) != 0;
	conn->max_write = SW_IO_MAX;
	conn->max_readahead = SW_IO_MAX;
	/* The master applies the setuid rules; the kernel tells us what it
	 * wants cleared after writes and chown. */
	conn->want &= ~(unsigned)FUSE_CAP_HANDLE_KILLPRIV;
	/* Locks go to the master, so that they hold across machines
	 * (lock.c); without these the kernel keeps them to itself. */
	if (conn->capable & FUSE_CAP_POSIX_LOCKS)
		conn->want |= FUSE_CAP_POSIX_LOCKS;
	if (conn->capable & FUSE_CAP_FLOCK_LOCKS)
		conn->want |= FUSE_CAP_FLOCK_LOCKS;
}

struct lookupctx {
	fuse_req_t req;
	uint64_t parent;
	char name[SW_NAME_MAX + 1];
};

static void lookup_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct lookupctx c = *(struct lookupctx *)arg;
	struct mount *m = mnt(c.req);
	double t = mount_entry_timeout(m, c.parent, true);

	free(arg);
	if (rc == 0) {
		const Sweepfs__Attr *a = ((Sweepfs__EntryReply *)*reply)->attr;

		if (a && S_ISDIR(a->mode))
			deleg_note_dir(m->deleg, c.parent, c.name, a->ino);
	}
	if (rc == -ENOENT && t > 0) {
		struct fuse_entry_param e = { .ino = 0, .entry_timeout = t };

		fuse_reply_entry(c.req, &e);
		return;
	}
	/* The directory's attributes, which the master adds: not those of
	 * one held here, which may be ahead of the master's (changes
	 * queued) and are kept current by recalls. */
	entry_reply(c.req, c.parent, !deleg_held(m->deleg, c.parent), rc,
		    reply);
}

/*
 * A name in a listing this mount caches (and the master keeps coherent)
 * needs no round trip: found, with the attributes the listing brought
 * (valid for what is left of attr_timeout, possibly nothing, in which
 * case the kernel asks for fresh ones when it needs them), or absent
 * from a complete listing.
 */
static bool lookup_cached(fuse_req_t req, uint64_t parent, const char *name)
{
	struct mount *m = mnt(req);
	struct fuse_entry_param e;
	struct dc_entry de;
	double t, left;

	/* Longer than a name can be: the master says ENAMETOOLONG, not the
	 * cache ENOENT. Where not everyone may search, the master checks
	 * that the caller may. */
	if (strlen(name) > SW_NAME_MAX || !mount_searchable(m, parent))
		return false;
	switch (dircache_lookup(m->dcache, parent, name, &de)) {
	case DC_FOUND:
		if (!de.has_attr)
			return false;
		left = mount_fresher_attr(m, &de.attr, &de.attr_at) ?
			       0 :
			       mount_attr_left(m, de.attr_at);
		/*
		 * Attributes past attr_timeout, or expired at once (attr_at
		 * 0: the directory was given back, or a chmod closed one;
		 * changed since, or written here since):
		 * outside a held directory, ask the master. In a held one
		 * the name and the inode are certain (nobody else changes
		 * the directory; while it was not held the master kept this
		 * listing current), and the attributes are the newest this
		 * mount has (the kernel's own are in the inode table, and
		 * mount_fresher_attr() took them if newer): handed out as
		 * expired, so that the kernel asks for fresh ones when it
		 * needs them (stat, a permission check), but not to remove
		 * the name. So a delegation recalled in the middle of an
		 * rm -rf and held again costs no lookup per name left.
		 */
		if (left <= 0 && !deleg_held(m->deleg, parent))
			return false;
		/* attr_at 0: of unknown age, older than any write here. */
		mount_fill_entry(m, parent, &de.attr, de.attr_at, &e);
		e.attr_timeout = left;
		if (S_ISDIR(de.attr.mode))
			deleg_note_dir(m->deleg, parent, name, de.attr.ino);
		t = deleg_entry_timeout(m->deleg, parent, name);
		if (itable_ref(&m->inodes, de.attr.ino, de.attr.handle) < 0)
			return false;
		/* Decided last, and again if long: a recall handled since
		 * the first look must not see its name come back for
		 * long after it told the kernel to forget it. */
		if (t > 0)
			t = deleg_entry_timeout(m->deleg, parent, name);
		if (t > 0)
			e.entry_timeout = t;
		if (fuse_reply_entry(req, &e) < 0)
			itable_forget(&m->inodes, de.attr.ino, 1);
		return true;
	case DC_ABSENT:
		if (m->negative_timeout > 0) {
			memset(&e, 0, sizeof(e));
			e.entry_timeout = m->negative_timeout;
			fuse_reply_entry(req, &e);
		} else {
			fuse_reply_err(req, ENOENT);
		}
		return true;
	default:
		return false;
	}
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mount *m = mnt(req);
	Sweepfs__LookupReq q = SWEEPFS__LOOKUP_REQ__INIT;
	struct caller caller;
	Sweepfs__Cred *cred = caller_cred(req, &caller);
	struct lookupctx *c;

	if (lookup_cached(req, to_master(m, parent), name))
		return;
	c = malloc(sizeof(*c));
	if (!c) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	c->req = req;
	c->parent = to_master(m, parent);
	snprintf(c->name, sizeof(c->name), "%s", name);
	q.cred = cred;
	q.parent = c->parent;
	q.name = bytes(name);
	mconn_send(m->mc, SW_MSG_LOOKUP, &q.base, lookup_done, c);
}

static void ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct mount *m = mnt(req);

	itable_forget(&m->inodes, to_master(m, ino), nlookup);
	fuse_reply_none(req);
}

static void ll_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct mount *m = mnt(req);

	for (size_t i = 0; i < count; i++)
		itable_forget(&m->inodes, to_master(m, forgets[i].ino),
			      forgets[i].nlookup);
	fuse_reply_none(req);
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	Sweepfs__GetattrReq q = SWEEPFS__GETATTR_REQ__INIT;
	Sweepfs__Attr a;
	int64_t expires, fetched;

	q.ino = to_master(m, ino);
	/* A held directory's, which the kernel asks for every attr_timeout
	 * to walk through it: answered here, not a round trip each time,
	 * while the master's lease holds. */
	if (mconn_lease_holds(m->mc) && deleg_dir_attr(m->deleg, q.ino, &a)) {
		struct stat st;

		mount_attr_to_stat(m, &a, MOUNT_ATTR_NOW, &st);
		fuse_reply_attr(req, &st, m->attr_timeout);
		return;
	}
	/* Known from a reply that changed it (a create in this directory,
	 * say): no need to ask. */
	if (itable_get_attr(&m->inodes, q.ino, &a, &expires, &fetched)) {
		struct stat st;

		mount_attr_to_stat(m, &a, fetched, &st);
		fuse_reply_attr(req, &st,
				(double)(expires - sw_mono_ns()) / 1e9);
		return;
	}
	mconn_send(m->mc, SW_MSG_GETATTR, &q.base, attr_done, req);
}

/*
 * A chmod that closes a directory to some (mount_searchable()): the kernel
 * walks through the names it caches there without asking, so they all go
 * before the chmod returns. Where the kernel cannot do that, they last at
 * most entry_timeout (names in a held directory are dropped at once, by
 * deleg_note_attr()). The listings' attributes go too: with the names the
 * kernel lets go of inodes, whose newer attributes (this chmod's) only it
 * and the inode table had.
 */
static void closed_done(void *arg, int rc, ProtobufCMessage **reply)
{
	fuse_req_t req = arg;
	struct mount *m = mnt(req);

	if (rc == 0)
		dircache_expire_all_attrs(m->dcache);
	if (rc == 0 && inval_all_names(m->se) < 0 &&
	    !__atomic_exchange_n(&m->no_epoch, true, __ATOMIC_RELAXED))
		sw_info(TAG, "this kernel cannot drop every cached name at "
			     "once: names in a directory closed by chmod last "
			     "up to entry_timeout");
	attr_done(arg, rc, reply);
}

/* Whether a chmod to @mode (the kernel sends the file's type with it)
 * leaves a directory that not everyone may search (names in it may have
 * been cached before). */
static bool closes(const struct mount *m, uint32_t mode)
{
	return m->own_perms && S_ISDIR(mode) && !mount_all_search(mode);
}

static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	Sweepfs__SetattrReq q = SWEEPFS__SETATTR_REQ__INIT;
	unsigned v = 0;
	struct caller caller;
	Sweepfs__Cred *cred = caller_cred(req, &caller);

	q.cred = cred;
	q.ino = to_master(m, ino);
	if (to_set & FUSE_SET_ATTR_MODE) {
		v |= SWEEPFS__SETATTR_VALID__SET_MODE;
		q.has_mode = 1;
		q.mode = attr->st_mode;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		v |= SWEEPFS__SETATTR_VALID__SET_UID;
		q.has_uid = 1;
		q.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		v |= SWEEPFS__SETATTR_VALID__SET_GID;
		q.has_gid = 1;
		q.gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		v |= SWEEPFS__SETATTR_VALID__SET_SIZE;
		q.has_size = 1;
		q.size = (uint64_t)attr->st_size;
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
		v |= SWEEPFS__SETATTR_VALID__SET_ATIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_ATIME) {
		v |= SWEEPFS__SETATTR_VALID__SET_ATIME;
		q.has_atime = 1;
		q.atime = sw_timespec_to_ns(&attr->st_atim);
	}
	/* With the writeback cache the kernel sends "now" for mtime (touch,
	 * a write's mtime) as an explicit time, the same as the ctime it
	 * sends along, and keeps that value. Explicit times are for the
	 * owner, "now" for anyone who may write: send it as "now", with
	 * the kernel's value, which the master then stores. */
	if ((to_set & FUSE_SET_ATTR_MTIME) && (to_set & FUSE_SET_ATTR_CTIME) &&
	    !(to_set & FUSE_SET_ATTR_MTIME_NOW) &&
	    attr->st_mtim.tv_sec == attr->st_ctim.tv_sec &&
	    attr->st_mtim.tv_nsec == attr->st_ctim.tv_nsec) {
		v |= SWEEPFS__SETATTR_VALID__SET_MTIME_NOW;
		q.has_mtime = 1;
		q.mtime = sw_timespec_to_ns(&attr->st_mtim);
	} else if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
		v |= SWEEPFS__SETATTR_VALID__SET_MTIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_MTIME) {
		v |= SWEEPFS__SETATTR_VALID__SET_MTIME;
		q.has_mtime = 1;
		q.mtime = sw_timespec_to_ns(&attr->st_mtim);
	}
	if (to_set & (FUSE_SET_ATTR_KILL_SUID | FUSE_SET_ATTR_KILL_SGID))
		v |= SWEEPFS__SETATTR_VALID__SET_KILL_SUIDGID;
	if (fi)
		v |= SWEEPFS__SETATTR_VALID__SET_VIA_FD;
	q.valid = v;
	/* A new size: our writes' size and mtime go first (so that none
	 * reaches the master after the truncation and undoes it), and the
	 * locations and sizes we knew are off. This worker waits; replies
	 * come on another thread. */
	if (to_set & FUSE_SET_ATTR_SIZE) {
		data_flush_wait(m, q.ino);
		data_forget(m, q.ino);
	}
	mconn_send(m->mc, SW_MSG_SETATTR, &q.base,
		   (to_set & FUSE_SET_ATTR_MODE) && closes(m, q.mode) ?
			   closed_done :
			   attr_done,
		   req);
}

static void readlink_done(void *arg, int rc, ProtobufCMessage **reply)
{
	fuse_req_t req = arg;
	Sweepfs__ReadlinkReply *r;
	char buf[SW_PATH_MAX + 1];

	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	r = (Sweepfs__ReadlinkReply *)*reply;
	if (!r->has_target || r->target.len > SW_PATH_MAX) {
		fuse_reply_err(req, EIO);
		return;
	}
	memcpy(buf, r->target.data, r->target.len);
	buf[r->target.len] = '\0';
	fuse_reply_readlink(req, buf);
}

/* A request about @ino alone, from @req's caller; @done(@req) answers. */
static void send_ino(fuse_req_t req, fuse_ino_t ino, uint16_t type,
		     mconn_cb done)
{
	struct mount *m = mnt(req);
	Sweepfs__InoReq q = SWEEPFS__INO_REQ__INIT;
	struct caller caller;

	q.cred = caller_cred(req, &caller);
	q.ino = to_master(m, ino);
	mconn_send(m->mc, type, &q.base, done, req);
}

static void ll_readlink(fuse_req_t req, fuse_ino_t ino)
{
	send_ino(req, ino, SW_MSG_READLINK, readlink_done);
}

static void release_file(struct mount *m, uint64_t ino, uint32_t flags);

/*
 * Made here under a delegation (deleg_make()) and answered: true; false
 * when it goes to the master. With @fi a create, which opens the file.
 */
static bool made_here(fuse_req_t req, fuse_ino_t parent, const char *name,
		      uint32_t mode, const char *target,
		      const Sweepfs__Cred *cred, struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	struct fuse_entry_param e;
	uint64_t ino;
	int rc = deleg_make(m->deleg, to_master(m, parent), name, mode, target,
			    cred, fi, &e);

	if (rc == 0)
		return false;
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return true;
	}
	ino = to_master(m, e.ino);
	/* Its handle comes with the batch's answer (deleg.c). */
	if (itable_ref(&m->inodes, ino, 0) < 0) {
		/* Made all the same: the caller hears it failed. */
		deleg_release(m->deleg, ino);
		fuse_reply_err(req, ENOMEM);
		return true;
	}
	/* Recalled since it was made: the usual timeout (lookup_cached()). */
	if (deleg_entry_timeout(m->deleg, to_master(m, parent), name) <= 0)
		e.entry_timeout = SW_MIN(
			e.entry_timeout,
			mount_entry_timeout(m, to_master(m, parent), false));
	if (!fi) {
		if (fuse_reply_entry(req, &e) < 0)
			itable_forget(&m->inodes, ino, 1);
		return true;
	}
	itable_open(&m->inodes, ino, (uint32_t)fi->flags, cred);
	fi->fh = 0;
	if (fuse_reply_create(req, &e, fi) < 0) {
		itable_forget(&m->inodes, ino, 1);
		release_file(m, ino, (uint32_t)fi->flags);
	}
	return true;
}

static void make_node(fuse_req_t req, uint16_t type, fuse_ino_t parent,
		      const char *name, mode_t mode, dev_t rdev)
{
	struct mount *m = mnt(req);
	Sweepfs__MknodReq q = SWEEPFS__MKNOD_REQ__INIT;
	struct namectx *c;
	struct caller caller;
	Sweepfs__Cred *cred = caller_cred(req, &caller);

	if (type == SW_MSG_MKDIR)
		mode = S_IFDIR | (mode & 07777);
	else if ((mode & S_IFMT) == 0)
		mode |= S_IFREG;
	if (made_here(req, parent, name, mode, NULL, cred, NULL))
		return;
	c = name_req(req, parent, name, &q.parent, &q.name);
	if (!c)
		return;
	q.cred = cred;
	q.mode = mode;
	if (rdev) {
		q.has_rdev = 1;
		q.rdev = rdev;
	}
	mconn_send(m->mc, type, &q.base, added_done, c);
}

static void ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	make_node(req, SW_MSG_MKNOD, parent, name, mode, rdev);
}

static void ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	make_node(req, SW_MSG_MKDIR, parent, name, mode, 0);
}

static void remove_name(fuse_req_t req, uint16_t type, fuse_ino_t parent,
			const char *name)
{
	struct mount *m = mnt(req);
	Sweepfs__NameReq q = SWEEPFS__NAME_REQ__INIT;
	struct namectx *c;
	struct caller caller;
	Sweepfs__Cred *cred = caller_cred(req, &caller);
	int rc;

	rc = deleg_remove(m->deleg, to_master(m, parent), name,
			  type == SW_MSG_RMDIR, cred);
	if (rc != 0) {
		started(req, rc);
		return;
	}
	c = name_req(req, parent, name, &q.parent, &q.name);
	if (!c)
		return;
	q.cred = cred;
	mconn_send(m->mc, type, &q.base, removed_done, c);
}

static void ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, SW_MSG_UNLINK, parent, name);
}

static void ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, SW_MSG_RMDIR, parent, name);
}

static void ll_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	struct mount *m = mnt(req);
	Sweepfs__SymlinkReq q = SWEEPFS__SYMLINK_REQ__INIT;
	struct namectx *c;
	struct caller caller;
	Sweepfs__Cred *cred = caller_cred(req, &caller);

	if (made_here(req, parent, name, S_IFLNK | 0777, link, cred, NULL))
		return;
	c = name_req(req, parent, name, &q.parent, &q.name);
	if (!c)
		return;
	q.cred = cred;
	q.target = bytes(link);
	mconn_send(m->mc, SW_MSG_SYMLINK, &q.base, added_done, c);
}

static void ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct mount *m = mnt(req);
	Sweepfs__RenameReq q = SWEEPFS__RENAME_REQ__INIT;
	struct namectx *c = namectx_new(req, to_master(m, parent), name);
	struct caller caller;
	Sweepfs__Cred *cred = caller_cred(req, &caller);

	if (!c)
		return;
	c->newparent = to_master(m, newparent);
	c->flags = flags;
	snprintf(c->newname, sizeof(c->newname), "%s", newname);
	q.cred = cred;
	q.parent = c->parent;
	q.name = bytes(name);
	q.newparent = c->newparent;
	q.newname = bytes(newname);
	q.has_flags = flags != 0;
	q.flags = flags;
	mconn_send(m->mc, SW_MSG_RENAME, &q.base, renamed_done, c);
}

static void ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct mount *m = mnt(req);
	Sweepfs__LinkReq q = SWEEPFS__LINK_REQ__INIT;
	struct namectx *c = namectx_new(req, to_master(m, newparent), newname);
	struct caller caller;
	Sweepfs__Cred *cred = caller_cred(req, &caller);

	if (!c)
		return;
	q.cred = cred;
	q.ino = to_master(m, ino);
	q.newparent = c->parent;
	q.newname = bytes(newname);
	mconn_send(m->mc, SW_MSG_LINK, &q.base, added_done, c);
}

/* ---- files ---------------------------------------------------------- */

static void send_open(fuse_req_t req, uint64_t ino, uint32_t flags,
		      mconn_cb done, void *arg)
{
	struct mount *m = mnt(req);
	Sweepfs__OpenReq q = SWEEPFS__OPEN_REQ__INIT;
	struct caller caller;
	Sweepfs__Cred *cred = caller_cred(req, &caller);

	q.cred = cred;
	q.ino = ino;
	q.flags = flags;
	mconn_send(m->mc, SW_MSG_OPEN, &q.base, done, arg);
}

/*
 * Tell the master a handle is closed. Nobody waits: the kernel does not
 * need the answer, and requests on the connection stay in order, so a
 * later unlink from this mount sees the file closed. It rides along with
 * the next request (or goes within 2 ms).
 */
static void send_release(struct mount *m, uint64_t ino, uint32_t flags)
{
	Sweepfs__InoReq q = SWEEPFS__INO_REQ__INIT;
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;

	q.cred = &cred;
	q.ino = ino;
	/* Packed first: the table may forget the inode, and its handle. */
	mconn_send_lazy(m->mc, SW_MSG_RELEASE, &q.base);
	itable_close(&m->inodes, ino, flags);
}

/*
 * A handle the kernel had is closed. Not on the receiver thread:
 * deleg_release() may wait for a batch on its way out.
 */
static void release_file(struct mount *m, uint64_t ino, uint32_t flags)
{
	/* Made here and its creation still queued: it goes as not open. */
	if (deleg_release(m->deleg, ino))
		itable_close(&m->inodes, ino, flags);
	else
		send_release(m, ino, flags);
}

/*
 * The kernel's writeback cache reads the pages a write covers in part,
 * through the open that writes: an open for writing only of a file the
 * master says it may not read (@has_readable, @readable: its reply's)
 * writes through instead. Other opens of the file on this mount then see
 * its writes as those of another client (README, -o writeback_cache).
 */
static void write_through_unreadable(struct mount *m, struct fuse_file_info *fi,
				     bool has_readable, bool readable)
{
	if (m->writeback && (fi->flags & O_ACCMODE) == O_WRONLY &&
	    has_readable && !readable)
		fi->direct_io = 1;
}

static void open_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct mount_opctx *c = arg;
	struct mount *m = mnt(c->req);

	if (rc < 0) {
		fuse_reply_err(c->req, -rc);
	} else {
		const Sweepfs__OpenReply *r = (const void *)*reply;

		/* O_TRUNC changed them; the kernel asks again anyway. */
		if (r->attr)
			mount_cache_attrs(m, r->attr, NULL, 0);
		write_through_unreadable(m, &c->fi, r->has_readable,
					 r->readable);
		struct caller caller;

		itable_open(&m->inodes, c->ino, (uint32_t)c->fi.flags,
			    caller_cred(c->req, &caller));
		c->fi.fh = 0;
		if (fuse_reply_open(c->req, &c->fi) < 0)
			send_release(m, c->ino, (uint32_t)c->fi.flags);
	}
	free(c);
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	struct mount_opctx *c = opctx_new(req, to_master(m, ino), fi);

	if (!c)
		return;
	/* The master truncates at open (atomic O_TRUNC): our writes' size
	 * must get there first, and what we knew of the chunks is off. */
	if (fi->flags & O_TRUNC) {
		data_flush_wait(m, c->ino);
		data_forget(m, c->ino);
	}
	send_open(req, c->ino, (uint32_t)fi->flags, open_done, c);
}

/* create: the new name and the open file handle it comes with. */
struct createctx {
	struct namectx n;
	struct fuse_file_info fi;
};

static void create_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct createctx *c = arg;
	fuse_req_t req = c->n.req;
	struct mount *m = mnt(req);
	Sweepfs__EntryReply *r = (Sweepfs__EntryReply *)*reply;
	struct fuse_entry_param e;
	struct caller caller;
	Sweepfs__Attr *a;

	if (rc < 0) {
		fuse_reply_err(req, -rc);
		goto out;
	}
	a = r->attr;
	if (!a) {
		fuse_reply_err(req, EIO);
		goto out;
	}
	mount_fill_entry(m, c->n.parent, a, MOUNT_ATTR_NOW, &e);
	/* Without O_EXCL, a file made by someone else may be opened. */
	write_through_unreadable(m, &c->fi, r->has_readable, r->readable);
	itable_ref(&m->inodes, a->ino, a->handle);
	itable_open(&m->inodes, a->ino, (uint32_t)c->fi.flags,
		    caller_cred(req, &caller));
	c->fi.fh = 0;
	/* The parent's new attributes and listing before the reply (see
	 * entry_done, added_done); the file's own attributes also, now that
	 * the table knows the inode. */
	mount_cache_attrs(m, a, r->changed, r->n_changed);
	/* With the attributes: a remover needs no lookup for it later. The
	 * writes that usually follow make them old; the mount remembers
	 * which files it wrote lately, so that they are not handed out
	 * then (mount_fresher_attr()). */
	if (r->has_cookie)
		dircache_add(m->dcache, c->n.parent, c->n.name, r->cookie,
			     a->ino, DT_REG, a);
	if (fuse_reply_create(req, &e, &c->fi) < 0) {
		itable_forget(&m->inodes, a->ino, 1);
		send_release(m, a->ino, (uint32_t)c->fi.flags);
	}
out:
	free(c);
}

static void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	Sweepfs__CreateReq q = SWEEPFS__CREATE_REQ__INIT;
	struct createctx *c;
	struct caller caller;
	Sweepfs__Cred *cred = caller_cred(req, &caller);

	if (made_here(req, parent, name, S_IFREG | (mode & 07777), NULL, cred,
		      fi))
		return;
	c = malloc(sizeof(*c));
	if (!c) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	c->n.req = req;
	c->n.parent = to_master(m, parent);
	snprintf(c->n.name, sizeof(c->n.name), "%s", name);
	c->fi = *fi;
	q.cred = cred;
	q.parent = c->n.parent;
	q.name = bytes(name);
	q.mode = mode;
	q.flags = (uint32_t)fi->flags;
	mconn_send(m->mc, SW_MSG_CREATE, &q.base, create_done, c);
}

static void ll_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	bool last = itable_nopen(&m->inodes, to_master(m, ino)) <= 1;

	/* Before the release goes out: no write after it uses a lease the
	 * master has ended. */
	data_release(m, to_master(m, ino), last);
	lock_release(m, to_master(m, ino), fi, last);
	release_file(m, to_master(m, ino), (uint32_t)fi->flags);
	fuse_reply_err(req, 0);
}

/*
 * Every close(2) of a descriptor: the process's fcntl locks on the file
 * go (POSIX), which the kernel leaves to us once the locks are ours.
 */
static void ll_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);

	started(req, lock_flush(m, req, to_master(m, ino), fi));
}

static void ll_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		     struct flock *lock)
{
	struct mount *m = mnt(req);

	started(req, lock_getlk(m, req, to_master(m, ino), fi, lock));
}

static void ll_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		     struct flock *lock, int sleep)
{
	struct mount *m = mnt(req);

	started(req,
		lock_setlk(m, req, to_master(m, ino), fi, lock, sleep != 0));
}

static void ll_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		     int op)
{
	struct mount *m = mnt(req);

	started(req, lock_flock(m, req, to_master(m, ino), fi, op));
}

static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	int rc = data_read(m, req, to_master(m, ino), size, off);

	if (rc != 0)
		reply_data(req, SW_MIN(rc, 0), NULL, 0);
}

static void ll_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	int rc = data_write(m, req, to_master(m, ino), buf, size, off);

	if (rc != 0)
		reply_written(req, SW_MIN(rc, 0), 0);
}

static void ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);

	/* The kernel has written its dirty pages; make them durable on the
	 * chunkservers. Metadata is journaled before the master replies. */
	started(req, data_fsync(m, req, to_master(m, ino)));
}

/* ---- directories ---------------------------------------------------- */

static void ll_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);

	started(req, readdir_open(m, req, to_master(m, ino), fi));
}

static void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	started(req, readdir_read(mnt(req), req, size, off, fi, false));
}

static void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	started(req, readdir_read(mnt(req), req, size, off, fi, true));
}

static void ll_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	readdir_release(mnt(req), fi);
	fuse_reply_err(req, 0);
}

/* Durable once what this mount acknowledged is (deleg.h). */
static void ll_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	fuse_reply_err(req, -deleg_sync(mnt(req)->deleg));
}

/* ---- the rest ------------------------------------------------------- */

static void statfs_done(void *arg, int rc, ProtobufCMessage **reply)
{
	fuse_req_t req = arg;
	Sweepfs__StatfsReply *r;
	struct statvfs sv = { 0 };

	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	r = (Sweepfs__StatfsReply *)*reply;
	sv.f_bsize = sv.f_frsize = 65536;
	sv.f_blocks = r->total_bytes / sv.f_frsize;
	sv.f_bfree = sv.f_bavail = r->avail_bytes / sv.f_frsize;
	sv.f_files = r->files + r->files_free;
	sv.f_ffree = sv.f_favail = r->files_free;
	sv.f_namemax = SW_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

static void ll_statfs(fuse_req_t req, fuse_ino_t ino)
{
	send_ino(req, ino, SW_MSG_STATFS, statfs_done);
}

/*
 * The mount root's virtual xattr MOUNT_XATTR_CLUSTER: the identity of the
 * cluster this mount talks to (HelloReply.cluster_id), as 32 hex digits,
 * so that `sweepfs` can tell whether a path and a master address name the
 * same cluster (tools/tool.c). As CephFS's ceph.cluster_fsid, it is not
 * listed, and it cannot be set or removed.
 */
#define MOUNT_XATTR_CLUSTER "sweepfs.cluster_id"

static bool is_cluster_xattr(fuse_ino_t ino, const char *name)
{
	return ino == FUSE_ROOT_ID && name &&
	       !strcmp(name, MOUNT_XATTR_CLUSTER);
}

static void reply_cluster_xattr(fuse_req_t req, size_t size)
{
	uint8_t id[SW_CLUSTER_ID_LEN];
	char hex[2 * SW_CLUSTER_ID_LEN + 1];

	if (!mconn_cluster_id(mnt(req)->mc, id)) {
		fuse_reply_err(req, ENODATA); /* an older master */
		return;
	}
	for (size_t i = 0; i < sizeof(id); i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	if (size == 0)
		fuse_reply_xattr(req, sizeof(hex) - 1);
	else if (size < sizeof(hex) - 1)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, hex, sizeof(hex) - 1);
}

/* Whether @name of @ino may be set or removed; if not, @req is answered
 * (the cluster's identity is read-only). */
static bool xattr_changeable(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	if (!is_cluster_xattr(ino, name))
		return true;
	fuse_reply_err(req, EPERM);
	return false;
}

static void ll_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct mount *m = mnt(req);
	Sweepfs__SetxattrReq q = SWEEPFS__SETXATTR_REQ__INIT;
	struct caller caller;

	if (!xattr_changeable(req, ino, name))
		return;
	q.cred = caller_cred(req, &caller);
	q.ino = to_master(m, ino);
	itable_xattr_changed(&m->inodes, q.ino);
	q.name = bytes(name);
	q.value.data = (uint8_t *)value;
	q.value.len = size;
	q.has_flags = 1;
	q.flags = (uint32_t)flags;
	mconn_send(m->mc, SW_MSG_SETXATTR, &q.base, status_done, req);
}

static void xattr_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct mount_opctx *c = arg;
	Sweepfs__XattrReply *r;

	if (rc == -ENODATA && *reply && ((Sweepfs__XattrReply *)*reply)->none)
		itable_set_noxattr(
			&mnt(c->req)->inodes, c->ino,
			sw_mono_ns() +
				(int64_t)(mnt(c->req)->attr_timeout * 1e9));
	if (rc < 0) {
		fuse_reply_err(c->req, -rc);
	} else {
		r = (Sweepfs__XattrReply *)*reply;
		if (c->size == 0)
			fuse_reply_xattr(c->req, r->size);
		else
			fuse_reply_buf(c->req, (const char *)r->value.data,
				       r->value.len);
	}
	free(c);
}

static void get_or_list_xattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			      size_t size)
{
	struct mount *m = mnt(req);
	Sweepfs__GetxattrReq q = SWEEPFS__GETXATTR_REQ__INIT;
	struct mount_opctx *c;
	struct caller caller;
	Sweepfs__Cred *cred;

	if (is_cluster_xattr(ino, name)) {
		reply_cluster_xattr(req, size);
		return;
	}
	cred = caller_cred(req, &caller);
	/*
	 * The kernel asks for security.capability before every write (to
	 * drop it): a file known, as of fresh attributes, to have no xattrs
	 * at all needs no round trip for that. Other names always go to the
	 * master, so that one client sees another's xattrs at once.
	 */
	if (name && !strcmp(name, "security.capability") &&
	    itable_noxattr(&m->inodes, to_master(m, ino))) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	c = opctx_new(req, to_master(m, ino), NULL);
	if (!c)
		return;
	c->size = size;
	q.cred = cred;
	q.ino = c->ino;
	if (name) {
		q.has_name = 1;
		q.name = bytes(name);
	}
	q.size = (uint32_t)SW_MIN(size, (size_t)UINT32_MAX);
	mconn_send(m->mc, name ? SW_MSG_GETXATTR : SW_MSG_LISTXATTR, &q.base,
		   xattr_done, c);
}

static void ll_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	get_or_list_xattr(req, ino, name, size);
}

static void ll_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	get_or_list_xattr(req, ino, NULL, size);
}

static void ll_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct mount *m = mnt(req);
	Sweepfs__RemovexattrReq q = SWEEPFS__REMOVEXATTR_REQ__INIT;
	struct caller caller;

	if (!xattr_changeable(req, ino, name))
		return;
	q.cred = caller_cred(req, &caller);
	q.ino = to_master(m, ino);
	q.name = bytes(name);
	mconn_send(m->mc, SW_MSG_REMOVEXATTR, &q.base, status_done, req);
}

static void ll_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct mount *m = mnt(req);
	Sweepfs__AccessReq q = SWEEPFS__ACCESS_REQ__INIT;
	struct caller caller;
	Sweepfs__Cred *cred = caller_cred(req, &caller);

	q.cred = cred;
	q.ino = to_master(m, ino);
	q.mask = (uint32_t)mask;
	mconn_send(m->mc, SW_MSG_ACCESS, &q.base, status_done, req);
}

const struct fuse_lowlevel_ops sw_mount_ops = {
	.init = ll_init,
	.lookup = ll_lookup,
	.forget = ll_forget,
	.forget_multi = ll_forget_multi,
	.getattr = ll_getattr,
	.setattr = ll_setattr,
	.readlink = ll_readlink,
	.mknod = ll_mknod,
	.mkdir = ll_mkdir,
	.unlink = ll_unlink,
	.rmdir = ll_rmdir,
	.symlink = ll_symlink,
	.rename = ll_rename,
	.link = ll_link,
	.open = ll_open,
	.create = ll_create,
	.read = ll_read,
	.write = ll_write,
	/* Flush only for locks: the mount keeps no data to push at close,
	 * and a file never fcntl-locked here is answered at once. */
	.flush = ll_flush,
	.release = ll_release,
	.fsync = ll_fsync,
	.opendir = ll_opendir,
	.readdir = ll_readdir,
	.readdirplus = ll_readdirplus,
	.releasedir = ll_releasedir,
	.fsyncdir = ll_fsyncdir,
	.statfs = ll_statfs,
	.setxattr = ll_setxattr,
	.getxattr = ll_getxattr,
	.listxattr = ll_listxattr,
	.removexattr = ll_removexattr,
	.access = ll_access,
	.getlk = ll_getlk,
	.setlk = ll_setlk,
	.flock = ll_flock,
};
