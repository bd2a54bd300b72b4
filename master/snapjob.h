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
 * Snapshots waiting (the one being copied not counted): at most this
 * many of one session, and this many in all but for admin callers. A
 * snapshot waits for all those before it: the caps bound that wait and
 * what the queue holds (a deferred request each). `sweepfs snapshot`
 * sends one at a time and asks again while it is refused.
 */
#define SNAPJOB_SESSION_MAX 8
#define SNAPJOB_QUEUE_MAX 256

/* May session @session (its id; an @admin caller's) queue one more? 0,
 * or -EAGAIN past a cap above. O(snapshots waiting), which they bound. */
int snapjob_admit(const struct master *m, uint64_t session, bool admin);

/*
 * Make @name in @parent a snapshot of @src: queued, copied in the
 * background, and @r answered when the copy is named. 0, or -errno with
 * nothing queued: -EAGAIN when snapjob_admit() refuses (@admin: the
 * caller is).
 */
int snapjob_submit(struct master *m, const struct req *r, uint64_t src,
		   uint64_t parent, const void *name, size_t len, bool admin);
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
