/*
 * Applying a journaled change to the namespace (mutation.h): live, right
 * after the handler committed it, and in replay at start-up.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mutation.h"
#include "replies.h"
#include "trash.h"

static struct node *get_dir(struct ns *ns, uint64_t ino)
{
	struct node *n = ns_get(ns, ino);

	return n && S_ISDIR(n->mode) ? n : NULL;
}

static int apply_create(struct ns *ns, const Sweepfs__Meta__Create *c,
			int64_t now)
{
	struct ns_create_args a = {
		.ino = c->ino,
		.edge = c->edge,
		.mode = c->mode,
		.uid = c->uid,
		.gid = c->gid,
		.rdev = c->rdev,
		.target = (const char *)c->target.data,
		.target_len = c->target.len,
		.now = now,
	};
	struct node *dir = get_dir(ns, c->parent);

	if (!dir)
		return -ENOENT;
	return ns_create(ns, dir, (const char *)c->name.data, c->name.len, &a,
			 NULL);
}

static int apply_link(struct ns *ns, const Sweepfs__Meta__Link *l, int64_t now)
{
	struct node *n = ns_get(ns, l->ino);
	struct node *dir = get_dir(ns, l->parent);

	if (!n || !dir)
		return -ENOENT;
	return ns_link(ns, n, dir, (const char *)l->name.data, l->name.len,
		       l->edge, now);
}

static int apply_unlink(struct ns *ns, const Sweepfs__Meta__Unlink *u,
			int64_t now, uint64_t version)
{
	struct node *dir = get_dir(ns, u->parent);

	if (!dir)
		return -ENOENT;
	if (u->trash_until > 0)
		return ns_trash_unlink(ns, dir, (const char *)u->name.data,
				       u->name.len, version, u->trash_until,
				       now);
	return ns_unlink(ns, dir, (const char *)u->name.data, u->name.len,
			 u->keep, now);
}

static int apply_rename(struct ns *ns, const Sweepfs__Meta__Rename *r,
			int64_t now)
{
	struct node *sdir = get_dir(ns, r->parent);
	struct node *ddir = get_dir(ns, r->newparent);

	if (!sdir || !ddir)
		return -ENOENT;
	return ns_rename(ns, sdir, (const char *)r->name.data, r->name.len,
			 ddir, (const char *)r->newname.data, r->newname.len,
			 r->flags, r->edge, r->keep, now);
}

static int apply_setattr(struct ns *ns, const Sweepfs__Meta__Setattr *s,
			 int64_t now)
{
	struct node *n = ns_get(ns, s->ino);
	struct ns_setattr_args a = {
		.valid = s->valid,
		.mode = s->mode,
		.uid = s->uid,
		.gid = s->gid,
		.size = s->size,
		.atime = s->atime,
		.mtime = s->mtime,
		.now = now,
	};

	if (!n)
		return -ENOENT;
	return ns_setattr(ns, n, &a);
}

static int apply_setxattr(struct ns *ns, const Sweepfs__Meta__Setxattr *x,
			  int64_t now)
{
	struct node *n = ns_get(ns, x->ino);

	if (!n)
		return -ENOENT;
	if (x->remove)
		return ns_xattr_remove(ns, n, x->name.data, x->name.len, now);
	return ns_xattr_set(ns, n, x->name.data, x->name.len, x->value.data,
			    x->value.len, now);
}

static int apply_chunk_set(struct ns *ns, const Sweepfs__Meta__ChunkSet *c)
{
	struct node *n = ns_get(ns, c->ino);
	struct chunk_intent in = { .id = c->chunk_id,
				   .version = c->version,
				   .kind = INTENT_CREATE,
				   .length = -1 };
	int rc;

	if (!n)
		return -ENOENT;
	rc = ns_chunk_set(ns, n, c->index, c->chunk_id, c->version);
	if (rc < 0)
		return rc;
	if (c->has_src_chunk_id) {
		in.kind = INTENT_DUPLICATE;
		in.src = c->src_chunk_id;
		in.src_version = c->src_version;
	}
	if (c->has_length)
		in.length = (int64_t)c->length;
	/* Failing to keep the intent (out of memory) does not undo the
	 * change: a crash before it is done leaves the chunk to fsck
	 * instead of redoing it. */
	(void)ns_intent_note(ns, &in);
	return 0;
}

static int apply_chunk_version(struct ns *ns,
			       const Sweepfs__Meta__ChunkVersion *v)
{
	struct chunk_intent in = { .id = v->chunk_id,
				   .version = v->version,
				   .kind = INTENT_BUMP,
				   .length = v->has_length ?
						     (int64_t)v->length :
						     -1 };
	int rc;

	if (v->has_done && v->done) {
		if (!chunk_get(ns, v->chunk_id))
			return -ENOENT;
		ns_intent_done(ns, v->chunk_id, v->version);
		return 0;
	}
	rc = chunk_set_version(ns, v->chunk_id, v->version);
	if (rc == 0)
		(void)ns_intent_note(ns, &in); /* as in apply_chunk_set() */
	return rc;
}

static int apply_detach(struct ns *ns, const Sweepfs__Meta__Detach *d,
			int64_t now, uint64_t version)
{
	struct node *dir = get_dir(ns, d->parent);

	if (!dir)
		return -ENOENT;
	if (d->trash_until > 0)
		return ns_trash_detach(ns, dir, (const char *)d->name.data,
				       d->name.len, version, d->trash_until,
				       now);
	return ns_detach(ns, dir, (const char *)d->name.data, d->name.len,
			 version, now);
}

static int apply_set_eattr(struct ns *ns, const Sweepfs__Meta__SetEattr *e)
{
	struct node *dir = get_dir(ns, e->parent);
	int64_t rc;

	if (!dir)
		return -ENOENT;
	rc = ns_set_eattr(ns, dir, (const char *)e->name.data, e->name.len,
			  e->snapshot, e->recursive,
			  e->has_owner ? e->owner : NS_ANY_OWNER,
			  e->has_below ? e->below : 0);
	return rc < 0 ? (int)rc : 0;
}

/*
 * Snapshot copies. A part or an end that fails to copy still changed
 * the namespace the same way on replay, so it applies (the copy keeps the
 * error and fails at its end); only a record for no such copy is refused.
 */
static int apply_snapshot(struct ns *ns, const Sweepfs__Meta__Mutation *m)
{
	const Sweepfs__Meta__SnapshotBegin *b = m->snapshot_begin;
	const Sweepfs__Meta__SnapshotPart *p = m->snapshot_part;
	const Sweepfs__Meta__SnapshotEnd *e = m->snapshot_end;
	uint64_t id;
	int rc;

	switch (m->op_case) {
	case SWEEPFS__META__MUTATION__OP_SNAPSHOT_BEGIN:
		return ns_copy_begin(ns, b->id, b->parent,
				     (const char *)b->name.data, b->name.len,
				     b->chunk_start);
	case SWEEPFS__META__MUTATION__OP_SNAPSHOT_PART:
		if (!ns_copy_active(ns, &id) || id != p->id)
			return -ENOENT;
		rc = ns_copy_part(ns, p->id, p->records.data, p->records.len,
				  p->ino_base, p->edge_base);
		(void)rc; /* kept by the copy */
		return 0;
	default:
		if (!ns_copy_active(ns, &id) || id != e->id)
			return -ENOENT;
		ns_copy_end(ns, e->id, e->edge, e->has_abort ? e->abort : 0,
			    m->time, NULL);
		return 0;
	}
}

static int apply_trash(struct ns *ns, const Sweepfs__Meta__Mutation *m)
{
	const Sweepfs__Meta__TrashRestore *tr = m->trash_restore;
	struct node *n;
	int64_t rc;

	switch (m->op_case) {
	case SWEEPFS__META__MUTATION__OP_SET_TRASHTIME:
		n = get_dir(ns, m->set_trashtime->ino);
		if (!n)
			return -ENOENT;
		rc = ns_set_trashtime(ns, n, m->set_trashtime->seconds,
				      m->set_trashtime->recursive,
				      m->set_trashtime->has_owner ?
					      m->set_trashtime->owner :
					      NS_ANY_OWNER);
		return rc < 0 ? (int)rc : 0;
	case SWEEPFS__META__MUTATION__OP_TRASH_RESTORE:
		n = get_dir(ns, tr->parent);
		if (!n)
			return -ENOENT;
		return ns_trash_restore(ns, tr->id, n,
					(const char *)tr->name.data,
					tr->name.len, tr->edge, m->time);
	default:
		return ns_trash_drop(ns, m->trash_drop->id, m->trash_drop->keep,
				     m->time);
	}
}

static int apply_release(struct ns *ns, const Sweepfs__Meta__Release *r)
{
	struct node *n = ns_get(ns, r->ino);

	if (!n)
		return -ENOENT;
	return ns_release_orphan(ns, n);
}

int mutation_apply(struct ns *ns, const Sweepfs__Meta__Mutation *m,
		   uint64_t version)
{
	int rc;

	switch (m->op_case) {
	case SWEEPFS__META__MUTATION__OP_CREATE:
		rc = apply_create(ns, m->create, m->time);
		break;
	case SWEEPFS__META__MUTATION__OP_LINK:
		rc = apply_link(ns, m->link, m->time);
		break;
	case SWEEPFS__META__MUTATION__OP_UNLINK:
		rc = apply_unlink(ns, m->unlink, m->time, version);
		break;
	case SWEEPFS__META__MUTATION__OP_RENAME:
		rc = apply_rename(ns, m->rename, m->time);
		break;
	case SWEEPFS__META__MUTATION__OP_SETATTR:
		rc = apply_setattr(ns, m->setattr, m->time);
		break;
	case SWEEPFS__META__MUTATION__OP_SETXATTR:
		rc = apply_setxattr(ns, m->setxattr, m->time);
		break;
	case SWEEPFS__META__MUTATION__OP_RELEASE:
		rc = apply_release(ns, m->release);
		break;
	case SWEEPFS__META__MUTATION__OP_CHUNK_SET:
		rc = apply_chunk_set(ns, m->chunk_set);
		break;
	case SWEEPFS__META__MUTATION__OP_CHUNK_VERSION:
		rc = apply_chunk_version(ns, m->chunk_version);
		break;
	case SWEEPFS__META__MUTATION__OP_DETACH:
		rc = apply_detach(ns, m->detach, m->time, version);
		break;
	case SWEEPFS__META__MUTATION__OP_SET_EATTR:
		rc = apply_set_eattr(ns, m->set_eattr);
		break;
	case SWEEPFS__META__MUTATION__OP_SNAPSHOT_BEGIN:
	case SWEEPFS__META__MUTATION__OP_SNAPSHOT_PART:
	case SWEEPFS__META__MUTATION__OP_SNAPSHOT_END:
		rc = apply_snapshot(ns, m);
		break;
	case SWEEPFS__META__MUTATION__OP_SET_GOAL: {
		struct node *n = ns_get(ns, m->set_goal->ino);
		int64_t r;

		if (!n || m->set_goal->goal > NS_GOAL_MAX) {
			rc = n ? -EINVAL : -ENOENT;
			break;
		}
		r = ns_set_goal(ns, n, m->set_goal->goal,
				m->set_goal->recursive,
				m->set_goal->has_owner ? m->set_goal->owner :
							 NS_ANY_OWNER);
		rc = r < 0 ? (int)r : 0;
		break;
	}
	case SWEEPFS__META__MUTATION__OP_SET_TRASHTIME:
	case SWEEPFS__META__MUTATION__OP_TRASH_RESTORE:
	case SWEEPFS__META__MUTATION__OP_TRASH_DROP:
		rc = apply_trash(ns, m);
		break;
	case SWEEPFS__META__MUTATION__OP_PURGE_STEPS:
		rc = ns_purge_steps(ns, m->purge_steps->count,
				    m->purge_steps->last, m->time);
		break;
	case SWEEPFS__META__MUTATION__OP_RESERVE:
		/* Forward only: a range handed out stays taken, and replay
		 * after a checkpoint that saw later numbers keeps those. */
		if (m->reserve->next_ino > ns->next_ino)
			ns->next_ino = m->reserve->next_ino;
		rc = 0;
		break;
	case SWEEPFS__META__MUTATION__OP_CLUSTER_ID:
		/* Made once and never changed: the same again is nothing,
		 * another one (a bug, or a changelog spliced from another
		 * cluster) is refused, not believed. */
		rc = -EINVAL;
		if (m->cluster_id->id.len != NS_CLUSTER_ID_LEN)
			break;
		if (!ns_has_cluster_id(ns)) {
			memcpy(ns->cluster_id, m->cluster_id->id.data,
			       NS_CLUSTER_ID_LEN);
			ns->cluster_id_version = version;
		}
		if (!memcmp(ns->cluster_id, m->cluster_id->id.data,
			    NS_CLUSTER_ID_LEN))
			rc = 0;
		break;
	default:
		rc = -EINVAL;
	}
	if (rc == 0) {
		ns->version = version;
		replies_note(&ns->replies, m, version);
	}
	return rc;
}

/* ---- replay ------------------------------------------------------------ */

/*
 * Unpacking a change allocates its message and every submessage and
 * field; at a million changes a second that is millions of malloc() and
 * free() calls. Replay unpacks into a buffer it reuses instead: a bump
 * allocator on the stack whose free is a no-op, and malloc() only for
 * what does not fit (a big xattr value, a long snapshot part), freed one
 * by one.
 */
#define ARENA_SIZE (64u << 10)

struct arena {
	_Alignas(16) uint8_t buf[ARENA_SIZE];
	size_t used;
	unsigned spilled; /* allocations that went to malloc() */
};

static void *arena_alloc(void *data, size_t size)
{
	struct arena *a = data;
	size_t need = (size + 15) & ~(size_t)15;

	if (need >= size && ARENA_SIZE - a->used >= need) {
		void *p = a->buf + a->used;

		a->used += need;
		return p;
	}
	a->spilled++;
	return malloc(size);
}

static void arena_free(void *data, void *p)
{
	struct arena *a = data;

	if ((uint8_t *)p >= a->buf && (uint8_t *)p < a->buf + ARENA_SIZE)
		return;
	free(p);
}

int mutation_unpacked(const uint8_t *payload, size_t len,
		      int (*fn)(void *arg, const Sweepfs__Meta__Mutation *m),
		      void *arg)
{
	struct arena a; /* on the stack: 64 KiB, never zeroed */
	ProtobufCAllocator alloc = { arena_alloc, arena_free, &a };
	Sweepfs__Meta__Mutation *m;
	int rc;

	a.used = 0;
	a.spilled = 0;
	m = sweepfs__meta__mutation__unpack(&alloc, len, payload);
	if (!m)
		return -EUCLEAN;
	rc = fn(arg, m);
	/* Only what spilled needs freeing; the arena is reset next time. */
	if (a.spilled)
		sweepfs__meta__mutation__free_unpacked(m, &alloc);
	return rc;
}

/* ---- reading a change's names off the wire, for hints ------------ */

/*
 * Protobuf's wire format (field number and type in a varint key, then a
 * varint, 8 bytes, a length and bytes, or 4 bytes), as far as hints need.
 * The field numbers are proto/meta.proto's; unit.checkpoint checks them
 * against the generated descriptors, and what these read against what
 * an unpack gives.
 */
enum {
	WIRE_VARINT = 0,
	WIRE_64 = 1,
	WIRE_BYTES = 2,
	WIRE_32 = 5,
};

struct wire {
	const uint8_t *p, *end;
};

static bool wire_varint(struct wire *w, uint64_t *v)
{
	*v = 0;
	for (unsigned shift = 0; shift < 64 && w->p < w->end; shift += 7) {
		uint8_t b = *w->p++;

		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

/* The next field: its number, and its value (a varint's in *@v, bytes'
 * in *@b). False at the end or on what does not parse. */
static bool wire_field(struct wire *w, uint32_t *id, uint64_t *v,
		       ProtobufCBinaryData *b)
{
	uint64_t key, len;

	if (w->p >= w->end || !wire_varint(w, &key) || key >> 3 > UINT32_MAX)
		return false;
	*id = (uint32_t)(key >> 3);
	*v = 0;
	*b = (ProtobufCBinaryData){ 0 };
	switch (key & 7) {
	case WIRE_VARINT:
		return wire_varint(w, v);
	case WIRE_64:
	case WIRE_32:
		len = (key & 7) == WIRE_64 ? 8 : 4;
		break;
	case WIRE_BYTES:
		if (!wire_varint(w, &len))
			return false;
		break;
	default:
		return false;
	}
	if (len > (uint64_t)(w->end - w->p))
		return false;
	b->data = (uint8_t *)w->p;
	b->len = (size_t)len;
	w->p += len;
	return true;
}

/* Field numbers of the ops' messages: 0 for one the op does not have;
 * @last, the highest of them. */
struct hint_fields {
	uint32_t ino, parent, name, newparent, newname, last;
};

static const struct hint_fields *hint_fields(uint32_t op)
{
	static const struct hint_fields create = { 3, 1, 2, 0, 0, 3 },
					link = { 1, 2, 3, 0, 0, 3 },
					unlink = { 0, 1, 2, 0, 0, 2 },
					rename = { 0, 1, 2, 3, 4, 4 },
					detach = { 0, 1, 2, 0, 0, 2 };

	switch (op) {
	case SWEEPFS__META__MUTATION__OP_CREATE:
		return &create;
	case SWEEPFS__META__MUTATION__OP_LINK:
		return &link;
	case SWEEPFS__META__MUTATION__OP_UNLINK:
		return &unlink;
	case SWEEPFS__META__MUTATION__OP_RENAME:
		return &rename;
	case SWEEPFS__META__MUTATION__OP_DETACH:
		return &detach;
	default:
		return NULL;
	}
}

void mutation_hint_read(const uint8_t *payload, size_t len,
			struct mutation_hint *h)
{
	struct wire w = { payload, payload + len };
	const struct hint_fields *f = NULL;
	ProtobufCBinaryData b;
	uint32_t id, op = 0;
	uint64_t v;

	memset(h, 0, sizeof(*h));
	/* The op: the one field of the change that is a message we read. */
	while (!f && wire_field(&w, &id, &v, &b)) {
		f = hint_fields(id);
		op = id;
	}
	if (!f)
		return;
	/* A message's fields come in number order, what a hint reads
	 * first: it stops there (a create has a dozen more). */
	w = (struct wire){ b.data, b.data + b.len };
	while (wire_field(&w, &id, &v, &b) && id <= f->last) {
		if (id == f->ino)
			h->ino = v;
		else if (id == f->parent)
			h->parent = v;
		else if (id == f->name)
			h->name = b;
		else if (id == f->newparent)
			h->newparent = v;
		else if (id == f->newname)
			h->newname = b;
	}
	h->op = op;
}

/* Start reading @name's slot in directory @parent's table (stage 0), or
 * what removing that name touches (stage 1, ns_prefetch_entry()). */
static void prefetch_name(const struct ns *ns, unsigned stage, uint64_t parent,
			  const ProtobufCBinaryData *name)
{
	const struct node *dir = ns_get(ns, parent);

	if (!dir || !S_ISDIR(dir->mode) || !name->data)
		return;
	if (stage == 0)
		ns_prefetch_name(dir, (const char *)name->data, name->len);
	else
		ns_prefetch_entry(ns, dir, (const char *)name->data, name->len);
}

void mutation_prefetch(const struct ns *ns, unsigned stage,
		       const uint8_t *payload, size_t len)
{
	struct mutation_hint h;

	mutation_hint_read(payload, len, &h);
	switch (h.op) {
	case SWEEPFS__META__MUTATION__OP_CREATE:
		/* An add: its slots are all it reads, asked for at once. */
		if (stage > 0)
			break;
		prefetch_name(ns, 0, h.parent, &h.name);
		ns_prefetch(ns, h.ino);
		break;
	case SWEEPFS__META__MUTATION__OP_LINK:
		if (stage == 0)
			prefetch_name(ns, 0, h.parent, &h.name);
		break;
	case SWEEPFS__META__MUTATION__OP_UNLINK:
	case SWEEPFS__META__MUTATION__OP_DETACH:
		prefetch_name(ns, stage, h.parent, &h.name);
		break;
	case SWEEPFS__META__MUTATION__OP_RENAME:
		prefetch_name(ns, stage, h.parent, &h.name);
		if (stage == 0)
			prefetch_name(ns, 0, h.newparent, &h.newname);
		break;
	default:
		break;
	}
}
struct replay_one {
	struct ns *ns;
	uint64_t version;
};

static int replay_apply(void *arg, const Sweepfs__Meta__Mutation *m)
{
	struct replay_one *r = arg;

	return mutation_apply(r->ns, m, r->version);
}

int mutation_replay(struct ns *ns, uint64_t version, const uint8_t *payload,
		    size_t len)
{
	struct replay_one r = { ns, version };

	return mutation_unpacked(payload, len, replay_apply, &r);
}
