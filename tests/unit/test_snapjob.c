/*
 * What a snapshot costs others (threat model, finding 13):
 *  - which write leases it takes back (dataops.c, told by the copy
 *    through ns->chunk_shared): those of the chunks its copy takes whose
 *    token may still write, and no others; a copy of a tree with no
 *    leased file notes nothing;
 *  - how many snapshots may wait (snapjob_admit()): SNAPJOB_USER_MAX of
 *    a user however many sessions it has, SNAPJOB_QUEUE_MAX in all but
 *    for admins, -EAGAIN past; in which order (users take turns); and
 *    that one whose connection closed is dropped at its turn.
 *
 * The queue is filled with the master stopping, so that no job starts
 * (none needs the changelog); the request layer's hooks count what is
 * answered, and record the commands sent to chunkservers; the journal
 * (master_commit()) is wrapped (-Wl,--wrap): the version bumps that take
 * leases back are recorded instead of journaled.
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

#include "buf.h"
#include "csrv.h"
#include "dataops.h"
#include "master.h"
#include "handlers.h"
#include "mutation.h"
#include "namespace_i.h"
#include "perm.h"
#include "req.h"
#include "sessrec.h"
#include "sesstab.h"
#include "snapjob.h"
#include "unit.h"
#include "unit_master.h"
#include "unit_ns.h"
#include "util.h"

#define SEC SW_NSEC_PER_SEC

struct fixture {
	struct master m;    /* first: unit_master_teardown() */
	struct csrv srv[2]; /* one "connected" */
	uv_loop_t loop;
	bool stopped;	  /* snapjob_stop() ran (it closes handles) */
	unsigned replies; /* replies sent, errors or not */
	bool located;	  /* the last CHUNK reply had a location */
	unsigned errors;  /* error replies sent */
	int last_err;
	bool stop_on_error;   /* an error reply sets m.stopping */
	unsigned commits;     /* records master_commit() was given */
	unsigned resumes;     /* connections told to read again */
	struct req_link link; /* every connection's: chunkserver 1 */
	/* Version bumps journaled (chunk, new version), SET_VERSION and
	 * TRUNCATE commands sent (chunk, from, to; the last one's id), and
	 * DUPLICATE commands sent (the last one's id). */
	unsigned bumps;
	uint64_t bump_chunk;
	uint32_t bump_version;
	unsigned cmds, dups;
	uint64_t cmd_id, dup_id, cmd_chunk;
	uint64_t any_cmd_id; /* the last command of any kind */
	uint32_t cmd_from, cmd_to;
};

static struct fixture *current;

int __wrap_master_commit(struct master *m, struct req *r,
			 const Sweepfs__Meta__Mutation *mut);

int __wrap_master_commit(struct master *m, struct req *r,
			 const Sweepfs__Meta__Mutation *mut)
{
	(void)r;
	current->commits++;
	if (mut->op_case == SWEEPFS__META__MUTATION__OP_CHUNK_VERSION &&
	    !mut->chunk_version->done) {
		current->bumps++;
		current->bump_chunk = mut->chunk_version->chunk_id;
		current->bump_version = mut->chunk_version->version;
	}
	/* Chunk changes are applied, as the master does (their intents
	 * open and close); nothing is journaled. */
	if (mut->op_case == SWEEPFS__META__MUTATION__OP_CHUNK_VERSION ||
	    mut->op_case == SWEEPFS__META__MUTATION__OP_CHUNK_SET)
		return mutation_apply(&m->ns, mut, ++m->ns.version);
	return 0;
}

static void hook_notify(struct conn *c, uint16_t type,
			const ProtobufCMessage *msg)
{
	const Sweepfs__CsCommand *q = (const void *)msg;

	(void)c;
	if (type == SW_MSG_CS_COMMAND)
		current->any_cmd_id = q->id;
	if (type == SW_MSG_CS_COMMAND &&
	    q->op == SWEEPFS__CS_COMMAND__OP__DUPLICATE) {
		current->dups++;
		current->dup_id = q->id;
	}
	if (type != SW_MSG_CS_COMMAND ||
	    (q->op != SWEEPFS__CS_COMMAND__OP__SET_VERSION &&
	     q->op != SWEEPFS__CS_COMMAND__OP__TRUNCATE))
		return;
	current->cmds++;
	current->cmd_id = q->id;
	current->cmd_chunk = q->chunk_id;
	current->cmd_from = q->old_version;
	current->cmd_to = q->version;
}

static struct req_link *hook_link(struct conn *c)
{
	(void)c;
	return &current->link;
}

static void hook_send(struct req *r, const ProtobufCMessage *reply, bool error)
{
	(void)r;
	current->replies++;
	if (reply->descriptor == &sweepfs__chunk_reply__descriptor)
		current->located = ((const Sweepfs__ChunkReply *)reply)->loc !=
				   NULL;
	if (error) {
		current->errors++;
		current->last_err =
			(int)((const Sweepfs__StatusReply *)reply)->err;
		if (current->stop_on_error)
			current->m.stopping = true;
	}
}

static void hook_hold(struct conn *c, bool hold)
{
	(void)c, (void)hold;
}

/* (data_tick() redoes nothing here: as on a follower.) */
static bool hook_serving(const struct master *m)
{
	(void)m;
	return false;
}

/* A request's connection has no session here. */
static struct session *hook_session(const struct conn *c)
{
	(void)c;
	return NULL;
}

static void hook_resume(struct req_link *l)
{
	(void)l;
	current->resumes++;
}

static const struct req_hooks hooks = {
	.send = hook_send,
	.serving = hook_serving,
	.session = hook_session,
	.resume = hook_resume,
	.hold = hook_hold,
	.notify = hook_notify,
	.link = hook_link,
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || unit_master_init(&f->m, f->srv, 1) < 0) {
		free(f);
		return -1;
	}
	uv_loop_init(&f->loop);
	f->m.loop = &f->loop;
	req_wire(&f->m, &hooks);
	if (snapjob_init(&f->m) < 0) {
		unit_master_release(&f->m);
		free(f);
		return -1;
	}
	/* Jobs queue and none starts. */
	f->m.stopping = true;
	f->link.csrv = 1;
	current = f;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (!f->stopped)
		snapjob_stop(&f->m);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	uv_loop_close(&f->loop);
	snapjob_release(&f->m);
	data_stop(&f->m);
	return unit_master_teardown(state);
}

/* Queue a snapshot of @src as @name in the root for session @s. */
static int submit_of(struct fixture *f, struct session *s, uint32_t uid,
		     uint64_t src, const char *name, bool admin)
{
	struct req r = { .m = &f->m, .s = s };

	return snapjob_submit(&f->m, &r, uid, src, NS_ROOT_INO, name,
			      strlen(name), admin);
}

/* The same of the root (refused when its turn comes: into itself). */
static int submit(struct fixture *f, struct session *s, uint32_t uid,
		  const char *name, bool admin)
{
	return submit_of(f, s, uid, NS_ROOT_INO, name, admin);
}

/* One user's sessions share its cap (threat model, finding 22). */
static void test_admit_per_user(void **state)
{
	struct fixture *f = *state;
	struct session a = { .id = 1 }, a2 = { .id = 2 }, b = { .id = 3 };

	for (int i = 0; i < SNAPJOB_USER_MAX; i++)
		assert_int_equal(submit(f, i % 2 ? &a2 : &a, 1000, "a", false),
				 0);
	assert_int_equal(submit(f, &a, 1000, "a", false), -EAGAIN);
	assert_int_equal(submit(f, &a2, 1000, "a", false), -EAGAIN);
	/* Another user, from the same session or another, and an admin
	 * with the same uid, have caps of their own. */
	assert_int_equal(submit(f, &a, 1001, "b", false), 0);
	assert_int_equal(submit(f, &b, 1000, "c", true), 0);
	assert_int_equal(snapjob_waiting(&f->m), SNAPJOB_USER_MAX + 2);
	assert_int_equal(f->errors, 0);
}

static void test_admit_global(void **state)
{
	struct fixture *f = *state;
	enum { N = SNAPJOB_QUEUE_MAX / SNAPJOB_USER_MAX };
	struct session s = { .id = 100 };

	for (uint32_t i = 0; i < N; i++)
		for (int k = 0; k < SNAPJOB_USER_MAX; k++)
			assert_int_equal(submit(f, &s, 2000 + i, "x", false),
					 0);
	assert_int_equal(snapjob_waiting(&f->m), SNAPJOB_QUEUE_MAX);
	assert_int_equal(submit(f, &s, 3000, "y", false), -EAGAIN);
	assert_int_equal(snapjob_admit(&f->m, 3000, false), -EAGAIN);
	/* Admins are not refused by the global cap, only their own. */
	for (int k = 0; k < SNAPJOB_USER_MAX; k++)
		assert_int_equal(submit(f, &s, 0, "z", true), 0);
	assert_int_equal(submit(f, &s, 0, "z", true), -EAGAIN);
	assert_int_equal(snapjob_waiting(&f->m),
			 SNAPJOB_QUEUE_MAX + SNAPJOB_USER_MAX);
	/* Stopping answers every waiting one. */
	snapjob_stop(&f->m);
	f->stopped = true;
	assert_int_equal(f->errors, SNAPJOB_QUEUE_MAX + SNAPJOB_USER_MAX);
	assert_int_equal(f->last_err, ECANCELED);
	assert_int_equal(snapjob_waiting(&f->m), 0);
}

/*
 * Users take turns: a user who queued 8 delays another's next snapshot
 * by one copy, not by 8 (it used to be first in, first out).
 */
static void test_users_take_turns(void **state)
{
	struct fixture *f = *state;
	struct session s = { .id = 1 };
	static const uint32_t want[] = { 10, 20, 30, 10, 20, 10,
					 10, 10, 10, 10, 10 };
	uint32_t got[16];

	for (int i = 0; i < 8; i++)
		assert_int_equal(submit(f, &s, 10, "a", false), 0);
	assert_int_equal(submit(f, &s, 20, "b", false), 0);
	assert_int_equal(submit(f, &s, 20, "b", false), 0);
	assert_int_equal(submit(f, &s, 30, "c", false), 0);
	assert_int_equal(snapjob_order(&f->m, got, 16), SW_ARRAY_SIZE(want));
	assert_memory_equal(got, want, sizeof(want));
}

/*
 * When a user's job leaves the queue, its others move up a turn: else a
 * user who keeps one snapshot waiting at a time is always queued ahead
 * of another's second one, which then never runs (the third review's
 * starvation).
 */
static void test_turns_move_up(void **state)
{
	struct fixture *f = *state;
	struct session closed = { .id = 1 };
	static const uint32_t want[] = { 30, 20, 10 };
	uint32_t got[8], left[2];

	/* 20's first (its connection closed: dropped at its turn), 10's
	 * (sessionless, refused at its turn), 20's second in turn 1. */
	assert_int_equal(submit(f, &closed, 20, "b", false), 0);
	assert_int_equal(submit(f, NULL, 10, "a", false), 0);
	assert_int_equal(submit(f, &closed, 20, "b", false), 0);
	/* Jobs run from the next submit until 10's is refused. */
	f->m.stopping = false;
	f->stop_on_error = true;
	assert_int_equal(submit(f, NULL, 30, "c", false), 0);
	assert_int_equal(f->errors, 1);
	assert_int_equal(snapjob_order(&f->m, left, 2), 2);
	assert_int_equal(left[0], 30);
	assert_int_equal(left[1], 20);
	/* 20's second is now in turn 0: 10's next comes after it. */
	assert_int_equal(submit(f, NULL, 10, "a", false), 0);
	assert_int_equal(snapjob_order(&f->m, got, 8), SW_ARRAY_SIZE(want));
	assert_memory_equal(got, want, sizeof(want));
}

/* A snapshot whose connection closed before its turn is dropped then,
 * unanswered and uncopied (its session's client sends it again). */
static void test_closed_dropped(void **state)
{
	struct fixture *f = *state;
	struct session s = { .id = 1 };
	struct node *d =
		unit_mk(&f->m.ns, f->m.ns.root, "d", S_IFDIR | 0755, 1);

	/* (No connection here: as one that closed, req_session() is
	 * NULL.) Each could be copied: a job not dropped journals its
	 * copy's first record. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(submit_of(f, &s, 10, d->ino, "a", false), 0);
	assert_int_equal(snapjob_waiting(&f->m), 3);
	f->m.stopping = false;
	assert_int_equal(submit_of(f, &s, 10, d->ino, "a", false), 0);
	f->m.stopping = true;
	assert_int_equal(snapjob_waiting(&f->m), 0);
	assert_int_equal(f->errors, 0);
	assert_int_equal(f->commits, 0); /* nothing journaled */
	assert_null(ns_lookup(&f->m.ns, f->m.ns.root, "a", 1));
}

/* ---- which leases --------------------------------------------------- */

static uint64_t next_chunk = 1;

/* A file @name in @dir with one chunk; the chunk. */
static struct chunk *file_with_chunk(struct fixture *f, struct node *dir,
				     const char *name)
{
	struct node *n = unit_mk(&f->m.ns, dir, name, S_IFREG | 0644, 1);
	/* (Past those the master made, too.) */
	uint64_t id = SW_MAX(next_chunk, f->m.ns.next_chunk);

	next_chunk = id + 1;
	assert_int_equal(ns_chunk_set(&f->m.ns, n, 0, id, 1), 0);
	f->m.ns.next_chunk = next_chunk;
	return chunk_get(&f->m.ns, id);
}

/* Copy @src as @name, as snapjob.c does for a small tree. */
static void copy(struct fixture *f, struct node *src, const char *name)
{
	struct sw_buf b = SW_BUF_INIT;
	uint64_t id = f->m.ns.version + 1, ino;

	assert_int_equal(ns_copy_image(&f->m.ns, src, &b), 0);
	assert_int_equal(ns_copy_begin(&f->m.ns, id, NS_ROOT_INO, name,
				       strlen(name), f->m.ns.next_chunk),
			 0);
	assert_int_equal(ns_copy_part(&f->m.ns, id, sw_buf_head(&b),
				      sw_buf_used(&b), f->m.ns.next_ino,
				      f->m.ns.next_edge),
			 0);
	assert_true(ns_copy_end(&f->m.ns, id, f->m.ns.next_edge, 0, 2, &ino) >
		    0);
	sw_buf_release(&b);
}

/* Copies tell the data layer, as master.c wires it. */
static void wire(struct fixture *f)
{
	f->m.ns.hook_arg = &f->m;
	f->m.ns.chunk_shared = data_chunk_shared;
}

static void lease(struct chunk *c, int64_t until)
{
	c->lease_session = 7;
	c->lease_until = until;
	/* Commands in flight: a revocation waits for them (revoke_from),
	 * and sends nothing here. */
	c->busy = 1;
}

static void test_copy_takes_back_its_own_leases(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct node *a = unit_mk(ns, ns->root, "a", S_IFDIR | 0755, 1);
	struct node *b = unit_mk(ns, ns->root, "b", S_IFDIR | 0755, 1);
	struct node *sub = unit_mk(ns, a, "sub", S_IFDIR | 0755, 1);
	struct node *empty = unit_mk(ns, ns->root, "e", S_IFDIR | 0755, 1);
	struct chunk *in = file_with_chunk(f, sub, "f");
	struct chunk *plain = file_with_chunk(f, a, "g");
	struct chunk *out = file_with_chunk(f, b, "h");
	int64_t now = sw_mono_ns();

	wire(f);
	lease(in, now + 30 * SEC);
	lease(out, now + 30 * SEC);
	/* A tree with no leased file: nothing noted, nothing ended. */
	copy(f, empty, "e1");
	copy(f, b, "b1");
	/* (b's copy took h's chunk: noted; ended below with a's.) */
	assert_int_equal(f->m.data->shared.n, 1);
	f->m.data->shared.n = 0;
	copy(f, a, "a1");
	assert_int_equal(f->m.data->shared.n, 1);
	assert_int_equal(f->m.data->shared.id[0], in->id);
	data_revoke_shared(&f->m);
	assert_int_equal(f->m.data->shared.n, 0);
	/* (Busy: taken back when its commands end, and waited for.) */
	assert_int_equal(in->revoke_from, in->version);
	assert_int_equal(out->revoke_from, 0);
	assert_int_equal(plain->revoke_from, 0);
	assert_int_equal(f->m.data->revoking, 1);
	/* A file's chunk is shared by the copy. */
	assert_int_equal(in->refs, 2);
	assert_int_equal(out->refs, 2);
}

static void test_token_alive_is_leased(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct node *d = unit_mk(ns, ns->root, "d", S_IFDIR | 0755, 1);
	struct chunk *live = file_with_chunk(f, d, "live");
	struct chunk *token = file_with_chunk(f, d, "token");
	struct chunk *gone = file_with_chunk(f, d, "gone");
	struct chunk *none = file_with_chunk(f, d, "none");
	int64_t now = sw_mono_ns();

	wire(f);
	lease(live, now + 30 * SEC);
	/* The lease ran out a second ago, granted 61 s ago: its token has
	 * nine minutes left, and a mount writes with it without asking. */
	lease(token, now - 1 * SEC);
	/* Granted 11 minutes ago: its token is dead too. */
	lease(gone, now - 600 * SEC);
	copy(f, d, "d1");
	assert_int_equal(f->m.data->shared.n, 2);
	data_revoke_shared(&f->m);
	assert_int_equal(live->revoke_from, live->version);
	assert_int_equal(token->revoke_from, token->version);
	assert_int_equal(gone->revoke_from, 0);
	assert_int_equal(none->revoke_from, 0);
	assert_int_equal(f->m.data->revoking, 2);
}

/*
 * A lease whose writer closed the file, or whose session ended, ends: a
 * snapshot of the file takes nothing back (no version bump per file of a
 * tree written in the last 10 minutes), and copies and trims need not
 * wait for its token (threat model, 20: what a forged client that keeps
 * its token could do is left so).
 */
static void test_closed_lease_ends(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct node *d = unit_mk(ns, ns->root, "d", S_IFDIR | 0755, 1);
	struct node *n = unit_mk(ns, d, "f", S_IFREG | 0644, 1);
	struct node *g = unit_mk(ns, d, "g", S_IFREG | 0644, 1);
	struct session s = { .id = 7 };
	int64_t now = sw_mono_ns();
	struct chunk *c, *gc;

	wire(f);
	assert_int_equal(ns_chunk_set(ns, n, 0, next_chunk, 1), 0);
	c = chunk_get(ns, next_chunk++);
	assert_int_equal(ns_chunk_set(ns, g, 0, next_chunk, 1), 0);
	gc = chunk_get(ns, next_chunk++);
	ns->next_chunk = next_chunk;
	assert_int_equal(session_open(&f->m, &s, n, PERM_R | PERM_W), 0);
	assert_int_equal(session_open(&f->m, &s, g, PERM_W), 0);
	data_lease(&f->m, c, 7);
	data_lease(&f->m, gc, 7);
	assert_true(lease_writable(c, now));
	session_release(&f->m, &s, n->ino);
	assert_int_equal(c->lease_session, 0);
	assert_false(lease_writable(c, now));
	/* The session ends with g open: the same. */
	session_opens_drop(&f->m, &s);
	assert_int_equal(gc->lease_session, 0);
	assert_false(lease_writable(gc, now));
	copy(f, d, "d1");
	assert_int_equal(f->m.data->shared.n, 0);
	data_revoke_leases(&f->m);
	assert_int_equal(f->m.data->revoking, 0);
	assert_int_equal(f->cmds, 0);
	htab_release(&s.opens);
}

/*
 * A leased chunk with nothing in flight: taking its lease back bumps its
 * version, journaled and sent to the server holding its copy, and the
 * snapshot waits for it (m->data->revoking) until the command ends.
 */
static void test_take_back_bumps(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct node *a = unit_mk(ns, ns->root, "a", S_IFDIR | 0755, 1);
	struct chunk *in = file_with_chunk(f, a, "f");
	uint32_t v = in->version;

	wire(f);
	in->copies[0] = (struct chunk_copy){ .srv = 1,
					     .version = v,
					     .state = COPY_VALID };
	in->ncopies = 1;
	in->lease_session = 7;
	in->lease_until = sw_mono_ns() + 30 * SEC;
	copy(f, a, "a1");
	data_revoke_shared(&f->m);
	assert_int_equal(in->lease_session, 7); /* until the bump is done */
	assert_int_equal(f->bumps, 1);
	assert_int_equal(f->bump_chunk, in->id);
	assert_int_equal(f->bump_version, v + 1);
	assert_int_equal(f->cmds, 1);
	assert_int_equal(f->cmd_chunk, in->id);
	assert_int_equal(f->cmd_from, v);
	assert_int_equal(f->cmd_to, v + 1);
	assert_int_equal(in->busy, 1);
	assert_int_equal(f->m.data->revoking, 1);
	assert_int_equal(f->m.data->revoked, 1);
	/* The server goes: the command fails, nothing waits any more,
	 * the lease stands, and the snapshot is to be given up. */
	csrv_detach(&f->m, f->srv[1].conn);
	assert_int_equal(f->m.data->revoking, 0);
	assert_int_equal(in->busy, 0);
	assert_int_equal(in->lease_session, 7);
	assert_int_equal(f->m.data->revoke_failed, -EIO);
}

/* Chunkserver 1 says command @id is done, with error @err (0: done). */
static void cs_done(struct fixture *f, uint64_t id, int err)
{
	Sweepfs__CsDoneReq q = SWEEPFS__CS_DONE_REQ__INIT;
	struct req r = { .m = &f->m, .conn = f->srv[1].conn };

	q.id = id;
	q.has_err = err != 0;
	q.err = err;
	csrv_op_done(&r, &q.base);
}

/* A leased file's chunk with its one copy on chunkserver 1. */
static struct chunk *leased_on_one(struct fixture *f, struct node *dir,
				   const char *name)
{
	struct chunk *c = file_with_chunk(f, dir, name);

	c->copies[0] = (struct chunk_copy){ .srv = 1,
					    .version = c->version,
					    .state = COPY_VALID };
	c->ncopies = 1;
	c->lease_session = 7;
	c->lease_until = sw_mono_ns() + 30 * SEC;
	return c;
}

/* Truncate @dir/@name to 100 bytes: its chunk's bump, or its copy if it
 * is shared, is sent and waits for the chunkserver. */
static void truncate_in(struct fixture *f, struct node *dir, const char *name)
{
	struct node *n = ns_lookup(&f->m.ns, dir, name, strlen(name))->child;
	struct req r = { .m = &f->m };

	n->size = 100;
	assert_int_equal(data_truncated(&r, n, 4096), 0);
}

/*
 * Threat model, finding 19: a leased chunk busy with commands when a
 * copy takes it. Its lease is taken back once they end, and until then
 * the snapshot waits (m->data->revoking): its reply used to go out at
 * once, while the writer's token still wrote in place. A bump in flight
 * moves it on (nothing more is sent); a duplicate read from it does not,
 * and it is moved on when that ends.
 */
static void test_busy_lease_waits_for_commands(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct node *a = unit_mk(ns, ns->root, "a", S_IFDIR | 0755, 1);
	struct chunk *c = leased_on_one(f, a, "f");
	uint32_t v = c->version;
	uint64_t first;

	wire(f);
	/* A first snapshot: its bump is in flight, the chunk busy. */
	copy(f, a, "a1");
	data_revoke_shared(&f->m);
	assert_int_equal(f->cmds, 1);
	assert_int_equal(c->busy, 1);
	assert_int_equal(c->version, v + 1);
	first = f->cmd_id;
	/* A token still live (as if granted again), and a second snapshot
	 * takes the chunk: it waits for the bump, and sends nothing. */
	c->lease_session = 7;
	c->lease_until = sw_mono_ns() + 30 * SEC;
	copy(f, a, "a2");
	data_revoke_shared(&f->m);
	assert_int_equal(f->cmds, 1);
	assert_int_equal(c->revoke_from, v);
	assert_int_equal(f->m.data->revoking, 2);
	cs_done(f, first, 0);
	assert_int_equal(f->cmds, 1);
	assert_int_equal(c->revoke_from, 0);
	assert_int_equal(f->m.data->revoking, 0);
	assert_int_equal(f->m.data->revoke_failed, 0);

	/* A truncation of the shared file duplicates the chunk, reading
	 * from it: busy, at the version tokens name. */
	truncate_in(f, a, "f");
	assert_int_equal(c->busy, 1);
	assert_int_equal(f->dups, 1);
	c->lease_session = 7;
	c->lease_until = sw_mono_ns() + 30 * SEC;
	copy(f, ns_lookup(ns, ns->root, "a1", 2)->child, "a3");
	data_revoke_shared(&f->m);
	assert_int_equal(c->revoke_from, v + 1);
	assert_int_equal(f->m.data->revoking, 1);
	assert_int_equal(f->cmds, 1);
	/* The duplicate ends: the chunk is moved on now. */
	cs_done(f, f->dup_id, 0);
	assert_int_equal(f->cmds, 2);
	assert_int_equal(f->cmd_chunk, c->id);
	assert_int_equal(f->cmd_from, v + 1);
	assert_int_equal(f->m.data->revoking, 1);
	cs_done(f, f->cmd_id, 0);
	assert_int_equal(f->m.data->revoking, 0);
	assert_int_equal(f->m.data->revoke_failed, 0);
	assert_int_equal(c->version, v + 2);
	assert_int_equal(c->lease_session, 0); /* taken back */
}

/*
 * Threat model, finding 21: a lease that cannot be taken back is not
 * reported as taken back. A bump whose every command fails moves
 * nothing, and with no copy up the next cannot start: both leave
 * m->data->revoke_failed for the snapshot to give up (snapjob.c).
 */
static void test_lease_not_taken_back_fails(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct node *a = unit_mk(ns, ns->root, "a", S_IFDIR | 0755, 1);
	struct chunk *c = leased_on_one(f, a, "f"), *g;

	wire(f);
	copy(f, a, "a1");
	data_revoke_shared(&f->m);
	assert_int_equal(f->cmds, 1);
	assert_int_equal(f->m.data->revoke_failed, 0);
	cs_done(f, f->cmd_id, EIO);
	assert_int_equal(f->m.data->revoking, 0);
	assert_int_equal(f->m.data->revoke_failed, -EIO);
	/* The lease stays: a snapshot asked again at once (the given-up
	 * one's finish() cleared the failure) is given up too. */
	assert_int_equal(c->lease_session, 7);
	assert_true(lease_writable(c, sw_mono_ns()));
	f->m.data->revoke_failed = 0;
	/* The copy went stale on the failed command: none is up. */
	copy(f, a, "a2");
	data_revoke_shared(&f->m);
	assert_int_equal(f->cmds, 1);
	assert_int_equal(f->m.data->revoking, 0);
	assert_int_equal(f->m.data->revoke_failed, -EIO);
	assert_int_equal(c->lease_session, 7);
	/* At a big copy's fork the failure gives nothing up (the part
	 * that takes the chunk tries again), and the lease stays. */
	f->m.data->revoke_failed = 0;
	data_lease(&f->m, c, 7);
	data_revoke_leases(&f->m);
	assert_int_equal(f->m.data->revoke_failed, 0);
	assert_int_equal(c->lease_session, 7);

	/* A truncation's bump fails while a revocation waits for it: its
	 * change stays open, and the copy may be at the leased version. */
	f->m.data->revoke_failed = 0;
	g = leased_on_one(f, a, "g");
	truncate_in(f, a, "g");
	assert_int_equal(f->cmds, 2);
	copy(f, a, "a3");
	data_revoke_shared(&f->m);
	assert_int_equal(g->revoke_from, g->version - 1);
	assert_int_equal(f->m.data->revoking, 1);
	cs_done(f, f->cmd_id, EIO);
	assert_int_equal(f->m.data->revoking, 0);
	assert_int_equal(f->m.data->revoke_failed, -EIO);
}

/* The master's chunk_gone hook, but for queueing the chunk's deletion
 * (which the fixture's servers do not free). */
static void gone(void *arg, const struct chunk *c)
{
	data_chunk_gone(arg, c);
}

/*
 * A file unlinked while its chunk's commands run, the chunk kept by a
 * snapshot that waits to take its lease back: when they end the chunk is
 * idle, the revocation resolved, and nothing waits for ever (every later
 * snapshot queued behind it did, until a restart). And a chunk freed
 * while a revocation waits on it takes its count with it.
 */
static void test_unlinked_while_busy(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct node *a = unit_mk(ns, ns->root, "a", S_IFDIR | 0755, 1);
	struct chunk *g = leased_on_one(f, a, "g");
	uint64_t id = g->id;

	wire(f);
	f->m.ns.chunk_gone = gone;
	truncate_in(f, a, "g");
	assert_int_equal(g->busy, 1);
	copy(f, a, "a1");
	data_revoke_shared(&f->m);
	assert_int_equal(f->m.data->revoking, 1);
	assert_int_equal(ns_unlink(ns, a, "g", 1, false, 0), 0);
	g = chunk_get(ns, id);
	assert_non_null(g);
	cs_done(f, f->cmd_id, 0);
	assert_int_equal(g->busy, 0);
	assert_int_equal(g->revoke_from, 0);
	assert_int_equal(f->m.data->revoking, 0);
	assert_int_equal(f->m.data->revoke_failed, 0);

	/* Again, and the snapshot's file goes too: the chunk is freed. */
	g = leased_on_one(f, a, "h");
	id = g->id;
	truncate_in(f, a, "h");
	copy(f, a, "a2");
	data_revoke_shared(&f->m);
	assert_int_equal(f->m.data->revoking, 1);
	assert_int_equal(ns_unlink(ns, a, "h", 1, false, 0), 0);
	assert_int_equal(ns_unlink(ns, ns_lookup(ns, ns->root, "a2", 2)->child,
				   "h", 1, false, 0),
			 0);
	assert_null(chunk_get(ns, id));
	assert_int_equal(f->m.data->revoking, 0);
	cs_done(f, f->cmd_id, 0);
	assert_int_equal(f->m.data->revoking, 0);
}

/* CHUNK for @ino's first chunk, by root on no session (as a request
 * whose session has not the file open, and may read it), from connection
 * @conn (NULL: none; any other: the fixture's link). */
static void ask_chunk_on(struct fixture *f, struct conn *conn, uint64_t ino,
			 bool write)
{
	Sweepfs__ChunkReq q = SWEEPFS__CHUNK_REQ__INIT;
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;
	struct req r = { .m = &f->m, .conn = conn };

	q.ino = ino;
	q.write = write;
	q.cred = &cred;
	op_chunk(&r, &q.base);
}

static void ask_chunk(struct fixture *f, uint64_t ino, bool write)
{
	Sweepfs__ChunkReq q = SWEEPFS__CHUNK_REQ__INIT;
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;
	struct req r = { .m = &f->m };

	q.ino = ino;
	q.write = write;
	q.cred = &cred;
	op_chunk(&r, &q.base);
}

/*
 * A request that waits for a chunk's commands, and the chunk is freed
 * under them (its file removed): it is run again at the next tick, and
 * answered (its file is gone). It used to wait for ever, and its memory
 * went with nothing to free it.
 */
static void test_waiter_of_freed_chunk(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct node *a = unit_mk(ns, ns->root, "a", S_IFDIR | 0755, 1);
	struct chunk *c = leased_on_one(f, a, "g");
	uint64_t id = c->id, ino = ns_lookup(ns, a, "g", 1)->child->ino;

	wire(f);
	f->m.ns.chunk_gone = gone;
	f->m.stopping = false; /* (no snapshot is queued) */
	truncate_in(f, a, "g");
	assert_int_equal(c->busy, 1);
	ask_chunk(f, ino, false);
	ask_chunk(f, ino, true);
	assert_non_null(c->waiters);
	assert_int_equal(f->errors, 0);
	assert_int_equal(ns_unlink(ns, a, "g", 1, false, 0), 0);
	assert_null(chunk_get(ns, id));
	data_tick(&f->m);
	assert_int_equal(f->errors, 2);
	assert_int_equal(f->last_err, ENOENT);
	/* The commands end after: the truncate is told its file went. */
	cs_done(f, f->cmd_id, 0);
	assert_int_equal(f->errors, 3);
}

/*
 * The chunk a write's or a truncate's commands work on is freed under
 * them (the file cut to nothing), the file stays: the write asks again
 * and gets a new chunk, the truncate (a setattr already made) is
 * answered with its attributes. Both used to get ENOENT for a file that
 * is there.
 */
static void test_chunk_truncated_under_commands(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct node *a = unit_mk(ns, ns->root, "a", S_IFDIR | 0755, 1);
	struct chunk *c = leased_on_one(f, a, "w");
	struct node *w = ns_lookup(ns, a, "w", 1)->child;
	uint64_t old = c->id;
	unsigned acks;

	wire(f);
	f->m.stopping = false;
	f->srv[1].total_bytes = 1ull << 40; /* room for a new chunk */
	/* Not the lease holder's: its write moves the chunk on first. */
	ask_chunk(f, w->ino, true);
	assert_int_equal(c->busy, 1);
	assert_int_equal(f->cmds, 1);
	ns_chunks_truncate(ns, w, 0);
	w->size = 0;
	assert_null(chunk_get(ns, old));
	f->replies = 0;
	cs_done(f, f->cmd_id, 0);
	assert_int_equal(f->errors, 0);
	assert_true(ns_chunk_at(w, 0) != 0 && ns_chunk_at(w, 0) != old);
	/* (Not answered yet: its new chunk is being made. What was sent
	 * is the chunkserver's own answer, if any.) */
	acks = f->replies;
	/* The new chunk made: the write is answered. */
	cs_done(f, f->any_cmd_id, 0);
	assert_int_equal(f->replies, 2 * acks + 1);
	assert_int_equal(f->errors, 0);

	/* A truncate inside the chunk, then cut to nothing. */
	c = leased_on_one(f, a, "t");
	w = ns_lookup(ns, a, "t", 1)->child;
	old = c->id;
	truncate_in(f, a, "t");
	assert_int_equal(c->busy, 1);
	ns_chunks_truncate(ns, w, 0);
	w->size = 0;
	f->replies = 0;
	cs_done(f, f->cmd_id, 0);
	assert_int_equal(f->replies, acks + 1);
	assert_int_equal(f->errors, 0);
}

/*
 * A write asked again after its chunk was freed under its commands, which
 * failed on a server: the new chunk's copy there is not queued for
 * deletion when its own commands succeed (the failure was the old
 * chunk's; the hostile review of 0c85b22 found it deleted).
 */
static void test_asked_again_forgets_failures(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct node *a = unit_mk(ns, ns->root, "a", S_IFDIR | 0755, 1);
	struct chunk *c = leased_on_one(f, a, "w");
	struct node *w = ns_lookup(ns, a, "w", 1)->child;
	uint64_t old = c->id, nc, before;

	wire(f);
	f->m.stopping = false;
	f->srv[1].total_bytes = 1ull << 40;
	ask_chunk(f, w->ino, true);
	assert_int_equal(c->busy, 1);
	ns_chunks_truncate(ns, w, 0);
	w->size = 0;
	cs_done(f, f->cmd_id, EIO); /* the old chunk's bump failed there */
	nc = ns_chunk_at(w, 0);
	assert_true(nc != 0 && nc != old);
	before = csrv_deletes_pending(&f->srv[1]);
	cs_done(f, f->any_cmd_id, 0); /* the new chunk made there */
	assert_int_equal(csrv_deletes_pending(&f->srv[1]), before);
	assert_int_equal(f->errors, 0);
	assert_int_equal(chunk_get(ns, nc)->copies[0].state, COPY_VALID);
}

/*
 * Threat model, finding 23: a connection's CHUNK requests that wait are
 * counted, server.c reads no more of it at REQ_CHUNK_JOBS_MAX, and it is
 * told to go on once half are answered, once.
 */
static void test_chunk_jobs_counted(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct node *a = unit_mk(ns, ns->root, "a", S_IFDIR | 0755, 1);
	struct chunk *c = leased_on_one(f, a, "r");
	uint64_t ino = ns_lookup(ns, a, "r", 1)->child->ino;
	struct conn *conn = (struct conn *)&f->link; /* (any non-NULL) */

	wire(f);
	f->m.stopping = false;
	truncate_in(f, a, "r");
	assert_int_equal(c->busy, 1);
	for (unsigned i = 0; i < REQ_CHUNK_JOBS_MAX; i++)
		ask_chunk_on(f, conn, ino, false);
	assert_int_equal(f->link.chunk_jobs, REQ_CHUNK_JOBS_MAX);
	assert_int_equal(f->errors, 0);
	/* Answered as they run: the count falls to nothing, and the
	 * connection is told to read again as it passes half. */
	cs_done(f, f->cmd_id, 0);
	assert_int_equal(f->link.chunk_jobs, 0);
	assert_int_equal(f->resumes, 1);
	assert_int_equal(f->errors, 0);
	/* One answered at once is counted and uncounted. */
	ask_chunk_on(f, conn, ino, false);
	assert_int_equal(f->link.chunk_jobs, 0);
	assert_int_equal(f->resumes, 1);
}

/* A write to a file whose chunk's only copies are damaged, shared with
 * nothing: EIO. Duplicating it freed the source as the file's slot moved
 * to the copy, and the master crashed on it. */
static void test_damaged_only_write(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct chunk *c = leased_on_one(f, ns->root, "d");
	uint64_t id = c->id;

	wire(f);
	f->m.stopping = false;
	c->copies[0].state = COPY_DAMAGED;
	ask_chunk(f, ns_lookup(ns, ns->root, "d", 1)->child->ino, true);
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_err, EIO);
	assert_ptr_equal(chunk_get(ns, id), c);
	assert_int_equal(f->dups, 0);
}

static void ask_only(struct fixture *f, uint64_t ino, uint64_t chunk,
		     uint32_t version)
{
	Sweepfs__ChunkReq q = SWEEPFS__CHUNK_REQ__INIT;
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;
	struct req r = { .m = &f->m };

	q.ino = ino;
	q.has_write = q.write = 1;
	q.has_only_chunk = q.has_only_version = 1;
	q.only_chunk = chunk;
	q.only_version = version;
	q.cred = &cred;
	op_chunk(&r, &q.base);
}

/*
 * A sync's request (ChunkReq.only_chunk, mount/data.c): another version
 * of the chunk, or another chunk, is answered with no location and
 * nothing made, copied or bumped; a bump or a copy made on no copy (its
 * intent open) is EIO; the chunk at the version asked goes on as a
 * write, bumped even when a snapshot shares it (never copied: a copy
 * does not sync what is shared).
 */
static void test_only_chunk(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct chunk *c = leased_on_one(f, ns->root, "o");
	uint64_t ino = ns_lookup(ns, ns->root, "o", 1)->child->ino;
	uint64_t id = c->id;
	uint32_t v = c->version;
	struct chunk_intent in = {
		.id = id, .version = v + 1, .kind = INTENT_BUMP, .length = -1
	};

	wire(f);
	f->m.stopping = false;
	ask_only(f, ino, id, v + 5);   /* moved on, by a bump that was made */
	ask_only(f, ino, id + 100, v); /* replaced by a copy that was made */
	assert_int_equal(f->replies, 2);
	assert_int_equal(f->errors, 0);
	assert_false(f->located);
	/* A change made nowhere: the data is still unsynced where it was. */
	c->version = v + 1;
	assert_int_equal(ns_intent_note(ns, &in), 0);
	ask_only(f, ino, id, v);
	ask_only(f, ino, id + 100, v);
	assert_int_equal(f->errors, 2);
	assert_int_equal(f->last_err, EIO);
	ns_intent_done(ns, id, v + 1);
	c->version = v;
	assert_int_equal(f->bumps + f->dups, 0);
	/* Shared with a snapshot: bumped, not copied; then it has moved
	 * on, and nothing is left to sync. */
	c->refs++;
	ask_only(f, ino, id, v);
	assert_int_equal(f->bumps, 1);
	cs_done(f, f->cmd_id, 0);
	c->refs--;
	assert_int_equal(f->dups, 0);
	assert_int_equal(f->errors, 2);
	assert_false(f->located);
	/* Its own: bumped, and answered where it is now. */
	ask_only(f, ino, id, v + 1);
	assert_int_equal(f->bumps, 2);
	cs_done(f, f->cmd_id, 0);
	assert_true(f->located);
	assert_int_equal(f->dups, 0);
	assert_int_equal(f->errors, 2);
}

/*
 * A big copy's revoke-all at its fork is quiet (a failure there is for
 * the copy's instant only), but the lease stands until its bump is done:
 * a part that takes the chunk meanwhile waits for the bump, and if it
 * fails, gives the snapshot up. An unrelated chunk busy at the fork
 * whose change then fails gives nothing up.
 */
static void test_fork_failure_counts_when_taken(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct node *a = unit_mk(ns, ns->root, "a", S_IFDIR | 0755, 1);
	struct node *b = unit_mk(ns, ns->root, "b", S_IFDIR | 0755, 1);
	struct chunk *c = leased_on_one(f, a, "f");
	struct chunk *u = leased_on_one(f, b, "u");

	wire(f);
	data_lease(&f->m, c, 7);
	data_lease(&f->m, u, 8);
	truncate_in(f, b, "u"); /* u busy, its change in flight */
	data_revoke_leases(&f->m);
	assert_int_equal(c->lease_session, 7);
	assert_true(c->busy);
	assert_int_equal(u->revoke_from, u->version - 1);
	copy(f, a, "a1");
	assert_int_equal(f->m.data->shared.n, 1);
	data_revoke_shared(&f->m);
	assert_int_equal(f->m.data->revoking, 3);
	/* Every command fails. */
	csrv_detach(&f->m, f->srv[1].conn);
	assert_int_equal(f->m.data->revoking, 0);
	assert_int_equal(c->lease_session, 7);
	assert_int_equal(f->m.data->revoke_failed, -EIO);
}

/* An unrelated chunk busy at a big copy's fork, whose change then fails,
 * gives the copy nothing up (the copy does not take it). */
static void test_fork_failure_quiet_when_busy(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct node *b = unit_mk(ns, ns->root, "b", S_IFDIR | 0755, 1);
	struct chunk *u = leased_on_one(f, b, "u");

	wire(f);
	data_lease(&f->m, u, 8);
	truncate_in(f, b, "u");
	data_revoke_leases(&f->m);
	assert_int_equal(u->revoke_from, u->version - 1);
	assert_int_equal(f->m.data->revoking, 1);
	csrv_detach(&f->m, f->srv[1].conn);
	assert_int_equal(f->m.data->revoking, 0);
	assert_int_equal(f->m.data->revoke_failed, 0);
	assert_int_equal(u->lease_session, 8);
}

/* However often a chunk's lease goes back and forth between two
 * sessions, it is on the list once; an entry whose token ended goes. */
static void test_leased_listed_once(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct node *d = unit_mk(ns, ns->root, "d", S_IFDIR | 0755, 1);
	struct chunk *c = file_with_chunk(f, d, "c");
	struct chunk *other = file_with_chunk(f, d, "other");

	for (int i = 0; i < 10000; i++)
		data_lease(&f->m, c, 1 + (uint64_t)(i & 1));
	assert_int_equal(f->m.data->leased.n, 1);
	assert_int_equal(f->m.data->leased.id[0], c->id);
	data_lease(&f->m, other, 3);
	assert_int_equal(f->m.data->leased.n, 2);
	/* c's last grant was 11 minutes ago: its token is dead. */
	c->lease_until = sw_mono_ns() - 600 * SEC;
	data_prune_leases(&f->m);
	assert_int_equal(f->m.data->leased.n, 1);
	assert_int_equal(f->m.data->leased.id[0], other->id);
	assert_int_equal(c->leased, 0);
	/* Granted again: listed again, once. */
	data_lease(&f->m, c, 1);
	data_lease(&f->m, c, 2);
	assert_int_equal(f->m.data->leased.n, 2);
	/* A snapshot too big to copy at once takes them all back: these
	 * have no copy up, so their leases stand, listed once, and give
	 * no copy up (the part that takes their chunk tries again). */
	data_revoke_leases(&f->m);
	assert_int_equal(f->m.data->leased.n, 2);
	assert_int_equal(f->m.data->revoke_failed, 0);
	/* Their tokens end: the next drops them; a new grant lists the
	 * chunk again. */
	c->lease_until = other->lease_until = sw_mono_ns() - 600 * SEC;
	data_revoke_leases(&f->m);
	assert_int_equal(f->m.data->leased.n, 0);
	data_lease(&f->m, c, 1);
	assert_int_equal(f->m.data->leased.n, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_admit_per_user, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_users_take_turns, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_turns_move_up, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_closed_dropped, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_admit_global, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_copy_takes_back_its_own_leases, setup, teardown),
		cmocka_unit_test_setup_teardown(test_token_alive_is_leased,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_leased_listed_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_closed_lease_ends, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_busy_lease_waits_for_commands, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lease_not_taken_back_fails,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_unlinked_while_busy, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_waiter_of_freed_chunk,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_chunk_truncated_under_commands, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_asked_again_forgets_failures, setup, teardown),
		cmocka_unit_test_setup_teardown(test_damaged_only_write, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_only_chunk, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_chunk_jobs_counted, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_fork_failure_counts_when_taken, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_fork_failure_quiet_when_busy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_take_back_bumps, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
