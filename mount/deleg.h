/*
 * Directory delegations, the mount's side (the protocol is in
 * sweepfs.proto, the master's side in master/deleg.h).
 *
 * Opening a directory asks the master for a delegation on it, in the same
 * round trip as the open. While the mount holds one, it answers unlink,
 * rmdir, create, mknod, mkdir and symlink in that directory itself, after
 * the checks the master would make, with the same errors; and lookups
 * there from its listing, whose attributes nobody else can change
 * meanwhile. New nodes take inode numbers the master handed out in
 * advance; a directory made here is held from birth. The operations wait in a
 * queue and go to the master in batches: when a batch is full, 20 ms
 * after the first one queued, and before any other request this mount
 * sends, so that whatever the mount asks afterwards sees them done.
 *
 * A recall (another session wants the directory) is handled on the
 * flusher thread: the queue goes out, the delegation is forgotten, and
 * DELEG_RETURN follows on the same connection. fsync on the directory,
 * and unmounting, wait until every batch sent is durable on the master.
 * An operation the master refused after the mount had acknowledged it is
 * logged, and fsync on the directory returns its error.
 *
 * Locking: mu guards the directories and the queue and is never held
 * while sending; smu orders the batches and returns on the wire and is
 * held while sending; amu guards what the receiver thread reports (batch
 * replies, recalls). The receiver thread takes mu and amu only, briefly,
 * so it can always go on reading replies.
 */
#ifndef SWEEPFS_MOUNT_DELEG_H
#define SWEEPFS_MOUNT_DELEG_H

#include <stdbool.h>
#include <stdint.h>

#include "mount_i.h"

struct deleg;

/* @enabled false (-o wsync): nothing is asked, everything synchronous. */
int deleg_new(struct mount *m, bool enabled, struct deleg **out);
int deleg_start(struct deleg *dg); /* the flusher thread */
/* Send what is queued and wait (at most @wait_ms) for it to be durable;
 * the flusher stops. Before mconn_close(). */
void deleg_stop(struct deleg *dg, int wait_ms);
void deleg_free(struct deleg *dg);

/* Ask for a delegation on @dir, unless held or asked for already. */
void deleg_want(struct deleg *dg, uint64_t dir);

/*
 * The entry timeout for @name in @dir, to be handed to the kernel now: a
 * long one in a held directory whose own entry in the kernel is known
 * (deleg_note_dir()): all such names are taken back when the delegation
 * ends (deleg.c says how). Else 0: the usual one. A long one is
 * asked for again just before the reply goes (ops.c): a recall handled
 * between the two, which told the kernel to forget the directory's
 * names, must not see one come back for long (the window left is the
 * reply's own write; readdirplus is not asked again).
 */
double deleg_entry_timeout(struct deleg *dg, uint64_t dir, const char *name);

/*
 * Directory @ino goes to the kernel as @name in @parent (a lookup, mkdir
 * or readdirplus reply): where to invalidate its cached names from; and
 * if it was given back as removed, it was not: the kernel forgets the
 * names below it now. Call before the reply. O(1).
 */
void deleg_note_dir(struct deleg *dg, uint64_t parent, const char *name,
		    uint64_t ino);

/*
 * This mount renamed @name in @parent to @newname in @newparent
 * (@exchange: RENAME_EXCHANGE): the kernel moved its entry, and places
 * deleg_note_dir() recorded follow. O(WHERE_SLOTS + held directories).
 */
void deleg_renamed(struct deleg *dg, uint64_t parent, const char *name,
		   uint64_t newparent, const char *newname, bool exchange);

/* The master's attributes @a (a reply's): a held directory's own copy
 * follows them (a chmod or chown this mount made there). */
void deleg_note_attr(struct deleg *dg, const Sweepfs__Attr *a);

/*
 * A held directory's attributes as this mount keeps them (any change to
 * the directory by another session recalls it first): true with *@out
 * (unless NULL), false when @dir is not held.
 */
bool deleg_dir_attr(struct deleg *dg, uint64_t dir, Sweepfs__Attr *out);

/*
 * @dir's handle (Attr.handle) as the delegation's answer or the batch
 * that made it gave it, while this mount keeps @dir's state (held, asked
 * for, being given back); 0 otherwise. For the requests that name a
 * directory the kernel has forgotten: its batches and its return.
 */
uint64_t deleg_handle(struct deleg *dg, uint64_t dir);

/* Whether @dir is delegated to this mount now. */
bool deleg_held(struct deleg *dg, uint64_t dir);

/*
 * unlink (or with @rmdir rmdir) of @name in @parent for @cred, decided
 * here: 1 when done (queued for the master; the operation answers 0),
 * -errno for the operation to answer, 0 when it must go to the master as
 * usual. Its checks are the master's, in the master's order.
 */
int deleg_remove(struct deleg *dg, uint64_t parent, const char *name,
		 bool rmdir, const Sweepfs__Cred *cred);

/*
 * mknod (of a regular file, FIFO or socket), mkdir, symlink (@target) or,
 * with @fi, create-and-open of @name in @parent with @mode (type and
 * permissions) for @cred: 1 when made here (*@e is what to answer, whose
 * inode the caller counts and, with @fi, opens), -errno to answer, 0 when
 * it must go to the master as usual. Made here, a node takes an inode
 * number the master gave in advance, and its creation is queued.
 */
int deleg_make(struct deleg *dg, uint64_t parent, const char *name,
	       uint32_t mode, const char *target, const Sweepfs__Cred *cred,
	       const struct fuse_file_info *fi, struct fuse_entry_param *e);

/*
 * A file is closed: true if it was made here and its creation is still
 * queued, which now says it is not open (the master never hears of the
 * open); false when the master is to be told.
 */
bool deleg_release(struct deleg *dg, uint64_t ino);

/* Before any other request to the master: send what is queued. */
void deleg_flush(struct deleg *dg);

/* fsync on a directory: wait until everything sent is durable; returns 0
 * or the -errno of an operation the master refused since the last call. */
int deleg_sync(struct deleg *dg);

/* From the master (receiver thread): give @dir back; @removed: the
 * request that recalls it removes its tree (a hint: knames.c). */
void deleg_recall(struct deleg *dg, uint64_t dir, bool removed);

/*
 * The inode ranges the master gave us last, with its proofs, for the
 * hello of a reconnect (Hello.ino_ranges): the creates of batches sent
 * again use their numbers. Fills *@out (one malloc'd block, the caller
 * frees it) and *@n. Receiver thread.
 */
void deleg_ino_claims(struct deleg *dg, Sweepfs__InoClaim ***out, size_t *n);

/* Reconnected: the master has dropped every delegation of ours. Or the
 * lease ran out (master_conn.h): it is about to; give them all back. */
void deleg_reconnected(struct deleg *dg);

/* Whether any directory is held, asked for or being given back (not
 * merely refused). */
bool deleg_any(struct deleg *dg);

#endif
