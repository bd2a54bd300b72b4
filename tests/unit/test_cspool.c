/*
 * cspool.h: the mount's connections to chunkservers, against a fake
 * chunkserver on loopback that answers every frame. A request is
 * answered on the connection's receiver; a completion that sends to the
 * chunkserver it was answered by is refused at once (-EDEADLK) instead of
 * blocking the only reader of that socket, while one sent from another
 * thread goes through (cspool.c, the rule at its top).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "cspool.h"
#include "frame.h"
#include "frameio.h"
#include "fsio.h"
#include "sweepfs.pb-c.h"
#include "util.h"

/* The fake chunkserver: one connection, each frame answered with an
 * empty reply of its type, until the peer goes. */
struct fake {
	int lfd;
	uint16_t port;
	pthread_t t;
};

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	struct sw_buf in = SW_BUF_INIT, out = SW_BUF_INIT;
	struct sw_frame_hdr hdr;
	int fd = accept(f->lfd, NULL, NULL);

	/* Bounded: the test's pool closes it, or 10 s of silence. */
	while (fd >= 0 &&
	       sw_frame_next(fd, &in, 4096, 10000, 1u << 20, &hdr) == 1) {
		Sweepfs__HelloReply hr = SWEEPFS__HELLO_REPLY__INIT;
		Sweepfs__PingReply pr = SWEEPFS__PING_REPLY__INIT;

		sw_buf_consume(&in, SW_FRAME_HDR + hdr.len);
		sw_buf_reset(&out);
		if (sw_buf_add_frame(&out, hdr.type, SW_FRAME_REPLY, hdr.id,
				     hdr.type == SW_MSG_HELLO ? &hr.base :
								&pr.base) < 0 ||
		    sw_send_all(fd, sw_buf_head(&out), sw_buf_used(&out)) < 0)
			break;
	}
	if (fd >= 0)
		close(fd);
	sw_buf_release(&in);
	sw_buf_release(&out);
	return NULL;
}

static void fake_start(struct fake *f)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(f->lfd >= 0);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(f->lfd, 4), 0);
	assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&a, &len), 0);
	f->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&f->t, NULL, fake_main, f), 0);
}

/* What the completions saw. */
struct seen {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct cspool *pool;
	char addr[64];
	int first_rc, nested_rc;
	int done;	   /* completions so far */
	bool nested_on_rx; /* the nested one completed inside the first */
	bool in_first;
};

static void finish(struct seen *s, int *slot, int rc)
{
	pthread_mutex_lock(&s->mu);
	*slot = rc;
	s->done++;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->mu);
}

static void on_nested(void *arg, int rc, ProtobufCMessage **reply)
{
	struct seen *s = arg;

	(void)reply;
	s->nested_on_rx = s->in_first;
	finish(s, &s->nested_rc, rc);
}

/* On the receiver: sends to the same chunkserver. */
static void on_first(void *arg, int rc, ProtobufCMessage **reply)
{
	struct seen *s = arg;
	Sweepfs__PingReq q = SWEEPFS__PING_REQ__INIT;

	(void)reply;
	s->in_first = true;
	cspool_send(s->pool, s->addr, SW_MSG_PING, &q.base, on_nested, s);
	s->in_first = false;
	finish(s, &s->first_rc, rc);
}

/* Wait until @n completions came, for at most 10 s. */
static void wait_done(struct seen *s, int n)
{
	struct timespec ts =
		sw_ns_to_timespec(sw_mono_ns() + 10 * SW_NSEC_PER_SEC);

	pthread_mutex_lock(&s->mu);
	while (s->done < n &&
	       pthread_cond_timedwait(&s->cond, &s->mu, &ts) == 0)
		;
	pthread_mutex_unlock(&s->mu);
}

static void test_send_from_own_receiver_refused(void **state)
{
	Sweepfs__PingReq q = SWEEPFS__PING_REQ__INIT;
	struct seen s = { .first_rc = 1, .nested_rc = 1 };
	struct fake f;

	(void)state;
	pthread_mutex_init(&s.mu, NULL);
	assert_int_equal(sw_cond_init_mono(&s.cond), 0);
	fake_start(&f);
	snprintf(s.addr, sizeof(s.addr), "127.0.0.1:%u", f.port);
	assert_int_equal(cspool_new(5000, &s.pool), 0);

	cspool_send(s.pool, s.addr, SW_MSG_PING, &q.base, on_first, &s);
	wait_done(&s, 2);
	assert_int_equal(s.done, 2);
	assert_int_equal(s.first_rc, 0);
	/* Refused where it was asked, on the receiver, without sending. */
	assert_int_equal(s.nested_rc, -EDEADLK);
	assert_true(s.nested_on_rx);

	/* The connection is fine: a send from another thread goes. */
	s.done = 0;
	s.nested_rc = 1;
	cspool_send(s.pool, s.addr, SW_MSG_PING, &q.base, on_nested, &s);
	wait_done(&s, 1);
	assert_int_equal(s.done, 1);
	assert_int_equal(s.nested_rc, 0);

	cspool_free(s.pool); /* closes: the fake's read ends */
	assert_int_equal(pthread_join(f.t, NULL), 0);
	close(f.lfd);
	pthread_cond_destroy(&s.cond);
	pthread_mutex_destroy(&s.mu);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_send_from_own_receiver_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
