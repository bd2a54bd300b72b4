/*
 * Instant removal (rmr.c): checks and the commit of one entry's
 * removal, which snapshot.c and the trash share.
 */
#ifndef SWEEPFS_MASTER_RMR_H
#define SWEEPFS_MASTER_RMR_H

#include <stdbool.h>

#include "bucket.h"
#include "namespace.h"
#include "perm.h"
#include "req.h"

struct master;

/*
 * What a caller without admin rights may make the loop spend on checking
 * trees (rmr.c's top says why): visits, one an entry looked at. One walk
 * at most (about 18 ms at 9 ns a visit): what a session's bucket holds,
 * and everyone's, so that one turn of the loop walks about that at
 * most; the rates a second at which a session's bucket and everyone's
 * refill (about 0.5% and 2% of a core). A session's full bucket pays for a
 * user's rmr of a directory of 1 M files with a subdirectory last, or of
 * a sticky directory of 1 M files of its own another user owns.
 */
#define RMR_VISITS_WALK 2000000u
#define RMR_VISITS_SESSION 500000.0
#define RMR_VISITS_ALL 2000000.0

/* A budget of walks: how a session's bucket and everyone's refill, and
 * what one walk may cost at most. */
struct rmr_budget {
	struct bucket_rule session;
	struct bucket_rule all;
	uint64_t walk;
};

/* The master's, from the numbers above. */
extern const struct rmr_budget rmr_budget;

/*
 * Whether @c may remove everything under directory @root, as rm -rf
 * would need (read, write, search on every non-empty directory; the
 * sticky rule), looking at no more than @limit entries; in *@visits how
 * many it looked at: one a directory for a tree of leaf directories,
 * whatever their size. 0, -EACCES, -EPERM, -ENOMEM, or -EAGAIN when it
 * would have had to look at more than @limit (then *@visits == @limit).
 */
int may_remove_tree_counted(const struct sw_cred *c, struct node *root,
			    uint64_t limit, uint64_t *visits);

/*
 * may_remove_tree_counted() paid for from session bucket @mine and
 * everyone's @all by @b's rules, as of @now (mono ns): its limit is what
 * both hold, up to @b's walk, and the visits made are taken from both
 * whatever the verdict. As it returns, but -E2BIG, not -EAGAIN, when the
 * walk had all a walk may have and needed more (retrying will not help).
 */
int may_remove_tree_paid(const struct rmr_budget *b, struct bucket *mine,
			 struct bucket *all, int64_t now,
			 const struct sw_cred *c, struct node *root,
			 uint64_t *visits);

/*
 * Whether @c, asking through @r, may take @n out of directory @dir at
 * once, tree and all (rmr, rmsnapshot), once write and search on @dir are
 * granted: the sticky rule, then, for a directory and a caller without
 * admin rights, may_remove_tree_paid() from @r's session's bucket and
 * everyone's; in *@visits the visits it paid (0 for an admin caller).
 * 0, -EACCES, -EPERM, -ENOMEM, -EAGAIN (the buckets hold too little now:
 * retry later) or -E2BIG (a walk may not afford the tree: no retry helps).
 */
int may_detach_entry(const struct req *r, const struct sw_cred *c,
		     const struct node *dir, struct node *n, uint64_t *visits);

/*
 * Other walks of one request on the loop paid from the same budget
 * (rmsnapshot -f's, snapshot.c). rmr_visits_may(): how many visits @c,
 * asking through @r, may make now, @spent already made by this request:
 * UINT64_MAX for an admin caller, else what both @r's session's bucket
 * and everyone's hold, up to a walk less @spent. rmr_visits_pay(): take
 * the @visits made from both (nothing for an admin caller); call it
 * before anything else fills the buckets.
 */
uint64_t rmr_visits_may(const struct req *r, const struct sw_cred *c,
			uint64_t spent);
void rmr_visits_pay(const struct req *r, const struct sw_cred *c,
		    uint64_t visits);

/*
 * Commit the removal of @e from @dir: a directory is detached (and the
 * purge kicked), anything else unlinked; with @trash, into the trash if
 * @dir has a trash time. Adds to @reply's counts and purge id. The
 * permissions are the caller's to have checked.
 */
int remove_entry_now(struct master *m, struct req *r, struct node *dir,
		     struct edge *e, bool trash, Sweepfs__RmrReply *reply);

#endif
