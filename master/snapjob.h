/*
 * Snapshot copies in the background (snapjob.c).
 */
#ifndef SWEEPFS_MASTER_SNAPJOB_H
#define SWEEPFS_MASTER_SNAPJOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "req.h"

struct master;

/*
 * Make @name in @parent a snapshot of @src: queued, copied in the
 * background, and @r answered when the copy is named. 0, or -errno with
 * nothing queued.
 */
int snapjob_submit(struct master *m, const struct req *r, uint64_t src,
		   uint64_t parent, const void *name, size_t len);
/* Whether a copy is running (checkpoints wait); how many wait. */
bool snapjob_busy(const struct master *m);
uint64_t snapjob_waiting(const struct master *m);
/* Start-up, after the changelog opened. Shutdown, with the changelog
 * still open: gives up a running copy and refuses the waiting ones. */
int snapjob_init(struct master *m);
/* When this master begins to serve (master_lead()): gives up a copy cut
 * short by a restart or a failover. 0 or -EIO. */
int snapjob_take_over(struct master *m);
void snapjob_stop(struct master *m);
void snapjob_release(struct master *m);

#endif
