/*
 * File locks for the kernel: fcntl() byte-range locks (getlk, setlk) and
 * flock(), held by the master for every mount of it, so that they hold
 * across machines (master/locks.h). The master forgets them if it
 * restarts; a reconnect to a master that stayed up keeps them.
 *
 * Owners: FUSE names one per request (fi->lock_owner): for fcntl locks
 * the process's file table, for flock the open file description. The
 * master keys locks by (our session, that owner).
 *
 * Blocking requests (F_SETLKW, flock without LOCK_NB) are sent like any
 * other: the master answers when it grants them, the receiver thread
 * replies to the kernel then, and no FUSE worker waits meanwhile. When
 * the kernel interrupts one (a signal, or the process being killed), we
 * ask the master to cancel it and it answers EINTR. The interrupt may
 * come before the request went out, or after it was answered: blocked
 * requests are registered by id under a mutex, the interrupt callback
 * gets only the id (its req may outlive our context), and whichever of
 * "sent" and "interrupted" happens second sends the cancel.
 *
 * Release: the kernel does not tell us of a process's fcntl locks when it
 * closes a descriptor; it sends FLUSH with the lock owner, and we drop
 * that owner's locks on the file. FLUSH then costs a round trip to the
 * master on every close, so only files this mount has taken fcntl locks
 * on (since the last of its handles on them closed) pay it; for others
 * it is answered at once. flock locks go on the release of their file
 * handle (FUSE_RELEASE_FLOCK_UNLOCK).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

#include "frame.h"
#include "hash.h"
#include "log.h"
#include "mount_i.h"
#include "reply.h"

#define TAG "lock"
#define LOCKED_BUCKETS 64u /* locked inodes are few */

/* A blocked request, until answered. */
struct lock_wait {
	uint64_t id;
	fuse_req_t req;
	uint64_t ino, owner;
	int kind;	  /* SWEEPFS__LOCK_KIND__* */
	bool sent;	  /* mconn_send() returned */
	bool interrupted; /* the kernel interrupted it */
	struct lock_wait *next;
};

/* An inode with fcntl locks taken through this mount. */
struct locked_ino {
	uint64_t ino;
	struct locked_ino *next;
};

struct lock_table {
	pthread_mutex_t mu;
	uint64_t next_id;
	struct lock_wait *waits;
	struct locked_ino *locked[LOCKED_BUCKETS];
};

int lock_table_new(struct lock_table **out)
{
	struct lock_table *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->mu, NULL);
	t->next_id = 1;
	*out = t;
	return 0;
}

void lock_table_free(struct lock_table *t)
{
	for (unsigned i = 0; i < LOCKED_BUCKETS; i++) {
		while (t->locked[i]) {
			struct locked_ino *l = t->locked[i];

			t->locked[i] = l->next;
			free(l);
		}
	}
	/* Waits are answered (with EIO) when the connection closes. */
	pthread_mutex_destroy(&t->mu);
	free(t);
}

static struct locked_ino **locked_slot(struct lock_table *t, uint64_t ino)
{
	struct locked_ino **pp = &t->locked[sw_hash_u64(ino) % LOCKED_BUCKETS];

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

/* Remember that fcntl locks may exist on @ino. false: out of memory. */
static bool locked_add(struct lock_table *t, uint64_t ino)
{
	struct locked_ino **pp, *l;
	bool ok = true;

	pthread_mutex_lock(&t->mu);
	pp = locked_slot(t, ino);
	if (!*pp) {
		l = malloc(sizeof(*l));
		if (l) {
			l->ino = ino;
			l->next = NULL;
			*pp = l;
		} else {
			ok = false;
		}
	}
	pthread_mutex_unlock(&t->mu);
	return ok;
}

static bool locked_has(struct lock_table *t, uint64_t ino)
{
	bool has;

	pthread_mutex_lock(&t->mu);
	has = *locked_slot(t, ino) != NULL;
	pthread_mutex_unlock(&t->mu);
	return has;
}

static void locked_remove(struct lock_table *t, uint64_t ino)
{
	struct locked_ino **pp, *l;

	pthread_mutex_lock(&t->mu);
	pp = locked_slot(t, ino);
	l = *pp;
	if (l)
		*pp = l->next;
	pthread_mutex_unlock(&t->mu);
	free(l);
}

/* The wait with @id, taken out of the list if @take; mu held. */
static struct lock_wait *wait_find(struct lock_table *t, uint64_t id, bool take)
{
	for (struct lock_wait **pp = &t->waits, *w; (w = *pp); pp = &w->next) {
		if (w->id != id)
			continue;
		if (take)
			*pp = w->next;
		return w;
	}
	return NULL;
}

static void send_lock(struct mount *m, Sweepfs__LockOp op, int kind,
		      uint64_t ino, uint64_t owner, mconn_cb cb, void *arg)
{
	Sweepfs__LockReq q = SWEEPFS__LOCK_REQ__INIT;

	q.ino = ino;
	q.op = op;
	q.kind = kind;
	q.owner = owner;
	mconn_send(m->mc, SW_MSG_LOCK, &q.base, cb, arg);
}

static void send_cancel(struct mount *m, const struct lock_wait *w)
{
	send_lock(m, SWEEPFS__LOCK_OP__LOCK_OP_CANCEL, w->kind, w->ino,
		  w->owner, NULL, NULL);
}

/* FUSE interrupted a blocked request. @data is its wait's id. */
static void lock_interrupted(fuse_req_t req, void *data)
{
	struct mount *m = fuse_req_userdata(req);
	struct lock_table *t = m->locks;
	struct lock_wait *w, copy;
	bool cancel = false;

	pthread_mutex_lock(&t->mu);
	w = wait_find(t, (uint64_t)(uintptr_t)data, false);
	if (w && !w->interrupted) {
		w->interrupted = true;
		cancel = w->sent;
		copy = *w;
	}
	pthread_mutex_unlock(&t->mu);
	if (cancel)
		send_cancel(m, &copy);
}

static void wait_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct lock_wait *w = arg;
	struct mount *m = fuse_req_userdata(w->req);

	(void)reply;
	pthread_mutex_lock(&m->locks->mu);
	wait_find(m->locks, w->id, true);
	pthread_mutex_unlock(&m->locks->mu);
	reply_status(w->req, rc);
	free(w);
}

static void set_done(void *arg, int rc, ProtobufCMessage **reply)
{
	(void)reply;
	reply_status(arg, rc);
}

/* Send a SET for @q, blocking if @sleep, and answer @req when done.
 * Returns 0, or -ENOLCK (nothing sent, @req not answered). */
static int send_set(struct mount *m, fuse_req_t req, Sweepfs__LockReq *q,
		    bool sleep)
{
	struct lock_table *t = m->locks;
	struct lock_wait *w, copy;
	uint64_t id;
	bool cancel = false;

	if (!sleep) {
		mconn_send(m->mc, SW_MSG_LOCK, &q->base, set_done, req);
		return 0;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOLCK;
	w->req = req;
	w->ino = q->ino;
	w->owner = q->owner;
	w->kind = q->kind;
	pthread_mutex_lock(&t->mu);
	id = w->id = t->next_id++;
	w->next = t->waits;
	t->waits = w;
	pthread_mutex_unlock(&t->mu);
	/* Before sending: once sent, the reply may free req any moment.
	 * If the kernel interrupted it already, this calls
	 * lock_interrupted() now, which notes it for below. */
	fuse_req_interrupt_func(req, lock_interrupted, (void *)(uintptr_t)id);
	mconn_send(m->mc, SW_MSG_LOCK, &q->base, wait_done, w);
	/* w may be gone now: look it up again. */
	pthread_mutex_lock(&t->mu);
	w = wait_find(t, id, false);
	if (w) {
		w->sent = true;
		cancel = w->interrupted;
		copy = *w;
	}
	pthread_mutex_unlock(&t->mu);
	if (cancel)
		send_cancel(m, &copy);
	return 0;
}

/* A struct flock's range as the protocol's first and last byte; the
 * kernel has made l_start absolute and l_len non-negative. */
static int flock_range(const struct flock *l, uint64_t *start, uint64_t *end)
{
	if (l->l_start < 0 || l->l_len < 0)
		return -EINVAL;
	*start = (uint64_t)l->l_start;
	if (l->l_len == 0 ||
	    (uint64_t)l->l_len - 1 >= (uint64_t)INT64_MAX - *start)
		*end = (uint64_t)INT64_MAX;
	else
		*end = *start + (uint64_t)l->l_len - 1;
	return 0;
}

static int fcntl_type(short t, Sweepfs__LockType *out)
{
	switch (t) {
	case F_RDLCK:
		*out = SWEEPFS__LOCK_TYPE__LOCK_READ;
		return 0;
	case F_WRLCK:
		*out = SWEEPFS__LOCK_TYPE__LOCK_WRITE;
		return 0;
	case F_UNLCK:
		*out = SWEEPFS__LOCK_TYPE__LOCK_UNLOCK;
		return 0;
	default:
		return -EINVAL;
	}
}

/* The POSIX request for @lock from @fi's owner; 0 or -EINVAL. */
static int posix_req(fuse_req_t req, uint64_t ino,
		     const struct fuse_file_info *fi, const struct flock *lock,
		     Sweepfs__LockReq *q)
{
	Sweepfs__LockType type;
	int rc;

	rc = fcntl_type(lock->l_type, &type);
	if (rc == 0)
		rc = flock_range(lock, &q->start, &q->end);
	if (rc < 0)
		return rc;
	q->ino = ino;
	q->kind = SWEEPFS__LOCK_KIND__LOCK_POSIX;
	q->owner = fi->lock_owner;
	q->has_type = q->has_start = q->has_end = q->has_pid = 1;
	q->type = type;
	q->pid = (uint32_t)fuse_req_ctx(req)->pid;
	return 0;
}

struct getlk_ctx {
	fuse_req_t req;
	struct flock lock; /* as asked */
};

static void getlk_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct getlk_ctx *c = arg;
	const Sweepfs__LockReply *r = (const void *)*reply;
	struct flock out = c->lock;

	if (rc < 0) {
		reply_lock(c->req, rc, NULL);
		goto out;
	}
	if (!r->has_type || r->type == SWEEPFS__LOCK_TYPE__LOCK_UNLOCK) {
		out.l_type = F_UNLCK;
	} else {
		out.l_type = r->type == SWEEPFS__LOCK_TYPE__LOCK_WRITE ?
				     F_WRLCK :
				     F_RDLCK;
		out.l_whence = SEEK_SET;
		out.l_start = (off_t)r->start;
		/* libfuse turns l_len 0 back into "to OFFSET_MAX". */
		out.l_len = r->end >= (uint64_t)INT64_MAX ?
				    0 :
				    (off_t)(r->end - r->start + 1);
		out.l_pid = (pid_t)r->pid;
	}
	reply_lock(c->req, 0, &out);
out:
	free(c);
}

int lock_getlk(struct mount *m, fuse_req_t req, uint64_t ino,
	       struct fuse_file_info *fi, struct flock *lock)
{
	Sweepfs__LockReq q = SWEEPFS__LOCK_REQ__INIT;
	struct getlk_ctx *c;
	int rc;

	rc = posix_req(req, ino, fi, lock, &q);
	if (rc == 0 && q.type == SWEEPFS__LOCK_TYPE__LOCK_UNLOCK)
		rc = -EINVAL;
	if (rc < 0)
		return rc;
	c = malloc(sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->req = req;
	c->lock = *lock;
	q.op = SWEEPFS__LOCK_OP__LOCK_OP_GET;
	mconn_send(m->mc, SW_MSG_LOCK, &q.base, getlk_done, c);
	return 0;
}

int lock_setlk(struct mount *m, fuse_req_t req, uint64_t ino,
	       struct fuse_file_info *fi, struct flock *lock, bool sleep)
{
	Sweepfs__LockReq q = SWEEPFS__LOCK_REQ__INIT;
	int rc;

	rc = posix_req(req, ino, fi, lock, &q);
	if (rc < 0)
		return rc;
	/* Before the lock exists: a close must find it to drop it. */
	if (q.type != SWEEPFS__LOCK_TYPE__LOCK_UNLOCK &&
	    !locked_add(m->locks, ino))
		return -ENOLCK;
	q.op = SWEEPFS__LOCK_OP__LOCK_OP_SET;
	q.has_wait = 1;
	q.wait = sleep && q.type != SWEEPFS__LOCK_TYPE__LOCK_UNLOCK;
	return send_set(m, req, &q, q.wait);
}

int lock_flock(struct mount *m, fuse_req_t req, uint64_t ino,
	       struct fuse_file_info *fi, int op)
{
	Sweepfs__LockReq q = SWEEPFS__LOCK_REQ__INIT;

	switch (op & ~LOCK_NB) {
	case LOCK_SH:
		q.type = SWEEPFS__LOCK_TYPE__LOCK_READ;
		break;
	case LOCK_EX:
		q.type = SWEEPFS__LOCK_TYPE__LOCK_WRITE;
		break;
	case LOCK_UN:
		q.type = SWEEPFS__LOCK_TYPE__LOCK_UNLOCK;
		break;
	default:
		return -EINVAL;
	}
	q.ino = ino;
	q.op = SWEEPFS__LOCK_OP__LOCK_OP_SET;
	q.kind = SWEEPFS__LOCK_KIND__LOCK_FLOCK;
	q.owner = fi->lock_owner;
	q.has_type = q.has_pid = q.has_wait = 1;
	q.pid = (uint32_t)fuse_req_ctx(req)->pid;
	q.wait = !(op & LOCK_NB) && q.type != SWEEPFS__LOCK_TYPE__LOCK_UNLOCK;
	return send_set(m, req, &q, q.wait);
}

static void flush_done(void *arg, int rc, ProtobufCMessage **reply)
{
	(void)reply;
	/* The descriptor is closed whatever happened: a lock the master
	 * could not be told to drop goes with our session at the latest. */
	if (rc < 0)
		sw_warn(TAG, "dropping locks at close: %s", strerror(-rc));
	reply_status(arg, 0);
}

int lock_flush(struct mount *m, fuse_req_t req, uint64_t ino,
	       struct fuse_file_info *fi)
{
	if (!locked_has(m->locks, ino))
		return 1;
	send_lock(m, SWEEPFS__LOCK_OP__LOCK_OP_DROP,
		  SWEEPFS__LOCK_KIND__LOCK_POSIX, ino, fi->lock_owner,
		  flush_done, req);
	return 0;
}

void lock_release(struct mount *m, uint64_t ino,
		  const struct fuse_file_info *fi, bool last)
{
	/* Nobody waits for this one; it goes before any later request, and
	 * after a reconnect too (it is resent). */
	if (fi->flock_release)
		send_lock(m, SWEEPFS__LOCK_OP__LOCK_OP_DROP,
			  SWEEPFS__LOCK_KIND__LOCK_FLOCK, ino, fi->lock_owner,
			  NULL, NULL);
	/* No handle of ours is open on it any more, so no process here
	 * holds fcntl locks on it: closes need not ask the master. */
	if (last)
		locked_remove(m->locks, ino);
}
