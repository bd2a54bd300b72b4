/*
 * The lock table (locks.h).
 *
 * Layout: a hash table keyed by inode holds a struct lock_inode only for
 * inodes that have locks or waiters right now, so files that are never
 * locked cost nothing, not even a field in struct node. Each holds an
 * unordered list of held locks and a FIFO of waiters; both are short in
 * practice (a handful of owners per file), so every operation walks them.
 *
 * Invariants, per inode:
 * - an owner's POSIX locks never overlap each other, and two of the same
 *   type are never adjacent (they would have been merged);
 * - an owner holds at most one flock;
 * - no two held locks of different owners conflict;
 * - a lock_inode with neither locks nor waiters is freed by the end of
 *   every public call (li_put()).
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
#include <stdlib.h>

#include "hash.h"
#include "locks.h"

struct lk {
	struct lk *next;
	struct lock_desc d;
};

struct lk_waiter {
	struct lk_waiter *next;
	struct lock_desc d;
	void *arg; /* the caller's, for wake() */
};

struct lock_inode {
	uint64_t ino; /* first: the table hashes and compares it */
	struct lk *locks;
	struct lk_waiter *waiters; /* oldest first */
};

static uint64_t li_hash(const void *e)
{
	return sw_hash_u64(*(const uint64_t *)e);
}

static bool li_eq(const void *e, const void *key)
{
	return *(const uint64_t *)e == *(const uint64_t *)key;
}

void locks_init(struct locks *t, locks_wake_fn wake, void *wake_arg)
{
	htab_init(&t->inodes, li_hash);
	t->nlocks = 0;
	t->nwaiters = 0;
	t->wake = wake;
	t->wake_arg = wake_arg;
}

static struct lock_inode *li_find(const struct locks *t, uint64_t ino)
{
	return htab_find(&t->inodes, sw_hash_u64(ino), li_eq, &ino);
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
	if (htab_insert(&t->inodes, sw_hash_u64(ino), li) < 0) {
		free(li);
		return NULL;
	}
	return li;
}

/* Free @li if nothing is left in it. */
static void li_put(struct locks *t, struct lock_inode *li)
{
	if (!li || li->locks || li->waiters)
		return;
	htab_remove(&t->inodes, sw_hash_u64(li->ino), li);
	free(li);
}

static bool same_owner(const struct lock_desc *a, const struct lock_desc *b)
{
	return a->session == b->session && a->owner == b->owner;
}

static bool overlap(const struct lock_desc *a, const struct lock_desc *b)
{
	return a->start <= b->end && b->start <= a->end;
}

static bool conflicts(const struct lock_desc *held,
		      const struct lock_desc *want)
{
	if (held->kind != want->kind || same_owner(held, want))
		return false;
	if (held->type != LOCK_TYPE_WRITE && want->type != LOCK_TYPE_WRITE)
		return false;
	return want->kind == LOCK_KIND_FLOCK || overlap(held, want);
}

static struct lk *find_conflict(const struct lock_inode *li,
				const struct lock_desc *d)
{
	for (struct lk *l = li->locks; l; l = l->next)
		if (conflicts(&l->d, d))
			return l;
	return NULL;
}

static uint64_t sat_inc(uint64_t x)
{
	return x == UINT64_MAX ? x : x + 1;
}

/*
 * Make the owner's POSIX locks in [d->start, d->end] exactly @d (none for
 * an unlock): cut, split or drop what overlaps, merge what touches with
 * the same type. The at most two allocations it may need are made first,
 * so that -ENOMEM leaves everything as it was.
 */
static int apply_posix(struct locks *t, struct lock_inode *li,
		       const struct lock_desc *d)
{
	uint64_t s = d->start, e = d->end, ns = s, ne = e;
	struct lk *nl = NULL, *split, **pp, *l;

	if (d->type != LOCK_TYPE_UNLOCK) {
		nl = malloc(sizeof(*nl));
		if (!nl)
			return -ENOMEM;
	}
	/* An unlock or a different type in the middle of a held range
	 * splits it in two. */
	split = malloc(sizeof(*split));
	if (!split) {
		free(nl);
		return -ENOMEM;
	}
	for (pp = &li->locks; (l = *pp);) {
		if (l->d.kind != LOCK_KIND_POSIX || !same_owner(&l->d, d)) {
			pp = &l->next;
			continue;
		}
		if (nl && l->d.type == d->type && l->d.start <= sat_inc(e) &&
		    sat_inc(l->d.end) >= s) {
			/* Same type, overlapping or adjacent: absorb it. */
			if (l->d.start < ns)
				ns = l->d.start;
			if (l->d.end > ne)
				ne = l->d.end;
			*pp = l->next;
			free(l);
			t->nlocks--;
			continue;
		}
		if (!overlap(&l->d, d)) {
			pp = &l->next;
			continue;
		}
		if (l->d.start < s && l->d.end > e) {
			*split = *l;
			split->d.start = e + 1;
			l->d.end = s - 1;
			split->next = l->next;
			l->next = split;
			split = NULL;
			t->nlocks++;
			pp = &l->next->next;
		} else if (l->d.start < s) {
			l->d.end = s - 1;
			pp = &l->next;
		} else if (l->d.end > e) {
			l->d.start = e + 1;
			pp = &l->next;
		} else {
			*pp = l->next;
			free(l);
			t->nlocks--;
		}
	}
	free(split);
	if (nl) {
		nl->d = *d;
		nl->d.start = ns;
		nl->d.end = ne;
		nl->next = li->locks;
		li->locks = nl;
		t->nlocks++;
	}
	return 0;
}

/* Remove the owner's flock; whether it had one. */
static bool remove_flock(struct locks *t, struct lock_inode *li,
			 const struct lock_desc *d)
{
	for (struct lk **pp = &li->locks, *l; (l = *pp); pp = &l->next) {
		if (l->d.kind == LOCK_KIND_FLOCK && same_owner(&l->d, d)) {
			*pp = l->next;
			free(l);
			t->nlocks--;
			return true;
		}
	}
	return false;
}

static int add_flock(struct locks *t, struct lock_inode *li,
		     const struct lock_desc *d)
{
	struct lk *nl = malloc(sizeof(*nl));

	if (!nl)
		return -ENOMEM;
	remove_flock(t, li, d);
	nl->d = *d;
	nl->d.start = 0;
	nl->d.end = LOCK_OFFSET_MAX;
	nl->next = li->locks;
	li->locks = nl;
	t->nlocks++;
	return 0;
}

static int apply(struct locks *t, struct lock_inode *li,
		 const struct lock_desc *d)
{
	if (d->kind == LOCK_KIND_POSIX)
		return apply_posix(t, li, d);
	if (d->type == LOCK_TYPE_UNLOCK) {
		remove_flock(t, li, d);
		return 0;
	}
	return add_flock(t, li, d);
}

/* Grant, in queue order, every waiter on @li that no longer conflicts. */
static void run_waiters(struct locks *t, struct lock_inode *li)
{
	struct lk_waiter **pp = &li->waiters, *w;

	while ((w = *pp)) {
		int rc;

		if (find_conflict(li, &w->d)) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		t->nwaiters--;
		rc = apply(t, li, &w->d);
		/* apply() fails only for memory: the request fails with
		 * ENOLCK, as fcntl(2) documents for a full lock table. */
		t->wake(t->wake_arg, w->arg, rc < 0 ? -ENOLCK : 0);
		free(w);
	}
}

static int enqueue(struct locks *t, struct lock_inode *li,
		   const struct lock_desc *d, void *arg)
{
	struct lk_waiter *w = malloc(sizeof(*w)), **pp;

	if (!w)
		return -ENOMEM;
	w->d = *d;
	w->arg = arg;
	w->next = NULL;
	for (pp = &li->waiters; *pp; pp = &(*pp)->next)
		;
	*pp = w;
	t->nwaiters++;
	return 1;
}

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
		struct lk *old = NULL;

		for (struct lk *l = li->locks; l && !old; l = l->next)
			if (l->d.kind == LOCK_KIND_FLOCK &&
			    same_owner(&l->d, d))
				old = l;
		if (old && old->d.type == d->type)
			goto out;
		/* Linux drops the old flock before a conversion waits:
		 * two holders of LOCK_SH both asking for LOCK_EX would
		 * otherwise wait for each other for ever. */
		if (old) {
			remove_flock(t, li, d);
			run_waiters(t, li);
		}
		if (d->type == LOCK_TYPE_UNLOCK)
			goto out;
	}
	if (d->type != LOCK_TYPE_UNLOCK && find_conflict(li, d)) {
		rc = wait ? enqueue(t, li, d, waiter) : -EAGAIN;
		goto out;
	}
	rc = apply(t, li, d);
	if (rc == 0 && li->waiters)
		run_waiters(t, li);
out:
	li_put(t, li);
	return rc;
}

bool locks_get(const struct locks *t, const struct lock_desc *d,
	       struct lock_desc *out)
{
	const struct lock_inode *li = li_find(t, d->ino);
	const struct lk *l;

	if (!li || d->type == LOCK_TYPE_UNLOCK)
		return false;
	l = find_conflict(li, d);
	if (!l)
		return false;
	*out = l->d;
	return true;
}

/* Drop the locks on @li that @match accepts; whether any went. */
static bool drop_locks(struct locks *t, struct lock_inode *li,
		       bool (*match)(const struct lock_desc *, const void *),
		       const void *key)
{
	bool any = false;

	for (struct lk **pp = &li->locks, *l; (l = *pp);) {
		if (match(&l->d, key)) {
			*pp = l->next;
			free(l);
			t->nlocks--;
			any = true;
		} else {
			pp = &l->next;
		}
	}
	return any;
}

/* Wake the waiters on @li that @match accepts with @rc; how many. */
static unsigned drop_waiters(struct locks *t, struct lock_inode *li,
			     bool (*match)(const struct lock_desc *,
					   const void *),
			     const void *key, int rc)
{
	unsigned n = 0;

	for (struct lk_waiter **pp = &li->waiters, *w; (w = *pp);) {
		if (match(&w->d, key)) {
			*pp = w->next;
			t->nwaiters--;
			t->wake(t->wake_arg, w->arg, rc);
			free(w);
			n++;
		} else {
			pp = &w->next;
		}
	}
	return n;
}

static bool match_owner_kind(const struct lock_desc *d, const void *key)
{
	const struct lock_desc *k = key;

	return d->kind == k->kind && same_owner(d, k);
}

static bool match_session(const struct lock_desc *d, const void *key)
{
	return d->session == *(const uint64_t *)key;
}

static bool match_all(const struct lock_desc *d, const void *key)
{
	(void)d;
	(void)key;
	return true;
}

void locks_drop_owner(struct locks *t, uint64_t ino, uint64_t session,
		      uint64_t owner, enum lock_kind kind)
{
	struct lock_inode *li = li_find(t, ino);
	struct lock_desc k = { .session = session,
			       .owner = owner,
			       .kind = (uint8_t)kind };

	if (!li)
		return;
	if (drop_locks(t, li, match_owner_kind, &k))
		run_waiters(t, li);
	li_put(t, li);
}

unsigned locks_cancel(struct locks *t, uint64_t ino, uint64_t session,
		      uint64_t owner, enum lock_kind kind)
{
	struct lock_inode *li = li_find(t, ino);
	struct lock_desc k = { .session = session,
			       .owner = owner,
			       .kind = (uint8_t)kind };
	unsigned n;

	if (!li)
		return 0;
	n = drop_waiters(t, li, match_owner_kind, &k, -EINTR);
	li_put(t, li);
	return n;
}

struct session_walk {
	struct locks *t;
	uint64_t session;
	bool locks_too;
	struct lock_inode **empty; /* to free after the walk */
	size_t nempty, cap;
};

static int walk_session(void *e, void *arg)
{
	struct lock_inode *li = e;
	struct session_walk *sw = arg;

	drop_waiters(sw->t, li, match_session, &sw->session, -EINTR);
	if (sw->locks_too && drop_locks(sw->t, li, match_session, &sw->session))
		run_waiters(sw->t, li);
	if (li->locks || li->waiters)
		return 0;
	/* The table must not change during the walk. */
	if (sw->nempty == sw->cap) {
		size_t cap = sw->cap ? sw->cap * 2 : 16;
		struct lock_inode **v = realloc(sw->empty, cap * sizeof(*v));

		if (!v)
			return 0; /* freed when next touched */
		sw->empty = v;
		sw->cap = cap;
	}
	sw->empty[sw->nempty++] = li;
	return 0;
}

static void drop_session(struct locks *t, uint64_t session, bool locks_too)
{
	struct session_walk sw = { .t = t,
				   .session = session,
				   .locks_too = locks_too };

	if (htab_count(&t->inodes) == 0)
		return;
	htab_foreach(&t->inodes, walk_session, &sw);
	for (size_t i = 0; i < sw.nempty; i++)
		li_put(t, sw.empty[i]);
	free(sw.empty);
}

void locks_cancel_session(struct locks *t, uint64_t session)
{
	if (t->nwaiters)
		drop_session(t, session, false);
}

void locks_drop_session(struct locks *t, uint64_t session)
{
	drop_session(t, session, true);
}

void locks_drop_inode(struct locks *t, uint64_t ino)
{
	struct lock_inode *li;

	if (htab_count(&t->inodes) == 0)
		return;
	li = li_find(t, ino);
	if (!li)
		return;
	drop_locks(t, li, match_all, NULL);
	drop_waiters(t, li, match_all, NULL, -ENOENT);
	li_put(t, li);
}

static int free_inode(void *e, void *arg)
{
	struct lock_inode *li = e;
	struct locks *t = arg;

	drop_locks(t, li, match_all, NULL);
	drop_waiters(t, li, match_all, NULL, -ENOLCK);
	free(li);
	return 0;
}

void locks_release(struct locks *t)
{
	htab_foreach(&t->inodes, free_inode, t);
	htab_release(&t->inodes);
	t->nlocks = t->nwaiters = 0;
}
