/*
 * lct: a link-cut tree (Sleator and Tarjan's dynamic trees, on splay
 * trees) over a rooted forest, with two counters per node summed over
 * subtrees. The namespace keeps one node per directory in it, so that
 * "which tree is this directory in", "is this directory below that one"
 * and "how many names are below this directory" cost O(log n) amortized
 * whatever the depth, instead of a walk up every ancestor.
 *
 * Nodes are embedded in the caller's objects; nothing here allocates.
 * Every operation may restructure the splay trees (even the queries):
 * take no pointers into them across calls. Not thread-safe.
 */
#ifndef SWEEPFS_MASTER_LCT_H
#define SWEEPFS_MASTER_LCT_H

#include <stdbool.h>
#include <stdint.h>

#define LCT_VALUES 2

struct lct_node {
	/* Splay parent, or (when not its splay parent's child) the
	 * path-parent: the node above the top of this node's path. */
	struct lct_node *parent;
	struct lct_node *left;	   /* towards the root of the real tree */
	struct lct_node *right;	   /* away from it */
	uint64_t val[LCT_VALUES];  /* this node's own counters */
	uint64_t virt[LCT_VALUES]; /* sums of the paths hanging here */
	uint64_t sum[LCT_VALUES];  /* val + virt of this splay subtree */
};

/* @x alone, a tree of one, with counters zero. */
void lct_init(struct lct_node *x);

/* Set @x's own counters. */
void lct_set(struct lct_node *x, uint64_t v0, uint64_t v1);

/* Hang tree root @child below @parent (in another tree). */
void lct_link(struct lct_node *child, struct lct_node *parent);

/* Take @x (and what is below it) off its parent; nothing if it is a
 * root. */
void lct_cut(struct lct_node *x);

/* @x's parent in the real tree, or NULL for a root. */
struct lct_node *lct_parent(struct lct_node *x);

/* The root of @x's tree. */
struct lct_node *lct_root(struct lct_node *x);

/* Whether @a is @b or above it in the same tree. */
bool lct_is_ancestor(struct lct_node *a, struct lct_node *b);

/* The counters summed over @x and everything below it. */
void lct_subtree(struct lct_node *x, uint64_t out[LCT_VALUES]);

#endif
