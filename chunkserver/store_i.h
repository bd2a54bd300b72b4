/*
 * Internals shared by store.c (operations, cache, space) and
 * store_scan.c (the start-up scan).
 */
#ifndef SWEEPFS_CHUNKSERVER_STORE_I_H
#define SWEEPFS_CHUNKSERVER_STORE_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "chunkfile.h"
#include "idmap.h"
#include "store.h"

/*
 * Locks are striped by chunk id: a chunk's rwlock is stripes[id %
 * STORE_STRIPES]. Two chunks sharing a stripe only wait for each other
 * now and then, and a chunk costs no lock memory of its own.
 */
#define STORE_STRIPES 1024u

struct stripe {
	pthread_rwlock_t rw;  /* reads share, everything else excludes */
	pthread_mutex_t open; /* opening a chunk's file lazily */
};

enum chunk_state {
	CHUNK_CREATING, /* id reserved by create/duplicate/import */
	CHUNK_READY,
};

/*
 * One chunk of the inventory.
 *
 * Lock rules:
 *  - state, users, the LRU links and the map entry: store lock.
 *  - meta: changed only with the stripe held exclusively AND the store
 *    lock (so the inventory may read it under the store lock alone, and
 *    operations under the stripe alone).
 *  - gone: set with the stripe held exclusively and the store lock; a
 *    chunk that is gone is out of the map and freed by its last user.
 *  - f: while users > 0, set by its user under stripe->open; while
 *    users == 0, owned by the store lock (the cache may close it).
 *  - damaged: relaxed atomics.
 */
struct chunk {
	struct cf_meta meta;
	uint16_t dir;  /* index in store->dirs */
	uint8_t state; /* enum chunk_state */
	bool gone;     /* deleted or replaced */
	bool damaged;
	uint32_t users;			   /* operations holding the chunk */
	struct cf_file *f;		   /* open file, or NULL */
	struct chunk *lru_prev, *lru_next; /* idle chunks with a file open */
};

struct store_dir {
	char *path;
	int fd;	   /* O_DIRECTORY, for the *at() calls */
	dev_t dev; /* file systems are counted once */
	/* store lock: */
	uint64_t total;	 /* bytes, as of the last statvfs */
	uint64_t avail;	 /* bytes free for us, minus placements since */
	uint64_t chunks; /* chunks in this directory */
	uint64_t bytes;	 /* their logical bytes */
};

struct store {
	pthread_mutex_t lock; /* the store lock: see struct chunk */
	struct idmap map;     /* chunk id -> struct chunk */
	struct chunk *lru_head, *lru_tail; /* most recently used first */
	unsigned nopen;			   /* chunks with f set */
	unsigned max_open;
	uint64_t reserve;
	struct store_dir *dirs;
	size_t ndirs;
	struct stripe stripes[STORE_STRIPES];
};

/* store_scan.c: fill @s->map from the directories. 0 or -errno. */
int store_scan(struct store *s);

/* "xx/chunk_<id>_<version>.swc" plus @suffix ("" or ".tmp"). */
void store_name(char *buf, size_t len, uint64_t id, uint32_t version,
		const char *suffix);

/* fsync the directory holding chunk @id in @dir. 0 or -errno. */
int store_sync_subdir(struct store_dir *dir, uint64_t id);

#endif
