/*
 * The master's namespace: every inode ("node") and every directory entry
 * ("edge") of the filesystem, in memory, and the primitive changes to them.
 *
 * This layer knows structure, not policy: it refuses what would corrupt the
 * tree (a name that exists, a directory that is not empty, a rename into
 * its own subtree) but checks no permission and decides no inode number,
 * edge id or time. The request handlers above (fsops.c and the others)
 * do, and commit the change with master_commit() (req.c): the changelog
 * records it and mutation.c applies it through these functions, live and
 * in replay alike. Every change function either succeeds completely or changes
 * nothing, and the same call with the same arguments has the same effect,
 * so a changelog replay rebuilds exactly the state that was acknowledged.
 *
 * All functions run on the master's loop thread; nothing here locks.
 */
#ifndef SWEEPFS_MASTER_NAMESPACE_H
#define SWEEPFS_MASTER_NAMESPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "chunks.h"
#include "frame.h"
#include "htab.h"
#include "lct.h"
#include "replies.h"
#include "slab.h"

#define NS_ROOT_INO 1

/* Hard links per inode, as ext4 allows. */
#define NS_LINK_MAX 65000u

/* node.flags */
#define NODE_ORPHAN 0x0001 /* no name left; kept while a session has it open */
#define NODE_OPEN 0x0002   /* some session has it open (see session.c) */
#define NODE_XATTR 0x0004  /* has extended attributes in ns.xattrs */
#define NODE_SNAPSHOT 0x0008 /* eattr "snapshot" */
#define NODE_DETACHED 0x0010 /* the root of a removed (detached) tree */
#define NODE_TRASHED 0x0020  /* a removed file kept in the trash */
#define NODE_DELEG 0x0040    /* a directory delegated to a mount (deleg.h) */
/* A directory of a detached tree that the purge is emptying: its index of
 * names is gone, and no name in it is found or added (nsi_dir_unindex()). */
#define NODE_PURGING 0x0080
/*
 * A delegation's tag (deleg.c): on a delegated directory, its own; on a
 * file, that of the delegated directory it was an entry of when marked
 * (NODE_DELEG_TAG_ANY: of more than one; 0: none). A mark whose tag no
 * delegation has now means nothing, so ending a delegation unmarks
 * nothing. Directories are never marked: they know their parent.
 */
#define NODE_DELEG_TAG 0xF000
#define NODE_DELEG_TAG_SHIFT 12
#define NODE_DELEG_TAG_ANY 15u
/* Flags of the running master only: not in checkpoints. */
#define NODE_RUNTIME_FLAGS (NODE_DELEG | NODE_DELEG_TAG | NODE_PURGING)
/*
 * Copies wanted of a file's chunks (1..NS_GOAL_MAX; 0: the master's
 * default goal; the four bits could hold 15).
 * A new node takes its directory's; a directory's is only that default
 * for what is made in it. Kept in the flags: the node has no room left.
 */
#define NODE_GOAL_MASK 0x0F00
#define NODE_GOAL_SHIFT 8
#define NS_GOAL_MAX SW_GOAL_MAX /* frame.h */

/*
 * An inode: 64 bytes, from a slab. Sizes matter here: at 100 million files
 * every byte of this struct is 100 MB of RAM.
 */
struct node {
	uint64_t ino;
	int64_t atime; /* nanoseconds since the epoch */
	int64_t mtime;
	int64_t ctime;
	uint64_t size; /* regular file: bytes; symlink: target length */
	union {
		struct dir *dir; /* S_IFDIR */
		char *target;	 /* S_IFLNK: size bytes, not NUL-terminated */
		uint64_t rdev;	 /* S_IFCHR, S_IFBLK */
		struct ctab *chunks; /* S_IFREG: chunk slots, NULL: none */
	} u;
	uint32_t mode; /* S_IFMT | permission bits */
	uint32_t uid;
	uint32_t gid;
	uint16_t nlink; /* names of a non-directory; see ns_nlink() */
	uint16_t flags; /* NODE_* */
};

/* edge.flags */
#define EDGE_INDEXED 0x01  /* in its directory's cookie index */
#define EDGE_SNAPSHOT 0x02 /* eattr "snapshot", on the name (see below) */

/*
 * A name in a directory. Edges of a directory form a list ordered by id;
 * ids come from one counter that only grows, so a new edge is always the
 * last. The id is the readdir cookie. An edge that is unlinked while a
 * readdir cursor rests on it stays in the list as a tombstone (child NULL)
 * until the cursor moves on, so resuming from it is O(1).
 */
struct edge {
	struct edge *next;  /* higher ids */
	struct edge *prev;  /* lower ids */
	struct node *child; /* NULL for a tombstone */
	uint64_t id;
	uint16_t pins; /* cursors resting on this edge */
	uint8_t flags; /* EDGE_* */
	uint8_t namelen;
	char name[]; /* namelen bytes, no NUL */
};

/*
 * A recursive snapshot flag, set in O(1) (nsattr.c): every name in the
 * tree under @dir whose edge id is below @below is flagged, whatever its
 * own EDGE_SNAPSHOT says. Edge ids only grow, so the names made later
 * (renamed in, copied in, restored) are exactly those at or above it.
 * Written out on each name ("settled") only when something needs the
 * bits: a clear, a directory moved across the tree's edge, rmsnapshot -f.
 */
struct ns_snapmark {
	struct node *dir; /* the tree's top directory */
	uint64_t below;	  /* ns.next_edge when the flag was set */
	uint64_t fresh;	  /* unflagged names added in the tree since */
};

/* Marks at once; one more is set by the walk (the cap bounds what every
 * name added pays: one ancestor look-up per mark). */
#define NS_SNAPMARKS 8

struct cursor;
struct watch;
struct purge_root;
struct trash_item;
struct sw_prefault;

/* What a directory node holds besides the node itself. */
struct dir {
	struct node *parent; /* ".."; the root is its own parent */
	struct edge *head;   /* lowest id, may be a tombstone */
	struct edge *tail;   /* highest id */
	struct htab names;   /* live edges by name, once the dir is big */
	struct edge **index; /* every NS_INDEX_STRIDE-th edge, by id */
	uint32_t index_len;
	uint32_t index_cap;   /* slots allocated, index_skip included */
	uint32_t index_skip;  /* dropped from the front: index is that far
			      * into its allocation */
	uint32_t since_index; /* edges appended since the last index entry */
	uint32_t tombstones;  /* tombstones in the list */
	uint64_t nentries;    /* live edges */
	uint64_t nsubdirs;    /* live edges to directories */
	uint64_t nplain;      /* live edges without EDGE_SNAPSHOT */
	/* This directory in the link-cut forest of all directories (lct.h),
	 * its counters nentries and nplain: which tree it is in, whether
	 * it is below another, and the names below it cost O(log n),
	 * whatever the depth (ns_detached(), ns_is_ancestor(),
	 * ns_tree_names()). */
	struct lct_node lct;
	uint32_t trashtime;	/* seconds removed entries stay in trash */
	struct cursor *cursors; /* cursors resting in this directory */
	struct watch *watchers; /* sessions caching the listing (watch.c) */
};

/* Directories with more entries than this get a hash table of names. */
#define NS_DIR_HASH_MIN 8
/* Sampling interval of the cookie index (see ns_dir_seek()). */
#define NS_INDEX_STRIDE 64

/*
 * A readdir position: "after edge pos" in directory dir. Cursors belong to
 * sessions; the namespace pins their edge and, when a directory goes away,
 * clears them (dir becomes NULL).
 */
struct cursor {
	struct node *dir;     /* NULL: not set, or the directory is gone */
	struct edge *pos;     /* last edge served; NULL: before the first */
	struct cursor *dnext; /* in dir->u.dir->cursors */
	struct cursor *dprev;
};

#define NS_EDGE_CLASSES 33 /* edge sizes 40..296 in steps of 8 */

struct xattr_set;

/* Bytes of the cluster's identity. */
#define NS_UNNAMED_MAX 8
#define NS_CLUSTER_ID_LEN 16

struct ns {
	struct htab inodes;  /* all nodes by ino */
	struct htab orphans; /* nodes with NODE_ORPHAN, by ino */
	struct htab xattrs;  /* struct xattr_set by ino */
	struct slab node_slab;
	struct slab edge_slab[NS_EDGE_CLASSES];
	struct node *root;
	/* The directory ns_rename() is moving, while it is: dir_add() and
	 * dir_remove() leave its place in the directory forest (lct.h) to
	 * the rename. */
	struct node *moving;
	uint64_t next_ino;  /* lowest inode number never used */
	uint64_t next_edge; /* lowest edge id never used */
	uint64_t version;   /* changelog version of the last change */
	/* The cluster's identity (proto/meta.proto ClusterId); all zero
	 * until the first master to lead journals one (master_lead()). */
	uint8_t cluster_id[NS_CLUSTER_ID_LEN];
	/* The version of the change that made it (0: loaded with a
	 * checkpoint, durable already): hellos say the id only once that
	 * change is durable, so that no chunkserver keeps an id a failover
	 * loses (session_hello()). */
	uint64_t cluster_id_version;
	uint64_t nnodes;    /* all live nodes, orphans included */
	uint64_t ndirs;	    /* of which directories */
	uint64_t nedges;    /* live edges */
	uint64_t dir_moves; /* directory names removed: paths may differ */
	/* Names added to a file marked for a delegation (NODE_DELEG_TAG):
	 * a grant walked in slices is refused if one came meanwhile. */
	uint64_t marked_links;
	size_t dir_bytes; /* struct dir and index arrays */
	/* Directories whose name table is being resized: ns_housekeep()
	 * moves them on, so that the old array does not stay allocated
	 * for as long as nothing else touches the directory. */
	struct dir **resizing;
	size_t nresizing, resizing_cap;
	size_t misc_bytes; /* symlink targets, xattrs, chunk slots */
	/* While a checkpoint loads: memory faulted in on a second thread
	 * (nsload.c, prefault.h), or NULL. */
	struct sw_prefault *prefault;
	bool slab_ahead; /* it asked slab_ahead() for a range */

	/* Detached subtrees waiting to be freed (purge.c), oldest first. */
	struct purge_root *purge_head;
	struct purge_root *purge_tail;
	/* The snapshot being copied, if any (nscopy.c); chunks numbered
	 * below copy_chunk_start are held for it. */
	struct ns_copy *copy;
	uint64_t copy_chunk_start;
	int64_t copy_last_rc;	/* how the last one ended: nodes or -errno */
	uint64_t copy_last_ino; /* and its root */
	/* Recursive snapshot flags not yet written on each name
	 * (nsattr.c): a handful, so that looking them all up is O(1). */
	struct ns_snapmark snapmarks[NS_SNAPMARKS];
	unsigned nsnapmarks;
	/* Removed files and trees kept until they expire (trash.c). */
	struct trash_item *trash_head;
	struct trash_item *trash_tail;
	uint64_t ntrash;
	/* The same items in two trees and by the inode of their node
	 * (trash.h): a listing or a chown costs O(log n), not a walk. */
	struct trash_item *trash_by_id;
	struct trash_item *trash_by_owner;
	struct htab trash_inos;
	uint64_t purge_roots;
	uint64_t purged;       /* nodes freed by purges since start */
	uint64_t copied;       /* nodes made by snapshot copies since start */
	uint64_t snap_settled; /* marks written out since start */
	uint64_t snap_walked;  /* names visited by flag walks since start */

	/* What clients' requests did, for those sent again (replies.h). */
	struct replies replies;

	/* File data (chunks.h). */
	struct htab chunks; /* struct chunk by id */
	struct slab chunk_slab;
	uint64_t next_chunk; /* lowest chunk id never used */
	/* Lowest chunk id above every one a change of this metadata named
	 * (applied, replayed, or loaded from a checkpoint), never raised by
	 * what a chunkserver reports: below it, a chunk not in the table is
	 * gone for good (ns_chunk_dead()). */
	uint64_t next_chunk_named;
	/* Ids below next_chunk_named that no change named: skipped because
	 * a chunkserver reported a file numbered ahead (csrv.c raises
	 * next_chunk), seen as a gap before a chunk a change named. Ranges
	 * [lo, hi) in increasing order; past NS_UNNAMED_MAX the two closest
	 * are merged (a wider range only sends more files by stray_grace). */
	struct ns_range {
		uint64_t lo, hi;
	} chunk_unnamed[NS_UNNAMED_MAX + 1]; /* + 1: one being merged in */
	unsigned n_unnamed;
	uint64_t nchunks;
	struct htab intents; /* struct chunk_intent by chunk id */
	/* Told when a chunk loses its last reference, just before it is
	 * freed, so that its copies are deleted from the chunkservers. */
	void (*chunk_gone)(void *arg, const struct chunk *c);
	/* Told when a directory is about to be freed (watches go). */
	void (*dir_gone)(void *arg, struct node *dir);
	/* Told when any node is about to be freed (its file locks go);
	 * NULL during start-up. */
	void (*node_gone)(void *arg, uint64_t ino);
	/* Told when a snapshot copy takes a reference to @c (nscopy.c):
	 * from now on it is shared, and nobody may write it in place
	 * (dataops.c takes its write lease back). NULL during start-up. */
	void (*chunk_shared)(void *arg, struct chunk *c);
	void *hook_arg;
};

static inline unsigned ns_goal(const struct node *n)
{
	return (n->flags & NODE_GOAL_MASK) >> NODE_GOAL_SHIFT;
}

/*
 * The recursive setters below change only nodes of owner @owner below
 * the top (NS_ANY_OWNER: all), as MooseFS's mfssetgoal -r does for
 * whoever is not root: a user's recursive change stops at what is not
 * its own, though the walk goes on through it.
 */
#define NS_ANY_OWNER (-1LL)

/*
 * Set @n's goal (0: the default) and, with @recursive and a directory,
 * that of everything below owned by @owner; files' chunks follow
 * (chunk_goal_add()). Returns nodes changed, or -ENOMEM (for the walk's
 * stack) with nothing changed. O(names below).
 */
int64_t ns_set_goal(struct ns *ns, struct node *n, unsigned goal,
		    bool recursive, int64_t owner);

/* Whether @c must not be written in place: a snapshot being copied may
 * name it (chunks.h). */
static inline bool ns_chunk_frozen(const struct ns *ns, const struct chunk *c)
{
	return c->id < ns->copy_chunk_start;
}

/*
 * Set up an empty namespace whose root directory (inode 1, mode 0755, owned
 * by root) has all three times @now. Returns 0 or -ENOMEM.
 */
int ns_init(struct ns *ns, int64_t now);

/* Free everything @ns holds. */
void ns_release(struct ns *ns);

/*
 * A digest of the namespace's content: every node's type, mode, owner,
 * size, times (not atime), links, symlink target or device, chunk ids,
 * and every directory's names with the inodes they name; not how the
 * structures happen to be laid out in memory. Two masters that applied
 * the same changes have the same digest (a group's members are compared
 * so).
 */
uint64_t ns_digest(const struct ns *ns);

/* The node numbered @ino, or NULL. */
struct node *ns_get(const struct ns *ns, uint64_t ino);

/* The live edge named @name (@len bytes) in directory @dir, or NULL. */
struct edge *ns_lookup(const struct ns *ns, const struct node *dir,
		       const char *name, size_t len);

/* Entries ns_lookup() has compared walking a directory's list (one
 * without an index of names), in this process: for tests that hold that
 * a way in walks no big directory. */
uint64_t ns_lookup_walked(void);

/* Whether the metadata has its cluster identity yet. */
static inline bool ns_has_cluster_id(const struct ns *ns)
{
	uint8_t any = 0;

	for (size_t i = 0; i < NS_CLUSTER_ID_LEN; i++)
		any |= ns->cluster_id[i];
	return any != 0;
}

static inline bool ns_is_dir(const struct node *n)
{
	return S_ISDIR(n->mode);
}

/* st_nlink as reported: 2 + subdirectories for a directory (1 past the
 * 16-bit range, as ext4 does), the name count otherwise. */
uint32_t ns_nlink(const struct node *n);

/*
 * Whether directory @dir is out of the namespace: in a tree removed by
 * rmr (being purged, or in the trash) or in a snapshot copy not yet
 * named: its tree's top is not the root. O(log n) amortized, whatever
 * the depth. Such a directory takes no new names.
 */
bool ns_detached(const struct node *dir);

/* Names in directory @dir and below it, and of them those without the
 * snapshot flag. O(log n) amortized (rmr, rmsnapshot, snapshots). */
uint64_t ns_tree_names(const struct node *dir);
uint64_t ns_tree_plain(const struct node *dir);

/* Whether @n is out of the namespace as far as it can tell: a detached
 * directory, or a file that is open-unlinked or in the trash. */
bool ns_gone(const struct node *n);

/*
 * Set found[i] for each of the @n inodes @want (sorted) that a
 * non-directory reached by names below directory @root has; returns how
 * many were found. O(subtree) at most: it stops once all are found.
 */
size_t ns_subtree_find(const struct node *root, const uint64_t *want, size_t n,
		       bool *found);

/* Whether @a is @b or one of @b's ancestors. Both are directories.
 * O(log n) amortized. */
bool ns_is_ancestor(const struct node *a, const struct node *b);

/*
 * Everything a new node needs. @mode carries the type: S_IFREG, S_IFDIR,
 * S_IFLNK (with @target/@target_len), S_IFCHR/S_IFBLK (with @rdev),
 * S_IFIFO or S_IFSOCK.
 */
struct ns_create_args {
	uint64_t ino;
	uint64_t edge;
	uint32_t mode;
	uint32_t uid;
	uint32_t gid;
	uint64_t rdev;
	const char *target;
	size_t target_len;
	int64_t now;
};

/*
 * Create node @a->ino named @name in directory @dir. Returns 0 with the
 * node in *@out (may be NULL), -EEXIST if the name exists, -ENOTDIR if @dir
 * is not a directory, -EEXIST if @a->ino is taken, -EINVAL for an unknown
 * type, -ENOMEM.
 */
int ns_create(struct ns *ns, struct node *dir, const char *name, size_t len,
	      const struct ns_create_args *a, struct node **out);

/*
 * Give @n another name. Returns 0, -EEXIST, -ENOTDIR, -EPERM (@n is a
 * directory), -EMLINK, -ENOMEM.
 */
int ns_link(struct ns *ns, struct node *n, struct node *dir, const char *name,
	    size_t len, uint64_t edge, int64_t now);

/*
 * Remove name @name from @dir. A directory must be empty. The node loses a
 * link; when none is left it is freed, or with @keep becomes an orphan.
 * Returns 0, -ENOENT, -ENOTDIR, -ENOTEMPTY, -EBUSY (the root).
 */
int ns_unlink(struct ns *ns, struct node *dir, const char *name, size_t len,
	      bool keep, int64_t now);

/*
 * rename(2) with RENAME_NOREPLACE / RENAME_EXCHANGE (@flags). The moved
 * entry gets the new edge id @edge (unused for an exchange, which swaps
 * the nodes behind two existing names). A replaced node that loses its
 * last name is freed, or with @keep kept as an orphan. Returns 0 (also when
 * both names already refer to the same node: nothing happens), -ENOENT,
 * -EEXIST, -ENOTDIR, -EISDIR, -ENOTEMPTY, -EINVAL (a directory into its own
 * subtree, or bad flags), -EBUSY (the root), -ENOMEM.
 */
int ns_rename(struct ns *ns, struct node *sdir, const char *sname, size_t slen,
	      struct node *ddir, const char *dname, size_t dlen, unsigned flags,
	      uint64_t edge, bool keep, int64_t now);

/* Bits of ns_setattr's @valid, the same as SetattrValid on the wire. */
#define NS_SET_MODE 1u
#define NS_SET_UID 2u
#define NS_SET_GID 4u
#define NS_SET_SIZE 8u
#define NS_SET_ATIME 16u
#define NS_SET_MTIME 32u

struct ns_setattr_args {
	unsigned valid;
	uint32_t mode; /* permission bits only; the type is kept */
	uint32_t uid;
	uint32_t gid;
	uint64_t size;
	int64_t atime;
	int64_t mtime;
	int64_t now; /* the new ctime */
};

/*
 * Set what @a->valid names, and ctime. Returns 0, -EISDIR (size of a
 * directory), -EINVAL (size of something that is neither file nor
 * directory).
 */
int ns_setattr(struct ns *ns, struct node *n, const struct ns_setattr_args *a);

/*
 * Take directory @name out of @dir with its whole subtree, which joins the
 * purge queue as purge @id: invisible at once, freed by the purge later.
 * Its root gets NODE_DETACHED and no parent, which makes every directory
 * in it ns_detached() (nothing new goes in). Returns 0, -ENOENT, -ENOTDIR
 * (@dir or the entry is not a directory), -ENOMEM. O(1) whatever the
 * tree's size.
 */
int ns_detach(struct ns *ns, struct node *dir, const char *name, size_t len,
	      uint64_t id, int64_t now);

/*
 * The purge's walk (purge.c) over the detached trees, oldest first, each
 * deepest first: from its current directory, the first entry; a directory
 * is entered; anything else is unlinked (freed with its last name); an
 * empty directory is freed and its parent becomes current. Only the purge
 * changes a detached tree, and a directory's entries keep their order
 * (edge ids) on every member of a group and through checkpoints, so the
 * walk is the same everywhere: the changelog says how many changes it
 * made (PurgeSteps), not which.
 */
struct ns_purge_step {
	struct node *dir;
	struct edge *e;	     /* the entry to remove; NULL: free dir */
	uint64_t ino;	     /* ns_purge_take(): the node it took away */
	uint64_t done;	     /* ... the purge id of a tree it finished */
	uint64_t done_nodes; /* ... and how many nodes that tree had */
};

/* The next change, going down to it: false when nothing is detached. */
bool ns_purge_next(struct ns *ns, struct ns_purge_step *s);

/* Make change @s, which ns_purge_next() just found. */
void ns_purge_take(struct ns *ns, struct ns_purge_step *s, int64_t now);

/*
 * Reading ahead of a run of steps: start the cache misses the next few
 * will take (nspurge.c). Zeroed before the run; called with each step
 * ns_purge_next() found, before ns_purge_take() makes it. Only steps may
 * change the namespace between two calls: after any other change (an
 * open file unlinked through the changelog), zero it again.
 */
struct ns_purge_ahead {
	const struct node *dir; /* the directory they are in; NULL: none */
	struct edge *far;	/* NS_PURGE_AHEAD entries past the step's */
	struct edge *near;	/* NS_PURGE_AHEAD / 2 past it */
};

void ns_purge_ahead(const struct ns *ns, struct ns_purge_ahead *a,
		    const struct ns_purge_step *s);

/* The detached trees' figures: nodes left to free (each tree's count
 * when detached, less what it freed, at least 1 while it lasts), and the
 * purge id (changelog version of its Detach) of the oldest and of the
 * newest, or 0 when none is detached. */
uint64_t ns_purge_left(const struct ns *ns);
uint64_t ns_purge_oldest(const struct ns *ns);
uint64_t ns_purge_newest(const struct ns *ns);

/* Call @fn(root, arg) on the root of each detached tree, oldest first,
 * until it returns nonzero, which is returned (fsck reaches them). */
int ns_purge_foreach_root(struct ns *ns,
			  int (*fn)(struct node *root, void *arg), void *arg);

/*
 * Walk every edge below directory @root read-only, an edge then the
 * edges under it, calling @fn(dir, e, arg) until it returns nonzero,
 * which is returned; -ENOMEM when the walk's stack cannot grow.
 * O(entries). (A walk that changes the tree is the core's own.)
 */
int ns_walk(struct node *root,
	    int (*fn)(struct node *dir, struct edge *e, void *arg), void *arg);

/*
 * Make the walk's next @count changes, as a PurgeSteps record says;
 * -EILSEQ (and the namespace is no longer the group's) when they are not
 * there or the last does not take inode @last.
 */
int ns_purge_steps(struct ns *ns, uint64_t count, uint64_t last, int64_t now);

/*
 * The snapshot flag lives on names (edges), not inodes, so that each
 * directory can count its unflagged entries and "is this whole tree
 * flagged" costs a walk over directories only (rmsnapshot). It differs
 * from a flag on the inode only for hard links, each name of which is
 * flagged on its own.
 */
void ns_edge_flag(struct node *dir, struct edge *e, bool snapshot);

/*
 * Set or clear the snapshot flag of @name in @dir and, with @recursive,
 * of every name below it whose node @owner owns (NS_ANY_OWNER: all).
 * A recursive set for all owners with @below (the leader's next_edge
 * when it was asked, from the changelog; 0: unknown) costs O(1): the
 * tree gets a mark (struct ns_snapmark) instead of a walk, unless
 * NS_SNAPMARKS are taken. A recursive clear for all owners drops the
 * marks under the tree and walks it only if a name below has a bit of
 * its own: O(marks) for a tree a mark flagged. Anything else is
 * O(names in the tree). A clear writes out the marks over the tree's
 * parent first. Returns the number of names changed (for a mark set or
 * dropped: at most that many), or -ENOENT / -ENOTDIR / -ENOMEM (nothing
 * changed).
 */
int64_t ns_set_eattr(struct ns *ns, struct node *dir, const char *name,
		     size_t len, bool snapshot, bool recursive, int64_t owner,
		     uint64_t below);

/* Whether name @e of @dir carries the snapshot flag: its own bit, or a
 * mark over it. O(marks). */
bool ns_edge_snapshot(const struct ns *ns, const struct node *dir,
		      const struct edge *e);

/* The names of @dir whose edge ids are below this are flagged by a mark
 * (0: none). What a walk over all names (a checkpoint, a snapshot's
 * image) asks once per directory. O(marks). */
uint64_t ns_snap_below(const struct ns *ns, const struct node *dir);

/* Whether every name below directory @root is flagged (rmsnapshot):
 * O(log n) from the counts or a mark over it, else the marks touching
 * the tree are written out first (O(names)). */
bool ns_tree_flagged(struct ns *ns, struct node *root);

/* Write the marks over or under directory @top out on every name, so
 * that the bits alone say what is flagged there (rmsnapshot -f walks
 * them). 0 or -ENOMEM (the marks not written out stay, still right). */
int ns_snap_settle(struct ns *ns, struct node *top);

/* Marks now and marks written out since start (tests: counting). */
void ns_snap_counts(const struct ns *ns, unsigned *marks, uint64_t *settled,
		    uint64_t *walked);

/*
 * Snapshots (nscopy.c): a copy made from an image of the source tree, in
 * slices. ns_copy_image() writes the image of the tree at @src into @out
 * (in memory), ns_copy_write() to @fd (from a forked child); both return
 * 0 or -errno. ns_copy_record() measures the first record of @len bytes:
 * its length, 0 if it is not all there yet, or -EUCLEAN.
 *
 * ns_copy_begin() starts copy @id, to be named @name in directory
 * @parent; chunks numbered below @chunk_start are held for it (see
 * ns_chunk_frozen()). -EBUSY while another copy is under way.
 * ns_copy_part() applies whole records, numbering new inodes from
 * @ino_base and new edges from @edge_base; an error sticks (returned, and
 * the copy fails at its end). ns_copy_end() names the copy (new edge
 * @edge), unless @abort_rc or an earlier error or the name being taken
 * since: then the copy is given to the purge. Returns the number of nodes
 * copied with the root's inode in *@ino, or -errno. Deterministic, like
 * everything here: the same records on the same namespace make the same
 * copy.
 */
#define NS_COPY_RECORD_MAX (1u << 25) /* bytes a record may take, at most */
struct sw_buf;
int ns_copy_image(const struct ns *ns, const struct node *src,
		  struct sw_buf *out);
int ns_copy_write(const struct ns *ns, const struct node *src, int fd);
ssize_t ns_copy_record(const uint8_t *p, size_t len);
int ns_copy_begin(struct ns *ns, uint64_t id, uint64_t parent, const char *name,
		  size_t len, uint64_t chunk_start);
int ns_copy_part(struct ns *ns, uint64_t id, const uint8_t *data, size_t len,
		 uint64_t ino_base, uint64_t edge_base);
int64_t ns_copy_end(struct ns *ns, uint64_t id, uint64_t edge, int abort_rc,
		    int64_t now, uint64_t *ino);
/* Whether a copy is under way (its id into *@id, if not NULL); the nodes
 * it has so far. */
bool ns_copy_active(const struct ns *ns, uint64_t *id);
uint64_t ns_copy_nodes(const struct ns *ns);
/* The copy's root so far (NULL: none), and the chunks held for it. */
struct node *ns_copy_root(const struct ns *ns);
size_t ns_copy_held(const struct ns *ns, const uint64_t **ids);
/* Free a copy's state without finishing it (ns_release()). */
void ns_copy_release(struct ns *ns);
/* Keep chunk @chunk, which lost its last reference, for the copy. */
int ns_copy_hold(struct ns *ns, uint64_t chunk);

/* Free orphan @n. Returns 0 or -EINVAL when @n is not an orphan. */
int ns_release_orphan(struct ns *ns, struct node *n);

/*
 * Extended attributes. Names and values are byte strings; the caller has
 * checked their sizes and the create/replace flags.
 *
 * ns_xattr_set() replaces or adds, and ns_xattr_remove() deletes (-ENODATA
 * if absent); both set ctime to @now. ns_xattr_get() points *@value at the
 * stored bytes, valid until the next change to @n. ns_xattr_list() writes
 * the NUL-terminated names into @buf (@size bytes, NULL to measure) and
 * returns the length needed, or -ERANGE if @buf is too small.
 */
int ns_xattr_set(struct ns *ns, struct node *n, const void *name, size_t nlen,
		 const void *value, size_t vlen, int64_t now);
int ns_xattr_get(const struct ns *ns, const struct node *n, const void *name,
		 size_t nlen, const void **value, size_t *vlen);
int ns_xattr_remove(struct ns *ns, struct node *n, const void *name,
		    size_t nlen, int64_t now);
long ns_xattr_list(const struct ns *ns, const struct node *n, char *buf,
		   size_t size);

/*
 * Readdir positions.
 *
 * ns_dir_seek() returns the first edge (live or tombstone) whose id is
 * greater than @cookie, or NULL at the end: O(log n) through the sparse
 * index, plus at most NS_INDEX_STRIDE steps. ns_edge_live() skips
 * tombstones from @e on.
 */
struct edge *ns_dir_seek(const struct node *dir, uint64_t cookie);

static inline struct edge *ns_edge_live(struct edge *e)
{
	while (e && !e->child)
		e = e->next;
	return e;
}

/* An unset cursor. */
static inline void ns_cursor_init(struct cursor *c)
{
	c->dir = NULL;
	c->pos = NULL;
	c->dnext = c->dprev = NULL;
}

/*
 * Rest cursor @c on edge @pos of @dir (NULL: before the first entry),
 * pinning it and unpinning where @c rested before.
 */
void ns_cursor_set(struct ns *ns, struct cursor *c, struct node *dir,
		   struct edge *pos);

/* Unpin and unset @c. */
void ns_cursor_clear(struct ns *ns, struct cursor *c);

/* Bytes of memory the namespace holds. */
size_t ns_memory(const struct ns *ns);

/*
 * What replaying the changes applied so far would cost, in changes: one
 * per change (the version) plus one per node a purge freed or a snapshot
 * copy made since start, since one PurgeSteps change frees up to a
 * slice's worth of nodes and one copy change makes a whole tree's. Only
 * differences mean something: the value between two moments bounds the
 * replay of the changes made between them (master.c checkpoints on it).
 */
uint64_t ns_replay_work(const struct ns *ns);

/*
 * Call @fn for every node (order unspecified); stops at and returns the
 * first non-zero value @fn returns. @fn must not change the namespace.
 */
int ns_foreach_node(const struct ns *ns, int (*fn)(void *node, void *arg),
		    void *arg);

/*
 * Call @fn for every xattr of @n, with name and value; stops at a non-zero
 * return. For the checkpoint.
 */
int ns_xattr_foreach(const struct ns *ns, const struct node *n,
		     int (*fn)(const void *name, size_t nlen, const void *value,
			       size_t vlen, void *arg),
		     void *arg);

/*
 * Loading a checkpoint: room first for as many nodes, chunks, xattr sets
 * and orphans as the checkpoint says it holds (ns_load_reserve(); the
 * tables are written in hash order, htab_reserve() says why), then add
 * node @n (all fields set; a directory's dir part empty) with no name,
 * then its names with ns_load_edge() in id order per directory. The
 * checkpoint loader checks the result with ns_load_finish(), which links
 * orphans and checks counts. From ns_load_reserve() to ns_load_end(), a
 * second thread faults in the memory the load will write (prefault.h):
 * the tables as they are reserved, and the slab's next regions.
 */
int ns_load_reserve(struct ns *ns, uint64_t nodes, uint64_t chunks,
		    uint64_t xattr_sets, uint64_t orphans);
int ns_load_node(struct ns *ns, const struct node *n, const char *target,
		 struct node **out);
/*
 * ns_load_node() for a loader that has itself made sure no node @n->ino
 * is loaded yet (checkpoint.c keeps the nodes it loaded in an array by
 * inode number): no lookup in the inode table, which at millions of nodes
 * costs a cache miss per node it probes.
 */
int ns_load_node_new(struct ns *ns, const struct node *n, const char *target,
		     struct node **out);
/*
 * Size directory @dir's name table for the @count names about to be
 * loaded into it, once, rather than growing it a step at a time (each
 * step hashes every name again). 0 or -ENOMEM.
 */
int ns_load_dir_reserve(struct ns *ns, struct node *dir, uint64_t count);
int ns_load_edge(struct ns *ns, struct node *dir, struct node *child,
		 const char *name, size_t len, uint64_t edge, uint8_t flags);
/*
 * Hints for a loader that reads ahead of what it adds (a checkpoint, a
 * changelog replayed, a follower's log): start reading the inode table's
 * slot of node @ino, or the slot of name @name in @dir's name table (if
 * it has one), so that adding or looking up that node or name a few
 * records later does not wait for the cache miss. They change nothing;
 * a wrong guess costs one wasted read.
 */
void ns_prefetch(const struct ns *ns, uint64_t ino);
void ns_prefetch_name(const struct node *dir, const char *name, size_t len);

/*
 * The next stage of ns_prefetch_name(), once its slot has come in: find
 * entry @name of @dir and start reading what removing it touches, its
 * node's slot in the inode table and the elements after the name in the
 * directory's table (what a deletion there shifts). Then the clusters
 * alone, for whoever knows the node and the name already and read their
 * slots before (the purge's walk). They change nothing.
 */
void ns_prefetch_entry(const struct ns *ns, const struct node *dir,
		       const char *name, size_t len);
void ns_prefetch_cluster(const struct ns *ns, uint64_t ino);
void ns_prefetch_name_cluster(const struct node *dir, const char *name,
			      size_t len);
int ns_load_finish(struct ns *ns);
/*
 * A replay of @bytes of changelog follows: fault in ahead, on a second
 * thread, the memory its creates may take (a guess from @bytes; until
 * ns_load_end()).
 */
void ns_replay_ahead(struct ns *ns, uint64_t bytes);
/*
 * The load (or replay) is over, done or not: the thread that faulted its
 * memory in ahead stops, and what it faulted in beyond what the load took
 * goes back. ns_load_finish() and ns_release() call it; calling it again
 * does nothing.
 */
void ns_load_end(struct ns *ns);

/* Advance internal housekeeping (hash table resizes) by a bounded step;
 * true while work is left. */
bool ns_housekeep(struct ns *ns);

/* Hash tables whose resize is under way (ns_housekeep() ends them). */
size_t ns_resizing(const struct ns *ns);

#endif
