/*
 * Directory watches: which sessions cache a directory's listing, so that
 * a change to it by anyone else reaches them as an invalidation.
 *
 * A session watches a directory from the moment it reads it or looks a
 * name up in it until the directory goes, the session goes (or loses its
 * connection: a mount that comes back forgets its listings), or the
 * session watches too many directories (the least recently used watch
 * is dropped, with an invalidation of the whole directory, so the client
 * never keeps a listing nobody will invalidate). Every change by another
 * session reaches every watcher as an invalidation of the name changed:
 * the kernel there may hold any name of the directory for entry_timeout,
 * so one invalidation is not the last it needs. The changing session
 * applies its own changes to its cache.
 *
 * A directory another session watches is not delegated (deleg.h).
 */
#ifndef SWEEPFS_MASTER_WATCH_H
#define SWEEPFS_MASTER_WATCH_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>

struct master;
struct session;
struct node;

struct watch {
	struct session *s;
	struct node *dir;
	struct watch *dnext, *dprev; /* the directory's watchers */
	struct watch *snext, *sprev; /* the session's watches, newest first */
	int64_t used; /* mono ns of the session's last lookup or listing */
};

/* Watches per session before the oldest is dropped. */
#define WATCH_MAX_PER_SESSION 65536

/*
 * A watch unused for longer than its session's kernel keeps names
 * (Hello.cache_ms), plus this margin, may be dropped (with an
 * invalidation of the whole directory) when another session wants the
 * directory delegated: the kernel's entries from it are gone by then,
 * and the mount drops its cached listing when told.
 */
#define WATCH_IDLE_MARGIN_NS (100 * 1000000LL)

/* @s caches @dir's listing or names in it from now on. */
void watch_add(struct master *m, struct session *s, struct node *dir);

/*
 * @s may keep names of @dir for @ns from now, whatever it does meanwhile:
 * its watch counts as used until then (and blocks others' delegations of
 * @dir: watch_others()). For a holder that gave @dir back without its
 * kernel forgetting them (deleg.c). False out of memory (not watched).
 */
bool watch_hold(struct master *m, struct session *s, struct node *dir,
		int64_t ns);

/*
 * @dir's listing changed (@name, @len: the entry; may be NULL) through
 * session @by (NULL: the master itself): tell every other watcher.
 */
void watch_changed(struct master *m, struct node *dir, const void *name,
		   size_t len, const struct session *by);

/*
 * Whether sessions other than @s watch @dir; those whose watch has been
 * idle WATCH_IDLE_NS lose it (told, as when evicted) and do not count.
 */
bool watch_others(struct master *m, struct node *dir, const struct session *s);

/* @s is going: drop its watches. */
void watch_drop_session(struct master *m, struct session *s);

/* ns->dir_gone hook: @dir is being freed; tell and drop its watchers. */
void watch_dir_gone(void *arg, struct node *dir);

#endif
