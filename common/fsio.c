/*
 * fsio.h: whole writes, directory fsync, numbered files, array growth.
 */
#include <dirent.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fsio.h"

/* All of @p to @fd, by write(2) or, for a socket, send(2) without
 * SIGPIPE. */
static int put_all(int fd, const void *p, size_t n, bool sock)
{
	const char *c = p;

	while (n) {
		ssize_t w = sock ? send(fd, c, n, MSG_NOSIGNAL) :
				   write(fd, c, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

int sw_write_all(int fd, const void *p, size_t n)
{
	return put_all(fd, p, n, false);
}

int sw_send_all(int fd, const void *p, size_t n)
{
	return put_all(fd, p, n, true);
}

int sw_fsync_dir(const char *path)
{
	return sw_fsync_dirat(AT_FDCWD, path);
}

int sw_fsync_dirat(int dirfd, const char *path)
{
	int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* Whether @s is @prefix and then 20 decimal digits; their value in *@v. */
static bool versioned_name(const char *s, const char *prefix, uint64_t *v)
{
	size_t plen = strlen(prefix);
	uint64_t x = 0;

	if (strncmp(s, prefix, plen) || strlen(s + plen) != 20)
		return false;
	for (s += plen; *s; s++) {
		unsigned d = (unsigned)(*s - '0');

		/* 20 digits may exceed UINT64_MAX; no writer makes those. */
		if (d > 9 || x > (UINT64_MAX - d) / 10)
			return false;
		x = x * 10 + d;
	}
	*v = x;
	return true;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int sw_dir_versions(const char *dir, const char *prefix, uint64_t **out,
		    size_t *count)
{
	uint64_t *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		uint64_t ver;

		if (!versioned_name(de->d_name, prefix, &ver))
			continue;
		if (sw_grow(&v, &cap, n + 1, sizeof(*v), 16) < 0) {
			free(v);
			closedir(d);
			return -ENOMEM;
		}
		v[n++] = ver;
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), cmp_u64);
	*out = v;
	*count = n;
	return 0;
}

int sw_grow(void *pp, size_t *cap, size_t need, size_t size, size_t min)
{
	void **p = pp;
	size_t n = *cap;
	void *v;

	if (need <= n)
		return 0;
	n = n ? n : (min ? min : 1);
	while (n < need)
		n = n > SIZE_MAX / 2 ? need : n * 2;
	if (size && n > SIZE_MAX / size)
		return -ENOMEM;
	v = realloc(*p, n * size);
	if (!v)
		return -ENOMEM;
	*p = v;
	*cap = n;
	return 0;
}
