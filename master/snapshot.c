/*
 * Snapshots and the snapshot flag, as MooseFS users know them:
 *   sweepfs snapshot SRC DST            (mfsmakesnapshot)
 *   sweepfs seteattr -f snapshot [-r]   (mfsseteattr)
 *   sweepfs rmsnapshot [-f] PATH        (mfsrmsnapshot)
 *
 * rmsnapshot without -f removes the tree only if every name in it
 * carries the flag (each directory counts the unflagged names below it),
 * then detaches it like rmr: it answers in the same time whatever the
 * number of files. With -f it removes what is flagged
 * and keeps the rest: fully flagged subtrees are detached whole, flagged
 * files in mixed directories are unlinked one by one.
 *
 * Who may: root, or the owner of the object named (for a snapshot, of the
 * source), with write and search permission on the directory changed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "fsio.h"
#include "handlers.h"
#include "req.h"
#include "rmr.h"
#include "snapjob.h"
#include "util.h"

/* Directory @parent (not detached) and its entry @name. */
static int find_entry(struct req *r, uint64_t parent,
		      const ProtobufCBinaryData *name, struct node **dir,
		      struct edge **e)
{
	if (name->len > SW_NAME_MAX)
		return -ENAMETOOLONG;
	if (!sw_name_valid(name->data, name->len))
		return -EINVAL;
	*dir = req_node(r, parent);
	if (!*dir)
		return -ENOENT;
	if (!S_ISDIR((*dir)->mode))
		return -ENOTDIR;
	if (ns_detached(*dir))
		return -ENOENT;
	*e = ns_lookup(&r->m->ns, *dir, (const char *)name->data, name->len);
	return *e ? 0 : -ENOENT;
}

void op_eattr(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__EattrReq *q = (const void *)msg;
	Sweepfs__EattrReply reply = SWEEPFS__EATTR_REPLY__INIT;
	Sweepfs__Meta__SetEattr se = SWEEPFS__META__SET_EATTR__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	struct sw_cred cred = req_cred(q->cred);
	struct node *dir;
	struct edge *e;
	int rc = find_entry(r, q->parent, &q->name, &dir, &e);

	if (rc == 0 && q->set && q->clear)
		rc = -EINVAL;
	if (rc == 0 && (q->set || q->clear) && !req_owns(r, &cred, e->child))
		rc = -EPERM;
	if (rc < 0)
		goto out_err;
	if (q->set || q->clear) {
		se.parent = dir->ino;
		se.name = q->name;
		se.snapshot = q->set;
		se.has_recursive = 1;
		se.recursive = q->recursive;
		se.has_owner = req_only_own(r, &cred, q->recursive, &se.owner);
		/* A mark instead of a walk (nsattr.c): the names older than
		 * the next edge id are those there now. */
		se.has_below = q->set && q->recursive && !se.has_owner;
		se.below = r->m->ns.next_edge;
		mut.time = sw_now_ns();
		mut.op_case = SWEEPFS__META__MUTATION__OP_SET_EATTR;
		mut.set_eattr = &se;
		rc = master_commit(r->m, r, &mut);
		if (rc < 0)
			goto out_err;
		e = ns_lookup(&r->m->ns, dir, (const char *)q->name.data,
			      q->name.len);
	}
	reply.has_snapshot = 1;
	reply.snapshot = e && ns_edge_snapshot(&r->m->ns, dir, e);
	req_reply(r, &reply.base);
	return;

out_err:
	req_error(r, rc);
}

void op_snapshot(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__SnapshotReq *q = (const void *)msg;
	struct sw_cred cred = req_cred(q->cred);
	struct master *m = r->m;
	struct node *src = req_node(r, q->src), *dir;
	int rc;

	if (q->name.len > SW_NAME_MAX)
		rc = -ENAMETOOLONG;
	else if (!sw_name_valid(q->name.data, q->name.len))
		rc = -EINVAL;
	else if (!src || ns_gone(src))
		rc = -ENOENT;
	else if (!(dir = req_node(r, q->parent)))
		rc = -ENOENT;
	else if (!S_ISDIR(dir->mode))
		rc = -ENOTDIR;
	else if (ns_detached(dir))
		rc = -ENOENT;
	else if (ns_lookup(&m->ns, dir, (const char *)q->name.data,
			   q->name.len))
		rc = -EEXIST;
	else if (S_ISDIR(src->mode) && ns_is_ancestor(src, dir))
		rc = -EINVAL;
	else if (!req_owns(r, &cred, src))
		rc = -EPERM;
	else
		rc = perm_check(&cred, dir, PERM_W | PERM_X);
	/* Queued; answered when the copy has its name (snapjob.c). */
	if (rc == 0)
		rc = snapjob_submit(m, r, cred.uid, src->ino, dir->ino,
				    q->name.data, q->name.len,
				    req_admin(r, &cred));
	if (rc < 0)
		req_error(r, rc);
}

/* Whether every name in the tree under directory @root is flagged, or
 * none is: directories keep count, so O(log n) whatever the tree; a
 * tree under a snapshot mark answers from the mark (nsattr.c). */
static bool all_flagged(struct master *m, struct node *root)
{
	return ns_tree_flagged(&m->ns, root);
}

/* The bits alone, with the marks written out first (remove_flagged). */
static bool none_flagged(const struct node *root)
{
	return ns_tree_plain(root) == ns_tree_names(root);
}

/*
 * rmsnapshot -f below @top: remove the flagged names, keep the rest. A
 * flagged directory whose tree is all flagged goes whole; a flagged one
 * with unflagged names inside stays and is gone through. Only directories
 * with flagged names below are entered (the counts say which), on a stack
 * of our own: any depth, no recursion.
 *
 * Each entry looked at is a visit, as in rmr.c's permission walk, and is
 * paid from the same buckets: a directory of a user's with one flagged
 * name first and 1 M unflagged files after it costs its permission walk
 * one visit but is read whole here, at every request. Past @limit visits
 * it stops with -EAGAIN; what it removed so far stays removed (each
 * removal is its own change), and -f run again goes on from what is
 * left: it converges.
 */
struct rf_frame {
	struct node *dir;
	struct edge *next; /* the next entry to look at */
};

static int remove_flagged(struct master *m, struct req *r, struct node *top,
			  uint64_t limit, uint64_t *visits,
			  Sweepfs__RmrReply *reply)
{
	struct rf_frame *st = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	if (sw_grow(&st, &cap, 1, sizeof(*st), 16) < 0)
		return -ENOMEM;
	st[n++] = (struct rf_frame){ top, ns_edge_live(top->u.dir->head) };
	while (n && rc == 0) {
		struct rf_frame *f = &st[n - 1];
		struct edge *e = f->next;
		struct node *dir = f->dir, *c;
		bool flagged;

		if (!e) {
			n--;
			continue;
		}
		if (*visits >= limit) {
			rc = -EAGAIN;
			break;
		}
		++*visits;
		f->next = ns_edge_live(e->next);
		c = e->child;
		flagged = e->flags & EDGE_SNAPSHOT;
		if (!S_ISDIR(c->mode)) {
			if (flagged)
				rc = remove_entry_now(m, r, dir, e, false,
						      reply);
		} else if (flagged && all_flagged(m, c)) {
			rc = remove_entry_now(m, r, dir, e, false, reply);
		} else if (!none_flagged(c)) {
			rc = sw_grow(&st, &cap, n + 1, sizeof(*st), 16);
			if (rc == 0)
				st[n++] = (struct rf_frame){
					c, ns_edge_live(c->u.dir->head)
				};
		}
	}
	free(st);
	return rc;
}

/*
 * remove_flagged() as @c, paid (rmr.h) like the permission walk that came
 * before it, which made @spent visits. Admin callers pay nothing here
 * either: they skip the permission walk, may remove the whole tree in one
 * step anyway, and the budget bounds what untrusted callers make the loop
 * do; charging them would let the users who drain everyone's bucket stop
 * root's clean-up too. -EAGAIN when the budget ran out (retry: it goes on
 * from what is left), -E2BIG when a whole walk's worth removed nothing
 * (retrying would read the same entries again).
 */
static int remove_flagged_paid(struct req *r, const struct sw_cred *c,
			       struct node *top, uint64_t spent,
			       Sweepfs__RmrReply *reply)
{
	uint64_t limit = rmr_visits_may(r, c, spent), visits = 0;
	uint64_t before = reply->nodes;
	int rc = remove_flagged(r->m, r, top, limit, &visits, reply);

	rmr_visits_pay(r, c, visits);
	if (rc == -EAGAIN && spent + limit >= rmr_budget.walk &&
	    reply->nodes == before)
		rc = -E2BIG;
	return rc;
}

void op_rmsnapshot(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__RmsnapshotReq *q = (const void *)msg;
	Sweepfs__RmrReply reply = SWEEPFS__RMR_REPLY__INIT;
	struct sw_cred cred = req_cred(q->cred);
	struct node *dir, *n;
	struct edge *e;
	uint64_t visits = 0;
	int rc = find_entry(r, q->parent, &q->name, &dir, &e);

	if (rc < 0)
		goto out;
	n = e->child;
	rc = perm_check(&cred, dir, PERM_W | PERM_X);
	if (rc == 0)
		rc = may_detach_entry(r, &cred, dir, n, &visits);
	if (rc < 0)
		goto out;
	if (ns_edge_snapshot(&r->m->ns, dir, e) &&
	    (!S_ISDIR(n->mode) || all_flagged(r->m, n)))
		rc = remove_entry_now(r->m, r, dir, e, false, &reply);
	else if (!q->force)
		rc = -EPERM; /* something in it lacks the flag */
	else if (S_ISDIR(n->mode)) {
		/* -f reads the bits: the marks over or under it first. */
		rc = ns_snap_settle(&r->m->ns, n);
		if (rc == 0 && !none_flagged(n))
			rc = remove_flagged_paid(r, &cred, n, visits, &reply);
	}
	/* Stopped part-way: what was removed is committed (and the answer
	 * waits until it is durable, as any); say so with the error. */
	if ((rc == -EAGAIN || rc == -E2BIG) && reply.nodes) {
		reply.has_err = 1;
		reply.err = -rc;
		rc = 0;
	}
out:
	req_answer(r, rc, &reply.base);
}
