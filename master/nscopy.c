/*
 * Snapshots, namespace side: an atomic copy of a tree, metadata only.
 * Files of the copy share their chunks with the original (reference
 * counts); data is copied only when one side writes a shared chunk
 * (dataops.c duplicates it first).
 *
 * A copy is made from an image of the source tree: a stream of records,
 * one per node, depth first,
 *
 *   'N' name flags attributes payload xattrs   a node; a directory's
 *                                               entries follow it ...
 *   'U'                                         ... up to this
 *   'E'                                         the end
 *
 * (the first 'N' is the tree's root and has no name). The image is taken
 * at one instant: by the loop itself for a small tree, or by a forked
 * child for a big one, which sees the namespace exactly as it was at the
 * fork however the loop changes it meanwhile (snapshot.c). The loop feeds
 * the records to ns_copy_part() a slice at a time, journaling each slice
 * as it goes, so replay makes exactly the same copy: inode numbers and
 * edge ids come from bases each slice's record carries.
 *
 * Until ns_copy_end() names it, the copy hangs from no directory, which
 * makes its directories ns_detached(): no request can change them. A
 * copy that cannot be finished is given to the purge.
 *
 * Chunks: the image names the chunks files had at the instant it was
 * taken. While a copy is under way, a chunk older than the copy that
 * loses its last reference is held (kept with no reference) instead of
 * freed, so that the copy can still take it; the data path does not
 * write in place into such chunks (ns_chunk_frozen()). ns_copy_end()
 * frees the held chunks that the copy did not take. Each chunk a file of
 * the copy takes is told to ns->chunk_shared(): a writer holding a lease
 * on it from before must not go on writing it in place.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsio.h"
#include "buf.h"
#include "frame.h"
#include "hash.h"
#include "namespace.h"
#include "namespace_i.h"
#include "util.h"

#define TARGET_MAX 4096u     /* symlink target bytes */
#define SLOTS_MAX (1u << 21) /* chunk slots: 2^47 bytes of file */

/* Fixed part of an 'N' record after its name. */
#define NODE_FIXED (1 + 4 + 4 + 4 + 8 + 8 + 8 + 8 + 8)

/* A node with more than one name: source inode -> its copy. */
struct link {
	uint64_t key;
	struct node *to;
};

struct ns_copy {
	uint64_t id;
	uint64_t parent; /* directory the copy gets its name in */
	uint8_t len;
	char name[SW_NAME_MAX];
	struct node *root;  /* NULL until the first record */
	struct node **path; /* directories open in the stream */
	size_t depth, path_cap;
	struct htab links; /* struct link by key */
	uint64_t nodes;
	bool ended;	/* saw 'E' */
	int err;	/* the first error; the rest is ignored */
	uint64_t *held; /* chunks kept for the copy (see above) */
	size_t nheld, held_cap;
};

static uint64_t link_hash(const void *e)
{
	return sw_hash_u64(((const struct link *)e)->key);
}

static bool link_eq(const void *e, const void *key)
{
	return ((const struct link *)e)->key == *(const uint64_t *)key;
}

static int free_link(void *e, void *arg)
{
	(void)arg;
	free(e);
	return 0;
}

/* ---- the image ------------------------------------------------------ */

struct img {
	struct sw_buf *buf; /* into memory, or ... */
	int fd;		    /* ... to this descriptor */
	uint8_t out[1 << 16];
	size_t n;
	int err;
};

static void img_flush(struct img *w)
{
	size_t off = 0;

	while (off < w->n && !w->err) {
		ssize_t got = write(w->fd, w->out + off, w->n - off);

		if (got < 0 && errno != EINTR)
			w->err = -errno;
		else if (got > 0)
			off += (size_t)got;
	}
	w->n = 0;
}

static void img_put(struct img *w, const void *p, size_t len)
{
	if (w->err)
		return;
	if (w->buf) {
		w->err = sw_buf_add(w->buf, p, len);
		return;
	}
	while (len) {
		size_t take = SW_MIN(len, sizeof(w->out) - w->n);

		memcpy(w->out + w->n, p, take);
		w->n += take;
		p = (const uint8_t *)p + take;
		len -= take;
		if (w->n == sizeof(w->out))
			img_flush(w);
	}
}

static void img_u8(struct img *w, uint8_t v)
{
	img_put(w, &v, 1);
}

static void img_u16(struct img *w, uint16_t v)
{
	uint8_t b[2] = { (uint8_t)v, (uint8_t)(v >> 8) };

	img_put(w, b, 2);
}

static void img_u32(struct img *w, uint32_t v)
{
	uint8_t b[4];

	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	img_put(w, b, 4);
}

static void img_u64(struct img *w, uint64_t v)
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	img_put(w, b, 8);
}

static int count_xattr(const void *name, size_t nlen, const void *value,
		       size_t vlen, void *arg)
{
	(void)name, (void)nlen, (void)value, (void)vlen;
	++*(uint32_t *)arg;
	return 0;
}

static int put_xattr(const void *name, size_t nlen, const void *value,
		     size_t vlen, void *arg)
{
	struct img *w = arg;

	img_u8(w, (uint8_t)nlen);
	img_u32(w, (uint32_t)vlen);
	img_put(w, name, nlen);
	img_put(w, value, vlen);
	return 0;
}

static void img_node(struct img *w, const struct ns *ns, const struct node *n,
		     const char *name, uint8_t namelen, uint8_t eflags)
{
	uint32_t nx = 0;

	img_u8(w, 'N');
	img_u8(w, namelen);
	img_put(w, name, namelen);
	/* The name's flag, and the node's goal in the high bits. */
	img_u8(w, (uint8_t)((eflags & EDGE_SNAPSHOT) | (ns_goal(n) << 4)));
	img_u32(w, n->mode);
	img_u32(w, n->uid);
	img_u32(w, n->gid);
	img_u64(w, (uint64_t)n->atime);
	img_u64(w, (uint64_t)n->mtime);
	img_u64(w, (uint64_t)n->ctime);
	img_u64(w, n->size);
	img_u64(w, !S_ISDIR(n->mode) && n->nlink > 1 ? n->ino : 0);
	if (S_ISDIR(n->mode)) {
		img_u32(w, n->u.dir->trashtime);
	} else if (S_ISLNK(n->mode)) {
		img_put(w, n->u.target, (size_t)n->size);
	} else if (S_ISCHR(n->mode) || S_ISBLK(n->mode)) {
		img_u64(w, n->u.rdev);
	} else if (S_ISREG(n->mode)) {
		uint32_t slots = ns_chunk_slots(n);

		img_u32(w, slots);
		for (uint32_t i = 0; i < slots; i++)
			img_u64(w, ns_chunk_at(n, i));
	}
	if (n->flags & NODE_XATTR)
		ns_xattr_foreach(ns, n, count_xattr, &nx);
	img_u16(w, (uint16_t)nx);
	if (nx)
		ns_xattr_foreach(ns, n, put_xattr, w);
}

/* The tree at @src, depth first, entries in edge order. */
static int img_tree(struct img *w, const struct ns *ns, const struct node *src)
{
	const struct edge **stack = NULL, *e = NULL;
	const struct node *d = src;
	size_t depth = 0, cap = 0;
	uint64_t below; /* d's names below this id are flagged (marks) */

	img_node(w, ns, src, "", 0, 0);
	if (!S_ISDIR(src->mode))
		goto out;
	below = ns_snap_below(ns, d);
	for (;;) {
		e = e ? e->next : d->u.dir->head;
		while (e && !e->child)
			e = e->next;
		if (!e) {
			img_u8(w, 'U');
			if (depth == 0)
				break;
			e = stack[--depth];
			d = d->u.dir->parent;
			below = ns_snap_below(ns, d);
			continue;
		}
		img_node(w, ns, e->child, e->name, e->namelen,
			 e->flags | (e->id < below ? EDGE_SNAPSHOT : 0));
		if (!S_ISDIR(e->child->mode))
			continue;
		if (sw_grow(&stack, &cap, depth + 1, sizeof(*stack), 64) < 0) {
			w->err = -ENOMEM;
			break;
		}
		stack[depth++] = e;
		d = e->child;
		below = ns_snap_below(ns, d);
		e = NULL;
	}
out:
	img_u8(w, 'E');
	free(stack);
	return w->err;
}

int ns_copy_image(const struct ns *ns, const struct node *src,
		  struct sw_buf *out)
{
	struct img *w = malloc(sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	w->buf = out;
	w->fd = -1;
	w->n = 0;
	w->err = 0;
	rc = img_tree(w, ns, src);
	free(w);
	return rc;
}

int ns_copy_write(const struct ns *ns, const struct node *src, int fd)
{
	struct img *w = malloc(sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	w->buf = NULL;
	w->fd = fd;
	w->n = 0;
	w->err = 0;
	rc = img_tree(w, ns, src);
	if (rc == 0) {
		img_flush(w);
		rc = w->err;
	}
	free(w);
	return rc;
}

/* ---- reading records -------------------------------------------------- */

struct rd {
	const uint8_t *p;
	size_t left;
};

static bool rd_take(struct rd *r, void *out, size_t n)
{
	if (r->left < n)
		return false;
	if (out)
		memcpy(out, r->p, n);
	r->p += n;
	r->left -= n;
	return true;
}

static bool rd_uint(struct rd *r, int bytes, uint64_t *v)
{
	uint8_t b[8];

	if (!rd_take(r, b, (size_t)bytes))
		return false;
	*v = 0;
	for (int i = 0; i < bytes; i++)
		*v |= (uint64_t)b[i] << (8 * i);
	return true;
}

/* An 'N' record, decoded; pointers into the stream. */
struct rec {
	const char *name;
	uint8_t namelen;
	uint8_t eflags;
	uint8_t goal;
	struct node tmpl; /* attributes; ino, nlink, flags, u unset */
	uint64_t key;
	uint32_t trashtime;
	const char *target;
	uint64_t rdev;
	uint32_t nslots;
	const uint8_t *slots; /* nslots little-endian ids */
	uint32_t nxattrs;
	const uint8_t *xattrs; /* nxattrs x (u8 nlen, u32 vlen, name, value) */
};

/*
 * Decode the 'N' record after its type byte: 0, -EAGAIN when the bytes
 * end first, -EUCLEAN when it is malformed.
 */
static int rd_node(struct rd *r, struct rec *x)
{
	uint64_t v[9];
	uint8_t hdr[NODE_FIXED];
	struct rd h;

	memset(x, 0, sizeof(*x));
	if (!rd_uint(r, 1, &v[0]))
		return -EAGAIN;
	x->namelen = (uint8_t)v[0];
	x->name = (const char *)r->p;
	if (!rd_take(r, NULL, x->namelen) || !rd_take(r, hdr, sizeof(hdr)))
		return -EAGAIN;
	h.p = hdr;
	h.left = sizeof(hdr);
	rd_uint(&h, 1, &v[0]);
	rd_uint(&h, 4, &v[1]);
	rd_uint(&h, 4, &v[2]);
	rd_uint(&h, 4, &v[3]);
	for (int i = 4; i < 9; i++)
		rd_uint(&h, 8, &v[i]);
	x->eflags = (uint8_t)(v[0] & EDGE_SNAPSHOT);
	x->goal = (uint8_t)(v[0] >> 4);
	if (x->goal > NS_GOAL_MAX)
		return -EUCLEAN;
	x->tmpl.mode = (uint32_t)v[1];
	x->tmpl.uid = (uint32_t)v[2];
	x->tmpl.gid = (uint32_t)v[3];
	x->tmpl.atime = (int64_t)v[4];
	x->tmpl.mtime = (int64_t)v[5];
	x->tmpl.ctime = (int64_t)v[6];
	x->tmpl.size = v[7];
	x->key = v[8];
	if (!nsi_type_valid(x->tmpl.mode))
		return -EUCLEAN;
	if (S_ISDIR(x->tmpl.mode)) {
		if (x->key)
			return -EUCLEAN;
		if (!rd_uint(r, 4, &v[0]))
			return -EAGAIN;
		x->trashtime = (uint32_t)v[0];
		x->tmpl.size = 0;
	} else if (S_ISLNK(x->tmpl.mode)) {
		x->target = (const char *)r->p;
		if (x->tmpl.size > TARGET_MAX)
			return -EUCLEAN;
		if (!rd_take(r, NULL, (size_t)x->tmpl.size))
			return -EAGAIN;
	} else if (S_ISCHR(x->tmpl.mode) || S_ISBLK(x->tmpl.mode)) {
		if (!rd_uint(r, 8, &x->rdev))
			return -EAGAIN;
	} else if (S_ISREG(x->tmpl.mode)) {
		if (!rd_uint(r, 4, &v[0]))
			return -EAGAIN;
		if (v[0] > SLOTS_MAX)
			return -EUCLEAN;
		x->nslots = (uint32_t)v[0];
		x->slots = r->p;
		if (!rd_take(r, NULL, (size_t)x->nslots * 8))
			return -EAGAIN;
	}
	if (!rd_uint(r, 2, &v[0]))
		return -EAGAIN;
	x->nxattrs = (uint32_t)v[0];
	x->xattrs = r->p;
	for (uint32_t i = 0; i < x->nxattrs; i++) {
		uint64_t nlen, vlen;

		if (!rd_uint(r, 1, &nlen) || !rd_uint(r, 4, &vlen))
			return -EAGAIN;
		if (nlen == 0 || vlen > SW_XATTR_SIZE_MAX)
			return -EUCLEAN;
		if (!rd_take(r, NULL, (size_t)(nlen + vlen)))
			return -EAGAIN;
	}
	return 0;
}

ssize_t ns_copy_record(const uint8_t *p, size_t len)
{
	struct rd r = { p, len };
	struct rec x;
	int rc;

	if (len == 0)
		return 0;
	switch (p[0]) {
	case 'U':
	case 'E':
		return 1;
	case 'N':
		rd_take(&r, NULL, 1);
		rc = rd_node(&r, &x);
		if (rc < 0)
			return rc == -EAGAIN ? 0 : rc;
		return (ssize_t)(len - r.left);
	default:
		return -EUCLEAN;
	}
}

/* ---- applying records ------------------------------------------------- */

int ns_copy_begin(struct ns *ns, uint64_t id, uint64_t parent, const char *name,
		  size_t len, uint64_t chunk_start)
{
	struct ns_copy *c;

	if (ns->copy)
		return -EBUSY;
	if (len == 0 || len > SW_NAME_MAX)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->id = id;
	c->parent = parent;
	c->len = (uint8_t)len;
	memcpy(c->name, name, len);
	htab_init(&c->links, link_hash);
	ns->copy = c;
	ns->copy_chunk_start = chunk_start;
	return 0;
}

bool ns_copy_active(const struct ns *ns, uint64_t *id)
{
	if (ns->copy && id)
		*id = ns->copy->id;
	return ns->copy != NULL;
}

int ns_copy_hold(struct ns *ns, uint64_t chunk)
{
	struct ns_copy *c = ns->copy;

	if (sw_grow(&c->held, &c->held_cap, c->nheld + 1, sizeof(*c->held),
		    256) < 0) {
		/* Freed after all: the copy cannot take it. */
		if (!c->err)
			c->err = -ENOMEM;
		return -ENOMEM;
	}
	c->held[c->nheld++] = chunk;
	return 0;
}

static int push(struct node ***v, size_t *n, size_t *cap, struct node *d)
{
	if (sw_grow(v, cap, *n + 1, sizeof(**v), 64) < 0)
		return -ENOMEM;
	(*v)[(*n)++] = d;
	return 0;
}

static int add_xattrs(struct ns *ns, struct node *n, const struct rec *x)
{
	struct rd r = { x->xattrs, SIZE_MAX };

	for (uint32_t i = 0; i < x->nxattrs; i++) {
		uint64_t nlen = 0, vlen = 0;
		const uint8_t *name;
		int rc;

		rd_uint(&r, 1, &nlen);
		rd_uint(&r, 4, &vlen);
		name = r.p;
		rd_take(&r, NULL, (size_t)(nlen + vlen));
		rc = ns_xattr_set(ns, n, name, (size_t)nlen, name + nlen,
				  (size_t)vlen, n->ctime);
		if (rc < 0)
			return rc;
	}
	if (x->nxattrs)
		n->ctime = x->tmpl.ctime; /* ns_xattr_set() set it */
	return 0;
}

static int add_slots(struct ns *ns, struct node *n, const struct rec *x)
{
	uint64_t *ids;
	bool any = false;
	int rc;

	if (x->nslots == 0)
		return 0;
	ids = malloc((size_t)x->nslots * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	for (uint32_t i = 0; i < x->nslots; i++) {
		struct rd r = { x->slots + 8 * (size_t)i, 8 };

		rd_uint(&r, 8, &ids[i]);
		any |= ids[i] != 0;
	}
	rc = any ? ns_load_slots(ns, n, x->nslots, ids) : 0;
	for (uint32_t i = 0; rc == 0 && ns->chunk_shared && i < x->nslots; i++)
		if (ids[i])
			ns->chunk_shared(ns->hook_arg, chunk_get(ns, ids[i]));
	free(ids);
	return rc;
}

/* Make the node of record @x, numbered @ino. */
static int make_node(struct ns *ns, struct ns_copy *c, const struct rec *x,
		     uint64_t ino, struct node **out)
{
	struct node tmpl = x->tmpl, *n;
	int rc;

	tmpl.ino = ino;
	tmpl.nlink = 1;
	tmpl.flags = (uint16_t)(x->goal << NODE_GOAL_SHIFT);
	if (S_ISCHR(tmpl.mode) || S_ISBLK(tmpl.mode))
		tmpl.u.rdev = x->rdev;
	rc = ns_load_node(ns, &tmpl, x->target, &n);
	if (rc < 0)
		return rc;
	if (S_ISDIR(n->mode)) {
		n->u.dir->trashtime = x->trashtime;
	} else if (S_ISREG(n->mode)) {
		rc = add_slots(ns, n, x);
	}
	if (rc == 0)
		rc = add_xattrs(ns, n, x);
	if (rc < 0) {
		nsi_node_free(ns, n);
		return rc;
	}
	c->nodes++;
	ns->copied++;
	*out = n;
	return 0;
}

/* One 'N' record: the root, a new node, or another name of a node. */
static int apply_node(struct ns *ns, struct ns_copy *c, const struct rec *x,
		      uint64_t *ino, uint64_t *edge)
{
	struct node *dir, *n = NULL;
	struct link *l = NULL;
	int rc;

	if (!c->root) {
		if (x->namelen)
			return -EUCLEAN;
		rc = make_node(ns, c, x, (*ino)++, &n);
		if (rc < 0)
			return rc;
		c->root = n;
		return S_ISDIR(n->mode) ?
			       push(&c->path, &c->depth, &c->path_cap, n) :
			       0;
	}
	if (c->depth == 0 || x->namelen == 0 ||
	    !sw_name_valid((const uint8_t *)x->name, x->namelen))
		return -EUCLEAN;
	dir = c->path[c->depth - 1];
	if (x->key) {
		l = htab_find(&c->links, sw_hash_u64(x->key), link_eq, &x->key);
		if (l) {
			n = l->to;
			if (n->nlink >= NS_LINK_MAX)
				return -EMLINK;
			rc = ns_load_edge(ns, dir, n, x->name, x->namelen,
					  (*edge)++, x->eflags);
			if (rc == 0)
				n->nlink++;
			return rc;
		}
		l = malloc(sizeof(*l));
		if (!l)
			return -ENOMEM;
	}
	rc = make_node(ns, c, x, (*ino)++, &n);
	if (rc == 0) {
		rc = ns_load_edge(ns, dir, n, x->name, x->namelen, (*edge)++,
				  x->eflags);
		if (rc < 0) {
			c->nodes--;
			nsi_node_free(ns, n);
		}
	}
	if (rc == 0 && l) {
		l->key = x->key;
		l->to = n;
		rc = htab_insert(&c->links, sw_hash_u64(x->key), l);
		if (rc == 0)
			l = NULL;
		/* else: later names of it become copies of their own */
		rc = 0;
	}
	free(l);
	if (rc == 0 && S_ISDIR(n->mode))
		rc = push(&c->path, &c->depth, &c->path_cap, n);
	return rc;
}

int ns_copy_part(struct ns *ns, uint64_t id, const uint8_t *data, size_t len,
		 uint64_t ino_base, uint64_t edge_base)
{
	struct ns_copy *c = ns->copy;
	struct rd r = { data, len };
	uint64_t ino = ino_base, edge = edge_base;
	int rc = 0;

	if (!c || c->id != id)
		return -ENOENT;
	while (r.left && !c->err) {
		uint8_t type = 0;
		struct rec x;

		rd_take(&r, &type, 1);
		if (c->ended) {
			rc = -EUCLEAN;
		} else if (type == 'N') {
			rc = rd_node(&r, &x);
			if (rc == -EAGAIN)
				rc = -EUCLEAN; /* a part holds whole records */
			if (rc == 0)
				rc = apply_node(ns, c, &x, &ino, &edge);
		} else if (type == 'U') {
			rc = c->depth ? 0 : -EUCLEAN;
			if (rc == 0)
				c->depth--;
		} else if (type == 'E') {
			rc = c->depth || !c->root ? -EUCLEAN : 0;
			c->ended = true;
		} else {
			rc = -EUCLEAN;
		}
		if (rc < 0)
			c->err = rc;
	}
	nsi_note_ids(ns, ino - 1, edge - 1);
	return c->err;
}

struct node *ns_copy_root(const struct ns *ns)
{
	return ns->copy ? ns->copy->root : NULL;
}

size_t ns_copy_held(const struct ns *ns, const uint64_t **ids)
{
	*ids = ns->copy ? ns->copy->held : NULL;
	return ns->copy ? ns->copy->nheld : 0;
}

uint64_t ns_copy_nodes(const struct ns *ns)
{
	return ns->copy ? ns->copy->nodes : 0;
}

/* The copy cannot be named: a tree goes to the purge, a file is freed. */
static void discard(struct ns *ns, struct ns_copy *c)
{
	if (!c->root)
		return;
	if (!S_ISDIR(c->root->mode)) {
		nsi_node_free(ns, c->root);
		return;
	}
	c->root->flags |= NODE_DETACHED;
	if (nsi_purge_add(ns, c->root, c->id, c->nodes) < 0) {
		/* Out of memory: leaked until the next restart, where the
		 * checkpoint has it as a directory without a parent. */
	}
}

static void copy_free(struct ns_copy *c)
{
	htab_foreach(&c->links, free_link, NULL);
	htab_release(&c->links);
	free(c->held);
	free(c->path);
	free(c);
}

int64_t ns_copy_end(struct ns *ns, uint64_t id, uint64_t edge, int abort_rc,
		    int64_t now, uint64_t *ino)
{
	struct ns_copy *c = ns->copy;
	struct node *dir;
	int64_t rc = abort_rc;

	if (!c || c->id != id)
		return -ENOENT;
	dir = ns_get(ns, c->parent);
	if (rc == 0)
		rc = c->err;
	if (rc == 0 && !c->ended)
		rc = -EUCLEAN;
	if (rc == 0 && (!dir || !S_ISDIR(dir->mode) || ns_detached(dir)))
		rc = -ENOENT;
	if (rc == 0 && ns_lookup(ns, dir, c->name, c->len))
		rc = -EEXIST;
	/* Its names may be older than a mark over @dir (nsattr.c). */
	if (rc == 0 && S_ISDIR(c->root->mode) && ns->nsnapmarks)
		rc = nsi_snap_moving(ns, c->root, NULL, dir);
	if (rc == 0) {
		rc = ns_load_edge(ns, dir, c->root, c->name, c->len, edge, 0);
		if (rc == 0) {
			dir->mtime = dir->ctime = now;
			if (ino)
				*ino = c->root->ino;
			rc = (int64_t)c->nodes;
		}
	}
	if (rc < 0)
		discard(ns, c);
	ns->copy_last_rc = rc;
	ns->copy_last_ino = rc >= 0 ? c->root->ino : 0;
	ns->copy = NULL;
	ns->copy_chunk_start = 0;
	/* Chunks held for the copy and not taken by it go now. */
	for (size_t i = 0; i < c->nheld; i++)
		ns_chunk_unhold(ns, c->held[i]);
	copy_free(c);
	return rc;
}

void ns_copy_release(struct ns *ns)
{
	if (ns->copy)
		copy_free(ns->copy);
	ns->copy = NULL;
	ns->copy_chunk_start = 0;
}
