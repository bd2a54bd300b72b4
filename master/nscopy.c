/*
 * Snapshots: an atomic copy of a tree, metadata only. Files of the copy
 * share their chunks with the original (reference counts), so data is
 * copied only when one side writes a shared chunk (dataops.c duplicates
 * it first).
 *
 * The copy is one changelog record and is made in one go: inode numbers
 * and edge ids are handed out from bases the record carries, in a fixed
 * order (depth first, entries in edge-id order), so replay makes exactly
 * the same copy. Hard links inside the tree stay hard links in the copy.
 *
 * It blocks the loop for as long as the copy takes (see bench/): a copy
 * in slices would need the tree as it was at the start while clients
 * change it, i.e. a pre-image of everything they touch meanwhile.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "namespace.h"
#include "namespace_i.h"
#include "util.h"

/* Old inode -> its copy, for nodes with more than one name. */
struct link {
	const struct node *from;
	struct node *to;
};

static uint64_t link_hash(const void *e)
{
	return sw_hash_u64((uintptr_t)((const struct link *)e)->from);
}

static bool link_eq(const void *e, const void *key)
{
	return ((const struct link *)e)->from == key;
}

static int free_link(void *e, void *arg)
{
	free(e);
	return 0;
}

struct copy {
	struct ns *ns;
	uint64_t ino;	    /* next inode number */
	uint64_t edge;	    /* next edge id */
	uint64_t nodes;
	struct htab links; /* struct link */
};

/* Copy @e's child into directory @dst under the same name. */
static int copy_entry(struct copy *c, struct node *dst, const struct edge *e,
		      struct node **made)
{
	struct node *src = e->child, *n = NULL;
	int rc;

	uint64_t h = sw_hash_u64((uintptr_t)src);
	struct link *l = NULL;

	if (!S_ISDIR(src->mode) && src->nlink > 1) {
		l = htab_find(&c->links, h, link_eq, src);
		if (l)
			n = l->to;
	}
	if (!n) {
		n = nsi_node_copy(c->ns, src, c->ino++, dst);
		if (!n)
			return -ENOMEM;
		c->nodes++;
		if (!S_ISDIR(src->mode) && src->nlink > 1) {
			l = malloc(sizeof(*l));
			if (!l || htab_insert(&c->links, h, l) < 0) {
				free(l);
				return -ENOMEM;
			}
			l->from = src;
			l->to = n;
		}
	}
	rc = nsi_edge_add(c->ns, dst, e->name, e->namelen, c->edge++, e->flags,
			  n);
	*made = n;
	return rc;
}

/*
 * Copy the entries of @src_root into the new, empty @dst_root, depth
 * first. On failure, what was made stays under @dst_root for the caller
 * to dispose of.
 */
static int copy_tree(struct copy *c, struct node *src_root,
		     struct node *dst_root)
{
	struct edge **sstack = NULL, *e = NULL;
	struct node **dstack = NULL, *s = src_root, *d = dst_root;
	size_t depth = 0, cap = 0;
	int rc = 0;

	for (;;) {
		struct node *made;

		e = e ? e->next : s->u.dir->head;
		while (e && !e->child)
			e = e->next;
		if (!e) {
			if (depth == 0)
				break;
			depth--;
			e = sstack[depth];
			s = s->u.dir->parent;
			d = dstack[depth];
			continue;
		}
		rc = copy_entry(c, d, e, &made);
		if (rc < 0)
			break;
		if (!S_ISDIR(e->child->mode))
			continue;
		if (depth == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct edge **se = realloc(sstack, nc * sizeof(*se));
			struct node **de;

			if (!se) {
				rc = -ENOMEM;
				break;
			}
			sstack = se;
			de = realloc(dstack, nc * sizeof(*de));
			if (!de) {
				rc = -ENOMEM;
				break;
			}
			dstack = de;
			cap = nc;
		}
		sstack[depth] = e;
		dstack[depth] = d;
		depth++;
		s = e->child;
		d = made;
		e = NULL;
	}
	free(sstack);
	free(dstack);
	return rc;
}

int64_t ns_snapshot(struct ns *ns, struct node *src, struct node *dir,
		    const char *name, size_t len, uint64_t ino_base,
		    uint64_t edge_base, int64_t now)
{
	struct copy c = { .ns = ns, .ino = ino_base + 1,
			  .edge = edge_base + 1 };
	struct node *root;
	int rc;

	htab_init(&c.links, link_hash);
	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	if ((dir->flags & NODE_DETACHED) || (src->flags & NODE_DETACHED) ||
	    (src->flags & NODE_ORPHAN))
		return -ENOENT;
	if (ns_lookup(ns, dir, name, len))
		return -EEXIST;
	if (S_ISDIR(src->mode) && ns_is_ancestor(src, dir))
		return -EINVAL;
	root = nsi_node_copy(ns, src, ino_base, dir);
	if (!root)
		return -ENOMEM;
	c.nodes = 1;
	rc = S_ISDIR(src->mode) ? copy_tree(&c, src, root) : 0;
	if (rc == 0)
		rc = nsi_edge_add(ns, dir, name, len, edge_base, 0, root);
	htab_foreach(&c.links, free_link, NULL);
	htab_release(&c.links);
	if (rc < 0) {
		/* Out of memory half way: the partial copy has no name;
		 * give it to the purge (or, as a file, free it). */
		if (S_ISDIR(root->mode)) {
			root->u.dir->parent = NULL;
			root->flags |= NODE_DETACHED;
			if (nsi_purge_add(ns, root, 0, c.nodes) < 0)
				root->u.dir->parent = NULL; /* leaked */
		} else {
			nsi_node_free(ns, root);
		}
		return rc;
	}
	nsi_note_ids(ns, c.ino - 1, c.edge - 1);
	dir->mtime = dir->ctime = now;
	return (int64_t)c.nodes;
}
