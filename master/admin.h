/*
 * Status and counters (admin.c): what `sweepfs status` and stats report.
 */
#ifndef SWEEPFS_MASTER_ADMIN_H
#define SWEEPFS_MASTER_ADMIN_H

#include <stdint.h>

#include "frame.h"
#include "metrics.h"
#include "sessrec.h"
#include "sweepfs.pb-c.h"

struct master;
struct req;

/* The slowest requests are kept this long, this many. */
#define SLOW_WINDOW_NS (10 * 1000000000LL)
#define SLOW_KEEP 8

struct slow_req {
	int64_t ns; /* from arrival to reply ready */
	int64_t at; /* mono ns of the reply */
	uint64_t session_id;
	uint16_t type;
};

/* How long requests take (admin.c), and the metrics endpoint (metrics.c). */
struct latency {
	struct sw_hist by_type[SW_MSG__COUNT];
	struct slow_req slow[SLOW_KEEP]; /* unordered; ns 0: free */
	int64_t slow_floor;		 /* a request must beat this */
	struct sw_metrics *endpoint;
};

/* Take this second's sample for the rates status reports. */
void admin_sample(struct master *m);

/* @r's reply is ready now: count how long it took. */
void admin_note_latency(struct master *m, const struct req *r);

/* The master's status as INFO gives it, but no sessions, servers or
 * counters (those need memory): for the metrics. */
void admin_info_fill(struct master *m, Sweepfs__InfoReply *reply);

/* The slowest requests of the last SLOW_WINDOW_NS into @out (room for
 * SLOW_KEEP), slowest first; how many. */
size_t admin_slowest(struct master *m, struct slow_req *out);

/* Serve cfg.metrics_listen if set (metrics.c). 0 or -errno (logged). */
int metrics_start(struct master *m);
void metrics_stop(struct master *m);

#endif
