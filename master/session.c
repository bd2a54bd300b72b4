/*
 * Sessions: a client's identity across connections.
 *
 * A mount keeps one session for its lifetime. If its connection drops
 * (network, or the master restarting) it reconnects and says hello with
 * the same session id and the inodes it still has open, and carries on.
 * A session whose connection is gone lives on for session_timeout, so that
 * a reconnect finds its open files and cursors; then it is freed and its
 * opens released.
 *
 * Open files: each session counts its opens per inode (struct sess_open);
 * the master counts per inode how many sessions hold it (struct opener)
 * and marks the node NODE_OPEN. Unlinking the last name of an open node
 * keeps it as an orphan; the last release anywhere frees it, through a
 * journaled Release. Sessions are not journaled: after a restart every
 * orphan waits session_timeout for a mount to reclaim it, then goes.
 *
 * Readdir cursors: SESSION_CURSORS per session, least recently used
 * evicted; see DESIGN "Readdir cursor cache".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "hash.h"
#include "log.h"
#include "master_i.h"
#include "util.h"

#define TAG "session"

struct sess_open {
	uint64_t ino;
	uint32_t count;
};

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

static bool ino_eq(const void *e, const void *key)
{
	return *(const uint64_t *)e == *(const uint64_t *)key;
}

int sessions_init(struct master *m)
{
	htab_init(&m->sessions, session_hash);
	htab_init(&m->openers, ino_hash);
	return 0;
}

static struct session *session_find(struct master *m, uint64_t id)
{
	return htab_find(&m->sessions, sw_hash_u64(id), session_eq, &id);
}

/* One fewer session holds @ino. */
static void opener_drop(struct master *m, uint64_t ino)
{
	struct opener *op = htab_find(&m->openers, sw_hash_u64(ino), ino_eq,
				      &ino);
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
			sw_err(TAG, "releasing orphan %" PRIu64 ": %s; it "
				    "goes at the next restart",
			       ino, strerror(-rc));
	}
}

int session_open(struct master *m, struct session *s, struct node *n)
{
	uint64_t h = sw_hash_u64(n->ino);
	struct sess_open *so = htab_find(&s->opens, h, ino_eq, &n->ino);
	struct opener *op;

	if (so) {
		if (so->count == UINT32_MAX)
			return -EMFILE;
		so->count++;
		return 0;
	}
	so = malloc(sizeof(*so));
	if (!so)
		return -ENOMEM;
	so->ino = n->ino;
	so->count = 1;
	op = htab_find(&m->openers, h, ino_eq, &n->ino);
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

bool session_has_open(struct session *s, uint64_t ino)
{
	return s && htab_find(&s->opens, sw_hash_u64(ino), ino_eq, &ino);
}

void session_release(struct master *m, struct session *s, uint64_t ino)
{
	uint64_t h = sw_hash_u64(ino);
	struct sess_open *so = htab_find(&s->opens, h, ino_eq, &ino);

	if (!so || --so->count)
		return;
	htab_remove(&s->opens, h, so);
	free(so);
	opener_drop(m, ino);
}

static int drop_open(void *e, void *arg)
{
	struct sess_open *so = e;
	struct master *m = arg;

	opener_drop(m, so->ino);
	free(so);
	return 0;
}

static void session_free(struct master *m, struct session *s)
{
	for (int i = 0; i < SESSION_CURSORS; i++)
		ns_cursor_clear(&m->ns, &s->cursors[i].c);
	watch_drop_session(m, s);
	htab_foreach(&s->opens, drop_open, m);
	htab_release(&s->opens);
	htab_remove(&m->sessions, sw_hash_u64(s->id), s);
	if (s->prev)
		s->prev->next = s->next;
	else
		m->session_list = s->next;
	if (s->next)
		s->next->prev = s->prev;
	m->nsessions--;
	free(s);
}

void sessions_release(struct master *m)
{
	while (m->session_list)
		session_free(m, m->session_list);
	htab_release(&m->sessions);
	htab_release(&m->openers);
}

static uint64_t new_session_id(struct master *m)
{
	uint64_t id = 0;

	while (id == 0 || session_find(m, id)) {
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			id = sw_hash_u64((uint64_t)sw_mono_ns());
	}
	return id;
}

static struct session *session_new(struct master *m, uint64_t id)
{
	struct session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->id = id ? id : new_session_id(m);
	htab_init(&s->opens, ino_hash);
	for (int i = 0; i < SESSION_CURSORS; i++)
		ns_cursor_init(&s->cursors[i].c);
	if (htab_insert(&m->sessions, sw_hash_u64(s->id), s) < 0) {
		free(s);
		return NULL;
	}
	s->next = m->session_list;
	if (m->session_list)
		m->session_list->prev = s;
	m->session_list = s;
	m->nsessions++;
	return s;
}

static int collect_open(void *e, void *arg)
{
	struct sess_open *so = e;

	return sw_buf_add(arg, &so->ino, sizeof(so->ino));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Make @s's open files exactly @inos (an inode appears once per open).
 * Inodes that no longer exist are skipped.
 */
static void session_reclaim(struct master *m, struct session *s,
			    const uint64_t *inos, size_t n)
{
	struct sw_buf have = SW_BUF_INIT;
	uint64_t *want = NULL, *cur;
	size_t ncur;

	if (n) {
		want = malloc(n * sizeof(*want));
		if (!want)
			return;
		memcpy(want, inos, n * sizeof(*want));
		qsort(want, n, sizeof(*want), cmp_u64);
	}
	/* Drop what the client no longer has open. */
	if (htab_foreach(&s->opens, collect_open, &have) == 0) {
		cur = (uint64_t *)have.data;
		ncur = sw_buf_used(&have) / sizeof(uint64_t);
		for (size_t i = 0; i < ncur; i++) {
			struct sess_open *so;

			if (n && bsearch(&cur[i], want, n, sizeof(*want),
					 cmp_u64))
				continue;
			so = htab_find(&s->opens, sw_hash_u64(cur[i]), ino_eq,
				       &cur[i]);
			so->count = 1;
			session_release(m, s, cur[i]);
		}
	}
	sw_buf_release(&have);
	/* Set the count of each listed inode. */
	for (size_t i = 0; i < n;) {
		size_t j = i;
		struct sess_open *so;
		struct node *node = ns_get(&m->ns, want[i]);

		while (j < n && want[j] == want[i])
			j++;
		if (node && !S_ISDIR(node->mode)) {
			so = htab_find(&s->opens, sw_hash_u64(want[i]), ino_eq,
				       &want[i]);
			if (so)
				so->count = (uint32_t)(j - i);
			else
				for (size_t k = i; k < j; k++)
					session_open(m, s, node);
		}
		i = j;
	}
	free(want);
}

/* Walk @path ("/a/b") from the root; the directory's inode or -errno. */
static int64_t resolve_subdir(struct master *m, const uint8_t *path,
			      size_t len)
{
	struct node *n = m->ns.root;
	size_t i = 0;

	while (i < len) {
		size_t j;
		struct edge *e;

		while (i < len && path[i] == '/')
			i++;
		if (i == len)
			break;
		for (j = i; j < len && path[j] != '/'; j++)
			;
		if (!sw_name_valid(path + i, j - i))
			return -EINVAL;
		e = ns_lookup(&m->ns, n, (const char *)path + i, j - i);
		if (!e)
			return -ENOENT;
		n = e->child;
		if (!S_ISDIR(n->mode))
			return -ENOTDIR;
		i = j;
	}
	return (int64_t)n->ino;
}

static void copy_bytes(char *dst, size_t cap, const ProtobufCBinaryData *b)
{
	size_t n = SW_MIN(b->len, cap - 1);

	for (size_t i = 0; i < n; i++)
		dst[i] = b->data[i] >= 0x20 && b->data[i] < 0x7f
				 ? (char)b->data[i]
				 : '?';
	dst[n] = '\0';
}

int session_hello(struct req *r, const Sweepfs__Hello *h)
{
	Sweepfs__HelloReply reply = SWEEPFS__HELLO_REPLY__INIT;
	struct master *m = r->m;
	struct session *s = NULL;
	int64_t root;
	bool resumed = false;
	int rc;

	reply.has_version = 1;
	reply.version = SW_PROTO_VERSION;
	if (h->version != SW_PROTO_VERSION) {
		sw_notice(TAG, "%s: protocol version %u, want %u; refused",
			  r->conn->peer, h->version, SW_PROTO_VERSION);
		rc = -EPROTONOSUPPORT;
		goto out_err;
	}
	if (h->role != SWEEPFS__ROLE__ROLE_MOUNT &&
	    h->role != SWEEPFS__ROLE__ROLE_TOOL &&
	    h->role != SWEEPFS__ROLE__ROLE_CHUNKSERVER) {
		rc = -EINVAL;
		goto out_err;
	}
	root = h->has_subdir ? resolve_subdir(m, h->subdir.data, h->subdir.len)
			     : NS_ROOT_INO;
	if (root < 0) {
		sw_notice(TAG, "%s: export path not usable: %s", r->conn->peer,
			  strerror((int)-root));
		rc = (int)root;
		goto out_err;
	}
	if (h->session_id)
		s = session_find(m, h->session_id);
	if (s) {
		resumed = true;
		if (s->conn) {
			/* The client knows its old connection is dead
			 * before we do; that connection now has no session
			 * and is closed at its next request. */
			s->conn->s = NULL;
			s->conn = NULL;
		}
	} else {
		s = session_new(m, h->session_id);
		if (!s) {
			rc = -ENOMEM;
			goto out_err;
		}
	}
	/* After a restart, or requests lost with the old connection: the
	 * client's list of open files is the truth. */
	if (!resumed || h->reclaim)
		session_reclaim(m, s, h->open_inodes, h->n_open_inodes);
	s->role = h->role;
	s->conn = r->conn;
	s->root_ino = (uint64_t)root;
	s->connected_at = sw_now_ns();
	s->detached_at = 0;
	snprintf(s->peer, sizeof(s->peer), "%s", r->conn->peer);
	if (h->has_client_name)
		copy_bytes(s->name, sizeof(s->name), &h->client_name);
	r->conn->s = s;
	r->s = s;
	sw_info(TAG, "%s: session %016" PRIx64 " %s (%s)", r->conn->peer,
		s->id, resumed ? "resumed" : "started", s->name);
	reply.has_session_id = 1;
	reply.session_id = s->id;
	reply.has_root_ino = 1;
	reply.root_ino = s->root_ino;
	req_reply(r, &reply.base);
	return 0;

out_err:
	reply.has_err = 1;
	reply.err = -rc;
	req_reply(r, &reply.base);
	return rc;
}

void session_detach(struct master *m, struct conn *c)
{
	struct session *s = c->s;

	csrv_detach(m, c);
	if (!s || s->conn != c)
		return;
	s->conn = NULL;
	s->detached_at = sw_mono_ns();
	c->s = NULL;
	/* Tools and chunkservers hold nothing worth waiting for. */
	if (s->role != SWEEPFS__ROLE__ROLE_MOUNT)
		session_free(m, s);
}

void sessions_expire(struct master *m)
{
	int64_t limit = (int64_t)m->cfg.session_timeout_ms * 1000000;
	int64_t now = sw_mono_ns();
	struct session *s, *next;

	for (s = m->session_list; s; s = next) {
		next = s->next;
		if (s->conn || now - s->detached_at < limit)
			continue;
		sw_info(TAG, "session %016" PRIx64 " (%s) timed out", s->id,
			s->peer);
		session_free(m, s);
	}
}

static int collect_orphan(void *e, void *arg)
{
	struct node *n = e;
	struct sw_buf *list = arg;

	if (n->flags & NODE_OPEN)
		return 0;
	return sw_buf_add(list, &n->ino, sizeof(n->ino));
}

void orphans_expire(struct master *m)
{
	struct sw_buf list = SW_BUF_INIT;
	size_t count;

	if (!m->orphan_deadline || sw_mono_ns() < m->orphan_deadline)
		return;
	m->orphan_deadline = 0;
	if (htab_foreach(&m->ns.orphans, collect_orphan, &list) < 0) {
		sw_err(TAG, "out of memory listing orphans");
		goto out;
	}
	count = sw_buf_used(&list) / sizeof(uint64_t);
	for (size_t i = 0; i < count; i++) {
		Sweepfs__Meta__Release rel = SWEEPFS__META__RELEASE__INIT;
		Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;

		memcpy(&rel.ino, list.data + i * sizeof(uint64_t),
		       sizeof(uint64_t));
		mut.time = sw_now_ns();
		mut.op_case = SWEEPFS__META__MUTATION__OP_RELEASE;
		mut.release = &rel;
		if (master_commit(m, NULL, &mut) < 0)
			break;
	}
	if (count)
		sw_notice(TAG, "released %zu orphans nobody reclaimed", count);
out:
	sw_buf_release(&list);
}

struct cursor *session_cursor(struct master *m, struct session *s,
			      struct node *dir, bool create)
{
	struct sess_cursor *victim = &s->cursors[0];

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
