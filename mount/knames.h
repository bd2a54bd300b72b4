/*
 * The names a mount hands the kernel for long in the directories it holds
 * (deleg.h), and how the kernel is made to forget them when a delegation
 * ends: knames.c says why each way. deleg.c decides what is held and when
 * it goes; this is what the kernel was told, and telling it to forget.
 */
#ifndef SWEEPFS_MOUNT_KNAMES_H
#define SWEEPFS_MOUNT_KNAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frame.h"

/*
 * What the kernel may keep a name in a held directory for: long enough
 * that rm -rf, which unlinks long after it listed, needs no lookup. They
 * are forgotten when the delegation ends; the bound is for the one that
 * might slip through (a lookup answered while the recall is being
 * handled, a name in use).
 */
#define KNAMES_TIMEOUT (SW_DELEG_NAME_TTL_MS / 1000.0)

/* Names a held directory keeps, to expire each; past this, all at once. */
#define KNAMES_FEW 16u

/* The names one held directory handed out for long. */
struct klong {
	char *v[KNAMES_FEW];
	unsigned n;
	bool many; /* more than KNAMES_FEW of them (or out of memory) */
};

/* @name was handed out for long: kept (once), or the list is many. */
void klong_add(struct klong *l, const char *name);
void klong_clear(struct klong *l);

/* A directory's entry in the kernel: @name in @up; NULL name: unknown. */
struct kplace {
	uint64_t up;
	char *name;
};

/* Set @p to (@up, @name) (@name NULL: clear); false out of memory,
 * cleared then. */
bool kplace_set(struct kplace *p, uint64_t up, const char *name);
/* Whether @p is (@up, @name). */
bool kplace_is(const struct kplace *p, uint64_t up, const char *name);
/* What was (@up, @name) is (@nup, @nname) (NULL: gone); @swap: and the
 * other way round (RENAME_EXCHANGE). @p follows if it was either. */
void kplace_moved(struct kplace *p, uint64_t up, const char *name, uint64_t nup,
		  const char *nname, bool swap);

/* A held directory given back: what the kernel was given for long there
 * (knames_forget() frees it). */
struct kgone {
	uint64_t ino;
	struct kplace at;
	struct klong names;
	bool removed; /* the master recalled it for a removal of its tree */
	uint64_t gen; /* ... on the connection of knames_gen() then */
};

/*
 * How the kernel is told, by directory and name as the master numbers
 * them (the mount's callbacks translate; tests count). Each returns 0, or
 * -errno (-ENOENT: the kernel had nothing there).
 *   expire: look @name up again before its next use (FUSE_LL_EXPIRE_ONLY;
 *           drop it where the kernel cannot expire);
 *   drop:   invalidate @name now, and what is cached below it;
 *   all:    every name of the mount to be looked up again (the epoch
 *           notice, FUSE_NOTIFY_INC_EPOCH); -ENOSYS without it. It takes
 *           no lock in the kernel: it may go out from a request's path.
 *   has_all: whether the kernel has that notice, as far as known (at
 *           FUSE init, or from one that failed): names are left to a
 *           removal only where it can take them back.
 */
struct knames_ops {
	int (*expire)(void *arg, uint64_t dir, const char *name);
	int (*drop)(void *arg, uint64_t dir, const char *name);
	int (*all)(void *arg);
	bool (*has_all)(void *arg);
};

struct knames_stats {
	uint64_t notices; /* kernel notices that took */
	uint64_t left;	  /* directories left to go with their tree */
};

struct knames;

/* 0 with *@out, or -ENOMEM. @ops and @arg outlive it. */
int knames_new(const struct knames_ops *ops, void *arg, struct knames **out);
void knames_free(struct knames *kn);

/*
 * Directory @ino goes to the kernel as @name in @up (a lookup, mkdir or
 * readdirplus reply; call before the reply): its place is kept. Any
 * thread; O(1).
 */
void knames_note_dir(struct knames *kn, uint64_t up, const char *name,
		     uint64_t ino);

/*
 * The connection to the master was lost: so were the watches it kept for
 * directories given back as removed (knames.c); if any of their names may
 * be cached still, every name of the mount is forgotten now (ops->all).
 */
void knames_reconnected(struct knames *kn);

/* Which connection to the master this is (knames_reconnected() counts):
 * a directory told removed on another is not left (the master that
 * would watch it lost that watch with the connection). */
uint64_t knames_gen(struct knames *kn);

/* A copy of @ino's place into @at (which it frees first), if known. */
bool knames_place(struct knames *kn, uint64_t ino, struct kplace *at);

/* The mount renamed (@up, @name) to (@nup, @nname): places follow. */
void knames_renamed(struct knames *kn, uint64_t up, const char *name,
		    uint64_t nup, const char *nname, bool swap);

/*
 * The kernel forgets what it was given for long in the @n directories
 * @gv given back, and @gv's names and places are freed. The thread that
 * gives back only (never a request's path: ops->expire and ops->drop take
 * the kernel's directory locks).
 */
void knames_forget(struct knames *kn, struct kgone *gv, size_t n);

void knames_stats(struct knames *kn, struct knames_stats *st);

#endif
