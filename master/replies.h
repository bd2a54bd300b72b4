/*
 * What the changelog says a client's request did, so that the request,
 * sent again after its reply was lost, is answered as the first time
 * instead of being made twice: the reply cache of NFSv4.1 sessions, kept
 * by the namespace so that every member of a group and every restart has
 * it too.
 *
 * The change a request that is not safe to repeat makes (an unlink, a
 * mkdir, an exclusive create: the `once` types of proto/frame.c) is
 * journaled with its session and request id (Mutation.once_session,
 * once_req), and applying it, on the leader, on a follower or in replay,
 * notes it here. The mount sends such a request again with the same id,
 * flagged SW_FRAME_AGAIN; only then is it looked up. A request that
 * failed changed nothing and is not noted: sent again, it is simply
 * made.
 *
 * A request is matched by its session, its id, and a digest of its type
 * and arguments: a client that sends another request under the id of
 * one that was made (a LINK, then a CREATE flagged AGAIN with its id) is
 * not answered "made before" with the other's node; its request is made
 * as a new one, with every check.
 *
 * Each session keeps its last REPLIES_PER_SESSION changes: a request is
 * found as long as fewer changes of its session came after it, which is
 * more than a mount has in flight. A session with no change for
 * REPLIES_IDLE_NS is forgotten when another one starts: a mount waits
 * for its master far less than that before it gives up. At most
 * REPLIES_SESSIONS_MAX are kept; a new one pushes out the one idle
 * longest. A session's ring grows as it is used (24 bytes a change), so
 * a client that opens sessions to make one change in each costs little;
 * and what goes is chosen by the log alone, the same on every member.
 */
#ifndef SWEEPFS_MASTER_REPLIES_H
#define SWEEPFS_MASTER_REPLIES_H

#include <stdint.h>

#include "htab.h"
#include "meta.pb-c.h"

#define REPLIES_PER_SESSION 512u
/* Bytes of a request's digest (Mutation.once_digest; req.c). */
#define REPLIES_DIGEST 16
#define REPLIES_SESSIONS_MAX 65536u
#define REPLIES_IDLE_NS (600 * 1000000000LL)

/* One change a request made. */
struct reply_done {
	uint64_t req;	  /* its id in the session */
	uint64_t ino;	  /* the node it made, linked or changed; or 0 */
	uint64_t version; /* the change's */
	/* The request's type and arguments, keyed (req.c); all zero when
	 * not known (a checkpoint older than format 6): then no request
	 * sent again matches it. */
	uint8_t digest[REPLIES_DIGEST];
};

/* A session's last changes, in a ring of cap (up to REPLIES_PER_SESSION). */
struct reply_ring {
	uint64_t session;
	int64_t last;  /* Mutation.time of its newest change */
	uint32_t head; /* where the next one goes */
	uint32_t n, cap;
	struct reply_done *e;
	struct reply_ring *prev, *next; /* least recently changed first */
};

struct replies {
	struct htab by_session; /* struct reply_ring */
	struct reply_ring *lru, *lru_tail;
	uint32_t max_sessions; /* REPLIES_SESSIONS_MAX (tests lower it) */
};

/* The @i-th oldest change @r holds (i < r->n). */
static inline const struct reply_done *reply_ring_at(const struct reply_ring *r,
						     uint32_t i)
{
	return &r->e[(r->head + r->cap - r->n + i) % r->cap];
}

void replies_init(struct replies *t);
void replies_release(struct replies *t);

/*
 * Note that change @m, applied as @version, answered a request (if it says
 * so). Out of memory, the note is lost: that request, sent again, would be
 * made again. Not an error of the change.
 */
void replies_note(struct replies *t, const Sweepfs__Meta__Mutation *m,
		  uint64_t version);

/*
 * The change request @req of @session made, or NULL. Where one request
 * made several changes, the one that names a node.
 */
const struct reply_done *replies_find(const struct replies *t, uint64_t session,
				      uint64_t req);

/* Add @d to @session's ring as of @time, the session becoming the most
 * recently changed one (checkpoint loading): 0 or -ENOMEM. */
int replies_add(struct replies *t, uint64_t session, int64_t time,
		const struct reply_done *d);

/* Call @fn for each ring, least recently changed first; stops at and
 * returns the first non-zero. */
int replies_foreach(const struct replies *t,
		    int (*fn)(const struct reply_ring *r, void *arg),
		    void *arg);

#endif
