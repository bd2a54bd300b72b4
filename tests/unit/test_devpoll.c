/*
 * mount/devpoll.c: who reads the FUSE device, and how long it polls
 * first. A SOCK_SEQPACKET pair stands in for the device: one message
 * per read, as /dev/fuse gives one request per read.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "devpoll.h"
#include "unit.h"
#include "util.h"

#define MAX_US 50

struct fixture {
	struct devpoll dp;
	int fd[2]; /* [0]: the "device", [1]: the "kernel" */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(devpoll_init(&f->dp, MAX_US), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, f->fd), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	devpoll_yield();
	close(f->fd[0]);
	close(f->fd[1]);
	devpoll_destroy(&f->dp);
	free(f);
	return 0;
}

/* The kernel queues a request with @opcode. */
static void request(struct fixture *f, uint32_t opcode)
{
	struct fuse_in_header in = { .len = sizeof(in), .opcode = opcode };

	assert_int_equal(write(f->fd[1], &in, sizeof(in)), sizeof(in));
}

/* Read one request as a FUSE thread would; its opcode (0: failed). */
static uint32_t take(struct fixture *f)
{
	struct fuse_in_header in;

	if (devpoll_read(&f->dp, f->fd[0], &in, sizeof(in)) != sizeof(in))
		return 0;
	return in.opcode;
}

struct reader {
	struct fixture *f;
	pthread_t t;
	atomic_uint opcode; /* 0 until it read */
	bool yield;	    /* give the turn up after reading */
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;

	atomic_store(&r->opcode, take(r->f));
	if (r->yield)
		devpoll_yield();
	return NULL;
}

static void start_reader(struct reader *r, struct fixture *f, bool yield)
{
	*r = (struct reader){ .f = f, .yield = yield };
	assert_int_equal(pthread_create(&r->t, NULL, reader_main, r), 0);
}

/* Whether @r read something within @ms milliseconds. */
static bool reader_done_within(struct reader *r, int ms)
{
	for (int i = 0; i < ms; i++) {
		if (atomic_load(&r->opcode))
			return true;
		sw_sleep_ms(1);
	}
	return atomic_load(&r->opcode) != 0;
}

/* @r reads @opcode soon, with the turn, and ends. */
static void reader_gets(struct reader *r, uint32_t opcode)
{
	assert_true(reader_done_within(r, 5000));
	assert_int_equal(atomic_load(&r->opcode), opcode);
	assert_int_equal(atomic_load(&r->f->dp.stolen), 0);
	pthread_join(r->t, NULL);
}

static void test_window(void **state)
{
	const uint32_t max = 40000;

	(void)state;
	/* Short waits widen it from nothing, up to the bound. */
	assert_int_equal(devpoll_next_window(0, max, 5000, false),
			 DEVPOLL_START_NS);
	assert_int_equal(devpoll_next_window(DEVPOLL_START_NS, max, 15000,
					     false),
			 2 * DEVPOLL_START_NS);
	assert_int_equal(devpoll_next_window(20000, max, 30000, false), max);
	assert_int_equal(devpoll_next_window(max, max, max, false), max);
	/* Caught: as it was. */
	assert_int_equal(devpoll_next_window(20000, max, 3000, true), 20000);
	/* Idle spells narrow it to nothing. */
	assert_int_equal(devpoll_next_window(max, max, max + 1, false),
			 max / 2);
	assert_int_equal(devpoll_next_window(DEVPOLL_START_NS, max, 1000000000,
					     false),
			 0);
	assert_int_equal(devpoll_next_window(0, max, 1000000000, false), 0);
}

static void test_keeps_turn(void **state)
{
	struct fuse_in_header in = { .len = sizeof(in) };

	(void)state;
	in.opcode = FUSE_UNLINK;
	assert_true(devpoll_keeps_turn(&in, sizeof(in)));
	in.opcode = FUSE_LOOKUP;
	assert_true(devpoll_keeps_turn(&in, sizeof(in)));
	in.opcode = FUSE_READ;
	assert_false(devpoll_keeps_turn(&in, sizeof(in)));
	in.opcode = FUSE_SETLKW;
	assert_false(devpoll_keeps_turn(&in, sizeof(in)));
	in.opcode = FUSE_UNLINK;
	assert_false(devpoll_keeps_turn(&in, sizeof(in) - 1));
	assert_false(devpoll_keeps_turn(&in, -1));
}

/* Requests one after another: after the first, they are caught by
 * polling and nobody sleeps. */
static void test_polling_catches(void **state)
{
	struct fixture *f = *state;

	/* The window grows only while a read takes less than the bound:
	 * a bound of a second keeps a busy machine's preemptions from
	 * shrinking it (with 50 us, one in CI did). */
	devpoll_destroy(&f->dp);
	assert_int_equal(devpoll_init(&f->dp, 1000000), 0);
	request(f, FUSE_UNLINK);
	assert_int_equal(take(f), FUSE_UNLINK);
	assert_int_equal(f->dp.window_ns, DEVPOLL_START_NS);
	for (int i = 0; i < 10; i++) {
		request(f, FUSE_UNLINK);
		assert_int_equal(take(f), FUSE_UNLINK);
	}
	assert_int_equal(atomic_load(&f->dp.caught), 10);
	assert_int_equal(atomic_load(&f->dp.slept), 1);
}

/* A keeper of the turn is the only reader until it is about to wait. */
static void test_keeper_reads_alone(void **state)
{
	struct fixture *f = *state;
	struct reader r;

	request(f, FUSE_UNLINK);
	assert_int_equal(take(f), FUSE_UNLINK);
	start_reader(&r, f, true);
	request(f, FUSE_GETATTR);
	assert_false(reader_done_within(&r, 30));
	devpoll_yield(); /* about to wait */
	reader_gets(&r, FUSE_GETATTR);
}

/* A request that may wait gives the turn up at once. */
static void test_other_requests_pass_turn(void **state)
{
	struct fixture *f = *state;
	struct reader r;

	request(f, FUSE_SETLKW);
	assert_int_equal(take(f), FUSE_SETLKW);
	start_reader(&r, f, true);
	request(f, FUSE_SETLK);
	reader_gets(&r, FUSE_SETLK);
}

/* More requests queued behind the one read: another thread may take
 * them meanwhile. */
static void test_queue_passes_turn(void **state)
{
	struct fixture *f = *state;
	struct reader r;

	request(f, FUSE_UNLINK);
	request(f, FUSE_LOOKUP);
	assert_int_equal(take(f), FUSE_UNLINK);
	start_reader(&r, f, true);
	reader_gets(&r, FUSE_LOOKUP);
}

/* A keeper that waits without yielding delays the others by
 * DEVPOLL_STUCK_NS, no more. */
static void test_stuck_keeper(void **state)
{
	struct fixture *f = *state;
	struct reader r;
	int64_t t0;

	t0 = sw_mono_ns();
	request(f, FUSE_UNLINK);
	assert_int_equal(take(f), FUSE_UNLINK);
	start_reader(&r, f, false);
	request(f, FUSE_LOOKUP);
	assert_true(reader_done_within(&r, 5000));
	assert_true(sw_mono_ns() - t0 >= DEVPOLL_STUCK_NS);
	assert_int_equal(atomic_load(&r.opcode), FUSE_LOOKUP);
	assert_int_equal(atomic_load(&f->dp.stolen), 1);
	pthread_join(r.t, NULL);
}

/* A reader that exits with the turn gives it back. */
static void test_exit_gives_turn(void **state)
{
	struct fixture *f = *state;
	struct reader r;

	request(f, FUSE_UNLINK);
	start_reader(&r, f, false);
	pthread_join(r.t, NULL);
	assert_int_equal(atomic_load(&r.opcode), FUSE_UNLINK);
	request(f, FUSE_LOOKUP);
	assert_int_equal(take(f), FUSE_LOOKUP);
	assert_int_equal(atomic_load(&f->dp.stolen), 0);
}

/* A device that fails (unmounted) fails every reader, turn or not. */
static void test_error_passes_turn(void **state)
{
	struct fixture *f = *state;
	char b[64];

	close(f->fd[1]);
	f->fd[1] = -1;
	assert_int_equal(devpoll_read(&f->dp, f->fd[0], b, sizeof(b)), 0);
	assert_int_equal(devpoll_read(&f->dp, f->fd[0], b, sizeof(b)), 0);
	assert_int_equal(atomic_load(&f->dp.stolen), 0);
}

/* 0: libfuse's own way, no polling. */
static void test_no_polling(void **state)
{
	struct fixture *f = *state;
	struct devpoll off;

	assert_int_equal(devpoll_init(&off, 0), 0);
	for (int i = 0; i < 3; i++) {
		struct fuse_in_header in;

		request(f, FUSE_UNLINK);
		assert_int_equal(devpoll_read(&off, f->fd[0], &in, sizeof(in)),
				 sizeof(in));
	}
	assert_int_equal(atomic_load(&off.caught), 0);
	assert_int_equal(off.window_ns, 0);
	devpoll_destroy(&off);
	assert_int_equal(devpoll_init(&off, 1000001), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_window),
		cmocka_unit_test(test_keeps_turn),
		cmocka_unit_test_setup_teardown(test_polling_catches, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_keeper_reads_alone, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_other_requests_pass_turn,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_queue_passes_turn, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_stuck_keeper, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_exit_gives_turn, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_error_passes_turn, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_no_polling, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
