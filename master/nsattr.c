/*
 * What a node carries besides its place in the tree (namespace.h):
 * extended attributes, kept in a table of their own so that a node
 * without any pays nothing; and the changes that walk a whole tree to
 * set one thing on every node of it: the snapshot flag (sweepfs
 * seteattr -r, which for root sets a mark instead: see below) and the
 * goal (setgoal -r).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "namespace_i.h"
#include "util.h"

/* ---- xattrs --------------------------------------------------------- */

static struct xattr_set *xset_get(const struct ns *ns, const struct node *n)
{
	if (!(n->flags & NODE_XATTR))
		return NULL;
	return htab_find(&ns->xattrs, sw_hash_u64(n->ino), nsi_xset_eq,
			 &n->ino);
}

static struct xattr *xattr_find(struct xattr_set *xs, const void *name,
				size_t nlen)
{
	for (uint32_t i = 0; xs && i < xs->n; i++)
		if (xs->v[i].nlen == nlen && !memcmp(xs->v[i].data, name, nlen))
			return &xs->v[i];
	return NULL;
}

int ns_xattr_set(struct ns *ns, struct node *n, const void *name, size_t nlen,
		 const void *value, size_t vlen, int64_t now)
{
	struct xattr_set *xs = xset_get(ns, n);
	struct xattr *x = xattr_find(xs, name, nlen);
	char *data = malloc(nlen + vlen ? nlen + vlen : 1);

	if (!data)
		return -ENOMEM;
	memcpy(data, name, nlen);
	if (vlen)
		memcpy(data + nlen, value, vlen);
	if (!xs) {
		xs = calloc(1, sizeof(*xs));
		if (!xs)
			goto out_data;
		xs->ino = n->ino;
		if (htab_insert(&ns->xattrs, sw_hash_u64(n->ino), xs) < 0) {
			free(xs);
			goto out_data;
		}
		ns->misc_bytes += sizeof(*xs);
		n->flags |= NODE_XATTR;
	}
	if (!x) {
		if (xs->n == xs->cap) {
			uint32_t cap = xs->cap ? xs->cap * 2 : 2;
			struct xattr *v = realloc(xs->v, cap * sizeof(*v));

			if (!v)
				goto out_set;
			ns->misc_bytes += (cap - xs->cap) * sizeof(*v);
			xs->v = v;
			xs->cap = cap;
		}
		x = &xs->v[xs->n++];
	} else {
		ns->misc_bytes -= x->nlen + x->vlen;
		free(x->data);
	}
	x->nlen = (uint8_t)nlen;
	x->vlen = (uint32_t)vlen;
	x->data = data;
	ns->misc_bytes += nlen + vlen;
	n->ctime = now;
	return 0;

out_set:
	if (xs->n == 0) {
		/* Created above for this attribute: take it back. */
		htab_remove(&ns->xattrs, sw_hash_u64(n->ino), xs);
		ns->misc_bytes -= sizeof(*xs) + xs->cap * sizeof(*xs->v);
		n->flags &= (uint16_t)~NODE_XATTR;
		free(xs->v);
		free(xs);
	}
out_data:
	free(data);
	return -ENOMEM;
}

int ns_xattr_get(const struct ns *ns, const struct node *n, const void *name,
		 size_t nlen, const void **value, size_t *vlen)
{
	struct xattr *x = xattr_find(xset_get(ns, n), name, nlen);

	if (!x)
		return -ENODATA;
	*value = x->data + x->nlen;
	*vlen = x->vlen;
	return 0;
}

int ns_xattr_remove(struct ns *ns, struct node *n, const void *name,
		    size_t nlen, int64_t now)
{
	struct xattr_set *xs = xset_get(ns, n);
	struct xattr *x = xattr_find(xs, name, nlen);

	if (!x)
		return -ENODATA;
	ns->misc_bytes -= x->nlen + x->vlen;
	free(x->data);
	*x = xs->v[--xs->n];
	if (xs->n == 0) {
		n->flags &= (uint16_t)~NODE_XATTR;
		htab_remove(&ns->xattrs, sw_hash_u64(n->ino), xs);
		ns->misc_bytes -= sizeof(*xs) + xs->cap * sizeof(*xs->v);
		free(xs->v);
		free(xs);
	}
	n->ctime = now;
	return 0;
}

long ns_xattr_list(const struct ns *ns, const struct node *n, char *buf,
		   size_t size)
{
	struct xattr_set *xs = xset_get(ns, n);
	size_t need = 0;

	for (uint32_t i = 0; xs && i < xs->n; i++)
		need += xs->v[i].nlen + 1u;
	if (!buf)
		return (long)need;
	if (need > size)
		return -ERANGE;
	for (uint32_t i = 0; xs && i < xs->n; i++) {
		memcpy(buf, xs->v[i].data, xs->v[i].nlen);
		buf += xs->v[i].nlen;
		*buf++ = '\0';
	}
	return (long)need;
}

int ns_xattr_foreach(const struct ns *ns, const struct node *n,
		     int (*fn)(const void *name, size_t nlen, const void *value,
			       size_t vlen, void *arg),
		     void *arg)
{
	struct xattr_set *xs = xset_get(ns, n);

	for (uint32_t i = 0; xs && i < xs->n; i++) {
		const struct xattr *x = &xs->v[i];
		int rc = fn(x->data, x->nlen, x->data + x->nlen, x->vlen, arg);

		if (rc)
			return rc;
	}
	return 0;
}

/* ---- the snapshot flag's marks ---------------------------------------
 *
 * seteattr -f snapshot -r on a tree of 17 M names walked them all (0.3 s
 * with the loop held, per directory of the post's tree). Setting it for
 * all owners now takes a mark instead: the tree's top and the edge id
 * the next name will get (ns_snapmark). A name is flagged if its own
 * bit says so or a mark over its directory has an id above the name's:
 * O(marks) ancestor look-ups (lct.h, O(log n) each), a handful.
 *
 * A mark is exact as long as the names below it are the ones it saw or
 * newer. What would break that writes it out ("settles" it: the old
 * walk, bits set on the names it covers, then the mark goes):
 *   - a clear under it (a bit cannot undo a mark), or over it for some
 *     owners only (a recursive clear for all just drops it);
 *   - a directory moved across its edge (rename, trash, restore): one
 *     leaving takes the flags with it on its own names; one entering
 *     would look flagged, so the mark is written out whole first;
 *   - rmsnapshot -f and a failed count (below), which read the bits.
 * "Is the whole tree flagged" (rmsnapshot) is the counts' answer, or,
 * for a tree under a mark, whether no unflagged name was added under
 * the mark since (fresh, counted as names are added and removed; a tree
 * removed whole is not counted out, which errs towards writing the mark
 * out). A checkpoint keeps the marks as they are ('M' records beside
 * each name's own bit), so a master started from it, or a follower that
 * caught up from it, holds the marks the writer held: a recursive clear
 * after a restart is still O(marks), where it walked 17 M names with
 * the loop held when the checkpoint wrote the marks out. Replay sets
 * them again from the changelog, whose records carry the leader's edge
 * id (a follower gets the same marks). A snapshot's image writes each
 * name's flag as marks and bit say. Settling is the same on every
 * master whenever it happens, since what is flagged does not change.
 */

static bool mark_covers(const struct ns_snapmark *m, const struct node *dir)
{
	return m->dir == dir || ns_is_ancestor(m->dir, dir);
}

/* Whether @m's top is @top or below it. */
static bool mark_under(const struct ns_snapmark *m, const struct node *top)
{
	return m->dir == top || ns_is_ancestor(top, m->dir);
}

static void mark_drop(struct ns *ns, unsigned i)
{
	ns->snapmarks[i] = ns->snapmarks[--ns->nsnapmarks];
}

uint64_t ns_snap_below(const struct ns *ns, const struct node *dir)
{
	uint64_t below = 0;

	for (unsigned i = 0; i < ns->nsnapmarks; i++) {
		const struct ns_snapmark *m = &ns->snapmarks[i];

		if (m->below > below && mark_covers(m, dir))
			below = m->below;
	}
	return below;
}

bool ns_edge_snapshot(const struct ns *ns, const struct node *dir,
		      const struct edge *e)
{
	return (e->flags & EDGE_SNAPSHOT) || e->id < ns_snap_below(ns, dir);
}

struct settle_walk {
	struct ns *ns;
	uint64_t below;
};

static int settle_edge(struct node *dir, struct edge *e, void *arg)
{
	struct settle_walk *w = arg;

	w->ns->snap_walked++;
	if (e->id < w->below)
		ns_edge_flag(dir, e, true);
	return 0;
}

/* Flag every name under @top older than @below. Half done on -ENOMEM,
 * which changes nothing that is read: those names were flagged. */
static int settle_tree(struct ns *ns, struct node *top, uint64_t below)
{
	struct settle_walk w = { ns, below };

	return nsi_walk(top, NULL, settle_edge, &w);
}

/* Write mark @i out and drop it. */
static int mark_settle(struct ns *ns, unsigned i)
{
	int rc = settle_tree(ns, ns->snapmarks[i].dir, ns->snapmarks[i].below);

	if (rc < 0)
		return rc;
	mark_drop(ns, i);
	ns->snap_settled++;
	return 0;
}

/* Settle the marks over directory @dir, and with @sub those under it. */
static int settle_touching(struct ns *ns, const struct node *dir,
			   const struct node *sub)
{
	for (unsigned i = 0; i < ns->nsnapmarks;) {
		const struct ns_snapmark *m = &ns->snapmarks[i];
		int rc;

		if (!mark_covers(m, dir) && !(sub && mark_under(m, sub))) {
			i++;
			continue;
		}
		rc = mark_settle(ns, i); /* moved the last one to i */
		if (rc < 0)
			return rc;
	}
	return 0;
}

int ns_snap_settle(struct ns *ns, struct node *top)
{
	return settle_touching(ns, top, top);
}

bool ns_tree_flagged(struct ns *ns, struct node *root)
{
	bool touched = false;

	if (ns_tree_plain(root) == 0)
		return true;
	for (unsigned i = 0; i < ns->nsnapmarks; i++) {
		const struct ns_snapmark *m = &ns->snapmarks[i];

		if (mark_covers(m, root)) {
			if (m->fresh == 0)
				return true;
			touched = true;
		} else if (mark_under(m, root)) {
			touched = true;
		}
	}
	if (!touched || ns_snap_settle(ns, root) < 0)
		return false;
	return ns_tree_plain(root) == 0;
}

/* Drop the marks on directory @top or under it; at most how many names
 * they flagged. */
static uint64_t marks_drop_under(struct ns *ns, const struct node *top)
{
	uint64_t flagged = 0;

	for (unsigned i = 0; i < ns->nsnapmarks;) {
		if (mark_under(&ns->snapmarks[i], top)) {
			flagged += ns_tree_plain(ns->snapmarks[i].dir);
			mark_drop(ns, i);
		} else {
			i++;
		}
	}
	return flagged;
}

/* A recursive set for all owners on directory @top: a mark. Marks under
 * it say less than it does and go. -ENOSPC: no room (walk instead). */
static int mark_add(struct ns *ns, struct node *top, uint64_t below)
{
	marks_drop_under(ns, top);
	if (ns->nsnapmarks == NS_SNAPMARKS)
		return -ENOSPC;
	ns->snapmarks[ns->nsnapmarks++] =
		(struct ns_snapmark){ .dir = top, .below = below };
	return 0;
}

int nsi_snap_load(struct ns *ns, struct node *dir, uint64_t below,
		  uint64_t fresh)
{
	if (!S_ISDIR(dir->mode) || ns->nsnapmarks == NS_SNAPMARKS)
		return -EUCLEAN;
	for (unsigned i = 0; i < ns->nsnapmarks; i++)
		if (ns->snapmarks[i].dir == dir)
			return -EUCLEAN;
	ns->snapmarks[ns->nsnapmarks++] = (struct ns_snapmark){
		.dir = dir, .below = below, .fresh = fresh
	};
	return 0;
}

void nsi_snap_added(struct ns *ns, struct node *dir, const struct edge *e)
{
	if (e->flags & EDGE_SNAPSHOT)
		return;
	for (unsigned i = 0; i < ns->nsnapmarks; i++)
		if (mark_covers(&ns->snapmarks[i], dir))
			ns->snapmarks[i].fresh++;
}

/*
 * Names added since a mark and unflagged were counted by
 * nsi_snap_added() while in the tree: one still unflagged, newer than the
 * mark and going from a directory still under it is one of them (a
 * clear or a directory moved in would have written the mark out), so a
 * scratch file made and removed under a mark costs rmsnapshot nothing.
 */
void nsi_snap_removed(struct ns *ns, struct dir *d, const struct edge *e)
{
	if (e->flags & EDGE_SNAPSHOT)
		return;
	for (unsigned i = 0; i < ns->nsnapmarks; i++) {
		struct ns_snapmark *m = &ns->snapmarks[i];
		struct dir *top = m->dir->u.dir;

		if (m->fresh && e->id >= m->below &&
		    (top == d || lct_is_ancestor(&top->lct, &d->lct)))
			m->fresh--;
	}
}

void nsi_snap_gone(struct ns *ns, struct node *dir, bool below)
{
	for (unsigned i = 0; i < ns->nsnapmarks;) {
		const struct ns_snapmark *m = &ns->snapmarks[i];

		if (m->dir == dir || (below && mark_under(m, dir)))
			mark_drop(ns, i);
		else
			i++;
	}
}

int nsi_snap_moving(struct ns *ns, struct node *sub, struct node *from,
		    struct node *to)
{
	for (unsigned i = 0; i < ns->nsnapmarks;) {
		struct ns_snapmark *m = &ns->snapmarks[i];
		bool was = from && mark_covers(m, from);
		bool will = to && mark_covers(m, to);
		int rc = 0;

		if (was && !will)
			rc = settle_tree(ns, sub, m->below);
		else if (will && !was) {
			rc = mark_settle(ns, i);
			if (rc == 0)
				continue; /* the last one is at i now */
		}
		if (rc < 0)
			return rc;
		i++;
	}
	return 0;
}

void ns_snap_counts(const struct ns *ns, unsigned *marks, uint64_t *settled,
		    uint64_t *walked)
{
	*marks = ns->nsnapmarks;
	*settled = ns->snap_settled;
	*walked = ns->snap_walked;
}

/* ---- tree-wide changes ---------------------------------------------- */

struct flag_walk {
	struct ns *ns;
	bool snapshot;
	int64_t owner;
	int64_t changed;
};

static bool owned(const struct node *n, int64_t owner)
{
	return owner == NS_ANY_OWNER || n->uid == (uint64_t)owner;
}

static int flag_edge(struct node *dir, struct edge *e, void *arg)
{
	struct flag_walk *w = arg;

	w->ns->snap_walked++;
	if (!owned(e->child, w->owner))
		return 0;
	w->changed += !(e->flags & EDGE_SNAPSHOT) != !w->snapshot;
	ns_edge_flag(dir, e, w->snapshot);
	return 0;
}

/*
 * A recursive clear for all owners of name @top in @dir. The marks over
 * @dir flag names outside the tree too, so they are written out (a walk
 * of theirs); those under it flag only names the clear clears, so they
 * just go; and names below with no bit of their own (all of them, in a
 * tree only a mark flagged) need no walk: O(marks) for the tree a
 * recursive set marked, 17 M names took 0.3-1 s with the loop held when
 * the mark was written out and then cleared name by name. Returns at
 * most the names it unflagged.
 */
static int64_t clear_tree(struct ns *ns, struct node *dir, struct edge *top)
{
	struct flag_walk w = { ns, false, NS_ANY_OWNER, 0 };
	struct node *sub = top->child;
	struct edge **stack = NULL;
	int rc = settle_touching(ns, dir, NULL);
	bool walk;

	if (rc < 0)
		return rc;
	/* Marks neither set nor clear a name's own bit. */
	walk = ns_tree_plain(sub) != ns_tree_names(sub);
	if (walk && !(stack = nsi_walk_stack(sub)))
		return -ENOMEM; /* before anything changed */
	w.changed = (int64_t)marks_drop_under(ns, sub);
	w.changed += (top->flags & EDGE_SNAPSHOT) != 0;
	ns_edge_flag(dir, top, false);
	if (walk)
		nsi_walk(sub, stack, flag_edge, &w);
	free(stack);
	return w.changed;
}

int64_t ns_set_eattr(struct ns *ns, struct node *dir, const char *name,
		     size_t len, bool snapshot, bool recursive, int64_t owner,
		     uint64_t below)
{
	struct edge *top = ns_lookup(ns, dir, name, len), **stack = NULL;
	struct flag_walk w = { ns, snapshot, NS_ANY_OWNER, 0 };
	struct node *sub;
	int rc;

	if (!top)
		return -ENOENT;
	sub = top->child;
	recursive = recursive && S_ISDIR(sub->mode);
	if (!snapshot && recursive && owner == NS_ANY_OWNER)
		return clear_tree(ns, dir, top);
	/* A clear is a bit, which a mark over it would overrule. */
	if (!snapshot) {
		rc = settle_touching(ns, dir, recursive ? sub : NULL);
		if (rc < 0)
			return rc;
	}
	if (recursive && snapshot && owner == NS_ANY_OWNER && below &&
	    mark_add(ns, sub, below) == 0) {
		w.changed = !(top->flags & EDGE_SNAPSHOT);
		ns_edge_flag(dir, top, true);
		return w.changed + (int64_t)ns_tree_plain(sub);
	}
	if (recursive && !(stack = nsi_walk_stack(sub)))
		return -ENOMEM; /* before anything changed */
	flag_edge(dir, top, &w);
	w.owner = owner;
	if (recursive)
		nsi_walk(sub, stack, flag_edge, &w);
	free(stack);
	return w.changed;
}

/* @n's goal becomes @goal; its chunks follow: a chunk only @n names
 * takes the new goal, a shared one keeps the highest. */
static void node_goal(struct ns *ns, struct node *n, unsigned goal)
{
	n->flags = (uint16_t)((n->flags & ~NODE_GOAL_MASK) |
			      (goal << NODE_GOAL_SHIFT));
	if (!S_ISREG(n->mode))
		return;
	for (uint32_t i = 0; i < ns_chunk_slots(n); i++) {
		struct chunk *c = chunk_get(ns, ns_chunk_at(n, i));

		if (!c)
			continue;
		if (c->refs == 1)
			c->goal = (uint8_t)(goal ? goal : CHUNK_GOAL_DEFAULT);
		else
			chunk_goal_add(c, goal);
	}
}

struct goal_walk {
	struct ns *ns;
	unsigned goal;
	int64_t changed;
	int64_t owner;
};

static int goal_edge(struct node *dir, struct edge *e, void *arg)
{
	struct goal_walk *w = arg;

	(void)dir;
	if (!owned(e->child, w->owner))
		return 0;
	w->changed += ns_goal(e->child) != w->goal;
	node_goal(w->ns, e->child, w->goal);
	return 0;
}

int64_t ns_set_goal(struct ns *ns, struct node *n, unsigned goal,
		    bool recursive, int64_t owner)
{
	struct goal_walk w = { ns, goal, ns_goal(n) != goal, owner };
	struct edge **stack = NULL;

	recursive = recursive && S_ISDIR(n->mode);
	if (recursive && !(stack = nsi_walk_stack(n)))
		return -ENOMEM; /* before anything changed */
	node_goal(ns, n, goal);
	if (recursive)
		nsi_walk(n, stack, goal_edge, &w);
	free(stack);
	return w.changed;
}
