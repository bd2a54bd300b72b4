/*
 * Lock requests (LockReq): check them, and put them to the lock table
 * (locks.h) on behalf of the session that sent them.
 *
 * A SET with `wait` that conflicts is kept (req_defer()) in the table's
 * queue for its inode and answered when the table grants it, or fails it:
 * EINTR when the mount cancels it (FUSE interrupt) or its connection or
 * session goes, ENOENT when the file is freed, ENOLCK when memory runs
 * out. The deferred request holds its connection, never its session.
 *
 * Permissions: a lock needs only the node, as the session may see it
 * (req_node()); whether the descriptor was opened for reading or writing
 * is the kernel's to check, as it is for local files. Locks change no
 * metadata: they are allowed through read-only exports and never
 * journaled (a master restart loses them). A session on a read-only
 * export may hold few (cfg.locks_per_ro_session, and wait for
 * lock_waiters_per_ro_session): its read locks are a way to make others'
 * writers wait and to fill the master's memory, and a reader on such an
 * export needs a handful (a database's shared lock), not thousands.
 * Over all sessions the table has its own caps (locks.h).
 */
#include <errno.h>
#include <inttypes.h>

#include "lockops.h"
#include "log.h"
#include "handlers.h"
#include "context.h"
#include "req.h"
#include "sessrec.h"

#define TAG "locks"

void lockops_wake(void *arg, void *waiter, int rc)
{
	struct req *d = waiter;
	Sweepfs__LockReply reply = SWEEPFS__LOCK_REPLY__INIT;

	(void)arg;
	if (rc < 0)
		req_error(d, rc);
	else
		req_reply(d, &reply.base);
	req_done(d);
}

void lockops_node_gone(void *arg, uint64_t ino)
{
	struct master *m = arg;

	locks_drop_inode(&m->locks, ino);
}

/* The lock @q describes, checked: 0, or -EINVAL. */
static int lock_desc_from(const Sweepfs__LockReq *q, struct lock_desc *d)
{
	bool set = q->op == SWEEPFS__LOCK_OP__LOCK_OP_SET;
	bool get = q->op == SWEEPFS__LOCK_OP__LOCK_OP_GET;

	if (q->op != SWEEPFS__LOCK_OP__LOCK_OP_SET &&
	    q->op != SWEEPFS__LOCK_OP__LOCK_OP_GET &&
	    q->op != SWEEPFS__LOCK_OP__LOCK_OP_CANCEL &&
	    q->op != SWEEPFS__LOCK_OP__LOCK_OP_DROP)
		return -EINVAL;
	if (q->kind != SWEEPFS__LOCK_KIND__LOCK_POSIX &&
	    q->kind != SWEEPFS__LOCK_KIND__LOCK_FLOCK)
		return -EINVAL;
	d->kind = q->kind == SWEEPFS__LOCK_KIND__LOCK_FLOCK ? LOCK_KIND_FLOCK :
							      LOCK_KIND_POSIX;
	d->owner = q->owner;
	d->pid = q->has_pid ? q->pid : 0;
	d->start = 0;
	d->end = LOCK_OFFSET_MAX;
	d->type = LOCK_TYPE_UNLOCK;
	if (!set && !get) {
		/* CANCEL and DROP name an owner, nothing more. */
		return q->has_wait && q->wait ? -EINVAL : 0;
	}
	if (!q->has_type)
		return -EINVAL;
	switch (q->type) {
	case SWEEPFS__LOCK_TYPE__LOCK_UNLOCK:
		if (get)
			return -EINVAL;
		d->type = LOCK_TYPE_UNLOCK;
		break;
	case SWEEPFS__LOCK_TYPE__LOCK_READ:
		d->type = LOCK_TYPE_READ;
		break;
	case SWEEPFS__LOCK_TYPE__LOCK_WRITE:
		d->type = LOCK_TYPE_WRITE;
		break;
	default:
		return -EINVAL;
	}
	if (get && (d->kind != LOCK_KIND_POSIX || (q->has_wait && q->wait)))
		return -EINVAL;
	if (d->kind == LOCK_KIND_POSIX) {
		if (!q->has_start || !q->has_end || q->start > q->end ||
		    q->end > LOCK_OFFSET_MAX)
			return -EINVAL;
		d->start = q->start;
		d->end = q->end;
	}
	return 0;
}

/* Whether a session on a read-only export is under its caps for one
 * more lock (or wait). A split range may count one more than checked. */
static bool ro_may_lock(struct master *m, const struct session *s,
			const Sweepfs__LockReq *q)
{
	uint64_t waiters, held;

	if (s->rw)
		return true;
	held = locks_session_count(&m->locks, s->id, &waiters);
	if (q->has_wait && q->wait &&
	    waiters >= m->cfg.lock_waiters_per_ro_session)
		return false;
	return held < m->cfg.locks_per_ro_session;
}

void op_lock(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__LockReq *q = (const Sweepfs__LockReq *)msg;
	Sweepfs__LockReply reply = SWEEPFS__LOCK_REPLY__INIT;
	struct master *m = r->m;
	struct lock_desc d = { .ino = q->ino };
	struct lock_desc held;
	struct req *deferred = NULL;
	bool wait;
	int rc;

	rc = lock_desc_from(q, &d);
	if (rc == 0 && !req_node(r, q->ino))
		rc = req_node_err(r, q->ino);
	if (rc < 0) {
		req_error(r, rc);
		return;
	}
	d.session = r->s->id;
	/* Locks belong to open files; a POSIX write lock to one open for
	 * writing (fcntl(2): EBADF otherwise). Dropping and cancelling
	 * need neither: they come also after the last close. */
	if ((q->op == SWEEPFS__LOCK_OP__LOCK_OP_SET ||
	     q->op == SWEEPFS__LOCK_OP__LOCK_OP_GET) &&
	    !session_has_open(r->s, q->ino))
		rc = -EBADF;
	else if (q->op == SWEEPFS__LOCK_OP__LOCK_OP_SET &&
		 d.kind == LOCK_KIND_POSIX && d.type == LOCK_TYPE_WRITE &&
		 !session_has_writable(r->s, q->ino))
		rc = -EBADF;
	if (rc == 0 && q->op == SWEEPFS__LOCK_OP__LOCK_OP_SET &&
	    d.type != LOCK_TYPE_UNLOCK && !ro_may_lock(m, r->s, q))
		rc = -ENOLCK;
	if (rc < 0) {
		req_error(r, rc);
		return;
	}
	switch (q->op) {
	case SWEEPFS__LOCK_OP__LOCK_OP_SET:
		wait = q->has_wait && q->wait && d.type != LOCK_TYPE_UNLOCK;
		if (wait) {
			deferred = req_defer(r);
			if (!deferred) {
				req_error(r, -ENOLCK);
				return;
			}
		}
		rc = locks_set(&m->locks, &d, wait, deferred);
		if (rc == 1)
			return; /* queued: lockops_wake() answers */
		if (deferred)
			req_done(deferred);
		if (rc < 0) {
			req_error(r, rc == -ENOMEM ? -ENOLCK : rc);
			return;
		}
		break;
	case SWEEPFS__LOCK_OP__LOCK_OP_GET:
		reply.has_type = 1;
		reply.type = SWEEPFS__LOCK_TYPE__LOCK_UNLOCK;
		if (locks_get(&m->locks, &d, &held)) {
			reply.type = held.type == LOCK_TYPE_WRITE ?
					     SWEEPFS__LOCK_TYPE__LOCK_WRITE :
					     SWEEPFS__LOCK_TYPE__LOCK_READ;
			reply.has_start = reply.has_end = reply.has_pid = 1;
			reply.start = held.start;
			reply.end = held.end;
			reply.pid = held.pid;
		}
		break;
	case SWEEPFS__LOCK_OP__LOCK_OP_CANCEL:
		if (locks_cancel(&m->locks, d.ino, d.session, d.owner,
				 (enum lock_kind)d.kind))
			sw_debug(TAG,
				 "session %016" PRIx64 ": lock wait on "
				 "%" PRIu64 " interrupted",
				 d.session, d.ino);
		break;
	default: /* DROP */
		locks_drop_owner(&m->locks, d.ino, d.session, d.owner,
				 (enum lock_kind)d.kind);
		break;
	}
	req_reply(r, &reply.base);
}
