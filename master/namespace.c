/*
 * The namespace in memory.
 *
 * Layout and cost per file (64-byte node + 36-byte edge header + name, all
 * from slabs, plus one slot in the inode table and, in a big directory, one
 * in its name table; slots are 8 bytes at a load of 3/8..3/4): about
 * 64 + 48 + 2 * 8 / 0.55 = 141 bytes for a 12-byte name. See bench/.
 *
 * A directory keeps its edges twice:
 *  - a doubly linked list in edge-id order. Ids come from one global
 *    counter, so appending keeps the order and readdir is a list walk;
 *  - a hash table by name (struct htab), but only once it has more than
 *    NS_DIR_HASH_MIN entries: small directories are scanned.
 * Plus a sparse index, every NS_INDEX_STRIDE-th edge in id order, so that a
 * cookie that no cursor remembers is found by binary search and a short
 * walk. The index never grows gaps: when an indexed edge goes, its slot
 * moves to the next live edge in the same gap, or disappears when the gap
 * is empty.
 *
 * Tombstones: a cursor pins the edge it rests on. Unlinking a pinned edge
 * removes it from the name table and the index but leaves it in the list
 * with child == NULL; the last unpin frees it. Freeing a directory frees
 * its tombstones and unsets the cursors resting there.
 *
 * Atomicity: every operation makes all allocations that can fail before
 * its first visible change, so a failure leaves nothing behind.
 *
 * Beside it, through namespace_i.h: nsattr.c (attributes, xattrs),
 * nscopy.c (snapshots), nstrash.c (trash), nspurge.c (the purge of
 * detached trees and the one tree walk), nsdigest.c (the digest),
 * nsload.c (loading a checkpoint).
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "chunks.h"
#include "fsio.h"
#include "hash.h"
#include "namespace.h"
#include "namespace_i.h"
#include "replies.h"
#include "trash.h"
#include "util.h"

#define EDGE_HDR offsetof(struct edge, name)

static_assert(sizeof(struct node) == 64, "struct node grew: see its comment");
static_assert(EDGE_HDR == 36, "struct edge header grew");

struct name_key {
	const char *name;
	size_t len;
};

static uint64_t node_hash(const void *elem)
{
	return sw_hash_u64(((const struct node *)elem)->ino);
}

static bool node_eq(const void *elem, const void *key)
{
	return ((const struct node *)elem)->ino == *(const uint64_t *)key;
}

static uint64_t xset_hash(const void *elem)
{
	return sw_hash_u64(((const struct xattr_set *)elem)->ino);
}

static uint64_t edge_hash(const void *elem)
{
	const struct edge *e = elem;

	return sw_hash_bytes(e->name, e->namelen);
}

static bool edge_eq(const void *elem, const void *key)
{
	const struct edge *e = elem;
	const struct name_key *k = key;

	return e->namelen == k->len && !memcmp(e->name, k->name, k->len);
}

static unsigned edge_class(size_t namelen)
{
	size_t size = (EDGE_HDR + namelen + 7) & ~(size_t)7;

	return size <= 40 ? 0 : (unsigned)((size - 40) / 8);
}

static struct edge *edge_new(struct ns *ns, const char *name, size_t len,
			     uint64_t id, struct node *child)
{
	struct edge *e = slab_alloc(&ns->edge_slab[edge_class(len)]);

	if (!e)
		return NULL;
	e->next = e->prev = NULL;
	e->child = child;
	e->id = id;
	e->pins = 0;
	e->flags = 0;
	e->namelen = (uint8_t)len;
	memcpy(e->name, name, len);
	return e;
}

static void edge_free(struct ns *ns, struct edge *e)
{
	slab_free(&ns->edge_slab[edge_class(e->namelen)], e);
}

/* ---- directories ---------------------------------------------------- */

static struct dir *dir_new(struct ns *ns, struct node *parent)
{
	struct dir *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->parent = parent;
	lct_init(&d->lct);
	htab_init(&d->names, edge_hash);
	ns->dir_bytes += sizeof(*d);
	return d;
}

static void list_unlink(struct dir *d, struct edge *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		d->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		d->tail = e->prev;
}

/* Build the name table of @d from its live edges. */
static int names_build(struct dir *d)
{
	for (struct edge *e = d->head; e; e = e->next) {
		int rc;

		if (!e->child)
			continue;
		rc = htab_insert(&d->names, edge_hash(e), e);
		if (rc < 0) {
			htab_release(&d->names);
			return rc;
		}
	}
	return 0;
}

/* The index's allocation (it may start past dropped slots); NULL when
 * there is none (no arithmetic on a null pointer). */
static struct edge **index_base(const struct dir *d)
{
	return d->index ? d->index - d->index_skip : NULL;
}

static void index_push(struct ns *ns, struct dir *d, struct edge *e)
{
	if (d->index_skip && d->index_skip + d->index_len == d->index_cap &&
	    d->index_skip >= d->index_len) {
		/* Half or more dropped from the front: slide back, paid for
		 * by the drops (O(1) each, amortized). */
		memmove(d->index - d->index_skip, d->index,
			d->index_len * sizeof(*d->index));
		d->index -= d->index_skip;
		d->index_skip = 0;
	}
	if (d->index_skip + d->index_len == d->index_cap) {
		uint32_t cap = d->index_cap ? d->index_cap * 2 : 8;
		struct edge **v = realloc(index_base(d), cap * sizeof(*v));

		if (!v)
			return; /* the index is an accelerator; go without */
		ns->dir_bytes += (cap - d->index_cap) * sizeof(*v);
		d->index = v + d->index_skip;
		d->index_cap = cap;
	}
	d->index[d->index_len++] = e;
	e->flags |= EDGE_INDEXED;
	d->since_index = 0;
}

/* Position of indexed edge @e in d->index. */
static uint32_t index_find(const struct dir *d, const struct edge *e)
{
	uint32_t lo = 0, hi = d->index_len;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (d->index[mid]->id < e->id)
			lo = mid + 1;
		else
			hi = mid;
	}
	assert(lo < d->index_len && d->index[lo] == e);
	return lo;
}

static void index_drop(struct dir *d, struct edge *e)
{
	uint32_t i = index_find(d, e);
	struct edge *next = ns_edge_live(e->next);

	e->flags &= (uint8_t)~EDGE_INDEXED;
	if (next && (i + 1 == d->index_len || d->index[i + 1] != next)) {
		d->index[i] = next;
		next->flags |= EDGE_INDEXED;
		return;
	}
	/* The front (rm -rf and RemoveAll remove in listing order): O(1),
	 * not a move of the whole index, which is N/64 long. */
	if (i == 0) {
		d->index++;
		d->index_skip++;
		d->index_len--;
		return;
	}
	memmove(&d->index[i], &d->index[i + 1],
		(d->index_len - i - 1) * sizeof(*d->index));
	d->index_len--;
}

/* @d's entry counts changed: tell the directory forest. */
static void counts_changed(struct dir *d)
{
	lct_set(&d->lct, d->nentries, d->nplain);
}

/*
 * Note that @d's name table is being resized (its inserts and removes
 * move it along; ns_housekeep() finishes it when they stop). A failed
 * allocation only leaves the old array for the directory's own changes
 * to drain.
 */
static void resizing_note(struct ns *ns, struct dir *d)
{
	for (size_t i = 0; i < ns->nresizing; i++)
		if (ns->resizing[i] == d)
			return;
	if (ns->nresizing == ns->resizing_cap) {
		size_t cap = ns->resizing_cap ? ns->resizing_cap * 2 : 8;
		struct dir **v = realloc(ns->resizing, cap * sizeof(*v));

		if (!v)
			return;
		ns->resizing = v;
		ns->resizing_cap = cap;
	}
	ns->resizing[ns->nresizing++] = d;
}

static void resizing_forget(struct ns *ns, const struct dir *d)
{
	for (size_t i = 0; i < ns->nresizing; i++)
		if (ns->resizing[i] == d) {
			ns->resizing[i] = ns->resizing[--ns->nresizing];
			return;
		}
}

/*
 * @n is now an entry of @dir. Every way in (create, link, rename, a
 * restore from the trash) goes through dir_add() or rename_exchange():
 * an entry of a delegated directory is marked as deleg.c marks those it
 * had, so that another session naming it by number recalls the holder.
 * A file marked by another delegation before may still be an entry of
 * that one too (a link; a rename looks the same here): it is marked as
 * everyone's.
 */
static void mark_deleg_in(const struct node *dir, struct node *n)
{
	uint16_t tag = dir->flags & NODE_DELEG_TAG;
	uint16_t old = n->flags & NODE_DELEG_TAG;

	if (!(dir->flags & NODE_DELEG) || S_ISDIR(n->mode) || old == tag)
		return;
	if (old)
		tag = NODE_DELEG_TAG;
	n->flags = (uint16_t)((n->flags & ~NODE_DELEG_TAG) | tag);
}

/*
 * Append live edge @e to @dir. Fails (-ENOMEM; -ENOENT in a directory
 * the purge is emptying) only before changing anything.
 */
static int dir_add(struct ns *ns, struct node *dir, struct edge *e)
{
	struct dir *d = dir->u.dir;
	size_t before = htab_bytes(&d->names);
	int rc = 0;

	if (dir->flags & NODE_PURGING)
		return -ENOENT; /* its index would be built again, O(entries) */
	assert(!d->tail || d->tail->id < e->id);
	if (htab_count(&d->names))
		rc = htab_insert(&d->names, edge_hash(e), e);
	else if (d->nentries + 1 > NS_DIR_HASH_MIN) {
		rc = names_build(d);
		if (rc == 0)
			rc = htab_insert(&d->names, edge_hash(e), e);
		if (rc < 0)
			htab_release(&d->names);
	}
	ns->dir_bytes += htab_bytes(&d->names) - before;
	if (d->names.old)
		resizing_note(ns, d);
	if (rc < 0)
		return rc;
	e->prev = d->tail;
	e->next = NULL;
	if (d->tail)
		d->tail->next = e;
	else
		d->head = e;
	d->tail = e;
	if (++d->since_index >= NS_INDEX_STRIDE)
		index_push(ns, d, e);
	d->nentries++;
	if (ns_is_dir(e->child))
		d->nsubdirs++;
	if (!(e->flags & EDGE_SNAPSHOT))
		d->nplain++;
	ns->nedges++;
	counts_changed(d);
	if (ns->nsnapmarks)
		nsi_snap_added(ns, dir, e);
	/* A new name for a directory hangs it here; ns_rename() moves
	 * the one it renames itself. */
	if (ns_is_dir(e->child) && e->child != ns->moving)
		lct_link(&e->child->u.dir->lct, &d->lct);
	mark_deleg_in(dir, e->child);
	return 0;
}

/*
 * Append a new edge @name (@len bytes, id @id, @flags but EDGE_SNAPSHOT
 * dropped) to @dir, naming @child: 0, or -ENOMEM with nothing changed.
 */
static int dir_add_new(struct ns *ns, struct node *dir, const char *name,
		       size_t len, uint64_t id, uint8_t flags,
		       struct node *child)
{
	struct edge *e = edge_new(ns, name, len, id, child);
	int rc;

	if (!e)
		return -ENOMEM;
	e->flags = flags & EDGE_SNAPSHOT;
	rc = dir_add(ns, dir, e);
	if (rc < 0)
		edge_free(ns, e);
	return rc;
}

/* Unlink live edge @e from @d: freed, or a tombstone while pinned. */
static void dir_remove(struct ns *ns, struct dir *d, struct edge *e)
{
	size_t before = htab_bytes(&d->names);

	if (ns_is_dir(e->child) && e->child != ns->moving)
		lct_cut(&e->child->u.dir->lct);

	if (htab_count(&d->names)) {
		htab_remove(&d->names, edge_hash(e), e);
		if (d->nentries - 1 < NS_DIR_HASH_MIN / 2)
			htab_release(&d->names);
	}
	ns->dir_bytes += htab_bytes(&d->names) - before;
	if (d->names.old)
		resizing_note(ns, d);
	if (e->flags & EDGE_INDEXED)
		index_drop(d, e);
	d->nentries--;
	if (ns_is_dir(e->child)) {
		d->nsubdirs--;
		ns->dir_moves++;
	}
	if (!(e->flags & EDGE_SNAPSHOT))
		d->nplain--;
	ns->nedges--;
	counts_changed(d);
	if (ns->nsnapmarks)
		nsi_snap_removed(ns, d, e);
	e->child = NULL;
	if (e->pins) {
		d->tombstones++;
		return;
	}
	list_unlink(d, e);
	edge_free(ns, e);
}

static void edge_unpin(struct ns *ns, struct dir *d, struct edge *e)
{
	if (--e->pins || e->child)
		return;
	d->tombstones--;
	list_unlink(d, e);
	edge_free(ns, e);
}

/* Free an empty directory's own parts; cursors resting there are unset. */
static void dir_free(struct ns *ns, struct node *n)
{
	struct dir *d = n->u.dir;
	struct edge *e, *next;

	assert(d->nentries == 0);
	lct_cut(&d->lct); /* a purged tree's top hangs nowhere already */
	if ((d->watchers || (n->flags & NODE_DELEG)) && ns->dir_gone)
		ns->dir_gone(ns->hook_arg, n);
	while (d->cursors) {
		struct cursor *c = d->cursors;

		d->cursors = c->dnext;
		ns_cursor_init(c);
	}
	for (e = d->head; e; e = next) {
		next = e->next;
		edge_free(ns, e);
	}
	ns->dir_bytes -= htab_bytes(&d->names) + sizeof(*d) +
			 d->index_cap * sizeof(*d->index);
	resizing_forget(ns, d);
	htab_release(&d->names);
	free(index_base(d));
	free(d);
}

/* ---- nodes ---------------------------------------------------------- */

static void xattrs_free(struct ns *ns, struct node *n)
{
	struct xattr_set *xs;

	xs = htab_find(&ns->xattrs, sw_hash_u64(n->ino), nsi_xset_eq, &n->ino);
	if (!xs)
		return;
	htab_remove(&ns->xattrs, sw_hash_u64(n->ino), xs);
	for (uint32_t i = 0; i < xs->n; i++) {
		ns->misc_bytes -= xs->v[i].nlen + xs->v[i].vlen;
		free(xs->v[i].data);
	}
	ns->misc_bytes -= sizeof(*xs) + xs->cap * sizeof(*xs->v);
	free(xs->v);
	free(xs);
}

/* New node @n counts in @ns's totals (node_free() takes it out). */
static void node_count(struct ns *ns, const struct node *n)
{
	ns->nnodes++;
	if (S_ISDIR(n->mode))
		ns->ndirs++;
	if (S_ISLNK(n->mode))
		ns->misc_bytes += n->size;
}

/*
 * Undo a node's making before it was counted or reachable: free its
 * empty directory or its symlink target (the node itself is the
 * caller's).
 */
static void node_parts_free(struct ns *ns, struct node *n)
{
	if (S_ISDIR(n->mode) && n->u.dir) {
		ns->dir_bytes -= sizeof(struct dir);
		free(n->u.dir);
	} else if (S_ISLNK(n->mode)) {
		free(n->u.target);
	}
}

static void node_free(struct ns *ns, struct node *n)
{
	uint64_t h = sw_hash_u64(n->ino);

	htab_remove(&ns->inodes, h, n);
	if (n->flags & NODE_ORPHAN)
		htab_remove(&ns->orphans, h, n);
	if (n->flags & NODE_XATTR)
		xattrs_free(ns, n);
	if (S_ISDIR(n->mode)) {
		if (ns->nsnapmarks)
			nsi_snap_gone(ns, n, false);
		dir_free(ns, n);
		ns->ndirs--;
	} else if (S_ISLNK(n->mode)) {
		ns->misc_bytes -= n->size;
		free(n->u.target);
	} else if (S_ISREG(n->mode)) {
		ns_chunks_drop(ns, n);
	}
	if (ns->node_gone)
		ns->node_gone(ns->hook_arg, n->ino);
	ns->nnodes--;
	slab_free(&ns->node_slab, n);
}

/*
 * @n lost a name. A directory is gone with its only name; anything else
 * goes with its last one, unless @keep (the caller made room in the
 * orphan table already).
 */
static void node_unlinked(struct ns *ns, struct node *n, bool keep, int64_t now)
{
	if (!S_ISDIR(n->mode) && n->nlink > 1) {
		n->nlink--;
		n->ctime = now;
		return;
	}
	if (keep && !S_ISDIR(n->mode)) {
		n->nlink = 0;
		n->ctime = now;
		return;
	}
	node_free(ns, n);
}

/*
 * Make room for @n in the orphan table if removing a name of it would
 * leave it nameless and @keep asks to keep it. Done first so that nothing
 * fails after the visible change.
 */
static int orphan_prepare(struct ns *ns, struct node *n, bool keep)
{
	int rc;

	if (!keep || S_ISDIR(n->mode) || n->nlink > 1)
		return 0;
	rc = htab_insert(&ns->orphans, sw_hash_u64(n->ino), n);
	if (rc < 0)
		return rc;
	n->flags |= NODE_ORPHAN;
	return 0;
}

static void orphan_cancel(struct ns *ns, struct node *n)
{
	if (!(n->flags & NODE_ORPHAN) || n->nlink == 0)
		return;
	htab_remove(&ns->orphans, sw_hash_u64(n->ino), n);
	n->flags &= (uint16_t)~NODE_ORPHAN;
}

static void touch_dir(struct node *dir, int64_t now)
{
	dir->mtime = dir->ctime = now;
}

static void note_ids(struct ns *ns, uint64_t ino, uint64_t edge)
{
	if (ino >= ns->next_ino)
		ns->next_ino = ino + 1;
	if (edge >= ns->next_edge)
		ns->next_edge = edge + 1;
}

/* ---- public --------------------------------------------------------- */

int ns_init(struct ns *ns, int64_t now)
{
	struct node *root;

	memset(ns, 0, sizeof(*ns));
	htab_init(&ns->inodes, node_hash);
	htab_init(&ns->orphans, node_hash);
	htab_init(&ns->xattrs, xset_hash);
	nsi_trash_init(ns);
	replies_init(&ns->replies);
	slab_init(&ns->node_slab, sizeof(struct node));
	for (unsigned i = 0; i < NS_EDGE_CLASSES; i++)
		slab_init(&ns->edge_slab[i], 40 + 8 * i);
	ns->next_ino = NS_ROOT_INO + 1;
	ns->next_edge = 16; /* cookies below are the mount's ("." and "..") */
	chunks_init(ns);

	root = slab_alloc(&ns->node_slab);
	if (!root)
		return -ENOMEM;
	memset(root, 0, sizeof(*root));
	root->ino = NS_ROOT_INO;
	root->mode = S_IFDIR | 0755;
	root->nlink = 1;
	root->atime = root->mtime = root->ctime = now;
	root->u.dir = dir_new(ns, root);
	if (!root->u.dir ||
	    htab_insert(&ns->inodes, sw_hash_u64(root->ino), root) < 0) {
		free(root->u.dir);
		slab_free(&ns->node_slab, root);
		return -ENOMEM;
	}
	ns->root = root;
	ns->nnodes = 1;
	ns->ndirs = 1;
	return 0;
}

static int free_node_cb(void *elem, void *arg)
{
	struct ns *ns = arg;
	struct node *n = elem;

	if (S_ISDIR(n->mode)) {
		struct dir *d = n->u.dir;

		while (d->cursors) {
			struct cursor *c = d->cursors;

			d->cursors = c->dnext;
			ns_cursor_init(c);
		}
		for (struct edge *e = d->head, *next; e; e = next) {
			next = e->next;
			edge_free(ns, e);
		}
		htab_release(&d->names);
		free(index_base(d));
		free(d);
	} else if (S_ISLNK(n->mode)) {
		free(n->u.target);
	} else if (S_ISREG(n->mode)) {
		free(n->u.chunks); /* the chunks go with the whole table */
	}
	if (n->flags & NODE_XATTR)
		xattrs_free(ns, n);
	slab_free(&ns->node_slab, n);
	return 0;
}

void ns_release(struct ns *ns)
{
	ns_load_end(ns);
	ns_copy_release(ns);
	ns->nsnapmarks = 0;
	htab_foreach(&ns->inodes, free_node_cb, ns);
	while (ns->purge_head) {
		struct purge_root *pr = ns->purge_head;

		ns->purge_head = pr->next;
		free(pr);
	}
	ns_trash_release(ns);
	chunks_release(ns);
	htab_release(&ns->inodes);
	htab_release(&ns->orphans);
	htab_release(&ns->xattrs);
	replies_release(&ns->replies);
	free(ns->resizing);
	slab_release(&ns->node_slab);
	for (unsigned i = 0; i < NS_EDGE_CLASSES; i++)
		slab_release(&ns->edge_slab[i]);
	memset(ns, 0, sizeof(*ns));
}

struct node *ns_get(const struct ns *ns, uint64_t ino)
{
	return htab_find(&ns->inodes, sw_hash_u64(ino), node_eq, &ino);
}

static uint64_t lookup_walked; /* ns_lookup_walked() */

struct edge *ns_lookup(const struct ns *ns, const struct node *dir,
		       const char *name, size_t len)
{
	const struct dir *d = dir->u.dir;
	struct name_key key = { name, len };

	/* Without its index a walk of millions: whoever asks is wrong, and
	 * finds nothing rather than holding the loop. */
	if (dir->flags & NODE_PURGING)
		return NULL;
	if (htab_count(&d->names))
		return htab_find(&d->names, sw_hash_bytes(name, len), edge_eq,
				 &key);
	for (struct edge *e = d->head; e; e = e->next) {
		lookup_walked++;
		if (e->child && edge_eq(e, &key))
			return e;
	}
	return NULL;
}

uint64_t ns_lookup_walked(void)
{
	return lookup_walked;
}

uint32_t ns_nlink(const struct node *n)
{
	if (!S_ISDIR(n->mode))
		return n->nlink;
	if (n->u.dir->nsubdirs >= NS_LINK_MAX)
		return 1;
	return (uint32_t)n->u.dir->nsubdirs + 2;
}

static int cmp_ino(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Mark every entry of @want equal to @ino; how many were new. */
static size_t mark_found(uint64_t ino, const uint64_t *want, size_t n,
			 bool *found)
{
	const uint64_t *p = bsearch(&ino, want, n, sizeof(*want), cmp_ino);
	size_t i, marked = 0;

	if (!p)
		return 0;
	i = (size_t)(p - want);
	while (i > 0 && want[i - 1] == ino)
		i--;
	for (; i < n && want[i] == ino; i++) {
		if (!found[i])
			marked++;
		found[i] = true;
	}
	return marked;
}

size_t ns_subtree_find(const struct node *root, const uint64_t *want, size_t n,
		       bool *found)
{
	const struct node **stack;
	size_t top = 0, cap = 64, nfound = 0;

	stack = malloc(cap * sizeof(*stack));
	if (!stack)
		return 0;
	stack[top++] = root;
	while (top && nfound < n) {
		const struct node *dir = stack[--top];

		for (const struct edge *e = dir->u.dir->head; e; e = e->next) {
			const struct node *c = e->child;

			if (!c)
				continue; /* a tombstone */
			if (S_ISDIR(c->mode)) {
				if (top == cap) {
					const struct node **v = realloc(
						stack, 2 * cap * sizeof(*v));

					if (!v)
						goto out;
					stack = v;
					cap *= 2;
				}
				stack[top++] = c;
				continue;
			}
			nfound += mark_found(c->ino, want, n, found);
		}
	}
out:
	free(stack);
	return nfound;
}

/* The forest restructures itself on queries too: a logically const
 * directory is still changed. */
static struct lct_node *lct_of(const struct node *dir)
{
	return &((struct node *)dir)->u.dir->lct;
}

bool ns_is_ancestor(const struct node *a, const struct node *b)
{
	return lct_is_ancestor(lct_of(a), lct_of(b));
}

uint64_t ns_tree_names(const struct node *dir)
{
	uint64_t s[LCT_VALUES];

	lct_subtree(lct_of(dir), s);
	return s[0];
}

uint64_t ns_tree_plain(const struct node *dir)
{
	uint64_t s[LCT_VALUES];

	lct_subtree(lct_of(dir), s);
	return s[1];
}

int ns_create(struct ns *ns, struct node *dir, const char *name, size_t len,
	      const struct ns_create_args *a, struct node **out)
{
	struct node *n;
	struct edge *e;
	int rc;

	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	if (!nsi_type_valid(a->mode))
		return -EINVAL;
	if (ns_lookup(ns, dir, name, len) || ns_get(ns, a->ino))
		return -EEXIST;

	n = slab_alloc(&ns->node_slab);
	if (!n)
		return -ENOMEM;
	memset(n, 0, sizeof(*n));
	n->ino = a->ino;
	n->mode = a->mode;
	n->uid = a->uid;
	n->gid = a->gid;
	n->nlink = 1;
	n->atime = n->mtime = n->ctime = a->now;
	n->flags = dir->flags & NODE_GOAL_MASK;
	rc = -ENOMEM;
	switch (a->mode & S_IFMT) {
	case S_IFDIR:
		n->u.dir = dir_new(ns, dir);
		if (!n->u.dir)
			goto out_node;
		/* A new directory keeps its parent's trash time. */
		n->u.dir->trashtime = dir->u.dir->trashtime;
		break;
	case S_IFLNK:
		n->u.target = malloc(a->target_len ? a->target_len : 1);
		if (!n->u.target)
			goto out_node;
		memcpy(n->u.target, a->target, a->target_len);
		n->size = a->target_len;
		break;
	case S_IFCHR:
	case S_IFBLK:
		n->u.rdev = a->rdev;
		break;
	}
	e = edge_new(ns, name, len, a->edge, n);
	if (!e)
		goto out_parts;
	rc = htab_insert(&ns->inodes, sw_hash_u64(n->ino), n);
	if (rc < 0)
		goto out_edge;
	rc = dir_add(ns, dir, e);
	if (rc < 0)
		goto out_unhash;

	touch_dir(dir, a->now);
	note_ids(ns, a->ino, a->edge);
	node_count(ns, n);
	if (out)
		*out = n;
	return 0;

out_unhash:
	htab_remove(&ns->inodes, sw_hash_u64(n->ino), n);
out_edge:
	edge_free(ns, e);
out_parts:
	node_parts_free(ns, n);
out_node:
	slab_free(&ns->node_slab, n);
	return rc;
}

int ns_link(struct ns *ns, struct node *n, struct node *dir, const char *name,
	    size_t len, uint64_t edge, int64_t now)
{
	int rc;

	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	if (S_ISDIR(n->mode))
		return -EPERM;
	if (n->nlink == 0)
		return -ENOENT;
	if (n->nlink >= NS_LINK_MAX)
		return -EMLINK;
	if (ns_lookup(ns, dir, name, len))
		return -EEXIST;
	rc = dir_add_new(ns, dir, name, len, edge, 0, n);
	if (rc < 0)
		return rc;
	if (n->flags & NODE_DELEG_TAG)
		ns->marked_links++;
	n->nlink++;
	n->ctime = now;
	touch_dir(dir, now);
	note_ids(ns, 0, edge);
	return 0;
}

/* ns_unlink() of live edge @e, in @dir, found already. */
static int unlink_edge(struct ns *ns, struct node *dir, struct edge *e,
		       bool keep, int64_t now)
{
	struct node *n = e->child;
	int rc;

	if (S_ISDIR(n->mode) && n->u.dir->nentries)
		return -ENOTEMPTY;
	rc = orphan_prepare(ns, n, keep);
	if (rc < 0)
		return rc;
	dir_remove(ns, dir->u.dir, e);
	touch_dir(dir, now);
	node_unlinked(ns, n, keep, now);
	return 0;
}

int ns_unlink(struct ns *ns, struct node *dir, const char *name, size_t len,
	      bool keep, int64_t now)
{
	struct edge *e;
	int rc = nsi_entry(ns, dir, name, len, &e);

	return rc < 0 ? rc : unlink_edge(ns, dir, e, keep, now);
}

static int rename_exchange(struct ns *ns, struct node *sdir, struct edge *se,
			   struct node *ddir, struct edge *de, int64_t now)
{
	struct node *src = se->child, *dst = de->child;

	if (src == dst)
		return 0;
	if (S_ISDIR(src->mode) && ns_is_ancestor(src, ddir))
		return -EINVAL;
	if (S_ISDIR(dst->mode) && ns_is_ancestor(dst, sdir))
		return -EINVAL;
	if (sdir != ddir && ns->nsnapmarks) {
		int rc = 0;

		if (S_ISDIR(src->mode))
			rc = nsi_snap_moving(ns, src, sdir, ddir);
		if (rc == 0 && S_ISDIR(dst->mode))
			rc = nsi_snap_moving(ns, dst, ddir, sdir);
		if (rc < 0)
			return rc;
	}
	/* Names stay, with their flags (so the counts do); the objects
	 * swap. */
	se->child = dst;
	de->child = src;
	mark_deleg_in(sdir, dst);
	mark_deleg_in(ddir, src);
	if (sdir != ddir) {
		if (S_ISDIR(src->mode)) {
			sdir->u.dir->nsubdirs--;
			ddir->u.dir->nsubdirs++;
			src->u.dir->parent = ddir;
			lct_cut(&src->u.dir->lct);
		}
		if (S_ISDIR(dst->mode)) {
			ddir->u.dir->nsubdirs--;
			sdir->u.dir->nsubdirs++;
			dst->u.dir->parent = sdir;
			lct_cut(&dst->u.dir->lct);
		}
		if (S_ISDIR(src->mode))
			lct_link(&src->u.dir->lct, &ddir->u.dir->lct);
		if (S_ISDIR(dst->mode))
			lct_link(&dst->u.dir->lct, &sdir->u.dir->lct);
	}
	src->ctime = dst->ctime = now;
	touch_dir(sdir, now);
	touch_dir(ddir, now);
	return 0;
}

int ns_rename(struct ns *ns, struct node *sdir, const char *sname, size_t slen,
	      struct node *ddir, const char *dname, size_t dlen, unsigned flags,
	      uint64_t edge, bool keep, int64_t now)
{
	struct edge *se, *de, *ne;
	struct node *src, *dst;
	int rc;

	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE))
		return -EINVAL;
	if (!S_ISDIR(sdir->mode) || !S_ISDIR(ddir->mode))
		return -ENOTDIR;
	se = ns_lookup(ns, sdir, sname, slen);
	if (!se)
		return -ENOENT;
	de = ns_lookup(ns, ddir, dname, dlen);
	if (flags & RENAME_EXCHANGE) {
		if (!de)
			return -ENOENT;
		return rename_exchange(ns, sdir, se, ddir, de, now);
	}
	src = se->child;
	dst = de ? de->child : NULL;
	if (dst == src)
		return 0;
	if (dst && (flags & RENAME_NOREPLACE))
		return -EEXIST;
	if (S_ISDIR(src->mode)) {
		if (ns_is_ancestor(src, ddir))
			return -EINVAL;
		if (dst && !S_ISDIR(dst->mode))
			return -ENOTDIR;
		if (dst && dst->u.dir->nentries)
			return -ENOTEMPTY;
	} else if (dst && S_ISDIR(dst->mode)) {
		return -EISDIR;
	}

	/* A tree moved across a snapshot mark's edge (nsattr.c). */
	if (S_ISDIR(src->mode) && sdir != ddir && ns->nsnapmarks) {
		rc = nsi_snap_moving(ns, src, sdir, ddir);
		if (rc < 0)
			return rc;
	}
	if (dst) {
		rc = orphan_prepare(ns, dst, keep);
		if (rc < 0)
			return rc;
	}
	ne = edge_new(ns, dname, dlen, edge, src);
	if (!ne) {
		rc = -ENOMEM;
		goto out_orphan;
	}
	/* The flag goes where the object goes, a mark's too. */
	if (ns_edge_snapshot(ns, sdir, se))
		ne->flags |= EDGE_SNAPSHOT;
	ns->moving = src;
	rc = dir_add(ns, ddir, ne);
	if (rc < 0) {
		ns->moving = NULL;
		edge_free(ns, ne);
		goto out_orphan;
	}
	/* Past this point nothing fails. */
	if (dst) {
		dir_remove(ns, ddir->u.dir, de);
		node_unlinked(ns, dst, keep, now);
	}
	dir_remove(ns, sdir->u.dir, se);
	ns->moving = NULL;
	if (S_ISDIR(src->mode) && sdir != ddir) {
		src->u.dir->parent = ddir;
		lct_cut(&src->u.dir->lct);
		lct_link(&src->u.dir->lct, &ddir->u.dir->lct);
	}
	src->ctime = now;
	touch_dir(sdir, now);
	touch_dir(ddir, now);
	note_ids(ns, 0, edge);
	return 0;

out_orphan:
	if (dst)
		orphan_cancel(ns, dst);
	return rc;
}

int ns_setattr(struct ns *ns, struct node *n, const struct ns_setattr_args *a)
{
	if (a->valid & NS_SET_SIZE) {
		if (S_ISDIR(n->mode))
			return -EISDIR;
		if (!S_ISREG(n->mode))
			return -EINVAL;
	}
	if (a->valid & NS_SET_MODE)
		n->mode = (n->mode & S_IFMT) | (a->mode & 07777);
	if ((a->valid & NS_SET_UID) && n->uid != a->uid)
		nsi_trash_chown(ns, n, a->uid); /* sets n->uid */
	if (a->valid & NS_SET_GID)
		n->gid = a->gid;
	if (a->valid & NS_SET_SIZE) {
		if (a->size < n->size)
			ns_chunks_truncate(ns, n, a->size);
		n->size = a->size;
	}
	if (a->valid & NS_SET_ATIME)
		n->atime = a->atime;
	if (a->valid & NS_SET_MTIME)
		n->mtime = a->mtime;
	n->ctime = a->now;
	return 0;
}

int ns_release_orphan(struct ns *ns, struct node *n)
{
	if (!(n->flags & NODE_ORPHAN) || n->nlink)
		return -EINVAL;
	node_free(ns, n);
	return 0;
}

/* ---- readdir -------------------------------------------------------- */

struct edge *ns_dir_seek(const struct node *dir, uint64_t cookie)
{
	const struct dir *d = dir->u.dir;
	struct edge *e = d->head;

	if (!d->tail || cookie >= d->tail->id)
		return NULL;
	if (d->index_len && d->index[0]->id <= cookie) {
		uint32_t lo = 0, hi = d->index_len - 1;

		/* The last index entry with id <= cookie. */
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo + 1) / 2;

			if (d->index[mid]->id <= cookie)
				lo = mid;
			else
				hi = mid - 1;
		}
		e = d->index[lo];
	}
	while (e && e->id <= cookie)
		e = e->next;
	return e;
}

void ns_cursor_set(struct ns *ns, struct cursor *c, struct node *dir,
		   struct edge *pos)
{
	struct edge *old;

	if (pos && pos->pins == UINT16_MAX) {
		/* Absurdly many cursors on one edge: this one seeks instead. */
		ns_cursor_clear(ns, c);
		return;
	}
	if (c->dir != dir) {
		struct dir *d = dir->u.dir;

		ns_cursor_clear(ns, c);
		c->dir = dir;
		c->dprev = NULL;
		c->dnext = d->cursors;
		if (d->cursors)
			d->cursors->dprev = c;
		d->cursors = c;
	}
	if (pos)
		pos->pins++;
	old = c->pos;
	c->pos = pos;
	if (old)
		edge_unpin(ns, dir->u.dir, old);
}

void ns_cursor_clear(struct ns *ns, struct cursor *c)
{
	struct dir *d;

	if (!c->dir)
		return;
	d = c->dir->u.dir;
	if (c->dprev)
		c->dprev->dnext = c->dnext;
	else
		d->cursors = c->dnext;
	if (c->dnext)
		c->dnext->dprev = c->dprev;
	if (c->pos)
		edge_unpin(ns, d, c->pos);
	ns_cursor_init(c);
}

/* ---- accounting, iteration (loading: nsload.c) ----------------------- */

size_t ns_memory(const struct ns *ns)
{
	size_t n = slab_bytes(&ns->node_slab) + htab_bytes(&ns->inodes) +
		   htab_bytes(&ns->orphans) + htab_bytes(&ns->xattrs) +
		   slab_bytes(&ns->chunk_slab) + htab_bytes(&ns->chunks) +
		   htab_bytes(&ns->trash_inos) + ns->dir_bytes + ns->misc_bytes;

	for (unsigned i = 0; i < NS_EDGE_CLASSES; i++)
		n += slab_bytes(&ns->edge_slab[i]);
	return n;
}

uint64_t ns_replay_work(const struct ns *ns)
{
	return ns->version + ns->purged + ns->copied;
}

int ns_foreach_node(const struct ns *ns, int (*fn)(void *node, void *arg),
		    void *arg)
{
	return htab_foreach(&ns->inodes, fn, arg);
}

bool ns_housekeep(struct ns *ns)
{
	bool more = htab_step(&ns->inodes, 1024);

	more |= htab_step(&ns->orphans, 1024);
	more |= htab_step(&ns->xattrs, 1024);
	more |= htab_step(&ns->chunks, 1024);
	more |= htab_step(&ns->trash_inos, 1024);
	for (size_t i = 0; i < ns->nresizing;) {
		struct dir *d = ns->resizing[i];
		size_t before = htab_bytes(&d->names);

		htab_step(&d->names, 1024);
		ns->dir_bytes += htab_bytes(&d->names) - before;
		if (d->names.old) {
			more = true;
			i++;
		} else {
			ns->resizing[i] = ns->resizing[--ns->nresizing];
		}
	}
	return more;
}

size_t ns_resizing(const struct ns *ns)
{
	return (ns->inodes.old != NULL) + (ns->orphans.old != NULL) +
	       (ns->xattrs.old != NULL) + (ns->chunks.old != NULL) +
	       ns->nresizing;
}

/* ---- for the purge (namespace_i.h; the queue itself: nspurge.c) ------- */

void nsi_edge_remove(struct ns *ns, struct node *dir, struct edge *e)
{
	dir_remove(ns, dir->u.dir, e);
}

void nsi_dir_unindex(struct ns *ns, struct node *dir)
{
	struct dir *d = dir->u.dir;

	dir->flags |= NODE_PURGING;
	if (!d->names.slots && !d->names.old)
		return;
	ns->dir_bytes -= htab_bytes(&d->names);
	resizing_forget(ns, d);
	htab_release(&d->names);
}

void nsi_node_free(struct ns *ns, struct node *n)
{
	node_free(ns, n);
}

void nsi_node_unlinked(struct ns *ns, struct node *n, int64_t now)
{
	node_unlinked(ns, n, false, now);
}

int nsi_unlink_edge(struct ns *ns, struct node *dir, struct edge *e,
		    int64_t now)
{
	return unlink_edge(ns, dir, e, false, now);
}

void nsi_detach_cut(struct ns *ns, struct node *dir, struct edge *e,
		    int64_t now)
{
	struct node *n = e->child;

	dir_remove(ns, dir->u.dir, e);
	n->u.dir->parent = NULL;
	n->flags |= NODE_DETACHED;
	touch_dir(dir, now);
}

bool ns_gone(const struct node *n)
{
	if (S_ISDIR(n->mode))
		return ns_detached(n);
	return n->flags & (NODE_ORPHAN | NODE_TRASHED);
}

bool ns_detached(const struct node *dir)
{
	struct lct_node *top = lct_root(lct_of(dir));
	struct dir *d = (struct dir *)((char *)top - offsetof(struct dir, lct));

	/* Only the root is its own parent; a detached tree's top has
	 * none, a snapshot copy's top the directory it will be named in. */
	return !d->parent || d->parent->u.dir != d;
}

/* ---- the snapshot flag ------------------------------------------------ */

void ns_edge_flag(struct node *dir, struct edge *e, bool snapshot)
{
	bool was = e->flags & EDGE_SNAPSHOT;

	if (was == snapshot)
		return;
	if (snapshot) {
		e->flags |= EDGE_SNAPSHOT;
		dir->u.dir->nplain--;
	} else {
		e->flags &= (uint8_t)~EDGE_SNAPSHOT;
		dir->u.dir->nplain++;
	}
	counts_changed(dir->u.dir);
}

int nsi_edge_add(struct ns *ns, struct node *dir, const char *name, size_t len,
		 uint64_t id, uint8_t flags, struct node *child)
{
	int rc = dir_add_new(ns, dir, name, len, id, flags, child);

	if (rc < 0)
		return rc;
	if (!S_ISDIR(child->mode)) {
		if (child->flags & NODE_DELEG_TAG)
			ns->marked_links++;
		child->nlink++;
	} else {
		child->u.dir->parent = dir;
	}
	note_ids(ns, 0, id);
	return 0;
}

void nsi_note_ids(struct ns *ns, uint64_t ino, uint64_t edge)
{
	note_ids(ns, ino, edge);
}

/* ---- for loading (nsload.c) ------------------------------------------- */

struct dir *nsi_dir_new(struct ns *ns)
{
	return dir_new(ns, NULL);
}

void nsi_node_count(struct ns *ns, const struct node *n)
{
	node_count(ns, n);
}

void nsi_node_parts_free(struct ns *ns, struct node *n)
{
	node_parts_free(ns, n);
}

int nsi_dir_add_new(struct ns *ns, struct node *dir, const char *name,
		    size_t len, uint64_t id, uint8_t flags, struct node *child)
{
	return dir_add_new(ns, dir, name, len, id, flags, child);
}
