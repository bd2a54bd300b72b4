/*
 * Status and counters (admin.c): what `sweepfs status` and stats report.
 */
#ifndef SWEEPFS_MASTER_ADMIN_H
#define SWEEPFS_MASTER_ADMIN_H

#include <stdint.h>

#include "frame.h"

struct master;

/* Counters kept per session and in total (sweepfs stats). */
struct op_counters {
	uint64_t requests[SW_MSG__COUNT];
	uint64_t errors;
	uint64_t bytes_in;
	uint64_t bytes_out;
	uint64_t readdir_entries;
	uint64_t invalidations; /* listings invalidated (sent) */
	uint64_t batch_ops;	/* operations applied from batches */
};

/* Take this second's sample for the rates status reports. */
void admin_sample(struct master *m);

#endif
