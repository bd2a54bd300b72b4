/*
 * When the master takes a checkpoint (master_checkpoint_due()): after
 * changes whose replay costs checkpoint_changes, counted as a restart
 * pays for them (ns_replay_work()), not as records: a purge journals up
 * to a slice of freed nodes per record, so a purge of N nodes must make a
 * checkpoint due once N passes the bound, though its records are few.
 * And as of when the wait tick judges waits on clients
 * (server_answers_seen()): the loop's last poll, not the tick's own
 * time, which after the loop was held up comes before it read what came
 * meanwhile.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "context.h"
#include "csrv.h"
#include "group.h"
#include "group_i.h"
#include "master.h"
#include "namespace_i.h"
#include "server.h"
#include "unit.h"
#include "unit_master.h"
#include "unit_ns.h"
#include "util.h"

/* The purge's slice journals at most this many steps a record at 34 M
 * files (bench/nsbench.c's NSBENCH_PURGE_BATCH): few records, many nodes. */
#define BATCH 256u
#define FILES 3000u
#define BOUND 1000u

struct fixture {
	struct master m;    /* first: unit_master_teardown() */
	struct csrv srv[1]; /* none connected */
	struct ns replica;  /* a follower (or a restart) replaying m's purge */
	int64_t now;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || unit_master_init(&f->m, f->srv, 0) < 0) {
		free(f);
		return -1;
	}
	if (ns_init(&f->replica, 1000) < 0) {
		unit_master_release(&f->m);
		free(f);
		return -1;
	}
	f->now = 1000;
	f->m.cfg.checkpoint_changes = BOUND;
	f->m.cfg.checkpoint_interval_ms = 3600 * 1000;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	ns_release(&f->replica);
	return unit_master_teardown(state);
}

/* As checkpoint_written() leaves it: the newest checkpoint is now. */
static void checkpointed(struct fixture *f)
{
	f->m.ckpt.version = f->m.ns.version;
	f->m.ckpt.work = ns_replay_work(&f->m.ns);
	f->m.ckpt.last = f->now;
}

/* Directory "d" with @files files, in @ns (the same numbers in each). */
static void make_dir(struct fixture *f, struct ns *ns, unsigned files)
{
	struct node *d = unit_mk(ns, ns->root, "d", S_IFDIR | 0755, f->now);
	char name[16];

	for (unsigned i = 0; i < files; i++) {
		snprintf(name, sizeof(name), "f%06u", i);
		unit_mk(ns, d, name, S_IFREG | 0644, f->now);
	}
}

/* Changes that each make one node count one each, as records did: the
 * option means what it meant for everything but purges and copies. */
static void test_due_after_changes(void **state)
{
	struct fixture *f = *state;

	checkpointed(f);
	f->m.ns.version += BOUND - 1;
	assert_false(master_checkpoint_due(&f->m, f->now));
	f->m.ns.version++;
	assert_true(master_checkpoint_due(&f->m, f->now));
	checkpointed(f);
	assert_false(master_checkpoint_due(&f->m, f->now));
}

/*
 * A due checkpoint waits while the collapse after the last child runs
 * (master_checkpoint_waits()), for at most 2 s from when it was first
 * found due, however often asked; not at all when none runs.
 */
static void test_due_waits_for_collapse(void **state)
{
	struct fixture *f = *state;
	int64_t s = 1000000000;

	checkpointed(f);
	f->m.ns.version += BOUND;
	assert_true(master_checkpoint_due(&f->m, f->now));
	assert_false(master_checkpoint_waits(&f->m, f->now));

	/* Only looked at, never followed. */
	f->m.ckpt.collapse = (struct collapse *)&f->m;
	for (int64_t t = 0; t < 2 * s; t += s / 4)
		assert_true(master_checkpoint_waits(&f->m, f->now + t));
	assert_false(master_checkpoint_waits(&f->m, f->now + 2 * s));
	/* Still running a minute on: no longer waited for. */
	assert_false(master_checkpoint_waits(&f->m, f->now + 60 * s));
	f->m.ckpt.collapse = NULL;
}

static void test_due_after_interval(void **state)
{
	struct fixture *f = *state;
	int64_t interval = (int64_t)f->m.cfg.checkpoint_interval_ms * 1000000;

	checkpointed(f);
	assert_false(master_checkpoint_due(&f->m, f->now + interval - 1));
	assert_true(master_checkpoint_due(&f->m, f->now + interval));
}

/*
 * The removal of a directory of FILES files: one detach, then the purge
 * in slices of BATCH steps, each journaled as one record (purge.c). Its
 * records are a few, far below the bound; the nodes it frees are three
 * times the bound, and so is what a replay of those records costs. Both
 * the master that purges and a namespace replaying its records count the
 * nodes.
 */
static void test_due_after_purge(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns, *rep = &f->replica;
	struct ns_purge_step s = { 0 };
	uint64_t records = 0, rep_work, freed = 0;

	make_dir(f, ns, FILES);
	make_dir(f, rep, FILES);
	checkpointed(f);
	rep_work = ns_replay_work(rep);

	assert_int_equal(ns_detach(ns, ns->root, "d", 1, 7, ++f->now), 0);
	assert_int_equal(ns_detach(rep, rep->root, "d", 1, 7, f->now), 0);
	ns->version++;
	rep->version++;
	records++;
	for (;;) {
		uint64_t n = 0;

		while (n < BATCH && ns_purge_next(ns, &s)) {
			ns_purge_take(ns, &s, f->now);
			n++;
		}
		if (!n)
			break;
		freed += n;
		ns->version++;
		records++;
		assert_int_equal(ns_purge_steps(rep, n, s.ino, f->now), 0);
		rep->version++;
	}
	/* Every file and the directory freed, in a few dozen records. */
	assert_int_equal(freed, FILES + 1);
	assert_true(records < BOUND / 10);
	assert_true(ns->version - f->m.ckpt.version < BOUND);
	/* What the old trigger looked at says not due; the work says due. */
	assert_true(master_checkpoint_due(&f->m, f->now));
	assert_int_equal(ns_replay_work(ns) - f->m.ckpt.work, records + freed);
	assert_int_equal(ns_replay_work(rep) - rep_work, records + freed);
	checkpointed(f);
	assert_false(master_checkpoint_due(&f->m, f->now));
}

/*
 * Waits on clients are judged as of when the loop last polled its
 * sockets (server_answers_seen()), not as of the wait tick's own time:
 * a loop held up in a callback runs its due timers before it polls
 * again, and an answer that came meanwhile is still unread then.
 */
#define HOLD_MS 100

struct held {
	struct master *m;
	int sv[2];
	uv_poll_t poll;
	uv_timer_t timer;
	uv_check_t check;
	int64_t held_at, held_until;   /* the read callback's hold */
	int64_t seen_first, now_first; /* at the first timer, after it */
	int64_t seen_next;	       /* at the next, after a poll */
	int timers;
};

static void on_held_timer(uv_timer_t *t);

static void on_held_check(uv_check_t *h)
{
	server_note_poll(h->data);
}

static void on_held_readable(uv_poll_t *p, int status, int events)
{
	struct held *h = p->data;
	char c;

	(void)status;
	(void)events;
	assert_int_equal(read(h->sv[0], &c, 1), 1);
	uv_poll_stop(p);
	/* Due while this holds the loop: from the loop's time, the poll's. */
	uv_timer_start(&h->timer, on_held_timer, HOLD_MS / 3, 0);
	h->held_at = sw_mono_ns();
	while (sw_mono_ns() - h->held_at < HOLD_MS * 1000000LL)
		;
	h->held_until = sw_mono_ns();
}

static void on_held_timer(uv_timer_t *t)
{
	struct held *h = t->data;

	if (h->timers++ == 0) {
		h->seen_first = server_answers_seen(h->m);
		h->now_first = sw_mono_ns();
		uv_timer_start(t, on_held_timer, 5, 0);
		return;
	}
	h->seen_next = server_answers_seen(h->m);
	uv_close((uv_handle_t *)&h->poll, NULL);
	uv_close((uv_handle_t *)&h->timer, NULL);
	uv_close((uv_handle_t *)&h->check, NULL);
}

static void test_answers_seen_as_of_poll(void **state)
{
	struct fixture *f = *state;
	struct held h = { .m = &f->m };
	uv_loop_t loop;

	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, h.sv), 0);
	f->m.loop = &loop;
	assert_int_equal(server_answers_seen(&f->m), 0);
	uv_check_init(&loop, &h.check);
	h.check.data = &f->m;
	uv_check_start(&h.check, on_held_check);
	uv_poll_init(&loop, &h.poll, h.sv[0]);
	h.poll.data = &h;
	uv_poll_start(&h.poll, UV_READABLE, on_held_readable);
	uv_timer_init(&loop, &h.timer);
	h.timer.data = &h;
	assert_int_equal(write(h.sv[1], "x", 1), 1);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);

	assert_int_equal(h.timers, 2);
	/* The timer ran after the hold, before the loop polled again... */
	assert_true(h.now_first >= h.held_until);
	/* ...and saw the time of the poll before the hold, not its own. */
	assert_true(h.seen_first > 0);
	assert_true(h.seen_first <= h.held_at);
	/* The poll after it moved it past the hold (whole ms: 2 ms slack). */
	assert_true(h.seen_next >= h.held_until - 2000000);
	assert_true(h.seen_next <= sw_mono_ns());

	f->m.loop = NULL;
	close(h.sv[0]);
	close(h.sv[1]);
	assert_int_equal(uv_loop_close(&loop), 0);
}

/* A turn of @loop's: its time moves on (no handle is active: libuv
 * only takes the time), and the check handle's call. */
static void turn(struct master *m, uv_loop_t *loop)
{
	usleep(5000);
	uv_run(loop, UV_RUN_NOWAIT);
	server_note_poll(m);
}

/*
 * While a group's lease is in doubt frames wait unhandled in their
 * buffers, acks among them: the time the loop has seen answers up to
 * stays, until the end of the turn after the loop saw the lease renewed
 * (the held frames are parsed in an idle callback between).
 */
static void test_answers_seen_held_for_lease(void **state)
{
	struct fixture *f = *state;
	struct group *g = calloc(1, sizeof(*g));
	const int64_t hour = 3600 * 1000000000LL;
	uv_loop_t loop;
	int64_t seen;

	assert_non_null(g);
	assert_int_equal(uv_loop_init(&loop), 0);
	f->m.loop = &loop;
	f->m.group = g;
	g->m = &f->m;
	g->serving = true;
	atomic_store(&g->valid_until, sw_mono_ns() + hour);

	turn(&f->m, &loop);
	seen = server_answers_seen(&f->m);
	assert_true(seen > 0);
	/* The lease runs out: held, at its end and after. */
	atomic_store(&g->valid_until, sw_mono_ns() - 1);
	turn(&f->m, &loop);
	assert_true(g->paused);
	assert_int_equal(server_answers_seen(&f->m), seen);
	/* Renewed by etcd, not yet seen by the loop: still held. */
	atomic_store(&g->valid_until, sw_mono_ns() + hour);
	turn(&f->m, &loop);
	assert_int_equal(server_answers_seen(&f->m), seen);
	/* Seen renewed: the turn that parses what waited ends with the
	 * time where it was, the one after moves it on. */
	gloop_lease_resume(g);
	turn(&f->m, &loop);
	assert_int_equal(server_answers_seen(&f->m), seen);
	turn(&f->m, &loop);
	assert_true(server_answers_seen(&f->m) >= seen + 4 * 1000000);
	/* In doubt and seen renewed within one turn (a frame refused, then
	 * the etcd thread's wake-up in the same poll): held all the same. */
	seen = server_answers_seen(&f->m);
	atomic_store(&g->valid_until, sw_mono_ns() - 1);
	assert_false(group_may_answer(&f->m, sw_mono_ns()));
	atomic_store(&g->valid_until, sw_mono_ns() + hour);
	gloop_lease_resume(g);
	turn(&f->m, &loop);
	assert_int_equal(server_answers_seen(&f->m), seen);
	turn(&f->m, &loop);
	assert_true(server_answers_seen(&f->m) >= seen + 4 * 1000000);

	f->m.group = NULL;
	f->m.loop = NULL;
	free(g);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void on_armed_tick(uv_timer_t *t)
{
	int *ticks = t->data;

	(*ticks)++;
	uv_timer_stop(t); /* as the wait tick does once nothing waits */
}

/*
 * The wait tick runs only while something waits on a client: stopped,
 * master_wait_arm() starts it again, with its own callback and period.
 */
static void test_wait_tick_armed(void **state)
{
	struct fixture *f = *state;
	uv_timer_t *t = &f->m.wait_tick;
	uv_loop_t loop;
	int ticks = 0;
	int64_t t0;

	/* Never started (a test's master, or one not running yet). */
	master_wait_arm(&f->m);
	assert_false(uv_is_active((uv_handle_t *)t));

	assert_int_equal(uv_loop_init(&loop), 0);
	uv_timer_init(&loop, t);
	t->data = &ticks;
	uv_timer_start(t, on_armed_tick, WAIT_TICK_MS, WAIT_TICK_MS);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(ticks, 1);
	assert_false(uv_is_active((uv_handle_t *)t));

	/* Due a tick from the loop's time, taken after t0, in whole ms. */
	t0 = sw_mono_ns();
	uv_update_time(&loop);
	master_wait_arm(&f->m);
	assert_true(uv_is_active((uv_handle_t *)t));
	master_wait_arm(&f->m); /* armed already: no change */
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(ticks, 2);
	assert_true(sw_mono_ns() - t0 >= (WAIT_TICK_MS - 2) * 1000000LL);

	uv_close((uv_handle_t *)t, NULL);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	master_wait_arm(&f->m); /* closed: nothing */
	assert_false(uv_is_active((uv_handle_t *)t));
	assert_int_equal(uv_loop_close(&loop), 0);
	memset(t, 0, sizeof(*t));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_due_after_changes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_due_waits_for_collapse,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_due_after_interval, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_due_after_purge, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_answers_seen_as_of_poll,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_answers_seen_held_for_lease, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wait_tick_armed, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
