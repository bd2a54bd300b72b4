/*
 * removeall.h: Go's os.RemoveAll in C. Every case builds a real tree under
 * a fresh mkdtemp() directory, removes it, and checks the end state and
 * the system calls against what Go's sources dictate (os/removeall_at.go,
 * os/dir_unix.go, os/file_unix.go; see tools/removeall.h):
 *
 *  - a directory holding E entries is opened floor(E / 1024) + 1 times
 *    (each pass reads up to 1024 names, and only a pass that got fewer
 *    than 1024 is the last), and closed as often;
 *  - within a pass, getdents64() with an 8192-byte buffer is issued until
 *    1024 names are in hand or a call returns 0, never once more; the
 *    names left in the buffer are dropped, and read again by the next
 *    pass, which starts from the beginning of the directory;
 *  - every name costs one unlinkat(0) (a directory's fails with EISDIR),
 *    every directory one unlinkat(AT_REMOVEDIR) at the end;
 *  - the argument itself first gets os.Remove()'s unlink + rmdir, and its
 *    parent is opened once, with four fcntl() calls (newFile()).
 *
 * The getdents64() calls are traced through the system call table, per
 * open descriptor. Failures come from the table too (EACCES, EINTR), from
 * a read-only directory in a child that gave up root, and from malloc(),
 * failed in turn through --wrap.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "removeall.h"
#include "unit.h"

#define UNPRIV_UID 4322
#define MAX_FD 4096

/* ---- failing allocations -------------------------------------------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);

/* While armed, allocation number fail_at (1-based) fails. */
static struct {
	bool armed;
	long count;
	long fail_at;
} oom;

static bool oom_now(void)
{
	return oom.armed && ++oom.count == oom.fail_at;
}

void *__wrap_malloc(size_t n)
{
	return oom_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
	return oom_now() ? NULL : __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
	return oom_now() ? NULL : __real_realloc(p, n);
}

/* ---- hooks: trace getdents64 per pass, inject failures --------------- */

/* One pass over a directory: from its openat() to its close(). */
struct pass {
	int calls;	       /* getdents64 */
	int names;	       /* names returned, "." and ".." aside */
	int names_before_last; /* before the last call */
	ssize_t last;	       /* what the last call returned */
	bool bad_len;	       /* a buffer other than REMOVEALL_BUFSIZE */
};

static struct hooks {
	struct pass open[MAX_FD]; /* passes in progress, by descriptor */
	bool is_open[MAX_FD];
	struct pass *done; /* finished passes, in order */
	int ndone;
	const char *eacces_prefix; /* unlinkat(0) of names so starting */
	int eintr_unlinks;	   /* the next so many unlinkat calls: EINTR */
} hk;

static int names_in(const void *buf, ssize_t n)
{
	int names = 0;

	for (ssize_t off = 0; off < n;) {
		const char *rec = (const char *)buf + off;
		unsigned short reclen;
		const char *name = rec + 19;

		memcpy(&reclen, rec + 16, sizeof(reclen));
		if (strcmp(name, ".") && strcmp(name, ".."))
			names++;
		off += reclen;
	}
	return names;
}

static int h_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	int fd = removeall_sys_default.openat(dirfd, path, flags, mode);

	if (fd >= 0 && fd < MAX_FD && (flags & O_DIRECTORY)) {
		memset(&hk.open[fd], 0, sizeof(hk.open[fd]));
		hk.is_open[fd] = true;
	}
	return fd;
}

static ssize_t h_getdents64(int fd, void *buf, size_t len)
{
	ssize_t n = removeall_sys_default.getdents64(fd, buf, len);
	struct pass *p;

	if (fd < 0 || fd >= MAX_FD || !hk.is_open[fd])
		return n;
	p = &hk.open[fd];
	p->bad_len |= len != REMOVEALL_BUFSIZE;
	p->calls++;
	p->names_before_last = p->names;
	p->last = n;
	if (n > 0)
		p->names += names_in(buf, n);
	return n;
}

static int h_unlinkat(int dirfd, const char *path, int flags)
{
	if (hk.eintr_unlinks > 0) {
		hk.eintr_unlinks--;
		errno = EINTR;
		return -1;
	}
	if (!flags && hk.eacces_prefix &&
	    !strncmp(path, hk.eacces_prefix, strlen(hk.eacces_prefix))) {
		errno = EACCES;
		return -1;
	}
	return removeall_sys_default.unlinkat(dirfd, path, flags);
}

static int h_close(int fd)
{
	if (fd >= 0 && fd < MAX_FD && hk.is_open[fd]) {
		hk.is_open[fd] = false;
		/* Not the wrapped realloc: the OOM case must not hit it. */
		hk.done = __real_realloc(hk.done,
					 (hk.ndone + 1) * sizeof(*hk.done));
		assert_non_null(hk.done);
		hk.done[hk.ndone++] = hk.open[fd];
	}
	return removeall_sys_default.close(fd);
}

static ssize_t h_readlinkat(int dirfd, const char *path, char *buf, size_t len)
{
	return removeall_sys_default.readlinkat(dirfd, path, buf, len);
}

static int h_fcntl(int fd, int cmd, int arg)
{
	return removeall_sys_default.fcntl(fd, cmd, arg);
}

static const struct removeall_sys sys = {
	.openat = h_openat,
	.getdents64 = h_getdents64,
	.unlinkat = h_unlinkat,
	.readlinkat = h_readlinkat,
	.fcntl = h_fcntl,
	.close = h_close,
};

/* ---- fixture -------------------------------------------------------- */

/* Shared with a forked child: what one removeall() call did. */
struct result {
	int rc;
	struct removeall_stats st;
	char op[32];
	char path[1024];
	int err;
};

struct fx {
	char dir[256]; /* mkdtemp, removed in teardown */
	int dfd;
	char outside[300];  /* dir/outside: must survive */
	struct result *res; /* MAP_SHARED */
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(unit_mkdtemp(f->dir, sizeof(f->dir), "removeall"), 0);
	f->dfd = open(f->dir, O_RDONLY | O_DIRECTORY);
	assert_true(f->dfd >= 0);
	snprintf(f->outside, sizeof(f->outside), "%s/outside", f->dir);
	f->res = mmap(NULL, sizeof(*f->res), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(f->res != MAP_FAILED);
	memset(&hk, 0, sizeof(hk));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[600];

	/* A read-only directory may be left: make it all writable. */
	snprintf(cmd, sizeof(cmd), "chmod -R u+rwx '%s' 2>/dev/null", f->dir);
	if (system(cmd) < 0)
		perror("chmod");
	unit_rm_rf(f->dir);
	close(f->dfd);
	munmap(f->res, sizeof(*f->res));
	free(hk.done);
	memset(&hk, 0, sizeof(hk));
	free(f);
	return 0;
}

/* Run removeall() on @name below the fixture's directory. */
static int run(struct fx *f, const char *name)
{
	struct removeall_error e = { 0 };
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	memset(f->res, 0, sizeof(*f->res));
	f->res->rc = removeall(path, &sys, &f->res->st, &e);
	if (e.op) {
		snprintf(f->res->op, sizeof(f->res->op), "%s", e.op);
		snprintf(f->res->path, sizeof(f->res->path), "%s",
			 e.path ? e.path : "");
		f->res->err = e.err;
	}
	removeall_error_clear(&e);
	return f->res->rc;
}

static void mk_dir(int dfd, const char *path)
{
	assert_int_equal(mkdirat(dfd, path, 0755), 0);
}

/*
 * The getdents64 pattern of Go's readdir for the passes over a directory
 * of @entries names (all removable), in hk.done[@first...]: returns how
 * many passes there were.
 */
static int check_passes(int first, int entries)
{
	int want = entries / REMOVEALL_BATCH + 1, left = entries;

	assert_true(hk.ndone >= first + want);
	for (int i = 0; i < want; i++) {
		const struct pass *p = &hk.done[first + i];
		int expect = left < REMOVEALL_BATCH ? left : REMOVEALL_BATCH;

		assert_false(p->bad_len);
		assert_true(p->calls >= 1);
		if (i < want - 1) {
			/* Stops at the read that completes 1024 names. */
			assert_true(p->names >= REMOVEALL_BATCH);
			assert_true(p->names_before_last < REMOVEALL_BATCH);
			assert_true(p->last > 0);
		} else {
			/* The last pass reads to the end: a 0 return. */
			assert_int_equal(p->last, 0);
			assert_int_equal(p->names, left);
		}
		/* From the start: every name not yet removed comes again. */
		assert_true(p->names >= expect);
		if (p->names > left)
			fail_msg("pass %d read %d names, only %d left", i,
				 p->names, left);
		left -= expect;
	}
	return want;
}

/* Names returned by all getdents64 calls of passes [first, first+n). */
static long names_read(int first, int n)
{
	long sum = 0;

	for (int i = first; i < first + n; i++)
		sum += hk.done[i].names;
	return sum;
}

/* ---- cases ---------------------------------------------------------- */

/* 3000 files: passes of 1024, 1024 and 952 names. */
static void test_removeall_flat(void **state)
{
	struct fx *f = *state;
	const int n = 3000;
	int passes;

	mk_dir(f->dfd, "flat");
	unit_mk_files(f->dfd, "flat", "f", n);
	assert_int_equal(run(f, "flat"), 0);
	assert_false(unit_exists(f->dfd, "flat"));

	passes = check_passes(0, n);
	assert_int_equal(passes, 3);
	assert_int_equal(hk.ndone, passes);
	/* os.Remove + the EISDIR probe in the parent + one per file. */
	assert_int_equal(f->res->st.sys_unlinkat, 1 + 1 + n);
	assert_int_equal(f->res->st.sys_rmdir, 1 + 1);
	assert_int_equal(f->res->st.sys_openat, 1 + passes);
	assert_int_equal(f->res->st.sys_close, 1 + passes);
	assert_int_equal(f->res->st.sys_fcntl, 4);
	assert_int_equal(f->res->st.sys_readlinkat, 0);
	assert_int_equal(f->res->st.passes, passes);
	assert_int_equal(f->res->st.removed, n + 1);
	/* What was read again is exactly what the buffers held beyond the
	 * 1024 names a pass uses. */
	assert_int_equal(f->res->st.names_read, names_read(0, passes));
	assert_true(f->res->st.names_read > (uint64_t)n);
	{
		long extra = 0;

		for (int i = 0; i < passes - 1; i++)
			extra += hk.done[i].names - REMOVEALL_BATCH;
		assert_int_equal(f->res->st.names_read, n + extra);
	}
	assert_int_equal(f->res->st.sys_getdents64, hk.done[0].calls +
							    hk.done[1].calls +
							    hk.done[2].calls);
	assert_int_equal(removeall_stats_syscalls(&f->res->st),
			 (2 + n) + 2 + (1 + passes) * 2 + 4 +
				 f->res->st.sys_getdents64);
}

/* 2048 files: two full passes, then one that reads nothing. */
static void test_removeall_exact_batches(void **state)
{
	struct fx *f = *state;
	const int n = 2 * REMOVEALL_BATCH;

	mk_dir(f->dfd, "d");
	unit_mk_files(f->dfd, "d", "x", n);
	assert_int_equal(run(f, "d"), 0);
	assert_false(unit_exists(f->dfd, "d"));
	assert_int_equal(check_passes(0, n), 3);
	assert_int_equal(hk.done[2].names, 0);
	assert_int_equal(hk.done[2].last, 0);
	assert_int_equal(f->res->st.sys_openat, 1 + 3);
	assert_int_equal(f->res->st.sys_unlinkat, 2 + n);
}

/*
 * A nested tree, depth first as Go goes: every directory costs one failed
 * unlinkat, its passes and one rmdir; a file or symlink one unlinkat.
 */
static void test_removeall_nested(void **state)
{
	struct fx *f = *state;
	/* dirs: t, t/a, t/a/b, t/a/b/c, t/e (empty), t/big */
	const int dirs = 6, files = 3 + 2 + 1 + 1 + 1100;
	int passes = 0;

	mk_dir(f->dfd, "t");
	mk_dir(f->dfd, "t/a");
	mk_dir(f->dfd, "t/a/b");
	mk_dir(f->dfd, "t/a/b/c");
	mk_dir(f->dfd, "t/e");
	mk_dir(f->dfd, "t/big");
	unit_mk_files(f->dfd, "t", "t", 3);
	unit_mk_files(f->dfd, "t/a", "a", 2);
	unit_mk_files(f->dfd, "t/a/b", "b", 1);
	unit_mk_files(f->dfd, "t/a/b/c", "c", 1);
	unit_mk_files(f->dfd, "t/big", "g", 1100);

	assert_int_equal(run(f, "t"), 0);
	assert_false(unit_exists(f->dfd, "t"));
	for (int i = 0; i < hk.ndone; i++)
		assert_false(hk.done[i].bad_len);
	/* t: 5 entries, a: 3, b: 2, c: 1, e: 0 -> one pass each;
	 * big: 1100 -> two. */
	passes = 5 + 2;
	assert_int_equal(hk.ndone, passes);
	assert_int_equal(f->res->st.passes, passes);
	assert_int_equal(f->res->st.sys_openat, 1 + passes);
	assert_int_equal(f->res->st.sys_close, 1 + passes);
	assert_int_equal(f->res->st.sys_unlinkat, 1 + dirs + files);
	assert_int_equal(f->res->st.sys_rmdir, 1 + dirs);
	assert_int_equal(f->res->st.removed, dirs + files);
}

/* Symbolic links are unlinked like files and never followed, also when
 * they point to directories. */
static void test_removeall_symlinks_outside(void **state)
{
	struct fx *f = *state;

	mk_dir(f->dfd, "outside");
	unit_mk_files(f->dfd, "outside", "keep", 5);
	mk_dir(f->dfd, "s");
	mk_dir(f->dfd, "s/sub");
	assert_int_equal(symlinkat(f->outside, f->dfd, "s/to_dir"), 0);
	assert_int_equal(symlinkat("../outside", f->dfd, "s/sub/rel"), 0);
	assert_int_equal(
		symlinkat("../outside/keep000000", f->dfd, "s/to_file"), 0);
	assert_int_equal(symlinkat("/nonexistent", f->dfd, "s/dangling"), 0);

	assert_int_equal(run(f, "s"), 0);
	assert_false(unit_exists(f->dfd, "s"));
	assert_true(unit_exists(f->dfd, "outside"));
	for (int i = 0; i < 5; i++) {
		char name[64];

		snprintf(name, sizeof(name), "outside/keep%06d", i);
		assert_true(unit_exists(f->dfd, name));
	}
	/* 4 links, 2 directories: no open of a link, no readlinkat. */
	assert_int_equal(f->res->st.sys_unlinkat, 1 + 2 + 4);
	assert_int_equal(f->res->st.sys_openat, 1 + 2);
	assert_int_equal(f->res->st.sys_readlinkat, 0);

	/* A link to a directory as the argument: the link goes, at once. */
	assert_int_equal(symlinkat(f->outside, f->dfd, "top"), 0);
	assert_int_equal(run(f, "top"), 0);
	assert_false(unit_exists(f->dfd, "top"));
	assert_true(unit_exists(f->dfd, "outside/keep000004"));
	assert_int_equal(removeall_stats_syscalls(&f->res->st), 1);
}

/*
 * Every name of a batch failing: Go reads the next batch on the same
 * descriptor instead of reopening. 2100 names that cannot go: one open,
 * batches of 1024, 1024, 52, no name read twice; then rmdir fails and
 * the first failure is returned.
 */
static void test_removeall_failing_batch(void **state)
{
	struct fx *f = *state;
	const int n = 2100;

	mk_dir(f->dfd, "d");
	unit_mk_files(f->dfd, "d", "keep", n);
	hk.eacces_prefix = "keep";
	assert_int_equal(run(f, "d"), -EACCES);
	assert_string_equal(f->res->op, "unlinkat");
	assert_int_equal(f->res->err, EACCES);
	/* "<dir>/d/keepNNNNNN": Go's path, grown one level at a time. */
	assert_int_equal(strncmp(f->res->path, f->dir, strlen(f->dir)), 0);
	assert_int_equal(strncmp(f->res->path + strlen(f->dir), "/d/keep", 7),
			 0);
	assert_int_equal(hk.ndone, 1);
	assert_int_equal(f->res->st.passes, 1);
	assert_int_equal(f->res->st.names_read, n);
	assert_int_equal(hk.done[0].names, n);
	assert_int_equal(hk.done[0].last, 0);
	assert_int_equal(f->res->st.sys_unlinkat, 2 + n);
	assert_int_equal(f->res->st.sys_rmdir, 2);
	assert_int_equal(f->res->st.removed, 0);
	assert_true(unit_exists(f->dfd, "d/keep002099"));
}

/* A child that gave up root removes @f's "ro" tree. */
static int unpriv_child(void *arg)
{
	struct fx *f = arg;

	if (getuid() == 0 &&
	    (setresgid(UNPRIV_UID, UNPRIV_UID, UNPRIV_UID) < 0 ||
	     setresuid(UNPRIV_UID, UNPRIV_UID, UNPRIV_UID) < 0))
		return 3;
	run(f, "ro");
	return 0;
}

/*
 * A read-only directory: Go does not chmod, so its files stay (EACCES),
 * the rest of the tree goes, and the error names the first file that
 * could not go. As root (which may write anywhere) everything goes.
 */
static void test_removeall_readonly(void **state)
{
	struct fx *f = *state;
	char cmd[600];

	mk_dir(f->dfd, "ro");
	mk_dir(f->dfd, "ro/locked");
	mk_dir(f->dfd, "ro/open");
	unit_mk_files(f->dfd, "ro/locked", "l", 3);
	unit_mk_files(f->dfd, "ro/open", "o", 3);
	if (getuid() == 0) {
		snprintf(cmd, sizeof(cmd), "chown -R %d:%d '%s'", UNPRIV_UID,
			 UNPRIV_UID, f->dir);
		assert_int_equal(system(cmd), 0);
	}
	assert_int_equal(fchmodat(f->dfd, "ro/locked", 0555, 0), 0);

	assert_int_equal(unit_run_child(unpriv_child, f, 30000), 0);
	assert_int_equal(f->res->rc, -EACCES);
	assert_string_equal(f->res->op, "unlinkat");
	assert_non_null(strstr(f->res->path, "/ro/locked/l00000"));
	assert_true(unit_exists(f->dfd, "ro/locked/l000000"));
	assert_true(unit_exists(f->dfd, "ro/locked/l000002"));
	assert_false(unit_exists(f->dfd, "ro/open"));
	/* ro: EISDIR; locked: EISDIR, 3 x EACCES; open: EISDIR, 3. */
	assert_int_equal(f->res->st.sys_unlinkat, 1 + 1 + 1 + 3 + 1 + 3);
	assert_int_equal(f->res->st.sys_rmdir, 1 + 3);

	if (getuid() == 0) {
		/* Root may write into a read-only directory. */
		assert_int_equal(run(f, "ro"), 0);
		assert_false(unit_exists(f->dfd, "ro"));
	}
}

/* Missing, a file, ".": the simple cases, in as few calls as Go. */
static void test_removeall_simple_cases(void **state)
{
	struct fx *f = *state;
	struct removeall_stats st = { 0 };
	struct removeall_error e = { 0 };
	char path[512];

	assert_int_equal(run(f, "missing"), 0);
	assert_int_equal(f->res->st.sys_unlinkat, 1);
	assert_int_equal(f->res->st.sys_rmdir, 1);
	assert_int_equal(removeall_stats_syscalls(&f->res->st), 2);

	assert_int_equal(mknodat(f->dfd, "file", S_IFREG | 0644, 0), 0);
	assert_int_equal(run(f, "file"), 0);
	assert_false(unit_exists(f->dfd, "file"));
	assert_int_equal(removeall_stats_syscalls(&f->res->st), 1);

	mk_dir(f->dfd, "empty");
	assert_int_equal(run(f, "empty"), 0);
	assert_false(unit_exists(f->dfd, "empty"));
	assert_int_equal(removeall_stats_syscalls(&f->res->st), 2);

	snprintf(path, sizeof(path), "%s/.", f->dir);
	assert_int_equal(removeall(path, NULL, &st, &e), -EINVAL);
	assert_string_equal(e.op, "RemoveAll");
	assert_int_equal(e.err, EINVAL);
	removeall_error_clear(&e);
	assert_int_equal(removeall_stats_syscalls(&st), 0);
	assert_int_equal(removeall("", NULL, &st, NULL), 0);
	assert_int_equal(removeall_stats_syscalls(&st), 0);
	assert_true(unit_exists(f->dfd, "."));
}

/* Trailing slashes and a relative path: splitPath() gives "." as the
 * parent. */
static void test_removeall_relative_path(void **state)
{
	struct fx *f = *state;
	struct removeall_stats st = { 0 };
	char cwd[1024];

	mk_dir(f->dfd, "rel");
	unit_mk_files(f->dfd, "rel", "r", 10);
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(f->dir), 0);
	assert_int_equal(removeall("rel//", &sys, &st, NULL), 0);
	assert_int_equal(chdir(cwd), 0);
	assert_false(unit_exists(f->dfd, "rel"));
	assert_int_equal(st.sys_openat, 2);
	assert_int_equal(st.sys_unlinkat, 2 + 10);
}

/* EINTR: issued again, and counted again, as ignoringEINTR() does. */
static void test_removeall_eintr(void **state)
{
	struct fx *f = *state;

	mk_dir(f->dfd, "d");
	unit_mk_files(f->dfd, "d", "e", 4);
	hk.eintr_unlinks = 3;
	assert_int_equal(run(f, "d"), 0);
	assert_false(unit_exists(f->dfd, "d"));
	/* The three EINTRs hit os.Remove's unlink, issued four times. */
	assert_int_equal(f->res->st.sys_unlinkat, 3 + 1 + 1 + 4);
	assert_int_equal(f->res->st.sys_rmdir, 2);
}

/* Every allocation fails in turn: -ENOMEM and nothing leaks, until the
 * run needs no failure and removes everything. */
static void test_removeall_oom(void **state)
{
	struct fx *f = *state;
	char path[512];
	int rc = -ENOMEM;

	snprintf(path, sizeof(path), "%s/m", f->dir);
	for (long k = 1; rc == -ENOMEM && k < 1000; k++) {
		/* The same tree every time, so allocation k is the same. */
		unit_rm_rf(path);
		mk_dir(f->dfd, "m");
		mk_dir(f->dfd, "m/a");
		mk_dir(f->dfd, "m/a/b");
		unit_mk_files(f->dfd, "m/a/b", "n", 1500);
		assert_int_equal(symlinkat("m", f->dfd, "m/a/l"), 0);
		memset(&hk, 0, sizeof(hk));
		oom.count = 0;
		oom.fail_at = k;
		oom.armed = true;
		rc = run(f, "m");
		oom.armed = false;
		free(hk.done);
		hk.done = NULL;
		if (rc != -ENOMEM)
			assert_int_equal(rc, 0);
	}
	assert_int_equal(rc, 0);
	assert_false(unit_exists(f->dfd, "m"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_removeall_flat, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_removeall_exact_batches,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_removeall_nested, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_removeall_symlinks_outside,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_removeall_failing_batch,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_removeall_readonly, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_removeall_simple_cases,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_removeall_relative_path,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_removeall_eintr, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_removeall_oom, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
