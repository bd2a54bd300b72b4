/*
 * Unit tests for common/fsio.c: whole writes through a pipe that takes a
 * little at a time, directory fsync (by path and below a directory fd),
 * and array growth with its overflow and allocation-failure paths.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fsio.h"
#include "unit.h"

static void test_write_all_pipe(void **state)
{
	/* More than a pipe holds: the writer must go on after short writes
	 * while a child drains it. */
	size_t n = 1u << 20;
	char *buf = malloc(n), *got = malloc(n);
	int fds[2];
	pid_t pid;
	size_t have = 0;

	assert_non_null(buf);
	assert_non_null(got);
	for (size_t i = 0; i < n; i++)
		buf[i] = (char)(i * 7);
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		_exit(sw_write_all(fds[1], buf, n) == 0 ? 0 : 1);
	}
	close(fds[1]);
	while (have < n) {
		ssize_t r = read(fds[0], got + have, n - have);

		assert_true(r > 0);
		have += (size_t)r;
	}
	close(fds[0]);
	assert_memory_equal(got, buf, n);
	{
		int st;

		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	free(buf);
	free(got);
}

static void test_write_all_bad_fd(void **state)
{
	assert_int_equal(sw_write_all(-1, "x", 1), -EBADF);
}

static void test_fsync_dir(void **state)
{
	char dir[256];

	assert_int_equal(unit_mkdtemp(dir, sizeof(dir), "fsio"), 0);
	assert_int_equal(sw_fsync_dir(dir), 0);
	unit_rm_rf(dir);
	assert_int_equal(sw_fsync_dir(dir), -ENOENT);
	assert_int_equal(sw_fsync_dir("/dev/null"), -ENOTDIR);
}

/* The store syncs a chunk subdirectory by name below its open root. */
static void test_fsync_dirat(void **state)
{
	char dir[256];
	int fd;

	(void)state;
	assert_int_equal(unit_mkdtemp(dir, sizeof(dir), "fsio"), 0);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(mkdirat(fd, "ab", 0700), 0);
	assert_int_equal(sw_fsync_dirat(fd, "ab"), 0);
	assert_int_equal(sw_fsync_dirat(fd, "cd"), -ENOENT);
	assert_int_equal(sw_fsync_dirat(-1, "ab"), -EBADF);
	assert_int_equal(sw_fsync_dirat(AT_FDCWD, dir), 0);
	close(fd);
	unit_rm_rf(dir);
}

/* Only PREFIX + 20 digits: not a shorter number, a suffix, another
 * prefix or a non-digit. */
static void test_dir_numbered(void **state)
{
	static const char *const names[] = {
		"checkpoint.00000000000000000042",
		"checkpoint.18446744073709551615",
		"checkpoint.00000000000000000043.tmp",
		"checkpoint.42",
		"checkpoint.0000000000000000004x",
		"changelog.00000000000000000007",
		"xcheckpoint.0000000000000000042",
	};
	uint64_t *v = NULL, sum = 0;
	char dir[256], path[512];
	size_t n = 99;
	int fd;

	(void)state;
	assert_int_equal(unit_mkdtemp(dir, sizeof(dir), "fsio"), 0);
	assert_int_equal(sw_dir_numbered(dir, "checkpoint.", &v, &n), 0);
	assert_int_equal(n, 0);
	assert_null(v);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		close(fd);
	}
	assert_int_equal(sw_dir_numbered(dir, "checkpoint.", &v, &n), 0);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	assert_true(sum == 42 + UINT64_MAX); /* wraps to 41 */
	free(v);
	assert_int_equal(sw_dir_numbered(dir, "changelog.", &v, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(v[0], 7);
	free(v);
	unit_rm_rf(dir);
	assert_int_equal(sw_dir_numbered(dir, "changelog.", &v, &n), -ENOENT);
}

static void test_grow_doubles_and_keeps(void **state)
{
	int *v = NULL;
	size_t cap = 0;

	assert_int_equal(sw_grow(&v, &cap, 1, sizeof(*v), 4), 0);
	assert_int_equal(cap, 4);
	for (int i = 0; i < 4; i++)
		v[i] = i;
	assert_int_equal(sw_grow(&v, &cap, 4, sizeof(*v), 4), 0);
	assert_int_equal(cap, 4); /* enough already */
	assert_int_equal(sw_grow(&v, &cap, 5, sizeof(*v), 4), 0);
	assert_int_equal(cap, 8);
	assert_int_equal(sw_grow(&v, &cap, 100, sizeof(*v), 4), 0);
	assert_int_equal(cap, 128);
	for (int i = 0; i < 4; i++)
		assert_int_equal(v[i], i);
	free(v);
}

static void test_grow_overflow(void **state)
{
	char *v = NULL;
	size_t cap = 0;
	void *before;

	assert_int_equal(sw_grow(&v, &cap, 16, 1, 0), 0);
	before = v;
	assert_int_equal(sw_grow(&v, &cap, SIZE_MAX / 2 + 2, 4, 0), -ENOMEM);
	assert_ptr_equal(v, before);
	assert_int_equal(cap, 16);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_all_pipe),
		cmocka_unit_test(test_write_all_bad_fd),
		cmocka_unit_test(test_fsync_dir),
		cmocka_unit_test(test_fsync_dirat),
		cmocka_unit_test(test_dir_numbered),
		cmocka_unit_test(test_grow_doubles_and_keeps),
		cmocka_unit_test(test_grow_overflow),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
