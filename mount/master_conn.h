/*
 * The mount's connection to the master: one TCP connection shared by all
 * FUSE worker threads, many requests in flight (pipelined, matched by
 * request id), and reconnection.
 *
 * Requests are asynchronous: mconn_send() writes the request and returns;
 * the receiver thread calls the request's callback with the reply. A FUSE
 * worker thus never waits for the master, and the reply reaches the
 * kernel straight from the receiver thread: one thread handoff fewer per
 * round trip than a worker that sleeps until woken.
 *
 * When the connection breaks, the receiver thread reconnects with backoff
 * and resumes the session (hello with the session id and the inodes this
 * mount has open). Requests made while it is down wait, up to the master
 * timeout, then complete with -EIO. Requests in flight when it broke are
 * sent again: as they were when that is harmless, else (an unlink, an
 * exclusive create) with SW_FRAME_AGAIN and the same id, so that a master
 * that made the change already answers as it did the first time instead
 * of making it twice (proto/frame.h). Nothing waits forever.
 *
 * The target may be a list of masters (a group): each try goes to the
 * leader the last refusing follower named, else to the next master of
 * the list, and the backoff comes only after every master failed in a row.
 * The session resumes on whichever master leads.
 */
#ifndef SWEEPFS_MOUNT_MASTER_CONN_H
#define SWEEPFS_MOUNT_MASTER_CONN_H

#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "client.h"
#include "hset.h"
#include "net.h"

struct mconn;

struct mconn_opts {
	struct sw_target target;
	const char *client_name;
	int timeout_ms;	   /* how long requests wait for a dead master */
	uint32_t cache_ms; /* Hello.cache_ms */
	/*
	 * The open files to reclaim on reconnect: fills *@claims (one
	 * malloc'd block, the connection frees it) and *@n. Called on the
	 * receiver thread.
	 */
	void (*open_claims)(void *arg, Sweepfs__OpenClaim ***claims, size_t *n);
	/* The inode ranges to claim again on reconnect (Hello.ino_ranges):
	 * the same way. */
	void (*ino_claims)(void *arg, Sweepfs__InoClaim ***claims, size_t *n);
	/* A notification frame; called on the receiver thread. */
	void (*notify)(void *arg, uint16_t type, const uint8_t *payload,
		       size_t len);
	/* Connected again after a break: whatever the master said while we
	 * were away (invalidations) is lost. Receiver thread. */
	void (*reconnected)(void *arg);
	/* A node's handle (sweepfs.proto, "Node handles"), 0 if unknown,
	 * for the requests that name it (hset_attach()). On the sending
	 * thread, before anything is locked; may be NULL (none are sent). */
	hset_fn handle;
	/* Before a request of @type goes out (on the sending thread; not
	 * on the receiver thread): deleg.c sends its queue first. */
	void (*before_send)(void *arg, uint16_t type);
	/* Whether the mount holds anything under the master's lease
	 * (delegations, cached listings); and, the lease run out with the
	 * master silent, drop it all. Receiver thread. */
	bool (*holds)(void *arg);
	void (*lapsed)(void *arg);
	/* A request of @type answered @ns after it (last) went out, for
	 * the metrics. Receiver thread; may be NULL. */
	void (*answered)(void *arg, uint16_t type, int64_t ns);
	void *arg;
};

/*
 * A request's completion: @rc is 0 with the unpacked *@reply, or the
 * reply's own error as -errno (*@reply still valid, for its other
 * fields), or -EIO/-ENOMEM with *@reply NULL. The connection frees *@reply
 * after the callback returns, unless the callback takes it by setting
 * *@reply to NULL. Runs on the receiver thread (or, for a request that
 * fails before it is sent, on the caller's) and may send further requests.
 */
typedef void (*mconn_cb)(void *arg, int rc, ProtobufCMessage **reply);

/*
 * Connect and say hello synchronously (no thread yet), so that a mount
 * command fails at once when the master is unreachable or refuses (a
 * list: as sw_target_walk() says, within o->timeout_ms). Returns 0 with
 * *@out, or -errno.
 */
int mconn_open(const struct mconn_opts *o, struct mconn **out);

/* The master inode of the exported root and the session id. */
uint64_t mconn_root_ino(const struct mconn *mc);

/* Whether the master's export gives this mount read-only access, as of
 * the last hello (read it before mconn_start()). */
bool mconn_read_only(const struct mconn *mc);

/* The cluster's identity into @id, from the first hello that carried one:
 * false when no master said one yet (an older master). */
bool mconn_cluster_id(const struct mconn *mc, uint8_t id[SW_CLUSTER_ID_LEN]);
uint64_t mconn_session_id(const struct mconn *mc);

/*
 * Whether the master's lease holds now: connected, and a request sent
 * less than lease_ms ago was answered. What only the lease makes safe to
 * answer here (a held directory's attributes) waits for the master when
 * it does not.
 */
bool mconn_lease_holds(struct mconn *mc);

/*
 * Start the receiver thread. Call after fuse_daemonize(): threads do not
 * survive fork. Returns 0 or -errno.
 */
int mconn_start(struct mconn *mc);

/*
 * Send @req as @type; @cb(@arg, ...) runs exactly once when it completes.
 * @cb may be NULL for a request whose outcome nobody needs. Thread-safe.
 * The request is encoded before this returns: @req may go at once. It
 * goes with the handles of the nodes it names (o.handles) unless it
 * carries some already; @req itself is not changed.
 */
void mconn_send(struct mconn *mc, uint16_t type, const ProtobufCMessage *req,
		mconn_cb cb, void *arg);

/*
 * Send @req as @type (with handles, as mconn_send()) without wanting a
 * reply, not necessarily now: it is
 * written before the next request, or within a few milliseconds. For
 * bookkeeping nobody waits for (release), it saves the master a wakeup.
 * Lost if the connection breaks first; a reconnect's reclaim makes up
 * for it.
 */
void mconn_send_lazy(struct mconn *mc, uint16_t type,
		     const ProtobufCMessage *req);

/* Stop the thread, complete what is pending with -EIO, close, free. */
void mconn_close(struct mconn *mc);

#endif
