/*
 * The changelog: every mutation, appended to disk before it is
 * acknowledged, so a restart (checkpoint + replay) restores every
 * acknowledged change.
 *
 * Files: data_dir/changelog.<first version, 20 digits>, each starting with
 * a 16-byte header ("SWCL", format, first version) followed by records:
 *
 *   u32 payload length | u32 crc32c(version, payload) | u64 version | payload
 *
 * all little-endian; the payload is a packed Sweepfs__Meta__Mutation.
 * Versions increase by one from record to record across files. A new file
 * starts at every checkpoint, so files wholly older than the newest
 * checkpoint can be deleted.
 *
 * Durability policies (config "changelog_sync"):
 *  - always:   a reply waits until its record is written and fdatasync'd;
 *              concurrent requests share one fdatasync (group commit).
 *  - interval: a reply waits until its record is written (it survives the
 *              master's death, kill -9 included); fdatasync runs every
 *              changelog_sync_interval while records are written, and
 *              not while none are.
 *  - never:    written before the reply; fdatasync only at rotation.
 * In every policy a mutation's record reaches the kernel before the reply
 * to it leaves.
 *
 * Threads: appends happen on the loop thread, which writes each
 * iteration's records itself while the disk is calm, and otherwise hands
 * them to the changelog's writer thread; fdatasync and fallocate run on a
 * second thread (at low I/O priority), and both report back through a
 * uv_async_t. While a checkpoint of 34 M files went to disk, a write(2)
 * of the changelog on ext4 waited up to 117 ms for the journal, and
 * every client's request with it: the owner says when it keeps the disk
 * busy (changelog_defer()), and a write here slower than a millisecond
 * hands the next 10 s of records to the writer. A hand-over costs two
 * thread wake-ups, which is why the calm disk is written here. Replies to
 * mutations wait for their records (o->on_durable). A reply that changed
 * nothing goes out at once, and may show a change handed over and not
 * yet written (as, with "always", one not yet synced): a master killed
 * then loses the change, and no client was told it was made.
 *
 * Bounds: records handed over and not yet written are held to
 * o->max_behind bytes (plus a loop iteration's; a batch's written chunks
 * stay in memory until the batch is done, so its peak is about twice
 * that); past that the loop waits
 * for the writer's next write, of a MiB of whole records at most, each
 * reported as written, so a slow disk is seen making progress. A disk
 * that makes no progress while records wait is seen by
 * changelog_lag_ns(), which the group's lease and the systemd watchdog
 * consult, so a master with a hung disk gives up its lease and is
 * restarted as one whose loop hung.
 *
 * Space is preallocated ahead of the writer; when the disk is full,
 * changelog_admit() refuses new mutations with -ENOSPC before they change
 * anything, and admits them again once preallocation succeeds.
 */
#ifndef SWEEPFS_MASTER_CHANGELOG_H
#define SWEEPFS_MASTER_CHANGELOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "hist.h"
#include "meta.pb-c.h"

enum cl_sync {
	CL_SYNC_ALWAYS,
	CL_SYNC_INTERVAL,
	CL_SYNC_NEVER,
};

struct changelog_opts {
	const char *dir; /* data directory */
	enum cl_sync sync;
	uint64_t interval_ms; /* fdatasync period for CL_SYNC_INTERVAL */
	uint64_t prealloc;    /* bytes allocated per fallocate step */
	/* Records handed to the writer and not yet written, at most
	 * (bytes; 0: 64 MiB): past that, changelog_flush() waits for the
	 * writer's next MiB. */
	uint64_t max_behind;
	/* Never write(2) on the loop, even while the disk is calm. */
	bool thread_only;
	/* A write(2) on the loop slower than this (ns; 0: 1 ms) sends the
	 * next 10 s of records to the writer thread. */
	int64_t direct_slow_ns;
	/* Called on the loop thread when records up to @version are as
	 * durable as the policy requires. */
	void (*on_durable)(void *arg, uint64_t version);
	/* Gated only (changelog_gate()): records just flushed, @last the
	 * version of the last one, to be shipped to the group; the bytes
	 * are the caller's to copy. */
	void (*ship)(void *arg, const uint8_t *recs, size_t len, uint64_t last);
	void *arg;
};

struct changelog;

/*
 * Start a new changelog file after version @last (the state the namespace
 * is in) and the sync thread. Returns 0 with *@out, or -errno.
 */
int changelog_open(uv_loop_t *loop, const struct changelog_opts *o,
		   uint64_t last, struct changelog **out);

/*
 * Whether a mutation may be appended now: 0, or -ENOSPC while the disk
 * has no room for more records.
 */
int changelog_admit(const struct changelog *cl);

/*
 * Make room to append @m and encode it there, so that the append after
 * applying it cannot fail, and so that what @m points to may be freed in
 * between (applying an unlink frees the name it carries). Returns 0 or
 * -ENOMEM. A prepare not followed by its append is forgotten at the next.
 */
int changelog_prepare(struct changelog *cl, const Sweepfs__Meta__Mutation *m);

/*
 * Append @m as version @version, which must be the last version + 1: the
 * encoding changelog_prepare() made of @m, if it was the last prepared;
 * otherwise @m as it is now (and then ENOMEM aborts). Does not fail after
 * a successful changelog_prepare() for the same @m.
 */
void changelog_append(struct changelog *cl, const Sweepfs__Meta__Mutation *m,
		      uint64_t version);

/*
 * For a follower, whose changes come as records already (the group's
 * log): make room for a record of @n bytes, so that the append after
 * applying it cannot fail (0 or -ENOMEM); then append record @rec (@n
 * bytes, whole, as changelog_record() reads it; its version the last + 1)
 * as it is, without encoding its change again or computing its checksum.
 */
int changelog_reserve(struct changelog *cl, size_t n);
void changelog_append_record(struct changelog *cl, const uint8_t *rec, size_t n,
			     uint64_t version);

/*
 * Hand what was appended since the last flush to be written and made
 * durable (o->on_durable says when). Call once per loop iteration, after
 * request handling. Waits only while o->max_behind bytes wait for the
 * writer already. A write or fdatasync error is fatal: memory is ahead
 * of the disk and only a restart can reconcile them, so the loop logs
 * and exits when it hears of it (70).
 */
void changelog_flush(struct changelog *cl);

/*
 * While @on, every flush is handed to the writer thread, whatever the
 * disk did lately: for while the owner itself keeps the disk busy (a
 * checkpoint being written).
 */
void changelog_defer(struct changelog *cl, bool on);

/*
 * How long records have waited for the disk without it making progress
 * (a write or, with "always", an fdatasync completing) at monotonic @now;
 * 0 when nothing waits. Any thread.
 */
int64_t changelog_lag_ns(struct changelog *cl, int64_t now);

/*
 * From now on, flushed records go to o->ship and wait in memory; they are
 * written (and become durable per the policy) only once
 * changelog_release() says the group has them. For the leader of a group
 * of masters: the file never holds a record the group may not have, so a
 * deposed leader's disk agrees with the group's log.
 */
void changelog_gate(struct changelog *cl);

/* The records held with versions <= @upto are committed: write them. */
void changelog_release(struct changelog *cl, uint64_t upto);

/*
 * The record at the start of @p (@n bytes), in the format above: its
 * size, with *@version, *@payload and *@len; 0 when @p does not start
 * with a whole record whose checksum matches.
 */
size_t changelog_record(const uint8_t *p, size_t n, uint64_t *version,
			const uint8_t **payload, size_t *len);

/* The highest version as durable as the policy requires. */
uint64_t changelog_durable(const struct changelog *cl);

/* The highest version appended. */
uint64_t changelog_last(const struct changelog *cl);

/* How long the changelog's fdatasyncs took, since it was opened. */
void changelog_fsync_time(struct changelog *cl, struct sw_hist *out);

/*
 * End the current file (flushed, written and fdatasync'd: the loop waits
 * for that) and start the next one at the last version written + 1.
 * Returns 0 or -errno (the old file stays in use on failure).
 */
int changelog_rotate(struct changelog *cl);

/*
 * Flush, write, fdatasync, stop the threads and close; o->on_durable
 * hears of the last records. @cl is freed once the loop has run the close
 * callbacks.
 */
void changelog_close(struct changelog *cl);

/*
 * Delete files all of whose records have versions <= @upto. Returns the
 * number deleted or -errno.
 */
int changelog_prune(const char *dir, uint64_t upto);

/* The bytes of the files in @dir that may hold versions > @after (what a
 * replay from @after reads): 0 or -errno. */
int changelog_bytes_after(const char *dir, uint64_t after, uint64_t *bytes);

typedef int (*changelog_apply_fn)(void *arg, uint64_t version,
				  const uint8_t *payload, size_t len);

/*
 * Feed every record with version > @after, in order, to @fn. A torn or
 * corrupt tail of the newest file is cut off (truncated) and logged; a bad
 * record anywhere else, a gap in versions, or an error from @fn stops the
 * replay with -EUCLEAN (or @fn's error). On success *@last is the last
 * version seen (@after if none).
 */
int changelog_replay(const char *dir, uint64_t after, changelog_apply_fn fn,
		     void *arg, uint64_t *last);

/*
 * Called with a record's payload before the same record goes to the apply
 * function, so that it can start reading what the apply will touch
 * (mutation_prefetch()): at @stage 0 CHANGELOG_AHEAD records before, at
 * each next stage half as many before, when what the stage before asked
 * for has come in and can be followed one link further (a name's slot to
 * its entry, the entry to its node's slot, the slot to its neighbours).
 * A hint: it must change nothing, and the record is checked (version,
 * apply) only later.
 */
typedef void (*changelog_hint_fn)(void *arg, unsigned stage,
				  const uint8_t *payload, size_t len);
#define CHANGELOG_AHEAD 8u
/* Two: a third (the node's neighbours in the inode table, two records
 * ahead) unpacked each change once more for no gain (nsbench, 3 M and
 * 34 M files). */
#define CHANGELOG_STAGES 2u

/* changelog_replay() that gives each record to @hint (may be NULL) at
 * every stage before it goes to @fn. */
int changelog_replay_ahead(const char *dir, uint64_t after,
			   changelog_apply_fn fn, changelog_hint_fn hint,
			   void *arg, uint64_t *last);

/*
 * For a reader of records in a buffer: give the record at @off of @p (@n
 * bytes) to @hint as @stage, if a whole one starts there, and return
 * where the next one starts (@n when none does).
 */
size_t changelog_hint(const uint8_t *p, size_t n, size_t off, unsigned stage,
		      changelog_hint_fn hint, void *arg);

/*
 * The readers ahead of whoever applies the records in a buffer (replay, a
 * follower's log), one a stage. changelog_ahead_init() when the first
 * record to apply starts at @off of @p (@n bytes), then
 * changelog_ahead_step() before each record is applied: every record is
 * then hinted at each stage, in stage order, the stage-s hint
 * CHANGELOG_AHEAD >> s records before its apply (fewer for the first
 * ones). Nothing is hinted past the first record that is not whole. No
 * allocation, nothing to release. A record's crc is checked once, by the
 * first stage: changelog_ahead_record() reads the records to apply
 * without checking again those it checked.
 */
struct changelog_ahead {
	const uint8_t *p; /* the records */
	size_t n;	  /* bytes at @p */
	changelog_hint_fn hint;
	void *arg;		      /* @hint's */
	size_t off[CHANGELOG_STAGES]; /* each stage's next record */
	size_t checked;		      /* records before it are whole */
};

void changelog_ahead_init(struct changelog_ahead *a, const uint8_t *p, size_t n,
			  size_t off, changelog_hint_fn hint, void *arg);
void changelog_ahead_step(struct changelog_ahead *a);

/* changelog_record() of the record at @off of @a's buffer, its crc
 * checked only if the first stage has not. */
size_t changelog_ahead_record(const struct changelog_ahead *a, size_t off,
			      uint64_t *version, const uint8_t **payload,
			      size_t *len);

#endif
