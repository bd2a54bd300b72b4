/*
 * Decoding changelog records on a second thread (replaypipe.h).
 *
 * A ring of RPIPE_SLOTS slots: the worker fills slot head % RPIPE_SLOTS
 * and moves head on, the caller takes slot tail % RPIPE_SLOTS and moves
 * tail on once it gives it back. Each side reads the other's index again
 * only when the ring looks full (the worker) or empty (the caller), and
 * sleeps only when it still is. A side about to sleep raises its flag
 * under the mutex and then looks at the other's index; the other moves
 * its index and then takes the flag down (atomic_exchange()), and
 * signals only if it was up. All four are sequentially consistent, so
 * one of the two sees the other's move: no wake-up is lost, and one is
 * sent per sleep, not one per record. The worker, once full, sleeps
 * until half of the ring is free, so that the two do not take turns a
 * slot at a time; the caller, finding the ring empty, looks again for a
 * moment before it sleeps (the worker is usually a record away).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "replaypipe.h"

#define TAG "replay"

/* Lookups of head before the caller sleeps on an empty ring (about a
 * microsecond: the worker's time for a small record). */
#define SPIN 1000

_Static_assert((RPIPE_SLOTS & (RPIPE_SLOTS - 1)) == 0,
	       "the indices wrap at a multiple of RPIPE_SLOTS");

/* Decode the record at *@off into @s; *@off moves past it. */
static void fill(const struct rpipe *r, size_t *off, struct rpipe_slot *s)
{
	s->off = *off;
	s->decoded = NULL;
	s->rec = 0;
	if (*off < r->n)
		s->rec = r->record(r->p + *off, r->n - *off, &s->version,
				   &s->payload, &s->len);
	if (s->rec == 0)
		return;
	if (s->version > r->after)
		s->decoded = r->dec->decode(s->payload, s->len, s->scratch);
	*off += s->rec;
}

/* The worker: wait while the ring is more than half full. */
static void wait_freed(struct rpipe *r, size_t head)
{
	pthread_mutex_lock(&r->lock);
	for (;;) {
		atomic_store(&r->worker_waits, true);
		r->tail_seen = atomic_load(&r->tail);
		if (atomic_load(&r->stop) ||
		    head - r->tail_seen <= RPIPE_SLOTS / 2)
			break;
		pthread_cond_wait(&r->freed, &r->lock);
	}
	atomic_store(&r->worker_waits, false);
	pthread_mutex_unlock(&r->lock);
}

static void *worker(void *arg)
{
	struct rpipe *r = arg;
	size_t head = 0, off = r->next_off;

	for (;;) {
		struct rpipe_slot *s = &r->slots[head % RPIPE_SLOTS];
		bool last;

		if (head - r->tail_seen == RPIPE_SLOTS) {
			r->tail_seen = atomic_load(&r->tail);
			if (head - r->tail_seen == RPIPE_SLOTS)
				wait_freed(r, head);
		}
		if (atomic_load(&r->stop))
			break;
		if (head - r->tail_seen == RPIPE_SLOTS)
			continue;
		fill(r, &off, s);
		last = s->rec == 0; /* (the slot is the caller's once given) */
		atomic_store(&r->head, ++head);
		if (atomic_load(&r->main_waits) &&
		    atomic_exchange(&r->main_waits, false)) {
			pthread_mutex_lock(&r->lock);
			pthread_cond_signal(&r->made);
			pthread_mutex_unlock(&r->lock);
		}
		if (last)
			break; /* nothing follows it */
	}
	return NULL;
}

int rpipe_start(struct rpipe *r, const uint8_t *p, size_t n, size_t off,
		rpipe_record_fn record, uint64_t after,
		const struct replay_decoder *dec)
{
	int rc;

	*r = (struct rpipe){ .p = p,
			     .n = n,
			     .record = record,
			     .after = after,
			     .dec = dec,
			     .nslots = RPIPE_SLOTS,
			     .next_off = off };
	atomic_init(&r->head, 0);
	atomic_init(&r->tail, 0);
	atomic_init(&r->stop, false);
	atomic_init(&r->main_waits, false);
	atomic_init(&r->worker_waits, false);
	r->slots = aligned_alloc(_Alignof(struct rpipe_slot),
				 RPIPE_SLOTS * sizeof(*r->slots));
	if (!r->slots) {
		sw_notice(TAG, "no memory for a decoding ring: decoding "
			       "each change before its apply");
		r->nslots = 1;
		r->slots = aligned_alloc(_Alignof(struct rpipe_slot),
					 sizeof(*r->slots));
		if (!r->slots)
			return -ENOMEM;
	}
	r->slots[0].decoded = NULL;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->made, NULL);
	pthread_cond_init(&r->freed, NULL);
	if (r->nslots < RPIPE_SLOTS)
		return 0;
	rc = pthread_create(&r->thread, NULL, worker, r);
	if (rc == 0)
		r->threaded = true;
	else
		sw_notice(TAG,
			  "no decoding thread (%s): decoding each change "
			  "before its apply",
			  strerror(rc));
	return 0;
}

/* The caller: wait until the ring holds a record. */
static void wait_made(struct rpipe *r, size_t tail)
{
	for (int i = 0; i < SPIN && r->head_seen == tail; i++)
		r->head_seen = atomic_load(&r->head);
	if (r->head_seen != tail)
		return;
	pthread_mutex_lock(&r->lock);
	for (;;) {
		atomic_store(&r->main_waits, true);
		r->head_seen = atomic_load(&r->head);
		if (r->head_seen != tail)
			break;
		pthread_cond_wait(&r->made, &r->lock);
	}
	atomic_store(&r->main_waits, false);
	pthread_mutex_unlock(&r->lock);
}

struct rpipe_slot *rpipe_next(struct rpipe *r)
{
	size_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);

	if (!r->threaded) {
		fill(r, &r->next_off, &r->slots[0]);
		return &r->slots[0];
	}
	if (r->head_seen == tail)
		wait_made(r, tail);
	return &r->slots[tail % RPIPE_SLOTS];
}

static void release(struct rpipe *r, struct rpipe_slot *s)
{
	if (s->decoded)
		r->dec->release(s->decoded, s->scratch);
	s->decoded = NULL;
}

void rpipe_done(struct rpipe *r, struct rpipe_slot *s)
{
	size_t tail;

	release(r, s);
	if (!r->threaded)
		return;
	tail = atomic_load_explicit(&r->tail, memory_order_relaxed) + 1;
	atomic_store(&r->tail, tail);
	if (atomic_load(&r->worker_waits) &&
	    r->head_seen - tail <= RPIPE_SLOTS / 2 &&
	    atomic_exchange(&r->worker_waits, false)) {
		pthread_mutex_lock(&r->lock);
		pthread_cond_signal(&r->freed);
		pthread_mutex_unlock(&r->lock);
	}
}

size_t rpipe_checked(struct rpipe *r)
{
	size_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	const struct rpipe_slot *s;

	if (!r->threaded)
		return 0;
	r->head_seen = atomic_load(&r->head);
	if (r->head_seen == tail)
		return r->checked;
	/* The newest slot made, not given back yet: the worker writes it
	 * no more until it is. */
	s = &r->slots[(r->head_seen - 1) % RPIPE_SLOTS];
	r->checked = s->off + s->rec;
	return r->checked;
}

void rpipe_stop(struct rpipe *r)
{
	if (!r->slots)
		return;
	if (r->threaded) {
		pthread_mutex_lock(&r->lock);
		atomic_store(&r->stop, true);
		pthread_cond_signal(&r->freed);
		pthread_mutex_unlock(&r->lock);
		pthread_join(r->thread, NULL);
		for (size_t i = atomic_load(&r->tail);
		     i < atomic_load(&r->head); i++)
			release(r, &r->slots[i % RPIPE_SLOTS]);
	} else {
		release(r, &r->slots[0]);
	}
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->made);
	pthread_cond_destroy(&r->freed);
	free(r->slots);
	r->slots = NULL;
}
