/*
 * Checkpoints: the whole namespace in one file, so that start-up replays
 * only the changelog written since.
 *
 * data_dir/checkpoint.<version, 20 digits> holds the namespace as it was
 * after changelog version <version>. Writing goes to a ".tmp" name,
 * fdatasync, rename, fsync of the directory: a checkpoint file either is
 * complete or does not exist under its final name. Its trailer carries a
 * CRC-32C of everything before it.
 *
 * A checkpoint of a live master is written by a forked child, which sees
 * the namespace frozen at the fork (copy-on-write) while the parent's loop
 * goes on serving; the child runs at low CPU and I/O priority. Forking a
 * process that has threads is safe here because the child touches only
 * memory the loop thread owns, plus malloc and stdio, which glibc makes
 * fork-safe, and then _exit()s without running anything else.
 */
#ifndef SWEEPFS_MASTER_CHECKPOINT_H
#define SWEEPFS_MASTER_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "child.h"
#include "namespace.h"

/*
 * Write @ns as the checkpoint of @version into @dir, synchronously.
 * Returns 0 or -errno (the temporary file is removed on failure).
 */
int checkpoint_write(const struct ns *ns, const char *dir, uint64_t version);

/*
 * Make checkpoint @version, written by a checkpointer with hold set, the
 * checkpoint of that version (rename, fsync of @dir). 0 or -errno (the
 * held file is removed then).
 */
int checkpoint_publish(const char *dir, uint64_t version);

/*
 * A checkpoint received whole as a byte stream (catchup.h) is checked
 * without reading it again: its first CHECKPOINT_HEAD bytes @head and last
 * CHECKPOINT_TAIL bytes @tail, and @crc, the CRC-32C of all but the tail.
 * Whether they make a checkpoint of @version.
 */
#define CHECKPOINT_HEAD 16
#define CHECKPOINT_TAIL 4
bool checkpoint_ends_check(const uint8_t head[CHECKPOINT_HEAD],
			   const uint8_t tail[CHECKPOINT_TAIL], uint32_t crc,
			   uint64_t version);

/* The path of checkpoint @version in @dir, into @buf. */
void checkpoint_name(char *buf, size_t len, const char *dir, uint64_t version);

/* The version of the newest checkpoint in @dir (not checked): 1 with
 * *@version, 0 when there is none, or -errno. */
int checkpoint_newest(const char *dir, uint64_t *version);

/*
 * Load the newest readable checkpoint in @dir into @ns, which must be
 * freshly ns_init()ed. A checkpoint that fails its checks is logged and
 * the next older one tried (@ns is reset in between). Returns 0 with its
 * version in *@version (0 and an untouched @ns when there is none), or
 * -errno when checkpoints exist but none loads.
 */
int checkpoint_load(struct ns *ns, const char *dir, uint64_t *version);

/*
 * Delete all but the @keep newest checkpoints (and stale ".tmp" files).
 * Returns the version of the oldest one kept (0 if none), or -errno.
 */
int64_t checkpoint_prune(const char *dir, unsigned keep);

/* A checkpoint written in the background; zeroed before first use. */
struct checkpointer {
	struct sw_child child;
	const struct ns *ns;
	const char *dir;
	uint64_t version;
	/* Leave the file under its ".tmp" name for checkpoint_publish():
	 * a group's leader has it in memory before the group commits it. */
	bool hold;
	void (*done)(void *arg, int rc);
	void *arg;
};

/* Whether @ck's child is still at work. */
static inline bool checkpoint_running(const struct checkpointer *ck)
{
	return ck->child.active;
}

/*
 * Fork a child (child.h) that writes the checkpoint of @version from
 * @ns. When the child has exited, @done runs on the loop with 0 or a
 * negative errno. Returns 0 or -errno (-EBUSY while @ck is running).
 */
int checkpoint_start(struct checkpointer *ck, uv_loop_t *loop,
		     const struct ns *ns, const char *dir, uint64_t version,
		     void (*done)(void *arg, int rc), void *arg);

#endif
