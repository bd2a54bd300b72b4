/*
 * The changes clients' requests made, by session and request id
 * (replies.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "replies.h"
#include "util.h"

static uint64_t ring_hash(const void *elem)
{
	return sw_hash_u64(((const struct reply_ring *)elem)->session);
}

static bool ring_eq(const void *elem, const void *key)
{
	return ((const struct reply_ring *)elem)->session ==
	       *(const uint64_t *)key;
}

void replies_init(struct replies *t)
{
	htab_init(&t->by_session, ring_hash);
	t->lru = t->lru_tail = NULL;
	t->max_sessions = REPLIES_SESSIONS_MAX;
}

void replies_release(struct replies *t)
{
	while (t->lru) {
		struct reply_ring *r = t->lru;

		t->lru = r->next;
		free(r->e);
		free(r);
	}
	htab_release(&t->by_session);
	t->lru_tail = NULL;
}

static void lru_unlink(struct replies *t, struct reply_ring *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		t->lru = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		t->lru_tail = r->prev;
	r->prev = r->next = NULL;
}

static void lru_append(struct replies *t, struct reply_ring *r)
{
	r->prev = t->lru_tail;
	r->next = NULL;
	if (t->lru_tail)
		t->lru_tail->next = r;
	else
		t->lru = r;
	t->lru_tail = r;
}

static void ring_drop(struct replies *t, struct reply_ring *r)
{
	htab_remove(&t->by_session, ring_hash(r), r);
	lru_unlink(t, r);
	free(r->e);
	free(r);
}

/*
 * Make room for a new session's ring at @time: forget those idle since
 * before @time - REPLIES_IDLE_NS, and at the cap the one idle longest.
 * Least recently changed first, so this stops at the first it keeps.
 */
static void make_room(struct replies *t, int64_t time)
{
	while (t->lru && t->lru->last < time - REPLIES_IDLE_NS)
		ring_drop(t, t->lru);
	if (t->lru && htab_count(&t->by_session) >= t->max_sessions)
		ring_drop(t, t->lru);
}

/* Room for one more change in @r: 0, or -ENOMEM. */
static int ring_grow(struct reply_ring *r)
{
	uint32_t cap = r->cap ? r->cap * 2 : 4;
	struct reply_done *e;

	if (r->n < r->cap || r->cap == REPLIES_PER_SESSION)
		return 0; /* a free slot, or the oldest goes */
	if (cap > REPLIES_PER_SESSION)
		cap = REPLIES_PER_SESSION;
	e = malloc(cap * sizeof(*e));
	if (!e)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->n; i++)
		e[i] = *reply_ring_at(r, i);
	free(r->e);
	r->e = e;
	r->cap = cap;
	r->head = r->n;
	return 0;
}

int replies_add(struct replies *t, uint64_t session, int64_t time,
		const struct reply_done *d)
{
	struct reply_ring *r = htab_find(&t->by_session, sw_hash_u64(session),
					 ring_eq, &session);

	if (!r) {
		/* What goes depends on the log alone: the same on every
		 * member. */
		make_room(t, time);
		r = calloc(1, sizeof(*r));
		if (!r)
			return -ENOMEM;
		r->session = session;
		if (htab_insert(&t->by_session, sw_hash_u64(session), r) < 0) {
			free(r);
			return -ENOMEM;
		}
	} else {
		lru_unlink(t, r);
	}
	lru_append(t, r);
	if (ring_grow(r) < 0)
		return -ENOMEM; /* the ring stays, with what it had */
	if (time > r->last)
		r->last = time;
	r->e[r->head] = *d;
	r->head = (r->head + 1) % r->cap;
	if (r->n < r->cap)
		r->n++;
	return 0;
}

void replies_note(struct replies *t, const Sweepfs__Meta__Mutation *m,
		  uint64_t version)
{
	struct reply_done d = { .req = m->once_req, .version = version };

	if (!m->has_once_session || !m->has_once_req)
		return;
	if (m->has_once_digest && m->once_digest.len == REPLIES_DIGEST)
		memcpy(d.digest, m->once_digest.data, REPLIES_DIGEST);
	switch (m->op_case) {
	case SWEEPFS__META__MUTATION__OP_CREATE:
		d.ino = m->create->ino;
		break;
	case SWEEPFS__META__MUTATION__OP_LINK:
		d.ino = m->link->ino;
		break;
	case SWEEPFS__META__MUTATION__OP_SETATTR:
		d.ino = m->setattr->ino;
		break;
	default:
		break;
	}
	(void)replies_add(t, m->once_session, m->time, &d);
}

const struct reply_done *replies_find(const struct replies *t, uint64_t session,
				      uint64_t req)
{
	const struct reply_ring *r = htab_find(
		&t->by_session, sw_hash_u64(session), ring_eq, &session);
	const struct reply_done *found = NULL;

	for (uint32_t i = 0; r && i < r->n; i++) {
		const struct reply_done *d = reply_ring_at(r, i);

		if (d->req == req && (!found || d->ino))
			found = d;
	}
	return found;
}

int replies_foreach(const struct replies *t,
		    int (*fn)(const struct reply_ring *r, void *arg), void *arg)
{
	for (const struct reply_ring *r = t->lru; r; r = r->next) {
		int rc = fn(r, arg);

		if (rc)
			return rc;
	}
	return 0;
}
