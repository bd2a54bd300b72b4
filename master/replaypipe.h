/*
 * Decoding a changelog file's records on a second thread while the
 * caller applies them (changelog_replay_decoded(), which gives the pipe
 * its record reader: the pipe knows nothing of the changelog's format).
 *
 * A replay is one core's work: each record's crc, its unpack and its
 * apply, in order. The apply must stay on the caller's thread (it
 * changes the namespace), but the crc and the unpack read only the
 * mapped file, and were a third of a replay (perf, nsbench at 3 M
 * files). A pipe runs them on a thread of its own, RPIPE_SLOTS records
 * ahead, into slots the caller takes in order and gives back.
 *
 * The worker stops at the first record that is not whole (a torn tail,
 * a bad crc) and says where it is, as a slot with rec == 0; the caller
 * stops the pipe before the file is unmapped, whatever happened.
 * Without a thread (pthread_create() failed, or no memory for the ring)
 * the caller's thread decodes each record as it takes it: the same
 * records, in the same order.
 *
 * Memory: the ring is about 1 MiB; a change that does not fit a slot's
 * scratch (a big xattr value, a snapshot's part) is malloc()ed, so up to
 * RPIPE_SLOTS of those may be held at once, where an inline replay held
 * one.
 */
#ifndef SWEEPFS_MASTER_REPLAYPIPE_H
#define SWEEPFS_MASTER_REPLAYPIPE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * What the pipe does with a record: @decode turns its payload into what
 * @apply takes, on the pipe's thread, using the RPIPE_SCRATCH bytes at
 * @scratch (16-aligned, its own until @release) as far as they go; it
 * must read nothing but its arguments, and returns NULL if the record
 * does not decode (then @apply is given NULL and says why). @apply and
 * @release (what @decode allocated beyond @scratch) run on the caller's
 * thread.
 */
#define RPIPE_SCRATCH 2048u

struct replay_decoder {
	void *(*decode)(const uint8_t *payload, size_t len, void *scratch);
	int (*apply)(void *arg, uint64_t version, void *decoded);
	void (*release)(void *decoded, void *scratch);
};

/* The record at @p (@n bytes), checked: its length, or 0 if no whole
 * one starts there (changelog_record()). */
typedef size_t (*rpipe_record_fn)(const uint8_t *p, size_t n, uint64_t *version,
				  const uint8_t **payload, size_t *len);

#define RPIPE_SLOTS 512u /* a power of two */

/* One record, decoded. */
struct rpipe_slot {
	size_t off; /* where it starts in the file */
	size_t rec; /* its length; 0: no whole record starts at @off */
	uint64_t version;
	const uint8_t *payload;
	size_t len;
	void *decoded; /* NULL for a version <= after, or what failed */
	_Alignas(16) uint8_t scratch[RPIPE_SCRATCH];
};

/*
 * The caller's side and the worker's each on their own cache lines: an
 * index one side moves and the other reads, and what each keeps to
 * itself (its copy of the other's index, read again only when the ring
 * looks empty or full).
 */
struct rpipe {
	const uint8_t *p; /* the file */
	size_t n;
	rpipe_record_fn record;
	uint64_t after; /* records of versions up to it are not decoded */
	const struct replay_decoder *dec;
	struct rpipe_slot *slots;
	size_t nslots; /* RPIPE_SLOTS, or 1 without a thread */
	bool threaded;
	pthread_mutex_t lock;
	pthread_cond_t made, freed;
	pthread_t thread;
	atomic_bool stop; /* the caller is done */

	_Alignas(64) atomic_size_t head; /* slots made (the worker's) */
	atomic_bool main_waits;		 /* the caller sleeps on made */
	size_t next_off;		 /* the worker's next record */
	size_t tail_seen;		 /* the worker's copy of tail */

	_Alignas(64) atomic_size_t tail; /* slots given back (the caller's) */
	atomic_bool worker_waits;	 /* the worker sleeps on freed */
	size_t head_seen;		 /* the caller's copy of head */
	size_t checked;			 /* rpipe_checked()'s last answer */
};

/* Start decoding the records @record finds in @p (@n bytes) from @off on,
 * those of versions above @after. 0 or -ENOMEM. */
int rpipe_start(struct rpipe *r, const uint8_t *p, size_t n, size_t off,
		rpipe_record_fn record, uint64_t after,
		const struct replay_decoder *dec);

/* The next record, waiting for it if need be. A slot with rec == 0 is
 * the last. */
struct rpipe_slot *rpipe_next(struct rpipe *r);

/* Give back the slot rpipe_next() returned (its decoded form released). */
void rpipe_done(struct rpipe *r, struct rpipe_slot *s);

/* Where the records the worker has checked so far end (0: none, or no
 * worker): a reader of the same file need not check them again. */
size_t rpipe_checked(struct rpipe *r);

/* Stop the worker and release every slot not given back. */
void rpipe_stop(struct rpipe *r);

#endif
