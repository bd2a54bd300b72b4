/*
 * The link-cut tree (lct.h).
 *
 * Each preferred path of the real tree is a splay tree ordered by depth
 * (left: shallower). A splay tree's root keeps, in its parent field, the
 * path-parent: the real parent of the path's top. access(x) makes the
 * path from the real root to x preferred, and x the root of its splay
 * tree; the other children of every node on it hang off it as virtual
 * (path-parent) children. Subtree sums follow "virtual subtree" link-cut
 * trees: virt[] holds the sums of a node's virtual children, sum[] that of
 * its splay subtree including what hangs off it, so after access(x) the
 * real subtree of x sums to val + virt (x has no right, deeper, part).
 *
 * Everything is iterative: a degenerate tree (a chain 100,000 deep) costs
 * splay rotations, never stack. Amortized O(log n) per operation.
 */
#include <stddef.h>

#include "lct.h"

void lct_init(struct lct_node *x)
{
	*x = (struct lct_node){ 0 };
}

static bool is_splay_root(const struct lct_node *x)
{
	return !x->parent || (x->parent->left != x && x->parent->right != x);
}

static void update(struct lct_node *x)
{
	for (int i = 0; i < LCT_VALUES; i++) {
		uint64_t s = x->val[i] + x->virt[i];

		if (x->left)
			s += x->left->sum[i];
		if (x->right)
			s += x->right->sum[i];
		x->sum[i] = s;
	}
}

/* Rotate @x above its splay parent. */
static void rotate(struct lct_node *x)
{
	struct lct_node *p = x->parent, *g = p->parent;

	if (!is_splay_root(p)) {
		if (g->left == p)
			g->left = x;
		else
			g->right = x;
	}
	x->parent = g; /* also inherits p's path-parent */
	if (p->left == x) {
		p->left = x->right;
		if (x->right)
			x->right->parent = p;
		x->right = p;
	} else {
		p->right = x->left;
		if (x->left)
			x->left->parent = p;
		x->left = p;
	}
	p->parent = x;
	update(p);
	update(x);
}

static void splay(struct lct_node *x)
{
	while (!is_splay_root(x)) {
		struct lct_node *p = x->parent;

		if (!is_splay_root(p)) {
			struct lct_node *g = p->parent;

			rotate((g->left == p) == (p->left == x) ? p : x);
		}
		rotate(x);
	}
}

/* Make the real root .. @x the preferred path, @x its splay root; returns
 * the last node where the walk joined a path (lca() relies on it). */
static struct lct_node *access(struct lct_node *x)
{
	struct lct_node *last = NULL;

	for (struct lct_node *y = x; y; y = y->parent) {
		splay(y);
		for (int i = 0; i < LCT_VALUES; i++) {
			if (y->right)
				y->virt[i] += y->right->sum[i];
			if (last)
				y->virt[i] -= last->sum[i];
		}
		y->right = last;
		update(y);
		last = y;
	}
	splay(x);
	return last;
}

void lct_set(struct lct_node *x, uint64_t v0, uint64_t v1)
{
	access(x);
	x->val[0] = v0;
	x->val[1] = v1;
	update(x);
}

void lct_link(struct lct_node *child, struct lct_node *parent)
{
	access(child); /* a root: nothing to its left */
	access(parent);
	child->parent = parent;
	for (int i = 0; i < LCT_VALUES; i++)
		parent->virt[i] += child->sum[i];
	update(parent);
}

void lct_cut(struct lct_node *x)
{
	access(x);
	if (!x->left)
		return;
	x->left->parent = NULL;
	x->left = NULL;
	update(x);
}

struct lct_node *lct_parent(struct lct_node *x)
{
	struct lct_node *p;

	access(x);
	p = x->left;
	if (!p)
		return NULL;
	while (p->right)
		p = p->right;
	splay(p);
	return p;
}

struct lct_node *lct_root(struct lct_node *x)
{
	struct lct_node *r;

	access(x);
	for (r = x; r->left; r = r->left)
		;
	splay(r);
	return r;
}

bool lct_is_ancestor(struct lct_node *a, struct lct_node *b)
{
	if (a == b)
		return true;
	if (lct_root(a) != lct_root(b))
		return false;
	access(a);
	return access(b) == a;
}

void lct_subtree(struct lct_node *x, uint64_t out[LCT_VALUES])
{
	access(x);
	for (int i = 0; i < LCT_VALUES; i++)
		out[i] = x->val[i] + x->virt[i];
}
