/*
 * Directory watches (watch.h): who caches which listing, and the
 * invalidations a change sends them. An invalidation is numbered and
 * sent by the server, reached through the request layer's hooks
 * (req_inval_sent(), req_notify()): this file names nothing above it.
 */
#include <stdlib.h>

#include "context.h"
#include "req.h"
#include "sessrec.h"
#include "util.h"
#include "watch.h"

static void unlink_watch(struct watch *w)
{
	struct dir *d = w->dir->u.dir;

	if (w->dprev)
		w->dprev->dnext = w->dnext;
	else
		d->watchers = w->dnext;
	if (w->dnext)
		w->dnext->dprev = w->dprev;
	if (w->sprev)
		w->sprev->snext = w->snext;
	else
		w->s->watches = w->snext;
	if (w->snext)
		w->snext->sprev = w->sprev;
	else
		w->s->watches_tail = w->sprev;
	w->s->nwatches--;
	free(w);
}

static void send_inval(struct master *m, struct session *s, uint64_t dir,
		       const void *name, size_t len)
{
	Sweepfs__InvalNotify note = SWEEPFS__INVAL_NOTIFY__INIT;
	Sweepfs__Inval item = SWEEPFS__INVAL__INIT;
	Sweepfs__Inval *items[1] = { &item };

	/* A detached session drops every listing when it reconnects. */
	if (!s->conn)
		return;
	item.dir = dir;
	if (name) {
		item.has_name = 1;
		item.name.data = (uint8_t *)name;
		item.name.len = len;
	}
	note.n_items = 1;
	note.items = items;
	note.has_seq = 1;
	note.seq = req_inval_sent(m, s);
	if (s->inval_all)
		return; /* behind: one of everything later (server.c) */
	req_notify(m, s->conn, SW_MSG_INVAL, &note.base);
	s->ctr.invalidations++;
}

void watch_add(struct master *m, struct session *s, struct node *dir)
{
	struct dir *d = dir->u.dir;
	struct watch *w;

	for (w = d->watchers; w; w = w->dnext) {
		if (w->s != s)
			continue;
		/* Not before a hold's end (watch_hold()). */
		w->used = SW_MAX(w->used, sw_mono_ns());
		/* Used again: the newest of the session's, last to go. */
		if (w != s->watches) {
			w->sprev->snext = w->snext;
			if (w->snext)
				w->snext->sprev = w->sprev;
			else
				s->watches_tail = w->sprev;
			w->sprev = NULL;
			w->snext = s->watches;
			s->watches->sprev = w;
			s->watches = w;
		}
		return;
	}
	if (s->nwatches >= WATCH_MAX_PER_SESSION && s->watches_tail) {
		struct watch *old = s->watches_tail;
		int64_t now = sw_mono_ns();

		/* Not a hold (watch_hold()): its kernel's names are not
		 * dropped by a whole directory's invalidation. If all are
		 * (a minute of 65,536 removals), the oldest goes. */
		while (old->sprev && old->used > now)
			old = old->sprev;
		if (old->used > now)
			old = s->watches_tail;
		send_inval(m, s, old->dir->ino, NULL, 0);
		unlink_watch(old);
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return; /* not watched: the mount is not told it is */
	w->s = s;
	w->dir = dir;
	w->used = sw_mono_ns();
	w->dnext = d->watchers;
	if (d->watchers)
		d->watchers->dprev = w;
	d->watchers = w;
	w->snext = s->watches;
	if (s->watches)
		s->watches->sprev = w;
	else
		s->watches_tail = w;
	s->watches = w;
	s->nwatches++;
}

bool watch_hold(struct master *m, struct session *s, struct node *dir,
		int64_t ns)
{
	watch_add(m, s, dir);
	for (struct watch *w = dir->u.dir->watchers; w; w = w->dnext) {
		if (w->s == s) {
			w->used = SW_MAX(w->used, sw_mono_ns() + ns);
			return true;
		}
	}
	return false;
}

void watch_changed(struct master *m, struct node *dir, const void *name,
		   size_t len, const struct session *by)
{
	struct watch *w, *next;

	for (w = dir->u.dir->watchers; w; w = next) {
		next = w->dnext;
		if (w->s == by)
			continue;
		/* The watch stays: the kernel there may hold other names of
		 * this directory, each to be told of when it changes. */
		send_inval(m, w->s, dir->ino, name, len);
	}
}

bool watch_others(struct master *m, struct node *dir, const struct session *s)
{
	int64_t now = sw_mono_ns();
	struct watch *w, *next;
	bool others = false;

	for (w = dir->u.dir->watchers; w; w = next) {
		next = w->dnext;
		if (w->s == s)
			continue;
		if (now - w->used <=
		    (int64_t)w->s->cache_ms * 1000000 + WATCH_IDLE_MARGIN_NS) {
			others = true;
			continue;
		}
		send_inval(m, w->s, dir->ino, NULL, 0);
		unlink_watch(w);
	}
	return others;
}

void watch_drop_session(struct master *m, struct session *s)
{
	while (s->watches)
		unlink_watch(s->watches);
}

void watch_dir_gone(void *arg, struct node *dir)
{
	while (dir->u.dir->watchers) {
		struct watch *w = dir->u.dir->watchers;

		send_inval(arg, w->s, dir->ino, NULL, 0);
		unlink_watch(w);
	}
}
