/*
 * Internals shared by the master's files: the master context, connections,
 * sessions and requests. Everything here lives on the loop thread.
 *
 * Map:
 *   main.c       options, daemon, signals
 *   master.c     start-up (checkpoint + replay), housekeeping, stop
 *   server.c     TCP, framing, dispatch, reply queues, group commit
 *   session.c    sessions, open files, orphans, readdir cursors
 *   lockops.c    locks.c    file locks: requests, and the lock table
 *   fsops.c      one handler per namespace request
 *   watch.c      listings mounts cache, and their invalidation
 *   dataops.c    chunk requests: locations, create, copy-on-write, leases
 *   csrv.c       chunkservers: registration, commands, paced deletion
 *   rmr.c        purge.c        instant removal and the background purge
 *   snapshot.c   snapjob.c      snapshots, the snapshot flag, rmsnapshot
 *   trash.c      the trash
 *   admin.c      status and counters
 *   fsck.c       the consistency check
 *   mutation.c   apply a journaled change (live and replay)
 *   namespace.c  nscopy.c  chunks.c   nodes, edges, copies, chunk table
 *   changelog.c  checkpoint.c   persistence
 */
#ifndef SWEEPFS_MASTER_MASTER_I_H
#define SWEEPFS_MASTER_MASTER_I_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "buf.h"
#include "changelog.h"
#include "csrv.h"
#include "exports.h"
#include "frame.h"
#include "htab.h"
#include "locks.h"
#include "meta.pb-c.h"
#include "namespace.h"
#include "perm.h"
#include "req.h"
#include "deleg.h"
#include "watch.h"

struct master;
struct session;

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
};

/* A reply waiting for the changelog to be durable up to its version. */
struct held_mark {
	uint64_t version;
	uint64_t inval; /* invalidations sent up to this must be acked */
	size_t size;	/* bytes of this reply at the head of conn->held */
};

/* One TCP connection. Freed in its close callback. */
struct conn {
	uv_tcp_t tcp;
	struct master *m;
	struct session *s;	      /* after a successful hello */
	char peer[64];		      /* "addr:port" */
	struct sockaddr_storage addr; /* the peer's, for the exports */
	uint8_t nonce[16]; /* password challenge sent, if nonce_set */
	bool nonce_set;
	struct sw_buf in;   /* received, not yet parsed */
	struct sw_buf out;  /* replies ready to send */
	struct sw_buf wbuf; /* being written by uv_write */
	uv_write_t wreq;
	bool writing; /* wreq in flight */
	bool closing;
	bool paused; /* reading stopped: too much output queued */
	bool in_flush_list;
	bool in_consume_list;  /* holds a reference */
	size_t unauth_counted; /* in m->unauth_bytes */
	struct sw_buf held;    /* replies waiting for durability */
	struct held_mark *marks;
	size_t nmarks, marks_cap, marks_head;
	int64_t partial_since;	   /* mono ns: start of an incomplete frame */
	int refs;		   /* 1 while open, +1 per deferred request */
	uint32_t csrv;		   /* chunkserver id, for that role */
	struct conn *next, *prev;  /* all connections */
	struct conn *flush_next;   /* conns with output to flush */
	struct conn *consume_next; /* conns with requests to resume */
	/* Waiting for a delegation to come back before its next request
	 * (deleg.h): reading goes on, handling does not. */
	struct deleg *parked;
	struct conn *park_next;
};

/* Counters kept per session and in total (sweepfs stats). */
struct op_counters {
	uint64_t requests[SW_MSG__COUNT];
	uint64_t errors;
	uint64_t bytes_in;
	uint64_t bytes_out;
	uint64_t readdir_entries;
	uint64_t invalidations; /* listings invalidated (sent) */
	uint64_t batch_ops;	/* operations applied from batches */
};

/* A readdir position a session keeps per directory (DESIGN: cursor cache). */
struct sess_cursor {
	uint64_t dir_ino;
	uint64_t last_used; /* session-local clock for LRU */
	struct cursor c;
};

#define SESSION_CURSORS 64

struct session {
	uint64_t id;
	int role;	   /* SWEEPFS__ROLE__* */
	struct conn *conn; /* NULL while disconnected */
	uint64_t root_ino; /* the exported subtree's root */
	char peer[64];
	char name[128]; /* client host/process, from the hello */
	/* What its export allows (exports.h); set at each hello. */
	struct sockaddr_storage addr;
	char *subdir; /* as asked for, normalized (malloc'd) */
	bool rw;
	bool admin;
	uint32_t maproot_uid, maproot_gid;
	uint32_t mapall_uid, mapall_gid;
	bool authed;		  /* proved the export's password */
	uint8_t key[SW_AUTH_KEY]; /* the one it proved */
	char export_text[200];	  /* "PATH OPTIONS" for status */
	int64_t connected_at;	  /* wall ns */
	int64_t detached_at;	  /* mono ns, while disconnected */
	struct htab opens;	  /* struct sess_open by ino */
	/* A session confined to a subtree: the non-directories a reply
	 * has named to it, which it may use (req_node()). Inode numbers
	 * stored as the pointers themselves. */
	struct htab granted;
	uint64_t grants_max; /* cfg.grants_max when it began */
	/* SESSION_CURSORS of them, allocated by the first listing: a
	 * session that never lists costs nothing for them. */
	struct sess_cursor *cursors;
	uint64_t cursor_clock;
	bool may_reclaim;      /* proved its secret: may claim open files */
	bool reclaim_walked;   /* grant_reclaimed() ran in this life */
	struct watch *watches; /* directories it caches, newest first */
	struct watch *watches_tail;
	uint32_t nwatches;
	uint32_t ndelegs; /* directories delegated to it (deleg.h) */
	/* Invalidations (watch.c) sent to it and acknowledged, by the
	 * master's sequence; while it owes some it is on m->owing. */
	uint64_t inval_sent, inval_acked;
	int64_t owing_since; /* mono ns */
	struct session *owe_next, *owe_prev;
	bool owing;
	bool inval_lax;	   /* let an ack time out: never waited for again */
	uint32_t cache_ms; /* Hello.cache_ms: its kernel's name timeout */
	struct op_counters ctr;
	struct session *next, *prev;
};

struct master {
	uv_loop_t *loop;
	struct master_config cfg;
	struct ns ns;
	struct changelog *cl;
	uv_tcp_t listener;
	uv_check_t check;	 /* end of each loop iteration: flush */
	uv_timer_t tick;	 /* housekeeping, once a second */
	uv_timer_t cs_tick;	 /* chunkserver pacing, every 100 ms */
	uv_timer_t resize_timer; /* hash tables growing: every 10 ms */
	uv_idle_t idle;		 /* background steps while there is work */
	uv_signal_t sig[4];
	int lock_fd; /* flock on data_dir/lock */

	struct conn *conns;
	uint64_t nconns;
	struct conn *flush_list;
	/* Connections whose reading resumed with requests still buffered:
	 * the idle handle handles them in the next loop turn. */
	struct conn *consume_list;
	uv_idle_t consume_idle;
	size_t unauth_bytes; /* buffered from peers without a session */
	struct exports exports;
	struct htab sessions; /* by id */
	struct session *session_list;
	uint64_t nsessions;
	struct htab session_addrs;	  /* struct addr_count by address */
	uint8_t session_key[SW_AUTH_KEY]; /* makes sessions' secrets */
	uint8_t cs_key[SW_AUTH_KEY];	  /* chunkservers prove it */
	struct export_addr cs_allow[64];  /* and come from these */
	size_t ncs_allow;
	double reclaim_tokens;	   /* reclaim walks allowed now */
	int64_t reclaim_refill;	   /* mono ns of the last refill */
	uint64_t freed_since_trim; /* sessions freed: malloc_trim() */
	struct htab openers;	 /* struct opener by ino: sessions holding it */
	struct locks locks;	 /* file locks (memory only: see locks.h) */
	int64_t orphan_deadline; /* mono ns: unclaimed orphans go after */

	/* purge (purge.c) */
	uv_idle_t purge_idle;
	uv_timer_t purge_timer;
	double purge_credit;	/* ns of purge time earned */
	int64_t purge_last;	/* mono ns of the last slice */
	uint64_t purge_busy_ns; /* spent purging, in all */
	/* Background slices (purge, snapshot copies): how many, the
	 * longest, and how many took over a millisecond. */
	int64_t last_client_request; /* mono ns, from a mount */
	uint64_t bg_slices;
	int64_t bg_slice_max_ns;
	int64_t bg_slice_max_cpu_ns;
	uint64_t bg_slices_over_1ms;

	struct snapper *snap; /* snapshots being made (snapjob.c) */

	/* chunkservers (csrv.c) */
	struct csrv *csrvs[1025];
	uint32_t ncsrvs;
	struct htab cs_cmds; /* commands in flight, by id */
	uint64_t next_cmd;
	uint8_t token_key[16]; /* signs chunk access tokens */
	uint64_t pending_deletes;
	uint64_t revoking; /* lease revocations in flight */
	/* Until then (mono ns) a chunk with no copy may still be reported
	 * by a chunkserver that has not registered again since start-up:
	 * requests for it wait, and changes a crash cut short are redone
	 * only after (dataops.c). */
	int64_t settle_at;
	bool settled;
	uint64_t repl_cursor;

	struct op_counters total;
	struct delegs *delegs;	 /* deleg.h */
	uint64_t inval_seq;	 /* invalidations sent, numbered */
	struct session *owing;	 /* sessions owing an ack of one */
	uint64_t inval_timeouts; /* acks given up on */
	/* Once a second (on_tick): for rates over the last few seconds. */
	struct rate_sample {
		int64_t t; /* mono ns */
		uint64_t requests;
		uint64_t purged;
	} rates[11];
	unsigned nrates;    /* samples taken, in all */
	int64_t started_at; /* wall ns */
	int64_t started_mono;

	bool checkpoint_running;
	uint64_t checkpoint_version; /* version of the newest checkpoint */
	int64_t last_checkpoint;     /* mono ns */
	bool stopping;
};

/* ---- server.c ------------------------------------------------------- */

int server_start(struct master *m);
void server_stop(struct master *m);

/* Close @c (its session detaches; deferred requests finish unanswered). */
void conn_close(struct conn *c);

/* Queue an unasked notification frame to @c. */
void conn_notify(struct conn *c, uint16_t type, const ProtobufCMessage *msg);

/* Records up to @version are durable: release held replies. */
void server_durable(struct master *m, uint64_t version);

/* Flush pending output of every connection that has some. */
void server_flush(struct master *m);

/* Close connections stuck in the middle of a frame. */
void server_reap_stalled(struct master *m);

/* ---- session.c ------------------------------------------------------ */

int sessions_init(struct master *m);
void sessions_release(struct master *m);

/*
 * Handle a hello on @c: create or resume a session and reply. Returns 0,
 * or -errno after which the connection is closed.
 */
/*
 * A hello on @r's connection: 0 with a session, 1 when a password
 * challenge went out (the client says hello again on the same
 * connection), -errno refused (answered; close the connection).
 */
int session_hello(struct req *r, const Sweepfs__Hello *h);

/* Map credentials @c (NULL: none) as @s's export says (maproot, mapall). */
void session_map_cred(const struct session *s, Sweepfs__Cred *c);

/* The same for the credentials request @msg carries, if any. */
void session_map_msg(const struct session *s, ProtobufCMessage *msg);

/* The exports file changed (SIGHUP): keep the sessions still allowed,
 * with their new options; disconnect the others. */
void sessions_reexport(struct master *m);

/* A reply names @n to session @s: a confined session may use it. */
void session_grant(struct session *s, const struct node *n);

/* Forget what @s was granted (also: make the set, on a new session). */
void session_grants_reset(struct session *s);

/* @c is gone: detach its session, which then times out. */
void session_detach(struct master *m, struct conn *c);

/* Free sessions detached for longer than the timeout. */
void sessions_expire(struct master *m);

/* Record that session @s opened @n; -ENOMEM. */
/* Record that session @s opened @n (@writable: for writing); -ENOMEM. */
int session_open(struct master *m, struct session *s, struct node *n,
		 bool writable);

/* Whether session @s has @ino open. */
bool session_has_open(struct session *s, uint64_t ino);

/* Whether @s has @ino open, and opened it for writing (session.c). */
bool session_has_writable(struct session *s, uint64_t ino);

/* @s closed @n once; frees an orphan on the last close anywhere. */
void session_release(struct master *m, struct session *s, uint64_t ino);

/* Release orphans nobody reclaimed after a restart. */
void orphans_expire(struct master *m);

/* The session's cursor for @dir (NULL if none); @create makes one,
 * evicting the least recently used. */
struct cursor *session_cursor(struct master *m, struct session *s,
			      struct node *dir, bool create);

/* ---- fsops.c -------------------------------------------------------- */

/* ---- lockops.c ------------------------------------------------------ */

/* ---- deleg.c (deleg.h) ---------------------------------------------- */

/* Handle @c's buffered requests again (after a wait, deleg.c). */
void server_resume(struct conn *c);

/*
 * Invalidations (watch.c): server_inval_sent() numbers one sent to @s;
 * server_inval_acked() takes @s's ack (INVAL_ACK) up to @seq, or with
 * @seq UINT64_MAX forgets what it owes (it went, or did not answer in
 * inval_timeout). Replies to requests that sent invalidations wait for
 * the acks, as they wait for the changelog (server.c).
 */
uint64_t server_inval_sent(struct master *m, struct session *s);
void server_inval_acked(struct master *m, struct session *s, uint64_t seq);
void server_inval_tick(struct master *m);

/* The lock table's wake callback: answer the deferred request @waiter
 * (granted with @rc 0, or failed) and let it go. */
void lockops_wake(void *m, void *waiter, int rc);

/* The namespace's node_gone hook: the locks of a freed node go. */
void lockops_node_gone(void *m, uint64_t ino);

/* ---- dataops.c ------------------------------------------------------ */

/*
 * @r's setattr changed @n's size from @old_size (already committed). If
 * chunkservers must cut the last chunk, the reply waits for them: returns
 * 0 and answers @r later. Returns 1 when the caller should reply now, or
 * -errno.
 */
int data_truncated(struct req *r, struct node *n, uint64_t old_size);

/* End every write lease (a snapshot begins); m->revoking counts the
 * version bumps this starts until they finish. */
void data_revoke_leases(struct master *m);

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

/* ---- rmr.c ---------------------------------------------------------- */

/*
 * Whether @c may remove everything under directory @root, as rm -rf
 * would need (read, write, search on every non-empty directory; the
 * sticky rule). 0, -EACCES, -EPERM or -ENOMEM.
 */
int may_remove_tree(const struct cred *c, struct node *root);

/*
 * Commit the removal of @e from @dir: a directory is detached (and the
 * purge kicked), anything else unlinked; with @trash, into the trash if
 * @dir has a trash time. Adds to @reply's counts and purge id. The
 * permissions are the caller's to have checked.
 */
int remove_entry_now(struct master *m, struct req *r, struct node *dir,
		     struct edge *e, bool trash, Sweepfs__RmrReply *reply);

/* ---- trash.c -------------------------------------------------------- */

/* Drop trash items whose time is up (once a second). */
void trash_expire(struct master *m);

/* ---- snapshot.c ----------------------------------------------------- */

/* ---- snapjob.c ------------------------------------------------------ */

/*
 * Make @name in @parent a snapshot of @src: queued, copied in the
 * background, and @r answered when the copy is named. 0, or -errno with
 * nothing queued.
 */
int snapjob_submit(struct master *m, const struct req *r, uint64_t src,
		   uint64_t parent, const void *name, size_t len);
/* Whether a copy is running (checkpoints wait); how many wait. */
bool snapjob_busy(const struct master *m);
uint64_t snapjob_waiting(const struct master *m);
/* Start-up, after the changelog opened: gives up a copy cut short by a
 * restart. Shutdown, with the changelog still open: gives up a running
 * copy and refuses the waiting ones. */
int snapjob_init(struct master *m);
void snapjob_stop(struct master *m);
void snapjob_release(struct master *m);

/* ---- purge.c -------------------------------------------------------- */

void purge_init(struct master *m);
void purge_stop(struct master *m);

/* There may be something to purge: start the slices if they are idle. */
void purge_kick(struct master *m);

/* The time budget background work shares (purge, snapshot copies): may
 * a slice run now; and what one took. */
bool background_may_run(struct master *m);
/* A background slice ran @ns of wall time, @cpu_ns of it on the CPU. */
void background_spent(struct master *m, int64_t ns, int64_t cpu_ns);

/* Nodes the purge has yet to free. */
uint64_t purge_left(const struct master *m);

/* ---- fsck.c --------------------------------------------------------- */

/*
 * The check itself, in this process, reporting at most @max problems
 * (NULL: ENOMEM). It scribbles on scratch fields of every node and chunk
 * (atime, a flag bit, lease times): only for a forked child, or a test.
 * Free the report with fsck_free().
 */
Sweepfs__FsckReply *fsck_check(struct master *m, uint32_t max);
void fsck_free(Sweepfs__FsckReply *r);

/* ---- admin.c -------------------------------------------------------- */

/* Take this second's sample for the rates status reports. */
void admin_sample(struct master *m);

/* ---- master.c ------------------------------------------------------- */

/* Fill @c with the defaults of every configuration key. */
void master_config_defaults(struct master_config *c);

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

/* Free what master_start() built, once the loop has run out. */
void master_release(struct master *m);

/*
 * (Re)load cfg.exports_file: a missing file opens everything to everyone;
 * a broken one keeps the exports in force. 0 or -errno (logged).
 */
int master_load_exports(struct master *m);

/* Start a checkpoint now if none is running. */
void master_checkpoint(struct master *m);

#endif
