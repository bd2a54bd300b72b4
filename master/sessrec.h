/*
 * A session's record (struct session) and the counters kept per session
 * and in total: only definitions, in the request layer
 * (scripts/layers.py), for the request layer and the handlers that read
 * a session; what makes, finds and changes sessions is session.h's
 * (session.c, the server layer).
 */
#ifndef SWEEPFS_MASTER_SESSREC_H
#define SWEEPFS_MASTER_SESSREC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "auth.h"
#include "bucket.h"
#include "frame.h"
#include "hash.h"
#include "htab.h"
#include "namespace.h"
#include "perm.h"
#include "sweepfs.pb-c.h"

struct conn;
struct inval_owed;
struct watch;

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
	uint32_t ndelegs;	     /* directories delegated to it (deleg.h) */
	struct bucket deleg_visits;  /* what its grants may cost */
	struct bucket trash_recalls; /* its TRASH requests' (deleg.c) */
	struct bucket rmr_visits;    /* ... and its rmr checks (rmr.h) */
	/* Where its last rmsnapshot -f stopped part-way (snapshot.c); NULL:
	 * none. */
	struct rf_resume *rf_resume;
	/* Its last inode ranges (InoRangeReq), [lo, hi), newest in [0]: a
	 * batch may still use an older one while a newer is asked for, and
	 * a request sent again after a lost reply takes one more. In
	 * memory only: after a restart or a change of leader, the client
	 * claims them again with their proofs (Hello.ino_ranges). */
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
	/* Let an ack time out: not waited for again while the session
	 * lasts, even once it caught up (server.c says why). */
	bool inval_lax;
	/* Hello.inval_all: its mount takes one invalidation of everything
	 * (InvalNotify.all) in place of those it was not sent. */
	bool inval_all_ok;
	/* Its connection still held more than SERVER_NOTICES_MAX of
	 * notices after a write, at this mono ns (0: not behind, or it read
	 * all but a quarter since): granted no delegation meanwhile
	 * (deleg.c). */
	int64_t behind_at;
	/* Behind, and inval_all_ok: it is sent no invalidation until the
	 * one of everything, which goes once it has read most of the rest;
	 * those not sent are owed within the ack of that one (server.c). */
	bool inval_all;
	/* Delegations of its being recalled, and taken back from it for
	 * not answering a recall in time and not given back since
	 * (deleg.c): while either is non-zero it is granted no more. */
	uint32_t nrecalling, nrevoked;
	/* Those taken back (deleg.c's own list): looked up for each
	 * operation of its batches, so its own, not everyone's. */
	struct deleg_revoked *revoked;
	uint32_t cache_ms; /* Hello.cache_ms: its kernel's name timeout */
	struct op_counters ctr;
	struct session *next, *prev;
};

/* Whether session @s (NULL: none, internal work) is confined to a
 * subtree by its export. Inline: req_node() asks it for every node a
 * request names. */
static inline bool session_confined(const struct session *s)
{
	return s && s->root_ino != NS_ROOT_INO;
}

/*
 * The one rule of admin root: @uid, as @s's export mapped it, is 0 on an
 * export with the admin option; NULL @s (internal work) is admin.
 * session_admin_root() and req_admin() both ask it.
 */
static inline bool session_admin_uid(const struct session *s, uint32_t uid)
{
	return uid == 0 && (!s || s->admin);
}

/* A chunkserver's or a group member's session: no export, no files. */
static inline bool session_is_peer(const struct session *s)
{
	return s->role == SWEEPFS__ROLE__ROLE_CHUNKSERVER ||
	       s->role == SWEEPFS__ROLE__ROLE_MEMBER;
}

/* A file a session holds open, in session->opens by inode. */
struct sess_open {
	uint64_t ino;
	uint32_t count;
	/*
	 * PERM_R and PERM_W: what its opens since the first were for
	 * (releases do not say which open they close, so a bit stays until
	 * the last). PERM_W lets writes, write locks and write-ends through;
	 * PERM_R reads, and is set for an open for writing by a caller who
	 * could have opened the file for reading, and for its creator.
	 */
	uint8_t access;
};

/* htab equality for elements whose first field is their inode
 * (struct sess_open, session.c's struct opener). */
static inline bool sess_ino_eq(const void *e, const void *key)
{
	return *(const uint64_t *)e == *(const uint64_t *)key;
}

/* Whether session @s (NULL: none) has @ino open. */
static inline bool session_has_open(const struct session *s, uint64_t ino)
{
	return s && htab_find(&s->opens, sw_hash_u64(ino), sess_ino_eq, &ino);
}

/* Whether @s has @ino open with all of @access (PERM_R, PERM_W). */
static inline bool session_has_access(const struct session *s, uint64_t ino,
				      int access)
{
	const struct sess_open *so =
		s ? htab_find(&s->opens, sw_hash_u64(ino), sess_ino_eq, &ino) :
		    NULL;

	return so && (so->access & access) == access;
}

/* Whether @s has @ino open, and opened it for writing. */
static inline bool session_has_writable(const struct session *s, uint64_t ino)
{
	return session_has_access(s, ino, PERM_W);
}

static inline bool session_granted_eq(const void *e, const void *key)
{
	return (uint64_t)(uintptr_t)e == *(const uint64_t *)key;
}

/* Whether confined session @s was told of non-directory @ino by a reply
 * (session_grant()), so it may use it by number. Inline: req_node() asks
 * it, as session_confined(), for every node a request names. */
static inline bool session_granted(const struct session *s, uint64_t ino)
{
	return htab_find(&s->granted, sw_hash_u64(ino), session_granted_eq,
			 &ino);
}

#endif
