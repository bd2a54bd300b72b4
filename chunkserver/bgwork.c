/*
 * Background threads: one queue of jobs to run and one of jobs finished,
 * both under one mutex; an async handle wakes the loop for the finished
 * ones. The threads lower their own priority when they start
 * (ioprio_set and setpriority both act on the calling thread when given
 * its thread id or 0).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bgwork.h"
#include "log.h"

#define TAG "bg"

/* linux/ioprio.h, which not every libc installation carries. */
#define IOPRIO_WHO_PROCESS 1
#define IOPRIO_CLASS_BE 2
#define IOPRIO_CLASS_SHIFT 13
#define BG_IOPRIO ((IOPRIO_CLASS_BE << IOPRIO_CLASS_SHIFT) | 7)
#define BG_NICE 19

struct bg {
	uv_async_t async;     /* wakes the loop: jobs finished */
	pthread_mutex_t lock; /* protects everything below */
	pthread_cond_t cond;  /* signalled: a job queued, or stop */
	struct bg_job *todo, *todo_tail;
	struct bg_job *done, *done_tail;
	bool stop;
	int nice; /* of the threads */
	unsigned nthreads;
	pthread_t *threads;
};

static void push(struct bg_job **head, struct bg_job **tail, struct bg_job *j)
{
	j->next = NULL;
	if (*tail)
		(*tail)->next = j;
	else
		*head = j;
	*tail = j;
}

static void lower_priority(int nice)
{
	pid_t tid = (pid_t)syscall(SYS_gettid);

	if (syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, BG_IOPRIO) < 0)
		sw_warn(TAG,
			"cannot lower the I/O priority of background "
			"threads: %s",
			strerror(errno));
	if (setpriority(PRIO_PROCESS, (id_t)tid, nice) < 0)
		sw_warn(TAG,
			"cannot lower the CPU priority of background "
			"threads: %s",
			strerror(errno));
}

static void *bg_thread(void *arg)
{
	struct bg *b = arg;

	pthread_setname_np(pthread_self(), "cs-bg");
	lower_priority(b->nice);
	pthread_mutex_lock(&b->lock);
	for (;;) {
		struct bg_job *j;

		while (!b->todo && !b->stop)
			pthread_cond_wait(&b->cond, &b->lock);
		if (b->stop)
			break;
		j = b->todo;
		b->todo = j->next;
		if (!b->todo)
			b->todo_tail = NULL;
		pthread_mutex_unlock(&b->lock);
		j->work(j);
		pthread_mutex_lock(&b->lock);
		push(&b->done, &b->done_tail, j);
		uv_async_send(&b->async);
	}
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

/* Run the done callbacks of finished jobs. */
static void on_async(uv_async_t *h)
{
	struct bg *b = h->data;
	struct bg_job *j;

	pthread_mutex_lock(&b->lock);
	j = b->done;
	b->done = b->done_tail = NULL;
	pthread_mutex_unlock(&b->lock);
	while (j) {
		struct bg_job *next = j->next;

		j->done(j, false);
		j = next;
	}
}

int bg_start(uv_loop_t *loop, unsigned nthreads, struct bg **out)
{
	return bg_start_nice(loop, nthreads, BG_NICE, out);
}

int bg_start_nice(uv_loop_t *loop, unsigned nthreads, int nice, struct bg **out)
{
	struct bg *b = calloc(1, sizeof(*b));
	int rc;

	if (!b)
		return -ENOMEM;
	b->nice = nice;
	b->threads = calloc(nthreads, sizeof(*b->threads));
	if (!b->threads) {
		free(b);
		return -ENOMEM;
	}
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->cond, NULL);
	rc = uv_async_init(loop, &b->async, on_async);
	if (rc < 0) {
		free(b->threads);
		free(b);
		return rc;
	}
	b->async.data = b;
	for (; b->nthreads < nthreads; b->nthreads++) {
		rc = pthread_create(&b->threads[b->nthreads], NULL, bg_thread,
				    b);
		if (rc) {
			bg_stop(b);
			return -rc;
		}
	}
	*out = b;
	return 0;
}

void bg_submit(struct bg *b, struct bg_job *j)
{
	pthread_mutex_lock(&b->lock);
	push(&b->todo, &b->todo_tail, j);
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

static void on_closed(uv_handle_t *h)
{
	struct bg *b = h->data;

	pthread_mutex_destroy(&b->lock);
	pthread_cond_destroy(&b->cond);
	free(b->threads);
	free(b);
}

void bg_stop(struct bg *b)
{
	struct bg_job *j;

	pthread_mutex_lock(&b->lock);
	b->stop = true;
	j = b->todo;
	b->todo = b->todo_tail = NULL;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
	for (unsigned i = 0; i < b->nthreads; i++)
		pthread_join(b->threads[i], NULL);
	on_async(&b->async);
	while (j) {
		struct bg_job *next = j->next;

		j->done(j, true);
		j = next;
	}
	uv_close((uv_handle_t *)&b->async, on_closed);
}
