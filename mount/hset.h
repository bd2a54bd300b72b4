/*
 * The handles a request to the master carries (sweepfs.proto, "Node
 * handles"): put on every request as it goes out (hset_attach(), from
 * master_conn.c), each node it names once, at most SW_HANDLES_MAX; and
 * counted for the batches of delegated operations (struct hset,
 * deleg.c), which end a batch before it would name one directory too
 * many. Plain data, no locking.
 */
#ifndef SWEEPFS_MOUNT_HSET_H
#define SWEEPFS_MOUNT_HSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "frame.h"

struct hset {
	uint64_t ino[SW_HANDLES_MAX];
	uint64_t handle[SW_HANDLES_MAX]; /* ino[i]'s; 0: not known yet */
	size_t n;
};

/*
 * Count @ino, whose handle is @handle (0: not known), in @s: true if @s
 * has it already (taking @handle if it knew none) or had room for it;
 * false, with @s unchanged, when it is new and @s is full.
 */
bool hset_add(struct hset *s, uint64_t ino, uint64_t handle);

/*
 * The known handles of @s packed at the front of s->handle; returns how
 * many. A node whose handle is not known is asked of @more (its handle or
 * 0; @more may be NULL); one neither knows is left out. s->ino no longer
 * matches s->handle after.
 */
size_t hset_pack(struct hset *s, uint64_t (*more)(void *arg, uint64_t ino),
		 void *arg);

/* Room for a request's shallow copy on the stack: the largest request
 * struct is far below this; a larger one is copied to the heap. */
#define HSET_COPY_BYTES 512

/* @ino's handle as this mount knows it, or 0 (master_conn.h, o.handle). */
typedef uint64_t (*hset_fn)(void *arg, uint64_t ino);

/* A request as it goes out, with its handles (hset_attach()). */
struct hset_msg {
	uint64_t h[SW_HANDLES_MAX];
	ProtobufCMessage *heap; /* the copy, when too big for `copy` */
	union {
		ProtobufCMessage msg;
		max_align_t align;
		unsigned char bytes[HSET_COPY_BYTES];
	} copy;
};

/*
 * @req with the handles of the nodes it names (sw_msg_vouch(), which asks
 * @fn(@arg, ino) for each), for packing: a shallow copy of it in @w
 * carrying them, or @req itself when it names none, has no field for
 * them, carries some already (its sender said them: a batch, a return),
 * none is known, @fn is NULL, or there is no memory for a big copy. A
 * node whose handle is not known goes without (the master answers
 * ESTALE, and the kernel looks the name up again). @req is not changed.
 * The result is valid as long as @req and @w are, and until
 * hset_detach(@w), which every call needs.
 */
const ProtobufCMessage *hset_attach(struct hset_msg *w, uint16_t type,
				    const ProtobufCMessage *req, hset_fn fn,
				    void *arg);
void hset_detach(struct hset_msg *w);

#endif
