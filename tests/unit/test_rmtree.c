/*
 * rmtree.h: removing trees on descriptors only. Every case builds a real
 * tree under a fresh mkdtemp() directory and checks the end state, the
 * reports and the system call counts; races and failures are injected
 * through the engine's system call table (struct rmtree_sys).
 *
 * Cases that need root (devices, tmpfs, immutable files, another uid) skip
 * with a message without it. The permission cases run the engine in a
 * child that setresuid()s to UNPRIV_UID, on a tree chowned to it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/fs.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "rmtree.h"
#include "unit.h"

#define UNPRIV_UID 4321
#define MAX_IMMUTABLE 8

/* Shared with forked children: what one rmtree_remove() call did. */
struct result {
	int rc;
	struct rmtree_stats st;
	size_t len;	 /* of log */
	char log[65536]; /* "E <errno> <path>\n" and "R <path>\n" lines */
};

struct fx {
	char dir[256];			    /* mkdtemp, removed in teardown */
	int dfd;			    /* open on dir */
	char mnt[512];			    /* a tmpfs mounted here, or "" */
	char immutable[MAX_IMMUTABLE][512]; /* files made immutable */
	int nimm;
	struct result *res; /* MAP_SHARED */
};

/* ---- hooks: the engine's system calls, with injections ------------ */

static struct hooks {
	bool count_fds; /* count /proc/self/fd at each openat */
	int max_fds_seen;
	bool unknown_types;	  /* getdents64 says DT_UNKNOWN */
	const char *eperm_prefix; /* unlinkat of names so starting: EPERM */
	/* openat of this name (not O_PATH): call swap() first, once */
	const char *swap_name;
	void (*swap)(int dirfd, const char *name);
	bool swapped;
	/* openat(".."): call dotdot() once, then fail with EACCES */
	void (*dotdot)(void);
	bool dotdot_done;
	struct fx *f;
} hk;

static int count_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the DIR's own */
}

static int h_openat(int dirfd, const char *name, int flags)
{
	if (hk.count_fds) {
		static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
		int n = count_open_fds();

		/* Several workers call this. */
		pthread_mutex_lock(&lock);
		if (n > hk.max_fds_seen)
			hk.max_fds_seen = n;
		pthread_mutex_unlock(&lock);
	}
	if (hk.swap_name && !hk.swapped && !(flags & O_PATH) &&
	    !strcmp(name, hk.swap_name)) {
		hk.swapped = true;
		hk.swap(dirfd, name);
	}
	if (hk.dotdot && !strcmp(name, "..")) {
		if (!hk.dotdot_done) {
			hk.dotdot_done = true;
			hk.dotdot();
		}
		errno = EACCES;
		return -1;
	}
	return rmtree_sys_default.openat(dirfd, name, flags);
}

static ssize_t h_getdents64(int fd, void *buf, size_t len)
{
	ssize_t n = rmtree_sys_default.getdents64(fd, buf, len);

	if (n > 0 && hk.unknown_types) {
		for (ssize_t off = 0; off < n;) {
			char *rec = (char *)buf + off;
			unsigned short reclen;

			/* struct linux_dirent64: ino 8, off 8, reclen 2, type 1 */
			memcpy(&reclen, rec + 16, sizeof(reclen));
			rec[18] = DT_UNKNOWN;
			off += reclen;
		}
	}
	return n;
}

static int h_unlinkat(int dirfd, const char *name, int flags)
{
	if (hk.eperm_prefix &&
	    !strncmp(name, hk.eperm_prefix, strlen(hk.eperm_prefix))) {
		errno = EPERM;
		return -1;
	}
	return rmtree_sys_default.unlinkat(dirfd, name, flags);
}

static const struct rmtree_sys hooked = {
	.openat = h_openat,
	.getdents64 = h_getdents64,
	.unlinkat = h_unlinkat,
	.fstatat = fstatat,
	.fstat = fstat,
	.fchmod = fchmod,
	.fchmodat = fchmodat,
	.close = close,
	.lseek = lseek,
};

/* ---- reports ------------------------------------------------------ */

static int qsort_strcmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void logf_(struct result *r, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(r->log + r->len, sizeof(r->log) - r->len, fmt, ap);
	va_end(ap);
	if (n > 0 && r->len + (size_t)n < sizeof(r->log))
		r->len += (size_t)n;
}

static void on_error(void *arg, const char *path, int err)
{
	logf_(arg, "E %d %s\n", -err, path);
}

static void on_removed(void *arg, const char *path, bool dir)
{
	logf_(arg, "R %s%s\n", path, dir ? "/" : "");
}

static struct rmtree_opts opts_for(struct fx *f)
{
	return (struct rmtree_opts){
		.jobs = 1,
		.error = on_error,
		.arg = f->res,
		.sys = &hooked,
	};
}

/* Run the engine on @name (relative to the fixture's directory). */
static int run(struct fx *f, const char *name, struct rmtree_opts *o)
{
	memset(f->res, 0, sizeof(*f->res));
	f->res->rc = rmtree_remove(f->dfd, name, o, &f->res->st);
	return f->res->rc;
}

/* Lines of the log starting with @tag, sorted, joined by '\n'. */
static char *log_lines(const struct result *r, char tag)
{
	char *copy = strndup(r->log, r->len), *save = NULL, *line;
	char **v = NULL, *out;
	size_t n = 0, len = 1;

	assert_non_null(copy);
	for (line = strtok_r(copy, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (line[0] != tag)
			continue;
		v = realloc(v, (n + 1) * sizeof(*v));
		assert_non_null(v);
		v[n++] = line;
		len += strlen(line) + 1;
	}
	qsort(v, n, sizeof(*v), qsort_strcmp);
	out = calloc(1, len);
	assert_non_null(out);
	for (size_t i = 0; i < n; i++) {
		if (i)
			strcat(out, "\n");
		strcat(out, v[i]);
	}
	free(v);
	free(copy);
	return out;
}

/* How many lines of the log start with @tag. */
static int count_lines(const struct result *r, char tag)
{
	int n = 0;

	for (size_t i = 0; i < r->len; i++)
		if ((i == 0 || r->log[i - 1] == '\n') && r->log[i] == tag)
			n++;
	return n;
}

/* ---- building trees ----------------------------------------------- */

static void mk_dir(int dfd, const char *path, mode_t mode)
{
	assert_int_equal(mkdirat(dfd, path, mode), 0);
}

static void mk_file(int dfd, const char *path)
{
	assert_int_equal(mknodat(dfd, path, S_IFREG | 0644, 0), 0);
}

/*
 * @n entries in @dfd/@dir, hard links to one inode per 50,000 (below
 * ext4's 65,000): several times faster to make than as many inodes.
 */
static void mk_hardlinks(int dfd, const char *dir, int n)
{
	int fd = openat(dfd, dir, O_RDONLY | O_DIRECTORY);
	char name[64], first[64] = "";

	assert_true(fd >= 0);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%06d", i);
		if (i % 50000 == 0) {
			assert_int_equal(mknodat(fd, name, S_IFREG | 0644, 0),
					 0);
			memcpy(first, name, sizeof(name));
		} else {
			assert_int_equal(linkat(fd, first, fd, name, 0), 0);
		}
	}
	close(fd);
}

static void mk_link(int dfd, const char *target, const char *path)
{
	assert_int_equal(symlinkat(target, dfd, path), 0);
}

/*
 * A chain @depth directories deep named "dir" below @dfd/@name, each
 * holding a file "f". Longer than PATH_MAX from depth 1,000 on.
 */
static void mk_chain(int dfd, const char *name, int depth)
{
	int fd;

	mk_dir(dfd, name, 0755);
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	for (int i = 0; i < depth; i++) {
		int next;

		assert_int_equal(mknodat(fd, "f", S_IFREG | 0644, 0), 0);
		assert_int_equal(mkdirat(fd, "dir", 0755), 0);
		next = openat(fd, "dir", O_RDONLY | O_DIRECTORY);
		assert_true(next >= 0);
		close(fd);
		fd = next;
	}
	close(fd);
}

/* Append "relpath type\n" for everything below @fd to @out (sorted). */
static void list_rec(int fd, const char *prefix, char ***v, size_t *n)
{
	DIR *d = fdopendir(fd);
	struct dirent *e;

	assert_non_null(d);
	while ((e = readdir(d))) {
		char line[4096];
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		assert_int_equal(fstatat(dirfd(d), e->d_name, &st,
					 AT_SYMLINK_NOFOLLOW),
				 0);
		snprintf(line, sizeof(line), "%s/%s %o", prefix, e->d_name,
			 (unsigned)(st.st_mode & S_IFMT) >> 12);
		*v = realloc(*v, (*n + 1) * sizeof(**v));
		assert_non_null(*v);
		(*v)[(*n)++] = strdup(line);
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), e->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW);

			snprintf(line, sizeof(line), "%s/%s", prefix,
				 e->d_name);
			assert_true(sub >= 0);
			list_rec(sub, line, v, n);
		}
	}
	closedir(d);
}

/* What exists below @dfd/@name, sorted, one line per entry; "" if none. */
static char *list_tree(int dfd, const char *name)
{
	char **v = NULL, *out;
	size_t n = 0, len = 1;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);

	if (fd < 0)
		return strdup(unit_exists(dfd, name) ? "(not a directory)" :
						       "(missing)");
	list_rec(fd, "", &v, &n);
	qsort(v, n, sizeof(*v), qsort_strcmp);
	for (size_t i = 0; i < n; i++)
		len += strlen(v[i]) + 1;
	out = calloc(1, len);
	for (size_t i = 0; i < n; i++) {
		strcat(out, v[i]);
		strcat(out, "\n");
		free(v[i]);
	}
	free(v);
	return out;
}

static bool is_root(void)
{
	return geteuid() == 0;
}

/* Make @path immutable (root, and a filesystem that supports it). */
static bool make_immutable(struct fx *f, const char *path)
{
	int fd = openat(f->dfd, path, O_RDONLY | O_NOFOLLOW), flags = 0;
	char full[sizeof(f->immutable[0])];
	bool ok;

	if (fd < 0 || f->nimm == MAX_IMMUTABLE)
		return false;
	/* Recorded first: the teardown clears it whatever happens next. */
	snprintf(full, sizeof(full), "%s/%s", f->dir, path);
	memcpy(f->immutable[f->nimm++], full, sizeof(full));
	ok = ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
	flags |= FS_IMMUTABLE_FL;
	ok = ok && ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
	close(fd);
	return ok;
}

static void clear_immutable(const char *path)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW), flags = 0;

	if (fd < 0)
		return;
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0) {
		flags &= ~FS_IMMUTABLE_FL;
		ioctl(fd, FS_IOC_SETFLAGS, &flags);
	}
	close(fd);
}

static int chown_one(const char *path, const struct stat *st, int flag,
		     struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return lchown(path, UNPRIV_UID, UNPRIV_UID);
}

/* Give the fixture's @name (and its directory, for access) to UNPRIV_UID. */
static void chown_tree(struct fx *f, const char *name)
{
	char path[600];

	assert_int_equal(chmod(f->dir, 0755), 0);
	if (!is_root())
		return;
	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	assert_int_equal(nftw(path, chown_one, 16, FTW_PHYS), 0);
}

/* ---- running as another user -------------------------------------- */

struct as_user {
	struct fx *f;
	const char *name;
	struct rmtree_opts o;
};

static int as_user_child(void *arg)
{
	struct as_user *a = arg;

	if (is_root() && (setgroups(0, NULL) < 0 ||
			  setresgid(UNPRIV_UID, UNPRIV_UID, UNPRIV_UID) < 0 ||
			  setresuid(UNPRIV_UID, UNPRIV_UID, UNPRIV_UID) < 0))
		return 100;
	a->o.arg = a->f->res;
	run(a->f, a->name, &a->o);
	return 0;
}

/*
 * Run the engine on @name in a child as UNPRIV_UID (when root; as
 * ourselves otherwise); its result lands in f->res.
 */
static void run_as_user(struct fx *f, const char *name, struct rmtree_opts o)
{
	struct as_user a = { .f = f, .name = name, .o = o };

	assert_int_equal(unit_run_child(as_user_child, &a, 20000), 0);
}

/* ---- fixture ------------------------------------------------------ */

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f || unit_mkdtemp(f->dir, sizeof(f->dir), "rmtree") < 0)
		return -1;
	f->dfd = open(f->dir, O_RDONLY | O_DIRECTORY);
	f->res = mmap(NULL, sizeof(*f->res), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (f->dfd < 0 || f->res == MAP_FAILED)
		return -1;
	memset(&hk, 0, sizeof(hk));
	hk.f = f;
	umask(022);
	*state = f;
	return 0;
}

/*
 * Whatever a test left, even after a failure: unmount, clear immutable
 * flags, then chmod -R u+rwx and rm -rf, which cope with 0000 directories
 * and paths longer than PATH_MAX.
 */
static int teardown(void **state)
{
	struct fx *f = *state;
	pid_t pid;

	if (f->mnt[0])
		umount2(f->mnt, MNT_DETACH);
	for (int i = 0; i < f->nimm; i++)
		clear_immutable(f->immutable[i]);
	close(f->dfd);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c",
		      "chmod -R u+rwx \"$1\" 2>/dev/null; rm -rf \"$1\"", "sh",
		      f->dir, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
	munmap(f->res, sizeof(*f->res));
	memset(&hk, 0, sizeof(hk));
	free(f);
	return 0;
}

/* ---- the cases ---------------------------------------------------- */

/* Whether the filesystem under @dfd fills in d_type. */
static bool has_d_type(int dfd)
{
	char buf[4096];
	int fd;
	ssize_t n;
	bool known = true;

	mk_file(dfd, "probe");
	fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY);
	n = rmtree_sys_default.getdents64(fd, buf, sizeof(buf));
	for (ssize_t off = 0; off < n;) {
		unsigned short reclen;

		memcpy(&reclen, buf + off + 16, sizeof(reclen));
		if (buf[off + 18] == DT_UNKNOWN)
			known = false;
		off += reclen;
	}
	close(fd);
	unlinkat(dfd, "probe", 0);
	return known;
}

/* N files: N unlinkat, one rmdir, no stat at all; one open, one close. */
static void test_rmtree_flat_syscalls(void **state)
{
	struct fx *f = *state;
	struct rmtree_opts o = opts_for(f);
	const struct rmtree_stats *st = &f->res->st;
	bool dtype = has_d_type(f->dfd);

	mk_dir(f->dfd, "flat", 0755);
	unit_mk_files(f->dfd, "flat", "file", 1000);
	assert_int_equal(run(f, "flat", &o), 0);
	assert_false(unit_exists(f->dfd, "flat"));
	assert_int_equal(st->files, 1000);
	assert_int_equal(st->dirs, 1);
	assert_int_equal(st->sys_unlinkat + st->sys_rmdir, 1000 + 1);
	assert_int_equal(st->sys_openat, 1);
	assert_int_equal(st->sys_close, 1);
	assert_int_equal(st->sys_fstat, 0);
	assert_int_equal(st->sys_fchmod, 0);
	if (dtype)
		assert_int_equal(st->sys_fstatat, 0);
	else
		print_message("no d_type here: fstatat not checked\n");
	/* 64 KiB per getdents64: 1000 short names fit in one, then EOF. */
	assert_in_range(st->sys_getdents64, 2, 3);
	assert_int_equal(rmtree_stats_syscalls(st),
			 st->sys_getdents64 + 1000 + 1 + 1 + 1);
	assert_int_equal(st->errors, 0);
	assert_int_equal(count_lines(f->res, 'E'), 0);
}

/* A directory of 100,000 entries (names: the inodes are shared). */
static void test_rmtree_wide_100k(void **state)
{
	struct fx *f = *state;
	struct rmtree_opts o = opts_for(f);
	const struct rmtree_stats *st = &f->res->st;

	mk_dir(f->dfd, "wide", 0755);
	mk_hardlinks(f->dfd, "wide", 100000);
	assert_int_equal(run(f, "wide", &o), 0);
	assert_false(unit_exists(f->dfd, "wide"));
	assert_int_equal(st->files, 100000);
	assert_int_equal(st->sys_unlinkat + st->sys_rmdir, 100001);
	if (has_d_type(f->dfd))
		assert_int_equal(st->sys_fstatat, 0);
	assert_in_range(st->sys_getdents64, 2, 200);
	assert_true(rmtree_stats_syscalls(st) < 100000 + 200);
}

/*
 * Symlinks are unlinked, never followed: to a directory outside (whose
 * contents survive), to a file outside, to a directory inside, dangling,
 * and as the root itself.
 */
static void test_rmtree_symlinks(void **state)
{
	struct fx *f = *state;
	struct rmtree_opts o = opts_for(f);
	char target[600];
	char *left;

	mk_dir(f->dfd, "outside", 0755);
	mk_dir(f->dfd, "outside/sub", 0755);
	mk_file(f->dfd, "outside/precious");
	mk_file(f->dfd, "outside/sub/precious");
	snprintf(target, sizeof(target), "%s/outside", f->dir);
	mk_dir(f->dfd, "t", 0755);
	mk_dir(f->dfd, "t/a", 0755);
	mk_dir(f->dfd, "t/a/b", 0755);
	mk_link(f->dfd, target, "t/abs_dir");
	mk_link(f->dfd, "../../outside", "t/a/rel_dir");
	mk_link(f->dfd, "../../../outside/precious", "t/a/b/rel_file");
	mk_link(f->dfd, "b", "t/a/inside");
	mk_link(f->dfd, "nowhere", "t/dangling");
	mk_link(f->dfd, target, "rootlink");

	assert_int_equal(run(f, "t", &o), 0);
	assert_false(unit_exists(f->dfd, "t"));
	assert_int_equal(f->res->st.files, 5);
	assert_int_equal(f->res->st.dirs, 3);

	assert_int_equal(run(f, "rootlink", &o), 0);
	assert_false(unit_exists(f->dfd, "rootlink"));
	/* A trailing slash does not make it follow (GNU rm would). */
	mk_link(f->dfd, target, "rootlink");
	assert_int_equal(run(f, "rootlink//", &o), 0);
	assert_false(unit_exists(f->dfd, "rootlink"));
	assert_int_equal(f->res->st.files, 1);
	left = list_tree(f->dfd, "outside");
	assert_string_equal(left, "/precious 10\n/sub 4\n/sub/precious 10\n");
	free(left);
}

/* A missing root, with and without force; a file as the root; refusals. */
static void test_rmtree_root_cases(void **state)
{
	struct fx *f = *state;
	struct rmtree_opts o = opts_for(f);
	int cwd, rc;
	char *errs;

	assert_int_equal(run(f, "missing", &o), -ENOENT);
	errs = log_lines(f->res, 'E');
	assert_string_equal(errs, "E 2 missing");
	free(errs);
	assert_int_equal(run(f, "no/such/dir", &o), -ENOENT);
	assert_int_equal(count_lines(f->res, 'E'), 1);

	o.force = true;
	assert_int_equal(run(f, "missing", &o), 0);
	assert_int_equal(run(f, "no/such/dir", &o), 0);
	assert_int_equal(f->res->len, 0);

	/* Relative to the working directory. */
	mk_dir(f->dfd, "cwd", 0755);
	mk_file(f->dfd, "cwd/f");
	cwd = open(".", O_RDONLY | O_DIRECTORY);
	assert_true(cwd >= 0);
	assert_int_equal(fchdir(f->dfd), 0);
	rc = rmtree_remove(AT_FDCWD, "cwd", &o, NULL);
	assert_int_equal(fchdir(cwd), 0);
	close(cwd);
	assert_int_equal(rc, 0);
	assert_false(unit_exists(f->dfd, "cwd"));

	mk_file(f->dfd, "file");
	o.removed = on_removed;
	assert_int_equal(run(f, "file", &o), 0);
	assert_false(unit_exists(f->dfd, "file"));
	assert_int_equal(f->res->st.files, 1);

	mk_dir(f->dfd, "keep", 0755);
	assert_int_equal(run(f, ".", &o), -EINVAL);
	assert_int_equal(run(f, "..", &o), -EINVAL);
	assert_int_equal(run(f, "keep/..", &o), -EINVAL);
	assert_int_equal(run(f, "keep/.", &o), -EINVAL);
	assert_int_equal(run(f, "/", &o), -EINVAL);
	assert_int_equal(run(f, "//", &o), -EINVAL);
	assert_int_equal(f->res->len, 0);
	assert_true(unit_exists(f->dfd, "keep"));
}

/* -v: the paths given are the root as given plus one name per level. */
static void test_rmtree_reported_paths(void **state)
{
	struct fx *f = *state;
	struct rmtree_opts o = opts_for(f);
	char *removed;

	mk_dir(f->dfd, "p", 0755);
	mk_dir(f->dfd, "p/r", 0755);
	mk_dir(f->dfd, "p/r/a", 0755);
	mk_dir(f->dfd, "p/r/b", 0755);
	mk_file(f->dfd, "p/r/a/f");
	mk_link(f->dfd, "a", "p/r/l");
	o.removed = on_removed;
	assert_int_equal(run(f, "p/r//", &o), 0);
	removed = log_lines(f->res, 'R');
	assert_string_equal(removed, "R p/r/\nR p/r/a/\nR p/r/a/f\n"
				     "R p/r/b/\nR p/r/l");
	free(removed);
	/* Through the top's O_PATH descriptor: one more openat. */
	assert_int_equal(f->res->st.sys_openat, 1 + 3);
	assert_true(unit_exists(f->dfd, "p"));
}

/* fifos, sockets, devices (root), hard links, odd and long names. */
static void test_rmtree_special_files(void **state)
{
	struct fx *f = *state;
	struct rmtree_opts o = opts_for(f);
	char longname[256];
	int expect = 7, fd;

	mk_dir(f->dfd, "s", 0755);
	assert_int_equal(mknodat(f->dfd, "s/fifo", S_IFIFO | 0644, 0), 0);
	assert_int_equal(mknodat(f->dfd, "s/sock", S_IFSOCK | 0644, 0), 0);
	mk_file(f->dfd, "s/file");
	assert_int_equal(linkat(f->dfd, "s/file", f->dfd, "s/hardlink", 0), 0);
	mk_file(f->dfd, "s/-rf");
	mk_file(f->dfd, "s/new\nline");
	memset(longname, 'x', 255);
	longname[255] = '\0';
	fd = openat(f->dfd, "s", O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(mknodat(fd, longname, S_IFREG | 0644, 0), 0);
	close(fd);
	if (is_root()) {
		assert_int_equal(mknodat(f->dfd, "s/null", S_IFCHR | 0644,
					 makedev(1, 3)),
				 0);
		assert_int_equal(mknodat(f->dfd, "s/loop", S_IFBLK | 0644,
					 makedev(7, 0)),
				 0);
		expect += 2;
	} else {
		print_message("not root: no device nodes\n");
	}
	assert_int_equal(run(f, "s", &o), 0);
	assert_false(unit_exists(f->dfd, "s"));
	assert_int_equal(f->res->st.files, expect);
}

/* 2,000 levels (paths past PATH_MAX) within 64 descriptors. */
static void test_rmtree_deep_2000(void **state)
{
	struct fx *f = *state;
	struct rmtree_opts o = opts_for(f);
	const struct rmtree_stats *st = &f->res->st;
	int base;

	mk_chain(f->dfd, "deep", 2000);
	base = count_open_fds();
	hk.count_fds = true;
	assert_int_equal(run(f, "deep", &o), 0);
	assert_false(unit_exists(f->dfd, "deep"));
	assert_int_equal(st->files, 2000);
	assert_int_equal(st->dirs, 2001);
	assert_true(st->max_open_fds <= RMTREE_MAX_FDS);
	assert_true(st->evictions > 0);
	assert_true(st->reopens > 0);
	/* At each openat, before it: at most the bound is open. */
	assert_true(hk.max_fds_seen - base <= RMTREE_MAX_FDS);
	assert_true(hk.max_fds_seen - base >= RMTREE_MAX_FDS - 2);
	/* Going back up costs a ".." openat and an fstat per level. */
	assert_true(rmtree_stats_syscalls(st) < 2000 * 10);
	assert_int_equal(count_open_fds(), base);
}

/* Several workers in several deep chains, 8 descriptors each. */
static void test_rmtree_deep_jobs(void **state)
{
	struct fx *f = *state;
	struct rmtree_opts o = opts_for(f);
	const struct rmtree_stats *st = &f->res->st;
	int base;

	mk_dir(f->dfd, "forest", 0755);
	mk_chain(f->dfd, "forest/a", 300);
	mk_chain(f->dfd, "forest/b", 300);
	mk_chain(f->dfd, "forest/c", 300);
	mk_chain(f->dfd, "forest/d", 300);
	unit_mk_files(f->dfd, "forest", "x", 50);
	base = count_open_fds();
	hk.count_fds = true;
	o.jobs = 4;
	o.max_fds = 8;
	assert_int_equal(run(f, "forest", &o), 0);
	assert_false(unit_exists(f->dfd, "forest"));
	assert_int_equal(st->files, 4 * 300 + 50);
	assert_int_equal(st->dirs, 4 * 301 + 1);
	assert_true(st->max_open_fds <= 4 * 8);
	/* Each worker's hook holds one more (its /proc/self/fd listing). */
	assert_true(hk.max_fds_seen - base <= 4 * 8 + 4);
	assert_int_equal(count_open_fds(), base);
}

/* A sample of everything, with entries that cannot be removed. */
static void mk_random_tree(int dfd, const char *name, const char *outside,
			   uint64_t seed)
{
	struct rng r;
	char path[256][512];
	int n = 1;

	rng_seed(&r, seed);
	mk_dir(dfd, name, 0755);
	snprintf(path[0], sizeof(path[0]), "%s", name);
	for (int i = 0; i < 600; i++) {
		const char *parent = path[rng_below(&r, n)];
		char p[600];

		snprintf(p, sizeof(p), "%s/e%03d", parent, i);
		switch (rng_below(&r, 10)) {
		case 0:
		case 1:
		case 2:
			if (n < 256 && strlen(p) < 200) {
				mk_dir(dfd, p, 0755);
				memcpy(path[n++], p, strlen(p) + 1);
			}
			break;
		case 3:
			mk_link(dfd, outside, p);
			break;
		case 4:
			assert_int_equal(mknodat(dfd, p, S_IFIFO | 0644, 0), 0);
			break;
		case 5:
			/* The hooks refuse to unlink "keep*". */
			snprintf(p, sizeof(p), "%s/keep%03d", parent, i);
			mk_file(dfd, p);
			break;
		default:
			mk_file(dfd, p);
		}
	}
}

/*
 * -j 1 and -j 4 (the latter in passes of 3 subdirectories) leave the same
 * tree and report the same failures, each once.
 */
static void test_rmtree_jobs_identical(void **state)
{
	struct fx *f = *state;
	struct rmtree_opts o = opts_for(f);
	char outside[600], *left1, *left4, *err1, *err4;
	struct rmtree_stats st1;

	snprintf(outside, sizeof(outside), "%s/outside", f->dir);
	mk_dir(f->dfd, "outside", 0755);
	mk_file(f->dfd, "outside/precious");
	mk_dir(f->dfd, "j1", 0755);
	mk_dir(f->dfd, "j4", 0755);
	mk_random_tree(f->dfd, "j1/t", outside, 42);
	mk_random_tree(f->dfd, "j4/t", outside, 42);
	left1 = list_tree(f->dfd, "j1");
	left4 = list_tree(f->dfd, "j4");
	assert_string_equal(left1, left4);
	free(left1);
	free(left4);

	hk.eperm_prefix = "keep";
	assert_int_equal(run(f, "j1/t", &o), -EPERM);
	st1 = f->res->st;
	err1 = log_lines(f->res, 'E');
	o.jobs = 4;
	o.max_pending = 3;
	assert_int_equal(run(f, "j4/t", &o), -EPERM);
	err4 = log_lines(f->res, 'E');
	assert_true(f->res->st.sys_lseek > 0);

	assert_true(st1.errors > 0);
	assert_int_equal(st1.errors, f->res->st.errors);
	assert_int_equal(st1.files, f->res->st.files);
	assert_int_equal(st1.dirs, f->res->st.dirs);
	/* Same failures, once each, under their own root. */
	for (char *p = err1; (p = strstr(p, " j1/")); p += 4)
		p[2] = '4';
	assert_string_equal(err1, err4);
	left1 = list_tree(f->dfd, "j1");
	left4 = list_tree(f->dfd, "j4");
	assert_string_equal(left1, left4);
	/* Only "keep" files and the directories holding them remain. */
	for (char *line = strtok(left1, "\n"); line; line = strtok(NULL, "\n"))
		assert_true(strstr(line, "keep") || strstr(line, " 4"));
	assert_true(unit_exists(f->dfd, "outside/precious"));
	free(left1);
	free(left4);
	free(err1);
	free(err4);
}

/*
 * A directory with many subdirectories, in passes of 16: the failures are
 * reported once although the directory is read several times.
 */
static void test_rmtree_passes_report_once(void **state)
{
	struct fx *f = *state;
	struct rmtree_opts o = opts_for(f);
	char name[64];

	mk_dir(f->dfd, "m", 0755);
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "m/d%03d", i);
		mk_dir(f->dfd, name, 0755);
		snprintf(name, sizeof(name), "m/d%03d/f", i);
		mk_file(f->dfd, name);
	}
	unit_mk_files(f->dfd, "m", "keep", 5);
	mk_file(f->dfd, "m/d007/keep");
	mk_file(f->dfd, "m/d200/keep");
	hk.eperm_prefix = "keep";
	o.max_pending = 16;
	assert_int_equal(run(f, "m", &o), -EPERM);
	assert_int_equal(f->res->st.errors, 7);
	assert_int_equal(count_lines(f->res, 'E'), 7);
	assert_int_equal(f->res->st.dirs, 298);
	assert_true(f->res->st.sys_lseek >= 300 / 16);
	assert_true(unit_exists(f->dfd, "m/d007/keep"));
	assert_false(unit_exists(f->dfd, "m/d008"));
}

/* With DT_UNKNOWN, one fstatat per entry, and still never a follow. */
static void test_rmtree_dt_unknown(void **state)
{
	struct fx *f = *state;
	struct rmtree_opts o = opts_for(f);

	mk_dir(f->dfd, "outside", 0755);
	mk_file(f->dfd, "outside/precious");
	mk_dir(f->dfd, "u", 0755);
	mk_dir(f->dfd, "u/d", 0755);
	unit_mk_files(f->dfd, "u/d", "f", 10);
	mk_link(f->dfd, "../../outside", "u/d/out");
	mk_link(f->dfd, "d", "u/in");
	hk.unknown_types = true;
	assert_int_equal(run(f, "u", &o), 0);
	assert_false(unit_exists(f->dfd, "u"));
	assert_int_equal(f->res->st.sys_fstatat, 10 + 1 + 1 + 1);
	assert_true(unit_exists(f->dfd, "outside/precious"));
}

static void swap_for_symlink(int dirfd, const char *name)
{
	char target[600];

	snprintf(target, sizeof(target), "%s/outside", hk.f->dir);
	assert_int_equal(renameat(dirfd, name, hk.f->dfd, "outside/moved"), 0);
	assert_int_equal(symlinkat(target, dirfd, name), 0);
}

/* A directory replaced by a symlink between readdir and open. */
static void test_rmtree_race_symlink(void **state)
{
	struct fx *f = *state;
	struct rmtree_opts o = opts_for(f);

	mk_dir(f->dfd, "outside", 0755);
	mk_file(f->dfd, "outside/precious");
	mk_dir(f->dfd, "r", 0755);
	mk_dir(f->dfd, "r/victim", 0755);
	mk_file(f->dfd, "r/victim/inner");
	hk.swap_name = "victim";
	hk.swap = swap_for_symlink;
	assert_int_equal(run(f, "r", &o), 0);
	assert_true(hk.swapped);
	assert_false(unit_exists(f->dfd, "r"));
	assert_true(unit_exists(f->dfd, "outside/precious"));
	assert_true(unit_exists(f->dfd, "outside/moved/inner"));
}

static void swap_evicted(void)
{
	int d = hk.f->dfd;

	assert_int_equal(renameat(d, "c/d1/d2", d, "moved"), 0);
	mk_dir(d, "c/d1/d2", 0755);
	mk_file(d, "c/d1/d2/precious");
}

/*
 * A directory whose descriptor was evicted is swapped for another before
 * it is reopened: the reopen notices (st_ino differs) and leaves it alone.
 */
static void test_rmtree_reopen_verifies(void **state)
{
	struct fx *f = *state;
	struct rmtree_opts o = opts_for(f);
	char name[64], *errs;
	int fd;

	/* c/d1/d2/.../d12, one file each */
	mk_dir(f->dfd, "c", 0755);
	fd = openat(f->dfd, "c", O_RDONLY | O_DIRECTORY);
	for (int i = 1; i <= 12; i++) {
		int next;

		snprintf(name, sizeof(name), "d%d", i);
		mk_dir(fd, name, 0755);
		next = openat(fd, name, O_RDONLY | O_DIRECTORY);
		mk_file(next, "f");
		close(fd);
		fd = next;
	}
	close(fd);
	hk.dotdot = swap_evicted;
	o.max_fds = 8;
	assert_int_equal(run(f, "c", &o), -ESTALE);
	assert_true(hk.dotdot_done);
	errs = log_lines(f->res, 'E');
	snprintf(name, sizeof(name), "E %d c/d1/d2", ESTALE);
	assert_string_equal(errs, name);
	free(errs);
	assert_true(unit_exists(f->dfd, "c/d1/d2/precious"));
	assert_false(unit_exists(f->dfd, "c/d1/f"));
}

/*
 * @name: directories of every restrictive mode, with files; @home: its
 * ancestor to give to UNPRIV_UID.
 */
static void mk_readonly_tree(struct fx *f, const char *home, const char *name)
{
	int d;

	mk_dir(f->dfd, name, 0755);
	d = openat(f->dfd, name, O_RDONLY | O_DIRECTORY);
	assert_true(d >= 0);
	mk_dir(d, "ro", 0755);
	unit_mk_files(d, "ro", "f", 3);
	mk_dir(d, "ro/sub", 0755);
	unit_mk_files(d, "ro/sub", "g", 3);
	mk_dir(d, "ro/empty", 0755);
	mk_dir(d, "deep", 0755);
	mk_dir(d, "deep/x", 0755);
	mk_file(d, "deep/x/h");
	mk_dir(d, "wonly", 0755);
	mk_file(d, "wonly/k");
	mk_dir(d, "noexec", 0755);
	mk_file(d, "noexec/m");
	chown_tree(f, home);
	assert_int_equal(fchmodat(d, "ro/sub", 0000, 0), 0);
	assert_int_equal(fchmodat(d, "ro/empty", 0555, 0), 0);
	assert_int_equal(fchmodat(d, "ro", 0555, 0), 0);
	assert_int_equal(fchmodat(d, "deep/x", 0300, 0), 0);
	assert_int_equal(fchmodat(d, "deep", 0500, 0), 0);
	assert_int_equal(fchmodat(d, "wonly", 0300, 0), 0);
	assert_int_equal(fchmodat(d, "noexec", 0600, 0), 0);
	close(d);
}

/*
 * An owner's read-only tree (0555, 0000, 0300, 0600, 0500 directories) is
 * removed, with one fchmod per directory that needed it; as root, with
 * none (GNU rm -rf as the owner fails on it).
 */
static void test_rmtree_readonly_owner(void **state)
{
	struct fx *f = *state;
	struct rmtree_opts o = opts_for(f);

	/* The user may remove entries of "home", not of f->dir. */
	mk_dir(f->dfd, "home", 0755);
	mk_readonly_tree(f, "home", "home/ro_tree");
	run_as_user(f, "home/ro_tree", o);
	if (f->res->rc)
		print_message("%s", f->res->log);
	assert_int_equal(f->res->rc, 0);
	assert_false(unit_exists(f->dfd, "home/ro_tree"));
	/* ro, ro/sub, deep, deep/x, wonly, noexec; not ro/empty */
	assert_int_equal(f->res->st.sys_fchmod, 6);
	assert_int_equal(f->res->st.files, 3 + 3 + 1 + 1 + 1);

	if (!is_root()) {
		print_message("not root: the root half is skipped\n");
		return;
	}
	mk_readonly_tree(f, "ro_root", "ro_root");
	assert_int_equal(run(f, "ro_root", &o), 0);
	assert_false(unit_exists(f->dfd, "ro_root"));
	assert_int_equal(f->res->st.sys_fchmod, 0);
	assert_int_equal(f->res->st.sys_fstat, 0);
}

/*
 * The directory holding the root is the caller's, not the tree's: never
 * chmod'ed. Its read-only mode makes the root's own rmdir fail.
 */
static void test_rmtree_parent_not_chmoded(void **state)
{
	struct fx *f = *state;
	struct rmtree_opts o = opts_for(f);
	char expect[64];
	struct stat st;
	int saved;

	mk_dir(f->dfd, "par", 0755);
	mk_dir(f->dfd, "par/x", 0755);
	unit_mk_files(f->dfd, "par/x", "f", 4);
	chown_tree(f, "par");
	assert_int_equal(fchmodat(f->dfd, "par", 0555, 0), 0);
	if (!is_root())
		print_message("not root: running as ourselves\n");
	run_as_user(f, "par/x", o);
	assert_int_equal(f->res->rc, -EACCES);
	snprintf(expect, sizeof(expect), "E %d par/x\n", EACCES);
	assert_string_equal(f->res->log, expect);
	assert_int_equal(f->res->st.files, 4);
	assert_int_equal(fstatat(f->dfd, "par", &st, 0), 0);
	assert_int_equal(st.st_mode & 07777, 0555);
	assert_true(unit_exists(f->dfd, "par/x"));

	/* Nor is the caller's own descriptor, when the root is relative to it. */
	mk_dir(f->dfd, "par2", 0755);
	mk_dir(f->dfd, "par2/x", 0755);
	unit_mk_files(f->dfd, "par2/x", "f", 4);
	chown_tree(f, "par2");
	assert_int_equal(fchmodat(f->dfd, "par2", 0555, 0), 0);
	saved = f->dfd;
	f->dfd = openat(saved, "par2", O_RDONLY | O_DIRECTORY);
	assert_true(f->dfd >= 0);
	run_as_user(f, "x", o);
	close(f->dfd);
	f->dfd = saved;
	assert_int_equal(f->res->rc, -EACCES);
	snprintf(expect, sizeof(expect), "E %d x\n", EACCES);
	assert_string_equal(f->res->log, expect);
	assert_int_equal(fstatat(f->dfd, "par2", &st, 0), 0);
	assert_int_equal(st.st_mode & 07777, 0555);
}

/*
 * Failures are reported per path; everything else goes; the directories
 * above a failure stay, unreported. By injection, then for real: an
 * immutable file (root), a root-owned directory (as a user).
 */
static void test_rmtree_keeps_going(void **state)
{
	struct fx *f = *state;
	struct rmtree_opts o = opts_for(f);
	char expect[256], *left;

	mk_dir(f->dfd, "k", 0755);
	mk_dir(f->dfd, "k/a", 0755);
	mk_dir(f->dfd, "k/a/b", 0755);
	unit_mk_files(f->dfd, "k/a/b", "f", 20);
	mk_file(f->dfd, "k/a/b/keep");
	mk_dir(f->dfd, "k/z", 0755);
	unit_mk_files(f->dfd, "k/z", "f", 20);
	hk.eperm_prefix = "keep";
	assert_int_equal(run(f, "k", &o), -EPERM);
	snprintf(expect, sizeof(expect), "E %d k/a/b/keep\n", EPERM);
	assert_string_equal(f->res->log, expect);
	left = list_tree(f->dfd, "k");
	assert_string_equal(left, "/a 4\n/a/b 4\n/a/b/keep 10\n");
	free(left);
	hk.eperm_prefix = NULL;

	if (!is_root()) {
		print_message(
			"not root: immutable and foreign cases skipped\n");
		return;
	}
	mk_dir(f->dfd, "i", 0755);
	mk_dir(f->dfd, "i/a", 0755);
	unit_mk_files(f->dfd, "i/a", "f", 20);
	mk_file(f->dfd, "i/a/imm");
	unit_mk_files(f->dfd, "i", "g", 20);
	if (make_immutable(f, "i/a/imm")) {
		assert_int_equal(run(f, "i", &o), -EPERM);
		snprintf(expect, sizeof(expect), "E %d i/a/imm\n", EPERM);
		assert_string_equal(f->res->log, expect);
		left = list_tree(f->dfd, "i");
		assert_string_equal(left, "/a 4\n/a/imm 10\n");
		free(left);
		/* EPERM: one look at the mode, which was fine. */
		assert_int_equal(f->res->st.sys_fchmod, 0);
		assert_int_equal(f->res->st.sys_fstat, 1);
	} else {
		print_message("no immutable files here: case skipped\n");
	}

	mk_dir(f->dfd, "u", 0755);
	mk_dir(f->dfd, "u/mine", 0755);
	unit_mk_files(f->dfd, "u/mine", "f", 10);
	mk_dir(f->dfd, "u/roots", 0755);
	unit_mk_files(f->dfd, "u/roots", "f", 2);
	chown_tree(f, "u");
	assert_int_equal(fchownat(f->dfd, "u/roots", 0, 0, 0), 0);
	run_as_user(f, "u", o);
	assert_int_equal(f->res->rc, -EACCES);
	assert_int_equal(f->res->st.errors, 2);
	assert_non_null(strstr(f->res->log, "u/roots/f000000\n"));
	assert_non_null(strstr(f->res->log, "u/roots/f000001\n"));
	left = list_tree(f->dfd, "u");
	assert_string_equal(left, "/roots 4\n/roots/f000000 10\n"
				  "/roots/f000001 10\n");
	free(left);
}

/* --one-file-system: a tmpfs inside is skipped and reported (root). */
static void test_rmtree_one_file_system(void **state)
{
	struct fx *f = *state;
	struct rmtree_opts o = opts_for(f);
	char expect[256], *left;

	mk_dir(f->dfd, "o", 0755);
	mk_dir(f->dfd, "o/a", 0755);
	mk_dir(f->dfd, "o/a/mnt", 0755);
	unit_mk_files(f->dfd, "o/a", "f", 5);
	unit_mk_files(f->dfd, "o", "g", 5);
	snprintf(f->mnt, sizeof(f->mnt), "%s/o/a/mnt", f->dir);
	if (!is_root() || mount("none", f->mnt, "tmpfs", 0, "size=1m") < 0) {
		f->mnt[0] = '\0';
		skip();
	}
	unit_mk_files(f->dfd, "o/a/mnt", "t", 5);
	o.one_file_system = true;
	assert_int_equal(run(f, "o", &o), -EXDEV);
	snprintf(expect, sizeof(expect), "E %d o/a/mnt\n", EXDEV);
	assert_string_equal(f->res->log, expect);
	left = list_tree(f->dfd, "o");
	assert_string_equal(left, "/a 4\n/a/mnt 4\n/a/mnt/t000000 10\n"
				  "/a/mnt/t000001 10\n/a/mnt/t000002 10\n"
				  "/a/mnt/t000003 10\n/a/mnt/t000004 10\n");
	free(left);

	/* Without: the tmpfs is emptied; its mount point cannot go. */
	o.one_file_system = false;
	assert_int_equal(run(f, "o", &o), -EBUSY);
	snprintf(expect, sizeof(expect), "E %d o/a/mnt\n", EBUSY);
	assert_string_equal(f->res->log, expect);
	left = list_tree(f->dfd, "o");
	assert_string_equal(left, "/a 4\n/a/mnt 4\n");
	free(left);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_rmtree_flat_syscalls),
		T(test_rmtree_wide_100k),
		T(test_rmtree_symlinks),
		T(test_rmtree_root_cases),
		T(test_rmtree_reported_paths),
		T(test_rmtree_special_files),
		T(test_rmtree_deep_2000),
		T(test_rmtree_deep_jobs),
		T(test_rmtree_jobs_identical),
		T(test_rmtree_passes_report_once),
		T(test_rmtree_dt_unknown),
		T(test_rmtree_race_symlink),
		T(test_rmtree_reopen_verifies),
		T(test_rmtree_readonly_owner),
		T(test_rmtree_parent_not_chmoded),
		T(test_rmtree_keeps_going),
		T(test_rmtree_one_file_system),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
