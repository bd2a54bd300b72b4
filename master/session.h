/*
 * Sessions (session.c): a client's identity across reconnects, what
 * its export allows, its open files, grants, cursors and counters.
 */
#ifndef SWEEPFS_MASTER_SESSION_H
#define SWEEPFS_MASTER_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "admin.h"
#include "auth.h"
#include "htab.h"
#include "namespace.h"
#include "req.h"

struct master;
struct conn;
struct inval_owed;
struct watch;

/* A readdir position a session keeps per directory (DESIGN: cursor cache). */
struct sess_cursor {
	uint64_t dir_ino;
	uint64_t last_used; /* session-local clock for LRU */
	struct cursor c;
};

#define SESSION_CURSORS 64

/* What a session may still spend on grants (deleg.c): a token bucket. */
struct deleg_bucket {
	double tokens;
	int64_t at; /* mono ns of the last refill; 0: never (full) */
};

/* Inode ranges a session may use at once (InoRangeReq). */
#define SESSION_INO_RANGES 4

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
	struct deleg_bucket deleg_visits; /* what its grants may cost */
	/* Its last inode ranges (InoRangeReq), [lo, hi), newest in [0]: a
	 * batch may still use an older one while a newer is asked for, and
	 * a request sent again after a lost reply takes one more. In
	 * memory only: master.c's boot_next_ino covers a restart. */
	uint64_t ino_lo[SESSION_INO_RANGES], ino_hi[SESSION_INO_RANGES];
	/* Invalidations (watch.c) sent to it and acknowledged, by the
	 * master's sequence; while it owes some it is on m->owing. */
	uint64_t inval_sent, inval_acked;
	/* Those it owes, oldest first, each with when it went: a reply
	 * waits only for the ones its own change sent (server.c). */
	struct inval_owed *owed;
	size_t owed_head, owed_n, owed_cap;
	struct session *owe_next, *owe_prev;
	bool owing;
	/* Let an ack time out: not waited for until it has acknowledged
	 * everything it was sent. */
	bool inval_lax;
	/* Delegations of its being recalled, and taken back from it for
	 * not answering a recall in time and not given back since
	 * (deleg.c): while either is non-zero it is granted no more. */
	uint32_t nrecalling, nrevoked;
	uint32_t cache_ms; /* Hello.cache_ms: its kernel's name timeout */
	struct op_counters ctr;
	struct session *next, *prev;
};

int sessions_init(struct master *m);

/* The session with @id, or NULL. */
struct session *session_find(struct master *m, uint64_t id);
void sessions_release(struct master *m);

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

/* Record that session @s opened @n (@writable: for writing); -ENOMEM. */
int session_open(struct master *m, struct session *s, struct node *n,
		 bool writable);

/* Whether session @s has @ino open. */
bool session_has_open(struct session *s, uint64_t ino);

/* Whether confined session @s was told of non-directory @ino by a reply
 * (session_grant()), so it may use it by number. */
bool session_granted(const struct session *s, uint64_t ino);

/* Whether session @s (NULL: none, internal work) is confined to a
 * subtree by its export. Inline: req_node() asks it for every node a
 * request names. */
static inline bool session_confined(const struct session *s)
{
	return s && s->root_ino != NS_ROOT_INO;
}

/* A chunkserver's or a group member's session: no export, no files. */
static inline bool session_is_peer(const struct session *s)
{
	return s->role == SWEEPFS__ROLE__ROLE_CHUNKSERVER ||
	       s->role == SWEEPFS__ROLE__ROLE_MEMBER;
}

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

#endif
