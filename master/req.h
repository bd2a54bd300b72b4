/*
 * The request layer: what a handler of a client's request sees and uses.
 * A handler gets a struct req and the unpacked message, checks, decides,
 * commits its change with master_commit() and answers exactly once with
 * req_reply() or req_error() (or keeps the request with req_defer() and
 * answers it later). It never touches connections: server.c owns those,
 * and turns the answer into a frame once the change is durable, through
 * the hooks (struct req_hooks) master.c wires; the functions below are
 * all req.c's, and req.c calls nothing above it by name.
 *
 * What else a handler needs of the layers above goes through the same
 * hooks, by the wrappers below (req_notify(), req_close(), req_inval_*(),
 * req_resume(), req_group_*()): a notice on a session's connection, the
 * invalidations' sequence, the group's status and membership. A handler
 * keeps a connection only as an opaque pointer, and what it stores on
 * one (the chunkserver it registered as, the delegation its request
 * waits for) is struct req_link, which server.c embeds in struct conn.
 * So no handler includes server.h, session.h or group.h, nor calls a
 * function defined above it (scripts/layers.py checks both). A hook is
 * one indirect call; the ones on a request's path (send, session) were
 * hooks already, the new ones are on notices and admin requests.
 *
 * dispatch.c routes each message type to its handler (handlers.h).
 */
#ifndef SWEEPFS_MASTER_REQ_H
#define SWEEPFS_MASTER_REQ_H

#include <stdbool.h>
#include <stdint.h>

#include "auth.h"
#include "frame.h"
#include "meta.pb-c.h"
#include "namespace.h"
#include "perm.h"
#include "sweepfs.pb-c.h"

struct master;
struct conn;
struct session;
struct deleg;

/*
 * What the handlers keep on a connection (server.c embeds one in each
 * struct conn, and owns the rest of it): a handler reaches it by
 * req_link_of(), and the server finds its connection again from it.
 */
struct req_link {
	uint32_t csrv; /* chunkserver id, for that role (csrv.c); 0: none */
	/* Its oldest request waits for a delegation to come back
	 * (deleg.h); the requests after it that need not wait are
	 * handled (server.c, consume_parked()). */
	struct deleg *parked;
	struct req_link *park_next;
	int64_t park_t0; /* mono ns its oldest request first waited; 0 */
	/* CHUNK requests not answered yet (dataops.c): at
	 * REQ_CHUNK_JOBS_MAX no more of the connection's CHUNK requests
	 * is handled (nor what follows one) until half of them are
	 * (server.c). They wait on chunkservers and timers, never on this
	 * client. */
	uint32_t chunk_jobs;
};

/* Above what a mount waits for: through /dev/fuse 32 threads and
 * FUSE's background requests; through io_uring a queue of 64 entries a
 * CPU, a request a part, two parts at most (about 8,000 on a 64-CPU
 * host, and only those that wait count). At about 200-300 bytes a
 * request, 5 MiB a connection. */
#define REQ_CHUNK_JOBS_MAX 16384u

/* The group of masters as an admin's request sees it (admin.c; group.h
 * fills it): in the request layer so that the handlers need not name the
 * group. */
#define GROUP_MAX 7

struct group_status {
	const char *role; /* "leader", "follower", "candidate" */
	unsigned id;
	char leader[272]; /* "" while nobody leads */
	size_t n;
	struct {
		unsigned id;
		char addr[272];
		char role[16];	  /* as the member last said, or "" */
		uint64_t version; /* its meta_version then */
		int64_t age_ms;	  /* since it said so; -1: never */
	} members[GROUP_MAX];
};

/* A request being handled. */
struct req {
	struct master *m;
	struct conn *conn;
	struct session *s;
	struct sw_frame_hdr hdr;
	uint64_t version; /* journaled change the reply must wait for */
	uint64_t inval0;  /* m->inval_seq when it came */
	int64_t t0;	  /* mono ns it came (0: not from a client) */
	/* A request not safe to repeat (sw_msg_info()->once): its type and
	 * arguments, keyed (req_digest()); journaled with its change. */
	uint8_t digest[REPLIES_DIGEST];
};

typedef void (*req_handler)(struct req *r, const ProtobufCMessage *msg);

/*
 * What the request layer needs from the layers above it, wired once at
 * start-up (req_wire(), from master.c) so that it names nothing above it:
 * the server turns answers into frames and owns the connections; the
 * group says whether this master may change anything; a full metadata
 * disk recalls every delegation. All are called on the loop's thread.
 */
struct req_hooks {
	/* Queue @reply for @r on its connection, if that is still there
	 * (after @r->version is durable); @error: an error reply, counted
	 * as one. */
	void (*send)(struct req *r, const ProtobufCMessage *reply, bool error);
	/* Keep connection @c (its memory, not its socket) for a deferred
	 * request (@hold) or let it go. */
	void (*hold)(struct conn *c, bool hold);
	/* @c's session now, or NULL. */
	struct session *(*session)(const struct conn *c);
	/* Whether this master serves changes (a follower does not). */
	bool (*serving)(const struct master *m);
	/* The metadata disk is full: what holders answer themselves could
	 * not be journaled either. */
	void (*disk_full)(struct master *m);
	/* Queue notice @type (@msg) on @c now (no reply waits for it). */
	void (*notify)(struct conn *c, uint16_t type,
		       const ProtobufCMessage *msg);
	/* Close @c; its session detaches (at once, from this call). */
	void (*close)(struct conn *c);
	/* The handlers' part of @c. */
	struct req_link *(*link)(struct conn *c);
	/* The requests held back on @l's connection (parked) go on. */
	void (*resume)(struct req_link *l);
	/* Invalidations (server.c): the sequence number of the one about to
	 * be sent to @s (not sent if @s->inval_all: @s is behind on its
	 * notices and gets one of everything later); @s acknowledged up to
	 * @seq; stop waiting for @s. */
	uint64_t (*inval_sent)(struct master *m, struct session *s);
	void (*inval_acked)(struct master *m, struct session *s, uint64_t seq);
	void (*inval_give_up)(struct master *m, struct session *s);
	/* Since when nothing has come from @c (mono ns), @now if something
	 * has that is not handled yet (server.c). */
	int64_t (*silent_since)(struct conn *c, int64_t now);
	/* The group (group.h): its status (false: not in one), a change of
	 * membership answered later, a transfer of the leadership. */
	bool (*group_status)(const struct master *m, struct group_status *st);
	int (*group_change)(struct master *m, struct req *r, const char *add,
			    unsigned remove);
	int (*group_transfer)(struct master *m, unsigned to);
};

/* Wire @m's request layer to @hooks (static storage, not copied). */
void req_wire(struct master *m, const struct req_hooks *hooks);

/* Whether @m serves changes (a group's follower does not): what the
 * handlers ask instead of naming the group above them. */
bool req_serving(const struct master *m);

/* The hooks above, for the handlers (each one indirect call). */
void req_notify(struct master *m, struct conn *c, uint16_t type,
		const ProtobufCMessage *msg);
void req_close(struct master *m, struct conn *c);
struct req_link *req_link_of(struct master *m, struct conn *c);
void req_resume(struct master *m, struct req_link *l);
uint64_t req_inval_sent(struct master *m, struct session *s);
void req_inval_acked(struct master *m, struct session *s, uint64_t seq);
void req_inval_give_up(struct master *m, struct session *s);
int64_t req_silent_since(struct master *m, struct conn *c, int64_t now);
bool req_group_status(const struct master *m, struct group_status *st);
int req_group_change(struct master *m, struct req *r, const char *add,
		     unsigned remove);
int req_group_transfer(struct master *m, unsigned to);

/* Queue @reply for @r's request (after @r->version is durable). */
void req_reply(struct req *r, const ProtobufCMessage *reply);

/* Reply with StatusReply{err = -@rc}. */
void req_error(struct req *r, int rc);

/* A handler's ending: req_error(@r, @rc) when @rc < 0, else
 * req_reply(@r, @reply). */
void req_answer(struct req *r, int rc, const ProtobufCMessage *reply);

/* The same for an AttrReply: req_error(@r, @rc) when @rc < 0, else the
 * attributes of @n. */
void req_answer_attr(struct req *r, int rc, const struct node *n);

/*
 * Keep request @r to answer later (it waits for chunkservers): returns a
 * heap copy that holds the connection (a reply to a connection closed
 * meanwhile goes nowhere), or NULL for ENOMEM. Answer it with
 * req_reply()/req_error(), then req_done().
 */
struct req *req_defer(const struct req *r);
void req_done(struct req *d);

/* The session of @r's connection now, or NULL: a deferred request may
 * outlive the session it came in (r->s is the one it came in). */
struct session *req_session(const struct req *r);

/*
 * Node @ino as @r's session may see it: NULL when there is none, or when
 * its export confines the session to a subtree and the node is not in
 * it. A directory is checked by its parents; a non-directory has none
 * to check (64 bytes a node), so a confined session may use only those
 * it was told of by a reply (session_grant()): a lookup, a create,
 * readdirplus. Guessing numbers gets it nothing.
 */
struct node *req_node(const struct req *r, uint64_t ino);

/* For req_node() failing: -ENOENT, or -ESTALE for a node that exists but
 * was not granted (the kernel then looks the name up again). */
int req_node_err(const struct req *r, uint64_t ino);

/* Whether @c is root with admin rights on @r's session: the same rule as
 * session_admin_root() (session_admin_uid()). */
bool req_admin(const struct req *r, const struct sw_cred *c);

/* Whether @c owns @n, or may act as its owner (root with admin rights). */
static inline bool req_owns(const struct req *r, const struct sw_cred *c,
			    const struct node *n)
{
	return c->uid == n->uid || req_admin(r, c);
}

/*
 * A recursive change's owner filter (a mutation's has_owner and owner):
 * below the top, a user changes only its own; root with admin rights
 * changes all. Returns whether the change is @recursive and filtered;
 * *@owner is @c's uid either way.
 */
static inline bool req_only_own(const struct req *r, const struct sw_cred *c,
				bool recursive, uint32_t *owner)
{
	*owner = c->uid;
	return recursive && !req_admin(r, c);
}

/* The credentials a request carries, as the permission checks take them
 * (the groups stay the message's). */
static inline struct sw_cred req_cred(const Sweepfs__Cred *p)
{
	struct sw_cred c = { p->uid, p->gid, p->n_groups, p->groups };

	return c;
}

/* The key of the digests below, from the master's session key. */
void req_once_key(const uint8_t session_key[SW_AUTH_KEY],
		  uint8_t key[REPLIES_DIGEST]);

/*
 * Into @r->digest: a digest of request type @type with payload @payload
 * (@len bytes, as it came on the wire: a request sent again is the same
 * frame), keyed by @key, so that a client cannot make two requests
 * whose digests are alike.
 */
void req_digest(struct req *r, const uint8_t key[REPLIES_DIGEST], uint16_t type,
		const uint8_t *payload, size_t len);

/*
 * A time "now" as a client's kernel keeps it (writeback cache: its own
 * clock), @client, against the master's @now: taken when within
 * REQ_CLOCK_SKEW_NS of it, else @now. Whoever may set any time (the
 * owner) is not asked this; a writer that is not the owner may set
 * "now", not the past or the future.
 */
#define REQ_CLOCK_SKEW_NS (60 * 1000000000LL)
static inline int64_t req_client_now(int64_t client, int64_t now)
{
	return client > now - REQ_CLOCK_SKEW_NS &&
			       client < now + REQ_CLOCK_SKEW_NS ?
		       client :
		       now;
}

/* A name to create or remove: 1..255 bytes, no '/' or NUL, not . or ..;
 * 0, -ENAMETOOLONG or -EINVAL. */
int req_check_name(const ProtobufCBinaryData *name);

/*
 * Apply @mut and journal it as the next version; the reply of @r (may be
 * NULL for internal changes) waits for it. Returns 0 or -errno (nothing
 * changed); -ENOSPC (the metadata disk is full) recalls every delegation.
 */
int master_commit(struct master *m, struct req *r,
		  const Sweepfs__Meta__Mutation *mut);

/*
 * Whether a change may be made now: 0, or what master_commit() would
 * return without changing anything.
 */
int master_may_change(struct master *m);

/*
 * Journal @mut as the next version: a change the caller already made,
 * after master_may_change() said yes in the same loop turn. Only the purge
 * does that (PurgeSteps): which changes it makes depends on which files
 * are open, which only the serving master knows; replay and followers make
 * the same changes through mutation_apply().
 */
void master_journal(struct master *m, const Sweepfs__Meta__Mutation *mut);

/* Fill @a with the attributes of @n, as replies carry them: with its
 * handle (sweepfs.proto, "Node handles"), made with @m's key. */
void attr_fill(const struct master *m, Sweepfs__Attr *a, const struct node *n);

#endif
