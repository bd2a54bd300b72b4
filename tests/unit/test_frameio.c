/*
 * frameio.h: reading into a frame buffer from a socket, with a time
 * limit, end of stream and a non-blocking socket; sending whole.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "frame.h"
#include "frameio.h"

static void test_fill_and_cut(void **state)
{
	struct sw_frame_hdr h = { .len = 3, .type = SW_MSG_PING, .id = 9 };
	struct sw_buf in = SW_BUF_INIT;
	struct sw_frame_hdr got;
	uint8_t frame[SW_FRAME_HDR + 3];
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	sw_frame_put_hdr(frame, &h);
	memcpy(frame + SW_FRAME_HDR, "abc", 3);
	/* Half a frame: not whole yet. */
	assert_int_equal(sw_send_all(sv[0], frame, 10), 0);
	assert_int_equal(sw_frame_fill(sv[1], &in, 64, 1000), 0);
	assert_int_equal(sw_frame_whole(sw_buf_head(&in), sw_buf_used(&in), 100,
					&got),
			 0);
	/* Nothing more within the limit. */
	assert_int_equal(sw_frame_fill(sv[1], &in, 64, 50), -ETIMEDOUT);
	assert_int_equal(sw_send_all(sv[0], frame + 10, sizeof(frame) - 10), 0);
	assert_int_equal(sw_frame_fill(sv[1], &in, 64, -1), 0);
	assert_int_equal(sw_frame_whole(sw_buf_head(&in), sw_buf_used(&in), 100,
					&got),
			 1);
	assert_int_equal(got.id, 9);
	assert_memory_equal(sw_buf_head(&in) + SW_FRAME_HDR, "abc", 3);
	/* End of stream. */
	close(sv[0]);
	assert_int_equal(sw_frame_fill(sv[1], &in, 64, 1000), -ECONNRESET);
	close(sv[1]);
	sw_buf_release(&in);
}

static void test_nonblocking_and_broken(void **state)
{
	struct sw_buf in = SW_BUF_INIT;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	assert_int_equal(sw_frame_fill(sv[1], &in, 64, 0), -EAGAIN);
	close(sv[1]);
	/* The peer is gone: an error, not a SIGPIPE. */
	assert_int_equal(sw_send_all(sv[0], "x", 1), -EPIPE);
	close(sv[0]);
	sw_buf_release(&in);
}

static void test_next(void **state)
{
	struct sw_frame_hdr h = { .len = 3, .type = SW_MSG_PING, .id = 4 };
	struct sw_buf in = SW_BUF_INIT;
	struct sw_frame_hdr got;
	uint8_t frame[2 * (SW_FRAME_HDR + 3)];
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	sw_frame_put_hdr(frame, &h);
	memcpy(frame + SW_FRAME_HDR, "abc", 3);
	h.id = 5;
	sw_frame_put_hdr(frame + SW_FRAME_HDR + 3, &h);
	memcpy(frame + 2 * SW_FRAME_HDR + 3, "def", 3);
	/* A frame and a half, read a byte at a time: the first is whole. */
	assert_int_equal(sw_send_all(sv[0], frame, SW_FRAME_HDR + 5), 0);
	assert_int_equal(sw_frame_next(sv[1], &in, 1, 1000, 100, &got), 1);
	assert_int_equal(got.id, 4);
	assert_memory_equal(sw_buf_head(&in) + SW_FRAME_HDR, "abc", 3);
	sw_buf_consume(&in, SW_FRAME_HDR + got.len);
	/* The second waits for the rest, within the limit. */
	assert_int_equal(sw_frame_next(sv[1], &in, 64, 50, 100, &got),
			 -ETIMEDOUT);
	assert_int_equal(sw_send_all(sv[0], frame + SW_FRAME_HDR + 5,
				     sizeof(frame) - SW_FRAME_HDR - 5),
			 0);
	assert_int_equal(sw_frame_next(sv[1], &in, 64, 1000, 100, &got), 1);
	assert_int_equal(got.id, 5);
	assert_memory_equal(sw_buf_head(&in) + SW_FRAME_HDR, "def", 3);
	sw_buf_consume(&in, SW_FRAME_HDR + got.len);
	/* A frame over the limit is refused before its payload is read. */
	h.len = 1000;
	sw_frame_put_hdr(frame, &h);
	assert_int_equal(sw_send_all(sv[0], frame, SW_FRAME_HDR), 0);
	assert_int_equal(sw_frame_next(sv[1], &in, 64, 1000, 100, &got),
			 -EMSGSIZE);
	/* End of stream mid-frame. */
	sw_buf_reset(&in);
	assert_int_equal(sw_send_all(sv[0], frame, 4), 0);
	close(sv[0]);
	assert_int_equal(sw_frame_next(sv[1], &in, 64, 1000, 100, &got),
			 -ECONNRESET);
	close(sv[1]);
	sw_buf_release(&in);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fill_and_cut),
		cmocka_unit_test(test_nonblocking_and_broken),
		cmocka_unit_test(test_next),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
