/*
 * The mount's one reply point to the kernel: only ops.c (the FUSE
 * operations) and this module, which ops.c owns, call libfuse's
 * fuse_reply_*(). What answers at once (entry.c, deleg.c, the start of a
 * read, a lock or a listing) returns its result to the operation; what
 * finishes later, on the master's receiver thread or a chunkserver's
 * (data.c, lock.c, readdir.c), hands its result here, in sweepfs's terms:
 * @rc is 0 or -errno, never the positive errno FUSE wants.
 *
 * Each function answers @req exactly once and returns what libfuse
 * returned: 0, or -errno when the kernel did not take the reply (the
 * request was interrupted), so that the caller can take back what the
 * reply handed over (a lookup count, an open handle).
 */
#ifndef SWEEPFS_MOUNT_REPLY_H
#define SWEEPFS_MOUNT_REPLY_H

#include "mount_i.h"

/* A status: @rc 0 or -errno. */
int reply_status(fuse_req_t req, int rc);

/* Bytes @buf[0..@n) (a read, a page of a listing), or the error @rc. */
int reply_data(fuse_req_t req, int rc, const void *buf, size_t n);

/* @n bytes written, or the error @rc. */
int reply_written(fuse_req_t req, int rc, size_t n);

/* The conflicting lock @l (F_UNLCK: none), or the error @rc. */
int reply_lock(fuse_req_t req, int rc, const struct flock *l);

/* An open handle @fi, or the error @rc. */
int reply_opened(fuse_req_t req, int rc, const struct fuse_file_info *fi);

/*
 * The entry @a (a name in @parent; NULL: the master's reply had none,
 * -EIO) and count the lookup the kernel holds from then on.
 */
int reply_entry(fuse_req_t req, uint64_t parent, const Sweepfs__Attr *a);

#endif
