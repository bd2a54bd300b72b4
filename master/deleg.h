/*
 * Directory delegations: one mount session working alone in a directory
 * may hold it, and then answers unlink and rmdir there itself, sending
 * them later in batches (sweepfs.proto, "directory delegations").
 *
 * The master's side is a promise: while a session holds a delegation on
 * directory D, no other session's request that names D, an entry of D
 * (by inode), or a directory above D for a subtree operation (rmr,
 * snapshot, rename, trash) is handled before the holder has given D
 * back. Such a request recalls the delegation and waits (it alone: the
 * requests after it that read other nodes go on, server.c) until the
 * holder returns D, loses its connection, or lets deleg_timeout run out
 * (then D is revoked, deleg.c). The holder's own
 * requests are never held: they come in order on one connection, after
 * the batches it sent before them. A mount's batches are the one
 * exception to the promise: a batch waits for the holder of a directory
 * it operates in, not for the holder of that directory's parent, which
 * is recalled all the same (its cached attributes of the entry go
 * stale): the mount answered those operations long before, and a
 * waiting batch is overtaken by its sender's later ones (server.c).
 *
 * Flags mark the nodes concerned, so that a request that touches none
 * costs one flag test per inode it names: NODE_DELEG on D, and on each
 * file D had when it was delegated (or got since) the delegation's tag
 * (NODE_DELEG_TAG, deleg.c); directories below D know D as their
 * parent. Files know no parent, so a request on a marked file recalls
 * every other session's delegation with that tag; that is rare (another
 * client using by number a file in a directory being removed) and errs
 * the safe way. Ending a delegation unmarks nothing (a tag no live
 * delegation has marks nothing), so every end costs O(1); a grant of a
 * large directory is walked in slices (deleg.c).
 */
#ifndef SWEEPFS_MASTER_DELEG_H
#define SWEEPFS_MASTER_DELEG_H

#include <stdbool.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

struct master;
struct session;
struct req_link;
struct node;
struct req;

int delegs_new(struct master *m);
void delegs_free(struct master *m);

/*
 * Whether request @type (@msg, admitted) of session @s (NULL: none yet)
 * on the connection whose handlers' part is @l must wait for a
 * delegation of another session: if so, the recall is sent, @l is
 * parked (its connection's requests are not handled until it is
 * resumed, req_resume()) and true returned; the caller leaves the
 * request in its buffer to be handled again.
 */
bool deleg_wait(struct master *m, struct session *s, struct req_link *l,
		uint16_t type, const ProtobufCMessage *msg);

/* @l's connection is closing: off any waiting list. */
void deleg_unpark(struct req_link *l);

/* Session @s lost its connection or is gone: its delegations end. */
void deleg_drop_session(struct master *m, struct session *s);

/* Directory @dir left the namespace: a delegation on it ends. */
void deleg_dir_gone(struct master *m, struct node *dir);

/*
 * Session @s just made directory @dir (a batch): delegate it to @s from
 * birth if @s holds its parent and a grant would not be refused
 * (deleg_max, ...); recalled at once if the parent is being recalled;
 * otherwise not delegated, and @s, which holds it from birth, is sent a
 * recall for it at once.
 */
void deleg_grant_made(struct master *m, struct session *s, struct node *dir);

/* Recall every delegation (the metadata disk is full: req.c). */
void deleg_recall_all(struct master *m);

/* Every WAIT_TICK_MS: recalls past deleg_timeout, and those a request
 * has waited for that long in all, are revoked, judged as of @seen
 * (server_answers_seen()). */
void deleg_tick(struct master *m, int64_t seen);

/* Whether a recall is outstanding (the wait tick runs while one is). */
bool deleg_recalling(const struct master *m);

/*
 * Whether @dir was taken back from @s for not answering a recall (its
 * batch operations there are refused with EKEYREVOKED) and @s has not
 * yet acknowledged that with DELEG_RETURN.
 */
bool deleg_revoked(const struct master *m, const struct session *s,
		   uint64_t dir);

/*
 * Whether another session than @s holds @dir: a request that finds so
 * at its handler came past deleg_wait() (a holder's own batch, which
 * waits for nobody) and is refused.
 */
bool deleg_held_by_other(const struct master *m, const struct session *s,
			 const struct node *dir);

/* Figures for sweepfs status (InfoReply fields 43-48), and what the
 * tests count: entries visited (only a grant walks a directory). */
struct deleg_stats {
	uint64_t held, granted, refused, recalls, timeouts;
	uint64_t recalls_removed; /* of those, told their tree goes */
	uint64_t recall_max_ns;
	uint64_t visits, walk_slices;
};
void deleg_stats(const struct master *m, struct deleg_stats *st);

/* How long a mount may trust what it holds past its last answer
 * (HelloReply.lease_ms): half the soonest a silent holder loses it. */
uint32_t deleg_lease_ms(const struct master *m);

#endif
