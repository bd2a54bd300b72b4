/*
 * Chunks in the namespace: which chunk holds each 64 MiB slot of a file,
 * each chunk's version and reference count, and (not journaled, rebuilt
 * from chunkserver registrations) which servers hold a copy.
 *
 * A file's slots live in a struct ctab hanging off its node. A chunk is
 * referenced once per slot that names it; snapshots make several slots
 * share one chunk, and a write to a shared chunk first copies it. When
 * the last reference goes, ns->chunk_gone() is told (so that the copies
 * get deleted on their chunkservers) and the chunk is freed.
 *
 * Like the rest of the namespace: loop thread only, no policy, every
 * change either completes or changes nothing, and replays identically.
 */
#ifndef SWEEPFS_MASTER_CHUNKS_H
#define SWEEPFS_MASTER_CHUNKS_H

#include <stdbool.h>
#include <stdint.h>

struct ns;
struct node;

#define CHUNK_COPIES_MAX 8

/* chunk_copy.state */
#define COPY_VALID 1   /* has the chunk's current version */
#define COPY_STALE 2   /* an older version: to be deleted */
#define COPY_DAMAGED 3 /* failed a checksum: to be deleted */
#define COPY_PENDING 4 /* being created or replicated */
#define COPY_BEHIND 5  /* one version behind a change not done: kept */

struct chunk_copy {
	uint32_t srv;	  /* chunkserver id (master/csrv.c) */
	uint32_t version; /* the version that server has */
	uint8_t state;	  /* COPY_* */
};

struct chunk_wait;

struct chunk {
	uint64_t id;
	uint32_t version;
	uint32_t refs; /* file slots naming this chunk */
	uint8_t ncopies;
	uint8_t busy; /* chunkserver commands in flight */
	/* Copies wanted: the highest goal of the files naming it, and
	 * CHUNK_GOAL_DEFAULT if one of them has the default. While shared
	 * it only goes up; loading a checkpoint works it out afresh. */
	uint8_t goal;
	uint8_t leased : 1;	  /* on m->data->leased (master/dataops.c) */
	uint8_t revoke_quiet : 1; /* revoke_from's failure gives nothing up */
	/* A lease at this version is to be taken back once the commands in
	 * flight end (revoke_one(), master/dataops.c), or 0. */
	uint32_t revoke_from;
	uint64_t lease_session; /* writer holding the write lease, or 0 */
	int64_t lease_until;	/* mono ns */
	struct chunk_copy copies[CHUNK_COPIES_MAX];
	struct chunk_wait *waiters; /* requests waiting for busy == 0 */
};

#define CHUNK_GOAL_DEFAULT 0x80

/* A file with goal @goal (0: the default) names @c now. */
static inline void chunk_goal_add(struct chunk *c, unsigned goal)
{
	if (!goal)
		c->goal |= CHUNK_GOAL_DEFAULT;
	else if (goal > (c->goal & 0x7fu))
		c->goal = (uint8_t)((c->goal & CHUNK_GOAL_DEFAULT) | goal);
}

/* Copies wanted of @c, given the master's default goal @dflt. */
static inline unsigned chunk_goal(const struct chunk *c, unsigned dflt)
{
	unsigned g = c->goal & 0x7fu;

	if ((c->goal & CHUNK_GOAL_DEFAULT) && dflt > g)
		g = dflt;
	return g ? g : dflt;
}

/* A file's chunk slots; id 0 is a hole. */
struct ctab {
	uint32_t n;
	uint64_t id[];
};

/*
 * A chunk change journaled before the chunkservers made it (dataops.c):
 * a new chunk (ChunkSet), or a new version (ChunkVersion), until the
 * record that says it was done. No data has been written under it, so
 * after a crash it can be made again from what the servers still have:
 * copies one version behind are moved forward, a new chunk that reached
 * no server is made afresh. Entries are few (the jobs in flight) and
 * live beside the chunks, not in them.
 */
#define INTENT_CREATE 1
#define INTENT_DUPLICATE 2
#define INTENT_BUMP 3

struct chunk_intent {
	uint64_t id;
	uint32_t version; /* what the change establishes */
	uint8_t kind;	  /* INTENT_* */
	uint32_t src_version;
	uint64_t src;	/* INTENT_DUPLICATE: the chunk copied */
	int64_t length; /* cut to this many bytes, or -1 */
};

/* Record @in (replacing the chunk's previous one). -ENOMEM. */
int ns_intent_note(struct ns *ns, const struct chunk_intent *in);

/* Chunk @id's change to @version was made: forget its intent. */
void ns_intent_done(struct ns *ns, uint64_t id, uint32_t version);

const struct chunk_intent *ns_intent_get(const struct ns *ns, uint64_t id);

/* Call @fn for every intent (it must not add or remove any). */
int ns_intents_foreach(const struct ns *ns,
		       int (*fn)(const struct chunk_intent *in, void *arg),
		       void *arg);

/* Chunk-id space and table; called by ns_init/ns_release. */
void chunks_init(struct ns *ns);
void chunks_release(struct ns *ns);

struct chunk *chunk_get(const struct ns *ns, uint64_t id);

/* Set chunk @id's version. -ENOENT if there is no such chunk. */
int chunk_set_version(struct ns *ns, uint64_t id, uint32_t version);

/* The chunk id in slot @index of file @n, 0 for a hole. */
uint64_t ns_chunk_at(const struct node *n, uint32_t index);

/* Number of slots of file @n (past the last: holes). */
uint32_t ns_chunk_slots(const struct node *n);

/*
 * Point slot @index of file @n at a new chunk @id at @version (one
 * reference); the chunk the slot held loses one. Returns 0, -EEXIST if
 * chunk @id exists, -EINVAL if @n is not a regular file, -ENOMEM.
 */
int ns_chunk_set(struct ns *ns, struct node *n, uint32_t index, uint64_t id,
		 uint32_t version);

/* Drop the slots wholly past @size bytes. */
void ns_chunks_truncate(struct ns *ns, struct node *n, uint64_t size);

/* Drop every slot of @n (it is being freed). */
void ns_chunks_drop(struct ns *ns, struct node *n);

/*
 * Checkpoint loading: chunk @id at @version with no references yet, then
 * ns_load_slots() gives files their slots (and the chunks references).
 */
int ns_load_chunk(struct ns *ns, uint64_t id, uint32_t version);
int ns_load_slots(struct ns *ns, struct node *n, uint32_t count,
		  const uint64_t *ids);

/*
 * Snapshots in progress (nscopy.c): a chunk numbered below the copy's
 * start is frozen (ns_chunk_frozen(), namespace.h), i.e. the image being copied may name it, so it must
 * not be written in place (the data path duplicates it first). A frozen
 * chunk losing its last reference is held until the copy ends, then
 * ns_chunk_unhold() frees it if nothing took it.
 */
void ns_chunk_unhold(struct ns *ns, uint64_t id);

/*
 * Whether chunk @id is gone for good in this metadata: numbered below
 * next_chunk_named (a change of this metadata named it), and neither in
 * the table nor in an intent. Chunk ids are handed out in increasing
 * order, each journaled with the change that names it, and never again
 * once freed: no later change of this metadata can bring such a chunk
 * back, so a copy of it is deleted at once, without stray_grace. A file
 * held by a snapshot being copied, in the trash, being written or
 * created is in the table: never dead. An id at or above
 * next_chunk_named is unknown, not dead: a master behind (restarted on
 * old metadata) may not have seen the change that names it. Nor is an
 * id the master skipped for a reported unknown file (csrv.c raises
 * next_chunk), even once a later chunk is named: this metadata will
 * never name it, but the metadata that made the file (a newer copy an
 * operator restores) may, so its files wait stray_grace as before.
 */
bool ns_chunk_dead(const struct ns *ns, uint64_t id);

/* Ids [@lo, @hi) were never named by this metadata (the checkpoint's
 * 'U' record, or a gap before a chunk a change named). */
void ns_chunk_unnamed(struct ns *ns, uint64_t lo, uint64_t hi);

/* After loading: forget chunks no slot names (nothing references them;
 * they are dead, ns_chunk_dead(), and their copies are deleted when
 * their servers register). */
void chunks_drop_unreferenced(struct ns *ns);

/* For the checkpoint: call @fn for every chunk. */
int chunks_foreach(const struct ns *ns, int (*fn)(void *chunk, void *arg),
		   void *arg);

#endif
