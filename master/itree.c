/*
 * The interval treap (itree.h).
 *
 * Order: by (start, seq); heap: by prio, a keyed hash of seq, so the shape
 * is that of a random binary search tree whatever ranges are inserted in
 * whatever order. Every node keeps max_end, the largest end below it,
 * which lets a query skip a subtree whose ranges all end before it.
 *
 * Insert and remove are recursive; the expected depth is O(log n) (about
 * 2.99 log2 n at worst in practice), so the stack stays small.
 */
#include <stdbool.h>

#include "hash.h"
#include "itree.h"

void itree_init(struct itree *t, uint64_t key)
{
	t->root = NULL;
	t->count = 0;
	t->next_seq = 0;
	t->key = key;
}

static void update(struct itree_node *n)
{
	uint64_t m = n->end;

	if (n->left && n->left->max_end > m)
		m = n->left->max_end;
	if (n->right && n->right->max_end > m)
		m = n->right->max_end;
	n->max_end = m;
}

static bool before(const struct itree_node *a, const struct itree_node *b)
{
	return a->start < b->start || (a->start == b->start && a->seq < b->seq);
}

/* Split @t into the nodes before @key (*@l) and the rest (*@r). */
static void split(struct itree_node *t, const struct itree_node *key,
		  struct itree_node **l, struct itree_node **r)
{
	if (!t) {
		*l = *r = NULL;
	} else if (before(t, key)) {
		split(t->right, key, &t->right, r);
		update(t);
		*l = t;
	} else {
		split(t->left, key, l, &t->left);
		update(t);
		*r = t;
	}
}

/* Join @l and @r, every node of @l before every node of @r. */
static struct itree_node *merge(struct itree_node *l, struct itree_node *r)
{
	if (!l)
		return r;
	if (!r)
		return l;
	if (l->prio >= r->prio) {
		l->right = merge(l->right, r);
		update(l);
		return l;
	}
	r->left = merge(l, r->left);
	update(r);
	return r;
}

static struct itree_node *insert(struct itree_node *t, struct itree_node *n)
{
	if (!t)
		return n;
	if (n->prio > t->prio) {
		split(t, n, &n->left, &n->right);
		update(n);
		return n;
	}
	if (before(n, t))
		t->left = insert(t->left, n);
	else
		t->right = insert(t->right, n);
	update(t);
	return t;
}

void itree_insert(struct itree *t, struct itree_node *n)
{
	n->left = n->right = NULL;
	n->max_end = n->end;
	n->seq = t->next_seq++;
	n->prio = sw_hash_u64(n->seq ^ t->key);
	t->root = insert(t->root, n);
	t->count++;
}

static struct itree_node *remove_node(struct itree_node *t,
				      struct itree_node *n)
{
	if (t == n)
		return merge(n->left, n->right);
	if (before(n, t))
		t->left = remove_node(t->left, n);
	else
		t->right = remove_node(t->right, n);
	update(t);
	return t;
}

void itree_remove(struct itree *t, struct itree_node *n)
{
	t->root = remove_node(t->root, n);
	n->left = n->right = NULL;
	t->count--;
}

static int overlaps(struct itree_node *n, uint64_t s, uint64_t e,
		    int (*fn)(struct itree_node *, void *), void *arg)
{
	int rc;

	if (!n || n->max_end < s)
		return 0;
	rc = overlaps(n->left, s, e, fn, arg);
	if (rc)
		return rc;
	if (n->start > e)
		return 0; /* and everything to the right starts later */
	if (n->end >= s) {
		rc = fn(n, arg);
		if (rc)
			return rc;
	}
	return overlaps(n->right, s, e, fn, arg);
}

int itree_overlaps(const struct itree *t, uint64_t start, uint64_t end,
		   int (*fn)(struct itree_node *n, void *arg), void *arg)
{
	return overlaps(t->root, start, end, fn, arg);
}
