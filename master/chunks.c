/*
 * Chunks: a hash table by id of struct chunk (from a slab), and per file a
 * ctab array of ids. References are counted per slot; ns_chunks_drop()
 * and ns_chunks_truncate() give them back, and a chunk whose count reaches
 * zero is handed to ns->chunk_gone() and freed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chunks.h"
#include "hash.h"
#include "namespace.h"
#include "frame.h"
#include "util.h"

static uint64_t chunk_hash(const void *e)
{
	return sw_hash_u64(((const struct chunk *)e)->id);
}

static bool chunk_eq(const void *e, const void *key)
{
	return ((const struct chunk *)e)->id == *(const uint64_t *)key;
}

static uint64_t intent_hash(const void *e)
{
	return sw_hash_u64(((const struct chunk_intent *)e)->id);
}

static bool intent_eq(const void *e, const void *key)
{
	return ((const struct chunk_intent *)e)->id == *(const uint64_t *)key;
}

void chunks_init(struct ns *ns)
{
	htab_init(&ns->chunks, chunk_hash);
	htab_init(&ns->intents, intent_hash);
	slab_init(&ns->chunk_slab, sizeof(struct chunk));
	ns->next_chunk = 1;
	ns->next_chunk_named = 1;
}

static int free_chunk_cb(void *e, void *arg)
{
	struct ns *ns = arg;

	slab_free(&ns->chunk_slab, e);
	return 0;
}

static int free_intent_cb(void *e, void *arg)
{
	free(e);
	return 0;
}

void chunks_release(struct ns *ns)
{
	htab_foreach(&ns->intents, free_intent_cb, NULL);
	htab_release(&ns->intents);
	htab_foreach(&ns->chunks, free_chunk_cb, ns);
	htab_release(&ns->chunks);
	slab_release(&ns->chunk_slab);
}

struct chunk *chunk_get(const struct ns *ns, uint64_t id)
{
	return htab_find(&ns->chunks, sw_hash_u64(id), chunk_eq, &id);
}

const struct chunk_intent *ns_intent_get(const struct ns *ns, uint64_t id)
{
	return htab_find(&ns->intents, sw_hash_u64(id), intent_eq, &id);
}

int ns_intent_note(struct ns *ns, const struct chunk_intent *in)
{
	struct chunk_intent *e =
		(struct chunk_intent *)ns_intent_get(ns, in->id);

	if (e) {
		*e = *in;
		return 0;
	}
	e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	*e = *in;
	if (htab_insert(&ns->intents, sw_hash_u64(in->id), e) < 0) {
		free(e);
		return -ENOMEM;
	}
	return 0;
}

/* Forget the intent @e, if any. */
static void intent_drop(struct ns *ns, const struct chunk_intent *e)
{
	if (e) {
		htab_remove(&ns->intents, sw_hash_u64(e->id), e);
		free((void *)e);
	}
}

void ns_intent_done(struct ns *ns, uint64_t id, uint32_t version)
{
	const struct chunk_intent *e = ns_intent_get(ns, id);

	if (e && e->version <= version)
		intent_drop(ns, e);
}

struct intent_walk {
	int (*fn)(const struct chunk_intent *in, void *arg);
	void *arg;
};

static int intent_walk_cb(void *e, void *arg)
{
	struct intent_walk *w = arg;

	return w->fn(e, w->arg);
}

int ns_intents_foreach(const struct ns *ns,
		       int (*fn)(const struct chunk_intent *in, void *arg),
		       void *arg)
{
	struct intent_walk w = { fn, arg };

	return htab_foreach(&ns->intents, intent_walk_cb, &w);
}

int chunks_foreach(const struct ns *ns, int (*fn)(void *chunk, void *arg),
		   void *arg)
{
	return htab_foreach(&ns->chunks, fn, arg);
}

static struct chunk *chunk_alloc(struct ns *ns, uint64_t id, uint32_t version)
{
	struct chunk *c;

	if (id == 0 || chunk_get(ns, id))
		return NULL;
	c = slab_alloc(&ns->chunk_slab);
	if (!c)
		return NULL;
	memset(c, 0, sizeof(*c));
	c->id = id;
	c->version = version;
	if (htab_insert(&ns->chunks, sw_hash_u64(id), c) < 0) {
		slab_free(&ns->chunk_slab, c);
		return NULL;
	}
	if (id >= ns->next_chunk)
		ns->next_chunk = id + 1;
	if (id >= ns->next_chunk_named)
		ns->next_chunk_named = id + 1;
	ns->nchunks++;
	return c;
}

bool ns_chunk_dead(const struct ns *ns, uint64_t id)
{
	if (!id || id >= ns->next_chunk_named || chunk_get(ns, id) ||
	    ns_intent_get(ns, id))
		return false;
	for (unsigned i = 0; i < ns->n_unnamed; i++)
		if (id >= ns->chunk_unnamed[i].lo &&
		    id < ns->chunk_unnamed[i].hi)
			return false;
	return true;
}

void ns_chunk_unnamed(struct ns *ns, uint64_t lo, uint64_t hi)
{
	struct ns_range *r = ns->chunk_unnamed;
	unsigned n = ns->n_unnamed, at = 0, best = 0;

	if (lo >= hi)
		return;
	while (at < n && r[at].lo < lo)
		at++;
	memmove(&r[at + 1], &r[at], (n - at) * sizeof(r[0]));
	r[at] = (struct ns_range){ lo, hi };
	n++;
	/* Overlapping or touching neighbours become one. */
	for (unsigned i = 0; i + 1 < n;) {
		if (r[i + 1].lo <= r[i].hi) {
			r[i].hi = SW_MAX(r[i].hi, r[i + 1].hi);
			memmove(&r[i + 1], &r[i + 2],
				(n - i - 2) * sizeof(r[0]));
			n--;
		} else {
			i++;
		}
	}
	if (n > NS_UNNAMED_MAX) {
		/* The closest two: the fewest named ids taken in. */
		for (unsigned i = 1; i + 1 < n; i++)
			if (r[i + 1].lo - r[i].hi < r[best + 1].lo - r[best].hi)
				best = i;
		r[best].hi = r[best + 1].hi;
		memmove(&r[best + 1], &r[best + 2],
			(n - best - 2) * sizeof(r[0]));
		n--;
	}
	ns->n_unnamed = n;
}

static void chunk_free(struct ns *ns, struct chunk *c)
{
	uint64_t id = c->id;

	if (ns->chunk_gone)
		ns->chunk_gone(ns->hook_arg, c);
	htab_remove(&ns->chunks, sw_hash_u64(id), c);
	intent_drop(ns, ns_intent_get(ns, id));
	ns->nchunks--;
	slab_free(&ns->chunk_slab, c);
}

static void chunk_unref(struct ns *ns, uint64_t id)
{
	struct chunk *c = chunk_get(ns, id);

	if (!c || --c->refs)
		return;
	/* A snapshot being copied may still name it (nscopy.c). */
	if (id < ns->copy_chunk_start && ns_copy_hold(ns, id) == 0)
		return;
	chunk_free(ns, c);
}

void ns_chunk_unhold(struct ns *ns, uint64_t id)
{
	struct chunk *c = chunk_get(ns, id);

	if (c && c->refs == 0)
		chunk_free(ns, c);
}

int chunk_set_version(struct ns *ns, uint64_t id, uint32_t version)
{
	struct chunk *c = chunk_get(ns, id);

	if (!c)
		return -ENOENT;
	c->version = version;
	return 0;
}

uint64_t ns_chunk_at(const struct node *n, uint32_t index)
{
	const struct ctab *t = S_ISREG(n->mode) ? n->u.chunks : NULL;

	return t && index < t->n ? t->id[index] : 0;
}

uint32_t ns_chunk_slots(const struct node *n)
{
	const struct ctab *t = S_ISREG(n->mode) ? n->u.chunks : NULL;

	return t ? t->n : 0;
}

/* Make room for slot @index; -ENOMEM leaves the table as it was. */
static int ctab_grow(struct ns *ns, struct node *n, uint32_t index)
{
	struct ctab *t = n->u.chunks, *nt;
	uint32_t old = t ? t->n : 0, want;

	if (index < old)
		return 0;
	want = SW_MAX(index + 1, old + old / 2);
	nt = realloc(t, sizeof(*nt) + (size_t)want * sizeof(nt->id[0]));
	if (!nt)
		return -ENOMEM;
	memset(&nt->id[old], 0, (size_t)(want - old) * sizeof(nt->id[0]));
	nt->n = want;
	ns->misc_bytes += (size_t)(want - old) * sizeof(nt->id[0]) +
			  (t ? 0 : sizeof(*nt));
	n->u.chunks = nt;
	return 0;
}

int ns_chunk_set(struct ns *ns, struct node *n, uint32_t index, uint64_t id,
		 uint32_t version)
{
	struct ctab *t;
	struct chunk *c;
	uint64_t old;

	if (!S_ISREG(n->mode))
		return -EINVAL;
	if (chunk_get(ns, id))
		return -EEXIST;
	if (ctab_grow(ns, n, index) < 0)
		return -ENOMEM;
	/* Ids are named in increasing order: one past the mark means the
	 * ids between were skipped, never named (ns_chunk_dead()). The same
	 * change replayed or applied by a follower finds the same gap. */
	if (id > ns->next_chunk_named)
		ns_chunk_unnamed(ns, ns->next_chunk_named, id);
	c = chunk_alloc(ns, id, version);
	if (!c)
		return -ENOMEM;
	t = n->u.chunks;
	old = t->id[index];
	t->id[index] = id;
	c->refs = 1;
	chunk_goal_add(c, ns_goal(n));
	if (old)
		chunk_unref(ns, old);
	return 0;
}

static void ctab_shrink(struct ns *ns, struct node *n, uint32_t keep)
{
	struct ctab *t = n->u.chunks;

	if (!t || keep >= t->n)
		return;
	for (uint32_t i = keep; i < t->n; i++)
		if (t->id[i])
			chunk_unref(ns, t->id[i]);
	ns->misc_bytes -= (size_t)(t->n - keep) * sizeof(t->id[0]);
	if (keep == 0) {
		ns->misc_bytes -= sizeof(*t);
		free(t);
		n->u.chunks = NULL;
		return;
	}
	t->n = keep;
	/* Shrinking realloc cannot fail in a way that matters: keep the
	 * bigger block if it does. */
	t = realloc(t, sizeof(*t) + (size_t)keep * sizeof(t->id[0]));
	if (t)
		n->u.chunks = t;
}

void ns_chunks_truncate(struct ns *ns, struct node *n, uint64_t size)
{
	uint64_t keep = (size + SW_CHUNK_SIZE - 1) / SW_CHUNK_SIZE;

	if (S_ISREG(n->mode) && keep < UINT32_MAX)
		ctab_shrink(ns, n, (uint32_t)keep);
}

void ns_chunks_drop(struct ns *ns, struct node *n)
{
	if (S_ISREG(n->mode))
		ctab_shrink(ns, n, 0);
}

int ns_load_chunk(struct ns *ns, uint64_t id, uint32_t version)
{
	return chunk_alloc(ns, id, version) ? 0 : -EEXIST;
}

int ns_load_slots(struct ns *ns, struct node *n, uint32_t count,
		  const uint64_t *ids)
{
	struct ctab *t;

	if (!S_ISREG(n->mode) || n->u.chunks || count == 0)
		return -EINVAL;
	for (uint32_t i = 0; i < count; i++)
		if (ids[i] && !chunk_get(ns, ids[i]))
			return -ENOENT;
	t = malloc(sizeof(*t) + (size_t)count * sizeof(t->id[0]));
	if (!t)
		return -ENOMEM;
	t->n = count;
	memcpy(t->id, ids, (size_t)count * sizeof(t->id[0]));
	for (uint32_t i = 0; i < count; i++) {
		if (ids[i]) {
			struct chunk *c = chunk_get(ns, ids[i]);

			c->refs++;
			chunk_goal_add(c, ns_goal(n));
		}
	}
	ns->misc_bytes += sizeof(*t) + (size_t)count * sizeof(t->id[0]);
	n->u.chunks = t;
	return 0;
}

static int collect_unreferenced(void *e, void *arg)
{
	struct chunk *c = e;
	struct chunk ***v = arg;

	if (c->refs == 0)
		*(*v)++ = c;
	return 0;
}

void chunks_drop_unreferenced(struct ns *ns)
{
	struct chunk **v = malloc((ns->nchunks ? ns->nchunks : 1) * sizeof(*v));
	struct chunk **end = v;

	if (!v)
		return; /* they stay, harmless: nothing points at them */
	htab_foreach(&ns->chunks, collect_unreferenced, &end);
	for (struct chunk **p = v; p < end; p++) {
		htab_remove(&ns->chunks, sw_hash_u64((*p)->id), *p);
		ns->nchunks--;
		slab_free(&ns->chunk_slab, *p);
	}
	free(v);
}
