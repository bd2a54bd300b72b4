/*
 * wq.h: what is queued reaches the peer whole and in order, through
 * uv_try_write and, once the socket is full, one uv_write at a time,
 * while more is queued meanwhile; a write to a peer that went away is
 * reported, not lost silently.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "wq.h"

#define TOTAL (8u << 20)
#define PIECE (64u << 10)

struct run {
	uv_pipe_t pipe;
	struct sw_wq wq;
	size_t queued;
	int writes_done, last_status;
	uv_idle_t idle;
};

struct reader {
	int fd;
	size_t got;
	bool in_order;
};

static uint8_t byte_at(size_t i)
{
	return (uint8_t)(i * 31 + (i >> 13));
}

static void *read_all(void *arg)
{
	struct reader *r = arg;
	uint8_t buf[PIECE];
	ssize_t n;

	r->in_order = true;
	usleep(50000); /* let the socket fill up first */
	while ((n = read(r->fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != byte_at(r->got + (size_t)i))
				r->in_order = false;
		r->got += (size_t)n;
	}
	return NULL;
}

static void on_written(struct sw_wq *q, int status)
{
	struct run *r = q->data;

	r->writes_done++;
	r->last_status = status;
	if (status == 0)
		assert_int_equal(sw_wq_flush(q), 0);
}

/* Queue a piece each loop turn, whatever is in flight. */
static void on_idle(uv_idle_t *h)
{
	struct run *r = h->data;
	uint8_t piece[PIECE];

	if (r->queued == TOTAL) {
		if (!sw_wq_backlog(&r->wq)) {
			uv_idle_stop(h);
			uv_close((uv_handle_t *)h, NULL);
			uv_close((uv_handle_t *)&r->pipe, NULL);
		}
		return;
	}
	for (size_t i = 0; i < PIECE; i++)
		piece[i] = byte_at(r->queued + i);
	assert_int_equal(sw_buf_add(&r->wq.out, piece, PIECE), 0);
	r->queued += PIECE;
	assert_int_equal(sw_wq_flush(&r->wq), 0);
}

/* @r's write queue on one end of a new socket pair (sv[0]) on new loop
 * @loop; the test has the other end, sv[1]. */
static void run_init(struct run *r, uv_loop_t *loop, int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(uv_loop_init(loop), 0);
	assert_int_equal(uv_pipe_init(loop, &r->pipe, 0), 0);
	assert_int_equal(uv_pipe_open(&r->pipe, sv[0]), 0);
	sw_wq_init(&r->wq, (uv_stream_t *)&r->pipe, on_written, r);
}

static void test_whole_and_in_order(void **state)
{
	struct reader rd = { 0 };
	struct run r = { 0 };
	uv_loop_t loop;
	pthread_t t;
	int sv[2];

	(void)state;
	run_init(&r, &loop, sv);
	rd.fd = sv[1];
	pthread_create(&t, NULL, read_all, &rd);
	uv_idle_init(&loop, &r.idle);
	r.idle.data = &r;
	uv_idle_start(&r.idle, on_idle);
	uv_run(&loop, UV_RUN_DEFAULT);
	pthread_join(t, NULL);
	close(sv[1]);
	assert_int_equal(rd.got, TOTAL);
	assert_true(rd.in_order);
	/* The socket filled up: some of it went through uv_write. */
	assert_true(r.writes_done > 0);
	assert_int_equal(r.last_status, 0);
	sw_wq_release(&r.wq);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_peer_gone(void **state)
{
	struct run r = { 0 };
	uv_loop_t loop;
	int sv[2], rc;

	(void)state;
	run_init(&r, &loop, sv);
	close(sv[1]);
	assert_int_equal(sw_buf_add(&r.wq.out, "x", 1), 0);
	rc = sw_wq_flush(&r.wq);
	uv_run(&loop, UV_RUN_NOWAIT);
	/* Failed at once, or in the write's callback. */
	assert_true(rc < 0 || r.last_status < 0);
	uv_close((uv_handle_t *)&r.pipe, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	sw_wq_release(&r.wq);
	assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_and_in_order),
		cmocka_unit_test(test_peer_gone),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
