/*
 * The master: start, stop, checkpoints, exports, leading a group. Its
 * context (struct master), which every module's state hangs off, and its
 * configuration are context.h's, in the request layer, for the handlers.
 * Everything in it lives on the loop thread.
 *
 * Map (the namespace core at the bottom, scripts/layers.py):
 *   main.c       options, daemon, signals
 *   master.c     start-up (checkpoint + replay), housekeeping, hooks, stop
 *   server.c     connections on common/uvserver.c and wq.c: framing,
 *                reply queues held for durability, group commit
 *                (server.h)
 *   dispatch.c   the table routing each request type  (dispatch.h)
 *   req.c        what handlers use, and the hooks up  (req.h;
 *                handlers.h lists them)
 *   context.h    struct master, the configuration  } request layer:
 *   sessrec.h    struct session, its queries       } for the handlers
 *   sesstab.c    the session table, open files,    }
 *                grants, readdir cursors           }
 *   session.c    sessions: hello, reclaim, detach, expiry, orphans
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

#include "context.h"

/*
 * Allocate the handlers' state @m points to (struct master's pointers,
 * context.h), zeroed, in one block: 0 or -ENOMEM. master_start() does it; a
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
 * Whether a checkpoint is due at mono ns @now: replaying what came after
 * the newest one would cost cfg.checkpoint_changes (ns_replay_work()), or
 * cfg.checkpoint_interval_ms has passed since the last was started.
 */
bool master_checkpoint_due(const struct master *m, int64_t now);

/*
 * Waits on a client (a recall, an invalidation ack) end on time: looked
 * at every WAIT_TICK_MS, so that one ends at most that much past its
 * bound when the loop is idle, and up to two loop turns more when it is
 * busy (judged as of the loop's last poll: server_answers_seen(),
 * server.h). Each look costs O(recalls and sessions owing acks); the
 * tick runs only while there is one (master_wait_arm(), context.h).
 */
#define WAIT_TICK_MS 20

/*
 * Whether a due checkpoint at mono ns @now should wait for the collapse
 * of huge pages running after the last child (master.c): while it runs,
 * for at most 2 s from the first time asked since the last checkpoint
 * started.
 */
bool master_checkpoint_waits(struct master *m, int64_t now);

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
