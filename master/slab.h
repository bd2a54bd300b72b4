/*
 * Slab allocator for the master's small fixed-size objects (nodes, edges).
 *
 * malloc spends 8 to 24 bytes on every 40-64 byte object (header plus
 * 16-byte rounding); at 100 million files that is gigabytes. A slab carves
 * 64 KiB pages into equal objects with no per-object header and keeps a
 * free list per page. Pages come from 2 MiB regions backed by transparent
 * huge pages where the kernel offers them (what keeps the checkpoint's
 * fork() short), and a region goes back to the kernel whole
 * (MADV_DONTNEED) when the last object in it is freed, so a purge of
 * millions of files returns memory without splitting huge pages.
 *
 * Under AddressSanitizer every object is a plain malloc() instead, so the
 * sanitizer sees each one.
 *
 * Not thread-safe: the master's loop thread owns all slabs.
 */
#ifndef SWEEPFS_MASTER_SLAB_H
#define SWEEPFS_MASTER_SLAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct slab_page;

struct slab {
	size_t objsize;		   /* bytes per object, multiple of 8 */
	unsigned per_page;	   /* objects that fit in one page */
	struct slab_page *partial; /* pages with at least one free object */
	size_t live;		   /* objects allocated */
	size_t pages;		   /* pages held */
};

/* Page size: objects never span pages, and a page is found by masking. */
#define SLAB_PAGE (64u << 10)

/* Region size and alignment: a huge page; memory goes back to the kernel
 * only in whole regions. */
#define SLAB_REGION (2u << 20)

/* Set up @s for objects of @objsize bytes (8 <= objsize <= 4096). */
void slab_init(struct slab *s, size_t objsize);

/*
 * Give back @s's remaining pages. Every object must have been freed with
 * slab_free() first (under AddressSanitizer, one that was not is reported
 * as a leak).
 */
void slab_release(struct slab *s);

/* An uninitialised object, or NULL when memory is exhausted. */
void *slab_alloc(struct slab *s);

/* Return @obj, which came from slab_alloc(@s). NULL is ignored. */
void slab_free(struct slab *s, void *obj);

/* Bytes of memory @s holds, in pages. */
static inline size_t slab_bytes(const struct slab *s)
{
	return s->pages * SLAB_PAGE;
}

/*
 * Bytes of free pages held, mapped, in regions that other pages still use,
 * shared by all slabs of the process (not in any slab_bytes()); 0 under
 * AddressSanitizer.
 */
size_t slab_idle_bytes(void);

/*
 * The regions that hold pages in use, for slab_collapse(): *@out is a
 * malloc()ed array of *@n region addresses (2 MiB aligned) that the
 * caller frees, even when *@n is 0. -ENOMEM, with nothing to free, when
 * memory is exhausted. Loop thread only, like the rest.
 */
int slab_collapse_list(void ***out, size_t *n);

/*
 * Ask the kernel to back each of the @n regions in @bases with a huge
 * page again (MADV_COLLAPSE), after a forked child that shared them is
 * gone: writes made while it lived split their huge pages, and the next
 * fork() copies small pages' entries. Touches no slab state, so that any
 * thread may call it while the loop runs (regions are never unmapped; one
 * emptied meanwhile holds no page and is left alone). Slow: about 0.7 ms
 * per region that needs it, under the process's memory map lock. Returns
 * how many regions are huge pages now; 0 where the kernel has no
 * MADV_COLLAPSE or no free huge page.
 */
size_t slab_collapse(void *const *bases, size_t n);

/*
 * The next @bytes of objects (of any slab) will be carved from fresh
 * memory at [*@p, *@p + *@len), one mapping, in order: for a loader that
 * has it faulted in ahead of its writes (prefault.h). False when they
 * will not be, all or in order: regions emptied before are reused first
 * (they hold no memory, but where they are is not one range), and under
 * AddressSanitizer objects are malloc()ed. Maps address space only.
 */
bool slab_ahead(size_t bytes, void **p, size_t *len);

/*
 * The loader is done: of the last range slab_ahead() gave, what no object
 * was carved from goes back to the kernel (a replay's guess of what it
 * would take may be too high). Whoever faulted it in has stopped.
 */
void slab_ahead_end(void);

struct sw_prefault;

/*
 * From now on, whenever objects start on a region, have @pf (prefault.h)
 * fault the next region in on its thread (NULL: no more). The first
 * write to a fresh region zeroes its 2 MiB: under this project's
 * hypervisor 20-35 ms of the loop's CPU now and then (every 15,000 to
 * 20,000 nodes made), where the other core can do it ahead. At most one
 * region is faulted in before it is needed. A forked child forgets @pf.
 */
void slab_prefault_next(struct sw_prefault *pf);

/* Where objects go once the regions in use are full: what
 * slab_prefault_next() faults in (NULL: a new arena, not mapped yet, or
 * objects malloc()ed). */
void *slab_next_region(void);

#endif
