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
 * many of one user (its uid after the export's mapping, however many
 * sessions it has; an admin caller's are another user's), and this many
 * in all but for admin callers. Users take turns (round robin): a
 * user's n-th waiting snapshot goes after every other user's (n-1)-th,
 * so one user's queue delays another's next snapshot by one copy. The
 * caps bound that wait and what the queue holds (a deferred request
 * each). `sweepfs snapshot` sends one at a time and asks again while it
 * is refused.
 */
#define SNAPJOB_USER_MAX 8
#define SNAPJOB_QUEUE_MAX 256

/* May user @uid (an @admin caller) queue one more? 0, or -EAGAIN past a
 * cap above. O(snapshots waiting), which they bound. */
int snapjob_admit(const struct master *m, uint32_t uid, bool admin);

/*
 * Make @name in @parent a snapshot of @src for @uid: queued, copied in
 * the background, and @r answered when the copy is named. 0, or -errno
 * with nothing queued: -EAGAIN when snapjob_admit() refuses (@admin: the
 * caller is). A snapshot whose connection closed before its turn is
 * dropped, unanswered (its client sends it again, or has gone).
 */
int snapjob_submit(struct master *m, const struct req *r, uint32_t uid,
		   uint64_t src, uint64_t parent, const void *name, size_t len,
		   bool admin);

/* The uids of the snapshots waiting, in the order they will be copied,
 * into @uids (at most @max); how many wait. */
size_t snapjob_order(const struct master *m, uint32_t *uids, size_t max);
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
