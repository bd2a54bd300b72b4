/*
 * locks: the master's table of file locks, BSD flock() locks and POSIX
 * byte-range (fcntl) locks, held by (session, lock owner) pairs, with a
 * queue of blocked requests per inode.
 *
 * Locks live in the master's memory only: they are not journaled and a
 * master restart loses them all, as MooseFS does. A session keeps its
 * locks across a reconnect and loses them when it ends or expires.
 *
 * The table knows nothing of requests or connections: a blocked request
 * is an opaque @arg, and the table tells its owner through @wake when it
 * is granted (rc 0) or given up (rc -errno). @wake runs from inside the
 * call that decided it and must not call back into the table.
 *
 * Not thread-safe (the master's loop thread).
 */
#ifndef SWEEPFS_MASTER_LOCKS_H
#define SWEEPFS_MASTER_LOCKS_H

#include <stdbool.h>
#include <stdint.h>

#include "htab.h"
#include "itree.h"

/* What a lock is: fcntl() byte ranges, or flock() on the whole file.
 * The two kinds never conflict with each other, as on Linux. */
enum lock_kind {
	LOCK_KIND_POSIX = 0,
	LOCK_KIND_FLOCK = 1,
};

/* Lock types; for flock, read is LOCK_SH and write LOCK_EX. */
enum lock_type {
	LOCK_TYPE_UNLOCK = 0,
	LOCK_TYPE_READ = 1,
	LOCK_TYPE_WRITE = 2,
};

/* Largest lock offset: the kernel's OFFSET_MAX (INT64_MAX). */
#define LOCK_OFFSET_MAX ((uint64_t)INT64_MAX)

/* A lock, asked for or held. */
struct lock_desc {
	uint64_t ino;
	uint64_t session;
	uint64_t owner; /* lock owner within the session (FUSE's) */
	uint64_t start; /* first byte */
	uint64_t end;	/* last byte, inclusive; flock: ignored */
	uint32_t pid;	/* of the process, as its kernel told it */
	uint8_t kind;	/* enum lock_kind */
	uint8_t type;	/* enum lock_type */
};

typedef void (*locks_wake_fn)(void *wake_arg, void *waiter, int rc);

/*
 * Caps on what one session, and all sessions on one file, may hold: held
 * locks (a split range counts two) and blocked requests. A request that
 * would pass one fails with -ENOLCK, as fcntl(2) does for a full lock
 * table. 0: no cap.
 *
 * @total and @waiters_total cap the table as a whole, heaviest first:
 * past 7/8 of one, only a session holding less than 1/64 of it gets more,
 * so that many sessions each under its own cap cannot fill the table for
 * a light one.
 */
struct locks_limits {
	uint64_t per_session;
	uint64_t per_file;
	uint64_t waiters_per_session;
	uint64_t waiters_per_file;
	uint64_t total;
	uint64_t waiters_total;
};

struct locks {
	struct htab inodes;   /* struct lock_inode by ino: only inodes
			       * with locks or waiters */
	struct htab owners;   /* struct lk_owner by (ino, session, owner):
			       * only owners holding locks */
	struct htab sessions; /* struct lk_sess by session: only those
			       * holding locks or waiting */
	uint64_t nlocks;      /* held, in all (a split range counts two) */
	uint64_t nwaiters;    /* blocked requests */
	struct locks_limits limits;
	uint64_t key; /* secret of the trees' priorities (itree.h) */
	locks_wake_fn wake;
	void *wake_arg;
};

/* An empty table without caps that reports to @wake(@wake_arg, ...). */
void locks_init(struct locks *t, locks_wake_fn wake, void *wake_arg);

/* Set the caps (the next requests are held to them; nothing held now is
 * taken back). */
void locks_set_limits(struct locks *t, const struct locks_limits *l);

/* Free everything; each waiter is woken with -ENOLCK first. */
void locks_release(struct locks *t);

/*
 * Lock or unlock @d (type LOCK_TYPE_UNLOCK unlocks; for POSIX locks a
 * sub-range of what the owner holds may be unlocked, splitting it). A
 * POSIX lock replaces the owner's own locks in its range and merges with
 * adjacent ones of the same type; a flock converts the owner's flock,
 * which (as on Linux) is dropped first even if the new one must wait.
 *
 * Returns 0 when done, -EAGAIN when a lock of another owner conflicts
 * and !@wait, 1 when @wait and the request was queued (@waiter is later
 * passed to wake(), exactly once), or -ENOMEM / -ENOLCK (nothing
 * changed; -ENOLCK also when a cap of locks_set_limits() would be
 * passed). Waiters blocked by locks this call removed are woken.
 *
 * Costs O(log n + k) for the n locks on the file and the k of the owner's
 * own locks the request replaces, cuts or merges (and, while it waits,
 * O(waiters) each time the file's locks change).
 */
int locks_set(struct locks *t, const struct lock_desc *d, bool wait,
	      void *waiter);

/*
 * F_GETLK: the first POSIX lock of another owner that conflicts with @d,
 * copied into *@out (true); false when @d could be taken now.
 */
bool locks_get(const struct locks *t, const struct lock_desc *d,
	       struct lock_desc *out);

/*
 * Drop every lock of (@session, @owner) on @ino of @kind: POSIX on a
 * flush (the process closed a descriptor of the file), flock on the
 * release of the file handle. Woken waiters are granted.
 */
void locks_drop_owner(struct locks *t, uint64_t ino, uint64_t session,
		      uint64_t owner, enum lock_kind kind);

/*
 * Give up the queued requests of (@session, @owner) on @ino of @kind
 * (FUSE interrupted them): each is woken with -EINTR. Returns how many.
 */
unsigned locks_cancel(struct locks *t, uint64_t ino, uint64_t session,
		      uint64_t owner, enum lock_kind kind);

/* Give up every queued request of @session, woken with -EINTR (its
 * connection is gone; the mount asks again on the next). */
void locks_cancel_session(struct locks *t, uint64_t session);

/* @session ended: drop its locks and its queued requests (-EINTR).
 * O(what the session holds and waits for). */
void locks_drop_session(struct locks *t, uint64_t session);

/* Whether @session holds a lock or waits for one. O(1). */
bool locks_session_holds(const struct locks *t, uint64_t session);

/* How many locks @session holds (a split range counts two), and how
 * many of its requests wait, in *@waiters (may be NULL). O(1). */
uint64_t locks_session_count(const struct locks *t, uint64_t session,
			     uint64_t *waiters);

/* Node @ino was freed: drop its locks; its waiters get -ENOENT. */
void locks_drop_inode(struct locks *t, uint64_t ino);

#endif
