/*
 * Sessions (session.c): a client's identity across reconnects, what
 * its export allows, its hello, its detach and expiry. struct session
 * itself is sessrec.h's; the table and what a session holds (opens,
 * grants, cursors, credential mapping) are sesstab.h's, both in the
 * request layer, which the handlers use instead of this header.
 */
#ifndef SWEEPFS_MASTER_SESSION_H
#define SWEEPFS_MASTER_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "namespace.h"
#include "req.h"
#include "sessrec.h"
#include "sesstab.h"

struct master;
struct conn;

int sessions_init(struct master *m);

void sessions_release(struct master *m);

/*
 * A hello on @r's connection: 0 with a session, 1 when a password
 * challenge went out (the client says hello again on the same
 * connection), -errno refused (answered; close the connection).
 */
int session_hello(struct req *r, const Sweepfs__Hello *h);

/* The exports file changed (SIGHUP): keep the sessions still allowed,
 * with their new options; disconnect the others. */
void sessions_reexport(struct master *m);

/* @c is gone: detach its session, which then times out. */
void session_detach(struct master *m, struct conn *c);

/* Free sessions detached for longer than the timeout. */
void sessions_expire(struct master *m);

/* Release orphans nobody reclaimed after a restart. */
void orphans_expire(struct master *m);

#endif
