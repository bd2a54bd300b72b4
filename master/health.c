/*
 * Chunk health census (health.h).
 *
 * Why a census in slices, not counts kept at every change: a chunk's
 * class depends on its copies (changed by registrations, writes,
 * replication, damage reports, deletions), on whether each copy's
 * server is connected (one disconnect changes the class of every chunk
 * it held: keeping counts exact there means walking that server's
 * chunks at once, on the loop), on the goal (a recursive setgoal) and
 * on how many servers there are. A census at a bounded pace costs the
 * loop a fixed slice per tick whatever happens, and its answer is never
 * older than one pass. The replication scan (csrv.c) finds undergoal
 * chunks the same way.
 *
 * A pass visits every slot of the chunk table once, starting where the
 * last one ended; the counts are published only when it is whole, so a
 * reader never sees half a pass. While the table resizes (htab.h) a
 * chunk may be missed or counted twice in that pass.
 */
#include <stdint.h>
#include <string.h>

#include "context.h"
#include "csrv.h"
#include "health.h"
#include "req.h"
#include "util.h"

/*
 * Slots visited per tick (100 ms) at most, and the time a tick may take:
 * a chunk costs a look at its copies and their servers, some 100 ns when
 * none of it is in the cache, more on a loaded machine (unit.health
 * prints what it saw), so a tick also stops at HEALTH_SLICE_NS, looking
 * at the clock every HEALTH_STEP slots. At most 160,000 slots a second:
 * a million chunks (about two million slots) in some 13 s or more.
 */
#define HEALTH_SCAN_BUDGET 16384
#define HEALTH_STEP 256
#define HEALTH_SLICE_NS (500 * 1000)

struct census {
	struct master *m;
	struct health *h;
};

static int classify(void *elem, void *arg)
{
	struct census *k = arg;
	const struct chunk *c = elem;
	struct health_counts *a = &k->h->acc;
	unsigned goal = chunk_goal(c, (unsigned)k->m->cfg.goal);
	int valid = csrv_valid_copies(k->m, c);

	a->chunks++;
	if (valid == 0)
		a->missing++;
	else if (valid < (int)goal)
		a->undergoal++;
	else if (valid > (int)goal)
		a->overgoal++;
	if (valid == 1 && goal > 1)
		a->endangered++;
	if (goal > k->h->servers)
		a->unreachable++;
	return 0;
}

static uint32_t servers_up(struct master *m)
{
	uint32_t n = 0;

	for (uint32_t i = 1; i <= m->cs->n; i++)
		n += csrv_up(m->cs->srv[i]);
	return n;
}

static void publish(struct health *h)
{
	h->last = h->acc;
	memset(&h->acc, 0, sizeof(h->acc));
	h->visited = 0;
	h->passes++;
	h->done_at = sw_mono_ns();
}

void health_tick(struct master *m)
{
	struct health *h = m->health;
	const struct htab *t = &m->ns.chunks;
	struct census k = { m, h };
	size_t size = t->slots ? t->size : 0, step;
	int64_t t0 = sw_mono_ns();

	/* A follower has no chunkservers: it counts nothing, and a new
	 * leader starts with a pass of its own. */
	if (!req_serving(m)) {
		memset(h, 0, sizeof(*h));
		return;
	}
	if (h->visited == 0)
		h->servers = servers_up(m);
	for (size_t done = 0; done < HEALTH_SCAN_BUDGET && h->visited < size;
	     done += step) {
		step = SW_MIN((size_t)HEALTH_STEP, size - h->visited);
		htab_scan(t, &h->cursor, step, classify, &k);
		h->visited += step;
		if (sw_mono_ns() - t0 > HEALTH_SLICE_NS)
			break;
	}
	if (h->visited >= size)
		publish(h);
}

const struct health_counts *health_counts(const struct master *m)
{
	return &m->health->last;
}

uint64_t health_age_ms(const struct master *m)
{
	if (!m->health->done_at)
		return UINT64_MAX;
	return (uint64_t)(sw_mono_ns() - m->health->done_at) / 1000000;
}
