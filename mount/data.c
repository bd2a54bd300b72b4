/*
 * State: a table of chunk locations by (inode, chunk index), each marked
 * read or write (a write location carries a write token and means this
 * mount holds the chunk's write lease), and per inode the size last
 * committed to the master and the chunks written since the last fsync.
 * One mutex guards it all; no I/O happens under it.
 *
 * A request is split at chunk boundaries into parts. Each part finds its
 * location (table, else the master), then talks to chunkservers:
 *  - read: one copy after another until one answers; if all fail, the
 *    location is dropped and fetched again once;
 *  - write: all copies at once; if any fails, the location is dropped and
 *    fetched again once (the master then moves the chunk to a new version
 *    on the copies that are still there).
 * A part that fails twice fails the request with EIO.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cspool.h"
#include "data.h"
#include "frame.h"
#include "hash.h"
#include "log.h"
#include "mount_i.h"
#include "reply.h"
#include "util.h"

#define TAG "data"
#define LOC_SLOTS 4096u
#define LOC_MAX 65536u /* cached locations before the table is reset */
#define FILE_SLOTS 1024u
#define CHUNK_SERVERS_MAX 8 /* copies a location lists */
/* A token that runs out within a minute is not worth the risk. */
#define TOKEN_MARGIN_MS 60000

struct loc {
	uint64_t ino;
	uint32_t index;
	bool write;	 /* fetched for writing */
	bool write_only; /* and its token does not grant reading */
	bool hole;
	uint64_t chunk_id;
	uint32_t version;
	uint32_t nservers;
	char servers[CHUNK_SERVERS_MAX][64];
	uint8_t token[16];
	size_t token_len;
	uint64_t expires;   /* token, ms since the epoch */
	uint64_t file_size; /* as the master said */
	struct loc *next;
};

/* A chunk written since the last fsync. */
struct dirty {
	struct loc at; /* the copies written, and the token (at.next unused) */
	struct dirty *next;
};

/* Someone waiting for a file's size and mtime to reach the master. */
struct flushwait {
	void (*cb)(void *arg, int rc);
	void *arg;
	struct flushwait *next;
};

/*
 * A file this mount writes. Its size and mtime reach the master after the
 * data: a write is answered once the chunkservers have it, and the new
 * size and mtime follow in a WRITE_END, one at a time per file, the
 * latest values each time (writes meanwhile are gathered into the next).
 * Until the master has them, attributes this mount hands the kernel are
 * overlaid with them (data_local_attr()).
 */
struct dfile {
	uint64_t ino;
	uint64_t committed;  /* size the master has recorded */
	uint64_t local_size; /* size as this mount's writes made it */
	int64_t mtime;	     /* of the last write here, 0: none */
	uint64_t gen;	     /* writes done here */
	uint64_t sent_gen;   /* of them, told to the master */
	bool sending;	     /* a WRITE_END in flight */
	bool closing;	     /* last handle closed: free when idle */
	uint32_t max_index;  /* highest chunk fetched for writing */
	int err;	     /* a WRITE_END failed: for fsync */
	/* Who wrote last: a WRITE_END that reaches the master after the
	 * file's release is checked against their write permission. */
	uint32_t uid, gid;
	/* Its handle, kept from the first WRITE_END: a later one may go
	 * after the kernel forgot the inode (and the table its handle). */
	uint64_t handle;
	struct flushwait *waiters;
	struct dirty *dirty;
	struct dfile *next;
};

/*
 * A file this mount wrote lately (data_written_after()), and the size and
 * mtime its last write left it at, kept past the overlay's end: the
 * attributes a cache kept from before then are older than them
 * (data_local_attr()).
 */
struct recent {
	uint64_t ino;
	int64_t at;	 /* mono ns of the last write */
	int64_t settled; /* of the master's answer to its last WRITE_END */
	uint64_t size;
	int64_t mtime;
	struct recent *next;
};

#define RECENT_SLOTS 1024u
#define RECENT_KEEP (10 * SW_NSEC_PER_SEC) /* at least; see data_new() */
#define RECENT_KEEP_MAX (60 * SW_NSEC_PER_SEC)

struct data {
	struct mount *m;
	pthread_mutex_t mu;
	struct recent *recent[RECENT_SLOTS];
	size_t nrecent;
	int64_t recent_pruned; /* mono ns */
	int64_t recent_keep;   /* ns: longer than attr_timeout, if it may */
	int64_t attr_keep;     /* ns: attr_timeout and a second */
	struct loc *locs[LOC_SLOTS];
	size_t nlocs;
	struct dfile *files[FILE_SLOTS];
	bool stopping; /* data_stop(): syncs ask the master nothing */
};

static uint32_t loc_slot(uint64_t ino, uint32_t index)
{
	return (uint32_t)(sw_hash_u64(ino * 131 + index) % LOC_SLOTS);
}

static struct loc **loc_find(struct data *d, uint64_t ino, uint32_t index)
{
	struct loc **pp = &d->locs[loc_slot(ino, index)];

	while (*pp && ((*pp)->ino != ino || (*pp)->index != index))
		pp = &(*pp)->next;
	return pp;
}

static void locs_clear(struct data *d)
{
	for (unsigned i = 0; i < LOC_SLOTS; i++) {
		while (d->locs[i]) {
			struct loc *l = d->locs[i];

			d->locs[i] = l->next;
			free(l);
		}
	}
	d->nlocs = 0;
}

static struct dfile *file_get(struct data *d, uint64_t ino, bool create)
{
	struct dfile **pp = &d->files[sw_hash_u64(ino) % FILE_SLOTS];

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	if (!*pp && create && (*pp = calloc(1, sizeof(**pp))))
		(*pp)->ino = ino;
	return *pp;
}

int data_new(struct mount *m, struct data **out)
{
	struct data *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	pthread_mutex_init(&d->mu, NULL);
	d->m = m;
	/* Attributes kept up to attr_timeout must find the note; with a
	 * longer one than RECENT_KEEP_MAX, a note that goes first takes
	 * the inode table's copy with it (recent_note()). */
	d->attr_keep = (int64_t)(m->attr_timeout * 1e9) + SW_NSEC_PER_SEC;
	d->recent_keep =
		SW_MIN(SW_MAX(RECENT_KEEP, d->attr_keep), RECENT_KEEP_MAX);
	*out = d;
	return 0;
}

static void file_free(struct dfile *f)
{
	while (f->dirty) {
		struct dirty *x = f->dirty;

		f->dirty = x->next;
		free(x);
	}
	free(f);
}

/* Free @f if its last handle is closed and nothing is left to do. */
static void file_maybe_free(struct data *d, struct dfile *f)
{
	struct dfile **pp;

	if (!f->closing || f->sending || f->waiters || f->dirty ||
	    f->gen != f->sent_gen)
		return;
	pp = &d->files[sw_hash_u64(f->ino) % FILE_SLOTS];
	while (*pp && *pp != f)
		pp = &(*pp)->next;
	if (*pp) {
		*pp = f->next;
		file_free(f);
	}
}

/*
 * Remember that @ino was written now, or that the master answered its
 * last WRITE_END now (@settled), and the @size and @mtime that left it at
 * (lock held). Old entries go when the table has grown, at most once a
 * second: it holds what was written in the last recent_keep, however
 * fast files are written. False if there was no memory for a new entry.
 */
static bool recent_note(struct data *d, uint64_t ino, uint64_t size,
			int64_t mtime, bool settled)
{
	struct recent **pp = &d->recent[sw_hash_u64(ino) % RECENT_SLOTS];
	struct recent *r;
	int64_t now = sw_mono_ns();

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	if (!*pp && (*pp = calloc(1, sizeof(**pp)))) {
		(*pp)->ino = ino;
		d->nrecent++;
	}
	r = *pp;
	if (r) {
		if (settled)
			r->settled = now;
		else
			r->at = now;
		r->size = size;
		r->mtime = mtime;
	}
	if (d->nrecent > RECENT_SLOTS &&
	    now - d->recent_pruned > SW_NSEC_PER_SEC) {
		d->recent_pruned = now;
		for (unsigned i = 0; i < RECENT_SLOTS; i++) {
			for (pp = &d->recent[i]; *pp;) {
				struct recent *o = *pp;
				int64_t age = now - SW_MAX(o->at, o->settled);

				if (age > d->recent_keep && o != r) {
					if (age <= d->attr_keep)
						itable_set_attr_expired(
							&d->m->inodes, o->ino);
					*pp = o->next;
					free(o);
					d->nrecent--;
				} else {
					pp = &o->next;
				}
			}
		}
	}
	return r != NULL;
}

/* @ino's note, or NULL (lock held). */
static struct recent *recent_find(struct data *d, uint64_t ino)
{
	struct recent *r = d->recent[sw_hash_u64(ino) % RECENT_SLOTS];

	while (r && r->ino != ino)
		r = r->next;
	return r;
}

bool data_written_after(struct data *d, uint64_t ino, int64_t at)
{
	struct recent *r;
	bool yes;

	pthread_mutex_lock(&d->mu);
	r = recent_find(d, ino);
	yes = r && r->at >= at;
	pthread_mutex_unlock(&d->mu);
	return yes;
}

void data_stop(struct data *d)
{
	if (d)
		__atomic_store_n(&d->stopping, true, __ATOMIC_RELEASE);
}

void data_free(struct data *d)
{
	locs_clear(d);
	for (unsigned i = 0; i < RECENT_SLOTS; i++) {
		while (d->recent[i]) {
			struct recent *r = d->recent[i];

			d->recent[i] = r->next;
			free(r);
		}
	}
	for (unsigned i = 0; i < FILE_SLOTS; i++) {
		while (d->files[i]) {
			struct dfile *f = d->files[i];

			d->files[i] = f->next;
			file_free(f);
		}
	}
	pthread_mutex_destroy(&d->mu);
	free(d);
}

void data_forget(struct mount *m, uint64_t ino)
{
	struct data *d = m->data;
	struct dfile **pp;
	struct recent *r;

	pthread_mutex_lock(&d->mu);
	for (unsigned i = 0; i < LOC_SLOTS; i++) {
		for (struct loc **lp = &d->locs[i]; *lp;) {
			struct loc *l = *lp;

			if (l->ino == ino) {
				*lp = l->next;
				free(l);
				d->nlocs--;
			} else {
				lp = &l->next;
			}
		}
	}
	pp = &d->files[sw_hash_u64(ino) % FILE_SLOTS];
	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	if (*pp && !(*pp)->dirty && !(*pp)->sending && !(*pp)->waiters &&
	    (*pp)->gen == (*pp)->sent_gen) {
		struct dfile *f = *pp;

		*pp = f->next;
		file_free(f);
	} else if (*pp) {
		(*pp)->committed = (*pp)->local_size = 0;
	}
	/* Truncated from here on: no overlay from before. */
	r = recent_find(d, ino);
	if (r) {
		r->size = 0;
		r->mtime = 0;
	}
	pthread_mutex_unlock(&d->mu);
}

static void nothing(void *arg, int rc)
{
	(void)arg;
	(void)rc;
}

static void chunk_sync(struct mount *m, struct dirty *x, uint32_t uid,
		       uint32_t gid, uint64_t handle, cs_cb cb, void *arg);

static void synced_nowhere(void *arg, int rc, ProtobufCMessage **reply)
{
	(void)arg;
	(void)reply;
	if (rc < 0)
		sw_warn(TAG, "sync after close: %s", strerror(-rc));
}

void data_release(struct mount *m, uint64_t ino, bool last)
{
	struct data *d = m->data;
	struct dirty *list = NULL;
	uint32_t uid = 0, gid = 0;
	uint64_t handle = 0;
	struct dfile *f;

	/* The size and mtime go out ahead of the release (one connection,
	 * in order): who opens the file next, anywhere, sees them. */
	data_flush(m, ino, nothing, NULL);
	pthread_mutex_lock(&d->mu);
	f = file_get(d, ino, false);
	if (f) {
		for (uint32_t i = 0; i <= f->max_index; i++) {
			struct loc **pp = loc_find(d, ino, i), *l = *pp;

			if (l && l->write) {
				*pp = l->next;
				free(l);
				d->nlocs--;
			}
		}
		if (last) {
			list = f->dirty;
			f->dirty = NULL;
			uid = f->uid;
			gid = f->gid;
			handle = f->handle;
			f->closing = true;
			file_maybe_free(d, f);
		}
	}
	pthread_mutex_unlock(&d->mu);
	/*
	 * The last handle: what was written goes to disk on its copies now,
	 * in the background, as a local filesystem's writeback would, and
	 * this mount forgets the file (a mount writing millions of files
	 * keeps nothing for each). An fsync through a later handle covers
	 * what is written through it.
	 */
	while (list) {
		struct dirty *x = list;

		list = x->next;
		chunk_sync(m, x, uid, gid, handle, synced_nowhere, NULL);
	}
}

/*
 * Copy a valid cached location for (@ino, @index) into @out; a read needs
 * the file's bytes up to @end. A read location is a picture of the past:
 * other clients may have grown the file since (its file_size, which reads
 * are cut at, is stale) or written into a hole, so a read past the size
 * it knew, or in a hole, asks the master again. A write location is this
 * mount's own lease: its writes are in local_size.
 */
static bool loc_lookup(struct data *d, uint64_t ino, uint32_t index, bool write,
		       uint64_t end, struct loc *out)
{
	uint64_t now_ms = (uint64_t)(sw_now_ns() / 1000000);
	struct loc *l;
	bool ok = false;

	pthread_mutex_lock(&d->mu);
	l = *loc_find(d, ino, index);
	if (l && (write ? l->write : !l->write_only) && !l->hole &&
	    (l->write || end <= l->file_size) &&
	    l->expires > now_ms + TOKEN_MARGIN_MS) {
		*out = *l;
		ok = true;
	}
	pthread_mutex_unlock(&d->mu);
	return ok;
}

static void loc_store(struct data *d, const struct loc *src)
{
	struct loc **pp, *l;

	pthread_mutex_lock(&d->mu);
	if (src->write) {
		struct dfile *f = file_get(d, src->ino, true);

		if (f) {
			f->max_index = SW_MAX(f->max_index, src->index);
			f->closing = false;
		}
	}
	pp = loc_find(d, src->ino, src->index);
	/* A read does not take the place of this mount's write lease
	 * (whose token may not read: loc_lookup()). */
	if (*pp && (*pp)->write && !src->write)
		goto out;
	if (!*pp) {
		if (d->nlocs >= LOC_MAX)
			locs_clear(d);
		pp = loc_find(d, src->ino, src->index);
		*pp = calloc(1, sizeof(**pp));
		if (!*pp)
			goto out;
		d->nlocs++;
	}
	l = *pp;
	{
		struct loc *next = l->next;

		*l = *src;
		l->next = next;
	}
out:
	pthread_mutex_unlock(&d->mu);
}

static void loc_drop(struct data *d, uint64_t ino, uint32_t index)
{
	struct loc **pp, *l;

	pthread_mutex_lock(&d->mu);
	pp = loc_find(d, ino, index);
	if ((l = *pp)) {
		*pp = l->next;
		free(l);
		d->nlocs--;
	}
	pthread_mutex_unlock(&d->mu);
}

/* ---- the master: locations and sizes -------------------------------- */

/* A part of a read or write: the bytes of one chunk. */
struct part {
	struct op *op;
	uint32_t index;
	uint32_t offset; /* within the chunk */
	uint32_t size;
	size_t pos; /* within the request's buffer */
	struct loc loc;
	bool fresh;	      /* loc came from the master, not the table */
	bool refetched;	      /* a fresh location failed once */
	uint32_t next_server; /* read: the copy to try next */
	int pending;	      /* write: copies not yet answered */
	int failed;	      /* write: copies that failed */
	int last_err;
};

struct op {
	fuse_req_t req;
	struct mount *m;
	uint64_t ino;
	bool write;
	off_t off;
	size_t size;
	char *buf;	    /* read: the reply; write: a copy of the data */
	size_t got;	    /* read: bytes past off that came back */
	uint64_t file_size; /* largest size any location reported */
	int parts_left;
	int err;
	int nparts;
	struct part parts[]; /* each within one chunk and SW_IO_MAX */
};

static void part_go(struct part *p);
static void op_part_done(struct op *o, int rc);

/* @l from the master's answer @r for chunk @index of @ino. */
static void loc_fill(struct loc *l, uint64_t ino, uint32_t index, bool write,
		     const Sweepfs__ChunkReply *r)
{
	const Sweepfs__ChunkLoc *cl = r->loc;

	memset(l, 0, sizeof(*l));
	l->ino = ino;
	l->index = index;
	l->write = write;
	l->file_size = r->file_size;
	if (!cl) {
		l->hole = true;
		return;
	}
	l->chunk_id = cl->chunk_id;
	l->version = cl->version;
	l->write_only = cl->write_only;
	for (size_t i = 0; i < cl->n_servers && i < CHUNK_SERVERS_MAX; i++)
		snprintf(l->servers[l->nservers++], sizeof(l->servers[0]), "%s",
			 cl->servers[i]);
	l->token_len = SW_MIN(cl->token.len, sizeof(l->token));
	memcpy(l->token, cl->token.data, l->token_len);
	l->expires = cl->expires;
}

static void located(void *arg, int rc, ProtobufCMessage **reply)
{
	struct part *p = arg;

	if (rc < 0) {
		sw_warn(TAG,
			"inode %" PRIu64 " chunk %" PRIu32
			": the master gave no location for %s: %s",
			p->op->ino, p->index,
			p->op->write ? "writing" : "reading", strerror(-rc));
		op_part_done(p->op, rc);
		return;
	}
	loc_fill(&p->loc, p->op->ino, p->index, p->op->write,
		 (Sweepfs__ChunkReply *)*reply);
	p->fresh = true;
	if (!p->loc.hole) /* a hole may be written by anyone, any time */
		loc_store(p->op->m->data, &p->loc);
	p->next_server = 0;
	part_go(p);
}

static void locate(struct part *p)
{
	struct op *o = p->op;
	Sweepfs__ChunkReq q = SWEEPFS__CHUNK_REQ__INIT;
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;
	const struct fuse_ctx *ctx = fuse_req_ctx(o->req);

	/* The file is open, which the master checks; the ids are for its
	 * fallback permission check only. */
	cred.uid = ctx->uid;
	cred.gid = ctx->gid;
	q.cred = &cred;
	q.ino = o->ino;
	q.index = p->index;
	q.has_write = 1;
	q.write = o->write;
	mconn_send(o->m->mc, SW_MSG_CHUNK, &q.base, located, p);
}

/*
 * The location failed us: forget it and ask the master again. A location
 * from the table failing says little (the master may have moved the chunk
 * on, or restarted: a master that leads anew refuses the tokens of
 * before), so that is not counted; a fresh one failing twice is the end.
 */
static void relocate(struct part *p, int rc)
{
	/* Unmounted: the master's connection may be gone (data_stop()). */
	if (__atomic_load_n(&p->op->m->data->stopping, __ATOMIC_ACQUIRE)) {
		op_part_done(p->op, -EIO);
		return;
	}
	loc_drop(p->op->m->data, p->op->ino, p->index);
	if (p->fresh && p->refetched) {
		sw_warn(TAG,
			"inode %" PRIu64 " chunk %" PRIu32
			": %s failed at a second location: %s",
			p->op->ino, p->index,
			p->op->write ? "writing" : "reading", strerror(-rc));
		op_part_done(p->op, rc == -ENOSPC ? rc : -EIO);
		return;
	}
	sw_info(TAG,
		"inode %" PRIu64 " chunk %" PRIu32
		": %s failed (%s); asking the master again",
		p->op->ino, p->index, p->op->write ? "writing" : "reading",
		strerror(-rc));
	p->refetched = p->refetched || p->fresh;
	locate(p);
}

/* ---- reads ---------------------------------------------------------- */

static void read_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct part *p = arg;
	struct op *o = p->op;
	Sweepfs__CsReadReply *r;

	if (rc < 0) {
		/* Another copy, or a fresh location. */
		if (p->next_server < p->loc.nservers)
			part_go(p);
		else
			relocate(p, rc);
		return;
	}
	r = (Sweepfs__CsReadReply *)*reply;
	if (r->data.len > p->size) {
		op_part_done(o, -EIO);
		return;
	}
	if (r->data.len) /* an empty one has no buffer at all */
		memcpy(o->buf + p->pos, r->data.data, r->data.len);
	/* Short: the chunk ends there; the rest of the part is zeros. */
	op_part_done(o, 0);
}

static void read_part(struct part *p)
{
	Sweepfs__CsReadReq q = SWEEPFS__CS_READ_REQ__INIT;
	struct op *o = p->op;

	o->file_size = SW_MAX(o->file_size, p->loc.file_size);
	if (p->loc.hole || !p->loc.nservers) {
		if (p->loc.hole)
			op_part_done(o, 0);
		else
			relocate(p, -EIO);
		return;
	}
	q.chunk_id = p->loc.chunk_id;
	q.version = p->loc.version;
	q.offset = p->offset;
	q.size = p->size;
	q.has_token = 1;
	q.token.data = p->loc.token;
	q.token.len = p->loc.token_len;
	q.has_expires = 1;
	q.expires = p->loc.expires;
	cspool_send(o->m->cs, p->loc.servers[p->next_server++], SW_MSG_CS_READ,
		    &q.base, read_done, p);
}

/* ---- writes --------------------------------------------------------- */

static void mark_dirty(struct data *d, uint64_t ino, const struct loc *l)
{
	struct dfile *f;
	struct dirty *x;

	pthread_mutex_lock(&d->mu);
	f = file_get(d, ino, true);
	if (!f)
		goto out;
	for (x = f->dirty; x; x = x->next) {
		if (x->at.chunk_id != l->chunk_id ||
		    x->at.version != l->version)
			continue;
		/* Under its lease a writer writes one version for as long
		 * as it likes, with tokens asked for again: the sync must
		 * carry the newest, or one that ended gets EACCES. */
		if (l->expires > x->at.expires) {
			x->at = *l;
			x->at.next = NULL;
		}
		goto out;
	}
	x = malloc(sizeof(*x));
	if (!x)
		goto out;
	x->at = *l;
	x->at.next = NULL;
	x->next = f->dirty;
	f->dirty = x;
out:
	pthread_mutex_unlock(&d->mu);
}

static void write_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct part *p = arg;

	if (rc < 0) {
		p->failed++;
		p->last_err = rc;
	}
	if (__atomic_sub_fetch(&p->pending, 1, __ATOMIC_ACQ_REL))
		return;
	if (p->failed) {
		relocate(p, p->last_err);
		return;
	}
	mark_dirty(p->op->m->data, p->op->ino, &p->loc);
	op_part_done(p->op, 0);
}

static void write_part(struct part *p)
{
	Sweepfs__CsWriteReq q = SWEEPFS__CS_WRITE_REQ__INIT;
	struct op *o = p->op;
	uint32_t n = p->loc.nservers;

	if (p->loc.hole || !n) {
		relocate(p, -EIO);
		return;
	}
	q.chunk_id = p->loc.chunk_id;
	q.version = p->loc.version;
	q.offset = p->offset;
	q.data.data = (uint8_t *)o->buf + p->pos;
	q.data.len = p->size;
	q.has_token = 1;
	q.token.data = p->loc.token;
	q.token.len = p->loc.token_len;
	q.has_expires = 1;
	q.expires = p->loc.expires;
	p->failed = 0;
	p->pending = (int)n;
	/* The location may be replaced by a relocation while copies are
	 * still answering; send from a copy of the server list. */
	for (uint32_t i = 0; i < n; i++) {
		char server[64];

		memcpy(server, p->loc.servers[i], sizeof(server));
		cspool_send(o->m->cs, server, SW_MSG_CS_WRITE, &q.base,
			    write_done, p);
	}
}

static void part_go(struct part *p)
{
	if (p->op->write)
		write_part(p);
	else
		read_part(p);
}

/* ---- requests ------------------------------------------------------- */

static void op_free(struct op *o)
{
	free(o->buf);
	free(o);
}

/* A WRITE_END in flight for one file. */
struct commit {
	struct mount *m;
	uint64_t ino;
	uint64_t size;
	uint64_t gen;
};

static int commit_send(struct mount *m, struct dfile *f);

/* The master has a file's size and mtime as of write @c->gen. */
static void committed(void *arg, int rc, ProtobufCMessage **reply)
{
	struct commit *c = arg;
	struct mount *m = c->m;
	struct data *d = m->data;
	struct flushwait *done = NULL;
	struct dfile *f;
	bool lost = false;
	int unsent = 0;

	(void)reply;
	pthread_mutex_lock(&d->mu);
	f = file_get(d, c->ino, false);
	if (f) {
		f->sending = false;
		if (rc < 0) {
			f->err = rc;
		} else {
			f->committed = SW_MAX(f->committed, c->size);
			f->sent_gen = SW_MAX(f->sent_gen, c->gen);
		}
		/* Sent, f may be gone: commit_send() let go of the lock. */
		if (f->gen == f->sent_gen || rc < 0 ||
		    (unsent = commit_send(m, f)) < 0) {
			/* Up to date (or failed): release the waiters. */
			done = f->waiters;
			f->waiters = NULL;
			if (rc < 0)
				f->sent_gen = f->gen;
			/* Not sent: the next flush tries again. */
			rc = rc < 0 ? rc : unsent;
			/*
			 * The overlay ends here (unless unsent). Attributes
			 * the master gave meanwhile may predate this size,
			 * and a cache may keep them: noted under the same
			 * lock, and overlaid from the note
			 * (data_local_attr()). A failed WRITE_END left the
			 * master's where it was.
			 */
			lost = !recent_note(d, f->ino, f->committed,
					    rc < 0 ? 0 : f->mtime, true);
			file_maybe_free(d, f);
		}
	}
	/* No note (no memory): what the inode table kept is asked again;
	 * under the lock, before anyone sees the overlay gone. */
	if (lost)
		itable_set_attr_expired(&m->inodes, c->ino);
	pthread_mutex_unlock(&d->mu);
	while (done) {
		struct flushwait *w = done;

		done = w->next;
		w->cb(w->arg, rc);
		free(w);
	}
	free(c);
}

/*
 * Tell the master @f's size and mtime as of now. Called with the lock
 * held and nothing in flight for @f; lets go of it while sending, so @f
 * may be gone on return (an answer at once). -ENOMEM, with @f as it was
 * and the lock held throughout, if nothing could be sent.
 */
static int commit_send(struct mount *m, struct dfile *f)
{
	Sweepfs__WriteEndReq q = SWEEPFS__WRITE_END_REQ__INIT;
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;
	struct commit *c = malloc(sizeof(*c));

	if (!c) {
		f->err = -ENOMEM;
		return -ENOMEM;
	}
	c->m = m;
	c->ino = f->ino;
	c->size = f->local_size;
	c->gen = f->gen;
	f->sending = true;
	cred.uid = f->uid;
	cred.gid = f->gid;
	q.cred = &cred;
	q.ino = f->ino;
	q.size = f->local_size;
	q.has_mtime = 1;
	q.mtime = f->mtime;
	if (itable_handle(&m->inodes, f->ino))
		f->handle = itable_handle(&m->inodes, f->ino);
	if (f->handle) {
		q.n_handles = 1;
		q.handles = &f->handle;
	}
	/* mconn_send() may answer at once (master gone): never under our
	 * lock, which committed() takes. */
	pthread_mutex_unlock(&m->data->mu);
	mconn_send(m->mc, SW_MSG_WRITE_END, &q.base, committed, c);
	pthread_mutex_lock(&m->data->mu);
	return 0;
}

/*
 * Every part of a write landed: answer it, and have the master learn the
 * new size and mtime (now, or after the commit in flight for this file).
 * The kernel drops its attributes after a write; so does the inode
 * table, whose cached ones are now old.
 */
static void write_finish(struct op *o)
{
	struct mount *m = o->m;
	struct data *d = m->data;
	uint64_t end = (uint64_t)o->off + o->size;
	struct dfile *f;

	pthread_mutex_lock(&d->mu);
	f = file_get(d, o->ino, true);
	if (f) {
		f->local_size = SW_MAX(SW_MAX(f->local_size, end),
				       SW_MAX(f->committed, o->file_size));
		const struct fuse_ctx *ctx = fuse_req_ctx(o->req);

		f->mtime = sw_now_ns();
		f->gen++;
		f->closing = false;
		f->uid = ctx->uid;
		f->gid = ctx->gid;
		recent_note(d, f->ino, f->local_size, f->mtime, false);
		/* Failing (f->err), the next flush tries again. */
		if (!f->sending)
			commit_send(m, f);
	}
	pthread_mutex_unlock(&d->mu);
	itable_set_attr_expired(&m->inodes, o->ino);
	reply_written(o->req, f ? 0 : -ENOMEM, o->size);
	op_free(o);
}

void data_flush(struct mount *m, uint64_t ino, void (*cb)(void *arg, int rc),
		void *arg)
{
	struct data *d = m->data;
	struct flushwait *w = NULL;
	struct dfile *f;
	int err = 0;

	pthread_mutex_lock(&d->mu);
	f = file_get(d, ino, false);
	if (f && (f->sending || f->gen != f->sent_gen)) {
		w = malloc(sizeof(*w));
		if (w) {
			w->cb = cb;
			w->arg = arg;
			w->next = f->waiters;
			f->waiters = w;
			/* Nothing to wait for if it could not be sent. */
			if (!f->sending && commit_send(m, f) < 0) {
				f->waiters = w->next;
				free(w);
				w = NULL;
			}
		}
	}
	if (f && !w) {
		err = f->err;
		f->err = 0;
	}
	pthread_mutex_unlock(&d->mu);
	if (!w)
		cb(arg, err);
}

bool data_local_attr(struct data *d, uint64_t ino, int64_t fetched,
		     uint64_t *size, int64_t *mtime)
{
	struct dfile *f;
	struct recent *r;
	bool got = false;

	pthread_mutex_lock(&d->mu);
	f = file_get(d, ino, false);
	if (f && (f->sending || f->gen != f->sent_gen)) {
		*size = SW_MAX(*size, f->local_size);
		*mtime = SW_MAX(*mtime, f->mtime);
		got = true;
	} else if (fetched != INT64_MAX && (r = recent_find(d, ino)) &&
		   SW_MAX(r->at, r->settled) >= fetched) {
		*size = SW_MAX(*size, r->size);
		*mtime = SW_MAX(*mtime, r->mtime);
		got = true;
	}
	pthread_mutex_unlock(&d->mu);
	return got;
}

static void read_finish(struct op *o)
{
	struct data *d = o->m->data;
	uint64_t size = o->file_size, end;
	struct dfile *f;
	size_t n;

	pthread_mutex_lock(&d->mu);
	f = file_get(d, o->ino, false);
	if (f && f->local_size > size)
		size = f->local_size;
	pthread_mutex_unlock(&d->mu);
	end = (uint64_t)o->off + o->size;
	if ((uint64_t)o->off >= size)
		n = 0;
	else
		n = (size_t)(SW_MIN(end, size) - (uint64_t)o->off);
	reply_data(o->req, 0, o->buf, n);
	op_free(o);
}

static void op_part_done(struct op *o, int rc)
{
	bool last;

	if (rc < 0)
		__atomic_store_n(&o->err, rc, __ATOMIC_RELEASE);
	last = __atomic_sub_fetch(&o->parts_left, 1, __ATOMIC_ACQ_REL) == 0;
	if (!last)
		return;
	rc = __atomic_load_n(&o->err, __ATOMIC_ACQUIRE);
	if (rc < 0) {
		reply_status(o->req, rc);
		op_free(o);
	} else if (o->write) {
		write_finish(o);
	} else {
		read_finish(o);
	}
}

/* Pieces of [@off, @off + @size): within one chunk and SW_IO_MAX each. */
static int count_parts(uint64_t off, size_t size)
{
	int n = 0;

	for (uint64_t pos = off; pos < off + size; n++) {
		uint64_t end = SW_MIN((pos / SW_CHUNK_SIZE + 1) * SW_CHUNK_SIZE,
				      pos + SW_IO_MAX);

		pos = SW_MIN(end, off + size);
	}
	return n;
}

/* data_read() and data_write() (data.h), by whether @wbuf is given. */
static int op_start(struct mount *m, fuse_req_t req, uint64_t ino,
		    const char *wbuf, size_t size, off_t off)
{
	uint64_t pos = (uint64_t)off;
	struct op *o;
	int nparts;

	if (off < 0)
		return -EINVAL;
	if (size == 0)
		return 1;
	nparts = count_parts((uint64_t)off, size);
	o = calloc(1, sizeof(*o) + (size_t)nparts * sizeof(o->parts[0]));
	if (o)
		o->buf = wbuf ? malloc(size) : calloc(1, size);
	if (!o || !o->buf) {
		free(o);
		return -ENOMEM;
	}
	if (wbuf)
		memcpy(o->buf, wbuf, size);
	o->req = req;
	o->m = m;
	o->ino = ino;
	o->write = wbuf != NULL;
	o->off = off;
	o->size = size;
	o->nparts = nparts;
	o->parts_left = nparts;
	for (int i = 0; i < nparts; i++) {
		struct part *p = &o->parts[i];
		uint64_t end = SW_MIN((pos / SW_CHUNK_SIZE + 1) * SW_CHUNK_SIZE,
				      pos + SW_IO_MAX);

		end = SW_MIN(end, (uint64_t)off + size);
		p->op = o;
		p->index = (uint32_t)(pos / SW_CHUNK_SIZE);
		p->offset = (uint32_t)(pos % SW_CHUNK_SIZE);
		p->size = (uint32_t)(end - pos);
		p->pos = (size_t)(pos - (uint64_t)off);
		pos = end;
	}
	/* Parts may finish (and free o) as soon as they start. */
	for (int i = 0; i < nparts; i++) {
		struct part *p = &o->parts[i];

		uint64_t end = (uint64_t)p->index * SW_CHUNK_SIZE + p->offset +
			       p->size;

		if (loc_lookup(m->data, ino, p->index, wbuf != NULL, end,
			       &p->loc))
			part_go(p);
		else
			locate(p);
	}
	return 0;
}

int data_read(struct mount *m, fuse_req_t req, uint64_t ino, size_t size,
	      off_t off)
{
	return op_start(m, req, ino, NULL, size, off);
}

int data_write(struct mount *m, fuse_req_t req, uint64_t ino, const char *buf,
	       size_t size, off_t off)
{
	return op_start(m, req, ino, buf, size, off);
}

/* ---- fsync ---------------------------------------------------------- */

/*
 * One written chunk's sync on each of its copies. The copies take only
 * the token it was written with, of its version: a writer keeps a file
 * open as long as it likes, so the token may have run out by the fsync
 * (each lives 10 minutes), or the version moved on (a snapshot took the
 * lease back). Such a chunk is asked of the master again, once, for
 * writing, as that chunk at that version only (ChunkReq.only_chunk: the
 * master makes and copies nothing for it; a bump syncs), before a token
 * within TOKEN_MARGIN_MS of its end is sent, or after a copy refused
 * it. An answer with no location means there is nothing left to sync:
 * the chunk was cut away, or a bump moved it on, which syncs it
 * (store_set_version(), chunkserver/store.c).
 *
 * Only refusals a copy said are asked about again: of the token
 * (EACCES), of the version (ESTALE), of a chunk not there (ENOENT). An
 * error a copy met syncing (EIO, ENOSPC) is the fsync's: a second
 * fdatasync would say 0 for pages the kernel has given up on. So is no
 * answer: a server that went down may have lost what was written to
 * it, and come back with the chunk at the version asked about.
 */
struct csync {
	struct mount *m;
	struct loc at;
	uint32_t uid, gid; /* for the master's check if no longer open */
	uint64_t handle;
	cs_cb cb; /* told once, with an error or 0 */
	void *arg;
	int pending;
	int err;     /* an error a copy met */
	int refused; /* a refusal a copy said */
	bool asked;  /* at was asked of the master again */
};

/* One of *@pending answered @rc (*@err keeps an error): the last? */
static bool last_answer(int *pending, int *err, int rc)
{
	if (rc < 0)
		__atomic_store_n(err, rc, __ATOMIC_RELEASE);
	return __atomic_sub_fetch(pending, 1, __ATOMIC_ACQ_REL) == 0;
}

static void csync_end(struct csync *c, int rc)
{
	c->cb(c->arg, rc, NULL);
	free(c);
}

static void csync_ask(struct csync *c);

static void csync_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct csync *c = arg;
	bool refused = rc < 0 && reply && *reply &&
		       (rc == -EACCES || rc == -ESTALE || rc == -ENOENT);
	int err;

	if (!last_answer(&c->pending, refused ? &c->refused : &c->err, rc))
		return;
	err = __atomic_load_n(&c->err, __ATOMIC_ACQUIRE);
	rc = __atomic_load_n(&c->refused, __ATOMIC_ACQUIRE);
	if (err < 0)
		csync_end(c, err);
	else if (rc < 0 && !c->asked &&
		 !__atomic_load_n(&c->m->data->stopping, __ATOMIC_ACQUIRE))
		csync_ask(c);
	else
		csync_end(c, rc);
}

static void csync_send(struct csync *c)
{
	Sweepfs__CsSyncReq q = SWEEPFS__CS_SYNC_REQ__INIT;
	uint32_t n = c->at.nservers;

	if (c->at.hole) { /* cut away meanwhile: nothing left to sync */
		csync_end(c, 0);
		return;
	}
	if (!n) {
		csync_end(c, -EIO);
		return;
	}
	q.chunk_id = c->at.chunk_id;
	q.version = c->at.version;
	q.has_token = 1;
	q.token.data = c->at.token;
	q.token.len = c->at.token_len;
	q.has_expires = 1;
	q.expires = c->at.expires;
	c->err = c->refused = 0;
	/* One more than the copies: @c lives until every send returned. */
	c->pending = (int)n + 1;
	for (uint32_t i = 0; i < n; i++)
		cspool_send(c->m->cs, c->at.servers[i], SW_MSG_CS_SYNC, &q.base,
			    csync_done, c);
	csync_done(c, 0, NULL);
}

static void csync_located(void *arg, int rc, ProtobufCMessage **reply)
{
	struct csync *c = arg;

	if (rc < 0) {
		sw_warn(TAG,
			"inode %" PRIu64 " chunk %" PRIu32
			": the master gave no location to sync: %s",
			c->at.ino, c->at.index, strerror(-rc));
		csync_end(c, rc);
		return;
	}
	loc_fill(&c->at, c->at.ino, c->at.index, true,
		 (Sweepfs__ChunkReply *)*reply);
	csync_send(c);
}

static void csync_ask(struct csync *c)
{
	Sweepfs__ChunkReq q = SWEEPFS__CHUNK_REQ__INIT;
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;

	c->asked = true;
	cred.uid = c->uid;
	cred.gid = c->gid;
	q.cred = &cred;
	q.ino = c->at.ino;
	q.index = c->at.index;
	q.has_write = 1;
	q.write = 1;
	q.has_only_chunk = q.has_only_version = 1;
	q.only_chunk = c->at.chunk_id;
	q.only_version = c->at.version;
	/* Kept from the last commit: the kernel may have forgotten the
	 * inode since a last close (else mconn_send() adds it). */
	if (c->handle) {
		q.n_handles = 1;
		q.handles = &c->handle;
	}
	mconn_send(c->m->mc, SW_MSG_CHUNK, &q.base, csync_located, c);
}

/* Sync the chunk @x names (freed here) on its copies; @cb(@arg) once. */
static void chunk_sync(struct mount *m, struct dirty *x, uint32_t uid,
		       uint32_t gid, uint64_t handle, cs_cb cb, void *arg)
{
	uint64_t now_ms = (uint64_t)(sw_now_ns() / 1000000);
	struct csync *c = calloc(1, sizeof(*c));

	if (!c) {
		free(x);
		cb(arg, -ENOMEM, NULL);
		return;
	}
	c->m = m;
	c->at = x->at;
	c->at.next = NULL;
	c->uid = uid;
	c->gid = gid;
	c->handle = handle;
	c->cb = cb;
	c->arg = arg;
	free(x);
	if (c->at.expires <= now_ms + TOKEN_MARGIN_MS)
		csync_ask(c);
	else
		csync_send(c);
}

struct syncop {
	fuse_req_t req;
	int pending;
	int err;
};

static void synced(void *arg, int rc, ProtobufCMessage **reply)
{
	struct syncop *s = arg;

	(void)reply;
	if (!last_answer(&s->pending, &s->err, rc))
		return;
	reply_status(s->req, __atomic_load_n(&s->err, __ATOMIC_ACQUIRE));
	free(s);
}

static void sync_flushed(void *arg, int rc)
{
	synced(arg, rc, NULL);
}

struct waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	int rc;
};

static void wake(void *arg, int rc)
{
	struct waiter *w = arg;

	pthread_mutex_lock(&w->mu);
	w->done = true;
	w->rc = rc;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

int data_flush_wait(struct mount *m, uint64_t ino)
{
	struct waiter w = { .mu = PTHREAD_MUTEX_INITIALIZER,
			    .cv = PTHREAD_COND_INITIALIZER };

	data_flush(m, ino, wake, &w);
	devpoll_yield();
	pthread_mutex_lock(&w.mu);
	while (!w.done)
		pthread_cond_wait(&w.cv, &w.mu);
	pthread_mutex_unlock(&w.mu);
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
	return w.rc;
}

/*
 * fsync: every chunk written since the last one is synced on each of its
 * copies, and the size and mtime have reached the master.
 */
int data_fsync(struct mount *m, fuse_req_t req, uint64_t ino)
{
	struct data *d = m->data;
	struct syncop *s = calloc(1, sizeof(*s));
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct dirty *list = NULL, *x;
	uint64_t handle = 0;
	struct dfile *f;
	int n = 2;

	if (!s)
		return -ENOMEM;
	pthread_mutex_lock(&d->mu);
	f = file_get(d, ino, false);
	if (f) {
		list = f->dirty;
		f->dirty = NULL;
		handle = f->handle;
	}
	pthread_mutex_unlock(&d->mu);
	for (x = list; x; x = x->next)
		n++;
	s->req = req;
	s->pending = n;
	for (x = list; x;) {
		struct dirty *next = x->next;

		chunk_sync(m, x, ctx->uid, ctx->gid, handle, synced, s);
		x = next;
	}
	data_flush(m, ino, sync_flushed, s);
	synced(s, 0, NULL); /* the 2 above: one for the flush */
	return 0;
}
