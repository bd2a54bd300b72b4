/*
 * Checkpoint format (little-endian):
 *
 *   header   "SWCP" u32 format u64 version u64 next_ino u64 next_edge
 *            u64 next_chunk
 *   'N' node u64 ino u32 mode u32 uid u32 gid u32 nlink u32 flags
 *            i64 atime i64 mtime i64 ctime u64 size
 *            [u64 rdev: devices] [size bytes: symlink target]
 *   'K'      u64 chunk id u32 version
 *   'I'      u64 chunk id u32 version u8 kind u64 src u32 src version
 *            u64 length (UINT64_MAX: none): a chunk change not yet done
 *            (chunks.h; written after the 'K' records)
 *   'F'      u64 ino u32 count, then count x u64 chunk id (0: hole)
 *   'D' dir  u64 ino u64 count u32 trashtime, then count x
 *            { u64 edge u64 child u8 flags u8 namelen name } in id order
 *   'X'      u64 ino u8 namelen u32 valuelen name value
 *   'P'      u64 root ino u64 purge id u64 nodes left: a detached subtree
 *            still being purged (its directories are in 'D' records)
 *   'T'      u64 id u64 ino u64 parent u32 len path i64 deleted
 *            i64 expires u64 nodes: an item in the trash
 *   'H'      u64 next_chunk_named (namespace.h): chunk ids below it that
 *            no 'K' record holds are gone for good (format 7; one
 *            record; before, the highest chunk loaded counts)
 *   'U'      u64 lo u64 hi: of those, the ids [lo, hi) no change named
 *            (skipped for a reported file; format 7, at most
 *            NS_UNNAMED_MAX)
 *   'C'      16 bytes: the cluster's identity (format 6; one record, or
 *            none before the first master led)
 *   'M'      u64 dir ino u64 below u64 fresh: a mark of the snapshot
 *            flag (struct ns_snapmark; format 8, after the 'D' records,
 *            whose flags are then each name's own bit; before, the
 *            marks were written out on the names)
 *   'Z'      u64 records u32 crc32c(everything before the crc)
 *
 * All 'N' records come before any 'K', those before any 'F' and 'D', so
 * whatever a record names is loaded before it. The 'N' records come in
 * inode order where the numbers are dense (struct by_ino), which the
 * loader prefers but does not require. Tombstones are not
 * written; chunk reference counts are recounted from the slots.
 */
#include <assert.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootlog.h"
#include "checkpoint.h"
#include "crc32c.h"
#include "frame.h"
#include "fsio.h"
#include "namespace_i.h"
#include "replies.h"
#include "trash.h"
#include "log.h"
#include "util.h"

#define TAG "checkpoint"
#define CP_MAGIC "SWCP"
/* 4: after next_chunk, the counts of nodes, chunks, xattr sets and
 * orphans (3, without them, still loads). 5: 'R' records (replies.h).
 * 6: each change in an 'R' record with its request's digest, and a 'C'
 * record (the cluster's identity). 7: an 'H' record (chunk ids named). */
#define CP_FORMAT 8u
/* 8: 'M' records, written only when there are marks: a checkpoint
 * without them stays 7, which the builds before read. */
#define CP_FORMAT_NO_MARKS 7u
#define IOBUF (1u << 20)
/* The smallest record counted in the header: a chunk's (tag, id,
 * version); a node's is 61 bytes, an xattr set's 14. */
#define RECORD_MIN (1 + 8 + 4)

/* ---- writing -------------------------------------------------------- */

/*
 * The writer asks the kernel to write back each SYNC_STEP it wrote, and
 * waits for the step before that, so that about two steps at most are
 * ever dirty, as Redis's rdb-save-incremental-fsync does. Left to the
 * kernel, a 34 M-file checkpoint had up to 1.9 GB dirty or under
 * writeback at once, what was left of it flushed by the fdatasync() at
 * the end; with steps, 16 MB at most, and the write ended sooner
 * (6.4-7.8 s against 8.7-10.7 s, the fdatasync() included;
 * sweepfs-nsbench load DIR write, two runs each, in the commit that
 * added this). The fdatasync() stays: sync_file_range() is no
 * durability.
 *
 * A wait reports a writeback error once, as fsync() does, and marks it
 * seen for the file: the fdatasync() at the end would not see it again.
 * So the wait's failure is the writer's (w->err), and a file system
 * that cannot do it (EINVAL, ENOSYS, ESPIPE) only turns the steps off.
 */
#define SYNC_STEP (8u << 20)

struct writer {
	int fd;
	uint8_t *buf;
	size_t len;
	uint32_t crc;
	uint64_t records;
	uint64_t written; /* bytes written so far */
	uint64_t back_lo; /* the step being written back: its start */
	uint64_t back_hi; /* and its end */
	bool no_steps;	  /* sync_file_range() is not supported here */
	int err;
};

/* What a sync_file_range() that returned @rc means to @w. */
static void w_step_done(struct writer *w, int rc)
{
	if (rc == 0)
		return;
	if (errno == EINVAL || errno == ENOSYS || errno == ESPIPE)
		w->no_steps = true;
	else
		w->err = -errno;
}

/* Once a step more is written, wait for the step being written back,
 * and start the writeback of the new one. */
static void w_sync_step(struct writer *w)
{
	if (w->no_steps || w->written - w->back_hi < SYNC_STEP)
		return;
	if (w->back_hi > w->back_lo)
		w_step_done(
			w, sync_file_range(w->fd, w->back_lo,
					   w->back_hi - w->back_lo,
					   SYNC_FILE_RANGE_WAIT_BEFORE |
						   SYNC_FILE_RANGE_WRITE |
						   SYNC_FILE_RANGE_WAIT_AFTER));
	if (w->err || w->no_steps)
		return;
	w->back_lo = w->back_hi;
	w->back_hi = w->written;
	w_step_done(w,
		    sync_file_range(w->fd, w->back_lo, w->back_hi - w->back_lo,
				    SYNC_FILE_RANGE_WRITE));
}

static void w_flush(struct writer *w)
{
	size_t off = 0;

	/* After a write error nothing more is written (the caller sees
	 * w->err at the end), but the buffer still empties. */
	while (!w->err && off < w->len) {
		ssize_t n = write(w->fd, w->buf + off, w->len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			w->err = -errno;
		else
			off += (size_t)n;
	}
	if (!w->err) {
		w->crc = sw_crc32c(w->crc, w->buf, w->len);
		w->written += w->len;
		w_sync_step(w);
	}
	w->len = 0;
}

/*
 * Where the next @n bytes go (@n <= W_ROOM), straight into the buffer:
 * a record's fixed part is put in place field by field and ended with
 * w_done(), not copied a field at a time through w_bytes() (a node
 * has eleven fields, a name five, and there are tens of millions of
 * each).
 */
#define W_ROOM 512u

static inline uint8_t *w_room(struct writer *w, size_t n)
{
	assert(n <= W_ROOM);
	if (IOBUF - w->len < n)
		w_flush(w);
	return w->buf + w->len;
}

static inline void w_done(struct writer *w, const uint8_t *end)
{
	w->len = (size_t)(end - w->buf);
}

static inline uint8_t *put_u8(uint8_t *p, uint8_t v)
{
	*p = v;
	return p + 1;
}

static inline uint8_t *put_u32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
	return p + 4;
}

static inline uint8_t *put_u64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
	return p + 8;
}

static void w_bytes(struct writer *w, const void *p, size_t n)
{
	const uint8_t *s = p;

	while (n) {
		size_t k = SW_MIN(n, IOBUF - w->len);

		memcpy(w->buf + w->len, s, k);
		w->len += k;
		s += k;
		n -= k;
		if (w->len == IOBUF)
			w_flush(w);
	}
}

static void w_u8(struct writer *w, uint8_t v)
{
	w_done(w, put_u8(w_room(w, 1), v));
}

static void w_u32(struct writer *w, uint32_t v)
{
	w_done(w, put_u32(w_room(w, 4), v));
}

static void w_u64(struct writer *w, uint64_t v)
{
	w_done(w, put_u64(w_room(w, 8), v));
}

/* A node's fixed part: tag, ino, five u32, four u64, rdev. */
#define NODE_MAX (1 + 8 + 5 * 4 + 4 * 8 + 8)

static int write_node(void *elem, void *arg)
{
	const struct node *n = elem;
	struct writer *w = arg;
	uint8_t *p = w_room(w, NODE_MAX);

	p = put_u8(p, 'N');
	p = put_u64(p, n->ino);
	p = put_u32(p, n->mode);
	p = put_u32(p, n->uid);
	p = put_u32(p, n->gid);
	p = put_u32(p, n->nlink);
	p = put_u32(p, n->flags & ~NODE_RUNTIME_FLAGS);
	p = put_u64(p, (uint64_t)n->atime);
	p = put_u64(p, (uint64_t)n->mtime);
	p = put_u64(p, (uint64_t)n->ctime);
	p = put_u64(p, n->size);
	if (S_ISCHR(n->mode) || S_ISBLK(n->mode))
		p = put_u64(p, n->u.rdev);
	w_done(w, p);
	if (S_ISLNK(n->mode))
		w_bytes(w, n->u.target, n->size);
	w->records++;
	return w->err;
}

/* At most this many slots per node in an array by inode number (load
 * and write): 8 bytes each, freed when the checkpoint is done. */
#define BYINO_SLACK 4
/* How many nodes ahead a walk by inode number asks for the node. */
#define WALK_AHEAD 8u

/*
 * The nodes by inode number, where the numbers are dense enough for an
 * array of them (BYINO_SLACK); v is NULL otherwise, and the walks go in
 * the inode table's (hash) order.
 *
 * Every record kind that is written a node at a time walks this array,
 * not the table: the loader fills its own array by inode number front to
 * back and lands the nodes in its slabs in that order, so inode order is
 * also, mostly, the order of the nodes in memory, here as after a load,
 * and each walk reads them almost sequentially. In hash order each node
 * is a cache miss of its own: the one walk that fills the array takes
 * 2.3 s at 34 M files (bench/nsbench.c), and the chunk slots, the
 * directories and the xattrs each took one more before they walked
 * the array too.
 */
struct by_ino {
	const struct node **v;
	uint64_t len;
};

static int put_by_ino(void *elem, void *arg)
{
	const struct node *n = elem;
	struct by_ino *b = arg;

	if (n->ino >= b->len)
		return -ERANGE;
	b->v[n->ino] = n;
	return 0;
}

static void by_ino_init(const struct ns *ns, struct by_ino *b)
{
	b->len = ns->next_ino;
	b->v = NULL;
	if (ns->nnodes && ns->next_ino <= ns->nnodes * BYINO_SLACK + 1024)
		b->v = calloc((size_t)b->len, sizeof(*b->v));
	if (b->v && ns_foreach_node(ns, put_by_ino, b) < 0) {
		free(b->v);
		b->v = NULL;
	}
}

/* ns_foreach_node(), in inode order where @b has it. */
static int each_node(const struct ns *ns, const struct by_ino *b,
		     int (*fn)(void *node, void *arg), void *arg)
{
	if (!b->v)
		return ns_foreach_node(ns, fn, arg);
	for (uint64_t ino = 0; ino < b->len; ino++) {
		int rc;

		if (ino + WALK_AHEAD < b->len && b->v[ino + WALK_AHEAD])
			__builtin_prefetch(b->v[ino + WALK_AHEAD]);
		if (!b->v[ino])
			continue;
		rc = fn((void *)b->v[ino], arg);
		if (rc)
			return rc;
	}
	return 0;
}

/* A name's part of a 'D' record: edge, child, flags, length, name. */
#define EDGE_MAX (8 + 8 + 1 + 1 + 255)
_Static_assert(sizeof(((struct edge *)0)->namelen) == 1,
	       "a name longer than 255 bytes would not fit EDGE_MAX");

static int write_dir(void *elem, void *arg)
{
	const struct node *n = elem;
	struct writer *w = arg;
	uint8_t *p;

	if (!S_ISDIR(n->mode) ||
	    (n->u.dir->nentries == 0 && !n->u.dir->trashtime))
		return 0;
	w_u8(w, 'D');
	w_u64(w, n->ino);
	w_u64(w, n->u.dir->nentries);
	w_u32(w, n->u.dir->trashtime);
	for (const struct edge *e = n->u.dir->head; e; e = e->next) {
		if (!e->child)
			continue;
		p = w_room(w, EDGE_MAX);
		p = put_u64(p, e->id);
		p = put_u64(p, e->child->ino);
		p = put_u8(p, e->flags & EDGE_SNAPSHOT); /* marks: 'M' */
		p = put_u8(p, e->namelen);
		memcpy(p, e->name, e->namelen);
		w_done(w, p + e->namelen);
	}
	w->records++;
	return w->err;
}

static int write_chunk(void *elem, void *arg)
{
	const struct chunk *c = elem;
	struct writer *w = arg;

	w_u8(w, 'K');
	w_u64(w, c->id);
	w_u32(w, c->version);
	w->records++;
	return w->err;
}

static int write_intent(const struct chunk_intent *in, void *arg)
{
	struct writer *w = arg;

	w_u8(w, 'I');
	w_u64(w, in->id);
	w_u32(w, in->version);
	w_u8(w, in->kind);
	w_u64(w, in->src);
	w_u32(w, in->src_version);
	w_u64(w, in->length < 0 ? UINT64_MAX : (uint64_t)in->length);
	w->records++;
	return w->err;
}

static int write_slots(void *elem, void *arg)
{
	const struct node *n = elem;
	struct writer *w = arg;
	uint32_t count = ns_chunk_slots(n);

	if (!count)
		return 0;
	w_u8(w, 'F');
	w_u64(w, n->ino);
	w_u32(w, count);
	w_bytes(w, n->u.chunks->id, (size_t)count * sizeof(uint64_t));
	w->records++;
	return w->err;
}

static int write_trash(const struct trash_item *t, void *arg)
{
	struct writer *w = arg;
	uint64_t id, ino, parent, nodes;
	int64_t deleted, expires;
	const char *path;

	ns_trash_item(t, &id, &ino, &parent, &path, &deleted, &expires, &nodes);
	w_u8(w, 'T');
	w_u64(w, id);
	w_u64(w, ino);
	w_u64(w, parent);
	w_u32(w, (uint32_t)strlen(path));
	w_bytes(w, path, strlen(path));
	w_u64(w, (uint64_t)deleted);
	w_u64(w, (uint64_t)expires);
	w_u64(w, nodes);
	w->records++;
	return w->err;
}

/* A session's ring, oldest change first. */
static int write_ring(const struct reply_ring *r, void *arg)
{
	struct writer *w = arg;

	w_u8(w, 'R');
	w_u64(w, r->session);
	w_u64(w, (uint64_t)r->last);
	w_u32(w, r->n);
	for (uint32_t i = 0; i < r->n; i++) {
		const struct reply_done *d = reply_ring_at(r, i);

		w_u64(w, d->req);
		w_u64(w, d->ino);
		w_u64(w, d->version);
		w_bytes(w, d->digest, sizeof(d->digest));
	}
	w->records++;
	return w->err;
}

struct xattr_ctx {
	struct writer *w;
	uint64_t ino;
};

static int write_one_xattr(const void *name, size_t nlen, const void *value,
			   size_t vlen, void *arg)
{
	struct xattr_ctx *x = arg;

	w_u8(x->w, 'X');
	w_u64(x->w, x->ino);
	w_u8(x->w, (uint8_t)nlen);
	w_u32(x->w, (uint32_t)vlen);
	w_bytes(x->w, name, nlen);
	w_bytes(x->w, value, vlen);
	x->w->records++;
	return x->w->err;
}

struct xattr_walk {
	const struct ns *ns;
	struct writer *w;
};

static int write_xattrs(void *elem, void *arg)
{
	const struct node *n = elem;
	struct xattr_walk *xw = arg;
	struct xattr_ctx x = { xw->w, n->ino };

	if (!(n->flags & NODE_XATTR))
		return 0;
	return ns_xattr_foreach(xw->ns, n, write_one_xattr, &x);
}

static void cp_name(char *buf, size_t len, const char *dir, uint64_t version,
		    const char *suffix)
{
	snprintf(buf, len, "%s/checkpoint.%020" PRIu64 "%s", dir, version,
		 suffix);
}

void checkpoint_name(char *buf, size_t len, const char *dir, uint64_t version)
{
	cp_name(buf, len, dir, version, "");
}

/* Write @ns as checkpoint @version under its ".tmp" name, durably. */
static int write_tmp(const struct ns *ns, const char *dir, uint64_t version)
{
	char tmp[4200];
	struct writer w = { .fd = -1 };
	struct xattr_walk xw = { ns, &w };
	struct by_ino order;
	uint8_t crcbuf[4];
	int rc;

	cp_name(tmp, sizeof(tmp), dir, version, ".tmp");
	w.buf = malloc(IOBUF);
	if (!w.buf)
		return -ENOMEM;
	w.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (w.fd < 0) {
		rc = -errno;
		goto out_free;
	}
	w_bytes(&w, CP_MAGIC, 4);
	w_u32(&w, ns->nsnapmarks ? CP_FORMAT : CP_FORMAT_NO_MARKS);
	w_u64(&w, version);
	w_u64(&w, ns->next_ino);
	w_u64(&w, ns->next_edge);
	w_u64(&w, ns->next_chunk);
	w_u64(&w, ns->nnodes);
	w_u64(&w, htab_count(&ns->chunks));
	w_u64(&w, htab_count(&ns->xattrs));
	w_u64(&w, htab_count(&ns->orphans));
	by_ino_init(ns, &order);
	each_node(ns, &order, write_node, &w);
	chunks_foreach(ns, write_chunk, &w);
	ns_intents_foreach(ns, write_intent, &w);
	each_node(ns, &order, write_slots, &w);
	each_node(ns, &order, write_dir, &w);
	for (unsigned i = 0; i < ns->nsnapmarks; i++) {
		w_u8(&w, 'M');
		w_u64(&w, ns->snapmarks[i].dir->ino);
		w_u64(&w, ns->snapmarks[i].below);
		w_u64(&w, ns->snapmarks[i].fresh);
		w.records++;
	}
	each_node(ns, &order, write_xattrs, &xw);
	free(order.v);
	for (const struct purge_root *pr = ns->purge_head; pr; pr = pr->next) {
		w_u8(&w, 'P');
		w_u64(&w, pr->root->ino);
		w_u64(&w, pr->id);
		w_u64(&w, pr->total - SW_MIN(pr->freed, pr->total));
		w.records++;
	}
	ns_trash_foreach(ns, write_trash, &w);
	replies_foreach(&ns->replies, write_ring, &w);
	w_u8(&w, 'H');
	w_u64(&w, ns->next_chunk_named);
	w.records++;
	for (unsigned i = 0; i < ns->n_unnamed; i++) {
		w_u8(&w, 'U');
		w_u64(&w, ns->chunk_unnamed[i].lo);
		w_u64(&w, ns->chunk_unnamed[i].hi);
		w.records++;
	}
	if (ns_has_cluster_id(ns)) {
		w_u8(&w, 'C');
		w_bytes(&w, ns->cluster_id, NS_CLUSTER_ID_LEN);
		w.records++;
	}
	w_u8(&w, 'Z');
	w_u64(&w, w.records);
	w_flush(&w);
	for (int i = 0; i < 4; i++)
		crcbuf[i] = (uint8_t)(w.crc >> (8 * i));
	w_bytes(&w, crcbuf, 4);
	/* The crc must not cover itself: write it past the running sum. */
	if (!w.err) {
		ssize_t n = write(w.fd, w.buf, w.len);

		if (n != (ssize_t)w.len)
			w.err = n < 0 ? -errno : -EIO;
	}
	rc = w.err;
	if (rc == 0 && fdatasync(w.fd) < 0)
		rc = -errno;
	if (close(w.fd) < 0 && rc == 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
out_free:
	free(w.buf);
	return rc;
}

bool checkpoint_ends_check(const uint8_t head[CHECKPOINT_HEAD],
			   const uint8_t tail[CHECKPOINT_TAIL], uint32_t crc,
			   uint64_t version)
{
	uint64_t v = 0;
	uint32_t format = 0, want = 0;

	/* The magic, the format (any this loader reads), the version. */
	for (int i = 3; i >= 0; i--) {
		format = format << 8 | head[4 + i];
		want = want << 8 | tail[i];
	}
	for (int i = 7; i >= 0; i--)
		v = v << 8 | head[8 + i];
	return memcmp(head, CP_MAGIC, 4) == 0 && format >= 3 &&
	       format <= CP_FORMAT && v == version && crc == want;
}

int checkpoint_publish(const char *dir, uint64_t version)
{
	char tmp[4200], final[4200];
	int rc = 0;

	cp_name(tmp, sizeof(tmp), dir, version, ".tmp");
	cp_name(final, sizeof(final), dir, version, "");
	if (rename(tmp, final) < 0)
		rc = -errno;
	if (rc == 0)
		rc = sw_fsync_dir(dir);
	if (rc < 0)
		unlink(tmp);
	return rc;
}

int checkpoint_write(const struct ns *ns, const char *dir, uint64_t version)
{
	int rc = write_tmp(ns, dir, version);

	return rc < 0 ? rc : checkpoint_publish(dir, version);
}

/* ---- reading -------------------------------------------------------- */

/*
 * How many records ahead the loader starts reading the hash slots a
 * record will go to: a record costs tens of ns to parse and add, a miss
 * in a table of hundreds of MiB (a TLB miss too) a few hundred, so a few
 * misses in flight cover it; far more would evict the slots asked for.
 */
#define LOAD_AHEAD 16u

/*
 * The checkpoint is mapped whole when it can be (read-only, sequential
 * advice): no copy of gigabytes from the page cache into a buffer, which
 * was a tenth of a load. Otherwise it is read IOBUF at a time.
 */
struct reader {
	int fd;
	uint8_t *buf;
	size_t len, off;
	uint32_t crc; /* over bytes consumed */
	int err;
	bool eof;
	bool mapped;	     /* buf is the whole file, len its size */
	struct bootlog *log; /* progress: nodes and names loaded */
};

static bool r_fill(struct reader *r, size_t need)
{
	if (r->len - r->off >= need)
		return true;
	if (r->err)
		return false;
	if (r->mapped) {
		r->err = -EUCLEAN; /* past the end */
		return false;
	}
	r->crc = sw_crc32c(r->crc, r->buf, r->off);
	memmove(r->buf, r->buf + r->off, r->len - r->off);
	r->len -= r->off;
	r->off = 0;
	while (r->len < need) {
		ssize_t n = read(r->fd, r->buf + r->len, IOBUF - r->len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r->err = n < 0 ? -errno : -EUCLEAN;
			return false;
		}
		r->len += (size_t)n;
	}
	return true;
}

static int r_bytes(struct reader *r, void *p, size_t n)
{
	uint8_t *d = p;

	while (n) {
		size_t k;

		if (!r_fill(r, 1))
			return r->err;
		k = SW_MIN(n, r->len - r->off);
		memcpy(d, r->buf + r->off, k);
		r->off += k;
		d += k;
		n -= k;
	}
	return 0;
}

/*
 * The fixed-size fields: read in place when the buffer holds them (it
 * always does when the file is mapped), through r_bytes() otherwise. A
 * node is ten fields, and a call to memcpy() of a size only known at run
 * time for each was a tenth of a load.
 */
static int r_u8(struct reader *r, uint8_t *v)
{
	if (r->off < r->len) {
		*v = r->buf[r->off++];
		return 0;
	}
	return r_bytes(r, v, 1);
}

static uint32_t le32(const uint8_t *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
	       (uint32_t)b[3] << 24;
}

static int r_u32(struct reader *r, uint32_t *v)
{
	uint8_t b[4];
	int rc;

	if (r->len - r->off >= 4) {
		*v = le32(r->buf + r->off);
		r->off += 4;
		return 0;
	}
	rc = r_bytes(r, b, 4);
	*v = le32(b);
	return rc;
}

static int r_u64(struct reader *r, uint64_t *v)
{
	uint32_t lo = 0, hi = 0;
	int rc;

	if (r->len - r->off >= 8) {
		*v = (uint64_t)le32(r->buf + r->off + 4) << 32 |
		     le32(r->buf + r->off);
		r->off += 8;
		return 0;
	}
	rc = r_u32(r, &lo);
	if (rc == 0)
		rc = r_u32(r, &hi);
	*v = (uint64_t)hi << 32 | lo;
	return rc;
}

/*
 * The nodes loaded so far by inode number, when the header's next_ino
 * makes such an array small (inode numbers are handed out in order, so
 * it is dense unless most of what was ever made is gone): a node's
 * duplicate check and a name's child are then one read of the array
 * rather than a probe of the inode table, which touches a node per slot
 * it passes. NULL: look the inode table up instead.
 */
struct byino {
	struct node **v;
	uint64_t len;
};

static struct node *load_get(struct ns *ns, const struct byino *b, uint64_t ino)
{
	if (b->v)
		return ino < b->len ? b->v[ino] : NULL;
	return ns_get(ns, ino);
}

/* Open @path for reading into @r; its size in @st. 0 or -errno. */
static int r_open(struct reader *r, const char *path, struct stat *st)
{
	int rc;

	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0)
		return -errno;
	if (fstat(r->fd, st) < 0) {
		rc = -errno;
		goto out_close;
	}
	if (st->st_size > 0 && (uint64_t)st->st_size <= SIZE_MAX) {
		void *p = mmap(NULL, (size_t)st->st_size, PROT_READ,
			       MAP_PRIVATE, r->fd, 0);

		if (p != MAP_FAILED) {
			madvise(p, (size_t)st->st_size, MADV_SEQUENTIAL);
			r->buf = p;
			r->len = (size_t)st->st_size;
			r->mapped = true;
			return 0;
		}
	}
	r->buf = malloc(IOBUF);
	if (r->buf)
		return 0;
	rc = -ENOMEM;
out_close:
	close(r->fd);
	r->fd = -1;
	return rc;
}

static void r_close(struct reader *r)
{
	if (r->mapped)
		munmap(r->buf, r->len);
	else
		free(r->buf);
	close(r->fd);
}

static int load_node(struct ns *ns, struct reader *r, struct byino *b)
{
	struct node t = { 0 };
	uint32_t nlink, flags;
	uint64_t at, mt, ct;
	char *target = NULL;
	struct node *n;
	int rc = 0;

	rc |= r_u64(r, &t.ino);
	rc |= r_u32(r, &t.mode);
	rc |= r_u32(r, &t.uid);
	rc |= r_u32(r, &t.gid);
	rc |= r_u32(r, &nlink);
	rc |= r_u32(r, &flags);
	rc |= r_u64(r, &at);
	rc |= r_u64(r, &mt);
	rc |= r_u64(r, &ct);
	rc |= r_u64(r, &t.size);
	if (rc)
		return -EUCLEAN;
	if (nlink > NS_LINK_MAX || flags > UINT16_MAX)
		return -EUCLEAN;
	t.nlink = (uint16_t)nlink;
	t.flags = (uint16_t)flags;
	t.atime = (int64_t)at;
	t.mtime = (int64_t)mt;
	t.ctime = (int64_t)ct;
	if (S_ISCHR(t.mode) || S_ISBLK(t.mode)) {
		if (r_u64(r, &t.u.rdev))
			return -EUCLEAN;
	} else if (S_ISLNK(t.mode)) {
		if (t.size > 4096)
			return -EUCLEAN;
		target = malloc(t.size + 1);
		if (!target)
			return -ENOMEM;
		rc = r_bytes(r, target, t.size) ? -EUCLEAN : 0;
	}
	/* The nodes come in inode order where the numbers are dense: the
	 * one LOAD_AHEAD records on is most likely this one's number plus
	 * LOAD_AHEAD, and its slot in the inode table a miss to start now. */
	ns_prefetch(ns, t.ino + LOAD_AHEAD);
	if (rc == 0 && b->v) {
		if (t.ino >= b->len)
			rc = -EUCLEAN; /* not below the header's next_ino */
		else if (b->v[t.ino])
			rc = -EEXIST;
		else
			rc = ns_load_node_new(ns, &t, target, &n);
		if (rc == 0)
			b->v[t.ino] = n;
	} else if (rc == 0) {
		rc = ns_load_node(ns, &t, target, &n);
	}
	free(target);
	return rc;
}

/*
 * Where a directory's name records are read ahead of the one being
 * loaded: each name's slot in the directory's table is a miss at
 * millions of names, started LOAD_AHEAD names before the name is added.
 */
struct lookahead {
	size_t off;    /* the next name record to look at, in r->buf */
	uint64_t left; /* records of the directory not looked at yet */
};

/*
 * Look at the next record of @la (a name: u64 edge, u64 child, u8 flags,
 * u8 namelen, name) and start reading its slot in @dir's name table.
 * Only where the file is mapped whole (a buffer that refills moves under
 * the offsets), and only as far as the file goes: the records themselves
 * are checked when they are read.
 */
static void lookahead_step(struct lookahead *la, const struct reader *r,
			   const struct node *dir)
{
	const size_t hdr = 8 + 8 + 1 + 1;
	size_t len;

	if (!la->left || !r->mapped || r->len - la->off < hdr)
		return;
	len = r->buf[la->off + hdr - 1];
	if (r->len - la->off - hdr < len) {
		la->left = 0;
		return;
	}
	ns_prefetch_name(dir, (const char *)r->buf + la->off + hdr, len);
	la->off += hdr + len;
	la->left--;
}

static int load_dir(struct ns *ns, struct reader *r, const struct byino *b)
{
	struct lookahead la;
	uint64_t ino, count;
	uint32_t trashtime;
	struct node *dir;
	int rc;

	if (r_u64(r, &ino) || r_u64(r, &count) || r_u32(r, &trashtime))
		return -EUCLEAN;
	dir = load_get(ns, b, ino);
	if (!dir || !S_ISDIR(dir->mode) || dir->u.dir->nentries)
		return -EUCLEAN;
	dir->u.dir->trashtime = trashtime;
	/* The count is a hint here, bounded by what is loaded: hard links
	 * can make a directory's names outnumber the nodes, and a corrupt
	 * count must not size a table (its names are checked one by one). */
	rc = ns_load_dir_reserve(ns, dir, SW_MIN(count, ns->nnodes));
	if (rc < 0)
		return rc;
	la = (struct lookahead){ r->off, count };
	for (unsigned i = 0; i < LOAD_AHEAD; i++)
		lookahead_step(&la, r, dir);
	for (uint64_t i = 0; i < count; i++) {
		uint64_t edge, child_ino;
		struct node *child;
		char name[256];
		uint8_t len, flags;

		lookahead_step(&la, r, dir);

		if (r_u64(r, &edge) || r_u64(r, &child_ino) ||
		    r_u8(r, &flags) || r_u8(r, &len) || r_bytes(r, name, len))
			return -EUCLEAN;
		child = load_get(ns, b, child_ino);
		if (!child || !sw_name_valid(name, len) ||
		    (flags & ~EDGE_SNAPSHOT))
			return -EUCLEAN;
		rc = ns_load_edge(ns, dir, child, name, len, edge, flags);
		if (rc < 0)
			return rc == -ENOMEM ? rc : -EUCLEAN;
		bootlog_tick(r->log, ns->nnodes + ns->nedges);
	}
	/* The read ahead stepped over the same records, to the same end. */
	assert(!r->mapped || (la.left == 0 && la.off == r->off));
	return 0;
}

static int load_chunk(struct ns *ns, struct reader *r)
{
	uint64_t id;
	uint32_t version;

	if (r_u64(r, &id) || r_u32(r, &version) || id == 0)
		return -EUCLEAN;
	return ns_load_chunk(ns, id, version) ? -EUCLEAN : 0;
}

static int load_intent(struct ns *ns, struct reader *r)
{
	struct chunk_intent in;
	uint64_t length;

	if (r_u64(r, &in.id) || r_u32(r, &in.version) || r_u8(r, &in.kind) ||
	    r_u64(r, &in.src) || r_u32(r, &in.src_version) ||
	    r_u64(r, &length) || in.kind < INTENT_CREATE ||
	    in.kind > INTENT_BUMP || !chunk_get(ns, in.id))
		return -EUCLEAN;
	in.length = length > SW_CHUNK_SIZE ? -1 : (int64_t)length;
	return ns_intent_note(ns, &in);
}

static int load_slots(struct ns *ns, struct reader *r)
{
	uint64_t ino, *ids;
	uint32_t count;
	struct node *n;
	int rc;

	/* 2^26 slots of 64 MiB: the 2^52-byte ceiling of a file. */
	if (r_u64(r, &ino) || r_u32(r, &count) || count == 0 ||
	    count > (1u << 26))
		return -EUCLEAN;
	n = ns_get(ns, ino);
	if (!n)
		return -EUCLEAN;
	ids = malloc((size_t)count * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	rc = r_bytes(r, ids, (size_t)count * sizeof(*ids)) ? -EUCLEAN : 0;
	if (rc == 0)
		rc = ns_load_slots(ns, n, count, ids);
	free(ids);
	return rc == -ENOMEM ? rc : rc ? -EUCLEAN : 0;
}

static int load_xattr(struct ns *ns, struct reader *r)
{
	uint64_t ino;
	uint8_t nlen;
	uint32_t vlen;
	char name[256];
	struct node *n;
	void *value;
	int rc;

	if (r_u64(r, &ino) || r_u8(r, &nlen) || r_u32(r, &vlen) ||
	    r_bytes(r, name, nlen) || vlen > (1u << 20))
		return -EUCLEAN;
	n = ns_get(ns, ino);
	if (!n)
		return -EUCLEAN;
	value = malloc(vlen ? vlen : 1);
	if (!value)
		return -ENOMEM;
	rc = r_bytes(r, value, vlen) ? -EUCLEAN : 0;
	if (rc == 0)
		rc = ns_xattr_set(ns, n, name, nlen, value, vlen, n->ctime);
	free(value);
	return rc;
}

static int load_purge(struct ns *ns, struct reader *r)
{
	uint64_t ino, id, left;
	struct node *n;

	if (r_u64(r, &ino) || r_u64(r, &id) || r_u64(r, &left))
		return -EUCLEAN;
	n = ns_get(ns, ino);
	if (!n || !S_ISDIR(n->mode) || n->u.dir->parent ||
	    !(n->flags & NODE_DETACHED))
		return -EUCLEAN;
	return nsi_purge_add(ns, n, id, left) ? -ENOMEM : 0;
}

/* The snapshot flag's marks, set once every name is loaded (a mark
 * counts the unflagged names added under it). */
struct marks {
	struct {
		uint64_t ino, below, fresh;
	} m[NS_SNAPMARKS];
	unsigned n;
};

/* A mark names no edge id not yet handed out (@next_edge: the
 * header's). */
static int load_mark(struct marks *ms, struct reader *r, uint64_t next_edge)
{
	uint64_t ino, below, fresh;

	if (r_u64(r, &ino) || r_u64(r, &below) || r_u64(r, &fresh) ||
	    below > next_edge || ms->n == NS_SNAPMARKS)
		return -EUCLEAN;
	ms->m[ms->n].ino = ino;
	ms->m[ms->n].below = below;
	ms->m[ms->n++].fresh = fresh;
	return 0;
}

static int set_marks(struct ns *ns, const struct marks *ms)
{
	for (unsigned i = 0; i < ms->n; i++) {
		struct node *n = ns_get(ns, ms->m[i].ino);

		if (!n || nsi_snap_load(ns, n, ms->m[i].below, ms->m[i].fresh))
			return -EUCLEAN;
	}
	return 0;
}

static int load_trash(struct ns *ns, struct reader *r)
{
	uint64_t id, ino, parent, deleted, expires, nodes;
	char path[4096 + 256 + 2];
	uint32_t len;

	if (r_u64(r, &id) || r_u64(r, &ino) || r_u64(r, &parent) ||
	    r_u32(r, &len) || len >= sizeof(path) || r_bytes(r, path, len) ||
	    r_u64(r, &deleted) || r_u64(r, &expires) || r_u64(r, &nodes))
		return -EUCLEAN;
	return ns_trash_load(ns, id, ino, parent, path, len, (int64_t)deleted,
			     (int64_t)expires, nodes);
}

static int load_ring(struct ns *ns, struct reader *r, uint32_t format)
{
	uint64_t session, last;
	uint32_t n;

	if (r_u64(r, &session) || r_u64(r, &last) || r_u32(r, &n) ||
	    n > REPLIES_PER_SESSION)
		return -EUCLEAN;
	for (uint32_t i = 0; i < n; i++) {
		struct reply_done d = { .req = 0 };

		if (r_u64(r, &d.req) || r_u64(r, &d.ino) ||
		    r_u64(r, &d.version) ||
		    (format >= 6 && r_bytes(r, d.digest, sizeof(d.digest))))
			return -EUCLEAN;
		if (replies_add(&ns->replies, session, (int64_t)last, &d) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Chunk ids named: never lowered (the chunks loaded count too), and
 * next_chunk is kept above it (checkpoint_load()'s end). */
static int load_named(struct ns *ns, struct reader *r)
{
	uint64_t named;

	if (r_u64(r, &named) || named == 0)
		return -EUCLEAN;
	if (named > ns->next_chunk_named)
		ns->next_chunk_named = named;
	return 0;
}

/* Chunk ids no change named ('U'). */
static int load_unnamed(struct ns *ns, struct reader *r)
{
	uint64_t lo, hi;

	if (r_u64(r, &lo) || r_u64(r, &hi) || lo == 0 || lo >= hi)
		return -EUCLEAN;
	ns_chunk_unnamed(ns, lo, hi);
	return 0;
}

/* The cluster's identity: all zero is none, and none is not written. */
static int load_cluster_id(struct ns *ns, struct reader *r)
{
	if (r_bytes(r, ns->cluster_id, NS_CLUSTER_ID_LEN) ||
	    !ns_has_cluster_id(ns))
		return -EUCLEAN;
	return 0;
}

static int load_file(struct ns *ns, const char *path, uint64_t expect)
{
	struct bootlog log;
	struct reader r = { .log = &log };
	uint64_t version, next_ino, next_edge, next_chunk, records = 0, want;
	uint64_t counts[4] = { 0 }; /* nodes, chunks, xattr sets, orphans */
	struct byino b = { NULL, 0 };
	struct marks marks = { .n = 0 };
	uint32_t format, crc_file, crc_calc;
	struct stat st;
	char magic[4];
	int rc = 0;

	rc = r_open(&r, path, &st);
	if (rc < 0)
		return rc;
	if (r_bytes(&r, magic, 4) || memcmp(magic, CP_MAGIC, 4) ||
	    r_u32(&r, &format) || format < 3 || format > CP_FORMAT ||
	    r_u64(&r, &version) || version != expect || r_u64(&r, &next_ino) ||
	    r_u64(&r, &next_edge) || r_u64(&r, &next_chunk) ||
	    (format >= 4 && (r_u64(&r, &counts[0]) || r_u64(&r, &counts[1]) ||
			     r_u64(&r, &counts[2]) || r_u64(&r, &counts[3])))) {
		rc = -EUCLEAN;
		goto out_close;
	}
	/* Each takes RECORD_MIN bytes at least: a count the file cannot
	 * hold is corrupt (and would not be allocated). */
	if (counts[0] > (uint64_t)st.st_size / RECORD_MIN ||
	    counts[1] > (uint64_t)st.st_size / RECORD_MIN ||
	    counts[2] > (uint64_t)st.st_size / RECORD_MIN ||
	    counts[3] > counts[0]) {
		rc = -EUCLEAN;
		goto out_close;
	}
	rc = ns_load_reserve(ns, counts[0], counts[1], counts[2], counts[3]);
	if (rc < 0)
		goto out_close;
	/* Every node but the root has a name, hard links a few more. */
	bootlog_start(&log, TAG, "loading checkpoint", "nodes and names",
		      counts[0] ? 2 * counts[0] - 1 : 0, sw_mono_ns());
	/* Without counts (format 3), or sparse, or no memory: the table. */
	if (counts[0] && next_ino <= counts[0] * BYINO_SLACK + 1024) {
		b.v = calloc((size_t)next_ino, sizeof(*b.v));
		b.len = b.v ? next_ino : 0;
	}
	for (;;) {
		uint8_t tag;

		if (r_u8(&r, &tag)) {
			rc = -EUCLEAN;
			break;
		}
		if (tag == 'Z')
			break;
		switch (tag) {
		case 'N':
			rc = load_node(ns, &r, &b);
			break;
		case 'D':
			rc = load_dir(ns, &r, &b);
			break;
		case 'K':
			rc = load_chunk(ns, &r);
			break;
		case 'I':
			rc = load_intent(ns, &r);
			break;
		case 'F':
			rc = load_slots(ns, &r);
			break;
		case 'P':
			rc = load_purge(ns, &r);
			break;
		case 'T':
			rc = load_trash(ns, &r);
			break;
		case 'X':
			rc = load_xattr(ns, &r);
			break;
		case 'R':
			rc = load_ring(ns, &r, format);
			break;
		case 'H':
			rc = load_named(ns, &r);
			break;
		case 'U':
			rc = load_unnamed(ns, &r);
			break;
		case 'C':
			rc = load_cluster_id(ns, &r);
			break;
		case 'M':
			rc = format >= 8 ? load_mark(&marks, &r, next_edge) :
					   -EUCLEAN;
			break;
		default:
			rc = -EUCLEAN;
		}
		if (rc < 0)
			break;
		records++;
		bootlog_tick(&log, ns->nnodes + ns->nedges);
	}
	if (rc == 0 && (r_u64(&r, &want) || want != records))
		rc = -EUCLEAN;
	if (rc == 0) {
		/* Everything consumed so far is covered by the crc. */
		crc_calc = sw_crc32c(r.crc, r.buf, r.off);
		if (r_u32(&r, &crc_file) || crc_file != crc_calc)
			rc = -EUCLEAN;
	}
	if (rc == 0)
		rc = ns_load_finish(ns) ? -EUCLEAN : 0;
	if (rc == 0)
		rc = set_marks(ns, &marks);
	if (rc == 0) {
		if (next_ino > ns->next_ino)
			ns->next_ino = next_ino;
		if (next_edge > ns->next_edge)
			ns->next_edge = next_edge;
		if (next_chunk > ns->next_chunk)
			ns->next_chunk = next_chunk;
		/* No id below the named ones is handed out again. */
		if (ns->next_chunk_named > ns->next_chunk)
			ns->next_chunk = ns->next_chunk_named;
		ns->version = version;
	}
out_close:
	free(b.v);
	r_close(&r);
	return rc;
}

/* Versions of the checkpoints in @dir, newest first. */
static int list_versions(const char *dir, uint64_t **out, size_t *count)
{
	int rc = sw_dir_versions(dir, "checkpoint.", out, count);

	for (size_t i = 0; rc == 0 && i < *count / 2; i++) {
		uint64_t t = (*out)[i];

		(*out)[i] = (*out)[*count - 1 - i];
		(*out)[*count - 1 - i] = t;
	}
	return rc;
}

int checkpoint_newest(const char *dir, uint64_t *version)
{
	uint64_t *v;
	size_t n;
	int rc = list_versions(dir, &v, &n);

	if (rc < 0)
		return rc;
	if (n)
		*version = v[0];
	free(v);
	return n > 0;
}

int checkpoint_load(struct ns *ns, const char *dir, uint64_t *version)
{
	uint64_t *v;
	size_t n;
	int rc = list_versions(dir, &v, &n);

	if (rc < 0)
		return rc;
	*version = 0;
	rc = n ? -EUCLEAN : 0;
	for (size_t i = 0; i < n; i++) {
		char path[4200];

		cp_name(path, sizeof(path), dir, v[i], "");
		rc = load_file(ns, path, v[i]);
		if (rc == 0) {
			*version = v[i];
			sw_notice(TAG,
				  "loaded %s: %" PRIu64 " nodes, %" PRIu64
				  " names",
				  path, ns->nnodes, ns->nedges);
			break;
		}
		sw_err(TAG, "%s: %s; trying an older one", path,
		       rc == -EUCLEAN ? "corrupt" : strerror(-rc));
		ns_release(ns);
		rc = ns_init(ns, 0);
		if (rc < 0)
			break;
		rc = -EUCLEAN;
	}
	free(v);
	return rc;
}

/* Remove "checkpoint.*.tmp": leftovers of writers that died. */
static void remove_stale_tmp(const char *dir)
{
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char path[4200];

		if (strncmp(de->d_name, "checkpoint.", 11) || len < 4 ||
		    strcmp(de->d_name + len - 4, ".tmp"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		unlink(path);
	}
	closedir(d);
}

int64_t checkpoint_prune(const char *dir, unsigned keep)
{
	uint64_t *v, oldest = 0;
	size_t n;
	int rc;

	/* Called when no writer runs (after one finished), so every .tmp
	 * is stale. */
	remove_stale_tmp(dir);
	rc = list_versions(dir, &v, &n);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		char path[4200];

		if (i < keep) {
			oldest = v[i];
			continue;
		}
		cp_name(path, sizeof(path), dir, v[i], "");
		unlink(path);
	}
	free(v);
	return (int64_t)oldest;
}

/* ---- background ----------------------------------------------------- */

static void on_child_exit(struct sw_child *c, int rc)
{
	struct checkpointer *ck = c->data;

	sw_buf_release(&c->out); /* the child writes nothing */
	ck->done(ck->arg, rc);
}

static int child_write(void *arg, int fd)
{
	const struct checkpointer *ck = arg;

	(void)fd;
	if (ck->hold)
		return write_tmp(ck->ns, ck->dir, ck->version);
	return checkpoint_write(ck->ns, ck->dir, ck->version);
}

int checkpoint_start(struct checkpointer *ck, uv_loop_t *loop,
		     const struct ns *ns, const char *dir, uint64_t version,
		     void (*done)(void *arg, int rc), void *arg)
{
	if (ck->child.active)
		return -EBUSY;
	ck->ns = ns;
	ck->dir = dir;
	ck->version = version;
	ck->done = done;
	ck->arg = arg;
	ck->child.data = ck;
	ck->child.on_data = NULL;
	ck->child.on_exit = on_child_exit;
	return sw_child_start(&ck->child, loop, child_write, ck);
}
