/*
 * statprobe: stat() latency seen by a concurrent client.
 *
 * Every latency is kept (8 bytes each; at one call per millisecond an
 * hour is 29 MB), because the tail is the point and a histogram would have
 * to guess its range. Percentiles are taken by sorting at the end. The
 * descriptor of the directory is opened once, so that each sample is one
 * lookup of one name plus its attributes, not a walk down the path.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fsio.h"
#include "statprobe.h"

struct statprobe {
	pthread_t thread;
	int dirfd;
	char name[256];
	unsigned pause_us;
	atomic_bool stop;
	/* Written by the thread only, read after the join. */
	uint64_t *ns; /* latencies */
	size_t n;
	size_t cap;
	uint64_t errors;
	int first_error;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *probe_main(void *arg)
{
	struct statprobe *p = arg;
	struct timespec pause = {
		.tv_sec = p->pause_us / 1000000,
		.tv_nsec = (long)(p->pause_us % 1000000) * 1000,
	};

	while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
		struct stat st;
		uint64_t t0 = mono_ns(), dt;
		int rc = fstatat(p->dirfd, p->name, &st, AT_SYMLINK_NOFOLLOW);

		dt = mono_ns() - t0;
		if (rc < 0 && p->errors++ == 0)
			p->first_error = errno;
		if (sw_grow(&p->ns, &p->cap, p->n + 1, sizeof(*p->ns), 4096) <
		    0)
			break; /* keep what we have */
		p->ns[p->n++] = dt;
		if (p->pause_us)
			nanosleep(&pause, NULL);
	}
	return NULL;
}

int statprobe_start(const char *dir, const char *name, unsigned pause_us,
		    struct statprobe **out)
{
	struct statprobe *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return -ENOMEM;
	p->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (p->dirfd < 0) {
		rc = -errno;
		free(p);
		return rc;
	}
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->pause_us = pause_us;
	atomic_init(&p->stop, false);
	rc = -pthread_create(&p->thread, NULL, probe_main, p);
	if (rc < 0) {
		close(p->dirfd);
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The @q quantile (0..1) of the @n sorted values, nearest rank. */
static double quantile_ms(const uint64_t *v, size_t n, double q)
{
	size_t i = (size_t)(q * (double)n + 0.999999);

	if (n == 0)
		return 0;
	if (i < 1)
		i = 1;
	if (i > n)
		i = n;
	return (double)v[i - 1] / 1e6;
}

void statprobe_stop(struct statprobe *p, struct statprobe_result *r)
{
	atomic_store(&p->stop, true);
	pthread_join(p->thread, NULL);
	close(p->dirfd);
	qsort(p->ns, p->n, sizeof(*p->ns), cmp_u64);
	memset(r, 0, sizeof(*r));
	r->samples = p->n;
	r->errors = p->errors;
	r->first_error = p->first_error;
	r->p50_ms = quantile_ms(p->ns, p->n, 0.50);
	r->p99_ms = quantile_ms(p->ns, p->n, 0.99);
	r->max_ms = p->n ? (double)p->ns[p->n - 1] / 1e6 : 0;
	free(p->ns);
	free(p);
}
