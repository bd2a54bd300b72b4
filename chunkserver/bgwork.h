/*
 * bgwork: threads at low CPU and I/O priority for background jobs (chunk
 * deletion, replication), with completions delivered on the event loop.
 *
 * DESIGN "Priority": background work must not starve foreground work.
 * These threads are apart from libuv's pool, which serves clients, so a
 * flood of deletions cannot occupy it; and they run at I/O priority
 * best-effort 7 (the lowest that still makes progress under load, where
 * the idle class could starve for good) and nice 19.
 *
 * Jobs run in submission order, as many at once as there are threads.
 */
#ifndef SWEEPFS_CHUNKSERVER_BGWORK_H
#define SWEEPFS_CHUNKSERVER_BGWORK_H

#include <stdbool.h>

#include <uv.h>

struct bg;
struct bg_job;

/* Runs on a background thread. */
typedef void (*bg_work_fn)(struct bg_job *j);

/*
 * Runs on the loop thread once the job ran, or with @cancelled set when
 * bg_stop() dropped it before it ran. The job belongs to its owner again.
 */
typedef void (*bg_done_fn)(struct bg_job *j, bool cancelled);

/* Embedded in the owner's struct; filled by the owner before submitting. */
struct bg_job {
	struct bg_job *next; /* queue link, the module's */
	bg_work_fn work;
	bg_done_fn done;
};

/*
 * Start @nthreads (>= 1) threads delivering completions on @loop. Returns
 * 0 and the pool in *@out, or -errno. The pool keeps @loop alive (an
 * async handle) until bg_stop().
 */
int bg_start(uv_loop_t *loop, unsigned nthreads, struct bg **out);

/*
 * bg_start() with the threads at @nice instead of 19: for work that
 * bounds its own share (a duty cycle) and must not starve behind every
 * other process of a busy machine.
 */
int bg_start_nice(uv_loop_t *loop, unsigned nthreads, int nice,
		  struct bg **out);

/* Queue @j; the pool borrows it until its done callback. Loop thread. */
void bg_submit(struct bg *b, struct bg_job *j);

/*
 * Stop: jobs not started are cancelled, running ones finish (the call
 * waits for them), every done callback runs before this returns, and the
 * pool frees itself once its handle is closed. Loop thread.
 */
void bg_stop(struct bg *b);

#endif
