/*
 * A bump allocator for the memory of one request: protobuf-c unpacks a
 * request into it (sw_arena_pb()), the handler runs, and everything goes
 * at once with sw_arena_reset(), with no free() per field and no walk of
 * the message to free it. The master unpacks every request this way; a
 * batch of a thousand removals is thousands of small allocations.
 *
 * Memory comes in blocks; a reset keeps the first (so a steady load
 * allocates nothing) and frees the rest, so one big request does not
 * keep its memory. Not thread-safe.
 */
#ifndef SWEEPFS_COMMON_ARENA_H
#define SWEEPFS_COMMON_ARENA_H

#include <stdalign.h>
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

struct sw_arena_block {
	struct sw_arena_block *next;
	size_t size; /* bytes of data[] */
	alignas(max_align_t) unsigned char data[];
};

struct sw_arena {
	struct sw_arena_block *first, *cur;
	size_t used; /* bytes taken in cur */
	ProtobufCAllocator pb;
};

void sw_arena_init(struct sw_arena *a);

/* @n bytes aligned for any type, or NULL when out of memory. */
void *sw_arena_alloc(struct sw_arena *a, size_t n);

/* Forget every allocation; keep the first block. */
void sw_arena_reset(struct sw_arena *a);

/* Free every block. */
void sw_arena_release(struct sw_arena *a);

/* The arena as a protobuf-c allocator (its free does nothing). */
static inline ProtobufCAllocator *sw_arena_pb(struct sw_arena *a)
{
	return &a->pb;
}

#endif
