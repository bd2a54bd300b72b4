/*
 * Helpers shared by the unit tests: a seeded random generator (every test
 * is deterministic), temporary directories and files in them, a quiet log
 * sink, and running a piece of a test in a child process with a time
 * limit, for code that might hang.
 *
 * Everything is static inline: each test program includes this once,
 * after cmocka.h (the fixtures that make files fail the test through it).
 */
#ifndef SWEEPFS_TESTS_UNIT_H
#define SWEEPFS_TESTS_UNIT_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* xorshift64*: small, fast, and the same sequence on every platform. */
struct rng {
	uint64_t s;
};

static inline void rng_seed(struct rng *r, uint64_t seed)
{
	r->s = seed ? seed : 0x9e3779b97f4a7c15ULL;
}

static inline uint64_t rng_next(struct rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545f4914f6cdd1dULL;
}

/* Uniform in [0, n), n > 0 (the modulo bias is irrelevant here). */
static inline uint64_t rng_below(struct rng *r, uint64_t n)
{
	return rng_next(r) % n;
}

static inline void rng_fill(struct rng *r, void *p, size_t n)
{
	uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)rng_next(r);
}

/*
 * A log sink (sw_log_set_sink()) that prints nothing and counts the
 * messages into the unsigned @opaque points to (NULL: counts nothing).
 */
static inline void unit_quiet_sink(int level, const char *tag, const char *msg,
				   void *opaque)
{
	unsigned *lines = opaque;

	(void)level;
	(void)tag;
	(void)msg;
	if (lines)
		(*lines)++;
}

static inline int unit_rm_one(const char *path, const struct stat *st, int flag,
			      struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* rm -rf @dir. */
static inline void unit_rm_rf(const char *dir)
{
	nftw(dir, unit_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/*
 * The directories unit_mkdtemp() made for @what under @tmp whose process
 * is gone: a test killed by its time limit, or by its own alarm, could
 * not remove them. (A process that is still there, or a number used
 * again since, keeps its own.)
 */
static inline void unit_sweep_stale(const char *tmp, const char *what)
{
	char prefix[128], path[4200];
	struct dirent *e;
	size_t plen;
	DIR *d = opendir(tmp);

	if (!d)
		return;
	plen = (size_t)snprintf(prefix, sizeof(prefix), "sweepfs-%s-", what);
	while ((e = readdir(d))) {
		char *end;
		long pid;

		if (strncmp(e->d_name, prefix, plen))
			continue;
		pid = strtol(e->d_name + plen, &end, 10);
		if (end == e->d_name + plen || *end != '-' || pid <= 0 ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmp, e->d_name);
		unit_rm_rf(path);
	}
	closedir(d);
}

/*
 * A fresh directory under $TMPDIR (or /tmp) into @buf (at least 64
 * bytes): sweepfs-@what-<pid>-XXXXXX, the stale ones of @what removed
 * first (unit_sweep_stale()).
 */
static inline int unit_mkdtemp(char *buf, size_t len, const char *what)
{
	const char *tmp = getenv("TMPDIR");

	if (!tmp || !*tmp)
		tmp = "/tmp";
	unit_sweep_stale(tmp, what);
	snprintf(buf, len, "%s/sweepfs-%s-%ld-XXXXXX", tmp, what,
		 (long)getpid());
	return mkdtemp(buf) ? 0 : -errno;
}

/* @n empty files @prefix000000... in @dfd/@dir (names of one length, so
 * that every getdents64 record has the same size); the test fails if one
 * cannot be made. */
static inline void unit_mk_files(int dfd, const char *dir, const char *prefix,
				 int n)
{
	int fd = openat(dfd, dir, O_RDONLY | O_DIRECTORY);
	char name[64];

	assert_true(fd >= 0);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%s%06d", prefix, i);
		assert_int_equal(mknodat(fd, name, S_IFREG | 0644, 0), 0);
	}
	close(fd);
}

/* Whether @path below @dfd exists (a symlink counts, not followed). */
static inline bool unit_exists(int dfd, const char *path)
{
	struct stat st;

	return fstatat(dfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Size of @path in bytes, or -1. */
static inline long long unit_file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) < 0 ? -1 : (long long)st.st_size;
}

/*
 * Run @fn(@arg) in a child process and return its exit status (0..255), or
 * -ETIMEDOUT when it did not finish within @ms milliseconds (it is then
 * killed), or -EINTR when it died of a signal. For code that may hang or
 * that changes process state (rlimits).
 */
static inline int unit_run_child(int (*fn)(void *arg), void *arg, int ms)
{
	pid_t pid;
	int status;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		_exit(fn(arg) & 0xff);
	for (int waited = 0;; waited += 10) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		if (r == pid)
			break;
		if (waited >= ms) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -ETIMEDOUT;
		}
		nanosleep(&ts, NULL);
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return -EINTR;
}

#endif
