/*
 * FUSE over io_uring (-o io_uring): requests and replies through a ring
 * per CPU instead of read(2) and writev(2) of /dev/fuse. Linux 6.14 and
 * later have it, where the fuse module's enable_uring parameter is on.
 *
 * Why. Each request read from /dev/fuse wakes a sleeping thread, and
 * each reply its caller, as often as not on the other CPU; on a virtual
 * machine a sleeping CPU's wake-up costs about as much as the request.
 * With the ring, the kernel puts a request on the queue of the CPU its
 * caller runs on, and that queue's thread, kept on that CPU, answers
 * it. `rm -rf` of a flat directory ran 2.5 times as fast this way on a
 * two-CPU VM (README, "What idle CPUs cost on a virtual machine").
 *
 * How. Debian 12's libfuse 3.14 knows nothing of it, so this sits
 * beneath libfuse, in its custom I/O hooks:
 * - INIT comes through /dev/fuse. Where the kernel offers the ring,
 *   the reply takes it (FUSE_OVER_IO_URING), and a thread per CPU
 *   gives its queue RING_DEPTH entries. Once every queue has its
 *   entries, requests come through the ring; until then, and
 *   interrupts and forgets always, through /dev/fuse, which the mount
 *   reads as before. So a kernel without the ring, or a ring that
 *   cannot be set up, leaves the mount working as without the option.
 * - A request arrives split: its header, its opcode's own header and
 *   the rest. It is put together again into the one buffer libfuse
 *   parses, and given to fuse_session_process_buf().
 * - Those the mount answers without waiting (devpoll_keeps_turn()) are
 *   served in the queue's thread. The others go to a pool of threads,
 *   so that a chunk read or a master call does not hold up every
 *   request from that CPU.
 * - A reply, from whichever thread gives it (a lock granted later
 *   comes from the master connection's), is caught in the writev hook
 *   by its request's id, copied into the request's entry and committed
 *   (COMMIT_AND_FETCH), which also readies the entry for the next
 *   request. Only the queue's own thread submits to its ring; replies
 *   from other threads are handed to it (ring.c says why).
 *   Notifications still go through /dev/fuse.
 *
 * Limit. A request holds its entry until answered, and a queue grows to
 * RING_MAX_DEPTH entries at most: that many lock requests waiting at
 * once, all sent from one CPU, hold up every other request from that
 * CPU until one of them is granted or given up.
 */
#ifndef SWEEPFS_MOUNT_RING_H
#define SWEEPFS_MOUNT_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "fuse_ring.h"

/* Entries per CPU's queue at first, and at most: a queue gets more
 * while fewer than RING_SPARE of them hold no request. */
#define RING_DEPTH 16u
#define RING_MAX_DEPTH 64u
#define RING_SPARE 4u
/* Threads serving the requests that may wait, at most. */
#define RING_MAX_WORKERS 32u

struct fuse_session;
struct ring;

/*
 * A ring for @se, whose device is @fd, mounted on @mountpoint; no
 * thread runs until the kernel has accepted it in INIT. 0 or -errno.
 */
int ring_new(struct fuse_session *se, int fd, const char *mountpoint,
	     struct ring **out);

/*
 * Stop its threads, once the session loop has ended and the file system
 * is unmounted; a request being served is finished first. Replies that
 * come later are dropped (writev fails with ENOENT, as for a request
 * the kernel gave up). NULL is ignored.
 */
void ring_stop(struct ring *r);

/* Stop it and free it, once no thread can reply any more. */
void ring_free(struct ring *r);

/* The read hook's: note an INIT read from /dev/fuse. */
void ring_read(struct ring *r, const void *buf, ssize_t n);

/*
 * The writev hook's. A reply to a request that came through the ring
 * is committed through it; INIT's reply takes the ring where the kernel
 * offered it, and starts the queues once written; anything else is
 * written to @fd. The result is writev(2)'s.
 */
ssize_t ring_writev(struct ring *r, int fd, const struct iovec *iov, int count);

/* Requests that came through the ring so far. */
uint64_t ring_served(struct ring *r);

/* Exposed for the unit test. */

/*
 * Put the request in @h and @payload (@payload_sz bytes of it valid)
 * together into @buf (@len bytes): header, the opcode's header, payload,
 * as /dev/fuse gives it. Its length, or -EPROTO if the sizes the
 * kernel gave do not add up, or -EOVERFLOW if @buf is too short.
 */
ssize_t ring_rebuild(const struct fuse_uring_req_header *h, const void *payload,
		     size_t payload_sz, void *buf, size_t len);

/*
 * Store the reply in @iov (@count of them, a struct fuse_out_header
 * first) in @h and @payload (@payload_max bytes); its length, or
 * -EPROTO for a malformed one, -EOVERFLOW for one too long. On error
 * an error reply (EIO) is stored in its stead.
 */
ssize_t ring_store_reply(struct fuse_uring_req_header *h, void *payload,
			 size_t payload_max, const struct iovec *iov,
			 int count);

/* Whether @buf (@n bytes from /dev/fuse) is an INIT offering the
 * ring. */
bool ring_init_offered(const void *buf, ssize_t n);

/*
 * Take the ring in INIT's reply (@iov, @count), if it is a successful
 * one; the payload each entry must hold (from its max_write and
 * max_pages) in @payload_max. 0, or -EPROTO for a reply that is not
 * INIT's.
 */
int ring_init_accept(const struct iovec *iov, int count, size_t *payload_max);

/* How many CPUs a list such as "0-3,8-11" (sysfs's) names; 0 if it is
 * malformed. */
unsigned ring_cpu_count(const char *list);

#endif
