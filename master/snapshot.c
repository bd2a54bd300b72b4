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
#include "sessrec.h"
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
 * What one request removes at most. Each removal is a change of its own
 * (a record, a node freed, watchers told): about 2.2 us here, so one
 * rmsnapshot -f of a directory of 1 M flagged files held the loop 2.2 s
 * for everyone (integration.rmrwalk, "flagged"). At this many a request
 * holds it about 5 ms, and sweepfs rmsnapshot -f asks again at once
 * while each answer removed something (tool_remove_paced()). Admin
 * callers too: the bound is the loop's, not a budget.
 */
#define RF_REMOVALS_MAX 2048

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
 * one visit but is read here. Past @limit visits, or once it removed
 * RF_REMOVALS_MAX names, it stops with -EAGAIN; what it removed stays
 * removed (each removal is its own change). Where it stopped is noted
 * in the session (struct rf_resume), and the same caller's next -f of
 * the same directory, within RF_RESUME_NS, goes on from there rather
 * than reading again what it kept: a directory of 1 M kept names and
 * then 1 M flagged ones is read once, not once for each 2,048 removed.
 * Names made meanwhile come after the point it stopped at (edge ids
 * grow) and are seen; a name flagged, moved or copied meanwhile into a
 * part already read is not, as a file made meanwhile in a directory
 * rm -rf has read stays.
 */
struct rf_frame {
	struct node *dir;
	struct edge *next; /* the next entry to look at */
};

/* How deep a stack is noted to go on from (deeper: the next -f starts
 * over), and how long a note is good for. */
#define RF_RESUME_DEPTH 32
#define RF_RESUME_NS (60 * 1000000000ll)

struct rf_resume {
	uint64_t top; /* the directory -f was asked of */
	uint32_t uid; /* by whom */
	int64_t at;   /* mono ns */
	unsigned n;
	struct {
		uint64_t dir;
		uint64_t from; /* the next entry's edge id; 0: none left */
	} f[RF_RESUME_DEPTH];
};

static void rf_forget(struct session *s)
{
	if (s) {
		free(s->rf_resume);
		s->rf_resume = NULL;
	}
}

/* Whether directory @d, noted, is still a frame of a walk from @top
 * after @up (NULL: the first): @top itself first, then each a live
 * directory under @top whose parent is the frame before's. */
static bool rf_still(const struct node *top, const struct node *up,
		     const struct node *d)
{
	if (!d || !S_ISDIR(d->mode))
		return false;
	if (!up)
		return d == top;
	return d->u.dir->parent == up && ns_is_ancestor(top, d);
}

/*
 * The stack @s's last -f of @top by @uid stopped with, if each frame's
 * directory is still where it was (rf_still()): a path from @top, as the
 * walk's stack is, so walking one frame's directory never reaches
 * another frame's entries. Else @top from its first entry, the note
 * dropped.
 */
static int rf_start(struct master *m, struct session *s, uint32_t uid,
		    struct node *top, struct rf_frame **st, size_t *n,
		    size_t *cap)
{
	const struct rf_resume *rs = s ? s->rf_resume : NULL;
	bool mine = rs && rs->top == top->ino && rs->uid == uid &&
		    sw_mono_ns() - rs->at < RF_RESUME_NS;

	for (unsigned i = 0; mine && i < rs->n; i++) {
		struct node *d = ns_get(&m->ns, rs->f[i].dir);
		struct edge *e = NULL;

		if (!rf_still(top, i ? (*st)[i - 1].dir : NULL, d)) {
			*n = 0;
			break;
		}
		if (rs->f[i].from)
			e = ns_edge_live(ns_dir_seek(d, rs->f[i].from - 1));
		if (sw_grow(st, cap, *n + 1, sizeof(**st), 16) < 0)
			return -ENOMEM;
		(*st)[(*n)++] = (struct rf_frame){ d, e };
	}
	if (rs && !*n)
		rf_forget(s);
	if (*n)
		return 0;
	if (sw_grow(st, cap, 1, sizeof(**st), 16) < 0)
		return -ENOMEM;
	(*st)[(*n)++] =
		(struct rf_frame){ top, ns_edge_live(top->u.dir->head) };
	return 0;
}

/* Note in @s where -f of @top by @uid stopped (@n frames of @st):
 * whether it was (not too deep a stack, and memory for it). */
static bool rf_note(struct session *s, uint32_t uid, const struct node *top,
		    const struct rf_frame *st, size_t n)
{
	struct rf_resume *rs = s ? s->rf_resume : NULL;

	if (!s || n > RF_RESUME_DEPTH || (!rs && !(rs = malloc(sizeof(*rs))))) {
		rf_forget(s);
		return false;
	}
	s->rf_resume = rs;
	rs->top = top->ino;
	rs->uid = uid;
	rs->at = sw_mono_ns();
	rs->n = (unsigned)n;
	for (size_t i = 0; i < n; i++) {
		rs->f[i].dir = st[i].dir->ino;
		rs->f[i].from = st[i].next ? st[i].next->id : 0;
	}
	return true;
}

/* As the comment above says; *@noted: whether it stopped and noted
 * where. */
static int remove_flagged(struct master *m, struct req *r, uint32_t uid,
			  struct node *top, uint64_t limit, uint64_t *visits,
			  bool *noted, Sweepfs__RmrReply *reply)
{
	struct rf_frame *st = NULL;
	size_t n = 0, cap = 0;
	unsigned removals = 0;
	int rc = rf_start(m, r->s, uid, top, &st, &n, &cap);

	while (n && rc == 0) {
		struct rf_frame *f = &st[n - 1];
		struct edge *e = f->next;
		struct node *dir = f->dir, *c;

		if (!e) {
			n--;
			continue;
		}
		if (*visits >= limit || removals == RF_REMOVALS_MAX) {
			rc = -EAGAIN;
			break;
		}
		++*visits;
		f->next = ns_edge_live(e->next);
		c = e->child;
		if ((e->flags & EDGE_SNAPSHOT) &&
		    (!S_ISDIR(c->mode) || all_flagged(m, c))) {
			removals++;
			rc = remove_entry_now(m, r, dir, e, false, reply);
		} else if (S_ISDIR(c->mode) && !none_flagged(c)) {
			rc = sw_grow(&st, &cap, n + 1, sizeof(*st), 16);
			if (rc == 0)
				st[n++] = (struct rf_frame){
					c, ns_edge_live(c->u.dir->head)
				};
		}
	}
	*noted = rc == -EAGAIN && rf_note(r->s, uid, top, st, n);
	free(st);
	return rc;
}

/*
 * remove_flagged() as @c, paid (rmr.h) like the permission walk that came
 * before it, which made @spent visits. Admin callers pay nothing here
 * either: they skip the permission walk, may remove the whole tree in one
 * step anyway, and the budget bounds what untrusted callers make the loop
 * do; charging them would let the users who drain everyone's bucket stop
 * root's clean-up too. -EAGAIN when it stopped part-way (retry: the
 * session goes on from there), -E2BIG when a whole walk's worth removed
 * nothing and could not be noted, or could only be noted where it began
 * (retrying would read the same entries again).
 */
static int remove_flagged_paid(struct req *r, const struct sw_cred *c,
			       struct node *top, uint64_t spent,
			       Sweepfs__RmrReply *reply)
{
	uint64_t limit = rmr_visits_may(r, c, spent), visits = 0;
	uint64_t before = reply->nodes;
	bool noted;
	int rc = remove_flagged(r->m, r, c->uid, top, limit, &visits, &noted,
				reply);

	rmr_visits_pay(r, c, visits);
	/* Not noted, or noted where it began (its permission walk spent a
	 * whole walk): the next request would do the same again. */
	if (rc == -EAGAIN && (!noted || visits == 0) &&
	    spent + limit >= rmr_budget.walk && reply->nodes == before)
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
	bool stopped = false;
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
	stopped = rc == -EAGAIN;
	/* Stopped part-way: what was removed is committed (and the answer
	 * waits until it is durable, as any); say so with the error. */
	if ((rc == -EAGAIN || rc == -E2BIG) && reply.nodes) {
		reply.has_err = 1;
		reply.err = -rc;
		rc = 0;
	}
out:
	/* Only a -f stopped part-way, or refused before its walk for the
	 * budget, goes on where it stopped. */
	if (!stopped && rc != -EAGAIN)
		rf_forget(r->s);
	req_answer(r, rc, &reply.base);
}
