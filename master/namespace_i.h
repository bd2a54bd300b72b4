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

/* Remove live edge @e from directory @dir (a tombstone while pinned). */
void nsi_edge_remove(struct ns *ns, struct node *dir, struct edge *e);

/* @n lost a name: fewer links, or freed (@keep: kept as an orphan; the
 * caller made room with nsi_orphan_prepare()). */
void nsi_node_unlinked(struct ns *ns, struct node *n, bool keep, int64_t now);

/* Free node @n outright (a directory must have no live entries). */
void nsi_node_free(struct ns *ns, struct node *n);

/*
 * Name @child @name in @dir with edge id @id (the highest yet) and
 * @flags (EDGE_SNAPSHOT). Returns 0 or -ENOMEM (nothing changed).
 */
int nsi_edge_add(struct ns *ns, struct node *dir, const char *name, size_t len,
		 uint64_t id, uint8_t flags, struct node *child);

/* Advance the inode and edge counters past @ino and @edge. */
void nsi_note_ids(struct ns *ns, uint64_t ino, uint64_t edge);

/*
 * Walks over the directories of a tree that cannot fail half way: first
 * a stack deep enough (NULL: ENOMEM; free it), then the walk, calling
 * @fn on directory @root and every directory below it. Returns the
 * number of nodes in the tree. O(directories).
 */
struct edge **nsi_walk_stack(struct node *root);
int64_t nsi_walk_dirs(struct node *root, struct edge **stack,
		      void (*fn)(struct node *d, void *arg), void *arg);

/* Queue the detached directory @root as purge @id of @total nodes. */
int nsi_purge_add(struct ns *ns, struct node *root, uint64_t id,
		  uint64_t total);

#endif
