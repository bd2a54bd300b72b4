/*
 * Linear probing over a power-of-two array; a key's home slot is its
 * murmur3 finaliser masked. Deletion shifts the following cluster back so
 * that every key stays reachable from its home slot without tombstones
 * (Knuth 6.4, algorithm R).
 */
#include <errno.h>
#include <stdlib.h>

#include "hash.h"
#include "idmap.h"

#define MIN_SLOTS 64u

void idmap_release(struct idmap *m)
{
	free(m->slots);
	idmap_init(m);
}

static size_t home(const struct idmap *m, uint64_t key)
{
	return (size_t)sw_hash_u64(key) & m->mask;
}

void *idmap_get(const struct idmap *m, uint64_t key)
{
	if (!m->slots)
		return NULL;
	for (size_t i = home(m, key);; i = (i + 1) & m->mask) {
		if (!m->slots[i].value)
			return NULL;
		if (m->slots[i].key == key)
			return m->slots[i].value;
	}
}

/* Insert into a table known to have room and not to hold @key. */
static void place(struct idmap *m, uint64_t key, void *value)
{
	size_t i = home(m, key);

	while (m->slots[i].value)
		i = (i + 1) & m->mask;
	m->slots[i].key = key;
	m->slots[i].value = value;
}

static int grow(struct idmap *m)
{
	size_t n = m->slots ? (m->mask + 1) * 2 : MIN_SLOTS;
	struct idmap old = *m;

	m->slots = calloc(n, sizeof(*m->slots));
	if (!m->slots) {
		*m = old;
		return -ENOMEM;
	}
	m->mask = n - 1;
	for (size_t i = 0; old.slots && i <= old.mask; i++)
		if (old.slots[i].value)
			place(m, old.slots[i].key, old.slots[i].value);
	free(old.slots);
	return 0;
}

int idmap_put(struct idmap *m, uint64_t key, void *value)
{
	if (m->slots) {
		for (size_t i = home(m, key); m->slots[i].value;
		     i = (i + 1) & m->mask) {
			if (m->slots[i].key == key) {
				m->slots[i].value = value;
				return 0;
			}
		}
	}
	if (!m->slots || (m->count + 1) * 4 > (m->mask + 1) * 3) {
		int rc = grow(m);

		if (rc < 0)
			return rc;
	}
	place(m, key, value);
	m->count++;
	return 0;
}

void *idmap_del(struct idmap *m, uint64_t key)
{
	size_t i, j;
	void *value;

	if (!m->slots)
		return NULL;
	for (i = home(m, key);; i = (i + 1) & m->mask) {
		if (!m->slots[i].value)
			return NULL;
		if (m->slots[i].key == key)
			break;
	}
	value = m->slots[i].value;
	/* Pull back every later entry of the cluster whose home slot does
	 * not lie cyclically in (i, j]. */
	for (j = (i + 1) & m->mask; m->slots[j].value; j = (j + 1) & m->mask) {
		size_t h = home(m, m->slots[j].key);

		if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
			continue;
		m->slots[i] = m->slots[j];
		i = j;
	}
	m->slots[i].value = NULL;
	m->count--;
	return value;
}

int idmap_foreach(const struct idmap *m,
		  int (*fn)(uint64_t key, void *value, void *arg), void *arg)
{
	for (size_t i = 0; m->slots && i <= m->mask; i++) {
		int rc;

		if (!m->slots[i].value)
			continue;
		rc = fn(m->slots[i].key, m->slots[i].value, arg);
		if (rc)
			return rc;
	}
	return 0;
}
