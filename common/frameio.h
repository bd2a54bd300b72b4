/*
 * Frames over a blocking socket, for the clients that use threads
 * instead of an event loop (tools, the mount's connections): reading
 * more into an input buffer, with a time limit (sending whole is fsio.h's
 * sw_send_all()). The frames are cut out of the buffer with sw_frame_whole() (frame.h), as
 * the event-loop servers do.
 */
#ifndef SWEEPFS_COMMON_FRAMEIO_H
#define SWEEPFS_COMMON_FRAMEIO_H

#include <stddef.h>

#include "buf.h"
#include "frame.h"
#include "fsio.h" /* sw_send_all() */

/*
 * Read what @fd has into @in (after making room for @chunk more bytes),
 * waiting at most @timeout_ms for it; with @timeout_ms <= 0, one read as
 * the socket does it (blocking as long as it takes, or -EAGAIN for a
 * non-blocking one). 0, -ETIMEDOUT, -ECONNRESET at end of stream, or
 * -errno.
 */
int sw_frame_fill(int fd, struct sw_buf *in, size_t chunk, int timeout_ms);

/*
 * Read from @fd into @in (@chunk bytes at a time, each wait bounded by
 * @timeout_ms as above) until a whole frame of at most @max_payload is at
 * its head: 1 with its header in *@hdr (consume it when done with it),
 * -EMSGSIZE / -EPROTO as sw_frame_whole(), or sw_frame_fill()'s errors.
 */
int sw_frame_next(int fd, struct sw_buf *in, size_t chunk, int timeout_ms,
		  uint32_t max_payload, struct sw_frame_hdr *hdr);

#endif
