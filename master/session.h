/*
 * Sessions (session.c): a client's identity across reconnects, what
 * its export allows, its open files, grants, cursors and counters.
 * struct session itself is sessrec.h's, in the request layer.
 */
#ifndef SWEEPFS_MASTER_SESSION_H
#define SWEEPFS_MASTER_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "namespace.h"
#include "req.h"
#include "sessrec.h"

struct master;
struct conn;

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

/* @s closed @n once; frees an orphan on the last close anywhere. */
void session_release(struct master *m, struct session *s, uint64_t ino);

/* Release orphans nobody reclaimed after a restart. */
void orphans_expire(struct master *m);

/* The session's cursor for @dir (NULL if none); @create makes one,
 * evicting the least recently used. */
struct cursor *session_cursor(struct master *m, struct session *s,
			      struct node *dir, bool create);

#endif
