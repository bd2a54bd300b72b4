/*
 * Directory delegations, the mount's side: see deleg.h.
 *
 * Names in a held directory go to the kernel with a long entry timeout,
 * so that rm -rf, which unlinks long after it listed, needs no lookup;
 * what the kernel was given, and how it forgets it when the delegation
 * ends, at a cost that does not grow with the directory, is knames.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "access.h"
#include "auth.h"
#include "fsio.h"
#include "deleg.h"
#include "dircache.h"
#include "frame.h"
#include "hash.h"
#include "hset.h"
#include "inval.h"
#include "knames.h"
#include "log.h"
#include "util.h"

#define TAG "deleg"

#define DIR_BUCKETS 1024u
/* Held at once; past this the least recently used one is given back. */
#define DIRS_MAX 256u
/* Queued operations wait at most this long for a batch. */
#define FLUSH_NS (20 * 1000000LL)
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
	/* Its entry in the kernel, taken from knames' table of places with
	 * the first name handed out for long, and kept current by renames;
	 * NULL name: none handed out. */
	struct kplace at;
	struct klong names;   /* handed out for long */
	bool removed;	      /* recalled by a removal of its tree */
	uint64_t removed_gen; /* on that connection (knames_gen()) */
	struct ddir *next;
};

/* A queued operation, with its credentials, name and target in one
 * block. */
struct qop {
	Sweepfs__BatchOp op;
	Sweepfs__Cred cred;
	uint64_t made; /* a create's provisional cookie (dircache.h), or 0 */
	/* The parent's handle when queued (its ddir's), or 0: the batch
	 * carries it, even after the directory is given back. */
	uint64_t parent_handle;
	size_t bytes; /* about what it costs in a frame */
	uint32_t groups[];
};

/* Operations on the wire, kept for what their answers say of them. */
struct sent {
	struct deleg *dg;
	size_t n;
	struct qop *ops[];
};

/* Inode numbers asked for at once, and how few left make us ask. */
#define INO_RANGE 4096u
#define INO_LOW (INO_RANGE / 4)
/* Ranges claimed again at a reconnect: what the master keeps of a
 * session's (master/sessrec.h, SESSION_INO_RANGES). */
#define INO_CLAIMS 4

struct deleg {
	struct mount *m;
	bool enabled;
	pthread_mutex_t mu;  /* dirs, queue */
	pthread_mutex_t smu; /* sending: batches and returns in order */
	pthread_mutex_t amu; /* returns, inflight, err, stop */
	pthread_cond_t acv;
	struct ddir *buckets[DIR_BUCKETS];
	size_t ndirs;
	struct knames *kn;
	uint64_t clock;
	struct qop **q;
	size_t nq, qcap, qbytes;
	int64_t first_at; /* mono ns the oldest queued op was */
	size_t queued;	  /* nq, for a look without mu */
	size_t qopen;	  /* queued creates whose file is still open */
	unsigned sending; /* queues taken, not yet all on the wire */
	/* Inode numbers for what is made here: [ino_next, ino_end), then
	 * the spare range that came before those ran out. */
	uint64_t ino_next, ino_end, spare_next, spare_end;
	/* The last ranges the master gave, newest first, with its proofs:
	 * claimed at a reconnect, for the creates sent again
	 * (deleg_ino_claims()). */
	struct ino_claim {
		uint64_t first;
		uint32_t count;
		uint8_t proof[SW_AUTH_TAG];
	} claims[INO_CLAIMS];
	bool ino_asking;
	int64_t ino_refused_at; /* mono ns the last ask failed */
	/* amu */
	uint64_t *returns;
	size_t nret, retcap;
	unsigned inflight; /* batches sent, not answered */
	int err;	   /* first refusal since the last fsyncdir */
	bool stop;
	bool started;
	pthread_t thread;
	uint64_t given; /* flusher only; logged at unmount */
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

/* Forget @ino; its entry in the kernel goes to @g (NULL: freed). */
static void forget(struct deleg *dg, uint64_t ino, struct kgone *g)
{
	struct ddir **pp = slot(dg, ino), *d = *pp;

	if (!d)
		return;
	*pp = d->next;
	dg->ndirs--;
	if (g) {
		g->at = d->at;
		g->names = d->names;
		g->removed = d->removed;
		g->gen = d->removed_gen;
	} else {
		free(d->at.name);
		klong_clear(&d->names);
	}
	free(d);
}

/*
 * Whether the kernel's entry of held @d is known, taking its copy from
 * knames' table if need be (then kept by @d: its slot may go to another).
 */
static bool placed(struct deleg *dg, struct ddir *d)
{
	return d->at.name || knames_place(dg->kn, d->ino, &d->at);
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

/* The master gave node @ino, made here, @handle: whatever keeps @ino
 * keeps it too, for when @ino's range is the session's no more. */
static void learn_handle(struct deleg *dg, uint64_t ino, uint64_t handle)
{
	struct ddir *d;

	itable_set_handle(&dg->m->inodes, ino, handle);
	pthread_mutex_lock(&dg->mu);
	d = find(dg, ino);
	if (d) { /* held from birth: its attributes are made_attr()'s */
		d->attr.has_handle = 1;
		d->attr.handle = handle;
	}
	pthread_mutex_unlock(&dg->mu);
}

/*
 * The master's answer to something made here: the entry gets its cookie
 * and the node its handle;
 * or, refused, the listing that has it goes, and a directory is no longer
 * held (the kernel keeps the name until its entry times out).
 */
static void made_answered(struct deleg *dg, const struct qop *o, int err,
			  uint64_t cookie, uint64_t handle)
{
	struct mount *m = dg->m;
	struct ddir *d;
	bool give = false;

	if (err == 0 && handle)
		learn_handle(dg, o->op.ino, handle);
	if (err == 0 && cookie) {
		if (o->made)
			dircache_made_cookie(m->dcache, o->op.parent, o->made,
					     cookie, handle);
		return;
	}
	dircache_drop(m->dcache, o->op.parent);
	if (!S_ISDIR(o->op.mode))
		return;
	pthread_mutex_lock(&dg->mu);
	d = find(dg, o->op.ino);
	if (d && d->st == D_HELD) {
		d->st = D_RETURNING;
		give = true;
	}
	pthread_mutex_unlock(&dg->mu);
	dircache_drop(m->dcache, o->op.ino);
	if (give)
		want_return(dg, o->op.ino);
}

/*
 * The master took directory @dir back (EKEYREVOKED: we did not answer a
 * recall in time): what we answered there was refused, others may have
 * changed it since. Its listing goes, it is no longer held, and it is
 * given back, which tells the master we know.
 */
static void taken_back(struct deleg *dg, uint64_t dir)
{
	struct ddir *d;

	dircache_drop(dg->m->dcache, dir);
	pthread_mutex_lock(&dg->mu);
	d = find(dg, dir);
	if (d && d->st == D_HELD)
		d->st = D_RETURNING;
	pthread_mutex_unlock(&dg->mu);
	/* Given back already, or not: one more return changes nothing. */
	want_return(dg, dir);
}

static void batch_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct sent *st = arg;
	struct deleg *dg = st->dg;
	const Sweepfs__BatchReply *r =
		rc == 0 ? (const Sweepfs__BatchReply *)*reply : NULL;
	int first = 0;
	size_t bad = 0;

	for (size_t i = 0; i < st->n; i++) {
		const struct qop *o = st->ops[i];
		bool create = o->op.type == SWEEPFS__BATCH_TYPE__BATCH_CREATE;
		/* BatchReply.errs are positive errno, as all errors on
		 * the wire. */
		int err = rc < 0 ? rc : i < r->n_errs ? -(int)r->errs[i] : -EIO;

		if (create)
			made_answered(dg, o, err,
				      r && i < r->n_cookies ? r->cookies[i] : 0,
				      r && i < r->n_handles ? r->handles[i] :
							      0);
		if (err == -EKEYREVOKED &&
		    (i == 0 || st->ops[i - 1]->op.parent != o->op.parent))
			taken_back(dg, o->op.parent);
		/* ENOENT of a removal: done before a reconnect and sent
		 * again, or removed by another client after the delegation
		 * ended. */
		if (err == 0 || (err == -ENOENT && !create))
			continue;
		/* A removal refused (EBUSY: a directory another holds
		 * now): the name is still there, which neither the listing
		 * we removed it from nor the link count we lowered say: the
		 * directory goes back, as one taken back does. */
		if (!create && err != -EKEYREVOKED)
			taken_back(dg, o->op.parent);
		if (!first)
			first = err;
		bad++;
	}
	if (bad)
		sw_notice(TAG,
			  "%zu operation(s) acknowledged here were refused "
			  "by the master (first: %s)",
			  bad, strerror(-first));
	pthread_mutex_lock(&dg->amu);
	if (first && !dg->err)
		dg->err = first;
	dg->inflight--;
	pthread_cond_broadcast(&dg->acv);
	pthread_mutex_unlock(&dg->amu);
	for (size_t i = 0; i < st->n; i++)
		free(st->ops[i]);
	free(st);
}

/* A directory's handle, for a batch whose operations were queued before
 * the master gave it (a directory made here): where learn_handle() put it. */
static uint64_t later_handle(void *arg, uint64_t dir)
{
	struct deleg *dg = arg;
	uint64_t h = deleg_handle(dg, dir);

	return h ? h : itable_handle(&dg->m->inodes, dir);
}

/* Send the queue as batches of at most a frame, and of at most
 * SW_HANDLES_MAX directories, each. smu held. */
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
	dg->nq = dg->qcap = dg->qbytes = dg->qopen = 0;
	__atomic_store_n(&dg->queued, 0, __ATOMIC_RELEASE);
	if (n)
		dg->sending++;
	pthread_mutex_unlock(&dg->mu);
	if (!n)
		return;
	ops = malloc(n * sizeof(*ops));
	for (size_t i = 0; i < n;) {
		size_t k = 0, bytes = 0;
		struct hset dirs = { .n = 0 };
		struct sent *st;

		while (i + k < n && k < SW_BATCH_OPS_MAX &&
		       (k == 0 ||
			bytes + q[i + k]->bytes <= SW_BATCH_BYTES_MAX) &&
		       hset_add(&dirs, q[i + k]->op.parent,
				q[i + k]->parent_handle))
			bytes += q[i + k++]->bytes;
		st = ops ? malloc(sizeof(*st) + k * sizeof(st->ops[0])) : NULL;
		if (!st) {
			sw_err(TAG,
			       "out of memory: %zu acknowledged operations "
			       "lost",
			       k);
			for (size_t j = i; j < i + k; j++)
				free(q[j]);
			i += k;
			continue;
		}
		st->dg = dg;
		st->n = k;
		for (size_t j = 0; j < k; j++) {
			st->ops[j] = q[i + j];
			ops[j] = &q[i + j]->op;
		}
		req.n_ops = k;
		req.ops = ops;
		/* Said here, not found by mconn_send(): a directory given
		 * back is no longer kept, nor, maybe, known to the kernel. */
		req.n_handles = hset_pack(&dirs, later_handle, dg);
		req.handles = dirs.handle;
		pthread_mutex_lock(&dg->amu);
		dg->inflight++;
		pthread_mutex_unlock(&dg->amu);
		mconn_send(dg->m->mc, SW_MSG_BATCH, &req.base, batch_done, st);
		i += k;
	}
	free(q);
	free(ops);
	pthread_mutex_lock(&dg->mu);
	dg->sending--;
	pthread_mutex_unlock(&dg->mu);
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
 * Give back what was recalled: the kernel forgets the long-lived names
 * first, then the queue goes out and the returns after it, on the same
 * wire.
 */
static void give_back(struct deleg *dg)
{
	struct kgone *gv;
	uint64_t *v, *hv;
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
	/* Each return's handle: the directory is forgotten below. */
	hv = calloc(n, sizeof(*hv));
	pthread_mutex_lock(&dg->mu);
	for (size_t i = 0; i < n; i++) {
		struct ddir *d = find(dg, v[i]);

		if (d && hv)
			hv[i] = d->attr.handle;
		/* Asked for again meanwhile: that answer is still to come,
		 * and the return below must not undo it. */
		if (d && d->st == D_RETURNING)
			forget(dg, v[i], gv ? &gv[i] : NULL);
	}
	pthread_mutex_unlock(&dg->mu);
	for (size_t i = 0; gv && i < n; i++)
		gv[i].ino = v[i];
	if (gv)
		knames_forget(dg->kn, gv, n);
	dg->given += n;
	for (size_t i = 0; i < n; i++)
		dircache_expire_attrs(dg->m->dcache, v[i]);
	free(gv);
	pthread_mutex_lock(&dg->smu);
	send_queued(dg);
	for (size_t i = 0; i < n; i++) {
		Sweepfs__DelegReturnReq q = SWEEPFS__DELEG_RETURN_REQ__INIT;

		q.dir = v[i];
		if (hv && hv[i]) {
			q.n_handles = 1;
			q.handles = &hv[i];
		}
		mconn_send(dg->m->mc, SW_MSG_DELEG_RETURN, &q.base, NULL, NULL);
	}
	pthread_mutex_unlock(&dg->smu);
	free(hv);
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

/* The kernel's side of knames.h, through libfuse. */
static int k_expire(void *arg, uint64_t dir, const char *name)
{
	struct mount *m = arg;
	fuse_ino_t p = mount_to_fuse(m, dir);
	int rc = fuse_lowlevel_notify_expire_entry(m->se, p, name, strlen(name),
						   FUSE_LL_EXPIRE_ONLY);

	if (rc == -ENOSYS)
		rc = fuse_lowlevel_notify_inval_entry(m->se, p, name,
						      strlen(name));
	return rc;
}

static int k_drop(void *arg, uint64_t dir, const char *name)
{
	struct mount *m = arg;

	return fuse_lowlevel_notify_inval_entry(m->se, mount_to_fuse(m, dir),
						name, strlen(name));
}

static int k_all(void *arg)
{
	struct mount *m = arg;
	int rc;

	if (__atomic_load_n(&m->no_epoch, __ATOMIC_RELAXED))
		return -ENOSYS;
	rc = inval_all_names(m->se);
	if (rc < 0)
		__atomic_store_n(&m->no_epoch, true, __ATOMIC_RELAXED);
	return rc;
}

static bool k_has_all(void *arg)
{
	struct mount *m = arg;

	return !__atomic_load_n(&m->no_epoch, __ATOMIC_RELAXED);
}

static const struct knames_ops k_ops = {
	.expire = k_expire,
	.drop = k_drop,
	.all = k_all,
	.has_all = k_has_all,
};

int deleg_new(struct mount *m, bool enabled, struct deleg **out)
{
	struct deleg *dg = calloc(1, sizeof(*dg));

	if (!dg || knames_new(&k_ops, m, &dg->kn) < 0) {
		free(dg);
		return -ENOMEM;
	}
	dg->m = m;
	dg->enabled = enabled;
	pthread_mutex_init(&dg->mu, NULL);
	pthread_mutex_init(&dg->smu, NULL);
	pthread_mutex_init(&dg->amu, NULL);
	sw_cond_init_mono(&dg->acv);
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
	if (dg->started && dg->enabled) {
		struct knames_stats ks;

		knames_stats(dg->kn, &ks);
		sw_notice(TAG,
			  "%" PRIu64 " delegation(s) given back, %" PRIu64
			  " kernel invalidation(s) of their names, %" PRIu64
			  " left to go with their tree",
			  dg->given, ks.notices, ks.left);
	}
	dg->started = false;
}

void deleg_free(struct deleg *dg)
{
	if (!dg)
		return;
	for (size_t i = 0; i < DIR_BUCKETS; i++)
		while (dg->buckets[i])
			forget(dg, dg->buckets[i]->ino, NULL);
	knames_free(dg->kn);
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
			/* A recall of the ask refused is not of this one. */
			d->recalled = d->removed = false;
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
	/* Not where someone may not search: see mount_searchable(). */
	if (d && d->st == D_HELD &&
	    (!dg->m->own_perms || mount_all_search(d->attr.mode)) &&
	    placed(dg, d)) {
		t = KNAMES_TIMEOUT;
		klong_add(&d->names, name);
	}
	pthread_mutex_unlock(&dg->mu);
	return t;
}

/* Directory @ino is @name in @up as the kernel sees it now (mu). */
static void note_dir(struct deleg *dg, uint64_t up, const char *name,
		     uint64_t ino)
{
	struct ddir *d = find(dg, ino);

	/* Moved (by another client's rename, the kernel following it on
	 * its next lookup): a held one's copy follows. */
	if (d && d->at.name && !kplace_is(&d->at, up, name) &&
	    strcmp(name, ".") && strcmp(name, ".."))
		kplace_set(&d->at, up, name);
}

void deleg_note_dir(struct deleg *dg, uint64_t parent, const char *name,
		    uint64_t ino)
{
	if (!dg || !dg->enabled)
		return;
	pthread_mutex_lock(&dg->mu);
	note_dir(dg, parent, name, ino);
	pthread_mutex_unlock(&dg->mu);
	knames_note_dir(dg->kn, parent, name, ino);
}

/*
 * A name that may have been handed out for long in @from went to @name
 * in @to (mu): kept by @to if held, else true, to be expired now.
 */
static bool moved_long(struct deleg *dg, uint64_t from, uint64_t to,
		       const char *name)
{
	struct ddir *s = find(dg, from), *d = find(dg, to);

	if (!s || (!s->names.many && !s->names.n))
		return false;
	/* Kept only where it can be expired: a place known. */
	if (d && (d->st == D_HELD || d->st == D_RETURNING) && placed(dg, d)) {
		klong_add(&d->names, name);
		return false;
	}
	return true;
}

void deleg_renamed(struct deleg *dg, uint64_t parent, const char *name,
		   uint64_t newparent, const char *newname, bool exchange)
{
	bool late, late_x;

	if (!dg || !dg->enabled)
		return;
	knames_renamed(dg->kn, parent, name, newparent, newname, exchange);
	pthread_mutex_lock(&dg->mu);
	for (size_t i = 0; i < DIR_BUCKETS; i++)
		for (struct ddir *d = dg->buckets[i]; d; d = d->next)
			kplace_moved(&d->at, parent, name, newparent, newname,
				     exchange);
	/* A long name keeps its time where it goes: one that left a held
	 * directory for another held one is expired with that one
	 * (knames_forget()); for any other, now (the inval thread waits
	 * for the rename to be done with the directory). */
	late = moved_long(dg, parent, newparent, newname);
	late_x = exchange && moved_long(dg, newparent, parent, name);
	pthread_mutex_unlock(&dg->mu);
	if (late && dg->m->inval)
		inval_queue(dg->m->inval, mount_to_fuse(dg->m, newparent),
			    newname, strlen(newname));
	if (late_x && dg->m->inval)
		inval_queue(dg->m->inval, mount_to_fuse(dg->m, parent), name,
			    strlen(name));
}

void deleg_note_attr(struct deleg *dg, const Sweepfs__Attr *a)
{
	struct ddir *d;
	bool closed = false;

	if (!dg || !dg->enabled || !S_ISDIR(a->mode))
		return;
	pthread_mutex_lock(&dg->mu);
	d = find(dg, a->ino);
	/* Sent after what was queued (deleg_flush()): newer than ours. */
	if (d && d->st == D_HELD) {
		closed = dg->m->own_perms && mount_all_search(d->attr.mode) &&
			 !mount_all_search(a->mode);
		d->attr = *a; /* the master's: with the handle */
	}
	pthread_mutex_unlock(&dg->mu);
	/* Someone may no longer search it: the kernel must forget the
	 * names it holds for long, as when the master recalls it. */
	if (closed)
		deleg_recall(dg, a->ino, false);
}

bool deleg_dir_attr(struct deleg *dg, uint64_t dir, Sweepfs__Attr *out)
{
	struct ddir *d;
	bool held;

	if (!dg || !dg->enabled)
		return false;
	pthread_mutex_lock(&dg->mu);
	d = find(dg, dir);
	held = d && d->st == D_HELD;
	if (held && out)
		*out = d->attr;
	pthread_mutex_unlock(&dg->mu);
	return held;
}

uint64_t deleg_handle(struct deleg *dg, uint64_t dir)
{
	struct ddir *d;
	uint64_t h;

	if (!dg || !dg->enabled)
		return 0;
	pthread_mutex_lock(&dg->mu);
	d = find(dg, dir);
	h = d && d->attr.has_handle ? d->attr.handle : 0;
	pthread_mutex_unlock(&dg->mu);
	return h;
}

bool deleg_held(struct deleg *dg, uint64_t dir)
{
	return deleg_dir_attr(dg, dir, NULL);
}

void deleg_recall(struct deleg *dg, uint64_t dir, bool removed)
{
	struct ddir *d;
	bool give;

	pthread_mutex_lock(&dg->mu);
	d = find(dg, dir);
	/* For what this recall gives back (not a refusal's record). */
	if (d && d->st != D_REFUSED) {
		d->removed = removed;
		d->removed_gen = knames_gen(dg->kn);
	}
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
	if (dg->enabled)
		knames_reconnected(dg->kn);
	/* The master dropped them; the kernel still has their names. The
	 * returns that follow are answered, and change nothing. A master
	 * that restarted knows our last ranges again from the hello's
	 * claims (deleg_ino_claims()), for the batches sent again; new
	 * nodes take new numbers. */
	pthread_mutex_lock(&dg->mu);
	dg->ino_next = dg->ino_end = dg->spare_next = dg->spare_end = 0;
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

bool deleg_any(struct deleg *dg)
{
	bool any;

	if (!dg)
		return false;
	pthread_mutex_lock(&dg->mu);
	any = false;
	/* A refusal holds nothing (and stays until evicted). */
	for (size_t i = 0; i < DIR_BUCKETS && !any && dg->ndirs; i++)
		for (struct ddir *d = dg->buckets[i]; d && !any; d = d->next)
			any = d->st != D_REFUSED;
	pthread_mutex_unlock(&dg->mu);
	return any;
}

int deleg_sync(struct deleg *dg)
{
	int err;

	if (!dg)
		return 0;
	flush(dg);
	devpoll_yield();
	pthread_mutex_lock(&dg->amu);
	while (dg->inflight)
		pthread_cond_wait(&dg->acv, &dg->amu);
	err = dg->err;
	dg->err = 0;
	pthread_mutex_unlock(&dg->amu);
	return err;
}

/* ---- the operations -------------------------------------------------- */

/* @c as the shared permission rule (access.h) takes it; borrows groups. */
static struct sw_cred cred_of(const Sweepfs__Cred *c)
{
	return (struct sw_cred){ .uid = c->uid,
				 .gid = c->gid,
				 .ngroups = c->n_groups,
				 .groups = c->groups };
}

/* The master's may_modify_dir(): search and write on @dir. */
static int may_modify(const Sweepfs__Cred *c, const Sweepfs__Attr *dir)
{
	struct sw_cred sc = cred_of(c);

	return sw_access_check(&sc, dir->mode, dir->uid, dir->gid,
			       SW_MAY_WRITE | SW_MAY_EXEC);
}

/*
 * The sticky bit: 0, or 1 when only the master can tell (the rule needs
 * the victim's owner, and the owner the listing has may be older than a
 * chown this mount made since).
 */
static int may_remove(const Sweepfs__Cred *c, const Sweepfs__Attr *dir)
{
	struct sw_cred sc = cred_of(c);

	return sw_access_sticky_any(&sc, dir->mode, dir->uid) ? 0 : 1;
}

static struct qop *qop_new(Sweepfs__BatchType type, uint64_t parent,
			   const char *name, const char *target,
			   const Sweepfs__Cred *cred)
{
	size_t len = strlen(name), tlen = target ? strlen(target) : 0;
	size_t gsize = cred->n_groups * sizeof(uint32_t);
	struct qop *o = malloc(sizeof(*o) + gsize + len + tlen);
	char *p;

	if (!o)
		return NULL;
	sweepfs__batch_op__init(&o->op);
	sweepfs__cred__init(&o->cred);
	o->cred.uid = cred->uid;
	o->cred.gid = cred->gid;
	o->cred.n_groups = cred->n_groups;
	o->cred.groups = o->groups;
	memcpy(o->groups, cred->groups, gsize);
	p = (char *)o->groups + gsize;
	memcpy(p, name, len);
	o->op.type = type;
	o->op.cred = &o->cred;
	o->op.parent = parent;
	o->op.name.data = (uint8_t *)p;
	o->op.name.len = len;
	if (target) {
		memcpy(p + len, target, tlen);
		o->op.has_target = 1;
		o->op.target.data = (uint8_t *)p + len;
		o->op.target.len = tlen;
	}
	o->made = 0;
	o->parent_handle = 0;
	/* A create's numbers: ino, mode, time, flags. */
	o->bytes = 32 + gsize + cred->n_groups + len + tlen +
		   (type == SWEEPFS__BATCH_TYPE__BATCH_CREATE ? 32 : 0);
	return o;
}

/* Queue @o, an operation in held directory @d (mu held): -ENOMEM, else
 * whether the batch is full. */
static int enqueue(struct deleg *dg, const struct ddir *d, struct qop *o)
{
	o->parent_handle = d->attr.handle;
	if (sw_grow(&dg->q, &dg->qcap, dg->nq + 1, sizeof(*dg->q), 256) < 0)
		return -ENOMEM;
	if (!dg->nq)
		dg->first_at = sw_mono_ns();
	dg->q[dg->nq++] = o;
	dg->qbytes += o->bytes;
	__atomic_store_n(&dg->queued, dg->nq, __ATOMIC_RELEASE);
	return dg->nq >= SW_BATCH_OPS_MAX || dg->qbytes >= SW_BATCH_BYTES_MAX;
}

/* After queueing: a full batch goes now, a first op wakes the flusher. */
static void after_queue(struct deleg *dg, bool first, bool full)
{
	if (full) {
		flush(dg);
	} else if (first) {
		pthread_mutex_lock(&dg->amu);
		pthread_cond_broadcast(&dg->acv);
		pthread_mutex_unlock(&dg->amu);
	}
}

int deleg_remove(struct deleg *dg, uint64_t parent, const char *name,
		 bool rmdir, const Sweepfs__Cred *cred)
{
	struct mount *m = dg ? dg->m : NULL;
	Sweepfs__Attr dattr;
	struct dc_entry de;
	struct ddir *d;
	struct qop *o;
	int64_t expires;
	bool first;
	int rc = 0, lrc, full;

	if (!dg || !dg->enabled || strlen(name) > SW_NAME_MAX)
		return 0;
	if (!deleg_held(dg, parent)) {
		deleg_want(dg, parent); /* now and then */
		return 0;
	}
	switch (dircache_lookup(m->dcache, parent, name, &de)) {
	case DC_FOUND:
		break;
	case DC_ABSENT:
		rc = -ENOENT;
		break;
	default:
		return 0;
	}
	if (rc == 0 && !de.has_attr)
		return 0;
	if (rc == 0) {
		mount_fresher_attr(m, &de.attr, &de.attr_at);
		if (rmdir && !S_ISDIR(de.attr.mode))
			rc = -ENOTDIR;
		else if (!rmdir && S_ISDIR(de.attr.mode))
			rc = -EISDIR;
		else if (!rmdir && de.attr.nlink != 1)
			/* A name it keeps elsewhere: its kernel expects the
			 * file's new ctime and link count from the reply. */
			return 0;
		else if (rmdir && (!deleg_held(dg, de.ino) ||
				   dircache_live(m->dcache, de.ino) != 0))
			return 0; /* empty? only the master knows */
	}
	/* Refused for what the entry is, or not: the master's order of
	 * checks, permission first. */
	lrc = rc;
	o = rc == 0 ? qop_new(rmdir ? SWEEPFS__BATCH_TYPE__BATCH_RMDIR :
				      SWEEPFS__BATCH_TYPE__BATCH_UNLINK,
			      parent, name, NULL, cred) :
		      NULL;
	if (rc == 0 && !o)
		return 0;

	pthread_mutex_lock(&dg->mu);
	d = find(dg, parent);
	if (!d || d->st != D_HELD) { /* recalled meanwhile */
		pthread_mutex_unlock(&dg->mu);
		free(o);
		return 0;
	}
	d->used = ++dg->clock;
	dattr = d->attr; /* the master's latest, with our changes since */
	rc = may_modify(cred, &dattr);
	if (rc == 0)
		rc = lrc;
	if (rc == 0 && may_remove(cred, &dattr) > 0) {
		pthread_mutex_unlock(&dg->mu);
		free(o);
		return 0;
	}
	if (rc < 0) {
		pthread_mutex_unlock(&dg->mu);
		free(o);
		return rc;
	}
	first = dg->nq == 0;
	full = enqueue(dg, d, o);
	if (full < 0) {
		pthread_mutex_unlock(&dg->mu);
		free(o);
		return 0;
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
	after_queue(dg, first, full > 0);
	return 1;
}

/* ---- making nodes ------------------------------------------------------ */

static void ino_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct deleg *dg = arg;
	const Sweepfs__InoRangeReply *r =
		rc == 0 ? (const Sweepfs__InoRangeReply *)*reply : NULL;

	pthread_mutex_lock(&dg->mu);
	dg->ino_asking = false;
	if (r && r->first && r->count && r->first + r->count > r->first) {
		if (r->has_proof && r->proof.len == SW_AUTH_TAG) {
			memmove(dg->claims + 1, dg->claims,
				sizeof(dg->claims) - sizeof(*dg->claims));
			dg->claims[0].first = r->first;
			dg->claims[0].count = r->count;
			memcpy(dg->claims[0].proof, r->proof.data, SW_AUTH_TAG);
		}
		if (dg->ino_next == dg->ino_end) {
			dg->ino_next = r->first;
			dg->ino_end = r->first + r->count;
		} else {
			dg->spare_next = r->first;
			dg->spare_end = r->first + r->count;
		}
	} else {
		dg->ino_refused_at = sw_mono_ns();
	}
	pthread_mutex_unlock(&dg->mu);
}

/*
 * A number for a node made here, or 0 when none is left. *@ask: the caller
 * is to ask for more (ask_inos(), without mu). mu held.
 */
static uint64_t take_ino(struct deleg *dg, bool *ask)
{
	if (dg->ino_next == dg->ino_end && dg->spare_next != dg->spare_end) {
		dg->ino_next = dg->spare_next;
		dg->ino_end = dg->spare_end;
		dg->spare_next = dg->spare_end = 0;
	}
	/* Not more often than once a second after a refusal. */
	*ask = !dg->ino_asking && dg->spare_next == dg->spare_end &&
	       dg->ino_end - dg->ino_next < INO_LOW &&
	       (!dg->ino_refused_at ||
		sw_mono_ns() - dg->ino_refused_at >= REASK_NS);
	if (*ask)
		dg->ino_asking = true;
	return dg->ino_next < dg->ino_end ? dg->ino_next++ : 0;
}

void deleg_ino_claims(struct deleg *dg, Sweepfs__InoClaim ***out, size_t *n)
{
	Sweepfs__InoClaim **v, *k;
	uint8_t *proofs;
	size_t count = 0;

	*out = NULL;
	*n = 0;
	if (!dg)
		return;
	/* One block: the pointers, the claims, their proofs. */
	v = malloc(INO_CLAIMS * (sizeof(*v) + sizeof(**v) + SW_AUTH_TAG));
	if (!v)
		return; /* the creates sent again are refused, and said so */
	k = (Sweepfs__InoClaim *)(v + INO_CLAIMS);
	proofs = (uint8_t *)(k + INO_CLAIMS);
	pthread_mutex_lock(&dg->mu);
	for (size_t i = 0; i < INO_CLAIMS && dg->claims[i].count; i++) {
		sweepfs__ino_claim__init(&k[count]);
		k[count].first = dg->claims[i].first;
		k[count].count = dg->claims[i].count;
		memcpy(proofs + count * SW_AUTH_TAG, dg->claims[i].proof,
		       SW_AUTH_TAG);
		k[count].proof.data = proofs + count * SW_AUTH_TAG;
		k[count].proof.len = SW_AUTH_TAG;
		v[count] = &k[count];
		count++;
	}
	pthread_mutex_unlock(&dg->mu);
	*out = v;
	*n = count;
}

static void ask_inos(struct deleg *dg)
{
	Sweepfs__InoRangeReq q = SWEEPFS__INO_RANGE_REQ__INIT;

	q.count = INO_RANGE;
	mconn_send(dg->m->mc, SW_MSG_INO_RANGE, &q.base, ino_done, dg);
}

/*
 * The attributes the master gives a node made by @c in @dir (its
 * create_node()): the owner is the caller, the group the directory's if
 * it is set-group-ID, else the caller's.
 */
static void made_attr(Sweepfs__Attr *a, const Sweepfs__Cred *c,
		      const Sweepfs__Attr *dir, uint64_t ino, uint32_t mode,
		      const char *target, int64_t now)
{
	uint32_t type = mode & S_IFMT;
	struct sw_cred sc;

	sweepfs__attr__init(a);
	a->ino = ino;
	a->uid = c->uid;
	a->gid = (dir->mode & S_ISGID) ? dir->gid : c->gid;
	sc = cred_of(c);
	a->mode = sw_new_node_mode(
		mode, dir->mode, c->uid == 0 || sw_cred_in_group(&sc, a->gid));
	a->nlink = type == S_IFDIR ? 2 : 1;
	a->size = type == S_IFDIR ? 4096 : target ? strlen(target) : 0;
	a->atime = a->mtime = a->ctime = now;
	a->has_xattrs = 1;
	a->xattrs = false;
}

/*
 * A directory made here is held from birth, with its (empty) listing:
 * the master delegates it to its maker when the batch lands, or recalls
 * it at once. Returns a directory to give back for room, or 0. mu held.
 */
static uint64_t hold_made(struct deleg *dg, const Sweepfs__Attr *a)
{
	uint64_t old = dg->ndirs >= DIRS_MAX ? evict(dg) : 0;
	struct ddir *d = calloc(1, sizeof(*d));
	struct ddir **head;

	if (!d)
		return old; /* not held: asked for as usual */
	d->ino = a->ino;
	d->st = D_HELD;
	d->asked_at = sw_mono_ns();
	d->used = ++dg->clock;
	d->attr = *a;
	head = &dg->buckets[sw_hash_u64(a->ino) % DIR_BUCKETS];
	d->next = *head;
	*head = d;
	dg->ndirs++;
	return old;
}

int deleg_make(struct deleg *dg, uint64_t parent, const char *name,
	       uint32_t mode, const char *target, const Sweepfs__Cred *cred,
	       const struct fuse_file_info *fi, struct fuse_entry_param *e)
{
	struct mount *m = dg ? dg->m : NULL;
	uint32_t type = mode & S_IFMT;
	Sweepfs__Attr a, dattr;
	struct dc_entry de;
	uint64_t ino, old = 0;
	bool ask = false, first, made_dir = false;
	struct ddir *d;
	struct qop *o;
	int64_t now;
	int rc, full;

	if (!dg || !dg->enabled || strlen(name) > SW_NAME_MAX)
		return 0;
	if (type != S_IFREG && type != S_IFDIR && type != S_IFLNK &&
	    type != S_IFIFO && type != S_IFSOCK)
		return 0; /* devices: only root, and the master says so */
	if (target && (!*target || strlen(target) >= SW_PATH_MAX))
		return 0;
	if (!deleg_held(dg, parent)) {
		deleg_want(dg, parent);
		return 0;
	}
	o = qop_new(SWEEPFS__BATCH_TYPE__BATCH_CREATE, parent, name, target,
		    cred);
	if (!o)
		return 0;
	now = sw_now_ns();
	pthread_mutex_lock(&dg->mu);
	d = find(dg, parent);
	if (!d || d->st != D_HELD)
		goto master; /* recalled meanwhile */
	d->used = ++dg->clock;
	/* The master's order: permission, then existence. */
	rc = may_modify(cred, &d->attr);
	if (rc < 0) {
		pthread_mutex_unlock(&dg->mu);
		free(o);
		return rc;
	}
	if (dircache_lookup(m->dcache, parent, name, &de) != DC_ABSENT)
		goto master; /* there, or not known to be absent */
	ino = take_ino(dg, &ask);
	if (!ino)
		goto master;
	made_attr(&a, cred, &d->attr, ino, mode, target, now);
	o->op.has_ino = o->op.has_mode = o->op.has_time = 1;
	o->op.ino = ino;
	o->op.mode = mode;
	o->op.time = now;
	if (fi) {
		o->op.has_open = o->op.has_writable = 1;
		o->op.open = true;
		o->op.writable = (fi->flags & O_ACCMODE) != O_RDONLY;
	}
	first = dg->nq == 0;
	full = enqueue(dg, d, o);
	if (full < 0)
		goto master;
	if (fi)
		dg->qopen++;
	o->made = dircache_add_made(m->dcache, parent, name, ino,
				    (uint8_t)(type >> 12), &a);
	d->attr.mtime = d->attr.ctime = now;
	if (type == S_IFDIR) {
		d->attr.nlink++;
		old = hold_made(dg, &a);
		made_dir = true;
		dircache_new_empty(m->dcache, ino);
	}
	dattr = d->attr;
	pthread_mutex_unlock(&dg->mu);
	if (made_dir)
		knames_note_dir(dg->kn, parent, name, ino);

	if (old)
		want_return(dg, old);
	if (ask)
		ask_inos(dg);
	itable_set_attr(&m->inodes, &dattr,
			sw_mono_ns() + (int64_t)(m->attr_timeout * 1e9));
	mount_fill_entry(m, parent, &a, MOUNT_ATTR_NOW, e);
	{
		double t = deleg_entry_timeout(dg, parent, name);

		if (t > 0)
			e->entry_timeout = t;
	}
	after_queue(dg, first, full > 0);
	return 1;

master:
	pthread_mutex_unlock(&dg->mu);
	free(o);
	if (ask)
		ask_inos(dg);
	return 0;
}

bool deleg_release(struct deleg *dg, uint64_t ino)
{
	bool found = false, sending;

	if (!dg || !dg->enabled)
		return false;
	pthread_mutex_lock(&dg->mu);
	/* Newest first: a file is mostly closed soon after it is made. */
	for (size_t i = dg->qopen ? dg->nq : 0; i-- > 0;) {
		struct qop *o = dg->q[i];

		if (o->op.type == SWEEPFS__BATCH_TYPE__BATCH_CREATE &&
		    o->op.ino == ino && o->op.open) {
			o->op.open = o->op.writable = false;
			dg->qopen--;
			found = true;
			break;
		}
	}
	sending = !found && dg->sending;
	pthread_mutex_unlock(&dg->mu);
	/* Taken from the queue and on its way: the release must follow it
	 * onto the wire, not overtake it among the lazy frames. */
	if (sending) {
		pthread_mutex_lock(&dg->smu);
		pthread_mutex_unlock(&dg->smu);
	}
	return found;
}
