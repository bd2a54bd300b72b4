/*
 * What a node carries besides its place in the tree (namespace.h):
 * extended attributes, kept in a table of their own so that a node
 * without any pays nothing; and the changes that walk a whole tree to
 * set one thing on every node of it: the snapshot flag (sweepfs
 * seteattr -r) and the goal (setgoal -r).
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

/* ---- tree-wide changes ---------------------------------------------- */

struct flag_walk {
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

	if (!owned(e->child, w->owner))
		return 0;
	w->changed += !(e->flags & EDGE_SNAPSHOT) != !w->snapshot;
	ns_edge_flag(dir, e, w->snapshot);
	return 0;
}

int64_t ns_set_eattr(struct ns *ns, struct node *dir, const char *name,
		     size_t len, bool snapshot, bool recursive, int64_t owner)
{
	struct edge *top = ns_lookup(ns, dir, name, len), **stack = NULL;
	struct flag_walk w = { .snapshot = snapshot, .owner = NS_ANY_OWNER };

	if (!top)
		return -ENOENT;
	recursive = recursive && S_ISDIR(top->child->mode);
	if (recursive && !(stack = nsi_walk_stack(top->child)))
		return -ENOMEM; /* before anything changed */
	flag_edge(dir, top, &w);
	w.owner = owner;
	if (recursive)
		nsi_walk(top->child, stack, flag_edge, &w);
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
