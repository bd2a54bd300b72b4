/*
 * locks.h: the master's lock table. Conflicts between owners only, POSIX
 * ranges split and merged per owner, flock conversion, waiters granted in
 * order, and release by owner, session and inode; then a random run
 * against a byte-by-byte model, whose canonical form (one range per run
 * of equal bytes) must match the table's lock count exactly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "locks.h"
#include "unit.h"

#define MAX_WAKES 64

struct fixture {
	struct locks t;
	struct {
		uintptr_t arg;
		int rc;
	} wakes[MAX_WAKES];
	unsigned nwakes;
};

static void on_wake(void *arg, void *waiter, int rc)
{
	struct fixture *f = arg;

	assert_true(f->nwakes < MAX_WAKES);
	f->wakes[f->nwakes].arg = (uintptr_t)waiter;
	f->wakes[f->nwakes].rc = rc;
	f->nwakes++;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	locks_init(&f->t, on_wake, f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	locks_release(&f->t);
	free(f);
	return 0;
}

static struct lock_desc posix(uint64_t ino, uint64_t session, uint64_t owner,
			      int type, uint64_t start, uint64_t end)
{
	return (struct lock_desc){ .ino = ino,
				   .session = session,
				   .owner = owner,
				   .start = start,
				   .end = end,
				   .pid = (uint32_t)(1000 + owner),
				   .kind = LOCK_KIND_POSIX,
				   .type = (uint8_t)type };
}

static struct lock_desc flk(uint64_t ino, uint64_t session, uint64_t owner,
			    int type)
{
	return (struct lock_desc){ .ino = ino,
				   .session = session,
				   .owner = owner,
				   .end = LOCK_OFFSET_MAX,
				   .kind = LOCK_KIND_FLOCK,
				   .type = (uint8_t)type };
}

static int set(struct fixture *f, struct lock_desc d)
{
	return locks_set(&f->t, &d, false, NULL);
}

static int set_wait(struct fixture *f, struct lock_desc d, uintptr_t arg)
{
	return locks_set(&f->t, &d, true, (void *)arg);
}

/* Whether a probe by a stranger for @type on [s, e] conflicts. */
static bool busy(struct fixture *f, uint64_t ino, int type, uint64_t s,
		 uint64_t e)
{
	struct lock_desc d = posix(ino, 999, 999, type, s, e), out;

	return locks_get(&f->t, &d, &out);
}

static void test_locks_set_conflicts_between_owners(void **state)
{
	struct fixture *f = *state;
	struct lock_desc out, q;

	assert_int_equal(set(f, posix(1, 1, 7, LOCK_TYPE_WRITE, 0, 99)), 0);
	/* Another session's range next to it, not on it. */
	assert_int_equal(set(f, posix(1, 2, 7, LOCK_TYPE_WRITE, 100, 199)), 0);
	assert_int_equal(set(f, posix(1, 2, 7, LOCK_TYPE_WRITE, 50, 60)),
			 -EAGAIN);
	assert_int_equal(set(f, posix(1, 2, 7, LOCK_TYPE_READ, 99, 99)),
			 -EAGAIN);
	/* Same owner number, other session: another owner. Same owner:
	 * no conflict with itself. */
	assert_int_equal(set(f, posix(1, 1, 8, LOCK_TYPE_READ, 0, 0)), -EAGAIN);
	assert_int_equal(set(f, posix(1, 1, 7, LOCK_TYPE_READ, 0, 199)),
			 -EAGAIN);
	assert_int_equal(set(f, posix(1, 1, 7, LOCK_TYPE_READ, 0, 99)), 0);
	/* Other inodes are independent. */
	assert_int_equal(set(f, posix(2, 2, 7, LOCK_TYPE_WRITE, 0, 99)), 0);
	q = posix(1, 2, 7, LOCK_TYPE_WRITE, 50, 60);
	assert_true(locks_get(&f->t, &q, &out));
	assert_int_equal(out.type, LOCK_TYPE_READ);
	assert_int_equal(out.start, 0);
	assert_int_equal(out.end, 99);
	assert_int_equal(out.pid, 1007);
	assert_int_equal(out.session, 1);
	q.type = LOCK_TYPE_READ;
	assert_false(locks_get(&f->t, &q, &out));
	assert_int_equal(f->t.nlocks, 3);
	assert_int_equal(f->nwakes, 0);
}

static void test_locks_set_read_shared(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_READ, 0, 9)), 0);
	assert_int_equal(set(f, posix(1, 1, 2, LOCK_TYPE_READ, 5, 20)), 0);
	assert_int_equal(set(f, posix(1, 1, 3, LOCK_TYPE_WRITE, 9, 9)),
			 -EAGAIN);
	assert_int_equal(set(f, posix(1, 1, 3, LOCK_TYPE_WRITE, 21, 30)), 0);
	assert_false(busy(f, 1, LOCK_TYPE_READ, 0, 20));
	assert_true(busy(f, 1, LOCK_TYPE_WRITE, 20, 20));
}

static void test_locks_set_unlock_splits(void **state)
{
	struct fixture *f = *state;
	struct lock_desc q = posix(1, 2, 2, LOCK_TYPE_WRITE, 39, 39), out;

	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_WRITE, 0, 99)), 0);
	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_UNLOCK, 40, 59)), 0);
	assert_int_equal(f->t.nlocks, 2);
	assert_int_equal(set(f, posix(1, 2, 2, LOCK_TYPE_WRITE, 40, 59)), 0);
	assert_true(locks_get(&f->t, &q, &out));
	assert_int_equal(out.start, 0);
	assert_int_equal(out.end, 39);
	q.start = q.end = 60;
	assert_true(locks_get(&f->t, &q, &out));
	assert_int_equal(out.start, 60);
	assert_int_equal(out.end, 99);
	/* Unlocking the ends trims; unlocking what is not held is fine. */
	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_UNLOCK, 0, 9)), 0);
	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_UNLOCK, 90, 500)), 0);
	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_UNLOCK, 40, 59)), 0);
	assert_false(busy(f, 1, LOCK_TYPE_READ, 0, 9));
	assert_true(busy(f, 1, LOCK_TYPE_READ, 10, 10));
	assert_true(busy(f, 1, LOCK_TYPE_READ, 89, 89));
	assert_false(busy(f, 1, LOCK_TYPE_READ, 90, 1000));
	assert_int_equal(f->t.nlocks, 3);
	assert_int_equal(
		set(f, posix(1, 1, 1, LOCK_TYPE_UNLOCK, 0, LOCK_OFFSET_MAX)),
		0);
	assert_int_equal(
		set(f, posix(1, 2, 2, LOCK_TYPE_UNLOCK, 0, LOCK_OFFSET_MAX)),
		0);
	assert_int_equal(f->t.nlocks, 0);
	assert_int_equal(htab_count(&f->t.inodes), 0);
}

static void test_locks_set_merges(void **state)
{
	struct fixture *f = *state;
	struct lock_desc q = posix(1, 9, 9, LOCK_TYPE_WRITE, 5, 5), out;

	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_READ, 0, 9)), 0);
	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_READ, 20, 29)), 0);
	assert_int_equal(f->t.nlocks, 2);
	/* Adjacent on both sides: one range. */
	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_READ, 10, 19)), 0);
	assert_int_equal(f->t.nlocks, 1);
	assert_true(locks_get(&f->t, &q, &out));
	assert_int_equal(out.start, 0);
	assert_int_equal(out.end, 29);
	/* A different type in the middle: three ranges; back: one. */
	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_WRITE, 10, 19)), 0);
	assert_int_equal(f->t.nlocks, 3);
	assert_false(busy(f, 1, LOCK_TYPE_READ, 0, 9));
	assert_true(busy(f, 1, LOCK_TYPE_READ, 10, 10));
	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_READ, 5, 24)), 0);
	assert_int_equal(f->t.nlocks, 1);
	assert_false(busy(f, 1, LOCK_TYPE_READ, 0, 29));
	/* Another owner's adjacent range is not merged. */
	assert_int_equal(set(f, posix(1, 2, 1, LOCK_TYPE_READ, 30, 39)), 0);
	assert_int_equal(f->t.nlocks, 2);
	/* Up to OFFSET_MAX, and the end of the range never overflows. */
	assert_int_equal(
		set(f, posix(1, 1, 1, LOCK_TYPE_READ, 40, LOCK_OFFSET_MAX)), 0);
	assert_int_equal(
		set(f, posix(1, 1, 1, LOCK_TYPE_READ, 0, LOCK_OFFSET_MAX)), 0);
	assert_int_equal(f->t.nlocks, 2);
}

static void test_locks_flock(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(set(f, flk(1, 1, 1, LOCK_TYPE_WRITE)), 0);
	assert_int_equal(set(f, flk(1, 2, 1, LOCK_TYPE_READ)), -EAGAIN);
	/* fcntl locks and flock locks do not see each other. */
	assert_int_equal(set(f, posix(1, 2, 1, LOCK_TYPE_WRITE, 0, 9)), 0);
	assert_int_equal(set(f, flk(1, 1, 1, LOCK_TYPE_WRITE)), 0);
	assert_int_equal(f->t.nlocks, 2);
	assert_int_equal(set(f, flk(1, 1, 1, LOCK_TYPE_UNLOCK)), 0);
	assert_int_equal(set(f, flk(1, 2, 1, LOCK_TYPE_READ)), 0);
	assert_int_equal(set(f, flk(1, 3, 1, LOCK_TYPE_READ)), 0);
	assert_int_equal(set(f, flk(1, 1, 1, LOCK_TYPE_WRITE)), -EAGAIN);
	/* A failed conversion loses the lock held, as on Linux. */
	assert_int_equal(set(f, flk(1, 2, 1, LOCK_TYPE_WRITE)), -EAGAIN);
	assert_int_equal(f->t.nlocks, 2); /* session 3's, and the posix */
	assert_int_equal(set(f, flk(1, 3, 1, LOCK_TYPE_WRITE)), 0);
	assert_int_equal(f->t.nlocks, 2);
	locks_drop_owner(&f->t, 1, 3, 1, LOCK_KIND_FLOCK);
	assert_int_equal(f->t.nlocks, 1);
	assert_int_equal(set(f, flk(1, 1, 1, LOCK_TYPE_WRITE)), 0);
}

static void test_locks_waiters_in_order(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_WRITE, 0, 9)), 0);
	assert_int_equal(set_wait(f, posix(1, 2, 1, LOCK_TYPE_WRITE, 0, 9), 11),
			 1);
	assert_int_equal(set_wait(f, posix(1, 3, 1, LOCK_TYPE_WRITE, 5, 5), 12),
			 1);
	assert_int_equal(set_wait(f, posix(1, 4, 1, LOCK_TYPE_READ, 8, 8), 13),
			 1);
	/* Not in the way of anything: granted at once, never queued. */
	assert_int_equal(
		set_wait(f, posix(1, 5, 1, LOCK_TYPE_WRITE, 10, 10), 14), 0);
	assert_int_equal(f->t.nwaiters, 3);
	assert_int_equal(f->nwakes, 0);
	/* Unlocking part of the range wakes nobody it still blocks. */
	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_UNLOCK, 0, 4)), 0);
	assert_int_equal(f->nwakes, 0);
	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_UNLOCK, 0, 9)), 0);
	/* The first is granted; the others conflict with it now. */
	assert_int_equal(f->nwakes, 1);
	assert_int_equal(f->wakes[0].arg, 11);
	assert_int_equal(f->wakes[0].rc, 0);
	assert_true(busy(f, 1, LOCK_TYPE_READ, 0, 0));
	/* The flush of its owner grants both others, in order. */
	locks_drop_owner(&f->t, 1, 2, 1, LOCK_KIND_POSIX);
	assert_int_equal(f->nwakes, 3);
	assert_int_equal(f->wakes[1].arg, 12);
	assert_int_equal(f->wakes[2].arg, 13);
	assert_int_equal(f->t.nwaiters, 0);
	assert_true(busy(f, 1, LOCK_TYPE_READ, 5, 5));
	assert_true(busy(f, 1, LOCK_TYPE_WRITE, 8, 8));
	assert_false(busy(f, 1, LOCK_TYPE_READ, 8, 8));
}

static void test_locks_flock_waiters(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(set(f, flk(1, 1, 1, LOCK_TYPE_WRITE)), 0);
	assert_int_equal(set_wait(f, flk(1, 2, 1, LOCK_TYPE_READ), 21), 1);
	assert_int_equal(set_wait(f, flk(1, 3, 1, LOCK_TYPE_READ), 22), 1);
	assert_int_equal(set_wait(f, flk(1, 4, 1, LOCK_TYPE_WRITE), 23), 1);
	locks_drop_owner(&f->t, 1, 1, 1, LOCK_KIND_FLOCK);
	assert_int_equal(f->nwakes, 2);
	assert_int_equal(f->wakes[0].arg, 21);
	assert_int_equal(f->wakes[1].arg, 22);
	assert_int_equal(set(f, flk(1, 2, 1, LOCK_TYPE_UNLOCK)), 0);
	assert_int_equal(f->nwakes, 2);
	assert_int_equal(set(f, flk(1, 3, 1, LOCK_TYPE_UNLOCK)), 0);
	assert_int_equal(f->nwakes, 3);
	assert_int_equal(f->wakes[2].arg, 23);
}

static void test_locks_cancel(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(set(f, flk(1, 1, 1, LOCK_TYPE_WRITE)), 0);
	assert_int_equal(set_wait(f, flk(1, 2, 5, LOCK_TYPE_WRITE), 31), 1);
	assert_int_equal(set_wait(f, posix(1, 2, 5, LOCK_TYPE_WRITE, 0, 0), 32),
			 0);
	assert_int_equal(locks_cancel(&f->t, 1, 2, 6, LOCK_KIND_FLOCK), 0);
	assert_int_equal(locks_cancel(&f->t, 1, 2, 5, LOCK_KIND_POSIX), 0);
	assert_int_equal(locks_cancel(&f->t, 1, 2, 5, LOCK_KIND_FLOCK), 1);
	assert_int_equal(f->nwakes, 1);
	assert_int_equal(f->wakes[0].arg, 31);
	assert_int_equal(f->wakes[0].rc, -EINTR);
	assert_int_equal(f->t.nwaiters, 0);
	/* Cancelled: the release grants nothing. */
	locks_drop_owner(&f->t, 1, 1, 1, LOCK_KIND_FLOCK);
	assert_int_equal(f->nwakes, 1);
}

static void test_locks_drop_session(void **state)
{
	struct fixture *f = *state;

	for (uint64_t ino = 1; ino <= 5; ino++) {
		assert_int_equal(
			set(f, posix(ino, 1, ino, LOCK_TYPE_WRITE, 0, 9)), 0);
		assert_int_equal(set(f, flk(ino, 1, ino, LOCK_TYPE_READ)), 0);
	}
	assert_int_equal(set(f, posix(6, 2, 1, LOCK_TYPE_WRITE, 0, 9)), 0);
	assert_int_equal(set_wait(f, posix(3, 2, 1, LOCK_TYPE_READ, 5, 5), 41),
			 1);
	assert_int_equal(set_wait(f, posix(6, 1, 1, LOCK_TYPE_READ, 5, 5), 42),
			 1);
	assert_int_equal(f->t.nlocks, 11);
	/* Its connection went: its waiter goes, its locks stay. */
	locks_cancel_session(&f->t, 1);
	assert_int_equal(f->nwakes, 1);
	assert_int_equal(f->wakes[0].arg, 42);
	assert_int_equal(f->wakes[0].rc, -EINTR);
	assert_int_equal(f->t.nlocks, 11);
	/* It ended: the locks go, and session 2's waiter is granted. */
	locks_drop_session(&f->t, 1);
	assert_int_equal(f->nwakes, 2);
	assert_int_equal(f->wakes[1].arg, 41);
	assert_int_equal(f->wakes[1].rc, 0);
	assert_int_equal(f->t.nlocks, 2);
	assert_int_equal(htab_count(&f->t.inodes), 2);
	locks_drop_session(&f->t, 2);
	assert_int_equal(f->t.nlocks, 0);
	assert_int_equal(htab_count(&f->t.inodes), 0);
}

static void test_locks_drop_inode(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(set(f, flk(1, 1, 1, LOCK_TYPE_WRITE)), 0);
	assert_int_equal(set(f, flk(2, 1, 1, LOCK_TYPE_WRITE)), 0);
	assert_int_equal(set_wait(f, flk(1, 2, 1, LOCK_TYPE_WRITE), 51), 1);
	locks_drop_inode(&f->t, 1);
	assert_int_equal(f->nwakes, 1);
	assert_int_equal(f->wakes[0].rc, -ENOENT);
	assert_int_equal(f->t.nlocks, 1);
	assert_int_equal(f->t.nwaiters, 0);
	assert_int_equal(htab_count(&f->t.inodes), 1);
}

static void test_locks_release_wakes_waiters(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(set(f, flk(1, 1, 1, LOCK_TYPE_WRITE)), 0);
	assert_int_equal(set_wait(f, flk(1, 2, 1, LOCK_TYPE_WRITE), 61), 1);
	locks_release(&f->t);
	assert_int_equal(f->nwakes, 1);
	assert_int_equal(f->wakes[0].rc, -ENOLCK);
	locks_init(&f->t, on_wake, f); /* for teardown */
}

/* ---- against a model ---------------------------------------------------- */

#define MODEL_BYTES 48
#define MODEL_OWNERS 3

/* The number of ranges the canonical form of the model has. */
static uint64_t model_ranges(uint8_t m[MODEL_OWNERS][MODEL_BYTES])
{
	uint64_t n = 0;

	for (int o = 0; o < MODEL_OWNERS; o++)
		for (int b = 0; b < MODEL_BYTES; b++)
			if (m[o][b] && (b == 0 || m[o][b - 1] != m[o][b]))
				n++;
	return n;
}

static void test_locks_random_model(void **state)
{
	struct fixture *f = *state;
	uint8_t m[MODEL_OWNERS][MODEL_BYTES] = { { 0 } };
	struct rng rng;

	rng_seed(&rng, 42);
	for (int step = 0; step < 20000; step++) {
		int o = (int)(rng_next(&rng) % MODEL_OWNERS);
		int type = (int)(rng_next(&rng) % 3);
		uint64_t s = rng_next(&rng) % MODEL_BYTES;
		uint64_t e = s + rng_next(&rng) % (MODEL_BYTES - s);
		bool conflict = false;
		int rc;

		for (int p = 0; p < MODEL_OWNERS && type; p++) {
			if (p == o)
				continue;
			for (uint64_t b = s; b <= e; b++)
				if (m[p][b] == LOCK_TYPE_WRITE ||
				    (m[p][b] && type == LOCK_TYPE_WRITE))
					conflict = true;
		}
		/* Owners 0 and 1 share a number but not a session. */
		rc = set(f, posix(1, (uint64_t)o, o == 2 ? 5 : 1, type, s, e));
		assert_int_equal(rc, conflict ? -EAGAIN : 0);
		if (!conflict)
			for (uint64_t b = s; b <= e; b++)
				m[o][b] = (uint8_t)type;
		assert_int_equal(f->t.nlocks, model_ranges(m));
		for (uint64_t b = 0; b < MODEL_BYTES; b++) {
			bool any = false, wr = false;

			for (int p = 0; p < MODEL_OWNERS; p++) {
				any |= m[p][b] != 0;
				wr |= m[p][b] == LOCK_TYPE_WRITE;
			}
			assert_int_equal(busy(f, 1, LOCK_TYPE_WRITE, b, b),
					 any);
			assert_int_equal(busy(f, 1, LOCK_TYPE_READ, b, b), wr);
		}
	}
	assert_int_equal(f->nwakes, 0);
}

static void test_locks_caps(void **state)
{
	struct fixture *f = *state;
	struct locks_limits l = { .per_session = 4,
				  .per_file = 6,
				  .waiters_per_session = 1,
				  .waiters_per_file = 2 };

	locks_set_limits(&f->t, &l);
	/* Session 1: four disjoint ranges, then no fifth. */
	for (uint64_t i = 0; i < 4; i++)
		assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_READ, i * 10,
					      i * 10 + 1)),
				 0);
	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_READ, 100, 101)),
			 -ENOLCK);
	/* Merging or replacing does not add: allowed at the cap. */
	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_READ, 2, 9)), 0);
	assert_int_equal(f->t.nlocks, 3);
	/* An unlock that would split past the cap fails, and changes
	 * nothing; one that does not split goes. */
	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_READ, 100, 101)), 0);
	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_UNLOCK, 4, 5)),
			 -ENOLCK);
	assert_int_equal(f->t.nlocks, 4);
	assert_true(busy(f, 1, LOCK_TYPE_WRITE, 4, 5));
	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_UNLOCK, 0, 31)), 0);
	assert_int_equal(f->t.nlocks, 1);
	/* Per file: six in all, whoever holds them. */
	for (uint64_t i = 0; i < 4; i++)
		assert_int_equal(set(f, posix(1, 2, 1, LOCK_TYPE_READ,
					      200 + i * 10, 200 + i * 10)),
				 0);
	assert_int_equal(set(f, posix(1, 3, 1, LOCK_TYPE_READ, 500, 500)), 0);
	assert_int_equal(f->t.nlocks, 6);
	assert_int_equal(set(f, posix(1, 3, 1, LOCK_TYPE_READ, 600, 600)),
			 -ENOLCK);
	assert_int_equal(set(f, flk(1, 3, 1, LOCK_TYPE_READ)), -ENOLCK);
	/* Another file is another count. */
	assert_int_equal(set(f, posix(2, 3, 1, LOCK_TYPE_READ, 500, 500)), 0);
	/* Waiters: one per session, two per file. */
	assert_int_equal(set(f, posix(3, 3, 1, LOCK_TYPE_WRITE, 0, 0)), 0);
	assert_int_equal(set_wait(f, posix(3, 4, 1, LOCK_TYPE_WRITE, 0, 0), 1),
			 1);
	assert_int_equal(set_wait(f, posix(3, 4, 2, LOCK_TYPE_WRITE, 0, 0), 2),
			 -ENOLCK);
	assert_int_equal(set_wait(f, posix(3, 5, 1, LOCK_TYPE_WRITE, 0, 0), 3),
			 1);
	assert_int_equal(set_wait(f, posix(3, 6, 1, LOCK_TYPE_WRITE, 0, 0), 4),
			 -ENOLCK);
	assert_int_equal(f->t.nwaiters, 2);
	assert_int_equal(f->nwakes, 0);
}

/*
 * The totals: with 128 locks in all, a heavy session is refused at 112
 * (7/8), a light one (under 128/64 = 2) still gets its two, and then
 * the table is full for everyone; waiters the same.
 */
static void test_locks_total_caps(void **state)
{
	struct fixture *f = *state;
	struct locks_limits l = { .total = 128, .waiters_total = 64 };
	uint64_t n;

	locks_set_limits(&f->t, &l);
	for (n = 0; n < 200; n++)
		if (set(f, posix(1, 1, 1, LOCK_TYPE_READ, n * 2, n * 2)))
			break;
	assert_int_equal(n, 112);
	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_READ, 999, 999)),
			 -ENOLCK);
	assert_int_equal(set(f, posix(2, 2, 1, LOCK_TYPE_READ, 0, 0)), 0);
	assert_int_equal(set(f, posix(2, 2, 1, LOCK_TYPE_READ, 2, 2)), 0);
	assert_int_equal(set(f, posix(2, 2, 1, LOCK_TYPE_READ, 4, 4)), -ENOLCK);
	/* A flock counts as one too. */
	assert_int_equal(set(f, flk(3, 3, 1, LOCK_TYPE_READ)), 0);
	assert_int_equal(f->t.nlocks, 115);
	/* Dropping the heavy session's locks makes room again. */
	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_UNLOCK, 0, 1000)), 0);
	assert_int_equal(set(f, posix(1, 1, 1, LOCK_TYPE_READ, 0, 0)), 0);
	/* Waiters: 56 (7/8 of 64) of one session, then only light ones. */
	assert_int_equal(set(f, flk(9, 7, 1, LOCK_TYPE_WRITE)), 0);
	for (n = 0; n < 100; n++)
		if (set_wait(f, flk(9, 8, 100 + n, LOCK_TYPE_WRITE), n + 1) !=
		    1)
			break;
	assert_int_equal(n, 56);
	assert_int_equal(set_wait(f, flk(9, 10, 1, LOCK_TYPE_WRITE), 500), 1);
	assert_int_equal(f->t.nwaiters, 57);
	assert_int_equal(f->nwakes, 0);
}

/*
 * Many locks on one file must not make each request walk them all: with
 * 200,000 ranges held, 200,000 probes and as many changes by other owners
 * run in well under the test's time limit (a list walked per request
 * would need some 10^10 steps).
 */
static void test_locks_many_ranges_scale(void **state)
{
	struct fixture *f = *state;
	enum { M = 200000 };
	struct lock_desc out;

	for (uint64_t i = 0; i < M; i++)
		assert_int_equal(
			set(f, posix(1, 1, 1, LOCK_TYPE_WRITE, 2 * i, 2 * i)),
			0);
	assert_int_equal(f->t.nlocks, M);
	for (uint64_t i = 0; i < M; i++) {
		struct lock_desc d =
			posix(1, 2, 1, LOCK_TYPE_READ, 2 * i + 1, 2 * i + 1);

		assert_false(locks_get(&f->t, &d, &out));
		assert_int_equal(set(f, d), 0);
	}
	assert_int_equal(f->t.nlocks, 2 * M);
	/* The one owner's writes conflict everywhere with the other's. */
	assert_int_equal(set(f, posix(1, 2, 1, LOCK_TYPE_READ, 0, 2 * M)),
			 -EAGAIN);
	/* Session 1's end takes its 200,000 ranges in one go. */
	locks_drop_session(&f->t, 1);
	assert_int_equal(f->t.nlocks, M);
	assert_int_equal(set(f, posix(1, 2, 1, LOCK_TYPE_READ, 0, 2 * M)), 0);
	assert_int_equal(f->t.nlocks, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_locks_set_conflicts_between_owners, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_locks_set_read_shared,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_locks_set_unlock_splits,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_locks_set_merges, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_locks_flock, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_locks_waiters_in_order,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_locks_flock_waiters, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_locks_cancel, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_locks_drop_session, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_locks_drop_inode, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_locks_release_wakes_waiters, setup, teardown),
		cmocka_unit_test_setup_teardown(test_locks_random_model, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_locks_total_caps, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_locks_caps, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_locks_many_ranges_scale,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
