/*
 * The trash: removed files and trees kept for a while, restorable.
 *
 * A directory has a trash time (sweepfs settrashtime; new directories
 * inherit their parent's). When the last name of a file in such a
 * directory goes, the file is kept in the trash (NODE_TRASHED, no name)
 * until the trash time passes; `sweepfs rmr` of a tree under such a
 * directory puts the whole tree there (detached, not purged). When an
 * item expires, or is purged by hand, a file is freed (kept as an orphan
 * if open) and a tree goes to the purge queue. Restoring gives the item
 * its name back, where it was or where asked; where it was is made again
 * along its path if it is gone (each missing directory a mkdir by the
 * caller, journaled as one), as MooseFS does.
 *
 * Items are journaled (Unlink or Detach with trash_until, TrashRestore,
 * TrashDrop) and checkpointed; expiry is checked every second and drops
 * go through the changelog too.
 *
 * This file has the requests (list, restore, purge by hand, the trash
 * time) and the expiry; the namespace half is nstrash.c (trash.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "trashops.h"
#include "log.h"
#include "handlers.h"
#include "context.h"
#include "purge.h"
#include "req.h"
#include "sessrec.h"
#include "watch.h"
#include "trash.h"
#include "frame.h"
#include "util.h"

#define TAG "trash"

/*
 * Whether @dir, as req_node() gave it (NULL when the session may not see
 * it), is a directory still in the tree: not one of a removed tree
 * (detached, being purged, in the trash).
 */
static bool dir_live(const struct node *dir)
{
	return dir && S_ISDIR(dir->mode) && !ns_detached(dir);
}

/* Directory @ino for its trash time: 0, -ENOENT or -ENOTDIR. */
static int trashtime_dir(struct req *r, uint64_t ino, struct node **out)
{
	*out = req_node(r, ino);
	if (*out && !S_ISDIR((*out)->mode))
		return -ENOTDIR;
	return dir_live(*out) ? 0 : -ENOENT;
}

void op_trashtime(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__TrashtimeReq *q = (const void *)msg;
	Sweepfs__TrashtimeReply reply = SWEEPFS__TRASHTIME_REPLY__INIT;
	Sweepfs__Meta__SetTrashtime st = SWEEPFS__META__SET_TRASHTIME__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	struct sw_cred cred = req_cred(q->cred);
	struct node *n;
	int rc = trashtime_dir(r, q->ino, &n);

	if (rc == 0 && q->has_seconds && !req_owns(r, &cred, n))
		rc = -EPERM;
	if (rc == 0 && q->has_seconds) {
		st.ino = n->ino;
		st.seconds = q->seconds;
		st.has_recursive = 1;
		st.recursive = q->recursive;
		st.has_owner = req_only_own(r, &cred, q->recursive, &st.owner);
		mut.time = sw_now_ns();
		mut.op_case = SWEEPFS__META__MUTATION__OP_SET_TRASHTIME;
		mut.set_trashtime = &st;
		rc = master_commit(r->m, r, &mut);
	}
	if (rc == 0) {
		reply.has_seconds = 1;
		reply.seconds = n->u.dir->trashtime;
	}
	req_answer(r, rc, &reply.base);
}

/*
 * Whether @r's session may see trash item @t: one confined to a subtree
 * sees only what was removed inside it (the directory it was removed from
 * is still there, below the session's root), whoever owned it; the owner
 * check comes on top.
 */
bool trash_item_visible(const struct req *r, const struct trash_item *t)
{
	if (!r->s || r->s->root_ino == NS_ROOT_INO)
		return true;
	return req_node(r, t->parent) != NULL;
}

/*
 * A listing's page: at most as many items as a reply had before there
 * were pages, and at most three quarters of a metadata frame, which
 * 10,000 long paths would overflow (10,000 items of 40-byte paths take
 * about 700 KB). A page looks at no more items than it may return, so it
 * costs what it returns.
 *
 * A session confined to a subtree also passes over the items removed
 * outside it (trash_item_visible(), one req_node() each, ~0.3 us), and
 * a page of them ends with none taken and `more`: such a page looks at 1,000
 * items at most, ~0.3 ms of the loop, not 10,000 (3.3 ms). Its pages
 * hold 1,000 items at most. What it learns: `next` is the id of the last
 * item it passed over, so that items of the uid it lists (of any uid,
 * for admin root) were removed outside its subtree, when (an id is a
 * changelog version) and, a page per 1,000, about how many. And an old
 * client that asks for one page may get an empty one with `more`, where
 * before it got the items it could see among the first 10,000.
 */
#define TRASH_PAGE_ITEMS 10000
#define TRASH_PAGE_BYTES (SW_FRAME_MAX_META / 4 * 3)
#define TRASH_PAGE_VISITS TRASH_PAGE_ITEMS
#define TRASH_PAGE_VISITS_CONFINED 1000

struct trash_page {
	const struct req *r;
	const struct trash_item **items; /* taken, in order */
	size_t n, cap, max;
	size_t bytes; /* the items' size in the reply */
	bool oom;     /* the page ended for want of memory */
};

static bool page_visible(const struct trash_item *t, void *arg)
{
	const struct trash_page *pg = arg;

	return trash_item_visible(pg->r, t);
}

static void item_fill(Sweepfs__TrashItem *it, const struct trash_item *t)
{
	sweepfs__trash_item__init(it);
	it->has_id = it->has_parent = it->has_name = 1;
	it->has_deleted_at = it->has_expires_at = it->has_nodes = 1;
	it->has_dir = it->has_uid = 1;
	it->id = t->id;
	it->path = t->path;
	it->parent = t->parent;
	it->name.data = (uint8_t *)t->name;
	it->name.len = strlen(t->name);
	it->deleted_at = t->deleted_at;
	it->expires_at = t->expires_at;
	it->nodes = t->nodes;
	it->dir = S_ISDIR(t->node->mode);
	it->uid = t->node->uid;
}

static int page_take(const struct trash_item *t, void *arg)
{
	struct trash_page *pg = arg;
	Sweepfs__TrashItem it;
	size_t bytes;

	/* The item as packed in the reply, with its tag and length. */
	item_fill(&it, t);
	bytes = sweepfs__trash_item__get_packed_size(&it) + 6;
	if (pg->n == pg->max || (pg->n && pg->bytes + bytes > TRASH_PAGE_BYTES))
		return 1;
	if (pg->n == pg->cap) {
		size_t cap = pg->cap ? 2 * pg->cap : 64;
		const struct trash_item **v =
			realloc(pg->items, cap * sizeof(*v));

		if (!v) {
			pg->oom = true; /* a shorter page, `more` says so */
			return 1;
		}
		pg->items = v;
		pg->cap = cap;
	}
	pg->items[pg->n++] = t;
	pg->bytes += bytes;
	return 0;
}

/*
 * One page of the items @cred may list: root with admin rights every
 * item (the tree by id), anyone else their own (a range of the tree by
 * owner), so that a page costs what it returns whatever else the trash
 * holds (threat model, finding 8).
 */
static void op_trash_list(struct req *r, const Sweepfs__TrashReq *q,
			  const struct sw_cred *cred)
{
	Sweepfs__TrashReply reply = SWEEPFS__TRASH_REPLY__INIT;
	struct trash_page pg = { .r = r, .max = TRASH_PAGE_ITEMS };
	struct ns_trash_page p = {
		.after = q->has_after ? q->after : 0,
		.owner = req_admin(r, cred) ? NS_ANY_OWNER : cred->uid,
		.max_visits = TRASH_PAGE_VISITS,
		.take = page_take,
		.arg = &pg,
	};
	Sweepfs__TrashItem *items = NULL, **ptrs = NULL;

	if (q->has_max && q->max > 0 && q->max < pg.max)
		pg.max = q->max;
	if (r->s && r->s->root_ino != NS_ROOT_INO) {
		p.visible = page_visible;
		p.max_visits = TRASH_PAGE_VISITS_CONFINED;
	}
	ns_trash_page(&r->m->ns, &p);
	if (pg.n) {
		items = calloc(pg.n, sizeof(*items));
		ptrs = calloc(pg.n, sizeof(*ptrs));
	}
	/* Out of memory with nothing to show: say so rather than send a
	 * client round an empty page again. */
	if ((pg.oom && pg.n == 0) || (pg.n && (!items || !ptrs))) {
		req_error(r, -ENOMEM);
		goto out;
	}
	for (size_t i = 0; i < pg.n; i++) {
		item_fill(&items[i], pg.items[i]);
		ptrs[i] = &items[i];
	}
	reply.n_items = pg.n;
	reply.items = ptrs;
	reply.has_more = reply.has_next = 1;
	reply.more = p.more;
	reply.next = p.next;
	req_reply(r, &reply.base);
out:
	free(pg.items);
	free(items);
	free(ptrs);
}

static int drop(struct master *m, struct req *r, struct trash_item *t)
{
	Sweepfs__Meta__TrashDrop td = SWEEPFS__META__TRASH_DROP__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	bool dir = S_ISDIR(t->node->mode);
	int rc;

	td.id = t->id;
	td.has_keep = 1;
	td.keep = !dir && (t->node->flags & NODE_OPEN);
	mut.time = sw_now_ns();
	mut.op_case = SWEEPFS__META__MUTATION__OP_TRASH_DROP;
	mut.trash_drop = &td;
	rc = master_commit(m, r, &mut);
	if (rc == 0 && dir)
		purge_kick(m);
	return rc;
}

/*
 * Make directory @name (@len bytes) in @dir for @cred, journaled as a
 * mkdir would be (mode 0777 less what the umask of a shell usually
 * takes, 022, the setgid bit and group as mkdir(2) gives them): *@out.
 * 0 or -errno.
 */
static int make_dir(struct req *r, const struct sw_cred *cred, struct node *dir,
		    const char *name, size_t len, struct node **out)
{
	Sweepfs__Meta__Create c = SWEEPFS__META__CREATE__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	struct ns *ns = &r->m->ns;
	uint32_t gid = (dir->mode & S_ISGID) ? dir->gid : cred->gid;
	int rc = perm_check(cred, dir, PERM_W | PERM_X);

	if (rc < 0)
		return rc;
	c.parent = dir->ino;
	c.name.data = (uint8_t *)name;
	c.name.len = len;
	c.ino = ns->next_ino;
	c.edge = ns->next_edge;
	c.mode = sw_new_node_mode(S_IFDIR | 0755, dir->mode,
				  cred_is_root(cred) ||
					  cred_in_group(cred, gid));
	c.uid = cred->uid;
	c.gid = gid;
	mut.time = sw_now_ns();
	mut.op_case = SWEEPFS__META__MUTATION__OP_CREATE;
	mut.create = &c;
	rc = master_commit(r->m, r, &mut);
	if (rc < 0)
		return rc;
	*out = ns_get(ns, c.ino);
	watch_changed(r->m, dir, name, len, NULL);
	return *out ? 0 : -EIO;
}

/*
 * The directory item @t was removed from, made again where its path
 * says, as MooseFS does: each directory of the path that is gone is made
 * anew (as @cred, who needs W and X where it makes one); one that is
 * there is used, whatever its number. The directories must be the
 * session's to see (req_node()). *@made counts those made. -ENOTDIR if a
 * component is not a directory, -errno.
 */
static int remake_parents(struct req *r, const struct sw_cred *cred,
			  const struct trash_item *t, struct node **out,
			  uint32_t *made)
{
	struct ns *ns = &r->m->ns;
	struct node *dir = ns->root;
	const char *p = NULL;
	size_t len;
	int rc;

	while (ns_trash_path_next(t, &p, &len)) {
		struct edge *e = ns_lookup(ns, dir, p, len);

		if (e && e->child && !S_ISDIR(e->child->mode))
			return -ENOTDIR;
		if (e && e->child) {
			dir = e->child;
		} else {
			/* Where the session may not see, it may not make. */
			if (!req_node(r, dir->ino))
				return -ENOENT;
			rc = make_dir(r, cred, dir, p, len, &dir);
			if (rc < 0)
				return rc;
			(*made)++;
		}
	}
	if (!req_node(r, dir->ino))
		return -ENOENT;
	*out = dir;
	return 0;
}

void op_trash(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__TrashReq *q = (const void *)msg;
	Sweepfs__TrashReply reply = SWEEPFS__TRASH_REPLY__INIT;
	Sweepfs__Meta__TrashRestore tr = SWEEPFS__META__TRASH_RESTORE__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	struct sw_cred cred = req_cred(q->cred);
	struct master *m = r->m;
	struct trash_item *t;
	struct node *dir;
	char name[SW_NAME_MAX];
	int rc;

	if (q->op == 1) {
		op_trash_list(r, q, &cred);
		return;
	}
	t = q->has_id ? ns_trash_find(&m->ns, q->id) : NULL;
	if (t && !trash_item_visible(r, t))
		t = NULL;
	if (!t || (q->op != 2 && q->op != 3)) {
		req_error(r, t ? -EINVAL : -ENOENT);
		return;
	}
	if (!req_owns(r, &cred, t->node)) {
		req_error(r, -EPERM);
		return;
	}
	if (q->op == 3) {
		rc = drop(m, r, t);
		goto out;
	}
	tr.id = t->id;
	tr.parent = q->has_parent ? q->parent : t->parent;
	if (q->has_name) {
		tr.name = q->name;
	} else {
		/* A copy: the restore frees the item, its name with it,
		 * before the record is packed. */
		tr.name.len = SW_MIN(strlen(t->name), sizeof(name));
		memcpy(name, t->name, tr.name.len);
		tr.name.data = (uint8_t *)name;
	}
	dir = req_node(r, tr.parent);
	if (tr.name.len > SW_NAME_MAX ||
	    !sw_name_valid(tr.name.data, tr.name.len)) {
		rc = -EINVAL;
	} else if (!q->has_parent && !dir_live(dir)) {
		/* Where it was is gone: made again along its path. */
		uint32_t made = 0;

		rc = remake_parents(r, &cred, t, &dir, &made);
		reply.has_made_dirs = 1;
		reply.made_dirs = made;
		tr.parent = rc == 0 ? dir->ino : 0;
		if (rc == 0)
			rc = perm_check(&cred, dir, PERM_W | PERM_X);
	} else if (!dir_live(dir)) {
		rc = -ENOENT;
	} else {
		rc = perm_check(&cred, dir, PERM_W | PERM_X);
	}
	if (rc == 0) {
		tr.edge = m->ns.next_edge;
		mut.time = sw_now_ns();
		mut.op_case = SWEEPFS__META__MUTATION__OP_TRASH_RESTORE;
		mut.trash_restore = &tr;
		rc = master_commit(m, r, &mut);
		if (rc == 0)
			watch_changed(m, dir, tr.name.data, tr.name.len, NULL);
	}
out:
	if (rc < 0)
		req_error(r, rc);
	else
		req_reply(r, &reply.base);
}

void trash_expire(struct master *m)
{
	int64_t now = sw_now_ns();
	struct trash_item *t, *next;

	for (t = m->ns.trash_head; t; t = next) {
		next = t->next;
		if (t->expires_at > now)
			continue;
		if (drop(m, NULL, t) < 0)
			break; /* the changelog is full: next second */
	}
}
