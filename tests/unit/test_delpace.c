/*
 * delpace.c: the deletion threads' share of their time. It halves when
 * clients' requests get slower than their baseline while deletions run,
 * grows back a step a tick otherwise up to half while clients are
 * served, is full with no client at all, never falls under its floor
 * (the lowest or one given), and the pause after a slice gives
 * deletions that share.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "delpace.h"

#define MS 1000000LL

struct fixture {
	struct delpace p;
};

static int setup(void **state)
{
	struct fixture *f = test_calloc(1, sizeof(*f));

	if (!f)
		return -1;
	delpace_init(&f->p, DELPACE_MIN);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	test_free(*state);
	return 0;
}

/* One tick: @n reads of @ns each, @deleted deletions meanwhile. */
static uint32_t tick(struct delpace *p, int n, int64_t ns, uint32_t deleted)
{
	for (int i = 0; i < n; i++)
		delpace_fg(p, DELPACE_READ, ns);
	if (deleted)
		delpace_deleted(p, deleted);
	return delpace_tick(p);
}

/* Ticks of reads at @ns with no deletion: the baseline. */
static void learn(struct delpace *p, int64_t ns)
{
	for (int i = 0; i < 20; i++)
		tick(p, 10, ns, 0);
	assert_int_equal(p->base_ns[DELPACE_READ], ns);
}

static void test_tick_full_share_without_clients(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(delpace_share(&f->p), DELPACE_FULL);
	assert_int_equal(tick(&f->p, 0, 0, 512), DELPACE_FULL);
	assert_int_equal(delpace_pause_ns(&f->p, 10 * MS), 0);
}

static void test_tick_halves_when_clients_slow(void **state)
{
	struct fixture *f = *state;

	learn(&f->p, 10 * MS);
	/* As fast as without deletions: as much as while clients are
	 * served. */
	assert_int_equal(tick(&f->p, 10, 11 * MS, 512), DELPACE_SERVED);
	/* Twice as slow: halved each tick, down to the floor only. */
	assert_int_equal(tick(&f->p, 10, 20 * MS, 512), DELPACE_SERVED / 2);
	assert_int_equal(tick(&f->p, 10, 20 * MS, 512), DELPACE_SERVED / 4);
	for (int i = 0; i < 10; i++)
		tick(&f->p, 10, 20 * MS, 512);
	assert_int_equal(delpace_share(&f->p), DELPACE_MIN);
}

static void test_tick_grows_back_a_step(void **state)
{
	struct fixture *f = *state;
	uint32_t s, prev;

	learn(&f->p, 10 * MS);
	tick(&f->p, 10, 30 * MS, 512);
	prev = tick(&f->p, 10, 30 * MS, 512);
	assert_int_equal(prev, DELPACE_SERVED / 4);
	/* Clients fine again: additive steps, not a jump. */
	s = tick(&f->p, 10, 10 * MS, 512);
	assert_true(s > prev && s < DELPACE_SERVED / 2);
	for (int i = 0; i < 64; i++)
		s = tick(&f->p, 10, 10 * MS, 512);
	assert_int_equal(s, DELPACE_SERVED);
	/* No client at all: full at once. */
	tick(&f->p, 10, 40 * MS, 512);
	assert_int_equal(tick(&f->p, 0, 0, 512), DELPACE_FULL);
}

static void test_tick_few_samples_tell_nothing(void **state)
{
	struct fixture *f = *state;

	learn(&f->p, 10 * MS);
	/* Two slow reads in a tick: noise, not a reason to back off. */
	assert_int_equal(tick(&f->p, 2, 100 * MS, 512), DELPACE_SERVED);
}

static void test_tick_half_without_baseline(void **state)
{
	struct fixture *f = *state;

	/* Deletions ran from the start: nothing to compare with. */
	assert_int_equal(tick(&f->p, 10, 50 * MS, 512), DELPACE_SERVED);
	assert_int_equal(tick(&f->p, 10, 50 * MS, 512), DELPACE_SERVED);
	assert_int_equal(f->p.base_ns[DELPACE_READ], 0);
	/* A tick without deletions gives the baseline, and then slow
	 * clients count. */
	tick(&f->p, 10, 10 * MS, 0);
	assert_int_equal(f->p.base_ns[DELPACE_READ], 10 * MS);
	assert_int_equal(tick(&f->p, 10, 50 * MS, 512), DELPACE_SERVED / 2);
}

static void test_tick_stale_baseline_drifts(void **state)
{
	struct fixture *f = *state;

	learn(&f->p, 10 * MS);
	/* The machine is 3x slower for other reasons, and stays so: at the
	 * floor, the baseline follows, and the share comes back. */
	for (int i = 0; i < 200; i++)
		tick(&f->p, 10, 30 * MS, 512);
	assert_true(f->p.base_ns[DELPACE_READ] * 13 >= 30 * MS * 10);
	assert_int_equal(delpace_share(&f->p), DELPACE_SERVED);
}

static void test_tick_writes_count_apart(void **state)
{
	struct fixture *f = *state;

	for (int i = 0; i < 20; i++) {
		for (int j = 0; j < 10; j++) {
			delpace_fg(&f->p, DELPACE_READ, 10 * MS);
			delpace_fg(&f->p, DELPACE_WRITE, 100 * MS);
		}
		delpace_tick(&f->p);
	}
	/* Reads as before, writes twice as slow: that is enough. */
	for (int j = 0; j < 10; j++) {
		delpace_fg(&f->p, DELPACE_READ, 10 * MS);
		delpace_fg(&f->p, DELPACE_WRITE, 200 * MS);
	}
	delpace_deleted(&f->p, 64);
	assert_int_equal(delpace_tick(&f->p), DELPACE_SERVED / 2);
}

static void test_init_floor_holds(void **state)
{
	struct fixture *f = *state;

	delpace_init(&f->p, DELPACE_FULL / 2);
	learn(&f->p, 10 * MS);
	for (int i = 0; i < 10; i++)
		tick(&f->p, 10, 50 * MS, 512);
	assert_int_equal(delpace_share(&f->p), DELPACE_FULL / 2);
	/* Out of range: taken into it. */
	delpace_init(&f->p, 0);
	assert_int_equal(f->p.floor, DELPACE_MIN);
	delpace_init(&f->p, 10 * DELPACE_FULL);
	assert_int_equal(f->p.floor, DELPACE_FULL);
	learn(&f->p, 10 * MS);
	assert_int_equal(tick(&f->p, 10, 50 * MS, 512), DELPACE_FULL);
	assert_int_equal(delpace_pause_ns(&f->p, 8 * MS), 0);
}

static void test_pause_ns_gives_the_share(void **state)
{
	struct fixture *f = *state;

	learn(&f->p, 10 * MS);
	/* Half while clients are served: as long again as the slice
	 * took. */
	assert_int_equal(delpace_pause_ns(&f->p, 8 * MS), 8 * MS);
	tick(&f->p, 10, 20 * MS, 512);
	/* A quarter: three times as long. */
	assert_int_equal(delpace_pause_ns(&f->p, 8 * MS), 24 * MS);
	/* Never longer than the bound, never for nothing. */
	assert_int_equal(delpace_pause_ns(&f->p, 10000 * MS),
			 DELPACE_PAUSE_MAX_NS);
	assert_int_equal(delpace_pause_ns(&f->p, 0), 0);
	assert_int_equal(delpace_pause_ns(&f->p, -5), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_tick_full_share_without_clients, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_tick_halves_when_clients_slow, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tick_grows_back_a_step,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_tick_few_samples_tell_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tick_half_without_baseline,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_tick_stale_baseline_drifts,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_tick_writes_count_apart,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_init_floor_holds, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_pause_ns_gives_the_share,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
