/*
 * itree.h: random inserts and removals checked against a plain array, the
 * overlap query against a brute-force scan (order, early stop), the
 * max_end and heap invariants after every change, and the depth of a tree
 * fed in sorted order (the worst order for a plain binary search tree).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "itree.h"
#include "unit.h"
#include "util.h"

#define N 600

struct visit {
	struct itree_node *seen[N];
	size_t n;
	size_t stop_at; /* return non-zero on this visit (0: never) */
};

static int visit_fn(struct itree_node *n, void *arg)
{
	struct visit *v = arg;

	v->seen[v->n++] = n;
	return v->stop_at && v->n == v->stop_at ? 7 : 0;
}

/* Check the invariants below @n; returns the subtree's node count. */
static size_t check(const struct itree_node *n, uint64_t *max_end,
		    unsigned *depth)
{
	size_t c = 1;
	unsigned dl = 0, dr = 0;
	uint64_t m = n->end, ml = 0, mr = 0;

	if (n->left) {
		assert_true(n->left->prio <= n->prio);
		assert_true(n->left->start <= n->start);
		c += check(n->left, &ml, &dl);
		m = SW_MAX(m, ml);
	}
	if (n->right) {
		assert_true(n->right->prio <= n->prio);
		assert_true(n->right->start >= n->start);
		c += check(n->right, &mr, &dr);
		m = SW_MAX(m, mr);
	}
	assert_int_equal(n->max_end, m);
	*max_end = m;
	*depth = 1 + SW_MAX(dl, dr);
	return c;
}

static void check_tree(const struct itree *t)
{
	uint64_t m;
	unsigned d;

	if (!t->root) {
		assert_int_equal(t->count, 0);
		return;
	}
	assert_int_equal(check(t->root, &m, &d), t->count);
}

static void test_itree_random_model(void **state)
{
	static struct itree_node nodes[N];
	bool in[N] = { false };
	struct itree t;
	struct rng rng;

	(void)state;
	rng_seed(&rng, 7);
	itree_init(&t, 12345);
	for (int step = 0; step < 20000; step++) {
		size_t i = rng_below(&rng, N);

		if (in[i]) {
			itree_remove(&t, &nodes[i]);
			in[i] = false;
		} else {
			nodes[i].start = rng_below(&rng, 1000);
			nodes[i].end = nodes[i].start + rng_below(&rng, 50);
			itree_insert(&t, &nodes[i]);
			in[i] = true;
		}
		if (step % 97 == 0)
			check_tree(&t);
		if (step % 13 == 0) {
			uint64_t s = rng_below(&rng, 1100);
			uint64_t e = s + rng_below(&rng, 80);
			static struct visit v;
			size_t want = 0;

			v.n = 0;
			v.stop_at = 0;
			assert_int_equal(itree_overlaps(&t, s, e, visit_fn, &v),
					 0);
			for (size_t j = 0; j < N; j++)
				if (in[j] && nodes[j].start <= e &&
				    nodes[j].end >= s)
					want++;
			assert_int_equal(v.n, want);
			for (size_t j = 0; j < v.n; j++) {
				assert_true(v.seen[j]->start <= e);
				assert_true(v.seen[j]->end >= s);
				if (j)
					assert_true(v.seen[j - 1]->start <=
						    v.seen[j]->start);
			}
			if (want > 1) {
				v.n = 0;
				v.stop_at = 2;
				assert_int_equal(itree_overlaps(&t, s, e,
								visit_fn, &v),
						 7);
				assert_int_equal(v.n, 2);
			}
		}
	}
	check_tree(&t);
}

static void test_itree_sorted_input_stays_shallow(void **state)
{
	enum { M = 1 << 16 };
	struct itree_node *v = calloc(M, sizeof(*v));
	struct itree t;
	uint64_t m;
	unsigned depth;

	(void)state;
	assert_non_null(v);
	itree_init(&t, 99);
	for (size_t i = 0; i < M; i++) {
		v[i].start = v[i].end = i;
		itree_insert(&t, &v[i]);
	}
	assert_int_equal(check(t.root, &m, &depth), M);
	assert_int_equal(m, M - 1);
	/* A random BST of 2^16 nodes is about 40 deep; a list, 65536. */
	assert_true(depth < 100);
	for (size_t i = 0; i < M; i += 2)
		itree_remove(&t, &v[i]);
	assert_int_equal(check(t.root, &m, &depth), M / 2);
	assert_true(depth < 100);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_itree_random_model),
		cmocka_unit_test(test_itree_sorted_input_stays_shallow),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
