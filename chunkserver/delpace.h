/*
 * delpace: the share of their time the chunk deletion threads may use,
 * adapted to what deletions cost the clients' reads and writes (AIMD on
 * the clients' request latency against its level without deletions).
 *
 * The loop thread feeds it every client read and write it answers and
 * ticks it; the deletion threads ask it, after each slice of unlinks, how
 * long to pause. No lock: the share and the deletion count are atomics.
 */
#ifndef SWEEPFS_CHUNKSERVER_DELPACE_H
#define SWEEPFS_CHUNKSERVER_DELPACE_H

#include <stdbool.h>
#include <stdint.h>

/* The share is in 1/DELPACE_FULL of the deletion threads' time. */
#define DELPACE_FULL 1024u
/* The lowest floor: deletions go on, slowly, under any foreground load. */
#define DELPACE_MIN (DELPACE_FULL / 32)
/* The most while clients are served (or the floor, if higher): the
 * former fixed half share, which measured better than more (delpace.c). */
#define DELPACE_SERVED (DELPACE_FULL / 2)
/* Longest pause after one slice, so that a stop is never waited long. */
#define DELPACE_PAUSE_MAX_NS (500 * 1000000LL)

enum delpace_kind {
	DELPACE_READ,
	DELPACE_WRITE,
	DELPACE_KINDS,
};

struct delpace {
	/* Loop thread only. */
	int64_t sum_ns[DELPACE_KINDS]; /* latency of the tick's requests */
	uint32_t n[DELPACE_KINDS];     /* and how many */
	/* Mean latency of a tick's requests while no deletion ran (a slow
	 * average of them), the level deletions are held to; 0: none yet. */
	int64_t base_ns[DELPACE_KINDS];
	uint32_t floor; /* the share never goes under it; set at init */
	/* Atomics. */
	uint32_t share;	  /* written on the loop, read by the threads */
	uint64_t deleted; /* unlinks since the last tick, by the threads */
};

/*
 * Start at the full share, with no baseline; the share never goes under
 * @floor (taken into DELPACE_MIN..DELPACE_FULL; DELPACE_FULL: no pacing).
 */
void delpace_init(struct delpace *p, uint32_t floor);

/* A client's request of @kind answered after @ns. Loop thread. */
void delpace_fg(struct delpace *p, enum delpace_kind kind, int64_t ns);

/*
 * Once per tick (the chunkserver's, 200 ms), loop thread. Requests slower
 * than 1.3 times their baseline while deletions ran halve the share (to
 * the floor at least); a tick without that gives back 1/32 of the full
 * share, up to DELPACE_SERVED; a tick without any client request gives
 * all of it; ticks without deletions move the baseline. Returns the new
 * share.
 */
uint32_t delpace_tick(struct delpace *p);

/* @n chunk deletions done (or found done already). Deletion thread. */
void delpace_deleted(struct delpace *p, uint32_t n);

/*
 * How long a deletion thread pauses after a slice of unlinks that took
 * @spent_ns, so that its deletions take the share of its time: 0 at the
 * full share, at most DELPACE_PAUSE_MAX_NS. Any thread.
 */
int64_t delpace_pause_ns(const struct delpace *p, int64_t spent_ns);

/* The share now, in 1/DELPACE_FULL. Any thread. */
uint32_t delpace_share(const struct delpace *p);

#endif
