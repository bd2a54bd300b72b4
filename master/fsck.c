/*
 * sweepfs fsck: the master checks its own state.
 *
 * The check runs in a forked child, which sees the state of one instant
 * and may scribble on its private copy of memory (it reuses each node's
 * atime as a name counter and a spare flag bit as "reached", and each
 * chunk's lease time as a reference counter and its lease holder as its
 * health, CHUNK_LOST or CHUNK_SHORT), so the master goes on
 * serving while it runs and nothing needs a lock or a slice. The child
 * sends its report back through a pipe. Before forking it waits
 * (FSCK_WAIT at most) until every chunkserver has reported its chunk
 * count since the last command it got, so that the counts compare.
 *
 * What is checked:
 *  - every node is reachable from the root, a tree being purged, the
 *    trash, the open-but-unlinked files, or a snapshot being copied;
 *  - each node has as many names as its link count says (a directory
 *    one, or none for the root of a tree out of the namespace), and each
 *    directory's parent is the directory naming it;
 *  - each directory's entry, subdirectory, unflagged-name and tombstone
 *    counts, and its subtree's name counts (from its subdirectories');
 *  - each chunk's reference count is the number of slots naming it
 *    (plus one if a snapshot copy holds it), every slot names a chunk,
 *    and no chunk is left with no reference;
 *  - each chunk has a valid copy on a connected server, and as many as
 *    the goal; the files naming a chunk that has not are listed by path
 *    (a walk from the root, one entry per name, then the trash's items,
 *    at most as many as the problems asked for), so that an operator
 *    knows what is damaged;
 *  - each chunkserver reports as many chunk files as the master knows
 *    copies there (deletions still queued included).
 *
 * Bounds. The report goes back in one frame (SW_FRAME_MAX_META), and
 * what fills it is what clients made: names up to 255 bytes, as deep as
 * they like, and as many hard links to a damaged file as they like. So a
 * path is cut at SW_PATH_MAX and ends in FSCK_CUT_MARK; the files stop
 * being listed once their entries take FSCK_FILES_BYTES (bad_files_cut
 * says so, bad_files_total still counts them all), and the problems once
 * theirs take FSCK_PROBLEMS_BYTES. The parent reads no more than a frame
 * from the child (sw_child's out_max): a child past it is a bug, and the
 * check fails with EIO rather than the master holding its output.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "child.h"
#include "fsio.h"
#include "fsck.h"
#include "log.h"
#include "handlers.h"
#include "csrv.h"
#include "context.h"
#include "req.h"
#include "trash.h"
#include "util.h"

#define TAG "fsck"
#define REACHED 0x8000 /* node flag, in the child's copy only */

/* chunk.lease_session, in the child's copy only */
#define CHUNK_LOST 1  /* no valid copy on a connected server */
#define CHUNK_SHORT 2 /* some, fewer than the goal */

/* Bad chunks listed per file (the counts say how many in all). */
#define FSCK_FILE_CHUNKS 16

/* Packed bytes the listed files, and the problems, may take in the
 * report: with the counts and the servers, well under a frame. */
#define FSCK_FILES_BYTES (512u << 10)
#define FSCK_PROBLEMS_BYTES (256u << 10)

/* The end of a path cut at SW_PATH_MAX. */
#define FSCK_CUT_MARK "/...(cut)"

struct check {
	struct master *m;
	Sweepfs__FsckReply *r;
	char **problems;
	size_t nproblems, max;
	size_t problem_bytes, file_bytes; /* packed, about */
	uint32_t servers_up;
};

__attribute__((format(printf, 2, 3))) static void problem(struct check *k,
							  const char *fmt, ...)
{
	char line[256];
	va_list ap;

	if (k->nproblems >= k->max || k->problem_bytes >= FSCK_PROBLEMS_BYTES)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	k->problems[k->nproblems] = strdup(line);
	if (!k->problems[k->nproblems])
		return;
	k->problem_bytes += strlen(line) + 3; /* tag, length */
	k->nproblems++;
}

/* ---- names and directories ------------------------------------------ */

static int reset_node(void *elem, void *arg)
{
	struct node *n = elem;

	(void)arg;
	n->atime = 0;
	n->flags &= (uint16_t)~REACHED;
	return 0;
}

static int count_names(void *elem, void *arg)
{
	struct check *k = arg;
	struct node *d = elem;
	uint64_t entries = 0, subdirs = 0, plain = 0, tombs = 0;
	uint64_t tree_names = 0, tree_plain = 0;

	k->r->nodes++;
	if (!S_ISDIR(d->mode))
		return 0;
	k->r->dirs++;
	for (struct edge *e = d->u.dir->head; e; e = e->next) {
		if (!e->child) {
			tombs++;
			continue;
		}
		entries++;
		plain += !(e->flags & EDGE_SNAPSHOT);
		tree_names++;
		tree_plain += !(e->flags & EDGE_SNAPSHOT);
		e->child->atime++;
		if (S_ISDIR(e->child->mode)) {
			subdirs++;
			tree_names += ns_tree_names(e->child);
			tree_plain += ns_tree_plain(e->child);
			if (e->child->u.dir->parent != d ||
			    lct_parent(&e->child->u.dir->lct) !=
				    &d->u.dir->lct) {
				k->r->bad_dirs++;
				problem(k,
					"directory %" PRIu64
					" (%.*s in %" PRIu64
					") has another parent",
					e->child->ino, e->namelen, e->name,
					d->ino);
			}
		}
	}
	if (entries != d->u.dir->nentries || subdirs != d->u.dir->nsubdirs ||
	    plain != d->u.dir->nplain || tombs != d->u.dir->tombstones) {
		k->r->bad_dirs++;
		problem(k,
			"directory %" PRIu64 ": counts %" PRIu64 "/%" PRIu64
			"/%" PRIu64 "/%" PRIu64 ", found %" PRIu64 "/%" PRIu64
			"/%" PRIu64 "/%" PRIu64,
			d->ino, d->u.dir->nentries, d->u.dir->nsubdirs,
			d->u.dir->nplain, (uint64_t)d->u.dir->tombstones,
			entries, subdirs, plain, tombs);
	}
	if (tree_names != ns_tree_names(d) || tree_plain != ns_tree_plain(d)) {
		k->r->bad_dirs++;
		problem(k,
			"directory %" PRIu64 ": subtree counts %" PRIu64
			"/%" PRIu64 ", found %" PRIu64 "/%" PRIu64,
			d->ino, ns_tree_names(d), ns_tree_plain(d), tree_names,
			tree_plain);
	}
	return 0;
}

/* Mark everything under @root reached (directories through a stack). */
static int reach(struct node *root)
{
	struct node **stack = NULL;
	size_t depth = 0, cap = 0;

	if (root->flags & REACHED)
		return 0;
	root->flags |= REACHED;
	if (!S_ISDIR(root->mode))
		return 0;
	if (sw_grow(&stack, &cap, 1, sizeof(*stack), 256) < 0)
		return -ENOMEM;
	stack[depth++] = root;
	while (depth) {
		struct node *d = stack[--depth];

		for (struct edge *e = d->u.dir->head; e; e = e->next) {
			struct node *c = e->child;

			if (!c || (c->flags & REACHED))
				continue;
			c->flags |= REACHED;
			if (!S_ISDIR(c->mode))
				continue;
			if (sw_grow(&stack, &cap, depth + 1, sizeof(*stack),
				    256) < 0) {
				free(stack);
				return -ENOMEM;
			}
			stack[depth++] = c;
		}
	}
	free(stack);
	return 0;
}

static int reach_root(struct node *root, void *arg)
{
	(void)arg;
	return reach(root);
}

static int reach_orphan(void *elem, void *arg)
{
	(void)arg;
	return reach(elem);
}

static int reach_trash(const struct trash_item *t, void *arg)
{
	struct master *m = arg;
	uint64_t id, ino, parent, nodes;
	int64_t deleted, expires;
	const char *path;
	struct node *n;

	ns_trash_item(t, &id, &ino, &parent, &path, &deleted, &expires, &nodes);
	n = ns_get(&m->ns, ino);
	return n ? reach(n) : 0;
}

/* Roots of trees out of the namespace: named nowhere, by design. */
static bool unnamed_root(const struct master *m, const struct node *n)
{
	if (n == m->ns.root || n == ns_copy_root(&m->ns))
		return true;
	if (S_ISDIR(n->mode) && !n->u.dir->parent && (n->flags & NODE_DETACHED))
		return true; /* purged, or a tree in the trash */
	return false;
}

static int check_node(void *elem, void *arg)
{
	struct check *k = arg;
	struct node *n = elem;
	uint64_t names = (uint64_t)n->atime;

	if (!(n->flags & REACHED)) {
		k->r->leaked_nodes++;
		problem(k, "inode %" PRIu64 " is reachable from nothing",
			n->ino);
	}
	if (S_ISDIR(n->mode)) {
		uint64_t want = unnamed_root(k->m, n) ? 0 : 1;

		if (names != want) {
			k->r->bad_links++;
			problem(k,
				"directory %" PRIu64 " has %" PRIu64 " names",
				n->ino, names);
		}
	} else if (names != n->nlink) {
		k->r->bad_links++;
		problem(k,
			"inode %" PRIu64 ": link count %u, %" PRIu64 " names",
			n->ino, n->nlink, names);
	} else if (!names && !(n->flags & (NODE_ORPHAN | NODE_TRASHED))) {
		k->r->bad_links++;
		problem(k,
			"inode %" PRIu64 " has no name and is neither open "
			"nor in the trash",
			n->ino);
	}
	return 0;
}

/* ---- chunks ------------------------------------------------------------ */

static int reset_chunk(void *elem, void *arg)
{
	(void)arg;
	((struct chunk *)elem)->lease_until = 0;
	return 0;
}

static int count_slots(void *elem, void *arg)
{
	struct check *k = arg;
	struct node *n = elem;

	for (uint32_t i = 0; i < ns_chunk_slots(n); i++) {
		uint64_t id = ns_chunk_at(n, i);
		struct chunk *c;

		if (!id)
			continue;
		c = chunk_get(&k->m->ns, id);
		if (c) {
			c->lease_until++;
			continue;
		}
		k->r->missing_chunks++;
		problem(k,
			"inode %" PRIu64 " slot %u names chunk %016" PRIx64
			", which does not exist",
			n->ino, i, id);
	}
	return 0;
}

static int check_chunk(void *elem, void *arg)
{
	struct check *k = arg;
	struct chunk *c = elem;
	struct master *m = k->m;
	unsigned goal = chunk_goal(c, (unsigned)m->cfg.goal);
	int valid;

	k->r->chunks++;
	if ((uint64_t)c->lease_until != c->refs) {
		k->r->bad_refs++;
		problem(k,
			"chunk %016" PRIx64 ": %u references, %" PRId64
			" slots",
			c->id, c->refs, c->lease_until);
	} else if (c->refs == 0) {
		k->r->unreferenced_chunks++;
		problem(k, "chunk %016" PRIx64 " is referenced by nothing",
			c->id);
	}
	valid = csrv_valid_copies(m, c);
	c->lease_session = 0;
	if (valid > (int)goal)
		k->r->overgoal_chunks++;
	if (goal > k->servers_up)
		k->r->goal_unreachable_chunks++;
	if (c->busy) /* being created or changed: copies in motion */
		return 0;
	if (valid == 0) {
		k->r->lost_chunks++;
		c->lease_session = CHUNK_LOST;
		problem(k,
			"chunk %016" PRIx64 " has no valid copy on a "
			"connected server",
			c->id);
	} else if (valid < (int)goal) {
		k->r->undergoal_chunks++;
		k->r->endangered_chunks += valid == 1;
		c->lease_session = CHUNK_SHORT;
	}
	return 0;
}

/* ---- the files of bad chunks -------------------------------------------- */

/* A growing path: "/a/b/c", no NUL inside the length. */
struct path {
	char *s;
	size_t len, cap;
};

static int path_push(struct path *p, const char *name, size_t len)
{
	if (p->len + len + 2 > p->cap) {
		size_t cap = SW_MAX(p->cap * 2, p->len + len + 2);
		char *s = realloc(p->s, cap);

		if (!s)
			return -ENOMEM;
		p->s = s;
		p->cap = cap;
	}
	p->s[p->len++] = '/';
	memcpy(p->s + p->len, name, len);
	p->len += len;
	return 0;
}

/* @p as the report has it: "/" for the root, and cut at SW_PATH_MAX
 * with FSCK_CUT_MARK at its end. Into @out; -ENOMEM. */
static int report_path(const struct path *p, ProtobufCBinaryData *out)
{
	size_t len = p->len ? p->len : 1, keep = len;

	if (len > SW_PATH_MAX)
		keep = SW_PATH_MAX - (sizeof(FSCK_CUT_MARK) - 1);
	out->data = malloc(SW_MIN(len, SW_PATH_MAX));
	if (!out->data)
		return -ENOMEM;
	memcpy(out->data, p->len ? p->s : "/", keep);
	if (keep < len)
		memcpy(out->data + keep, FSCK_CUT_MARK,
		       sizeof(FSCK_CUT_MARK) - 1);
	out->len = SW_MIN(len, SW_PATH_MAX);
	return 0;
}

/* The report's entry for file @n at @p, if any of its chunks is bad
 * (NULL if none is, or no memory). */
static Sweepfs__FsckBadFile *bad_file(struct check *k, const struct node *n,
				      const struct path *p)
{
	Sweepfs__FsckBadFile *f = NULL;
	struct master *m = k->m;

	for (uint32_t i = 0; i < ns_chunk_slots(n); i++) {
		uint64_t id = ns_chunk_at(n, i);
		struct chunk *c = id ? chunk_get(&m->ns, id) : NULL;
		Sweepfs__FsckBadChunk *bc;

		if (!c || !c->lease_session)
			continue;
		if (!f) {
			f = calloc(1, sizeof(*f) +
					      FSCK_FILE_CHUNKS * (sizeof(*bc) +
								  sizeof(bc)));
			if (!f)
				return NULL;
			sweepfs__fsck_bad_file__init(f);
			f->chunks = (Sweepfs__FsckBadChunk **)(f + 1);
			if (report_path(p, &f->path) < 0) {
				free(f);
				return NULL;
			}
			f->has_path = f->has_ino = 1;
			f->has_lost = f->has_undergoal = 1;
			f->ino = n->ino;
		}
		if (c->lease_session == CHUNK_LOST)
			f->lost++;
		else
			f->undergoal++;
		if (f->n_chunks == FSCK_FILE_CHUNKS)
			continue;
		bc = (Sweepfs__FsckBadChunk *)(f->chunks + FSCK_FILE_CHUNKS) +
		     f->n_chunks;
		sweepfs__fsck_bad_chunk__init(bc);
		bc->has_index = bc->has_chunk_id = 1;
		bc->has_copies = bc->has_goal = 1;
		bc->index = i;
		bc->chunk_id = id;
		bc->copies = (uint32_t)csrv_valid_copies(m, c);
		bc->goal = chunk_goal(c, (unsigned)m->cfg.goal);
		f->chunks[f->n_chunks++] = bc;
	}
	return f;
}

static void bad_file_free(Sweepfs__FsckBadFile *f)
{
	free(f->path.data);
	free(f);
}

/* Note file @n at @p if a chunk of it is bad; 0 or -ENOMEM. */
static int note_file(struct check *k, const struct node *n,
		     const struct path *p, Sweepfs__FsckBadFile **out)
{
	Sweepfs__FsckBadFile *f;
	size_t bytes;

	if (!S_ISREG(n->mode) || !ns_chunk_slots(n))
		return 0;
	f = bad_file(k, n, p);
	if (!f)
		return 0; /* healthy (or no memory: the counts still say) */
	k->r->bad_files_total++;
	bytes = sweepfs__fsck_bad_file__get_packed_size(f) + 4; /* tag, len */
	if (k->r->n_bad_files >= k->max ||
	    k->file_bytes + bytes > FSCK_FILES_BYTES) {
		k->r->bad_files_cut = 1;
		bad_file_free(f);
		return 0;
	}
	k->file_bytes += bytes;
	out[k->r->n_bad_files++] = f;
	return 0;
}

struct walk_frame {
	const struct node *dir;
	const struct edge *next; /* the entry to look at next */
	size_t len;		 /* of the path to dir */
};

/* Every file below directory @top, whose path @p holds, depth first:
 * those naming a bad chunk go into the report. */
static int walk_files(struct check *k, const struct node *top, struct path *p)
{
	struct walk_frame *st;
	size_t depth = 0, cap = 64;
	int rc = 0;

	st = malloc(cap * sizeof(*st));
	if (!st)
		return -ENOMEM;
	st[depth++] = (struct walk_frame){ top, top->u.dir->head, p->len };
	while (depth && rc == 0) {
		struct walk_frame *w = &st[depth - 1];
		const struct edge *e = w->next;
		const struct node *c;

		if (!e) {
			depth--;
			continue;
		}
		w->next = e->next;
		c = e->child;
		if (!c)
			continue;
		p->len = w->len;
		rc = path_push(p, e->name, e->namelen);
		if (rc < 0)
			break;
		if (!S_ISDIR(c->mode)) {
			rc = note_file(k, c, p, k->r->bad_files);
			continue;
		}
		if (depth == cap) {
			struct walk_frame *v =
				realloc(st, 2 * cap * sizeof(*v));

			if (!v) {
				rc = -ENOMEM;
				break;
			}
			st = v;
			cap *= 2;
		}
		st[depth++] = (struct walk_frame){ c, c->u.dir->head, p->len };
	}
	free(st);
	return rc;
}

/* A trash item: its file, or the files of its tree, by the path it had,
 * after "trash:". */
static int trash_files(const struct trash_item *t, void *arg)
{
	struct check *k = arg;
	uint64_t id, ino, parent, nodes;
	int64_t deleted, expires;
	struct path p = { 0 };
	const char *path;
	struct node *n;
	int rc;

	ns_trash_item(t, &id, &ino, &parent, &path, &deleted, &expires, &nodes);
	n = ns_get(&k->m->ns, ino);
	if (!n)
		return 0;
	rc = path_push(&p, "trash:", 6);
	if (rc == 0) {
		/* "/trash:" then the path: drop the leading slash. */
		memmove(p.s, p.s + 1, --p.len);
		rc = path_push(&p, path + 1, strlen(path + 1));
	}
	if (rc == 0)
		rc = S_ISDIR(n->mode) ? walk_files(k, n, &p) :
					note_file(k, n, &p, k->r->bad_files);
	free(p.s);
	return rc;
}

/*
 * The files naming a bad chunk, by path: those reachable from the root,
 * then those in the trash ("trash:/a/b"). Only when some chunk is bad
 * (the child's time is cheap, but not free on 100 million nodes).
 */
static int list_bad_files(struct check *k)
{
	struct ns *ns = &k->m->ns;
	struct path p = { 0 };
	int rc;

	k->r->has_bad_files_total = k->r->has_bad_files_cut = 1;
	if (!k->r->lost_chunks && !k->r->undergoal_chunks)
		return 0;
	k->r->bad_files = calloc(k->max + 1, sizeof(*k->r->bad_files));
	if (!k->r->bad_files)
		return -ENOMEM;
	rc = walk_files(k, ns->root, &p);
	free(p.s);
	if (rc == 0)
		rc = ns_trash_foreach(ns, trash_files, k);
	return rc;
}

struct tally {
	uint64_t *known;
	uint32_t n;
};

static int tally_copies(void *elem, void *arg)
{
	struct tally *t = arg;
	struct chunk *c = elem;

	for (int i = 0; i < c->ncopies; i++)
		if (c->copies[i].srv <= t->n &&
		    c->copies[i].state != COPY_PENDING)
			t->known[c->copies[i].srv]++;
	return 0;
}

static int check_servers(struct check *k, Sweepfs__FsckServer **out)
{
	struct master *m = k->m;
	struct tally t = { calloc(m->cs->n + 1, sizeof(uint64_t)), m->cs->n };

	if (!t.known)
		return -ENOMEM;
	chunks_foreach(&m->ns, tally_copies, &t);
	for (uint32_t i = 1; i <= m->cs->n; i++) {
		struct csrv *s = m->cs->srv[i];
		Sweepfs__FsckServer *x = out[i - 1];
		/* Chunk files waiting out their grace are on disk too. */
		uint64_t queued = csrv_deletes_pending(s) + csrv_strays(s);

		x->listen = s->listen;
		x->has_connected = x->has_known = x->has_reported = 1;
		x->has_deletes_pending = 1;
		x->connected = csrv_up(s);
		x->known = t.known[i];
		x->deletes_pending = queued;
		x->reported = s->reported_chunks;
		/* Stale and damaged copies are in the chunk table until their
		 * deletion is queued; queued ones left it. A count from before
		 * the server's last command cannot be compared. */
		x->has_in_motion = 1;
		x->in_motion = s->reported_at <= s->changed_at;
		if (x->connected && !x->in_motion &&
		    s->reported_chunks != t.known[i] + queued) {
			k->r->inventory_mismatches++;
			problem(k,
				"chunkserver %s reports %" PRIu64
				" chunk files; the master knows %" PRIu64
				" copies there and %" PRIu64
				" queued deletions",
				s->listen, s->reported_chunks, t.known[i],
				queued);
		}
	}
	free(t.known);
	return 0;
}

void fsck_free(Sweepfs__FsckReply *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_problems; i++)
		free(r->problems[i]);
	free(r->problems);
	for (size_t i = 0; i < r->n_bad_files; i++)
		bad_file_free(r->bad_files[i]);
	free(r->bad_files);
	free(r->servers); /* the structs follow the pointers */
	free(r);
}

Sweepfs__FsckReply *fsck_check(struct master *m, uint32_t max)
{
	Sweepfs__FsckReply *r = calloc(1, sizeof(*r));
	Sweepfs__FsckServer **srvp = calloc(
		m->cs->n + 1, sizeof(*srvp) + sizeof(Sweepfs__FsckServer));
	Sweepfs__FsckServer *srv =
		srvp ? (Sweepfs__FsckServer *)(srvp + m->cs->n + 1) : NULL;
	struct check k = {
		.m = m,
		.r = r,
		.problems = calloc(max + 1, sizeof(char *)),
		.max = max,
	};
	struct ns *ns = &m->ns;
	int64_t t0 = sw_mono_ns();
	const uint64_t *held;
	size_t nheld;

	if (!r || !srvp || !k.problems) {
		free(r);
		free(srvp);
		free(k.problems);
		return NULL;
	}
	sweepfs__fsck_reply__init(r);
	r->has_nodes = r->has_dirs = r->has_chunks = r->has_leaked_nodes = 1;
	r->has_bad_links = r->has_bad_dirs = r->has_missing_chunks = 1;
	r->has_bad_refs = r->has_unreferenced_chunks = 1;
	r->has_lost_chunks = r->has_undergoal_chunks = 1;
	r->has_inventory_mismatches = r->has_elapsed_us = 1;
	r->has_endangered_chunks = r->has_overgoal_chunks = 1;
	r->has_goal_unreachable_chunks = r->has_servers_up = 1;
	for (uint32_t i = 1; i <= m->cs->n; i++)
		k.servers_up += csrv_up(m->cs->srv[i]);
	r->servers_up = k.servers_up;
	r->problems = k.problems;
	r->servers = srvp;
	for (uint32_t i = 0; i < m->cs->n; i++) {
		sweepfs__fsck_server__init(&srv[i]);
		srvp[i] = &srv[i];
	}
	r->n_servers = m->cs->n;

	htab_foreach(&ns->inodes, reset_node, NULL);
	htab_foreach(&ns->inodes, count_names, &k);
	if (reach(ns->root) < 0)
		goto fail;
	if (ns_purge_foreach_root(ns, reach_root, NULL) < 0)
		goto fail;
	if (ns_copy_root(ns) && reach(ns_copy_root(ns)) < 0)
		goto fail;
	if (ns_trash_foreach(ns, reach_trash, m) < 0 ||
	    htab_foreach(&ns->orphans, reach_orphan, NULL) < 0)
		goto fail;
	htab_foreach(&ns->inodes, check_node, &k);

	chunks_foreach(ns, reset_chunk, NULL);
	htab_foreach(&ns->inodes, count_slots, &k);
	nheld = ns_copy_held(ns, &held);
	for (size_t i = 0; i < nheld; i++) {
		struct chunk *c = chunk_get(ns, held[i]);

		if (c)
			c->lease_until++;
	}
	chunks_foreach(ns, check_chunk, &k);
	if (list_bad_files(&k) < 0 || check_servers(&k, srvp) < 0)
		goto fail;
	r->n_problems = k.nproblems;
	r->elapsed_us = (uint64_t)(sw_mono_ns() - t0) / 1000;
	return r;

fail:
	r->n_problems = k.nproblems;
	fsck_free(r);
	return NULL;
}

/* ---- the parent -------------------------------------------------------- */

struct fsck_run {
	struct master *m;
	uv_timer_t timer; /* waiting for chunkserver reports */
	int64_t deadline; /* mono ns: then check anyway */
	uint32_t max;	  /* problems to list */
	struct req *req;
	struct sw_child child;
};

/* How long a check waits for chunkservers to report their counts after
 * their last command (they do with every heartbeat, 5 s apart). */
#define FSCK_WAIT (12 * SW_NSEC_PER_SEC)

/* The child: check, pack, write. */
static int child_check(void *arg, int fd)
{
	struct fsck_run *f = arg;
	Sweepfs__FsckReply *r = fsck_check(f->m, f->max);
	size_t len;
	uint8_t *buf;

	if (!r)
		return -ENOMEM;
	len = sweepfs__fsck_reply__get_packed_size(r);
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	sweepfs__fsck_reply__pack(r, buf);
	return sw_write_all(fd, buf, len);
}

/* The check is over (@rc 0: its report is in the child's output). */
static void finish(struct fsck_run *f, int rc)
{
	struct sw_buf *out = &f->child.out;
	Sweepfs__FsckReply *r = NULL;

	if (rc == 0)
		r = sweepfs__fsck_reply__unpack(NULL, sw_buf_used(out),
						sw_buf_head(out));
	if (r) {
		sw_notice(TAG,
			  "%" PRIu64 " nodes, %" PRIu64 " chunks checked "
			  "in %.3f s: %zu problems",
			  r->nodes, r->chunks, (double)r->elapsed_us / 1e6,
			  (size_t)(r->leaked_nodes + r->bad_links +
				   r->bad_dirs + r->missing_chunks +
				   r->bad_refs + r->unreferenced_chunks +
				   r->lost_chunks + r->inventory_mismatches));
		req_reply(f->req, &r->base);
		sweepfs__fsck_reply__free_unpacked(r, NULL);
	} else {
		sw_err(TAG, "the check did not finish: %s",
		       strerror(rc < 0 ? -rc : EPROTO));
		req_error(f->req, -EIO);
	}
	req_done(f->req);
	f->m->fsck = NULL;
	sw_buf_release(out);
	free(f);
}

static void on_child_exit(struct sw_child *c, int rc)
{
	finish(c->data, rc);
}

/* Fork the check for @f (its request deferred). */
static void start_child(struct master *m, struct fsck_run *f)
{
	int rc;

	f->child.data = f;
	f->child.on_exit = on_child_exit;
	f->child.out_max = SW_FRAME_MAX_META;
	rc = sw_child_start(&f->child, m->loop, child_check, f);
	if (rc < 0)
		finish(f, rc);
}

/* Whether every connected chunkserver has reported since its last
 * command: then its count can be compared with ours. */
static bool reports_fresh(struct master *m)
{
	for (uint32_t i = 1; i <= m->cs->n; i++) {
		struct csrv *s = m->cs->srv[i];

		if (csrv_up(s) && s->reported_at <= s->changed_at)
			return false;
	}
	return true;
}

static void on_timer_closed(uv_handle_t *h)
{
	struct fsck_run *f = h->data;

	start_child(f->m, f);
}

/* Waiting for the chunkservers' next reports (a heartbeat each, at most
 * FSCK_WAIT): then the check. */
static void on_wait(uv_timer_t *t)
{
	struct fsck_run *f = t->data;

	if (!reports_fresh(f->m) && sw_mono_ns() < f->deadline &&
	    !f->m->stopping)
		return;
	uv_timer_stop(t);
	uv_close((uv_handle_t *)t, on_timer_closed);
}

void op_fsck(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__FsckReq *q = (const void *)msg;
	uint32_t max = q->has_max_problems ? q->max_problems : 100;
	struct fsck_run *f;

	if (r->m->fsck || r->m->dirinfo) { /* one fork slot (fileinfo.c) */
		req_error(r, -EBUSY);
		return;
	}
	f = calloc(1, sizeof(*f));
	if (f)
		f->req = req_defer(r);
	if (!f || !f->req) {
		free(f);
		req_error(r, -ENOMEM);
		return;
	}
	f->m = r->m;
	f->max = SW_MIN(max, 10000);
	r->m->fsck = f;
	if (reports_fresh(r->m)) {
		start_child(r->m, f);
		return;
	}
	f->deadline = sw_mono_ns() + FSCK_WAIT;
	uv_timer_init(r->m->loop, &f->timer);
	f->timer.data = f;
	uv_timer_start(&f->timer, on_wait, 100, 100);
}
