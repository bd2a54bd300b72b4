/*
 * Reading directories for the kernel.
 *
 * Offsets the kernel passes are entry cookies (1 and 2 are "." and "..").
 * A read is served from the directory's cached listing (dircache.c) when
 * the listing covers the offset, fetching the next page from the master
 * when the cache runs out; otherwise (a seekdir to a position the cache
 * does not have, or a listing too big to keep) it is served from a page
 * that belongs to the open directory handle alone.
 *
 * A reply may need a fetch before it is complete, so a read owns its
 * handle (busy) from its start until its reply, which may be sent from
 * the master connection's receiver thread.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "deleg.h"
#include "dircache.h"
#include "entries.h"
#include "frame.h"
#include "mount_i.h"
#include "reply.h"
#include "util.h"

/* Master readdir page: entries per request and bytes. */
#define PAGE_ENTRIES 1024u
#define PAGE_BYTES (128u << 10)
/* Entries taken from the cache at a time. */
#define BATCH 32

struct hentry {
	uint64_t cookie;
	uint64_t ino;
	uint8_t type;
	char name[SW_NAME_MAX + 1];
	Sweepfs__Attr *attr; /* points into page_msg */
};

struct dirhandle {
	pthread_mutex_t mu;
	pthread_cond_t idle;
	bool busy; /* a read owns the handle */
	uint64_t ino;
	/* The handle's own page, for positions the cache does not cover. */
	uint64_t after; /* the page holds entries after this cookie */
	struct hentry *ents;
	uint32_t n;
	bool eof;
	bool plus;
	int64_t fetched_at; /* mono ns: the page's attributes */
	ProtobufCMessage *page_msg;
	struct dirhandle *prev, *next; /* on mount.dirs */
};

static void dh_clear(struct dirhandle *dh)
{
	free(dh->ents);
	dh->ents = NULL;
	dh->n = 0;
	if (dh->page_msg)
		protobuf_c_message_free_unpacked(dh->page_msg, NULL);
	dh->page_msg = NULL;
}

/* Install @msg (taken over) as the handle's page, fetched after @after. */
static int dh_install(struct dirhandle *dh, ProtobufCMessage *msg,
		      uint64_t after, bool plus)
{
	Sweepfs__ReaddirReply *r = (Sweepfs__ReaddirReply *)msg;
	size_t off = 0;

	dh_clear(dh);
	dh->ents = calloc(r->count ? r->count : 1, sizeof(*dh->ents));
	if (!dh->ents) {
		protobuf_c_message_free_unpacked(msg, NULL);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < r->count; i++) {
		struct sw_dirent d;
		int used = sw_dirent_get(r->entries.data + off,
					 r->entries.len - off, &d);

		if (used < 0 || (plus && i >= r->n_attrs)) {
			protobuf_c_message_free_unpacked(msg, NULL);
			dh_clear(dh);
			return -EIO;
		}
		off += (size_t)used;
		dh->ents[i].cookie = d.cookie;
		dh->ents[i].ino = d.ino;
		dh->ents[i].type = d.type;
		memcpy(dh->ents[i].name, d.name, d.namelen);
		dh->ents[i].name[d.namelen] = '\0';
		dh->ents[i].attr = plus ? r->attrs[i] : NULL;
	}
	dh->n = r->count;
	dh->eof = r->eof;
	dh->after = after;
	dh->plus = plus;
	dh->fetched_at = sw_mono_ns();
	dh->page_msg = msg;
	return 0;
}

/* Index just past the entry with @cookie in the handle's page, or -1. */
static int64_t page_after(const struct dirhandle *dh, uint64_t cookie)
{
	if (!dh->page_msg)
		return -1;
	if (dh->after == cookie)
		return 0;
	for (uint32_t i = 0; i < dh->n; i++)
		if (dh->ents[i].cookie == cookie)
			return i + 1;
	return -1;
}

/* The first entry of the page past @cookie (pages are in cookie order). */
static int64_t page_from(const struct dirhandle *dh, uint64_t cookie)
{
	uint32_t i = 0;

	while (i < dh->n && dh->ents[i].cookie <= cookie)
		i++;
	return i;
}

/* One read in progress: the reply buffer being filled. */
struct rdctx {
	fuse_req_t req;
	struct mount *m;
	struct dirhandle *dh;
	bool plus;
	bool uncached;	 /* the cache does not cover this read */
	bool refetched;	 /* its listing fetched again for fresh attributes */
	size_t size;	 /* the kernel's buffer */
	size_t pos;	 /* bytes filled */
	uint64_t cookie; /* last entry placed */
	uint64_t fetched_after;
	char *buf;
	uint64_t *refs; /* readdirplus: lookups handed out */
	size_t nrefs, cap;
};

/*
 * Add one entry; false when it did not fit. With attributes (@attr,
 * fetched at @attr_at, good for @attr_left s more) a readdirplus entry
 * hands the kernel a lookup.
 */
static bool add_entry(struct rdctx *c, const char *name, uint64_t ino,
		      uint8_t type, const Sweepfs__Attr *attr, int64_t attr_at,
		      double attr_left, uint64_t next_off)
{
	struct mount *m = c->m;
	size_t room = c->size - c->pos, need;

	if (c->plus) {
		struct fuse_entry_param e;

		if (attr) {
			double t =
				deleg_entry_timeout(m->deleg, c->dh->ino, name);

			mount_fill_entry(m, c->dh->ino, attr, attr_at, &e);
			e.attr_timeout = attr_left;
			if (S_ISDIR(attr->mode))
				deleg_note_dir(m->deleg, c->dh->ino, name,
					       attr->ino);
			if (t > 0)
				e.entry_timeout = t;
		} else {
			/* No attributes: a plain entry (ino 0 in the entry
			 * means "no lookup" to the kernel). */
			memset(&e, 0, sizeof(e));
			e.attr.st_ino = mount_to_fuse(m, ino);
			e.attr.st_mode = (mode_t)type << 12;
		}
		if (attr && sw_grow(&c->refs, &c->cap, c->nrefs + 1,
				    sizeof(*c->refs), 64) < 0)
			return false;
		need = fuse_add_direntry_plus(c->req, c->buf + c->pos, room,
					      name, &e, (off_t)next_off);
		if (need > room)
			return false;
		if (attr) {
			itable_ref(&m->inodes, attr->ino, attr->handle);
			c->refs[c->nrefs++] = attr->ino;
		}
	} else {
		struct stat st = { .st_ino = mount_to_fuse(m, ino),
				   .st_mode = (mode_t)type << 12 };

		need = fuse_add_direntry(c->req, c->buf + c->pos, room, name,
					 &st, (off_t)next_off);
		if (need > room)
			return false;
	}
	c->pos += need;
	return true;
}

static void rd_finish(struct rdctx *c, int rc)
{
	struct mount *m = c->m;
	int err;

	pthread_mutex_lock(&c->dh->mu);
	c->dh->busy = false;
	pthread_cond_signal(&c->dh->idle);
	pthread_mutex_unlock(&c->dh->mu);
	/* What was gathered before an error is answered, as a short page. */
	err = rc < 0 && c->pos == 0 ? rc : 0;
	if (reply_data(c->req, err, c->buf, c->pos) < 0 && !err)
		for (size_t k = 0; k < c->nrefs; k++)
			itable_forget(&m->inodes, c->refs[k], 1);
	free(c->refs);
	free(c->buf);
	free(c);
}

static void rd_fetch(struct rdctx *c, uint64_t after);

/* Fill from the handle's page from entry @i on; fetch when it runs out. */
static void rd_fill_page(struct rdctx *c, int64_t i)
{
	struct dirhandle *dh = c->dh;

	for (; i < dh->n; i++) {
		struct hentry *d = &dh->ents[i];
		Sweepfs__Attr a;
		int64_t at = dh->fetched_at;
		double left = 0;

		/* As old as the page, which a later read may reuse: newer
		 * ones of the inode table's, or expired, as the cache's. */
		if (d->attr) {
			a = *d->attr;
			if (!mount_fresher_attr(c->m, &a, &at))
				left = mount_attr_left(c->m, at);
		}
		if (!add_entry(c, d->name, d->ino, d->type, d->attr ? &a : NULL,
			       at, left, d->cookie)) {
			rd_finish(c, 0);
			return;
		}
		c->cookie = d->cookie;
	}
	if (dh->eof || dh->n == 0)
		rd_finish(c, 0);
	else
		rd_fetch(c, c->cookie);
}

/* Fill from the cached listing; fetch into it when it runs out. */
static void rd_fill_cache(struct rdctx *c)
{
	struct dc_entry *ents = malloc(BATCH * sizeof(*ents));
	enum dc_state state = DC_MISS;
	uint64_t fetch_after = 0;

	if (!ents) {
		rd_finish(c, -ENOMEM);
		return;
	}
	for (;;) {
		size_t n = dircache_read(c->m->dcache, c->dh->ino, c->cookie,
					 ents, BATCH, &state, &fetch_after);

		for (size_t i = 0; i < n; i++) {
			struct dc_entry *e = &ents[i];
			double left = 0;

			if (e->has_attr &&
			    !mount_fresher_attr(c->m, &e->attr, &e->attr_at))
				left = mount_attr_left(c->m, e->attr_at);
			/*
			 * Attributes past attr_timeout would overwrite newer
			 * ones the kernel has (a chown's); entries without
			 * them cost the kernel a lookup each. So the listing
			 * is fetched again from here, once, with fresh ones.
			 * Not in a held directory: nobody else changes what
			 * is in it, and mount_fresher_attr() took this
			 * mount's own newer ones; they go to the kernel as
			 * expired (as lookup_cached() hands them out), and
			 * the listing stays whole for the removals that
			 * follow (rm -rf reads a big directory 100,000 names
			 * at a time, long after the first page came). Once a
			 * read: with attr_timeout=0 (or shorter than a fetch
			 * takes) the fresh ones are past it too, and a read
			 * from the start fetched the listing again forever.
			 */
			if (c->plus && e->has_attr && !c->refetched &&
			    left <= 0 && !deleg_held(c->m->deleg, c->dh->ino)) {
				free(ents);
				if (c->pos) {
					rd_finish(c, 0); /* what we have */
					return;
				}
				dircache_drop(c->m->dcache, c->dh->ino);
				/* From the start, the fresh listing is cached
				 * anew; from the middle it cannot be. */
				c->refetched = true;
				c->uncached = c->cookie != 0;
				rd_fetch(c, c->cookie);
				return;
			}
			if (!add_entry(c, e->name, e->ino, e->type,
				       e->has_attr ? &e->attr : NULL,
				       e->attr_at, left, e->cookie)) {
				free(ents);
				rd_finish(c, 0);
				return;
			}
			c->cookie = e->cookie;
		}
		if (state != DC_MORE)
			break;
	}
	free(ents);
	switch (state) {
	case DC_EOF:
		rd_finish(c, 0);
		break;
	case DC_FETCH:
		rd_fetch(c, fetch_after);
		break;
	default:
		/*
		 * Not cached. A read from the start fetches into a new
		 * cached listing (the master watches the directory for this
		 * session from that READDIR on, and its replies and
		 * invalidations arrive in order); one from the middle is
		 * served from the handle's own pages.
		 */
		c->uncached = c->cookie != 0;
		rd_fetch(c, c->cookie);
	}
}

static void rd_fetched(void *arg, int rc, ProtobufCMessage **reply)
{
	struct rdctx *c = arg;
	uint64_t after = c->fetched_after;

	if (rc < 0) {
		rd_finish(c, rc);
		return;
	}
	if (!c->uncached && dircache_append(c->m->dcache, c->dh->ino, after,
					    (Sweepfs__ReaddirReply *)*reply)) {
		rd_fill_cache(c);
		return;
	}
	/* The cache would not take it: serve this read from the page. */
	c->uncached = true;
	rc = dh_install(c->dh, *reply, after, c->plus);
	*reply = NULL; /* the handle owns it (or it was freed) */
	if (rc < 0)
		rd_finish(c, rc);
	else
		rd_fill_page(c, page_from(c->dh, c->cookie));
}

static void rd_fetch(struct rdctx *c, uint64_t after)
{
	struct mount *m = c->m;
	Sweepfs__ReaddirReq q = SWEEPFS__READDIR_REQ__INIT;
	Sweepfs__Cred cred;
	uint32_t groups[CRED_GROUPS_MAX];

	cred_fill(c->req, &cred, groups, CRED_GROUPS_MAX);
	c->fetched_after = after;
	q.cred = &cred;
	q.ino = c->dh->ino;
	q.cookie = after;
	q.max_entries = PAGE_ENTRIES;
	q.max_bytes = PAGE_BYTES;
	/* A listing the kernel reads plainly travels without attributes. */
	q.has_plus = c->plus;
	q.plus = c->plus;
	mconn_send(m->mc, SW_MSG_READDIR, &q.base, rd_fetched, c);
}

int readdir_read(struct mount *m, fuse_req_t req, size_t size, off_t off,
		 struct fuse_file_info *fi, bool plus)
{
	struct dirhandle *dh = (struct dirhandle *)(uintptr_t)fi->fh;
	struct rdctx *c = calloc(1, sizeof(*c));
	fuse_ino_t self;
	int64_t i;

	if (c)
		c->buf = malloc(size);
	if (!c || !c->buf) {
		free(c);
		return -ENOMEM;
	}
	c->req = req;
	c->m = m;
	c->dh = dh;
	c->plus = plus;
	c->size = size;
	devpoll_yield();
	pthread_mutex_lock(&dh->mu);
	while (dh->busy)
		pthread_cond_wait(&dh->idle, &dh->mu);
	dh->busy = true;
	pthread_mutex_unlock(&dh->mu);
	self = mount_to_fuse(m, dh->ino);
	if (off == 0 && !add_entry(c, ".", self, DT_DIR, NULL, 0, 0, 1)) {
		rd_finish(c, 0);
		return 0;
	}
	if (off <= 1 && !add_entry(c, "..", self, DT_DIR, NULL, 0, 0, 2)) {
		rd_finish(c, 0);
		return 0;
	}
	c->cookie = off <= 2 ? 0 : (uint64_t)off;
	/* A read that continues the handle's own page stays on it. */
	i = dh->plus == plus ? page_after(dh, c->cookie) : -1;
	if (i >= 0 && (i > 0 || c->cookie != 0)) {
		c->uncached = true;
		rd_fill_page(c, i);
		return 0;
	}
	/*
	 * The cache serves this read. A page of the handle's own, from an
	 * earlier stretch read around the cache, is older than it: were a
	 * later read to land on one of its cookies, it would go on from
	 * there, and its end-of-directory would hide what was created
	 * since (telldir.sh caught 30 new names missing after rewinddir).
	 */
	dh_clear(dh);
	rd_fill_cache(c);
	return 0;
}

static void dh_link(struct mount *m, struct dirhandle *dh)
{
	pthread_mutex_lock(&m->dirs_mu);
	dh->next = m->dirs;
	if (m->dirs)
		m->dirs->prev = dh;
	m->dirs = dh;
	pthread_mutex_unlock(&m->dirs_mu);
}

static void dh_free(struct mount *m, struct dirhandle *dh)
{
	pthread_mutex_lock(&m->dirs_mu);
	if (dh->prev)
		dh->prev->next = dh->next;
	else
		m->dirs = dh->next;
	if (dh->next)
		dh->next->prev = dh->prev;
	pthread_mutex_unlock(&m->dirs_mu);
	dh_clear(dh);
	pthread_mutex_destroy(&dh->mu);
	pthread_cond_destroy(&dh->idle);
	free(dh);
}

static void opendir_done(void *arg, int rc, ProtobufCMessage **reply)
{
	struct mount_opctx *c = arg;
	struct mount *m = fuse_req_userdata(c->req);
	struct dirhandle *dh;

	if (rc < 0) {
		reply_opened(c->req, rc, NULL);
		goto out;
	}
	dh = calloc(1, sizeof(*dh));
	if (!dh) {
		reply_opened(c->req, -ENOMEM, NULL);
		goto out;
	}
	pthread_mutex_init(&dh->mu, NULL);
	pthread_cond_init(&dh->idle, NULL);
	dh->ino = c->ino;
	dh->after = UINT64_MAX; /* no page yet */
	c->fi.fh = (uintptr_t)dh;
	/* Listed first: the kernel may release it as soon as it has it. */
	dh_link(m, dh);
	if (reply_opened(c->req, 0, &c->fi) < 0)
		dh_free(m, dh);
out:
	free(c);
}

int readdir_open(struct mount *m, fuse_req_t req, uint64_t ino,
		 struct fuse_file_info *fi)
{
	struct mount_opctx *c = calloc(1, sizeof(*c));
	Sweepfs__OpenReq q = SWEEPFS__OPEN_REQ__INIT;
	Sweepfs__Cred cred;
	uint32_t groups[CRED_GROUPS_MAX];

	if (!c)
		return -ENOMEM;
	c->req = req;
	c->ino = ino;
	c->fi = *fi;
	/* The master checks read permission; nothing is held open there. */
	cred_fill(req, &cred, groups, CRED_GROUPS_MAX);
	q.cred = &cred;
	q.ino = ino;
	q.flags = O_RDONLY | O_DIRECTORY;
	/* Its answer comes before the open's: the listing then knows. */
	deleg_want(m->deleg, ino);
	mconn_send(m->mc, SW_MSG_OPEN, &q.base, opendir_done, c);
	return 0;
}

void readdir_release(struct mount *m, struct fuse_file_info *fi)
{
	dh_free(m, (struct dirhandle *)(uintptr_t)fi->fh);
}

void readdir_release_all(struct mount *m)
{
	while (m->dirs)
		dh_free(m, m->dirs);
}
