/*
 * FUSE over io_uring beneath libfuse 3.14 (ring.h).
 */
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "devpoll.h"
#include "log.h"
#include "ring.h"
#include "util.h"

#define TAG "ring"

/* The kernel's least payload buffer (FUSE_MIN_READ_BUFFER). */
#define RING_MIN_PAYLOAD 8192u
/* Pages a request may carry when INIT did not say
 * (FUSE_DEFAULT_MAX_PAGES_PER_REQ). */
#define RING_DEFAULT_PAGES 32u

/* One request's place in a queue: the kernel writes the request into
 * it and reads the reply from it. */
struct ring_ent {
	struct fuse_uring_req_header hdr; /* the first iovec */
	struct iovec iov[2];		  /* hdr, payload */
	struct ring_queue *q;
	char *payload;
	/* The request it holds, by its commit id; 0: none. */
	_Atomic uint64_t commit_id;
	uint64_t reply_id; /* the id of the reply it holds, till sent */
};

/*
 * Only a queue's own thread submits to its ring. The kernel ties a
 * command to the thread that submitted it: its completions run in that
 * thread's context, and when that thread exits, its commands are
 * cancelled, and the requests the kernel then gives their entries fail
 * with ECANCELED. Replies from other threads (the pool's, a chunkserver
 * connection's that comes and goes) are handed to the queue's thread.
 */
struct ring_queue {
	struct ring *r;
	unsigned qid; /* the CPU whose requests it gets */
	struct io_uring uring;
	pthread_t tid;
	struct ring_ent *ents;	/* RING_MAX_DEPTH, the first nents given */
	unsigned nents;		/* entries given to the kernel */
	unsigned live;		/* ... and not lost since */
	unsigned held;		/* entries holding a request */
	unsigned errors;	/* errors since the last request */
	bool wake_armed;	/* the eventfd's read is queued */
	atomic_bool kicking;	/* kick_main() runs */
	char *buf;		/* requests served here, put together */
	int efd;		/* an eventfd: replies to commit, or stop */
	uint64_t efd_val;	/* what the ring reads from it */
	pthread_mutex_t mu;	/* done, ndone */
	struct ring_ent **done; /* replies from other threads */
	unsigned ndone;
};

/* The queue whose thread this is, if any. */
static _Thread_local struct ring_queue *own_queue;

struct ring {
	struct fuse_session *se;
	int fd;
	char *mountpoint;
	/* INIT's id while its reply is awaited (0: no INIT offered it). */
	_Atomic uint64_t init_unique;
	size_t payload_max; /* bytes of an entry's payload */
	size_t buf_len;	    /* bytes of a request put together */
	unsigned nq;
	struct ring_queue *qs;
	unsigned running; /* queue threads started */
	/* Whether they may register: 0 not yet, 1 yes, -1 never. Under mu. */
	int gate;
	pthread_cond_t gate_cv;
	atomic_bool started;
	atomic_bool stopping;
	_Atomic uint64_t served;
	atomic_bool said_bad; /* a malformed request or reply was logged */

	/* The pool serving requests that may wait. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct ring_ent **work; /* a circular FIFO of nq * RING_MAX_DEPTH */
	size_t work_head, work_len, work_cap;
	unsigned idle;
	unsigned nworkers;
	bool have_affinity;
	cpu_set_t affinity; /* the process's, for workers */
	bool pool_stop;
	struct ring_worker {
		struct ring *r;
		pthread_t tid;
		char *buf; /* its requests, put together */
	} workers[RING_MAX_WORKERS];
};

/* The entry whose request this thread is serving, if any. */
static _Thread_local struct ring_ent *serving;

ssize_t ring_rebuild(const struct fuse_uring_req_header *h, const void *payload,
		     size_t payload_sz, void *buf, size_t len)
{
	struct fuse_in_header in;
	size_t op_sz;
	char *p = buf;

	memcpy(&in, h->in_out, sizeof(in));
	/* in.len counts every argument: the opcode's header is the rest. */
	if (in.len < sizeof(in) + payload_sz)
		return -EPROTO;
	op_sz = in.len - sizeof(in) - payload_sz;
	if (op_sz > sizeof(h->op_in))
		return -EPROTO;
	if (in.len > len)
		return -EOVERFLOW;
	memcpy(p, &in, sizeof(in));
	memcpy(p + sizeof(in), h->op_in, op_sz);
	if (payload_sz)
		memcpy(p + sizeof(in) + op_sz, payload, payload_sz);
	return in.len;
}

ssize_t ring_store_reply(struct fuse_uring_req_header *h, void *payload,
			 size_t payload_max, const struct iovec *iov, int count)
{
	struct fuse_out_header out;
	size_t total = 0, off = 0;
	ssize_t err = 0;

	if (count < 1 || iov[0].iov_len < sizeof(out))
		return -EPROTO; /* not even an id to answer */
	memcpy(&out, iov[0].iov_base, sizeof(out));
	for (int i = 0; i < count; i++)
		total += iov[i].iov_len;
	if (out.len != total)
		err = -EPROTO;
	else if (total - sizeof(out) > payload_max)
		err = -EOVERFLOW;
	if (err) {
		out = (struct fuse_out_header){ .len = sizeof(out),
						.error = -EIO,
						.unique = out.unique };
		memcpy(h->in_out, &out, sizeof(out));
		h->ring_ent_in_out.payload_sz = 0;
		return err;
	}
	for (int i = 0; i < count; i++) {
		const char *base = iov[i].iov_base;
		size_t skip = i == 0 ? sizeof(out) : 0;
		size_t n = iov[i].iov_len - skip;

		if (n)
			memcpy((char *)payload + off, base + skip, n);
		off += n;
	}
	memcpy(h->in_out, &out, sizeof(out));
	h->ring_ent_in_out.payload_sz = (uint32_t)off;
	return (ssize_t)total;
}

bool ring_init_offered(const void *buf, ssize_t n)
{
	const struct fuse_in_header *in = buf;
	const struct fuse_init_in *arg = (const void *)(in + 1);
	size_t need = sizeof(*in) + offsetof(struct fuse_init_in, flags2) +
		      sizeof(arg->flags2);

	if (n < (ssize_t)need || in->opcode != FUSE_INIT)
		return false;
	if (!(arg->flags & FUSE_INIT_EXT))
		return false;
	return ((uint64_t)arg->flags2 << 32) & FUSE_OVER_IO_URING;
}

int ring_init_accept(const struct iovec *iov, int count, size_t *payload_max)
{
	const struct fuse_out_header *out = iov[0].iov_base;
	struct fuse_init_out *arg;
	size_t pages, max;

	if (count < 2 || iov[0].iov_len < sizeof(*out) || out->error ||
	    iov[1].iov_len < offsetof(struct fuse_init_out, flags2) +
				     sizeof(arg->flags2))
		return -EPROTO;
	arg = iov[1].iov_base;
	arg->flags |= FUSE_INIT_EXT;
	arg->flags2 |= (uint32_t)(FUSE_OVER_IO_URING >> 32);
	pages = (arg->flags & FUSE_MAX_PAGES) ? arg->max_pages :
						RING_DEFAULT_PAGES;
	max = SW_MAX((size_t)RING_MIN_PAYLOAD, (size_t)arg->max_write);
	max = SW_MAX(max, pages * (size_t)sysconf(_SC_PAGESIZE));
	*payload_max = max;
	return 0;
}

unsigned ring_cpu_count(const char *list)
{
	unsigned n = 0;

	for (;;) {
		char *end;
		unsigned long lo = strtoul(list, &end, 10), hi = lo;

		if (end == list)
			return 0;
		if (*end == '-') {
			list = end + 1;
			hi = strtoul(list, &end, 10);
			if (end == list || hi < lo)
				return 0;
		}
		n += (unsigned)(hi - lo + 1);
		if (*end != ',')
			return n;
		list = end + 1;
	}
}

/* The number of queues the kernel makes: one per possible CPU
 * (num_possible_cpus()). */
static unsigned possible_cpus(void)
{
	FILE *f = fopen("/sys/devices/system/cpu/possible", "re");
	char line[4096];
	unsigned n = 0;

	if (f) {
		if (fgets(line, sizeof(line), f))
			n = ring_cpu_count(line);
		fclose(f);
	}
	return n ? n : (unsigned)get_nprocs_conf();
}

/* An SQE of @q's ring, submitting those queued if it is full. The
 * queue's thread only. */
static struct io_uring_sqe *get_sqe(struct ring_queue *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->uring);

	if (!sqe && io_uring_submit(&q->uring) >= 0)
		sqe = io_uring_get_sqe(&q->uring);
	return sqe;
}

/* Queue @cmd for @e (submitted with the next submit); false if the
 * ring has no room. The queue's thread only. */
static bool queue_cmd(struct ring_queue *q, struct ring_ent *e,
		      enum fuse_uring_cmd cmd, uint64_t commit_id)
{
	struct fuse_uring_cmd_req req = { .qid = (uint16_t)q->qid,
					  .commit_id = commit_id };
	struct io_uring_sqe *sqe = get_sqe(q);

	if (!sqe)
		return false;
	io_uring_prep_rw(IORING_OP_URING_CMD, sqe, q->r->fd, e->iov, 2, 0);
	sqe->cmd_op = cmd;
	io_uring_sqe_set_data(sqe, e);
	/* The command area: a 128-byte SQE's bytes from 48 on. */
	memcpy((char *)sqe + offsetof(struct io_uring_sqe, cmd), &req,
	       sizeof(req));
	return true;
}

/* Read the eventfd: other threads' replies, or the stop. */
static bool arm_wake(struct ring_queue *q)
{
	struct io_uring_sqe *sqe = get_sqe(q);

	if (!sqe)
		return false;
	io_uring_prep_read(sqe, q->efd, &q->efd_val, sizeof(q->efd_val), 0);
	io_uring_sqe_set_data(sqe, &q->efd_val);
	q->wake_armed = true;
	return true;
}

/* Commit the replies other threads handed over. */
static void commit_done(struct ring_queue *q)
{
	pthread_mutex_lock(&q->mu);
	while (q->ndone) {
		struct ring_ent *e = q->done[--q->ndone];

		if (!queue_cmd(q, e, FUSE_IO_URING_CMD_COMMIT_AND_FETCH,
			       e->reply_id)) {
			q->ndone++; /* after the next submit */
			break;
		}
		q->held--;
	}
	pthread_mutex_unlock(&q->mu);
}

/* Wake @q's thread through its eventfd. */
static void wake(struct ring_queue *q)
{
	static const uint64_t one = 1;

	if (write(q->efd, &one, sizeof(one)) < 0)
		sw_err(TAG, "queue %u: eventfd: %s", q->qid, strerror(errno));
}

/* Hand @e's reply to its queue's thread. */
static void hand_back(struct ring_queue *q, struct ring_ent *e)
{
	pthread_mutex_lock(&q->mu);
	q->done[q->ndone++] = e;
	pthread_mutex_unlock(&q->mu);
	wake(q);
}

static void say_bad(struct ring *r, const char *what, int err)
{
	if (!atomic_exchange(&r->said_bad, true))
		sw_err(TAG, "%s: %s (said once)", what, strerror(-err));
}

/* Serve @e's request in this thread, put together in @buf. */
static void serve(struct ring *r, struct ring_ent *e, char *buf)
{
	size_t payload_sz = e->hdr.ring_ent_in_out.payload_sz;
	ssize_t n = payload_sz > r->payload_max ?
			    -EPROTO :
			    ring_rebuild(&e->hdr, e->payload, payload_sz, buf,
					 r->buf_len);
	struct fuse_buf fb = { .mem = buf };
	struct iovec iov;
	struct fuse_out_header out;

	if (n < 0) {
		/* Answer it, or its caller would wait for ever. */
		memcpy(&out.unique,
		       e->hdr.in_out + offsetof(struct fuse_in_header, unique),
		       sizeof(out.unique));
		out.error = -EIO;
		out.len = sizeof(out);
		iov = (struct iovec){ &out, sizeof(out) };
		say_bad(r, "a malformed request from the kernel", (int)n);
		ring_writev(r, r->fd, &iov, 1);
		return;
	}
	fb.size = (size_t)n;
	serving = e;
	fuse_session_process_buf(r->se, &fb);
	serving = NULL;
}

/*
 * Start @fn(@arg) on a thread that may run on @cpus; detached where @tid
 * is NULL. 0 or an errno.
 */
static int spawn(pthread_t *tid, const cpu_set_t *cpus, void *(*fn)(void *),
		 void *arg)
{
	pthread_attr_t attr;
	pthread_t t;
	int rc = pthread_attr_init(&attr);

	if (rc)
		return rc;
	if (cpus)
		pthread_attr_setaffinity_np(&attr, sizeof(*cpus), cpus);
	if (!tid)
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(tid ? tid : &t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return rc;
}

static void *worker_main(void *arg)
{
	struct ring_worker *w = arg;
	struct ring *r = w->r;
	struct ring_ent *e;

	pthread_mutex_lock(&r->mu);
	for (;;) {
		while (!r->work_len && !r->pool_stop) {
			r->idle++;
			pthread_cond_wait(&r->cv, &r->mu);
			r->idle--;
		}
		if (r->pool_stop)
			break;
		e = r->work[r->work_head];
		r->work_head = (r->work_head + 1) % r->work_cap;
		r->work_len--;
		pthread_mutex_unlock(&r->mu);
		serve(r, e, w->buf);
		pthread_mutex_lock(&r->mu);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* Start another worker. Under r->mu. */
static bool add_worker(struct ring *r)
{
	struct ring_worker *w = &r->workers[r->nworkers];

	w->r = r;
	w->buf = malloc(r->buf_len);
	/* The process's CPUs, not the creating queue thread's one. */
	if (w->buf && spawn(&w->tid, r->have_affinity ? &r->affinity : NULL,
			    worker_main, w) == 0) {
		r->nworkers++;
		return true;
	}
	free(w->buf);
	w->buf = NULL;
	return false;
}

/*
 * Give @e's request to the pool, starting a worker if none is free; or
 * serve it in this thread, in @buf, if there is no worker and none can
 * be started.
 */
static void hand_off(struct ring *r, struct ring_ent *e, char *buf)
{
	pthread_mutex_lock(&r->mu);
	if (r->work_len >= r->idle && r->nworkers < RING_MAX_WORKERS &&
	    !add_worker(r) && !r->nworkers) {
		pthread_mutex_unlock(&r->mu);
		serve(r, e, buf);
		return;
	}
	r->work[(r->work_head + r->work_len++) % r->work_cap] = e;
	pthread_mutex_unlock(&r->mu);
	pthread_cond_signal(&r->cv);
}

/* Whether a completion's error means the connection or the ring is
 * going away. */
static bool ending(int res)
{
	/* ECONNABORTED: aborted through /sys/fs/fuse/connections; the
	 * others at unmount, or a ring the kernel turned down. */
	return res == -ENOTCONN || res == -ECONNABORTED || res == -ECANCELED ||
	       res == -ENODEV || res == -EBADF || res == -EOPNOTSUPP;
}

static void pin(unsigned cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	/* A CPU this process may not run on: its queue's requests still
	 * come, from processes that may; only slower. */
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		sw_debug(TAG, "queue %u not kept on its CPU: %s", cpu,
			 strerror(errno));
}

/*
 * A request of our own from @q's CPU (statfs(2) of the mount, which
 * the kernel never answers from its caches), so that an entry is
 * committed: see grow().
 */
static void *kick_main(void *arg)
{
	struct ring_queue *q = arg;
	struct statfs st;

	if (statfs(q->r->mountpoint, &st) < 0)
		sw_debug(TAG, "queue %u: statfs: %s", q->qid, strerror(errno));
	atomic_store(&q->kicking, false);
	return NULL;
}

static void kick(struct ring_queue *q)
{
	cpu_set_t set;

	if (!q->r->mountpoint || atomic_exchange(&q->kicking, true))
		return;
	CPU_ZERO(&set);
	CPU_SET(q->qid, &set);
	if (spawn(NULL, &set, kick_main, q) != 0)
		atomic_store(&q->kicking, false);
}

/*
 * Give the kernel more entries for @q while fewer than RING_SPARE of
 * its entries hold no request. A request waiting long (a lock) holds
 * its entry; were they all held, every other request from the CPU,
 * the unlock one waits for among them, would wait too.
 *
 * A request that came while none was free waits in the kernel for an
 * entry to be committed, not for one to be registered (a new request
 * takes a new entry, an old one does not). So once it grew, the queue
 * sends a request of its own, whose answer commits an entry and lets
 * such a request through.
 */
static void grow(struct ring_queue *q)
{
	unsigned before = q->nents;

	while (q->held + RING_SPARE >= q->nents && q->nents < RING_MAX_DEPTH) {
		struct ring_ent *e = &q->ents[q->nents];
		void *p = mmap(NULL, q->r->payload_max, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			break;
		e->payload = p;
		e->iov[1] = (struct iovec){ p, q->r->payload_max };
		if (!queue_cmd(q, e, FUSE_IO_URING_CMD_REGISTER, 0)) {
			munmap(p, q->r->payload_max);
			e->payload = NULL;
			break;
		}
		q->nents++;
		q->live++;
	}
	if (q->nents == before)
		return;
	sw_notice(TAG, "queue %u: %u entries, %u holding requests", q->qid,
		  q->nents, q->held);
	io_uring_submit(&q->uring); /* registered before the kick comes */
	kick(q);
}

/* A completion for entry @e: a request, or a command that failed. */
static void complete(struct ring_queue *q, struct ring_ent *e, int res)
{
	struct ring *r = q->r;

	if (res < 0) {
		/* The entry is out of the kernel's hands. */
		if (ending(res) || atomic_load(&r->stopping)) {
			q->live--;
			return;
		}
		sw_err(TAG, "queue %u: %s", q->qid, strerror(-res));
		if (++q->errors > RING_MAX_DEPTH ||
		    !queue_cmd(q, e, FUSE_IO_URING_CMD_REGISTER, 0))
			q->live--;
		return;
	}
	q->errors = 0;
	q->held++;
	grow(q);
	atomic_fetch_add_explicit(&r->served, 1, memory_order_relaxed);
	atomic_store(&e->commit_id, e->hdr.ring_ent_in_out.commit_id);
	if (devpoll_keeps_turn(e->hdr.in_out, sizeof(struct fuse_in_header)))
		serve(r, e, q->buf);
	else
		hand_off(r, e, q->buf);
}

static void *queue_main(void *arg)
{
	struct ring_queue *q = arg;
	struct ring *r = q->r;
	struct io_uring_cqe *cqe;
	bool go;

	pthread_mutex_lock(&r->mu);
	while (!r->gate)
		pthread_cond_wait(&r->gate_cv, &r->mu);
	go = r->gate > 0;
	pthread_mutex_unlock(&r->mu);
	if (!go)
		return NULL;
	own_queue = q;
	pin(q->qid);
	for (unsigned i = 0; i < q->nents; i++)
		q->live += queue_cmd(q, &q->ents[i], FUSE_IO_URING_CMD_REGISTER,
				     0);
	/*
	 * One system call a turn: it sends the replies of the last turn and
	 * waits for the next request. A reply given while more requests
	 * wait goes at once, not after them.
	 */
	while (q->live && !atomic_load(&r->stopping)) {
		int rc;

		if (!q->wake_armed)
			arm_wake(q);
		rc = io_uring_submit_and_wait(&q->uring, 1);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
			sw_err(TAG, "queue %u: %s", q->qid, strerror(-rc));
			break;
		}
		while (io_uring_peek_cqe(&q->uring, &cqe) == 0) {
			void *data = io_uring_cqe_get_data(cqe);
			int res = cqe->res;

			io_uring_cqe_seen(&q->uring, cqe);
			if (data == &q->efd_val) {
				q->wake_armed = false;
				commit_done(q);
				arm_wake(q);
			} else {
				complete(q, data, res);
			}
			if (io_uring_cq_ready(&q->uring))
				io_uring_submit(&q->uring);
		}
	}
	/* Entries lost to errors the kernel gave (logged above), not to
	 * the connection's end: the CPU's requests wait for ever. */
	if (!q->live && q->errors && !atomic_load(&r->stopping))
		sw_crit(TAG, "queue %u: no entries left", q->qid);
	return NULL;
}

int ring_new(struct fuse_session *se, int fd, const char *mountpoint,
	     struct ring **out)
{
	struct ring *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return -ENOMEM;
	r->se = se;
	r->mountpoint = mountpoint ? strdup(mountpoint) : NULL;
	/* Its own descriptor: libfuse closes @fd at unmount, before the
	 * ring's last replies, and the number may be reused by then. */
	r->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (r->fd < 0) {
		rc = -errno;
		free(r->mountpoint);
		free(r);
		return rc;
	}
	r->have_affinity =
		sched_getaffinity(0, sizeof(r->affinity), &r->affinity) == 0;
	r->nq = possible_cpus();
	r->work_cap = (size_t)r->nq * RING_MAX_DEPTH;
	r->qs = calloc(r->nq, sizeof(*r->qs));
	r->work = calloc(r->work_cap, sizeof(*r->work));
	if (!r->qs || !r->work) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = -pthread_mutex_init(&r->mu, NULL);
	if (rc)
		goto fail;
	rc = -pthread_cond_init(&r->cv, NULL);
	if (rc) {
		pthread_mutex_destroy(&r->mu);
		goto fail;
	}
	rc = -pthread_cond_init(&r->gate_cv, NULL);
	if (rc) {
		pthread_cond_destroy(&r->cv);
		pthread_mutex_destroy(&r->mu);
		goto fail;
	}
	*out = r;
	return 0;
fail:
	close(r->fd);
	free(r->mountpoint);
	free(r->work);
	free(r->qs);
	free(r);
	return rc;
}

/* Undo queue_init() of @q. */
static void queue_fini(struct ring *r, struct ring_queue *q)
{
	io_uring_queue_exit(&q->uring);
	close(q->efd);
	pthread_mutex_destroy(&q->mu);
	for (unsigned j = 0; j < RING_MAX_DEPTH; j++)
		if (q->ents[j].payload)
			munmap(q->ents[j].payload, r->payload_max);
	free(q->ents);
	free(q->done);
	free(q->buf);
	memset(q, 0, sizeof(*q));
}

/* Set up queue @qid in @q: its ring, eventfd and entries. 0 or
 * -errno, with nothing left to undo. */
static int queue_init(struct ring *r, struct ring_queue *q, unsigned qid)
{
	int rc;

	*q = (struct ring_queue){ .r = r, .qid = qid, .efd = -1 };
	q->ents = calloc(RING_MAX_DEPTH, sizeof(*q->ents));
	q->done = calloc(RING_MAX_DEPTH, sizeof(*q->done));
	q->buf = malloc(r->buf_len);
	if (!q->ents || !q->done || !q->buf) {
		rc = -ENOMEM;
		goto fail_alloc;
	}
	q->efd = eventfd(0, EFD_CLOEXEC);
	if (q->efd < 0) {
		rc = -errno;
		goto fail_alloc;
	}
	/* Room for every entry's command and the eventfd's read. */
	rc = io_uring_queue_init(2 * RING_MAX_DEPTH, &q->uring,
				 IORING_SETUP_SQE128);
	if (rc < 0)
		goto fail_efd;
	pthread_mutex_init(&q->mu, NULL);
	for (unsigned j = 0; j < RING_MAX_DEPTH; j++) {
		struct ring_ent *e = &q->ents[j];
		void *p;

		e->q = q;
		e->iov[0] = (struct iovec){ &e->hdr, sizeof(e->hdr) };
		if (j >= RING_DEPTH)
			continue; /* grow() maps its payload */
		p = mmap(NULL, r->payload_max, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			rc = -errno;
			queue_fini(r, q);
			return rc;
		}
		e->payload = p;
		e->iov[1] = (struct iovec){ p, r->payload_max };
	}
	q->nents = RING_DEPTH;
	return 0;
fail_efd:
	close(q->efd);
fail_alloc:
	free(q->ents);
	free(q->done);
	free(q->buf);
	memset(q, 0, sizeof(*q));
	return rc;
}

/* Undo prepare() for queues [0, n). */
static void unprepare(struct ring *r, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		queue_fini(r, &r->qs[i]);
}

/* Let the queues' threads register their entries (@go), or end. */
static void open_gate(struct ring *r, bool go)
{
	pthread_mutex_lock(&r->mu);
	/* Before any queue registers: from then on replies must find
	 * their entries (find()). */
	if (go)
		atomic_store(&r->started, true);
	r->gate = go ? 1 : -1;
	pthread_mutex_unlock(&r->mu);
	pthread_cond_broadcast(&r->gate_cv);
	if (go) {
		sw_notice(TAG,
			  "FUSE over io_uring: %u queue(s) of %u entries, "
			  "%zu KiB a request",
			  r->nq, RING_DEPTH, r->payload_max / 1024);
		return;
	}
	for (unsigned i = 0; i < r->running; i++)
		pthread_join(r->qs[i].tid, NULL);
	r->running = 0;
	unprepare(r, r->nq);
}

/* Set up every queue's ring and entries, before INIT's reply takes
 * the ring: where that cannot be done, it does not. 0 or -errno. */
static int prepare(struct ring *r)
{
	unsigned i;
	int rc;

	r->buf_len = sizeof(struct fuse_in_header) + FUSE_URING_OP_IN_OUT_SZ +
		     r->payload_max;
	for (i = 0; i < r->nq; i++) {
		rc = queue_init(r, &r->qs[i], i);
		if (rc < 0) {
			unprepare(r, i);
			return rc;
		}
	}
	/*
	 * Every queue's thread now, waiting at the gate: once INIT's reply
	 * takes the ring, the kernel holds requests back until every queue
	 * has registered, so none may be missing.
	 */
	for (i = 0; i < r->nq; i++) {
		rc = -pthread_create(&r->qs[i].tid, NULL, queue_main,
				     &r->qs[i]);
		if (rc) {
			open_gate(r, false);
			return rc;
		}
		r->running++;
	}
	return 0;
}

/* INIT's reply: take the ring if it can be set up, then start it. */
static ssize_t init_reply(struct ring *r, int fd, const struct iovec *iov,
			  int count)
{
	bool take = ring_init_accept(iov, count, &r->payload_max) == 0;
	ssize_t n;
	int rc;

	if (take) {
		rc = prepare(r);
		if (rc < 0) {
			sw_err(TAG,
			       "cannot set up io_uring (%s): reading "
			       "/dev/fuse",
			       strerror(-rc));
			/* Undo the flag ring_init_accept() set. */
			((struct fuse_init_out *)iov[1].iov_base)->flags2 &=
				~(uint32_t)(FUSE_OVER_IO_URING >> 32);
			take = false;
		}
	}
	n = writev(fd, iov, count);
	if (take)
		open_gate(r, n >= 0);
	return n;
}

void ring_read(struct ring *r, const void *buf, ssize_t n)
{
	static atomic_bool said;

	if (n < (ssize_t)sizeof(struct fuse_in_header) ||
	    ((const struct fuse_in_header *)buf)->opcode != FUSE_INIT)
		return;
	if (ring_init_offered(buf, n))
		atomic_store(&r->init_unique,
			     ((const struct fuse_in_header *)buf)->unique);
	else if (!atomic_exchange(&said, true))
		sw_notice(TAG, "the kernel does not offer FUSE over io_uring "
			       "(Linux 6.14 or later, with the fuse module's "
			       "enable_uring parameter on): reading "
			       "/dev/fuse");
}

/* The entry holding the request @unique, or NULL. */
static struct ring_ent *find(struct ring *r, uint64_t unique)
{
	if (serving && atomic_load(&serving->commit_id) == unique)
		return serving;
	if (!atomic_load(&r->started))
		return NULL;
	for (unsigned i = 0; i < r->running; i++)
		for (unsigned j = 0; j < RING_MAX_DEPTH; j++) {
			struct ring_ent *e = &r->qs[i].ents[j];

			if (atomic_load(&e->commit_id) == unique)
				return e;
		}
	return NULL;
}

ssize_t ring_writev(struct ring *r, int fd, const struct iovec *iov, int count)
{
	const struct fuse_out_header *out = iov[0].iov_base;
	struct ring_ent *e;
	uint64_t id;
	ssize_t n;

	if (count < 1 || iov[0].iov_len < sizeof(*out) || !out->unique)
		return writev(fd, iov, count); /* a notification */
	e = find(r, out->unique);
	if (!e) {
		id = atomic_load(&r->init_unique);
		if (id && id == out->unique &&
		    atomic_compare_exchange_strong(&r->init_unique, &id, 0))
			return init_reply(r, fd, iov, count);
		return writev(fd, iov, count);
	}
	if (atomic_load(&r->stopping)) {
		errno = ENOENT; /* as for a request the kernel gave up */
		return -1;
	}
	id = out->unique;
	if (!atomic_compare_exchange_strong(&e->commit_id, &id, 0))
		return writev(fd, iov, count); /* cannot be: not ours */
	n = ring_store_reply(&e->hdr, e->payload, r->payload_max, iov, count);
	if (n < 0)
		say_bad(r, "a malformed reply", (int)n);
	e->reply_id = id;
	if (own_queue != e->q)
		hand_back(e->q, e);
	else if (queue_cmd(e->q, e, FUSE_IO_URING_CMD_COMMIT_AND_FETCH, id))
		e->q->held--;
	else
		hand_back(e->q, e); /* cannot be: a queue has room for all */
	return n < 0 ? (ssize_t)sizeof(*out) : n;
}

uint64_t ring_served(struct ring *r)
{
	return atomic_load(&r->served);
}

void ring_stop(struct ring *r)
{
	if (!r || atomic_exchange(&r->stopping, true))
		return;
	for (unsigned i = 0; i < r->running; i++) {
		wake(&r->qs[i]);
		pthread_join(r->qs[i].tid, NULL);
	}
	pthread_mutex_lock(&r->mu);
	r->pool_stop = true;
	pthread_mutex_unlock(&r->mu);
	pthread_cond_broadcast(&r->cv);
	for (unsigned i = 0; i < r->nworkers; i++) {
		pthread_join(r->workers[i].tid, NULL);
		free(r->workers[i].buf);
	}
}

void ring_free(struct ring *r)
{
	if (!r)
		return;
	ring_stop(r);
	/* A kick still running reads its queue and the mount point. */
	for (unsigned i = 0; i < r->nq; i++)
		while (atomic_load(&r->qs[i].kicking))
			usleep(1000);
	if (atomic_load(&r->started))
		unprepare(r, r->nq);
	pthread_cond_destroy(&r->gate_cv);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	close(r->fd);
	free(r->mountpoint);
	free(r->work);
	free(r->qs);
	free(r);
}
