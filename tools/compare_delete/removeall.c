/*
 * removeall: os.RemoveAll() as Go 1.26 implements it for Linux, in C.
 *
 * Faithfulness comes first: every branch below has its counterpart in
 * Go's sources, named in the comments (os/removeall_at.go: removeAll,
 * removeAllFrom; os/dir_unix.go: (*File).readdir; os/root_unix.go:
 * rootOpenDir, checkSymlink, readlinkat; os/file_unix.go: Remove,
 * newFile; os/path_unix.go: splitPath). Where Go keeps state between
 * calls, so do we: a directory's read buffer outlives a Readdirnames()
 * call, and what is left in it is only used again when every name of the
 * previous batch failed; otherwise the directory is closed and the buffer
 * dropped, so the next pass reads from the start. Nothing is optimized
 * away, not even the fcntl() pairs.
 *
 * Errors follow Go's PathError: the first error met below a directory
 * ("recurseErr") is kept and returned unless the directory itself could
 * be removed in the end; its path grows by one name per level on the way
 * up. Go panics when memory runs out; here the whole call unwinds with
 * -ENOMEM (ra->oom).
 *
 * Map: system call wrappers; names (Readdirnames); opening a directory
 * (openDirAt); removeAllFrom; removeAll.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "removeall.h"

/* Offsets in a struct linux_dirent64 record (syscall.Dirent). */
#define DIRENT_RECLEN_OFF 16
#define DIRENT_NAME_OFF 19

static int sys_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	return openat(dirfd, path, flags, mode);
}

static ssize_t sys_getdents64(int fd, void *buf, size_t len)
{
	return syscall(SYS_getdents64, fd, buf, len);
}

static ssize_t sys_readlinkat(int dirfd, const char *path, char *buf,
			      size_t len)
{
	return readlinkat(dirfd, path, buf, len);
}

static int sys_fcntl(int fd, int cmd, int arg)
{
	return fcntl(fd, cmd, arg);
}

const struct removeall_sys removeall_sys_default = {
	.openat = sys_openat,
	.getdents64 = sys_getdents64,
	.unlinkat = unlinkat,
	.readlinkat = sys_readlinkat,
	.fcntl = sys_fcntl,
	.close = close,
};

/* One removeall() call. */
struct ra {
	const struct removeall_sys *sys;
	struct removeall_stats *st;
	bool oom; /* memory ran out: unwind everything */
};

uint64_t removeall_stats_syscalls(const struct removeall_stats *st)
{
	return st->sys_openat + st->sys_getdents64 + st->sys_unlinkat +
	       st->sys_rmdir + st->sys_readlinkat + st->sys_fcntl +
	       st->sys_close;
}

void removeall_error_clear(struct removeall_error *e)
{
	free(e->path);
	e->path = NULL;
	e->op = NULL;
	e->err = 0;
}

/* ---- system calls: counted, EINTR retried as ignoringEINTR() does ---- */

static int ra_openat(struct ra *ra, int dirfd, const char *path, int flags)
{
	int fd;

	do {
		ra->st->sys_openat++;
		fd = ra->sys->openat(dirfd, path, flags, 0);
	} while (fd < 0 && errno == EINTR);
	return fd < 0 ? -errno : fd;
}

static ssize_t ra_getdents(struct ra *ra, int fd, void *buf)
{
	ssize_t n;

	do {
		ra->st->sys_getdents64++;
		n = ra->sys->getdents64(fd, buf, REMOVEALL_BUFSIZE);
	} while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

static int ra_unlinkat(struct ra *ra, int dirfd, const char *name, int flags)
{
	int rc;

	do {
		if (flags & AT_REMOVEDIR)
			ra->st->sys_rmdir++;
		else
			ra->st->sys_unlinkat++;
		rc = ra->sys->unlinkat(dirfd, name, flags);
	} while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return -errno;
	ra->st->removed++;
	return 0;
}

static int ra_fcntl(struct ra *ra, int fd, int cmd, int arg)
{
	int rc;

	do {
		ra->st->sys_fcntl++;
		rc = ra->sys->fcntl(fd, cmd, arg);
	} while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : rc;
}

/* Go's poll.FD.Close: one close(), never retried. */
static void ra_close(struct ra *ra, int fd)
{
	ra->st->sys_close++;
	ra->sys->close(fd);
}

/* ---- errors -------------------------------------------------------- */

/* *@e = PathError{op, path, -rc}; returns rc. */
static int set_err(struct removeall_error *e, const char *op, const char *path,
		   int rc)
{
	e->op = op;
	e->err = -rc;
	e->path = strdup(path);
	return rc;
}

/* pathErr.Path = prefix + "/" + pathErr.Path (a lost prefix on ENOMEM
 * only shortens the message). */
static void prefix_err(struct removeall_error *e, const char *prefix)
{
	size_t lp = strlen(prefix), le = e->path ? strlen(e->path) : 0;
	char *p = malloc(lp + 1 + le + 1);

	if (!p)
		return;
	memcpy(p, prefix, lp);
	p[lp] = '/';
	if (e->path)
		memcpy(p + lp + 1, e->path, le);
	p[lp + 1 + le] = '\0';
	free(e->path);
	e->path = p;
}

/* ---- Readdirnames(1024) -------------------------------------------- */

/* An open directory: Go's *File with its dirInfo. */
struct ra_dir {
	int fd;
	char *buf;    /* REMOVEALL_BUFSIZE bytes, as d.buf */
	ssize_t nbuf; /* bytes in buf from the last getdents64 (d.nbuf) */
	ssize_t bufp; /* next record (d.bufp) */
};

/* The names of one batch, NUL-terminated one after the other. */
struct ra_names {
	char *data;
	size_t len;
	size_t cap;
	size_t off[REMOVEALL_BATCH];
	int n;
};

static int names_add(struct ra *ra, struct ra_names *nm, const char *name,
		     size_t len)
{
	if (nm->len + len + 1 > nm->cap) {
		size_t cap = nm->cap ? nm->cap * 2 : 16384;
		char *p;

		while (cap < nm->len + len + 1)
			cap *= 2;
		p = realloc(nm->data, cap);
		if (!p) {
			ra->oom = true;
			return -ENOMEM;
		}
		nm->data = p;
		nm->cap = cap;
	}
	nm->off[nm->n++] = nm->len;
	memcpy(nm->data + nm->len, name, len);
	nm->data[nm->len + len] = '\0';
	nm->len += len + 1;
	return 0;
}

static bool is_dot_or_dotdot(const char *name, size_t len)
{
	return (len == 1 && name[0] == '.') ||
	       (len == 2 && name[0] == '.' && name[1] == '.');
}

/* Names in the @n bytes of records at @buf ("." and ".." aside), for the
 * statistics only: what the filesystem listed, whether used or not. */
static uint64_t count_names(const char *buf, ssize_t n)
{
	uint64_t names = 0;
	uint16_t reclen;

	for (ssize_t off = 0; off + DIRENT_NAME_OFF <= n; off += reclen) {
		const char *name = buf + off + DIRENT_NAME_OFF;

		memcpy(&reclen, buf + off + DIRENT_RECLEN_OFF, sizeof(reclen));
		if (reclen < DIRENT_NAME_OFF || reclen > n - off)
			break;
		if (!is_dot_or_dotdot(name,
				      strnlen(name, reclen - DIRENT_NAME_OFF)))
			names++;
	}
	return names;
}

/*
 * (*File).readdir(1024, readdirName): take records from the buffer,
 * refilling it with one getdents64() whenever it is used up, until 1024
 * names are in hand or a read returns nothing. "." and ".." do not count.
 * Returns the number of names (0: end of directory, Go's io.EOF) or
 * -errno from getdents64 (the names read so far are dropped, as
 * removeAllFrom drops them).
 */
static int read_names(struct ra *ra, struct ra_dir *d, struct ra_names *nm)
{
	int want = REMOVEALL_BATCH;

	nm->n = 0;
	nm->len = 0;
	while (want) {
		const unsigned char *rec;
		size_t avail, reclen, namlen;
		uint16_t rl;

		if (d->bufp >= d->nbuf) {
			ssize_t got;

			d->bufp = 0;
			got = ra_getdents(ra, d->fd, d->buf);
			if (got < 0) {
				d->nbuf = 0; /* poll.FD.ReadDirent: n = 0 */
				return (int)got;
			}
			d->nbuf = got;
			if (got == 0)
				break;
			ra->st->names_read += count_names(d->buf, got);
		}
		/* direntReclen/direntIno/direntNamlen, with Go's bounds. */
		rec = (const unsigned char *)d->buf + d->bufp;
		avail = (size_t)(d->nbuf - d->bufp);
		if (avail < DIRENT_RECLEN_OFF + 2)
			break;
		memcpy(&rl, rec + DIRENT_RECLEN_OFF, sizeof(rl));
		reclen = rl;
		if (reclen > avail)
			break;
		d->bufp += (ssize_t)reclen;
		if (reclen < DIRENT_NAME_OFF)
			break;
		namlen = strnlen((const char *)rec + DIRENT_NAME_OFF,
				 reclen - DIRENT_NAME_OFF);
		if (is_dot_or_dotdot((const char *)rec + DIRENT_NAME_OFF,
				     namlen))
			continue;
		want--;
		if (names_add(ra, nm, (const char *)rec + DIRENT_NAME_OFF,
			      namlen) < 0)
			return -ENOMEM;
	}
	return nm->n;
}

/* ---- openDirAt ----------------------------------------------------- */

/* checkSymlink(): whether @name is a symbolic link, by reading it with
 * Go's growing buffer (128 bytes, doubled while the target fills it). */
static bool is_symlink(struct ra *ra, int parent, const char *name)
{
	for (size_t len = 128;; len *= 2) {
		char *b = malloc(len);
		ssize_t n;

		if (!b) {
			ra->oom = true;
			return false;
		}
		do {
			ra->st->sys_readlinkat++;
			n = ra->sys->readlinkat(parent, name, b, len);
		} while (n < 0 && errno == EINTR);
		free(b);
		if (n < 0)
			return false;
		if ((size_t)n < len)
			return true;
	}
}

/*
 * rootOpenDir() + newDirFile(): a descriptor, or -errno; *@symlink says
 * that @name is a symbolic link (Go's errSymlink). A directory File is
 * kindNoPoll: no fcntl, no netpoller.
 */
static int open_dir_at(struct ra *ra, int parent, const char *name,
		       bool *symlink)
{
	int fd = ra_openat(ra, parent, name,
			   O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_DIRECTORY);

	*symlink = false;
	if (fd >= 0)
		return fd;
	if (fd == -ELOOP || fd == -EMLINK || fd == -ENOTDIR)
		*symlink = is_symlink(ra, parent, name);
	else if (fd == -ENOTSUP || fd == -EOPNOTSUPP)
		fd = -ENOTDIR;
	return fd;
}

/* ---- removeAllFrom ------------------------------------------------- */

static int remove_from(struct ra *ra, int parent, const char *base,
		       struct removeall_error *e)
{
	struct removeall_error rec = { 0 }; /* recurseErr */
	struct ra_names *nm = NULL;
	struct ra_dir d = { .fd = -1 };
	int rc, uerr, resp = 0;

	/* Simple case: if Unlink (aka remove) works, we're done. */
	rc = ra_unlinkat(ra, parent, base, 0);
	if (rc == 0 || rc == -ENOENT)
		return 0;
	if (rc != -EISDIR && rc != -EPERM && rc != -EACCES)
		return set_err(e, "unlinkat", base, rc);
	uerr = rc;

	d.buf = malloc(REMOVEALL_BUFSIZE);
	nm = calloc(1, sizeof(*nm));
	if (!d.buf || !nm) {
		ra->oom = true;
		rc = -ENOMEM;
		goto out;
	}
	for (;;) {
		bool symlink;
		int fd = open_dir_at(ra, parent, base, &symlink);

		if (ra->oom) {
			rc = -ENOMEM;
			goto out;
		}
		if (fd < 0) {
			if (fd == -ENOENT) {
				rc = 0;
				goto out;
			}
			if (fd == -ENOTDIR && !symlink) {
				/* Not a directory: the unlinkat error. */
				rc = set_err(e, "unlinkat", base, uerr);
				goto out;
			}
			/* This one replaces any earlier recurseErr. */
			removeall_error_clear(&rec);
			set_err(&rec, "openfdat", base, symlink ? uerr : fd);
			break;
		}
		ra->st->passes++;
		d.fd = fd;
		d.nbuf = d.bufp = 0;
		for (;;) {
			int numerr = 0;

			rc = read_names(ra, &d, nm);
			if (rc < 0) {
				ra_close(ra, fd);
				if (rc == -ENOENT)
					rc = 0;
				else if (rc != -ENOMEM)
					rc = set_err(e, "readdirnames", base,
						     rc);
				goto out;
			}
			resp = nm->n;
			for (int i = 0; i < nm->n; i++) {
				struct removeall_error ce = { 0 };

				if (remove_from(ra, fd, nm->data + nm->off[i],
						&ce) == 0)
					continue;
				if (ra->oom) {
					removeall_error_clear(&ce);
					ra_close(ra, fd);
					rc = -ENOMEM;
					goto out;
				}
				numerr++;
				if (!rec.op) {
					prefix_err(&ce, base);
					rec = ce;
				} else {
					removeall_error_clear(&ce);
				}
			}
			/* Only a batch that failed whole reads on. */
			if (numerr != REMOVEALL_BATCH)
				break;
		}
		/* "Removing files from the directory may have caused the OS
		 * to reshuffle it": close, reopen, read from the start. */
		ra_close(ra, fd);
		if (resp < REMOVEALL_BATCH)
			break;
	}
	rc = ra_unlinkat(ra, parent, base, AT_REMOVEDIR);
	if (rc == 0 || rc == -ENOENT) {
		rc = 0;
	} else if (rec.op) {
		*e = rec;
		rec.op = NULL;
		rec.path = NULL;
		rc = -e->err;
	} else {
		rc = set_err(e, "unlinkat", base, rc);
	}
out:
	removeall_error_clear(&rec);
	if (nm)
		free(nm->data);
	free(nm);
	free(d.buf);
	return rc;
}

/* ---- removeAll ----------------------------------------------------- */

/* endsWithDot(): "." or ".../.". */
static bool ends_with_dot(const char *p)
{
	size_t n = strlen(p);

	return !strcmp(p, ".") ||
	       (n >= 2 && p[n - 1] == '.' && p[n - 2] == '/');
}

/* splitPath(): @path's directory ("." if none) and last name, trailing
 * slashes dropped. Both malloc()ed; -ENOMEM. */
static int split_path(const char *path, char **dir, char **base)
{
	size_t len;
	long i;

	while (path[0] == '/' && path[1] == '/')
		path++;
	len = strlen(path);
	for (i = (long)len - 1; i > 0 && path[i] == '/'; i--)
		len = (size_t)i;
	*dir = NULL;
	*base = NULL;
	for (i--; i >= 0; i--) {
		if (path[i] == '/') {
			*dir = strndup(path, i == 0 ? 1 : (size_t)i);
			*base = strndup(path + i + 1, len - (size_t)i - 1);
			break;
		}
	}
	if (i < 0) {
		*dir = strdup(".");
		*base = strndup(path, len);
	}
	if (!*dir || !*base) {
		free(*dir);
		free(*base);
		return -ENOMEM;
	}
	return 0;
}

/*
 * newFile(fd, kindOpenFile) on Linux: syscall.SetNonblock(fd, true) for
 * the netpoller, whose registration a directory fails (not issued here),
 * then SetNonblock(fd, false) to undo it.
 */
static void newfile_fcntls(struct ra *ra, int fd)
{
	int fl = ra_fcntl(ra, fd, F_GETFL, 0);

	if (fl < 0)
		return; /* pollable = false: no registration to undo */
	if (!(fl & O_NONBLOCK) &&
	    ra_fcntl(ra, fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return;
	fl = ra_fcntl(ra, fd, F_GETFL, 0);
	if (fl >= 0 && (fl & O_NONBLOCK))
		ra_fcntl(ra, fd, F_SETFL, fl & ~O_NONBLOCK);
}

int removeall(const char *path, const struct removeall_sys *sys,
	      struct removeall_stats *stats, struct removeall_error *err)
{
	struct removeall_stats local = { 0 };
	struct removeall_error e = { 0 };
	struct ra ra = {
		.sys = sys ? sys : &removeall_sys_default,
		.st = stats ? stats : &local,
	};
	char *dir, *base;
	int rc, rc2, fd;

	if (!path[0])
		return 0; /* "fail silently", Go issue 28830 */
	if (ends_with_dot(path)) {
		rc = set_err(&e, "RemoveAll", path, -EINVAL);
		goto out;
	}
	/* os.Remove(): unlink, then rmdir; rmdir's error unless ENOTDIR. */
	rc = ra_unlinkat(&ra, AT_FDCWD, path, 0);
	if (rc == 0)
		return 0;
	rc2 = ra_unlinkat(&ra, AT_FDCWD, path, AT_REMOVEDIR);
	if (rc2 == 0)
		return 0;
	if (rc2 != -ENOTDIR)
		rc = rc2;
	if (rc == -ENOENT)
		return 0;

	if (split_path(path, &dir, &base) < 0)
		return -ENOMEM;
	fd = ra_openat(&ra, AT_FDCWD, dir, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = fd == -ENOENT ? 0 : set_err(&e, "open", dir, fd);
		goto out_free;
	}
	newfile_fcntls(&ra, fd);
	rc = remove_from(&ra, fd, base, &e);
	if (rc < 0 && e.op)
		prefix_err(&e, dir);
	ra_close(&ra, fd);
out_free:
	free(dir);
	free(base);
out:
	if (rc < 0 && err)
		*err = e;
	else
		removeall_error_clear(&e);
	return rc;
}
