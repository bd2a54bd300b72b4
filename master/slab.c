/*
 * Pages are carved from 2 MiB regions aligned to 2 MiB, so that the page
 * of an object is (addr & ~(SLAB_PAGE - 1)) and its region (addr &
 * ~(SLAB_REGION - 1)). Regions are asked to be backed by transparent
 * huge pages (MADV_HUGEPAGE): with tens of millions of nodes and names in
 * them, one page table entry per 2 MiB rather than 512 of 4 KiB is what
 * lets fork() (the checkpoint's writer, checkpoint.h) copy the master's
 * page tables in milliseconds, and fewer TLB misses make loading and
 * replaying faster. The price: with the kernel's default defrag policy
 * ("madvise") the first touch of a region (once per 2 MiB, some 15,000
 * nodes) may compact memory there and then; where that shows in
 * latencies, defrag "defer+madvise" moves it to the background.
 *
 * Memory goes back to the kernel only a whole region at a time. Giving
 * back a 64 KiB page inside a region (as this file once did) splits the
 * region's huge page into 512 small ones, and the kernel does not merge
 * them again soon: after a purge had freed most of a 34 M-node namespace,
 * fork() held the loop 19-74 ms instead of 6-8, copying the entries of
 * small pages (and the split huge page itself stays allocated until the
 * kernel's deferred split gets to it). So:
 *
 *  - Each page starts with its header; objects follow. A page with free
 *    objects sits on its slab's partial list. A page whose last object
 *    is freed goes back to its region, which lists its free pages.
 *  - A region's bookkeeping (struct slab_region) lives outside it, in
 *    malloc()ed memory, so that a region with no page in use can be
 *    given back whole (MADV_DONTNEED over its 2 MiB: the address range
 *    stays, the memory goes, the next touch faults in a huge page again)
 *    with nothing of it left mapped.
 *  - Regions with some pages in use and some free are shared by all slabs
 *    (one kind of object reuses what another freed) and are handed out
 *    first, before a region given back or a new one is touched: holes
 *    fill, and regions that empty stay empty.
 *
 * The trade-off: a region keeps its 2 MiB while any of its 32 pages is in
 * use, where 64 KiB pages could go back one by one. Objects are carved in
 * order of allocation, so what a purge frees (a tree made together) is
 * mostly whole regions; slab_idle_bytes() says how much is held idle.
 *
 * Regions are never unmapped: the address space of a master is bounded by
 * its peak, and the memory behind it is what counts. Their descriptors
 * (48 bytes per 2 MiB) stay too. They are mapped many at a time
 * (region_new()), so that fork() has few mappings to copy.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "prefault.h"
#include "slab.h"

#define REGION SLAB_REGION
#define REGION_PAGES (REGION / SLAB_PAGE)

struct slab_region;

struct slab_page {
	struct slab *owner;	    /* NULL while free in its region */
	struct slab_region *region; /* the region this page is in */
	struct slab_page *next;	    /* partial list or region's free pages */
	struct slab_page *prev;	    /* partial list */
	void *free;		    /* free objects, through their first word */
	unsigned used;		    /* objects allocated from this page */
	unsigned carved;	    /* objects carved so far (lazy carving) */
	bool on_partial;
};

/*
 * A 2 MiB region, described from outside it. Pages are handed out from
 * @free first, then carved in order (@carved); a region with @used == 0
 * holds no memory (given back, or never touched past @carved == 0).
 */
struct slab_region {
	uint8_t *base;		  /* 2 MiB aligned */
	struct slab_page *free;	  /* pages given back by slabs, mapped */
	unsigned carved;	  /* pages handed out since it was emptied */
	unsigned used;		  /* pages held by slabs */
	unsigned nfree;		  /* pages on @free */
	bool on_open;		  /* on the list of regions with room */
	struct slab_region *next; /* open list, or the empty stack */
	struct slab_region *prev; /* open list */
};

#define PAGE_HDR ((sizeof(struct slab_page) + 15) & ~(size_t)15)

#if defined(__SANITIZE_ADDRESS__)
#define SLAB_USE_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLAB_USE_MALLOC 1
#endif
#endif

#ifndef SLAB_USE_MALLOC

/* Regions with pages in use and room for more: handed out first. */
static struct slab_region *open_regions;
/* Regions with no page in use and no memory behind them. */
static struct slab_region *empty_regions;
/* Pages free in regions that have some in use: mapped, idle. */
static size_t idle_pages;

static void open_add(struct slab_region *r)
{
	r->prev = NULL;
	r->next = open_regions;
	if (open_regions)
		open_regions->prev = r;
	open_regions = r;
	r->on_open = true;
}

static void open_del(struct slab_region *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		open_regions = r->next;
	if (r->next)
		r->next->prev = r->prev;
	r->on_open = false;
}

/*
 * Address space for @n regions, 2 MiB aligned, asked to be huge pages,
 * no memory touched: NULL when the kernel refuses it.
 */
static uint8_t *arena_map(size_t n)
{
	size_t len = n * REGION, lead;
	uint8_t *raw, *base;

	raw = mmap(NULL, len + REGION, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	base = (uint8_t *)(((uintptr_t)raw + REGION - 1) &
			   ~(uintptr_t)(REGION - 1));
	lead = (size_t)(base - raw);
	if (lead)
		munmap(raw, lead);
	munmap(base + len, REGION - lead);
	/* Best effort: without transparent huge pages, small ones. */
	madvise(base, len, MADV_HUGEPAGE);
	return base;
}

/*
 * A new region, no memory touched yet. Regions are mapped in arenas of
 * ARENA_MIN to ARENA_MAX of them, as many as exist already, rather than
 * one mapping each: fork() copies every mapping (its VMA and anon_vma
 * chain, about 1 us each here), and at 34 M files one per region was
 * 2,400 of them. ARENA_MAX bounds the address space reserved ahead, and
 * what it costs where the kernel does not overcommit (MAP_NORESERVE is
 * ignored there), to 512 MiB.
 */
#define ARENA_MIN 16u
#define ARENA_MAX 256u

static struct slab_region **all; /* every region, for slab_collapse_list() */
static size_t all_cap;		 /* slots in @all */
static uint8_t *arena_next;	 /* next region of the current arena */
static size_t arena_left;	 /* regions left in it */
static size_t regions;		 /* regions made so far */

/* The next arena, when the current one is used up: 0 or -ENOMEM. */
static int arena_refill(void)
{
	size_t n = regions < ARENA_MIN ? ARENA_MIN :
		   regions > ARENA_MAX ? ARENA_MAX :
					 regions;

	if (arena_left)
		return 0;
	arena_next = arena_map(n);
	if (!arena_next) {
		n = 1; /* the last resort: what a page needs */
		arena_next = arena_map(n);
	}
	if (!arena_next)
		return -ENOMEM;
	arena_left = n;
	return 0;
}

static struct slab_region *region_new(void)
{
	struct slab_region *r;

	if (arena_refill() < 0)
		return NULL;
	if (regions == all_cap) {
		size_t cap = all_cap ? 2 * all_cap : 64;
		struct slab_region **v = realloc(all, cap * sizeof(*v));

		if (!v)
			return NULL;
		all = v;
		all_cap = cap;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	all[regions] = r;
	r->base = arena_next;
	arena_next += REGION;
	arena_left--;
	regions++;
	return r;
}

/*
 * The region after the one just taken, faulted in ahead (slab_prefault_next()):
 * the helper, and the region last handed to it.
 */
static struct sw_prefault *next_pf;
static uint8_t *next_asked;

static void next_ahead(void)
{
	uint8_t *next;

	/* The next arena's address space now, so that its first region
	 * is faulted in ahead too. */
	if (next_pf && !empty_regions)
		arena_refill();
	next = slab_next_region();

	if (next_pf && next && next != next_asked) {
		next_asked = next;
		sw_prefault_ahead(next_pf, next, REGION);
	}
}

/* A forked child has no helper thread, and its lock may be held. */
static void next_forget(void)
{
	next_pf = NULL;
}

void *slab_next_region(void)
{
	return empty_regions ? empty_regions->base :
	       arena_left    ? arena_next :
			       NULL;
}

void slab_prefault_next(struct sw_prefault *pf)
{
	static bool atfork_ok; /* the slab is the loop's: no race here */

	if (pf && !atfork_ok)
		atfork_ok = pthread_atfork(NULL, NULL, next_forget) == 0;
	next_pf = atfork_ok ? pf : NULL;
	next_asked = NULL;
	next_ahead();
}

/* The region to take a page from: one with room, an empty one, or new. */
static struct slab_region *region_get(void)
{
	struct slab_region *r = open_regions;

	if (r)
		return r;
	r = empty_regions;
	if (r)
		empty_regions = r->next;
	else
		r = region_new();
	if (r) {
		open_add(r);
		next_ahead();
	}
	return r;
}

static struct slab_page *page_get(struct slab *s)
{
	struct slab_region *r = region_get();
	struct slab_page *p;

	if (!r)
		return NULL;
	if (r->free) {
		p = r->free;
		r->free = p->next;
		r->nfree--;
		idle_pages--;
	} else {
		p = (struct slab_page *)(r->base +
					 (size_t)r->carved * SLAB_PAGE);
		r->carved++;
	}
	r->used++;
	if (!r->free && r->carved == REGION_PAGES)
		open_del(r);
	memset(p, 0, sizeof(*p));
	p->owner = s;
	p->region = r;
	s->pages++;
	return p;
}

static void partial_add(struct slab *s, struct slab_page *p)
{
	p->prev = NULL;
	p->next = s->partial;
	if (s->partial)
		s->partial->prev = p;
	s->partial = p;
	p->on_partial = true;
}

static void partial_del(struct slab *s, struct slab_page *p)
{
	if (p->prev)
		p->prev->next = p->next;
	else
		s->partial = p->next;
	if (p->next)
		p->next->prev = p->prev;
	p->on_partial = false;
}

/*
 * @p goes back to its region; the region's last page in use takes the
 * whole region back to the kernel, huge page and all, in one piece.
 */
static void page_put(struct slab *s, struct slab_page *p)
{
	struct slab_region *r = p->region;

	partial_del(s, p);
	s->pages--;
	r->used--;
	if (r->used == 0) {
		idle_pages -= r->nfree;
		madvise(r->base, REGION, MADV_DONTNEED);
		r->free = NULL;
		r->nfree = 0;
		r->carved = 0;
		if (r->on_open)
			open_del(r);
		r->next = empty_regions;
		empty_regions = r;
		return;
	}
	p->owner = NULL;
	p->next = r->free;
	r->free = p;
	r->nfree++;
	idle_pages++;
	if (!r->on_open)
		open_add(r);
}

size_t slab_idle_bytes(void)
{
	return idle_pages * SLAB_PAGE;
}

/* The last range slab_ahead() gave, until slab_ahead_end(). */
static uint8_t *ahead_lo, *ahead_hi;

bool slab_ahead(size_t bytes, void **p, size_t *len)
{
	size_t n = bytes / REGION + 1;

	slab_ahead_end();
	if (empty_regions)
		return false;
	/* What is left of the current arena stays unused address space
	 * (twice at most a start: the checkpoint, the replay): one mapping
	 * of them all is fewer for fork() to copy. Past ARENA_MAX, as the
	 * loader asks: where the kernel does not overcommit, that is
	 * memory the load takes anyway (the replay's guess is capped). */
	if (arena_left < n) {
		uint8_t *a = arena_map(n);

		if (!a)
			return false;
		arena_next = a;
		arena_left = n;
	}
	*p = ahead_lo = arena_next;
	*len = n * REGION;
	ahead_hi = ahead_lo + *len;
	return true;
}

void slab_ahead_end(void)
{
	/* Regions below arena_next are made (region_new()), some in use;
	 * from it on, the range is address space faulted in for nothing. */
	if (ahead_lo <= arena_next && arena_next < ahead_hi) {
		madvise(arena_next, (size_t)(ahead_hi - arena_next),
			MADV_DONTNEED);
		next_asked = NULL; /* that may have been it */
		next_ahead();
	}
	ahead_lo = ahead_hi = NULL;
}

int slab_collapse_list(void ***out, size_t *n)
{
	void **v = malloc((regions ? regions : 1) * sizeof(*v));
	size_t k = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < regions; i++)
		if (all[i]->used)
			v[k++] = all[i]->base;
	*out = v;
	*n = k;
	return 0;
}

#else

size_t slab_idle_bytes(void)
{
	return 0;
}

void slab_prefault_next(struct sw_prefault *pf)
{
	(void)pf;
}

void *slab_next_region(void)
{
	return NULL;
}

bool slab_ahead(size_t bytes, void **p, size_t *len)
{
	(void)bytes;
	(void)p;
	(void)len;
	return false;
}

void slab_ahead_end(void)
{
}

int slab_collapse_list(void ***out, size_t *n)
{
	*out = malloc(sizeof(void *));
	*n = 0;
	return *out ? 0 : -ENOMEM;
}

#endif

/*
 * A write to a huge page that a forked child still shares copies only its
 * 4 KiB page and splits the huge one for good (the kernel's copy on write
 * of transparent huge pages): while a checkpoint's child writes for
 * seconds, a purge or a burst of creates touches most regions, and the
 * next fork copied small pages again (53-63 ms at 3-8 M nodes left of 34
 * M, against 3-7 ms intact). MADV_COLLAPSE (Linux 6.1) makes a region a
 * huge page again, copying its 2 MiB (0.7 ms here) under the process's
 * memory map lock; on a region already huge it is a quick no-op.
 */
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

size_t slab_collapse(void *const *bases, size_t n)
{
	size_t done = 0;

	for (size_t i = 0; i < n; i++)
		done += madvise(bases[i], SLAB_REGION, MADV_COLLAPSE) == 0;
	return done;
}

void slab_init(struct slab *s, size_t objsize)
{
	memset(s, 0, sizeof(*s));
	s->objsize = (objsize + 7) & ~(size_t)7;
	s->per_page = (unsigned)((SLAB_PAGE - PAGE_HDR) / s->objsize);
}

#ifdef SLAB_USE_MALLOC

void slab_release(struct slab *s)
{
	/* Objects are malloc()ed; their owners free them. */
	s->live = 0;
}

void *slab_alloc(struct slab *s)
{
	void *p = malloc(s->objsize);

	if (p)
		s->live++;
	return p;
}

void slab_free(struct slab *s, void *obj)
{
	if (!obj)
		return;
	s->live--;
	free(obj);
}

#else

void slab_release(struct slab *s)
{
	/* With every object freed, every page is on the partial list. */
	while (s->partial)
		page_put(s, s->partial);
	s->live = 0;
}

void *slab_alloc(struct slab *s)
{
	struct slab_page *p = s->partial;
	void *obj;

	if (!p) {
		p = page_get(s);
		if (!p)
			return NULL;
		partial_add(s, p);
	}
	if (p->free) {
		obj = p->free;
		memcpy(&p->free, obj, sizeof(void *));
	} else {
		obj = (uint8_t *)p + PAGE_HDR + (size_t)p->carved * s->objsize;
		p->carved++;
	}
	p->used++;
	if (p->used == s->per_page)
		partial_del(s, p);
	s->live++;
	return obj;
}

void slab_free(struct slab *s, void *obj)
{
	struct slab_page *p;

	if (!obj)
		return;
	p = (struct slab_page *)((uintptr_t)obj & ~(uintptr_t)(SLAB_PAGE - 1));
	memcpy(obj, &p->free, sizeof(void *));
	p->free = obj;
	p->used--;
	s->live--;
	if (!p->on_partial)
		partial_add(s, p);
	/* Keep one empty page per slab to avoid churn at the boundary. */
	if (p->used == 0 && (p->prev || p->next))
		page_put(s, p);
}

#endif
