/*
 * A member of a group of masters that cannot follow the group's log, because
 * it was away for longer than etcd keeps the log (group.c prunes it) or it
 * starts with an empty data directory, catches up from the leader's newest
 * checkpoint:
 *
 * - its group thread connects to the leader as ROLE_MEMBER, proving that it
 *   holds the group's session key and asking the leader to prove it too
 *   (common/auth.h), and reads the checkpoint in pieces (catchup_fetch());
 * - the leader answers from its loop (op_meta_read()), from the file on
 *   its disk: a checkpoint, once published, never changes;
 * - the member checks the file's checksum and version, puts it in its
 *   data directory as a checkpoint of its own, and its loop loads it in
 *   place of what it had (master_reload()); then it follows the log from
 *   there.
 *
 * A checkpoint older than the member needs (the leader's newest is older
 * than the log etcd still has) makes the leader write one (EAGAIN; the
 * member asks again). While a member reads, the leader keeps the log
 * after that checkpoint in etcd (group_pin()), or it could be gone again
 * by the time the member has loaded it.
 *
 * The checkpoint's integrity is its own CRC-32C, checked before the file
 * takes a checkpoint's name; like every other frame on the master port,
 * it is not encrypted.
 */
#ifndef SWEEPFS_MASTER_CATCHUP_H
#define SWEEPFS_MASTER_CATCHUP_H

#include <stdbool.h>
#include <stdint.h>

#include "auth.h"
#include "checkpoint.h"

/* The largest piece of a checkpoint in one reply. */
#define CATCHUP_PIECE (512u << 10)

/*
 * What the member keeps of a checkpoint it reads in pieces for the checks
 * before it takes the file (checkpoint_ends_check()): its header, its
 * trailer and the sum of everything before the trailer. @size is set
 * before the first piece, at least CHECKPOINT_HEAD + CHECKPOINT_TAIL;
 * catchup_take() adds each piece in turn, none past @size.
 */
struct catchup_ends {
	uint64_t size, got;
	uint32_t crc;
	uint8_t head[CHECKPOINT_HEAD], tail[CHECKPOINT_TAIL];
};

void catchup_take(struct catchup_ends *e, const uint8_t *p, size_t n);

struct sw_client;

/*
 * One read of the leader's checkpoint over @c, a member's connection to
 * it (catchup_fetch() opens one), into @fd from its start: the first
 * piece alone, then several at once (catchup.c, read_pieces()). 0 with
 * *@version and *@e for the checks, -EAGAIN (the leader is writing one
 * new enough: ask again), -EPROTO (a reply that does not fit the file),
 * -ECANCELED (@stop), or the connection's or the disk's -errno.
 */
int catchup_read(struct sw_client *c, int fd, uint64_t need,
		 bool (*stop)(void *arg), void *arg, uint64_t *version,
		 struct catchup_ends *e);

/*
 * Fetch the checkpoint of the leader at @leader ("HOST:PORT") of version
 * @need at least into @dir, as checkpoint.<version>, durably. @key is the
 * group's session key; @name says who asks, for the leader's log. Blocks
 * for as long as it takes (the leader may first have to write one: it is
 * asked again every half second for a minute), each answer within
 * @timeout_ms; @stop(@arg) true between pieces cancels it. 0 with
 * *@version, or -errno (-EBADMSG: the file did not check out; -ECANCELED).
 */
int catchup_fetch(const char *leader, const uint8_t key[SW_AUTH_KEY],
		  const char *dir, uint64_t need, const char *name,
		  int timeout_ms, bool (*stop)(void *arg), void *arg,
		  uint64_t *version);

/* The leader's side is op_meta_read() (handlers.h). */

#endif
