/*
 * Changelog writer and reader.
 *
 * The loop thread owns `pending` (records not yet written or handed
 * over). Once per loop iteration it writes them itself while the disk is
 * calm, or hands them to the writer thread (write_here()), which writes
 * them a MiB of whole records at a time. The sync thread owns fdatasync
 * and fallocate on the current file. Apart from their own buffers, the
 * three share only the fields marked "under mu". Rotation, rare, waits
 * for both threads to be idle with nothing left to write, and swaps the
 * file under mu.
 *
 * The writer has a thread of its own, and does not take turns with the
 * sync thread: a reply waits for its record's write(2), not for a
 * periodic fdatasync that came first. (A fallocate still holds the
 * file's inode lock, which write(2) takes too: the sync thread runs it
 * after its fdatasync, once per o.prealloc bytes.)
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bootlog.h"
#include "buf.h"
#include "changelog.h"
#include "crc32c.h"
#include "fsio.h"
#include "log.h"
#include "util.h"

#define TAG "changelog"
#define SEG_MAGIC "SWCL"
#define SEG_FORMAT 1u
#define SEG_HDR 16u
#define REC_HDR 16u
/* Keep this much preallocated ahead of the writer. */
#define PREALLOC_LOW (4u << 20)
/* Refuse mutations when less than this is left and the disk is full:
 * room for the records already admitted in this loop iteration. */
#define RESERVE_MIN (256u << 10)
#define MAX_BEHIND_DEFAULT (64u << 20)
/* A write(2) by the loop that took longer than this: the disk is busy,
 * and the loop hands its records to the writer for DIRECT_BACKOFF_NS. */
#define DIRECT_SLOW_NS (1 * 1000000LL)
#define DIRECT_BACKOFF_NS (10 * SW_NSEC_PER_SEC)
/* The writer's write(2) at most (whole records, at least one). */
#define WRITE_CHUNK (1u << 20)
/* The writer's buffer is given back once a burst past this is written. */
#define OUT_KEEP (4u << 20)
/* The loop waiting for the disk says so at most this often. */
#define BEHIND_WARN_NS (10 * SW_NSEC_PER_SEC)

struct changelog {
	uv_loop_t *loop;
	struct changelog_opts o;
	char dir[4096];

	/* Loop thread only. */
	struct sw_buf pending; /* encoded records not yet handed over */
	struct sw_buf spare;   /* pending's other buffer, while it flushes */
	uint64_t last;	       /* last version appended */
	uint64_t durable;      /* last version durable per policy */
	int64_t behind_warned; /* monotonic ns: said it waits for the disk */
	/* Gated (the leader of a group): flushed records wait here, shipped
	 * to the group, until changelog_release() says they are committed;
	 * only then are they written, so that the file never holds what the
	 * group may not have. */
	bool gated;
	struct sw_buf held;
	uv_async_t async; /* threads -> loop */
	/* The payload changelog_prepare() packed at the end of pending
	 * (not yet counted in its len), and for which mutation. */
	const Sweepfs__Meta__Mutation *prepared;
	size_t prepared_len;

	/* Under mu. */
	pthread_mutex_t mu;
	pthread_cond_t cond;	  /* wakes the sync thread */
	pthread_cond_t wcond;	  /* wakes the writer */
	pthread_cond_t idle_cond; /* a thread took or ended a step */
	int fd;
	struct sw_buf tosend; /* whole records handed over, not yet taken */
	uint64_t handed_ver;  /* the version of the last record handed over */
	uint64_t handed_end;  /* bytes of the current file, handed over */
	uint64_t unwritten;   /* bytes handed to the writer, not yet written */
	uint64_t written;     /* bytes in the current file */
	uint64_t written_ver; /* last version written to the file */
	bool writing;	      /* the writer (or the loop) is in write(2) */
	bool deferred;	      /* changelog_defer() on: the loop writes not */
	int64_t slow_until;   /* monotonic ns: a write by the loop was slow */
	int write_err;	      /* a write failed (-errno): fatal */
	/* Monotonic ns: settled() last moved, or records came to wait
	 * when none did (changelog_lag_ns()). */
	int64_t progress_at;
	uint64_t sync_req;   /* version to fdatasync up to */
	uint64_t synced;     /* version fdatasync'd */
	uint64_t alloc_end;  /* bytes preallocated in the file */
	uint64_t alloc_want; /* preallocate up to here */
	bool nospace;	     /* the last fallocate hit ENOSPC */
	int64_t retry_at;    /* monotonic ns: try fallocate again */
	bool busy;	     /* the sync thread is in a syscall */
	int sync_err;	     /* a fdatasync failed (-errno): fatal */
	bool stop;
	struct sw_hist fsync_time; /* the thread's fdatasyncs */
	/* "interval": the written_ver the last periodic fdatasync covered;
	 * none is due while nothing was written since. */
	uint64_t periodic_ver;

	struct sw_buf out; /* the writer's own: the records it writes */
	pthread_t writer;
	pthread_t thread;
};

static void on_async_closed(uv_handle_t *h);

/* ---- encoding ------------------------------------------------------- */

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void seg_name(char *buf, size_t len, const char *dir, uint64_t first)
{
	snprintf(buf, len, "%s/changelog.%020" PRIu64, dir, first);
}

/* changelog_record(), checking its crc or not (@check). */
static size_t record_at(const uint8_t *p, size_t n, bool check,
			uint64_t *version, const uint8_t **payload, size_t *len)
{
	uint32_t plen;

	if (n < REC_HDR)
		return 0;
	plen = get_le32(p);
	if (plen > n - REC_HDR ||
	    (check && sw_crc32c(0, p + 8, 8 + (size_t)plen) != get_le32(p + 4)))
		return 0;
	*version = get_le64(p + 8);
	*payload = p + REC_HDR;
	*len = plen;
	return REC_HDR + (size_t)plen;
}

size_t changelog_record(const uint8_t *p, size_t n, uint64_t *version,
			const uint8_t **payload, size_t *len)
{
	return record_at(p, n, true, version, payload, len);
}

/* ---- sync thread ---------------------------------------------------- */

static void lower_io_priority(void)
{
	/* ioprio_set(IOPRIO_WHO_PROCESS, this thread, class BE, level 7):
	 * the changelog is latency-critical, but its fallocate must not
	 * get ahead of client-facing work; best effort, lowest level. */
	syscall(SYS_ioprio_set, 1, 0, (2 << 13) | 7);
}

/* Room ahead of what was handed over (so that changelog_admit(), which
 * counts that, sees a full disk before the writer meets it): preallocate
 * up to PREALLOC_LOW past it, in steps of o.prealloc. mu held. */
static void want_room(struct changelog *cl)
{
	uint64_t end = cl->handed_end;

	if (end + PREALLOC_LOW > cl->alloc_end &&
	    cl->alloc_want <= cl->alloc_end) {
		cl->alloc_want = cl->alloc_end + cl->o.prealloc;
		while (cl->alloc_want < end + PREALLOC_LOW)
			cl->alloc_want += cl->o.prealloc;
		pthread_cond_signal(&cl->cond);
	}
}

/*
 * An fdatasync of the file ended (@src: 0 or -errno, after @ns), asked
 * for (@asked) up to version @ver or periodic. mu held.
 *
 * A failed fdatasync may have dropped the dirty pages it could not
 * write, so a second one can succeed with records lost: nothing it
 * covered is ever acknowledged as synced, and the loop exits
 * (on_async()), as PostgreSQL does since 2018, so that a restart replays
 * what is on disk.
 */
static void synced(struct changelog *cl, bool asked, uint64_t ver, int src,
		   int64_t ns)
{
	sw_hist_add(&cl->fsync_time, ns);
	if (src < 0 && !cl->sync_err)
		cl->sync_err = src;
	if (asked && !cl->sync_err && ver > cl->synced) {
		cl->synced = ver;
		cl->progress_at = sw_mono_ns();
	}
}

static void *sync_main(void *arg)
{
	struct changelog *cl = arg;
	int64_t interval_ns = (int64_t)cl->o.interval_ms * 1000000;
	int64_t next_periodic = sw_mono_ns() + interval_ns;

	lower_io_priority();
	pthread_mutex_lock(&cl->mu);
	for (;;) {
		int64_t now = sw_mono_ns();
		bool want_sync, want_alloc, periodic, dirty;
		uint64_t ver, from, len, covers;
		int64_t sync_t0, sync_ns = 0;
		int fd, rc = 0, src = 0;

		/* After a failed fdatasync, no more: the loop exits. */
		want_sync = !cl->sync_err && cl->sync_req > cl->synced;
		want_alloc = cl->alloc_want > cl->alloc_end &&
			     (!cl->nospace || now >= cl->retry_at);
		/* Only when something was written since the last one: an
		 * idle master's thread (and loop, told of each) would wake
		 * every interval for nothing. */
		dirty = cl->o.sync == CL_SYNC_INTERVAL &&
			cl->written_ver > cl->periodic_ver;
		periodic = !cl->sync_err && dirty && now >= next_periodic;
		if (!want_sync && !want_alloc && !periodic) {
			int64_t wake = now + SW_NSEC_PER_SEC;
			struct timespec ts;

			if (cl->stop)
				break;
			/* Clean, written() wakes it at the first write (and
			 * after a failed fdatasync, none is due). */
			if (dirty && !cl->sync_err && next_periodic < wake)
				wake = next_periodic;
			if (cl->nospace && cl->retry_at < wake)
				wake = cl->retry_at;
			/* The condition variable uses CLOCK_MONOTONIC. */
			ts = sw_ns_to_timespec(wake);
			pthread_cond_timedwait(&cl->cond, &cl->mu, &ts);
			continue;
		}
		if (periodic)
			next_periodic = now + interval_ns;
		fd = cl->fd;
		ver = cl->sync_req;
		/* In fd; a rotation waits until the pass is done. */
		covers = cl->written_ver;
		from = cl->alloc_end;
		len = cl->alloc_want - cl->alloc_end;
		cl->busy = true;
		pthread_mutex_unlock(&cl->mu);

		/* The fdatasync first: with "always", replies wait for it,
		 * and not for a fallocate (which takes the inode's lock, and
		 * the writer's next write(2) waits for that too). */
		if (want_sync || periodic) {
			sync_t0 = sw_mono_ns();
			if (fdatasync(fd) < 0)
				src = -errno;
			sync_ns = sw_mono_ns() - sync_t0;
			/* Told before the fallocate, which replies and the
			 * lag must not wait for either. */
			pthread_mutex_lock(&cl->mu);
			synced(cl, want_sync, ver, src, sync_ns);
			if (periodic && src == 0)
				cl->periodic_ver = covers;
			pthread_mutex_unlock(&cl->mu);
			uv_async_send(&cl->async);
		}
		if (want_alloc && fallocate(fd, FALLOC_FL_KEEP_SIZE,
					    (off_t)from, (off_t)len) < 0)
			rc = -errno;

		pthread_mutex_lock(&cl->mu);
		cl->busy = false;
		if (want_alloc && fd == cl->fd) {
			if (rc == 0) {
				cl->alloc_end = from + len;
				cl->nospace = false;
				want_room(cl);
			} else if (rc == -ENOSPC) {
				cl->nospace = true;
				cl->retry_at = sw_mono_ns() + SW_NSEC_PER_SEC;
			} else {
				/* No fallocate on this filesystem: writes
				 * will allocate; nothing to reserve. */
				cl->alloc_end = UINT64_MAX / 2;
				cl->nospace = false;
			}
		}
		pthread_cond_broadcast(&cl->idle_cond);
		pthread_mutex_unlock(&cl->mu);
		uv_async_send(&cl->async);
		pthread_mutex_lock(&cl->mu);
	}
	pthread_mutex_unlock(&cl->mu);
	return NULL;
}

/*
 * The whole records at @p (@n bytes) that fit in WRITE_CHUNK, at least
 * one: their size, and in *@last the version of the last of them.
 */
static size_t chunk(const uint8_t *p, size_t n, uint64_t *last)
{
	size_t off = 0;

	do {
		*last = get_le64(p + off + 8);
		off += REC_HDR + get_le32(p + off);
	} while (off < n && off + REC_HDR + get_le32(p + off) <= WRITE_CHUNK);
	return off;
}

/* @len bytes up to version @last are in the file. mu held. */
static void written(struct changelog *cl, size_t len, uint64_t last)
{
	bool was_clean = cl->written_ver == cl->periodic_ver;

	cl->written += len;
	cl->written_ver = last;
	/* With "always", progress is an fdatasync done: writes that go
	 * on while it hangs release nothing. */
	if (cl->o.sync == CL_SYNC_ALWAYS) {
		cl->sync_req = last;
		pthread_cond_signal(&cl->cond);
	} else {
		cl->progress_at = sw_mono_ns();
		/* The first write since the last periodic fdatasync: the
		 * sync thread, idle till now, has one to time. */
		if (cl->o.sync == CL_SYNC_INTERVAL && was_clean)
			pthread_cond_signal(&cl->cond);
	}
	want_room(cl);
}

/*
 * The writer: takes what the loop handed over, all of it, and writes it
 * in chunks of whole records, each reported as it is written (a disk
 * slower than the load makes progress a chunk at a time, not once a
 * backlog of many MiB is all written: changelog_lag_ns() must not take
 * a slow disk for a stuck one). Stops once told to and nothing is left
 * to write. A failed write is kept, and nothing after it is written: the
 * loop exits (on_async()).
 */
static void *write_main(void *arg)
{
	struct changelog *cl = arg;

	pthread_mutex_lock(&cl->mu);
	for (;;) {
		struct sw_buf t;
		size_t n, off = 0, len;
		int fd, rc = 0;

		if (!sw_buf_used(&cl->tosend) || cl->write_err) {
			if (cl->stop)
				break;
			pthread_cond_wait(&cl->wcond, &cl->mu);
			continue;
		}
		t = cl->out;
		cl->out = cl->tosend;
		cl->tosend = t;
		n = sw_buf_used(&cl->out);
		fd = cl->fd;
		cl->writing = true;
		do {
			const uint8_t *p = sw_buf_head(&cl->out) + off;
			uint64_t last;

			len = chunk(p, n - off, &last);
			pthread_mutex_unlock(&cl->mu);
			rc = sw_write_all(fd, p, len);
			pthread_mutex_lock(&cl->mu);
			cl->unwritten -= len;
			off += len;
			if (rc < 0)
				cl->write_err = rc;
			else
				written(cl, len, last);
			if (rc < 0 || off == n) {
				/* Idle as it says so: a flush right after
				 * may write on the loop. */
				cl->writing = false;
				if (cl->out.cap > OUT_KEEP)
					sw_buf_release(&cl->out);
				else
					sw_buf_reset(&cl->out);
			}
			/* A loop waiting for room may go on. */
			pthread_cond_broadcast(&cl->idle_cond);
			pthread_mutex_unlock(&cl->mu);
			uv_async_send(&cl->async);
			pthread_mutex_lock(&cl->mu);
		} while (rc == 0 && off < n);
	}
	pthread_mutex_unlock(&cl->mu);
	return NULL;
}

/* Memory is ahead of what the disk is known to hold, and only a restart
 * can reconcile them: say so and exit. */
static _Noreturn void disk_failed(const char *what, int err)
{
	sw_crit(TAG,
		"%s failed: %s; exiting so that a restart replays what is "
		"on disk",
		what, strerror(-err));
	exit(70);
}

/* Records up to @ver are as durable as the policy requires: the replies
 * that waited for them may go. Loop thread. */
static void report_durable(struct changelog *cl, uint64_t ver)
{
	if (ver > cl->durable) {
		cl->durable = ver;
		cl->o.on_durable(cl->o.arg, ver);
	}
}

/* A thread wrote, synced or failed: the replies that waited may go. */
static void on_async(uv_async_t *h)
{
	struct changelog *cl = h->data;
	uint64_t ver;
	int werr, serr;

	pthread_mutex_lock(&cl->mu);
	ver = cl->o.sync == CL_SYNC_ALWAYS ? cl->synced : cl->written_ver;
	werr = cl->write_err;
	serr = cl->sync_err;
	pthread_mutex_unlock(&cl->mu);
	if (werr < 0)
		disk_failed("write", werr);
	if (serr < 0)
		disk_failed("fdatasync", serr);
	report_durable(cl, ver);
}

/* ---- files ---------------------------------------------------------- */

/* Create the file for records from @first on; returns its fd or -errno. */
static int seg_create(const char *dir, uint64_t first)
{
	char path[4200];
	uint8_t hdr[SEG_HDR];
	int fd, rc;

	seg_name(path, sizeof(path), dir, first);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
	if (fd < 0 && errno == EEXIST) {
		/* A file of that name was not replayed (replay stopped
		 * before it): never truncate what may hold acknowledged
		 * records; keep it aside for whoever investigates. */
		char aside[4300];

		snprintf(aside, sizeof(aside), "%s.unreplayed-%" PRId64, path,
			 sw_now_ns());
		if (rename(path, aside) < 0)
			return -errno;
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
	}
	if (fd < 0)
		return -errno;
	memcpy(hdr, SEG_MAGIC, 4);
	put_le32(hdr + 4, SEG_FORMAT);
	put_le64(hdr + 8, first);
	rc = sw_write_all(fd, hdr, sizeof(hdr));
	if (rc == 0 && fdatasync(fd) < 0)
		rc = -errno;
	if (rc == 0)
		rc = sw_fsync_dir(dir);
	if (rc < 0) {
		close(fd);
		unlink(path);
		return rc;
	}
	return fd;
}

int changelog_open(uv_loop_t *loop, const struct changelog_opts *o,
		   uint64_t last, struct changelog **out)
{
	struct changelog *cl = calloc(1, sizeof(*cl));
	int rc;

	if (!cl)
		return -ENOMEM;
	cl->loop = loop;
	cl->o = *o;
	if (!cl->o.prealloc)
		cl->o.prealloc = 16u << 20;
	if (!cl->o.interval_ms)
		cl->o.interval_ms = 100;
	if (!cl->o.max_behind)
		cl->o.max_behind = MAX_BEHIND_DEFAULT;
	if (!cl->o.direct_slow_ns)
		cl->o.direct_slow_ns = DIRECT_SLOW_NS;
	snprintf(cl->dir, sizeof(cl->dir), "%s", o->dir);
	cl->o.dir = cl->dir;
	cl->last = cl->written_ver = cl->durable = cl->synced = last;
	/* periodic_ver stays 0: records a crashed master wrote but did not
	 * sync are synced once, an interval after the start. */
	cl->sync_req = cl->handed_ver = last;
	cl->fd = seg_create(cl->dir, last + 1);
	if (cl->fd < 0) {
		rc = cl->fd;
		goto out_free;
	}
	cl->written = cl->handed_end = SEG_HDR;
	cl->alloc_end = 0;
	cl->alloc_want = cl->o.prealloc;
	pthread_mutex_init(&cl->mu, NULL);
	sw_cond_init_mono(&cl->cond);
	pthread_cond_init(&cl->wcond, NULL);
	pthread_cond_init(&cl->idle_cond, NULL);
	rc = uv_async_init(loop, &cl->async, on_async);
	if (rc < 0)
		goto out_close;
	cl->async.data = cl;
	rc = -pthread_create(&cl->thread, NULL, sync_main, cl);
	if (rc == 0) {
		rc = -pthread_create(&cl->writer, NULL, write_main, cl);
		if (rc < 0) {
			pthread_mutex_lock(&cl->mu);
			cl->stop = true;
			pthread_cond_signal(&cl->cond);
			pthread_mutex_unlock(&cl->mu);
			pthread_join(cl->thread, NULL);
		}
	}
	if (rc < 0) {
		close(cl->fd);
		/* Freed once the loop has closed the handle (not before:
		 * the loop still lists it). */
		uv_close((uv_handle_t *)&cl->async, on_async_closed);
		return rc;
	}
	*out = cl;
	return 0;

out_close:
	close(cl->fd);
out_free:
	free(cl);
	return rc;
}

int changelog_admit(const struct changelog *cl)
{
	uint64_t alloc_end, used;
	bool nospace;

	pthread_mutex_lock((pthread_mutex_t *)&cl->mu);
	alloc_end = cl->alloc_end;
	nospace = cl->nospace;
	used = cl->handed_end;
	pthread_mutex_unlock((pthread_mutex_t *)&cl->mu);
	if (!nospace)
		return 0;
	used += sw_buf_used(&cl->pending);
	return alloc_end > used && alloc_end - used >= RESERVE_MIN ? 0 :
								     -ENOSPC;
}

int changelog_prepare(struct changelog *cl, const Sweepfs__Meta__Mutation *m)
{
	int rc = sw_buf_reserve(
		&cl->pending,
		REC_HDR + protobuf_c_message_get_packed_size(&m->base));

	if (rc < 0)
		return rc;
	/* Packed now: applying @m may free what it points to (names of
	 * entries it removes) before the append. */
	cl->prepared_len = protobuf_c_message_pack(
		&m->base, cl->pending.data + cl->pending.len + REC_HDR);
	cl->prepared = m;
	return 0;
}

void changelog_append(struct changelog *cl, const Sweepfs__Meta__Mutation *m,
		      uint64_t version)
{
	uint8_t *rec;
	size_t len;
	uint32_t crc;

	if (cl->prepared != m) {
		/* Not prepared, which the caller promised it was. */
		if (sw_buf_reserve(&cl->pending,
				   REC_HDR + protobuf_c_message_get_packed_size(
						     &m->base)) < 0) {
			sw_crit(TAG, "out of memory appending version %" PRIu64,
				version);
			abort();
		}
		cl->prepared_len = protobuf_c_message_pack(
			&m->base, cl->pending.data + cl->pending.len + REC_HDR);
	}
	cl->prepared = NULL;
	rec = cl->pending.data + cl->pending.len;
	len = cl->prepared_len;
	put_le32(rec, (uint32_t)len);
	put_le64(rec + 8, version);
	crc = sw_crc32c(0, rec + 8, 8 + len);
	put_le32(rec + 4, crc);
	cl->pending.len += REC_HDR + len;
	cl->last = version;
}

int changelog_reserve(struct changelog *cl, size_t n)
{
	return sw_buf_reserve(&cl->pending, n);
}

void changelog_append_record(struct changelog *cl, const uint8_t *rec, size_t n,
			     uint64_t version)
{
	if (sw_buf_add(&cl->pending, rec, n) < 0) {
		/* Not reserved, which the caller promised it was. */
		sw_crit(TAG, "out of memory appending version %" PRIu64,
			version);
		abort();
	}
	cl->prepared = NULL;
	cl->last = version;
}

/* The version as durable as the policy requires, as the threads know it.
 * mu held. */
static uint64_t settled(const struct changelog *cl)
{
	return cl->o.sync == CL_SYNC_ALWAYS ? cl->synced : cl->written_ver;
}

/*
 * Whether the loop writes these records itself: while the disk is calm
 * (no changelog_defer(), no write here slower than o.direct_slow_ns in the
 * last DIRECT_BACKOFF_NS) and the writer has nothing, a write(2) here
 * costs tens of microseconds, and a hand-over to the writer costs two
 * thread wake-ups more per loop iteration: on this 2-core VM, 38 us more
 * of the master's CPU per change and +18% (create) to +32% (unlink)
 * latency for a client whose changes each wait for the master
 * (bench/seqmut.py). mu held.
 */
static bool write_here(const struct changelog *cl, int64_t now)
{
	return !cl->o.thread_only && !cl->deferred && now >= cl->slow_until &&
	       !cl->writing && !sw_buf_used(&cl->tosend) && !cl->write_err;
}

/* The loop writes @n bytes of records, up to @last, to @fd itself (from
 * @t0 on), and hears at once that they are written. */
static void write_direct(struct changelog *cl, int fd, const uint8_t *p,
			 size_t n, uint64_t last, int64_t t0)
{
	int64_t took;
	int rc = sw_write_all(fd, p, n);

	took = sw_mono_ns() - t0;
	pthread_mutex_lock(&cl->mu);
	cl->writing = false;
	if (rc < 0)
		cl->write_err = rc;
	else
		written(cl, n, last);
	if (took > cl->o.direct_slow_ns)
		cl->slow_until = t0 + took + DIRECT_BACKOFF_NS;
	pthread_cond_broadcast(&cl->idle_cond);
	pthread_mutex_unlock(&cl->mu);
	if (rc < 0)
		disk_failed("write", rc);
	if (cl->o.sync != CL_SYNC_ALWAYS)
		report_durable(cl, last);
}

/*
 * Write @n bytes of whole records, the last of them @last, here while the
 * disk is calm (write_here()); otherwise hand them to the writer, which
 * writes them and makes them durable as the policy says. A hand-over
 * waits while o.max_behind bytes wait for the writer already (a disk
 * that slow would otherwise fill memory); a write that failed ends the
 * wait, and the loop exits when it hears of it.
 */
static void hand_over(struct changelog *cl, const uint8_t *p, size_t n,
		      uint64_t last)
{
	int64_t now = sw_mono_ns(), t0 = 0;
	bool direct;
	int fd = -1;

	pthread_mutex_lock(&cl->mu);
	direct = write_here(cl, now);
	while (!direct && cl->unwritten >= cl->o.max_behind && !cl->write_err) {
		if (!t0)
			t0 = sw_mono_ns();
		pthread_cond_wait(&cl->idle_cond, &cl->mu);
	}
	/* Nothing waited: the lag starts now. */
	if (cl->handed_ver == settled(cl))
		cl->progress_at = t0 ? sw_mono_ns() : now;
	if (direct) {
		cl->writing = true;
		fd = cl->fd;
	} else if (sw_buf_add(&cl->tosend, p, n) < 0) {
		sw_crit(TAG, "out of memory handing records to be written");
		abort();
	} else {
		cl->unwritten += n;
	}
	cl->handed_ver = last;
	cl->handed_end += n;
	want_room(cl);
	if (!direct)
		pthread_cond_signal(&cl->wcond);
	pthread_mutex_unlock(&cl->mu);
	if (direct)
		write_direct(cl, fd, p, n, last, now);
	if (t0 && t0 - cl->behind_warned >= BEHIND_WARN_NS) {
		cl->behind_warned = t0;
		sw_warn(TAG,
			"the disk is %" PRIu64 " MiB of records behind: the "
			"loop waited %" PRId64 " ms for it",
			cl->o.max_behind >> 20, (sw_mono_ns() - t0) / 1000000);
	}
}

void changelog_defer(struct changelog *cl, bool on)
{
	pthread_mutex_lock(&cl->mu);
	cl->deferred = on;
	pthread_mutex_unlock(&cl->mu);
}

int64_t changelog_lag_ns(struct changelog *cl, int64_t now)
{
	int64_t lag = 0;

	pthread_mutex_lock(&cl->mu);
	if (cl->handed_ver > settled(cl))
		lag = now - cl->progress_at;
	pthread_mutex_unlock(&cl->mu);
	return lag > 0 ? lag : 0;
}

void changelog_flush(struct changelog *cl)
{
	struct sw_buf b = cl->pending;
	size_t n = sw_buf_used(&b);

	if (n == 0)
		return;
	/* Detached first: a write on the loop calls on_durable from in
	 * here, and what it appends goes to the next flush. */
	cl->pending = cl->spare;
	cl->spare = (struct sw_buf)SW_BUF_INIT;
	cl->prepared = NULL;
	if (cl->gated) {
		if (sw_buf_add(&cl->held, sw_buf_head(&b), n) < 0) {
			sw_crit(TAG, "out of memory holding records");
			abort();
		}
		cl->o.ship(cl->o.arg, sw_buf_head(&b), n, cl->last);
	} else {
		hand_over(cl, sw_buf_head(&b), n, cl->last);
	}
	sw_buf_reset(&b);
	if (sw_buf_used(&cl->pending)) {
		/* Appended meanwhile: they stay pending, for the next loop
		 * turn's flush (woken, not left for the next request). */
		cl->spare = b;
		uv_async_send(&cl->async);
	} else {
		cl->spare = cl->pending;
		cl->pending = b;
	}
}

void changelog_gate(struct changelog *cl)
{
	changelog_flush(cl);
	cl->gated = true;
}

void changelog_release(struct changelog *cl, uint64_t upto)
{
	const uint8_t *p = sw_buf_head(&cl->held), *payload;
	size_t n = sw_buf_used(&cl->held), off = 0, rec, len;
	uint64_t ver, last = 0;

	if (n == 0)
		return;
	while ((rec = changelog_record(p + off, n - off, &ver, &payload,
				       &len)) > 0 &&
	       ver <= upto) {
		off += rec;
		last = ver;
	}
	if (off == 0)
		return;
	hand_over(cl, p, off, last);
	sw_buf_consume(&cl->held, off);
}

uint64_t changelog_durable(const struct changelog *cl)
{
	return cl->durable;
}

void changelog_fsync_time(struct changelog *cl, struct sw_hist *out)
{
	pthread_mutex_lock(&cl->mu);
	*out = cl->fsync_time;
	pthread_mutex_unlock(&cl->mu);
}

uint64_t changelog_last(const struct changelog *cl)
{
	return cl->last;
}

/* Wait until the threads are out of their syscalls, with everything
 * handed over written (or a write failed); called with mu held. */
static void wait_idle(struct changelog *cl)
{
	while (cl->busy || cl->writing ||
	       (sw_buf_used(&cl->tosend) && !cl->write_err))
		pthread_cond_wait(&cl->idle_cond, &cl->mu);
}

/* Give back what was preallocated past the end of file @fd (its size is
 * what was written, so this needs no sync): a failure loses nothing. */
static void give_back(struct changelog *cl, int fd)
{
	if (ftruncate(fd, (off_t)cl->written) < 0)
		sw_err(TAG, "giving back the preallocated space: %s",
		       strerror(errno));
}

/* Finish the current file: preallocation past EOF freed, data synced. */
static int seg_finish(struct changelog *cl, int fd)
{
	give_back(cl, fd);
	return fdatasync(fd) < 0 ? -errno : 0;
}

int changelog_rotate(struct changelog *cl)
{
	uint64_t ver;
	int fd, rc;

	changelog_flush(cl);
	pthread_mutex_lock(&cl->mu);
	wait_idle(cl);
	if (cl->write_err) {
		pthread_mutex_unlock(&cl->mu);
		disk_failed("write", cl->write_err);
	}
	/* A failed fdatasync reports its error once: the one below would
	 * say 0 for pages the failed one dropped. */
	rc = cl->sync_err;
	if (rc) {
		pthread_mutex_unlock(&cl->mu);
		disk_failed("fdatasync", rc);
	}
	/* The old file is synced first: a failure leaves no new file,
	 * whose name would claim versions the old one lost. Its records
	 * are acknowledged below, and needed until the checkpoint this
	 * rotation starts is written. */
	rc = fdatasync(cl->fd) < 0 ? -errno : 0;
	if (rc < 0) {
		pthread_mutex_unlock(&cl->mu);
		disk_failed("finishing the previous file", rc);
	}
	/* Without a new file the old one goes on, its preallocation kept
	 * (a full disk is the likely reason). */
	fd = seg_create(cl->dir, cl->written_ver + 1);
	if (fd < 0) {
		pthread_mutex_unlock(&cl->mu);
		return fd;
	}
	give_back(cl, cl->fd);
	close(cl->fd);
	cl->fd = fd;
	cl->written = cl->handed_end = SEG_HDR;
	cl->alloc_end = 0;
	cl->alloc_want = cl->o.prealloc;
	cl->nospace = false;
	cl->synced = cl->periodic_ver = ver = cl->written_ver;
	pthread_cond_signal(&cl->cond);
	pthread_mutex_unlock(&cl->mu);
	report_durable(cl, ver);
	return 0;
}

static void on_async_closed(uv_handle_t *h)
{
	struct changelog *cl = h->data;

	sw_buf_release(&cl->pending);
	sw_buf_release(&cl->spare);
	sw_buf_release(&cl->held);
	sw_buf_release(&cl->tosend);
	sw_buf_release(&cl->out);
	pthread_mutex_destroy(&cl->mu);
	pthread_cond_destroy(&cl->cond);
	pthread_cond_destroy(&cl->wcond);
	pthread_cond_destroy(&cl->idle_cond);
	free(cl);
}

void changelog_close(struct changelog *cl)
{
	int rc;

	changelog_flush(cl);
	/* The writer writes what it was handed before it stops. */
	pthread_mutex_lock(&cl->mu);
	cl->stop = true;
	pthread_cond_signal(&cl->wcond);
	pthread_cond_signal(&cl->cond);
	pthread_mutex_unlock(&cl->mu);
	pthread_join(cl->writer, NULL);
	pthread_join(cl->thread, NULL);
	if (cl->write_err)
		disk_failed("write", cl->write_err);
	if (cl->sync_err)
		disk_failed("fdatasync", cl->sync_err);
	rc = seg_finish(cl, cl->fd);
	if (rc < 0)
		disk_failed("closing", rc);
	close(cl->fd);
	/* Written and synced: the replies that wait for it may go. */
	report_durable(cl, cl->written_ver);
	uv_close((uv_handle_t *)&cl->async, on_async_closed);
}

/* ---- reading -------------------------------------------------------- */

struct seg {
	uint64_t first;
	char path[4200];
};

/* The changelog files in @dir, sorted by first version. */
static int seg_list(const char *dir, struct seg **out, size_t *count)
{
	uint64_t *first;
	struct seg *v;
	size_t n;
	int rc = sw_dir_versions(dir, "changelog.", &first, &n);

	if (rc < 0)
		return rc;
	v = malloc((n ? n : 1) * sizeof(*v));
	if (!v) {
		free(first);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		v[i].first = first[i];
		seg_name(v[i].path, sizeof(v[i].path), dir, first[i]);
	}
	free(first);
	*out = v;
	*count = n;
	return 0;
}

int changelog_prune(const char *dir, uint64_t upto)
{
	struct seg *v;
	size_t n;
	int rc = seg_list(dir, &v, &n), deleted = 0;

	if (rc < 0)
		return rc;
	/* File i holds versions [first_i, first_{i+1}). */
	for (size_t i = 0; i + 1 < n; i++) {
		if (v[i + 1].first > upto + 1)
			break;
		if (unlink(v[i].path) == 0)
			deleted++;
	}
	free(v);
	return deleted;
}

int changelog_bytes_after(const char *dir, uint64_t after, uint64_t *bytes)
{
	struct seg *v;
	size_t n;
	int rc = seg_list(dir, &v, &n);
	struct stat st;

	if (rc < 0)
		return rc;
	*bytes = 0;
	for (size_t i = 0; i < n; i++)
		if ((i + 1 == n || v[i + 1].first > after + 1) &&
		    stat(v[i].path, &st) == 0)
			*bytes += (uint64_t)st.st_size;
	free(v);
	return 0;
}

/*
 * @path's bytes in *@data: mapped read-only where possible (*@mapped;
 * replay reads a file once, front to back, and a copy of hundreds of MiB
 * into fresh memory was a good part of its time), else read into memory
 * from malloc(). Release with release_file().
 */
static int read_file(const char *path, uint8_t **data, size_t *len,
		     bool *mapped)
{
	struct stat st;
	uint8_t *p;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;

	*mapped = false;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	if (st.st_size > 0 && (uint64_t)st.st_size <= SIZE_MAX) {
		p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd,
			 0);
		if (p != MAP_FAILED) {
			madvise(p, (size_t)st.st_size, MADV_SEQUENTIAL);
			*data = p;
			*len = (size_t)st.st_size;
			*mapped = true;
			goto out;
		}
	}
	p = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!p) {
		rc = -ENOMEM;
		goto out;
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, p + got, (size_t)st.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = r < 0 ? -errno : -EIO;
			free(p);
			goto out;
		}
		got += (size_t)r;
	}
	*data = p;
	*len = got;
out:
	close(fd);
	return rc;
}

static void release_file(uint8_t *data, size_t len, bool mapped)
{
	if (mapped)
		munmap(data, len);
	else
		free(data);
}

size_t changelog_hint(const uint8_t *p, size_t n, size_t off, unsigned stage,
		      changelog_hint_fn hint, void *arg)
{
	const uint8_t *payload;
	uint64_t version;
	size_t plen, rec;

	if (off >= n)
		return n;
	rec = changelog_record(p + off, n - off, &version, &payload, &plen);
	if (rec == 0)
		return n;
	hint(arg, stage, payload, plen);
	return off + rec;
}

/*
 * Stage @s's next hint. The first stage runs furthest ahead and checks
 * each record's crc; the later stages and the apply read what it checked
 * without working it out again (three times a record was a tenth of a
 * replay). A stage that reaches where the checking stopped checks.
 */
static size_t ahead_hint(struct changelog_ahead *a, unsigned s)
{
	const uint8_t *payload;
	size_t off = a->off[s], plen, rec;
	uint64_t version;

	if (off >= a->n)
		return a->n;
	rec = record_at(a->p + off, a->n - off, off >= a->checked, &version,
			&payload, &plen);
	if (rec == 0)
		return a->n;
	if (off + rec > a->checked)
		a->checked = off + rec;
	a->hint(a->arg, s, payload, plen);
	return off + rec;
}

void changelog_ahead_init(struct changelog_ahead *a, const uint8_t *p, size_t n,
			  size_t off, changelog_hint_fn hint, void *arg)
{
	a->p = p;
	a->n = n;
	a->hint = hint;
	a->arg = arg;
	a->checked = off;
	for (unsigned s = 0; s < CHANGELOG_STAGES; s++) {
		a->off[s] = off;
		for (unsigned i = 0; i < CHANGELOG_AHEAD >> s; i++)
			a->off[s] = ahead_hint(a, s);
	}
}

void changelog_ahead_step(struct changelog_ahead *a)
{
	for (unsigned s = 0; s < CHANGELOG_STAGES; s++)
		a->off[s] = ahead_hint(a, s);
}

size_t changelog_ahead_record(const struct changelog_ahead *a, size_t off,
			      uint64_t *version, const uint8_t **payload,
			      size_t *len)
{
	if (off >= a->n)
		return 0;
	return record_at(a->p + off, a->n - off, off >= a->checked, version,
			 payload, len);
}

/* What replay_seg() calls for each record, and ahead of it. */
struct replay_fns {
	changelog_apply_fn fn;
	changelog_hint_fn hint; /* NULL: none */
	void *arg;
	struct bootlog *log; /* progress: changes replayed */
	uint64_t done;	     /* changes replayed, all files */
};

/*
 * Replay one file. Returns 0, or -EUCLEAN with *@bad_off set to where the
 * first unreadable record starts. With a hint, cursors run ahead of the
 * one applied (changelog_ahead_step(); records of versions <= @after are
 * hinted too: rare, and harmless).
 */
static int replay_seg(const struct seg *s, uint64_t after, uint64_t *expect,
		      struct replay_fns *f, size_t *bad_off, size_t *size)
{
	struct changelog_ahead ahead;
	uint8_t *data = NULL;
	size_t len = 0, off;
	bool mapped = false;
	int rc = read_file(s->path, &data, &len, &mapped);

	if (rc < 0)
		return rc;
	*size = len;
	*bad_off = 0;
	if (len < SEG_HDR) {
		rc = -ENODATA; /* created, never written: a crash at start */
		goto out;
	}
	if (memcmp(data, SEG_MAGIC, 4) || get_le32(data + 4) != SEG_FORMAT ||
	    get_le64(data + 8) != s->first) {
		rc = -EUCLEAN;
		goto out;
	}
	if (f->hint)
		changelog_ahead_init(&ahead, data, len, SEG_HDR, f->hint,
				     f->arg);
	for (off = SEG_HDR; off < len;) {
		const uint8_t *payload;
		size_t plen, rec;
		uint64_t ver;

		if (f->hint) {
			changelog_ahead_step(&ahead);
			rec = changelog_ahead_record(&ahead, off, &ver,
						     &payload, &plen);
		} else {
			rec = changelog_record(data + off, len - off, &ver,
					       &payload, &plen);
		}
		if (rec == 0)
			break;
		if (ver > after) {
			if (ver != *expect) {
				sw_crit(TAG,
					"%s: version %" PRIu64 " where %" PRIu64
					" was expected",
					s->path, ver, *expect);
				rc = -EUCLEAN;
				goto out;
			}
			rc = f->fn(f->arg, ver, payload, plen);
			if (rc < 0) {
				sw_crit(TAG,
					"%s: replaying version %" PRIu64
					" failed: %s",
					s->path, ver, strerror(-rc));
				goto out;
			}
			*expect = ver + 1;
			bootlog_tick(f->log, ++f->done);
		}
		off += rec;
	}
	if (off < len) {
		*bad_off = off;
		rc = -EUCLEAN;
	}
out:
	release_file(data, len, mapped);
	return rc;
}

int changelog_replay(const char *dir, uint64_t after, changelog_apply_fn fn,
		     void *arg, uint64_t *last)
{
	return changelog_replay_ahead(dir, after, fn, NULL, arg, last);
}

int changelog_replay_ahead(const char *dir, uint64_t after,
			   changelog_apply_fn fn, changelog_hint_fn hint,
			   void *arg, uint64_t *last)
{
	struct bootlog log;
	struct replay_fns f = { fn, hint, arg, &log, 0 };
	struct seg *v;
	size_t n, bad_off = 0, size = 0;
	uint64_t expect = after + 1;
	int rc = seg_list(dir, &v, &n);

	if (rc < 0)
		return rc;
	bootlog_start(&log, TAG, "replaying the changelog", "changes", 0,
		      sw_mono_ns());
	for (size_t i = 0; i < n; i++) {
		/* Files that end before @after + 1 hold nothing for us. */
		if (i + 1 < n && v[i + 1].first <= after + 1)
			continue;
		rc = replay_seg(&v[i], after, &expect, &f, &bad_off, &size);
		if (rc == -ENODATA && i + 1 == n) {
			sw_notice(TAG, "%s: removing a file with no header",
				  v[i].path);
			unlink(v[i].path);
			rc = 0;
		} else if (rc == -ENODATA) {
			sw_crit(TAG, "%s: truncated header", v[i].path);
			rc = -EUCLEAN;
		} else if (rc == -EUCLEAN && bad_off && i + 1 == n) {
			/* A torn tail from a crash mid-write: cut it. */
			sw_notice(TAG,
				  "%s: cutting %zu bytes of torn tail at "
				  "offset %zu",
				  v[i].path, size - bad_off, bad_off);
			if (truncate(v[i].path, (off_t)bad_off) < 0) {
				rc = -errno;
				sw_crit(TAG, "cannot cut %s: %s", v[i].path,
					strerror(errno));
				break;
			}
			rc = 0;
		} else if (rc == -EUCLEAN && bad_off) {
			sw_crit(TAG,
				"%s: corrupt record at offset %zu in a file "
				"that is not the newest",
				v[i].path, bad_off);
		} else if (rc == -EUCLEAN) {
			sw_crit(TAG, "%s: bad file header", v[i].path);
		}
		if (rc < 0)
			break;
	}
	free(v);
	if (rc == 0)
		*last = expect - 1;
	return rc;
}
