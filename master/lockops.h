/*
 * File lock requests (lockops.c) over the lock table (locks.h).
 */
#ifndef SWEEPFS_MASTER_LOCKOPS_H
#define SWEEPFS_MASTER_LOCKOPS_H

#include <stdint.h>

/* The lock table's wake callback: answer the deferred request @waiter
 * (granted with @rc 0, or failed) and let it go. */
void lockops_wake(void *m, void *waiter, int rc);

/* The namespace's node_gone hook: the locks of a freed node go. */
void lockops_node_gone(void *m, uint64_t ino);

#endif
