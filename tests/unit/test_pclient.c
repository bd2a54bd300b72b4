/*
 * pclient.h: the pipelined client core. Many calls in flight, replies in
 * any order and in any slicing (down to one byte per read), a reply to an
 * id never issued or a frame over the limit ends the connection, strays
 * and notifications go to the owner, a disconnection sorts the calls in
 * flight by the owner's policy, and callbacks run with no lock held.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "client.h"
#include "pclient.h"
#include "util.h"
#include "sweepfs.pb-c.h"

#define MAX 4096u

struct seen {
	int calls;
	int rc;
	uint64_t token;
	int order; /* when it completed, from 1 */
};

struct fix {
	pthread_mutex_t mu;
	struct sw_pclient pc;
	struct seen s[8];
	int done;    /* calls completed so far */
	int strays;  /* frames ops.stray saw */
	int notes;   /* frames ops.notify saw */
	int answers; /* ops.answered */
	uint64_t note_token;
	struct sw_call *c[8];
};

static struct fix *fx; /* for the callbacks, which get a struct seen */

static void on_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct seen *s = arg;

	/* No lock held: a callback may send at once. */
	assert_int_equal(pthread_mutex_trylock(&fx->mu), 0);
	pthread_mutex_unlock(&fx->mu);
	s->calls++;
	s->rc = rc;
	s->token = *reply ? ((Sweepfs__PingReply *)*reply)->token : 0;
	s->order = ++fx->done;
}

static int on_stray(void *arg, const struct sw_frame_hdr *hdr,
		    const uint8_t *payload)
{
	struct fix *x = arg;

	(void)hdr;
	(void)payload;
	x->strays++;
	return 0;
}

static int on_notify(void *arg, const struct sw_frame_hdr *hdr,
		     const uint8_t *payload)
{
	struct fix *x = arg;
	Sweepfs__PingReq *q =
		sweepfs__ping_req__unpack(NULL, hdr->len, payload);

	assert_non_null(q);
	x->notes++;
	x->note_token = q->token;
	sweepfs__ping_req__free_unpacked(q, NULL);
	return 0;
}

static void on_answered(void *arg, const struct sw_call *c)
{
	struct fix *x = arg;

	assert_int_equal(c->type, SW_MSG_PING);
	x->answers++;
}

static bool keep_resend(const struct sw_call *c)
{
	return c->resend || c->once;
}

/* Make call @i (a ping carrying token @i) and put it in flight. */
static void call(struct fix *x, int i)
{
	Sweepfs__PingReq req = SWEEPFS__PING_REQ__INIT;

	req.has_token = 1;
	req.token = (uint64_t)i;
	x->c[i] = sw_call_new(SW_MSG_PING, &req.base, on_done, &x->s[i]);
	assert_non_null(x->c[i]);
	pthread_mutex_lock(&x->mu);
	assert_int_equal(sw_pclient_assign(&x->pc, x->c[i]), 0);
	pthread_mutex_unlock(&x->mu);
}

/* The sender is done writing call @i. */
static void sent(struct fix *x, int i)
{
	sw_call_put(x->c[i]);
}

/* A reply frame to @id of @type carrying @token, at the end of @b. */
static void reply(struct sw_buf *b, uint16_t type, uint16_t flags, uint64_t id,
		  uint64_t token)
{
	Sweepfs__PingReply r = SWEEPFS__PING_REPLY__INIT;

	r.has_token = 1;
	r.token = token;
	assert_int_equal(sw_buf_add_frame(b, type, flags, id, &r.base), 0);
}

/* Feed @b's bytes to the client @step at a time; the first error. */
static int feed(struct fix *x, const struct sw_buf *b, size_t step)
{
	const uint8_t *p = sw_buf_head(b);
	size_t left = sw_buf_used(b);
	int rc = 0;

	while (left && rc == 0) {
		size_t n = left < step ? left : step;
		uint8_t *room;
		long got = sw_pclient_room(&x->pc, n, &room);

		assert_true(got >= (long)n);
		memcpy(room, p, n);
		rc = sw_pclient_feed(&x->pc, n);
		p += n;
		left -= n;
	}
	return rc;
}

static int setup(void **state)
{
	struct fix *x = calloc(1, sizeof(*x));
	pthread_mutexattr_t a;
	struct sw_pclient_ops ops = {
		.notify = on_notify,
		.answered = on_answered,
		.arg = x,
	};

	assert_non_null(x);
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&x->mu, &a);
	pthread_mutexattr_destroy(&a);
	sw_pclient_init(&x->pc, MAX, &x->mu, &ops);
	fx = x;
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fix *x = *state;
	struct sw_call *kept, *failed;

	/* Whatever a test left in flight fails now: nothing leaks. */
	sw_pclient_disconnect(&x->pc, NULL, &kept, &failed);
	assert_null(kept);
	sw_call_fail_list(failed, -EIO);
	sw_pclient_release(&x->pc);
	pthread_mutex_destroy(&x->mu);
	free(x);
	fx = NULL;
	return 0;
}

/* Three in flight, answered 3, 1, 2 in one read: each to its own. */
static void test_feed_out_of_order(void **state)
{
	struct fix *x = *state;
	struct sw_buf b = SW_BUF_INIT;

	for (int i = 1; i <= 3; i++) {
		call(x, i);
		sent(x, i);
		assert_int_equal(x->c[i]->id, (uint64_t)i);
	}
	assert_int_equal(x->pc.nflight, 3);
	reply(&b, SW_MSG_PING, SW_FRAME_REPLY, 3, 30);
	reply(&b, SW_MSG_PING, SW_FRAME_REPLY, 1, 10);
	reply(&b, SW_MSG_PING, SW_FRAME_REPLY, 2, 20);
	assert_int_equal(feed(x, &b, sw_buf_used(&b)), 0);
	for (int i = 1; i <= 3; i++) {
		assert_int_equal(x->s[i].calls, 1);
		assert_int_equal(x->s[i].rc, 0);
		assert_int_equal(x->s[i].token, 10 * i);
	}
	assert_int_equal(x->s[3].order, 1);
	assert_int_equal(x->s[1].order, 2);
	assert_int_equal(x->s[2].order, 3);
	assert_int_equal(x->answers, 3);
	assert_int_equal(x->pc.nflight, 0);
	assert_int_equal(sw_pclient_partial(&x->pc), 0);
	sw_buf_release(&b);
}

/* The same bytes one at a time: nothing completes before its frame is
 * whole, and everything does in the end. */
static void test_feed_one_byte_reads(void **state)
{
	struct fix *x = *state;
	struct sw_buf b = SW_BUF_INIT;
	size_t first;

	call(x, 1);
	call(x, 2);
	reply(&b, SW_MSG_PING, SW_FRAME_REPLY, 2, 20);
	first = sw_buf_used(&b);
	reply(&b, SW_MSG_PING, SW_FRAME_REPLY, 1, 10);
	for (size_t k = 0; k < sw_buf_used(&b); k++) {
		struct sw_buf one = SW_BUF_INIT;

		assert_int_equal(sw_buf_add(&one, sw_buf_head(&b) + k, 1), 0);
		assert_int_equal(feed(x, &one, 1), 0);
		sw_buf_release(&one);
		assert_int_equal(x->s[2].calls, k + 1 >= first);
		assert_int_equal(x->s[1].calls, k + 1 == sw_buf_used(&b));
	}
	assert_int_equal(x->s[2].token, 20);
	assert_int_equal(x->s[1].token, 10);
	assert_int_equal(sw_pclient_partial(&x->pc), 0);
	/* A call answered while its sender still holds it: freed by the
	 * sender's put, not before. */
	sent(x, 1);
	sent(x, 2);
	sw_buf_release(&b);
}

/* A reply to an id never issued (or to 0) ends the connection; one to
 * an id issued but not waited for is the owner's to judge. */
static void test_feed_unknown_id(void **state)
{
	struct fix *x = *state;
	struct sw_buf b = SW_BUF_INIT;
	struct sw_pclient_ops ops = { .stray = on_stray, .arg = x };

	call(x, 1);
	sent(x, 1);
	reply(&b, SW_MSG_PING, SW_FRAME_REPLY, 2, 0); /* never issued */
	assert_int_equal(feed(x, &b, 1000), -EPROTO);
	sw_buf_reset(&b);
	reply(&b, SW_MSG_PING, SW_FRAME_REPLY, 0, 0);
	assert_int_equal(feed(x, &b, 1000), -EPROTO);
	assert_int_equal(x->s[1].calls, 0); /* untouched */

	/* Issued, nobody waits (a ping's, a lazy frame's): -EPROTO unless
	 * the owner says otherwise. */
	pthread_mutex_lock(&x->mu);
	assert_int_equal(sw_pclient_issue(&x->pc), 2);
	pthread_mutex_unlock(&x->mu);
	sw_buf_reset(&b);
	reply(&b, SW_MSG_PING, SW_FRAME_REPLY, 2, 0);
	assert_int_equal(feed(x, &b, 1000), -EPROTO);
	x->pc.ops = ops;
	assert_int_equal(feed(x, &b, 1000), 0);
	assert_int_equal(x->strays, 1);
	/* A call answered twice: the second is a stray. */
	sw_buf_reset(&b);
	reply(&b, SW_MSG_PING, SW_FRAME_REPLY, 1, 10);
	reply(&b, SW_MSG_PING, SW_FRAME_REPLY, 1, 11);
	assert_int_equal(feed(x, &b, 1000), 0);
	assert_int_equal(x->s[1].calls, 1);
	assert_int_equal(x->s[1].token, 10);
	assert_int_equal(x->strays, 2);
	sw_buf_release(&b);
}

/* A request from the server (neither reply nor notification) ends the
 * connection, even with the id of a call in flight. */
static void test_feed_request(void **state)
{
	struct fix *x = *state;
	struct sw_buf b = SW_BUF_INIT;

	call(x, 1);
	sent(x, 1);
	reply(&b, SW_MSG_PING, 0, 1, 10);
	assert_int_equal(feed(x, &b, 1000), -EPROTO);
	assert_int_equal(x->s[1].calls, 0);
	assert_int_equal(x->pc.nflight, 1);
	sw_buf_release(&b);
}

/* Call 1's callback ends the connection (a single-threaded owner does,
 * on a bad answer): the feed stops there, with the rest of the input
 * gone and call 2 failed by the owner, not answered. */
static struct fix *ending;

static void on_done_end(void *arg, int rc, ProtobufCMessage **reply)
{
	on_done(arg, rc, reply);
	sw_pclient_fail_all(&ending->pc, -ECANCELED);
}

static void test_feed_callback_ends(void **state)
{
	struct fix *x = *state;
	struct sw_buf b = SW_BUF_INIT;
	Sweepfs__PingReq req = SWEEPFS__PING_REQ__INIT;

	ending = x;
	x->c[1] = sw_call_new(SW_MSG_PING, &req.base, on_done_end, &x->s[1]);
	assert_non_null(x->c[1]);
	pthread_mutex_lock(&x->mu);
	assert_int_equal(sw_pclient_assign(&x->pc, x->c[1]), 0);
	pthread_mutex_unlock(&x->mu);
	sent(x, 1);
	call(x, 2);
	sent(x, 2);
	reply(&b, SW_MSG_PING, SW_FRAME_REPLY, 1, 10);
	reply(&b, SW_MSG_PING, SW_FRAME_REPLY, 2, 20);
	assert_int_equal(feed(x, &b, sw_buf_used(&b)), -ECANCELED);
	assert_int_equal(x->s[1].token, 10);
	assert_int_equal(x->s[2].calls, 1);
	assert_int_equal(x->s[2].rc, -ECANCELED);
	assert_int_equal(sw_pclient_partial(&x->pc), 0);
	assert_int_equal(x->pc.nflight, 0);
	sw_buf_release(&b);
}

/* A notification goes to the owner, with id 0, and completes nothing. */
static void test_feed_notify(void **state)
{
	struct fix *x = *state;
	struct sw_buf b = SW_BUF_INIT;
	Sweepfs__PingReq q = SWEEPFS__PING_REQ__INIT;

	call(x, 1);
	sent(x, 1);
	q.has_token = 1;
	q.token = 99;
	assert_int_equal(sw_buf_add_frame(&b, SW_MSG_PING, SW_FRAME_NOTIFY, 0,
					  &q.base),
			 0);
	assert_int_equal(feed(x, &b, 3), 0);
	assert_int_equal(x->notes, 1);
	assert_int_equal(x->note_token, 99);
	assert_int_equal(x->s[1].calls, 0);
	assert_int_equal(x->pc.nflight, 1);
	sw_buf_release(&b);
}

/* A frame over the limit is refused from its header, before its payload
 * is buffered; a call over it is never sent. */
static void test_oversize(void **state)
{
	struct fix *x = *state;
	uint8_t hdr[SW_FRAME_HDR], *room;
	struct sw_frame_hdr h = { .len = MAX + 1,
				  .type = SW_MSG_PING,
				  .flags = SW_FRAME_REPLY,
				  .id = 1 };
	Sweepfs__Hello big = SWEEPFS__HELLO__INIT;
	static uint8_t value[MAX];
	struct sw_call *c;

	call(x, 1);
	sent(x, 1);
	sw_frame_put_hdr(hdr, &h);
	assert_true(sw_pclient_room(&x->pc, sizeof(hdr), &room) >=
		    (long)sizeof(hdr));
	memcpy(room, hdr, sizeof(hdr));
	assert_int_equal(sw_pclient_feed(&x->pc, sizeof(hdr)), -EMSGSIZE);
	assert_int_equal(x->s[1].calls, 0);

	big.has_subdir = 1;
	big.subdir.data = value;
	big.subdir.len = sizeof(value);
	c = sw_call_new(SW_MSG_HELLO, &big.base, on_done, &x->s[2]);
	assert_non_null(c);
	pthread_mutex_lock(&x->mu);
	assert_int_equal(sw_pclient_assign(&x->pc, c), -EMSGSIZE);
	pthread_mutex_unlock(&x->mu);
	assert_int_equal(c->id, 0);
	assert_int_equal(x->pc.nflight, 1);
	sw_call_put(c);
	sw_call_put(c); /* never in the table: both references are ours */
	assert_int_equal(x->s[2].calls, 0);
}

/*
 * The connection ends with four in flight and half a reply read: the
 * policy keeps two (in the order sent) and fails two, nothing completes
 * under the lock, and the kept ones go out again on the next connection
 * (a once call with its own id and SW_FRAME_AGAIN).
 */
static void test_disconnect_in_flight(void **state)
{
	struct fix *x = *state;
	struct sw_buf b = SW_BUF_INIT;
	struct sw_call *kept, *failed, *c;
	struct sw_frame_hdr hdr;
	int n;

	for (int i = 1; i <= 4; i++) {
		call(x, i);
		sent(x, i);
	}
	x->c[2]->resend = true;
	x->c[4]->once = true;
	reply(&b, SW_MSG_PING, SW_FRAME_REPLY, 1, 10);
	b.len--; /* all but its last byte */
	assert_int_equal(feed(x, &b, 4), 0);
	assert_true(sw_pclient_partial(&x->pc) > 0);

	pthread_mutex_lock(&x->mu); /* as an owner's write side would */
	pthread_mutex_unlock(&x->mu);
	sw_pclient_disconnect(&x->pc, keep_resend, &kept, &failed);
	assert_int_equal(sw_pclient_partial(&x->pc), 0);
	assert_int_equal(x->pc.nflight, 0);
	assert_int_equal(x->done, 0); /* the owner completes them */
	assert_ptr_equal(kept, x->c[2]);
	assert_ptr_equal(kept->next, x->c[4]);
	assert_null(kept->next->next);
	assert_ptr_equal(failed, x->c[1]);
	assert_ptr_equal(failed->next, x->c[3]);
	assert_null(failed->next->next);
	sw_call_fail_list(failed, -EIO);
	assert_int_equal(x->s[1].rc, -EIO);
	assert_int_equal(x->s[3].rc, -EIO);

	/* Reconnected: sent again, in order. */
	pthread_mutex_lock(&x->mu);
	for (c = kept; c; c = kept) {
		kept = c->next;
		assert_int_equal(sw_pclient_assign(&x->pc, c), 0);
	}
	pthread_mutex_unlock(&x->mu);
	assert_int_equal(x->c[2]->id, 5); /* a fresh id */
	assert_int_equal(
		sw_frame_whole(x->c[4]->frame, x->c[4]->len, MAX, &hdr), 1);
	assert_int_equal(hdr.id, 4); /* its own */
	assert_int_equal(hdr.flags, SW_FRAME_AGAIN);
	sw_buf_reset(&b);
	reply(&b, SW_MSG_PING, SW_FRAME_REPLY, 4, 40);
	reply(&b, SW_MSG_PING, SW_FRAME_REPLY, 5, 20);
	assert_int_equal(feed(x, &b, 7), 0);
	for (n = 1; n <= 4; n++)
		assert_int_equal(x->s[n].calls, 1);
	assert_int_equal(x->s[2].token, 20);
	assert_int_equal(x->s[4].token, 40);
	sw_buf_release(&b);
}

/* Over a socket: a reply read as it comes; silence times out; the end
 * of the stream says so. */
static void test_read_socket(void **state)
{
	struct fix *x = *state;
	struct sw_buf b = SW_BUF_INIT;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	call(x, 1);
	sent(x, 1);
	reply(&b, SW_MSG_PING, SW_FRAME_REPLY, 1, 10);
	assert_int_equal(write(sv[1], sw_buf_head(&b), 5), 5);
	assert_int_equal(sw_pclient_read(&x->pc, sv[0], 4096, 1000), 0);
	assert_int_equal(x->s[1].calls, 0);
	assert_int_equal(sw_pclient_read(&x->pc, sv[0], 4096, 10), -ETIMEDOUT);
	assert_int_equal(write(sv[1], sw_buf_head(&b) + 5, sw_buf_used(&b) - 5),
			 (ssize_t)sw_buf_used(&b) - 5);
	assert_int_equal(sw_pclient_read(&x->pc, sv[0], 4096, 1000), 0);
	assert_int_equal(x->s[1].calls, 1);
	assert_int_equal(x->s[1].token, 10);
	close(sv[1]);
	assert_int_equal(sw_pclient_read(&x->pc, sv[0], 4096, 1000),
			 -ECONNRESET);
	close(sv[0]);
	sw_buf_release(&b);
}

/*
 * A blocking call (tools, a hello): frames before its reply are delivered
 * on the way (a notification here), its reply is returned; silence times
 * out with the call out of the table; a reply of another type is -EPROTO.
 */
static void test_call(void **state)
{
	struct fix *x = *state;
	struct sw_buf b = SW_BUF_INIT;
	Sweepfs__PingReq q = SWEEPFS__PING_REQ__INIT;
	ProtobufCMessage *r;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* Answered before asked: the socket keeps it till it is read. */
	assert_int_equal(sw_buf_add_frame(&b, SW_MSG_PING, SW_FRAME_NOTIFY, 0,
					  &q.base),
			 0);
	reply(&b, SW_MSG_PING, SW_FRAME_REPLY, 1, 10);
	assert_int_equal(write(sv[1], sw_buf_head(&b), sw_buf_used(&b)),
			 (ssize_t)sw_buf_used(&b));
	assert_int_equal(sw_pclient_call(&x->pc, sv[0], SW_MSG_PING, &q.base,
					 1000, &r),
			 0);
	assert_non_null(r);
	assert_int_equal(((Sweepfs__PingReply *)r)->token, 10);
	protobuf_c_message_free_unpacked(r, NULL);
	assert_int_equal(x->notes, 1);

	assert_int_equal(sw_pclient_call(&x->pc, sv[0], SW_MSG_PING, &q.base,
					 10, &r),
			 -ETIMEDOUT);
	assert_null(r);
	assert_int_equal(x->pc.nflight, 0);

	sw_buf_reset(&b);
	reply(&b, SW_MSG_GETATTR, SW_FRAME_REPLY, 3, 0);
	assert_int_equal(write(sv[1], sw_buf_head(&b), sw_buf_used(&b)),
			 (ssize_t)sw_buf_used(&b));
	assert_int_equal(sw_pclient_call(&x->pc, sv[0], SW_MSG_PING, &q.base,
					 1000, &r),
			 -EPROTO);
	assert_null(r);
	close(sv[0]);
	close(sv[1]);
	sw_buf_release(&b);
}

/* What the dribbling "server" of test_call_deadline() sends. */
struct dribble {
	int fd;
	struct sw_buf frame; /* the reply, whole */
	int every_ms;	     /* one byte this often */
};

static void *dribble_run(void *arg)
{
	struct dribble *d = arg;

	for (size_t i = 0; i < sw_buf_used(&d->frame); i++) {
		sw_sleep_ms(d->every_ms);
		/* The caller closed its end: done. */
		if (send(d->fd, sw_buf_head(&d->frame) + i, 1, MSG_NOSIGNAL) !=
		    1)
			break;
	}
	return NULL;
}

/*
 * A server that sends its reply one byte at a time, each well within the
 * timeout, holds a blocking call no longer than the timeout: it is a
 * deadline for the whole call, not for each read (the caller would wait
 * for as long as the server cares to dribble).
 */
static void test_call_deadline(void **state)
{
	struct fix *x = *state;
	struct dribble d = { .frame = SW_BUF_INIT, .every_ms = 100 };
	Sweepfs__PingReq q = SWEEPFS__PING_REQ__INIT;
	ProtobufCMessage *r;
	pthread_t t;
	int64_t t0, ms;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	d.fd = sv[1];
	/* Long enough that its last byte comes well past the deadline. */
	reply(&d.frame, SW_MSG_PING, SW_FRAME_REPLY, 1, UINT64_MAX);
	assert_true(sw_buf_used(&d.frame) * 100 > 1500);
	assert_int_equal(pthread_create(&t, NULL, dribble_run, &d), 0);
	t0 = sw_mono_ns();
	assert_int_equal(sw_pclient_call(&x->pc, sv[0], SW_MSG_PING, &q.base,
					 300, &r),
			 -ETIMEDOUT);
	ms = (sw_mono_ns() - t0) / 1000000;
	assert_null(r);
	assert_int_equal(x->pc.nflight, 0);
	close(sv[0]); /* the server's next byte ends it */
	assert_int_equal(pthread_join(t, NULL), 0);
	close(sv[1]);
	sw_buf_release(&d.frame);
	/* The deadline, and a margin for a loaded machine. */
	assert_true(ms >= 290);
	assert_true(ms < 1000);
}

/*
 * A tool's connection (client.h) after a call timed out: the late reply
 * still comes, after part of it was read and dropped. The next call on
 * that connection must not read it (as a stray, a protocol error, or
 * worse, garbage framed from the middle of a frame): it fails with
 * -ENOTCONN at once, and the master sees the connection shut down.
 */
static void test_client_late_reply(void **state)
{
	Sweepfs__PingReq q = SWEEPFS__PING_REQ__INIT;
	struct sw_buf b = SW_BUF_INIT;
	struct sw_client c;
	ProtobufCMessage *r;
	uint8_t sink[4096];
	ssize_t n;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	sw_client_attach(&c, sv[0], MAX, 100);
	reply(&b, SW_MSG_PING, SW_FRAME_REPLY, 1, 10);
	/* Part of the reply in time, the rest too late. */
	assert_int_equal(write(sv[1], sw_buf_head(&b), 5), 5);
	assert_int_equal(sw_client_call(&c, SW_MSG_PING, &q.base, &r),
			 -ETIMEDOUT);
	assert_null(r);
	/* (Shut down already: the master's write may fail, EPIPE.) */
	n = send(sv[1], sw_buf_head(&b) + 5, sw_buf_used(&b) - 5, MSG_NOSIGNAL);
	assert_true(n == (ssize_t)sw_buf_used(&b) - 5 ||
		    (n < 0 && errno == EPIPE));
	assert_int_equal(sw_client_call(&c, SW_MSG_PING, &q.base, &r),
			 -ENOTCONN);
	assert_null(r);
	/* The master's side: the one request, then the end. */
	do
		n = read(sv[1], sink, sizeof(sink));
	while (n > 0);
	assert_int_equal(n, 0);
	sw_pclient_release(&c.pc);
	close(sv[0]);
	close(sv[1]);
	sw_buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_feed_out_of_order, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_feed_one_byte_reads, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_feed_unknown_id, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_feed_request, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_feed_callback_ends, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_feed_notify, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_oversize, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disconnect_in_flight,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_socket, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_call, setup, teardown),
		cmocka_unit_test_setup_teardown(test_call_deadline, setup,
						teardown),
		cmocka_unit_test(test_client_late_reply),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
