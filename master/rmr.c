/*
 * Server-side recursive removal: one request takes a whole tree out of
 * the namespace (ns_detach, one changelog record) and the purge frees it
 * in the background.
 *
 * Permissions are those of rm -rf run by the caller: write and search on
 * the parent (and the sticky rule for the tree's root), and in every
 * directory of the tree that has entries, read, write and search (and the
 * sticky rule for each entry of a sticky directory). Root may remove
 * anything. The check walks the tree's directories before anything
 * changes, so a refusal removes nothing; it looks at no file but in a
 * sticky directory another user owns, and at a directory's list only as
 * far as its last subdirectory: a tree of two directories of 17 M files
 * each costs three visits, not 34 M.
 *
 * What the walk may cost the loop. Some trees still cost a visit an
 * entry: a directory of many files with a subdirectory last, a sticky
 * directory of another owner's. At about 9 ns a visit, a walk of 1 M
 * visits holds the loop 9 ms, and a client pipelining such requests
 * (refused or not: the walk comes first) kept it for seconds (threat
 * model, finding 4). So, as grants are (deleg.c), a user's walk is paid,
 * one token a visit, from two buckets (bucket.h): its session's
 * (RMR_VISITS_SESSION a second, holding one walk's worst,
 * RMR_VISITS_WALK) and everyone's (RMR_VISITS_ALL a second, holding one
 * such walk too, so that however many sessions send them, one turn of
 * the loop makes one walk's worth of visits, and what refills while it
 * walks (2% more at 9 ns a visit), at most). A walk may make as many
 * visits as both hold, and no more than RMR_VISITS_WALK (about 18 ms);
 * the visits it made are paid whatever its verdict. A walk that runs out
 * stops there, having removed nothing: -EAGAIN when a bucket held less
 * than a walk's worst (the caller may retry once they refill: sweepfs
 * rmr does, for a while), -E2BIG when even that was not enough (no retry
 * helps: the tree needs an admin, or its subdirectories removed first,
 * which makes its big directories leaves). A pipelining client pays its
 * first walk in full and then gets refusals that cost no visit; many
 * sessions together take RMR_VISITS_ALL a second at most. Admin callers
 * do not walk (may_detach_entry()), and pay nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "rmr.h"
#include "handlers.h"
#include "bucket.h"
#include "context.h"
#include "purge.h"
#include "req.h"
#include "sessrec.h"
#include "watch.h"
#include "util.h"

/* The master's (see the top): a session's bucket and everyone's hold
 * one walk at most. Everyone's held two until 2026-12-01: 64 sessions
 * each sending one walk of 1 M visits got four of them into one turn,
 * and under ASan (45-50 ns a visit) another session's ping waited
 * 180-222 ms behind them (integration.rmrwalk, bound 200 ms). */
const struct rmr_budget rmr_budget = {
	.session = { RMR_VISITS_SESSION, RMR_VISITS_WALK },
	.all = { RMR_VISITS_ALL, RMR_VISITS_WALK },
	.walk = RMR_VISITS_WALK,
};

/* Whether @c may empty directory @d as rm -rf would; *@visits counts
 * the entries looked at, -EAGAIN past @limit. */
static int may_empty(const struct sw_cred *c, const struct node *d,
		     uint64_t limit, uint64_t *visits)
{
	const struct dir *dd = d->u.dir;
	int rc;

	if (!dd->nentries)
		return 0;
	rc = perm_check(c, d, PERM_R | PERM_W | PERM_X);
	if (rc < 0 || sw_access_sticky_any(c, d->mode, d->uid))
		return rc;
	for (struct edge *e = dd->head; e; e = e->next) {
		if (*visits >= limit)
			return -EAGAIN;
		++*visits;
		if (e->child && (rc = perm_sticky(c, d, e->child)) < 0)
			return rc;
	}
	return 0;
}

/* A directory being walked: where in its list, and how many of its
 * subdirectories are still ahead. */
struct dir_pos {
	struct node *dir;
	struct edge *next;
	uint64_t subdirs_left;
};

int may_remove_tree_counted(const struct sw_cred *c, struct node *root,
			    uint64_t limit, uint64_t *visits)
{
	struct dir_pos *stack = NULL;
	size_t depth = 0, cap = 0;
	int rc;

	*visits = 0;
	rc = may_empty(c, root, limit, visits);
	if (rc == 0 && root->u.dir->nsubdirs) {
		if (sw_grow(&stack, &cap, 1, sizeof(*stack), 16) < 0)
			return -ENOMEM;
		stack[depth++] = (struct dir_pos){ root, root->u.dir->head,
						   root->u.dir->nsubdirs };
	}
	while (rc == 0 && depth) {
		struct dir_pos *top = &stack[depth - 1];
		struct edge *e = top->next;
		struct node *sub;

		if (!top->subdirs_left || !e) {
			depth--;
			continue;
		}
		if (*visits >= limit) {
			rc = -EAGAIN;
			break;
		}
		++*visits;
		top->next = e->next;
		if (!e->child || !S_ISDIR(e->child->mode))
			continue;
		top->subdirs_left--;
		sub = e->child;
		rc = may_empty(c, sub, limit, visits);
		if (rc == 0 && sub->u.dir->nsubdirs) {
			if (sw_grow(&stack, &cap, depth + 1, sizeof(*stack),
				    16) < 0) {
				rc = -ENOMEM;
				break;
			}
			stack[depth++] =
				(struct dir_pos){ sub, sub->u.dir->head,
						  sub->u.dir->nsubdirs };
		}
	}
	free(stack);
	return rc;
}

int may_remove_tree_paid(const struct rmr_budget *b, struct bucket *mine,
			 struct bucket *all, int64_t now,
			 const struct sw_cred *c, struct node *root,
			 uint64_t *visits)
{
	double have = SW_MIN(bucket_fill(mine, &b->session, now),
			     bucket_fill(all, &b->all, now));
	/* Never below 0 (bucket_spend()), but a negative double cast to
	 * uint64_t is undefined: clamped all the same. */
	uint64_t limit = have < (double)b->walk ? (uint64_t)SW_MAX(have, 0.0) :
						  b->walk;
	int rc = may_remove_tree_counted(c, root, limit, visits);

	bucket_spend(mine, (double)*visits);
	bucket_spend(all, (double)*visits);
	if (rc == -EAGAIN && limit == b->walk)
		rc = -E2BIG;
	return rc;
}

int may_detach_entry(const struct req *r, const struct sw_cred *c,
		     const struct node *dir, struct node *n, uint64_t *visits)
{
	struct bucket none = { 0 }; /* no session: everyone's alone */
	int rc = perm_sticky(c, dir, n);

	*visits = 0;
	if (rc == 0 && S_ISDIR(n->mode) && !req_admin(r, c))
		rc = may_remove_tree_paid(&rmr_budget,
					  r->s ? &r->s->rmr_visits : &none,
					  &r->m->rmr_visits, sw_mono_ns(), c, n,
					  visits);
	return rc;
}

uint64_t rmr_visits_may(const struct req *r, const struct sw_cred *c,
			uint64_t spent)
{
	struct bucket none = { 0 };
	struct bucket *mine = r->s ? &r->s->rmr_visits : &none;
	int64_t now = sw_mono_ns();
	double have;

	if (req_admin(r, c))
		return UINT64_MAX;
	if (spent >= rmr_budget.walk)
		return 0;
	have = SW_MIN(bucket_fill(mine, &rmr_budget.session, now),
		      bucket_fill(&r->m->rmr_visits, &rmr_budget.all, now));
	return have < (double)(rmr_budget.walk - spent) ?
		       (uint64_t)SW_MAX(have, 0.0) :
		       rmr_budget.walk - spent;
}

void rmr_visits_pay(const struct req *r, const struct sw_cred *c,
		    uint64_t visits)
{
	if (req_admin(r, c))
		return;
	if (r->s)
		bucket_spend(&r->s->rmr_visits, (double)visits);
	bucket_spend(&r->m->rmr_visits, (double)visits);
}

int remove_entry_now(struct master *m, struct req *r, struct node *dir,
		     struct edge *e, bool trash, Sweepfs__RmrReply *reply)
{
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	Sweepfs__Meta__Detach det = SWEEPFS__META__DETACH__INIT;
	Sweepfs__Meta__Unlink u = SWEEPFS__META__UNLINK__INIT;
	struct node *n = e->child;
	bool is_dir = S_ISDIR(n->mode);
	uint64_t size = is_dir ? 1 + ns_tree_names(n) : 1;
	ProtobufCBinaryData name;
	uint8_t namebuf[SW_NAME_MAX];
	int rc;

	/* The edge goes with the change: keep its name. */
	memcpy(namebuf, e->name, e->namelen);
	name.data = namebuf;
	name.len = e->namelen;
	mut.time = sw_now_ns();
	/* The trash time of the directory it leaves, unless skipped. */
	trash = trash && dir->u.dir->trashtime && (is_dir || n->nlink == 1);
	if (is_dir) {
		det.parent = dir->ino;
		det.name = name;
		if (trash) {
			det.has_trash_until = 1;
			det.trash_until =
				mut.time + (int64_t)dir->u.dir->trashtime *
						   SW_NSEC_PER_SEC;
		}
		mut.op_case = SWEEPFS__META__MUTATION__OP_DETACH;
		mut.detach = &det;
	} else {
		/* A single name: that is an unlink. */
		u.parent = dir->ino;
		u.name = name;
		u.has_keep = 1;
		u.keep = n->nlink == 1 && (n->flags & NODE_OPEN);
		if (trash) {
			u.has_trash_until = 1;
			u.trash_until =
				mut.time + (int64_t)dir->u.dir->trashtime *
						   SW_NSEC_PER_SEC;
		}
		mut.op_case = SWEEPFS__META__MUTATION__OP_UNLINK;
		mut.unlink = &u;
	}
	rc = master_commit(m, r, &mut);
	if (rc < 0)
		return rc;
	watch_changed(m, dir, name.data, name.len, NULL);
	reply->has_nodes = 1;
	reply->nodes += size;
	if (is_dir && !trash) {
		reply->has_purge_id = 1;
		reply->purge_id = ns_purge_newest(&m->ns);
		purge_kick(m);
	}
	return 0;
}

void op_rmr(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__RmrReq *q = (const void *)msg;
	Sweepfs__RmrReply reply = SWEEPFS__RMR_REPLY__INIT;
	struct sw_cred cred = req_cred(q->cred);
	struct master *m = r->m;
	struct node *dir, *n;
	struct edge *e;
	uint64_t visits;
	int rc;

	if (q->name.len > SW_NAME_MAX ||
	    !sw_name_valid(q->name.data, q->name.len)) {
		rc = q->name.len > SW_NAME_MAX ? -ENAMETOOLONG : -EINVAL;
		goto out;
	}
	dir = req_node(r, q->parent);
	if (!dir || (S_ISDIR(dir->mode) && ns_detached(dir))) {
		rc = -ENOENT;
		goto out;
	}
	if (!S_ISDIR(dir->mode)) {
		rc = -ENOTDIR;
		goto out;
	}
	rc = perm_check(&cred, dir, PERM_W | PERM_X);
	if (rc < 0)
		goto out;
	e = ns_lookup(&m->ns, dir, (const char *)q->name.data, q->name.len);
	if (!e) {
		rc = -ENOENT;
		goto out;
	}
	n = e->child;
	rc = may_detach_entry(r, &cred, dir, n, &visits);
	if (rc < 0)
		goto out;

	rc = remove_entry_now(m, r, dir, e, !q->skip_trash, &reply);
out:
	req_answer(r, rc, &reply.base);
}
