/*
 * progress.h: the redrawn status line. The format is checked exactly; the
 * drawing through a pipe standing in for stderr, forced on with
 * $SWEEPFS_PROGRESS=1 (and off by default, since a pipe is no terminal).
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "progress.h"
#include "unit.h"

static void test_progress_format_known_total(void **state)
{
	char buf[200];

	(void)state;
	progress_format(buf, sizeof(buf), "rmr big", "nodes", 25000, 100000,
			5000, 0);
	/* 75,000 left at 5,000/s: 15 s. */
	assert_string_equal(buf,
			    "rmr big: 25,000/100,000 nodes   25%  5,000/s  "
			    "ETA 0:00:15");
	progress_format(buf, sizeof(buf), "x", "files", 1234567, 1234567, 100.4,
			0);
	assert_string_equal(buf, "x: 1,234,567/1,234,567 files  100%  100/s");
}

static void test_progress_format_unknown(void **state)
{
	char buf[200];

	(void)state;
	progress_format(buf, sizeof(buf), "rm", "removed", 999, 0, -1, 0);
	assert_string_equal(buf, "rm: 999 removed");
	progress_format(buf, sizeof(buf), "rm", "removed", 1000, 0, 2500, 0);
	assert_string_equal(buf, "rm: 1,000 removed  2,500/s");
	/* No rate yet: no ETA either. */
	progress_format(buf, sizeof(buf), "s", "nodes", 1, 10, -1, 0);
	assert_string_equal(buf, "s: 1/10 nodes   10%");
	/* Hours. */
	progress_format(buf, sizeof(buf), "p", "nodes", 0, 36000000, 1000, 0);
	assert_string_equal(
		buf, "p: 0/36,000,000 nodes    0%  1,000/s  ETA 10:00:00");
}

static void test_progress_format_width(void **state)
{
	char buf[200], small[8];
	size_t n;

	(void)state;
	n = progress_format(buf, sizeof(buf), "a long label", "nodes", 5, 10, 1,
			    20);
	assert_int_equal(n, 20);
	assert_int_equal(strlen(buf), 20);
	assert_memory_equal(buf, "a long label: 5/10 n", 20);
	n = progress_format(small, sizeof(small), "label", "nodes", 5, 10, 1,
			    0);
	assert_int_equal(n, 7);
	assert_string_equal(small, "label: ");
}

/* Run @fn with stderr on a pipe; what it wrote into @out. */
static void capture(void (*fn)(void), char *out, size_t len)
{
	int fds[2], saved = dup(STDERR_FILENO);
	ssize_t n;

	assert_int_equal(pipe(fds), 0);
	dup2(fds[1], STDERR_FILENO);
	close(fds[1]);
	fn();
	dup2(saved, STDERR_FILENO);
	close(saved);
	n = read(fds[0], out, len - 1);
	out[n > 0 ? n : 0] = '\0';
	close(fds[0]);
}

static void run_three(void)
{
	struct progress p;

	progress_start(&p, "job", "items", 3);
	progress_update(&p, 1);
	progress_update(&p, 2); /* within 100 ms: not drawn */
	progress_end(&p, 3);
}

static void test_progress_draw_forced(void **state)
{
	char out[1024];

	(void)state;
	setenv("SWEEPFS_PROGRESS", "1", 1);
	capture(run_three, out, sizeof(out));
	unsetenv("SWEEPFS_PROGRESS");
	/* Two redraws (the first update, the end), then the newline. */
	assert_non_null(strstr(out, "\rjob: 1/3 items   33%"));
	assert_non_null(strstr(out, "\rjob: 3/3 items  100%"));
	assert_null(strstr(out, "2/3"));
	assert_non_null(strstr(out, "\033[K"));
	assert_int_equal(out[strlen(out) - 1], '\n');
	/* One line: the only newline is the last byte. */
	assert_ptr_equal(strchr(out, '\n'), out + strlen(out) - 1);
}

static void test_progress_start_long_label(void **state)
{
	struct progress p;

	(void)state;
	progress_start(&p, "purging /tmp/a/very/long/path/to/the/tree", "n", 0);
	assert_string_equal(p.label, "...long/path/to/the/tree");
	assert_int_equal(strlen(p.label), 24);
	progress_start(&p, "short", "n", 0);
	assert_string_equal(p.label, "short");
}

static void test_progress_quiet_on_pipe(void **state)
{
	char out[1024];

	(void)state;
	unsetenv("SWEEPFS_PROGRESS");
	capture(run_three, out, sizeof(out));
	assert_string_equal(out, "");
	setenv("SWEEPFS_PROGRESS", "0", 1);
	capture(run_three, out, sizeof(out));
	unsetenv("SWEEPFS_PROGRESS");
	assert_string_equal(out, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_progress_format_known_total),
		cmocka_unit_test(test_progress_format_unknown),
		cmocka_unit_test(test_progress_format_width),
		cmocka_unit_test(test_progress_draw_forced),
		cmocka_unit_test(test_progress_start_long_label),
		cmocka_unit_test(test_progress_quiet_on_pipe),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
