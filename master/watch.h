/*
 * Directory watches: which sessions cache a directory's listing, so that
 * a change to it by anyone else reaches them as an invalidation.
 *
 * A session watches a directory from the moment it reads it (or creates
 * it) until the directory changes under another session, the directory
 * goes, the session goes, or the session watches too many directories
 * (the oldest watch is dropped, with an invalidation, so the client never
 * keeps a listing nobody will invalidate). The changing session itself
 * keeps its watch: the mount applies its own changes to its cache.
 */
#ifndef SWEEPFS_MASTER_WATCH_H
#define SWEEPFS_MASTER_WATCH_H

#include <stddef.h>

struct master;
struct session;
struct node;

struct watch {
	struct session *s;
	struct node *dir;
	struct watch *dnext, *dprev; /* the directory's watchers */
	struct watch *snext, *sprev; /* the session's watches, newest first */
};

/* Watches per session before the oldest is dropped. */
#define WATCH_MAX_PER_SESSION 65536

/* @s caches @dir's listing from now on. */
void watch_add(struct master *m, struct session *s, struct node *dir);

/*
 * @dir's listing changed (@name, @len: the entry; may be NULL) through
 * session @by (NULL: the master itself): tell every other watcher.
 */
void watch_changed(struct master *m, struct node *dir, const void *name,
		   size_t len, const struct session *by);

/* @s is going: drop its watches. */
void watch_drop_session(struct master *m, struct session *s);

/* ns->dir_gone hook: @dir is being freed; tell and drop its watchers. */
void watch_dir_gone(void *arg, struct node *dir);

#endif
