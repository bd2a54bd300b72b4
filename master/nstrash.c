/*
 * The trash, namespace side (trash.h): items kept in a list on the
 * namespace, each a file with no name (NODE_TRASHED) or a detached tree,
 * with where it was and when it expires. Structure only, as namespace.c:
 * mutation.c applies the journaled changes (Unlink or Detach with
 * trash_until, TrashRestore, TrashDrop) through these, live and in
 * replay; trash.c has the requests and the expiry.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "hash.h"
#include "namespace_i.h"
#include "trash.h"
#include "util.h"

/*
 * The path of directory @dir from the root into @buf ending at @end
 * (written backwards); returns its start, or NULL if it does not fit or
 * @dir hangs off no root (a detached tree). Directories know their parent
 * but not their own name, which takes a scan of the parent's entries, so
 * the last answer is remembered: removing many files from one directory
 * names it once. Any directory losing a name (ns->dir_moves) forgets it.
 */
static char *dir_path(const struct ns *ns, const struct node *dir, char *buf,
		      char *end)
{
	static struct {
		const struct ns *ns;
		const struct node *dir;
		uint64_t moves;
		size_t len;
		char path[4096];
	} cache;
	const struct node *d = dir;
	char *pos = end;

	if (cache.ns == ns && cache.dir == dir &&
	    cache.moves == ns->dir_moves && (size_t)(end - buf) >= cache.len) {
		pos -= cache.len;
		memcpy(pos, cache.path, cache.len);
		return pos;
	}
	while (d->u.dir->parent != d) {
		const struct node *p = d->u.dir->parent;
		const struct edge *e;

		if (!p)
			return NULL;
		for (e = p->u.dir->head; e && e->child != d; e = e->next)
			;
		if (!e || (size_t)(pos - buf) < (size_t)e->namelen + 1)
			return NULL;
		pos -= e->namelen;
		memcpy(pos, e->name, e->namelen);
		*--pos = '/';
		d = p;
	}
	if ((size_t)(end - pos) <= sizeof(cache.path)) {
		cache.ns = ns;
		cache.dir = dir;
		cache.moves = ns->dir_moves;
		cache.len = (size_t)(end - pos);
		memcpy(cache.path, pos, cache.len);
	}
	return pos;
}

static int item_add(struct ns *ns, uint64_t id, struct node *n, uint64_t parent,
		    const char *path, size_t pathlen, int64_t now,
		    int64_t until, uint64_t nodes)
{
	struct trash_item *t = calloc(1, sizeof(*t));
	const char *slash;

	if (!t || !(t->path = malloc(pathlen + 1))) {
		free(t);
		return -ENOMEM;
	}
	memcpy(t->path, path, pathlen);
	t->path[pathlen] = '\0';
	slash = strrchr(t->path, '/');
	t->name = slash ? slash + 1 : t->path;
	t->id = id;
	t->node = n;
	t->parent = parent;
	t->deleted_at = now;
	t->expires_at = until;
	t->nodes = nodes;
	if (ns->trash_tail)
		ns->trash_tail->next = t;
	else
		ns->trash_head = t;
	ns->trash_tail = t;
	ns->ntrash++;
	ns->misc_bytes += sizeof(*t) + pathlen + 1;
	return 0;
}

/* item_add() for @name in @dir, its path worked out. */
static int item_add_at(struct ns *ns, uint64_t id, struct node *n,
		       const struct node *dir, const char *name, size_t len,
		       int64_t now, int64_t until, uint64_t nodes)
{
	char buf[4096 + SW_NAME_MAX + 2], *end = buf + sizeof(buf);
	char *start = end - len;

	memcpy(start, name, len);
	*--start = '/';
	{
		char *p = dir_path(ns, dir, buf, start);

		/* Unnameable (too deep): the name alone, still restorable
		 * by parent inode. */
		if (p)
			start = p;
		else
			start++;
	}
	return item_add(ns, id, n, dir->ino, start, (size_t)(end - start), now,
			until, nodes);
}

static void item_free(struct ns *ns, struct trash_item *t)
{
	if (!t)
		return;
	ns->misc_bytes -= sizeof(*t) + strlen(t->path) + 1;
	free(t->path);
	free(t);
}

static struct trash_item *item_take(struct ns *ns, uint64_t id)
{
	for (struct trash_item **pp = &ns->trash_head; *pp; pp = &(*pp)->next) {
		struct trash_item *t = *pp;

		if (t->id != id)
			continue;
		*pp = t->next;
		if (ns->trash_tail == t) {
			struct trash_item *last = ns->trash_head;

			while (last && last->next)
				last = last->next;
			ns->trash_tail = last;
		}
		ns->ntrash--;
		return t;
	}
	return NULL;
}

int ns_trash_unlink(struct ns *ns, struct node *dir, const char *name,
		    size_t len, uint64_t id, int64_t until, int64_t now)
{
	struct edge *e;
	struct node *n;
	int rc = nsi_entry(ns, dir, name, len, &e);

	if (rc < 0)
		return rc;
	n = e->child;
	if (S_ISDIR(n->mode))
		return -EISDIR;
	if (n->nlink > 1)
		return nsi_unlink_edge(ns, dir, e, now);
	rc = item_add_at(ns, id, n, dir, name, len, now, until, 1);
	if (rc < 0)
		return rc;
	nsi_edge_remove(ns, dir, e);
	n->nlink = 0;
	n->ctime = now;
	n->flags |= NODE_TRASHED;
	dir->mtime = dir->ctime = now;
	return 0;
}

struct trashtime_walk {
	uint32_t seconds;
	int64_t nodes;
	int64_t owner;
};

static int set_trashtime(struct node *dir, struct edge *e, void *arg)
{
	struct trashtime_walk *w = arg;

	(void)dir;
	if (!S_ISDIR(e->child->mode) ||
	    (w->owner != NS_ANY_OWNER && e->child->uid != (uint64_t)w->owner))
		return 0;
	w->nodes++;
	e->child->u.dir->trashtime = w->seconds;
	return 0;
}

int ns_trash_detach(struct ns *ns, struct node *dir, const char *name,
		    size_t len, uint64_t id, int64_t until, int64_t now)
{
	struct edge *e;
	int rc = nsi_entry(ns, dir, name, len, &e);

	if (rc == 0 && !S_ISDIR(e->child->mode))
		rc = -ENOTDIR;
	/* Out from under the marks over @dir: their flags go with it. */
	if (rc == 0 && ns->nsnapmarks)
		rc = nsi_snap_moving(ns, e->child, dir, NULL);
	if (rc == 0)
		rc = item_add_at(ns, id, e->child, dir, name, len, now, until,
				 1 + ns_tree_names(e->child));
	if (rc == 0)
		nsi_detach_cut(ns, dir, e, now);
	return rc;
}

int ns_trash_restore(struct ns *ns, uint64_t id, struct node *dir,
		     const char *name, size_t len, uint64_t edge, int64_t now)
{
	struct trash_item *t;
	struct node *n;
	int rc;

	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	if (ns_detached(dir))
		return -ENOENT;
	if (ns_lookup(ns, dir, name, len))
		return -EEXIST;
	for (t = ns->trash_head; t && t->id != id; t = t->next)
		;
	if (!t)
		return -ENOENT;
	n = t->node;
	if (S_ISDIR(n->mode) && ns_is_ancestor(n, dir))
		return -EINVAL;
	if (S_ISDIR(n->mode)) {
		/* Its old names must not look flagged by a mark over @dir. */
		rc = ns->nsnapmarks ? nsi_snap_moving(ns, n, NULL, dir) : 0;
		if (rc == 0)
			rc = nsi_edge_add(ns, dir, name, len, edge, 0, n);
		if (rc < 0)
			return rc;
		n->flags &= (uint16_t)~NODE_DETACHED;
	} else {
		n->flags &= (uint16_t)~NODE_TRASHED;
		rc = nsi_edge_add(ns, dir, name, len, edge, 0, n);
		if (rc < 0) {
			n->flags |= NODE_TRASHED;
			return rc;
		}
	}
	item_free(ns, item_take(ns, id));
	n->ctime = now;
	dir->mtime = dir->ctime = now;
	return 0;
}

int ns_trash_drop(struct ns *ns, uint64_t id, bool keep, int64_t now)
{
	struct trash_item *t;
	struct node *n;
	int rc;

	for (t = ns->trash_head; t && t->id != id; t = t->next)
		;
	if (!t)
		return -ENOENT;
	n = t->node;
	if (S_ISDIR(n->mode)) {
		rc = nsi_purge_add(ns, n, id, t->nodes);
		if (rc < 0)
			return rc;
	} else if (keep) {
		rc = htab_insert(&ns->orphans, sw_hash_u64(n->ino), n);
		if (rc < 0)
			return rc;
		n->flags = (uint16_t)((n->flags | NODE_ORPHAN) & ~NODE_TRASHED);
	} else {
		nsi_node_free(ns, n);
	}
	item_free(ns, item_take(ns, id));
	return 0;
}

int64_t ns_set_trashtime(struct ns *ns, struct node *dir, uint32_t seconds,
			 bool recursive, int64_t owner)
{
	struct trashtime_walk w = { seconds, 1, owner };
	struct edge **stack;

	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	if (!recursive) {
		dir->u.dir->trashtime = seconds;
		return 1;
	}
	stack = nsi_walk_stack(dir);
	if (!stack)
		return -ENOMEM;
	dir->u.dir->trashtime = seconds;
	nsi_walk(dir, stack, set_trashtime, &w);
	free(stack);
	return w.nodes;
}

/* For the checkpoint. */
int ns_trash_foreach(const struct ns *ns,
		     int (*fn)(const struct trash_item *t, void *arg),
		     void *arg)
{
	for (const struct trash_item *t = ns->trash_head; t; t = t->next) {
		int rc = fn(t, arg);

		if (rc)
			return rc;
	}
	return 0;
}

void ns_trash_release(struct ns *ns)
{
	while (ns->trash_head) {
		struct trash_item *t = ns->trash_head;

		ns->trash_head = t->next;
		free(t->path);
		free(t);
	}
	ns->trash_tail = NULL;
	ns->ntrash = 0;
}

int ns_trash_load(struct ns *ns, uint64_t id, uint64_t ino, uint64_t parent,
		  const char *path, size_t len, int64_t deleted,
		  int64_t expires, uint64_t nodes)
{
	struct node *n = ns_get(ns, ino);

	if (!n || len < 2 || path[0] != '/' || memchr(path, '\0', len))
		return -EUCLEAN;
	if (S_ISDIR(n->mode) ? n->u.dir->parent || !(n->flags & NODE_DETACHED) :
			       n->nlink || !(n->flags & NODE_TRASHED))
		return -EUCLEAN;
	return item_add(ns, id, n, parent, path, len, deleted, expires, nodes);
}

/* The item's data for the checkpoint writer. */
void ns_trash_item(const struct trash_item *t, uint64_t *id, uint64_t *ino,
		   uint64_t *parent, const char **path, int64_t *deleted,
		   int64_t *expires, uint64_t *nodes)
{
	*id = t->id;
	*ino = t->node->ino;
	*parent = t->parent;
	*path = t->path;
	*deleted = t->deleted_at;
	*expires = t->expires_at;
	*nodes = t->nodes;
}

struct trash_item *ns_trash_find(const struct ns *ns, uint64_t id)
{
	struct trash_item *t = ns->trash_head;

	while (t && t->id != id)
		t = t->next;
	return t;
}
