/*
 * Making snapshots without stopping the master.
 *
 * A snapshot is a copy of a tree as it was at one instant (nscopy.c).
 * Copying a big tree takes a while, and the master must go on serving
 * everyone meanwhile, while clients change that very tree. So the
 * instant is taken with fork(): the child sees the namespace exactly as
 * it was, walks the source tree at its leisure (at low CPU and IO
 * priority) and streams its image through a pipe. The loop applies the
 * image in slices on the purge's budget (purge_slice long, purge_duty of
 * the loop's time between them, shared with the purge), journaling each
 * slice, and names the copy when the stream ends. Requests are handled
 * between slices; nothing waits for the copy but its own request.
 *
 * A tree of at most snapshot_sync_max nodes is not worth a fork: its
 * image is taken on the loop and applied at once.
 *
 * File data: chunks are shared, not copied. While the copy is under way,
 * chunks older than it are frozen: a write to one duplicates it first,
 * and one that loses its last reference is held for the copy (chunks.h).
 * Write leases on what the snapshot shares are taken back, so that
 * nobody goes on writing in place with a lease granted before
 * (dataops.c); the reply waits until they are. Which leases: for a tree
 * copied at once, those of the chunks the copy takes, each as its part
 * is applied (data_chunk_shared()), in the same loop turn as the
 * instant, and no others: a snapshot of a tree with no leased file takes
 * back nothing. For a bigger tree, every lease when it begins: the copy
 * is at the child's pace, files do not know their directories, and
 * walking the tree on the loop to find them is what the fork avoids.
 *
 * One snapshot is copied at a time; others wait, users taking turns, at
 * most SNAPJOB_USER_MAX of a user and SNAPJOB_QUEUE_MAX in all (an
 * admin's are counted but not refused by the second): more is EAGAIN,
 * so that nobody queues unbounded work and memory. A copy
 * interrupted by a restart is given up at start-up (its request's
 * client saw the connection go and gets no success), and shutdown gives
 * up a running one, so that the final checkpoint never holds half a copy.
 * Checkpoints wait while a copy runs (main.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "child.h"
#include "csrv.h"
#include "snapjob.h"
#include "log.h"
#include "dataops.h"
#include "context.h"
#include "purge.h"
#include "req.h"
#include "sessrec.h"
#include "watch.h"
#include "util.h"

#define TAG "snapshot"
/* Records per journaled part, at most: a part is applied whole, in one
 * background slice, so this bounds a slice as much as purge_slice does.
 * 4 KiB is some 65 nodes: 0.3 ms for most parts of a chain 100,000 deep
 * (whose nodes cost the most); a few take up to 3 ms whatever their size,
 * which a smaller part does not cure. The 1,550 parts of that chain's
 * 6 MiB copy took no longer in all than 194 parts of 32 KiB did. */
#define PART_BYTES (4u << 10)
#define IN_HIGH (8u << 20) /* stop reading the child above this */
#define IN_LOW (1u << 20)  /* and go on below this */

struct snapjob {
	struct req *req;  /* deferred until the copy is named */
	uint64_t session; /* the id of the session that asked, or 0 */
	uint32_t uid;	  /* who asked (snapjob.h) */
	bool admin;
	uint32_t turn; /* its user's snapshots waiting before it */
	uint64_t src;
	uint64_t parent;
	uint8_t len;
	char name[SW_NAME_MAX];
	struct snapjob *next;
};

struct snapper {
	struct master *m;
	struct snapjob *head; /* head: the one being copied, if running */
	struct snapjob *tail;
	bool running;
	uint64_t id; /* the copy's id: its Begin's version */
	/* The child that streams the image (child.h); its output buffer is
	 * the image not yet applied, also when the image is taken here. */
	struct sw_child child;
	const struct node *src; /* what the child copies */
	int child_rc;
	bool eof; /* the image is complete (or cut short) */
	uv_idle_t idle;
	uv_timer_t timer;
	int64_t started; /* mono ns */
	uint64_t bytes;	 /* image bytes applied */
	uint64_t parts;
};

static void next_job(struct snapper *s);
static void kick(struct snapper *s);
static void on_timer(uv_timer_t *t);

/* ---- the child -------------------------------------------------------- */

static int child_copy(void *arg, int fd)
{
	const struct snapper *s = arg;

	return ns_copy_write(&s->m->ns, s->src, fd);
}

static void on_child_data(struct sw_child *c)
{
	struct snapper *s = c->data;

	if (sw_buf_used(&c->out) > IN_HIGH)
		sw_child_pause(c);
	kick(s);
}

/* The child is gone and its pipe closed: the image is complete or cut
 * short. One killed when its copy was given up finds no copy running:
 * the next may start. */
static void on_child_exit(struct sw_child *c, int rc)
{
	struct snapper *s = c->data;

	if (!s->running) {
		next_job(s);
		return;
	}
	s->child_rc = rc;
	s->eof = true;
	kick(s);
}

static int child_start(struct snapper *s, const struct node *src)
{
	s->src = src;
	s->child.data = s;
	s->child.on_data = on_child_data;
	s->child.on_exit = on_child_exit;
	return sw_child_start(&s->child, s->m->loop, child_copy, s);
}

/* ---- journaled steps -------------------------------------------------- */

static int commit_begin(struct snapper *s, const struct snapjob *j)
{
	Sweepfs__Meta__SnapshotBegin b = SWEEPFS__META__SNAPSHOT_BEGIN__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	struct master *m = s->m;

	b.id = m->ns.version + 1; /* this record's version */
	b.src = j->src;
	b.parent = j->parent;
	b.name.data = (uint8_t *)j->name;
	b.name.len = j->len;
	b.chunk_start = m->ns.next_chunk;
	mut.time = sw_now_ns();
	mut.op_case = SWEEPFS__META__MUTATION__OP_SNAPSHOT_BEGIN;
	mut.snapshot_begin = &b;
	s->id = b.id;
	return master_commit(m, NULL, &mut);
}

static int commit_part(struct snapper *s, const uint8_t *p, size_t len)
{
	Sweepfs__Meta__SnapshotPart pt = SWEEPFS__META__SNAPSHOT_PART__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	struct master *m = s->m;

	pt.id = s->id;
	pt.records.data = (uint8_t *)p;
	pt.records.len = len;
	pt.ino_base = m->ns.next_ino;
	pt.edge_base = m->ns.next_edge;
	mut.time = sw_now_ns();
	mut.op_case = SWEEPFS__META__MUTATION__OP_SNAPSHOT_PART;
	mut.snapshot_part = &pt;
	return master_commit(m, NULL, &mut);
}

static int commit_end(struct snapper *s, int abort_rc)
{
	Sweepfs__Meta__SnapshotEnd e = SWEEPFS__META__SNAPSHOT_END__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	struct master *m = s->m;

	e.id = s->id;
	e.edge = m->ns.next_edge;
	if (abort_rc) {
		e.has_abort = 1;
		e.abort = abort_rc;
	}
	mut.time = sw_now_ns();
	mut.op_case = SWEEPFS__META__MUTATION__OP_SNAPSHOT_END;
	mut.snapshot_end = &e;
	return master_commit(m, NULL, &mut);
}

/*
 * Apply whole records from the buffer as one part. Returns bytes applied
 * (0: no whole record yet), or -errno: -EUCLEAN for a bad image, else the
 * changelog refused (full disk: try later).
 */
static ssize_t apply_part(struct snapper *s)
{
	const uint8_t *p = sw_buf_head(&s->child.out);
	size_t avail = sw_buf_used(&s->child.out), len = 0;
	int rc;

	while (len < avail) {
		ssize_t r = ns_copy_record(p + len, avail - len);

		if (r < 0)
			return r;
		if (r == 0 || (len && len + (size_t)r > PART_BYTES))
			break;
		len += (size_t)r;
	}
	if (len == 0)
		return 0;
	rc = commit_part(s, p, len);
	if (rc < 0)
		return rc;
	/* What it shared had leases out: no more writing in place. */
	data_revoke_shared(s->m);
	sw_buf_consume(&s->child.out, len);
	s->bytes += len;
	s->parts++;
	return (ssize_t)len;
}

/*
 * The copy is done or given up: name it or not, and answer. Returns false
 * when it has to wait (for lease revocations, or room in the changelog)
 * and will be called again; true when the next job may start.
 */
static bool finish(struct snapper *s, int abort_rc)
{
	struct master *m = s->m;
	struct snapjob *j = s->head;
	struct node *dir;
	int64_t rc;

	/* Given up or not: what failed while it ran is its own, not the
	 * next one's (revoke_failed is cleared below). */
	if (m->data->revoking && !m->stopping) {
		/* The reply waits until no old lease can write in place. */
		uv_idle_stop(&s->idle);
		uv_timer_start(&s->timer, on_timer, 5, 0);
		return false;
	}
	if (abort_rc)
		sw_child_kill(&s->child);
	if (!abort_rc && s->child_rc)
		abort_rc = s->child_rc;
	/* A writer's token may still write in place into a chunk the copy
	 * shares: the copy is given up, not named (threat model, 21). */
	if (!abort_rc && m->data->revoke_failed) {
		abort_rc = m->data->revoke_failed;
		sw_warn(TAG,
			"snapshot %" PRIu64 " given up: a writer's lease on "
			"a chunk it shares could not be taken back (%s)",
			s->id, strerror(-abort_rc));
	}
	rc = commit_end(s, abort_rc);
	if (rc < 0) {
		/* The changelog is full: the End must go in; try again. */
		sw_warn(TAG,
			"cannot journal the end of snapshot %" PRIu64 ": %s",
			s->id, strerror((int)-rc));
		uv_idle_stop(&s->idle);
		uv_timer_start(&s->timer, on_timer, 1000, 0);
		return false;
	}
	m->data->revoke_failed = 0;
	rc = m->ns.copy_last_rc;
	dir = ns_get(&m->ns, j->parent);
	if (rc >= 0 && dir)
		watch_changed(m, dir, j->name, j->len, NULL);
	sw_info(TAG,
		"snapshot %" PRIu64 " %s: %" PRId64 " nodes, %" PRIu64
		" bytes in %" PRIu64 " parts, %.3f s",
		s->id, rc >= 0 ? "done" : strerror((int)-rc),
		rc >= 0 ? rc : (int64_t)ns_copy_nodes(&m->ns), s->bytes,
		s->parts, (double)(sw_mono_ns() - s->started) / 1e9);
	if (j->req) {
		if (rc >= 0) {
			Sweepfs__SnapshotReply reply =
				SWEEPFS__SNAPSHOT_REPLY__INIT;

			reply.has_nodes = reply.has_ino = 1;
			reply.nodes = (uint64_t)rc;
			reply.ino = m->ns.copy_last_ino;
			/* Answered once the End is durable. */
			j->req->version = m->ns.version;
			req_reply(j->req, &reply.base);
		} else {
			req_error(j->req, (int)rc);
		}
		req_done(j->req);
	}
	s->head = j->next;
	if (!s->head)
		s->tail = NULL;
	free(j);
	sw_buf_release(&s->child.out);
	s->running = false;
	s->eof = false;
	s->child_rc = 0;
	uv_idle_stop(&s->idle);
	return true;
}

/* A slice: parts until the deadline, or until the image runs dry. */
static void run(uv_idle_t *h)
{
	struct snapper *s = h->data;
	struct master *m = s->m;
	int64_t t0, cpu0, deadline;
	ssize_t rc = 0;

	if (!s->running) {
		uv_idle_stop(h);
		return;
	}
	/* The purge's budget, shared: both are background work. */
	if (!background_may_run(m)) {
		uv_idle_stop(h);
		uv_timer_start(&s->timer, on_timer, 1, 0);
		return;
	}
	t0 = sw_mono_ns();
	cpu0 = sw_thread_cpu_ns();
	deadline = t0 + (int64_t)m->cfg.purge_slice_us * 1000;
	do {
		rc = apply_part(s);
	} while (rc > 0 && sw_mono_ns() < deadline);
	background_spent(m, sw_mono_ns() - t0, sw_thread_cpu_ns() - cpu0);
	if (rc == -EUCLEAN) {
		sw_err(TAG, "snapshot %" PRIu64 ": the image is malformed",
		       s->id);
		if (finish(s, -EIO))
			next_job(s);
		return;
	}
	if (rc < 0) {
		uv_idle_stop(h);
		uv_timer_start(&s->timer, on_timer, 1000, 0);
		return;
	}
	if (!s->eof && sw_buf_used(&s->child.out) < IN_LOW)
		sw_child_resume(&s->child);
	if (rc == 0 && s->eof) {
		bool cut = sw_buf_used(&s->child.out) != 0;

		if (cut)
			sw_err(TAG,
			       "snapshot %" PRIu64 ": the image ends "
			       "inside a record",
			       s->id);
		if (finish(s, cut ? -EIO : 0))
			next_job(s);
		return;
	}
	if (rc == 0)
		uv_idle_stop(h); /* wait for the child: its output kicks */
}

static void kick(struct snapper *s)
{
	if (s->running && !uv_is_active((uv_handle_t *)&s->idle)) {
		uv_timer_stop(&s->timer);
		uv_idle_start(&s->idle, run);
	}
}

static void next_job(struct snapper *s);

static void on_timer(uv_timer_t *t)
{
	struct snapper *s = t->data;

	if (s->running)
		kick(s);
	else
		next_job(s); /* it waited to start (csrv_epoch_wait_ns()) */
}

/* At most @limit nodes in the tree at @root? */
static bool tree_small(const struct node *root, uint64_t limit)
{
	return !S_ISDIR(root->mode) || ns_tree_names(root) + 1 <= limit;
}

/* Why job @j cannot start now, or 0. */
static int check_job(struct master *m, const struct snapjob *j,
		     struct node **src)
{
	struct node *dir = ns_get(&m->ns, j->parent);

	*src = ns_get(&m->ns, j->src);
	if (!*src || ns_gone(*src) || !dir)
		return -ENOENT;
	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	if (ns_detached(dir))
		return -ENOENT;
	if (ns_lookup(&m->ns, dir, j->name, j->len))
		return -EEXIST;
	if (S_ISDIR((*src)->mode) && ns_is_ancestor(*src, dir))
		return -EINVAL;
	return 0;
}

static bool same_user(const struct snapjob *j, uint32_t uid, bool admin)
{
	return j->uid == uid && j->admin == admin;
}

static void next_job(struct snapper *s)
{
	struct master *m = s->m;
	int64_t wait = csrv_epoch_wait_ns(m);

	/* Just after this master began to lead: see csrv_epoch_wait_ns(). */
	if (s->head && !s->running && wait > 0) {
		uv_timer_start(&s->timer, on_timer,
			       (uint64_t)(wait / 1000000) + 1, 0);
		return;
	}

	/* (A child given up is reaped but its pipe still closing: the
	 * next waits for on_child_exit().) */
	while (s->head && !s->running && !m->stopping && !s->child.active) {
		struct snapjob *j = s->head;
		struct node *src;
		int rc;

		/* It leaves the queue (copied, dropped or refused): its
		 * user's others move up a turn. */
		for (struct snapjob *q = j->next; q; q = q->next)
			if (same_user(q, j->uid, j->admin) && q->turn)
				q->turn--;

		/* Its connection closed: nobody hears of it, and a client
		 * that comes back sends it again. */
		if (j->session && j->req && !req_session(j->req)) {
			req_done(j->req);
			s->head = j->next;
			if (!s->head)
				s->tail = NULL;
			free(j);
			continue;
		}
		rc = check_job(m, j, &src);

		if (rc == 0)
			rc = commit_begin(s, j);
		if (rc == 0) {
			s->running = true;
			s->started = sw_mono_ns();
			s->bytes = s->parts = 0;
			if (tree_small(src, m->cfg.snapshot_sync_max)) {
				/* Taken and applied right here. */
				rc = ns_copy_image(&m->ns, src, &s->child.out);
				s->eof = true;
				while (rc == 0 && apply_part(s) > 0)
					;
				/* Whatever is left was refused by the
				 * changelog (full) or is malformed. */
				if (rc == 0 && sw_buf_used(&s->child.out))
					rc = -ENOSPC;
				finish(s, rc);
				continue;
			}
			data_revoke_leases(m);
			rc = child_start(s, src);
			if (rc < 0) {
				sw_err(TAG, "cannot start a snapshot copy: %s",
				       strerror(-rc));
				s->eof = true;
				finish(s, rc);
				continue;
			}
			sw_info(TAG,
				"snapshot %" PRIu64 " of inode %" PRIu64
				" started (child %d)",
				s->id, j->src, (int)s->child.pid);
			kick(s);
			return;
		}
		/* Refused before it began. */
		if (j->req) {
			req_error(j->req, rc);
			req_done(j->req);
		}
		s->head = j->next;
		if (!s->head)
			s->tail = NULL;
		free(j);
	}
}

/* ---- interface ---------------------------------------------------------- */

/* The first waiting job (the head, unless it is being copied). */
static struct snapjob *first_waiting(const struct snapper *s)
{
	return s->head && s->running ? s->head->next : s->head;
}

int snapjob_admit(const struct master *m, uint32_t uid, bool admin)
{
	const struct snapper *s = m->snap;
	uint64_t all = 0, mine = 0;

	/* The walk is bounded by the caps themselves (and the admins'). */
	for (const struct snapjob *j = first_waiting(s); j; j = j->next) {
		all++;
		mine += same_user(j, uid, admin);
	}
	if (mine >= SNAPJOB_USER_MAX || (!admin && all >= SNAPJOB_QUEUE_MAX))
		return -EAGAIN;
	return 0;
}

/*
 * Queue @j in its user's turn: after every waiting job whose user had no
 * more waiting before it than @j's has (its turn). Turns never decrease
 * along the queue; when a job leaves it, its user's others move up a
 * turn (next_job()). O(snapshots waiting).
 */
static void enqueue(struct snapper *s, struct snapjob *j)
{
	struct snapjob *after = s->head && s->running ? s->head : NULL;

	j->turn = 0;
	for (struct snapjob *q = first_waiting(s); q; q = q->next)
		j->turn += same_user(q, j->uid, j->admin);
	for (struct snapjob *q = first_waiting(s); q; q = q->next)
		if (q->turn <= j->turn)
			after = q;
	if (after) {
		j->next = after->next;
		after->next = j;
	} else {
		j->next = s->head;
		s->head = j;
	}
	if (!j->next)
		s->tail = j;
}

int snapjob_submit(struct master *m, const struct req *r, uint32_t uid,
		   uint64_t src, uint64_t parent, const void *name, size_t len,
		   bool admin)
{
	struct snapper *s = m->snap;
	uint64_t session = r->s ? r->s->id : 0;
	struct snapjob *j;
	int rc;

	if (len == 0 || len > SW_NAME_MAX)
		return -EINVAL;
	rc = snapjob_admit(m, uid, admin);
	if (rc < 0)
		return rc;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->req = req_defer(r);
	if (!j->req) {
		free(j);
		return -ENOMEM;
	}
	j->session = session;
	j->uid = uid;
	j->admin = admin;
	j->src = src;
	j->parent = parent;
	j->len = (uint8_t)len;
	memcpy(j->name, name, len);
	enqueue(s, j);
	next_job(s);
	return 0;
}

size_t snapjob_order(const struct master *m, uint32_t *uids, size_t max)
{
	size_t n = 0;

	for (const struct snapjob *j = m->snap ? first_waiting(m->snap) : NULL;
	     j; j = j->next, n++)
		if (n < max)
			uids[n] = j->uid;
	return n;
}

bool snapjob_busy(const struct master *m)
{
	return m->snap && m->snap->running;
}

uint64_t snapjob_waiting(const struct master *m)
{
	uint64_t n = 0;

	for (const struct snapjob *j = m->snap ? m->snap->head : NULL; j;
	     j = j->next)
		n++;
	return n && m->snap->running ? n - 1 : n;
}

int snapjob_init(struct master *m)
{
	struct snapper *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->m = m;
	uv_idle_init(m->loop, &s->idle);
	s->idle.data = s;
	uv_timer_init(m->loop, &s->timer);
	s->timer.data = s;
	m->snap = s;
	return 0;
}

int snapjob_take_over(struct master *m)
{
	struct snapper *s = m->snap;
	uint64_t id;

	if (ns_copy_active(&m->ns, &id)) {
		/* Cut short by a restart: the child and its image are gone. */
		s->id = id;
		if (commit_end(s, -ECANCELED) < 0)
			return -EIO;
		sw_notice(TAG,
			  "snapshot %" PRIu64 " was interrupted by the "
			  "restart; its partial copy is purged",
			  id);
		purge_kick(m);
	}
	return 0;
}

void snapjob_stop(struct master *m)
{
	struct snapper *s = m->snap;

	if (!s)
		return;
	if (s->running) {
		sw_notice(TAG, "shutdown: snapshot %" PRIu64 " given up",
			  s->id);
		sw_child_kill(&s->child);
		if (commit_end(s, -ECANCELED) < 0)
			sw_err(TAG,
			       "cannot journal the end of snapshot %" PRIu64
			       "; it is given up at the next start",
			       s->id);
		s->running = false;
	}
	while (s->head) {
		struct snapjob *j = s->head;

		s->head = j->next;
		if (j->req) {
			req_error(j->req, -ECANCELED);
			req_done(j->req);
		}
		free(j);
	}
	s->tail = NULL;
	sw_buf_release(&s->child.out);
	uv_idle_stop(&s->idle);
	uv_close((uv_handle_t *)&s->idle, NULL);
	uv_timer_stop(&s->timer);
	uv_close((uv_handle_t *)&s->timer, NULL);
}

void snapjob_release(struct master *m)
{
	free(m->snap);
	m->snap = NULL;
}
