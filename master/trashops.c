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
 * its name back, where it was or where asked.
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
#include "master.h"
#include "purge.h"
#include "req.h"
#include "session.h"
#include "watch.h"
#include "trash.h"
#include "util.h"

#define TAG "trash"

void op_trashtime(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__TrashtimeReq *q = (const void *)msg;
	Sweepfs__TrashtimeReply reply = SWEEPFS__TRASHTIME_REPLY__INIT;
	Sweepfs__Meta__SetTrashtime st = SWEEPFS__META__SET_TRASHTIME__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	struct sw_cred cred = req_cred(q->cred);
	struct node *n = req_node(r, q->ino);
	int rc = 0;

	if (!n)
		rc = -ENOENT;
	else if (!S_ISDIR(n->mode))
		rc = -ENOTDIR;
	else if (ns_detached(n))
		rc = -ENOENT;
	else if (q->has_seconds && !req_owns(r, &cred, n))
		rc = -EPERM;
	if (rc == 0 && q->has_seconds) {
		uint64_t before = 0;

		st.ino = n->ino;
		st.seconds = q->seconds;
		st.has_recursive = 1;
		st.recursive = q->recursive;
		/* Below the top, a user changes only its own. */
		st.has_owner = q->recursive && !req_admin(r, &cred);
		st.owner = cred.uid;
		mut.time = sw_now_ns();
		mut.op_case = SWEEPFS__META__MUTATION__OP_SET_TRASHTIME;
		mut.set_trashtime = &st;
		rc = master_commit(r->m, r, &mut);
		(void)before;
	}
	if (rc < 0) {
		req_error(r, rc);
		return;
	}
	reply.has_seconds = 1;
	reply.seconds = n->u.dir->trashtime;
	req_reply(r, &reply.base);
}

/* Root sees every item; anyone else the items they own. */
/*
 * Whether @r's session may see trash item @t: one confined to a subtree
 * sees only what was removed inside it (the directory it was removed from
 * is still there, below the session's root), whoever owned it; the owner
 * check comes on top.
 */
static bool item_visible(const struct req *r, const struct trash_item *t)
{
	if (!r->s || r->s->root_ino == NS_ROOT_INO)
		return true;
	return req_node(r, t->parent) != NULL;
}

static void op_trash_list(struct req *r, const struct sw_cred *cred)
{
	Sweepfs__TrashReply reply = SWEEPFS__TRASH_REPLY__INIT;
	struct ns *ns = &r->m->ns;
	Sweepfs__TrashItem *items, **ptrs;
	size_t n = 0, max = SW_MIN(ns->ntrash, 10000);

	items = calloc(max ? max : 1, sizeof(*items));
	ptrs = calloc(max ? max : 1, sizeof(*ptrs));
	if (!items || !ptrs) {
		req_error(r, -ENOMEM);
		goto out;
	}
	for (struct trash_item *t = ns->trash_head; t && n < max; t = t->next) {
		Sweepfs__TrashItem *it = &items[n];

		if (!item_visible(r, t) || !req_owns(r, cred, t->node))
			continue;
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
		ptrs[n] = it;
		n++;
	}
	reply.n_items = n;
	reply.items = ptrs;
	req_reply(r, &reply.base);
out:
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
		op_trash_list(r, &cred);
		return;
	}
	t = q->has_id ? ns_trash_find(&m->ns, q->id) : NULL;
	if (t && !item_visible(r, t))
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
	    !sw_name_valid(tr.name.data, tr.name.len))
		rc = -EINVAL;
	else if (!dir || !S_ISDIR(dir->mode) || ns_detached(dir))
		rc = -ENOENT;
	else
		rc = perm_check(&cred, dir, PERM_W | PERM_X);
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
