/*
 * Internals shared by the chunkserver's files: the daemon's context and
 * the entry points of its parts. Everything here lives on the loop
 * thread unless a field says otherwise.
 *
 * Map:
 *   main.c         configuration, data directory locks, start-up, signals
 *   server.c       clients and peer chunkservers: TCP, framing, CS_READ,
 *                  CS_WRITE, CS_SYNC on libuv's thread pool
 *   master_link.c  the master: registration, heartbeats, commands
 *   register.c     the registration's inventory, packed
 *   server_id.c    the id the master assigned, kept in the data dirs
 *   store.c        the chunks on disk (store.h), chunkfile.c their format
 *   bgwork.c       low-priority threads for deletion and replication
 */
#ifndef SWEEPFS_CHUNKSERVER_CHUNKSERVER_I_H
#define SWEEPFS_CHUNKSERVER_CHUNKSERVER_I_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "auth.h"
#include "bgwork.h"
#include "buf.h"
#include "delpace.h"
#include "frame.h"
#include "store.h"
#include "token.h"

struct cs_config {
	char data_dirs[4096];	    /* comma-separated */
	char listen[300];	    /* HOST:PORT */
	char advertise[300];	    /* HOST:PORT for clients; "" derives it */
	char master[2048];	    /* HOST[:PORT][,HOST[:PORT]...] */
	char master_key_file[4096]; /* the master's chunkserver.key */
	uint64_t heartbeat_ms;	    /* CS_HEARTBEAT period */
	uint64_t frame_timeout_ms;  /* drop a peer stuck mid-frame */
	uint64_t send_timeout_ms;   /* drop a peer that takes no replies */
	uint64_t peer_timeout_ms;   /* drop a peer whose network died */
	uint64_t max_connections;
	uint64_t workers;	  /* libuv pool threads (disk I/O) */
	uint64_t bg_threads;	  /* deletion and replication threads */
	uint64_t open_files;	  /* idle chunk files kept open */
	uint64_t reserve;	  /* bytes left free in each data dir */
	uint64_t max_inflight;	  /* request bytes held at once, all peers */
	char metrics_listen[128]; /* HOST:PORT for /metrics, or "" */
	char log_level[16];
	/* Percent of their time the deletion threads keep however much
	 * they slow clients down (delpace.h). */
	uint64_t delete_share_min;
	/* Caps over all clients, and on peers that have not said hello. */
	uint64_t hello_timeout_ms;	/* no hello this long: closed */
	uint64_t pre_hello_max;		/* connections before hello */
	uint64_t pre_hello_per_address; /* ... from one address */
	uint64_t output_max;		/* replies not taken, per peer */
	uint64_t output_total_max;	/* ... in all */
};

struct server;
struct mlink;

/*
 * The nice of the thread that runs DELETE_BATCH: a little below the
 * clients' threads. At 19 it got a sliver of a CPU on a loaded machine
 * and fell to 200 unlinks/s; it bounds its own share while deletions
 * slow the clients down (delpace.h), so it need not sit at the very
 * bottom.
 */
#define CS_DELETE_NICE 5

/*
 * Threads that run DELETE_BATCH, as many as the master keeps batches in
 * flight (csrv.c DELQ_WINDOW). An unlink spends most of its time waiting
 * rather than computing: for a cold inode block, the journal, or (on
 * ext4 without a journal mounted with -o discard, this project's VM) a
 * synchronous discard of the freed blocks inside unlinkat() itself,
 * which perf showed as a quarter of the threads' samples. Overlapping
 * the waits is what makes them fast: 5,000 chunks on a loaded machine
 * went at 500-750/s with one thread and 2,900-3,700/s with four; on a
 * quiet one, 100,000 chunks after `rm -rf` returned drained at
 * 12,800/s with four and 18,300/s with sixteen (42 us of this process's
 * CPU per chunk either way), and a plain `rm` of the same layout with
 * 1, 4 and 16 threads made 14,900, 35,000 and 46,900 unlinks/s. Each
 * thread still keeps to its share (delpace.h) while clients are served.
 */
#define CS_DELETE_THREADS 16

struct cs {
	uv_loop_t *loop;
	struct cs_config cfg;
	struct store *store;
	struct bg *bg;	   /* replication and single deletions */
	struct bg *bg_del; /* DELETE_BATCH, apart: never ahead of a repair */
	char *const *dirs; /* the data directories */
	size_t ndirs;
	char listen_host[256];
	uint16_t listen_port;
	char advertise[300]; /* what the master tells clients */
	char name[128];	     /* host name, in hellos */
	/* The master's key for clients' tokens. Written by master_link.c
	 * on the loop; requests copy it when they are queued. And the key
	 * it replaced (a master that leads anew has a new one: token epochs,
	 * common/auth.h), which a sync still takes: a sync writes nothing,
	 * and a mount's fsync of what it wrote before the master restarted
	 * carries the token it wrote with. */
	bool has_key, has_prev_key;
	uint8_t key[SW_TOKEN_KEY], prev_key[SW_TOKEN_KEY];
	/* Proves to the master that we are one of its chunkservers, and
	 * lets it prove that it is our master (auth.h). */
	uint8_t master_key[SW_AUTH_KEY];
	/* The cluster whose chunks the data directories hold (server_id.c):
	 * a master of another one gets no registration. */
	bool has_cluster_id;
	uint8_t cluster_id[SW_CLUSTER_ID_LEN];
	struct server *srv;
	struct mlink *ml;
	struct sw_metrics *metrics;
	int64_t started_mono;
	bool stopping; /* read by worker threads: atomics */
	/* The deletion threads' share of their time, from the clients'
	 * latency (server.c feeds it, main.c ticks it). */
	struct delpace del_pace;
	/* Chunk deletions of batches: unlinked, and not there (or at a
	 * newer version). Written by the deletion thread; atomics. */
	uint64_t batch_deleted, batch_absent;
};

static inline bool cs_stopping(const struct cs *cs)
{
	return __atomic_load_n(&cs->stopping, __ATOMIC_RELAXED);
}

/* ---- server_id.c ---------------------------------------------------- */

/* Save @id, the one the master assigned, in every data directory, in the
 * background (a failure is logged). */
void cs_server_id_save(struct cs *cs, uint64_t id);

/* At start-up (before the loop): the id saved in a data directory, or 0. */
uint64_t cs_server_id_load(const struct cs *cs);

/* At start-up: cs->cluster_id (and cs->has_cluster_id) from the data
 * directories. -EINVAL (said) when two of them name different clusters. */
int cs_cluster_id_load(struct cs *cs);

/* Save cs->cluster_id in every data directory, in the background. */
void cs_cluster_id_save(struct cs *cs);

/* @id in hexadecimal, for messages. */
void cs_cluster_id_str(const uint8_t id[SW_CLUSTER_ID_LEN],
		       char out[2 * SW_CLUSTER_ID_LEN + 1]);

/* ---- server.c ------------------------------------------------------- */

/* Listen on cs->listen_host:listen_port. 0 or -errno (logged). */
int server_start(struct cs *cs);

/*
 * Stop accepting and reading; requests in progress finish and their
 * replies are sent, then each connection closes (at the latest after a
 * few seconds, see server_tick()).
 */
void server_stop(struct cs *cs);

/* Whether server_stop() has finished: every connection is closed. */
bool server_stopped(struct cs *cs);

/* Once a second: drop stalled peers. */
void server_tick(struct cs *cs);

/* ---- master_link.c -------------------------------------------------- */

/* Start connecting to the master (and keep reconnecting). 0 or -errno. */
int mlink_start(struct cs *cs);

/* Disconnect for good; commands not started are dropped. */
void mlink_stop(struct cs *cs);

/* Free the link, once the loop has stopped. */
void mlink_release(struct cs *cs);

/* Once a second: heartbeats, reconnection, timeouts. */
void mlink_tick(struct cs *cs);

/* Tell the master chunk @id at @version failed a checksum. */
void mlink_damaged(struct cs *cs, uint64_t id, uint32_t version);

/* Registered with the master now. */
bool mlink_ready(const struct cs *cs);

/*
 * The metrics endpoint (metrics.c), on cfg.metrics_listen if set; the
 * server's part of the text (server.c). 0 or -errno (logged).
 */
int cs_metrics_start(struct cs *cs);
void cs_metrics_stop(struct cs *cs);
void server_metrics(struct cs *cs, struct sw_buf *b);

#endif
