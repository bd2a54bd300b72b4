/*
 * What the fuzz targets that drive a real server share: one loopback TCP
 * connection per input to a server running in-process on a libuv loop,
 * the input pushed through it as the server takes it, and every frame
 * that comes back checked.
 *
 * A server is done with an input when it has closed the connection and
 * freed what it kept for it (the target's idle() says so). Everything
 * here runs on the fuzzer's thread, which is also the loop's thread, so
 * the loop runs only while fz_exchange() is running it. A server that
 * never lets go of the connection hangs the input, and libFuzzer's
 * -timeout reports it.
 */
#ifndef SWEEPFS_TESTS_FUZZ_IO_H
#define SWEEPFS_TESTS_FUZZ_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>
#include <uv.h>

struct fz_server {
	uv_loop_t *loop;
	uint16_t port;	    /* on 127.0.0.1 */
	uint32_t max_reply; /* largest payload a client accepts from it */
	/* Whether the server has freed every connection. */
	bool (*idle)(void *arg);
	void *arg;
};

/*
 * Send the @plen bytes at @pre then the @len bytes at @data on a new
 * connection to @s, shut down writing, and run the loop until the server
 * has closed the connection and @s->idle() holds. Every frame received
 * must be a reply or a notification that decodes with the payload type
 * the message table gives it, within @s->max_reply: anything else
 * aborts (a bug in the server). Returns the number of frames received.
 */
size_t fz_exchange(const struct fz_server *s, const uint8_t *pre, size_t plen,
		   const uint8_t *data, size_t len);

/*
 * Append a frame of @type with payload @msg (NULL: empty) and request id
 * @id to the @cap bytes at @out, which hold @*used already. Returns false
 * (and appends nothing) when it does not fit.
 */
bool fz_put_frame(uint8_t *out, size_t cap, size_t *used, uint16_t type,
		  uint64_t id, const ProtobufCMessage *msg);

/*
 * A temporary directory for the process, removed at exit, in $TMPDIR, or
 * else in /dev/shm (fsync is free there), or else /tmp. Aborts on failure.
 */
const char *fz_tmpdir(const char *what);

/*
 * Logging for a fuzz run: every message is formatted (so that bad log
 * arguments are found too) and dropped, unless SWEEPFS_FUZZ_LOG=1.
 */
void fz_quiet_logs(void);

#endif
