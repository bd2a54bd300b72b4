/*
 * data.h: the mount's file contents, alone. The master's connection,
 * the chunkservers', the kernel's replies and the inode table are this
 * file's: each request data.c sends is kept (its type, where it went,
 * its bytes) and answered by the test, in the order the test chooses.
 *
 * What it holds: an fsync carries a token a chunkserver takes. A writer
 * may keep a file open for longer than a token lives (10 minutes), and
 * a snapshot may move the chunk's version on under it; either way its
 * fsync asks the master for the chunk again instead of failing. And
 * attributes a cache kept from while a write's size was on its way to
 * the master are overlaid with it after the master has it too; an fsync
 * whose WRITE_END cannot be made for memory fails instead of waiting.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cspool.h"
#include "data.h"
#include "frame.h"
#include "mount_i.h"
#include "reply.h"
#include "sweepfs.pb-c.h"
#include "util.h"

#define INO 42
#define CALLS_MAX 64

/* A request data.c sent, not yet answered. */
struct call {
	bool master;
	uint16_t type;
	char addr[64];
	uint8_t bytes[8192]; /* a CS_WRITE of 4 KiB too */
	size_t len;
	cs_cb cb;
	void *arg;
};

static struct call calls[CALLS_MAX];
static size_t ncalls;

void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n);

/* While > 0, counted down by each malloc(); the one that reaches 0 fails. */
static int malloc_fails_in;

void *__wrap_malloc(size_t n)
{
	if (malloc_fails_in > 0 && --malloc_fails_in == 0)
		return NULL;
	return __real_malloc(n);
}

/* What the kernel was answered. */
static int status_rc, statuses, writes_rc, writes;

static void keep(bool master, const char *addr, uint16_t type,
		 const ProtobufCMessage *req, cs_cb cb, void *arg)
{
	struct call *c;

	assert_true(ncalls < CALLS_MAX);
	c = &calls[ncalls++];
	memset(c, 0, sizeof(*c));
	c->master = master;
	c->type = type;
	snprintf(c->addr, sizeof(c->addr), "%s", addr ? addr : "");
	c->len = protobuf_c_message_get_packed_size(req);
	assert_true(c->len <= sizeof(c->bytes));
	protobuf_c_message_pack(req, c->bytes);
	c->cb = cb;
	c->arg = arg;
}

void mconn_send(struct mconn *mc, uint16_t type, const ProtobufCMessage *req,
		mconn_cb cb, void *arg)
{
	(void)mc;
	keep(true, NULL, type, req, cb, arg);
}

void cspool_send(struct cspool *p, const char *addr, uint16_t type,
		 const ProtobufCMessage *req, cs_cb cb, void *arg)
{
	(void)p;
	keep(false, addr, type, req, cb, arg);
}

int reply_status(fuse_req_t req, int rc)
{
	(void)req;
	status_rc = rc;
	statuses++;
	return 0;
}

int reply_written(fuse_req_t req, int rc, size_t n)
{
	(void)req;
	(void)n;
	writes_rc = rc;
	writes++;
	return 0;
}

int reply_data(fuse_req_t req, int rc, const void *buf, size_t n)
{
	(void)req;
	(void)rc;
	(void)buf;
	(void)n;
	fail_msg("no read here");
	return 0;
}

const struct fuse_ctx *fuse_req_ctx(fuse_req_t req)
{
	static const struct fuse_ctx ctx = { .uid = 1000, .gid = 1000 };

	(void)req;
	return &ctx;
}

uint64_t itable_handle(struct itable *t, uint64_t ino)
{
	(void)t;
	return ino == INO ? 0x5eed : 0;
}

void itable_set_attr_expired(struct itable *t, uint64_t ino)
{
	(void)t;
	(void)ino;
}

void devpoll_yield(void)
{
}

/* The oldest request not yet answered, which must be of @type. */
static struct call take(uint16_t type)
{
	struct call c;

	assert_true(ncalls > 0);
	c = calls[0];
	memmove(calls, calls + 1, (ncalls - 1) * sizeof(calls[0]));
	ncalls--;
	assert_int_equal(c.type, type);
	return c;
}

/* Answer @c with @rc, as no answer at all (the connection failed). */
static void answer(const struct call *c, int rc)
{
	ProtobufCMessage *none = NULL;

	c->cb(c->arg, rc, &none);
}

/* Answer @c with @rc, said by its peer. */
static void answer_said(const struct call *c, int rc)
{
	Sweepfs__StatusReply r = SWEEPFS__STATUS_REPLY__INIT;
	ProtobufCMessage *msg = &r.base;

	r.has_err = rc < 0;
	r.err = -rc;
	c->cb(c->arg, rc, &msg);
}

/* Answer a CHUNK with chunk 7 at @version on @servers, token @tok. */
static void answer_chunk(const struct call *c, uint32_t version,
			 const char *servers[], size_t nservers, uint8_t tok,
			 uint64_t expires)
{
	Sweepfs__ChunkLoc loc = SWEEPFS__CHUNK_LOC__INIT;
	Sweepfs__ChunkReply r = SWEEPFS__CHUNK_REPLY__INIT;
	ProtobufCMessage *msg = &r.base;
	uint8_t token[16];

	memset(token, tok, sizeof(token));
	loc.has_chunk_id = loc.has_version = 1;
	loc.chunk_id = 7;
	loc.version = version;
	loc.servers = (char **)servers;
	loc.n_servers = nservers;
	loc.has_token = 1;
	loc.token.data = token;
	loc.token.len = sizeof(token);
	loc.has_expires = 1;
	loc.expires = expires;
	r.loc = servers ? &loc : NULL; /* none: no location */
	r.has_file_size = 1;
	c->cb(c->arg, 0, &msg);
}

static uint64_t now_ms(void)
{
	return (uint64_t)(sw_now_ns() / 1000000);
}

static const char *two[] = { "cs-a:9422", "cs-b:9422" };
static const char *moved[] = { "cs-a:9422", "cs-c:9422" };

struct fixture {
	struct mount m;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(data_new(&f->m, &f->m.data), 0);
	ncalls = 0;
	malloc_fails_in = 0;
	statuses = writes = 0;
	status_rc = writes_rc = 1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(ncalls, 0); /* every request was looked at */
	data_free(f->m.data);
	free(f);
	return 0;
}

/* Write 4 KiB at 0 through a location whose token ends at @expires,
 * asked of the master (else the one this mount keeps from before). */
static void write_at(struct fixture *f, uint64_t expires, bool ask)
{
	static char buf[4096];
	struct call c, w1, w2;

	writes = 0;
	assert_int_equal(data_write(&f->m, NULL, INO, buf, sizeof(buf), 0), 0);
	if (ask) {
		c = take(SW_MSG_CHUNK);
		assert_true(c.master);
		answer_chunk(&c, 1, two, 2, 0xa1, expires);
	}
	w1 = take(SW_MSG_CS_WRITE);
	w2 = take(SW_MSG_CS_WRITE);
	answer(&w1, 0);
	answer(&w2, 0);
	assert_int_equal(writes, 1);
	assert_int_equal(writes_rc, 0);
	c = take(SW_MSG_WRITE_END);
	answer(&c, 0);
}

static void write_through(struct fixture *f, uint64_t expires)
{
	write_at(f, expires, true);
}

/* Take the next request, of @type, and answer it with @how(@rc). */
static void take_and(uint16_t type, void (*how)(const struct call *, int),
		     int rc)
{
	struct call c = take(type);

	how(&c, rc);
}

/* The next request is a CS_SYNC of chunk 7 @version with token @tok, to
 * @addr: answer it with @rc. */
static void sync_seen(uint32_t version, uint8_t tok, const char *addr, int rc)
{
	struct call c = take(SW_MSG_CS_SYNC);
	Sweepfs__CsSyncReq *q;

	q = sweepfs__cs_sync_req__unpack(NULL, c.len, c.bytes);
	assert_non_null(q);
	assert_false(c.master);
	assert_string_equal(c.addr, addr);
	assert_int_equal(q->chunk_id, 7);
	assert_int_equal(q->version, version);
	assert_int_equal(q->token.len, 16);
	assert_int_equal(q->token.data[0], tok);
	sweepfs__cs_sync_req__free_unpacked(q, NULL);
	answer_said(&c, rc);
}

/* The next request asks the master for chunk 0 of INO for writing. */
static struct call chunk_asked(void)
{
	struct call c = take(SW_MSG_CHUNK);
	Sweepfs__ChunkReq *q;

	q = sweepfs__chunk_req__unpack(NULL, c.len, c.bytes);
	assert_non_null(q);
	assert_true(c.master);
	assert_int_equal(q->ino, INO);
	assert_int_equal(q->index, 0);
	assert_true(q->has_write && q->write);
	/* Only the chunk written, as written: nothing made or copied. */
	assert_int_equal(q->only_chunk, 7);
	assert_int_equal(q->only_version, 1);
	assert_int_equal(q->n_handles, 1);
	assert_int_equal(q->handles[0], 0x5eed);
	sweepfs__chunk_req__free_unpacked(q, NULL);
	return c;
}

/* A token good for long: the fsync sends it as it is, to both copies,
 * and asks the master nothing. */
static void test_fsync_fresh_token(void **state)
{
	struct fixture *f = *state;

	write_through(f, now_ms() + 600000);
	assert_int_equal(data_fsync(&f->m, NULL, INO), 0);
	sync_seen(1, 0xa1, "cs-a:9422", 0);
	sync_seen(1, 0xa1, "cs-b:9422", 0);
	assert_int_equal(statuses, 1);
	assert_int_equal(status_rc, 0);
}

/* The write's token ends within the minute (a writer that wrote long
 * ago): the fsync asks for the chunk first and syncs where the master
 * says now, with the token it gives. */
static void test_fsync_token_near_end(void **state)
{
	struct fixture *f = *state;
	struct call c;

	write_through(f, now_ms() + 30000);
	assert_int_equal(data_fsync(&f->m, NULL, INO), 0);
	c = chunk_asked();
	assert_int_equal(statuses, 0);
	answer_chunk(&c, 2, moved, 2, 0xb2, now_ms() + 600000);
	sync_seen(2, 0xb2, "cs-a:9422", 0);
	assert_int_equal(statuses, 0);
	sync_seen(2, 0xb2, "cs-c:9422", 0);
	assert_int_equal(statuses, 1);
	assert_int_equal(status_rc, 0);
}

/* A copy refuses the sync (the version moved on, say): asked again once,
 * synced there; a second refusal is the fsync's error, not a loop. */
static void test_fsync_refused_asks_again(void **state)
{
	struct fixture *f = *state;
	struct call c;

	write_through(f, now_ms() + 600000);
	assert_int_equal(data_fsync(&f->m, NULL, INO), 0);
	sync_seen(1, 0xa1, "cs-a:9422", 0);
	sync_seen(1, 0xa1, "cs-b:9422", -EACCES);
	c = chunk_asked();
	answer_chunk(&c, 2, moved, 2, 0xb2, now_ms() + 600000);
	sync_seen(2, 0xb2, "cs-a:9422", 0);
	sync_seen(2, 0xb2, "cs-c:9422", 0);
	assert_int_equal(statuses, 1);
	assert_int_equal(status_rc, 0);

	/* Dirty again, and refused at both places. */
	write_at(f, 0, false);
	assert_int_equal(data_fsync(&f->m, NULL, INO), 0);
	sync_seen(1, 0xa1, "cs-a:9422", -EACCES);
	sync_seen(1, 0xa1, "cs-b:9422", 0);
	c = chunk_asked();
	answer_chunk(&c, 2, moved, 2, 0xb2, now_ms() + 600000);
	sync_seen(2, 0xb2, "cs-a:9422", -EIO);
	sync_seen(2, 0xb2, "cs-c:9422", 0);
	assert_int_equal(statuses, 1 + 1);
	assert_int_equal(status_rc, -EIO);
}

/* A copy met an error syncing (its disk): that is the fsync's, and it
 * is not asked about again (a second fdatasync would say 0). */
static void test_fsync_error_not_asked_again(void **state)
{
	struct fixture *f = *state;

	write_through(f, now_ms() + 600000);
	assert_int_equal(data_fsync(&f->m, NULL, INO), 0);
	sync_seen(1, 0xa1, "cs-a:9422", 0);
	take_and(SW_MSG_CS_SYNC, answer_said, -EIO);
	assert_int_equal(statuses, 1);
	assert_int_equal(status_rc, -EIO);
	/* Out of room, and refused by the other copy: ENOSPC all the
	 * same. */
	write_at(f, 0, false);
	assert_int_equal(data_fsync(&f->m, NULL, INO), 0);
	take_and(SW_MSG_CS_SYNC, answer_said, -ESTALE);
	take_and(SW_MSG_CS_SYNC, answer_said, -ENOSPC);
	assert_int_equal(statuses, 2);
	assert_int_equal(status_rc, -ENOSPC);
}

/* A copy that does not answer (its server went down, and may have lost
 * what it was sent): the fsync's error, not asked about again. */
static void test_fsync_no_answer(void **state)
{
	struct fixture *f = *state;

	write_through(f, now_ms() + 600000);
	assert_int_equal(data_fsync(&f->m, NULL, INO), 0);
	sync_seen(1, 0xa1, "cs-a:9422", 0);
	take_and(SW_MSG_CS_SYNC, answer, -EIO);
	assert_int_equal(statuses, 1);
	assert_int_equal(status_rc, -EIO);
}

/* Both copies say the version moved on (a snapshot's bump, which synced
 * them): asked again, the master says the chunk is no longer that one
 * at that version; nothing is left to sync, and the fsync succeeds. */
static void test_fsync_moved_on(void **state)
{
	struct fixture *f = *state;
	struct call c;

	write_through(f, now_ms() + 600000);
	assert_int_equal(data_fsync(&f->m, NULL, INO), 0);
	take_and(SW_MSG_CS_SYNC, answer_said, -ESTALE);
	take_and(SW_MSG_CS_SYNC, answer_said, -ESTALE);
	c = chunk_asked();
	answer_chunk(&c, 0, NULL, 0, 0, 0); /* no location */
	assert_int_equal(statuses, 1);
	assert_int_equal(status_rc, 0);
}

/* The master gives no location (the file is gone): that is the error. */
static void test_fsync_master_refuses(void **state)
{
	struct fixture *f = *state;
	struct call c;

	write_through(f, now_ms() + 1000);
	assert_int_equal(data_fsync(&f->m, NULL, INO), 0);
	c = chunk_asked();
	answer(&c, -ENOENT);
	assert_int_equal(statuses, 1);
	assert_int_equal(status_rc, -ENOENT);
}

/* Write 4 KiB at @off through the location this mount keeps; the write
 * is answered, its WRITE_END (if one goes now) is not. @fails: the
 * allocation that fails once both copies have it (malloc_fails_in). */
static void write_kept_failing(struct fixture *f, uint64_t off, int fails)
{
	static char buf[4096];
	struct call w1, w2;

	writes = 0;
	assert_int_equal(
		data_write(&f->m, NULL, INO, buf, sizeof(buf), (off_t)off), 0);
	w1 = take(SW_MSG_CS_WRITE);
	w2 = take(SW_MSG_CS_WRITE);
	answer(&w1, 0);
	malloc_fails_in = fails;
	answer(&w2, 0);
	malloc_fails_in = 0;
	assert_int_equal(writes, 1);
	assert_int_equal(writes_rc, 0);
}

static void write_kept(struct fixture *f, uint64_t off)
{
	write_kept_failing(f, off, 0);
}

/* What the kernel would be told of attributes saying @size, fetched at
 * @fetched: their size after data_local_attr(). */
static uint64_t told(struct fixture *f, uint64_t size, int64_t fetched)
{
	int64_t mtime = 0;

	data_local_attr(f->m.data, INO, fetched, &size, &mtime);
	return size;
}

/*
 * A getattr answered while the second write's WRITE_END waited behind
 * the first's says 8 KiB; kept, it is still overlaid with 12 KiB once
 * both are answered (it was handed out bare then: the kernel shrank the
 * file under its writer). Attributes of a reply at hand, or fetched
 * after, are the master's own: a truncate elsewhere shows; after one
 * here, none is overlaid.
 */
static void test_kept_attr_overlaid(void **state)
{
	struct fixture *f = *state;
	struct call e1, e2;
	int64_t fetched;

	write_through(f, now_ms() + 600000); /* 4 KiB, answered */
	write_kept(f, 4096);
	e1 = take(SW_MSG_WRITE_END);
	write_kept(f, 8192); /* its WRITE_END waits for e1's answer */
	fetched = sw_mono_ns();
	assert_int_equal(told(f, 8192, fetched), 12288);
	answer(&e1, 0);
	e2 = take(SW_MSG_WRITE_END);
	assert_int_equal(told(f, 8192, fetched), 12288);
	answer(&e2, 0);
	assert_int_equal(told(f, 8192, fetched), 12288);
	assert_int_equal(told(f, 8192, 0), 12288); /* of unknown age */
	assert_int_equal(told(f, 4096, MOUNT_ATTR_NOW), 4096);
	assert_int_equal(told(f, 4096, sw_mono_ns() + 1), 4096);
	data_forget(&f->m, INO); /* truncated here: nothing from before */
	assert_int_equal(told(f, 0, fetched), 0);
}

/* A WRITE_END the master refused: kept attributes are overlaid with no
 * more than it had. */
static void test_kept_attr_refused(void **state)
{
	struct fixture *f = *state;
	struct call e1, e2;
	int64_t fetched;

	write_through(f, now_ms() + 600000);
	write_kept(f, 4096);
	e1 = take(SW_MSG_WRITE_END);
	write_kept(f, 8192);
	fetched = sw_mono_ns();
	answer(&e1, 0);
	e2 = take(SW_MSG_WRITE_END);
	answer(&e2, -EIO);
	assert_int_equal(told(f, 4096, fetched), 8192);
}

static void flushed(void *arg, int rc)
{
	*(int *)arg = rc;
}

/* An fsync now sends a WRITE_END, and ends well with its answer. */
static void flush_sends(struct fixture *f)
{
	struct call e;
	int rc = 1;

	data_flush(&f->m, INO, flushed, &rc);
	e = take(SW_MSG_WRITE_END);
	answer(&e, 0);
	assert_int_equal(rc, 0);
}

/* The WRITE_END that was to follow an answered one cannot be made: the
 * fsync waiting for it fails, and the next one sends it. */
static void test_flush_unsent_after_answer(void **state)
{
	struct fixture *f = *state;
	struct call e1;
	int rc = 1;

	write_through(f, now_ms() + 600000);
	write_kept(f, 4096);
	e1 = take(SW_MSG_WRITE_END);
	write_kept(f, 8192);
	data_flush(&f->m, INO, flushed, &rc);
	assert_int_equal(rc, 1); /* waits */
	malloc_fails_in = 1;
	answer(&e1, 0);
	assert_int_equal(rc, -ENOMEM);
	assert_int_equal(told(f, 4096, MOUNT_ATTR_NOW), 12288); /* still ours */
	flush_sends(f);
}

/* An fsync whose WRITE_END cannot be made answers at once. */
static void test_flush_unsent(void **state)
{
	struct fixture *f = *state;
	int rc = 1;

	write_through(f, now_ms() + 600000);
	write_kept_failing(f, 4096, 1); /* its WRITE_END */
	malloc_fails_in = 2; /* the fsync's wait, then its WRITE_END */
	data_flush(&f->m, INO, flushed, &rc);
	malloc_fails_in = 0;
	assert_int_equal(rc, -ENOMEM);
	flush_sends(f);
}

/* The last close syncs in the background, the same way, as the writer
 * (the file may be open nowhere by then: the master checks them). */
static void test_release_token_near_end(void **state)
{
	struct fixture *f = *state;
	Sweepfs__ChunkReq *q;
	struct call c;

	write_through(f, now_ms() + 30000);
	data_release(&f->m, INO, true);
	c = take(SW_MSG_CHUNK);
	q = sweepfs__chunk_req__unpack(NULL, c.len, c.bytes);
	assert_non_null(q);
	assert_int_equal(q->cred->uid, 1000);
	assert_true(q->has_write && q->write);
	sweepfs__chunk_req__free_unpacked(q, NULL);
	answer_chunk(&c, 2, moved, 2, 0xb2, now_ms() + 600000);
	sync_seen(2, 0xb2, "cs-a:9422", 0);
	sync_seen(2, 0xb2, "cs-c:9422", 0);
	assert_int_equal(statuses, 0); /* nobody waits for it */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fsync_fresh_token, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_fsync_token_near_end,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_fsync_refused_asks_again,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_fsync_error_not_asked_again, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fsync_moved_on, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_fsync_no_answer, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_fsync_master_refuses,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_token_near_end,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_kept_attr_overlaid, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_kept_attr_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_flush_unsent_after_answer,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_unsent, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
