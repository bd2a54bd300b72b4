/*
 * The session table and what a session holds, as the handlers use them
 * (sesstab.c): in the request layer, so that a handler that opens a
 * file, lists a directory or maps credentials names nothing above it.
 * Making, resuming, detaching and expiring sessions is session.h's
 * (the server layer), which uses these too. struct session is
 * sessrec.h's.
 */
#ifndef SWEEPFS_MASTER_SESSTAB_H
#define SWEEPFS_MASTER_SESSTAB_H

#include <stdbool.h>
#include <stdint.h>

#include "namespace.h"
#include "sessrec.h"
#include "sweepfs.pb-c.h"

struct master;

/* Make @m's (empty) session table and its table of open files. */
void sesstab_init(struct master *m);

/* The session with @id, or NULL. */
struct session *session_find(struct master *m, uint64_t id);

/* Make the sets of new session @s: its opens, its grants. */
void session_rec_init(struct session *s);

/* Session @s is being freed: release each of its opens (orphans it was
 * the last to hold go) and free its sets. */
void session_opens_drop(struct master *m, struct session *s);

/* Record that session @s opened @n for @access (PERM_R, PERM_W: what
 * its opens may do, sessrec.h); -ENOMEM, or -EMFILE past UINT32_MAX
 * opens of one file. */
int session_open(struct master *m, struct session *s, struct node *n,
		 int access);

/* @s closed @ino once; frees an orphan on the last close anywhere. */
void session_release(struct master *m, struct session *s, uint64_t ino);

/* A reply names @n to session @s: a confined session may use it. */
void session_grant(struct session *s, const struct node *n);

/* Forget what @s was granted (also: make the set, on a new session). */
void session_grants_reset(struct session *s);

/* The session's cursor for @dir (NULL if none); @create makes one,
 * evicting the least recently used. */
struct cursor *session_cursor(struct master *m, struct session *s,
			      struct node *dir, bool create);

/* The proof that session @sid was given the inode numbers [@first,
 * @first + @count) (InoRangeReply.proof): a tag under the session key,
 * so the same on every member of a group. */
void session_ino_proof(const struct master *m, uint64_t sid, uint64_t first,
		       uint32_t count, uint8_t proof[32]);

/* @s may number the nodes it makes from [@lo, @hi): its newest range,
 * before the older ones (it keeps SESSION_INO_RANGES). */
void session_ino_add(struct session *s, uint64_t lo, uint64_t hi);

/* Whether @s may number a node it makes @ino. */
bool session_ino_has(const struct session *s, uint64_t ino);

/*
 * Check and map credentials @c (NULL: none) as @s's export says (maproot,
 * mapall): -EINVAL for more supplementary groups than Linux gives a
 * process (SW_GROUPS_MAX; every permission check scans them), else 0.
 */
int session_map_cred(const struct session *s, Sweepfs__Cred *c);

/* The same for the credentials request @msg carries, if any. */
int session_map_msg(const struct session *s, ProtobufCMessage *msg);

/* The credentials request @msg carries (its field `cred`), or NULL:
 * none sent, or its type has none. They point into @msg. */
Sweepfs__Cred *session_msg_cred(const ProtobufCMessage *msg);

/*
 * Whether @c, as @s's export mapped it (session_map_cred()), is admin:
 * root (uid 0) on an export with the admin option, as MooseFS's and
 * CephFS's root on a client with admin rights; NULL @c (no credentials
 * sent) is not. The export's flag alone is not: any user of an admin
 * client would do.
 */
bool session_admin_root(const struct session *s, const Sweepfs__Cred *c);

/* Admin root (session_admin_root()) whose export is not confined to a
 * subtree: the one who may learn the whole filesystem's figures (a full
 * INFO), as SW_MSG_F_WHOLE requests (FSCK, GROUP) are its alone. */
bool session_admin_whole(const struct session *s, const Sweepfs__Cred *c);

/*
 * Whether @s, for caller @cred (mapped; NULL: none), may name node @ino by
 * number with the @n handles at @h (sweepfs.proto, "Node handles"): one
 * of them is @ino's, or @ino is @s's root, or one @s numbers itself
 * (session_ino_has()), or @cred is root's, who may search every directory.
 */
bool session_vouches(const struct master *m, const struct session *s,
		     const Sweepfs__Cred *cred, uint64_t ino, const uint64_t *h,
		     size_t n);

/*
 * Whether every node request @msg of @type names (sw_msg_nodes()) is one
 * @s may name (session_vouches(), with @msg's mapped credentials and its
 * handles): 0, -ESTALE, or -EINVAL for more than SW_HANDLES_MAX handles.
 * Before anything is done for the request, a recall included.
 */
int session_vouched_msg(const struct master *m, const struct session *s,
			uint16_t type, const ProtobufCMessage *msg);

#endif
