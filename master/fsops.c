/*
 * Namespace requests: check the request, check permissions, decide the
 * change, commit it, reply.
 *
 * Permission rules are Linux's, because the mount does not use the
 * kernel's default_permissions (the master is the one place that sees the
 * current state of every node, and tools reach it without a kernel):
 * lookup needs search permission on the directory; creating and removing
 * need write and search permission on the directory, and the sticky bit
 * limits removal to the owners of the entry or the directory; renaming a
 * directory to a new parent needs write permission on it (its ".."
 * changes); chmod and explicit times are for the owner; chown is for root,
 * chgrp for an owner who is in the new group; set-group-ID directories pass
 * their group and, to subdirectories, the bit.
 *
 * Every handler either replies once or sends an error once. What a
 * handler does to its session (opens, grants, cursors, credential
 * mapping) is sesstab.h's, in the request layer; an acknowledged
 * invalidation goes to the server through req_inval_acked() (req.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "entries.h"
#include "log.h"
#include "handlers.h"
#include "csrv.h"
#include "dataops.h"
#include "deleg.h"
#include "context.h"
#include "replies.h"
#include "req.h"
#include "sesstab.h"
#include "watch.h"
#include "mutation.h"
#include "util.h"

#define TAG "fsops"

/* Largest file size: 2^47 bytes, 128 TiB, as MooseFS allows. */
#define SW_FILE_MAX (1ull << 47)

/*
 * Nodes a request changed besides the one it returns, by inode number:
 * looked up only when replying, since the change may have freed some.
 */
struct changed {
	uint64_t ino[4];
	unsigned n;
	uint64_t cookie; /* the new entry's, 0: none */
};

static void changed_add(struct changed *c, uint64_t ino)
{
	for (unsigned i = 0; i < c->n; i++)
		if (c->ino[i] == ino)
			return;
	if (c->n < SW_ARRAY_SIZE(c->ino))
		c->ino[c->n++] = ino;
}

/* Fill @attrs/@ptrs from @c; returns how many nodes still exist. */
static size_t changed_fill(struct req *r, const struct changed *c,
			   Sweepfs__Attr *attrs, Sweepfs__Attr **ptrs)
{
	size_t k = 0;

	for (unsigned i = 0; c && i < c->n; i++) {
		const struct node *n = ns_get(&r->m->ns, c->ino[i]);

		if (!n)
			continue;
		attr_fill(r->m, &attrs[k], n);
		ptrs[k] = &attrs[k];
		k++;
	}
	return k;
}

/*
 * Reply to @r with @n's entry (an EntryReply), or with a StatusReply when
 * @n is NULL; either carries the attributes of the nodes in @c that still
 * exist, and @c's cookie. @access (PERM_R, PERM_W) is what the open a
 * CREATE made or found may do (the reply says whether it reads), -1 for
 * any other request.
 */
static void reply_entry_open(struct req *r, const struct node *n,
			     const struct changed *c, int access)
{
	Sweepfs__EntryReply entry = SWEEPFS__ENTRY_REPLY__INIT;
	Sweepfs__StatusReply status = SWEEPFS__STATUS_REPLY__INIT;
	Sweepfs__Attr attr, attrs[4], *ptrs[4];
	size_t nchanged = changed_fill(r, c, attrs, ptrs);
	bool has_cookie = c && c->cookie;

	if (!n) {
		status.n_changed = nchanged;
		status.changed = ptrs;
		status.has_cookie = has_cookie;
		status.cookie = has_cookie ? c->cookie : 0;
		req_reply(r, &status.base);
		return;
	}
	session_grant(r->s, n);
	attr_fill(r->m, &attr, n);
	entry.attr = &attr;
	entry.n_changed = nchanged;
	entry.changed = ptrs;
	entry.has_cookie = has_cookie;
	entry.cookie = has_cookie ? c->cookie : 0;
	if (access >= 0) {
		entry.has_readable = 1;
		entry.readable = (access & PERM_R) != 0;
	}
	req_reply(r, &entry.base);
}

static void reply_entry(struct req *r, const struct node *n,
			const struct changed *c)
{
	reply_entry_open(r, n, c, -1);
}

/* A handler's ending: req_error(@r, @rc) when @rc < 0, else
 * reply_entry(@r, @n, @c). */
static void answer_entry(struct req *r, int rc, const struct node *n,
			 const struct changed *c)
{
	if (rc < 0)
		req_error(r, rc);
	else
		reply_entry(r, n, c);
}

static int get_node(struct req *r, uint64_t ino, struct node **out)
{
	*out = req_node(r, ino);
	return *out ? 0 : req_node_err(r, ino);
}

/*
 * A directory to look in or change. One of a removed tree (detached,
 * being purged, or a snapshot copy not yet named) is gone, as a removed
 * directory is on a local filesystem: a process whose working directory
 * it is gets ENOENT for anything it creates there.
 */
static int get_dir(struct req *r, uint64_t ino, struct node **out)
{
	int rc = get_node(r, ino, out);

	if (rc == 0 && !S_ISDIR((*out)->mode))
		rc = -ENOTDIR;
	if (rc == 0 && ns_detached(*out))
		rc = -ENOENT;
	return rc;
}

static const char *name_of(const ProtobufCBinaryData *b)
{
	return (const char *)b->data;
}

/* Search and write permission on @dir, to add or remove a name. */
static int may_modify_dir(const struct sw_cred *c, const struct node *dir)
{
	return perm_check(c, dir, PERM_W | PERM_X);
}

/* A mount's kernel has dropped what invalidations up to q->seq named. */
void op_inval_ack(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__InvalAckReq *q = (const Sweepfs__InvalAckReq *)msg;
	Sweepfs__StatusReply reply = SWEEPFS__STATUS_REPLY__INIT;

	/* UINT64_MAX is the master's own "forget what it owes" (it went):
	 * from a client, no number it was sent. */
	if (q->seq == UINT64_MAX) {
		req_error(r, -EINVAL);
		return;
	}
	req_inval_acked(r->m, r->s, q->seq);
	req_reply(r, &reply.base);
}

/* ---- lookup and attributes ------------------------------------------ */

void op_ping(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__PingReq *q = (const Sweepfs__PingReq *)msg;
	Sweepfs__PingReply reply = SWEEPFS__PING_REPLY__INIT;

	reply.has_token = q->has_token;
	reply.token = q->token;
	req_reply(r, &reply.base);
}

void op_lookup(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__LookupReq *q = (const Sweepfs__LookupReq *)msg;
	struct node *dir, *n = NULL;
	struct changed c = { 0 };
	struct sw_cred cred;
	struct edge *e;
	int rc;

	cred = req_cred(q->cred);
	rc = get_dir(r, q->parent, &dir);
	if (rc == 0)
		rc = perm_check(&cred, dir, PERM_X);
	if (rc < 0)
		goto out;
	/* Its kernel keeps the answer, found or not, for a while: it is to
	 * hear of the name's changes (watch.h). */
	if (r->s->role == SWEEPFS__ROLE__ROLE_MOUNT)
		watch_add(r->m, r->s, dir);
	if (q->name.len == 1 && q->name.data[0] == '.') {
		n = dir;
	} else if (q->name.len == 2 && !memcmp(q->name.data, "..", 2)) {
		/* Never above the session's root. */
		n = dir->ino == r->s->root_ino ? dir : dir->u.dir->parent;
	} else {
		rc = req_check_name(&q->name);
		if (rc < 0)
			goto out;
		e = ns_lookup(&r->m->ns, dir, name_of(&q->name), q->name.len);
		if (!e) {
			rc = -ENOENT;
			goto out;
		}
		n = e->child;
	}
	/* The directory's own attributes too: a mount that checks search
	 * permission itself learns whether everyone may search it. */
	changed_add(&c, dir->ino);
out:
	answer_entry(r, rc, n, &c);
}

void op_getattr(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__GetattrReq *q = (const Sweepfs__GetattrReq *)msg;
	struct node *n = NULL;
	int rc = get_node(r, q->ino, &n);

	req_answer_attr(r, rc, n);
}

/* Mode bits a change of owner or a write by another user clears. */
static uint32_t kill_suidgid(uint32_t mode)
{
	mode &= ~(uint32_t)S_ISUID;
	if ((mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP))
		mode &= ~(uint32_t)S_ISGID;
	return mode;
}

static int setattr_times(const struct sw_cred *c, const struct node *n,
			 unsigned v)
{
	if (v & (SWEEPFS__SETATTR_VALID__SET_ATIME |
		 SWEEPFS__SETATTR_VALID__SET_MTIME)) {
		/* Explicit times: the owner only. */
		if (!cred_owns(c, n))
			return -EPERM;
	} else if (!cred_owns(c, n) &&
		   !(v & SWEEPFS__SETATTR_VALID__SET_VIA_FD)) {
		/* "Now": the owner, or whoever may write. */
		return perm_check(c, n, PERM_W);
	}
	return 0;
}

/* A setattr being decided: what changes (out, NS_SET_*) and to what. */
struct setattr_plan {
	const Sweepfs__SetattrReq *q;
	const struct sw_cred *cred;
	const struct node *n;
	unsigned v;  /* q->valid */
	bool open_w; /* the session has n open for writing */
	int64_t now;
	uint32_t mode, newuid, newgid;
	unsigned out;
	Sweepfs__Meta__Setattr *sa;
};

static int plan_size(struct setattr_plan *p)
{
	const struct node *n = p->n;
	int rc = 0;

	if (S_ISDIR(n->mode))
		rc = -EISDIR;
	else if (!S_ISREG(n->mode))
		rc = -EINVAL;
	else if (p->q->size > SW_FILE_MAX)
		rc = -EFBIG;
	else if (!(p->v & SWEEPFS__SETATTR_VALID__SET_VIA_FD))
		rc = perm_check(p->cred, n, PERM_W);
	if (rc < 0)
		return rc;
	p->out |= NS_SET_SIZE;
	p->sa->size = p->q->size;
	if (p->q->size != n->size &&
	    !(p->v & (SWEEPFS__SETATTR_VALID__SET_MTIME |
		      SWEEPFS__SETATTR_VALID__SET_MTIME_NOW))) {
		p->out |= NS_SET_MTIME;
		p->sa->mtime = p->now;
	}
	return 0;
}

/* chown is root's; chgrp an owner's who is in the new group. */
static int plan_owner(struct setattr_plan *p)
{
	const struct sw_cred *c = p->cred;
	const struct node *n = p->n;

	if (!cred_is_root(c) &&
	    (c->uid != n->uid || p->newuid != n->uid ||
	     (p->newgid != n->gid && !cred_in_group(c, p->newgid))))
		return -EPERM;
	p->out |= p->v & (NS_SET_UID | NS_SET_GID);
	p->sa->uid = p->newuid;
	p->sa->gid = p->newgid;
	if (!S_ISDIR(n->mode) && kill_suidgid(p->mode) != p->mode) {
		p->mode = kill_suidgid(p->mode);
		p->out |= NS_SET_MODE;
	}
	return 0;
}

static int plan_mode(struct setattr_plan *p)
{
	uint32_t want = p->q->mode & 07777, ids = S_ISUID | S_ISGID;
	/*
	 * A write by someone else drops the set-id bits, and the kernel
	 * does it with a chmod that clears only them: allowed to whoever
	 * may write, as a write itself would be.
	 */
	bool drop_only = (want & ~ids) == (p->mode & ~ids) &&
			 (want & ids & ~p->mode) == 0 && want != p->mode;

	if (!cred_owns(p->cred, p->n) &&
	    !(drop_only && perm_check(p->cred, p->n, PERM_W) == 0))
		return -EPERM;
	p->mode = want;
	if (!cred_is_root(p->cred) && !cred_in_group(p->cred, p->newgid))
		p->mode &= ~(uint32_t)S_ISGID;
	p->out |= NS_SET_MODE;
	return 0;
}

static int plan_times(struct setattr_plan *p)
{
	unsigned v = p->v;
	int rc = setattr_times(p->cred, p->n, v);

	if (rc < 0)
		return rc;
	if (v & (SWEEPFS__SETATTR_VALID__SET_ATIME |
		 SWEEPFS__SETATTR_VALID__SET_ATIME_NOW)) {
		p->out |= NS_SET_ATIME;
		p->sa->atime = (v & SWEEPFS__SETATTR_VALID__SET_ATIME_NOW) ?
				       p->now :
				       p->q->atime;
	}
	if (v & (SWEEPFS__SETATTR_VALID__SET_MTIME |
		 SWEEPFS__SETATTR_VALID__SET_MTIME_NOW)) {
		p->out |= NS_SET_MTIME;
		/* "Now" may come with the client's value for it: its
		 * kernel keeps that one (writeback cache). */
		if ((v & SWEEPFS__SETATTR_VALID__SET_MTIME_NOW) &&
		    !p->q->has_mtime)
			p->sa->mtime = p->now;
		else if ((v & SWEEPFS__SETATTR_VALID__SET_MTIME_NOW) &&
			 !cred_owns(p->cred, p->n))
			p->sa->mtime = req_client_now(p->q->mtime, p->now);
		else
			p->sa->mtime = p->q->mtime;
	}
	return 0;
}

/* Decide @p's change, in the order the kernel applies them. */
static int plan_setattr(struct setattr_plan *p)
{
	unsigned v = p->v;
	int rc = 0;

	if (v & SWEEPFS__SETATTR_VALID__SET_SIZE)
		rc = plan_size(p);
	if (rc == 0 && (v & (SWEEPFS__SETATTR_VALID__SET_UID |
			     SWEEPFS__SETATTR_VALID__SET_GID)))
		rc = plan_owner(p);
	if (rc == 0 && (v & SWEEPFS__SETATTR_VALID__SET_MODE))
		rc = plan_mode(p);
	if (rc == 0 && (v & SWEEPFS__SETATTR_VALID__SET_KILL_SUIDGID) &&
	    kill_suidgid(p->mode) != p->mode) {
		/* What a write does to the set-id bits: for whoever may
		 * write, as the write itself. */
		if (!p->open_w && !cred_owns(p->cred, p->n) &&
		    perm_check(p->cred, p->n, PERM_W) < 0)
			return -EPERM;
		p->mode = kill_suidgid(p->mode);
		p->out |= NS_SET_MODE;
	}
	if (rc == 0 && (v & (SWEEPFS__SETATTR_VALID__SET_ATIME |
			     SWEEPFS__SETATTR_VALID__SET_MTIME |
			     SWEEPFS__SETATTR_VALID__SET_ATIME_NOW |
			     SWEEPFS__SETATTR_VALID__SET_MTIME_NOW)))
		rc = plan_times(p);
	return rc;
}

void op_setattr(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__SetattrReq *q = (const Sweepfs__SetattrReq *)msg;
	Sweepfs__Meta__Setattr sa = SWEEPFS__META__SETATTR__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	struct sw_cred cred = req_cred(q->cred);
	struct setattr_plan p;
	uint64_t old_size;
	struct node *n = NULL;
	bool open_w;
	int rc;

	rc = get_node(r, q->ino, &n);
	if (rc < 0)
		goto out;
	open_w = session_has_writable(r->s, n->ino);
	p = (struct setattr_plan){
		.q = q,
		.cred = &cred,
		.n = n,
		/* SET_VIA_FD ("through a descriptor open for writing":
		 * ftruncate(), futimens() may skip the write check) is the
		 * client's word: it stands only when this session has @n
		 * open for writing, as the master itself recorded. */
		.open_w = open_w,
		.v = open_w ?
			     q->valid :
			     q->valid &
				     ~(unsigned)
					     SWEEPFS__SETATTR_VALID__SET_VIA_FD,
		.now = sw_now_ns(),
		.mode = n->mode & 07777,
		.newuid = (q->valid & SWEEPFS__SETATTR_VALID__SET_UID) ?
				  q->uid :
				  n->uid,
		.newgid = (q->valid & SWEEPFS__SETATTR_VALID__SET_GID) ?
				  q->gid :
				  n->gid,
		.sa = &sa,
	};
	rc = plan_setattr(&p);
	if (rc < 0)
		goto out;
	sa.ino = n->ino;
	sa.valid = p.out;
	sa.mode = p.mode;
	sa.has_mode = sa.has_uid = sa.has_gid = sa.has_size = 1;
	sa.has_atime = sa.has_mtime = 1;
	mut.time = p.now;
	mut.op_case = SWEEPFS__META__MUTATION__OP_SETATTR;
	mut.setattr = &sa;
	old_size = n->size;
	rc = master_commit(r->m, r, &mut);
	if (rc < 0)
		goto out;
	rc = data_truncated(r, n, old_size);
	if (rc == 0)
		return; /* chunkservers cut the last chunk, then the reply */
out:
	req_answer_attr(r, rc, n);
}

/* ---- creating ------------------------------------------------------- */

struct new_node {
	const Sweepfs__Cred *cred;
	uint64_t parent;
	const ProtobufCBinaryData *name;
	uint32_t mode; /* type and permission bits, umask applied */
	uint64_t rdev;
	const ProtobufCBinaryData *target;
	uint64_t ino; /* 0: the next number; else one the caller checked */
	int64_t time; /* wall ns; 0: now */
};

/*
 * Make the node @nn describes, as its request may: 0 with *@out, the new
 * entry's cookie in @ch. With @nn->ino, 1 when the entry is that node
 * already (a batch sent again after a reconnect): *@out and the cookie
 * are the existing ones, nothing changed. Else -errno, nothing changed.
 */
static int create_node(struct req *r, const struct new_node *nn,
		       struct node **out, struct changed *ch)
{
	Sweepfs__Meta__Create c = SWEEPFS__META__CREATE__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	struct ns *ns = &r->m->ns;
	uint32_t type = nn->mode & S_IFMT, gid;
	struct node *dir = NULL;
	struct edge *e;
	struct sw_cred cred;
	int rc;

	cred = req_cred(nn->cred);
	rc = req_check_name(nn->name);
	if (rc == 0)
		rc = get_dir(r, nn->parent, &dir);
	if (rc == 0)
		rc = may_modify_dir(&cred, dir);
	if (rc < 0)
		return rc;
	e = ns_lookup(ns, dir, name_of(nn->name), nn->name->len);
	if (e && nn->ino && e->child->ino == nn->ino) {
		*out = e->child;
		ch->cookie = e->id;
		return 1;
	}
	if (e || (nn->ino && ns_get(ns, nn->ino)))
		return -EEXIST;
	if ((type == S_IFCHR || type == S_IFBLK) && !cred_is_root(&cred))
		return -EPERM;

	gid = (dir->mode & S_ISGID) ? dir->gid : cred.gid;

	c.parent = dir->ino;
	c.name = *nn->name;
	c.ino = nn->ino ? nn->ino : ns->next_ino;
	c.edge = ns->next_edge;
	c.mode = sw_new_node_mode(nn->mode, dir->mode,
				  cred_is_root(&cred) ||
					  cred_in_group(&cred, gid));
	c.uid = cred.uid;
	c.gid = gid;
	if (type == S_IFCHR || type == S_IFBLK) {
		c.has_rdev = 1;
		c.rdev = nn->rdev;
	}
	if (nn->target) {
		c.has_target = 1;
		c.target = *nn->target;
	}
	mut.time = nn->time ? nn->time : sw_now_ns();
	mut.op_case = SWEEPFS__META__MUTATION__OP_CREATE;
	mut.create = &c;
	rc = master_commit(r->m, r, &mut);
	if (rc < 0)
		return rc;
	*out = ns_get(ns, c.ino);
	changed_add(ch, dir->ino);
	ch->cookie = c.edge;
	watch_changed(r->m, dir, c.name.data, c.name.len, r->s);
	/* The creator of a directory knows its (empty) listing. */
	if (type == S_IFDIR)
		watch_add(r->m, r->s, *out);
	return 0;
}

void op_mknod(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__MknodReq *q = (const Sweepfs__MknodReq *)msg;
	struct new_node nn = { .cred = q->cred,
			       .parent = q->parent,
			       .name = &q->name,
			       .mode = q->mode,
			       .rdev = q->rdev };
	struct changed ch = { .n = 0 };
	struct node *n = NULL;
	int rc;

	switch (q->mode & S_IFMT) {
	case 0:
		nn.mode |= S_IFREG;
		break;
	case S_IFREG:
	case S_IFCHR:
	case S_IFBLK:
	case S_IFIFO:
	case S_IFSOCK:
		break;
	case S_IFDIR:
		rc = -EPERM;
		goto out;
	default:
		rc = -EINVAL;
		goto out;
	}
	rc = create_node(r, &nn, &n, &ch);
out:
	answer_entry(r, rc, n, &ch);
}

void op_mkdir(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__MknodReq *q = (const Sweepfs__MknodReq *)msg;
	struct new_node nn = { .cred = q->cred,
			       .parent = q->parent,
			       .name = &q->name,
			       .mode = S_IFDIR | (q->mode & 07777) };
	struct changed ch = { .n = 0 };
	struct node *n = NULL;
	int rc = create_node(r, &nn, &n, &ch);

	answer_entry(r, rc, n, &ch);
}

/* A symlink's target: 0, -ENOENT (empty), -ENAMETOOLONG or -EINVAL. */
static int check_target(const ProtobufCBinaryData *t)
{
	if (t->len == 0)
		return -ENOENT;
	if (t->len >= SW_PATH_MAX)
		return -ENAMETOOLONG;
	return memchr(t->data, '\0', t->len) ? -EINVAL : 0;
}

void op_symlink(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__SymlinkReq *q = (const Sweepfs__SymlinkReq *)msg;
	struct new_node nn = { .cred = q->cred,
			       .parent = q->parent,
			       .name = &q->name,
			       .mode = S_IFLNK | 0777,
			       .target = &q->target };
	struct changed ch = { .n = 0 };
	struct node *n = NULL;
	int rc = check_target(&q->target);

	if (rc == 0)
		rc = create_node(r, &nn, &n, &ch);
	answer_entry(r, rc, n, &ch);
}

/*
 * O_TRUNC: the kernel leaves it to us (atomic open-and-truncate). To
 * size 0 with new mtime and ctime, journaled like a setattr; whole
 * chunks go with the size, so nothing waits for chunkservers.
 */
static int open_truncate(struct req *r, struct node *n)
{
	Sweepfs__Meta__Setattr sa = SWEEPFS__META__SETATTR__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;

	sa.ino = n->ino;
	sa.valid = NS_SET_SIZE | NS_SET_MTIME;
	sa.has_size = sa.has_mtime = 1;
	sa.size = 0;
	sa.mtime = sw_now_ns();
	mut.time = sa.mtime;
	mut.op_case = SWEEPFS__META__MUTATION__OP_SETATTR;
	mut.setattr = &sa;
	return master_commit(r->m, r, &mut);
}

/*
 * Open existing @n for session @r->s: what the open may do (PERM_R,
 * PERM_W; perm_open_access(): the caller's, not the session's), or
 * -errno. The reply is the caller's.
 */
static int open_node(struct req *r, const struct sw_cred *c, struct node *n,
		     uint32_t flags)
{
	int access = perm_open_access(c, n, flags);
	int rc;

	if (S_ISDIR(n->mode)) {
		if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
			return -EISDIR;
		rc = perm_check(c, n, PERM_R);
		return rc < 0 ? rc : access;
	}
	rc = perm_check(c, n, perm_open_mask(flags));
	if (rc == 0 && S_ISREG(n->mode) && (flags & O_TRUNC))
		rc = open_truncate(r, n);
	if (rc == 0 && S_ISREG(n->mode))
		rc = session_open(r->m, r->s, n, access);
	return rc < 0 ? rc : access;
}

/*
 * What the creator of a file may do through the open it made it with:
 * read, whatever the mode (it owns the file and could chmod it), and
 * write if it opened it for writing.
 */
static int create_access(bool writable)
{
	return PERM_R | (writable ? PERM_W : 0);
}

void op_create(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__CreateReq *q = (const Sweepfs__CreateReq *)msg;
	struct new_node nn = { .cred = q->cred,
			       .parent = q->parent,
			       .name = &q->name,
			       .mode = S_IFREG | (q->mode & 07777) };
	struct changed ch = { .n = 0 };
	struct sw_cred cred;
	struct node *n;
	int rc = create_node(r, &nn, &n, &ch);

	cred = req_cred(q->cred);
	if (rc == -EEXIST && !(q->flags & O_EXCL)) {
		/* Lost a race with another creator: open theirs. */
		struct node *dir = req_node(r, q->parent);
		struct edge *e = dir ? ns_lookup(&r->m->ns, dir,
						 name_of(&q->name),
						 q->name.len) :
				       NULL;

		rc = e ? open_node(r, &cred, e->child, q->flags) : -ENOENT;
		if (rc >= 0) {
			reply_entry_open(r, e->child, NULL, rc);
			return;
		}
	} else if (rc == 0) {
		/* The creator may open what it created, whatever the mode. */
		int access = create_access((q->flags & O_ACCMODE) != O_RDONLY);

		rc = session_open(r->m, r->s, n, access);
		if (rc == 0) {
			reply_entry_open(r, n, &ch, access);
			return;
		}
	}
	req_error(r, rc);
}

void op_link(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__LinkReq *q = (const Sweepfs__LinkReq *)msg;
	Sweepfs__Meta__Link l = SWEEPFS__META__LINK__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	struct changed ch = { .n = 0 };
	struct node *n = NULL, *dir = NULL;
	struct sw_cred cred;
	int rc;

	cred = req_cred(q->cred);
	rc = get_node(r, q->ino, &n);
	if (rc == 0 && S_ISDIR(n->mode))
		rc = -EPERM;
	if (rc == 0)
		rc = req_check_name(&q->newname);
	if (rc == 0)
		rc = get_dir(r, q->newparent, &dir);
	if (rc == 0)
		rc = may_modify_dir(&cred, dir);
	if (rc < 0)
		goto out;
	l.ino = n->ino;
	l.parent = dir->ino;
	l.name = q->newname;
	l.edge = r->m->ns.next_edge;
	mut.time = sw_now_ns();
	mut.op_case = SWEEPFS__META__MUTATION__OP_LINK;
	mut.link = &l;
	rc = master_commit(r->m, r, &mut);
	if (rc < 0)
		goto out;
	changed_add(&ch, dir->ino);
	ch.cookie = l.edge;
	watch_changed(r->m, dir, q->newname.data, q->newname.len, r->s);
out:
	answer_entry(r, rc, n, &ch);
}

/* ---- removing and renaming ------------------------------------------ */

/*
 * Remove @name from directory @parent as @cp (mapped already) may: an
 * unlink, or with @rmdir an rmdir. Notes what changed in @ch (may be
 * NULL). Returns 0 or -errno; nothing is changed on an error.
 */
static int remove_one(struct req *r, const Sweepfs__Cred *cp, uint64_t parent,
		      const ProtobufCBinaryData *name, bool rmdir,
		      struct changed *ch)
{
	Sweepfs__Meta__Unlink u = SWEEPFS__META__UNLINK__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	struct node *dir = NULL, *n;
	uint64_t victim;
	struct sw_cred cred;
	struct edge *e;
	int rc;

	cred = req_cred(cp);
	rc = req_check_name(name);
	if (rc == 0)
		rc = get_dir(r, parent, &dir);
	if (rc == 0)
		rc = may_modify_dir(&cred, dir);
	if (rc < 0)
		return rc;
	e = ns_lookup(&r->m->ns, dir, name_of(name), name->len);
	if (!e)
		return -ENOENT;
	n = e->child;
	if (rmdir && !S_ISDIR(n->mode))
		rc = -ENOTDIR;
	else if (!rmdir && S_ISDIR(n->mode))
		rc = -EISDIR;
	else if (rmdir && n->u.dir->nentries)
		rc = -ENOTEMPTY;
	else if (rmdir && deleg_held_by_other(r->m, r->s, n))
		/* Another's, who may have made entries there it has not
		 * sent yet: a batch's (RMDIR waits for the recall). */
		rc = -EBUSY;
	else
		rc = perm_sticky(&cred, dir, n);
	if (rc < 0)
		return rc;
	u.parent = dir->ino;
	u.name = *name;
	u.has_keep = 1;
	u.keep = !rmdir && n->nlink == 1 && (n->flags & NODE_OPEN);
	mut.time = sw_now_ns();
	/* A file's last name in a directory with a trash time: to the
	 * trash rather than gone. */
	if (!rmdir && n->nlink == 1 && dir->u.dir->trashtime) {
		u.has_trash_until = 1;
		u.trash_until = mut.time + (int64_t)dir->u.dir->trashtime *
						   SW_NSEC_PER_SEC;
	}
	mut.op_case = SWEEPFS__META__MUTATION__OP_UNLINK;
	mut.unlink = &u;
	victim = n->ino;
	rc = master_commit(r->m, r, &mut);
	if (rc < 0)
		return rc;
	if (ch) {
		changed_add(ch, dir->ino);
		changed_add(ch, victim); /* if it still exists: fewer links */
	}
	watch_changed(r->m, dir, name->data, name->len, r->s);
	return 0;
}

static void remove_entry(struct req *r, const Sweepfs__NameReq *q, bool rmdir)
{
	struct changed ch = { .n = 0 };
	int rc = remove_one(r, q->cred, q->parent, &q->name, rmdir, &ch);

	answer_entry(r, rc, NULL, &ch);
}

void op_unlink(struct req *r, const ProtobufCMessage *msg)
{
	remove_entry(r, (const Sweepfs__NameReq *)msg, false);
}

void op_rmdir(struct req *r, const ProtobufCMessage *msg)
{
	remove_entry(r, (const Sweepfs__NameReq *)msg, true);
}

/* Inode numbers one InoRangeReq may have. */
#define INO_RANGE_MAX 4096

/*
 * Inode numbers for the nodes a delegation holder makes (BATCH_CREATE),
 * journaled before the reply (through the changelog's own durability),
 * so that none is handed out twice, a restart included.
 */
void op_ino_range(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__InoRangeReq *q = (const Sweepfs__InoRangeReq *)msg;
	Sweepfs__InoRangeReply reply = SWEEPFS__INO_RANGE_REPLY__INIT;
	uint8_t proof[SW_AUTH_TAG];
	Sweepfs__Meta__Reserve rv = SWEEPFS__META__RESERVE__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	struct session *s = r->s;
	uint32_t count = q->count < INO_RANGE_MAX ? q->count : INO_RANGE_MAX;
	uint64_t first = r->m->ns.next_ino;
	int rc;

	if (!s->ndelegs)
		rc = -EPERM; /* nowhere to make nodes in */
	else if (!count)
		rc = -EINVAL;
	else
		rc = 0;
	if (rc < 0)
		goto out;
	rv.next_ino = first + count;
	mut.time = sw_now_ns();
	mut.op_case = SWEEPFS__META__MUTATION__OP_RESERVE;
	mut.reserve = &rv;
	rc = master_commit(r->m, r, &mut);
	if (rc < 0)
		goto out;
	session_ino_add(s, first, rv.next_ino);
	session_ino_proof(r->m, s->id, first, count, proof);
	reply.has_first = reply.has_count = reply.has_proof = 1;
	reply.first = first;
	reply.count = count;
	reply.proof.data = proof;
	reply.proof.len = sizeof(proof);
out:
	req_answer(r, rc, &reply.base);
}

/*
 * The mount's time of a change: it answered with it, so it is kept, if
 * within ten minutes of ours (a batch may wait for a recall or a
 * reconnect, and clocks differ). No arithmetic on @t, which may be
 * anything.
 */
static int64_t clamp_time(int64_t t)
{
	const int64_t slack = 600 * SW_NSEC_PER_SEC;
	int64_t now = sw_now_ns();

	if (t < now - slack)
		return now - slack;
	if (t > now + slack)
		return now + slack;
	return t;
}

/*
 * Whether @op's entry exists already, as the node it names. The
 * directory is taken as the create itself takes it (get_dir()): within
 * the session's confinement, never one of a removed tree (a tree being
 * purged has no index of names: NODE_PURGING).
 */
static bool made_already(struct req *r, const Sweepfs__BatchOp *op)
{
	struct node *dir;
	struct edge *e;

	if (get_dir(r, op->parent, &dir) < 0)
		return false;
	e = ns_lookup(&r->m->ns, dir, name_of(&op->name), op->name.len);
	return e && e->child->ino == op->ino;
}

/*
 * A node a holder made (BATCH_CREATE, mapped @op), made as its own
 * request would make it, with its number and time; its new entry's
 * cookie in *@cookie. 0 or -errno.
 */
static int create_batched(struct req *r, const Sweepfs__BatchOp *op,
			  uint64_t *cookie)
{
	struct new_node nn = {
		.cred = op->cred,
		.parent = op->parent,
		.name = &op->name,
		.mode = op->mode,
		.ino = op->ino,
		.time = op->has_time ? clamp_time(op->time) : 0,
	};
	struct changed ch = { .n = 0 };
	struct node *n;
	bool made;
	int rc;

	switch (op->mode & S_IFMT) {
	case S_IFLNK:
		nn.target = &op->target;
		rc = check_target(&op->target);
		break;
	case S_IFREG:
	case S_IFDIR:
	case S_IFIFO:
	case S_IFSOCK:
		rc = 0;
		break;
	default:
		rc = -EINVAL;
	}
	/* A number no longer ours may still be that of the node this
	 * create made before it was sent again (create_node() says so). */
	if (rc == 0 && !session_ino_has(r->s, op->ino) && !made_already(r, op))
		rc = -EINVAL;
	if (rc == 0)
		rc = create_node(r, &nn, &n, &ch);
	if (rc < 0)
		return rc;
	made = rc == 0;
	/* Opened only as it is made: made before, the open was then, and
	 * what became of it since the session's reclaim settled. */
	if (made && op->open && S_ISREG(n->mode)) {
		rc = session_open(r->m, r->s, n, create_access(op->writable));
		if (rc < 0)
			return rc;
	}
	if (made && S_ISDIR(n->mode))
		deleg_grant_made(r->m, r->s, n);
	session_grant(r->s, n);
	*cookie = ch.cookie;
	return 0;
}

/*
 * Operations a mount acknowledged under a delegation (deleg.h), in order,
 * each checked as its own request would be (and refused with EKEYREVOKED
 * in a directory taken back from it): one error each, in one reply
 * sent when the last is durable. Each goes into the changelog as it is
 * applied; the changelog writes them out together at the end of the loop
 * turn.
 */
void op_batch(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__BatchReq *q = (const Sweepfs__BatchReq *)msg;
	Sweepfs__BatchReply reply = SWEEPFS__BATCH_REPLY__INIT;
	size_t n = q->n_ops ? q->n_ops : 1;
	uint64_t *cookies, *handles;
	int32_t *errs;
	int rc;

	if (q->n_ops > SW_BATCH_OPS_MAX) {
		req_error(r, -E2BIG);
		return;
	}
	errs = calloc(n, sizeof(*errs));
	cookies = calloc(n, sizeof(*cookies));
	handles = calloc(n, sizeof(*handles));
	if (!errs || !cookies || !handles) {
		req_error(r, -ENOMEM);
		goto out_free;
	}
	for (size_t i = 0; i < q->n_ops; i++) {
		const Sweepfs__BatchOp *op = q->ops[i];

		/* Answered under a delegation taken back since: what the
		 * mount saw there is not what others may have changed
		 * meanwhile (it gives the directory back, and asks). */
		if (deleg_revoked(r->m, r->s, op->parent)) {
			errs[i] = EKEYREVOKED;
			continue;
		}
		if (session_map_cred(r->s, op->cred) < 0) {
			errs[i] = EINVAL;
			continue;
		}
		switch (op->type) {
		case SWEEPFS__BATCH_TYPE__BATCH_UNLINK:
		case SWEEPFS__BATCH_TYPE__BATCH_RMDIR:
			rc = remove_one(
				r, op->cred, op->parent, &op->name,
				op->type == SWEEPFS__BATCH_TYPE__BATCH_RMDIR,
				NULL);
			break;
		case SWEEPFS__BATCH_TYPE__BATCH_CREATE:
			rc = create_batched(r, op, &cookies[i]);
			/* How it names the node once its range is gone. */
			if (rc == 0)
				handles[i] = sw_node_handle(r->m->handle_key,
							    op->ino);
			break;
		default:
			rc = -EINVAL;
		}
		/* On the wire, errno is positive, as everywhere. */
		errs[i] = -rc;
	}
	r->m->total->batch_ops += q->n_ops;
	r->s->ctr.batch_ops += q->n_ops;
	reply.n_errs = reply.n_cookies = reply.n_handles = q->n_ops;
	reply.errs = errs;
	reply.cookies = cookies;
	reply.handles = handles;
	req_reply(r, &reply.base);
out_free:
	free(handles);
	free(cookies);
	free(errs);
}

void op_rename(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__RenameReq *q = (const Sweepfs__RenameReq *)msg;
	Sweepfs__Meta__Rename rn = SWEEPFS__META__RENAME__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	struct ns *ns = &r->m->ns;
	struct node *sdir = NULL, *ddir = NULL, *src, *dst = NULL;
	struct changed ch = { .n = 0 };
	bool exchange = q->flags & RENAME_EXCHANGE;
	struct edge *se, *de;
	struct sw_cred cred;
	int rc;

	cred = req_cred(q->cred);
	rc = req_check_name(&q->name);
	if (rc == 0)
		rc = req_check_name(&q->newname);
	if (rc == 0)
		rc = get_dir(r, q->parent, &sdir);
	if (rc == 0)
		rc = get_dir(r, q->newparent, &ddir);
	if (rc == 0)
		rc = may_modify_dir(&cred, sdir);
	if (rc == 0)
		rc = may_modify_dir(&cred, ddir);
	if (rc < 0)
		goto out;
	se = ns_lookup(ns, sdir, name_of(&q->name), q->name.len);
	if (!se) {
		rc = -ENOENT;
		goto out;
	}
	src = se->child;
	de = ns_lookup(ns, ddir, name_of(&q->newname), q->newname.len);
	if (de)
		dst = de->child;
	rc = perm_sticky(&cred, sdir, src);
	if (rc == 0 && dst)
		rc = perm_sticky(&cred, ddir, dst);
	/* A directory changing parent gets a new "..": write access. */
	if (rc == 0 && S_ISDIR(src->mode) && sdir != ddir)
		rc = perm_check(&cred, src, PERM_W);
	if (rc == 0 && exchange && dst && S_ISDIR(dst->mode) && sdir != ddir)
		rc = perm_check(&cred, dst, PERM_W);
	if (rc < 0)
		goto out;
	if (dst == src && !exchange) {
		/* Two names of one file: POSIX says do nothing. */
		reply_entry(r, NULL, NULL);
		return;
	}
	changed_add(&ch, sdir->ino);
	changed_add(&ch, ddir->ino);
	changed_add(&ch, src->ino);
	if (dst)
		changed_add(&ch, dst->ino);
	rn.parent = sdir->ino;
	rn.name = q->name;
	rn.newparent = ddir->ino;
	rn.newname = q->newname;
	rn.has_flags = 1;
	rn.flags = q->flags;
	rn.edge = ns->next_edge;
	rn.has_keep = 1;
	rn.keep = !exchange && dst && !S_ISDIR(dst->mode) && dst->nlink == 1 &&
		  (dst->flags & NODE_OPEN);
	mut.time = sw_now_ns();
	mut.op_case = SWEEPFS__META__MUTATION__OP_RENAME;
	mut.rename = &rn;
	rc = master_commit(r->m, r, &mut);
	if (rc < 0)
		goto out;
	/* An exchange keeps both edges; a move makes a new one. */
	if (!exchange)
		ch.cookie = rn.edge;
	watch_changed(r->m, sdir, q->name.data, q->name.len, r->s);
	watch_changed(r->m, ddir, q->newname.data, q->newname.len, r->s);
out:
	answer_entry(r, rc, NULL, &ch);
}

/* ---- misc ----------------------------------------------------------- */

/*
 * The open of CREATE @msg, made before, for the request sent again: its
 * owner's as a creator's; anyone else's checked as an open (a CREATE
 * without O_EXCL opens a file someone else made, and its O_TRUNC is
 * recorded under the request's id, as a file's creation is).
 */
static int reopen_created(struct req *r, const ProtobufCMessage *msg,
			  struct node *n)
{
	const Sweepfs__CreateReq *q = (const void *)msg;
	struct sw_cred cred = req_cred(q->cred);
	uint32_t flags = q->flags & ~(uint32_t)O_TRUNC; /* done */
	int access, rc;

	if (!S_ISREG(n->mode))
		return -EEXIST;
	if (!cred_owns(&cred, n))
		return open_node(r, &cred, n, flags);
	access = create_access((flags & O_ACCMODE) != O_RDONLY);
	rc = session_open(r->m, r->s, n, access);
	return rc < 0 ? rc : access;
}

bool op_done_before(struct req *r, const ProtobufCMessage *msg)
{
	const struct reply_done *d =
		replies_find(&r->m->ns.replies, r->s->id, r->hdr.id);
	Sweepfs__AttrReply reply = SWEEPFS__ATTR_REPLY__INIT;
	Sweepfs__Attr attr;
	struct node *n;
	int access = -1; /* a CREATE's open: reply_entry_open() */
	int rc = 0;

	if (!d)
		return false;
	if (!sw_auth_equal(d->digest, r->digest, sizeof(d->digest))) {
		/* Another request under a made one's id: made as new. */
		sw_notice(TAG,
			  "session %016" PRIx64 ": %s %" PRIu64
			  " sent again is not the request made under that id; "
			  "handled as a new one",
			  r->s->id, sw_msg_info(r->hdr.type)->name, r->hdr.id);
		return false;
	}
	sw_info(TAG,
		"session %016" PRIx64 ": %s %" PRIu64
		" was made at version %" PRIu64 "; answered again",
		r->s->id, sw_msg_info(r->hdr.type)->name, r->hdr.id,
		d->version);
	/* Not before the first one's change is durable. */
	r->version = d->version;
	n = d->ino ? ns_get(&r->m->ns, d->ino) : NULL;
	switch (r->hdr.type) {
	case SW_MSG_CREATE:
		/* The open went with the lost reply, and the reconnect's
		 * reclaim did not name it. */
		if (n) {
			access = reopen_created(r, msg, n);
			rc = SW_MIN(access, 0);
		}
		/* fall through */
	case SW_MSG_MKNOD:
	case SW_MSG_MKDIR:
	case SW_MSG_SYMLINK:
	case SW_MSG_LINK:
		/* Removed since by someone else: as if just after. */
		if (!n)
			rc = -ENOENT;
		if (rc == 0)
			reply_entry_open(r, n, NULL, access);
		else
			req_error(r, rc);
		break;
	case SW_MSG_SETATTR:
		if (!n) {
			req_error(r, -ENOENT);
			break;
		}
		attr_fill(r->m, &attr, n);
		reply.attr = &attr;
		req_reply(r, &reply.base);
		break;
	default: /* unlink, rmdir, rename, xattrs */
		reply_entry(r, NULL, NULL);
	}
	return true;
}

void op_readlink(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__InoReq *q = (const Sweepfs__InoReq *)msg;
	Sweepfs__ReadlinkReply reply = SWEEPFS__READLINK_REPLY__INIT;
	struct node *n;
	int rc = get_node(r, q->ino, &n);

	if (rc == 0 && !S_ISLNK(n->mode))
		rc = -EINVAL;
	if (rc < 0) {
		req_error(r, rc);
		return;
	}
	reply.has_target = 1;
	reply.target.data = (uint8_t *)n->u.target;
	reply.target.len = n->size;
	req_reply(r, &reply.base);
}

/*
 * The files @r's session counts as used: the whole namespace's nodes, or
 * for a session confined to a subtree its root and the names below it
 * (ns_tree_names(), O(log n): a file of two names counts twice, one open
 * but unlinked not at all), so that a confined df tells nothing of the
 * rest of the namespace.
 */
static uint64_t statfs_files(const struct req *r)
{
	const struct node *root;

	if (!session_confined(r->s))
		return r->m->ns.nnodes;
	root = ns_get(&r->m->ns, r->s->root_ino);
	return root && S_ISDIR(root->mode) ? 1 + ns_tree_names(root) : 0;
}

/*
 * The filesystem's space is everyone's, as df on an NFS export shows its
 * filesystem's: a confined session learns it too, and a quota per
 * subtree would be what changes that. Its file count is its subtree's,
 * and the free count follows from it, never from the namespace's.
 */
void op_statfs(struct req *r, const ProtobufCMessage *msg)
{
	Sweepfs__StatfsReply reply = SWEEPFS__STATFS_REPLY__INIT;
	struct statvfs sv;
	uint64_t total, avail, pending, files = statfs_files(r);

	/* The chunkservers' space; with none, the metadata disk's. */
	csrvs_space(r->m, &total, &avail, &pending);
	if (!total && statvfs(r->m->cfg.data_dir, &sv) == 0) {
		total = (uint64_t)sv.f_blocks * sv.f_frsize;
		avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	}
	reply.has_total_bytes = reply.has_avail_bytes = 1;
	reply.total_bytes = total;
	reply.avail_bytes = avail;
	/* What the namespace's removals are giving back: not a confined
	 * session's business (and no client reads it). */
	reply.has_pending_delete_bytes = !session_confined(r->s);
	reply.pending_delete_bytes = pending * SW_CHUNK_SIZE / 2;
	reply.has_files = reply.has_files_free = 1;
	reply.files = files;
	reply.files_free = (1ull << 32) - SW_MIN(files, 1ull << 31);
	req_reply(r, &reply.base);
}

void op_open(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__OpenReq *q = (const Sweepfs__OpenReq *)msg;
	Sweepfs__OpenReply reply = SWEEPFS__OPEN_REPLY__INIT;
	Sweepfs__Attr attr;
	struct sw_cred cred;
	struct node *n;
	int rc;

	cred = req_cred(q->cred);
	rc = get_node(r, q->ino, &n);
	if (rc == 0)
		rc = open_node(r, &cred, n, q->flags);
	if (rc >= 0) {
		attr_fill(r->m, &attr, n);
		reply.attr = &attr;
		/* This caller's, not the session's: what a reclaim of
		 * this open would be given (session.c). */
		reply.has_readable = 1;
		reply.readable = !S_ISREG(n->mode) || (rc & PERM_R);
		rc = 0;
	}
	req_answer(r, rc, &reply.base);
}

void op_release(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__InoReq *q = (const Sweepfs__InoReq *)msg;

	session_release(r->m, r->s, q->ino);
	reply_entry(r, NULL, NULL);
}

void op_access(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__AccessReq *q = (const Sweepfs__AccessReq *)msg;
	struct sw_cred cred;
	struct node *n;
	int rc;

	cred = req_cred(q->cred);
	rc = get_node(r, q->ino, &n);
	if (rc == 0 && (q->mask & 7))
		rc = perm_check(&cred, n, (int)(q->mask & 7));
	if (rc < 0)
		req_error(r, rc);
	else
		reply_entry(r, NULL, NULL);
}

/* ---- readdir -------------------------------------------------------- */

/*
 * Entries after the cookie, from the session's cursor when it rests on
 * that cookie (O(1)), else from the directory's index (O(log n)). The
 * cursor then rests on the last entry sent, so the next page, and a
 * reopen that continues where the last listing stopped, cost O(page).
 */
void op_readdir(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__ReaddirReq *q = (const Sweepfs__ReaddirReq *)msg;
	Sweepfs__ReaddirReply reply = SWEEPFS__READDIR_REPLY__INIT;
	struct master *m = r->m;
	uint32_t max_entries, max_bytes, count = 0;
	struct edge *e, *last = NULL;
	Sweepfs__Attr *attrs = NULL, **attrp = NULL;
	struct sw_buf out = SW_BUF_INIT;
	struct cursor *c;
	struct sw_cred cred;
	struct node *dir = NULL;
	bool search;
	int rc;

	cred = req_cred(q->cred);
	rc = get_dir(r, q->ino, &dir);
	if (rc == 0)
		rc = perm_check(&cred, dir, PERM_R);
	/* A caller who may read the directory but not search it learns its
	 * names, not the handles a lookup there would not give it. */
	search = rc == 0 && perm_check(&cred, dir, PERM_X) == 0;
	if (rc == 0 && (q->max_entries == 0 || q->max_bytes < SW_DIRENT_MAX))
		rc = -EINVAL;
	if (rc < 0)
		goto out_err;
	max_entries = SW_MIN(q->max_entries, SW_READDIR_MAX_ENTRIES);
	max_bytes = SW_MIN(q->max_bytes, SW_READDIR_MAX_BYTES);

	c = session_cursor(m, r->s, dir, false);
	if (q->cookie == 0)
		e = dir->u.dir->head;
	else if (c && c->pos && c->pos->id == q->cookie)
		e = c->pos->next;
	else
		e = ns_dir_seek(dir, q->cookie);
	e = ns_edge_live(e);

	rc = -ENOMEM;
	if (sw_buf_reserve(&out, max_bytes) < 0)
		goto out_err;
	if (q->plus) {
		attrs = malloc(max_entries * sizeof(*attrs));
		attrp = malloc(max_entries * sizeof(*attrp));
		if (!attrs || !attrp)
			goto out_err;
	}
	for (; e && count < max_entries; e = ns_edge_live(e->next)) {
		struct sw_dirent d = {
			.cookie = e->id,
			.ino = e->child->ino,
			.type = (uint8_t)((e->child->mode >> 12) & 15),
			.namelen = e->namelen,
			.name = e->name,
		};
		/* Attributes count against the budget too. */
		size_t need = SW_DIRENT_MAX + (q->plus ? 64 : 0);

		if (out.len + need > max_bytes)
			break;
		out.len += sw_dirent_put(out.data + out.len, &d);
		if (q->plus) {
			if (search)
				session_grant(r->s, e->child);
			attr_fill(r->m, &attrs[count], e->child);
			attrs[count].has_handle = search;
			attrp[count] = &attrs[count];
		}
		count++;
		last = e;
	}
	reply.has_entries = reply.has_count = reply.has_eof = 1;
	reply.entries.data = out.data;
	reply.entries.len = out.len;
	reply.count = count;
	reply.eof = e == NULL;
	if (q->plus) {
		reply.n_attrs = count;
		reply.attrs = attrp;
	}
	if (last && e) {
		/* No memory for the cursor: the next page seeks instead. */
		c = session_cursor(m, r->s, dir, true);
		if (c)
			ns_cursor_set(&m->ns, c, dir, last);
	} else if (c) {
		ns_cursor_clear(&m->ns, c);
	}
	r->s->ctr.readdir_entries += count;
	m->total->readdir_entries += count;
	watch_add(m, r->s, dir);
	req_reply(r, &reply.base);
	rc = 0;
out_err:
	if (rc < 0)
		req_error(r, rc);
	free(attrs);
	free(attrp);
	sw_buf_release(&out);
}
