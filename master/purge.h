/*
 * The background purge of removed trees (purge.c), and the time budget
 * that background work shares with clients.
 */
#ifndef SWEEPFS_MASTER_PURGE_H
#define SWEEPFS_MASTER_PURGE_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "hist.h"

struct master;

/* The purge's state (purge.c). */
struct purge {
	uv_idle_t idle;
	uv_timer_t timer;
	double credit;	  /* ns of purge time earned */
	int64_t last;	  /* mono ns of the last slice */
	uint64_t busy_ns; /* spent purging, in all */
};

/* Background slices (purge, snapshot copies): how many, the longest,
 * and how many took over a millisecond; and when a mount last asked
 * something, which makes them step back. */
struct background {
	int64_t last_client_request; /* mono ns */
	uint64_t slices;
	int64_t slice_max_ns;
	struct sw_hist slice_time; /* every slice */
	int64_t slice_max_cpu_ns;
	uint64_t slices_over_1ms;
};

void purge_init(struct master *m);
void purge_stop(struct master *m);

/* There may be something to purge: start the slices if they are idle. */
void purge_kick(struct master *m);

/* The time budget background work shares (purge, snapshot copies): may
 * a slice run now; and what one took. */
bool background_may_run(struct master *m);
/* A background slice ran @ns of wall time, @cpu_ns of it on the CPU. */
void background_spent(struct master *m, int64_t ns, int64_t cpu_ns);

/* Nodes the purge has yet to free. */
uint64_t purge_left(const struct master *m);

#endif
