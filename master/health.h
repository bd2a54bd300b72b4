/*
 * Chunk health: how many chunks are missing (no valid copy on a
 * connected server), endangered (one copy left where more are wanted),
 * under or over their goal, or have a goal that cannot be met with the
 * chunkservers connected now. What mfscli -SIC shows; what `sweepfs
 * status`, `top` and the master's /metrics report.
 *
 * The counts are a census taken by the loop in slices (health_tick(),
 * every cs_tick), a bounded number of chunk slots at a time, and
 * published whole when a pass over the chunk table ends: a status
 * request reads them, it never walks the chunks. They are as old as the
 * last pass (health_age_ms()); a tick visits at most 16384 slots or
 * half a millisecond's worth, so a pass over a million chunks takes some
 * 13 s or more.
 */
#ifndef SWEEPFS_MASTER_HEALTH_H
#define SWEEPFS_MASTER_HEALTH_H

#include <stddef.h>
#include <stdint.h>

struct master;

/* One pass's counts. A chunk falls in every class that applies: an
 * endangered chunk is undergoal too; a missing one is neither. */
struct health_counts {
	uint64_t chunks;      /* seen in the pass */
	uint64_t missing;     /* no valid copy on a connected server */
	uint64_t endangered;  /* one valid copy, goal above one */
	uint64_t undergoal;   /* some valid copies, fewer than the goal */
	uint64_t overgoal;    /* more valid copies than the goal */
	uint64_t unreachable; /* goal above the servers connected */
};

struct health {
	uint64_t cursor;	   /* slot of the chunk table to visit next */
	size_t visited;		   /* slots visited in this pass */
	uint32_t servers;	   /* connected chunkservers at pass start */
	struct health_counts acc;  /* this pass so far */
	struct health_counts last; /* the last whole pass */
	uint64_t passes;	   /* whole passes done */
	int64_t done_at;	   /* mono ns the last pass ended, 0: none */
};

/* Visit the next slice of the chunk table; at the end of a pass,
 * publish its counts. Loop thread. */
void health_tick(struct master *m);

/* The last whole pass's counts (zeros before the first ends). */
const struct health_counts *health_counts(const struct master *m);

/* Milliseconds since the last pass ended; UINT64_MAX before the first. */
uint64_t health_age_ms(const struct master *m);

#endif
