/*
 * The trash, namespace side (trash.h): items kept in a list on the
 * namespace, each a file with no name (NODE_TRASHED) or a detached tree,
 * with where it was and when it expires. Structure only, as namespace.c:
 * mutation.c applies the journaled changes (Unlink or Detach with
 * trash_until, TrashRestore, TrashDrop) through these, live and in
 * replay; trash.c has the requests and the expiry.
 *
 * Besides the list (oldest first: the checkpoint and the expiry walk it),
 * every item is in two treaps and one hash table, so that nothing a
 * client asks for costs a walk of the whole trash (threat model, finding
 * 8): by id (a restore or a drop finds its item; an admin's listing goes
 * through them in order), by owner then id (a user's listing is a range
 * of this tree: O(log n) to its start, then one step an item), and by
 * inode (a chown of a node in the trash moves its item in the tree by
 * owner). The tree by owner is keyed on the item's own copy of the uid,
 * never on its node's: a path that wrote node->uid without
 * nsi_trash_chown() would leave the item where it was, listed under its
 * old owner, rather than break the tree's order. A treap's priority is a
 * keyed hash of the id (sw_hash_bytes(): random key per process), so
 * removals that a client times cannot make one deep; the trees need no memory of their own (two pointers an item
 * each) and never fail, which keeps every change all-or-nothing for
 * replay: only the hash table's insert can fail, and it goes first.
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

/* ---- the trees ------------------------------------------------------- */

enum { BY_ID, BY_OWNER };

static struct trash_item **kids(struct trash_item *t, int tree)
{
	return tree == BY_ID ? t->by_id : t->by_owner;
}

static uint64_t prio(const struct trash_item *t)
{
	return sw_hash_bytes(&t->id, sizeof(t->id));
}

/* Whether key (@uid, @id) of @tree comes before item @t's. */
static bool key_before(int tree, uint32_t uid, uint64_t id,
		       const struct trash_item *t)
{
	if (tree == BY_OWNER && uid != t->uid)
		return uid < t->uid;
	return id < t->id;
}

/* Insert @t into *@root (no item of its key there); recursive, as deep as
 * the tree: O(log n) expected. */
static void tree_insert(struct trash_item **root, struct trash_item *t,
			int tree, uint64_t p)
{
	struct trash_item *r = *root;
	int side;

	if (!r) {
		kids(t, tree)[0] = kids(t, tree)[1] = NULL;
		*root = t;
		return;
	}
	side = !key_before(tree, t->uid, t->id, r);
	tree_insert(&kids(r, tree)[side], t, tree, p);
	if (kids(r, tree)[side] == t && p > prio(r)) {
		/* Rotate @t up over @r. */
		kids(r, tree)[side] = kids(t, tree)[!side];
		kids(t, tree)[!side] = r;
		*root = t;
	}
}

/* Remove @t, which is in *@root: rotate it down to a leaf, then cut. */
static void tree_remove(struct trash_item **root, struct trash_item *t,
			int tree)
{
	struct trash_item **pp = root;

	while (*pp != t) {
		int side = !key_before(tree, t->uid, t->id, *pp);

		pp = &kids(*pp, tree)[side];
	}
	for (;;) {
		struct trash_item **k = kids(t, tree), *up;
		int side;

		if (!k[0] || !k[1]) {
			*pp = k[0] ? k[0] : k[1];
			return;
		}
		side = prio(k[1]) > prio(k[0]);
		up = k[side];
		k[side] = kids(up, tree)[!side];
		kids(up, tree)[!side] = t;
		*pp = up;
		pp = &kids(up, tree)[!side];
	}
}

/*
 * In-order iteration over a treap from a key on, with the stack of the
 * items above still to come (their keys are above the last one returned).
 * A treap of random priorities is about 2 ln n deep; a deeper path keeps
 * its lowest part and, once that is used up, searches again from the root
 * (correct whatever the depth, cheap at any depth it will have).
 */
#define ITER_DEPTH 160

struct tree_iter {
	const struct ns *ns;
	int tree;
	struct trash_item *stack[ITER_DEPTH];
	unsigned depth;
	bool cut;	/* items were dropped from the stack's bottom */
	uint64_t steps; /* nodes stepped through */
};

static void iter_push(struct tree_iter *it, struct trash_item *t)
{
	if (it->depth == ITER_DEPTH) {
		memmove(it->stack, it->stack + 1,
			(ITER_DEPTH - 1) * sizeof(it->stack[0]));
		it->depth--;
		it->cut = true;
	}
	it->stack[it->depth++] = t;
}

/* Start at the first item whose key is above (@uid, @id). */
static void iter_seek(struct tree_iter *it, uint32_t uid, uint64_t id)
{
	struct trash_item *t = it->tree == BY_ID ? it->ns->trash_by_id :
						   it->ns->trash_by_owner;

	it->depth = 0;
	it->cut = false;
	while (t) {
		it->steps++;
		if (key_before(it->tree, uid, id, t)) {
			iter_push(it, t);
			t = kids(t, it->tree)[0];
		} else {
			t = kids(t, it->tree)[1];
		}
	}
}

/* The next item, or NULL. */
static struct trash_item *iter_next(struct tree_iter *it)
{
	struct trash_item *t, *k;

	if (it->depth == 0)
		return NULL;
	t = it->stack[--it->depth];
	for (k = kids(t, it->tree)[1]; k; k = kids(k, it->tree)[0]) {
		it->steps++;
		iter_push(it, k);
	}
	if (it->depth == 0 && it->cut)
		iter_seek(it, t->uid, t->id);
	return t;
}

void ns_trash_page(const struct ns *ns, struct ns_trash_page *p)
{
	struct tree_iter it = {
		.ns = ns,
		.tree = p->owner == NS_ANY_OWNER ? BY_ID : BY_OWNER,
	};
	uint32_t uid = p->owner == NS_ANY_OWNER ? 0 : (uint32_t)p->owner;
	struct trash_item *t;

	p->next = p->after;
	p->more = false;
	p->visits = 0;
	iter_seek(&it, uid, p->after);
	while ((t = iter_next(&it))) {
		if (it.tree == BY_OWNER && t->uid != uid)
			break;
		if (p->visits == p->max_visits) {
			p->more = true;
			break;
		}
		p->visits++;
		if (p->visible && !p->visible(t, p->arg)) {
			p->next = t->id;
			continue;
		}
		if (p->take(t, p->arg)) {
			p->more = true;
			break;
		}
		p->next = t->id;
	}
	p->steps = it.steps;
}

/* ---- the index by inode --------------------------------------------- */

static uint64_t item_ino_hash(const void *elem)
{
	const struct trash_item *t = elem;

	return sw_hash_u64(t->node->ino);
}

static bool item_ino_eq(const void *elem, const void *key)
{
	const struct trash_item *t = elem;

	return t->node == key;
}

void nsi_trash_init(struct ns *ns)
{
	htab_init(&ns->trash_inos, item_ino_hash);
}

void nsi_trash_chown(struct ns *ns, struct node *n, uint32_t uid)
{
	struct trash_item *t = NULL;

	/* Only a trashed file or a detached tree's root can be an item. */
	if ((n->flags & NODE_TRASHED) ||
	    (S_ISDIR(n->mode) && (n->flags & NODE_DETACHED)))
		t = htab_find(&ns->trash_inos, sw_hash_u64(n->ino), item_ino_eq,
			      n);
	n->uid = uid;
	if (t) {
		tree_remove(&ns->trash_by_owner, t, BY_OWNER);
		t->uid = uid;
		tree_insert(&ns->trash_by_owner, t, BY_OWNER, prio(t));
	}
}

/* Put @t, its fields set, into the list, the trees and the index by
 * inode: 0, or -EEXIST (its node is an item already), -ENOMEM with
 * nothing changed. */
static int item_link(struct ns *ns, struct trash_item *t)
{
	uint64_t h = sw_hash_u64(t->node->ino), p = prio(t);
	int rc = htab_find(&ns->trash_inos, h, item_ino_eq, t->node) ?
			 -EEXIST :
			 htab_insert(&ns->trash_inos, h, t);

	if (rc < 0)
		return rc;
	tree_insert(&ns->trash_by_id, t, BY_ID, p);
	tree_insert(&ns->trash_by_owner, t, BY_OWNER, p);
	t->next = NULL;
	if (ns->trash_tail)
		ns->trash_tail->next = t;
	else
		ns->trash_head = t;
	ns->trash_tail = t;
	ns->ntrash++;
	return 0;
}

/* The item before @t in the list: the one with the highest id below its
 * (the list is in order of id), found in the tree by id. */
static struct trash_item *item_before(const struct ns *ns,
				      const struct trash_item *t)
{
	struct trash_item *r = ns->trash_by_id, *best = NULL;

	while (r) {
		if (r->id < t->id) {
			best = r;
			r = r->by_id[1];
		} else {
			r = r->by_id[0];
		}
	}
	return best;
}

static int item_add(struct ns *ns, uint64_t id, struct node *n, uint64_t parent,
		    const char *path, size_t pathlen, int64_t now,
		    int64_t until, uint64_t nodes)
{
	struct trash_item *t = calloc(1, sizeof(*t));
	const char *slash;
	int rc;

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
	t->uid = n->uid;
	t->parent = parent;
	t->deleted_at = now;
	t->expires_at = until;
	t->nodes = nodes;
	/* Ids are changelog versions: they only grow, so the list is in
	 * order of id (item_before() counts on it) and has no two alike. */
	rc = ns->trash_tail && id <= ns->trash_tail->id ? -EEXIST :
							  item_link(ns, t);
	if (rc < 0) {
		free(t->path);
		free(t);
		return rc;
	}
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

/* Take @t out of the list, the trees and the index: O(log n). */
static struct trash_item *item_take(struct ns *ns, struct trash_item *t)
{
	struct trash_item *prev = item_before(ns, t);

	if (prev)
		prev->next = t->next;
	else
		ns->trash_head = t->next;
	if (ns->trash_tail == t)
		ns->trash_tail = prev;
	tree_remove(&ns->trash_by_id, t, BY_ID);
	tree_remove(&ns->trash_by_owner, t, BY_OWNER);
	htab_remove(&ns->trash_inos, sw_hash_u64(t->node->ino), t);
	ns->ntrash--;
	return t;
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
	t = ns_trash_find(ns, id);
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
	item_free(ns, item_take(ns, t));
	n->ctime = now;
	dir->mtime = dir->ctime = now;
	return 0;
}

int ns_trash_drop(struct ns *ns, uint64_t id, bool keep, int64_t now)
{
	struct trash_item *t;
	struct node *n;
	int rc;

	t = ns_trash_find(ns, id);
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
	}
	/* Out of the trees before the node goes: they key on it. */
	item_free(ns, item_take(ns, t));
	if (!S_ISDIR(n->mode) && !keep)
		nsi_node_free(ns, n);
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
	ns->trash_by_id = ns->trash_by_owner = NULL;
	ns->ntrash = 0;
	/* The nodes may be gone already (ns_release()): no hashing now. */
	htab_release(&ns->trash_inos);
	nsi_trash_init(ns);
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

bool ns_trash_path_next(const struct trash_item *t, const char **p, size_t *len)
{
	const char *at = *p ? *p + *len : t->path;

	for (;;) {
		const char *slash;

		while (*at == '/')
			at++;
		slash = strchr(at, '/');
		if (at >= t->name || !slash || slash >= t->name)
			return false;
		if ((size_t)(slash - at) <= SW_NAME_MAX) {
			*p = at;
			*len = (size_t)(slash - at);
			return true;
		}
		at = slash + 1;
	}
}

struct trash_item *ns_trash_find(const struct ns *ns, uint64_t id)
{
	struct trash_item *t = ns->trash_by_id;

	while (t && t->id != id)
		t = t->by_id[id > t->id];
	return t;
}
