/*
 * replies.h: a change journaled with the request it answers is found by
 * session and request id, wherever it was applied (mutation_apply(), the
 * one path of the leader, followers and replay) and after a checkpoint;
 * a change without one, or one of another session, is not; a session
 * keeps its last REPLIES_PER_SESSION; an idle session is forgotten when
 * a new one starts, and at the cap the one changed least recently.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "checkpoint.h"
#include "mutation.h"
#include "namespace.h"
#include "replies.h"
#include "unit.h"

#define T0 (1700000000LL * 1000000000LL)

struct fixture {
	char dir[256];
	struct ns ns;
};

static unsigned long long next_name; /* names n0, n1, ... */

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	next_name = 0;
	if (!f || unit_mkdtemp(f->dir, sizeof(f->dir), "replies") < 0 ||
	    ns_init(&f->ns, T0) < 0) {
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	ns_release(&f->ns);
	unit_rm_rf(f->dir);
	free(f);
	return 0;
}

/* A digest for request @req of @session, as req_digest() would give. */
static void fake_digest(uint64_t session, uint64_t req,
			uint8_t out[REPLIES_DIGEST])
{
	for (int i = 0; i < 8; i++) {
		out[i] = (uint8_t)(session >> (8 * i));
		out[8 + i] = (uint8_t)(req >> (8 * i)) ^ 0xa5;
	}
}

/*
 * Apply a mkdir of a new name in the root of @ns at @time, answering
 * request @req of @session (0: none); returns the new inode number.
 */
static uint64_t mkdir_in(struct ns *ns, uint64_t session, uint64_t req,
			 int64_t time)
{
	Sweepfs__Meta__Mutation m = SWEEPFS__META__MUTATION__INIT;
	Sweepfs__Meta__Create c = SWEEPFS__META__CREATE__INIT;
	char name[32];
	uint64_t ino = ns->next_ino;

	snprintf(name, sizeof(name), "n%llu", next_name++);
	c.parent = NS_ROOT_INO;
	c.name.data = (uint8_t *)name;
	c.name.len = strlen(name);
	c.ino = ino;
	c.edge = ns->next_edge;
	c.mode = S_IFDIR | 0755;
	m.time = time;
	m.op_case = SWEEPFS__META__MUTATION__OP_CREATE;
	m.create = &c;
	uint8_t digest[REPLIES_DIGEST];

	if (session) {
		m.has_once_session = m.has_once_req = 1;
		m.once_session = session;
		m.once_req = req;
		fake_digest(session, req, digest);
		m.has_once_digest = 1;
		m.once_digest.data = digest;
		m.once_digest.len = sizeof(digest);
	}
	assert_int_equal(mutation_apply(ns, &m, ns->version + 1), 0);
	return ino;
}

static uint64_t mkdir_as(struct fixture *f, uint64_t session, uint64_t req,
			 int64_t time)
{
	return mkdir_in(&f->ns, session, req, time);
}

/* Apply an unlink of @name in the root for request @req of @session. */
static void unlink_as(struct fixture *f, const char *name, uint64_t session,
		      uint64_t req)
{
	Sweepfs__Meta__Mutation m = SWEEPFS__META__MUTATION__INIT;
	Sweepfs__Meta__Unlink u = SWEEPFS__META__UNLINK__INIT;

	u.parent = NS_ROOT_INO;
	u.name.data = (uint8_t *)name;
	u.name.len = strlen(name);
	m.time = T0;
	m.op_case = SWEEPFS__META__MUTATION__OP_UNLINK;
	m.unlink = &u;
	m.has_once_session = m.has_once_req = 1;
	m.once_session = session;
	m.once_req = req;
	assert_int_equal(mutation_apply(&f->ns, &m, f->ns.version + 1), 0);
}

static void test_found_by_session_and_id(void **state)
{
	struct fixture *f = *state;
	const struct reply_done *d;
	uint64_t ino, v;

	mkdir_as(f, 0, 0, T0); /* a change no request flagged */
	ino = mkdir_as(f, 7, 42, T0);
	v = f->ns.version;
	unlink_as(f, "n0", 7, 43);

	d = replies_find(&f->ns.replies, 7, 42);
	assert_non_null(d);
	assert_int_equal(d->ino, ino);
	assert_int_equal(d->version, v);
	{
		uint8_t want[REPLIES_DIGEST];

		fake_digest(7, 42, want);
		assert_memory_equal(d->digest, want, sizeof(want));
	}
	d = replies_find(&f->ns.replies, 7, 43);
	assert_non_null(d);
	assert_int_equal(d->ino, 0);
	assert_int_equal(d->version, v + 1);
	{
		static const uint8_t none[REPLIES_DIGEST];

		/* Journaled without a digest: one that matches nothing. */
		assert_memory_equal(d->digest, none, sizeof(none));
	}
	/* Not another session's, nor an id never seen. */
	assert_null(replies_find(&f->ns.replies, 8, 42));
	assert_null(replies_find(&f->ns.replies, 7, 41));
	assert_null(replies_find(&f->ns.replies, 0, 0));
}

static void test_failed_change_not_noted(void **state)
{
	struct fixture *f = *state;
	Sweepfs__Meta__Mutation m = SWEEPFS__META__MUTATION__INIT;
	Sweepfs__Meta__Unlink u = SWEEPFS__META__UNLINK__INIT;

	u.parent = NS_ROOT_INO;
	u.name.data = (uint8_t *)"absent";
	u.name.len = 6;
	m.time = T0;
	m.op_case = SWEEPFS__META__MUTATION__OP_UNLINK;
	m.unlink = &u;
	m.has_once_session = m.has_once_req = 1;
	m.once_session = 7;
	m.once_req = 1;
	assert_int_not_equal(mutation_apply(&f->ns, &m, f->ns.version + 1), 0);
	assert_null(replies_find(&f->ns.replies, 7, 1));
}

/* One request, several changes: the one that names a node answers. */
static void test_several_changes_one_request(void **state)
{
	struct fixture *f = *state;
	const struct reply_done *d;
	uint64_t ino;

	mkdir_as(f, 0, 0, T0);
	unlink_as(f, "n0", 3, 9);
	ino = mkdir_as(f, 3, 9, T0);
	d = replies_find(&f->ns.replies, 3, 9);
	assert_non_null(d);
	assert_int_equal(d->ino, ino);
}

static void test_ring_keeps_the_last(void **state)
{
	struct fixture *f = *state;
	const unsigned extra = 10;
	uint64_t first_kept = 0;

	for (unsigned i = 0; i < REPLIES_PER_SESSION + extra; i++) {
		uint64_t ino = mkdir_as(f, 5, 1000 + i, T0 + i);

		if (i == extra)
			first_kept = ino;
	}
	for (unsigned i = 0; i < extra; i++)
		assert_null(replies_find(&f->ns.replies, 5, 1000 + i));
	assert_int_equal(replies_find(&f->ns.replies, 5, 1000 + extra)->ino,
			 first_kept);
	assert_non_null(replies_find(&f->ns.replies, 5,
				     1000 + REPLIES_PER_SESSION + extra - 1));
}

static void test_idle_session_forgotten(void **state)
{
	struct fixture *f = *state;

	mkdir_as(f, 1, 1, T0);
	mkdir_as(f, 2, 1, T0 + REPLIES_IDLE_NS / 2);
	/* Session 1 went quiet long ago when 3 starts; 2 did not. */
	mkdir_as(f, 3, 1, T0 + REPLIES_IDLE_NS + 1);
	assert_null(replies_find(&f->ns.replies, 1, 1));
	assert_non_null(replies_find(&f->ns.replies, 2, 1));
	assert_non_null(replies_find(&f->ns.replies, 3, 1));
	/* A session that goes on is not forgotten, however old it is. */
	mkdir_as(f, 2, 2, T0 + 3 * REPLIES_IDLE_NS);
	assert_non_null(replies_find(&f->ns.replies, 2, 1));
}

static void test_cap_drops_least_recent(void **state)
{
	struct fixture *f = *state;

	f->ns.replies.max_sessions = 4;
	for (uint64_t s = 1; s <= 4; s++)
		mkdir_as(f, s, 1, T0);
	mkdir_as(f, 1, 2, T0); /* 1 is used again: 2 is now the oldest */
	mkdir_as(f, 5, 1, T0);
	assert_null(replies_find(&f->ns.replies, 2, 1));
	assert_non_null(replies_find(&f->ns.replies, 1, 1));
	assert_non_null(replies_find(&f->ns.replies, 1, 2));
	for (uint64_t s = 3; s <= 5; s++)
		assert_non_null(replies_find(&f->ns.replies, s, 1));
	mkdir_as(f, 6, 1, T0);
	assert_null(replies_find(&f->ns.replies, 3, 1));
	assert_int_equal(htab_count(&f->ns.replies.by_session), 4);
}

/* What a checkpoint held is found after loading it, in the same order. */
static void test_checkpoint_round_trip(void **state)
{
	struct fixture *f = *state;
	struct ns b;
	uint64_t version, ino = 0;

	for (unsigned i = 0; i < REPLIES_PER_SESSION + 3; i++)
		ino = mkdir_as(f, 11, i + 1, T0 + i);
	mkdir_as(f, 12, 77, T0);
	assert_int_equal(checkpoint_write(&f->ns, f->dir, f->ns.version), 0);
	assert_int_equal(ns_init(&b, 0), 0);
	assert_int_equal(checkpoint_load(&b, f->dir, &version), 0);
	assert_int_equal(version, f->ns.version);
	assert_null(replies_find(&b.replies, 11, 3));
	assert_non_null(replies_find(&b.replies, 11, 4));
	assert_int_equal(
		replies_find(&b.replies, 11, REPLIES_PER_SESSION + 3)->ino,
		ino);
	{
		uint8_t want[REPLIES_DIGEST];

		/* The digest comes back with it (format 6). */
		fake_digest(12, 77, want);
		assert_memory_equal(replies_find(&b.replies, 12, 77)->digest,
				    want, sizeof(want));
	}
	assert_non_null(replies_find(&b.replies, 12, 77));
	/* The ring goes on where it was: the next change pushes out the
	 * oldest kept one. */
	mkdir_in(&b, 11, 9999, T0 + 9999);
	assert_null(replies_find(&b.replies, 11, 4));
	ns_release(&b);
	/* ... and so does the order of the sessions: 12 was changed after
	 * 11, so 11 goes first at the cap. */
	assert_int_equal(ns_init(&b, 0), 0);
	assert_int_equal(checkpoint_load(&b, f->dir, &version), 0);
	b.replies.max_sessions = 2;
	mkdir_in(&b, 13, 1, T0 + 10000);
	assert_null(replies_find(&b.replies, 11, REPLIES_PER_SESSION + 3));
	assert_non_null(replies_find(&b.replies, 12, 77));
	assert_non_null(replies_find(&b.replies, 13, 1));
	ns_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_found_by_session_and_id,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_change_not_noted,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_several_changes_one_request, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ring_keeps_the_last, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_idle_session_forgotten,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_cap_drops_least_recent,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_round_trip,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
