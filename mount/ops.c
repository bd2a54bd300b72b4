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
 * File contents come with the data path: until then a regular file has a
 * size (truncate works), reads return zeros, and write fails with
 * EOPNOTSUPP.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "entries.h"
#include "frame.h"
#include "log.h"
#include "mount_i.h"
#include "util.h"

#define TAG "ops"

/* Master readdir page: entries per request and bytes. */
#define PAGE_ENTRIES 1024u
#define PAGE_BYTES (128u << 10)

static struct mount *mnt(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static uint64_t to_master(const struct mount *m, fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? m->root_ino : ino;
}

static fuse_ino_t to_fuse(const struct mount *m, uint64_t ino)
{
	return ino == m->root_ino ? FUSE_ROOT_ID : ino;
}

static ProtobufCBinaryData bytes(const char *s)
{
	ProtobufCBinaryData b = { strlen(s), (uint8_t *)s };

	return b;
}

static void attr_to_stat(const struct mount *m, const Sweepfs__Attr *a,
			 struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = to_fuse(m, a->ino);
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_rdev = a->rdev;
	st->st_size = (off_t)a->size;
	st->st_blksize = 65536;
	st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
	st->st_atim = sw_ns_to_timespec(a->atime);
	st->st_mtim = sw_ns_to_timespec(a->mtime);
	st->st_ctim = sw_ns_to_timespec(a->ctime);
}

static void fill_entry(const struct mount *m, const Sweepfs__Attr *a,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = to_fuse(m, a->ino);
	attr_to_stat(m, a, &e->attr);
	e->attr_timeout = m->attr_timeout;
	e->entry_timeout = m->entry_timeout;
}

/* Remember the attributes a reply carried (see inode.h). */
static void cache_attrs(struct mount *m, const Sweepfs__Attr *a,
			Sweepfs__Attr *const *changed, size_t n)
{
	int64_t expires = sw_mono_ns() + (int64_t)(m->attr_timeout * 1e9);

	if (a)
		itable_set_attr(&m->inodes, a, expires);
	for (size_t i = 0; i < n; i++)
		itable_set_attr(&m->inodes, changed[i], expires);
}

/* Reply with an entry and count the lookup the kernel now holds. */
static void reply_entry(fuse_req_t req, const Sweepfs__Attr *a)
{
	struct mount *m = mnt(req);
	struct fuse_entry_param e;

	if (!a) {
		fuse_reply_err(req, EIO);
		return;
	}
	fill_entry(m, a, &e);
	if (itable_ref(&m->inodes, a->ino) < 0) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (fuse_reply_entry(req, &e) < 0)
		itable_forget(&m->inodes, a->ino, 1);
}

/* Completions for replies that are an entry, attributes, or a status. */
static void entry_done(void *arg, int rc, ProtobufCMessage **reply)
{
	fuse_req_t req = arg;
	struct mount *m = mnt(req); /* req is gone once replied to */
	Sweepfs__EntryReply *r = (Sweepfs__EntryReply *)*reply;

	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	/* The entry first: the table only caches what the kernel knows. */
	reply_entry(req, r->attr);
	cache_attrs(m, r->attr, r->changed, r->n_changed);
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
	cache_attrs(m, a, NULL, 0);
	attr_to_stat(m, a, &st);
	fuse_reply_attr(req, &st, m->attr_timeout);
}

static void status_done(void *arg, int rc, ProtobufCMessage **reply)
{
	fuse_req_t req = arg;

	if (rc == 0) {
		Sweepfs__StatusReply *r = (Sweepfs__StatusReply *)*reply;

		cache_attrs(mnt(req), NULL, r->changed, r->n_changed);
	}
	fuse_reply_err(req, -rc);
}

/* A request's context when the completion needs more than the req. */
struct opctx {
	fuse_req_t req;
	uint64_t ino;
	size_t size;
	off_t off;
	struct fuse_file_info fi; /* libfuse's is gone once the op returns */
};

static struct opctx *opctx_new(fuse_req_t req, uint64_t ino,
			       const struct fuse_file_info *fi)
{
	struct opctx *c = calloc(1, sizeof(*c));

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

#define CRED(req, cred)                                      \
	Sweepfs__Cred cred;                                  \
	uint32_t cred##_groups[CRED_GROUPS_MAX];             \
	cred_fill(req, &cred, cred##_groups, CRED_GROUPS_MAX)

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
	/* The master applies the setuid rules; the kernel tells us what it
	 * wants cleared after writes and chown. */
	conn->want &= ~(unsigned)FUSE_CAP_HANDLE_KILLPRIV;
}

static void lookup_done(void *arg, int rc, ProtobufCMessage **reply)
{
	fuse_req_t req = arg;
	struct mount *m = mnt(req);

	if (rc == -ENOENT && m->negative_timeout > 0) {
		struct fuse_entry_param e = {
			.ino = 0, .entry_timeout = m->negative_timeout
		};

		fuse_reply_entry(req, &e);
		return;
	}
	entry_done(arg, rc, reply);
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mount *m = mnt(req);
	Sweepfs__LookupReq q = SWEEPFS__LOOKUP_REQ__INIT;
	CRED(req, cred);

	q.cred = &cred;
	q.parent = to_master(m, parent);
	q.name = bytes(name);
	mconn_send(m->mc, SW_MSG_LOOKUP, &q.base, lookup_done, req);
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
	int64_t expires;

	q.ino = to_master(m, ino);
	/* Known from a reply that changed it (a create in this directory,
	 * say): no need to ask. */
	if (itable_get_attr(&m->inodes, q.ino, &a, &expires)) {
		struct stat st;

		attr_to_stat(m, &a, &st);
		fuse_reply_attr(req, &st,
				(double)(expires - sw_mono_ns()) / 1e9);
		return;
	}
	mconn_send(m->mc, SW_MSG_GETATTR, &q.base, attr_done, req);
}

static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	Sweepfs__SetattrReq q = SWEEPFS__SETATTR_REQ__INIT;
	unsigned v = 0;
	CRED(req, cred);

	q.cred = &cred;
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
	if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
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
	mconn_send(m->mc, SW_MSG_SETATTR, &q.base, attr_done, req);
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

static void ll_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct mount *m = mnt(req);
	Sweepfs__InoReq q = SWEEPFS__INO_REQ__INIT;
	CRED(req, cred);

	q.cred = &cred;
	q.ino = to_master(m, ino);
	mconn_send(m->mc, SW_MSG_READLINK, &q.base, readlink_done, req);
}

static void make_node(fuse_req_t req, uint16_t type, fuse_ino_t parent,
		      const char *name, mode_t mode, dev_t rdev)
{
	struct mount *m = mnt(req);
	Sweepfs__MknodReq q = SWEEPFS__MKNOD_REQ__INIT;
	CRED(req, cred);

	q.cred = &cred;
	q.parent = to_master(m, parent);
	q.name = bytes(name);
	q.mode = mode;
	if (rdev) {
		q.has_rdev = 1;
		q.rdev = rdev;
	}
	mconn_send(m->mc, type, &q.base, entry_done, req);
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
	CRED(req, cred);

	q.cred = &cred;
	q.parent = to_master(m, parent);
	q.name = bytes(name);
	mconn_send(m->mc, type, &q.base, status_done, req);
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
	CRED(req, cred);

	q.cred = &cred;
	q.parent = to_master(m, parent);
	q.name = bytes(name);
	q.target = bytes(link);
	mconn_send(m->mc, SW_MSG_SYMLINK, &q.base, entry_done, req);
}

static void ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct mount *m = mnt(req);
	Sweepfs__RenameReq q = SWEEPFS__RENAME_REQ__INIT;
	CRED(req, cred);

	q.cred = &cred;
	q.parent = to_master(m, parent);
	q.name = bytes(name);
	q.newparent = to_master(m, newparent);
	q.newname = bytes(newname);
	q.has_flags = flags != 0;
	q.flags = flags;
	mconn_send(m->mc, SW_MSG_RENAME, &q.base, status_done, req);
}

static void ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct mount *m = mnt(req);
	Sweepfs__LinkReq q = SWEEPFS__LINK_REQ__INIT;
	CRED(req, cred);

	q.cred = &cred;
	q.ino = to_master(m, ino);
	q.newparent = to_master(m, newparent);
	q.newname = bytes(newname);
	mconn_send(m->mc, SW_MSG_LINK, &q.base, entry_done, req);
}

/* ---- files ---------------------------------------------------------- */

static void send_open(fuse_req_t req, uint64_t ino, uint32_t flags,
		      mconn_cb done, void *arg)
{
	struct mount *m = mnt(req);
	Sweepfs__OpenReq q = SWEEPFS__OPEN_REQ__INIT;
	CRED(req, cred);

	q.cred = &cred;
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
static void send_release(struct mount *m, uint64_t ino)
{
	Sweepfs__InoReq q = SWEEPFS__INO_REQ__INIT;
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;

	q.cred = &cred;
	q.ino = ino;
	itable_close(&m->inodes, ino);
	mconn_send_lazy(m->mc, SW_MSG_RELEASE, &q.base);
}

static void open_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct opctx *c = arg;
	struct mount *m = mnt(c->req);

	if (rc < 0) {
		fuse_reply_err(c->req, -rc);
	} else {
		itable_open(&m->inodes, c->ino);
		c->fi.fh = 0;
		if (fuse_reply_open(c->req, &c->fi) < 0)
			send_release(m, c->ino);
	}
	free(c);
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	struct opctx *c = opctx_new(req, to_master(m, ino), fi);

	if (c)
		send_open(req, c->ino, (uint32_t)fi->flags, open_done, c);
}

static void create_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct opctx *c = arg;
	struct mount *m = mnt(c->req);
	struct fuse_entry_param e;
	Sweepfs__Attr *a;

	if (rc < 0) {
		fuse_reply_err(c->req, -rc);
		goto out;
	}
	a = ((Sweepfs__EntryReply *)*reply)->attr;
	if (!a) {
		fuse_reply_err(c->req, EIO);
		goto out;
	}
	fill_entry(m, a, &e);
	itable_ref(&m->inodes, a->ino);
	itable_open(&m->inodes, a->ino);
	c->fi.fh = 0;
	if (fuse_reply_create(c->req, &e, &c->fi) < 0) {
		itable_forget(&m->inodes, a->ino, 1);
		send_release(m, a->ino);
	} else {
		Sweepfs__EntryReply *r = (Sweepfs__EntryReply *)*reply;

		cache_attrs(m, a, r->changed, r->n_changed);
	}
out:
	free(c);
}

static void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	Sweepfs__CreateReq q = SWEEPFS__CREATE_REQ__INIT;
	struct opctx *c = opctx_new(req, 0, fi);
	CRED(req, cred);

	if (!c)
		return;
	q.cred = &cred;
	q.parent = to_master(m, parent);
	q.name = bytes(name);
	q.mode = mode;
	q.flags = (uint32_t)fi->flags;
	mconn_send(m->mc, SW_MSG_CREATE, &q.base, create_done, c);
}

static void ll_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);

	send_release(m, to_master(m, ino));
	fuse_reply_err(req, 0);
}

/* Until the data path exists a file reads as zeros up to its size. */
static void read_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct opctx *c = arg;
	Sweepfs__Attr *a;
	uint64_t fsize;
	size_t n = 0;
	char *zeros;

	if (rc < 0) {
		fuse_reply_err(c->req, -rc);
		goto out;
	}
	a = ((Sweepfs__AttrReply *)*reply)->attr;
	fsize = a ? a->size : 0;
	if ((uint64_t)c->off < fsize)
		n = (size_t)SW_MIN((uint64_t)c->size, fsize - (uint64_t)c->off);
	zeros = calloc(1, n ? n : 1);
	if (!zeros) {
		fuse_reply_err(c->req, ENOMEM);
		goto out;
	}
	fuse_reply_buf(c->req, zeros, n);
	free(zeros);
out:
	free(c);
}

static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	Sweepfs__GetattrReq q = SWEEPFS__GETATTR_REQ__INIT;
	struct opctx *c = opctx_new(req, to_master(m, ino), NULL);

	if (!c)
		return;
	c->size = size;
	c->off = off;
	q.ino = c->ino;
	mconn_send(m->mc, SW_MSG_GETATTR, &q.base, read_done, c);
}

static void ll_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	fuse_reply_err(req, EOPNOTSUPP);
}

static void ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	/* Metadata is journaled before the master replies: nothing to do. */
	fuse_reply_err(req, 0);
}

/* ---- directories ---------------------------------------------------- */

/*
 * An open directory: the last page fetched from the master, decoded.
 * Offsets the kernel passes are entry cookies; 1 and 2 are "." and "..".
 * The kernel serialises reads of one open directory, but a handle may be
 * shared by threads of a process: a reader owns the handle (busy) from
 * its start until its reply, which may be sent from the receiver thread
 * after a fetch; others wait for it.
 */
struct dent {
	uint64_t cookie;
	uint64_t ino;
	uint8_t type;
	char name[SW_NAME_MAX + 1];
	Sweepfs__Attr *attr; /* readdirplus: points into page_msg */
};

struct dirhandle {
	pthread_mutex_t mu;
	pthread_cond_t idle;
	bool busy;	      /* a readdir owns the page */
	uint64_t ino;
	uint64_t after;	      /* the page holds entries after this cookie */
	struct dent *ents;
	uint32_t n;
	bool eof;	      /* nothing after the page */
	bool plus;	      /* the page has attributes */
	ProtobufCMessage *page_msg;
};

static void dh_clear(struct dirhandle *dh)
{
	free(dh->ents);
	dh->ents = NULL;
	dh->n = 0;
	if (dh->page_msg)
		protobuf_c_message_free_unpacked(dh->page_msg, NULL);
	dh->page_msg = NULL;
}

/* Install a page from reply @r (taken over) fetched after @after. */
static int dh_install(struct dirhandle *dh, ProtobufCMessage *msg,
		      uint64_t after, bool plus)
{
	Sweepfs__ReaddirReply *r = (Sweepfs__ReaddirReply *)msg;
	size_t off = 0;

	dh_clear(dh);
	dh->ents = calloc(r->count ? r->count : 1, sizeof(*dh->ents));
	if (!dh->ents) {
		protobuf_c_message_free_unpacked(msg, NULL);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < r->count; i++) {
		struct sw_dirent d;
		int used = sw_dirent_get(r->entries.data + off,
					 r->entries.len - off, &d);

		if (used < 0 || (plus && i >= r->n_attrs)) {
			protobuf_c_message_free_unpacked(msg, NULL);
			dh_clear(dh);
			return -EIO;
		}
		off += (size_t)used;
		dh->ents[i].cookie = d.cookie;
		dh->ents[i].ino = d.ino;
		dh->ents[i].type = d.type;
		memcpy(dh->ents[i].name, d.name, d.namelen);
		dh->ents[i].name[d.namelen] = '\0';
		dh->ents[i].attr = plus ? r->attrs[i] : NULL;
	}
	dh->n = r->count;
	dh->eof = r->eof;
	dh->after = after;
	dh->plus = plus;
	dh->page_msg = msg;
	return 0;
}

/* Index just past the entry with @cookie in the page, or -1. */
static int64_t page_after(const struct dirhandle *dh, uint64_t cookie)
{
	if (!dh->page_msg)
		return -1;
	if (dh->after == cookie)
		return 0;
	for (uint32_t i = 0; i < dh->n; i++)
		if (dh->ents[i].cookie == cookie)
			return i + 1;
	return -1;
}

/* One readdir request in progress: the reply buffer being filled. */
struct rdctx {
	fuse_req_t req;
	struct dirhandle *dh;
	bool plus;
	size_t size;	  /* the kernel's buffer */
	size_t pos;	  /* bytes filled */
	uint64_t cookie;  /* last entry placed */
	char *buf;
	uint64_t *refs;	  /* readdirplus: lookups handed out */
	size_t nrefs, cap;
};

/* Add one entry to the reply buffer; returns false when it did not fit. */
static bool add_entry(struct rdctx *c, const char *name, uint64_t ino,
		      uint8_t type, const Sweepfs__Attr *attr,
		      uint64_t next_off)
{
	struct mount *m = mnt(c->req);
	size_t room = c->size - c->pos, need;

	if (c->plus) {
		struct fuse_entry_param e;

		if (attr) {
			fill_entry(m, attr, &e);
		} else {
			memset(&e, 0, sizeof(e));
			e.attr.st_ino = to_fuse(m, ino);
			e.attr.st_mode = (mode_t)type << 12;
		}
		if (attr && c->nrefs == c->cap) {
			size_t cap = c->cap ? c->cap * 2 : 64;
			uint64_t *v = realloc(c->refs, cap * sizeof(*v));

			if (!v)
				return false;
			c->refs = v;
			c->cap = cap;
		}
		need = fuse_add_direntry_plus(c->req, c->buf + c->pos, room,
					      name, &e, (off_t)next_off);
		if (need > room)
			return false;
		/* The kernel takes a lookup for every entry but . and .. */
		if (attr) {
			itable_ref(&m->inodes, attr->ino);
			c->refs[c->nrefs++] = attr->ino;
		}
	} else {
		struct stat st = { .st_ino = to_fuse(m, ino),
				   .st_mode = (mode_t)type << 12 };

		need = fuse_add_direntry(c->req, c->buf + c->pos, room, name,
					 &st, (off_t)next_off);
		if (need > room)
			return false;
	}
	c->pos += need;
	return true;
}

static void rd_finish(struct rdctx *c, int rc)
{
	struct mount *m = mnt(c->req);

	pthread_mutex_lock(&c->dh->mu);
	c->dh->busy = false;
	pthread_cond_signal(&c->dh->idle);
	pthread_mutex_unlock(&c->dh->mu);
	if (rc < 0 && c->pos == 0)
		fuse_reply_err(c->req, -rc);
	else if (fuse_reply_buf(c->req, c->buf, c->pos) < 0)
		for (size_t k = 0; k < c->nrefs; k++)
			itable_forget(&m->inodes, c->refs[k], 1);
	free(c->refs);
	free(c->buf);
	free(c);
}

static void rd_fetch(struct rdctx *c);

/*
 * Fill from the page, starting at entry @i; fetch the next page when the
 * page runs out before the buffer does. The caller owns the handle
 * (busy); this either finishes the request or sends a fetch that
 * continues it.
 */
static void rd_fill(struct rdctx *c, int64_t i)
{
	struct dirhandle *dh = c->dh;

	for (; i < dh->n; i++) {
		struct dent *d = &dh->ents[i];

		if (!add_entry(c, d->name, d->ino, d->type, d->attr, d->cookie)) {
			rd_finish(c, 0);
			return;
		}
		c->cookie = d->cookie;
	}
	if (dh->eof || dh->n == 0) {
		rd_finish(c, 0);
		return;
	}
	rd_fetch(c);
}

static void rd_fetched(void *arg, int rc, ProtobufCMessage **reply)
{
	struct rdctx *c = arg;

	if (rc == 0) {
		rc = dh_install(c->dh, *reply, c->cookie, c->plus);
		*reply = NULL; /* the page owns it (or it was freed) */
	}
	if (rc < 0)
		rd_finish(c, rc);
	else
		rd_fill(c, 0);
}

static void rd_fetch(struct rdctx *c)
{
	struct mount *m = mnt(c->req);
	Sweepfs__ReaddirReq q = SWEEPFS__READDIR_REQ__INIT;
	CRED(c->req, cred);

	q.cred = &cred;
	q.ino = c->dh->ino;
	q.cookie = c->cookie;
	q.max_entries = PAGE_ENTRIES;
	q.max_bytes = PAGE_BYTES;
	q.has_plus = c->plus;
	q.plus = c->plus;
	mconn_send(m->mc, SW_MSG_READDIR, &q.base, rd_fetched, c);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi, bool plus)
{
	struct dirhandle *dh = (struct dirhandle *)(uintptr_t)fi->fh;
	struct rdctx *c = calloc(1, sizeof(*c));
	int64_t i;

	if (c)
		c->buf = malloc(size);
	if (!c || !c->buf) {
		free(c);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	c->req = req;
	c->dh = dh;
	c->plus = plus;
	c->size = size;
	/* Owned until the request finishes, across a fetch if need be. */
	pthread_mutex_lock(&dh->mu);
	while (dh->busy)
		pthread_cond_wait(&dh->idle, &dh->mu);
	dh->busy = true;
	pthread_mutex_unlock(&dh->mu);
	if (off == 0 && !add_entry(c, ".", dh->ino, DT_DIR, NULL, 1)) {
		rd_finish(c, 0);
		return;
	}
	if (off <= 1 && !add_entry(c, "..", dh->ino, DT_DIR, NULL, 2)) {
		rd_finish(c, 0);
		return;
	}
	c->cookie = off <= 2 ? 0 : (uint64_t)off;
	i = dh->plus == plus ? page_after(dh, c->cookie) : -1;
	if (i < 0)
		rd_fetch(c);
	else
		rd_fill(c, i);
}

static void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

static void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

static void opendir_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct opctx *c = arg;
	struct dirhandle *dh;

	if (rc < 0) {
		fuse_reply_err(c->req, -rc);
		goto out;
	}
	dh = calloc(1, sizeof(*dh));
	if (!dh) {
		fuse_reply_err(c->req, ENOMEM);
		goto out;
	}
	pthread_mutex_init(&dh->mu, NULL);
	pthread_cond_init(&dh->idle, NULL);
	dh->ino = c->ino;
	dh->after = UINT64_MAX; /* no page yet */
	c->fi.fh = (uintptr_t)dh;
	if (fuse_reply_open(c->req, &c->fi) < 0) {
		pthread_mutex_destroy(&dh->mu);
		pthread_cond_destroy(&dh->idle);
		free(dh);
	}
out:
	free(c);
}

static void ll_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	struct opctx *c = opctx_new(req, to_master(m, ino), fi);

	/* The master checks read permission; nothing is held open there. */
	if (c)
		send_open(req, c->ino, O_RDONLY | O_DIRECTORY, opendir_done, c);
}

static void ll_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct dirhandle *dh = (struct dirhandle *)(uintptr_t)fi->fh;

	dh_clear(dh);
	pthread_mutex_destroy(&dh->mu);
	pthread_cond_destroy(&dh->idle);
	free(dh);
	fuse_reply_err(req, 0);
}

static void ll_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
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
	struct mount *m = mnt(req);
	Sweepfs__InoReq q = SWEEPFS__INO_REQ__INIT;
	CRED(req, cred);

	q.cred = &cred;
	q.ino = to_master(m, ino);
	mconn_send(m->mc, SW_MSG_STATFS, &q.base, statfs_done, req);
}

static void ll_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct mount *m = mnt(req);
	Sweepfs__SetxattrReq q = SWEEPFS__SETXATTR_REQ__INIT;
	CRED(req, cred);

	q.cred = &cred;
	q.ino = to_master(m, ino);
	q.name = bytes(name);
	q.value.data = (uint8_t *)value;
	q.value.len = size;
	q.has_flags = 1;
	q.flags = (uint32_t)flags;
	mconn_send(m->mc, SW_MSG_SETXATTR, &q.base, status_done, req);
}

static void xattr_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct opctx *c = arg;
	Sweepfs__XattrReply *r;

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

static void get_or_list_xattr(fuse_req_t req, fuse_ino_t ino,
			      const char *name, size_t size)
{
	struct mount *m = mnt(req);
	Sweepfs__GetxattrReq q = SWEEPFS__GETXATTR_REQ__INIT;
	struct opctx *c = opctx_new(req, to_master(m, ino), NULL);
	CRED(req, cred);

	if (!c)
		return;
	c->size = size;
	q.cred = &cred;
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
	CRED(req, cred);

	q.cred = &cred;
	q.ino = to_master(m, ino);
	q.name = bytes(name);
	mconn_send(m->mc, SW_MSG_REMOVEXATTR, &q.base, status_done, req);
}

static void ll_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct mount *m = mnt(req);
	Sweepfs__AccessReq q = SWEEPFS__ACCESS_REQ__INIT;
	CRED(req, cred);

	q.cred = &cred;
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
	/* No flush: the mount keeps nothing to push at close, and without
	 * it the kernel stops sending FLUSH, one round trip per close. */
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
};
