/*
 * The mount's connections to chunkservers: one pipelined connection per
 * server address, opened on first use, each with a receiver thread that
 * completes requests (as master_conn does for the master).
 *
 * Unlike the master connection nothing is resent here: a failed read
 * tries another copy, a failed write asks the master again, so a broken
 * connection simply fails what was in flight (-EIO) and the next request
 * to that server reconnects.
 */
#ifndef SWEEPFS_MOUNT_CSPOOL_H
#define SWEEPFS_MOUNT_CSPOOL_H

#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

struct cspool;

/*
 * Completion of a chunkserver request: @rc is 0 with *@reply, the
 * reply's error as -errno (with *@reply), or -EIO (*@reply NULL;
 * -EMSGSIZE for a request larger than a chunkserver accepts). The
 * pool frees *@reply afterwards unless the callback takes it (sets it to
 * NULL). Runs on a receiver thread, or on the caller's if the request
 * could not be sent. It must not send to the chunkserver it was answered
 * by: such a cspool_send() fails at once with -EDEADLK (cspool.c says
 * why).
 */
typedef void (*cs_cb)(void *arg, int rc, ProtobufCMessage **reply);

/* A pool whose connections give up on a server that stops answering
 * (even TCP keepalives) after @peer_timeout_ms. 0 or -ENOMEM. */
int cspool_new(unsigned peer_timeout_ms, struct cspool **out);

/* Close every connection (failing what is in flight) and free. */
void cspool_free(struct cspool *p);

/*
 * Send @req as @type to the chunkserver at @addr ("host:port"); @cb runs
 * once. Thread-safe. Connecting (the first time) happens in the caller's
 * thread, bounded by a few seconds.
 */
void cspool_send(struct cspool *p, const char *addr, uint16_t type,
		 const ProtobufCMessage *req, cs_cb cb, void *arg);

#endif
