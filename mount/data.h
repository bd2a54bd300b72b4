/*
 * File contents for the mount: reads and writes go straight to the
 * chunkservers; the master only says where a chunk is (and grants
 * access), and learns a file's new size after an extending write.
 *
 * Each WRITE is sent to every copy of its chunk and answered when all
 * have it. The file's new size and mtime follow to the master (one
 * WRITE_END in flight per file, gathering the writes made meanwhile);
 * until they are there, attributes this mount reports are overlaid with
 * them. fsync waits for them, and a release sends them ahead of itself,
 * so what close() returned is what the next open anywhere sees.
 *
 * All functions answer @req themselves (asynchronously) and are
 * thread-safe.
 */
#ifndef SWEEPFS_MOUNT_DATA_H
#define SWEEPFS_MOUNT_DATA_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>

struct mount;
struct data;

int data_new(struct mount *m, struct data **out);
/* Unmounted: syncs still running end as they are, asking the master
 * nothing (its connection closes next). Before mconn_close(); and the
 * chunkservers' pool, whose close ends them, goes before data_free(). */
void data_stop(struct data *d);
void data_free(struct data *d);

/*
 * Read @size bytes at @off of @ino, write @buf there, or make @ino's
 * written data durable (fsync). Each returns 0 when under way: the
 * completion answers @req (reply.h), from a chunkserver's or the
 * master's receiver thread. A negative return is the -errno the
 * operation answers; 1 (read and write only: @size is 0) means nothing
 * to move, the operation answers 0 bytes.
 *
 * A sync goes with the token and version each chunk was written with.
 * A chunk whose token ends within a minute, or that a copy refused to
 * sync (a snapshot moved its version on), is asked of the master again,
 * once, and synced where it says (data.c, "fsync").
 */
int data_read(struct mount *m, fuse_req_t req, uint64_t ino, size_t size,
	      off_t off);
int data_write(struct mount *m, fuse_req_t req, uint64_t ino, const char *buf,
	       size_t size, off_t off);
int data_fsync(struct mount *m, fuse_req_t req, uint64_t ino);

/*
 * Forget what is cached about @ino's chunks (its size changed under us,
 * it was truncated, or it is gone), and its size as last committed.
 */
void data_forget(struct mount *m, uint64_t ino);

/*
 * A handle on the file was closed (release; @last: the last one here):
 * its size and mtime go to the master, its write locations are
 * forgotten (the master ends their leases on release; a later write asks
 * again), and after the last one its written chunks are synced in the
 * background and the file forgotten.
 */
void data_release(struct mount *m, uint64_t ino, bool last);

/*
 * When @ino's size and mtime have reached the master (at once if they
 * have), call @cb with 0 or the error a commit met; data_flush_wait()
 * blocks the caller (a FUSE worker, never the master connection's
 * thread) until then.
 */
void data_flush(struct mount *m, uint64_t ino, void (*cb)(void *arg, int rc),
		void *arg);
int data_flush_wait(struct mount *m, uint64_t ino);

/* Whether this mount wrote to @ino at or after @at (mono ns), lately. */
bool data_written_after(struct data *d, uint64_t ino, int64_t at);

/*
 * Size and mtime of @ino as this mount's writes left them, if attributes
 * the master gave at @fetched (mono ns; INT64_MAX: those of the reply at
 * hand, MOUNT_ATTR_NOW) may not have them: *@size and *@mtime raised to
 * them, true. So while the master may not have heard of a write yet;
 * and, for attributes a cache kept from before the master's answer to
 * the last WRITE_END, lately (recent_keep, longer than attr_timeout up to
 * a minute): handed to the kernel without them, they would shrink the
 * file under its writer until attr_timeout, and reads past the older
 * size would come back short.
 */
bool data_local_attr(struct data *d, uint64_t ino, int64_t fetched,
		     uint64_t *size, int64_t *mtime);

#endif
