/*
 * removeall: Go's os.RemoveAll() for Linux, in C, system call for system
 * call, so that `sweepfs compare-delete` can delete a tree the way Go
 * programs do without Go installed, and count what that costs. It mirrors
 * os/removeall_at.go and the code it calls as of Go 1.26: read 1024 names,
 * close the directory, unlink them, reopen it and read from the start
 * again. That pattern is the point: it is what makes a filesystem that
 * re-sends a listing on every open pay O(N^2) for a directory of N entries
 * (the MooseFS "same goal, different paths" post).
 *
 * What a call issues, where @path is a non-empty directory:
 *
 *	unlinkat(AT_FDCWD, path, 0)                 os.Remove: EISDIR
 *	unlinkat(AT_FDCWD, path, AT_REMOVEDIR)      ENOTEMPTY
 *	openat(AT_FDCWD, parent, O_RDONLY|O_CLOEXEC)  os.OpenFile(parent)
 *	fcntl(F_GETFL), fcntl(F_SETFL, +O_NONBLOCK),  newFile() trying the
 *	fcntl(F_GETFL), fcntl(F_SETFL, -O_NONBLOCK)   netpoller, and back
 *	then removeAllFrom(parent fd, base):
 *	  unlinkat(fd, name, 0)                     EISDIR for a directory
 *	  repeat: openat(fd, name, O_RDONLY|O_NOFOLLOW|O_CLOEXEC|O_DIRECTORY)
 *	          getdents64(8192-byte buffer) until 1024 names are in hand
 *	          or one returns 0; removeAllFrom() of each name; close()
 *	  until a pass got fewer than 1024 names (a pass whose 1024 names
 *	  all failed reads on instead, with the same descriptor)
 *	  unlinkat(fd, name, AT_REMOVEDIR)
 *	  and readlinkat() when opening a name fails with ELOOP or ENOTDIR
 *	close(parent)
 *
 * Go's runtime adds calls of its own that are not reproduced: thread and
 * memory management, and the netpoller's epoll_create1(), eventfd2() and
 * epoll_ctl() (the registration of the parent's descriptor, which Linux
 * refuses with EPERM for a directory; that refusal is what the second
 * fcntl pair undoes).
 */
#ifndef SWEEPFS_TOOLS_REMOVEALL_H
#define SWEEPFS_TOOLS_REMOVEALL_H

#include <stdint.h>
#include <sys/types.h>

/* Names os.RemoveAll reads per pass (reqSize in removeAllFrom()). */
#define REMOVEALL_BATCH 1024
/* Its getdents64() buffer (blockSize in os/dir_unix.go). */
#define REMOVEALL_BUFSIZE 8192

/*
 * The system calls, so that callers can count, delay or fail them. Each
 * has the libc calling convention: -1 with errno set on failure. As in
 * Go, a call failing with EINTR is issued again (and counted again).
 */
struct removeall_sys {
	int (*openat)(int dirfd, const char *path, int flags, mode_t mode);
	ssize_t (*getdents64)(int fd, void *buf, size_t len);
	int (*unlinkat)(int dirfd, const char *path, int flags);
	ssize_t (*readlinkat)(int dirfd, const char *path, char *buf,
			      size_t len);
	int (*fcntl)(int fd, int cmd, int arg);
	int (*close)(int fd);
};

/* The real system calls; hooks call through to these. */
extern const struct removeall_sys removeall_sys_default;

/*
 * What a call issued, added to by removeall(). The sys_* fields count
 * system calls, successful or not (what strace -c shows for the same
 * work, Go's runtime aside).
 */
struct removeall_stats {
	uint64_t sys_openat;
	uint64_t sys_getdents64;
	uint64_t sys_unlinkat; /* flags 0: files, and directories tried */
	uint64_t sys_rmdir;    /* unlinkat(AT_REMOVEDIR) */
	uint64_t sys_readlinkat;
	uint64_t sys_fcntl;
	uint64_t sys_close;
	uint64_t passes; /* directories opened to be read (openDirAt) */
	/* Names getdents64 returned ("." and ".." aside): again after a
	 * reopen, and also those dropped unused at a close. */
	uint64_t names_read;
	uint64_t removed; /* unlinkat() calls that succeeded */
};

/* Total of the sys_* counters of @st. */
uint64_t removeall_stats_syscalls(const struct removeall_stats *st);

/*
 * The error Go would return, as its *PathError: the operation ("remove",
 * "open", "unlinkat", "openfdat", "readdirnames", "RemoveAll"), the path
 * as Go builds it (the argument's parent and base, then one name per
 * level), and the errno. @path is malloc()ed: removeall_error_clear()
 * frees it.
 */
struct removeall_error {
	const char *op;
	char *path;
	int err; /* positive errno */
};

void removeall_error_clear(struct removeall_error *e);

/*
 * Remove @path and everything below it as os.RemoveAll(@path) does: a
 * missing @path, or one that disappears meanwhile, is success; symbolic
 * links are removed, never followed; nothing is chmod()ed, so what a
 * read-only directory holds stays (with EACCES) unless the caller may
 * write there anyway. @sys may be NULL (removeall_sys_default). @stats
 * (may be NULL) is added to, not reset.
 *
 * Returns 0, or the negative errno of the error Go would return; then, if
 * @err is not NULL, *@err describes it (clear it with
 * removeall_error_clear()). -ENOMEM without a description when memory runs
 * out (where Go would panic).
 *
 * Uses one descriptor and about 10 KiB of memory (plus the names of one
 * batch) per level of the tree, and recursion as deep as the tree, as Go
 * does. Thread-safe: it shares nothing between calls.
 */
int removeall(const char *path, const struct removeall_sys *sys,
	      struct removeall_stats *stats, struct removeall_error *err);

#endif
