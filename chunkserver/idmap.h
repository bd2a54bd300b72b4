/*
 * idmap: a hash table from 64-bit ids (chunk ids) to pointers.
 *
 * Open addressing with linear probing and backward-shift deletion (no
 * tombstones); 16 bytes a slot, load factor kept under 3/4. A chunkserver
 * holds one entry per chunk, so the table grows in one step: at a million
 * chunks that is a 32 MiB array copied once, which the callers accept
 * (they never grow it on the event loop thread with a big table).
 *
 * The table does not own the values; NULL is not a value. Not
 * thread-safe: the owner locks.
 */
#ifndef SWEEPFS_CHUNKSERVER_IDMAP_H
#define SWEEPFS_CHUNKSERVER_IDMAP_H

#include <stddef.h>
#include <stdint.h>

struct idmap_slot {
	uint64_t key;
	void *value; /* NULL: the slot is free */
};

struct idmap {
	struct idmap_slot *slots; /* NULL while empty */
	size_t mask;		  /* slots - 1 */
	size_t count;		  /* values stored */
};

static inline void idmap_init(struct idmap *m)
{
	m->slots = NULL;
	m->mask = 0;
	m->count = 0;
}

/* Free the array (not the values); the map is empty and reusable. */
void idmap_release(struct idmap *m);

static inline size_t idmap_count(const struct idmap *m)
{
	return m->count;
}

/* The value stored under @key, or NULL. */
void *idmap_get(const struct idmap *m, uint64_t key);

/*
 * Store @value (not NULL) under @key, replacing what was there. Returns 0
 * or -ENOMEM (the map is unchanged).
 */
int idmap_put(struct idmap *m, uint64_t key, void *value);

/* Remove @key; returns the value it had, or NULL. */
void *idmap_del(struct idmap *m, uint64_t key);

/*
 * Call @fn(key, value, @arg) for every entry, in no particular order,
 * until it returns non-zero (which is then returned). @fn must not change
 * the map.
 */
int idmap_foreach(const struct idmap *m,
		  int (*fn)(uint64_t key, void *value, void *arg), void *arg);

#endif
