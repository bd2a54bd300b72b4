/*
 * htab.h: an open-addressing table with incremental resize, checked
 * against a plain "present" array under random operations, with a good
 * hash and with deliberately bad ones that pile elements into the same
 * buckets, so that long clusters, wrap-around and backward-shift deletion
 * (in both the new and the old array during a migration) all happen.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hash.h"
#include "htab.h"
#include "unit.h"

#define NITEMS 6000

struct item {
	uint64_t key;
	unsigned visits; /* by htab_foreach */
};

struct fixture {
	struct htab t;
	htab_hash_fn hash;
	struct item *items;
	bool *present;
	size_t npresent;
	size_t universe; /* items check_all() looks at: the others stay out */
	struct rng rng;
};

static uint64_t hash_good(const void *e)
{
	return sw_hash_u64(((const struct item *)e)->key);
}

/*
 * Runs of 16 consecutive keys share a home, and the homes of runs lie next
 * to each other (the table takes the high bits: (h * size) >> 64): long,
 * overlapping clusters.
 */
static uint64_t hash_runs(const void *e)
{
	return (((const struct item *)e)->key / 16) << 50;
}

/* Items go in pairs to one home (keys are 7 apart), homes spread out. */
static uint64_t hash_pairs(const void *e)
{
	return sw_hash_u64(((const struct item *)e)->key / 14);
}

/* Four homes in all, a quarter of the array apart. */
static uint64_t hash_mod4(const void *e)
{
	return (((const struct item *)e)->key % 4) << 62;
}

/* Everything in one bucket, near the end of any array so clusters wrap. */
static uint64_t hash_const(const void *e)
{
	(void)e;
	return UINT64_MAX - 2;
}

static bool item_eq(const void *elem, const void *key)
{
	return ((const struct item *)elem)->key == *(const uint64_t *)key;
}

static int setup_with(void **state, htab_hash_fn hash, uint64_t seed)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->items = calloc(NITEMS, sizeof(*f->items));
	f->present = calloc(NITEMS, sizeof(*f->present));
	if (!f->items || !f->present) {
		free(f->items);
		free(f->present);
		free(f);
		return -1;
	}
	for (size_t i = 0; i < NITEMS; i++)
		f->items[i].key = i * 7 + 3;
	f->hash = hash;
	f->universe = NITEMS;
	htab_init(&f->t, hash);
	rng_seed(&f->rng, seed);
	*state = f;
	return 0;
}

static int setup_good(void **state)
{
	return setup_with(state, hash_good, 1);
}

static int setup_runs(void **state)
{
	return setup_with(state, hash_runs, 2);
}

static int setup_pairs(void **state)
{
	return setup_with(state, hash_pairs, 5);
}

static int setup_mod4(void **state)
{
	return setup_with(state, hash_mod4, 3);
}

static int setup_const(void **state)
{
	return setup_with(state, hash_const, 4);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	htab_release(&f->t);
	free(f->items);
	free(f->present);
	free(f);
	return 0;
}

static uint64_t h_of(struct fixture *f, size_t i)
{
	return f->hash(&f->items[i]);
}

static void do_insert(struct fixture *f, size_t i)
{
	assert_false(f->present[i]);
	assert_int_equal(htab_insert(&f->t, h_of(f, i), &f->items[i]), 0);
	f->present[i] = true;
	f->npresent++;
}

static void do_remove(struct fixture *f, size_t i)
{
	bool was = f->present[i];

	assert_int_equal(htab_remove(&f->t, h_of(f, i), &f->items[i]), was);
	if (was) {
		f->present[i] = false;
		f->npresent--;
	}
}

static void *do_find(struct fixture *f, size_t i)
{
	return htab_find(&f->t, h_of(f, i), item_eq, &f->items[i].key);
}

static int visit(void *elem, void *arg)
{
	struct item *it = elem;
	size_t *n = arg;

	it->visits++;
	(*n)++;
	return 0;
}

/* The structure's own counters and bounds. */
static void check_shape(struct fixture *f)
{
	const struct htab *t = &f->t;

	assert_int_equal(htab_count(t), f->npresent);
	if (t->slots) {
		assert_true(t->size >= 16);
		assert_true(t->count * 4 <= t->size * 3);
	} else {
		assert_int_equal(t->count, 0);
	}
	if (t->old) {
		assert_non_null(t->slots);
		assert_true(t->oldsize >= 16);
		assert_true(t->oldcount <= t->oldsize);
	} else {
		assert_int_equal(t->oldcount, 0);
	}
	assert_int_equal(htab_bytes(t), ((t->slots ? t->size : 0) +
					 (t->old ? t->oldsize : 0)) *
						sizeof(void *));
}

/* Every item is found iff present; foreach visits each present item once. */
static void check_all(struct fixture *f)
{
	size_t n = 0;

	check_shape(f);
	for (size_t i = 0; i < f->universe; i++) {
		void *e = do_find(f, i);

		if (f->present[i])
			assert_ptr_equal(e, &f->items[i]);
		else
			assert_null(e);
		f->items[i].visits = 0;
	}
	assert_int_equal(htab_foreach(&f->t, visit, &n), 0);
	assert_int_equal(n, f->npresent);
	for (size_t i = 0; i < f->universe; i++)
		assert_int_equal(f->items[i].visits, f->present[i] ? 1 : 0);
	/* So do the parts of htab_foreach_part(), together. */
	for (unsigned parts = 2; parts <= 7; parts += 5) {
		n = 0;
		for (size_t i = 0; i < f->universe; i++)
			f->items[i].visits = 0;
		for (unsigned part = 0; part < parts; part++)
			assert_int_equal(htab_foreach_part(&f->t, part, parts,
							   visit, &n),
					 0);
		assert_int_equal(n, f->npresent);
		for (size_t i = 0; i < f->universe; i++)
			assert_int_equal(f->items[i].visits,
					 f->present[i] ? 1 : 0);
	}
}

static void test_htab_find_empty(void **state)
{
	struct fixture *f = *state;
	size_t n = 0;

	assert_null(do_find(f, 0));
	assert_false(htab_remove(&f->t, h_of(f, 0), &f->items[0]));
	assert_int_equal(htab_count(&f->t), 0);
	assert_int_equal(htab_bytes(&f->t), 0);
	assert_false(htab_step(&f->t, 100));
	assert_int_equal(htab_foreach(&f->t, visit, &n), 0);
	assert_int_equal(n, 0);
	/* One element in, one out: the array goes away again. */
	do_insert(f, 5);
	assert_ptr_equal(do_find(f, 5), &f->items[5]);
	assert_true(htab_bytes(&f->t) > 0);
	do_remove(f, 5);
	assert_null(do_find(f, 5));
	assert_int_equal(htab_bytes(&f->t), 0);
}

/* Grow through many resizes; everything stays findable at every step. */
static void test_htab_insert_grow(void **state)
{
	struct fixture *f = *state;
	size_t resizes = 0, last_size = 0, j;

	for (size_t i = 0; i < NITEMS; i++) {
		do_insert(f, i);
		if (f->t.size != last_size) {
			resizes++;
			last_size = f->t.size;
			check_all(f);
		}
		/* The newest and a random older one. */
		assert_ptr_equal(do_find(f, i), &f->items[i]);
		j = (size_t)rng_below(&f->rng, i + 1);
		assert_ptr_equal(do_find(f, j), &f->items[j]);
	}
	check_all(f);
	/* 16 -> about 12,000 slots for 6000 elements, 1.5 times each. */
	assert_true(resizes >= 15);
}

/* Shrink all the way back down; the arrays get smaller and then go. */
static void test_htab_remove_shrink(void **state)
{
	struct fixture *f = *state;
	size_t peak, shrinks = 0, last_size;

	for (size_t i = 0; i < NITEMS; i++)
		do_insert(f, i);
	while (htab_step(&f->t, 1000))
		;
	peak = htab_bytes(&f->t);
	last_size = f->t.size;
	for (size_t i = 0; i < NITEMS; i++) {
		size_t k =
			(i * 2477) % NITEMS; /* a permutation: 2477 is prime */

		do_remove(f, k);
		if (f->t.slots && f->t.size < last_size) {
			shrinks++;
			last_size = f->t.size;
			check_all(f);
		}
		if (i % 97 == 0)
			check_shape(f);
	}
	check_all(f);
	assert_true(shrinks >= 5);
	while (htab_step(&f->t, 1000))
		;
	assert_int_equal(htab_count(&f->t), 0);
	assert_true(htab_bytes(&f->t) <= 64 * sizeof(void *));
	assert_true(htab_bytes(&f->t) < peak);
}

/*
 * Some element of @slots (@size of them), from a random start. A slot
 * keeps 16 bits of the hash above the address's 48 (htab.c): strip them.
 */
static struct item *pick(struct fixture *f, void **slots, size_t size)
{
	size_t start = (size_t)rng_below(&f->rng, size);

	for (size_t k = 0; slots && k < size; k++) {
		uintptr_t e = (uintptr_t)slots[(start + k) % size];

		if (e)
			return (struct item *)(e & (((uintptr_t)1 << 48) - 1));
	}
	return NULL;
}

/* Catch the table right after a resize began and remove from both arrays. */
static void remove_during_migration(struct fixture *f)
{
	size_t i = 0, removed_old = 0, removed_new = 0;

	/* Fill until a resize of a big enough array is under way. */
	while (!(f->t.old && f->t.oldsize >= 1024))
		do_insert(f, i++);
	check_all(f);
	/* Remove alternately from the old and the new array; each removal
	 * also moves a few clusters, so the migration ends. */
	for (size_t k = 0; f->t.old; k++) {
		struct item *e = k % 2 ? pick(f, f->t.slots, f->t.size) :
					 pick(f, f->t.old, f->t.oldsize);

		assert_non_null(e);
		if (k % 2)
			removed_new++;
		else
			removed_old++;
		do_remove(f, (size_t)(e - f->items));
		if (k % 8 == 0)
			check_all(f);
		/* And insert a new one now and then while migrating. */
		if (k % 3 == 0 && i < NITEMS)
			do_insert(f, i++);
		assert_true(k < 100000);
	}
	check_all(f);
	assert_true(removed_old > 0);
	assert_true(removed_new > 0);
}

static void test_htab_remove_during_migration(void **state)
{
	remove_during_migration(*state);
}

static void test_htab_remove_during_migration_clustered(void **state)
{
	remove_during_migration(*state);
}

/* htab_step() alone finishes a migration, a slot or so at a time. */
static void step_finishes(struct fixture *f)
{
	size_t i = 0, steps = 0;

	while (!(f->t.old && f->t.oldsize >= 256))
		do_insert(f, i++);
	while (htab_step(&f->t, 1)) {
		steps++;
		if (steps % 8 == 0)
			check_all(f);
		assert_true(steps < 100000);
	}
	assert_null(f->t.old);
	assert_int_equal(f->t.oldcount, 0);
	assert_true(steps > 10);
	check_all(f);
}

static void test_htab_step_finishes(void **state)
{
	step_finishes(*state);
}

static void test_htab_step_finishes_clustered(void **state)
{
	step_finishes(*state);
}

/* htab_prefetch() is a hint: any hash, empty or mid-migration, changes
 * nothing. */
static void test_htab_prefetch_changes_nothing(void **state)
{
	struct fixture *f = *state;
	const uint64_t hashes[] = { 0, 1, UINT64_MAX, UINT64_MAX / 3 };
	size_t i = 0;

	for (size_t k = 0; k < sizeof(hashes) / sizeof(hashes[0]); k++)
		htab_prefetch(&f->t, hashes[k]);
	check_all(f);
	while (!(f->t.old && f->t.oldcount > 100))
		do_insert(f, i++);
	for (size_t k = 0; k < sizeof(hashes) / sizeof(hashes[0]); k++)
		htab_prefetch(&f->t, hashes[k]);
	for (size_t j = 0; j < i; j++)
		htab_prefetch(&f->t, h_of(f, j));
	assert_non_null(f->t.old);
	check_all(f);
}

static int stop_at(void *elem, void *arg)
{
	size_t *left = arg;

	(void)elem;
	return --*left == 0 ? 42 : 0;
}

/* foreach visits each element once also mid-migration, and stops early. */
static void foreach_once(struct fixture *f)
{
	size_t i = 0, left;

	while (!(f->t.old && f->t.oldcount > 100 && f->t.count > 1))
		do_insert(f, i++);
	check_all(f);
	left = 10;
	assert_int_equal(htab_foreach(&f->t, stop_at, &left), 42);
	assert_int_equal(left, 0);
}

static void test_htab_foreach_once(void **state)
{
	foreach_once(*state);
}

static void test_htab_foreach_once_clustered(void **state)
{
	foreach_once(*state);
}

/* Two elements with equal keys: removal is by address. */
static void test_htab_remove_by_address_same_bucket(void **state)
{
	struct fixture *f = *state;
	struct item a = { .key = 77 }, b = { .key = 77 };

	assert_int_equal(htab_insert(&f->t, f->hash(&a), &a), 0);
	assert_int_equal(htab_insert(&f->t, f->hash(&b), &b), 0);
	assert_int_equal(htab_count(&f->t), 2);
	assert_false(htab_remove(&f->t, f->hash(&a), &f->items[0]));
	assert_true(htab_remove(&f->t, f->hash(&a), &a));
	assert_ptr_equal(htab_find(&f->t, f->hash(&b), item_eq, &b.key), &b);
	assert_false(htab_remove(&f->t, f->hash(&a), &a));
	assert_true(htab_remove(&f->t, f->hash(&b), &b));
	assert_int_equal(htab_count(&f->t), 0);
}

/*
 * Random inserts, removes (of present and absent items), finds and steps,
 * in phases that grow to most of NITEMS and shrink to nearly nothing, so
 * the table resizes both ways many times.
 */
static void random_ops(struct fixture *f, size_t universe, int nops)
{
	int grow = 1;

	f->universe = universe;
	for (int op = 0; op < nops; op++) {
		size_t i = (size_t)rng_below(&f->rng, universe);
		unsigned what = (unsigned)rng_below(&f->rng, 100);

		if (f->npresent > universe * 9 / 10)
			grow = 0;
		else if (f->npresent < universe / 50)
			grow = 1;
		if (what < (grow ? 55u : 25u)) {
			if (!f->present[i])
				do_insert(f, i);
		} else if (what < 90) {
			do_remove(f, i);
		} else if (what < 97) {
			void *e = do_find(f, i);

			assert_ptr_equal(e,
					 f->present[i] ? &f->items[i] : NULL);
		} else {
			htab_step(&f->t, (size_t)rng_below(&f->rng, 40));
		}
		if (op % 1000 == 0)
			check_all(f);
		else if (op % 37 == 0)
			check_shape(f);
	}
	check_all(f);
}

static unsigned eq_calls;

static bool item_eq_counted(const void *elem, const void *key)
{
	eq_calls++;
	return item_eq(elem, key);
}

/*
 * One home for everything (the high bits are 0) but distinct low bits, as
 * the tags take them: a cluster of thousands, yet a lookup compares only
 * the element it finds and a miss compares none.
 */
static uint64_t hash_one_home(const void *e)
{
	return ((const struct item *)e)->key & 0xffff;
}

static int setup_one_home(void **state)
{
	return setup_with(state, hash_one_home, 6);
}

static void test_htab_tags_spare_elements(void **state)
{
	struct fixture *f = *state;
	size_t n = 2000;

	for (size_t i = 0; i < n; i++)
		do_insert(f, i);
	while (htab_step(&f->t, 1000))
		;
	check_all(f);
	for (size_t i = 0; i < n; i++) {
		uint64_t key = f->items[i].key;

		eq_calls = 0;
		assert_ptr_equal(htab_find(&f->t, hash_one_home(&f->items[i]),
					   item_eq_counted, &key),
				 &f->items[i]);
		assert_int_equal(eq_calls, 1);
	}
	for (size_t i = n; i < n + 500; i++) {
		uint64_t key = f->items[i].key;

		eq_calls = 0;
		assert_null(htab_find(&f->t, hash_one_home(&f->items[i]),
				      item_eq_counted, &key));
		assert_int_equal(eq_calls, 0);
	}
}

/* An address a slot cannot hold beside its tag is refused, not mangled. */
static void test_htab_insert_refuses_high_address(void **state)
{
	struct fixture *f = *state;
	void *high = (void *)((uintptr_t)f->items | (uintptr_t)1 << 60);

	do_insert(f, 0);
	assert_int_equal(htab_insert(&f->t, 1, high), -EINVAL);
	assert_int_equal(htab_count(&f->t), 1);
	check_all(f);
}

static void test_htab_insert_remove_random(void **state)
{
	random_ops(*state, NITEMS, 200000);
}

static void test_htab_insert_remove_random_runs_hash(void **state)
{
	random_ops(*state, 3000, 40000);
}

static void test_htab_insert_remove_random_mod4_hash(void **state)
{
	random_ops(*state, 1500, 30000);
}

static void test_htab_insert_remove_random_const_hash(void **state)
{
	random_ops(*state, 800, 20000);
}

/* How many addresses of @v[0..@n) are 2 MiB huge pages that lie whole
 * inside @t's current array (and none is misaligned). */
static size_t huge_in(const struct htab *t, void *const *v, size_t n)
{
	uintptr_t lo = (uintptr_t)t->slots, hi = lo + t->size * sizeof(void *);
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		uintptr_t p = (uintptr_t)v[i];

		assert_int_equal(p & ((2u << 20) - 1), 0);
		if (p >= lo && p < hi) {
			assert_true(p + (2u << 20) <= hi);
			k++;
		}
	}
	return k;
}

/*
 * The big arrays are listed for the collapse after a fork (htab.h,
 * htab_huge_list()): every whole huge page of a live one, once, appended
 * to what the caller had; none of an array freed by a resize or a
 * release. A small table lists nothing.
 */
static void test_htab_huge_list(void **state)
{
	struct htab t, small;
	void **v = NULL, *old;
	uintptr_t lo, hi;
	size_t n = 0, base, want;
	uint64_t gen;

	(void)state;
	htab_init(&t, hash_good);
	htab_init(&small, hash_good);
	assert_int_equal(htab_reserve(&small, 1000), 0);
	assert_int_equal(htab_huge_list(&v, &n), 0);
	base = n;
	assert_int_equal(huge_in(&small, v, n), 0);

	/* 2 M slots: 16 MiB, seven or eight whole huge pages. */
	assert_int_equal(htab_reserve(&t, 1u << 20), 0);
	lo = ((uintptr_t)t.slots + (2u << 20) - 1) &
	     ~(uintptr_t)((2u << 20) - 1);
	hi = ((uintptr_t)t.slots + t.size * sizeof(void *)) &
	     ~(uintptr_t)((2u << 20) - 1);
	want = (hi - lo) >> 21;
	assert_true(want >= 7);
	free(v);
	v = malloc(sizeof(*v));
	assert_non_null(v);
	v[0] = (void *)(uintptr_t)0x200000; /* the caller's own, kept */
	n = 1;
	assert_int_equal(htab_huge_list(&v, &n), 0);
	assert_ptr_equal(v[0], (void *)(uintptr_t)0x200000);
	assert_int_equal(n, 1 + base + want);
	assert_int_equal(huge_in(&t, v + 1, n - 1), want);

	/* Grown: the old array is gone from the list, the new one is in,
	 * and a collapse working through the old list can tell. */
	old = t.slots;
	gen = htab_huge_gen();
	assert_int_equal(htab_reserve(&t, 2u << 20), 0);
	assert_ptr_not_equal(t.slots, old);
	assert_int_equal(htab_huge_gen(), gen + 1);
	free(v);
	v = NULL;
	n = 0;
	assert_int_equal(htab_huge_list(&v, &n), 0);
	lo = ((uintptr_t)t.slots + (2u << 20) - 1) &
	     ~(uintptr_t)((2u << 20) - 1);
	hi = ((uintptr_t)t.slots + t.size * sizeof(void *)) &
	     ~(uintptr_t)((2u << 20) - 1);
	want = (hi - lo) >> 21;
	assert_int_equal(n, base + want);
	assert_int_equal(huge_in(&t, v, n), want);

	htab_release(&t);
	assert_int_equal(htab_huge_gen(), gen + 2);
	free(v);
	v = NULL;
	n = 0;
	assert_int_equal(htab_huge_list(&v, &n), 0);
	assert_int_equal(n, base);
	free(v);
	htab_release(&small); /* small: not counted */
	assert_int_equal(htab_huge_gen(), gen + 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_htab_huge_list),
		cmocka_unit_test_setup_teardown(test_htab_find_empty,
						setup_good, teardown),
		cmocka_unit_test_setup_teardown(test_htab_insert_grow,
						setup_good, teardown),
		cmocka_unit_test_setup_teardown(test_htab_remove_shrink,
						setup_good, teardown),
		cmocka_unit_test_setup_teardown(
			test_htab_remove_during_migration, setup_good,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_htab_remove_during_migration_clustered,
			setup_pairs, teardown),
		cmocka_unit_test_setup_teardown(test_htab_step_finishes,
						setup_good, teardown),
		cmocka_unit_test_setup_teardown(
			test_htab_step_finishes_clustered, setup_pairs,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_htab_prefetch_changes_nothing, setup_good,
			teardown),
		cmocka_unit_test_setup_teardown(test_htab_foreach_once,
						setup_good, teardown),
		cmocka_unit_test_setup_teardown(
			test_htab_foreach_once_clustered, setup_mod4, teardown),
		cmocka_unit_test_setup_teardown(
			test_htab_remove_by_address_same_bucket, setup_const,
			teardown),
		cmocka_unit_test_setup_teardown(test_htab_tags_spare_elements,
						setup_one_home, teardown),
		cmocka_unit_test_setup_teardown(
			test_htab_insert_refuses_high_address, setup_good,
			teardown),
		cmocka_unit_test_setup_teardown(test_htab_insert_remove_random,
						setup_good, teardown),
		cmocka_unit_test_setup_teardown(
			test_htab_insert_remove_random_runs_hash, setup_runs,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_htab_insert_remove_random_mod4_hash, setup_mod4,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_htab_insert_remove_random_const_hash, setup_const,
			teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
