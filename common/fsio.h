/*
 * File and memory helpers that several programs would otherwise each write
 * again: writing a whole buffer, making a directory's entries durable,
 * listing its numbered files, and growing an array. Nothing here logs;
 * errors are negative errno.
 */
#ifndef SWEEPFS_COMMON_FSIO_H
#define SWEEPFS_COMMON_FSIO_H

#include <stddef.h>
#include <stdint.h>

/*
 * Write all @n bytes at @p to @fd, going on after short writes and EINTR.
 * Returns 0, or -errno from write(2) (some bytes may have been written).
 */
int sw_write_all(int fd, const void *p, size_t n);

/* The same on socket @fd, with send(2): no SIGPIPE, -EPIPE instead. */
int sw_send_all(int fd, const void *p, size_t n);

/*
 * fsync(2) directory @path, so that names created, renamed or removed in it
 * survive a crash. Returns 0 or -errno.
 */
int sw_fsync_dir(const char *path);

/* The same for directory @path relative to directory fd @dirfd (openat(2);
 * AT_FDCWD: the working directory). */
int sw_fsync_dirat(int dirfd, const char *path);

/*
 * The numbers N of the entries of directory @dir named @prefix followed
 * by N in 20 decimal digits and nothing else (how the master names its
 * checkpoints and changelog files), in directory order. On success
 * *@out is an array of *@count numbers the caller frees with free(3)
 * (NULL when there are none); on failure nothing is allocated. Returns 0
 * or -errno (-ENOMEM).
 */
int sw_dir_numbered(const char *dir, const char *prefix, uint64_t **out,
		    size_t *count);

/*
 * Make room for at least @need elements of @size bytes in the array *@pp
 * of capacity *@cap (elements): doubles the capacity (starting from @min),
 * or grows it to @need if doubling is not enough. Existing elements are
 * kept; *@pp and *@cap change only on success. Returns 0, or -ENOMEM
 * (also when the byte count would overflow) with the array untouched.
 *
 *	if (sw_grow(&v, &cap, n + 1, sizeof(*v), 16) < 0)
 *		return -ENOMEM;
 *	v[n++] = x;
 */
int sw_grow(void *pp, size_t *cap, size_t need, size_t size, size_t min);

#endif
