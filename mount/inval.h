/*
 * Telling the kernel to forget names and attributes another client
 * changed. The kernel takes the directory's lock to do that, and a
 * request that holds the lock may be waiting for a reply that only the
 * master connection's receiver thread can deliver; so the receiver only
 * queues, and a thread of its own here talks to the kernel.
 */
#ifndef SWEEPFS_MOUNT_INVAL_H
#define SWEEPFS_MOUNT_INVAL_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <stddef.h>

struct inval;

#include <stdint.h>

/* @ack is called on the inval thread with what inval_queue_ack() gave,
 * once everything queued before it is done. */
int inval_start(struct fuse_session *se, void (*ack)(void *arg, uint64_t seq),
		void *arg, struct inval **out);
void inval_stop(struct inval *iv);

/*
 * Queue: forget @name (@len bytes) in directory @parent, or with @name
 * NULL, @parent's cached attributes and contents. Never blocks; on
 * memory pressure the request is dropped (the kernel's timeouts still
 * bound how long it believes stale entries).
 */
void inval_queue(struct inval *iv, fuse_ino_t parent, const char *name,
		 size_t len);

/*
 * Now, not queued: every name the kernel caches on this mount is to be
 * looked up again before it is used (FUSE_NOTIFY_INC_EPOCH, Linux 6.16).
 * It takes no lock, so it may go out while the kernel waits for a reply.
 * -errno from a kernel without it.
 */
int inval_all_names(struct fuse_session *se);

/* Queue: acknowledge the master's invalidations up to @seq (a dropped
 * one leaves the master to wait for its inval_timeout). */
void inval_queue_ack(struct inval *iv, uint64_t seq);

#endif
