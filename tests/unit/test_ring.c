/*
 * mount/ring.c: what it makes of the kernel's ring entries and of
 * libfuse's replies, and of INIT. The rings themselves need the kernel:
 * tests/integration/posix/ring.sh.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "ring.h"
#include "unit.h"

#define IN_SZ sizeof(struct fuse_in_header)

/* An entry's header holding a request: @opcode, @op_sz bytes of the
 * opcode's header (filled with 0xa5), @payload_sz of payload. */
static void entry(struct fuse_uring_req_header *h, uint32_t opcode,
		  size_t op_sz, size_t payload_sz)
{
	struct fuse_in_header in = {
		.len = (uint32_t)(IN_SZ + op_sz + payload_sz),
		.opcode = opcode,
		.unique = 42,
		.nodeid = 7,
	};

	memset(h, 0, sizeof(*h));
	memcpy(h->in_out, &in, sizeof(in));
	memset(h->op_in, 0xa5, op_sz);
	h->ring_ent_in_out.payload_sz = (uint32_t)payload_sz;
}

static void test_rebuild_without_op_header(void **state)
{
	struct fuse_uring_req_header h;
	char buf[256];
	const char name[] = "file.txt";
	struct fuse_in_header in;

	(void)state;
	/* LOOKUP: no header of its own, the name is the payload. */
	entry(&h, FUSE_LOOKUP, 0, sizeof(name));
	assert_int_equal(ring_rebuild(&h, name, sizeof(name), buf, sizeof(buf)),
			 IN_SZ + sizeof(name));
	memcpy(&in, buf, sizeof(in));
	assert_int_equal(in.opcode, FUSE_LOOKUP);
	assert_int_equal(in.unique, 42);
	assert_int_equal(in.nodeid, 7);
	assert_int_equal(in.len, IN_SZ + sizeof(name));
	assert_string_equal(buf + IN_SZ, name);
}

static void test_rebuild_with_op_header_and_payload(void **state)
{
	struct fuse_uring_req_header h;
	char payload[4096], buf[IN_SZ + 128 + 4096];
	size_t op = sizeof(struct fuse_write_in);

	(void)state;
	memset(payload, 0x3c, sizeof(payload));
	entry(&h, FUSE_WRITE, op, sizeof(payload));
	assert_int_equal(ring_rebuild(&h, payload, sizeof(payload), buf,
				      sizeof(buf)),
			 IN_SZ + op + sizeof(payload));
	for (size_t i = 0; i < op; i++)
		assert_int_equal((unsigned char)buf[IN_SZ + i], 0xa5);
	assert_memory_equal(buf + IN_SZ + op, payload, sizeof(payload));

	/* GETATTR: a header, no payload. */
	op = sizeof(struct fuse_getattr_in);
	entry(&h, FUSE_GETATTR, op, 0);
	assert_int_equal(ring_rebuild(&h, NULL, 0, buf, sizeof(buf)),
			 IN_SZ + op);
}

static void test_rebuild_refuses_what_does_not_add_up(void **state)
{
	struct fuse_uring_req_header h;
	char payload[64] = "x", buf[IN_SZ + 128 + 64];
	struct fuse_in_header in;

	(void)state;
	/* Less than the header and the payload. */
	entry(&h, FUSE_LOOKUP, 0, 64);
	memcpy(&in, h.in_out, sizeof(in));
	in.len = (uint32_t)(IN_SZ + 10);
	memcpy(h.in_out, &in, sizeof(in));
	assert_int_equal(ring_rebuild(&h, payload, 64, buf, sizeof(buf)),
			 -EPROTO);
	/* An opcode header larger than its place in the entry. */
	entry(&h, FUSE_WRITE, 0, 0);
	in.len = (uint32_t)(IN_SZ + 129);
	memcpy(h.in_out, &in, sizeof(in));
	assert_int_equal(ring_rebuild(&h, NULL, 0, buf, sizeof(buf)), -EPROTO);
	/* A buffer too short for it. */
	entry(&h, FUSE_WRITE, 40, 64);
	assert_int_equal(ring_rebuild(&h, payload, 64, buf, IN_SZ + 40 + 63),
			 -EOVERFLOW);
}

static void test_store_reply(void **state)
{
	struct fuse_uring_req_header h;
	char payload[64];
	struct fuse_out_header out = { .len = sizeof(out) + 5 + 3,
				       .unique = 99 };
	struct iovec iov[3] = { { &out, sizeof(out) },
				{ "hello", 5 },
				{ "abc", 3 } };
	struct fuse_out_header got;

	(void)state;
	memset(&h, 0, sizeof(h));
	assert_int_equal(ring_store_reply(&h, payload, sizeof(payload), iov, 3),
			 sizeof(out) + 8);
	memcpy(&got, h.in_out, sizeof(got));
	assert_int_equal(got.unique, 99);
	assert_int_equal(got.error, 0);
	assert_int_equal(h.ring_ent_in_out.payload_sz, 8);
	assert_memory_equal(payload, "helloabc", 8);

	/* An error: the header alone. */
	out = (struct fuse_out_header){ .len = sizeof(out),
					.error = -ENOENT,
					.unique = 100 };
	assert_int_equal(ring_store_reply(&h, payload, sizeof(payload), iov, 1),
			 sizeof(out));
	memcpy(&got, h.in_out, sizeof(got));
	assert_int_equal(got.error, -ENOENT);
	assert_int_equal(h.ring_ent_in_out.payload_sz, 0);
}

static void test_store_reply_refuses_bad_ones(void **state)
{
	struct fuse_uring_req_header h;
	char payload[4];
	struct fuse_out_header out = { .len = 99, .unique = 7 };
	struct iovec iov[2] = { { &out, sizeof(out) }, { "hello", 5 } };
	struct fuse_out_header got;

	(void)state;
	/* A length that is not the reply's: EIO goes back instead. */
	memset(&h, 0, sizeof(h));
	assert_int_equal(ring_store_reply(&h, payload, sizeof(payload), iov, 2),
			 -EPROTO);
	memcpy(&got, h.in_out, sizeof(got));
	assert_int_equal(got.unique, 7);
	assert_int_equal(got.error, -EIO);
	assert_int_equal(got.len, sizeof(got));
	assert_int_equal(h.ring_ent_in_out.payload_sz, 0);

	/* Longer than the entry holds. */
	out.len = sizeof(out) + 5;
	h.ring_ent_in_out.payload_sz = 1234;
	assert_int_equal(ring_store_reply(&h, payload, sizeof(payload), iov, 2),
			 -EOVERFLOW);
	memcpy(&got, h.in_out, sizeof(got));
	assert_int_equal(got.error, -EIO);
	assert_int_equal(h.ring_ent_in_out.payload_sz, 0);

	/* Not even a header. */
	iov[0].iov_len = 8;
	assert_int_equal(ring_store_reply(&h, payload, sizeof(payload), iov, 1),
			 -EPROTO);
}

/* An INIT request as /dev/fuse gives it. */
struct init_req {
	struct fuse_in_header in;
	struct fuse_init_in arg;
};

static struct init_req init_req(uint32_t flags, uint32_t flags2)
{
	struct init_req r = {
		.in = { .len = sizeof(r), .opcode = FUSE_INIT, .unique = 2 },
		.arg = { .major = 7,
			 .minor = 45,
			 .flags = flags,
			 .flags2 = flags2 },
	};

	return r;
}

static void test_init_offered(void **state)
{
	uint32_t ring = (uint32_t)(FUSE_OVER_IO_URING >> 32);
	struct init_req r = init_req(FUSE_INIT_EXT, ring | 1u);

	(void)state;
	assert_true(ring_init_offered(&r, sizeof(r)));
	/* Short of flags2. */
	assert_false(ring_init_offered(&r, sizeof(r.in) + 16));
	/* flags2 counts only with FUSE_INIT_EXT. */
	r = init_req(0, ring);
	assert_false(ring_init_offered(&r, sizeof(r)));
	r = init_req(FUSE_INIT_EXT, 1u);
	assert_false(ring_init_offered(&r, sizeof(r)));
	r = init_req(FUSE_INIT_EXT, ring);
	r.in.opcode = FUSE_LOOKUP;
	assert_false(ring_init_offered(&r, sizeof(r)));
}

static void test_init_accept(void **state)
{
	struct fuse_out_header out = {
		.len = sizeof(out) + sizeof(struct fuse_init_out), .unique = 2
	};
	struct fuse_init_out arg = { .major = 7,
				     .minor = 38,
				     .flags = FUSE_MAX_PAGES,
				     .max_write = 128 * 1024,
				     .max_pages = 256 };
	struct iovec iov[2] = { { &out, sizeof(out) }, { &arg, sizeof(arg) } };
	size_t page = (size_t)sysconf(_SC_PAGESIZE), max = 0;

	(void)state;
	assert_int_equal(ring_init_accept(iov, 2, &max), 0);
	assert_true(arg.flags & FUSE_INIT_EXT);
	assert_true(((uint64_t)arg.flags2 << 32) & FUSE_OVER_IO_URING);
	/* The larger of max_write and max_pages' bytes. */
	assert_int_equal(max, 256 * page);
	arg.max_write = 4 << 20;
	assert_int_equal(ring_init_accept(iov, 2, &max), 0);
	assert_int_equal(max, 4 << 20);
	/* Without FUSE_MAX_PAGES the kernel's default of 32 pages. */
	arg = (struct fuse_init_out){ .max_write = 4096 };
	assert_int_equal(ring_init_accept(iov, 2, &max), 0);
	assert_int_equal(max, 32 * page > 8192 ? 32 * page : 8192);

	/* A failed INIT, or one too short to say flags2, takes nothing. */
	arg = (struct fuse_init_out){ 0 };
	out.error = -EPROTO;
	assert_int_equal(ring_init_accept(iov, 2, &max), -EPROTO);
	assert_int_equal(arg.flags2, 0);
	out.error = 0;
	iov[1].iov_len = 24;
	assert_int_equal(ring_init_accept(iov, 2, &max), -EPROTO);
	assert_int_equal(ring_init_accept(iov, 1, &max), -EPROTO);
}

static void test_cpu_count(void **state)
{
	(void)state;
	assert_int_equal(ring_cpu_count("0\n"), 1);
	assert_int_equal(ring_cpu_count("0-1\n"), 2);
	assert_int_equal(ring_cpu_count("0-3,8-11"), 8);
	assert_int_equal(ring_cpu_count("0,2,4-5"), 4);
	assert_int_equal(ring_cpu_count(""), 0);
	assert_int_equal(ring_cpu_count("3-1"), 0);
	assert_int_equal(ring_cpu_count("0-"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rebuild_without_op_header),
		cmocka_unit_test(test_rebuild_with_op_header_and_payload),
		cmocka_unit_test(test_rebuild_refuses_what_does_not_add_up),
		cmocka_unit_test(test_store_reply),
		cmocka_unit_test(test_store_reply_refuses_bad_ones),
		cmocka_unit_test(test_init_offered),
		cmocka_unit_test(test_init_accept),
		cmocka_unit_test(test_cpu_count),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
