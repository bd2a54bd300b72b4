/*
 * csrv.c's deletion queue: deletions leave in DELETE_BATCH commands of at
 * most 512 chunks, four in flight per server, within delete_rate's
 * credit, only once the change that queued them is durable; they count
 * as pending until acknowledged, and those lost with a connection go
 * back to the queue.
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
#include "master.h"
#include "server.h"
#include "unit.h"

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
	f->conn.csrv = 1;
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

static void test_drain_batches_in_a_window(void **state)
{
	struct fixture *f = *state;

	queue(f, 1, 5000);
	assert_int_equal(csrv_deletes_pending(f->srv), 5000);
	f->srv->delete_credit = 1e9;
	csrv_drain_deletions(&f->m, f->srv);
	assert_false(wire.bad);
	/* Four batches of 512, in queue order; the rest waits. */
	assert_int_equal(wire.sent, 4);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(wire.ids[i], 512);
		assert_int_equal(wire.first[i], 1 + 512 * i);
	}
	/* Sent is not done: all still pending, 2048 of them in flight. */
	assert_int_equal(csrv_deletes_pending(f->srv), 5000);
	assert_int_equal(f->srv->del_inflight, 2048);
	assert_int_equal(f->m.cs->pending_deletes, 5000);
	/* The window is full: nothing more until an acknowledgement. */
	csrv_drain_deletions(&f->m, f->srv);
	assert_int_equal(wire.sent, 4);
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

	queue(f, 1, 3000);
	f->srv->delete_credit = 1e9;
	csrv_drain_deletions(&f->m, f->srv);
	assert_int_equal(wire.sent, 4);
	csrv_detach(&f->m, &f->conn);
	/* In flight: back in the queue, behind the rest, all still
	 * pending (not left to wait stray_grace as unknown files). */
	assert_int_equal(f->srv->del_inflight, 0);
	assert_int_equal(f->srv->del_batches, 0);
	assert_int_equal(csrv_deletes_pending(f->srv), 3000);
	assert_int_equal(f->m.cs->pending_deletes, 3000);
	/* Not connected: nothing is sent. */
	csrv_drain_deletions(&f->m, f->srv);
	assert_int_equal(wire.sent, 4);
	/* Back: the ones never sent first, then those lost; the window
	 * full again, all still pending. */
	f->srv->conn = &f->conn;
	f->conn.csrv = 1;
	csrv_drain_deletions(&f->m, f->srv);
	assert_false(wire.bad);
	assert_int_equal(wire.sent, 8);
	assert_int_equal(wire.first[4], 2049);
	assert_int_equal(wire.ids[5], 512);
	assert_int_equal(csrv_deletes_pending(f->srv), 3000);
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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
