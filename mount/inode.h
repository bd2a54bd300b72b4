/*
 * The mount's table of inodes the kernel knows: one entry per inode with a
 * lookup count, kept exactly as FUSE defines it (every entry reply adds
 * one, forget subtracts what it says), and an open count, which is what a
 * reconnecting mount tells the master it still has open.
 *
 * Entries are created by itable_ref() and freed when both counts reach
 * zero. Thread-safe (one mutex; every operation is O(1)).
 *
 * Each entry also holds the inode's handle (sweepfs.proto, "Node
 * handles"), which every request naming the inode must carry: learnt
 * from the reply that handed the inode to the kernel, and replaced by
 * any later one (a function of the number under the master's key: the
 * same until the key is replaced).
 *
 * Each entry can also hold the inode's attributes as the last reply that
 * carried them said, until an expiry: the kernel drops its own copy of a
 * directory's attributes after every create or unlink in it and asks
 * again, and the reply to that create or unlink already told us the
 * answer.
 */
#ifndef SWEEPFS_MOUNT_INODE_H
#define SWEEPFS_MOUNT_INODE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sweepfs.pb-c.h"

struct minode;

struct itable {
	/* Guards everything below and every minode in it: FUSE calls in
	 * on several threads. Held only for the table's own work. */
	pthread_mutex_t mu;
	struct minode **buckets;
	size_t nbuckets; /* power of two */
	size_t count;
	/* mono ns the last inode whose attributes had changed was dropped
	 * (struct minode's changed): itable_newer_attr() distrusts older
	 * ones for inodes it does not hold. */
	int64_t changed_gone_at;
	/* mono ns of the last itable_expire_all_attrs(): attributes set
	 * before it are expired, whatever their own expiry. */
	int64_t all_stale_at;
};

int itable_init(struct itable *t);
void itable_release(struct itable *t);

/*
 * The kernel learned of @ino once more (an entry reply went out), whose
 * handle is @handle (the reply's Attr.handle; 0: not known, as for a node
 * this mount made itself and the master has not answered for yet).
 */
int itable_ref(struct itable *t, uint64_t ino, uint64_t handle);

/*
 * Remember @handle as @ino's if the table holds @ino: the last one the
 * master gave wins (another key gives another; 0 changes nothing).
 */
void itable_set_handle(struct itable *t, uint64_t ino, uint64_t handle);

/* @ino's handle, or 0 when the table does not hold @ino or knows none. */
uint64_t itable_handle(struct itable *t, uint64_t ino);

/* The kernel forgot @n lookups of @ino. */
void itable_forget(struct itable *t, uint64_t ino, uint64_t n);

/* A file handle on @ino was opened with @flags by @cred / released
 * (@flags: the handle's open flags). */
int itable_open(struct itable *t, uint64_t ino, uint32_t flags,
		const Sweepfs__Cred *cred);
void itable_close(struct itable *t, uint64_t ino, uint32_t flags);

/* Handles open on @ino. */
uint32_t itable_nopen(struct itable *t, uint64_t ino);

/*
 * Remember @a as @a->ino's attributes until @expires (monotonic ns), and
 * its handle if it has one (itable_set_handle()), if the kernel knows
 * that inode; otherwise nothing happens.
 */
void itable_set_attr(struct itable *t, const Sweepfs__Attr *a, int64_t expires);

/*
 * Whether @ino is known, as of attributes still fresh, to have no
 * extended attributes at all; itable_xattr_changed() forgets that (this
 * mount is setting one).
 */
bool itable_noxattr(struct itable *t, uint64_t ino);
void itable_xattr_changed(struct itable *t, uint64_t ino);
/* The master said @ino has none: so until @until (mono ns). */
void itable_set_noxattr(struct itable *t, uint64_t ino, int64_t until);

/* Forget @ino's remembered attributes (they changed elsewhere). */
void itable_set_attr_expired(struct itable *t, uint64_t ino);

/* Forget every inode's remembered attributes (any may have changed
 * elsewhere: the master's invalidation of everything). O(1). */
void itable_expire_all_attrs(struct itable *t);

/*
 * Copy @ino's remembered attributes into @a, their expiry into *@expires
 * and when they came into *@fetched (mono ns; may be NULL) if they have
 * not expired; false otherwise.
 */
bool itable_get_attr(struct itable *t, uint64_t ino, Sweepfs__Attr *a,
		     int64_t *expires, int64_t *fetched);

/*
 * Whether this mount learnt something about @ino's attributes after @at
 * (mono ns; what a listing has): 1 with the last attributes a reply gave,
 * expired or not, in @a and when in *@fetched; -1 when they changed since
 * @at in a way only the master knows (itable_set_attr_expired()), or
 * @ino is not held and a changed inode was dropped since @at (its newer
 * attributes went with it); 0 when nothing newer is known.
 */
int itable_newer_attr(struct itable *t, uint64_t ino, int64_t at,
		      Sweepfs__Attr *a, int64_t *fetched);

/* What this mount has open, as a reconnect's Hello.opens: *@n claims,
 * one per inode, access mode and opener, each with the inode's handle
 * when known (OpenClaim.handle), in one block the caller frees
 * with free(*@claims) (NULL when nothing is open, or out of memory). */
void itable_open_claims(struct itable *t, Sweepfs__OpenClaim ***claims,
			size_t *n);

#endif
