/*
 * health.c: the chunk health census classifies every chunk (missing,
 * endangered, under and over goal, goal beyond the servers connected),
 * publishes a pass only when it is whole, and costs a bounded slice per
 * tick whatever the table's size.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "csrv.h"
#include "health.h"
#include "master.h"
#include "namespace_i.h"
#include "unit.h"
#include "unit_master.h"
#include "unit_ns.h"

struct fixture {
	struct master m;    /* first: unit_master_teardown() */
	struct csrv srv[3]; /* ids 1 and 2 */
	struct node *file;
	int64_t now;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || unit_master_init(&f->m, f->srv, 2) < 0) {
		free(f);
		return -1;
	}
	f->now = 1000;
	master_wire_requests(&f->m);
	f->file =
		unit_mk(&f->m.ns, f->m.ns.root, "f", S_IFREG | 0644, ++f->now);
	*state = f;
	return 0;
}

/* Slot @index of the file: a chunk with @ncopies valid copies on servers
 * 1, 2, ... (a server id past 2 is one the master does not know), goal
 * @goal (0: the default). */
static struct chunk *chunk(struct fixture *f, uint32_t index, int ncopies,
			   unsigned goal)
{
	uint64_t id = f->m.ns.next_chunk;
	struct chunk *c;

	assert_int_equal(ns_chunk_set(&f->m.ns, f->file, index, id, 1), 0);
	c = chunk_get(&f->m.ns, id);
	for (int i = 0; i < ncopies; i++) {
		c->copies[i].srv = (uint32_t)i + 1;
		c->copies[i].version = 1;
		c->copies[i].state = COPY_VALID;
	}
	c->ncopies = (uint8_t)ncopies;
	c->goal = (uint8_t)goal;
	return c;
}

/* Ticks until a pass ends (at most @max); the counts. */
static const struct health_counts *pass(struct fixture *f, int max)
{
	uint64_t before = f->m.health->passes;

	for (int i = 0; i < max && f->m.health->passes == before; i++)
		health_tick(&f->m);
	assert_true(f->m.health->passes > before);
	return health_counts(&f->m);
}

static void test_health_classifies(void **state)
{
	struct fixture *f = *state;
	const struct health_counts *h;
	struct chunk *lost, *one;

	assert_int_equal(health_age_ms(&f->m), UINT64_MAX);
	chunk(f, 0, 1, 1);	  /* healthy */
	lost = chunk(f, 1, 0, 1); /* missing */
	one = chunk(f, 2, 1, 2);  /* endangered, under goal */
	chunk(f, 3, 2, 1);	  /* over goal */
	chunk(f, 4, 2, 3);	  /* under goal, goal beyond 2 servers */
	h = pass(f, 4);
	assert_int_equal(h->chunks, 5);
	assert_int_equal(h->missing, 1);
	assert_int_equal(h->endangered, 1);
	assert_int_equal(h->undergoal, 2);
	assert_int_equal(h->overgoal, 1);
	assert_int_equal(h->unreachable, 1);
	assert_true(health_age_ms(&f->m) < 1000);

	/* Copies that are not valid, or on a server down, do not count. */
	one->copies[0].state = COPY_STALE;
	lost->copies[0] = (struct chunk_copy){ 2, 1, COPY_VALID };
	lost->ncopies = 1;
	f->srv[2].conn = NULL;
	h = pass(f, 4);
	/* lost's copy is on server 2, one's is stale */
	assert_int_equal(h->missing, 2);
	/* the goal-3 chunk has one copy left, on server 1 */
	assert_int_equal(h->endangered, 1);
	assert_int_equal(h->undergoal, 1);
	/* goal 2 and 3 beyond the one server up */
	assert_int_equal(h->unreachable, 2);
	assert_int_equal(h->overgoal, 0);
	f->srv[2].conn = (struct conn *)&f->srv[2];
	h = pass(f, 4);
	assert_int_equal(h->missing, 1);
	assert_int_equal(h->unreachable, 1);
}

/* The default goal follows the configuration; a pass of an empty table
 * is all zeros. */
static void test_health_default_goal(void **state)
{
	struct fixture *f = *state;
	const struct health_counts *h;

	h = pass(f, 2);
	assert_int_equal(h->chunks, 0);
	chunk(f, 0, 1, 0);
	f->m.cfg.goal = 2;
	h = pass(f, 4);
	assert_int_equal(h->undergoal, 1);
	assert_int_equal(h->endangered, 1);
	f->m.cfg.goal = 1;
	h = pass(f, 4);
	assert_int_equal(h->undergoal, 0);
}

/*
 * 300,000 chunks: a pass takes several ticks, the published counts stay
 * those of the last whole pass meanwhile, and no tick is long (printed:
 * the figure for health.c's budget).
 */
static void test_health_slices(void **state)
{
	struct fixture *f = *state;
	const struct health_counts *h;
	struct timespec a, b, ca, cb;
	int64_t worst = 0, worst_cpu = 0;
	int ticks = 0;
	uint64_t before;

	for (uint32_t i = 0; i < 300000; i++)
		chunk(f, i, i % 3 == 0 ? 0 : 1, 1);
	before = f->m.health->passes;
	while (f->m.health->passes == before) {
		int64_t ns;

		clock_gettime(CLOCK_MONOTONIC, &a);
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ca);
		health_tick(&f->m);
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cb);
		clock_gettime(CLOCK_MONOTONIC, &b);
		ns = (b.tv_sec - a.tv_sec) * 1000000000LL + b.tv_nsec -
		     a.tv_nsec;
		worst = ns > worst ? ns : worst;
		ns = (cb.tv_sec - ca.tv_sec) * 1000000000LL + cb.tv_nsec -
		     ca.tv_nsec;
		worst_cpu = ns > worst_cpu ? ns : worst_cpu;
		ticks++;
		if (f->m.health->passes == before)
			assert_int_equal(health_counts(&f->m)->chunks, 0);
		assert_true(ticks < 1000);
	}
	h = health_counts(&f->m);
	assert_int_equal(h->chunks, 300000);
	assert_int_equal(h->missing, 100000);
	assert_true(ticks > 2);
	/* Half a millisecond and a step past it, in CPU time; generous
	 * for sanitizer builds. */
	assert_true(worst_cpu < 5 * 1000 * 1000);
	print_message("300000 chunks: a pass in %d ticks, the longest "
		      "%.3f ms (%.3f ms on the CPU)\n",
		      ticks, (double)worst / 1e6, (double)worst_cpu / 1e6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_health_classifies, setup,
						unit_master_teardown),
		cmocka_unit_test_setup_teardown(test_health_default_goal, setup,
						unit_master_teardown),
		cmocka_unit_test_setup_teardown(test_health_slices, setup,
						unit_master_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
