/*
 * Bump allocation in blocks (arena.h).
 */
#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>

#include "arena.h"

#define BLOCK_MIN (16u << 10)

static void *pb_alloc(void *arena, size_t n)
{
	return sw_arena_alloc(arena, n);
}

static void pb_free(void *arena, void *p)
{
	(void)arena;
	(void)p;
}

void sw_arena_init(struct sw_arena *a)
{
	*a = (struct sw_arena){ .pb = { pb_alloc, pb_free, a } };
}

void *sw_arena_alloc(struct sw_arena *a, size_t n)
{
	const size_t align = alignof(max_align_t);
	struct sw_arena_block *b;
	size_t at;

	if (n > SIZE_MAX / 2)
		return NULL;
	n = n ? (n + align - 1) & ~(align - 1) : align;
	if (a->cur && a->cur->size - a->used >= n) {
		at = a->used;
		a->used += n;
		return a->cur->data + at;
	}
	/* The next block: its own size at least, or twice the last one. */
	at = a->cur ? a->cur->size * 2 : BLOCK_MIN;
	if (at < n)
		at = n;
	b = malloc(sizeof(*b) + at);
	if (!b)
		return NULL;
	b->next = NULL;
	b->size = at;
	if (a->cur)
		a->cur->next = b;
	else
		a->first = b;
	a->cur = b;
	a->used = n;
	return b->data;
}

/* A reset keeps one block of what the last use took, up to this. */
#define KEEP_MAX (1u << 20)

void sw_arena_reset(struct sw_arena *a)
{
	struct sw_arena_block *b, *next, *one;
	size_t total = 0;

	if (!a->first)
		return;
	for (b = a->first; b; b = b->next)
		total += b->size;
	for (b = a->first->next; b; b = next) {
		next = b->next;
		free(b);
	}
	a->first->next = NULL;
	/* Several blocks: one of their size, so that the same load next
	 * time takes one (if memory allows; else the first stays). */
	if (total > a->first->size && total <= KEEP_MAX &&
	    (one = malloc(sizeof(*one) + total)) != NULL) {
		free(a->first);
		one->next = NULL;
		one->size = total;
		a->first = one;
	}
	a->cur = a->first;
	a->used = 0;
}

void sw_arena_release(struct sw_arena *a)
{
	sw_arena_reset(a);
	free(a->first);
	a->first = a->cur = NULL;
	a->used = 0;
}
