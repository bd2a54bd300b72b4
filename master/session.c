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
 * Open files: each session counts its opens per inode and the master
 * counts per inode how many sessions hold it (sesstab.c, in the request
 * layer with the table of sessions, grants and cursors: what the
 * handlers use). Unlinking the last name of an open node keeps it as an
 * orphan; the last release anywhere frees it, through a journaled
 * Release. Sessions are not journaled: after a restart every orphan
 * waits session_timeout for a mount to reclaim it, then goes.
 *
 * Readdir cursors: SESSION_CURSORS per session, least recently used
 * evicted; see DESIGN "Readdir cursor cache".
 *
 * File locks (locks.h) belong to sessions too: they survive a reconnect
 * and go when the session is freed. Blocked lock requests belong to a
 * connection: they are given up when it goes (the mount asks again on
 * its next one).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <sys/random.h>

#include "session.h"
#include "auth.h"
#include "bucket.h"
#include "hash.h"
#include "log.h"
#include "perm.h"
#include "csrv.h"
#include "deleg.h"
#include "group.h"
#include "lockops.h"
#include "context.h"
#include "req.h"
#include "server.h"
#include "watch.h"
#include "util.h"

#define TAG "session"

/* Sessions per client address (max_sessions_per_address). */
struct addr_count {
	uint8_t addr[16]; /* IPv6, or IPv4 mapped into it */
	uint64_t count;
};

static void addr_key(const struct sockaddr_storage *ss, uint8_t out[16])
{
	memset(out, 0, 16);
	if (ss->ss_family == AF_INET) {
		out[10] = out[11] = 0xff;
		memcpy(out + 12,
		       &((const struct sockaddr_in *)ss)->sin_addr.s_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		memcpy(out, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	}
}

static uint64_t addr_hash_key(const uint8_t a[16])
{
	uint64_t x, y;

	memcpy(&x, a, 8);
	memcpy(&y, a + 8, 8);
	return sw_hash_u64(x ^ sw_hash_u64(y));
}

static uint64_t addr_hash(const void *e)
{
	return addr_hash_key(((const struct addr_count *)e)->addr);
}

static bool addr_eq(const void *e, const void *key)
{
	return !memcmp(((const struct addr_count *)e)->addr, key, 16);
}

static struct addr_count *addr_find(struct master *m,
				    const struct sockaddr_storage *ss)
{
	uint8_t k[16];

	addr_key(ss, k);
	return htab_find(&m->session_addrs, addr_hash_key(k), addr_eq, k);
}

/* Count one more session at @ss; -ENOMEM. */
static int addr_add(struct master *m, const struct sockaddr_storage *ss)
{
	struct addr_count *a = addr_find(m, ss);

	if (a) {
		a->count++;
		return 0;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	addr_key(ss, a->addr);
	a->count = 1;
	if (htab_insert(&m->session_addrs, addr_hash_key(a->addr), a) < 0) {
		free(a);
		return -ENOMEM;
	}
	return 0;
}

static void addr_drop(struct master *m, const struct sockaddr_storage *ss)
{
	struct addr_count *a = addr_find(m, ss);

	if (!a || --a->count)
		return;
	htab_remove(&m->session_addrs, addr_hash_key(a->addr), a);
	free(a);
}

static bool addr_key_differs(const struct sockaddr_storage *a,
			     const struct sockaddr_storage *b)
{
	uint8_t x[16], y[16];

	addr_key(a, x);
	addr_key(b, y);
	return memcmp(x, y, 16) != 0;
}

int sessions_init(struct master *m)
{
	struct locks_limits ll = {
		.per_session = m->cfg.locks_per_session,
		.per_file = m->cfg.locks_per_file,
		.waiters_per_session = m->cfg.lock_waiters_per_session,
		.waiters_per_file = m->cfg.lock_waiters_per_file,
		.total = m->cfg.locks_total,
		.waiters_total = m->cfg.lock_waiters_total,
	};

	sesstab_init(m);
	htab_init(&m->session_addrs, addr_hash);
	locks_init(&m->locks, lockops_wake, m);
	locks_set_limits(&m->locks, &ll);
	return 0;
}

static void session_free(struct master *m, struct session *s)
{
	for (int i = 0; s->cursors && i < SESSION_CURSORS; i++)
		ns_cursor_clear(&m->ns, &s->cursors[i].c);
	free(s->cursors);
	free(s->subdir);
	free(s->rf_resume);
	addr_drop(m, &s->addr);
	watch_drop_session(m, s);
	deleg_drop_session(m, s);
	server_inval_acked(m, s, UINT64_MAX);
	locks_drop_session(&m->locks, s->id);
	session_opens_drop(m, s);
	htab_remove(&m->sessions, sw_hash_u64(s->id), s);
	if (s->prev)
		s->prev->next = s->next;
	else
		m->session_list = s->next;
	if (s->next)
		s->next->prev = s->prev;
	m->nsessions--;
	m->freed_since_trim++;
	free(s);
}

void sessions_release(struct master *m)
{
	while (m->session_list)
		session_free(m, m->session_list);
	htab_release(&m->sessions);
	htab_release(&m->session_addrs);
	htab_release(&m->openers);
	locks_release(&m->locks);
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

/* A new session for a client at @addr: id @id, or (0) a new one. */
static struct session *session_new(struct master *m, uint64_t id,
				   const struct sockaddr_storage *addr)
{
	struct session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->id = id ? id : new_session_id(m);
	s->addr = *addr;
	s->grants_max = m->cfg.grants_max;
	session_rec_init(s);
	if (addr_add(m, addr) < 0) {
		free(s);
		return NULL;
	}
	if (htab_insert(&m->sessions, sw_hash_u64(s->id), s) < 0) {
		addr_drop(m, addr);
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

/*
 * Reclaim: a client that reconnects after a master restart, or after
 * requests were lost with its old connection, says which files it has
 * open, so that reads and writes through its descriptors go on and files
 * unlinked meanwhile stay. None of it is believed:
 *
 *  - claims are taken only from a client that proved the session's
 *    secret (may_reclaim); a first hello's claims are ignored;
 *  - each claim is checked as an OPEN of that inode with that access
 *    mode by that caller would be: the credentials mapped by the
 *    export (maproot, mapall), no writing through a read-only export,
 *    perm_check() on the node; a confined session's inode must be one
 *    it was told of or below its export's root (grant_reclaimed());
 *  - except that the file's owner may keep what it opened on a
 *    read-write export whatever the mode bits say now, and read it (it
 *    created the file with them, or could chmod it): no more than it
 *    may do anyway;
 *  - a claim those checks refuse, of a file the session already has
 *    open in this life, is taken as that open was checked then, no
 *    more;
 *  - what a claim may do (read, write) is what its check gives, and
 *    the claims set it: nothing from an open not claimed stays.
 *
 * A refused claim is logged; the client's descriptor then fails with
 * EBADF at its next read or write, as a descriptor of an NFS file whose
 * permissions changed during a server's grace period may.
 */
struct claim {
	uint64_t ino;
	uint32_t count;
	int access; /* PERM_R, PERM_W (perm_open_access()) */
};

/* Opens of one inode a session may claim, in all (more than a process
 * may hold descriptors): the count is set, not counted up to. */
#define CLAIM_COUNT_MAX (1u << 20)

static int cmp_claim(const void *a, const void *b)
{
	const struct claim *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/*
 * Whether @s may have @n open with @c (a claim's): what the open may do
 * (PERM_R, PERM_W; perm_open_access()) or -errno.
 */
static int claim_check(const struct master *m, const struct session *s,
		       const struct node *n, const Sweepfs__OpenClaim *c)
{
	Sweepfs__Cred mapped = *c->cred;
	struct sw_cred cred;
	uint32_t flags = c->flags & (O_ACCMODE | SW_O_EXEC);
	int mask = perm_open_mask(flags);

	if (!S_ISREG(n->mode))
		return -EINVAL;
	if ((c->flags & O_ACCMODE) == O_ACCMODE)
		return -EINVAL;
	if ((mask & PERM_W) && !s->rw)
		return -EROFS;
	if (session_map_cred(s, &mapped) < 0)
		return -EINVAL;
	cred = req_cred(&mapped);
	/* A file it was told of, as a request naming it must be. */
	if (!session_vouches(m, s, &mapped, n->ino, &c->handle,
			     c->has_handle ? 1 : 0))
		return -ESTALE;
	/* The owner could chmod the file to make the open good, and to
	 * read it: as its creator may (fsops.c, create_access()). */
	if (s->rw && cred.uid == n->uid)
		return PERM_R | (mask & PERM_W);
	if (perm_check(&cred, n, mask) < 0)
		return -EACCES;
	return perm_open_access(&cred, n, flags);
}

/*
 * The claims of @v (@n of them) that @s may make, folded per inode and
 * sorted: *@out (malloc'd, or NULL when there are none) and their count.
 */
static int claims_take(struct master *m, struct session *s,
		       Sweepfs__OpenClaim *const *v, size_t n,
		       struct claim **out, size_t *nout)
{
	struct claim *c = n ? malloc(n * sizeof(*c)) : NULL;
	size_t k = 0, refused = 0;

	*out = NULL;
	*nout = 0;
	if (n && !c)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const Sweepfs__OpenClaim *q = v[i];
		struct node *node = ns_get(&m->ns, q->ino);
		struct sess_open *so = htab_find(&s->opens, sw_hash_u64(q->ino),
						 sess_ino_eq, &q->ino);
		bool writable = (q->flags & O_ACCMODE) != O_RDONLY;
		int want = perm_open_mask(q->flags & O_ACCMODE) &
			   (PERM_R | PERM_W);
		int rc;

		if (!node || !q->count || !q->cred) {
			refused += node != NULL;
			continue;
		}
		rc = claim_check(m, s, node, q);
		/* Open in this life already, checked then: as it was
		 * opened, no more, whatever the mode bits say now. */
		if ((rc == -EACCES || rc == -EROFS) && so &&
		    (so->access & want) == want)
			rc = want;
		if (rc < 0) {
			sw_notice(TAG,
				  "session %016" PRIx64 " (%s): claims inode "
				  "%" PRIu64 " open for %s as uid %u: %s; "
				  "not reclaimed",
				  s->id, s->peer, q->ino,
				  writable ? "writing" : "reading",
				  q->cred->uid, strerror(-rc));
			refused++;
			continue;
		}
		c[k++] = (struct claim){ .ino = q->ino,
					 .count = SW_MIN(q->count,
							 CLAIM_COUNT_MAX),
					 .access = rc };
	}
	if (k) /* (qsort() takes no NULL, even for none) */
		qsort(c, k, sizeof(*c), cmp_claim);
	/* One entry per inode: counts added, what any may do. */
	size_t j = 0;
	for (size_t i = 0; i < k; i++) {
		if (j && c[j - 1].ino == c[i].ino) {
			c[j - 1].count = SW_MIN(c[j - 1].count + c[i].count,
						CLAIM_COUNT_MAX);
			c[j - 1].access |= c[i].access;
		} else {
			c[j++] = c[i];
		}
	}
	if (refused)
		sw_notice(TAG,
			  "session %016" PRIx64 " (%s): %zu of %zu open "
			  "files it claimed not reclaimed",
			  s->id, s->peer, refused, n);
	if (!j) {
		free(c);
		c = NULL;
	}
	*out = c;
	*nout = j;
	return 0;
}

/*
 * Whether a reclaim walk may run now: one per second on average, 64 at
 * once (every confined mount reconnecting after a master restart), so
 * that clients reconnecting on purpose cannot keep the loop walking.
 */
static bool reclaim_token(struct master *m)
{
	static const struct bucket_rule rule = { 1, 64 };

	return bucket_take(&m->reclaims, &rule, 1, sw_mono_ns());
}

/*
 * A confined session claims files it was not told of in this life:
 * grant those found below its root, by walking the subtree once. The
 * walk costs what a `find` over the export would, in one go; it stops
 * when everything is found. An open file without a name left (unlinked)
 * is not found, and is not reclaimed.
 */
static void grant_reclaimed(struct master *m, struct session *s,
			    const struct claim *c, size_t n)
{
	struct node *root = ns_get(&m->ns, s->root_ino);
	uint64_t *want;
	size_t missing = 0;
	bool *found;

	for (size_t i = 0; i < n; i++)
		if (!session_granted(s, c[i].ino))
			missing++;
	if (!missing || !root || !S_ISDIR(root->mode))
		return;
	/* Once per session, and within the rate above. */
	if (s->reclaim_walked || !reclaim_token(m)) {
		sw_notice(TAG,
			  "session %016" PRIx64 " (%s): %zu open files it was "
			  "not told of; not looked for",
			  s->id, s->peer, missing);
		return;
	}
	s->reclaim_walked = true;
	want = malloc(n * sizeof(*want));
	found = calloc(n, sizeof(*found));
	if (!want || !found)
		goto out;
	for (size_t i = 0; i < n; i++)
		want[i] = c[i].ino;
	ns_subtree_find(root, want, n, found);
	for (size_t i = 0; i < n; i++) {
		struct node *node = ns_get(&m->ns, want[i]);

		if (found[i] && node)
			session_grant(s, node);
		else if (node && !session_granted(s, want[i]))
			sw_notice(TAG,
				  "session %016" PRIx64 " (%s): open inode "
				  "%" PRIu64 " is not below its export's root; "
				  "not reclaimed",
				  s->id, s->peer, want[i]);
	}
out:
	free(want);
	free(found);
}

/* The claim on @ino in @c (sorted, @n of them), or NULL. */
static const struct claim *claim_find(const struct claim *c, size_t n,
				      uint64_t ino)
{
	struct claim key = { .ino = ino };

	return n ? bsearch(&key, c, n, sizeof(*c), cmp_claim) : NULL;
}

/* Make @s's open files exactly the claims of @v it may make. */
static void session_reclaim(struct master *m, struct session *s,
			    Sweepfs__OpenClaim *const *v, size_t n)
{
	struct sw_buf have = SW_BUF_INIT;
	struct claim *c;
	size_t nc;

	if (!s->may_reclaim) {
		if (n)
			sw_notice(TAG,
				  "%s: claims %zu open files without its "
				  "session's secret; not reclaimed",
				  s->peer, n);
		return;
	}
	if (claims_take(m, s, v, n, &c, &nc) < 0)
		return;
	if (nc && session_confined(s))
		grant_reclaimed(m, s, c, nc);
	/* Drop what the client no longer has open. */
	if (htab_foreach(&s->opens, collect_open, &have) == 0) {
		const uint64_t *cur = (const uint64_t *)have.data;
		size_t ncur = sw_buf_used(&have) / sizeof(uint64_t);

		for (size_t i = 0; i < ncur; i++) {
			struct sess_open *so;

			if (claim_find(c, nc, cur[i]))
				continue;
			so = htab_find(&s->opens, sw_hash_u64(cur[i]),
				       sess_ino_eq, &cur[i]);
			so->count = 1;
			session_release(m, s, cur[i]);
		}
	}
	sw_buf_release(&have);
	/* Set the count of each claimed inode. */
	for (size_t i = 0; i < nc; i++) {
		struct node *node = ns_get(&m->ns, c[i].ino);
		struct sess_open *so;

		if (!node ||
		    (session_confined(s) && !session_granted(s, c[i].ino)))
			continue;
		so = htab_find(&s->opens, sw_hash_u64(c[i].ino), sess_ino_eq,
			       &c[i].ino);
		if (!so) {
			/* One open, then its count: O(1), not O(count). */
			if (session_open(m, s, node, c[i].access) < 0)
				continue;
			so = htab_find(&s->opens, sw_hash_u64(c[i].ino),
				       sess_ino_eq, &c[i].ino);
		}
		/* The claims are the whole truth of what is open now. */
		so->count = c[i].count;
		so->access = (uint8_t)c[i].access;
	}
	free(c);
}

/* Walk @path ("/a/b") from the root; the directory's inode or -errno. */
static int64_t resolve_subdir(struct master *m, const uint8_t *path, size_t len)
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
		dst[i] = b->data[i] >= 0x20 && b->data[i] < 0x7f ?
				 (char)b->data[i] :
				 '?';
	dst[n] = '\0';
}

/*
 * The export for a client at @c asking for @subdir: its rule, or NULL
 * after answering. A password-protected export answers the first hello
 * with a challenge (*@challenged) and checks the response on the second.
 */
static const struct export_rule *check_export(struct req *r,
					      const Sweepfs__Hello *h,
					      const char *subdir,
					      bool *challenged, int *err)
{
	struct conn *c = r->conn;
	const struct export_rule *rule;
	uint8_t want[SW_AUTH_TAG];
	int why = 0;

	*challenged = false;
	rule = exports_match(&r->m->exports, (struct sockaddr *)&c->sc.addr,
			     subdir, &why);
	if (!rule) {
		sw_warn(TAG, "%s: refused: %s %s", c->sc.peer,
			why == -EPERM ? "no export of" :
					"no export at all for "
					"this address, asked for",
			subdir);
		*err = why == -EPERM ? -EPERM : -EACCES;
		return NULL;
	}
	if (!rule->has_password)
		return rule;
	if (!c->nonce_set || !h->has_auth) {
		if (getrandom(c->nonce, sizeof(c->nonce), 0) !=
		    (ssize_t)sizeof(c->nonce)) {
			*err = -EAGAIN;
			return NULL;
		}
		c->nonce_set = true;
		*challenged = true;
		*err = -EACCES;
		return NULL;
	}
	c->nonce_set = false; /* one answer per challenge */
	sw_auth_response(rule->key, c->nonce, subdir, want);
	if (h->auth.len != SW_AUTH_TAG ||
	    !sw_auth_equal(h->auth.data, want, SW_AUTH_TAG)) {
		sw_warn(TAG, "%s: refused: wrong password for %s", c->sc.peer,
			subdir);
		*err = -EACCES;
		return NULL;
	}
	return rule;
}

static void session_apply(struct session *s, const struct export_rule *e)
{
	s->rw = e->rw;
	s->admin = e->admin;
	s->maproot_uid = e->maproot_uid;
	s->maproot_gid = e->maproot_gid;
	s->mapall_uid = e->mapall_uid;
	s->mapall_gid = e->mapall_gid;
	s->authed = e->has_password;
	if (e->has_password)
		memcpy(s->key, e->key, sizeof(s->key));
	snprintf(s->export_text, sizeof(s->export_text), "%.100s %.90s",
		 e->path, e->text);
}

/* The secret of session @id: only the client it was given to has it. */
static void session_secret(const struct master *m, uint64_t id,
			   uint8_t out[SW_AUTH_TAG])
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(id >> (8 * i));
	sw_auth_tag(m->session_key, SW_AUTH_SESSION, b, sizeof(b), NULL, 0,
		    out);
}

/*
 * A proven client's claims of the inode ranges its session was given
 * (Hello.ino_ranges, newest first), for the creates of its batches sent
 * again: each with its proof, and below what was handed out, is the
 * session's again (the newest ends newest); the others are ignored. A
 * number no range of the session covers is refused to its creates
 * (fsops.c): without this, another client could make a node with a
 * number handed out to this one, or one of a node since freed.
 *
 * Only for a session_timeout after the metadata was loaded or this
 * member came to lead, when the ranges were forgotten and batches are
 * sent again: a session's ranges live in memory otherwise, and a proof
 * kept for long would let its session make again nodes of its own since
 * freed (a trash item names its parent by number).
 */
static void claim_inos(struct master *m, struct session *s,
		       Sweepfs__InoClaim *const *c, size_t n)
{
	uint8_t want[SW_AUTH_TAG];
	size_t bad = 0;

	if (!n || sw_mono_ns() - m->loaded_mono >=
			  (int64_t)m->cfg.session_timeout_ms * 1000000)
		return;
	if (n > SESSION_INO_RANGES) {
		bad = n - SESSION_INO_RANGES;
		n = SESSION_INO_RANGES;
	}
	for (size_t i = n; i-- > 0;) {
		const Sweepfs__InoClaim *k = c[i];

		if (!k->count || k->first <= NS_ROOT_INO ||
		    k->first > m->ns.next_ino ||
		    k->count > m->ns.next_ino - k->first ||
		    k->proof.len != sizeof(want)) {
			bad++;
			continue;
		}
		session_ino_proof(m, s->id, k->first, k->count, want);
		if (!sw_auth_equal(k->proof.data, want, sizeof(want))) {
			bad++;
			continue;
		}
		if (!session_ino_has(s, k->first))
			session_ino_add(s, k->first, k->first + k->count);
	}
	if (bad)
		sw_notice(TAG,
			  "%s: %zu inode range(s) claimed without a right "
			  "proof, or past the %d kept; ignored",
			  s->peer, bad, SESSION_INO_RANGES);
}

/* Whether @h proves it is session @h->session_id's own client. */
static bool owns_session(const struct master *m, const Sweepfs__Hello *h)
{
	uint8_t want[SW_AUTH_TAG];

	if (!h->session_id || !h->has_session_secret ||
	    h->session_secret.len != SW_AUTH_TAG)
		return false;
	session_secret(m, h->session_id, want);
	return sw_auth_equal(h->session_secret.data, want, SW_AUTH_TAG);
}

/*
 * A peer's proof: @h answers our challenge with @key under @use (a first
 * hello gets the challenge, *@challenged), and gets our answer to its
 * own under @answer (HelloReply.cs_proof, into @proof). 0 or -errno.
 */
static int check_peer(struct req *r, const Sweepfs__Hello *h,
		      const uint8_t key[SW_AUTH_KEY], enum sw_auth_use use,
		      enum sw_auth_use answer, bool *challenged,
		      uint8_t proof[SW_AUTH_TAG])
{
	struct conn *c = r->conn;
	const char *what = use == SW_AUTH_MEMBER ? "member" : "chunkserver";
	uint8_t want[SW_AUTH_TAG];

	if (!h->has_cs_nonce || h->cs_nonce.len != SW_AUTH_NONCE) {
		sw_warn(TAG, "%s: refused: %s hello without a nonce",
			c->sc.peer, what);
		return -EPROTO;
	}
	if (!c->nonce_set || !h->has_auth) {
		sw_auth_random(c->nonce, sizeof(c->nonce));
		c->nonce_set = true;
		*challenged = true;
		return -EACCES;
	}
	c->nonce_set = false; /* one answer per challenge */
	sw_auth_tag(key, use, c->nonce, sizeof(c->nonce), NULL, 0, want);
	if (h->auth.len != SW_AUTH_TAG ||
	    !sw_auth_equal(h->auth.data, want, SW_AUTH_TAG)) {
		sw_warn(TAG, "%s: refused: wrong %s key", c->sc.peer, what);
		return -EACCES;
	}
	sw_auth_tag(key, answer, h->cs_nonce.data, h->cs_nonce.len, NULL, 0,
		    proof);
	return 0;
}

/*
 * A chunkserver's hello: it must come from a chunkserver_allow address
 * and prove the chunkserver key (check_peer()). A member of the group
 * proves the session key, which only masters hold.
 */
static int check_chunkserver(struct req *r, const Sweepfs__Hello *h,
			     bool *challenged, uint8_t proof[SW_AUTH_TAG])
{
	struct master *m = r->m;
	struct conn *c = r->conn;
	bool allowed = false;

	*challenged = false;
	if (h->role == SWEEPFS__ROLE__ROLE_MEMBER)
		return m->group ?
			       check_peer(r, h, m->session_key, SW_AUTH_MEMBER,
					  SW_AUTH_LEADER, challenged, proof) :
			       -EINVAL;
	for (size_t i = 0; i < m->cs->nallow && !allowed; i++)
		allowed = exports_addr_fits(&m->cs->allow[i],
					    (struct sockaddr *)&c->sc.addr);
	if (!allowed) {
		sw_warn(TAG, "%s: refused: not a chunkserver_allow address",
			c->sc.peer);
		return -EACCES;
	}
	return check_peer(r, h, m->cs->key, SW_AUTH_CHUNKSERVER, SW_AUTH_MASTER,
			  challenged, proof);
}

/* Whether one more session may start for a client at @addr. */
static int session_room(struct master *m, const struct conn *c)
{
	const struct addr_count *a = addr_find(m, &c->sc.addr);

	if (m->nsessions >= m->cfg.max_sessions) {
		sw_warn(TAG, "%s: refused: %" PRIu64 " sessions (max_sessions)",
			c->sc.peer, m->nsessions);
		return -EUSERS;
	}
	if (a && a->count >= m->cfg.max_sessions_per_address) {
		sw_warn(TAG,
			"%s: refused: %" PRIu64 " sessions from this address "
			"(max_sessions_per_address)",
			c->sc.peer, a->count);
		return -EUSERS;
	}
	return 0;
}

/* The subdirectory @h asks for, normalized into @out; 0 or -EINVAL. */
static int hello_subdir(const Sweepfs__Hello *h, char *out, size_t len)
{
	char raw[4096];

	snprintf(raw, sizeof(raw), "%.*s",
		 h->has_subdir ? (int)SW_MIN(h->subdir.len, 4095) : 1,
		 h->has_subdir ? (const char *)h->subdir.data : "/");
	if ((h->has_subdir && memchr(h->subdir.data, '\0', h->subdir.len)) ||
	    exports_norm_path(raw, out, len) < 0)
		return -EINVAL;
	return 0;
}

/*
 * Find the session @h resumes, or make a new one. A client resumes only a
 * session whose secret it proves; one that says an id without it gets a
 * new session (and a new id). A proven id the master does not know (it
 * restarted, or the session expired) is made again under that id, with
 * the open files the client lists. -errno when none can be had.
 */
static int hello_session(struct req *r, const Sweepfs__Hello *h,
			 struct session **out, bool *resumed)
{
	struct master *m = r->m;
	bool proven = owns_session(m, h);
	struct session *s = proven ? session_find(m, h->session_id) : NULL;
	int rc;

	*resumed = s != NULL;
	if (s) {
		/* Requests blocked on a lock came on an old connection: no
		 * answer reaches them; the mount sends them again. */
		locks_cancel_session(&m->locks, s->id);
		if (s->conn) {
			/* The client knows its old connection is dead
			 * before we do; that connection now has no session
			 * and is closed at its next request; a request of
			 * it that waits for a delegation waits no more (or
			 * its wait would take another's directory back at
			 * deleg_timeout for nobody). The client dropped
			 * what it held with it, as session_detach() has the
			 * master do: its delegations (its batches sent
			 * again must not wait behind its own returns,
			 * server.c), invalidations owed, listings. */
			deleg_unpark(&s->conn->link);
			s->conn->s = NULL;
			s->conn = NULL;
			deleg_drop_session(m, s);
			server_inval_acked(m, s, UINT64_MAX);
			watch_drop_session(m, s);
		}
		if (addr_key_differs(&s->addr, &r->conn->sc.addr)) {
			addr_drop(m, &s->addr);
			if (addr_add(m, &r->conn->sc.addr) < 0)
				return -ENOMEM;
			s->addr = r->conn->sc.addr;
		}
		s->may_reclaim = true;
		*out = s;
		return 0;
	}
	if (h->session_id && !proven)
		sw_info(TAG,
			"%s: asked for session %016" PRIx64 " without its "
			"secret; a new session instead",
			r->conn->sc.peer, h->session_id);
	rc = session_room(m, r->conn);
	if (rc < 0)
		return rc;
	s = session_new(m, proven ? h->session_id : 0, &r->conn->sc.addr);
	if (!s)
		return -ENOMEM;
	s->may_reclaim = proven;
	*out = s;
	return 0;
}

int session_hello(struct req *r, const Sweepfs__Hello *h)
{
	Sweepfs__HelloReply reply = SWEEPFS__HELLO_REPLY__INIT;
	struct master *m = r->m;
	const struct export_rule *rule = NULL;
	struct session *s = NULL;
	uint8_t secret[SW_AUTH_TAG], proof[SW_AUTH_TAG];
	bool cs = h->role == SWEEPFS__ROLE__ROLE_CHUNKSERVER ||
		  h->role == SWEEPFS__ROLE__ROLE_MEMBER;
	bool resumed = false, challenged = false;
	char subdir[4096], *sub;
	int64_t root;
	int rc;

	reply.has_version = 1;
	reply.version = SW_PROTO_VERSION;
	reply.has_role = 1;
	reply.role = SWEEPFS__ROLE__ROLE_MASTER;
	if (!group_serving(m)) {
		/* A follower: where the leader is, if anyone leads. */
		const char *leader = group_leader(m);

		reply.has_leader = leader[0] != '\0';
		reply.leader.data = (uint8_t *)leader;
		reply.leader.len = strlen(leader);
		rc = -EREMOTE;
		goto out_err;
	}
	if (!sw_proto_accepts(h->version, h->role, true)) {
		sw_notice(TAG,
			  "%s: protocol version %u, want %u (a mount or tool "
			  "of another version than this master's: upgrade "
			  "them together); refused",
			  r->conn->sc.peer, h->version, SW_PROTO_VERSION);
		rc = -EPROTONOSUPPORT;
		goto out_err;
	}
	if (h->role != SWEEPFS__ROLE__ROLE_MOUNT &&
	    h->role != SWEEPFS__ROLE__ROLE_TOOL && !cs) {
		rc = -EINVAL;
		goto out_err;
	}
	rc = hello_subdir(h, subdir, sizeof(subdir));
	if (rc < 0)
		goto out_err;
	if (cs)
		rc = check_chunkserver(r, h, &challenged, proof);
	else if (!(rule = check_export(r, h, subdir, &challenged, &rc)))
		rc = rc < 0 ? rc : -EACCES;
	if (rc < 0) {
		if (challenged) {
			reply.has_challenge = 1;
			reply.challenge.data = r->conn->nonce;
			reply.challenge.len = sizeof(r->conn->nonce);
		}
		goto out_err;
	}
	root = resolve_subdir(m, (const uint8_t *)subdir, strlen(subdir));
	if (root < 0) {
		sw_notice(TAG, "%s: export path not usable: %s",
			  r->conn->sc.peer, strerror((int)-root));
		rc = (int)root;
		goto out_err;
	}
	sub = strdup(subdir);
	if (!sub) {
		rc = -ENOMEM;
		goto out_err;
	}
	rc = hello_session(r, h, &s, &resumed);
	if (rc < 0) {
		free(sub);
		goto out_err;
	}
	s->role = h->role;
	s->conn = r->conn;
	if (s->root_ino != (uint64_t)root) {
		/* (Its subdirectory is another directory now.) */
		session_grants_reset(s);
	}
	s->root_ino = (uint64_t)root;
	free(s->subdir);
	s->subdir = sub;
	if (rule)
		session_apply(s, rule);
	else
		s->rw = true; /* a chunkserver or a member */
	/* After a restart, or requests lost with the old connection: the
	 * client's list of open files is the truth. */
	snprintf(s->peer, sizeof(s->peer), "%s", r->conn->sc.peer);
	if (h->has_client_name)
		copy_bytes(s->name, sizeof(s->name), &h->client_name);
	/* Ranges first: a file it made and opened under a delegation, whose
	 * batch's reply (and so its handle) was lost with the connection,
	 * is claimed by a number of its own ranges. */
	if (s->may_reclaim)
		claim_inos(m, s, h->ino_ranges, h->n_ino_ranges);
	if (!resumed || h->reclaim)
		session_reclaim(m, s, h->opens, h->n_opens);
	s->connected_at = sw_now_ns();
	s->detached_at = 0;
	/* Not said (an older or a bare client): the mount's default. */
	s->cache_ms = h->has_cache_ms ? h->cache_ms : 1000;
	s->inval_all_ok = h->has_inval_all && h->inval_all;
	r->conn->s = s;
	r->s = s;
	sw_info(TAG, "%s: session %016" PRIx64 " %s (%s)", r->conn->sc.peer,
		s->id, resumed ? "resumed" : "started", s->name);
	session_secret(m, s->id, secret);
	reply.has_session_id = 1;
	reply.session_id = s->id;
	reply.has_session_secret = 1;
	reply.session_secret.data = secret;
	reply.session_secret.len = sizeof(secret);
	if (cs) {
		reply.has_cs_proof = 1;
		reply.cs_proof.data = proof;
		reply.cs_proof.len = sizeof(proof);
	}
	reply.has_root_ino = 1;
	reply.root_ino = s->root_ino;
	reply.has_lease_ms = 1;
	reply.lease_ms = deleg_lease_ms(m);
	if (ns_has_cluster_id(&m->ns)) {
		reply.has_cluster_id = 1;
		reply.cluster_id.data = m->ns.cluster_id;
		reply.cluster_id.len = sizeof(m->ns.cluster_id);
		/* Held until the id is durable: a chunkserver keeps the id
		 * it is told for good (chunkserver/master_link.c), and a
		 * first leader that dies before its id is committed would
		 * leave it one the next leader does not have. */
		if (r->version < m->ns.cluster_id_version)
			r->version = m->ns.cluster_id_version;
	}
	reply.has_read_only = reply.has_admin = 1;
	reply.read_only = !s->rw;
	reply.admin = s->admin;
	req_reply(r, &reply.base);
	return 0;

out_err:
	reply.has_err = 1;
	reply.err = -rc;
	req_reply(r, &reply.base);
	return challenged ? 1 : rc;
}

void sessions_reexport(struct master *m)
{
	struct session *s, *next;

	for (s = m->session_list; s; s = next) {
		const struct export_rule *rule;
		int why;

		next = s->next;
		if (session_is_peer(s))
			continue;
		rule = exports_match(&m->exports, (struct sockaddr *)&s->addr,
				     s->subdir, &why);
		/* A changed password is a different export: prove it. */
		if (rule && rule->has_password &&
		    (!s->authed ||
		     !sw_auth_equal(s->key, rule->key, sizeof(s->key))))
			rule = NULL;
		if (rule) {
			session_apply(s, rule);
			continue;
		}
		sw_notice(TAG,
			  "session %016" PRIx64 " (%s, %s): no longer "
			  "exported; disconnected",
			  s->id, s->peer, s->subdir);
		/* Tools' sessions go with their connection; a mount's
		 * expires at the next tick, its open files with it. */
		if (s->role != SWEEPFS__ROLE__ROLE_MOUNT) {
			if (s->conn)
				conn_close(s->conn);
			continue;
		}
		if (s->conn)
			conn_close(s->conn);
		s->detached_at = 1;
	}
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
	locks_cancel_session(&m->locks, s->id);
	/* What it had queued under them is lost or comes as plain
	 * requests after a reconnect: others need not wait for it. */
	deleg_drop_session(m, s);
	server_inval_acked(m, s, UINT64_MAX); /* it forgets all it had */
	/* A mount that comes back forgets every listing it had (it cannot
	 * know what changed meanwhile): its watches are of no use, and
	 * would keep delegations from others. */
	watch_drop_session(m, s);
	/* Tools and chunkservers hold nothing worth waiting for. */
	if (s->role != SWEEPFS__ROLE__ROLE_MOUNT)
		session_free(m, s);
}

/*
 * Whether @s holds something a reconnect must find: open files or locks.
 * A session that holds nothing is worth keeping only for a moment (a
 * quick reconnect keeps its id and caches); otherwise any client could
 * park sessions by the thousand for session_timeout each.
 */
static bool session_holds(const struct master *m, const struct session *s)
{
	return htab_count(&s->opens) || locks_session_holds(&m->locks, s->id);
}

void sessions_expire(struct master *m)
{
	int64_t limit = (int64_t)m->cfg.session_timeout_ms * 1000000;
	int64_t idle = (int64_t)m->cfg.session_idle_timeout_ms * 1000000;
	int64_t now = sw_mono_ns();
	struct session *s, *next;

	for (s = m->session_list; s; s = next) {
		next = s->next;
		if (s->conn ||
		    now - s->detached_at < (session_holds(m, s) ? limit : idle))
			continue;
		sw_info(TAG, "session %016" PRIx64 " (%s) timed out", s->id,
			s->peer);
		session_free(m, s);
	}
	/* Many small frees leave the heap's top pinned by a few live
	 * blocks; give what can be given back to the system. */
	if (m->freed_since_trim >= 1024) {
		malloc_trim(0);
		m->freed_since_trim = 0;
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
