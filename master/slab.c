/*
 * Pages are carved from 2 MiB regions aligned to 64 KiB so that the page of
 * an object is (addr & ~(SLAB_PAGE - 1)). Regions are aligned to 2 MiB
 * and asked to be backed by transparent huge pages (MADV_HUGEPAGE): with
 * tens of millions of nodes and names in them, one page table entry per
 * 2 MiB rather than per 4 KiB is what lets fork() (the checkpoint's
 * writer, checkpoint.h) copy the master's page tables in milliseconds,
 * and fewer TLB misses make loading and replaying faster. A page given
 * back below splits its huge page; the kernel copes. The price: with
 * the kernel's default defrag policy ("madvise") the first touch of a
 * region (once per 2 MiB, some 15,000 nodes) may compact memory there
 * and then; where that shows in latencies, defrag "defer+madvise" moves
 * it to the background.
 *
 * Each page starts with its header; objects follow. A page with free
 * objects sits on its slab's partial list;
 * a page that becomes entirely free is unmapped in place (MADV_DONTNEED
 * keeps the address range, drops the memory) and goes to a global pool
 * shared by all slabs, so one kind of object can reuse what another freed.
 *
 * Regions are never unmapped: the address space of a master is bounded by
 * its peak, and the memory behind it is what counts.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "slab.h"

#define REGION (2u << 20)

struct slab_page {
	struct slab *owner;	/* NULL while in the global pool */
	struct slab_page *next; /* partial list or pool */
	struct slab_page *prev; /* partial list */
	void *free;	 /* free objects, linked through their first word */
	unsigned used;	 /* objects allocated from this page */
	unsigned carved; /* objects carved so far (lazy carving) */
	bool on_partial;
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

static struct slab_page *pool;

static struct slab_page *region_carve(void)
{
	uint8_t *raw, *base;
	size_t lead;

	raw = mmap(NULL, 2 * REGION, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	base = (uint8_t *)(((uintptr_t)raw + REGION - 1) &
			   ~(uintptr_t)(REGION - 1));
	lead = (size_t)(base - raw);
	if (lead)
		munmap(raw, lead);
	munmap(base + REGION, REGION - lead);
	/* Best effort: without transparent huge pages, small ones. */
	madvise(base, REGION, MADV_HUGEPAGE);
	for (size_t off = REGION; off > 0; off -= SLAB_PAGE) {
		struct slab_page *p =
			(struct slab_page *)(base + off - SLAB_PAGE);

		p->owner = NULL;
		p->next = pool;
		pool = p;
	}
	return pool;
}

static struct slab_page *page_get(struct slab *s)
{
	struct slab_page *p = pool ? pool : region_carve();

	if (!p)
		return NULL;
	pool = p->next;
	memset(p, 0, sizeof(*p));
	p->owner = s;
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

static void page_put(struct slab *s, struct slab_page *p)
{
	partial_del(s, p);
	s->pages--;
	madvise((uint8_t *)p + 4096, SLAB_PAGE - 4096, MADV_DONTNEED);
	p->owner = NULL;
	p->next = pool;
	pool = p;
}

#endif

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
