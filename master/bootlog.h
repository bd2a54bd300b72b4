/*
 * bootlog: a line now and then while a long start-up step runs (a
 * checkpoint loading, a changelog replaying), so that an operator who
 * sees a master silent for a minute knows it is alive, how far it got
 * and how fast it goes:
 *
 *	loading checkpoint: 24.6 M of 68.0 M nodes and names (36%), 4.2 M/s
 *	replaying the changelog: 1.2 M changes, 0.9 M/s
 *
 * At NOTICE, every BOOTLOG_INTERVAL_NS at most, through the log (which
 * daemons tee to stderr at start-up). The step calls bootlog_tick() per
 * item; the clock is read once every BOOTLOG_CHECK ticks, so that a tick
 * costs an increment and a test. Not thread-safe: one per step.
 */
#ifndef SWEEPFS_MASTER_BOOTLOG_H
#define SWEEPFS_MASTER_BOOTLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Long enough that a step of a few seconds says nothing; short enough
 * that a watcher never waits long. */
#define BOOTLOG_INTERVAL_NS (5 * 1000000000LL)
/* Ticks between clock reads, a power of two: a few milliseconds of work
 * at the fastest items (a name loaded, an unlink replayed: well under a
 * microsecond), a few seconds at the slowest (a PurgeSteps record frees
 * 256 nodes: up to a millisecond on a busy machine; at 16384 a line came
 * 12 s late). */
#define BOOTLOG_CHECK 4096u

struct bootlog {
	const char *tag;    /* the log's subsystem tag */
	const char *what;   /* "loading checkpoint" */
	const char *unit;   /* "nodes and names" */
	uint64_t total;	    /* items the step has, about; 0: unknown */
	uint64_t ticks;	    /* bootlog_tick() calls so far */
	int64_t last;	    /* monotonic ns of the last line (or start) */
	uint64_t last_done; /* items done then */
	unsigned lines;	    /* lines logged */
};

/* Start step @what at monotonic time @now; @total may be 0. The strings
 * must outlive the step (literals). */
void bootlog_start(struct bootlog *b, const char *tag, const char *what,
		   const char *unit, uint64_t total, int64_t now);

/*
 * Log a line if BOOTLOG_INTERVAL_NS passed since the last one (or the
 * start): @done items done at monotonic time @now. Returns whether it
 * logged.
 */
bool bootlog_check(struct bootlog *b, uint64_t done, int64_t now);

/* Count one item, @done in all; now and then, bootlog_check(). */
void bootlog_tick_slow(struct bootlog *b, uint64_t done);
static inline void bootlog_tick(struct bootlog *b, uint64_t done)
{
	if (++b->ticks % BOOTLOG_CHECK == 0)
		bootlog_tick_slow(b, done);
}

/*
 * The line for @done items, @rate per second, into @buf (@len bytes,
 * always terminated). Returns what snprintf() does.
 */
int bootlog_format(char *buf, size_t len, const struct bootlog *b,
		   uint64_t done, double rate);

#endif
