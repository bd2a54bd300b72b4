/*
 * Loading a checkpoint into the namespace (namespace.h, ns_load_*()):
 * nodes first, then the edges of each directory in id order, then a
 * pass that checks what was loaded. The reader is checkpoint.c; this is
 * what it builds with, through namespace_i.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chunks.h"
#include "hash.h"
#include "namespace.h"
#include "namespace_i.h"
#include "prefault.h"
#include "util.h"

/* Fewer nodes than this are checked on one thread. */
#define CHECK_THREAD_MIN 65536u
/* At most this is faulted in ahead of a replay (ns_replay_ahead()): the
 * nodes and names of 9 M creates, more than the changes between two
 * checkpoints (checkpoint_changes). */
#define REPLAY_AHEAD_MAX ((uint64_t)1 << 30)
/* A table smaller than this is faulted in by its own first writes. */
#define PREFAULT_TABLE_MIN (4u << 20)

/* Have the second thread fault @t's slots in with the loader's. */
static void prefault_table(struct ns *ns, const struct htab *t)
{
	size_t bytes = t->size * sizeof(*t->slots);

	if (bytes >= PREFAULT_TABLE_MIN)
		sw_prefault_now(ns->prefault, t->slots, bytes);
}

/*
 * Fault in, ahead, what the nodes and names about to be loaded take of
 * the slab: a node each, and a name each but the root (hard links have
 * more, names longer than the smallest class take more: what is not
 * faulted here is by its first write).
 */
static void prefault_slab(struct ns *ns, uint64_t nodes, uint64_t chunks)
{
	uint64_t bytes = nodes * ns->node_slab.objsize +
			 (nodes ? nodes - 1 : 0) * ns->edge_slab[0].objsize +
			 chunks * ns->chunk_slab.objsize;
	size_t len;
	void *p;

	if (ns->prefault && bytes >= PREFAULT_TABLE_MIN &&
	    bytes <= SIZE_MAX / 2 && slab_ahead((size_t)bytes, &p, &len)) {
		ns->slab_ahead = true;
		sw_prefault_ahead(ns->prefault, p, len);
	}
}

int ns_load_reserve(struct ns *ns, uint64_t nodes, uint64_t chunks,
		    uint64_t xattr_sets, uint64_t orphans)
{
	struct htab *t[] = { &ns->inodes, &ns->chunks, &ns->xattrs,
			     &ns->orphans };
	uint64_t n[] = { nodes, chunks, xattr_sets, orphans };
	int rc = 0;

	if (!ns->prefault && nodes * sizeof(struct node) >= PREFAULT_TABLE_MIN)
		ns->prefault = sw_prefault_start();
	for (size_t i = 0; i < SW_ARRAY_SIZE(t) && rc == 0; i++) {
		if (n[i] > SIZE_MAX / 2 / sizeof(void *))
			return -ENOMEM;
		if (n[i])
			rc = htab_reserve(t[i], (size_t)n[i]);
		if (rc == 0)
			prefault_table(ns, t[i]);
	}
	if (rc == 0)
		prefault_slab(ns, nodes, chunks);
	return rc;
}

static int load_node(struct ns *ns, const struct node *tmpl, const char *target,
		     bool check, struct node **out)
{
	struct node *n;
	int rc;

	if (!nsi_type_valid(tmpl->mode))
		return -EINVAL;
	if (tmpl->ino == NS_ROOT_INO) {
		if (!S_ISDIR(tmpl->mode))
			return -EINVAL;
		n = ns->root;
		n->mode = tmpl->mode;
		n->uid = tmpl->uid;
		n->gid = tmpl->gid;
		n->atime = tmpl->atime;
		n->mtime = tmpl->mtime;
		n->ctime = tmpl->ctime;
		n->flags = tmpl->flags & (uint16_t) ~(NODE_OPEN | NODE_XATTR);
		*out = n;
		return 0;
	}
	if (check && ns_get(ns, tmpl->ino))
		return -EEXIST;
	n = slab_alloc(&ns->node_slab);
	if (!n)
		return -ENOMEM;
	*n = *tmpl;
	n->flags &= (uint16_t) ~(NODE_OPEN | NODE_XATTR);
	memset(&n->u, 0, sizeof(n->u));
	rc = -ENOMEM;
	if (S_ISDIR(n->mode)) {
		n->u.dir = nsi_dir_new(ns);
		if (!n->u.dir)
			goto out_node;
	} else if (S_ISLNK(n->mode)) {
		n->u.target = malloc(n->size ? n->size : 1);
		if (!n->u.target)
			goto out_node;
		memcpy(n->u.target, target, n->size);
	} else if (S_ISCHR(n->mode) || S_ISBLK(n->mode)) {
		n->u.rdev = tmpl->u.rdev;
	}
	rc = htab_insert(&ns->inodes, sw_hash_u64(n->ino), n);
	if (rc < 0)
		goto out_parts;
	if ((n->flags & NODE_ORPHAN) &&
	    htab_insert(&ns->orphans, sw_hash_u64(n->ino), n) < 0) {
		htab_remove(&ns->inodes, sw_hash_u64(n->ino), n);
		goto out_parts;
	}
	nsi_note_ids(ns, n->ino, 0);
	nsi_node_count(ns, n);
	*out = n;
	return 0;

out_parts:
	nsi_node_parts_free(ns, n);
out_node:
	slab_free(&ns->node_slab, n);
	return rc;
}

int ns_load_node(struct ns *ns, const struct node *tmpl, const char *target,
		 struct node **out)
{
	return load_node(ns, tmpl, target, true, out);
}

int ns_load_node_new(struct ns *ns, const struct node *tmpl, const char *target,
		     struct node **out)
{
	return load_node(ns, tmpl, target, false, out);
}

int ns_load_dir_reserve(struct ns *ns, struct node *dir, uint64_t count)
{
	struct dir *d = dir->u.dir;
	size_t before = htab_bytes(&d->names);
	int rc;

	/* Small directories have no table (dir_add()). */
	if (count <= NS_DIR_HASH_MIN)
		return 0;
	if (count > SIZE_MAX / 2 / sizeof(void *))
		return -ENOMEM;
	rc = htab_reserve(&d->names, (size_t)count);
	ns->dir_bytes += htab_bytes(&d->names) - before;
	if (rc == 0)
		prefault_table(ns, &d->names);
	return rc;
}

int ns_load_edge(struct ns *ns, struct node *dir, struct node *child,
		 const char *name, size_t len, uint64_t edge, uint8_t flags)
{
	struct dir *d = dir->u.dir;
	int rc;

	if (!S_ISDIR(dir->mode) || child == ns->root)
		return -EINVAL;
	if (d->tail && d->tail->id >= edge)
		return -EINVAL;
	if (S_ISDIR(child->mode) && child->u.dir->parent)
		return -EINVAL; /* a second name for a directory */
	rc = nsi_dir_add_new(ns, dir, name, len, edge, flags, child);
	if (rc < 0)
		return rc;
	if (S_ISDIR(child->mode))
		child->u.dir->parent = dir;
	nsi_note_ids(ns, 0, edge);
	return 0;
}

/*
 * Every directory has a parent or is a detached tree's root, every file a
 * name or a reason to have none. Checkpoints before format 4 marked every
 * directory of a detached tree; only a tree's root carries the mark now:
 * unmarked here too, in the same pass (a pass over the nodes is a miss per
 * node at millions, so there is one).
 */
static int check_loaded(void *elem, void *arg)
{
	struct node *n = elem;

	(void)arg;
	if (S_ISDIR(n->mode)) {
		if (n->u.dir->parent)
			n->flags &= (uint16_t)~NODE_DETACHED;
		else if (!(n->flags & NODE_DETACHED))
			return -EINVAL;
		return 0;
	}
	if (n->nlink == 0 && !(n->flags & (NODE_ORPHAN | NODE_TRASHED)))
		return -EINVAL;
	return 0;
}

void ns_replay_ahead(struct ns *ns, uint64_t bytes)
{
	/*
	 * A create is some 60 bytes of changelog and 112 of node and name:
	 * twice the log, at most a quarter of the memory free and
	 * REPLAY_AHEAD_MAX (a log of other changes makes no nodes, and a
	 * container's limit is not what the host has free; what is not
	 * taken goes back at the end, but it is charged meanwhile).
	 */
	long pages = sysconf(_SC_AVPHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	uint64_t want = SW_MIN(bytes * 2, REPLAY_AHEAD_MAX), cap;
	size_t len;
	void *p;

	if (pages <= 0 || psize <= 0 || want < PREFAULT_TABLE_MIN)
		return;
	cap = (uint64_t)pages * (uint64_t)psize / 4;
	if (want > cap)
		want = cap;
	if (!ns->prefault)
		ns->prefault = sw_prefault_start();
	if (ns->prefault && slab_ahead((size_t)want, &p, &len)) {
		ns->slab_ahead = true;
		sw_prefault_ahead(ns->prefault, p, len);
	}
}

void ns_load_end(struct ns *ns)
{
	sw_prefault_stop(ns->prefault);
	ns->prefault = NULL;
	/* The slab's range is the process's: given back by the namespace
	 * that asked for it, not by any other released meanwhile. */
	if (ns->slab_ahead)
		slab_ahead_end();
	ns->slab_ahead = false;
}

/* Half of the check of every node, on a thread of its own. */
struct check_half {
	const struct htab *inodes;
	int rc;
};

static void *check_second_half(void *arg)
{
	struct check_half *h = arg;

	h->rc = htab_foreach_part(h->inodes, 1, 2, check_loaded, NULL);
	return NULL;
}

/*
 * check_loaded() for every node, half on a second thread: the pass is a
 * cache miss per node, two seconds at 34 M on one core. Without the
 * thread, both halves here.
 */
static int check_all(const struct ns *ns)
{
	struct check_half h = { &ns->inodes, 0 };
	bool threaded = false;
	pthread_t th;
	int rc;

	if (ns->nnodes >= CHECK_THREAD_MIN)
		threaded = !pthread_create(&th, NULL, check_second_half, &h);
	rc = htab_foreach_part(&ns->inodes, 0, 2, check_loaded, NULL);
	if (threaded)
		pthread_join(th, NULL);
	else if (rc == 0)
		check_second_half(&h);
	return rc ? rc : h.rc;
}

int ns_load_finish(struct ns *ns)
{
	ns_load_end(ns);
	chunks_drop_unreferenced(ns);
	return check_all(ns);
}
