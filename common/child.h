/*
 * A forked child working in the background on the parent's memory as it
 * was at the fork (copy-on-write), reporting over a pipe the event loop
 * reads: the checkpoint writer, the consistency check and snapshot
 * copies use it. The child closes every other descriptor (clients see
 * their own closes), runs at lower CPU and I/O priority, and exits with
 * what its function returned. It is killed when its parent dies (a
 * kill -9, a crash): nothing it does is of use without the parent. The
 * parent must fork it from the thread that lives as long as it does
 * (the loop's: PR_SET_PDEATHSIG follows the forking thread).
 *
 * The owner embeds a struct sw_child, sets on_exit (and on_data to
 * consume output as it comes; else it collects in @out), and calls
 * sw_child_start(). A child's output is whatever it writes, so an owner
 * that collects it whole sets @out_max: past that many bytes unconsumed
 * in @out the child is killed and on_exit comes with -EIO (the output
 * of a child that walks what clients made may be as big as they made
 * it). on_exit comes once, after the child is reaped and the
 * pipe closed: the owner may free the struct there. What is left in
 * @out is the owner's to take and release.
 */
#ifndef SWEEPFS_COMMON_CHILD_H
#define SWEEPFS_COMMON_CHILD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <uv.h>

#include "buf.h"

struct sw_child;

/* In the child: write to @fd; 0 or -errno (its exit status). */
typedef int (*sw_child_fn)(void *arg, int fd);

struct sw_child {
	/* Set by the owner. */
	void (*on_data)(struct sw_child *c);	     /* more in @out */
	void (*on_exit)(struct sw_child *c, int rc); /* 0 or -errno */
	void *data;
	size_t out_max; /* most bytes @out may hold; 0: no bound */
	/* The helper's. */
	struct sw_buf out; /* written by the child, not yet taken */
	uv_pipe_t pipe;
	pid_t pid; /* 0 once reaped */
	int rc;
	bool active; /* from start until on_exit */
	bool reading;
};

/*
 * Fork a child that runs @fn(@arg, fd) and exits. 0: on_exit will come,
 * also when the fork itself failed (with its error). -errno only when
 * not even the pipe could be made: no on_exit then.
 */
int sw_child_start(struct sw_child *c, uv_loop_t *loop, sw_child_fn fn,
		   void *arg);

/* Stop reading (the owner has enough in @out); resume later. A child
 * that fills the pipe then waits. */
void sw_child_pause(struct sw_child *c);
void sw_child_resume(struct sw_child *c);

/*
 * The process's hooks around its children, whoever forks them: @before_fork
 * runs in the parent right before each fork(), @none_alive right after a
 * reap leaves no child of this module alive (not after a fork that
 * failed). For work on the parent's memory that a child sharing it would
 * make costly (the master's huge page collapse, master.c): it must stop
 * before any fork and may run only while no child lives. Either may be
 * NULL. Loop thread only.
 */
void sw_child_hooks(void (*before_fork)(void *arg),
		    void (*none_alive)(void *arg), void *arg);

/* Remove the hooks set with @arg (none if another's were set since). */
void sw_child_unhook(void *arg);

/* How many children of this module are alive (forked, not yet reaped). */
unsigned sw_child_alive(void);

/* Kill the child now (SIGKILL) and reap it; on_exit follows with
 * -EINTR. Nothing if it is not active. */
void sw_child_kill(struct sw_child *c);

#endif
