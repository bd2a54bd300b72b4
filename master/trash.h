/*
 * The trash, namespace side (nstrash.c; the requests are trash.c's):
 * removed files and trees kept until they expire. Same rules as
 * namespace.h: structure only, no policy, all-or-nothing, deterministic
 * for replay.
 */
#ifndef SWEEPFS_MASTER_TRASH_H
#define SWEEPFS_MASTER_TRASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "namespace.h"

/*
 * Remove @name from @dir, keeping a file whose last name it was in the
 * trash as item @id until @until (ns since the epoch); a file with other
 * names just loses this one. -ENOENT, -ENOTDIR, -EISDIR, -ENOMEM.
 */
int ns_trash_unlink(struct ns *ns, struct node *dir, const char *name,
		    size_t len, uint64_t id, int64_t until, int64_t now);

/* Detach directory @name of @dir into the trash as item @id. */
int ns_trash_detach(struct ns *ns, struct node *dir, const char *name,
		    size_t len, uint64_t id, int64_t until, int64_t now);

/* Give item @id the name @name in @dir (new edge id @edge). -ENOENT,
 * -EEXIST, -EINVAL (a tree into itself), -ENOMEM. */
int ns_trash_restore(struct ns *ns, uint64_t id, struct node *dir,
		     const char *name, size_t len, uint64_t edge, int64_t now);

/* Item @id goes: a file is freed (or with @keep an orphan), a tree joins
 * the purge queue. */
int ns_trash_drop(struct ns *ns, uint64_t id, bool keep, int64_t now);

/* Trash time of @dir, and with @recursive of every directory below that
 * @owner owns (NS_ANY_OWNER: all). Returns directories changed, or
 * -errno. */
int64_t ns_set_trashtime(struct ns *ns, struct node *dir, uint32_t seconds,
			 bool recursive, int64_t owner);

/* One item: the namespace's list, oldest first. */
struct trash_item {
	uint64_t id;	   /* changelog version of the removal */
	struct node *node; /* a file (TRASHED) or a tree's root (DETACHED) */
	uint64_t parent;   /* where it was */
	char *path;	   /* and its full path then ("/a/b/name") */
	const char *name;  /* the last component, in path */
	int64_t deleted_at;
	int64_t expires_at;
	uint64_t nodes;
	struct trash_item *next;
};

/* Item @id, or NULL. */
struct trash_item *ns_trash_find(const struct ns *ns, uint64_t id);

/* Checkpoint: iterate, read an item, load one, free them all. */
int ns_trash_foreach(const struct ns *ns,
		     int (*fn)(const struct trash_item *t, void *arg),
		     void *arg);
void ns_trash_item(const struct trash_item *t, uint64_t *id, uint64_t *ino,
		   uint64_t *parent, const char **path, int64_t *deleted,
		   int64_t *expires, uint64_t *nodes);
int ns_trash_load(struct ns *ns, uint64_t id, uint64_t ino, uint64_t parent,
		  const char *path, size_t len, int64_t deleted,
		  int64_t expires, uint64_t nodes);
void ns_trash_release(struct ns *ns);

#endif
