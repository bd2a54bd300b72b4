/*
 * Decoding changelog records on a second thread (replaypipe.h).
 *
 * A ring of RPIPE_SLOTS slots: the worker fills slot head % RPIPE_SLOTS
 * and moves head on, the caller takes slot tail % RPIPE_SLOTS and moves
 * tail on once it gives it back. Each side sleeps only when it cannot go
 * on (the ring full, or empty), saying so in a flag the other reads after
 * moving its own index; both are sequentially consistent, so one of the
 * two sees the other's move (no wake-up is lost), and the mutex is taken
 * only around a sleep and its wake-up. The worker, once woken from a full
 * ring, is woken only when half of it is free again, so that the two do
 * not take turns one slot at a time.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "replaypipe.h"

/* Decode the record at the worker's next offset into @s. */
static void fill(struct rpipe *r, struct rpipe_slot *s)
{
	size_t off = r->next_off;

	s->off = off;
	s->decoded = NULL;
	s->rec = 0;
	if (off < r->n)
		s->rec = r->record(r->p + off, r->n - off, &s->version,
				   &s->payload, &s->len);
	if (s->rec == 0)
		return;
	if (s->version > r->after)
		s->decoded = r->dec->decode(s->payload, s->len, s->scratch);
	r->next_off = off + s->rec;
}

static void *worker(void *arg)
{
	struct rpipe *r = arg;

	for (;;) {
		size_t head = atomic_load(&r->head);

		if (head - atomic_load(&r->tail) == RPIPE_SLOTS) {
			pthread_mutex_lock(&r->lock);
			atomic_store(&r->worker_waits, true);
			while (!atomic_load(&r->stop) &&
			       atomic_load(&r->head) - atomic_load(&r->tail) >
				       RPIPE_SLOTS / 2)
				pthread_cond_wait(&r->freed, &r->lock);
			atomic_store(&r->worker_waits, false);
			pthread_mutex_unlock(&r->lock);
		}
		if (atomic_load(&r->stop))
			break;
		if (head - atomic_load(&r->tail) == RPIPE_SLOTS)
			continue;
		fill(r, &r->slots[head % RPIPE_SLOTS]);
		atomic_store(&r->head, head + 1);
		if (atomic_load(&r->main_waits)) {
			pthread_mutex_lock(&r->lock);
			pthread_cond_signal(&r->made);
			pthread_mutex_unlock(&r->lock);
		}
		if (r->slots[head % RPIPE_SLOTS].rec == 0)
			break; /* the last: nothing follows it */
	}
	return NULL;
}

int rpipe_start(struct rpipe *r, const uint8_t *p, size_t n, size_t off,
		rpipe_record_fn record, uint64_t after,
		const struct replay_decoder *dec)
{
	*r = (struct rpipe){ .p = p,
			     .n = n,
			     .record = record,
			     .after = after,
			     .dec = dec,
			     .next_off = off };
	r->slots = aligned_alloc(_Alignof(struct rpipe_slot),
				 RPIPE_SLOTS * sizeof(*r->slots));
	if (!r->slots)
		return -ENOMEM;
	atomic_init(&r->head, 0);
	atomic_init(&r->tail, 0);
	atomic_init(&r->stop, false);
	atomic_init(&r->main_waits, false);
	atomic_init(&r->worker_waits, false);
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->made, NULL);
	pthread_cond_init(&r->freed, NULL);
	r->slots[0].decoded = NULL;
	/* Without a thread, rpipe_next() decodes each record itself. */
	r->threaded = pthread_create(&r->thread, NULL, worker, r) == 0;
	return 0;
}

struct rpipe_slot *rpipe_next(struct rpipe *r)
{
	size_t tail = atomic_load(&r->tail);
	struct rpipe_slot *s = &r->slots[tail % RPIPE_SLOTS];

	if (!r->threaded) {
		fill(r, s);
		return s;
	}
	if (atomic_load(&r->head) == tail) {
		pthread_mutex_lock(&r->lock);
		atomic_store(&r->main_waits, true);
		while (atomic_load(&r->head) == tail)
			pthread_cond_wait(&r->made, &r->lock);
		atomic_store(&r->main_waits, false);
		pthread_mutex_unlock(&r->lock);
	}
	return s;
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
	tail = atomic_load(&r->tail) + 1;
	atomic_store(&r->tail, tail);
	if (atomic_load(&r->worker_waits) &&
	    atomic_load(&r->head) - tail <= RPIPE_SLOTS / 2) {
		pthread_mutex_lock(&r->lock);
		pthread_cond_signal(&r->freed);
		pthread_mutex_unlock(&r->lock);
	}
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
