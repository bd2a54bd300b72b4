/*
 * slab.h: objects of several sizes, reuse, live counts, and pages going
 * back when their objects are freed.
 *
 * Under AddressSanitizer the slab is malloc() per object and holds no
 * pages; the page assertions are skipped there and the rest still runs.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "prefault.h"
#include "slab.h"
#include "unit.h"

#if defined(__SANITIZE_ADDRESS__)
#define SLAB_PAGES 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLAB_PAGES 0
#endif
#endif
#ifndef SLAB_PAGES
#define SLAB_PAGES 1
#endif

#define NOBJ 20000

struct fixture {
	struct slab s;
	void **objs;
	struct rng rng;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->objs = calloc(NOBJ, sizeof(void *));
	if (!f->objs) {
		free(f);
		return -1;
	}
	rng_seed(&f->rng, 42);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	/* Objects a failed test left behind. */
	for (size_t i = 0; i < NOBJ; i++)
		if (f->objs[i])
			slab_free(&f->s, f->objs[i]);
	if (f->s.objsize)
		slab_release(&f->s);
	free(f->objs);
	free(f);
	return 0;
}

/* Fill object @i with a pattern derived from @i, and check it. */
static void fill(void *obj, size_t size, size_t i)
{
	uint8_t *p = obj;

	for (size_t k = 0; k < size; k++)
		p[k] = (uint8_t)(i * 31 + k);
}

static void check(const void *obj, size_t size, size_t i)
{
	const uint8_t *p = obj;

	for (size_t k = 0; k < size; k++)
		if (p[k] != (uint8_t)(i * 31 + k))
			fail_msg("object %zu byte %zu overwritten", i, k);
}

static void shuffle(struct rng *r, size_t *v, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)rng_below(r, i), t = v[i - 1];

		v[i - 1] = v[j];
		v[j] = t;
	}
}

/* Allocate @n objects, check they do not overlap, free them in random
 * order, and check the counters on the way. */
static void cycle(struct fixture *f, size_t objsize, size_t n)
{
	struct slab *s = &f->s;
	size_t *order = malloc(n * sizeof(*order));
	size_t pages_full;

	assert_non_null(order);
	slab_init(s, objsize);
	assert_int_equal(s->objsize % 8, 0);
	assert_true(s->objsize >= objsize && s->objsize < objsize + 8);
	assert_true(s->per_page >= 1);
	assert_true((size_t)s->per_page * s->objsize <= SLAB_PAGE);
	for (size_t i = 0; i < n; i++) {
		f->objs[i] = slab_alloc(s);
		assert_non_null(f->objs[i]);
		assert_int_equal((uintptr_t)f->objs[i] % 8, 0);
		fill(f->objs[i], s->objsize, i);
		assert_int_equal(s->live, i + 1);
	}
	for (size_t i = 0; i < n; i++)
		check(f->objs[i], s->objsize, i);
	pages_full = s->pages;
	if (SLAB_PAGES) {
		size_t need = (n + s->per_page - 1) / s->per_page;

		assert_int_equal(pages_full, need);
		assert_int_equal(slab_bytes(s), need * SLAB_PAGE);
	}

	for (size_t i = 0; i < n; i++)
		order[i] = i;
	shuffle(&f->rng, order, n);
	for (size_t k = 0; k < n; k++) {
		size_t i = order[k];

		check(f->objs[i], s->objsize, i);
		slab_free(s, f->objs[i]);
		f->objs[i] = NULL;
		assert_int_equal(s->live, n - k - 1);
		assert_true(s->pages <= pages_full);
	}
	/* At most one empty page is kept against churn. */
	assert_int_equal(s->live, 0);
	if (SLAB_PAGES)
		assert_true(s->pages <= 1);
	else
		assert_int_equal(s->pages, 0);
	slab_release(s);
	assert_int_equal(s->pages, 0);
	assert_int_equal(s->live, 0);
	free(order);
}

/*
 * slab_ahead() (first in this program, while no region was ever emptied):
 * the next objects are carved from the range it gives, in order; and
 * slab_ahead_end() gives back what of it was faulted in and not carved,
 * keeping what was.
 */
static void test_slab_ahead(void **state)
{
	struct fixture *f = *state;
	struct slab *s = &f->s;
	size_t psz = (size_t)sysconf(_SC_PAGESIZE), len, n, pages;
	uint8_t *p, *last = NULL;
	unsigned char *v;
	void *start;

	if (!SLAB_PAGES)
		skip();
	slab_init(s, 256);
	assert_true(slab_ahead(8 * SLAB_REGION, &start, &len));
	p = start;
	assert_true(len >= 8 * SLAB_REGION);
	/* What a prefaulting helper does (prefault.h): Linux 5.14. */
	if (madvise(p, len, MADV_POPULATE_WRITE) != 0) {
		slab_ahead_end();
		skip();
	}
	n = (SLAB_REGION + SLAB_REGION / 2) / s->objsize;
	assert_true(n <= NOBJ);
	for (size_t i = 0; i < n; i++) {
		f->objs[i] = slab_alloc(s);
		assert_true((uint8_t *)f->objs[i] >= p &&
			    (uint8_t *)f->objs[i] < p + len);
		fill(f->objs[i], s->objsize, i);
		if ((uint8_t *)f->objs[i] > last)
			last = f->objs[i];
	}
	slab_ahead_end();
	pages = len / psz;
	v = malloc(pages);
	assert_non_null(v);
	assert_int_equal(mincore(p, len, v), 0);
	/* The two regions carved from stay; the six after them go. */
	for (size_t i = 0; i < pages; i++)
		assert_int_equal(v[i] & 1, p + i * psz < p + 2 * SLAB_REGION);
	assert_true(last < p + 2 * SLAB_REGION);
	free(v);
	for (size_t i = 0; i < n; i++) {
		check(f->objs[i], s->objsize, i);
		slab_free(s, f->objs[i]);
		f->objs[i] = NULL;
	}
}

static void test_slab_alloc_small(void **state)
{
	cycle(*state, 8, NOBJ);
}

static void test_slab_alloc_node_sized(void **state)
{
	cycle(*state, 64, NOBJ);
}

static void test_slab_alloc_odd_size(void **state)
{
	/* Rounded up to a multiple of 8. */
	cycle(*state, 45, NOBJ);
}

static void test_slab_alloc_large(void **state)
{
	cycle(*state, 4096, 2000);
}

static void test_slab_free_null(void **state)
{
	struct fixture *f = *state;

	slab_init(&f->s, 32);
	f->objs[0] = slab_alloc(&f->s);
	assert_non_null(f->objs[0]);
	slab_free(&f->s, NULL);
	assert_int_equal(f->s.live, 1);
	slab_free(&f->s, f->objs[0]);
	f->objs[0] = NULL;
	assert_int_equal(f->s.live, 0);
}

/* Freed objects are handed out again before a new page is taken. */
static void test_slab_alloc_reuse(void **state)
{
	struct fixture *f = *state;
	struct slab *s = &f->s;
	size_t n, pages;

	slab_init(s, 48);
	n = (size_t)s->per_page * 3;
	for (size_t i = 0; i < n; i++)
		assert_non_null(f->objs[i] = slab_alloc(s));
	pages = s->pages;
	/* Free every other object, then allocate as many again. */
	for (size_t i = 0; i < n; i += 2) {
		slab_free(s, f->objs[i]);
		f->objs[i] = NULL;
	}
	assert_int_equal(s->live, n / 2);
	for (size_t i = 0; i < n; i += 2) {
		assert_non_null(f->objs[i] = slab_alloc(s));
		fill(f->objs[i], s->objsize, i);
	}
	assert_int_equal(s->live, n);
	assert_int_equal(s->pages, pages);
	/* No object was handed out twice. */
	for (size_t i = 0; i < n; i++)
		if (i % 2 == 0)
			check(f->objs[i], s->objsize, i);
	for (size_t i = 0; i < n; i++) {
		slab_free(s, f->objs[i]);
		f->objs[i] = NULL;
	}
	assert_int_equal(s->live, 0);
}

/*
 * Freeing everything but one object per page keeps the pages; freeing the
 * last object of a page returns it, and a second slab of another size
 * reuses the memory.
 */
static void test_slab_free_returns_pages(void **state)
{
	struct fixture *f = *state;
	struct slab *s = &f->s, other;
	size_t n, per;

	slab_init(s, 128);
	per = s->per_page;
	n = per * 10;
	for (size_t i = 0; i < n; i++)
		assert_non_null(f->objs[i] = slab_alloc(s));
	if (SLAB_PAGES)
		assert_int_equal(s->pages, 10);
	/* Objects are carved in order: object i is on page i / per. Keep
	 * the first object of every page. */
	for (size_t i = 0; i < n; i++) {
		if (i % per == 0)
			continue;
		slab_free(s, f->objs[i]);
		f->objs[i] = NULL;
	}
	assert_int_equal(s->live, 10);
	if (SLAB_PAGES)
		assert_int_equal(s->pages, 10);
	for (size_t p = 0; p < 10; p++) {
		slab_free(s, f->objs[p * per]);
		f->objs[p * per] = NULL;
		if (SLAB_PAGES)
			assert_int_equal(s->pages, p < 9 ? 9 - p : 1);
	}
	assert_int_equal(s->live, 0);

	/* The pages went back to a shared pool: another slab takes them. */
	slab_init(&other, 256);
	for (size_t i = 0; i < 1000; i++) {
		void *o = slab_alloc(&other);

		assert_non_null(o);
		memset(o, 0xa5, other.objsize);
		slab_free(&other, o);
	}
	assert_int_equal(other.live, 0);
	slab_release(&other);
}

/*
 * slab.h: slab_release() gives back every page once every object was
 * freed: pages that were full, partial or empty, none may be left.
 */
static void test_slab_release_after_free(void **state)
{
	struct fixture *f = *state;
	struct slab *s = &f->s;
	size_t n;

	slab_init(s, 256);
	n = (size_t)s->per_page * 3 + 5; /* three full pages and a partial */
	assert_true(n <= NOBJ);
	for (size_t i = 0; i < n; i++) {
		f->objs[i] = slab_alloc(s);
		assert_non_null(f->objs[i]);
	}
	if (SLAB_PAGES)
		assert_int_equal(s->pages, 4);
	for (size_t i = 0; i < n; i++) {
		slab_free(s, f->objs[i]);
		f->objs[i] = NULL;
	}
	slab_release(s);
	assert_int_equal(s->live, 0);
	assert_int_equal(s->pages, 0);
	assert_int_equal(slab_bytes(s), 0);
}

/* Interleaved allocations and frees against a list of live objects. */
static void test_slab_alloc_random(void **state)
{
	struct fixture *f = *state;
	struct slab *s = &f->s;
	size_t live = 0, peak = 0;

	slab_init(s, 72);
	for (int step = 0; step < 200000; step++) {
		bool grow = live == 0 ||
			    (live < NOBJ && rng_below(&f->rng, 100) < 52);

		if (grow) {
			f->objs[live] = slab_alloc(s);
			assert_non_null(f->objs[live]);
			fill(f->objs[live], 16, (size_t)f->objs[live]);
			live++;
		} else {
			size_t i = (size_t)rng_below(&f->rng, live);

			check(f->objs[i], 16, (size_t)f->objs[i]);
			slab_free(s, f->objs[i]);
			f->objs[i] = f->objs[--live];
			f->objs[live] = NULL;
		}
		assert_int_equal(s->live, live);
		if (live > peak)
			peak = live;
		if (SLAB_PAGES)
			assert_true(s->pages * s->per_page >= live);
	}
	while (live) {
		slab_free(s, f->objs[--live]);
		f->objs[live] = NULL;
	}
	assert_int_equal(s->live, 0);
	assert_true(peak > 1000);
	if (SLAB_PAGES)
		assert_true(s->pages <= 1);
}

/* Whether the kernel offers transparent huge pages to those who ask. */
static bool thp_offered(void)
{
	char buf[128] = "";
	FILE *fp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");

	if (!fp)
		return false;
	if (!fgets(buf, sizeof(buf), fp))
		buf[0] = 0;
	fclose(fp);
	return strstr(buf, "[never]") == NULL && buf[0];
}

/* Field @name (e.g. "THPeligible") of the mapping holding @addr in
 * /proc/self/smaps, or -1 when not found. */
static long smaps_field(const void *addr, const char *name)
{
	uintptr_t a = (uintptr_t)addr, lo, hi;
	size_t len = strlen(name);
	bool in = false;
	char line[512];
	long v = -1;
	FILE *fp = fopen("/proc/self/smaps", "r");

	if (!fp)
		return -1;
	while (fgets(line, sizeof(line), fp)) {
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			in = a >= lo && a < hi;
			continue;
		}
		if (in && strncmp(line, name, len) == 0 && line[len] == ':' &&
		    sscanf(line + len + 1, "%ld", &v) == 1)
			break;
	}
	fclose(fp);
	return v;
}

/* The "THPeligible" of the mapping holding @addr: 1, 0, or -1. */
static int thp_eligible(const void *addr)
{
	return (int)smaps_field(addr, "THPeligible");
}

/*
 * Pages come from 2 MiB regions that may be huge pages: fork() (the
 * checkpoint's writer) copies one page table entry per region rather
 * than 512.
 */
static void test_slab_regions_huge(void **state)
{
	struct fixture *f = *state;
	void *obj;

	if (!SLAB_PAGES)
		skip();
	slab_init(&f->s, 64);
	obj = slab_alloc(&f->s);
	assert_non_null(obj);
	f->objs[0] = obj;
	if (thp_offered())
		assert_int_equal(thp_eligible(obj), 1);
}

/* 4 KiB pages of the region at @base that are resident (mincore()). */
static size_t resident_pages(uintptr_t base)
{
	size_t psz = (size_t)sysconf(_SC_PAGESIZE), n = SLAB_REGION / psz;
	unsigned char *vec = calloc(n, 1);
	size_t count = 0;

	assert_non_null(vec);
	assert_int_equal(mincore((void *)base, SLAB_REGION, vec), 0);
	for (size_t i = 0; i < n; i++)
		count += vec[i] & 1;
	free(vec);
	return count;
}

static uintptr_t region_of(const void *obj)
{
	return (uintptr_t)obj & ~(uintptr_t)(SLAB_REGION - 1);
}

/* How many of @objs[0..@n) are in the region at @base. */
static size_t in_region(void **objs, size_t n, uintptr_t base)
{
	size_t count = 0;

	for (size_t i = 0; i < n; i++)
		count += objs[i] && region_of(objs[i]) == base;
	return count;
}

/*
 * A purge must not split huge pages (slab.c): the memory of a region goes
 * back to the kernel whole, when its last page is freed, and never a page
 * of it while another is in use (that kept 4 KiB headers mapped and made
 * fork() copy 512 entries where one did). Pages free in a region still in
 * use are handed out again before an emptied region is touched. Counted
 * with mincore(), so that the test holds with and without huge pages.
 */
static void test_slab_free_gives_back_whole_regions(void **state)
{
	struct fixture *f = *state;
	struct slab *s = &f->s;
	size_t psz = (size_t)sysconf(_SC_PAGESIZE), per, full, n, keep = 0;
	size_t idle, again;
	uintptr_t x = 0, y = 0;

	if (!SLAB_PAGES)
		skip();
	slab_init(s, 2048);
	per = s->per_page;
	full = per * (SLAB_REGION / SLAB_PAGE); /* objects a region holds */
	n = full * 5;
	assert_true(n <= NOBJ);
	for (size_t i = 0; i < n; i++) {
		f->objs[i] = slab_alloc(s);
		assert_non_null(f->objs[i]);
		fill(f->objs[i], s->objsize, i);
	}
	/* Two regions that only this slab's objects fill: X and Y. */
	for (size_t i = 0; i < n && !y; i++) {
		uintptr_t r = region_of(f->objs[i]);

		if (r == x || in_region(f->objs, n, r) != full)
			continue;
		if (!x)
			x = r;
		else
			y = r;
	}
	assert_true(x && y);
	assert_int_equal(resident_pages(x), SLAB_REGION / psz);
	/* One object elsewhere freed: its page stays on the slab's partial
	 * list, so that every page emptied below goes back to its region. */
	for (size_t i = 0; i < n && !keep; i++)
		if (region_of(f->objs[i]) != x && region_of(f->objs[i]) != y) {
			slab_free(s, f->objs[i]);
			f->objs[i] = NULL;
			keep = 1;
		}
	assert_int_equal(keep, 1);
	/* Y keeps its first page in use; X empties, after Y. */
	for (size_t i = 0; i < n; i++)
		if (f->objs[i] && region_of(f->objs[i]) == y &&
		    (uintptr_t)f->objs[i] - y >= SLAB_PAGE) {
			slab_free(s, f->objs[i]);
			f->objs[i] = NULL;
		}
	for (size_t i = 0; i < n; i++)
		if (f->objs[i] && region_of(f->objs[i]) == x) {
			slab_free(s, f->objs[i]);
			f->objs[i] = NULL;
		}
	assert_int_equal(in_region(f->objs, n, y), per);
	/* Nothing of X is left mapped; none of Y was given back. */
	assert_int_equal(resident_pages(x), 0);
	assert_int_equal(resident_pages(y), SLAB_REGION / psz);
	idle = slab_idle_bytes();
	assert_true(idle >= (full - per) / per * SLAB_PAGE);
	/* What slab_collapse() is given: Y, in use, and never X, empty. */
	{
		void **bases;
		size_t nb, has_x = 0, has_y = 0;

		assert_int_equal(slab_collapse_list(&bases, &nb), 0);
		for (size_t k = 0; k < nb; k++) {
			assert_int_equal((uintptr_t)bases[k] % SLAB_REGION, 0);
			has_x += (uintptr_t)bases[k] == x;
			has_y += (uintptr_t)bases[k] == y;
		}
		free(bases);
		assert_int_equal(has_x, 0);
		assert_int_equal(has_y, 1);
	}

	/* The hole left on the partial page is filled, then Y's free pages
	 * are taken; X stays untouched. */
	again = 0;
	for (size_t i = 0; i < n && again < full - per + 1; i++) {
		if (f->objs[i])
			continue;
		f->objs[i] = slab_alloc(s);
		assert_non_null(f->objs[i]);
		fill(f->objs[i], s->objsize, i);
		again++;
	}
	assert_int_equal(again, full - per + 1);
	assert_int_equal(in_region(f->objs, n, y), full);
	assert_int_equal(resident_pages(x), 0);
	assert_int_equal(slab_idle_bytes(),
			 idle - (full - per) / per * SLAB_PAGE);
	for (size_t i = 0; i < n; i++)
		if (f->objs[i])
			check(f->objs[i], s->objsize, i);
}

/* The start of the mapping holding @addr in /proc/self/maps, or 0. */
static uintptr_t mapping_of(uintptr_t addr)
{
	uintptr_t lo, hi, found = 0;
	char line[512];
	FILE *fp = fopen("/proc/self/maps", "r");

	if (!fp)
		return 0;
	while (!found && fgets(line, sizeof(line), fp))
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2 &&
		    addr >= lo && addr < hi)
			found = lo;
	fclose(fp);
	return found;
}

/*
 * Regions come many to a mapping: fork() copies each mapping, and one per
 * 2 MiB region was 2,400 of them at 34 M files. 40 regions' worth of
 * pages must sit in a handful of mappings (arenas of 16, 16, 32, ...
 * regions), where one mapping per region made 40.
 */
static void test_slab_regions_share_mappings(void **state)
{
	struct fixture *f = *state;
	struct slab *s = &f->s;
	uintptr_t maps[64];
	size_t n, nmaps = 0, nregions = 0;
	uintptr_t last = 0;

	if (!SLAB_PAGES)
		skip();
	slab_init(s, 4096);
	/* One object per page, 40 regions' worth of pages. */
	n = (size_t)s->per_page * (SLAB_REGION / SLAB_PAGE) * 40;
	assert_true(n <= NOBJ);
	for (size_t i = 0; i < n; i++) {
		f->objs[i] = slab_alloc(s);
		assert_non_null(f->objs[i]);
	}
	for (size_t i = 0; i < n; i++) {
		uintptr_t r = region_of(f->objs[i]), m;
		bool seen = false;

		if (r == last)
			continue;
		last = r;
		nregions++;
		m = mapping_of(r);
		assert_true(m != 0);
		for (size_t k = 0; k < nmaps; k++)
			seen = seen || maps[k] == m;
		if (!seen) {
			assert_true(nmaps < 64);
			maps[nmaps++] = m;
		}
	}
	assert_true(nregions >= 40);
	assert_true(nmaps <= 4);
}

/* The "AnonHugePages" (kB) of the mapping holding @addr, or -1. */
static long anon_huge_kb(const void *addr)
{
	return smaps_field(addr, "AnonHugePages");
}

/*
 * A write while a forked child shares a region splits its huge page; once
 * the child is gone, slab_collapse() makes it one again, contents intact.
 * Checked where the kernel offers huge pages and MADV_COLLAPSE and has a
 * free one (else skipped); the list it is given always.
 */
static void test_slab_collapse_after_fork(void **state)
{
	struct fixture *f = *state;
	struct slab *s = &f->s;
	size_t psz = (size_t)sysconf(_SC_PAGESIZE), n, nb, listed = 0;
	void **bases, *base;
	long huge;
	int fds[2];
	char c;
	pid_t pid;

	if (!SLAB_PAGES)
		skip();
	slab_init(s, 2048);
	n = (size_t)s->per_page * (SLAB_REGION / SLAB_PAGE) * 2;
	for (size_t i = 0; i < n; i++) {
		f->objs[i] = slab_alloc(s);
		assert_non_null(f->objs[i]);
		fill(f->objs[i], s->objsize, i);
	}
	assert_int_equal(slab_collapse_list(&bases, &nb), 0);
	for (size_t i = 0; i < n; i++) {
		bool in = false;

		for (size_t k = 0; k < nb && !in; k++)
			in = (uintptr_t)bases[k] == region_of(f->objs[i]);
		listed += in;
	}
	free(bases);
	assert_int_equal(listed, n);
	if (!thp_offered())
		skip();
	/* A child that shares everything until the pipe closes. */
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[1]);
		(void)!read(fds[0], &c, 1);
		_exit(0);
	}
	close(fds[0]);
	for (size_t i = 0; i < n; i += s->per_page)
		fill(f->objs[i], 8, i + 1);
	close(fds[1]);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	base = (void *)region_of(f->objs[n / 2]);
	huge = anon_huge_kb(base);
	if (slab_collapse(&base, 1) != 1)
		skip(); /* no MADV_COLLAPSE, or no free huge page */
	/* The split region (no longer counted as huge) is one again. */
	assert_true(anon_huge_kb(base) >= huge + (SLAB_REGION >> 10));
	assert_int_equal(resident_pages((uintptr_t)base), SLAB_REGION / psz);
	for (size_t i = 0; i < n; i++)
		if (i % s->per_page == 0)
			check(f->objs[i], 8, i + 1);
		else
			check(f->objs[i], s->objsize, i);
}

/* Whether all of the region at @r is resident. */
static bool region_resident(const void *r)
{
	size_t psz = (size_t)sysconf(_SC_PAGESIZE), pages = SLAB_REGION / psz;
	unsigned char *v = malloc(pages);
	bool all = true;

	assert_non_null(v);
	assert_int_equal(mincore((void *)r, SLAB_REGION, v), 0);
	for (size_t i = 0; i < pages && all; i++)
		all = v[i] & 1;
	free(v);
	return all;
}

static long my_minor_faults(void)
{
	struct rusage ru;

	assert_int_equal(getrusage(RUSAGE_THREAD, &ru), 0);
	return ru.ru_minflt;
}

/*
 * slab_prefault_next(): the region objects go to next is faulted in by
 * the helper before any is carved from it, so the thread that allocates
 * (the master's loop) takes no page fault, and zeroes nothing, as it
 * starts a region: under this project's hypervisor the first write to a
 * fresh 2 MiB cost the loop 15-35 ms (a snapshot's slices,
 * integration.attack). Twice: the region after the one the objects
 * start on, whether new or emptied before.
 */
static void test_slab_prefault_next(void **state)
{
	struct fixture *f = *state;
	struct slab *s = &f->s;
	size_t psz = (size_t)sysconf(_SC_PAGESIZE), n = 0;
	struct sw_prefault *pf;
	bool populates;
	void *probe;

	if (!SLAB_PAGES)
		skip();
	/* What the helper asks of the kernel (Linux 5.14). */
	probe = mmap(NULL, psz, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(probe != MAP_FAILED);
	populates = madvise(probe, psz, MADV_POPULATE_WRITE) == 0;
	munmap(probe, psz);
	pf = populates ? sw_prefault_start() : NULL;
	if (!pf)
		skip();
	slab_init(s, 256);
	f->objs[n++] = slab_alloc(s); /* a region in use, another next */
	slab_prefault_next(pf);
	for (int round = 0; round < 2; round++) {
		uint8_t *next = slab_next_region();
		long faults;

		assert_non_null(next);
		for (int i = 0; i < 5000 && !region_resident(next); i++)
			usleep(1000);
		if (!region_resident(next))
			fail_msg("round %d: the next region is not faulted in",
				 round);
		/* Objects up to the first one in it, which starts the region
		 * and is written without a fault. */
		do {
			assert_true(n < NOBJ);
			faults = my_minor_faults();
			f->objs[n] = slab_alloc(s);
			assert_non_null(f->objs[n]);
		} while (((uintptr_t)f->objs[n++] &
			  ~(uintptr_t)(SLAB_REGION - 1)) != (uintptr_t)next);
		fill(f->objs[n - 1], s->objsize, n - 1);
		assert_int_equal(my_minor_faults() - faults, 0);
	}
	slab_prefault_next(NULL);
	sw_prefault_stop(pf);
	for (size_t i = 0; i < n; i++) {
		slab_free(s, f->objs[i]);
		f->objs[i] = NULL;
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_slab_ahead, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_slab_alloc_small, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_slab_alloc_node_sized,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_slab_alloc_odd_size, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_slab_alloc_large, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_slab_free_null, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_slab_alloc_reuse, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_slab_free_returns_pages,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_slab_alloc_random, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_slab_regions_huge, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_slab_release_after_free,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_slab_free_gives_back_whole_regions, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_slab_regions_share_mappings, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slab_collapse_after_fork,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_slab_prefault_next, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
