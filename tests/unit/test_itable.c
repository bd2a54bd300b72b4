/*
 * mount/inode.c and mount/hset.c: the handles the mount keeps for the
 * inodes the kernel knows (threat-model row 1), and the handles a request
 * carries to the master: each node it names once, at most SW_HANDLES_MAX,
 * none for a node whose handle is not known, and the caller's request
 * left as it was.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "hset.h"
#include "inode.h"
#include "unit.h"
#include "util.h"

/* A handle as the master might make it: never 0, not the number. */
#define H(ino) (UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)(ino)*31)

static int setup(void **state)
{
	struct itable *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	assert_int_equal(itable_init(t), 0);
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct itable *t = *state;

	itable_release(t);
	free(t);
	return 0;
}

static Sweepfs__Attr attr_of(uint64_t ino, uint64_t handle)
{
	Sweepfs__Attr a = SWEEPFS__ATTR__INIT;

	a.ino = ino;
	a.mode = 0100644;
	a.nlink = 1;
	a.has_handle = handle != 0;
	a.handle = handle;
	return a;
}

/* Learnt from the reply that hands the inode over, or a later one; never
 * overwritten, not even by 0; gone with the inode. */
static void test_itable_handle_kept(void **state)
{
	struct itable *t = *state;
	Sweepfs__Attr a;
	int64_t exp;

	assert_int_equal(itable_ref(t, 10, H(10)), 0);
	assert_true(itable_handle(t, 10) == H(10));
	/* Another reference without one (a lookup served from a listing
	 * this mount made) keeps it. */
	assert_int_equal(itable_ref(t, 10, 0), 0);
	assert_true(itable_handle(t, 10) == H(10));
	itable_set_handle(t, 10, 0);
	assert_true(itable_handle(t, 10) == H(10));
	/* The master's last word wins: another key, another handle. */
	itable_set_handle(t, 10, H(99));
	assert_true(itable_handle(t, 10) == H(99));
	itable_set_handle(t, 10, H(10));
	a = attr_of(10, 0);
	itable_set_attr(t, &a, sw_mono_ns() + 1000000000);
	assert_true(itable_handle(t, 10) == H(10));
	assert_true(itable_get_attr(t, 10, &a, &exp, NULL));
	assert_true(a.has_handle && a.handle == H(10));

	/* Made under a delegation: none until the batch's answer. */
	assert_int_equal(itable_ref(t, 11, 0), 0);
	assert_true(itable_handle(t, 11) == 0);
	itable_set_handle(t, 11, H(11));
	assert_true(itable_handle(t, 11) == H(11));

	/* Or from attributes a later reply carries. */
	assert_int_equal(itable_ref(t, 12, 0), 0);
	a = attr_of(12, H(12));
	itable_set_attr(t, &a, sw_mono_ns() + 1000000000);
	assert_true(itable_handle(t, 12) == H(12));

	/* Not held: nothing is kept, nothing is made up. */
	itable_set_handle(t, 13, H(13));
	assert_true(itable_handle(t, 13) == 0);
	a = attr_of(13, H(13));
	itable_set_attr(t, &a, sw_mono_ns() + 1000000000);
	assert_true(itable_handle(t, 13) == 0);

	itable_forget(t, 10, 2);
	assert_true(itable_handle(t, 10) == 0);
	assert_true(itable_handle(t, 11) == H(11));
}

/* A reconnect's reclaim names each open file with its handle. */
static void test_itable_claims_carry_handles(void **state)
{
	struct itable *t = *state;
	Sweepfs__Cred c = SWEEPFS__CRED__INIT;
	Sweepfs__OpenClaim **claims;
	size_t n;
	int seen = 0;

	c.uid = 1000;
	c.gid = 1000;
	assert_int_equal(itable_ref(t, 20, H(20)), 0);
	assert_int_equal(itable_open(t, 20, O_RDONLY, &c), 0);
	assert_int_equal(itable_ref(t, 21, 0), 0);
	assert_int_equal(itable_open(t, 21, O_RDWR, &c), 0);
	itable_open_claims(t, &claims, &n);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < n; i++) {
		if (claims[i]->ino == 20) {
			assert_true(claims[i]->has_handle);
			assert_true(claims[i]->handle == H(20));
			seen |= 1;
		} else {
			assert_true(claims[i]->ino == 21);
			assert_false(claims[i]->has_handle);
			seen |= 2;
		}
	}
	assert_int_equal(seen, 3);
	free(claims);
}

/* What the mount's o.handle does (mount/main.c): the table's handle,
 * else the delegation's, played here by odd numbers from 1000 on (a held
 * directory the kernel forgot). Counts its calls. */
struct lookup {
	struct itable *t;
	unsigned calls;
};

static uint64_t handle_of(void *arg, uint64_t ino)
{
	struct lookup *l = arg;
	uint64_t h = itable_handle(l->t, ino);

	l->calls++;
	return h ? h : ino >= 1000 && ino % 2 ? H(ino) : 0;
}

/* The handles @req of @type goes out with (hset_attach(), packed and
 * unpacked as the master would) into @out; returns how many. */
static size_t sent(uint16_t type, const ProtobufCMessage *req, hset_fn fn,
		   void *arg, uint64_t *out)
{
	const struct sw_msg_info *info = sw_msg_info(type);
	struct hset_msg w;
	const ProtobufCMessage *m = hset_attach(&w, type, req, fn, arg);
	size_t len = protobuf_c_message_get_packed_size(m), n;
	uint8_t *buf = malloc(len + 1);
	ProtobufCMessage *got;
	const uint64_t *h;

	assert_non_null(buf);
	protobuf_c_message_pack(m, buf);
	hset_detach(&w);
	got = protobuf_c_message_unpack(info->req, NULL, len, buf);
	assert_non_null(got);
	h = sw_msg_handles(got, &n);
	assert_true(n <= SW_HANDLES_MAX);
	if (n)
		memcpy(out, h, n * sizeof(*out));
	protobuf_c_message_free_unpacked(got, NULL);
	free(buf);
	return n;
}

static bool has(const uint64_t *h, size_t n, uint64_t want)
{
	for (size_t i = 0; i < n; i++)
		if (h[i] == want)
			return true;
	return false;
}

/* Each node named once; one whose handle is not known goes without; the
 * caller's request stays as it was. */
static void test_hset_attach_handles(void **state)
{
	struct lookup l = { .t = *state };
	Sweepfs__Cred c = SWEEPFS__CRED__INIT;
	Sweepfs__RenameReq rn = SWEEPFS__RENAME_REQ__INIT;
	Sweepfs__LinkReq ln = SWEEPFS__LINK_REQ__INIT;
	Sweepfs__InoRangeReq ir = SWEEPFS__INO_RANGE_REQ__INIT;
	ProtobufCBinaryData x = { .len = 1, .data = (uint8_t *)"x" };
	uint64_t out[SW_HANDLES_MAX], mine = H(7);
	struct hset_msg w;

	assert_int_equal(itable_ref(l.t, 30, H(30)), 0);
	assert_int_equal(itable_ref(l.t, 31, 0), 0);

	/* A rename within one directory names it twice: one handle. */
	rn.cred = &c;
	rn.parent = rn.newparent = 30;
	rn.name = rn.newname = x;
	assert_int_equal(sent(SW_MSG_RENAME, &rn.base, handle_of, &l, out), 1);
	assert_true(out[0] == H(30));
	assert_int_equal(rn.n_handles, 0);

	/* Known without a handle (made here, no answer yet): none. */
	ln.cred = &c;
	ln.ino = 31;
	ln.newparent = 30;
	ln.newname = x;
	assert_int_equal(sent(SW_MSG_LINK, &ln.base, handle_of, &l, out), 1);
	assert_true(out[0] == H(30));
	/* Not in the table, but held: the delegation's. */
	ln.ino = 1001;
	assert_int_equal(sent(SW_MSG_LINK, &ln.base, handle_of, &l, out), 2);
	assert_true(has(out, 2, H(30)) && has(out, 2, H(1001)));
	/* Neither knows it: none. */
	ln.ino = 1002;
	assert_int_equal(sent(SW_MSG_LINK, &ln.base, handle_of, &l, out), 1);
	assert_int_equal(ln.n_handles, 0);

	/* Said by the sender (a batch, a return): left as they are. */
	ln.n_handles = 1;
	ln.handles = &mine;
	assert_ptr_equal(hset_attach(&w, SW_MSG_LINK, &ln.base, handle_of, &l),
			 &ln.base);
	hset_detach(&w);
	assert_int_equal(sent(SW_MSG_LINK, &ln.base, handle_of, &l, out), 1);
	assert_true(out[0] == H(7));
	ln.n_handles = 0;
	ln.handles = NULL;

	/* Naming nothing, or nobody to ask: the request itself. */
	l.calls = 0;
	assert_ptr_equal(hset_attach(&w, SW_MSG_INO_RANGE, &ir.base, handle_of,
				     &l),
			 &ir.base);
	hset_detach(&w);
	assert_int_equal(l.calls, 0);
	assert_ptr_equal(hset_attach(&w, SW_MSG_LINK, &ln.base, NULL, NULL),
			 &ln.base);
	hset_detach(&w);
}

/* A batch names each op's parent: each once, and never more than
 * SW_HANDLES_MAX even when it names more directories. */
static void test_hset_attach_batch_capped(void **state)
{
	struct lookup l = { .t = *state };
	enum { NOPS = 300, NDIRS = SW_HANDLES_MAX + 6 };
	Sweepfs__BatchReq b = SWEEPFS__BATCH_REQ__INIT;
	Sweepfs__Cred c = SWEEPFS__CRED__INIT;
	Sweepfs__BatchOp ops[NOPS], *pops[NOPS];
	uint64_t out[SW_HANDLES_MAX];
	size_t n;

	for (uint64_t d = 0; d < NDIRS; d++)
		assert_int_equal(itable_ref(l.t, 100 + d, H(100 + d)), 0);
	/* Runs of ops in one directory, then the directories again. */
	for (size_t i = 0; i < NOPS; i++) {
		sweepfs__batch_op__init(&ops[i]);
		ops[i].cred = &c;
		ops[i].parent = 100 + (i / 3) % NDIRS;
		ops[i].name.data = (uint8_t *)"x";
		ops[i].name.len = 1;
		pops[i] = &ops[i];
	}
	b.n_ops = NOPS;
	b.ops = pops;
	n = sent(SW_MSG_BATCH, &b.base, handle_of, &l, out);
	assert_int_equal(n, SW_HANDLES_MAX);
	for (size_t i = 0; i < n; i++) {
		assert_true(out[i] == H(100 + i));
		for (size_t j = 0; j < i; j++)
			assert_true(out[i] != out[j]);
	}
	/* Fewer directories than the cap: each once. */
	b.n_ops = 3 * 10;
	assert_int_equal(sent(SW_MSG_BATCH, &b.base, handle_of, &l, out), 10);
}

/* deleg.c ends a batch where hset_add() says no. */
static void test_hset_add_cap(void **state)
{
	struct hset s = { .n = 0 };

	(void)state;
	for (uint64_t i = 0; i < SW_HANDLES_MAX; i++)
		assert_true(hset_add(&s, 500 + i, i % 2 ? H(500 + i) : 0));
	assert_false(hset_add(&s, 9999, H(9999)));
	assert_int_equal(s.n, SW_HANDLES_MAX);
	/* Named already: fits, and a handle learnt late is taken. */
	assert_true(hset_add(&s, 500, H(500)));
	assert_true(hset_add(&s, 501, H(12345)));
	assert_int_equal(s.n, SW_HANDLES_MAX);
	assert_true(s.handle[0] == H(500));
	assert_true(s.handle[1] == H(501));
	/* Packed: the unknown even ones (but 500) left out. */
	assert_int_equal(hset_pack(&s, NULL, NULL), SW_HANDLES_MAX / 2 + 1);
}

/* Every request a mount sends fits the stack copy (else each would cost
 * a malloc, or go without handles when that fails). */
static void test_hset_copy_fits(void **state)
{
	(void)state;
	for (uint32_t type = 0; type <= UINT16_MAX; type++) {
		const struct sw_msg_info *i = sw_msg_info((uint16_t)type);

		if (i && i->req && i->req->sizeof_message > HSET_COPY_BYTES)
			fail_msg("%s: %zu bytes", i->name,
				 i->req->sizeof_message);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_itable_handle_kept, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_itable_claims_carry_handles, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hset_attach_handles, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_hset_attach_batch_capped,
						setup, teardown),
		cmocka_unit_test(test_hset_add_cap),
		cmocka_unit_test(test_hset_copy_fits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
