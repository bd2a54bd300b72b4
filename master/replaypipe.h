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
 * Without a thread (pthread_create() failed) the caller's thread decodes
 * each record as it takes it: the same records, in the same order.
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

#define RPIPE_SLOTS 512u

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

struct rpipe {
	const uint8_t *p; /* the file */
	size_t n;
	rpipe_record_fn record;
	uint64_t after; /* records of versions up to it are not decoded */
	const struct replay_decoder *dec;
	struct rpipe_slot *slots;
	size_t next_off; /* the worker's next record */
	bool threaded;
	atomic_size_t head, tail; /* slots made, slots given back */
	atomic_bool stop;	  /* the caller is done */
	atomic_bool main_waits, worker_waits;
	pthread_mutex_t lock;
	pthread_cond_t made, freed;
	pthread_t thread;
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

/* Stop the worker and release every slot not given back. */
void rpipe_stop(struct rpipe *r);

#endif
