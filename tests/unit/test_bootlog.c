/*
 * bootlog.h: the progress lines of long start-up steps. The format is
 * checked exactly; when a line is logged is driven by the clock the test
 * passes in, and the lines are caught by a log sink.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "bootlog.h"
#include "log.h"
#include "unit.h"
#include "util.h"

#define SEC 1000000000LL

struct caught {
	unsigned n;
	int level;
	char tag[32];
	char msg[256];
};

static void catch_line(int level, const char *tag, const char *msg,
		       void *opaque)
{
	struct caught *c = opaque;

	c->n++;
	c->level = level;
	snprintf(c->tag, sizeof(c->tag), "%s", tag);
	snprintf(c->msg, sizeof(c->msg), "%s", msg);
}

static int setup(void **state)
{
	static struct caught c;

	memset(&c, 0, sizeof(c));
	sw_log_set_sink(catch_line, &c);
	*state = &c;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	sw_log_set_sink(NULL, NULL);
	return 0;
}

static void test_bootlog_format_total(void **state)
{
	struct bootlog b;
	char buf[200];

	(void)state;
	bootlog_start(&b, "t", "loading checkpoint", "nodes and names",
		      68000000, 0);
	bootlog_format(buf, sizeof(buf), &b, 24600000, 4.2e6);
	assert_string_equal(buf, "loading checkpoint: 24.6 M of 68.0 M "
				 "nodes and names (36%), 4.2 M/s");
	/* Small counts whole; an estimate never says 100% (or more). */
	bootlog_format(buf, sizeof(buf), &b, 70000000, 812.4);
	assert_string_equal(buf, "loading checkpoint: 70.0 M of 68.0 M "
				 "nodes and names (99%), 812/s");
}

static void test_bootlog_format_no_total(void **state)
{
	struct bootlog b;
	char buf[200];

	(void)state;
	bootlog_start(&b, "t", "replaying the changelog", "changes", 0, 0);
	bootlog_format(buf, sizeof(buf), &b, 1234567, 987654);
	assert_string_equal(buf, "replaying the changelog: 1.2 M changes, "
				 "987654/s");
}

/* A line only every BOOTLOG_INTERVAL_NS, at NOTICE with the step's tag,
 * its rate the last interval's. */
static void test_bootlog_check_interval(void **state)
{
	struct caught *c = *state;
	struct bootlog b;
	int64_t t0 = 1000 * SEC;

	bootlog_start(&b, "changelog", "replaying the changelog", "changes", 0,
		      t0);
	assert_false(bootlog_check(&b, 100, t0 + BOOTLOG_INTERVAL_NS - 1));
	assert_int_equal(c->n, 0);
	assert_true(bootlog_check(&b, 5000000, t0 + BOOTLOG_INTERVAL_NS));
	assert_int_equal(c->n, 1);
	assert_int_equal(c->level, LOG_NOTICE);
	assert_string_equal(c->tag, "changelog");
	assert_string_equal(c->msg, "replaying the changelog: 5.0 M changes, "
				    "1.0 M/s");
	/* The next interval starts at that line: 2 M more in 10 s. */
	assert_false(
		bootlog_check(&b, 6000000, t0 + 2 * BOOTLOG_INTERVAL_NS - 1));
	assert_true(bootlog_check(&b, 7000000, t0 + 3 * BOOTLOG_INTERVAL_NS));
	assert_int_equal(c->n, 2);
	assert_string_equal(c->msg, "replaying the changelog: 7.0 M changes, "
				    "200000/s");
	assert_int_equal(b.lines, 2);
}

/* bootlog_tick() reads the clock once every BOOTLOG_CHECK ticks: a step
 * started long ago logs at the BOOTLOG_CHECK-th tick, not before. */
static void test_bootlog_tick_reads_clock_rarely(void **state)
{
	struct caught *c = *state;
	struct bootlog b;

	bootlog_start(&b, "t", "loading", "nodes", 0,
		      sw_mono_ns() - 2 * BOOTLOG_INTERVAL_NS);
	for (uint64_t i = 1; i < BOOTLOG_CHECK; i++)
		bootlog_tick(&b, i);
	assert_int_equal(c->n, 0);
	bootlog_tick(&b, BOOTLOG_CHECK);
	assert_int_equal(c->n, 1);
	for (uint64_t i = 1; i <= BOOTLOG_CHECK; i++)
		bootlog_tick(&b, BOOTLOG_CHECK + i);
	assert_int_equal(c->n, 1); /* checked again, but not due */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_bootlog_format_total,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_bootlog_format_no_total,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_bootlog_check_interval,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_bootlog_tick_reads_clock_rarely, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
