/*
 * itree: an intrusive interval tree of closed ranges [start, end] over
 * uint64_t, ordered by start: a treap whose nodes also carry the largest
 * end of their subtree, so that finding the ranges that overlap a query
 * costs O(log n + k) for k found (expected, whatever order the ranges come
 * in: priorities come from a keyed hash of a sequence number, not from the
 * ranges).
 *
 * The tree never allocates: callers embed struct itree_node in their own
 * objects and own them. A node's start and end must not change while it
 * is in a tree (remove it, change them, insert it again). Not thread-safe.
 */
#ifndef SWEEPFS_MASTER_ITREE_H
#define SWEEPFS_MASTER_ITREE_H

#include <stddef.h>
#include <stdint.h>

struct itree_node {
	struct itree_node *left;
	struct itree_node *right;
	uint64_t start;	  /* first point, the key */
	uint64_t end;	  /* last point, inclusive (>= start) */
	uint64_t max_end; /* largest end in this subtree */
	uint64_t seq;	  /* tie-break between equal starts: unique */
	uint64_t prio;	  /* heap order: a parent's is >= its children's */
};

struct itree {
	struct itree_node *root;
	size_t count;
	uint64_t next_seq; /* for nodes inserted into this tree */
	uint64_t key;	   /* secret of the priority hash */
};

/* An empty tree whose priorities are keyed by @key (random, once per
 * process: an attacker who cannot guess it cannot unbalance the tree). */
void itree_init(struct itree *t, uint64_t key);

/* Insert @n, whose start and end are set (start <= end). O(log n). */
void itree_insert(struct itree *t, struct itree_node *n);

/* Remove @n, which is in @t. O(log n). */
void itree_remove(struct itree *t, struct itree_node *n);

/*
 * Call @fn(@n, @arg) for each node that overlaps [@start, @end], in order
 * of start, until @fn returns non-zero; returns that value, or 0. @fn must
 * not change the tree. O(log n + k) for the k nodes visited.
 */
int itree_overlaps(const struct itree *t, uint64_t start, uint64_t end,
		   int (*fn)(struct itree_node *n, void *arg), void *arg);

#endif
