/*
 * Detached trees and the one walk (the namespace core, split out of
 * namespace.c): the queue of trees ns_detach() cut out, the purge's walk
 * that frees them, and the walk every tree-wide operation uses.
 *
 * A detached tree is freed deepest first: ns_purge_next() goes down by
 * each directory's first live entry to a non-directory or an empty
 * directory, ns_purge_take() removes that one. Each step changes one
 * node, so the purge (purge.c) can stop a slice anywhere; since entries
 * keep their order everywhere, the changelog records only how many steps
 * were made and the last inode, and ns_purge_steps() replays them.
 *
 * It reaches the core's internals only through namespace_i.h.
 */
#include <errno.h>
#include <stdlib.h>

#include "fsio.h"
#include "namespace.h"
#include "namespace_i.h"
#include "util.h"

bool ns_purge_next(struct ns *ns, struct ns_purge_step *s)
{
	struct purge_root *pr = ns->purge_head;
	struct edge *e;

	if (!pr)
		return false;
	for (;;) {
		e = ns_edge_live(pr->cur->u.dir->head);
		if (!e || !S_ISDIR(e->child->mode))
			break;
		pr->cur = e->child;
	}
	s->dir = pr->cur;
	s->e = e;
	return true;
}

void ns_purge_take(struct ns *ns, struct ns_purge_step *s, int64_t now)
{
	struct purge_root *pr = ns->purge_head;
	struct node *d = s->dir, *parent;

	s->done = 0;
	ns->purged++;
	if (s->e) {
		struct node *c = s->e->child;

		s->ino = c->ino;
		nsi_dir_unindex(ns, d);
		nsi_edge_remove(ns, d, s->e);
		nsi_node_unlinked(ns, c, now);
		pr->freed++;
		return;
	}
	s->ino = d->ino;
	if (d == pr->root) {
		ns->purge_head = pr->next;
		if (!ns->purge_head)
			ns->purge_tail = NULL;
		ns->purge_roots--;
		ns->misc_bytes -= sizeof(*pr);
		s->done = pr->id;
		s->done_nodes = pr->freed + 1;
		free(pr);
	} else {
		/* Its name is the parent's first: the walk came down by it. */
		parent = d->u.dir->parent;
		nsi_dir_unindex(ns, parent);
		nsi_edge_remove(ns, parent, ns_edge_live(parent->u.dir->head));
		pr->cur = parent;
		pr->freed++;
	}
	nsi_node_free(ns, d);
}

uint64_t ns_purge_left(const struct ns *ns)
{
	uint64_t left = 0;

	/* Each tree's count was taken when it was detached; what the
	 * changelog removed from it since (an open file's unlink) makes
	 * the difference, hence the clamp. */
	for (const struct purge_root *pr = ns->purge_head; pr; pr = pr->next)
		left += pr->total > pr->freed ? pr->total - pr->freed : 1;
	return left;
}

uint64_t ns_purge_oldest(const struct ns *ns)
{
	return ns->purge_head ? ns->purge_head->id : 0;
}

uint64_t ns_purge_newest(const struct ns *ns)
{
	return ns->purge_tail ? ns->purge_tail->id : 0;
}

int ns_purge_foreach_root(struct ns *ns,
			  int (*fn)(struct node *root, void *arg), void *arg)
{
	int rc;

	for (struct purge_root *pr = ns->purge_head; pr; pr = pr->next) {
		rc = fn(pr->root, arg);
		if (rc)
			return rc;
	}
	return 0;
}

int ns_walk(struct node *root,
	    int (*fn)(struct node *dir, struct edge *e, void *arg), void *arg)
{
	return nsi_walk(root, NULL, fn, arg);
}

/*
 * Reading ahead of the walk. A step's own edge and node come in the
 * order they were made (slabs), which the hardware prefetches well; what
 * stalls it at millions of files is the two table slots it frees, each
 * a cache miss at a place the hash picks (the node's in the inode table,
 * the name's in its directory's), and then the neighbours in each slot's
 * cluster, which the deletion reads to shift them back (htab.c). All are
 * known as soon as the edge is: ask for the slots of the edge
 * NS_PURGE_AHEAD live entries on in the same directory, and for the
 * clusters of the one half as far on, whose slots are in by then. Only
 * steps change the namespace meanwhile and they take entries from the
 * front, so those edges are still there; a step in another directory
 * (down into a subdirectory, back up) starts afresh. The replay of a
 * PurgeSteps (ns_purge_steps()) and the purge itself (purge.c) both use
 * it.
 */
#define NS_PURGE_AHEAD 8u

/* The next live entry after @e, and its slots (@near: their clusters)
 * asked for. */
static struct edge *ahead_next(const struct ns *ns, const struct node *dir,
			       struct edge *e, bool near)
{
	e = ns_edge_live(e->next);
	if (!e)
		return NULL;
	if (near) {
		ns_prefetch_cluster(ns, e->child->ino);
		ns_prefetch_name_cluster(dir, e->name, e->namelen);
	} else {
		ns_prefetch(ns, e->child->ino);
		ns_prefetch_name(dir, e->name, e->namelen);
	}
	return e;
}

void ns_purge_ahead(const struct ns *ns, struct ns_purge_ahead *a,
		    const struct ns_purge_step *s)
{
	if (!s->e) {
		a->dir = NULL; /* the directory goes */
		return;
	}
	if (a->dir == s->dir) {
		if (a->far)
			a->far = ahead_next(ns, s->dir, a->far, false);
		if (a->near)
			a->near = ahead_next(ns, s->dir, a->near, true);
		return;
	}
	a->dir = s->dir;
	a->far = a->near = s->e;
	for (unsigned i = 0; i < NS_PURGE_AHEAD && a->far; i++)
		a->far = ahead_next(ns, s->dir, a->far, false);
	for (unsigned i = 0; i < NS_PURGE_AHEAD / 2 && a->near; i++)
		a->near = ahead_next(ns, s->dir, a->near, true);
}

int ns_purge_steps(struct ns *ns, uint64_t count, uint64_t last, int64_t now)
{
	struct ns_purge_step s = { 0 };
	struct ns_purge_ahead a = { 0 };

	for (uint64_t i = 0; i < count; i++) {
		if (!ns_purge_next(ns, &s))
			return -EILSEQ;
		ns_purge_ahead(ns, &a, &s);
		ns_purge_take(ns, &s, now);
	}
	return count && s.ino != last ? -EILSEQ : 0;
}

int nsi_purge_add(struct ns *ns, struct node *root, uint64_t id, uint64_t total)
{
	struct purge_root *pr = calloc(1, sizeof(*pr));

	if (!pr)
		return -ENOMEM;
	pr->id = id;
	pr->root = pr->cur = root;
	pr->total = total;
	if (ns->purge_tail)
		ns->purge_tail->next = pr;
	else
		ns->purge_head = pr;
	ns->purge_tail = pr;
	ns->purge_roots++;
	ns->misc_bytes += sizeof(*pr);
	return 0;
}

/*
 * The one walk over a tree: every edge below directory @root, an edge
 * before the edges under it, with @fn(dir, e, arg) until it returns
 * nonzero, which is returned. @stack has room for the tree's depth, or
 * is NULL: then one grows as the walk goes (-ENOMEM half way, so only
 * for walks that change nothing) and *@max_depth, if asked, gets the
 * depth. Edges without a child (a copy's placeholders) are passed over.
 */
static int walk(struct node *root, struct edge **stack,
		int (*fn)(struct node *dir, struct edge *e, void *arg),
		void *arg, size_t *max_depth)
{
	struct edge **own = NULL, *e = NULL;
	size_t depth = 0, cap = 0, max = 0;
	struct node *d = root;
	int rc = 0;

	for (;;) {
		e = e ? e->next : d->u.dir->head;
		while (e && !e->child)
			e = e->next;
		if (!e) {
			if (depth == 0)
				break;
			e = (stack ? stack : own)[--depth];
			d = d->u.dir->parent;
			continue;
		}
		rc = fn ? fn(d, e, arg) : 0;
		if (rc)
			break;
		if (!S_ISDIR(e->child->mode))
			continue;
		if (!stack &&
		    sw_grow(&own, &cap, depth + 1, sizeof(*own), 64) < 0) {
			rc = -ENOMEM;
			break;
		}
		(stack ? stack : own)[depth++] = e;
		max = SW_MAX(max, depth);
		d = e->child;
		e = NULL;
	}
	free(own);
	if (max_depth)
		*max_depth = max;
	return rc;
}

struct edge **nsi_walk_stack(struct node *root)
{
	size_t depth;

	if (walk(root, NULL, NULL, NULL, &depth) < 0)
		return NULL;
	return malloc((depth + 1) * sizeof(struct edge *));
}

int nsi_walk(struct node *root, struct edge **stack,
	     int (*fn)(struct node *dir, struct edge *e, void *arg), void *arg)
{
	return walk(root, stack, fn, arg, NULL);
}

int nsi_entry(struct ns *ns, struct node *dir, const char *name, size_t len,
	      struct edge **e)
{
	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	*e = ns_lookup(ns, dir, name, len);
	return *e ? 0 : -ENOENT;
}

int ns_detach(struct ns *ns, struct node *dir, const char *name, size_t len,
	      uint64_t id, int64_t now)
{
	struct edge *e;
	int rc = nsi_entry(ns, dir, name, len, &e);

	if (rc == 0 && !S_ISDIR(e->child->mode))
		rc = -ENOTDIR;
	/* The tree's size is kept, so this costs the same for any tree. */
	if (rc == 0)
		rc = nsi_purge_add(ns, e->child, id,
				   1 + ns_tree_names(e->child));
	if (rc == 0 && ns->nsnapmarks)
		nsi_snap_gone(ns, e->child, true); /* no one reads them */
	if (rc == 0)
		nsi_detach_cut(ns, dir, e, now);
	return rc;
}
