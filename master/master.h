/*
 * The master: its configuration and its context (struct master), which
 * every module's state hangs off; start, stop, checkpoints, exports.
 * Everything in it lives on the loop thread.
 *
 * Map (the namespace core at the bottom, scripts/layers.py):
 *   main.c       options, daemon, signals
 *   master.c     start-up (checkpoint + replay), housekeeping, hooks, stop
 *   server.c     connections on common/uvserver.c and wq.c: framing,
 *                reply queues held for durability, group commit
 *                (server.h)
 *   dispatch.c   the table routing each request type  (dispatch.h)
 *   req.c        what handlers use  (req.h; handlers.h lists them)
 *   session.c    sessions, open files, orphans, readdir cursors
 *   fsops.c      one handler per namespace request
 *   lockops.c    locks.c    file locks: requests, and the lock table
 *   watch.c      deleg.c    listings mounts cache; delegations
 *   dataops.c    chunk requests: locations, create, copy-on-write, leases
 *   csrv.c       chunkservers: registration, commands, paced deletion
 *   rmr.c        purge.c        instant removal and the background purge
 *   snapshot.c   snapjob.c      snapshots, the snapshot flag, rmsnapshot
 *   trashops.c   the trash's requests and expiry
 *   admin.c      status and counters
 *   group.c      a group of masters on etcd: election, the replicated
 *                changelog, followers' apply (group.h)
 *   fsck.c       the consistency check
 *   health.c     the chunk health census (status, top, /metrics)
 *   fileinfo.c   a file's chunks and a tree's summary (info, du)
 *  core (ns_core): namespace.c nspurge.c nsattr.c nscopy.c nstrash.c
 *                chunks.c mutation.c changelog.c checkpoint.c: nodes,
 *                edges, the purge's queue, xattrs, copies, the trash's
 *                items, chunk table, replay, persistence
 */
#ifndef SWEEPFS_MASTER_MASTER_H
#define SWEEPFS_MASTER_MASTER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "arena.h"
#include "auth.h"
#include "changelog.h"
#include "checkpoint.h"
#include "exports.h"
#include "htab.h"
#include "locks.h"
#include "namespace.h"
#include "uvserver.h"

/* The handlers' state, each its module's (handlers.h): struct master
 * only points to it, so that this header needs none of theirs. */
struct background;
struct csrv_table;
struct data_state;
struct health;
struct latency;
struct op_counters;
struct purge;

struct session;
struct group;
struct delegs;
struct snapper;
struct fsck_run;

struct master_config {
	char listen_host[256];
	uint64_t listen_port;
	char data_dir[4096];
	int changelog_sync; /* enum cl_sync */
	uint64_t sync_interval_ms;
	uint64_t checkpoint_interval_ms;
	uint64_t checkpoint_changes; /* also checkpoint after this many */
	uint64_t keep_checkpoints;
	uint64_t session_timeout_ms; /* keep a disconnected session */
	uint64_t frame_timeout_ms;   /* drop a peer stuck mid-frame */
	uint64_t peer_timeout_ms;    /* drop a peer whose network died */
	char metrics_listen[128];    /* HOST:PORT for /metrics, or "" */
	uint64_t max_connections;
	char log_level[16];
	uint64_t goal;		       /* copies of each chunk */
	uint64_t delete_rate;	       /* chunk deletions/s per server */
	uint64_t chunkserver_grace_ms; /* after start-up: wait for them */
	uint64_t purge_slice_us;       /* longest purge slice */
	uint64_t purge_duty;	       /* percent of the loop's time */
	uint64_t purge_duty_busy;      /* ... while clients are served */
	uint64_t snapshot_sync_max;    /* nodes a snapshot copies at once */
	char exports_file[4096];       /* exports.h; absent: open to all */
	uint64_t changelog_prealloc;   /* not a key: 0 is changelog.c's
					* default; tests take less */
	/* Chunkservers prove they hold this key (auth.h); "": the one in
	 * data_dir, made at first start. Only these addresses may try. */
	char chunkserver_key_file[4096];
	char chunkserver_allow[1024];
	/* Caps against a client that would grow the master without bound
	 * (see each key's text in main.c). */
	uint64_t max_sessions;
	uint64_t max_sessions_per_address;
	uint64_t session_idle_timeout_ms; /* a session holding nothing */
	uint64_t output_max;		  /* unsent replies per connection */
	uint64_t grants_max;		  /* files a confined session knows */
	uint64_t locks_per_session;
	uint64_t locks_per_file;
	uint64_t lock_waiters_per_session;
	uint64_t lock_waiters_per_file;
	uint64_t deleg_max;	   /* delegations one session may hold */
	uint64_t deleg_timeout_ms; /* a recall unanswered this long: gone */
	uint64_t inval_timeout_ms; /* an invalidation unacked: go on */
	/* Caps over all clients (main.c's config_caps()). */
	uint64_t hello_timeout_ms;	/* no hello this long: closed */
	uint64_t pre_hello_max;		/* connections before hello */
	uint64_t pre_hello_per_address; /* ... from one address */
	uint64_t output_total_max;	/* unsent replies, all conns */
	uint64_t locks_total;		/* held locks, all sessions */
	uint64_t lock_waiters_total;	/* blocked requests, all */
	uint64_t locks_per_ro_session;	/* on a read-only export */
	uint64_t lock_waiters_per_ro_session;
	/* A group of masters (group.h); group_id 0: this master is alone. */
	uint64_t group_id;
	char group[2048];	/* ID=HOST:PORT,... */
	char etcd[1024];	/* etcd's client endpoints, HOST:PORT,... */
	char group_prefix[128]; /* etcd keys under this */
	/* etcd's TLS and authentication (group.c); empty: none. */
	char etcd_cacert[1024];	       /* CA file: https, etcd checked */
	char etcd_cert[1024];	       /* client certificate ... */
	char etcd_key[1024];	       /* ... and its key (not world-read) */
	char etcd_user[128];	       /* etcd user: a token per member */
	char etcd_password_file[1024]; /* its password (not world-read) */
	uint64_t group_lease_ms;
	uint64_t group_log_keep;    /* versions kept past the slowest */
	uint64_t group_log_away_ms; /* a member silent this long: not */
};

/* Checkpoints in the background (master.c, checkpoint.h). */
struct checkpoints {
	struct checkpointer writer;
	uint64_t target;  /* the version the running one writes */
	uint64_t version; /* version of the newest checkpoint */
	uint64_t held;	  /* written, waiting for the group to commit */
	int64_t last;	  /* mono ns */
};

struct req_hooks;

struct master {
	/* The request layer's arrows upwards (req.h), wired at start. */
	const struct req_hooks *req_hooks;
	uv_loop_t *loop;
	struct master_config cfg;
	struct ns ns;
	struct changelog *cl;
	struct sw_server server; /* listener, connections (server.c) */
	struct sw_arena arena;	 /* the requests being handled (server.c) */
	int arena_depth;	 /* handle_frame() calls using it */
	uv_check_t check;	 /* end of each loop iteration: flush */
	uv_timer_t tick;	 /* housekeeping, once a second */
	uv_timer_t cs_tick;	 /* chunkserver pacing, every 100 ms */
	uv_timer_t wait_tick; /* bounds on waits for clients (WAIT_TICK_MS) */
	uv_timer_t resize_timer; /* hash tables growing: every 10 ms */
	uv_idle_t idle;		 /* background steps while there is work */
	uv_signal_t sig[4];
	int lock_fd; /* flock on data_dir/lock */

	/* Connections whose reading resumed with requests still buffered:
	 * the idle handle handles them in the next loop turn. */
	struct conn *consume_list;
	uv_idle_t consume_idle;
	struct exports exports;
	struct htab sessions; /* by id */
	struct session *session_list;
	uint64_t nsessions;
	struct htab session_addrs;	  /* struct addr_count by address */
	uint8_t session_key[SW_AUTH_KEY]; /* makes sessions' secrets */
	/* Keys the digest of a request that is not safe to repeat (req.h):
	 * from session_key, so the same on every member of a group. */
	uint8_t once_key[REPLIES_DIGEST];
	double reclaim_tokens;	   /* reclaim walks allowed now */
	int64_t reclaim_refill;	   /* mono ns of the last refill */
	uint64_t freed_since_trim; /* sessions freed: malloc_trim() */
	struct htab openers;	 /* struct opener by ino: sessions holding it */
	struct locks locks;	 /* file locks (memory only: see locks.h) */
	int64_t orphan_deadline; /* mono ns: unclaimed orphans go after */

	struct purge *purge;	 /* purge.h */
	struct background *bg;	 /* purge.h: slices of background work */
	struct fsck_run *fsck;	 /* the check running, if any (fsck.c) */
	struct checkpoints ckpt; /* master.c */

	/* A tree summary being counted by a child, if any (fileinfo.c). */
	struct dirinfo_run *dirinfo;

	struct snapper *snap; /* snapshots being made (snapjob.c) */
	struct group *group;  /* group.h; NULL: alone */

	struct csrv_table *cs;	 /* csrv.h: chunkservers */
	struct data_state *data; /* dataops.h: leases, waiting requests */
	struct health *health;	 /* health.h: the chunk health census */

	struct op_counters *total; /* admin.h */
	struct latency *latency;   /* admin.h */
	struct delegs *delegs;	   /* deleg.h */
	uint64_t inval_seq;	   /* invalidations sent, numbered */
	struct session *owing;	   /* sessions owing an ack of one */
	uint64_t inval_timeouts;   /* acks given up on */
	/* Once a second (on_tick): for rates over the last few seconds. */
	struct rate_sample {
		int64_t t; /* mono ns */
		uint64_t requests;
		uint64_t purged;
	} rates[11];
	unsigned nrates;    /* samples taken, in all */
	int64_t started_at; /* wall ns */
	int64_t started_mono;
	/* ns.next_ino once the metadata was loaded, and when (mono ns):
	 * numbers below it that batches resent after the restart use were
	 * handed out before it, for session_timeout after (fsops.c). */
	uint64_t boot_next_ino;
	int64_t loaded_mono;

	bool stopping;
	uint64_t closed_durable; /* changelog_durable() as it closed */
};

/*
 * Allocate the handlers' state @m points to (struct master's pointers
 * above), zeroed, in one block: 0 or -ENOMEM. master_start() does it; a
 * test that builds a master by hand calls it first, and
 * master_parts_free() at the end.
 */
int master_parts_new(struct master *m);
void master_parts_free(struct master *m);

/* Fill @c with the defaults of every configuration key. */
void master_config_defaults(struct master_config *c);

/*
 * Wire @m's request layer to the server, the group and the delegations
 * (struct req_hooks). master_start() does it; a test that builds a master
 * by hand calls it before handling a request.
 */
void master_wire_requests(struct master *m);

/*
 * Start the master described by m->cfg on @loop (the rest of @m zeroed):
 * load the newest checkpoint and replay the changelog in cfg.data_dir,
 * open a new changelog file, load the exports, listen, start the timers,
 * the purge and the clean-up of an interrupted snapshot. The caller holds
 * the data directory's lock. Returns 0, or -errno (logged); after a
 * failure @m is half-started and good only for exiting.
 */
int master_start(struct master *m, uv_loop_t *loop);

/*
 * Begin a clean stop: give up snapshot copies, flush and close the
 * changelog, send what replies remain and close every connection, stop
 * the timers and the purge. The loop runs out once they are closed; then
 * master_release(). A second call does nothing.
 */
void master_stop(struct master *m);

/* Once the loop has run out after master_stop(): write the final
 * checkpoint, and free what master_start() built. */
void master_release(struct master *m);

/*
 * (Re)load cfg.exports_file: a missing file opens everything to everyone;
 * a broken one keeps the exports in force. 0 or -errno (logged).
 */
int master_load_exports(struct master *m);

/* Start a checkpoint now if none is running. */
void master_checkpoint(struct master *m);

/*
 * Begin serving as the leader of a group (group.c calls it once the log
 * is applied): the jobs only the leader runs start, and carry on from
 * where the log says they were. master_start() does the same for a
 * master alone.
 */
void master_lead(struct master *m);

/*
 * A follower of a group replaces its namespace with the newest checkpoint
 * in its data directory, one it read from the leader (catchup.h): the
 * changelog is closed, the namespace loaded again, and a new changelog
 * started after it. Not while a checkpoint is being written, nor once
 * it leads (nothing else may hold a node). 0 or -errno (logged).
 */
int master_reload(struct master *m);

#endif
