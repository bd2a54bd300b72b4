/*
 * The consistency check (fsck.c).
 */
#ifndef SWEEPFS_MASTER_FSCK_H
#define SWEEPFS_MASTER_FSCK_H

#include <stdint.h>

#include "sweepfs.pb-c.h"

struct master;

/*
 * The check itself, in this process, reporting at most @max problems
 * (NULL: ENOMEM). It scribbles on scratch fields of every node and chunk
 * (atime, a flag bit, lease times): only for a forked child, or a test.
 * Free the report with fsck_free().
 */
Sweepfs__FsckReply *fsck_check(struct master *m, uint32_t max);
void fsck_free(Sweepfs__FsckReply *r);

#endif
