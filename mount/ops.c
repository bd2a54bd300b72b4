/*
 * FUSE low-level callbacks: each turns one kernel request into one master
 * request (none costs more than one round trip) and the reply back.
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

/* Finish a request whose reply is an EntryReply, or an error. */
static void finish_entry(fuse_req_t req, int rc, ProtobufCMessage *reply)
{
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		reply_entry(req, ((Sweepfs__EntryReply *)reply)->attr);
	if (reply)
		protobuf_c_message_free_unpacked(reply, NULL);
}

/* Finish a request whose reply carries nothing but a status. */
static void finish_status(fuse_req_t req, int rc, ProtobufCMessage *reply)
{
	fuse_reply_err(req, -rc);
	if (reply)
		protobuf_c_message_free_unpacked(reply, NULL);
}

#define CRED(req, cred)                                      \
	Sweepfs__Cred cred;                                  \
	uint32_t cred##_groups[CRED_GROUPS_MAX];             \
	cred_fill(req, &cred, cred##_groups, CRED_GROUPS_MAX)

/* ---- names ---------------------------------------------------------- */

static void ll_init(void *userdata, struct fuse_conn_info *conn)
{
	/* Readdirplus when the kernel expects lookups to follow (ls -l),
	 * plain readdir when it does not (rm -rf, find). */
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* The master does the permission checks, including for setuid
	 * bits after writes and chown: the kernel tells us what it wants
	 * cleared. */
	conn->want &= ~(unsigned)FUSE_CAP_HANDLE_KILLPRIV;
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mount *m = mnt(req);
	Sweepfs__LookupReq q = SWEEPFS__LOOKUP_REQ__INIT;
	ProtobufCMessage *reply;
	int rc;
	CRED(req, cred);

	q.cred = &cred;
	q.parent = to_master(m, parent);
	q.name = bytes(name);
	rc = mconn_call(m->mc, SW_MSG_LOOKUP, &q.base, &reply);
	if (rc == -ENOENT && m->negative_timeout > 0) {
		struct fuse_entry_param e = { .ino = 0,
					      .entry_timeout =
						      m->negative_timeout };

		fuse_reply_entry(req, &e);
		return;
	}
	finish_entry(req, rc, reply);
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

static void reply_attr(fuse_req_t req, int rc, ProtobufCMessage *reply,
		       const Sweepfs__Attr *a)
{
	struct mount *m = mnt(req);
	struct stat st;

	if (rc < 0) {
		fuse_reply_err(req, -rc);
	} else if (!a) {
		fuse_reply_err(req, EIO);
	} else {
		attr_to_stat(m, a, &st);
		fuse_reply_attr(req, &st, m->attr_timeout);
	}
	if (reply)
		protobuf_c_message_free_unpacked(reply, NULL);
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	Sweepfs__GetattrReq q = SWEEPFS__GETATTR_REQ__INIT;
	ProtobufCMessage *reply;
	int rc;

	q.ino = to_master(m, ino);
	rc = mconn_call(m->mc, SW_MSG_GETATTR, &q.base, &reply);
	reply_attr(req, rc, reply,
		   rc == 0 ? ((Sweepfs__AttrReply *)reply)->attr : NULL);
}

static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	Sweepfs__SetattrReq q = SWEEPFS__SETATTR_REQ__INIT;
	ProtobufCMessage *reply;
	unsigned v = 0;
	int rc;
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
	rc = mconn_call(m->mc, SW_MSG_SETATTR, &q.base, &reply);
	reply_attr(req, rc, reply,
		   rc == 0 ? ((Sweepfs__AttrReply *)reply)->attr : NULL);
}

static void ll_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct mount *m = mnt(req);
	Sweepfs__InoReq q = SWEEPFS__INO_REQ__INIT;
	Sweepfs__ReadlinkReply *r;
	ProtobufCMessage *reply;
	char buf[SW_PATH_MAX + 1];
	int rc;
	CRED(req, cred);

	q.cred = &cred;
	q.ino = to_master(m, ino);
	rc = mconn_call(m->mc, SW_MSG_READLINK, &q.base, &reply);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	r = (Sweepfs__ReadlinkReply *)reply;
	if (!r->has_target || r->target.len > SW_PATH_MAX) {
		fuse_reply_err(req, EIO);
	} else {
		memcpy(buf, r->target.data, r->target.len);
		buf[r->target.len] = '\0';
		fuse_reply_readlink(req, buf);
	}
	protobuf_c_message_free_unpacked(reply, NULL);
}

static void make_node(fuse_req_t req, uint16_t type, fuse_ino_t parent,
		      const char *name, mode_t mode, dev_t rdev)
{
	struct mount *m = mnt(req);
	Sweepfs__MknodReq q = SWEEPFS__MKNOD_REQ__INIT;
	ProtobufCMessage *reply;
	int rc;
	CRED(req, cred);

	q.cred = &cred;
	q.parent = to_master(m, parent);
	q.name = bytes(name);
	q.mode = mode;
	if (rdev) {
		q.has_rdev = 1;
		q.rdev = rdev;
	}
	rc = mconn_call(m->mc, type, &q.base, &reply);
	finish_entry(req, rc, reply);
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
	ProtobufCMessage *reply;
	int rc;
	CRED(req, cred);

	q.cred = &cred;
	q.parent = to_master(m, parent);
	q.name = bytes(name);
	rc = mconn_call(m->mc, type, &q.base, &reply);
	finish_status(req, rc, reply);
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
	ProtobufCMessage *reply;
	int rc;
	CRED(req, cred);

	q.cred = &cred;
	q.parent = to_master(m, parent);
	q.name = bytes(name);
	q.target = bytes(link);
	rc = mconn_call(m->mc, SW_MSG_SYMLINK, &q.base, &reply);
	finish_entry(req, rc, reply);
}

static void ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct mount *m = mnt(req);
	Sweepfs__RenameReq q = SWEEPFS__RENAME_REQ__INIT;
	ProtobufCMessage *reply;
	int rc;
	CRED(req, cred);

	q.cred = &cred;
	q.parent = to_master(m, parent);
	q.name = bytes(name);
	q.newparent = to_master(m, newparent);
	q.newname = bytes(newname);
	q.has_flags = flags != 0;
	q.flags = flags;
	rc = mconn_call(m->mc, SW_MSG_RENAME, &q.base, &reply);
	finish_status(req, rc, reply);
}

static void ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct mount *m = mnt(req);
	Sweepfs__LinkReq q = SWEEPFS__LINK_REQ__INIT;
	ProtobufCMessage *reply;
	int rc;
	CRED(req, cred);

	q.cred = &cred;
	q.ino = to_master(m, ino);
	q.newparent = to_master(m, newparent);
	q.newname = bytes(newname);
	rc = mconn_call(m->mc, SW_MSG_LINK, &q.base, &reply);
	finish_entry(req, rc, reply);
}

/* ---- files ---------------------------------------------------------- */

static int send_open(fuse_req_t req, uint64_t ino, uint32_t flags)
{
	struct mount *m = mnt(req);
	Sweepfs__OpenReq q = SWEEPFS__OPEN_REQ__INIT;
	ProtobufCMessage *reply;
	int rc;
	CRED(req, cred);

	q.cred = &cred;
	q.ino = ino;
	q.flags = flags;
	rc = mconn_call(m->mc, SW_MSG_OPEN, &q.base, &reply);
	if (reply)
		protobuf_c_message_free_unpacked(reply, NULL);
	return rc;
}

static void send_release(fuse_req_t req, uint64_t ino)
{
	struct mount *m = mnt(req);
	Sweepfs__InoReq q = SWEEPFS__INO_REQ__INIT;
	ProtobufCMessage *reply;
	CRED(req, cred);

	q.cred = &cred;
	q.ino = ino;
	if (mconn_call(m->mc, SW_MSG_RELEASE, &q.base, &reply) == 0)
		protobuf_c_message_free_unpacked(reply, NULL);
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	uint64_t mino = to_master(m, ino);
	int rc = send_open(req, mino, (uint32_t)fi->flags);

	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	itable_open(&m->inodes, mino);
	fi->fh = 0;
	if (fuse_reply_open(req, fi) < 0) {
		itable_close(&m->inodes, mino);
		send_release(req, mino);
	}
}

static void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	Sweepfs__CreateReq q = SWEEPFS__CREATE_REQ__INIT;
	struct fuse_entry_param e;
	ProtobufCMessage *reply;
	Sweepfs__Attr *a;
	int rc;
	CRED(req, cred);

	q.cred = &cred;
	q.parent = to_master(m, parent);
	q.name = bytes(name);
	q.mode = mode;
	q.flags = (uint32_t)fi->flags;
	rc = mconn_call(m->mc, SW_MSG_CREATE, &q.base, &reply);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	a = ((Sweepfs__EntryReply *)reply)->attr;
	if (!a) {
		fuse_reply_err(req, EIO);
		goto out_free;
	}
	fill_entry(m, a, &e);
	itable_ref(&m->inodes, a->ino);
	itable_open(&m->inodes, a->ino);
	fi->fh = 0;
	if (fuse_reply_create(req, &e, fi) < 0) {
		itable_forget(&m->inodes, a->ino, 1);
		itable_close(&m->inodes, a->ino);
		send_release(req, a->ino);
	}
out_free:
	protobuf_c_message_free_unpacked(reply, NULL);
}

static void ll_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	uint64_t mino = to_master(m, ino);

	send_release(req, mino);
	itable_close(&m->inodes, mino);
	fuse_reply_err(req, 0);
}

/* Until the data path exists a file reads as zeros up to its size. */
static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	Sweepfs__GetattrReq q = SWEEPFS__GETATTR_REQ__INIT;
	ProtobufCMessage *reply;
	Sweepfs__Attr *a;
	uint64_t fsize;
	char *zeros;
	size_t n = 0;
	int rc;

	q.ino = to_master(m, ino);
	rc = mconn_call(m->mc, SW_MSG_GETATTR, &q.base, &reply);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	a = ((Sweepfs__AttrReply *)reply)->attr;
	fsize = a ? a->size : 0;
	protobuf_c_message_free_unpacked(reply, NULL);
	if ((uint64_t)off < fsize)
		n = (size_t)SW_MIN((uint64_t)size, fsize - (uint64_t)off);
	zeros = calloc(1, n ? n : 1);
	if (!zeros) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fuse_reply_buf(req, zeros, n);
	free(zeros);
}

static void ll_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	fuse_reply_err(req, EOPNOTSUPP);
}

static void ll_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
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

static int fetch_page(fuse_req_t req, uint64_t ino, struct dirhandle *dh,
		      uint64_t after, bool plus)
{
	struct mount *m = mnt(req);
	Sweepfs__ReaddirReq q = SWEEPFS__READDIR_REQ__INIT;
	Sweepfs__ReaddirReply *r;
	ProtobufCMessage *reply;
	size_t off = 0;
	int rc;
	CRED(req, cred);

	q.cred = &cred;
	q.ino = ino;
	q.cookie = after;
	q.max_entries = PAGE_ENTRIES;
	q.max_bytes = PAGE_BYTES;
	q.has_plus = plus;
	q.plus = plus;
	rc = mconn_call(m->mc, SW_MSG_READDIR, &q.base, &reply);
	if (rc < 0)
		return rc;
	r = (Sweepfs__ReaddirReply *)reply;
	dh_clear(dh);
	dh->ents = calloc(r->count ? r->count : 1, sizeof(*dh->ents));
	if (!dh->ents) {
		protobuf_c_message_free_unpacked(reply, NULL);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < r->count; i++) {
		struct sw_dirent d;
		int used = sw_dirent_get(r->entries.data + off,
					 r->entries.len - off, &d);

		if (used < 0 || (plus && i >= r->n_attrs)) {
			protobuf_c_message_free_unpacked(reply, NULL);
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
	dh->page_msg = reply;
	return 0;
}

static void ll_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct mount *m = mnt(req);
	struct dirhandle *dh;
	int rc = send_open(req, to_master(m, ino), O_RDONLY | O_DIRECTORY);

	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	dh = calloc(1, sizeof(*dh));
	if (!dh) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_init(&dh->mu, NULL);
	dh->after = UINT64_MAX; /* no page yet */
	fi->fh = (uintptr_t)dh;
	if (fuse_reply_open(req, fi) < 0) {
		pthread_mutex_destroy(&dh->mu);
		free(dh);
	}
}

/* Lookups handed to the kernel by one readdirplus reply, to take back
 * if the reply cannot be sent. */
struct plus_refs {
	uint64_t *inos;
	size_t n, cap;
};

/* Add one entry to the reply buffer; returns false when it did not fit. */
static bool add_entry(fuse_req_t req, char *buf, size_t size, size_t *pos,
		      const char *name, uint64_t ino, uint8_t type,
		      const Sweepfs__Attr *attr, uint64_t next_off,
		      struct plus_refs *refs)
{
	struct mount *m = mnt(req);
	size_t need;

	if (refs) {
		struct fuse_entry_param e;

		if (attr) {
			fill_entry(m, attr, &e);
		} else {
			memset(&e, 0, sizeof(e));
			e.attr.st_ino = to_fuse(m, ino);
			e.attr.st_mode = (mode_t)type << 12;
		}
		if (attr && refs->n == refs->cap) {
			size_t cap = refs->cap ? refs->cap * 2 : 64;
			uint64_t *v = realloc(refs->inos, cap * sizeof(*v));

			if (!v)
				return false;
			refs->inos = v;
			refs->cap = cap;
		}
		need = fuse_add_direntry_plus(req, buf + *pos, size - *pos,
					      name, &e, (off_t)next_off);
		if (need > size - *pos)
			return false;
		/* The kernel takes a lookup for every entry but . and .. */
		if (attr) {
			itable_ref(&m->inodes, attr->ino);
			refs->inos[refs->n++] = attr->ino;
		}
	} else {
		struct stat st = { .st_ino = to_fuse(m, ino),
				   .st_mode = (mode_t)type << 12 };

		need = fuse_add_direntry(req, buf + *pos, size - *pos, name,
					 &st, (off_t)next_off);
		if (need > size - *pos)
			return false;
	}
	*pos += need;
	return true;
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

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi, bool plus)
{
	struct mount *m = mnt(req);
	struct dirhandle *dh = (struct dirhandle *)(uintptr_t)fi->fh;
	struct plus_refs prefs = { 0 }, *refs = plus ? &prefs : NULL;
	uint64_t mino = to_master(m, ino), cookie;
	size_t pos = 0;
	int64_t i;
	char *buf;
	int rc = 0;

	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&dh->mu);
	if (off == 0 && !add_entry(req, buf, size, &pos, ".", ino, DT_DIR,
				   NULL, 1, refs))
		goto out_reply;
	if (off <= 1 && !add_entry(req, buf, size, &pos, "..", ino, DT_DIR,
				   NULL, 2, refs))
		goto out_reply;
	cookie = off <= 2 ? 0 : (uint64_t)off;
	i = dh->plus == plus ? page_after(dh, cookie) : -1;
	if (i < 0) {
		rc = fetch_page(req, mino, dh, cookie, plus);
		i = 0;
	}
	while (rc == 0) {
		for (; i < dh->n; i++) {
			struct dent *d = &dh->ents[i];

			if (!add_entry(req, buf, size, &pos, d->name, d->ino,
				       d->type, d->attr, d->cookie, refs))
				goto out_reply;
			cookie = d->cookie;
		}
		if (dh->eof || dh->n == 0)
			break;
		/* The page is used up and the buffer is not: next page. */
		rc = fetch_page(req, mino, dh, cookie, plus);
		i = 0;
	}
out_reply:
	pthread_mutex_unlock(&dh->mu);
	if (rc < 0 && pos == 0)
		fuse_reply_err(req, -rc);
	else if (fuse_reply_buf(req, buf, pos) < 0)
		for (size_t k = 0; k < prefs.n; k++)
			itable_forget(&m->inodes, prefs.inos[k], 1);
	free(prefs.inos);
	free(buf);
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

static void ll_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct dirhandle *dh = (struct dirhandle *)(uintptr_t)fi->fh;

	dh_clear(dh);
	pthread_mutex_destroy(&dh->mu);
	free(dh);
	fuse_reply_err(req, 0);
}

static void ll_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
}

/* ---- the rest ------------------------------------------------------- */

static void ll_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct mount *m = mnt(req);
	Sweepfs__InoReq q = SWEEPFS__INO_REQ__INIT;
	Sweepfs__StatfsReply *r;
	ProtobufCMessage *reply;
	struct statvfs sv = { 0 };
	int rc;
	CRED(req, cred);

	q.cred = &cred;
	q.ino = to_master(m, ino);
	rc = mconn_call(m->mc, SW_MSG_STATFS, &q.base, &reply);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	r = (Sweepfs__StatfsReply *)reply;
	sv.f_bsize = sv.f_frsize = 65536;
	sv.f_blocks = r->total_bytes / sv.f_frsize;
	sv.f_bfree = sv.f_bavail = r->avail_bytes / sv.f_frsize;
	sv.f_files = r->files + r->files_free;
	sv.f_ffree = sv.f_favail = r->files_free;
	sv.f_namemax = SW_NAME_MAX;
	fuse_reply_statfs(req, &sv);
	protobuf_c_message_free_unpacked(reply, NULL);
}

static void ll_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct mount *m = mnt(req);
	Sweepfs__SetxattrReq q = SWEEPFS__SETXATTR_REQ__INIT;
	ProtobufCMessage *reply;
	int rc;
	CRED(req, cred);

	q.cred = &cred;
	q.ino = to_master(m, ino);
	q.name = bytes(name);
	q.value.data = (uint8_t *)value;
	q.value.len = size;
	q.has_flags = 1;
	q.flags = (uint32_t)flags;
	rc = mconn_call(m->mc, SW_MSG_SETXATTR, &q.base, &reply);
	finish_status(req, rc, reply);
}

static void get_or_list_xattr(fuse_req_t req, fuse_ino_t ino,
			      const char *name, size_t size)
{
	struct mount *m = mnt(req);
	Sweepfs__GetxattrReq q = SWEEPFS__GETXATTR_REQ__INIT;
	Sweepfs__XattrReply *r;
	ProtobufCMessage *reply;
	int rc;
	CRED(req, cred);

	q.cred = &cred;
	q.ino = to_master(m, ino);
	if (name) {
		q.has_name = 1;
		q.name = bytes(name);
	}
	q.size = (uint32_t)SW_MIN(size, (size_t)UINT32_MAX);
	rc = mconn_call(m->mc, name ? SW_MSG_GETXATTR : SW_MSG_LISTXATTR,
			&q.base, &reply);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	r = (Sweepfs__XattrReply *)reply;
	if (size == 0)
		fuse_reply_xattr(req, r->size);
	else
		fuse_reply_buf(req, (const char *)r->value.data, r->value.len);
	protobuf_c_message_free_unpacked(reply, NULL);
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
	ProtobufCMessage *reply;
	int rc;
	CRED(req, cred);

	q.cred = &cred;
	q.ino = to_master(m, ino);
	q.name = bytes(name);
	rc = mconn_call(m->mc, SW_MSG_REMOVEXATTR, &q.base, &reply);
	finish_status(req, rc, reply);
}

static void ll_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct mount *m = mnt(req);
	Sweepfs__AccessReq q = SWEEPFS__ACCESS_REQ__INIT;
	ProtobufCMessage *reply;
	int rc;
	CRED(req, cred);

	q.cred = &cred;
	q.ino = to_master(m, ino);
	q.mask = (uint32_t)mask;
	rc = mconn_call(m->mc, SW_MSG_ACCESS, &q.base, &reply);
	finish_status(req, rc, reply);
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
};
