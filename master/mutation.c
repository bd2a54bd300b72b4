/*
 * Applying a journaled change to the namespace (mutation.h): live, right
 * after the handler committed it, and in replay at start-up.
 */
#include <endian.h>
#include <errno.h>
#include <limits.h>
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

/* ---- reading a change off the wire ------------------------------- */

/*
 * Protobuf's wire format (field number and type in a varint key, then a
 * varint, 8 bytes, a length and bytes, or 4 bytes), as far as the hints
 * and the common changes need. The hints' field numbers are
 * proto/meta.proto's; unit.checkpoint checks them against the generated
 * descriptors, and what both read against what an unpack gives.
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

/*
 * A varint. One of a byte (a key, a length) is read as such; of more,
 * the first 8 bytes are read at once where there are 8: the byte without
 * a continuation bit found by a mask, and the 7-bit groups put together
 * in three steps, with no branch a byte (a replay reads about forty
 * varints a change, the numbers among them of 3-9 bytes: ids, times).
 * Only the shortest form of a number is read, as every packer writes
 * it: a longer one (a last byte of 0), or bits past the 64th, is
 * refused, so that the value is the number, with no bits dropped that
 * protobuf-c would have looked at.
 */
static inline bool wire_varint(struct wire *w, uint64_t *v)
{
	const uint8_t *p = w->p;
	uint64_t x = 0;
	unsigned shift = 0;

	if (p < w->end && *p < 0x80) { /* keys, lengths, small numbers */
		*v = *p;
		w->p = p + 1;
		return true;
	}
	if (w->end - p >= 8) {
		uint64_t raw, stop;
		unsigned n;

		memcpy(&raw, p, sizeof(raw));
		raw = le64toh(raw);
		stop = ~raw & 0x8080808080808080ull;
		n = stop ? (unsigned)__builtin_ctzll(stop) / 8 + 1 : 8;
		if (n < 8)
			raw &= (1ull << 8 * n) - 1;
		/* The groups of 7 bits in twos, fours, then all eight. */
		x = raw & 0x7f7f7f7f7f7f7f7full;
		x = (x & 0x007f007f007f007full) |
		    (x >> 1 & 0x3f803f803f803f80ull);
		x = (x & 0x00003fff00003fffull) |
		    (x >> 2 & 0x0fffc0000fffc000ull);
		x = (x & 0x000000000fffffffull) |
		    (x >> 4 & 0x00fffffff0000000ull);
		p += n;
		if (stop) {
			*v = x;
			w->p = p;
			return x >> 7 * (n - 1) != 0; /* n > 1 here */
		}
		shift = 56;
	}
	for (; shift < 64 && p < w->end; shift += 7) {
		uint8_t b = *p++;

		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			w->p = p;
			return (shift == 0 || b != 0) && (shift < 63 || b <= 1);
		}
	}
	return false;
}

/* A field as read off the wire: its number, its wire type, and its
 * value (a varint's in @v; bytes' and a fixed one's in @b, pointing into
 * what was read). */
struct wire_val {
	uint32_t id;
	unsigned type;
	uint64_t v;
	ProtobufCBinaryData b;
};

/*
 * The next field of @w. False at the end or on what does not parse, or
 * not as protobuf-c parses it: a field number past 32 bits, or a length
 * past INT_MAX (in their shortest forms, both fit the 5 bytes protobuf-c
 * reads of them).
 */
static bool wire_field(struct wire *w, struct wire_val *f)
{
	uint64_t key, len;

	if (w->p >= w->end || !wire_varint(w, &key) || key >> 3 > UINT32_MAX)
		return false;
	f->id = (uint32_t)(key >> 3);
	f->type = key & 7;
	f->v = 0;
	f->b = (ProtobufCBinaryData){ 0 };
	switch (f->type) {
	case WIRE_VARINT:
		return wire_varint(w, &f->v);
	case WIRE_64:
	case WIRE_32:
		len = f->type == WIRE_64 ? 8 : 4;
		break;
	case WIRE_BYTES:
		if (!wire_varint(w, &len) || len > INT_MAX)
			return false;
		break;
	default:
		return false;
	}
	if (len > (uint64_t)(w->end - w->p))
		return false;
	f->b.data = (uint8_t *)w->p;
	f->b.len = (size_t)len;
	w->p += len;
	return true;
}

/* ---- the common changes read without protobuf-c -------------------- */

/*
 * A replay or a follower applies changes by the million, nearly all of
 * them creates and unlinks, and protobuf-c's unpack of one was a fifth
 * of a replay's time at 34 M files: it scans the fields once to count
 * them and again to read them, and initialises and copies into a
 * message per op. A change's message and its op's are flat (numbers,
 * bools and bytes), so they are read here in one pass, by their
 * generated descriptors (no field number written twice), into messages
 * on the caller's stack whose bytes point into the record.
 *
 * Only what protobuf-c reads one way is read: each known field once,
 * with its own wire type, and a value that fits its field as our own
 * packing writes it. Anything else (an unknown or repeated field, a
 * second op, a required field missing, a type this does not know) is
 * declined, and protobuf-c reads it as before. What is read here is what
 * protobuf-c would give; unit.checkpoint holds the two alike, on every
 * op and on damaged records.
 */

/* Store @f into the field @fd of @msg; false if it is not that field's
 * wire type or its value is not one our packing writes. */
static bool flat_put(const ProtobufCFieldDescriptor *fd,
		     const struct wire_val *f, uint8_t *msg)
{
	void *at = msg + fd->offset;
	unsigned want = fd->type == PROTOBUF_C_TYPE_BYTES ? WIRE_BYTES :
							    WIRE_VARINT;

	if (f->type != want)
		return false;
	switch (fd->type) {
	case PROTOBUF_C_TYPE_UINT64:
		*(uint64_t *)at = f->v;
		return true;
	case PROTOBUF_C_TYPE_UINT32:
		*(uint32_t *)at = (uint32_t)f->v;
		return f->v <= UINT32_MAX;
	case PROTOBUF_C_TYPE_INT32:
		/* A negative one is written sign-extended to 64 bits. */
		*(int32_t *)at = (int32_t)f->v;
		return (int64_t)f->v == (int32_t)f->v;
	case PROTOBUF_C_TYPE_SINT64:
		*(int64_t *)at = (int64_t)((f->v >> 1) ^ -(f->v & 1));
		return true;
	case PROTOBUF_C_TYPE_BOOL:
		*(protobuf_c_boolean *)at = f->v != 0;
		return f->v <= 1;
	case PROTOBUF_C_TYPE_BYTES: {
		ProtobufCBinaryData *b = at;

		b->len = f->b.len;
		b->data = f->b.len ? f->b.data : NULL; /* as protobuf-c */
		return true;
	}
	default:
		return false;
	}
}

/*
 * Read message @d of @n bytes at @p into @msg. A field of a oneof that is
 * a message (the change's op) is read into @sub (@sub_size bytes), itself
 * flat; there is one at most. False when protobuf-c must read it.
 */
static bool flat_read(const ProtobufCMessageDescriptor *d, const uint8_t *p,
		      size_t n, ProtobufCMessage *msg, void *sub,
		      size_t sub_size)
{
	struct wire w = { p, p + n };
	struct wire_val f;
	uint64_t seen = 0;

	if (d->n_fields > 64)
		return false;
	d->message_init(msg);
	while (w.p < w.end) {
		const ProtobufCFieldDescriptor *fd;
		uint64_t bit;

		if (!wire_field(&w, &f))
			return false;
		/* Fields are numbered from 1 without gaps, mostly. */
		fd = f.id - 1 < d->n_fields && d->fields[f.id - 1].id == f.id ?
			     &d->fields[f.id - 1] :
			     protobuf_c_message_descriptor_get_field(d, f.id);
		if (!fd || fd->label == PROTOBUF_C_LABEL_REPEATED)
			return false;
		bit = 1ull << (fd - d->fields);
		if (seen & bit)
			return false;
		seen |= bit;
		if (fd->type == PROTOBUF_C_TYPE_MESSAGE) {
			const ProtobufCMessageDescriptor *sd = fd->descriptor;

			if (!sub || f.type != WIRE_BYTES ||
			    !(fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) ||
			    sd->sizeof_message > sub_size ||
			    !flat_read(sd, f.b.data, f.b.len, sub, NULL, 0))
				return false;
			*(void **)((uint8_t *)msg + fd->offset) = sub;
			sub = NULL; /* a second op: protobuf-c's to read */
		} else if (!flat_put(fd, &f, (uint8_t *)msg)) {
			return false;
		}
		if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
			*(uint32_t *)((uint8_t *)msg + fd->quantifier_offset) =
				fd->id;
		else if (fd->label == PROTOBUF_C_LABEL_OPTIONAL &&
			 fd->quantifier_offset)
			*(protobuf_c_boolean *)((uint8_t *)msg +
						fd->quantifier_offset) = 1;
	}
	for (unsigned i = 0; i < d->n_fields; i++)
		if (d->fields[i].label == PROTOBUF_C_LABEL_REQUIRED &&
		    !(seen & 1ull << i))
			return false;
	return true;
}

bool mutation_read_flat(const uint8_t *payload, size_t len,
			struct mutation_flat *f)
{
	return flat_read(&sweepfs__meta__mutation__descriptor, payload, len,
			 &f->m.base, f->op, sizeof(f->op));
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

/* mutation_unpacked() for a change mutation_read_flat() declines. */
static int unpacked_by_protobuf(const uint8_t *payload, size_t len,
				int (*fn)(void *arg,
					  const Sweepfs__Meta__Mutation *m),
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

int mutation_unpacked(const uint8_t *payload, size_t len,
		      int (*fn)(void *arg, const Sweepfs__Meta__Mutation *m),
		      void *arg)
{
	struct mutation_flat flat;

	if (mutation_read_flat(payload, len, &flat))
		return fn(arg, &flat.m);
	return unpacked_by_protobuf(payload, len, fn, arg);
}

/* Field numbers of the ops' messages: 0 for one the op does not have;
 * @last, the highest of them; @stages, how many of the hint's stages
 * read anything for the op (mutation_prefetch(): an add's slots are all
 * asked for at stage 0, and a later stage need not read the change). */
struct hint_fields {
	uint32_t ino, parent, name, newparent, newname, last;
	unsigned stages;
};

static const struct hint_fields *hint_fields(uint32_t op)
{
	static const struct hint_fields create = { 3, 1, 2, 0, 0, 3, 1 },
					link = { 1, 2, 3, 0, 0, 3, 1 },
					unlink = { 0, 1, 2, 0, 0, 2, 2 },
					rename = { 0, 1, 2, 3, 4, 4, 2 },
					detach = { 0, 1, 2, 0, 0, 2, 2 };

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

/* mutation_hint_read() for hint stage @stage: op 0 for a change that
 * stage has nothing to read of. */
static void hint_read(const uint8_t *payload, size_t len, unsigned stage,
		      struct mutation_hint *h)
{
	struct wire w = { payload, payload + len };
	const struct hint_fields *f = NULL;
	struct wire_val v;
	uint32_t op = 0;

	memset(h, 0, sizeof(*h));
	/* The op: the one field of the change that is a message we read. */
	while (!f && wire_field(&w, &v)) {
		f = hint_fields(v.id);
		op = v.id;
	}
	if (!f || stage >= f->stages)
		return;
	/* A message's fields come in number order, what a hint reads
	 * first: it stops there (a create has a dozen more). */
	w = (struct wire){ v.b.data, v.b.data + v.b.len };
	while (wire_field(&w, &v) && v.id <= f->last) {
		if (v.id == f->ino)
			h->ino = v.v;
		else if (v.id == f->parent)
			h->parent = v.v;
		else if (v.id == f->name)
			h->name = v.b;
		else if (v.id == f->newparent)
			h->newparent = v.v;
		else if (v.id == f->newname)
			h->newname = v.b;
	}
	h->op = op;
}

void mutation_hint_read(const uint8_t *payload, size_t len,
			struct mutation_hint *h)
{
	hint_read(payload, len, 0, h);
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

	hint_read(payload, len, stage, &h);
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
