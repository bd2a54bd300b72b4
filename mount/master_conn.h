/*
 * The mount's connection to the master: one TCP connection shared by all
 * FUSE worker threads, with many requests in flight (pipelined, matched by
 * request id), a receiver thread, and reconnection.
 *
 * When the connection breaks, the receiver thread reconnects with backoff
 * and resumes the session (hello with the session id and the inodes this
 * mount has open). Calls made while it is down wait for it, up to the
 * master timeout, then fail with -EIO. Calls that were in flight when it
 * broke are sent again if they change nothing; if they could have changed
 * something, nobody can tell whether they did, so they fail with -EIO
 * rather than risk doing it twice. Nothing waits forever.
 */
#ifndef SWEEPFS_MOUNT_MASTER_CONN_H
#define SWEEPFS_MOUNT_MASTER_CONN_H

#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "net.h"

struct mconn;

struct mconn_opts {
	struct sw_target target;
	const char *client_name;
	int timeout_ms;	     /* how long calls wait for a dead master */
	/*
	 * The inodes to reclaim on reconnect: fills *@inos (malloc'd, the
	 * connection frees it) and *@n. Called on the receiver thread.
	 */
	void (*open_inodes)(void *arg, uint64_t **inos, size_t *n);
	/* A notification frame; called on the receiver thread. */
	void (*notify)(void *arg, uint16_t type, const uint8_t *payload,
		       size_t len);
	void *arg;
};

/*
 * Connect and say hello synchronously (no thread yet), so that a mount
 * command fails at once when the master is unreachable or refuses.
 * Returns 0 with *@out, or -errno.
 */
int mconn_open(const struct mconn_opts *o, struct mconn **out);

/* The master inode of the exported root and the session id. */
uint64_t mconn_root_ino(const struct mconn *mc);
uint64_t mconn_session_id(const struct mconn *mc);

/*
 * Start the receiver thread. Call after fuse_daemonize(): threads do not
 * survive fork. Returns 0 or -errno.
 */
int mconn_start(struct mconn *mc);

/*
 * Send @req as @type and wait for the reply, unpacked into *@reply (free
 * with protobuf_c_message_free_unpacked). Thread-safe. Returns 0, or the
 * reply's own error as -errno (*@reply is then NULL), or -EIO when the
 * master could not be reached in time.
 */
int mconn_call(struct mconn *mc, uint16_t type, const ProtobufCMessage *req,
	       ProtobufCMessage **reply);

/* Stop the thread, close, free. */
void mconn_close(struct mconn *mc);

#endif
