/*
 * The mount's cache of directory listings (DESIGN, "Readdir cursor
 * cache", the mount's half).
 *
 * Per directory: the entries fetched from the master, in cookie order,
 * from some cookie on (from the start when `from_head`), up to the end
 * when `eof`. What the kernel has consumed stays until this mount removes
 * the name or the master says another client changed the directory (the
 * whole listing then goes). So a reader that closes the directory and
 * opens it again, as Go's os.RemoveAll does every 1024 names, reads on
 * from the cache and not from the master; and a LOOKUP of a listed name,
 * or of a name a complete listing lacks, needs no round trip.
 *
 * Bounded: past `max_entries` in all, whole directories are dropped,
 * least recently used first; a whole listing of a quarter of that or
 * more (65,536 at most) is instead summarized, its entries replaced by a
 * filter of its names of a fixed size (64 bits per entry of the bound, up
 * to 16 MiB; at most four at once),
 * which still tells absent names (dircache_lookup()) but hands out no
 * pages, counts (dircache_live()) nor entries but those this mount made
 * and the master has not answered yet. So a directory this mount fills
 * with millions of files costs it a bounded amount, and creating a new
 * name there under a delegation needs no round trip still. A summary
 * lasts until the directory is invalidated or dropped (dircache_drop()),
 * or a newer one needs its place: a listing read from the start does not
 * replace it (dircache_append() refuses the pages). Thread-safe (one mutex); entries are copied
 * out, never handed out by reference.
 */
#ifndef SWEEPFS_MOUNT_DIRCACHE_H
#define SWEEPFS_MOUNT_DIRCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sweepfs.pb-c.h"

struct dircache;

/* An entry as handed out. */
struct dc_entry {
	uint64_t cookie;
	uint64_t ino;
	uint8_t type; /* DT_* */
	bool has_attr;
	int64_t attr_at;    /* mono ns when the attributes were fetched */
	Sweepfs__Attr attr; /* valid when has_attr */
	char name[256];
};

int dircache_new(size_t max_entries, struct dircache **out);
void dircache_free(struct dircache *dc);

/*
 * Up to @max entries of @dir after @cookie (0: from the start) into @out;
 * returns how many. *@state says what comes next: DC_MORE (ask again
 * after the last one), DC_EOF (that was the end), DC_FETCH (the cache
 * ends here: fetch after *@fetch_after and append), DC_MISS (the cache
 * does not cover @cookie at all).
 */
enum dc_state { DC_MORE, DC_EOF, DC_FETCH, DC_MISS };

size_t dircache_read(struct dircache *dc, uint64_t dir, uint64_t cookie,
		     struct dc_entry *out, size_t max, enum dc_state *state,
		     uint64_t *fetch_after);

/*
 * A page the master sent for @dir after @after (entries packed as in
 * ReaddirReply, attributes when @r has them). Cached only if it continues
 * the cached listing exactly (or starts it at 0): returns whether it was.
 */
bool dircache_append(struct dircache *dc, uint64_t dir, uint64_t after,
		     const Sweepfs__ReaddirReply *r);

/* What dircache_lookup() knows. */
enum dc_lookup { DC_UNKNOWN, DC_FOUND, DC_ABSENT };

/*
 * @name in @dir: DC_FOUND with the entry in *@e, DC_ABSENT if the cached
 * listing is complete and has no such name, else DC_UNKNOWN.
 */
enum dc_lookup dircache_lookup(struct dircache *dc, uint64_t dir,
			       const char *name, struct dc_entry *e);

/* This mount removed @name from @dir. */
/* Entries in @dir's listing if it is whole, else -1. */
int64_t dircache_live(struct dircache *dc, uint64_t dir);

void dircache_remove(struct dircache *dc, uint64_t dir, const char *name);

/*
 * This mount made @name in @dir with @cookie (the highest in the
 * directory); added if the listing is cached to its end. @attr may be
 * NULL.
 */
void dircache_add(struct dircache *dc, uint64_t dir, const char *name,
		  uint64_t cookie, uint64_t ino, uint8_t type,
		  const Sweepfs__Attr *attr);

/*
 * This mount renamed @name in @dir to @newname in @newdir, which the
 * master put there with @cookie: the entry moves where both listings are
 * known (dircache_add()), without its attributes (the rename changed its
 * ctime, and attributes expired before must not come back fresh); where
 * the old one is not known, both listings are dropped.
 */
void dircache_rename(struct dircache *dc, uint64_t dir, const char *name,
		     uint64_t newdir, const char *newname, uint64_t cookie);

/*
 * This mount made @name in @dir under a delegation and has not yet heard
 * its cookie from the master: added at the end of a whole listing with a
 * cookie of DC_MADE_BASE or more, which it returns (0: not added, the
 * listing is dropped). Until every such entry has its real cookie
 * (dircache_made_cookie()), reads of the listing go to the master.
 */
#define DC_MADE_BASE (UINT64_C(1) << 62)

uint64_t dircache_add_made(struct dircache *dc, uint64_t dir, const char *name,
			   uint64_t ino, uint8_t type,
			   const Sweepfs__Attr *attr);

/* The master's @cookie for the entry added with @made, and its node's
 * @handle (Attr.handle; 0: none said) for its attributes; the cookies of
 * one directory come in the order the entries were made. */
void dircache_made_cookie(struct dircache *dc, uint64_t dir, uint64_t made,
			  uint64_t cookie, uint64_t handle);

/* This mount made directory @dir: its listing is complete and empty. */
void dircache_new_empty(struct dircache *dc, uint64_t dir);

/*
 * The attributes @dir's entries came with are no longer to be handed out
 * (the names still are): this mount gave the directory back, and what
 * it changed meanwhile the master knows better. O(1) whatever the
 * listing's size: a recall waits for it.
 */
void dircache_expire_attrs(struct dircache *dc, uint64_t dir);
/* The same for every entry cached now: the kernel was made to forget
 * every name, and with them inodes whose newer attributes only it had. */
void dircache_expire_all_attrs(struct dircache *dc);

/* Forget @dir's listing (another client changed it), or everything. */
void dircache_drop(struct dircache *dc, uint64_t dir);
void dircache_clear(struct dircache *dc);

/* Entries cached, and directories summarized, for statistics and
 * tests. */
size_t dircache_entries(struct dircache *dc);
size_t dircache_summaries(struct dircache *dc);

/* Entries walked over one by one so far (compactions, dropped listings),
 * for tests that hold what must not walk a listing. */
uint64_t dircache_visits(struct dircache *dc);

#endif
