/*
 * The mount's table of inodes the kernel knows: one entry per inode with a
 * lookup count, kept exactly as FUSE defines it (every entry reply adds
 * one, forget subtracts what it says), and an open count, which is what a
 * reconnecting mount tells the master it still has open.
 *
 * Entries are created by itable_ref() and freed when both counts reach
 * zero. Thread-safe (one mutex; every operation is O(1)).
 */
#ifndef SWEEPFS_MOUNT_INODE_H
#define SWEEPFS_MOUNT_INODE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct minode;

struct itable {
	pthread_mutex_t mu;
	struct minode **buckets;
	size_t nbuckets; /* power of two */
	size_t count;
};

int itable_init(struct itable *t);
void itable_release(struct itable *t);

/* The kernel learned of @ino once more (an entry reply went out). */
int itable_ref(struct itable *t, uint64_t ino);

/* The kernel forgot @n lookups of @ino. */
void itable_forget(struct itable *t, uint64_t ino, uint64_t n);

/* A file handle on @ino was opened / released. */
int itable_open(struct itable *t, uint64_t ino);
void itable_close(struct itable *t, uint64_t ino);

/* Inodes with open handles, each once per handle, in a malloc'd array
 * the caller frees. */
void itable_open_inodes(struct itable *t, uint64_t **inos, size_t *n);

/* Inodes in the table (for tests and statistics). */
size_t itable_count(struct itable *t);

#endif
