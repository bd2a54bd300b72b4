/*
 * htab: an open-addressing hash table of pointers that resizes a little at
 * a time.
 *
 * The master keeps every inode in one table and every large directory's
 * names in another; with 100 million entries, rehashing at once would stop
 * the loop for seconds. Here a resize allocates the new array and then
 * moves a few clusters of the old one on each insert and remove (and on
 * htab_step()), while lookups search both arrays, as valkey's dict does.
 *
 * Slots hold only the element pointer, with 16 bits of its hash in the
 * pointer's unused top bits so that a lookup reads almost no element but
 * the one it looks for (8 bytes per slot, load factor kept between 1/8
 * and 3/4). The table does not own its elements; it asks
 * @hash_fn for an element's hash when it moves or deletes. Linear probing
 * with backward-shift deletion: no tombstones.
 *
 * Array sizes are not powers of two: a hash goes to slot (h * size) >> 64
 * (Lemire's "fastrange", so the hash's high bits must be mixed), and a
 * table grows to twice its elements, 1.5 times its size when it is 3/4
 * full. A slot then costs 10.7 to 16 bytes per element, where doubling
 * would cost 10.7 to 21.3: with an inode table and a directory's names,
 * 10 bytes a file at the worst point (DESIGN: 150 bytes per empty file).
 *
 * Not thread-safe.
 */
#ifndef SWEEPFS_MASTER_HTAB_H
#define SWEEPFS_MASTER_HTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint64_t (*htab_hash_fn)(const void *elem);
typedef bool (*htab_eq_fn)(const void *elem, const void *key);

struct htab {
	void **slots; /* current array, NULL when empty */
	size_t size;  /* slots in it */
	size_t count; /* elements in slots */
	void **old;   /* array being drained, or NULL */
	size_t oldsize;
	size_t oldcount; /* elements still in old */
	size_t mig_pos;	 /* next old slot to move (absolute index) */
	size_t mig_left; /* old slots not yet visited */
	htab_hash_fn hash_fn;
};

void htab_init(struct htab *t, htab_hash_fn hash_fn);

/* Free the arrays (not the elements). */
void htab_release(struct htab *t);

static inline size_t htab_count(const struct htab *t)
{
	return t->count + t->oldcount;
}

/* Bytes the arrays take. */
size_t htab_bytes(const struct htab *t);

/*
 * The element with hash @h for which @eq(elem, @key) is true, or NULL.
 */
void *htab_find(const struct htab *t, uint64_t h, htab_eq_fn eq,
		const void *key);

/*
 * Add @elem with hash @h (== hash_fn(elem)). Duplicates are the caller's to
 * avoid. Returns 0, -ENOMEM, or -EINVAL for an address above 2^48 (the
 * table is unchanged).
 */
int htab_insert(struct htab *t, uint64_t h, void *elem);

/*
 * Make room for @n elements at once, moving those there now (all of them:
 * not for a table in service). For loading: elements that come in the
 * order of their hashes (a table written out slot by slot) would all
 * land in the first slots of a table still growing towards its final
 * size, one cluster long enough to make loading quadratic. 0 or -ENOMEM
 * (the table is unchanged).
 */
int htab_reserve(struct htab *t, size_t n);

/*
 * Start reading, without waiting, the slot where an element with hash @h
 * is looked for or inserted, for a caller that knows its keys a few steps
 * ahead (a loader reading a checkpoint or a changelog): at millions of
 * elements every insert and lookup waits for a cache (and TLB) miss on
 * its home slot, and several misses in flight cost little more than one.
 * A hint only: the table is not changed, a wrong @h costs a wasted read.
 */
void htab_prefetch(const struct htab *t, uint64_t h);

/*
 * The next step after htab_prefetch(@h), once that slot is in: start
 * reading the elements of the cluster from @h's home on (a few), those
 * that removing an element there reads to shift the others back.
 * Changes nothing.
 */
void htab_prefetch_cluster(const struct htab *t, uint64_t h);

/* Remove @elem (compared by address); false if it was not there. */
bool htab_remove(struct htab *t, uint64_t h, const void *elem);

/*
 * Append to the malloc()ed array *@v of *@n addresses (NULL and 0 to
 * start one) the 2 MiB huge pages of every table's arrays of several MiB,
 * for slab_collapse() after a fork (their huge pages split as the slabs'
 * do). An array freed after the list was made may be collapsed in vain:
 * MADV_COLLAPSE changes no byte of whatever is mapped there by then.
 * 0, or -ENOMEM with *@v and *@n unchanged.
 */
int htab_huge_list(void ***v, size_t *n);

/*
 * How many big arrays this process has freed so far: a thread working
 * through an htab_huge_list() stops when it changes (a freed array's
 * range may hold something sparse by then, which MADV_COLLAPSE would
 * fill in). Any thread.
 */
uint64_t htab_huge_gen(void);

/*
 * Move up to about @budget slots of a pending resize; true while a resize
 * is still in progress. The owner calls this from idle time so that a
 * table nobody touches still finishes.
 */
bool htab_step(struct htab *t, size_t budget);

/*
 * Visit up to @budget slots from *@cursor on, calling @fn for each
 * element, and leave *@cursor where to go on next time (it wraps). For
 * background scans in slices: an element may be missed or seen twice
 * while the table resizes. @fn must not change the table; a non-zero
 * return stops the scan.
 */
void htab_scan(const struct htab *t, uint64_t *cursor, size_t budget,
	       int (*fn)(void *elem, void *arg), void *arg);

/*
 * Call @fn for every element; @fn must not change the table. Stops and
 * returns @fn's value when it is non-zero.
 */
int htab_foreach(const struct htab *t, int (*fn)(void *elem, void *arg),
		 void *arg);

/*
 * htab_foreach() over part @part of @parts of the slots (0 <= @part <
 * @parts): the parts together visit every element once, so that threads
 * may each take one while nothing changes the table.
 */
int htab_foreach_part(const struct htab *t, unsigned part, unsigned parts,
		      int (*fn)(void *elem, void *arg), void *arg);

#endif
