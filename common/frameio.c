/*
 * Frames over a blocking socket (frameio.h).
 */
#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include "frameio.h"
#include "util.h"

int sw_frame_fill(int fd, struct sw_buf *in, size_t chunk, int timeout_ms)
{
	ssize_t n;
	int rc;

	if (timeout_ms > 0) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t end = sw_mono_ns() + (int64_t)timeout_ms * 1000000;
		int64_t left = timeout_ms;

		/* Interrupted, it waits what is left, not the whole again:
		 * frequent signals must not stretch a caller's deadline. */
		for (;;) {
			rc = poll(&pfd, 1, (int)left);
			if (rc >= 0 || errno != EINTR)
				break;
			left = (end - sw_mono_ns() + 999999) / 1000000;
			if (left <= 0) {
				rc = 0;
				break;
			}
		}
		if (rc < 0)
			return -errno;
		if (rc == 0)
			return -ETIMEDOUT;
	}
	rc = sw_buf_reserve(in, chunk);
	if (rc < 0)
		return rc;
	do
		n = read(fd, in->data + in->len, in->cap - in->len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -ECONNRESET;
	in->len += (size_t)n;
	return 0;
}

int sw_frame_next(int fd, struct sw_buf *in, size_t chunk, int timeout_ms,
		  uint32_t max_payload, struct sw_frame_hdr *hdr)
{
	int rc;

	while ((rc = sw_frame_whole(sw_buf_head(in), sw_buf_used(in),
				    max_payload, hdr)) == 0) {
		rc = sw_frame_fill(fd, in, chunk, timeout_ms);
		if (rc < 0)
			return rc;
	}
	return rc;
}
