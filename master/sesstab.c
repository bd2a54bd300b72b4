/*
 * The session table and what a session holds (sesstab.h): finding a
 * session by id, its open files (and the master's count of sessions per
 * open file, which decides when an orphan goes), the non-directories a
 * confined session was told of, its readdir cursors and the mapping of
 * its credentials by its export.
 *
 * These are what the handlers do to a session while answering it, so
 * they sit in the request layer (scripts/layers.py), below the handlers:
 * a handler reaches them by name, not through session.c, which is the
 * server layer's (hello, reclaim, detach, expiry, the per-address
 * limits) and calls down into this file. Nothing here names a
 * connection or anything above the request layer: a released orphan is
 * committed through master_commit() (req.h) like any change.
 *
 * Open files: each session counts its opens per inode (struct
 * sess_open, sessrec.h); the master counts per inode how many sessions
 * hold it (struct opener) and marks the node NODE_OPEN. The last release
 * anywhere frees an orphan, through a journaled Release.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "context.h"
#include "log.h"
#include "req.h"
#include "sesstab.h"
#include "util.h"

#define TAG "session"

struct opener {
	uint64_t ino;
	uint32_t sessions;
};

static uint64_t session_hash(const void *e)
{
	return sw_hash_u64(((const struct session *)e)->id);
}

static bool session_eq(const void *e, const void *key)
{
	return ((const struct session *)e)->id == *(const uint64_t *)key;
}

/* struct sess_open and struct opener both start with the inode number. */
static uint64_t ino_hash(const void *e)
{
	return sw_hash_u64(*(const uint64_t *)e);
}

static uint64_t granted_hash(const void *e)
{
	return sw_hash_u64((uint64_t)(uintptr_t)e);
}

void sesstab_init(struct master *m)
{
	htab_init(&m->sessions, session_hash);
	htab_init(&m->openers, ino_hash);
}

void session_rec_init(struct session *s)
{
	htab_init(&s->opens, ino_hash);
	session_grants_reset(s);
}

void session_grants_reset(struct session *s)
{
	htab_release(&s->granted);
	htab_init(&s->granted, granted_hash);
}

void session_grant(struct session *s, const struct node *n)
{
	uint64_t ino = n->ino;

	if (!session_confined(s) || S_ISDIR(n->mode) || session_granted(s, ino))
		return;
	/* Bounded: a client that makes us name millions of files would
	 * otherwise grow the set for as long as it lives. Emptied, the
	 * set fills again as the kernel looks names up after ESTALE. */
	if (htab_count(&s->granted) >= s->grants_max)
		session_grants_reset(s);
	/* Out of memory: its next use fails with ESTALE, and the lookup
	 * the kernel then makes grants it again. */
	(void)htab_insert(&s->granted, sw_hash_u64(ino),
			  (void *)(uintptr_t)ino);
}

struct session *session_find(struct master *m, uint64_t id)
{
	return htab_find(&m->sessions, sw_hash_u64(id), session_eq, &id);
}

/* One fewer session holds @ino. */
static void opener_drop(struct master *m, uint64_t ino)
{
	struct opener *op =
		htab_find(&m->openers, sw_hash_u64(ino), sess_ino_eq, &ino);
	struct node *n;

	if (!op || --op->sessions)
		return;
	htab_remove(&m->openers, sw_hash_u64(ino), op);
	free(op);
	n = ns_get(&m->ns, ino);
	if (!n)
		return;
	n->flags &= (uint16_t)~NODE_OPEN;
	/* At shutdown orphans stay: clients may reclaim them after restart. */
	if ((n->flags & NODE_ORPHAN) && !m->stopping) {
		Sweepfs__Meta__Release rel = SWEEPFS__META__RELEASE__INIT;
		Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
		int rc;

		rel.ino = ino;
		mut.time = sw_now_ns();
		mut.op_case = SWEEPFS__META__MUTATION__OP_RELEASE;
		mut.release = &rel;
		rc = master_commit(m, NULL, &mut);
		if (rc < 0)
			sw_err(TAG,
			       "releasing orphan %" PRIu64 ": %s; it "
			       "goes at the next restart",
			       ino, strerror(-rc));
	}
}

int session_open(struct master *m, struct session *s, struct node *n,
		 int access)
{
	uint64_t h = sw_hash_u64(n->ino);
	struct sess_open *so = htab_find(&s->opens, h, sess_ino_eq, &n->ino);
	struct opener *op;

	if (so) {
		if (so->count == UINT32_MAX)
			return -EMFILE;
		so->count++;
		so->access |= (uint8_t)access;
		return 0;
	}
	so = malloc(sizeof(*so));
	if (!so)
		return -ENOMEM;
	so->ino = n->ino;
	so->count = 1;
	so->access = (uint8_t)access;
	op = htab_find(&m->openers, h, sess_ino_eq, &n->ino);
	if (!op) {
		op = malloc(sizeof(*op));
		if (!op)
			goto out_so;
		op->ino = n->ino;
		op->sessions = 0;
		if (htab_insert(&m->openers, h, op) < 0) {
			free(op);
			goto out_so;
		}
	}
	if (htab_insert(&s->opens, h, so) < 0) {
		if (op->sessions == 0) {
			htab_remove(&m->openers, h, op);
			free(op);
		}
		goto out_so;
	}
	op->sessions++;
	n->flags |= NODE_OPEN;
	return 0;

out_so:
	free(so);
	return -ENOMEM;
}

/*
 * @s closed @ino for good, or ended: the write leases it holds on the
 * file's chunks end (the mount drops its write locations on release
 * too), so that replication need not wait for them to run out, and a
 * snapshot of the file takes nothing back. A forged client that keeps
 * its token after the close could still write in place until the token
 * runs out, into a snapshot made meanwhile too (threat model, 20): left
 * so, as taking such leases back cost every snapshot of a tree written
 * in the last CSRV_TOKEN_TTL_MS a version bump per file.
 */
static void leases_end(struct master *m, struct session *s, uint64_t ino)
{
	struct node *n = ns_get(&m->ns, ino);

	if (!n || !S_ISREG(n->mode))
		return;
	for (uint32_t i = 0; i < ns_chunk_slots(n); i++) {
		struct chunk *c = chunk_get(&m->ns, ns_chunk_at(n, i));

		if (c && c->lease_session == s->id)
			c->lease_session = 0;
	}
}

void session_release(struct master *m, struct session *s, uint64_t ino)
{
	uint64_t h = sw_hash_u64(ino);
	struct sess_open *so = htab_find(&s->opens, h, sess_ino_eq, &ino);

	if (!so || --so->count)
		return;
	htab_remove(&s->opens, h, so);
	free(so);
	leases_end(m, s, ino);
	opener_drop(m, ino);
}

struct session_drop {
	struct master *m;
	struct session *s;
};

static int drop_open(void *e, void *arg)
{
	struct sess_open *so = e;
	struct session_drop *d = arg;

	/* Its writers are gone with it: their leases end. */
	leases_end(d->m, d->s, so->ino);
	opener_drop(d->m, so->ino);
	free(so);
	return 0;
}

void session_opens_drop(struct master *m, struct session *s)
{
	struct session_drop d = { m, s };

	htab_foreach(&s->opens, drop_open, &d);
	htab_release(&s->opens);
	htab_release(&s->granted);
}

int session_map_cred(const struct session *s, Sweepfs__Cred *c)
{
	if (!c)
		return 0;
	if (c->n_groups > SW_GROUPS_MAX)
		return -EINVAL;
	if (s->mapall_uid != EXPORT_NO_MAP) {
		c->uid = s->mapall_uid;
		c->gid = s->mapall_gid;
		c->n_groups = 0;
	} else if (s->maproot_uid != EXPORT_NO_MAP) {
		/* Root squashing as knfsd does it: uid 0 becomes maproot's
		 * user and group, and group 0 is squashed too, as the
		 * primary group and among the supplementary ones, so that
		 * no other user reaches root's group's files through it. */
		if (c->uid == 0) {
			c->uid = s->maproot_uid;
			c->gid = s->maproot_gid;
			c->n_groups = 0;
		}
		if (c->gid == 0)
			c->gid = s->maproot_gid;
		for (size_t i = 0; i < c->n_groups; i++)
			if (c->groups[i] == 0)
				c->groups[i] = s->maproot_gid;
	}
	return 0;
}

Sweepfs__Cred *session_msg_cred(const ProtobufCMessage *msg)
{
	const ProtobufCFieldDescriptor *f;

	f = protobuf_c_message_descriptor_get_field_by_name(msg->descriptor,
							    "cred");
	if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE ||
	    f->descriptor != &sweepfs__cred__descriptor)
		return NULL;
	return *(Sweepfs__Cred *const *)((const char *)msg + f->offset);
}

int session_map_msg(const struct session *s, ProtobufCMessage *msg)
{
	return session_map_cred(s, session_msg_cred(msg));
}

bool session_admin_root(const struct session *s, const Sweepfs__Cred *c)
{
	return c && session_admin_uid(s, c->uid);
}

bool session_admin_whole(const struct session *s, const Sweepfs__Cred *c)
{
	return session_admin_root(s, c) && !session_confined(s);
}

bool session_vouches(const struct master *m, const struct session *s,
		     const Sweepfs__Cred *cred, uint64_t ino, const uint64_t *h,
		     size_t n)
{
	uint64_t want;

	if (ino == s->root_ino || (cred && cred->uid == 0) ||
	    session_ino_has(s, ino))
		return true;
	want = sw_node_handle(m->handle_key, ino);
	for (size_t i = 0; i < n; i++)
		if (h[i] == want)
			return true;
	return false;
}

int session_vouched_msg(const struct master *m, const struct session *s,
			uint16_t type, const ProtobufCMessage *msg)
{
	const Sweepfs__Cred *cred = sw_msg_cred(msg);
	struct sw_msg_nodes it;
	uint64_t ino, last = 0;
	const uint64_t *h;
	size_t n;

	if (session_is_peer(s))
		return 0;
	h = sw_msg_handles(msg, &n);
	if (n > SW_HANDLES_MAX)
		return -EINVAL;
	sw_msg_nodes_begin(&it, type, msg);
	while (sw_msg_nodes_next(&it, &ino)) {
		/* A batch's operations name the same parent in a row. */
		if (ino == last)
			continue;
		if (!session_vouches(m, s, cred, ino, h, n))
			return -ESTALE;
		last = ino;
	}
	return 0;
}

struct cursor *session_cursor(struct master *m, struct session *s,
			      struct node *dir, bool create)
{
	struct sess_cursor *victim;

	if (!s->cursors) {
		if (!create)
			return NULL;
		s->cursors = calloc(SESSION_CURSORS, sizeof(*s->cursors));
		if (!s->cursors)
			return NULL;
		for (int i = 0; i < SESSION_CURSORS; i++)
			ns_cursor_init(&s->cursors[i].c);
	}
	victim = &s->cursors[0];

	for (int i = 0; i < SESSION_CURSORS; i++) {
		struct sess_cursor *sc = &s->cursors[i];

		if (sc->c.dir == dir && sc->dir_ino == dir->ino) {
			sc->last_used = ++s->cursor_clock;
			return &sc->c;
		}
		if (!sc->c.dir)
			sc->last_used = 0; /* free slot: evict first */
		if (sc->last_used < victim->last_used)
			victim = sc;
	}
	if (!create)
		return NULL;
	ns_cursor_clear(&m->ns, &victim->c);
	victim->dir_ino = dir->ino;
	victim->last_used = ++s->cursor_clock;
	return &victim->c;
}

void session_ino_proof(const struct master *m, uint64_t sid, uint64_t first,
		       uint32_t count, uint8_t proof[SW_AUTH_TAG])
{
	uint8_t b[20];

	for (int i = 0; i < 8; i++) {
		b[i] = (uint8_t)(sid >> (8 * i));
		b[8 + i] = (uint8_t)(first >> (8 * i));
	}
	for (int i = 0; i < 4; i++)
		b[16 + i] = (uint8_t)(count >> (8 * i));
	sw_auth_tag(m->session_key, SW_AUTH_INO_RANGE, b, sizeof(b), NULL, 0,
		    proof);
}

void session_ino_add(struct session *s, uint64_t lo, uint64_t hi)
{
	memmove(s->ino_lo + 1, s->ino_lo,
		sizeof(s->ino_lo) - sizeof(*s->ino_lo));
	memmove(s->ino_hi + 1, s->ino_hi,
		sizeof(s->ino_hi) - sizeof(*s->ino_hi));
	s->ino_lo[0] = lo;
	s->ino_hi[0] = hi;
}

bool session_ino_has(const struct session *s, uint64_t ino)
{
	for (unsigned i = 0; i < SW_ARRAY_SIZE(s->ino_lo); i++)
		if (ino >= s->ino_lo[i] && ino < s->ino_hi[i])
			return true;
	return false;
}
