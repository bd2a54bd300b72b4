/*
 * group.h and what a group's members compare: the group's member list as
 * the configuration gives it, and ns_digest() (namespace.h), which must
 * depend on what a namespace holds, not on how it came to be laid out.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "catchup.h"
#include "client.h"
#include "crc32c.h"
#include "frameio.h"
#include "group.h"
#include "namespace.h"
#include "unit.h"
#include "unit_ns.h"
#include "util.h"
#include "sweepfs.pb-c.h"

static void test_group_members_parse(void **state)
{
	struct group_member m[GROUP_MAX];
	size_t n = 99;

	(void)state;
	assert_int_equal(group_members_parse("1=10.0.0.1:9420", m, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(m[0].id, 1);
	assert_string_equal(m[0].addr, "10.0.0.1:9420");
	assert_int_equal(group_members_parse("1=a:1,2=b:2,30=[::1]:3", m, &n),
			 0);
	assert_int_equal(n, 3);
	assert_int_equal(m[2].id, 30);
	assert_string_equal(m[1].addr, "b:2");
	assert_string_equal(m[2].addr, "[::1]:3");
	assert_int_equal(
		group_members_parse("1=a,2=b,3=c,4=d,5=e,6=f,7=g", m, &n), 0);
	assert_int_equal(n, GROUP_MAX);
}

static void test_group_members_parse_bad(void **state)
{
	static const char *const bad[] = {
		"",
		"1",
		"=a:1",
		"0=a:1",
		"256=a:1",
		"x=a:1",
		"1=",
		"1=a:1,",
		"1=a:1,,2=b:2",
		"1=a:1,1=b:2",
		"1a=a:1",
		"-1=a:1",
		"1=a:1,2",
		"1=a,2=b,3=c,4=d,5=e,6=f,7=g,8=h",
	};
	struct group_member m[GROUP_MAX];
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (group_members_parse(bad[i], m, &n) != -EINVAL)
			fail_msg("'%s' was accepted", bad[i]);
	}
}

/* Two namespaces built in a different order, with different inode
 * numbers handed out for nothing between, hold the same: equal digests.
 * Any change to a name, a mode, a time or an owner tells them apart. */
static void build(struct ns *ns, bool reverse)
{
	struct node *root = ns_get(ns, 1), *d;

	if (!reverse) {
		d = unit_mk(ns, root, "d", S_IFDIR | 0755, 10);
		unit_mk(ns, d, "a", S_IFREG | 0644, 11);
		unit_mk(ns, d, "b", S_IFREG | 0600, 12);
	} else {
		d = unit_mk(ns, root, "d", S_IFDIR | 0755, 10);
		unit_mk(ns, d, "b", S_IFREG | 0600, 12);
		unit_mk(ns, d, "a", S_IFREG | 0644, 11);
	}
}

static void test_ns_digest(void **state)
{
	struct ns a, b;
	struct node *n;
	uint64_t da, db;

	(void)state;
	assert_int_equal(ns_init(&a, 1), 0);
	assert_int_equal(ns_init(&b, 1), 0);
	assert_int_equal(ns_digest(&a), ns_digest(&b));
	build(&a, false);
	build(&b, true);
	/* Same names, but "a" and "b" got each other's inode numbers in
	 * b: not the same namespace. */
	assert_int_not_equal(ns_digest(&a), ns_digest(&b));
	ns_release(&b);
	assert_int_equal(ns_init(&b, 1), 0);
	build(&b, false);
	da = ns_digest(&a);
	db = ns_digest(&b);
	assert_int_equal(da, db);
	/* A name removed and made again: new cookie, same content. */
	n = ns_get(&b, 3);
	assert_non_null(n);
	assert_int_equal(ns_unlink(&b, ns_get(&b, 2), "a", 1, false, 13), 0);
	assert_int_not_equal(ns_digest(&b), da);
	ns_release(&b);
	assert_int_equal(ns_init(&b, 1), 0);
	build(&b, false);
	n = ns_get(&b, 4);
	n->uid = 7;
	assert_int_not_equal(ns_digest(&b), da);
	n->uid = 0;
	assert_int_equal(ns_digest(&b), da);
	n->mtime++;
	assert_int_not_equal(ns_digest(&b), da);
	ns_release(&a);
	ns_release(&b);
}

/* @f (@size bytes) put together from pieces that end at @cuts (the last
 * at @size): the header, trailer and sum a member checks are @f's own. */
static void check_pieces(const uint8_t *f, size_t size, const size_t *cuts,
			 size_t ncuts)
{
	struct catchup_ends e = { .size = size };
	size_t at = 0;

	for (size_t i = 0; i < ncuts; i++) {
		catchup_take(&e, f + at, cuts[i] - at);
		at = cuts[i];
	}
	assert_int_equal(at, size);
	assert_int_equal(e.got, size);
	assert_memory_equal(e.head, f, CHECKPOINT_HEAD);
	assert_memory_equal(e.tail, f + size - CHECKPOINT_TAIL,
			    CHECKPOINT_TAIL);
	assert_int_equal(e.crc, sw_crc32c(0, f, size - CHECKPOINT_TAIL));
}

/*
 * A member reads the leader's checkpoint in pieces (catchup_fetch()), and
 * the pieces may cut the file anywhere: in the header, in the trailer,
 * a byte before either. Every cut of files of a few sizes, then pairs
 * of cuts near both ends, then random pieces of a byte or more.
 */
static void test_catchup_pieces(void **state)
{
	static const size_t sizes[] = { CHECKPOINT_HEAD + CHECKPOINT_TAIL,
					CHECKPOINT_HEAD + CHECKPOINT_TAIL + 1,
					37, 100, 4096 };
	struct rng r;
	uint8_t f[4096];
	size_t cuts[4096];

	(void)state;
	rng_seed(&r, 29);
	rng_fill(&r, f, sizeof(f));
	for (size_t s = 0; s < SW_ARRAY_SIZE(sizes); s++) {
		size_t size = sizes[s];

		cuts[0] = size;
		check_pieces(f, size, cuts, 1);
		for (size_t a = 1; a < size; a++) {
			cuts[0] = a;
			cuts[1] = size;
			check_pieces(f, size, cuts, 2);
		}
		for (size_t a = 1; a < size && a < 24; a++)
			for (size_t b = SW_MAX(a + 1, size - 8); b < size;
			     b++) {
				cuts[0] = a;
				cuts[1] = b;
				cuts[2] = size;
				check_pieces(f, size, cuts, 3);
			}
		for (int round = 0; round < 50; round++) {
			size_t n = 0, at = 0;

			while (at < size) {
				at += 1 + rng_below(&r, round % 2 ? 3 : 700);
				cuts[n++] = SW_MIN(at, size);
			}
			check_pieces(f, size, cuts, n);
		}
	}
}

/*
 * A leader for catchup_read(), on one end of a socket pair: it answers
 * META_READ requests with pieces of @piece bytes of @file (after its
 * first piece, @later bytes; 0: @piece), holding its answers until no
 * request came for @hold_ms (100 if 0) and counting how many it held at
 * once; @reverse answers what it held last first. From request
 * @shrink_from on it says the file is a byte shorter; from @fail_from on
 * it answers EIO; from @mute_from on it answers nothing; from @tiny_from
 * on, a hostile leader's, it says the file is the smallest a checkpoint
 * can be and sends 4 bytes at the offset asked for all the same; the first
 * @eagain requests get EAGAIN (0: none of these). Its file's version is
 * 7, or 0 with @zero. What goes wrong in its thread is counted in @bad, for the test
 * to check once it joined (cmocka's checks belong to the test's thread).
 */
struct leader {
	int fd;
	const uint8_t *file;
	size_t size, piece, later;
	int hold_ms;
	bool reverse;
	unsigned shrink_from, fail_from, mute_from, tiny_from, eagain;
	bool zero;
	unsigned requests, most_at_once, bad;
};

static void leader_answer(struct leader *l, uint64_t id,
			  const Sweepfs__MetaReadReq *q, struct sw_buf *out)
{
	Sweepfs__MetaReadReply r = SWEEPFS__META_READ_REPLY__INIT;
	uint64_t size = l->size, len = 0;

	l->requests++;
	if (l->mute_from && l->requests >= l->mute_from)
		return;
	if (l->shrink_from && l->requests >= l->shrink_from)
		size--;
	if (l->eagain) {
		l->eagain--;
		r.err = EAGAIN;
	} else if (l->fail_from && l->requests >= l->fail_from) {
		r.err = EIO;
	} else if (l->tiny_from && l->requests >= l->tiny_from) {
		size = CHECKPOINT_HEAD + CHECKPOINT_TAIL;
		len = 4;
	} else if (q->offset > size) {
		r.err = EINVAL;
	} else {
		len = SW_MIN(q->offset && l->later ? l->later : l->piece,
			     size - q->offset);
	}
	r.has_err = r.err != 0;
	if (!r.err) {
		r.has_version = r.has_size = r.has_data = 1;
		r.version = l->zero ? 0 : 7;
		r.size = size;
		r.data.data = (uint8_t *)l->file + q->offset;
		r.data.len = len;
	}
	if (sw_buf_add_frame(out, SW_MSG_META_READ, SW_FRAME_REPLY, id,
			     &r.base))
		l->bad++;
}

static void *leader_run(void *arg)
{
	struct leader *l = arg;
	struct sw_buf in = SW_BUF_INIT, out = SW_BUF_INIT;
	struct {
		uint64_t id;
		Sweepfs__MetaReadReq *q;
	} held[16];
	unsigned n = 0;

	for (;;) {
		struct sw_frame_hdr hdr;
		int rc = sw_frame_next(l->fd, &in, 4096,
				       n ? (l->hold_ms ? l->hold_ms : 100) :
					   5000,
				       SW_FRAME_MAX_META, &hdr);

		if (rc == 1) {
			if (n == SW_ARRAY_SIZE(held)) {
				l->bad++;
				break;
			}
			held[n].id = hdr.id;
			held[n].q = sweepfs__meta_read_req__unpack(
				NULL, hdr.len, sw_buf_head(&in) + SW_FRAME_HDR);
			sw_buf_consume(&in, SW_FRAME_HDR + hdr.len);
			if (!held[n].q) {
				l->bad++;
				break;
			}
			n++;
			l->most_at_once = SW_MAX(l->most_at_once, n);
			continue;
		}
		if (rc != -ETIMEDOUT || !n)
			break; /* the member closed its end */
		for (unsigned i = 0; i < n; i++) {
			unsigned k = l->reverse ? n - 1 - i : i;

			leader_answer(l, held[k].id, held[k].q, &out);
			sweepfs__meta_read_req__free_unpacked(held[k].q, NULL);
		}
		n = 0;
		if (sw_send_all(l->fd, sw_buf_head(&out), sw_buf_used(&out)))
			break;
		sw_buf_reset(&out);
	}
	for (unsigned i = 0; i < n; i++)
		sweepfs__meta_read_req__free_unpacked(held[i].q, NULL);
	sw_buf_release(&in);
	sw_buf_release(&out);
	return NULL;
}

static bool stop_at(void *arg)
{
	unsigned *left = arg;

	return (*left)-- == 0;
}

/*
 * catchup_read() of @l's file, asked again after -EAGAIN up to @tries
 * times in all, @stops calls of stop() answering false before one says
 * true (UINT_MAX: never). Whatever it returns, no call is left in flight
 * on the connection; with 0, the file read and the checks' bytes are the
 * leader's.
 */
static int read_from(struct leader *l, unsigned tries, unsigned stops)
{
	char path[] = "/tmp/sweepfs-catchup-XXXXXX";
	struct catchup_ends e;
	struct sw_client c;
	uint64_t version = 0;
	size_t nflight;
	pthread_t t;
	uint8_t *got = malloc(l->size);
	int sv[2], fd, rc;

	assert_non_null(got);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	l->fd = sv[1];
	/* A leader that falls silent is waited for a second. */
	sw_client_attach(&c, sv[0], SW_FRAME_MAX_META,
			 l->mute_from ? 1000 : 5000);
	assert_int_equal(pthread_create(&t, NULL, leader_run, l), 0);
	do {
		if (ftruncate(fd, 0) < 0 || lseek(fd, 0, SEEK_SET) != 0)
			break;
		rc = catchup_read(&c, fd, l->zero ? 0 : 1, stop_at, &stops,
				  &version, &e);
	} while (rc == -EAGAIN && --tries);
	nflight = c.pc.nflight;
	shutdown(sv[0], SHUT_RDWR);
	pthread_join(t, NULL);
	sw_pclient_release(&c.pc);
	close(sv[0]);
	close(sv[1]);
	/* The checks, once the leader's thread and the sockets are gone. */
	assert_int_equal(l->bad, 0);
	assert_int_equal(nflight, 0);
	if (rc == 0) {
		assert_int_equal(version, l->zero ? 0 : 7);
		assert_int_equal(e.size, l->size);
		assert_int_equal(e.got, l->size);
		assert_int_equal(pread(fd, got, l->size, 0), (ssize_t)l->size);
		assert_memory_equal(got, l->file, l->size);
		assert_int_equal(lseek(fd, 0, SEEK_END), (off_t)l->size);
		assert_memory_equal(e.head, l->file, CHECKPOINT_HEAD);
		assert_memory_equal(e.tail, l->file + l->size - CHECKPOINT_TAIL,
				    CHECKPOINT_TAIL);
		assert_int_equal(e.crc, sw_crc32c(0, l->file,
						  l->size - CHECKPOINT_TAIL));
	}
	free(got);
	close(fd);
	return rc;
}

/*
 * A member reads the leader's checkpoint a few pieces at once, and what
 * it writes is the leader's file: with the leader's pieces of our size
 * (asked for several at once, answered in order or not), smaller and
 * larger ones (a leader of another version: the rest one at a time), a
 * leader busy writing one (EAGAIN, asked again), one whose file changes
 * size (-EPROTO), one that fails a later piece (its error), and a member
 * told to stop (-ECANCELED, nothing sent once told). Whatever the end,
 * no piece is left in flight.
 */
static void test_catchup_read(void **state)
{
	size_t big = 3 * CATCHUP_PIECE + 123, small = 100 << 10;
	uint8_t *file = malloc(big);
	struct rng r;
	struct leader l;

	(void)state;
	assert_non_null(file);
	rng_seed(&r, 32);
	rng_fill(&r, file, big);

	/* Our size: the first alone, then the other three at once (held a
	 * second, so that a slow machine still sends them in time). */
	for (int reverse = 0; reverse < 2; reverse++) {
		l = (struct leader){ .file = file,
				     .size = big,
				     .piece = CATCHUP_PIECE,
				     .hold_ms = 1000,
				     .reverse = reverse };
		assert_int_equal(read_from(&l, 1, UINT_MAX), 0);
		assert_int_equal(l.requests, 4);
		assert_int_equal(l.most_at_once, 3);
	}

	/* Smaller pieces from the first: one at a time. */
	l = (struct leader){ .file = file,
			     .size = CATCHUP_PIECE + 1000,
			     .piece = small };
	assert_int_equal(read_from(&l, 1, UINT_MAX), 0);
	assert_int_equal(l.requests, 6);
	assert_int_equal(l.most_at_once, 1);

	/* Smaller after the first: three asked ahead, two of them at
	 * offsets where no piece starts (read and dropped), then one at a
	 * time from where the second piece ended; in order or not. */
	for (int reverse = 0; reverse < 2; reverse++) {
		l = (struct leader){ .file = file,
				     .size = big,
				     .piece = CATCHUP_PIECE,
				     .later = small,
				     .reverse = reverse };
		assert_int_equal(read_from(&l, 1, UINT_MAX), 0);
		assert_int_equal(l.requests,
				 4 + (big - CATCHUP_PIECE - 1) / small);
	}

	/* Larger. */
	l = (struct leader){ .file = file, .size = big, .piece = 700 << 10 };
	assert_int_equal(read_from(&l, 1, UINT_MAX), 0);
	assert_int_equal(l.requests, 3);
	assert_int_equal(l.most_at_once, 1);

	l = (struct leader){
		.file = file, .size = big, .piece = CATCHUP_PIECE, .eagain = 2
	};
	assert_int_equal(read_from(&l, 3, UINT_MAX), 0);

	/* Errors with pieces still in flight (the last one never answered):
	 * the read ends with the error, once every piece asked for was
	 * answered or failed (read_from() checks that none is left). Then
	 * told to stop before anything is sent, or after the first. */
	for (int k = 0; k < 4; k++) {
		static const int want[] = { -EPROTO, -EIO, -ECANCELED,
					    -ECANCELED };

		l = (struct leader){ .file = file,
				     .size = big,
				     .piece = CATCHUP_PIECE,
				     .shrink_from = k == 0 ? 3 : 0,
				     .fail_from = k == 1 ? 2 : 0,
				     .mute_from = k < 2 ? 4 : 0 };
		assert_int_equal(read_from(&l, 1, k < 2 ? UINT_MAX : k - 2),
				 want[k]);
		assert_int_equal(l.requests, k < 2 ? 4 : k - 2);
	}

	/* A file of version 0, whose later replies say it is smaller than
	 * what was read: the first reply still fixes the file, and the
	 * size is refused (before, "no version yet" meant "no reply yet",
	 * each reply's size was believed, and the trailer's copy wrote past
	 * its 4 bytes). Then the same file whole. */
	l = (struct leader){ .file = file,
			     .size = big,
			     .piece = CATCHUP_PIECE,
			     .zero = true,
			     .tiny_from = 3 };
	assert_int_equal(read_from(&l, 1, UINT_MAX), -EPROTO);
	l = (struct leader){
		.file = file, .size = big, .piece = CATCHUP_PIECE, .zero = true
	};
	assert_int_equal(read_from(&l, 1, UINT_MAX), 0);
	free(file);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_group_members_parse),
		cmocka_unit_test(test_group_members_parse_bad),
		cmocka_unit_test(test_ns_digest),
		cmocka_unit_test(test_catchup_pieces),
		cmocka_unit_test(test_catchup_read),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
