/*
 * The mount's names the kernel keeps for long (mount/knames.c): which
 * notices a delegation given back costs the kernel, counted through fake
 * kernel calls. What must hold (issue 29): no directory costs a notice
 * per name, and no surviving directory's names are all dropped (the
 * epoch, which makes the kernel prune every name of the mount on its
 * next walk) when a few notices do.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "knames.h"
#include "log.h"
#include "unit.h"

struct call {
	char kind; /* 'e'xpire, 'd'rop */
	uint64_t dir;
	char name[64];
};

struct kernel {
	struct call calls[256];
	size_t n;
	unsigned all;
	bool no_epoch;
};

static int k_note(struct kernel *k, char kind, uint64_t dir, const char *name)
{
	assert_true(k->n < sizeof(k->calls) / sizeof(k->calls[0]));
	k->calls[k->n].kind = kind;
	k->calls[k->n].dir = dir;
	snprintf(k->calls[k->n].name, sizeof(k->calls[0].name), "%s", name);
	k->n++;
	return 0;
}

static int k_expire(void *arg, uint64_t dir, const char *name)
{
	return k_note(arg, 'e', dir, name);
}

static int k_drop(void *arg, uint64_t dir, const char *name)
{
	return k_note(arg, 'd', dir, name);
}

static int k_all(void *arg)
{
	struct kernel *k = arg;

	if (k->no_epoch)
		return -ENOSYS;
	k->all++;
	return 0;
}

static bool k_has_all(void *arg)
{
	return !((struct kernel *)arg)->no_epoch;
}

static const struct knames_ops ops = {
	.expire = k_expire,
	.drop = k_drop,
	.all = k_all,
	.has_all = k_has_all,
};

struct fixture {
	struct kernel k;
	struct knames *kn;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || knames_new(&ops, &f->k, &f->kn) < 0)
		return -1;
	sw_log_set_sink(unit_quiet_sink, NULL);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	knames_free(f->kn);
	sw_log_set_sink(NULL, NULL);
	free(f);
	return 0;
}

/* Directory @ino, @name in @up, given back with @nnames names handed out
 * for long (f000000...). */
static struct kgone gone(uint64_t ino, uint64_t up, const char *name,
			 unsigned nnames, bool removed)
{
	struct kgone g = { .ino = ino, .removed = removed };
	char n[32];

	assert_true(kplace_set(&g.at, up, name));
	assert_true(!name || g.at.name);
	for (unsigned i = 0; i < nnames; i++) {
		snprintf(n, sizeof(n), "f%06u", i);
		klong_add(&g.names, n);
	}
	return g;
}

static unsigned count(const struct kernel *k, char kind)
{
	unsigned n = 0;

	for (size_t i = 0; i < k->n; i++)
		n += k->calls[i].kind == kind;
	return n;
}

static void test_klong_add(void **state)
{
	struct klong l = { 0 };
	char n[32];

	(void)state;
	klong_add(&l, "a");
	klong_add(&l, "a"); /* asked twice (ops.c): kept once */
	klong_add(&l, "b");
	assert_int_equal(l.n, 2);
	assert_false(l.many);
	for (unsigned i = 0; i < 100000; i++) {
		snprintf(n, sizeof(n), "x%u", i);
		klong_add(&l, n);
	}
	/* Bounded, however many: what a held directory costs here. */
	assert_int_equal(l.n, KNAMES_FEW);
	assert_true(l.many);
	klong_clear(&l);
	assert_int_equal(l.n, 0);
	assert_false(l.many);
}

/* A parent of big directories (the seed's two): each of its few names
 * expired, nothing dropped, no epoch. */
static void test_few_names_expired_each(void **state)
{
	struct fixture *f = *state;
	struct kgone g = gone(10, 1, "p", 3, false);
	struct knames_stats st;

	knames_forget(f->kn, &g, 1);
	assert_int_equal(f->k.n, 3);
	assert_int_equal(count(&f->k, 'e'), 3);
	for (size_t i = 0; i < f->k.n; i++)
		assert_int_equal(f->k.calls[i].dir, 10);
	assert_string_equal(f->k.calls[2].name, "f000002");
	assert_int_equal(f->k.all, 0);
	knames_stats(f->kn, &st);
	assert_int_equal(st.notices, 3);
	assert_int_equal(st.left, 0);
	/* Freed: nothing left to a second look. */
	assert_null(g.at.name);
	assert_int_equal(g.names.n, 0);
}

/* Directories of many names that stay: one epoch for all of them. */
static void test_many_names_one_epoch(void **state)
{
	struct fixture *f = *state;
	struct kgone g[3] = { gone(10, 1, "a", 500, false),
			      gone(11, 1, "b", 500, false),
			      gone(12, 1, "c", 2, false) };

	knames_forget(f->kn, g, 3);
	assert_int_equal(f->k.all, 1);
	assert_int_equal(count(&f->k, 'd'), 0);
	assert_int_equal(count(&f->k, 'e'), 2); /* c's two */
}

/*
 * The seed's order on the mount that made the tree: rmsnapshot of d0
 * recalls p (few names) and d0 (removed, many): no epoch, d0's own entry
 * expired, its names left to go with it. The master watches d0 for the
 * holder while they may live (a change there reaches it as an
 * invalidation): a lookup that finds d0 there still costs nothing. A lost
 * connection loses those watches: every name goes then, once.
 */
static void test_removed_left_until_reconnect(void **state)
{
	struct fixture *f = *state;
	struct kgone g[2] = { gone(10, 1, "p", 2, false),
			      gone(20, 10, "d0", 5000, true) };
	struct knames_stats st;

	knames_forget(f->kn, g, 2);
	assert_int_equal(f->k.all, 0);
	assert_int_equal(count(&f->k, 'd'), 0);
	assert_int_equal(count(&f->k, 'e'), 3);
	assert_int_equal(f->k.calls[2].dir, 10);
	assert_string_equal(f->k.calls[2].name, "d0");
	knames_stats(f->kn, &st);
	assert_int_equal(st.left, 1);

	knames_note_dir(f->kn, 10, "d0", 20);
	assert_int_equal(f->k.all, 0);
	knames_reconnected(f->kn);
	assert_int_equal(f->k.all, 1);
	knames_reconnected(f->kn);
	assert_int_equal(f->k.all, 1);
}

/* Many names in a directory whose place is not known (the mount's root
 * takes names renamed into it): all at once, not nothing. */
static void test_many_names_no_place(void **state)
{
	struct fixture *f = *state;
	struct kgone g[2] = { gone(1, 0, NULL, 20, false),
			      gone(2, 0, NULL, 20, true) };

	knames_forget(f->kn, g, 2);
	assert_int_equal(f->k.all, 1);
	assert_int_equal(count(&f->k, 'd') + count(&f->k, 'e'), 0);
}

/* A kernel without the epoch: nothing is left to a lookup that could not
 * take it back; each directory of many names is dropped by its entry. */
static void test_no_epoch_drops_each(void **state)
{
	struct fixture *f = *state;
	struct kgone g[2] = { gone(20, 10, "d0", 5000, true),
			      gone(21, 10, "d1", 5000, false) };
	struct knames_stats st;

	f->k.no_epoch = true;
	knames_forget(f->kn, g, 2);
	assert_int_equal(f->k.all, 0);
	assert_int_equal(count(&f->k, 'd'), 2);
	assert_int_equal(count(&f->k, 'e'), 0);
	knames_stats(f->kn, &st);
	assert_int_equal(st.left, 0);

	/* Learnt from a failed epoch, the same. */
	knames_free(f->kn);
	assert_int_equal(knames_new(&ops, &f->k, &f->kn), 0);
	f->k.n = 0;
	g[0] = gone(20, 10, "d0", 5000, false);
	knames_forget(f->kn, g, 1);
	assert_int_equal(count(&f->k, 'd'), 1);
	g[0] = gone(22, 10, "d2", 5000, true);
	knames_forget(f->kn, g, 1);
	assert_int_equal(count(&f->k, 'd'), 2);
}

/* Past the table of removed directories, one is forgotten as any other
 * (a hostile client's failed removals cannot make a mount keep names it
 * cannot take back). */
static void test_removed_table_bounded(void **state)
{
	struct fixture *f = *state;
	struct knames_stats st;
	unsigned i;

	for (i = 0; f->k.all == 0 && i < 1000; i++) {
		struct kgone g = gone(100 + i, 10, "x", 100, true);

		knames_forget(f->kn, &g, 1);
	}
	knames_stats(f->kn, &st);
	assert_true(f->k.all == 1);
	assert_int_equal(st.left, i - 1);
	assert_true(st.left >= 16 && st.left <= 256);
}

static void test_places(void **state)
{
	struct fixture *f = *state;
	struct kplace at = { 0 };

	assert_false(knames_place(f->kn, 30, &at));
	knames_note_dir(f->kn, 1, "a", 30);
	knames_note_dir(f->kn, 1, "b", 31);
	knames_note_dir(f->kn, 1, ".", 32);
	assert_false(knames_place(f->kn, 32, &at));
	assert_true(knames_place(f->kn, 30, &at));
	assert_int_equal(at.up, 1);
	assert_string_equal(at.name, "a");
	/* A rename moves it; an exchange swaps both. */
	knames_renamed(f->kn, 1, "a", 2, "c", false);
	assert_true(knames_place(f->kn, 30, &at));
	assert_int_equal(at.up, 2);
	assert_string_equal(at.name, "c");
	knames_renamed(f->kn, 2, "c", 1, "b", true);
	assert_true(knames_place(f->kn, 30, &at));
	assert_string_equal(at.name, "b");
	assert_true(knames_place(f->kn, 31, &at));
	assert_int_equal(at.up, 2);
	assert_string_equal(at.name, "c");
	/* Renamed over: gone. */
	knames_renamed(f->kn, 1, "b", 2, "c", false);
	assert_false(knames_place(f->kn, 31, &at));
	free(at.name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_klong_add),
		cmocka_unit_test_setup_teardown(test_few_names_expired_each,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_names_one_epoch,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_removed_left_until_reconnect, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_names_no_place, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_no_epoch_drops_each, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_removed_table_bounded,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_places, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
