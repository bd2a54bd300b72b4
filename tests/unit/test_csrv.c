/*
 * csrv.c's deletion queue: deletions leave in DELETE_BATCH commands of at
 * most CSRV_DELQ_BATCH chunks, CSRV_DELQ_WINDOW in flight per server, within delete_rate's
 * credit, only once the change that queued them is durable; they count
 * as pending until acknowledged, and those lost with a connection go
 * back to the queue. A registration queues the files of chunks the
 * metadata freed at once, and only those.
 *
 * conn_notify() and the changelog's two version queries are wrapped
 * (-Wl,--wrap): the commands are recorded instead of sent, and the test
 * says how far the changelog is durable.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "changelog.h"
#include "csrv.h"
#include "frame.h"
#include "handlers.h"
#include "master.h"
#include "namespace.h"
#include "req.h"
#include "server.h"
#include "sessrec.h"
#include "unit.h"
#include "util.h"

/* What the wrapped functions saw and say. */
static struct {
	size_t sent;	    /* commands */
	size_t ids[64];	    /* chunk ids in each */
	uint64_t first[64]; /* the first id of each */
	bool bad;	    /* a command that was not a well-formed batch */
	uint64_t durable;   /* changelog_durable() */
	uint64_t last;	    /* changelog_last() */
} wire;

void __wrap_conn_notify(struct conn *c, uint16_t type,
			const ProtobufCMessage *msg);
uint64_t __wrap_changelog_durable(const struct changelog *cl);
uint64_t __wrap_changelog_last(const struct changelog *cl);

void __wrap_conn_notify(struct conn *c, uint16_t type,
			const ProtobufCMessage *msg)
{
	const Sweepfs__CsCommand *q = (const Sweepfs__CsCommand *)msg;

	if (type != SW_MSG_CS_COMMAND ||
	    q->op != SWEEPFS__CS_COMMAND__OP__DELETE_BATCH ||
	    q->n_batch_ids != q->n_batch_versions || !q->n_batch_ids ||
	    q->n_batch_ids > SW_DELETE_BATCH_MAX ||
	    q->chunk_id != q->batch_ids[0]) {
		wire.bad = true;
		return;
	}
	if (wire.sent < 64) {
		wire.ids[wire.sent] = q->n_batch_ids;
		wire.first[wire.sent] = q->batch_ids[0];
	}
	wire.sent++;
}

uint64_t __wrap_changelog_durable(const struct changelog *cl)
{
	return wire.durable;
}

uint64_t __wrap_changelog_last(const struct changelog *cl)
{
	return wire.last;
}

struct fixture {
	struct master m;
	struct csrv *srv;
	struct conn conn;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || master_parts_new(&f->m) < 0) {
		free(f);
		return -1;
	}
	memset(&wire, 0, sizeof(wire));
	/* csrv.c sends through the request layer's hooks (req_notify()). */
	master_wire_requests(&f->m);
	csrvs_init(&f->m);
	f->m.cfg.delete_rate = 1000000;
	/* One chunkserver, "connected" (csrv_up() looks at conn only). */
	f->srv = calloc(1, sizeof(*f->srv));
	if (!f->srv) {
		master_parts_free(&f->m);
		free(f);
		return -1;
	}
	f->srv->id = 1;
	snprintf(f->srv->listen, sizeof(f->srv->listen), "cs1:9522");
	f->srv->conn = &f->conn;
	f->conn.link.csrv = 1;
	f->m.cs->srv[1] = f->srv;
	f->m.cs->n = 1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	csrvs_release(&f->m); /* frees the server and its queue */
	master_parts_free(&f->m);
	free(f);
	return 0;
}

static void queue(struct fixture *f, uint64_t first, size_t n)
{
	for (size_t i = 0; i < n; i++)
		csrv_queue_delete(&f->m, 1, first + i, 1);
}

/* More than a window's worth of deletions. */
#define W CSRV_DELQ_WINDOW
#define B CSRV_DELQ_BATCH
#define MANY (W * B + 1000)

static void test_drain_batches_in_a_window(void **state)
{
	struct fixture *f = *state;

	queue(f, 1, MANY);
	assert_int_equal(csrv_deletes_pending(f->srv), MANY);
	f->srv->delete_credit = 1e9;
	csrv_drain_deletions(&f->m, f->srv);
	assert_false(wire.bad);
	/* A window of full batches, in queue order; the rest waits. */
	assert_int_equal(wire.sent, W);
	for (size_t i = 0; i < W; i++) {
		assert_int_equal(wire.ids[i], B);
		assert_int_equal(wire.first[i], 1 + B * i);
	}
	/* Sent is not done: all still pending, a window in flight. */
	assert_int_equal(csrv_deletes_pending(f->srv), MANY);
	assert_int_equal(f->srv->del_inflight, W * B);
	assert_int_equal(f->m.cs->pending_deletes, MANY);
	/* The window is full: nothing more until an acknowledgement. */
	csrv_drain_deletions(&f->m, f->srv);
	assert_int_equal(wire.sent, W);
}

static void test_drain_within_delete_rate(void **state)
{
	struct fixture *f = *state;

	queue(f, 1, 1000);
	f->srv->delete_credit = 100.5;
	csrv_drain_deletions(&f->m, f->srv);
	assert_int_equal(wire.sent, 1);
	assert_int_equal(wire.ids[0], 100);
	assert_true(f->srv->delete_credit < 1);
	/* No credit left: nothing goes, though the window has room. */
	csrv_drain_deletions(&f->m, f->srv);
	assert_int_equal(wire.sent, 1);
	assert_int_equal(csrv_deletes_pending(f->srv), 1000);
}

static void test_drain_waits_for_durable(void **state)
{
	struct fixture *f = *state;

	/* The changes that queue these are journaled as versions 11 and
	 * 21; the changelog is durable up to 10 of 21. */
	f->m.cl = (struct changelog *)&wire; /* never dereferenced */
	f->m.ns.version = 10;
	queue(f, 1, 10);
	f->m.ns.version = 20;
	queue(f, 100, 10);
	wire.durable = 10;
	wire.last = 21;
	f->srv->delete_credit = 1e9;
	csrv_drain_deletions(&f->m, f->srv);
	assert_int_equal(wire.sent, 0);
	/* Durable up to 11: the first ten only. */
	wire.durable = 11;
	csrv_drain_deletions(&f->m, f->srv);
	assert_int_equal(wire.sent, 1);
	assert_int_equal(wire.ids[0], 10);
	assert_int_equal(wire.first[0], 1);
	/* Everything journaled is durable: the rest, whatever its mark. */
	wire.durable = wire.last = 21;
	csrv_drain_deletions(&f->m, f->srv);
	assert_int_equal(wire.sent, 2);
	assert_int_equal(wire.first[1], 100);
	f->m.cl = NULL;
}

static void test_disconnect_requeues_in_flight(void **state)
{
	struct fixture *f = *state;

	queue(f, 1, MANY);
	f->srv->delete_credit = 1e9;
	csrv_drain_deletions(&f->m, f->srv);
	assert_int_equal(wire.sent, W);
	csrv_detach(&f->m, &f->conn);
	/* In flight: back in the queue, behind the rest, all still
	 * pending (not left to wait stray_grace as unknown files). */
	assert_int_equal(f->srv->del_inflight, 0);
	assert_int_equal(f->srv->del_batches, 0);
	assert_int_equal(csrv_deletes_pending(f->srv), MANY);
	assert_int_equal(f->m.cs->pending_deletes, MANY);
	/* Not connected: nothing is sent. */
	csrv_drain_deletions(&f->m, f->srv);
	assert_int_equal(wire.sent, W);
	/* Back: the ones never sent first, then those lost; the window
	 * full again, all still pending. */
	f->srv->conn = &f->conn;
	f->conn.link.csrv = 1;
	csrv_drain_deletions(&f->m, f->srv);
	assert_false(wire.bad);
	assert_int_equal(wire.sent, 2 * W);
	assert_int_equal(wire.first[W], W * B + 1);
	assert_int_equal(wire.ids[W], B);
	assert_int_equal(wire.first[W + 1], W * B + B + 1);
	assert_int_equal(csrv_deletes_pending(f->srv), MANY);
}

/* ---- registration --------------------------------------------------- */

static struct {
	int replies, errors;
} answered;

static void record_send(struct req *r, const ProtobufCMessage *reply,
			bool error)
{
	(void)r;
	(void)reply;
	if (error)
		answered.errors++;
	else
		answered.replies++;
}

/* The fixture's server registers with the @n chunks of @ids, each at
 * version 1, as a session of @role. */
static void reg(struct fixture *f, int role, const uint64_t *ids, size_t n)
{
	Sweepfs__CsRegisterReq q = SWEEPFS__CS_REGISTER_REQ__INIT;
	Sweepfs__ChunkInfo ci[8], *cp[8];
	struct session sess = { .role = role };
	struct req r = { .m = &f->m, .conn = &f->conn, .s = &sess };

	assert_true(n <= 8);
	for (size_t i = 0; i < n; i++) {
		sweepfs__chunk_info__init(&ci[i]);
		ci[i].chunk_id = ids[i];
		ci[i].version = 1;
		cp[i] = &ci[i];
	}
	q.listen = "cs1:9522";
	q.n_chunks = n;
	q.chunks = cp;
	csrv_op_register(&r, &q.base);
}

/*
 * A restarted master (or a group's new leader) sorts what a server
 * reports: copies of chunks it knows are copies; files of chunks its
 * metadata freed (below next_chunk_named, in no table) are queued at
 * once; files above every named chunk wait out stray_grace; a file
 * numbered 2^64-1 does not wrap next_chunk. A known chunk is never
 * queued.
 */
static void test_register_sorts_dead_and_unknown(void **state)
{
	struct fixture *f = *state;
	static struct req_hooks hooks;
	struct ns_create_args a = { .mode = S_IFREG | 0644, .now = 1 };
	const uint64_t ids[] = { 1, 4, 2, 100, UINT64_MAX, 3, 5 };
	struct node *file;

	assert_int_equal(ns_init(&f->m.ns, 1), 0);
	hooks = *f->m.req_hooks;
	hooks.send = record_send;
	req_wire(&f->m, &hooks);
	memset(&answered, 0, sizeof(answered));
	f->m.cfg.stray_grace_ms = 60000;
	a.ino = f->m.ns.next_ino;
	a.edge = f->m.ns.next_edge;
	assert_int_equal(ns_create(&f->m.ns, f->m.ns.root, "f", 1, &a, &file),
			 0);
	/* Chunks 1-4, then 5 replaces 4: freed with no copy known (the
	 * hook is not wired, as on a follower or before a restart). */
	for (uint32_t i = 0; i < 4; i++)
		assert_int_equal(ns_chunk_set(&f->m.ns, file, i, i + 1, 1), 0);
	assert_int_equal(ns_chunk_set(&f->m.ns, file, 3, 5, 1), 0);
	assert_null(chunk_get(&f->m.ns, 4));
	assert_int_equal(f->m.ns.next_chunk_named, 6);

	/* Not a chunkserver's session: refused, nothing changes. */
	reg(f, SWEEPFS__ROLE__ROLE_MOUNT, ids, SW_ARRAY_SIZE(ids));
	assert_int_equal(answered.errors, 1);
	assert_int_equal(csrv_deletes_pending(f->srv), 0);
	assert_int_equal(csrv_strays(f->srv), 0);

	reg(f, SWEEPFS__ROLE__ROLE_CHUNKSERVER, ids, SW_ARRAY_SIZE(ids));
	assert_int_equal(answered.replies, 1);
	assert_int_equal(csrv_deletes_pending(f->srv), 1);
	assert_int_equal(csrv_strays(f->srv), 2);
	assert_int_equal(f->srv->chunks, 4);
	for (uint64_t id = 1; id <= 5; id++)
		if (id != 4)
			assert_int_equal(chunk_get(&f->m.ns, id)->ncopies, 1);
	/* 100 keeps its id from being handed out; 2^64-1 does not. */
	assert_int_equal(f->m.ns.next_chunk, 101);
	f->srv->delete_credit = 1e9;
	csrv_drain_deletions(&f->m, f->srv);
	assert_false(wire.bad);
	assert_int_equal(wire.sent, 1);
	assert_int_equal(wire.ids[0], 1);
	assert_int_equal(wire.first[0], 4);
	/* Reported again (a reconnect): queued once, not twice. */
	reg(f, SWEEPFS__ROLE__ROLE_CHUNKSERVER, ids, SW_ARRAY_SIZE(ids));
	assert_int_equal(csrv_deletes_pending(f->srv), 1);

	/* A chunk named past the ids skipped for 100 (a master on old
	 * metadata, written to): 6-100 were never named here, so 100 is
	 * still an orphan that waits stray_grace, not dead (a hostile
	 * review found it deleted at once). */
	assert_int_equal(ns_chunk_set(&f->m.ns, file, 4, 101, 1), 0);
	assert_int_equal(f->m.ns.next_chunk_named, 102);
	assert_false(ns_chunk_dead(&f->m.ns, 100));
	assert_false(ns_chunk_dead(&f->m.ns, 6));
	assert_true(ns_chunk_dead(&f->m.ns, 4));
	reg(f, SWEEPFS__ROLE__ROLE_CHUNKSERVER, ids, SW_ARRAY_SIZE(ids));
	assert_int_equal(csrv_deletes_pending(f->srv), 1);
	ns_release(&f->m.ns);
}

/*
 * A copy over the goal is not trimmed while the writer's token may still
 * write: its lease ended a second ago, but the token of its grant lasts
 * CSRV_TOKEN_TTL_MS and the writer writes to the copies it was told.
 * Once the token ended the copy goes; and at once when the writer closed
 * the file (its lease ended: sesstab.c). (Replication checks the same,
 * lease_writable().)
 */
static void trim_after(struct fixture *f, bool release)
{
	struct csrv *two = calloc(1, sizeof(*two));
	struct chunk *c;

	assert_non_null(two);
	assert_int_equal(ns_init(&f->m.ns, 1), 0);
	two->id = 2;
	snprintf(two->listen, sizeof(two->listen), "cs2:9522");
	two->conn = &f->conn; /* "connected"; csrvs_release() frees it */
	f->m.cs->srv[2] = two;
	f->m.cs->n = 2;
	f->m.cfg.goal = 1;
	assert_int_equal(ns_load_chunk(&f->m.ns, 1, 1), 0);
	c = chunk_get(&f->m.ns, 1);
	for (uint32_t i = 0; i < 2; i++)
		c->copies[i] = (struct chunk_copy){ .srv = i + 1,
						    .version = 1,
						    .state = COPY_VALID };
	c->ncopies = 2;
	c->lease_session = 7;
	c->lease_until = sw_mono_ns() - SW_NSEC_PER_SEC;
	csrvs_tick(&f->m);
	assert_int_equal(c->ncopies, 2);
	if (release)
		c->lease_session = 0;
	else
		c->lease_until = sw_mono_ns() - 600 * SW_NSEC_PER_SEC;
	csrvs_tick(&f->m);
	assert_int_equal(c->ncopies, 1);
	assert_int_equal(
		csrv_deletes_pending(f->srv) + csrv_deletes_pending(two), 1);
	ns_release(&f->m.ns);
}

static void test_trim_waits_for_token(void **state)
{
	trim_after(*state, false);
}

static void test_trim_after_release(void **state)
{
	trim_after(*state, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_drain_batches_in_a_window,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_drain_within_delete_rate,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_drain_waits_for_durable,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_disconnect_requeues_in_flight, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trim_after_release, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_trim_waits_for_token,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_register_sorts_dead_and_unknown, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
