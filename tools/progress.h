/*
 * progress: one line on stderr that a long-running command redraws while
 * it works: what, how many so far (of how many), the rate and, when the
 * total is known, the time left. Only on a terminal: when stderr is a
 * pipe or a file nothing is written, so scripts and logs stay clean.
 * $SWEEPFS_PROGRESS=0 turns it off on a terminal too, =1 on anywhere.
 *
 *	struct progress p;
 *
 *	progress_start(&p, "rmr big", "nodes", total);
 *	while (...)
 *		progress_update(&p, done);	// redraws at most 10 times/s
 *	progress_end(&p, done);		// the last state, and a newline
 *
 * Not thread-safe: one thread draws (the others may count in atomics that
 * it reads).
 */
#ifndef SWEEPFS_TOOLS_PROGRESS_H
#define SWEEPFS_TOOLS_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct progress {
	char label[64];	    /* what is going on ("rmr big") */
	const char *unit;   /* what is counted ("nodes"), static text */
	uint64_t total;	    /* 0: unknown (no percentage, no ETA) */
	bool on;	    /* drawing at all */
	bool drawn;	    /* a line is on the screen */
	int64_t t0;	    /* start, CLOCK_MONOTONIC ns */
	int64_t last;	    /* last redraw */
	int64_t rate_t;	    /* last rate sample: time ... */
	uint64_t rate_done; /* ... and count */
	double rate;	    /* per second, smoothed; < 0: none yet */
};

/* Begin: @label is copied (its last 24 characters if longer), @unit kept
 * (static text); the first line appears at the first progress_update(). */
void progress_start(struct progress *p, const char *label, const char *unit,
		    uint64_t total);

/* The total once it is known (0: unknown). */
void progress_set_total(struct progress *p, uint64_t total);

/* @done so far: redraw if the last redraw is 100 ms old. */
void progress_update(struct progress *p, uint64_t done);

/* Draw the final state and end the line (nothing if nothing was ever
 * drawn and @done is 0). */
void progress_end(struct progress *p, uint64_t done);

/*
 * The line itself, without \r: "LABEL: DONE[/TOTAL] UNIT[  PCT%][  RATE/s]
 * [  ETA H:MM:SS]" cut to @width columns, into @buf (@len bytes).
 * @rate < 0: not known yet. Numbers have thousands separators. Returns
 * the length written.
 */
size_t progress_format(char *buf, size_t len, const char *label,
		       const char *unit, uint64_t done, uint64_t total,
		       double rate, int width);

#endif
