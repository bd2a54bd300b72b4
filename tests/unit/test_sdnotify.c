/*
 * sdnotify.h: a daemon's messages to systemd. Each case plays systemd: a
 * datagram socket in a fresh directory named by $NOTIFY_SOCKET, and
 * $WATCHDOG_USEC/$WATCHDOG_PID as a unit with WatchdogSec= sets them;
 * the daemon's side runs a real libuv loop, and the case reads what
 * arrived on the socket.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "sdnotify.h"
#include "unit.h"

struct fx {
	char dir[256];
	char sock[300];
	int fd; /* systemd's end */
	uv_loop_t loop;
	uv_timer_t stop; /* ends the daemon's run */
	int stop_after;	 /* ms */
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	assert_non_null(f);
	assert_int_equal(unit_mkdtemp(f->dir, sizeof(f->dir), "sdnotify"), 0);
	snprintf(f->sock, sizeof(f->sock), "%s/notify", f->dir);
	f->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(f->fd >= 0);
	assert_true(strlen(f->sock) < sizeof(a.sun_path));
	memcpy(a.sun_path, f->sock, strlen(f->sock) + 1);
	assert_int_equal(bind(f->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setenv("NOTIFY_SOCKET", f->sock, 1);
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	assert_int_equal(uv_loop_init(&f->loop), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	sw_sdnotify_stalled(NULL, NULL);
	close(f->fd);
	unit_rm_rf(f->dir);
	free(f);
	return 0;
}

/* The daemon shuts down: STOPPING=1, its own handles closed. */
static void on_stop(uv_timer_t *t)
{
	sw_sdnotify_stopping();
	uv_close((uv_handle_t *)t, NULL);
}

/* Run the loop as a daemon would until its stop timer fires; the loop
 * must then end by itself and close cleanly (no handle left open). */
static void run_daemon(struct fx *f)
{
	uv_timer_init(&f->loop, &f->stop);
	uv_timer_start(&f->stop, on_stop, (uint64_t)f->stop_after, 0);
	assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&f->loop), 0);
}

/* The messages that arrived, in order, into @msgs; their count. */
static int received(struct fx *f, char msgs[][128], int max)
{
	int n = 0;
	ssize_t len;

	while (n < max && (len = recv(f->fd, msgs[n], 127, 0)) >= 0) {
		msgs[n][len] = '\0';
		n++;
	}
	assert_true(n == max || errno == EAGAIN);
	return n;
}

static int count(char msgs[][128], int n, const char *what)
{
	int c = 0;

	for (int i = 0; i < n; i++)
		c += strcmp(msgs[i], what) == 0;
	return c;
}

static void test_sdnotify_ready_and_stopping(void **state)
{
	struct fx *f = *state;
	char msgs[64][128];
	int n;

	assert_int_equal(sw_sdnotify_ready(&f->loop, "listening"), 0);
	f->stop_after = 50;
	run_daemon(f);
	n = received(f, msgs, 64);
	assert_int_equal(n, 2); /* no watchdog asked for: no pings */
	assert_string_equal(msgs[0], "READY=1\nSTATUS=listening");
	assert_string_equal(msgs[1], "STOPPING=1");
}

static void test_sdnotify_watchdog_pings(void **state)
{
	struct fx *f = *state;
	char msgs[64][128], pid[32];
	int n, pings;

	/* WatchdogSec=100ms: a ping every 50 ms from the loop. */
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("WATCHDOG_USEC", "100000", 1);
	setenv("WATCHDOG_PID", pid, 1);
	assert_int_equal(sw_sdnotify_ready(&f->loop, NULL), 0);
	f->stop_after = 330;
	run_daemon(f); /* the timer neither keeps the loop nor leaks */
	n = received(f, msgs, 64);
	assert_true(n >= 3);
	assert_string_equal(msgs[0], "READY=1\nSTATUS=ready");
	assert_string_equal(msgs[n - 1], "STOPPING=1");
	pings = count(msgs, n, "WATCHDOG=1");
	/* One at once, then one per 50 ms for 330 ms: 7; a slow machine
	 * may lose some, but not most, and never gains any. */
	assert_in_range(pings, 3, 7);
	assert_int_equal(pings, n - 2);
}

static void test_sdnotify_watchdog_other_pid(void **state)
{
	struct fx *f = *state;
	char msgs[64][128];

	/* The watchdog is for another process (a parent that forked us). */
	setenv("WATCHDOG_USEC", "100000", 1);
	setenv("WATCHDOG_PID", "1", 1);
	assert_int_equal(sw_sdnotify_ready(&f->loop, "x"), 0);
	f->stop_after = 150;
	run_daemon(f);
	assert_int_equal(received(f, msgs, 64), 2);
	assert_int_equal(count(msgs, 2, "WATCHDOG=1"), 0);
}

/* The daemon's stall, as the master's changelog reports it. */
static int64_t stall_ns;

static int64_t stalled(void *arg)
{
	(void)arg;
	return stall_ns;
}

/*
 * A loop that turns while what it waits on is stuck (the master's
 * changelog disk) stops the pings once the stall reaches half the
 * period, as a loop that hangs does; short of it, pings go on.
 */
static void test_sdnotify_watchdog_stalled(void **state)
{
	struct fx *f = *state;
	char msgs[64][128], pid[32];
	int n;

	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("WATCHDOG_USEC", "100000", 1);
	setenv("WATCHDOG_PID", pid, 1);
	sw_sdnotify_stalled(stalled, NULL);
	stall_ns = 50 * 1000000LL; /* half of 100 ms: no ping at all */
	assert_int_equal(sw_sdnotify_ready(&f->loop, NULL), 0);
	f->stop_after = 330;
	run_daemon(f);
	n = received(f, msgs, 64);
	assert_int_equal(n, 2);
	assert_int_equal(count(msgs, n, "WATCHDOG=1"), 0);

	/* Just short of it: the pings go on. */
	stall_ns = 49 * 1000000LL;
	assert_int_equal(uv_loop_init(&f->loop), 0);
	assert_int_equal(sw_sdnotify_ready(&f->loop, NULL), 0);
	run_daemon(f);
	n = received(f, msgs, 64);
	assert_in_range(count(msgs, n, "WATCHDOG=1"), 3, 7);
}

static void test_sdnotify_outside_systemd(void **state)
{
	struct fx *f = *state;
	char msgs[4][128];

	unsetenv("NOTIFY_SOCKET");
	setenv("WATCHDOG_USEC", "100000", 1); /* ignored without a socket */
	assert_int_equal(sw_sdnotify_ready(&f->loop, "x"), 0);
	f->stop_after = 20;
	run_daemon(f);
	sw_sdnotify_stopping(); /* again: harmless */
	assert_int_equal(received(f, msgs, 4), 0);
}

static void test_sdnotify_socket_gone(void **state)
{
	struct fx *f = *state;

	/* systemd's socket cannot be reached: an error, not a crash. */
	setenv("NOTIFY_SOCKET", "/nonexistent/notify", 1);
	assert_true(sw_sdnotify_ready(&f->loop, "x") < 0);
	f->stop_after = 10;
	run_daemon(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_sdnotify_ready_and_stopping, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sdnotify_watchdog_pings,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_sdnotify_watchdog_other_pid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sdnotify_watchdog_stalled,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sdnotify_outside_systemd,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sdnotify_socket_gone,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
