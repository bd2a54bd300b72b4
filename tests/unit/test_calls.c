/*
 * calls.h: the in-flight table of a pipelined client: ids in order and
 * in the frame, a reply completes the call it names (unpacked as its
 * type's reply, with the reply's error), a reply of the wrong type or
 * one that does not parse fails it, a broken connection takes all.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "calls.h"
#include "sweepfs.pb-c.h"

struct seen {
	int calls;
	int rc;
	uint64_t token;
	bool took;
	ProtobufCMessage *kept;
};

static void on_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct seen *s = arg;

	s->calls++;
	s->rc = rc;
	s->token = 0;
	if (*reply)
		s->token = ((Sweepfs__PingReply *)*reply)->token;
	if (s->took) {
		s->kept = *reply;
		*reply = NULL;
	}
}

static struct sw_call *ping(struct seen *s, uint64_t token)
{
	Sweepfs__PingReq req = SWEEPFS__PING_REQ__INIT;

	req.has_token = 1;
	req.token = token;
	return sw_call_new(SW_MSG_PING, &req.base, on_done, s);
}

/* A reply frame for @id: @type, @err and @token. */
static size_t reply_frame(uint8_t *out, uint16_t type, uint64_t id, int err,
			  uint64_t token)
{
	Sweepfs__PingReply r = SWEEPFS__PING_REPLY__INIT;

	r.has_token = 1;
	r.token = token;
	r.has_err = err != 0;
	r.err = err;
	return sw_frame_pack(out, type, SW_FRAME_REPLY, id, &r.base);
}

/* Two pings (tokens 1 and 2) in a table, as their senders left them. */
struct fix {
	struct sw_calls t;
	struct seen a, b;
	struct sw_call *ca, *cb;
};

static int setup(void **state)
{
	struct fix *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	sw_calls_init(&x->t);
	x->ca = ping(&x->a, 1);
	x->cb = ping(&x->b, 2);
	assert_non_null(x->ca);
	assert_non_null(x->cb);
	sw_calls_assign(&x->t, x->ca);
	sw_calls_assign(&x->t, x->cb);
	assert_int_equal(x->ca->id, 1);
	assert_int_equal(x->cb->id, 2);
	/* The senders are done writing. */
	sw_call_put(x->ca);
	sw_call_put(x->cb);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fix *x = *state;

	/* Every test completes both calls: nothing is left to free. */
	assert_null(sw_calls_take_all(&x->t));
	free(x);
	return 0;
}

static void test_assign_and_answer(void **state)
{
	struct fix *x = *state;
	struct sw_frame_hdr hdr;
	uint8_t f[64];
	size_t n;

	/* The id is in the frame that goes out, and the payload intact. */
	assert_int_equal(sw_frame_whole(x->ca->frame, x->ca->len, 1024, &hdr),
			 1);
	assert_int_equal(hdr.id, 1);
	assert_int_equal(hdr.type, SW_MSG_PING);
	assert_int_equal(hdr.len, x->ca->len - SW_FRAME_HDR);

	/* Replies in any order; an unknown id finds nothing. */
	assert_null(sw_calls_take(&x->t, 3));
	n = reply_frame(f, SW_MSG_PING, 2, ENOENT, 77);
	assert_int_equal(sw_frame_whole(f, n, 1024, &hdr), 1);
	assert_ptr_equal(sw_calls_take(&x->t, 2), x->cb);
	assert_null(sw_calls_take(&x->t, 2));
	x->b.took = true;
	sw_call_answer(x->cb, &hdr, f + SW_FRAME_HDR);
	assert_int_equal(x->b.calls, 1);
	assert_int_equal(x->b.rc, -ENOENT); /* the reply's own error */
	assert_int_equal(x->b.token, 77);   /* with its other fields */
	assert_non_null(x->b.kept);	    /* taken: ours to free */
	protobuf_c_message_free_unpacked(x->b.kept, NULL);

	n = reply_frame(f, SW_MSG_PING, 1, 0, 5);
	assert_int_equal(sw_frame_whole(f, n, 1024, &hdr), 1);
	sw_call_answer(sw_calls_take(&x->t, 1), &hdr, f + SW_FRAME_HDR);
	assert_int_equal(x->a.calls, 1);
	assert_int_equal(x->a.rc, 0);
	assert_int_equal(x->a.token, 5);
}

static void test_bad_replies_fail(void **state)
{
	struct fix *x = *state;
	struct sw_frame_hdr hdr;
	uint8_t f[64];
	size_t n;

	/* A reply of another type than the request's: -EIO, no reply. */
	n = reply_frame(f, SW_MSG_GETATTR, 1, 0, 5);
	assert_int_equal(sw_frame_whole(f, n, 1024, &hdr), 1);
	sw_call_answer(sw_calls_take(&x->t, 1), &hdr, f + SW_FRAME_HDR);
	assert_int_equal(x->a.calls, 1);
	assert_int_equal(x->a.rc, -EIO);
	assert_int_equal(x->a.token, 0);
	/* A payload that does not parse: -EIO. */
	hdr = (struct sw_frame_hdr){ .len = 3, .type = SW_MSG_PING, .id = 2 };
	sw_call_answer(sw_calls_take(&x->t, 2), &hdr,
		       (const uint8_t *)"\xff\xff\xff");
	assert_int_equal(x->b.calls, 1);
	assert_int_equal(x->b.rc, -EIO);
}

static void test_take_all(void **state)
{
	struct sw_calls *t = malloc(sizeof(*t));
	struct seen s[3000];
	struct sw_call *list, *c;
	size_t n = 0;

	(void)state;
	memset(s, 0, sizeof(s));
	sw_calls_init(t);
	/* More than there are buckets, so that buckets hold several. */
	for (size_t i = 0; i < 3000; i++) {
		c = ping(&s[i], i);
		sw_calls_assign(t, c);
		sw_call_put(c);
	}
	c = sw_calls_take(t, 1500);
	assert_int_equal(c->id, 1500);
	sw_call_complete(c, -ECANCELED, NULL);
	list = sw_calls_take_all(t);
	/* All of them, in the order they were sent: a reconnect resends
	 * them so. */
	for (c = list; c; c = c->next) {
		n++;
		if (c->next)
			assert_true(c->id < c->next->id);
	}
	assert_int_equal(n, 2999);
	assert_null(sw_calls_take_all(t));
	assert_null(sw_calls_take(t, 1));
	sw_call_fail_list(list, -EIO);
	for (size_t i = 0; i < 3000; i++) {
		assert_int_equal(s[i].calls, 1);
		/* id 1500 (index 1499) was taken and completed alone */
		assert_int_equal(s[i].rc, i == 1499 ? -ECANCELED : -EIO);
	}
	free(t);
}

/* A call made of a payload packed already is the frame sw_call_new()
 * makes of the message, and goes the same way. */
static void test_new_packed(void **state)
{
	Sweepfs__PingReq req = SWEEPFS__PING_REQ__INIT;
	struct sw_calls t;
	struct seen s = { 0 };
	struct sw_call *a, *b;
	uint8_t payload[64];
	size_t n;

	(void)state;
	req.has_token = 1;
	req.token = 4242;
	n = sweepfs__ping_req__pack(&req, payload);
	a = sw_call_new(SW_MSG_PING, &req.base, on_done, &s);
	b = sw_call_new_packed(SW_MSG_PING, payload, n, on_done, &s);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(a->len, b->len);
	assert_memory_equal(a->frame, b->frame, a->len);
	sw_calls_init(&t);
	sw_calls_assign(&t, b);
	assert_int_equal(b->id, 1);
	sw_call_put(b);
	sw_call_fail_list(sw_calls_take_all(&t), -EIO);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.rc, -EIO);
	sw_call_put(a);
	sw_call_put(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_assign_and_answer, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bad_replies_fail, setup,
						teardown),
		cmocka_unit_test(test_take_all),
		cmocka_unit_test(test_new_packed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
