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

/*
 * One item: in the namespace's list, oldest first, and in two trees
 * (nstrash.c) so that finding one and listing a page of them cost what
 * they return, not the size of the trash: all items by id, and all items
 * by owner (@uid, a copy of the node's), then id. Both are treaps whose
 * priorities are a keyed hash of the id, so that no sequence of removals
 * a client makes can unbalance them; a tree costs two pointers an item.
 */
struct trash_item {
	uint64_t id;	   /* changelog version of the removal */
	struct node *node; /* a file (TRASHED) or a tree's root (DETACHED) */
	uint64_t parent;   /* where it was */
	char *path;	   /* and its full path then ("/a/b/name") */
	const char *name;  /* the last component, in path */
	int64_t deleted_at;
	int64_t expires_at;
	uint64_t nodes;
	struct trash_item *next;	/* in the list */
	struct trash_item *by_id[2];	/* children in ns->trash_by_id */
	struct trash_item *by_owner[2]; /* children in ns->trash_by_owner,
					 * keyed by uid then id */
	uint32_t uid; /* the key of the tree by owner: node->uid when
		       * added, then set by nsi_trash_chown() only */
};

/*
 * A page of the trash for one caller (ns_trash_page()): the items after
 * a cursor, in order of id, each offered to @visible and then @take until
 * one of them says stop or @max_visits items were looked at.
 */
struct ns_trash_page {
	uint64_t after;	     /* in: items with an id above this one */
	int64_t owner;	     /* in: NS_ANY_OWNER, or the uid whose items */
	uint64_t max_visits; /* in: items looked at, at most (>= 1) */
	/* in: whether the caller may see @t (NULL: every item may be) */
	bool (*visible)(const struct trash_item *t, void *arg);
	/* in: take @t into the page: 0, or 1 when the page is full (@t not
	 * taken, the page ends before it) */
	int (*take)(const struct trash_item *t, void *arg);
	void *arg;
	uint64_t next;	 /* out: the cursor to go on from (@after of the
			  * next page): the last item taken or passed over */
	bool more;	 /* out: the page ended before the last item */
	uint64_t visits; /* out: items offered to @visible or @take */
	uint64_t steps;	 /* out: tree nodes stepped through on the way */
};

/*
 * Fill @p's page: O(log n + visits) whatever the size of the trash and
 * whatever @p->after says (an id that is no item, or one dropped since,
 * resumes at the next one above it). @visible and @take must not change
 * the trash.
 */
void ns_trash_page(const struct ns *ns, struct ns_trash_page *p);

/* Item @id, or NULL. O(log n). */
struct trash_item *ns_trash_find(const struct ns *ns, uint64_t id);

/*
 * The directories of @t's path (those before its name), one a call:
 * start with *@p = NULL; each call sets *@p and *@len to the next one's
 * name (empty names and ones longer than SW_NAME_MAX skipped), false
 * past the last. What a restore to where it was walks.
 */
bool ns_trash_path_next(const struct trash_item *t, const char **p,
			size_t *len);

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
