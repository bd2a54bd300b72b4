/*
 * Namespace internals for the other parts of the namespace layer (the
 * purge, master/purge.c): primitives that leave invariants to the caller.
 */
#ifndef SWEEPFS_MASTER_NAMESPACE_I_H
#define SWEEPFS_MASTER_NAMESPACE_I_H

#include "namespace.h"

/* A detached subtree waiting to be freed. */
struct purge_root {
	uint64_t id;	   /* the changelog version of its Detach */
	struct node *root; /* a directory with no parent */
	struct node *cur;  /* where freeing goes on (deepest first) */
	uint64_t total;	   /* nodes in it when detached */
	uint64_t freed;
	struct purge_root *next;
};

/* A node's extended attributes (nsattr.c), in ns->xattrs by inode. */
struct xattr {
	uint8_t nlen;
	uint32_t vlen;
	char *data; /* name, then value */
};

struct xattr_set {
	uint64_t ino;
	uint32_t n;
	uint32_t cap;
	struct xattr *v;
};

static inline bool nsi_xset_eq(const void *elem, const void *key)
{
	return ((const struct xattr_set *)elem)->ino == *(const uint64_t *)key;
}

/* Whether @mode's file type is one a node may have (what a request, a
 * checkpoint or a snapshot stream says is checked against it). */
static inline bool nsi_type_valid(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
	case S_IFDIR:
	case S_IFLNK:
	case S_IFCHR:
	case S_IFBLK:
	case S_IFIFO:
	case S_IFSOCK:
		return true;
	default:
		return false;
	}
}

/* Remove live edge @e from directory @dir (a tombstone while pinned). */
void nsi_edge_remove(struct ns *ns, struct node *dir, struct edge *e);

/*
 * Drop directory @dir's index of names, as the purge starts emptying it:
 * a detached tree is never looked up by name (get_dir() and every other
 * way in refuse it), and removing each of millions of names from the
 * index costs the purge a cache miss each and, while a checkpoint's
 * child lives, splits the huge pages of an array that is about to go
 * anyway. It is marked NODE_PURGING, so that a way in that forgot to
 * refuse a removed tree finds no name there (ns_lookup()) and adds none
 * (-ENOENT) rather than walking or indexing millions.
 */
void nsi_dir_unindex(struct ns *ns, struct node *dir);

/* Free node @n outright (a directory must have no live entries). */
void nsi_node_free(struct ns *ns, struct node *n);

/* @n lost its name in a detached tree: freed with its last one
 * (another name elsewhere only counts down). */
void nsi_node_unlinked(struct ns *ns, struct node *n, int64_t now);

/* ns_unlink() (keep false) of live edge @e in @dir, looked up already:
 * 0, or -ENOTEMPTY (a directory with entries) with nothing changed. */
int nsi_unlink_edge(struct ns *ns, struct node *dir, struct edge *e,
		    int64_t now);

/*
 * Name @child @name in @dir with edge id @id (the highest yet) and
 * @flags (EDGE_SNAPSHOT). Returns 0 or -ENOMEM (nothing changed).
 */
int nsi_edge_add(struct ns *ns, struct node *dir, const char *name, size_t len,
		 uint64_t id, uint8_t flags, struct node *child);

/* Advance the inode and edge counters past @ino and @edge. */
void nsi_note_ids(struct ns *ns, uint64_t ino, uint64_t edge);

/* For loading (nsload.c): namespace.c's own helpers. A directory's part
 * with no parent yet; a node counted as loaded; its parts freed; an entry
 * added with its id as it was. */
struct dir *nsi_dir_new(struct ns *ns);
void nsi_node_count(struct ns *ns, const struct node *n);
void nsi_node_parts_free(struct ns *ns, struct node *n);
int nsi_dir_add_new(struct ns *ns, struct node *dir, const char *name,
		    size_t len, uint64_t id, uint8_t flags, struct node *child);

/*
 * Walk every edge below directory @root (the one walk, namespace.c): an
 * edge, then the edges under it, calling @fn(dir, e, arg) until it
 * returns nonzero, which is returned. A walk that changes things takes
 * @stack from nsi_walk_stack() (room for the tree's depth, measured
 * read-only; NULL: ENOMEM; free it), so it cannot fail half way; a
 * read-only walk may pass NULL and get -ENOMEM. O(entries).
 */
struct edge **nsi_walk_stack(struct node *root);
int nsi_walk(struct node *root, struct edge **stack,
	     int (*fn)(struct node *dir, struct edge *e, void *arg), void *arg);

/* Entry @name of @dir, to remove: 0 with *@e, -ENOTDIR (@dir is not a
 * directory), -ENOENT. */
int nsi_entry(struct ns *ns, struct node *dir, const char *name, size_t len,
	      struct edge **e);

/* Detaching directory @e of @dir (ns_detach(), ns_trash_detach()): once
 * the tree has somewhere to go (the purge queue, the trash), cut it
 * out, a tree of its own. */
void nsi_detach_cut(struct ns *ns, struct node *dir, struct edge *e,
		    int64_t now);

/*
 * The snapshot flag's marks (nsattr.c), kept right by the core:
 * nsi_snap_added(): name @e was just added to @dir (a mark over @dir
 * counts it if unflagged); nsi_snap_gone(): directory @dir is freed
 * (@below false: its mark goes) or detached for the purge (@below: its
 * marks and those below go; asks the forest, so not while freeing);
 * nsi_snap_moving(): directory @sub is about to leave @from (NULL: from
 * the trash) for @to (NULL: the trash), whose marks differ: those it
 * leaves are written out on it, those it enters over their whole tree
 * (its old names must not look flagged). 0 or -ENOMEM (nothing wrong).
 */
void nsi_snap_added(struct ns *ns, struct node *dir, const struct edge *e);
/* Live edge @e is being removed from directory @d: a mark over @d that
 * counted it as added unflagged counts it out. */
void nsi_snap_removed(struct ns *ns, struct dir *d, const struct edge *e);
void nsi_snap_gone(struct ns *ns, struct node *dir, bool below);
int nsi_snap_moving(struct ns *ns, struct node *sub, struct node *from,
		    struct node *to);
/* A checkpoint's mark (checkpoint.c, after the names): directory @dir,
 * names below edge id @below flagged, @fresh added unflagged since.
 * -EUCLEAN: not a directory, one already marked, or more than
 * NS_SNAPMARKS (what a running master never holds). */
int nsi_snap_load(struct ns *ns, struct node *dir, uint64_t below,
		  uint64_t fresh);

/* Queue the detached directory @root as purge @id of @total nodes. */
int nsi_purge_add(struct ns *ns, struct node *root, uint64_t id,
		  uint64_t total);

/* The trash's index by inode, empty (nstrash.c; ns_trash_release()
 * frees it). */
void nsi_trash_init(struct ns *ns);

/* Node @n's owner becomes @uid: if it is a trash item's, the item moves
 * to @uid's place in the trash's tree by owner. O(log n). */
void nsi_trash_chown(struct ns *ns, struct node *n, uint32_t uid);

#endif
