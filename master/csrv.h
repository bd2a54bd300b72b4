/*
 * Chunkservers as the master sees them: who is connected, their space,
 * which chunk copies they hold (kept in struct chunk), commands sent to
 * them, and the queue of copies to delete, which is drained at a bounded
 * rate per server so that removing millions of files floods nobody.
 *
 * Commands go out as notification frames (SW_MSG_CS_COMMAND) and complete
 * when the server answers with a done request carrying the command's id,
 * or fail when the server disconnects or takes longer than
 * CSRV_CMD_TIMEOUT. Nothing here blocks.
 */
#ifndef SWEEPFS_MASTER_CSRV_H
#define SWEEPFS_MASTER_CSRV_H

#include <stdbool.h>
#include <stdint.h>

#include "auth.h"
#include "chunks.h"
#include "exports.h"
#include "htab.h"
#include "sweepfs.pb-c.h"
#include "token.h"

struct master;
struct conn;
struct req;
struct csrv;

#define CSRV_MAX 1024
#define CSRV_CMD_TIMEOUT_MS 30000
#define CSRV_DELQ_ENTRY 3 /* words per queued deletion */
/* DELETE_BATCH commands in flight per server: the chunkserver runs as
 * many at once (CS_DELETE_THREADS), which overlaps the unlinks that wait
 * on the disk (most of them, on a file system that discards inline);
 * more would only make acknowledgements later. At most 8,192 chunks
 * (window x batch) are in flight per server. */
#define CSRV_DELQ_WINDOW 16
/* Deletions per DELETE_BATCH: a few milliseconds of unlinks on an idle
 * disk, so that the pending counts move smoothly and a stalled journal
 * holds few acknowledgements back; the protocol allows up to
 * SW_DELETE_BATCH_MAX. */
#define CSRV_DELQ_BATCH 512u

/* Per-server state; servers are never freed, only disconnected. */
struct csrv {
	uint32_t id;	    /* index in the master's table, from 1 */
	uint64_t server_id; /* the server's persistent identity */
	char listen[128];   /* "host:port" clients connect to */
	struct conn *conn;  /* NULL while disconnected */
	bool going;	    /* conn marked to be closed (csrv_going()) */
	uint64_t total_bytes;
	uint64_t used_bytes;
	uint64_t chunks;	  /* copies it holds, by our count */
	uint64_t reported_chunks; /* chunk files it says it has */
	int64_t reported_at;	  /* mono ns of that report (heartbeat) */
	int64_t changed_at;	  /* mono ns of the last command sent or done */
	int64_t last_seen;	  /* mono ns */
	uint64_t *delq; /* CSRV_DELQ_ENTRY words each: chunk id, version,
			   metadata version that must be durable first */
	size_t delq_len, delq_cap, delq_head;
	uint64_t deleted;      /* deletions acknowledged */
	uint64_t del_inflight; /* deletions sent, not yet acknowledged */
	uint32_t del_batches;  /* DELETE_BATCH commands in flight */
	uint32_t inflight;     /* commands not yet done */
	uint32_t replicating;  /* of which replications */
	double delete_credit;  /* token bucket for paced deletions */
	/* Unknown chunk files it reported, oldest first from strays_head. */
	struct csrv_stray *strays;
	size_t strays_len, strays_cap, strays_head;
};

/* A chunk file a server reported that the master does not know (an
 * orphan): deleted when its grace (stray_grace) ends if the master still
 * does not know it. */
struct csrv_stray {
	uint64_t chunk;
	uint32_t version;
	int64_t due; /* mono ns */
};

/* The master's chunkservers (struct master's cs). */
struct csrv_table {
	struct csrv *srv[CSRV_MAX + 1]; /* by id, 1..CSRV_MAX */
	uint32_t n;			/* ids given out */
	struct htab cmds;		/* commands in flight, by id */
	uint64_t next_cmd;
	uint8_t token_key[SW_TOKEN_KEY]; /* signs chunk access tokens */
	uint8_t token_base[SW_AUTH_KEY]; /* token.key: derives token_key */
	uint64_t token_epoch;		 /* token_key's (csrv_token_epoch()) */
	int64_t epoch_at;		 /* mono ns: when it began */
	uint64_t pending_deletes;
	uint64_t repl_cursor;
	uint8_t key[SW_AUTH_KEY];     /* chunkservers prove it */
	struct export_addr allow[64]; /* and come from these */
	size_t nallow;
};

typedef void (*csrv_cb)(struct master *m, void *arg, uint32_t srv, int rc);

int csrvs_init(struct master *m);
void csrvs_release(struct master *m);

/* The server with table id @id, or NULL. */
struct csrv *csrv_get(struct master *m, uint32_t id);

static inline bool csrv_up(const struct csrv *s)
{
	return s && s->conn && !s->going;
}

/* Its request handlers are in handlers.h. */

/* @c, a chunkserver's connection, closed: fail its commands. */
void csrv_detach(struct master *m, struct conn *c);
/* @c, a chunkserver's connection, is marked to be closed (out of
 * memory for it: sw_sconn_shed()): the server counts as down from now
 * on, while its commands wait for csrv_detach() to fail them. */
void csrv_going(struct master *m, struct conn *c);

/*
 * Send @cmd (its id is set here) to server @srv; @cb runs once with the
 * outcome. Returns 0, or -errno (-ENOTCONN: server down) and @cb does not
 * run.
 */
int csrv_command(struct master *m, uint32_t srv, Sweepfs__CsCommand *cmd,
		 csrv_cb cb, void *arg);

/*
 * Pick up to @n connected servers for new copies, most free space first,
 * none of the @nx in @exclude. Returns how many were put in @out.
 */
int csrv_choose(struct master *m, uint32_t *out, int n, const uint32_t *exclude,
		int nx);

/* Queue deletion of @chunk at @version (and older) on server @srv. */
void csrv_queue_delete(struct master *m, uint32_t srv, uint64_t chunk,
		       uint32_t version);

/*
 * Send what of @s's deletion queue its window of DELETE_BATCH commands and
 * delete_rate allow now (the tick refills delete_rate's bucket).
 */
void csrv_drain_deletions(struct master *m, struct csrv *s);

/* Deletions for @s not yet acknowledged: queued and in flight. */
static inline uint64_t csrv_deletes_pending(const struct csrv *s)
{
	return (s->delq_len - s->delq_head) / CSRV_DELQ_ENTRY + s->del_inflight;
}

/* Unknown chunk files @s reported that wait out their grace. */
static inline uint64_t csrv_strays(const struct csrv *s)
{
	return s->strays_len - s->strays_head;
}

/* ns->chunk_gone hook: queue deletion of every copy of @c. */
void csrv_chunk_gone(void *arg, const struct chunk *c);

/* Paced deletions, command timeouts, replication; every 100 ms. */
void csrvs_tick(struct master *m);

/* How long a token lasts: a writer may write in place with one for
 * that long after it was handed out, without asking again (dataops.c
 * takes a lease back while one may). */
#define CSRV_TOKEN_TTL_MS (10 * 60 * 1000)

/*
 * Start a token epoch of this master's own (auth.h, sw_token_epoch_key()):
 * called when it starts to lead, before any chunkserver registers with
 * it. Tokens granted before (by this master in an earlier lead, or by
 * another) are refused by every chunkserver registered since: their
 * writers' leases were not carried over, and a snapshot would not take
 * them back (threat model, finding 20). Their holders ask again.
 */
void csrv_token_epoch(struct master *m);

/*
 * How long (ns) a snapshot is still to wait after the token epoch began,
 * or <= 0: a chunkserver not registered again since still takes the
 * tokens of before, so a writer's in-place writes could reach a chunk a
 * copy shares. Chunkservers come back within seconds of a master
 * (chunkserver/master_link.c), and are waited for chunkserver_grace.
 */
int64_t csrv_epoch_wait_ns(const struct master *m);

/* A token for @mode access to @chunk at @version, with its expiry. */
void csrv_token(struct master *m, uint64_t chunk, uint32_t version,
		enum sw_token_mode mode, uint8_t out[SW_TOKEN_LEN],
		uint64_t *expires_ms);

/* Space over connected servers, and bytes waiting to be deleted. */
void csrvs_space(struct master *m, uint64_t *total, uint64_t *avail,
		 uint64_t *pending_delete);

/* Copies that hold @c's current version on connected servers. */
int csrv_valid_copies(struct master *m, const struct chunk *c);

#endif
