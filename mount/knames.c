/*
 * What the kernel keeps for long, and how it is made to forget it
 * (knames.h).
 *
 * Names in a held directory go to the kernel with a long entry timeout,
 * so that rm -rf, which unlinks long after it listed, needs no lookup.
 * When the delegation ends the kernel must forget them, at a cost that
 * does not grow with the directory (a recall is what an rmr of the tree
 * this mount made waits for), and without pruning what it caches
 * elsewhere (what the next walk there would pay). knames_forget() says
 * how, by the directory:
 *
 *  - Most directories hand out a few names for long (a tree's top, a
 *    parent of big directories): each keeps up to KNAMES_FEW of
 *    them, and they are expired one by one (FUSE_LL_EXPIRE_ONLY): the
 *    kernel looks each up again before its next use, drops one that
 *    went, with what it caches below it, and keeps one that did not.
 *  - A directory the master recalls as removed (DelegRecall.removed: an
 *    rmr or rmsnapshot of a tree it is in) has its own entry expired and
 *    nothing else: the names below go with it. The master's word is a
 *    hint (the removal may yet be refused, or -f spare the directory),
 *    so the master keeps this mount watching it from the moment it is
 *    given back for as long as the names may live (master/deleg.c,
 *    op_deleg_return()): any change another client makes there then
 *    reaches this mount as an invalidation of that name, answered
 *    before the change is, as for any listing it caches. A mount that
 *    loses its connection loses those watches: it forgets every name
 *    then (knames_reconnected()).
 *  - Any other (more names than that, surviving) forgets every name
 *    this mount caches at once, where the kernel can (Linux 6.16,
 *    FUSE_NOTIFY_INC_EPOCH: ops->all): free when sent, but see
 *    below. Elsewhere the kernel drops a directory's cached names with
 *    the directory's own entry (d_invalidate() of it prunes the subtree
 *    below, some microseconds a name, in the kernel), there or gone.
 *
 * The last two need the directory's place: for that the mount keeps,
 * for each directory it told the kernel of, where (parent, name): from
 * the replies that made the kernel's entry (lookup, mkdir, readdirplus)
 * and the renames that moved it, in a table of WHERE_SLOTS, newest
 * first. A held directory takes its own copy when it hands out its first
 * long name; one whose place is not known (the mount's root, a slot
 * taken since) hands out the usual timeout, and has nothing to take
 * back. What a held directory costs here is therefore one name and up to
 * KNAMES_FEW more, however large. A long name keeps its time when
 * this mount renames it: it is kept by the held directory it lands in,
 * or expired at once (deleg.c, deleg_renamed()).
 *
 * What neither can drop is a name in use at that moment (an open file,
 * a working directory, a path walk that already passed the directory):
 * it stays cached up to KNAMES_TIMEOUT, as an open file's name
 * would in a local filesystem that another machine cannot change. Nor
 * can an expiry one name at a time stop a lookup the kernel makes to
 * revalidate a name it caches, answered long just before the recall and
 * applied by the kernel just after the expiry (it holds no lock the
 * expiry takes): that name may stay up to KNAMES_TIMEOUT. The epoch
 * closed that window (a revalidation does not refresh a dentry's epoch);
 * a few-name directory trades it for not pruning the whole mount.
 *
 * What the epoch notice does not make cheap (measured, issue 29): it
 * leaves every dentry of the mount stale, directories' own included,
 * and the kernel (fuse_dentry_revalidate() on 6.18) takes a stale one
 * for invalid without asking us, so the next path walk through a
 * directory d_invalidate()s it and prunes every name cached below it,
 * about 2.5 us a name, in that walker's system call: 0.26-0.40 s at
 * 100,000 names, 1.2-1.3 s at 500,000, in sweepfs rmr's realpath() of
 * a directory given back by the recall before. Hence the two cases
 * above, which cover a tree made here and then removed by rmr or
 * snapshot removal without it. An entry timeout of 0 does not spare
 * it: the kernel keeps such names cached all the same (20,000 made and
 * stat'ed, 20,000 dentries more).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "knames.h"
#include "log.h"
#include "util.h"

#define TAG "deleg"

/*
 * Places of directories the kernel knows (see above), by inode number,
 * direct-mapped: 4096 of 24 bytes and a name. A directory whose slot was
 * taken by another since is handed out with the usual timeouts.
 */
#define WHERE_SLOTS 4096u
/*
 * Directories given back as removed whose names were left to the kernel
 * (knames_forget()), kept until those names have expired by themselves;
 * past that many at once, one is forgotten as any other.
 */
#define REMOVED_MAX 64u

struct where {
	uint64_t ino; /* 0: free */
	struct kplace at;
};

struct removed {
	uint64_t ino;  /* 0: free */
	int64_t until; /* mono ns its last long name expires */
};

struct knames {
	const struct knames_ops *ops;
	void *arg;
	pthread_mutex_t mu; /* where, removed */
	struct where where[WHERE_SLOTS];
	struct removed removed[REMOVED_MAX];
	uint64_t gen;		/* mu; knames_gen() */
	uint64_t notices, left; /* atomics */
};

/* ---- names and places ------------------------------------------------ */

void klong_add(struct klong *l, const char *name)
{
	if (l->many)
		return;
	for (unsigned i = 0; i < l->n; i++)
		if (strcmp(l->v[i], name) == 0)
			return;
	if (l->n == KNAMES_FEW || (l->v[l->n] = strdup(name)) == NULL) {
		l->many = true;
		return;
	}
	l->n++;
}

void klong_clear(struct klong *l)
{
	for (unsigned i = 0; i < l->n; i++)
		free(l->v[i]);
	memset(l, 0, sizeof(*l));
}

bool kplace_set(struct kplace *p, uint64_t up, const char *name)
{
	char *copy = name ? strdup(name) : NULL;

	free(p->name);
	p->name = copy;
	p->up = copy ? up : 0;
	return copy || !name;
}

bool kplace_is(const struct kplace *p, uint64_t up, const char *name)
{
	return p->name && p->up == up && strcmp(name, p->name) == 0;
}

void kplace_moved(struct kplace *p, uint64_t up, const char *name, uint64_t nup,
		  const char *nname, bool swap)
{
	if (kplace_is(p, up, name))
		kplace_set(p, nup, nname);
	else if (nname && kplace_is(p, nup, nname))
		kplace_set(p, up, swap ? name : NULL);
}

/* ---- life ------------------------------------------------------------ */

int knames_new(const struct knames_ops *ops, void *arg, struct knames **out)
{
	struct knames *kn = calloc(1, sizeof(*kn));

	if (!kn)
		return -ENOMEM;
	kn->ops = ops;
	kn->arg = arg;
	pthread_mutex_init(&kn->mu, NULL);
	*out = kn;
	return 0;
}

void knames_free(struct knames *kn)
{
	if (!kn)
		return;
	for (size_t i = 0; i < WHERE_SLOTS; i++)
		free(kn->where[i].at.name);
	pthread_mutex_destroy(&kn->mu);
	free(kn);
}

static void count(uint64_t *c)
{
	__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

void knames_stats(struct knames *kn, struct knames_stats *st)
{
	st->notices = __atomic_load_n(&kn->notices, __ATOMIC_RELAXED);
	st->left = __atomic_load_n(&kn->left, __ATOMIC_RELAXED);
}

/* ---- where the kernel has directories (mu) --------------------------- */

static struct where *where_slot(struct knames *kn, uint64_t ino)
{
	return &kn->where[sw_hash_u64(ino) % WHERE_SLOTS];
}

/* Keep @ino as given back removed: false when there is no room. */
static bool leave_removed(struct knames *kn, uint64_t ino)
{
	int64_t now = sw_mono_ns();
	struct removed *slot = NULL;

	for (size_t i = 0; i < REMOVED_MAX; i++) {
		struct removed *r = &kn->removed[i];

		if (r->ino && r->until <= now)
			r->ino = 0;
		if (r->ino == ino || (!r->ino && !slot))
			slot = r;
	}
	if (!slot)
		return false;
	slot->ino = ino;
	slot->until = now + (int64_t)(KNAMES_TIMEOUT * 1e9);
	return true;
}

void knames_note_dir(struct knames *kn, uint64_t up, const char *name,
		     uint64_t ino)
{
	struct where *w;

	if (!ino || !strcmp(name, ".") || !strcmp(name, ".."))
		return;
	pthread_mutex_lock(&kn->mu);
	w = where_slot(kn, ino);
	if (w->ino != ino || !kplace_is(&w->at, up, name))
		w->ino = kplace_set(&w->at, up, name) ? ino : 0;
	pthread_mutex_unlock(&kn->mu);
}

uint64_t knames_gen(struct knames *kn)
{
	uint64_t gen;

	pthread_mutex_lock(&kn->mu);
	gen = kn->gen;
	pthread_mutex_unlock(&kn->mu);
	return gen;
}

void knames_reconnected(struct knames *kn)
{
	int64_t now = sw_mono_ns();
	bool any = false;

	pthread_mutex_lock(&kn->mu);
	kn->gen++;
	for (size_t i = 0; i < REMOVED_MAX; i++) {
		any = any || (kn->removed[i].ino && kn->removed[i].until > now);
		kn->removed[i].ino = 0;
	}
	pthread_mutex_unlock(&kn->mu);
	if (any && kn->ops->all(kn->arg) == 0)
		count(&kn->notices);
	else if (any)
		sw_warn(TAG,
			"reconnected: names of directories recalled as "
			"removed may stay cached up to %.0f s",
			KNAMES_TIMEOUT);
}

bool knames_place(struct knames *kn, uint64_t ino, struct kplace *at)
{
	struct where *w;
	bool ok = false;

	pthread_mutex_lock(&kn->mu);
	w = where_slot(kn, ino);
	if (w->ino == ino && w->at.name)
		ok = kplace_set(at, w->at.up, w->at.name) && at->name;
	pthread_mutex_unlock(&kn->mu);
	return ok;
}

void knames_renamed(struct knames *kn, uint64_t up, const char *name,
		    uint64_t nup, const char *nname, bool swap)
{
	pthread_mutex_lock(&kn->mu);
	/* Which directory moved is not known here: every place that names
	 * either end follows. */
	for (size_t i = 0; i < WHERE_SLOTS; i++) {
		struct where *w = &kn->where[i];

		if (!w->at.name)
			continue;
		kplace_moved(&w->at, up, name, nup, nname, swap);
		if (!w->at.name)
			w->ino = 0;
	}
	pthread_mutex_unlock(&kn->mu);
}

/* ---- forgetting ------------------------------------------------------ */

void knames_forget(struct knames *kn, struct kgone *gv, size_t n)
{
	const struct knames_ops *ops = kn->ops;
	bool epoch = false, all = false;
	bool can = ops->has_all(kn->arg);

	pthread_mutex_lock(&kn->mu);
	for (size_t i = 0; i < n; i++) {
		struct kgone *g = &gv[i];

		if (!g->names.many)
			continue;
		/* Left only where a reconnect can take it back (the epoch);
		 * a directory whose place is gone has no entry to expire. */
		g->removed = g->removed && g->at.name && can &&
			     g->gen == kn->gen && leave_removed(kn, g->ino);
		epoch = epoch || !g->removed;
	}
	pthread_mutex_unlock(&kn->mu);
	if (epoch && can) {
		all = ops->all(kn->arg) == 0;
		if (all) {
			count(&kn->notices);
		} else {
			sw_info(TAG, "this kernel cannot drop every cached "
				     "name at once: a recall invalidates each "
				     "directory's own entry");
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct kgone *g = &gv[i];

		if (!g->names.many) {
			for (unsigned k = 0; k < g->names.n; k++)
				if (ops->expire(kn->arg, g->ino,
						g->names.v[k]) == 0)
					count(&kn->notices);
		} else if (g->removed) {
			if (ops->expire(kn->arg, g->at.up, g->at.name) == 0)
				count(&kn->notices);
			count(&kn->left);
		} else if (!all && g->at.name &&
			   ops->drop(kn->arg, g->at.up, g->at.name) == 0) {
			count(&kn->notices);
		}
		free(g->at.name);
		g->at.name = NULL;
		klong_clear(&g->names);
	}
}
