/*
 * Incremental resize, and why lookups in the old array stay correct:
 * migration starts just after an empty old slot and always moves whole
 * clusters (maximal runs of occupied slots), leaving them empty. An element
 * still in the old array therefore sits in an untouched cluster together
 * with every slot between its home and itself, so probing the old array
 * from its home finds it; an element already moved is searched for in a
 * cluster that is now empty and is found in the new array instead.
 * Removal from the old array shifts elements only within their own cluster,
 * which keeps that property.
 *
 * Tags: a slot holds the element's address in its low 48 bits and 16 bits
 * of its hash in the top ones (TAG_SHIFT). A lookup calls @eq, and so
 * reads the element, a cache miss each at millions of elements, only
 * where the tag matches: in a cluster of k other elements it reads 1 + k
 * / 65536 elements instead of 1 + k, and a miss (a create's "is the name
 * free?") usually none. The tag takes the hash's low bits, while the home
 * slot comes from its high bits (home()), so that neighbours in a cluster,
 * whose homes are close, still differ in their tags. Addresses must fit
 * in 48 bits, as user space addresses do on x86-64 and arm64 unless a
 * mapping asks for more (mmap() hints above 2^47) or the hardware tags
 * pointers (arm64 MTE): htab_insert() refuses others with -EINVAL.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "htab.h"

#define MIN_SLOTS 16u
#define STEP_BUDGET 64u
#define HUGE_PAGE (2u << 20)
#define PREFETCH_AHEAD 8u
/* Elements of a cluster read ahead when a slot is deleted (delete_at()):
 * more than clusters hold at a load of 3/4, on average, by far. */
#define PREFETCH_CLUSTER 16u
#define TAG_SHIFT 48
#define ADDR_MASK (((uintptr_t)1 << TAG_SHIFT) - 1)

_Static_assert(sizeof(void *) == 8, "htab keeps tags in 64-bit pointers");

/* What a slot holds for @elem with hash @h. */
static inline void *tagged(void *elem, uint64_t h)
{
	return (void *)((uintptr_t)elem | (uintptr_t)(h & 0xffff) << TAG_SHIFT);
}

static inline void *untag(const void *slot)
{
	return (void *)((uintptr_t)slot & ADDR_MASK);
}

static inline bool tag_matches(const void *slot, uint64_t h)
{
	return (uintptr_t)slot >> TAG_SHIFT == (h & 0xffff);
}

/*
 * Arrays of several MiB, in the order made: a write to one while a
 * checkpoint's child shares it splits its huge pages as it splits the
 * slabs' (slab_collapse()), and a purge's removals write all over the
 * inode table (at 34 M files, 0.5 GB of it: 10 ms of the next fork). The
 * master makes them huge pages again when no child lives
 * (htab_huge_list()). Loop thread only, like the tables, but for the
 * count of arrays freed (htab_huge_gen()).
 */
static struct big {
	void **v;
	size_t n; /* slots */
} * bigs;
static size_t nbigs, bigcap;
static _Atomic uint64_t bigs_freed; /* htab_huge_gen() */

static bool is_big(size_t n)
{
	return n * sizeof(void *) >= 2 * HUGE_PAGE;
}

/* The huge pages inside array @v of @n slots: [*lo, *hi). */
static void huge_span(void **v, size_t n, uintptr_t *lo, uintptr_t *hi)
{
	*lo = ((uintptr_t)v + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
	*hi = ((uintptr_t)v + n * sizeof(void *)) & ~(uintptr_t)(HUGE_PAGE - 1);
	if (*hi < *lo)
		*hi = *lo;
}

/*
 * A zeroed array of @n slots. One of several MiB (the inode table, a big
 * directory's names) is asked to be backed by transparent huge pages, as
 * the slabs are (slab.c): at tens of millions of entries its 4 KiB page
 * table entries are most of what fork() copies while the loop waits for
 * the checkpoint's writer (66 ms at 34 M files without). It is listed
 * for the collapse after a fork, unless the list cannot grow (then only
 * the next fork pays).
 */
static void **slots_new(size_t n)
{
	void **v = calloc(n, sizeof(void *));
	uintptr_t lo, hi;

	if (!v || !is_big(n))
		return v;
	huge_span(v, n, &lo, &hi);
	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
	if (nbigs == bigcap) {
		size_t cap = bigcap ? 2 * bigcap : 16;
		struct big *nb = realloc(bigs, cap * sizeof(*nb));

		if (!nb)
			return v;
		bigs = nb;
		bigcap = cap;
	}
	bigs[nbigs++] = (struct big){ v, n };
	return v;
}

static void slots_free(void **v, size_t n)
{
	if (v && is_big(n)) {
		for (size_t i = 0; i < nbigs; i++)
			if (bigs[i].v == v) {
				bigs[i] = bigs[--nbigs];
				break;
			}
		/* Before the free: a collapse that saw the old count may
		 * still reach the array while it is mapped as it was. */
		atomic_fetch_add(&bigs_freed, 1);
	}
	free(v);
}

uint64_t htab_huge_gen(void)
{
	return atomic_load(&bigs_freed);
}

int htab_huge_list(void ***v, size_t *n)
{
	size_t more = 0, k = *n;
	uintptr_t lo, hi;
	void **nv;

	for (size_t i = 0; i < nbigs; i++) {
		huge_span(bigs[i].v, bigs[i].n, &lo, &hi);
		more += (hi - lo) / HUGE_PAGE;
	}
	nv = realloc(*v, (k + more ? k + more : 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	for (size_t i = 0; i < nbigs; i++) {
		huge_span(bigs[i].v, bigs[i].n, &lo, &hi);
		for (uintptr_t p = lo; p < hi; p += HUGE_PAGE)
			nv[k++] = (void *)p;
	}
	*v = nv;
	*n = k;
	return 0;
}

void htab_init(struct htab *t, htab_hash_fn hash_fn)
{
	*t = (struct htab){ .hash_fn = hash_fn };
}

void htab_release(struct htab *t)
{
	slots_free(t->slots, t->size);
	slots_free(t->old, t->oldsize);
	htab_init(t, t->hash_fn);
}

size_t htab_bytes(const struct htab *t)
{
	return (t->size + t->oldsize) * sizeof(void *);
}

/* The home slot of hash @h in an array of @size. */
static inline size_t home(uint64_t h, size_t size)
{
	return (size_t)(((unsigned __int128)h * size) >> 64);
}

static inline size_t next(size_t i, size_t size)
{
	return i + 1 == size ? 0 : i + 1;
}

static void *probe(void *const *slots, size_t size, uint64_t h, htab_eq_fn eq,
		   const void *key)
{
	for (size_t i = home(h, size);; i = next(i, size)) {
		void *s = slots[i];

		if (!s)
			return NULL;
		if (tag_matches(s, h) && eq(untag(s), key))
			return untag(s);
	}
}

void *htab_find(const struct htab *t, uint64_t h, htab_eq_fn eq,
		const void *key)
{
	void *e = NULL;

	if (t->slots)
		e = probe(t->slots, t->size, h, eq, key);
	if (!e && t->old)
		e = probe(t->old, t->oldsize, h, eq, key);
	return e;
}

void htab_prefetch(const struct htab *t, uint64_t h)
{
	if (t->slots)
		__builtin_prefetch(&t->slots[home(h, t->size)], 1);
}

void htab_prefetch_cluster(const struct htab *t, uint64_t h)
{
	size_t i;

	if (!t->slots)
		return;
	i = home(h, t->size);
	for (unsigned n = 0; n < PREFETCH_CLUSTER && t->slots[i]; n++) {
		__builtin_prefetch(untag(t->slots[i]));
		i = next(i, t->size);
	}
}

/* Put slot value @s (tagged) with hash @h into the first free slot. */
static void place(void **slots, size_t size, uint64_t h, void *s)
{
	size_t i = home(h, size);

	while (slots[i])
		i = next(i, size);
	slots[i] = s;
}

/*
 * Backward-shift deletion of slot @i. Deciding whether an element may move
 * back needs its home, so its hash, so the element itself: every element
 * in the rest of the cluster is read, a cache miss each at millions of
 * elements (an unlink's two tables were half of a replay's time at 3 M
 * files). Those reads are independent: ask for them all first, so that
 * they overlap and the cluster costs about one miss, not one per element.
 */
static void delete_at(void **slots, size_t size, size_t i, htab_hash_fn hf)
{
	size_t j = i;

	slots[i] = NULL;
	for (unsigned n = 0; n < PREFETCH_CLUSTER; n++) {
		j = next(j, size);
		if (!slots[j])
			break;
		__builtin_prefetch(untag(slots[j]));
	}
	j = i;
	for (;;) {
		size_t k;

		j = next(j, size);
		if (!slots[j])
			return;
		k = home(hf(untag(slots[j])), size);
		/* Move slots[j] into the hole unless its home lies in (i, j]. */
		if (i <= j ? (k <= i || k > j) : (k <= i && k > j)) {
			slots[i] = slots[j];
			slots[j] = NULL;
			i = j;
		}
	}
}

static bool remove_from(void **slots, size_t size, uint64_t h, const void *elem,
			htab_hash_fn hf)
{
	for (size_t i = home(h, size);; i = next(i, size)) {
		if (!slots[i])
			return false;
		if (untag(slots[i]) == elem) {
			delete_at(slots, size, i, hf);
			return true;
		}
	}
}

static void finish_migration(struct htab *t)
{
	slots_free(t->old, t->oldsize);
	t->old = NULL;
	t->oldsize = 0;
	t->oldcount = 0;
	t->mig_left = 0;
}

/* The slot @ahead after @i in an array of @size (> @ahead). */
static inline size_t after(size_t i, size_t ahead, size_t size)
{
	return i + ahead < size ? i + ahead : i + ahead - size;
}

/*
 * Moving slot @i of @from (@size of them) into @to (@tosize) waits for
 * two cache misses at millions of elements: reading the element for its
 * hash (the hash of a name reads the name) and the slot it goes to, and a
 * resize moves every element. Start reading the element PREFETCH_AHEAD
 * slots on, and the destination of the one half as far on, whose element
 * that read has brought in by now (its hash is computed twice: a name's
 * siphash costs a fraction of a miss).
 */
static inline void prefetch_moves(void *const *from, size_t size, size_t i,
				  void *const *to, size_t tosize,
				  htab_hash_fn hf)
{
	void *s = from[after(i, PREFETCH_AHEAD, size)];

	if (s)
		__builtin_prefetch(untag(s));
	s = from[after(i, PREFETCH_AHEAD / 2, size)];
	if (s)
		__builtin_prefetch(&to[home(hf(untag(s)), tosize)], 1);
}

bool htab_step(struct htab *t, size_t budget)
{
	if (!t->old)
		return false;
	/* Visit at least @budget slots, then stop at the end of a cluster. */
	while (t->mig_left) {
		void *e = t->old[t->mig_pos];

		if (t->oldsize > PREFETCH_AHEAD)
			prefetch_moves(t->old, t->oldsize, t->mig_pos, t->slots,
				       t->size, t->hash_fn);

		if (!e && budget == 0)
			break;
		if (e) {
			t->old[t->mig_pos] = NULL;
			place(t->slots, t->size, t->hash_fn(untag(e)), e);
			t->count++;
			t->oldcount--;
		}
		t->mig_pos = next(t->mig_pos, t->oldsize);
		t->mig_left--;
		if (budget)
			budget--;
	}
	if (t->mig_left == 0 || t->oldcount == 0)
		finish_migration(t);
	return t->old != NULL;
}

/* Start moving everything into a fresh array of @nslots. */
static int start_resize(struct htab *t, size_t nslots)
{
	void **fresh = slots_new(nslots);

	if (!fresh)
		return -ENOMEM;
	if (!t->slots || t->count == 0) {
		slots_free(t->slots, t->size);
		t->slots = fresh;
		t->size = nslots;
		t->count = 0;
		return 0;
	}
	t->old = t->slots;
	t->oldsize = t->size;
	t->oldcount = t->count;
	t->slots = fresh;
	t->size = nslots;
	t->count = 0;
	/* Begin right after an empty slot so that clusters move whole. */
	t->mig_pos = 0;
	while (t->old[t->mig_pos])
		t->mig_pos++;
	t->mig_left = t->oldsize;
	return 0;
}

/* Slots for @n elements: half full (grown at 3/4, shrunk at 1/8). */
static size_t fit_slots(size_t n)
{
	return n < MIN_SLOTS / 2 ? MIN_SLOTS : 2 * n;
}

int htab_reserve(struct htab *t, size_t n)
{
	size_t nslots = fit_slots(n);
	void **fresh;

	if (t->old)
		htab_step(t, SIZE_MAX);
	if (nslots <= t->size)
		return 0;
	fresh = slots_new(nslots);
	if (!fresh)
		return -ENOMEM;
	for (size_t i = 0; i < t->size; i++) {
		if (t->size > PREFETCH_AHEAD)
			prefetch_moves(t->slots, t->size, i, fresh, nslots,
				       t->hash_fn);
		if (t->slots[i])
			place(fresh, nslots, t->hash_fn(untag(t->slots[i])),
			      t->slots[i]);
	}
	slots_free(t->slots, t->size);
	t->slots = fresh;
	t->size = nslots;
	return 0;
}

int htab_insert(struct htab *t, uint64_t h, void *elem)
{
	size_t total = htab_count(t) + 1;
	int rc;

	if ((uintptr_t)elem & ~ADDR_MASK)
		return -EINVAL;
	if (t->old)
		htab_step(t, STEP_BUDGET);
	if (!t->slots || (t->count + 1) * 4 > t->size * 3) {
		/* Never start a resize on top of one: finish it first. */
		if (t->old)
			htab_step(t, SIZE_MAX);
		if (!t->slots || (t->count + 1) * 4 > t->size * 3) {
			rc = start_resize(t, fit_slots(total));
			if (rc < 0)
				return rc;
		}
	}
	place(t->slots, t->size, h, tagged(elem, h));
	t->count++;
	return 0;
}

bool htab_remove(struct htab *t, uint64_t h, const void *elem)
{
	bool found = false;

	if (t->slots && remove_from(t->slots, t->size, h, elem, t->hash_fn)) {
		t->count--;
		found = true;
	} else if (t->old &&
		   remove_from(t->old, t->oldsize, h, elem, t->hash_fn)) {
		t->oldcount--;
		found = true;
	}
	if (!found)
		return false;
	if (t->old) {
		htab_step(t, STEP_BUDGET);
	} else if (t->count == 0) {
		slots_free(t->slots, t->size);
		t->slots = NULL;
		t->size = 0;
	} else if (t->size > MIN_SLOTS && t->count * 8 < t->size) {
		/* Shrinking is an optimisation: on ENOMEM keep the big array. */
		start_resize(t, fit_slots(t->count));
	}
	return true;
}

int htab_foreach_part(const struct htab *t, unsigned part, unsigned parts,
		      int (*fn)(void *elem, void *arg), void *arg)
{
	void **arrays[2] = { t->slots, t->old };
	size_t sizes[2] = { t->size, t->oldsize };

	for (int a = 0; a < 2; a++) {
		size_t from =
			(size_t)((unsigned __int128)sizes[a] * part / parts);
		size_t to = (size_t)((unsigned __int128)sizes[a] * (part + 1) /
				     parts);

		if (!arrays[a])
			continue;
		for (size_t i = from; i < to; i++) {
			int rc;

			/* The slots are read in order, their elements each a
			 * miss of its own at millions: ask for one ahead. */
			if (i + PREFETCH_AHEAD < to &&
			    arrays[a][i + PREFETCH_AHEAD])
				__builtin_prefetch(
					untag(arrays[a][i + PREFETCH_AHEAD]));
			if (!arrays[a][i])
				continue;
			rc = fn(untag(arrays[a][i]), arg);
			if (rc)
				return rc;
		}
	}
	return 0;
}

int htab_foreach(const struct htab *t, int (*fn)(void *elem, void *arg),
		 void *arg)
{
	return htab_foreach_part(t, 0, 1, fn, arg);
}

void htab_scan(const struct htab *t, uint64_t *cursor, size_t budget,
	       int (*fn)(void *elem, void *arg), void *arg)
{
	size_t size = t->slots ? t->size : 0;

	if (!size)
		return;
	if (*cursor >= size)
		*cursor = 0;
	while (budget--) {
		void *e = t->slots[*cursor];

		*cursor = next(*cursor, size);
		if (e && fn(untag(e), arg))
			return;
	}
}
