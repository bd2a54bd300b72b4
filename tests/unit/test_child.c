/*
 * child.h: a forked child's output reaches the loop whole, its exit
 * status becomes the rc, a kill is reported, pausing holds the child
 * back, the owner may free the struct in on_exit, and an output past the
 * owner's bound fails the child. A child dies with its parent.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "child.h"
#include "fsio.h"

#define BIG (3u << 20) /* more than a pipe holds */

struct run {
	struct sw_child c;
	int exits;
	int rc;
	size_t got;	 /* output seen by on_data */
	size_t pause_at; /* pause once this much is in */
	bool paused;
	size_t got_at_pause;
	uv_timer_t timer; /* with pause_at: started at the pause */
};

static void on_exit_cb(struct sw_child *c, int rc)
{
	struct run *r = c->data;

	r->exits++;
	r->rc = rc;
}

static void on_resume_timer(uv_timer_t *t);

static void on_data(struct sw_child *c)
{
	struct run *r = c->data;

	r->got = sw_buf_used(&c->out);
	if (r->pause_at && !r->paused && r->got >= r->pause_at) {
		sw_child_pause(c);
		r->paused = true;
		r->got_at_pause = r->got;
		/* From the pause, not from the start: a child slow to be
		 * scheduled (a loaded machine) has written nothing at a
		 * fixed time after it was started. */
		uv_timer_start(&r->timer, on_resume_timer, 100, 0);
	}
}

static int write_big(void *arg, int fd)
{
	static uint8_t buf[BIG];

	(void)arg;
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7);
	return sw_write_all(fd, buf, sizeof(buf));
}

static int fail_enospc(void *arg, int fd)
{
	(void)arg;
	(void)fd;
	return -ENOSPC;
}

static int hang(void *arg, int fd)
{
	(void)arg;
	(void)fd;
	pause();
	return 0;
}

static void start(struct run *r, uv_loop_t *loop, sw_child_fn fn)
{
	memset(r, 0, sizeof(*r));
	r->c.data = r;
	r->c.on_exit = on_exit_cb;
	r->c.on_data = on_data;
	assert_int_equal(sw_child_start(&r->c, loop, fn, NULL), 0);
	assert_true(r->c.active);
}

static void test_output_whole(void **state)
{
	uv_loop_t loop;
	struct run r;

	(void)state;
	uv_loop_init(&loop);
	start(&r, &loop, write_big);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(r.exits, 1);
	assert_int_equal(r.rc, 0);
	assert_false(r.c.active);
	assert_int_equal(sw_buf_used(&r.c.out), BIG);
	for (size_t i = 0; i < BIG; i += 4093)
		assert_int_equal(sw_buf_head(&r.c.out)[i], (uint8_t)(i * 7));
	sw_buf_release(&r.c.out);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_exit_status(void **state)
{
	uv_loop_t loop;
	struct run r;

	(void)state;
	uv_loop_init(&loop);
	start(&r, &loop, fail_enospc);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(r.exits, 1);
	assert_int_equal(r.rc, -ENOSPC);
	sw_buf_release(&r.c.out);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void on_kill_timer(uv_timer_t *t)
{
	struct run *r = t->data;

	sw_child_kill(&r->c);
	sw_child_kill(&r->c); /* twice: nothing more */
	uv_close((uv_handle_t *)t, NULL);
}

static void test_kill(void **state)
{
	uv_loop_t loop;
	struct run r;

	(void)state;
	uv_loop_init(&loop);
	start(&r, &loop, hang);
	uv_timer_init(&loop, &r.timer);
	r.timer.data = &r;
	uv_timer_start(&r.timer, on_kill_timer, 50, 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(r.exits, 1);
	assert_int_equal(r.rc, -EINTR);
	assert_int_equal(r.c.pid, 0);
	sw_buf_release(&r.c.out);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void on_resume_timer(uv_timer_t *t)
{
	struct run *r = t->data;

	/* Paused: the child is blocked on a full pipe, nothing more came. */
	assert_true(r->paused);
	assert_true(r->c.active);
	assert_int_equal(sw_buf_used(&r->c.out), r->got_at_pause);
	assert_true(sw_buf_used(&r->c.out) < BIG);
	r->pause_at = 0;
	sw_child_resume(&r->c);
	uv_close((uv_handle_t *)t, NULL);
}

static void test_pause_resume(void **state)
{
	uv_loop_t loop;
	struct run r;

	(void)state;
	uv_loop_init(&loop);
	start(&r, &loop, write_big);
	r.pause_at = 1;
	uv_timer_init(&loop, &r.timer);
	r.timer.data = &r;
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_true(r.paused);
	assert_int_equal(r.exits, 1);
	assert_int_equal(r.rc, 0);
	assert_int_equal(sw_buf_used(&r.c.out), BIG);
	sw_buf_release(&r.c.out);
	assert_int_equal(uv_loop_close(&loop), 0);
}

/* An owner's bound on the output: the child is failed past it, and the
 * output collected never holds more than one byte over it. */
static void test_output_cap(void **state)
{
	uv_loop_t loop;
	struct run r;

	(void)state;
	uv_loop_init(&loop);
	memset(&r, 0, sizeof(r));
	r.c.data = &r;
	r.c.on_exit = on_exit_cb;
	r.c.out_max = BIG / 2;
	assert_int_equal(sw_child_start(&r.c, &loop, write_big, NULL), 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(r.exits, 1);
	assert_int_equal(r.rc, -EIO);
	assert_true(sw_buf_used(&r.c.out) <= BIG / 2 + 1);
	sw_buf_release(&r.c.out);

	/* Exactly at the bound is within it. */
	memset(&r, 0, sizeof(r));
	r.c.data = &r;
	r.c.on_exit = on_exit_cb;
	r.c.out_max = BIG;
	assert_int_equal(sw_child_start(&r.c, &loop, write_big, NULL), 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(r.rc, 0);
	assert_int_equal(sw_buf_used(&r.c.out), BIG);
	sw_buf_release(&r.c.out);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void free_on_exit(struct sw_child *c, int rc)
{
	(void)rc;
	sw_buf_release(&c->out);
	free(c);
}

static void test_free_in_on_exit(void **state)
{
	struct sw_child *c = calloc(1, sizeof(*c));
	uv_loop_t loop;

	(void)state;
	assert_non_null(c);
	uv_loop_init(&loop);
	c->on_exit = free_on_exit;
	assert_int_equal(sw_child_start(c, &loop, write_big, NULL), 0);
	uv_run(&loop, UV_RUN_DEFAULT); /* ASan: no use after the free */
	assert_int_equal(uv_loop_close(&loop), 0);
}

struct hooked {
	int forks, none;
	unsigned alive_at_fork[2];
	int exits_at_none; /* on_exit calls seen when none_alive came */
	struct run *runs;
};

static void before_fork(void *arg)
{
	struct hooked *h = arg;

	if (h->forks < 2)
		h->alive_at_fork[h->forks] = sw_child_alive();
	h->forks++;
}

static void none_alive(void *arg)
{
	struct hooked *h = arg;

	h->none++;
	assert_int_equal(sw_child_alive(), 0);
	h->exits_at_none = h->runs[0].exits + h->runs[1].exits;
}

/*
 * The process's hooks (child.h, sw_child_hooks()): one before each fork,
 * and "none alive" once, when the last of two children is reaped, not
 * when the first is.
 */
static void test_hooks(void **state)
{
	struct run r[2];
	struct hooked h = { .runs = r };
	uv_loop_t loop;

	(void)state;
	uv_loop_init(&loop);
	sw_child_hooks(before_fork, none_alive, &h);
	start(&r[0], &loop, fail_enospc);
	start(&r[1], &loop, hang);
	assert_int_equal(sw_child_alive(), 2);
	uv_timer_init(&loop, &r[1].timer);
	r[1].timer.data = &r[1];
	uv_timer_start(&r[1].timer, on_kill_timer, 100, 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(h.forks, 2);
	assert_int_equal(h.alive_at_fork[0], 0);
	assert_int_equal(h.alive_at_fork[1], 1);
	assert_int_equal(h.none, 1);
	/* The first had exited (and was seen) before the kill of the
	 * second reaped it. */
	assert_int_equal(h.exits_at_none, 1);
	assert_int_equal(r[0].rc, -ENOSPC);
	assert_int_equal(r[1].rc, -EINTR);
	assert_int_equal(sw_child_alive(), 0);
	sw_buf_release(&r[0].c.out);
	sw_buf_release(&r[1].c.out);

	/* Only the owner's arg takes them off. */
	sw_child_unhook(&loop);
	start(&r[0], &loop, fail_enospc);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(h.forks, 3);
	assert_int_equal(h.none, 2);
	sw_child_unhook(&h);
	start(&r[1], &loop, fail_enospc);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(h.forks, 3);
	assert_int_equal(h.none, 2);
	sw_buf_release(&r[0].c.out);
	sw_buf_release(&r[1].c.out);
	assert_int_equal(uv_loop_close(&loop), 0);
}

/*
 * A child dies with its parent: a checkpoint writer left behind by a
 * killed master wrote on beside the master started after it. The parent
 * here is a process of its own, killed with SIGKILL while its child
 * hangs (or is still starting); this process takes the orphan in (a
 * subreaper) to see it die.
 */
static void test_dies_with_parent(void **state)
{
	pid_t parent, child = 0, got = 0;
	int fds[2], status = 0;

	(void)state;
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	assert_int_equal(pipe(fds), 0);
	parent = fork();
	assert_true(parent >= 0);
	if (parent == 0) {
		struct run r = { 0 };
		uv_loop_t loop;

		close(fds[0]);
		uv_loop_init(&loop);
		r.c.data = &r;
		r.c.on_exit = on_exit_cb;
		if (sw_child_start(&r.c, &loop, hang, NULL) < 0)
			r.c.pid = 0;
		if (write(fds[1], &r.c.pid, sizeof(r.c.pid)) < 0)
			_exit(1);
		pause();
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], &child, sizeof(child)) != sizeof(child))
		child = 0;
	close(fds[0]);
	/* The parent goes before any check can fail and leave it. */
	assert_int_equal(kill(parent, SIGKILL), 0);
	assert_int_equal(waitpid(parent, &status, 0), parent);
	assert_true(child > 0);
	for (int i = 0; i < 500; i++) {
		got = waitpid(child, &status, WNOHANG);
		if (got != 0)
			break;
		usleep(10 * 1000);
	}
	if (got != child) { /* still alive after 5 s: not ours to leave */
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	prctl(PR_SET_CHILD_SUBREAPER, 0);
	assert_int_equal(got, child);
	/* Killed; or, when the parent died before the child asked to be,
	 * gone on seeing so. */
	if (WIFSIGNALED(status))
		assert_int_equal(WTERMSIG(status), SIGKILL);
	else
		assert_int_equal(WEXITSTATUS(status), EINTR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_output_whole),
		cmocka_unit_test(test_exit_status),
		cmocka_unit_test(test_kill),
		cmocka_unit_test(test_pause_resume),
		cmocka_unit_test(test_free_in_on_exit),
		cmocka_unit_test(test_output_cap),
		cmocka_unit_test(test_hooks),
		cmocka_unit_test(test_dies_with_parent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
