/*
 * Forked background children (child.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"

#define READ_CHUNK (64u << 10)

/* ioprio_set(2): best effort, lowest level. */
#define IOPRIO_WHO_PROCESS 1
#define IOPRIO_BE_LOWEST ((2 << 13) | 7)

static struct {
	void (*before_fork)(void *arg);
	void (*none_alive)(void *arg);
	void *arg;
} hooks;
static unsigned alive;

void sw_child_hooks(void (*before_fork)(void *arg),
		    void (*none_alive)(void *arg), void *arg)
{
	hooks.before_fork = before_fork;
	hooks.none_alive = none_alive;
	hooks.arg = arg;
}

void sw_child_unhook(void *arg)
{
	if (hooks.arg == arg)
		hooks = (__typeof__(hooks)){ 0 };
}

unsigned sw_child_alive(void)
{
	return alive;
}

static void child_run(sw_child_fn fn, void *arg, int fd, pid_t parent)
{
	int rc;

	/* The child's work is its parent's: it dies with it. A checkpoint
	 * writer left behind by a killed master wrote on for tens of
	 * seconds (at 34 M files) beside the master started after it, and
	 * a check or a copy would report to nobody. A parent already gone
	 * before the prctl() is seen by getppid(). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(EINTR);
	/* Drop the parent's sockets so that clients see their own closes. */
	if (fd > 3)
		syscall(SYS_close_range, 3, fd - 1, 0);
	syscall(SYS_close_range, fd + 1, ~0U, 0);
	setpriority(PRIO_PROCESS, 0, 10);
	syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, IOPRIO_BE_LOWEST);
	rc = fn(arg, fd);
	_exit(rc < 0 ? ((-rc & 0xff) ? (-rc & 0xff) : EIO) : 0);
}

static void on_closed(uv_handle_t *h)
{
	struct sw_child *c = h->data;

	c->active = false;
	c->on_exit(c, c->rc);
}

/* Reap the child (killed first with @kill_it) and close the pipe. */
static void finish(struct sw_child *c, bool kill_it, int rc)
{
	int status = 0;

	if (c->reading)
		uv_read_stop((uv_stream_t *)&c->pipe);
	c->reading = false;
	if (c->pid > 0) {
		if (kill_it)
			kill(c->pid, SIGKILL);
		while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
			;
		c->pid = 0;
		if (--alive == 0 && hooks.none_alive)
			hooks.none_alive(hooks.arg);
		if (rc == 0 && WIFEXITED(status))
			rc = -WEXITSTATUS(status);
		else if (rc == 0)
			rc = -EINTR;
	}
	c->rc = rc;
	if (!uv_is_closing((uv_handle_t *)&c->pipe))
		uv_close((uv_handle_t *)&c->pipe, on_closed);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct sw_child *c = h->data;

	(void)hint;
	if (sw_buf_reserve(&c->out, READ_CHUNK) < 0) {
		buf->base = NULL;
		buf->len = 0;
		return;
	}
	buf->base = (char *)c->out.data + c->out.len;
	buf->len = c->out.cap - c->out.len;
	/* One byte past the bound is enough to know it was passed. */
	if (c->out_max && buf->len > c->out_max + 1 - sw_buf_used(&c->out))
		buf->len = c->out_max + 1 - sw_buf_used(&c->out);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct sw_child *c = s->data;

	(void)buf;
	if (nread > 0) {
		c->out.len += (size_t)nread;
		if (c->out_max && sw_buf_used(&c->out) > c->out_max) {
			finish(c, true, -EIO); /* more than its owner takes */
			return;
		}
		if (c->on_data)
			c->on_data(c);
		return;
	}
	if (nread == 0)
		return;
	/* EOF: the child is done; anything else (ENOBUFS from on_alloc, a
	 * read error) leaves its output cut short. */
	finish(c, nread != UV_EOF, nread == UV_EOF ? 0 : -EIO);
}

int sw_child_start(struct sw_child *c, uv_loop_t *loop, sw_child_fn fn,
		   void *arg)
{
	pid_t pid, self = getpid();
	int fds[2], rc;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	rc = uv_pipe_init(loop, &c->pipe, 0);
	if (rc < 0) {
		close(fds[0]);
		close(fds[1]);
		return rc;
	}
	c->pipe.data = c;
	c->pid = 0;
	c->rc = 0;
	c->reading = false;
	rc = uv_pipe_open(&c->pipe, fds[0]);
	if (rc == 0 && hooks.before_fork)
		hooks.before_fork(hooks.arg);
	pid = rc == 0 ? fork() : -1;
	if (pid == 0)
		child_run(fn, arg, fds[1], self);
	close(fds[1]);
	if (pid < 0) {
		if (rc == 0)
			rc = -errno;
		else
			close(fds[0]);
		/* The pipe's handle is closing: the owner hears of it
		 * through on_exit, once it may free @c. */
		c->active = true;
		c->rc = rc;
		uv_close((uv_handle_t *)&c->pipe, on_closed);
		return 0;
	}
	c->pid = pid;
	c->active = true;
	alive++;
	rc = uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
	if (rc < 0) {
		finish(c, true, rc);
		return 0; /* on_exit tells */
	}
	c->reading = true;
	return 0;
}

void sw_child_pause(struct sw_child *c)
{
	if (!c->reading)
		return;
	uv_read_stop((uv_stream_t *)&c->pipe);
	c->reading = false;
}

void sw_child_resume(struct sw_child *c)
{
	if (c->reading || !c->active || c->pid <= 0 ||
	    uv_is_closing((uv_handle_t *)&c->pipe))
		return;
	if (uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read) == 0)
		c->reading = true;
	else
		finish(c, true, -EIO);
}

void sw_child_kill(struct sw_child *c)
{
	if (!c->active || c->pid <= 0)
		return;
	finish(c, true, -EINTR);
}
