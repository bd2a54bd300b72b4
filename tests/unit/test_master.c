/*
 * When the master takes a checkpoint (master_checkpoint_due()): after
 * changes whose replay costs checkpoint_changes, counted as a restart
 * pays for them (ns_replay_work()), not as records: a purge journals up
 * to a slice of freed nodes per record, so a purge of N nodes must make a
 * checkpoint due once N passes the bound, though its records are few.
 * And when the wait tick ends waits (master_wait_look()): not right after
 * the loop was held up, before it read what came meanwhile.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "csrv.h"
#include "master.h"
#include "namespace_i.h"
#include "unit.h"
#include "unit_master.h"
#include "unit_ns.h"

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
 * The wait tick ends waits only after the loop has read its sockets: on
 * time, every tick looks; one late after the loop was held looks at
 * nothing (an ack may be unread), and the next looks, late or not.
 */
static void test_wait_look_after_late_tick(void **state)
{
	struct fixture *f = *state;
	const int64_t ms = 1000000;
	int64_t t = 5000 * ms;

	assert_true(master_wait_look(&f->m, t)); /* the first */
	for (int i = 0; i < 5; i++)
		assert_true(master_wait_look(&f->m, t += 20 * ms));
	assert_true(master_wait_look(&f->m, t += WAIT_LATE_MS * ms));
	/* Held 400 ms: the bound of a 300 ms wait passed meanwhile. */
	assert_false(master_wait_look(&f->m, t += 400 * ms));
	assert_true(master_wait_look(&f->m, t += 20 * ms));
	/* Late at every turn: every other tick looks. */
	for (int i = 0; i < 4; i++) {
		assert_false(master_wait_look(&f->m, t += 100 * ms));
		assert_true(master_wait_look(&f->m, t += 100 * ms));
	}
	assert_true(master_wait_look(&f->m, t += 20 * ms));
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
		cmocka_unit_test_setup_teardown(test_wait_look_after_late_tick,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
