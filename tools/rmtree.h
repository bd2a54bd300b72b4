/*
 * rmtree: remove a directory tree with as few system calls as a deleter
 * can issue, on any filesystem (local, or a sweepfs FUSE mount), working
 * on file descriptors only. The engine behind `sweepfs rm`; it prints
 * nothing itself and reports through callbacks.
 *
 * Per entry it issues one unlinkat(); per directory one openat(), one or
 * two getdents64() calls with a 64 KiB buffer, one close() and one
 * unlinkat(AT_REMOVEDIR). Entry types come from d_type (fstatat() only
 * for DT_UNKNOWN); no path strings are built unless a callback needs one.
 *
 * Usage:
 *
 *	struct rmtree_opts o = { .jobs = 4, .error = print_err, .arg = me };
 *	struct rmtree_stats st = { 0 };
 *	int rc = rmtree_remove(AT_FDCWD, "build/out", &o, &st);
 *
 * Differences from GNU `rm -rf` (on purpose, as Bazel's deleteTree()):
 * a directory the caller owns but may not write or search (0555, 0000)
 * is made u+rwx with fchmod() and the removal retried, so an owner can
 * always delete their own tree; GNU rm reports "Permission denied"
 * instead. The chmod happens only after a removal or an open failed with
 * EACCES/EPERM, at most once per directory, never on the directory that
 * holds the root (the caller's, not the tree's). `rmtree` never prompts
 * and always recurses. Trailing slashes are ignored: "link/" removes the
 * symlink, never what it points to (GNU rm 9.1 resolves it and empties
 * the directory it points to).
 */
#ifndef SWEEPFS_TOOLS_RMTREE_H
#define SWEEPFS_TOOLS_RMTREE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Open directory file descriptors per worker, unless told otherwise. */
#define RMTREE_MAX_FDS 64
/*
 * Subdirectories of one directory queued per pass, unless told otherwise.
 * A directory with more is read again once those are gone (files are
 * unlinked in the first pass regardless); this bounds memory at about
 * 100 bytes times this number per level of the tree being worked on.
 */
#define RMTREE_MAX_PENDING 16384

/*
 * The system calls the engine issues, so that tests can inject failures
 * and races (SQLite's aSyscall[] idea). Each has the libc calling
 * convention: -1 with errno set on failure.
 */
struct rmtree_sys {
	int (*openat)(int dirfd, const char *name, int flags);
	ssize_t (*getdents64)(int fd, void *buf, size_t len);
	int (*unlinkat)(int dirfd, const char *name, int flags);
	int (*fstatat)(int dirfd, const char *name, struct stat *st, int flags);
	int (*fstat)(int fd, struct stat *st);
	int (*fchmod)(int fd, mode_t mode);
	/* Only used as fchmodat(AT_FDCWD, "/proc/self/fd/N", mode, 0). */
	int (*fchmodat)(int dirfd, const char *name, mode_t mode, int flags);
	int (*close)(int fd);
	off_t (*lseek)(int fd, off_t off, int whence);
};

/* The real system calls; a test's hooks call through to these. */
extern const struct rmtree_sys rmtree_sys_default;

/*
 * Called for each removed path (@dir: it was a directory), and for each
 * path that could not be removed, with a negative errno: -EXDEV for a
 * directory skipped by one_file_system, -ESTALE for a directory that was
 * replaced while its descriptor was closed, anything else as the system
 * call returned it. A directory left because something below it could not
 * be removed is not reported again. @path is the root as given plus
 * "/name" per level; it is valid only during the call.
 *
 * Calls are serialized (never two at once, whatever opts.jobs) but come
 * from the worker threads, in no fixed order when jobs > 1.
 */
typedef void (*rmtree_removed_fn)(void *arg, const char *path, bool dir);
typedef void (*rmtree_error_fn)(void *arg, const char *path, int err);

/* Options. All-zero is valid: one worker, defaults, no callbacks. */
struct rmtree_opts {
	unsigned jobs; /* worker threads; 0 is 1; at most 256 */
	/*
	 * Per worker; 0: RMTREE_MAX_FDS. At least 8; less if RLIMIT_NOFILE
	 * would not leave 32 descriptors to the caller.
	 */
	unsigned max_fds;
	unsigned max_pending;	   /* 0: RMTREE_MAX_PENDING; at least 1 */
	bool one_file_system;	   /* do not enter other devices */
	bool force;		   /* a missing root is success, not an error */
	rmtree_removed_fn removed; /* NULL: no path strings are built */
	rmtree_error_fn error;	   /* NULL: failures are only counted */
	void *arg;		   /* passed to the callbacks */
	const struct rmtree_sys *sys; /* NULL: rmtree_sys_default */
};

/*
 * Counters, added to by rmtree_remove(). The sys_* fields count system
 * calls the engine issued, successful or not, by type (what strace -c
 * would show, except that glibc's fstat() appears there as newfstatat).
 */
struct rmtree_stats {
	uint64_t sys_openat; /* including O_PATH and ".." reopens */
	uint64_t sys_getdents64;
	uint64_t sys_unlinkat; /* without AT_REMOVEDIR */
	uint64_t sys_rmdir;    /* unlinkat(AT_REMOVEDIR) */
	uint64_t sys_fstatat;  /* DT_UNKNOWN entries */
	uint64_t sys_fstat;    /* one_file_system, fd eviction, chmod */
	uint64_t sys_fchmod;   /* fchmod and fchmodat */
	uint64_t sys_close;
	uint64_t sys_lseek; /* rewinds for a second pass */
	uint64_t files;	    /* non-directories removed */
	uint64_t dirs;	    /* directories removed */
	uint64_t errors;    /* failures reported */
	uint64_t evictions; /* directory fds closed to stay in bounds */
	uint64_t reopens;   /* directories opened again after eviction */
	/* High-water mark of open directory fds, the root's parent included. */
	uint64_t max_open_fds;
};

/* Total of the sys_* counters of @st. */
uint64_t rmtree_stats_syscalls(const struct rmtree_stats *st);

/* Add @from's counters to @to (max_open_fds: the larger). */
void rmtree_stats_add(struct rmtree_stats *to, const struct rmtree_stats *from);

/*
 * Remove @path (relative to @dirfd, or AT_FDCWD) and everything below it,
 * like `rm -rf`: a symlink or any other non-directory is unlinked, never
 * followed; a directory is emptied and removed. Symlinks in the leading
 * components of @path are followed, as rm does; the last component is not.
 * Keeps going after a failure, removing everything else it can; each
 * failure is reported through opts->error.
 *
 * Open directory descriptors stay below opts->max_fds per worker at any
 * depth; memory grows with the number of directories pending along the
 * paths being worked on, never with the number of files.
 *
 * Returns 0 when nothing remains (also when @path did not exist and
 * opts->force is set); -EINVAL, without a callback, for a @path whose
 * last component is "." or ".." or for "/" (refused like rm does);
 * -ENOENT when @path did not exist; otherwise, when something could not be
 * removed, the first failure's negative errno (with jobs > 1, "first" is in
 * time). @stats (may be NULL) is added to, not reset.
 *
 * Thread-safe: it shares nothing between calls. It starts opts->jobs - 1
 * threads and joins them before returning; the calling thread is a worker.
 * It allocates and frees all its memory; @path and @opts are only
 * borrowed for the duration of the call.
 */
int rmtree_remove(int dirfd, const char *path, const struct rmtree_opts *opts,
		  struct rmtree_stats *stats);

#endif
