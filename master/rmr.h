/*
 * Instant removal (rmr.c): checks and the commit of one entry's
 * removal, which snapshot.c and the trash share.
 */
#ifndef SWEEPFS_MASTER_RMR_H
#define SWEEPFS_MASTER_RMR_H

#include <stdbool.h>

#include "namespace.h"
#include "perm.h"
#include "req.h"

struct master;

/*
 * Whether @c may remove everything under directory @root, as rm -rf
 * would need (read, write, search on every non-empty directory; the
 * sticky rule). 0, -EACCES, -EPERM or -ENOMEM.
 */
int may_remove_tree(const struct sw_cred *c, struct node *root);

/* may_remove_tree(), and in *@visits how many entries it looked at: one
 * a directory for a tree of leaf directories, whatever their size. */
int may_remove_tree_counted(const struct sw_cred *c, struct node *root,
			    uint64_t *visits);

/*
 * Whether @c, asking through @r, may take @n out of directory @dir at
 * once, tree and all (rmr, rmsnapshot), once write and search on @dir are
 * granted: the sticky rule, then, for a directory and a caller without
 * admin rights, may_remove_tree(). 0 or -errno as above.
 */
int may_detach_entry(const struct req *r, const struct sw_cred *c,
		     const struct node *dir, struct node *n);

/*
 * Commit the removal of @e from @dir: a directory is detached (and the
 * purge kicked), anything else unlinked; with @trash, into the trash if
 * @dir has a trash time. Adds to @reply's counts and purge id. The
 * permissions are the caller's to have checked.
 */
int remove_entry_now(struct master *m, struct req *r, struct node *dir,
		     struct edge *e, bool trash, Sweepfs__RmrReply *reply);

#endif
