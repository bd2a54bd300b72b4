/*
 * Mutations: the one way the namespace changes.
 *
 * A request handler decides everything about a change (inode number, edge
 * id, time, final mode and owner) and describes it as a
 * Sweepfs__Meta__Mutation (proto/meta.proto). mutation_apply() performs it
 * on the namespace; the same function replays the changelog at start-up,
 * so what was acknowledged is what comes back. One change is made before
 * it is described: the purge's steps (PurgeSteps, master_journal()).
 */
#ifndef SWEEPFS_MASTER_MUTATION_H
#define SWEEPFS_MASTER_MUTATION_H

#include <stdbool.h>

#include "meta.pb-c.h"
#include "namespace.h"

/*
 * Apply @m to @ns. On success ns->version becomes @version. Returns 0 or
 * the namespace's -errno; on failure nothing changed. During replay a
 * failure means the changelog and the namespace disagree.
 */
int mutation_apply(struct ns *ns, const Sweepfs__Meta__Mutation *m,
		   uint64_t version);

/*
 * Unpack change @payload (@len bytes, as the changelog holds it) and apply
 * it as version @version: mutation_apply() for replay, without an
 * allocation per change. -EUCLEAN if it does not unpack, else as
 * mutation_apply().
 */
int mutation_replay(struct ns *ns, uint64_t version, const uint8_t *payload,
		    size_t len);

/*
 * A hint for whoever applies changes in a row (replay, a follower): start
 * reading what applying change @payload (@len bytes) will touch while the
 * changes before it are applied: at millions of nodes each is a cache
 * miss, and a miss started a few changes early costs the apply nothing.
 * In two stages (changelog_hint_fn): at @stage 0 the slot of the name it
 * adds or removes in its directory's table and a create's slot in the
 * inode table; at stage 1, that name's slot being in, the removed entry's
 * node's slot in the inode table and its neighbours in the name table.
 * (A third stage for the node's neighbours cost more than it saved: the
 * deletion asks for them itself, htab.c.)
 * Changes nothing; a change that does not unpack, or names what is not
 * there, is left for its apply to refuse.
 */
void mutation_prefetch(const struct ns *ns, unsigned stage,
		       const uint8_t *payload, size_t len);

/*
 * What mutation_prefetch() reads of a change, straight from its wire
 * form rather than unpacked: a replay hints each change twice before it
 * applies it, and three unpacks a change were a third of a replay. @op
 * is the change's SWEEPFS__META__MUTATION__OP_* if it names a name
 * (create, link, unlink, rename, detach), else 0; then the fields it
 * has (@name and @newname point into @payload). A record whose op does
 * not parse reads as op 0, a field past damage inside it as 0: a hint is
 * a guess, and a wrong one costs a wasted read.
 */
struct mutation_hint {
	unsigned op;
	uint64_t ino, parent, newparent;
	ProtobufCBinaryData name, newname;
};

void mutation_hint_read(const uint8_t *payload, size_t len,
			struct mutation_hint *h);

/*
 * Read change @payload (@len bytes) onto the stack, by
 * mutation_read_flat() or else by protobuf-c, and call @fn with it, for
 * those who do more than apply it (a follower journals what it applies);
 * @m, and its bytes, which may point into @payload, live until @fn
 * returns. -EUCLEAN if it does not unpack, else what @fn returns.
 */
int mutation_unpacked(const uint8_t *payload, size_t len,
		      int (*fn)(void *arg, const Sweepfs__Meta__Mutation *m),
		      void *arg);

/*
 * A change read without protobuf-c (mutation.c says why): the change's
 * message, its op's in @op; bytes point into the record read. Only
 * changes of flat messages read one way are; mutation_read_flat() is
 * false for anything else (protobuf-c's to read, or to refuse) and then
 * leaves @f undefined. mutation_unpacked() tries it first.
 */
struct mutation_flat {
	Sweepfs__Meta__Mutation m;
	_Alignas(16) uint8_t op[256];
};

bool mutation_read_flat(const uint8_t *payload, size_t len,
			struct mutation_flat *f);

#endif
