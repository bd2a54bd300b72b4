/*
 * The lock table (locks.h).
 *
 * Layout. Three hash tables hold only what is in use, so files that are
 * never locked cost nothing, not even a field in struct node:
 * - a struct lock_inode per inode with locks or waiters: every POSIX range
 *   held on it in one of two interval trees (itree.h), by type, its flock
 *   counts, its owners and a FIFO of waiters;
 * - a struct lk_owner per (inode, session, owner) holding something: its
 *   POSIX ranges in an interval tree of its own, and its flock;
 * - a struct lk_sess per session holding or waiting: its owners and its
 *   waiters, so that a session's end costs what it held, and the counts
 *   its caps are checked against.
 *
 * Costs. A conflict is a range of another owner in the write tree that
 * overlaps (or, for a write lock, one in the read tree): the first such
 * range found ends the search, so a check costs O(log n) plus the
 * requesting owner's own ranges it passes over. Setting a POSIX lock finds
 * the owner's ranges it touches in the owner's tree, O(log n + k), and
 * each range it cuts, merges or drops costs O(log n). A flock conflicts
 * by counts alone, O(1). Nothing walks a list of every lock, so a client
 * that takes many locks slows only itself, and the caps
 * (locks_set_limits()) bound how many it may take.
 *
 * Invariants, per inode:
 * - an owner's POSIX locks never overlap each other, and two of the same
 *   type are never adjacent (they would have been merged);
 * - an owner holds at most one flock;
 * - no two held locks of different owners conflict;
 * - a lock_inode, lk_owner or lk_sess that holds nothing (and, for the
 *   first and last, has no waiter) is freed by the end of every public
 *   call (li_put(), owner_put(), sess_gc()). Internal helpers free only
 *   owners, so a caller's inode and session pointers stay valid.
 *
 * Waiters are re-examined in queue order whenever something on their
 * inode was unlocked or changed type; each one that no longer conflicts
 * is granted then and there, so a later waiter may pass an earlier one
 * that is still blocked (as the kernel's own lock wakeups do). There is
 * no deadlock detection (EDEADLK): a blocked request ends when granted,
 * when FUSE interrupts it (locks_cancel()), or when its session goes.
 *
 * Memory only: locks are not journaled (see locks.h).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/random.h>

#include "fsio.h"
#include "hash.h"
#include "locks.h"
#include "util.h"

#define CONTAINER(p, type, member) \
	((type *)(void *)((char *)(p)-offsetof(type, member)))

struct lk_sess;
struct lock_inode;

/* A POSIX range held. */
struct lk {
	struct itree_node own; /* in its owner's tree */
	struct itree_node all; /* in its inode's rd or wr tree */
	struct lk_owner *o;
	uint32_t pid;
	uint8_t type; /* LOCK_TYPE_READ or _WRITE */
};

/* What one (inode, session, owner) holds. */
struct lk_owner {
	uint64_t ino; /* the key: ino, session, owner */
	uint64_t session;
	uint64_t owner;
	struct itree posix; /* its ranges on ino (struct lk, by .own) */
	uint8_t flock;	    /* LOCK_TYPE_*: UNLOCK for none */
	uint32_t flock_pid;
	struct lock_inode *li;
	struct lk_sess *s;
	struct lk_owner *inext, *iprev; /* li->owners */
	struct lk_owner *snext, *sprev; /* s->owners */
};

struct lk_waiter {
	struct lk_waiter *next, *prev;	 /* li's queue, oldest first */
	struct lk_waiter *snext, *sprev; /* s->waiters */
	struct lock_desc d;
	void *arg; /* the caller's, for wake() */
	struct lock_inode *li;
	struct lk_sess *s;
};

struct lock_inode {
	uint64_t ino;	     /* first: the table hashes and compares it */
	struct itree rd, wr; /* every POSIX range, by type (.all) */
	uint32_t flock_rd;   /* owners holding a shared flock */
	uint32_t flock_wr;   /* ... an exclusive one (at most one) */
	uint64_t nlocks;     /* held: ranges and flocks */
	uint64_t nwaiters;
	struct lk_owner *owners;
	struct lk_waiter *head, *tail;
};

struct lk_sess {
	uint64_t session; /* first: the key */
	uint64_t nlocks;
	uint64_t nwaiters;
	struct lk_owner *owners;
	struct lk_waiter *waiters;
};

/* ---- the three tables ---------------------------------------------- */

static uint64_t id_hash(const void *e)
{
	return sw_hash_u64(*(const uint64_t *)e);
}

static bool id_eq(const void *e, const void *key)
{
	return *(const uint64_t *)e == *(const uint64_t *)key;
}

static uint64_t owner_key_hash(uint64_t ino, uint64_t session, uint64_t owner)
{
	return sw_hash_u64(ino ^ sw_hash_u64(session ^ sw_hash_u64(owner)));
}

static uint64_t owner_hash(const void *e)
{
	const struct lk_owner *o = e;

	return owner_key_hash(o->ino, o->session, o->owner);
}

static bool owner_eq(const void *e, const void *key)
{
	const struct lk_owner *o = e;
	const uint64_t *k = key;

	return o->ino == k[0] && o->session == k[1] && o->owner == k[2];
}

void locks_init(struct locks *t, locks_wake_fn wake, void *wake_arg)
{
	htab_init(&t->inodes, id_hash);
	htab_init(&t->owners, owner_hash);
	htab_init(&t->sessions, id_hash);
	t->nlocks = 0;
	t->nwaiters = 0;
	t->limits = (struct locks_limits){ 0 };
	/* Only the shape of the trees depends on it: without entropy they
	 * are still correct, just predictable. */
	if (getrandom(&t->key, sizeof(t->key), GRND_NONBLOCK) !=
	    (ssize_t)sizeof(t->key))
		t->key = (uint64_t)(uintptr_t)t ^ 0x9e3779b97f4a7c15ULL;
	t->wake = wake;
	t->wake_arg = wake_arg;
}

void locks_set_limits(struct locks *t, const struct locks_limits *l)
{
	t->limits = *l;
}

static struct lock_inode *li_find(const struct locks *t, uint64_t ino)
{
	return htab_find(&t->inodes, sw_hash_u64(ino), id_eq, &ino);
}

static struct lock_inode *li_get(struct locks *t, uint64_t ino)
{
	struct lock_inode *li = li_find(t, ino);

	if (li)
		return li;
	li = calloc(1, sizeof(*li));
	if (!li)
		return NULL;
	li->ino = ino;
	itree_init(&li->rd, t->key);
	itree_init(&li->wr, t->key);
	if (htab_insert(&t->inodes, sw_hash_u64(ino), li) < 0) {
		free(li);
		return NULL;
	}
	return li;
}

/* Free @li if nothing is left in it. */
static void li_put(struct locks *t, struct lock_inode *li)
{
	if (!li || li->nlocks || li->nwaiters)
		return;
	htab_remove(&t->inodes, sw_hash_u64(li->ino), li);
	free(li);
}

static struct lk_sess *sess_find(const struct locks *t, uint64_t session)
{
	return htab_find(&t->sessions, sw_hash_u64(session), id_eq, &session);
}

static struct lk_sess *sess_get(struct locks *t, uint64_t session)
{
	struct lk_sess *s = sess_find(t, session);

	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->session = session;
	if (htab_insert(&t->sessions, sw_hash_u64(session), s) < 0) {
		free(s);
		return NULL;
	}
	return s;
}

/* Free session @session's record if it holds and waits for nothing. */
static void sess_gc(struct locks *t, uint64_t session)
{
	struct lk_sess *s = sess_find(t, session);

	if (!s || s->nlocks || s->nwaiters)
		return;
	htab_remove(&t->sessions, sw_hash_u64(session), s);
	free(s);
}

static struct lk_owner *owner_find(const struct locks *t,
				   const struct lock_desc *d)
{
	uint64_t k[3] = { d->ino, d->session, d->owner };

	return htab_find(&t->owners, owner_key_hash(k[0], k[1], k[2]), owner_eq,
			 k);
}

/* The owner record of @d on @li, made if need be; NULL: ENOMEM. */
static struct lk_owner *owner_get(struct locks *t, struct lock_inode *li,
				  const struct lock_desc *d)
{
	struct lk_owner *o = owner_find(t, d);
	struct lk_sess *s;

	if (o)
		return o;
	s = sess_get(t, d->session);
	if (!s)
		return NULL;
	o = calloc(1, sizeof(*o));
	if (!o || htab_insert(&t->owners, owner_hash(d), o) < 0) {
		free(o);
		sess_gc(t, d->session);
		return NULL;
	}
	o->ino = d->ino;
	o->session = d->session;
	o->owner = d->owner;
	itree_init(&o->posix, t->key);
	o->flock = LOCK_TYPE_UNLOCK;
	o->li = li;
	o->s = s;
	o->inext = li->owners;
	if (li->owners)
		li->owners->iprev = o;
	li->owners = o;
	o->snext = s->owners;
	if (s->owners)
		s->owners->sprev = o;
	s->owners = o;
	return o;
}

/* Free @o if it holds nothing (its inode and session stay). */
static void owner_put(struct locks *t, struct lk_owner *o)
{
	if (!o || o->posix.count || o->flock != LOCK_TYPE_UNLOCK)
		return;
	htab_remove(&t->owners, owner_hash(o), o);
	if (o->iprev)
		o->iprev->inext = o->inext;
	else
		o->li->owners = o->inext;
	if (o->inext)
		o->inext->iprev = o->iprev;
	if (o->sprev)
		o->sprev->snext = o->snext;
	else
		o->s->owners = o->snext;
	if (o->snext)
		o->snext->sprev = o->sprev;
	free(o);
}

/* ---- held locks ------------------------------------------------------ */

static void count_locks(struct locks *t, struct lk_owner *o, int64_t n)
{
	t->nlocks += (uint64_t)n;
	o->li->nlocks += (uint64_t)n;
	o->s->nlocks += (uint64_t)n;
}

static struct itree *type_tree(struct lock_inode *li, uint8_t type)
{
	return type == LOCK_TYPE_WRITE ? &li->wr : &li->rd;
}

/* Put @l, whose owner, range and type are set, into both its trees. */
static void lk_link(struct lk *l)
{
	l->all.start = l->own.start;
	l->all.end = l->own.end;
	itree_insert(&l->o->posix, &l->own);
	itree_insert(type_tree(l->o->li, l->type), &l->all);
}

static void lk_unlink(struct lk *l)
{
	itree_remove(&l->o->posix, &l->own);
	itree_remove(type_tree(l->o->li, l->type), &l->all);
}

static void lk_free(struct locks *t, struct lk *l)
{
	lk_unlink(l);
	count_locks(t, l->o, -1);
	free(l);
}

/* Give @l the range [@start, @end] (its key changes: out and in again). */
static void lk_move(struct lk *l, uint64_t start, uint64_t end)
{
	lk_unlink(l);
	l->own.start = start;
	l->own.end = end;
	lk_link(l);
}

static bool same_owner(const struct lock_desc *a, uint64_t session,
		       uint64_t owner)
{
	return a->session == session && a->owner == owner;
}

struct conflict {
	const struct lock_desc *want;
	struct lk *found;
};

static int conflict_fn(struct itree_node *n, void *arg)
{
	struct lk *l = CONTAINER(n, struct lk, all);
	struct conflict *c = arg;

	if (same_owner(c->want, l->o->session, l->o->owner))
		return 0;
	c->found = l;
	return 1;
}

/* A POSIX range of another owner that conflicts with @d, or NULL. */
static struct lk *posix_conflict(struct lock_inode *li,
				 const struct lock_desc *d)
{
	struct conflict c = { .want = d };

	if (itree_overlaps(&li->wr, d->start, d->end, conflict_fn, &c))
		return c.found;
	if (d->type == LOCK_TYPE_WRITE &&
	    itree_overlaps(&li->rd, d->start, d->end, conflict_fn, &c))
		return c.found;
	return NULL;
}

/* Whether a flock of @type by @d's owner conflicts with another's. */
static bool flock_conflict(const struct locks *t, struct lock_inode *li,
			   const struct lock_desc *d)
{
	const struct lk_owner *o = owner_find(t, d);
	uint32_t rd = li->flock_rd, wr = li->flock_wr;

	if (o && o->flock == LOCK_TYPE_READ)
		rd--;
	else if (o && o->flock == LOCK_TYPE_WRITE)
		wr--;
	return d->type == LOCK_TYPE_WRITE ? rd + wr > 0 : wr > 0;
}

static bool conflicts(const struct locks *t, struct lock_inode *li,
		      const struct lock_desc *d)
{
	if (d->type == LOCK_TYPE_UNLOCK)
		return false;
	if (d->kind == LOCK_KIND_FLOCK)
		return flock_conflict(t, li, d);
	return posix_conflict(li, d) != NULL;
}

/* Whether @n more held locks fit the caps for @d's session and file. */
/*
 * Whether @n more fit under a total @cap of which all hold @all and this
 * session @mine: the last eighth is kept for sessions holding less than
 * 1/64 of the cap, so the heaviest are refused first. (0: no cap.)
 */
static bool under_total(uint64_t all, uint64_t mine, uint64_t n, uint64_t cap)
{
	if (!cap)
		return true;
	if (all + n > cap)
		return false;
	return all + n <= cap - cap / 8 || mine + n <= cap / 64;
}

static bool fits(const struct locks *t, const struct lock_inode *li,
		 const struct lock_desc *d, uint64_t n)
{
	const struct lk_sess *s = sess_find(t, d->session);
	uint64_t held = s ? s->nlocks : 0;

	if (t->limits.per_session && held + n > t->limits.per_session)
		return false;
	if (!under_total(t->nlocks, held, n, t->limits.total))
		return false;
	return !t->limits.per_file || li->nlocks + n <= t->limits.per_file;
}

static uint64_t sat_inc(uint64_t x)
{
	return x == UINT64_MAX ? x : x + 1;
}

static uint64_t sat_dec(uint64_t x)
{
	return x ? x - 1 : 0;
}

/* The owner's ranges a change touches, collected before it is made. */
struct touched {
	struct lk **v;
	size_t n, cap;
	bool nomem;
};

static int touched_fn(struct itree_node *n, void *arg)
{
	struct touched *tc = arg;

	if (sw_grow(&tc->v, &tc->cap, tc->n + 1, sizeof(*tc->v), 8) < 0) {
		tc->nomem = true;
		return 1;
	}
	tc->v[tc->n++] = CONTAINER(n, struct lk, own);
	return 0;
}

/* What the change does to a range it touches. */
enum cut { CUT_KEEP, CUT_ABSORB, CUT_DROP, CUT_END, CUT_START, CUT_SPLIT };

static enum cut cut_of(const struct lk *l, const struct lock_desc *d)
{
	bool lock = d->type != LOCK_TYPE_UNLOCK;

	if (lock && l->type == d->type)
		return CUT_ABSORB; /* overlapping or adjacent: merge */
	if (l->own.end < d->start || l->own.start > d->end)
		return CUT_KEEP; /* adjacent only */
	if (l->own.start < d->start && l->own.end > d->end)
		return CUT_SPLIT;
	if (l->own.start < d->start)
		return CUT_END;
	if (l->own.end > d->end)
		return CUT_START;
	return CUT_DROP;
}

/*
 * Make the owner's POSIX locks in [d->start, d->end] exactly @d (none for
 * an unlock): cut, split or drop what overlaps, merge what touches with
 * the same type. Everything that can fail (memory, the caps) is done or
 * checked first, so that an error leaves everything as it was.
 */
static int apply_posix(struct locks *t, struct lock_inode *li,
		       const struct lock_desc *d)
{
	bool lock = d->type != LOCK_TYPE_UNLOCK;
	struct lk_owner *o = owner_find(t, d);
	struct touched tc = { 0 };
	struct lk *nl = NULL, *split = NULL;
	uint64_t s = d->start, e = d->end;
	int64_t delta = lock ? 1 : 0;
	bool splits = false;
	int rc = 0;

	if (!o && !lock)
		return 0;
	if (o)
		itree_overlaps(&o->posix, sat_dec(s), sat_inc(e), touched_fn,
			       &tc);
	if (tc.nomem) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < tc.n; i++) {
		enum cut c = cut_of(tc.v[i], d);

		if (c == CUT_ABSORB || c == CUT_DROP)
			delta--;
		if (c == CUT_SPLIT) {
			delta++;
			splits = true;
		}
	}
	if (delta > 0 && !fits(t, li, d, (uint64_t)delta)) {
		rc = -ENOLCK;
		goto out;
	}
	if ((lock && !(nl = malloc(sizeof(*nl)))) ||
	    (splits && !(split = malloc(sizeof(*split))))) {
		rc = -ENOMEM;
		goto out;
	}
	if (!o && !(o = owner_get(t, li, d))) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < tc.n; i++) {
		struct lk *l = tc.v[i];

		switch (cut_of(l, d)) {
		case CUT_KEEP:
			break;
		case CUT_ABSORB:
			s = SW_MIN(s, l->own.start);
			e = SW_MAX(e, l->own.end);
			lk_free(t, l);
			break;
		case CUT_DROP:
			lk_free(t, l);
			break;
		case CUT_END:
			lk_move(l, l->own.start, d->start - 1);
			break;
		case CUT_START:
			lk_move(l, d->end + 1, l->own.end);
			break;
		case CUT_SPLIT:
			*split = *l;
			split->own.start = d->end + 1;
			split->own.end = l->own.end;
			lk_move(l, l->own.start, d->start - 1);
			lk_link(split);
			count_locks(t, o, 1);
			split = NULL;
			break;
		}
	}
	if (nl) {
		nl->o = o;
		nl->pid = d->pid;
		nl->type = d->type;
		nl->own.start = s;
		nl->own.end = e;
		lk_link(nl);
		count_locks(t, o, 1);
		nl = NULL;
	}
	owner_put(t, o);
out:
	free(nl);
	free(split);
	free(tc.v);
	return rc;
}

/* Drop what @o holds of @kind, or everything with @all (@o may be
 * freed); whether anything went. */
static bool drop_held(struct locks *t, struct lk_owner *o, enum lock_kind kind,
		      bool all)
{
	bool any = false;

	if (all || kind == LOCK_KIND_POSIX) {
		while (o->posix.root) {
			lk_free(t, CONTAINER(o->posix.root, struct lk, own));
			any = true;
		}
	}
	if ((all || kind == LOCK_KIND_FLOCK) && o->flock != LOCK_TYPE_UNLOCK) {
		if (o->flock == LOCK_TYPE_WRITE)
			o->li->flock_wr--;
		else
			o->li->flock_rd--;
		o->flock = LOCK_TYPE_UNLOCK;
		count_locks(t, o, -1);
		any = true;
	}
	owner_put(t, o);
	return any;
}

static int add_flock(struct locks *t, struct lock_inode *li,
		     const struct lock_desc *d)
{
	struct lk_owner *o = owner_find(t, d);

	if (!(o && o->flock != LOCK_TYPE_UNLOCK) && !fits(t, li, d, 1))
		return -ENOLCK;
	if (!o && !(o = owner_get(t, li, d)))
		return -ENOMEM;
	if (o->flock != LOCK_TYPE_UNLOCK) {
		if (o->flock == LOCK_TYPE_WRITE)
			li->flock_wr--;
		else
			li->flock_rd--;
		count_locks(t, o, -1);
	}
	o->flock = d->type;
	o->flock_pid = d->pid;
	if (d->type == LOCK_TYPE_WRITE)
		li->flock_wr++;
	else
		li->flock_rd++;
	count_locks(t, o, 1);
	return 0;
}

static int apply(struct locks *t, struct lock_inode *li,
		 const struct lock_desc *d)
{
	if (d->kind == LOCK_KIND_POSIX)
		return apply_posix(t, li, d);
	if (d->type == LOCK_TYPE_UNLOCK) {
		struct lk_owner *o = owner_find(t, d);

		if (o)
			drop_held(t, o, LOCK_KIND_FLOCK, false);
		return 0;
	}
	return add_flock(t, li, d);
}

/* ---- waiters --------------------------------------------------------- */

/* Take @w out of its queues (its inode and session stay). */
static void waiter_unlink(struct locks *t, struct lk_waiter *w)
{
	struct lock_inode *li = w->li;
	struct lk_sess *s = w->s;

	if (w->prev)
		w->prev->next = w->next;
	else
		li->head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		li->tail = w->prev;
	if (w->sprev)
		w->sprev->snext = w->snext;
	else
		s->waiters = w->snext;
	if (w->snext)
		w->snext->sprev = w->sprev;
	li->nwaiters--;
	s->nwaiters--;
	t->nwaiters--;
}

/* Grant, in queue order, every waiter on @li that no longer conflicts. */
static void run_waiters(struct locks *t, struct lock_inode *li)
{
	struct lk_waiter *w, *next;

	for (w = li->head; w; w = next) {
		int rc;

		next = w->next;
		if (conflicts(t, li, &w->d))
			continue;
		waiter_unlink(t, w);
		rc = apply(t, li, &w->d);
		/* apply() fails for memory or a cap: the request fails
		 * with ENOLCK, as fcntl(2) documents for a full table. */
		t->wake(t->wake_arg, w->arg, rc < 0 ? -ENOLCK : 0);
		sess_gc(t, w->d.session);
		free(w);
	}
}

static int enqueue(struct locks *t, struct lock_inode *li,
		   const struct lock_desc *d, void *arg)
{
	struct lk_sess *s;
	struct lk_waiter *w;

	if (t->limits.waiters_per_file &&
	    li->nwaiters >= t->limits.waiters_per_file)
		return -ENOLCK;
	s = sess_get(t, d->session);
	if (!s)
		return -ENOMEM;
	if ((t->limits.waiters_per_session &&
	     s->nwaiters >= t->limits.waiters_per_session) ||
	    !under_total(t->nwaiters, s->nwaiters, 1,
			 t->limits.waiters_total)) {
		sess_gc(t, d->session);
		return -ENOLCK;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		sess_gc(t, d->session);
		return -ENOMEM;
	}
	w->d = *d;
	w->arg = arg;
	w->li = li;
	w->s = s;
	w->prev = li->tail;
	if (li->tail)
		li->tail->next = w;
	else
		li->head = w;
	li->tail = w;
	w->snext = s->waiters;
	if (s->waiters)
		s->waiters->sprev = w;
	s->waiters = w;
	li->nwaiters++;
	s->nwaiters++;
	t->nwaiters++;
	return 1;
}

/* ---- the calls ------------------------------------------------------- */

int locks_set(struct locks *t, const struct lock_desc *d, bool wait,
	      void *waiter)
{
	struct lock_inode *li;
	int rc = 0;

	if (d->type == LOCK_TYPE_UNLOCK) {
		li = li_find(t, d->ino);
		if (!li)
			return 0;
	} else {
		li = li_get(t, d->ino);
		if (!li)
			return -ENOMEM;
	}
	if (d->kind == LOCK_KIND_FLOCK) {
		struct lk_owner *o = owner_find(t, d);

		if (o && o->flock == d->type)
			goto out;
		/* Linux drops the old flock before a conversion waits:
		 * two holders of LOCK_SH both asking for LOCK_EX would
		 * otherwise wait for each other for ever. */
		if (o && o->flock != LOCK_TYPE_UNLOCK) {
			drop_held(t, o, LOCK_KIND_FLOCK, false);
			run_waiters(t, li);
		}
		if (d->type == LOCK_TYPE_UNLOCK)
			goto out;
	}
	if (conflicts(t, li, d)) {
		rc = wait ? enqueue(t, li, d, waiter) : -EAGAIN;
		goto out;
	}
	rc = apply(t, li, d);
	if (rc == 0 && li->head)
		run_waiters(t, li);
out:
	sess_gc(t, d->session);
	li_put(t, li);
	return rc;
}

bool locks_get(const struct locks *t, const struct lock_desc *d,
	       struct lock_desc *out)
{
	struct lock_inode *li = li_find(t, d->ino);
	const struct lk *l;

	if (!li || d->type == LOCK_TYPE_UNLOCK)
		return false;
	l = posix_conflict(li, d);
	if (!l)
		return false;
	*out = (struct lock_desc){ .ino = l->o->ino,
				   .session = l->o->session,
				   .owner = l->o->owner,
				   .start = l->own.start,
				   .end = l->own.end,
				   .pid = l->pid,
				   .kind = LOCK_KIND_POSIX,
				   .type = l->type };
	return true;
}

void locks_drop_owner(struct locks *t, uint64_t ino, uint64_t session,
		      uint64_t owner, enum lock_kind kind)
{
	struct lock_desc k = { .ino = ino, .session = session, .owner = owner };
	struct lk_owner *o = owner_find(t, &k);
	struct lock_inode *li;

	if (!o)
		return;
	li = o->li;
	if (drop_held(t, o, kind, false))
		run_waiters(t, li);
	sess_gc(t, session);
	li_put(t, li);
}

/* Wake @w with @rc and free it. */
static void waiter_end(struct locks *t, struct lk_waiter *w, int rc)
{
	waiter_unlink(t, w);
	t->wake(t->wake_arg, w->arg, rc);
	free(w);
}

unsigned locks_cancel(struct locks *t, uint64_t ino, uint64_t session,
		      uint64_t owner, enum lock_kind kind)
{
	struct lk_sess *s = sess_find(t, session);
	struct lk_waiter *w, *next;
	struct lock_inode *li = li_find(t, ino);
	unsigned n = 0;

	if (!s || !li)
		return 0;
	for (w = s->waiters; w; w = next) {
		next = w->snext;
		if (w->li == li && w->d.owner == owner && w->d.kind == kind) {
			waiter_end(t, w, -EINTR);
			n++;
		}
	}
	sess_gc(t, session);
	li_put(t, li);
	return n;
}

/* Wake every waiter of @session with -EINTR. */
static void cancel_session(struct locks *t, struct lk_sess *s)
{
	while (s->waiters) {
		struct lock_inode *li = s->waiters->li;

		waiter_end(t, s->waiters, -EINTR);
		li_put(t, li);
	}
}

bool locks_session_holds(const struct locks *t, uint64_t session)
{
	return sess_find(t, session) != NULL;
}

uint64_t locks_session_count(const struct locks *t, uint64_t session,
			     uint64_t *waiters)
{
	const struct lk_sess *s = sess_find(t, session);

	if (waiters)
		*waiters = s ? s->nwaiters : 0;
	return s ? s->nlocks : 0;
}

void locks_cancel_session(struct locks *t, uint64_t session)
{
	struct lk_sess *s = sess_find(t, session);

	if (!s)
		return;
	cancel_session(t, s);
	sess_gc(t, session);
}

void locks_drop_session(struct locks *t, uint64_t session)
{
	struct lk_sess *s = sess_find(t, session);

	if (!s)
		return;
	cancel_session(t, s);
	/* Other sessions' waiters granted meanwhile never belong to this
	 * one, so its list only shrinks. */
	while (s->owners) {
		struct lk_owner *o = s->owners;
		struct lock_inode *li = o->li;

		if (drop_held(t, o, LOCK_KIND_POSIX, true))
			run_waiters(t, li);
		li_put(t, li);
	}
	sess_gc(t, session);
}

void locks_drop_inode(struct locks *t, uint64_t ino)
{
	struct lock_inode *li = li_find(t, ino);

	if (!li)
		return;
	while (li->owners) {
		struct lk_owner *o = li->owners;
		uint64_t session = o->session;

		drop_held(t, o, LOCK_KIND_POSIX, true);
		sess_gc(t, session);
	}
	while (li->head) {
		uint64_t session = li->head->d.session;

		waiter_end(t, li->head, -ENOENT);
		sess_gc(t, session);
	}
	li_put(t, li);
}

static int free_inode(void *e, void *arg)
{
	struct lock_inode *li = e;
	struct locks *t = arg;

	while (li->head)
		waiter_end(t, li->head, -ENOLCK);
	while (li->owners)
		drop_held(t, li->owners, LOCK_KIND_POSIX, true);
	free(li);
	return 0;
}

static int free_sess(void *e, void *arg)
{
	(void)arg;
	free(e);
	return 0;
}

void locks_release(struct locks *t)
{
	htab_foreach(&t->inodes, free_inode, t);
	htab_foreach(&t->sessions, free_sess, NULL);
	htab_release(&t->inodes);
	htab_release(&t->owners);
	htab_release(&t->sessions);
	t->nlocks = t->nwaiters = 0;
}
