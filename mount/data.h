/*
 * File contents for the mount: reads and writes go straight to the
 * chunkservers; the master only says where a chunk is (and grants
 * access), and learns a file's new size after an extending write.
 *
 * The kernel's page cache does the buffering (FUSE writeback cache): it
 * gathers small writes into large WRITE requests, reads ahead, and pushes
 * dirty pages at close and fsync. Each WRITE here is sent to every copy of
 * its chunk and answered when all have it; an extending write also waits
 * for the master to record the size, so what close() returned is what the
 * next open anywhere sees.
 *
 * All functions answer @req themselves (asynchronously) and are
 * thread-safe.
 */
#ifndef SWEEPFS_MOUNT_DATA_H
#define SWEEPFS_MOUNT_DATA_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <stdint.h>

struct mount;
struct data;

int data_new(struct mount *m, struct data **out);
void data_free(struct data *d);

void data_read(struct mount *m, fuse_req_t req, uint64_t ino, size_t size,
	       off_t off);
void data_write(struct mount *m, fuse_req_t req, uint64_t ino,
		const char *buf, size_t size, off_t off);
void data_fsync(struct mount *m, fuse_req_t req, uint64_t ino);

/*
 * Forget what is cached about @ino's chunks (its size changed under us,
 * it was truncated, or it is gone), and its size as last committed.
 */
void data_forget(struct mount *m, uint64_t ino);

/*
 * The file was closed (release): forget its write locations, whose
 * leases the master ends on release; a later write asks again.
 */
void data_release(struct mount *m, uint64_t ino);

#endif
