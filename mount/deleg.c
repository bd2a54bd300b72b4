/*
 * Directory delegations, the mount's side: see deleg.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fsio.h"
#include "deleg.h"
#include "dircache.h"
#include "frame.h"
#include "hash.h"
#include "log.h"
#include "util.h"

#define TAG "deleg"

#define DIR_BUCKETS 1024u
/* Held at once; past this the least recently used one is given back. */
#define DIRS_MAX 256u
/* Queued operations wait at most this long for a batch. */
#define FLUSH_NS (20 * 1000000LL)
/*
 * What the kernel may keep a name in a held directory for: long enough
 * that rm -rf, which unlinks long after it listed, needs no lookup. Each
 * such name is remembered and invalidated when the delegation ends; the
 * bound is for the one that might slip through (a lookup answered while
 * the recall is being handled).
 */
#define LONG_ENTRY_TIMEOUT 60.0
#define NAMES_MAX (1u << 20) /* per directory; past it, the usual timeout */

enum dstate {
	D_ASKED,     /* DELEG sent, no answer yet */
	D_HELD,	     /* ours: unlink and rmdir answered here */
	D_RETURNING, /* recalled or given up: the flusher gives it back */
	D_REFUSED,   /* not granted: asked again after REASK_NS */
};

/*
 * A refusal is often brief: another client's cache of the directory the
 * master drops once it has been idle for that client's entry timeout.
 * Removals in a refused directory ask again, at most this often.
 */
#define REASK_NS (1000 * 1000000LL)

struct ddir {
	uint64_t ino;
	enum dstate st;
	bool recalled;	    /* recalled while asked for */
	int64_t asked_at;   /* mono ns */
	uint64_t used;	    /* dg->clock when last used */
	Sweepfs__Attr attr; /* the directory's, kept here while held */
	char **names;	    /* handed out with LONG_ENTRY_TIMEOUT */
	size_t nnames, namecap;
	struct ddir *next;
};

/* A directory given back: the names to invalidate in the kernel. */
struct gone {
	uint64_t ino;
	char **names;
	size_t nnames;
};

/* A queued operation, with its credentials and name in one block. */
struct qop {
	Sweepfs__BatchOp op;
	Sweepfs__Cred cred;
	size_t bytes; /* about what it costs in a frame */
	uint32_t groups[];
};

struct deleg {
	struct mount *m;
	bool enabled;
	pthread_mutex_t mu;  /* dirs, queue */
	pthread_mutex_t smu; /* sending: batches and returns in order */
	pthread_mutex_t amu; /* returns, inflight, err, stop */
	pthread_cond_t acv;
	struct ddir *buckets[DIR_BUCKETS];
	size_t ndirs;
	uint64_t clock;
	struct qop **q;
	size_t nq, qcap, qbytes;
	int64_t first_at; /* mono ns the oldest queued op was */
	size_t queued;	  /* nq, for a look without mu */
	/* amu */
	uint64_t *returns;
	size_t nret, retcap;
	unsigned inflight; /* batches sent, not answered */
	int err;	   /* first refusal since the last fsyncdir */
	bool stop;
	bool started;
	pthread_t thread;
};

/* An absolute CLOCK_MONOTONIC time @ns from now, for acv. */
static struct timespec after_ns(int64_t ns)
{
	return sw_ns_to_timespec(sw_mono_ns() + ns);
}

/* ---- directories (mu) ------------------------------------------------ */

static struct ddir **slot(struct deleg *dg, uint64_t ino)
{
	struct ddir **pp = &dg->buckets[sw_hash_u64(ino) % DIR_BUCKETS];

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

static struct ddir *find(struct deleg *dg, uint64_t ino)
{
	return *slot(dg, ino);
}

/* Forget @ino; its long-lived names go to @g (NULL: freed). */
static void forget(struct deleg *dg, uint64_t ino, struct gone *g)
{
	struct ddir **pp = slot(dg, ino), *d = *pp;

	if (!d)
		return;
	*pp = d->next;
	dg->ndirs--;
	if (g) {
		g->names = d->names;
		g->nnames = d->nnames;
	} else {
		for (size_t i = 0; i < d->nnames; i++)
			free(d->names[i]);
		free(d->names);
	}
	free(d);
}

/* ---- the flusher's work (amu) ---------------------------------------- */

static void want_return(struct deleg *dg, uint64_t ino)
{
	pthread_mutex_lock(&dg->amu);
	if (sw_grow(&dg->returns, &dg->retcap, dg->nret + 1,
		    sizeof(*dg->returns), 16) < 0) {
		/* Not given back now: the master takes it back after
		 * deleg_timeout. */
		pthread_mutex_unlock(&dg->amu);
		sw_warn(TAG,
			"out of memory: directory %" PRIu64 " not given back",
			ino);
		return;
	}
	dg->returns[dg->nret++] = ino;
	pthread_cond_broadcast(&dg->acv);
	pthread_mutex_unlock(&dg->amu);
}

static void batch_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct deleg *dg = arg;
	const Sweepfs__BatchReply *r = (const Sweepfs__BatchReply *)*reply;
	int first = rc;
	size_t bad = 0;

	if (rc == 0) {
		for (size_t i = 0; i < r->n_errs; i++) {
			if (!r->errs[i])
				continue;
			if (!first)
				first = r->errs[i];
			bad++;
		}
	}
	pthread_mutex_lock(&dg->amu);
	if (rc < 0) {
		sw_warn(TAG, "a batch of removals failed: %s", strerror(-rc));
	} else if (bad) {
		/* ENOENT: done before a reconnect and sent again, or removed
		 * by another client after the delegation ended. */
		sw_notice(TAG,
			  "%zu removal(s) acknowledged here were refused by "
			  "the master (first: %s)",
			  bad, strerror(-first));
	}
	if (first && first != -ENOENT && !dg->err)
		dg->err = first;
	dg->inflight--;
	pthread_cond_broadcast(&dg->acv);
	pthread_mutex_unlock(&dg->amu);
}

/* Send the queue as one batch. smu held. */
static void send_queued(struct deleg *dg)
{
	Sweepfs__BatchReq req = SWEEPFS__BATCH_REQ__INIT;
	Sweepfs__BatchOp **ops;
	struct qop **q;
	size_t n;

	pthread_mutex_lock(&dg->mu);
	q = dg->q;
	n = dg->nq;
	dg->q = NULL;
	dg->nq = dg->qcap = dg->qbytes = 0;
	__atomic_store_n(&dg->queued, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&dg->mu);
	if (!n)
		return;
	ops = malloc(n * sizeof(*ops));
	if (!ops)
		sw_err(TAG, "out of memory: %zu acknowledged removals lost", n);
	/* Threads that queued past a full batch before it went: more
	 * than one frame's worth, sent as several. */
	for (size_t i = 0; ops && i < n;) {
		size_t k = 0, bytes = 0;

		while (i + k < n && k < SW_BATCH_OPS_MAX &&
		       (k == 0 ||
			bytes + q[i + k]->bytes <= SW_BATCH_BYTES_MAX)) {
			bytes += q[i + k]->bytes;
			ops[k] = &q[i + k]->op;
			k++;
		}
		req.n_ops = k;
		req.ops = ops;
		pthread_mutex_lock(&dg->amu);
		dg->inflight++;
		pthread_mutex_unlock(&dg->amu);
		mconn_send(dg->m->mc, SW_MSG_BATCH, &req.base, batch_done, dg);
		i += k;
	}
	for (size_t i = 0; i < n; i++)
		free(q[i]);
	free(q);
	free(ops);
}

static void flush(struct deleg *dg)
{
	pthread_mutex_lock(&dg->smu);
	send_queued(dg);
	pthread_mutex_unlock(&dg->smu);
}

void deleg_flush(struct deleg *dg)
{
	/* Always through smu: with the queue empty, a batch taken from it
	 * may still be on its way to the wire, and must be ahead of the
	 * request that follows (an rmdir of the directory it empties). */
	if (dg && dg->enabled)
		flush(dg);
}

/*
 * The kernel forgets the names it was given for long: those still in the
 * listing (the others it dropped when they were removed here), or all of
 * them if the listing is no longer cached.
 */
static void forget_names(struct deleg *dg, struct gone *g)
{
	struct mount *m = dg->m;
	fuse_ino_t parent = mount_to_fuse(m, g->ino);
	bool whole = dircache_live(m->dcache, g->ino) >= 0;

	for (size_t i = 0; i < g->nnames; i++) {
		struct dc_entry de;

		if (!whole || dircache_lookup(m->dcache, g->ino, g->names[i],
					      &de) == DC_FOUND)
			fuse_lowlevel_notify_inval_entry(m->se, parent,
							 g->names[i],
							 strlen(g->names[i]));
		free(g->names[i]);
	}
	free(g->names);
}

/*
 * Give back what was recalled: the kernel forgets the long-lived names
 * first, then the queue goes out and the returns after it, on the same
 * wire.
 */
static void give_back(struct deleg *dg)
{
	struct gone *gv;
	uint64_t *v;
	size_t n;

	pthread_mutex_lock(&dg->amu);
	v = dg->returns;
	n = dg->nret;
	dg->returns = NULL;
	dg->nret = dg->retcap = 0;
	pthread_mutex_unlock(&dg->amu);
	if (!n)
		return;
	gv = calloc(n, sizeof(*gv));
	pthread_mutex_lock(&dg->mu);
	for (size_t i = 0; i < n; i++) {
		struct ddir *d = find(dg, v[i]);

		/* Asked for again meanwhile: that answer is still to come,
		 * and the return below must not undo it. */
		if (d && d->st == D_RETURNING)
			forget(dg, v[i], gv ? &gv[i] : NULL);
	}
	pthread_mutex_unlock(&dg->mu);
	for (size_t i = 0; gv && i < n; i++) {
		gv[i].ino = v[i];
		forget_names(dg, &gv[i]);
	}
	free(gv);
	pthread_mutex_lock(&dg->smu);
	send_queued(dg);
	for (size_t i = 0; i < n; i++) {
		Sweepfs__DelegReturnReq q = SWEEPFS__DELEG_RETURN_REQ__INIT;

		q.dir = v[i];
		mconn_send(dg->m->mc, SW_MSG_DELEG_RETURN, &q.base, NULL, NULL);
	}
	pthread_mutex_unlock(&dg->smu);
	free(v);
}

static void *flusher_main(void *arg)
{
	struct deleg *dg = arg;

	pthread_mutex_lock(&dg->amu);
	while (!dg->stop) {
		if (dg->nret) {
			pthread_mutex_unlock(&dg->amu);
			give_back(dg);
			pthread_mutex_lock(&dg->amu);
			continue;
		}
		if (__atomic_load_n(&dg->queued, __ATOMIC_ACQUIRE)) {
			struct timespec ts;
			int64_t first, now = sw_mono_ns();

			pthread_mutex_lock(&dg->mu);
			first = dg->first_at;
			pthread_mutex_unlock(&dg->mu);
			if (now - first >= FLUSH_NS) {
				pthread_mutex_unlock(&dg->amu);
				flush(dg);
				pthread_mutex_lock(&dg->amu);
				continue;
			}
			ts = after_ns(FLUSH_NS - (now - first));
			pthread_cond_timedwait(&dg->acv, &dg->amu, &ts);
		} else {
			pthread_cond_wait(&dg->acv, &dg->amu);
		}
	}
	pthread_mutex_unlock(&dg->amu);
	return NULL;
}

/* ---- life ------------------------------------------------------------ */

int deleg_new(struct mount *m, bool enabled, struct deleg **out)
{
	struct deleg *dg = calloc(1, sizeof(*dg));

	if (!dg)
		return -ENOMEM;
	dg->m = m;
	dg->enabled = enabled;
	pthread_mutex_init(&dg->mu, NULL);
	pthread_mutex_init(&dg->smu, NULL);
	pthread_mutex_init(&dg->amu, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&dg->acv, &ca);
		pthread_condattr_destroy(&ca);
	}
	*out = dg;
	return 0;
}

int deleg_start(struct deleg *dg)
{
	int rc = pthread_create(&dg->thread, NULL, flusher_main, dg);

	if (rc)
		return -rc;
	dg->started = true;
	return 0;
}

void deleg_stop(struct deleg *dg, int wait_ms)
{
	int64_t end = sw_mono_ns() + (int64_t)wait_ms * 1000000;

	if (!dg)
		return;
	flush(dg);
	pthread_mutex_lock(&dg->amu);
	while (dg->inflight && sw_mono_ns() < end) {
		struct timespec ts = after_ns(50 * 1000000LL);

		pthread_cond_timedwait(&dg->acv, &dg->amu, &ts);
	}
	if (dg->inflight)
		sw_warn(TAG,
			"%u batch(es) of removals not confirmed by the "
			"master at unmount",
			dg->inflight);
	dg->stop = true;
	pthread_cond_broadcast(&dg->acv);
	pthread_mutex_unlock(&dg->amu);
	if (dg->started)
		pthread_join(dg->thread, NULL);
	dg->started = false;
}

void deleg_free(struct deleg *dg)
{
	if (!dg)
		return;
	for (size_t i = 0; i < DIR_BUCKETS; i++)
		while (dg->buckets[i])
			forget(dg, dg->buckets[i]->ino, NULL);
	for (size_t i = 0; i < dg->nq; i++)
		free(dg->q[i]);
	free(dg->q);
	free(dg->returns);
	pthread_mutex_destroy(&dg->mu);
	pthread_mutex_destroy(&dg->smu);
	pthread_mutex_destroy(&dg->amu);
	pthread_cond_destroy(&dg->acv);
	free(dg);
}

/* ---- asking, holding, giving back ------------------------------------ */

struct askctx {
	struct deleg *dg;
	uint64_t dir;
};

static void ask_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct askctx *c = arg;
	struct deleg *dg = c->dg;
	const Sweepfs__DelegReply *r = (const Sweepfs__DelegReply *)*reply;
	bool give = false;
	struct ddir *d;

	pthread_mutex_lock(&dg->mu);
	d = find(dg, c->dir);
	if (d && d->st == D_ASKED) {
		if (rc == 0 && r->granted && r->attr) {
			d->st = D_HELD;
			d->attr = *r->attr; /* no pointers in it */
			if (d->recalled) {
				d->st = D_RETURNING;
				give = true;
			}
		} else {
			d->st = D_REFUSED;
		}
	}
	pthread_mutex_unlock(&dg->mu);
	if (give)
		want_return(dg, c->dir);
	free(c);
}

/*
 * Make room: forget the least recently used refused directory, or give
 * back the least recently used held one (returns it: the caller queues
 * the return). mu held.
 */
static uint64_t evict(struct deleg *dg)
{
	struct ddir *old = NULL;

	for (size_t i = 0; i < DIR_BUCKETS; i++)
		for (struct ddir *d = dg->buckets[i]; d; d = d->next)
			if ((d->st == D_HELD || d->st == D_REFUSED) &&
			    (!old || d->used < old->used))
				old = d;
	if (!old)
		return 0;
	if (old->st == D_REFUSED) {
		forget(dg, old->ino, NULL);
		return 0;
	}
	old->st = D_RETURNING;
	return old->ino;
}

/* Send the DELEG for @dir (in state D_ASKED). */
static void ask(struct deleg *dg, uint64_t dir)
{
	Sweepfs__DelegReq q = SWEEPFS__DELEG_REQ__INIT;
	struct askctx *c = malloc(sizeof(*c));

	if (!c) {
		struct ddir *d;

		pthread_mutex_lock(&dg->mu);
		d = find(dg, dir);
		if (d && d->st == D_ASKED)
			d->st = D_REFUSED; /* asked again later */
		pthread_mutex_unlock(&dg->mu);
		return;
	}
	c->dg = dg;
	c->dir = dir;
	q.dir = dir;
	mconn_send(dg->m->mc, SW_MSG_DELEG, &q.base, ask_done, c);
}

void deleg_want(struct deleg *dg, uint64_t dir)
{
	uint64_t old = 0;
	struct ddir *d;

	if (!dg || !dg->enabled)
		return;
	pthread_mutex_lock(&dg->mu);
	d = find(dg, dir);
	if (d) {
		bool again = d->st == D_REFUSED &&
			     sw_mono_ns() - d->asked_at >= REASK_NS;

		d->used = ++dg->clock;
		if (again) {
			d->st = D_ASKED;
			d->asked_at = sw_mono_ns();
		}
		pthread_mutex_unlock(&dg->mu);
		if (again)
			ask(dg, dir);
		return;
	}
	if (dg->ndirs >= DIRS_MAX)
		old = evict(dg);
	d = calloc(1, sizeof(*d));
	if (!d) {
		pthread_mutex_unlock(&dg->mu);
		if (old)
			want_return(dg, old);
		return;
	}
	d->ino = dir;
	d->st = D_ASKED;
	d->asked_at = sw_mono_ns();
	d->used = ++dg->clock;
	d->next = dg->buckets[sw_hash_u64(dir) % DIR_BUCKETS];
	dg->buckets[sw_hash_u64(dir) % DIR_BUCKETS] = d;
	dg->ndirs++;
	pthread_mutex_unlock(&dg->mu);
	if (old)
		want_return(dg, old);
	ask(dg, dir);
}

double deleg_entry_timeout(struct deleg *dg, uint64_t dir, const char *name)
{
	double t = 0;
	struct ddir *d;

	if (!dg || !dg->enabled)
		return 0;
	pthread_mutex_lock(&dg->mu);
	d = find(dg, dir);
	if (d && d->st == D_HELD && d->nnames < NAMES_MAX) {
		if (sw_grow(&d->names, &d->namecap, d->nnames + 1,
			    sizeof(*d->names), 64) == 0 &&
		    (d->names[d->nnames] = strdup(name)) != NULL) {
			d->nnames++;
			t = LONG_ENTRY_TIMEOUT;
		}
	}
	pthread_mutex_unlock(&dg->mu);
	return t;
}

void deleg_note_attr(struct deleg *dg, const Sweepfs__Attr *a)
{
	struct ddir *d;

	if (!dg || !dg->enabled || !S_ISDIR(a->mode))
		return;
	pthread_mutex_lock(&dg->mu);
	d = find(dg, a->ino);
	/* Sent after what was queued (deleg_flush()): newer than ours. */
	if (d && d->st == D_HELD)
		d->attr = *a;
	pthread_mutex_unlock(&dg->mu);
}

bool deleg_held(struct deleg *dg, uint64_t dir)
{
	struct ddir *d;
	bool held;

	if (!dg || !dg->enabled)
		return false;
	pthread_mutex_lock(&dg->mu);
	d = find(dg, dir);
	held = d && d->st == D_HELD;
	pthread_mutex_unlock(&dg->mu);
	return held;
}

void deleg_recall(struct deleg *dg, uint64_t dir)
{
	struct ddir *d;

	bool give;

	pthread_mutex_lock(&dg->mu);
	d = find(dg, dir);
	if (d && d->st == D_ASKED)
		d->recalled = true; /* given back when the answer comes */
	else if (d && d->st == D_HELD)
		d->st = D_RETURNING;
	/* Unknown here (forgotten, or asked before a reconnect): the
	 * return costs nothing and ends the master's wait at once. */
	give = !d || d->st == D_RETURNING;
	pthread_mutex_unlock(&dg->mu);
	if (give)
		want_return(dg, dir);
}

void deleg_reconnected(struct deleg *dg)
{
	uint64_t *v = NULL;
	size_t n = 0;

	if (!dg)
		return;
	/* The master dropped them; the kernel still has their names. The
	 * returns that follow are answered, and change nothing. */
	pthread_mutex_lock(&dg->mu);
	v = calloc(dg->ndirs ? dg->ndirs : 1, sizeof(*v));
	for (size_t i = 0; i < DIR_BUCKETS; i++) {
		for (struct ddir *d = dg->buckets[i]; d; d = d->next) {
			if (d->st == D_ASKED) {
				d->recalled = true;
			} else if (d->st == D_HELD) {
				d->st = D_RETURNING;
				if (v)
					v[n++] = d->ino;
			}
		}
	}
	pthread_mutex_unlock(&dg->mu);
	for (size_t i = 0; i < n; i++)
		want_return(dg, v[i]);
	free(v);
}

void deleg_sync(struct deleg *dg, fuse_req_t req)
{
	int err;

	if (!dg) {
		fuse_reply_err(req, 0);
		return;
	}
	flush(dg);
	pthread_mutex_lock(&dg->amu);
	while (dg->inflight)
		pthread_cond_wait(&dg->acv, &dg->amu);
	err = dg->err;
	dg->err = 0;
	pthread_mutex_unlock(&dg->amu);
	fuse_reply_err(req, -err);
}

/* ---- the operations -------------------------------------------------- */

/* The master's perm_check() for a directory: may @c write in it? */
static int may_modify(const Sweepfs__Cred *c, const Sweepfs__Attr *dir)
{
	unsigned granted;
	bool in_group = c->gid == dir->gid;

	if (c->uid == 0)
		return 0;
	for (size_t i = 0; i < c->n_groups && !in_group; i++)
		in_group = c->groups[i] == dir->gid;
	if (c->uid == dir->uid)
		granted = (dir->mode >> 6) & 7;
	else if (in_group)
		granted = (dir->mode >> 3) & 7;
	else
		granted = dir->mode & 7;
	return (granted & 3) == 3 ? 0 : -EACCES;
}

/*
 * The sticky bit: 0, or 1 when only the master can tell (the victim's
 * owner as the listing has it may be older than a chown this mount made
 * since).
 */
static int may_remove(const Sweepfs__Cred *c, const Sweepfs__Attr *dir)
{
	if (!(dir->mode & S_ISVTX) || c->uid == 0 || c->uid == dir->uid)
		return 0;
	return 1;
}

static struct qop *qop_new(uint64_t parent, const char *name, bool rmdir,
			   const Sweepfs__Cred *cred)
{
	size_t len = strlen(name);
	size_t gsize = cred->n_groups * sizeof(uint32_t);
	struct qop *o = malloc(sizeof(*o) + gsize + len);

	if (!o)
		return NULL;
	sweepfs__batch_op__init(&o->op);
	sweepfs__cred__init(&o->cred);
	o->cred.uid = cred->uid;
	o->cred.gid = cred->gid;
	o->cred.n_groups = cred->n_groups;
	o->cred.groups = o->groups;
	memcpy(o->groups, cred->groups, gsize);
	memcpy((char *)o->groups + gsize, name, len);
	o->op.type = rmdir ? SWEEPFS__BATCH_TYPE__BATCH_RMDIR :
			     SWEEPFS__BATCH_TYPE__BATCH_UNLINK;
	o->op.cred = &o->cred;
	o->op.parent = parent;
	o->op.name.data = (uint8_t *)o->groups + gsize;
	o->op.name.len = len;
	o->bytes = 32 + gsize + cred->n_groups + len;
	return o;
}

/* Queue @o (mu held). Returns whether the batch is full. */
static bool enqueue(struct deleg *dg, struct qop *o)
{
	if (sw_grow(&dg->q, &dg->qcap, dg->nq + 1, sizeof(*dg->q), 256) < 0)
		return false;
	if (!dg->nq)
		dg->first_at = sw_mono_ns();
	dg->q[dg->nq++] = o;
	dg->qbytes += o->bytes;
	__atomic_store_n(&dg->queued, dg->nq, __ATOMIC_RELEASE);
	return dg->nq >= SW_BATCH_OPS_MAX || dg->qbytes >= SW_BATCH_BYTES_MAX;
}

bool deleg_remove(struct deleg *dg, fuse_req_t req, uint64_t parent,
		  const char *name, bool rmdir, const Sweepfs__Cred *cred)
{
	struct mount *m = dg ? dg->m : NULL;
	Sweepfs__Attr dattr;
	struct dc_entry de;
	struct ddir *d;
	struct qop *o;
	int64_t expires;
	bool full, first;
	int rc = 0, lrc;

	if (!dg || !dg->enabled || strlen(name) > SW_NAME_MAX)
		return false;
	if (!deleg_held(dg, parent)) {
		deleg_want(dg, parent); /* now and then */
		return false;
	}
	switch (dircache_lookup(m->dcache, parent, name, &de)) {
	case DC_FOUND:
		break;
	case DC_ABSENT:
		rc = -ENOENT;
		break;
	default:
		return false;
	}
	if (rc == 0 && !de.has_attr)
		return false;
	if (rc == 0) {
		mount_fresher_attr(m, &de.attr, &de.attr_at);
		if (rmdir && !S_ISDIR(de.attr.mode))
			rc = -ENOTDIR;
		else if (!rmdir && S_ISDIR(de.attr.mode))
			rc = -EISDIR;
		else if (!rmdir && de.attr.nlink != 1)
			/* A name it keeps elsewhere: its kernel expects the
			 * file's new ctime and link count from the reply. */
			return false;
		else if (rmdir && (!deleg_held(dg, de.ino) ||
				   dircache_live(m->dcache, de.ino) != 0))
			return false; /* empty? only the master knows */
	}
	/* Refused for what the entry is, or not: the master's order of
	 * checks, permission first. */
	lrc = rc;
	o = rc == 0 ? qop_new(parent, name, rmdir, cred) : NULL;
	if (rc == 0 && !o)
		return false;

	pthread_mutex_lock(&dg->mu);
	d = find(dg, parent);
	if (!d || d->st != D_HELD) { /* recalled meanwhile */
		pthread_mutex_unlock(&dg->mu);
		free(o);
		return false;
	}
	d->used = ++dg->clock;
	dattr = d->attr; /* the master's latest, with our changes since */
	rc = may_modify(cred, &dattr);
	if (rc == 0)
		rc = lrc;
	if (rc == 0 && may_remove(cred, &dattr) > 0) {
		pthread_mutex_unlock(&dg->mu);
		free(o);
		return false;
	}
	if (rc < 0) {
		pthread_mutex_unlock(&dg->mu);
		free(o);
		fuse_reply_err(req, -rc);
		return true;
	}
	first = dg->nq == 0;
	full = enqueue(dg, o);
	if (dg->q[dg->nq - 1] != o) { /* no room to queue it */
		pthread_mutex_unlock(&dg->mu);
		free(o);
		return false;
	}
	dircache_remove(m->dcache, parent, name);
	if (rmdir) {
		/* Gone with it: the master ends it when the rmdir lands. */
		forget(dg, de.ino, NULL);
		dircache_drop(m->dcache, de.ino);
		if (d->attr.nlink > 2)
			d->attr.nlink--;
	}
	d->attr.mtime = d->attr.ctime = sw_now_ns();
	dattr = d->attr;
	pthread_mutex_unlock(&dg->mu);
	/* Its new attributes, for the kernel's next look at them; the
	 * victim's (ctime, links) the master has once the batch is in. */
	expires = sw_mono_ns() + (int64_t)(m->attr_timeout * 1e9);
	itable_set_attr(&m->inodes, &dattr, expires);
	itable_set_attr_expired(&m->inodes, de.ino);
	fuse_reply_err(req, 0);
	if (full) {
		flush(dg);
	} else if (first) {
		pthread_mutex_lock(&dg->amu);
		pthread_cond_broadcast(&dg->acv);
		pthread_mutex_unlock(&dg->amu);
	}
	return true;
}
