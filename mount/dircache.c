/*
 * Layout: directories in a hash table by inode, and on an LRU list. A
 * directory's entries are an array of pointers in cookie order (removed
 * entries stay, marked, until the array is compacted, so that positions
 * found by cookie stay right) and a chained hash of the live ones by
 * name. A listing is cached only from the directory's first entry on, so
 * any cookie up to the last cached one is covered.
 *
 * Nothing that a delegation's end or an invalidation does walks a
 * listing: the attributes a directory's entries came with are expired
 * at once by a stamp on the directory (`attrs_after`), which an entry
 * older than it fails when it is read, as the stamp on the whole cache
 * does for every directory. A recall, which an rmr of the tree this
 * mount made waits for, so costs the same at 17 million cached entries
 * as at ten. What walks a listing (compaction, a dropped directory) is
 * counted in `visits`, for the tests that hold this.
 *
 * A whole listing too big for the cache (the directory a tool fills
 * with millions of files through this mount) is not dropped but
 * summarized: its entries give way to a Bloom filter of its names, of a
 * size fixed by the cache's bound whatever the directory's (`bloom`). So a name the filter
 * lacks is known absent, as from the listing, and creating it under a
 * delegation still needs no round trip; a name it may have is asked of
 * the master, whom every request finds with this mount's queued
 * operations sent before it (before_send_cb()). Kept exactly beside the
 * filter: what this mount made whose cookies the master has not given
 * yet (until it has; a queue's worth). A summary is a listing's
 * stand-in: the same invalidations drop it, and it hands out no pages.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "dircache.h"
#include "entries.h"
#include "hash.h"
#include "util.h"

#define DIR_SLOTS 4096u

/*
 * A summary's filter: 64 bits per entry the cache may hold, a power of
 * two between 2^16 and 2^27 (16 MiB, for the default 2,000,000 entries),
 * probed 4 times a name: about 3% false positives at 17 million names in
 * the largest, 0.2% at 5 million; at most SUMMARIES_MAX at once. A
 * listing smaller than SUMMARY_MIN (or a quarter of the cache) is
 * dropped, as before: fetching it again costs less than a filter.
 */
#define SUMMARY_BITS_MIN (UINT64_C(1) << 16)
#define SUMMARY_BITS_MAX (UINT64_C(1) << 27)
#define SUMMARY_PROBES 4
#define SUMMARIES_MAX 4u
#define SUMMARY_MIN 65536u

struct dent {
	uint64_t cookie;
	uint64_t ino;
	struct dent *hnext; /* name hash chain */
	int64_t attr_at;
	Sweepfs__Attr attr; /* has_attr: attr.ino != 0 */
	uint8_t type;
	uint8_t namelen;
	bool removed;
	char name[]; /* NUL-terminated */
};

struct cdir {
	uint64_t ino;
	struct cdir *next;	    /* hash chain */
	struct cdir *lprev, *lnext; /* LRU, most recent first */
	struct dent **v;	    /* cookie order */
	size_t n, cap;
	size_t live;
	uint64_t last; /* cookie of the last entry fetched, removed or not */
	struct dent **buckets;
	size_t nbuckets;
	bool from_head;
	bool eof;
	/* Entries this mount made under a delegation whose cookies the
	 * master has not given yet: the last ones, with cookies from
	 * DC_MADE_BASE up (removed ones included). */
	size_t nmade;
	/* Attributes fetched before this (mono ns) count as expired. */
	int64_t attrs_after;
	/* A summary (see the top): every name the directory may have, in
	 * nbloom bits; then from_head and eof are false, and the array
	 * holds only the entries made here, unanswered or answered and
	 * removed (to compact). */
	uint64_t *bloom;
	uint64_t nbloom; /* its bits */
};

struct dircache {
	pthread_mutex_t mu;
	struct cdir *slots[DIR_SLOTS];
	struct cdir *lru_head, *lru_tail;
	size_t entries;	    /* in all arrays, removed ones included */
	uint64_t made_next; /* never reused: a late answer finds no other */
	size_t max_entries;
	int64_t attrs_after; /* older attributes count as expired */
	size_t visits;	     /* entries walked over one by one, ever */
	size_t summaries;    /* directories with a bloom */
	size_t summary_min;  /* live entries a listing needs to get one */
	uint64_t bloom_bits; /* a bloom's size, a power of two */
};

/* ---- directories ---------------------------------------------------- */

static struct cdir **dir_slot(struct dircache *dc, uint64_t ino)
{
	struct cdir **pp = &dc->slots[sw_hash_u64(ino) % DIR_SLOTS];

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

static void lru_unlink(struct dircache *dc, struct cdir *d)
{
	if (d->lprev)
		d->lprev->lnext = d->lnext;
	else
		dc->lru_head = d->lnext;
	if (d->lnext)
		d->lnext->lprev = d->lprev;
	else
		dc->lru_tail = d->lprev;
	d->lprev = d->lnext = NULL;
}

static void lru_front(struct dircache *dc, struct cdir *d)
{
	if (dc->lru_head == d)
		return;
	if (d->lprev || d->lnext || dc->lru_tail == d)
		lru_unlink(dc, d);
	d->lnext = dc->lru_head;
	if (dc->lru_head)
		dc->lru_head->lprev = d;
	else
		dc->lru_tail = d;
	dc->lru_head = d;
}

static void summary_free(struct dircache *dc, struct cdir *d)
{
	if (d->bloom) {
		free(d->bloom);
		d->bloom = NULL;
		dc->summaries--;
	}
}

static void dir_free(struct dircache *dc, struct cdir *d)
{
	struct cdir **pp = dir_slot(dc, d->ino);

	summary_free(dc, d);
	*pp = d->next;
	lru_unlink(dc, d);
	for (size_t i = 0; i < d->n; i++)
		free(d->v[i]);
	dc->visits += d->n;
	dc->entries -= d->n;
	free(d->v);
	free(d->buckets);
	free(d);
}

static struct cdir *dir_get(struct dircache *dc, uint64_t ino, bool create)
{
	struct cdir **pp = dir_slot(dc, ino);

	if (!*pp && create) {
		*pp = calloc(1, sizeof(**pp));
		if (!*pp)
			return NULL;
		(*pp)->ino = ino;
	}
	if (*pp)
		lru_front(dc, *pp);
	return *pp;
}

/* ---- entries -------------------------------------------------------- */

static size_t bucket(const struct cdir *d, const char *name, size_t len)
{
	return sw_hash_bytes(name, len) & (d->nbuckets - 1);
}

static struct dent *name_find(const struct cdir *d, const char *name,
			      size_t len)
{
	if (!d->nbuckets)
		return NULL;
	for (struct dent *e = d->buckets[bucket(d, name, len)]; e; e = e->hnext)
		if (e->namelen == len && !memcmp(e->name, name, len))
			return e;
	return NULL;
}

static void name_unhash(struct cdir *d, struct dent *e)
{
	struct dent **pp = &d->buckets[bucket(d, e->name, e->namelen)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
}

static int name_hash(struct cdir *d, struct dent *e)
{
	size_t b;

	if (d->live + 1 > d->nbuckets) {
		size_t nb = d->nbuckets ? d->nbuckets * 2 : 16;
		struct dent **v = calloc(nb, sizeof(*v));

		if (!v)
			return -ENOMEM;
		for (size_t i = 0; i < d->nbuckets; i++) {
			while (d->buckets[i]) {
				struct dent *x = d->buckets[i];

				d->buckets[i] = x->hnext;
				x->hnext =
					v[sw_hash_bytes(x->name, x->namelen) &
					  (nb - 1)];
				v[sw_hash_bytes(x->name, x->namelen) &
				  (nb - 1)] = x;
			}
		}
		free(d->buckets);
		d->buckets = v;
		d->nbuckets = nb;
	}
	b = bucket(d, e->name, e->namelen);
	e->hnext = d->buckets[b];
	d->buckets[b] = e;
	return 0;
}

/* Drop removed entries from the array once they are half of it. */
static void compact(struct dircache *dc, struct cdir *d)
{
	size_t k = 0;

	if (d->n < 64 || d->live * 2 > d->n)
		return;
	dc->visits += d->n;
	for (size_t i = 0; i < d->n; i++) {
		if (d->v[i]->removed) {
			if (d->v[i]->cookie >= DC_MADE_BASE)
				d->nmade--;
			free(d->v[i]);
			dc->entries--;
		} else {
			d->v[k++] = d->v[i];
		}
	}
	d->n = k;
}

static int push(struct dircache *dc, struct cdir *d, const char *name,
		size_t len, uint64_t cookie, uint64_t ino, uint8_t type,
		const Sweepfs__Attr *attr, int64_t now)
{
	struct dent *e;

	if (sw_grow(&d->v, &d->cap, d->n + 1, sizeof(*d->v), 64) < 0)
		return -ENOMEM;
	e = malloc(sizeof(*e) + len + 1);
	if (!e)
		return -ENOMEM;
	e->cookie = cookie;
	e->ino = ino;
	e->type = type;
	e->namelen = (uint8_t)len;
	e->removed = false;
	memcpy(e->name, name, len);
	e->name[len] = '\0';
	if (attr) {
		e->attr = *attr;
		/* Nothing may point into the reply this came from. */
		e->attr.base.n_unknown_fields = 0;
		e->attr.base.unknown_fields = NULL;
		e->attr_at = now;
	} else {
		memset(&e->attr, 0, sizeof(e->attr));
		e->attr_at = 0;
	}
	if (name_hash(d, e) < 0) {
		free(e);
		return -ENOMEM;
	}
	d->v[d->n++] = e;
	d->last = cookie;
	d->live++;
	dc->entries++;
	return 0;
}

/* ---- summaries ------------------------------------------------------ */

static void bloom_bits(const struct cdir *d, const char *name, size_t len,
		       uint64_t bit[SUMMARY_PROBES])
{
	uint64_t h = sw_hash_bytes(name, len);
	uint64_t step = (h >> 32) | 1; /* odd: the probes never coincide */

	for (int i = 0; i < SUMMARY_PROBES; i++)
		bit[i] = (h + (uint64_t)i * step) & (d->nbloom - 1);
}

static void bloom_add(struct cdir *d, const char *name, size_t len)
{
	uint64_t bit[SUMMARY_PROBES];

	bloom_bits(d, name, len, bit);
	for (int i = 0; i < SUMMARY_PROBES; i++)
		d->bloom[bit[i] / 64] |= UINT64_C(1) << (bit[i] % 64);
}

static bool bloom_may_have(const struct cdir *d, const char *name, size_t len)
{
	uint64_t bit[SUMMARY_PROBES];

	bloom_bits(d, name, len, bit);
	for (int i = 0; i < SUMMARY_PROBES; i++)
		if (!(d->bloom[bit[i] / 64] & (UINT64_C(1) << (bit[i] % 64))))
			return false;
	return true;
}

/* Drop the least recently used summary but @a's and @b's. */
static void evict_summary(struct dircache *dc, const struct cdir *a,
			  const struct cdir *b)
{
	for (struct cdir *d = dc->lru_tail; d; d = d->lprev) {
		if (d->bloom && d != a && d != b) {
			dir_free(dc, d);
			return;
		}
	}
}

/*
 * @d's whole listing gives way to a summary of its names (see the top);
 * if all are taken, the least recently used one goes, but @spare's.
 * False if it cannot (not whole, too small, no memory): then it is to be
 * dropped. One walk of the listing, as dropping it is.
 */
static bool summarize(struct dircache *dc, struct cdir *d,
		      const struct cdir *spare)
{
	size_t k = 0;

	if (d->bloom || !d->from_head || !d->eof || d->live < dc->summary_min)
		return false;
	if (dc->summaries >= SUMMARIES_MAX)
		evict_summary(dc, d, spare);
	if (dc->summaries >= SUMMARIES_MAX)
		return false;
	d->bloom = calloc(dc->bloom_bits / 64, sizeof(*d->bloom));
	if (!d->bloom)
		return false;
	d->nbloom = dc->bloom_bits;
	dc->summaries++;
	free(d->buckets);
	d->buckets = NULL;
	d->nbuckets = 0;
	d->live = 0;
	dc->visits += d->n;
	for (size_t i = 0; i < d->n; i++) {
		struct dent *e = d->v[i];

		if (!e->removed)
			bloom_add(d, e->name, e->namelen);
		/* Made here, its cookie to come: kept, removed or not (the
		 * answer finds it by position, dircache_made_cookie()). */
		if (e->cookie >= DC_MADE_BASE) {
			d->v[k++] = e;
			if (!e->removed && name_hash(d, e) == 0) {
				d->live++;
				continue;
			}
			e->removed = true; /* no memory for its hash */
			continue;
		}
		free(e);
	}
	dc->entries -= d->n - k;
	d->n = k;
	if (d->cap > k + 64) {
		struct dent **v = realloc(d->v, (k + 64) * sizeof(*v));

		if (v) {
			d->v = v;
			d->cap = k + 64;
		}
	}
	d->from_head = d->eof = false;
	d->last = 0;
	return true;
}

/*
 * Keep the cache within its bound, sparing @keep: least recently used
 * listings go, big whole ones summarized; at last @keep, if still over
 * and whole, is summarized (it must not be dropped: it is being added
 * to). Summaries stay: what they still hold is a queue's worth.
 */
static void shrink(struct dircache *dc, struct cdir *keep)
{
	struct cdir *d, *prev;

	for (d = dc->lru_tail; d && dc->entries > dc->max_entries; d = prev) {
		bool kept = d == keep || d->bloom || summarize(dc, d, keep);

		/* Only now: summarize() may have dropped another. */
		prev = d->lprev;
		if (!kept)
			dir_free(dc, d);
	}
	if (keep && dc->entries > dc->max_entries)
		summarize(dc, keep, keep);
}

/* First array position whose cookie is greater than @cookie. */
static size_t position_after(const struct cdir *d, uint64_t cookie)
{
	size_t lo = 0, hi = d->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (d->v[mid]->cookie <= cookie)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void copy_out(const struct dircache *dc, const struct cdir *d,
		     const struct dent *e, struct dc_entry *out)
{
	int64_t after = dc->attrs_after > d->attrs_after ? dc->attrs_after :
							   d->attrs_after;

	out->cookie = e->cookie;
	out->ino = e->ino;
	out->type = e->type;
	out->has_attr = e->attr.ino != 0;
	out->attr_at = e->attr_at > after ? e->attr_at : 0;
	if (out->has_attr)
		out->attr = e->attr;
	memcpy(out->name, e->name, (size_t)e->namelen + 1);
}

/* ---- public --------------------------------------------------------- */

int dircache_new(size_t max_entries, struct dircache **out)
{
	struct dircache *dc = calloc(1, sizeof(*dc));

	if (!dc)
		return -ENOMEM;
	pthread_mutex_init(&dc->mu, NULL);
	dc->max_entries = max_entries;
	dc->summary_min = max_entries / 4 < SUMMARY_MIN ? max_entries / 4 :
							  SUMMARY_MIN;
	if (dc->summary_min == 0)
		dc->summary_min = 1;
	dc->bloom_bits = SUMMARY_BITS_MIN;
	while (dc->bloom_bits < SUMMARY_BITS_MAX &&
	       dc->bloom_bits / 64 < max_entries)
		dc->bloom_bits *= 2;
	dc->made_next = DC_MADE_BASE;
	*out = dc;
	return 0;
}

void dircache_clear(struct dircache *dc)
{
	pthread_mutex_lock(&dc->mu);
	while (dc->lru_head)
		dir_free(dc, dc->lru_head);
	pthread_mutex_unlock(&dc->mu);
}

void dircache_free(struct dircache *dc)
{
	dircache_clear(dc);
	pthread_mutex_destroy(&dc->mu);
	free(dc);
}

size_t dircache_read(struct dircache *dc, uint64_t dir, uint64_t cookie,
		     struct dc_entry *out, size_t max, enum dc_state *state,
		     uint64_t *fetch_after)
{
	struct cdir *d;
	size_t i, k = 0;

	pthread_mutex_lock(&dc->mu);
	d = dir_get(dc, dir, false);
	/* Made here and not yet answered: no cookie to hand the kernel
	 * that the master will know. */
	if (!d || !d->from_head || d->nmade) {
		*state = DC_MISS;
		goto out;
	}
	for (i = position_after(d, cookie); i < d->n && k < max; i++) {
		if (!d->v[i]->removed)
			copy_out(dc, d, d->v[i], &out[k++]);
	}
	while (i < d->n && d->v[i]->removed)
		i++;
	if (i < d->n) {
		*state = DC_MORE;
	} else if (d->eof) {
		*state = DC_EOF;
	} else {
		*state = DC_FETCH;
		*fetch_after = d->last;
	}
out:
	pthread_mutex_unlock(&dc->mu);
	return k;
}

bool dircache_append(struct dircache *dc, uint64_t dir, uint64_t after,
		     const Sweepfs__ReaddirReply *r)
{
	int64_t now = sw_mono_ns();
	bool taken = false;
	struct cdir *d;
	size_t off = 0;

	pthread_mutex_lock(&dc->mu);
	d = dir_get(dc, dir, after == 0);
	if (!d)
		goto out;
	if (after == 0 && d->bloom) {
		/*
		 * A summary stays: a listing it would take is dropped again
		 * past the bound before it is whole (so could never be
		 * summarized again), and what this mount made since the
		 * page was asked for is only in the summary.
		 */
		goto out;
	} else if (after == 0 && !d->from_head) {
		/* A fresh start: whatever was cached is superseded. */
		for (size_t i = 0; i < d->n; i++) {
			if (!d->v[i]->removed)
				name_unhash(d, d->v[i]);
			free(d->v[i]);
		}
		dc->entries -= d->n;
		d->n = d->live = 0;
		d->last = 0;
		d->from_head = true;
		d->eof = false;
	} else if (d->eof || (after != 0 && d->last != after)) {
		/* Does not continue what we have. (Compared with the last
		 * cookie fetched, not the last entry kept: this client may
		 * have removed the entries at the end, and RemoveAll's
		 * close-reopen-read-again must go on from there, not from
		 * the start.) */
		goto out;
	}
	for (uint32_t i = 0; i < r->count; i++) {
		struct sw_dirent e;
		int used = sw_dirent_get(r->entries.data + off,
					 r->entries.len - off, &e);

		if (used < 0 || name_find(d, e.name, e.namelen)) {
			dir_free(dc, d); /* malformed: trust nothing */
			goto out;
		}
		off += (size_t)used;
		if (push(dc, d, e.name, e.namelen, e.cookie, e.ino, e.type,
			 i < r->n_attrs ? r->attrs[i] : NULL, now) < 0) {
			dir_free(dc, d);
			goto out;
		}
	}
	d->eof = r->eof;
	if (d->n > dc->max_entries) {
		/* Bigger than the whole cache: not worth keeping, but for
		 * a summary if it is whole. */
		if (!summarize(dc, d, d))
			dir_free(dc, d);
		goto out;
	}
	taken = true;
	shrink(dc, d);
out:
	pthread_mutex_unlock(&dc->mu);
	return taken;
}

enum dc_lookup dircache_lookup(struct dircache *dc, uint64_t dir,
			       const char *name, struct dc_entry *e)
{
	enum dc_lookup res = DC_UNKNOWN;
	struct cdir *d;
	struct dent *x;

	pthread_mutex_lock(&dc->mu);
	d = dir_get(dc, dir, false);
	if (d) {
		x = name_find(d, name, strlen(name));
		if (x) {
			copy_out(dc, d, x, e);
			res = DC_FOUND;
		} else if (d->from_head && d->eof) {
			res = DC_ABSENT;
		} else if (d->bloom && !bloom_may_have(d, name, strlen(name))) {
			res = DC_ABSENT;
		}
	}
	pthread_mutex_unlock(&dc->mu);
	return res;
}

int64_t dircache_live(struct dircache *dc, uint64_t dir)
{
	int64_t n = -1;
	struct cdir *d;

	pthread_mutex_lock(&dc->mu);
	d = dir_get(dc, dir, false);
	if (d && d->from_head && d->eof)
		n = (int64_t)d->live;
	pthread_mutex_unlock(&dc->mu);
	return n;
}

void dircache_remove(struct dircache *dc, uint64_t dir, const char *name)
{
	struct cdir *d;
	struct dent *x;

	pthread_mutex_lock(&dc->mu);
	d = dir_get(dc, dir, false);
	if (d && (x = name_find(d, name, strlen(name)))) {
		name_unhash(d, x);
		x->removed = true;
		d->live--;
		compact(dc, d);
	}
	pthread_mutex_unlock(&dc->mu);
}

void dircache_add(struct dircache *dc, uint64_t dir, const char *name,
		  uint64_t cookie, uint64_t ino, uint8_t type,
		  const Sweepfs__Attr *attr)
{
	struct cdir *d;

	pthread_mutex_lock(&dc->mu);
	d = dir_get(dc, dir, false);
	if (d && d->bloom) {
		bloom_add(d, name, strlen(name));
		goto out;
	}
	if (!d || !d->eof)
		goto out;
	if (d->last >= cookie || name_find(d, name, strlen(name)) ||
	    push(dc, d, name, strlen(name), cookie, ino, type, attr,
		 sw_mono_ns()) < 0)
		dir_free(dc, d); /* not what we thought: start over */
	else
		shrink(dc, d);
out:
	pthread_mutex_unlock(&dc->mu);
}

void dircache_rename(struct dircache *dc, uint64_t dir, const char *name,
		     uint64_t newdir, const char *newname, uint64_t cookie)
{
	struct dc_entry de;

	if (dircache_lookup(dc, dir, name, &de) != DC_FOUND) {
		dircache_drop(dc, dir);
		dircache_drop(dc, newdir);
		return;
	}
	dircache_remove(dc, dir, name);
	dircache_remove(dc, newdir, newname);
	dircache_add(dc, newdir, newname, cookie, de.ino, de.type, NULL);
}

uint64_t dircache_add_made(struct dircache *dc, uint64_t dir, const char *name,
			   uint64_t ino, uint8_t type,
			   const Sweepfs__Attr *attr)
{
	uint64_t cookie = 0;
	struct cdir *d;

	pthread_mutex_lock(&dc->mu);
	d = dir_get(dc, dir, false);
	if (!d || (!d->bloom && (!d->from_head || !d->eof)))
		goto out;
	if (name_find(d, name, strlen(name)) ||
	    push(dc, d, name, strlen(name), dc->made_next, ino, type, attr,
		 sw_mono_ns()) < 0) {
		dir_free(dc, d);
		goto out;
	}
	if (d->bloom)
		bloom_add(d, name, strlen(name));
	cookie = dc->made_next++;
	d->nmade++;
	shrink(dc, d);
out:
	pthread_mutex_unlock(&dc->mu);
	return cookie;
}

void dircache_made_cookie(struct dircache *dc, uint64_t dir, uint64_t made,
			  uint64_t cookie, uint64_t handle)
{
	struct cdir *d;
	size_t i;

	pthread_mutex_lock(&dc->mu);
	d = dir_get(dc, dir, false);
	if (!d || !d->nmade)
		goto out; /* dropped, or made again since */
	i = position_after(d, made - 1);
	if (i == d->n || d->v[i]->cookie != made) {
		/* Compacted away (it was removed): the rest is in order
		 * as long as the others come in order. */
		if (made >= dc->made_next)
			dir_free(dc, d);
		goto out;
	}
	/* What a lookup served from here hands the kernel must let it
	 * name the node once its number's range is the session's no more. */
	if (handle && d->v[i]->attr.ino) {
		d->v[i]->attr.has_handle = 1;
		d->v[i]->attr.handle = handle;
	}
	/* The master's cookies grow: the entry keeps its place only if
	 * its new one lies between its neighbours'. */
	if (cookie >= DC_MADE_BASE ||
	    (i > 0 && d->v[i - 1]->cookie >= cookie) ||
	    (i + 1 < d->n && d->v[i + 1]->cookie < DC_MADE_BASE)) {
		dir_free(dc, d);
		goto out;
	}
	d->v[i]->cookie = cookie;
	d->nmade--;
	if (d->bloom) {
		/* The filter has its name, the master the rest: it goes at
		 * the next compaction. */
		if (!d->v[i]->removed) {
			name_unhash(d, d->v[i]);
			d->v[i]->removed = true;
			d->live--;
		}
		compact(dc, d);
	} else if (d->nmade == 0) {
		d->last = d->v[d->n - 1]->cookie;
	}
out:
	pthread_mutex_unlock(&dc->mu);
}

void dircache_new_empty(struct dircache *dc, uint64_t dir)
{
	struct cdir *d;

	pthread_mutex_lock(&dc->mu);
	d = dir_get(dc, dir, false);
	if (d)
		dir_free(dc, d);
	d = dir_get(dc, dir, true);
	if (d) {
		d->from_head = true;
		d->eof = true;
	}
	pthread_mutex_unlock(&dc->mu);
}

void dircache_expire_attrs(struct dircache *dc, uint64_t dir)
{
	struct cdir *d;

	pthread_mutex_lock(&dc->mu);
	d = dir_get(dc, dir, false);
	if (d)
		d->attrs_after = sw_mono_ns();
	pthread_mutex_unlock(&dc->mu);
}

void dircache_expire_all_attrs(struct dircache *dc)
{
	pthread_mutex_lock(&dc->mu);
	dc->attrs_after = sw_mono_ns();
	pthread_mutex_unlock(&dc->mu);
}

void dircache_drop(struct dircache *dc, uint64_t dir)
{
	struct cdir *d;

	pthread_mutex_lock(&dc->mu);
	d = dir_get(dc, dir, false);
	if (d)
		dir_free(dc, d);
	pthread_mutex_unlock(&dc->mu);
}

/* Counter @v of @dc, read under its lock. */
static size_t count_of(struct dircache *dc, const size_t *v)
{
	size_t n;

	pthread_mutex_lock(&dc->mu);
	n = *v;
	pthread_mutex_unlock(&dc->mu);
	return n;
}

size_t dircache_entries(struct dircache *dc)
{
	return count_of(dc, &dc->entries);
}

size_t dircache_summaries(struct dircache *dc)
{
	return count_of(dc, &dc->summaries);
}

uint64_t dircache_visits(struct dircache *dc)
{
	return count_of(dc, &dc->visits);
}
