/*
 * Chunk requests (dataops.c): locations, create, copy-on-write, write
 * leases, truncation through the chunkservers.
 */
#ifndef SWEEPFS_MASTER_DATAOPS_H
#define SWEEPFS_MASTER_DATAOPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chunks.h"
#include "namespace.h"
#include "req.h"

struct master;
struct job;

/* What dataops.c keeps between requests. */
struct data_state {
	/* Chunks with a write lease out, to end them all at a snapshot. */
	struct leased {
		uint64_t *id;
		size_t n, cap;
	} leased;
	/* Leased chunks a snapshot's copy took, their leases to be taken
	 * back once its part is applied (data_chunk_shared()); and whether
	 * one could not be noted (then all are). */
	struct leased shared;
	bool shared_lost;
	int64_t pruned_at; /* mono ns: the last data_prune_leases() */
	struct job *held;  /* requests waiting for copies to appear */
	/* Requests that waited on a chunk that was freed: run again at the
	 * next data_tick(), from their file (not from inside the change
	 * that freed it). */
	struct job *orphans;
	uint64_t revoking; /* lease revocations in flight */
	uint64_t revoked;  /* leases taken back since start */
	/* Why a lease could not be taken back (no valid copy up to move
	 * on, the journal refused, every command failed, no memory) since
	 * the last snapshot ended, or 0: the next to end is given up, as
	 * the writer's token may still write in place into a chunk it
	 * shares (snapjob.c). And since when (mono ns) a lease may be
	 * missing from `leased` (no memory to note it), or 0. */
	int revoke_failed;
	int64_t leased_lost_at;
	/* Until then (mono ns) a chunk with no copy may still be reported
	 * by a chunkserver that has not registered again since start-up:
	 * requests for it wait, and changes a crash cut short are redone
	 * only after. */
	int64_t settle_at;
	bool settled;
};

/*
 * @r's setattr changed @n's size from @old_size (already committed). If
 * chunkservers must cut the last chunk, the reply waits for them: returns
 * 0 and answers @r later. Returns 1 when the caller should reply now, or
 * -errno.
 */
int data_truncated(struct req *r, struct node *n, uint64_t old_size);

/*
 * Whether a writer may still write @c in place: its lease's token may
 * outlive the lease (CSRV_TOKEN_TTL_MS against 60 s), and a mount writes
 * with a token it holds without asking again. Replication, trimming and
 * snapshots must treat the chunk as written until then.
 */
bool lease_writable(const struct chunk *c, int64_t now);

/* Grant or renew @session's write lease on @c, and note @c (once) on
 * m->data->leased. */
void data_lease(struct master *m, struct chunk *c, uint64_t session);

/* Drop from m->data->leased the chunks whose token can no longer write;
 * data_tick() does it every few seconds. */
void data_prune_leases(struct master *m);

/* End every write lease whose token may still write (a snapshot too
 * big to copy at once begins: which files it covers is known only as
 * its child streams them); m->revoking counts the version bumps this
 * starts until they finish, m->revoked counts them all. One that cannot
 * be ended stays, for the part that takes its chunk to try again. */
void data_revoke_leases(struct master *m);

/* ns->chunk_shared hook (@arg: the master): a snapshot's copy took @c;
 * its lease is noted, to be ended by data_revoke_shared(). */
void data_chunk_shared(void *arg, struct chunk *c);

/* After a snapshot's part is applied: end the leases of the chunks it
 * took (all leases, if one could not be noted), as data_revoke_leases()
 * does. */
void data_revoke_shared(struct master *m);

/* @c is being freed (the chunk_gone hook): a revocation it waited for
 * is off, and requests that waited for its commands look again at the
 * next data_tick(). */
void data_chunk_gone(struct master *m, const struct chunk *c);

/* A chunkserver registered: requests waiting for copies look again. */
void data_registered(struct master *m);

/* Shutting down: requests held for chunkservers fail with EIO. */
void data_stop(struct master *m);

/* Every tick: the end of the grace period after start-up. */
void data_tick(struct master *m);

/*
 * A server reported a copy of @c, which has a change in flight that was
 * not done (chunks.h) and no commands running: redo it if it can be. At
 * once after the grace period; before, data_tick() does it.
 */
void data_redo(struct master *m, struct chunk *c);

#endif
