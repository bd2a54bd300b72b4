/*
 * Memory faulted in on a second thread (prefault.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prefault.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* What the helper faults in at a time: a transparent huge page. Between
 * steps it looks for a sw_prefault_now() to serve first. */
#define STEP ((uintptr_t)2 << 20)
/* Ranges waiting ahead; more are dropped (their first writes fault). */
#define AHEAD_MAX 16

struct range {
	uintptr_t lo, hi;
};

struct sw_prefault {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t work; /* the helper's: something to do, or stop */
	pthread_cond_t done; /* sw_prefault_now()'s: its half is in */
	struct range now;    /* what is left of the helper's half */
	uintptr_t now_left;  /* bytes of it not faulted in yet */
	uintptr_t now_step;  /* bytes of it the helper is faulting in */
	struct range ahead[AHEAD_MAX];
	size_t nahead;
	uint64_t bytes; /* faulted in by the helper */
	bool stop;
	bool broken; /* the kernel has no MADV_POPULATE_WRITE */
};

static uintptr_t page_size(void)
{
	long n = sysconf(_SC_PAGESIZE);

	return n > 0 ? (uintptr_t)n : 4096;
}

/* The whole pages of [@p, @p + @len): false when there are none. */
static bool pages_of(void *p, size_t len, struct range *r)
{
	uintptr_t pg = page_size();

	r->lo = ((uintptr_t)p + pg - 1) & ~(pg - 1);
	r->hi = ((uintptr_t)p + len) & ~(pg - 1);
	return r->lo < r->hi && (uintptr_t)p + len >= (uintptr_t)p;
}

/* 0, or -errno: -EINVAL when the kernel does not know the advice. */
static int populate(uintptr_t lo, uintptr_t hi)
{
	return madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) == 0 ? 0 :
									-errno;
}

/* Under pf->mu: the kernel cannot do it; forget what was asked. */
static void give_up(struct sw_prefault *pf)
{
	pf->broken = true;
	pf->nahead = 0;
	pf->now.lo = pf->now.hi;
	pf->now_left = pf->now_step; /* the helper counts it off */
	if (!pf->now_left)
		pthread_cond_broadcast(&pf->done);
}

static void *helper(void *arg)
{
	struct sw_prefault *pf = arg;

	pthread_mutex_lock(&pf->mu);
	for (;;) {
		bool urgent;
		struct range *r;
		uintptr_t lo, hi;
		int rc;

		while (!pf->stop && pf->now.lo == pf->now.hi && !pf->nahead)
			pthread_cond_wait(&pf->work, &pf->mu);
		if (pf->stop)
			break;
		urgent = pf->now.lo < pf->now.hi;
		r = urgent ? &pf->now : &pf->ahead[0];
		lo = r->lo;
		hi = (lo & ~(STEP - 1)) + STEP;
		if (hi > r->hi)
			hi = r->hi;
		r->lo = hi;
		if (!urgent && r->lo == r->hi)
			memmove(pf->ahead, pf->ahead + 1,
				--pf->nahead * sizeof(*pf->ahead));
		pf->now_step = urgent ? hi - lo : 0;
		pthread_mutex_unlock(&pf->mu);
		rc = populate(lo, hi);
		pthread_mutex_lock(&pf->mu);
		if (rc == 0)
			pf->bytes += hi - lo;
		else if (rc == -EINVAL)
			give_up(pf);
		/* Other failures (memory the caller let go, none left)
		 * leave that step to the loader's own first write. */
		if (urgent) {
			pf->now_left -= hi - lo;
			pf->now_step = 0;
			if (!pf->now_left)
				pthread_cond_signal(&pf->done);
		}
	}
	pthread_mutex_unlock(&pf->mu);
	return NULL;
}

struct sw_prefault *sw_prefault_start(void)
{
	struct sw_prefault *pf = calloc(1, sizeof(*pf));

	if (!pf)
		return NULL;
	pthread_mutex_init(&pf->mu, NULL);
	pthread_cond_init(&pf->work, NULL);
	pthread_cond_init(&pf->done, NULL);
	if (pthread_create(&pf->thread, NULL, helper, pf) != 0) {
		pthread_cond_destroy(&pf->done);
		pthread_cond_destroy(&pf->work);
		pthread_mutex_destroy(&pf->mu);
		free(pf);
		return NULL;
	}
	pthread_setname_np(pf->thread, "sw-prefault");
	return pf;
}

void sw_prefault_ahead(struct sw_prefault *pf, void *p, size_t len)
{
	struct range r;

	if (!pf || !pages_of(p, len, &r))
		return;
	pthread_mutex_lock(&pf->mu);
	if (!pf->broken && pf->nahead < AHEAD_MAX) {
		pf->ahead[pf->nahead++] = r;
		pthread_cond_signal(&pf->work);
	}
	pthread_mutex_unlock(&pf->mu);
}

void sw_prefault_now(struct sw_prefault *pf, void *p, size_t len)
{
	struct range r;
	uintptr_t mid;

	if (!pf || !pages_of(p, len, &r))
		return;
	/* The helper's half starts on a huge page's boundary. */
	mid = (r.lo + (r.hi - r.lo) / 2 + STEP - 1) & ~(STEP - 1);
	if (mid >= r.hi)
		mid = r.lo;
	pthread_mutex_lock(&pf->mu);
	if (pf->broken) {
		pthread_mutex_unlock(&pf->mu);
		return;
	}
	pf->now = (struct range){ mid, r.hi };
	pf->now_left = r.hi - mid;
	pthread_cond_signal(&pf->work);
	pthread_mutex_unlock(&pf->mu);
	if (mid > r.lo && populate(r.lo, mid) == -EINVAL) {
		pthread_mutex_lock(&pf->mu);
		give_up(pf);
		pthread_mutex_unlock(&pf->mu);
	}
	pthread_mutex_lock(&pf->mu);
	/* After give_up(), only a step the helper is in is left to wait. */
	while (pf->now_left)
		pthread_cond_wait(&pf->done, &pf->mu);
	pthread_mutex_unlock(&pf->mu);
}

uint64_t sw_prefault_stop(struct sw_prefault *pf)
{
	uint64_t bytes;

	if (!pf)
		return 0;
	pthread_mutex_lock(&pf->mu);
	pf->stop = true;
	pthread_cond_signal(&pf->work);
	pthread_mutex_unlock(&pf->mu);
	pthread_join(pf->thread, NULL);
	bytes = pf->bytes;
	pthread_cond_destroy(&pf->done);
	pthread_cond_destroy(&pf->work);
	pthread_mutex_destroy(&pf->mu);
	free(pf);
	return bytes;
}
