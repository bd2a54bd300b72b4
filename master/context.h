/*
 * The master's context, struct master, and its configuration: what every
 * module reaches through the request it handles (req->m). Only the
 * definitions, in the request layer (scripts/layers.py), so that a
 * handler needing the context depends on nothing above it; starting,
 * stopping and leading the master are master.h's, at the top.
 *
 * It holds the state of the layers up to the request layer by value
 * (the namespace, the changelog's pointer, the file locks, the exports,
 * the connections' server) and the handlers' state only by pointer, each
 * handler's type forward-declared: a handler's header is included by
 * those that use it, never through here.
 */
#ifndef SWEEPFS_MASTER_CONTEXT_H
#define SWEEPFS_MASTER_CONTEXT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "arena.h"
#include "auth.h"
#include "bucket.h"
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
struct sw_prefault;
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
	int changelog_sync;   /* enum cl_sync */
	int changelog_writer; /* 0: auto, 1: thread (changelog_opts) */
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
	uint64_t stray_grace_ms;       /* keep unknown chunk files this long */
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
	uint64_t group_disk_timeout_ms;
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
	bool pruning;	  /* old files being removed (master.c) */
	/* The slabs' and tables' pages being made huge again after a
	 * child (master.c, slab_collapse()); NULL while none is. */
	struct collapse *collapse;
	/* mono ns a checkpoint was first found due while a collapse ran
	 * (master_checkpoint_waits()); 0: not since the last started. */
	int64_t due_at;
	/* ns_replay_work() when the newest was taken, and when the running
	 * (or held) one was: replaying what came after the newest costs
	 * ns_replay_work() - work (master_checkpoint_due()). */
	uint64_t work;
	uint64_t target_work;
	int64_t fork_ns;   /* how long the running one's fork took */
	int64_t rotate_ns; /* ... and the changelog's rotation before it */
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
	uv_timer_t wait_tick;	 /* bounds on waits for clients (WAIT_TICK_MS),
			       * while there are any: master_wait_arm() */
	int64_t polled_at;	 /* server_answers_seen() */
	uv_timer_t resize_timer; /* hash tables growing: every 10 ms */
	/* Faults the slab's next region in on another core, so that the
	 * loop never zeroes a fresh 2 MiB itself (slab_prefault_next()). */
	struct sw_prefault *prefault;
	uv_idle_t idle; /* background steps while there is work */
	uv_signal_t sig[4];
	int lock_fd; /* flock on data_dir/lock */

	/* Connections whose reading resumed with requests still buffered:
	 * the idle handle handles them in the next loop turn. */
	struct exports exports;
	struct htab sessions; /* by id */
	struct session *session_list;
	uint64_t nsessions;
	struct htab session_addrs;	   /* struct addr_count by address */
	uint8_t session_key[SW_AUTH_KEY];  /* makes sessions' secrets */
	uint8_t handle_key[SW_HANDLE_KEY]; /* node handles, from it */
	/* Keys the digest of a request that is not safe to repeat (req.h):
	 * from session_key, so the same on every member of a group. */
	uint8_t once_key[REPLIES_DIGEST];
	struct bucket reclaims;	   /* reclaim walks allowed (session.c) */
	struct bucket rmr_visits;  /* users' rmr checks, in all (rmr.h) */
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
	int64_t dirinfo_forked; /* mono ns of its last fork; 0: none yet */

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
	uint64_t inval_overflows;  /* notices past SERVER_NOTICES_MAX */
	int64_t behind_logged;	   /* mono ns, the last said */
	/* Once a second (on_tick): for rates over the last few seconds. */
	struct rate_sample {
		int64_t t; /* mono ns */
		uint64_t requests;
		uint64_t purged;
	} rates[11];
	unsigned nrates;    /* samples taken, in all */
	int64_t started_at; /* wall ns */
	int64_t started_mono;
	/* When the metadata was loaded, or this member came to lead (mono
	 * ns): delegations wait a lease after it (deleg.c). */
	int64_t loaded_mono;

	bool stopping;
	uint64_t closed_durable; /* changelog_durable() as it closed */
};

/*
 * Something now waits on a client (a recall sent, an invalidation ack
 * owed): the wait tick (master.c) runs while anything does and stops
 * when nothing does, so that an idle master is not woken every
 * WAIT_TICK_MS. The first tick comes a tick from now. Nothing before
 * the tick was first started (tests; the master before it runs:
 * uv_timer_again() says EINVAL), nor once it is closing (libuv's
 * uv_timer_start() refuses a closing handle).
 */
static inline void master_wait_arm(struct master *m)
{
	if (!uv_is_active((const uv_handle_t *)&m->wait_tick))
		(void)uv_timer_again(&m->wait_tick);
}

#endif
