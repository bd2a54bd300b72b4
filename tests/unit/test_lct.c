/*
 * lct.h against a plain parent-pointer forest: random links, cuts and
 * counter changes, and after each the roots, parents, ancestry and
 * subtree sums of every node compared; then a chain 200,000 deep, whose
 * queries must not cost its depth each (the test's time limit would
 * catch a walk: 200,000 queries x 200,000 levels).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "lct.h"
#include "unit.h"

#define N 64

struct model {
	int parent[N]; /* -1: a root */
	uint64_t val[N][2];
};

static bool m_is_ancestor(const struct model *m, int a, int b)
{
	for (int x = b; x >= 0; x = m->parent[x])
		if (x == a)
			return true;
	return false;
}

static int m_root(const struct model *m, int x)
{
	while (m->parent[x] >= 0)
		x = m->parent[x];
	return x;
}

static void m_subtree(const struct model *m, int x, uint64_t out[2])
{
	out[0] = out[1] = 0;
	for (int y = 0; y < N; y++)
		if (m_is_ancestor(m, x, y)) {
			out[0] += m->val[y][0];
			out[1] += m->val[y][1];
		}
}

static void test_lct_random_model(void **state)
{
	static struct lct_node t[N];
	struct model m;
	struct rng rng;

	(void)state;
	rng_seed(&rng, 11);
	for (int i = 0; i < N; i++) {
		lct_init(&t[i]);
		m.parent[i] = -1;
		m.val[i][0] = m.val[i][1] = 0;
	}
	for (int step = 0; step < 20000; step++) {
		int a = (int)rng_below(&rng, N), b = (int)rng_below(&rng, N);

		switch (rng_below(&rng, 3)) {
		case 0: /* link a below b, if a is a root not above b */
			if (m.parent[a] < 0 && !m_is_ancestor(&m, a, b)) {
				lct_link(&t[a], &t[b]);
				m.parent[a] = b;
			}
			break;
		case 1:
			lct_cut(&t[a]);
			m.parent[a] = -1;
			break;
		default:
			m.val[a][0] = rng_below(&rng, 1000);
			m.val[a][1] = rng_below(&rng, 1000);
			lct_set(&t[a], m.val[a][0], m.val[a][1]);
		}
		if (step % 7)
			continue;
		for (int x = 0; x < N; x++) {
			uint64_t got[2], want[2];
			struct lct_node *p = lct_parent(&t[x]);

			assert_ptr_equal(lct_root(&t[x]), &t[m_root(&m, x)]);
			assert_ptr_equal(p, m.parent[x] < 0 ? NULL :
							      &t[m.parent[x]]);
			lct_subtree(&t[x], got);
			m_subtree(&m, x, want);
			assert_int_equal(got[0], want[0]);
			assert_int_equal(got[1], want[1]);
			assert_int_equal(lct_is_ancestor(&t[a], &t[x]),
					 m_is_ancestor(&m, a, x));
		}
	}
}

static void test_lct_deep_chain(void **state)
{
	enum { D = 200000 };
	struct lct_node *t = calloc(D, sizeof(*t));
	uint64_t s[2];

	(void)state;
	assert_non_null(t);
	for (int i = 0; i < D; i++) {
		lct_init(&t[i]);
		lct_set(&t[i], 1, i % 2);
		if (i)
			lct_link(&t[i], &t[i - 1]);
	}
	for (int i = 0; i < D; i++) {
		int x = (int)((uint64_t)i * 7919 % D);

		assert_ptr_equal(lct_root(&t[x]), &t[0]);
		assert_true(lct_is_ancestor(&t[x / 2], &t[x]));
		lct_set(&t[x], 1, x % 2);
	}
	lct_subtree(&t[0], s);
	assert_int_equal(s[0], D);
	assert_int_equal(s[1], D / 2);
	lct_subtree(&t[D / 2], s);
	assert_int_equal(s[0], D / 2);
	/* Cut in the middle: two trees. */
	lct_cut(&t[D / 2]);
	assert_ptr_equal(lct_root(&t[D - 1]), &t[D / 2]);
	assert_false(lct_is_ancestor(&t[0], &t[D - 1]));
	lct_subtree(&t[0], s);
	assert_int_equal(s[0], D / 2);
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lct_random_model),
		cmocka_unit_test(test_lct_deep_chain),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
