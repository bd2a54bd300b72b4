/*
 * What a file's chunks are and what a tree holds, for an operator:
 * `sweepfs info PATH` (FileinfoReq; MooseFS's mfsfileinfo) and `sweepfs
 * du PATH` (DirinfoReq; mfsdirinfo).
 *
 * Who may ask: any client session that may stat the node, i.e. find it
 * in its export (req_node(): a confined session sees nothing outside its
 * subtree, and of the files only those it was told of). Like stat, no
 * permission on the node itself is needed; the replies carry no names.
 *
 * Bounds. A file's chunks come FILEINFO_SLOTS a reply (each chunk at most
 * CHUNK_COPIES_MAX copies: well under a frame); the tool asks again from
 * `next`. A tree's summary walks it, and the walk's cost is its names
 * and the chunk slots of its files (up to 2^21 a file). Trees of at most
 * DIRINFO_INLINE names (ns_tree_names(), kept by the namespace, so known
 * before the walk) are walked on the loop with a budget of DIRINFO_WORK
 * names plus slots (a file's slots are known before they are visited):
 * about a millisecond, as much as one purge slice. A walk that would pass
 * it stops there, and the tree is walked by a forked child instead, as
 * fsck's is, which sees one instant and costs the loop only the fork. A
 * fork of a big master holds the loop for as long as copying its page
 * tables takes, so only an admin session may start one; any other
 * session is told E2BIG. Forks share one slot with fsck's (EBUSY while
 * either runs, or fsck waits to fork), and a tree summary forks at most
 * once every DIRINFO_FORK_GAP (EAGAIN sooner). The checkpoint's child is
 * not counted: it is the master's own, on the master's schedule, and an
 * admin's requests must not delay it; so at most two children run, the
 * checkpoint's and one of fsck or dirinfo. The child's reply is a few
 * counters: its output is bounded at a frame all the same.
 *
 * What is counted. A non-admin caller's walk does not descend into a
 * directory the caller may not search (x, by common/access.c's rule, as
 * a stat of the paths below would need; the top one included): such a
 * directory counts itself, not what it holds. An admin's counts all.
 * The counts are the master's: what other mounts still hold queued under
 * a delegation below the top (only the top is recalled, by the tool's
 * stat) is not in them until their next batch.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "child.h"
#include "context.h"
#include "csrv.h"
#include "fsio.h"
#include "handlers.h"
#include "log.h"
#include "namespace_i.h"
#include "perm.h"
#include "util.h"

#define TAG "fileinfo"

/* Chunk slots a FileinfoReply carries at most. */
#define FILEINFO_SLOTS 256

/* Names a tree may have to be summed up on the loop (about 50 ns a
 * name: a millisecond). */
#define DIRINFO_INLINE 20000

/* Names plus chunk slots an on-loop walk visits at most (a slot costs a
 * few ns, a name some 50: about a millisecond either way). */
#define DIRINFO_WORK 200000

/* Time between two forks of a tree summary (mono ns). */
#define DIRINFO_FORK_GAP SW_NSEC_PER_SEC

/* ---- a file's chunks ------------------------------------------------- */

static const char *copy_state(uint8_t state)
{
	switch (state) {
	case COPY_VALID:
		return "valid";
	case COPY_STALE:
		return "stale";
	case COPY_DAMAGED:
		return "damaged";
	case COPY_PENDING:
		return "pending";
	case COPY_BEHIND:
		return "behind";
	}
	return "?";
}

/* The room one reply needs: its chunks and their copies, in one block. */
struct fileinfo_room {
	Sweepfs__FileinfoChunk chunk[FILEINFO_SLOTS];
	Sweepfs__FileinfoChunk *chunkp[FILEINFO_SLOTS];
	Sweepfs__FileinfoCopy copy[FILEINFO_SLOTS][CHUNK_COPIES_MAX];
	Sweepfs__FileinfoCopy *copyp[FILEINFO_SLOTS][CHUNK_COPIES_MAX];
};

static void fill_chunk(struct master *m, const struct chunk *c,
		       Sweepfs__FileinfoChunk *x, Sweepfs__FileinfoCopy *cp,
		       Sweepfs__FileinfoCopy **cpp)
{
	x->has_version = x->has_refs = x->has_goal = 1;
	x->version = c->version;
	x->refs = c->refs;
	x->goal = chunk_goal(c, (unsigned)m->cfg.goal);
	for (int i = 0; i < c->ncopies; i++) {
		struct csrv *s = csrv_get(m, c->copies[i].srv);

		sweepfs__fileinfo_copy__init(&cp[i]);
		cp[i].server = s ? s->listen : "?";
		cp[i].has_version = cp[i].has_connected = 1;
		cp[i].version = c->copies[i].version;
		cp[i].state = (char *)copy_state(c->copies[i].state);
		cp[i].connected = csrv_up(s);
		cpp[i] = &cp[i];
	}
	x->n_copies = c->ncopies;
	x->copies = cpp;
}

void op_fileinfo(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__FileinfoReq *q = (const void *)msg;
	Sweepfs__FileinfoReply reply = SWEEPFS__FILEINFO_REPLY__INIT;
	struct node *n = req_node(r, q->ino);
	struct fileinfo_room *room;
	uint32_t slots, i, first = q->has_first ? q->first : 0;

	if (!n) {
		req_error(r, req_node_err(r, q->ino));
		return;
	}
	if (!S_ISREG(n->mode)) {
		req_error(r, S_ISDIR(n->mode) ? -EISDIR : -EINVAL);
		return;
	}
	room = malloc(sizeof(*room));
	if (!room) {
		req_error(r, -ENOMEM);
		return;
	}
	slots = ns_chunk_slots(n);
	/* Slots past the size are holes the table keeps for growth. */
	slots = (uint32_t)SW_MIN((uint64_t)slots,
				 (n->size + SW_CHUNK_SIZE - 1) / SW_CHUNK_SIZE);
	reply.has_size = reply.has_goal = reply.has_slots = 1;
	reply.size = n->size;
	reply.goal = ns_goal(n) ? ns_goal(n) : (uint32_t)r->m->cfg.goal;
	reply.slots = slots;
	for (i = first; i < slots && reply.n_chunks < FILEINFO_SLOTS; i++) {
		size_t k = reply.n_chunks++;
		Sweepfs__FileinfoChunk *x = &room->chunk[k];
		uint64_t id = ns_chunk_at(n, i);
		struct chunk *c = id ? chunk_get(&r->m->ns, id) : NULL;

		sweepfs__fileinfo_chunk__init(x);
		x->has_index = x->has_chunk_id = 1;
		x->index = i;
		x->chunk_id = id;
		if (c)
			fill_chunk(r->m, c, x, room->copy[k], room->copyp[k]);
		room->chunkp[k] = x;
	}
	reply.chunks = room->chunkp;
	reply.has_next = i < slots;
	reply.next = i;
	req_reply(r, &reply.base);
	free(room);
}

/* ---- a tree's summary ---------------------------------------------------- */

/* How a tree is walked: as whom, and how far. */
struct tree_walk {
	const struct sw_cred *cred; /* NULL: into every directory */
	uint64_t work;		    /* names plus slots left to visit */
};

/* Count @n into @d, paying for its name and slots out of @w's work:
 * -E2BIG (nothing counted) if that is more than is left. */
static int count_node(Sweepfs__DirinfoReply *d, const struct node *n,
		      struct tree_walk *w)
{
	uint64_t cost = 1 + (S_ISREG(n->mode) ? ns_chunk_slots(n) : 0);

	if (cost > w->work)
		return -E2BIG;
	w->work -= cost;
	if (S_ISDIR(n->mode)) {
		d->dirs++;
	} else if (S_ISREG(n->mode)) {
		d->files++;
		d->bytes += n->size;
		for (uint32_t i = 0; i < ns_chunk_slots(n); i++)
			d->chunks += ns_chunk_at(n, i) != 0;
	} else {
		d->others++;
	}
	return 0;
}

/* Whether @w's walk goes below directory @dir. */
static bool may_descend(const struct tree_walk *w, const struct node *dir)
{
	return !w->cred || perm_check(w->cred, dir, SW_MAY_EXEC) == 0;
}

/* Count @top and everything below it that @w reaches (each name once)
 * into @d: 0, -ENOMEM, or -E2BIG once @w's work is spent. */
static int tree_count(const struct node *top, Sweepfs__DirinfoReply *d,
		      struct tree_walk *w)
{
	const struct node **stack = NULL;
	size_t depth = 0, cap = 0;
	int64_t t0 = sw_mono_ns();
	int rc;

	d->has_files = d->has_dirs = d->has_others = 1;
	d->has_bytes = d->has_chunks = d->has_elapsed_us = 1;
	rc = count_node(d, top, w);
	if (rc < 0)
		return rc;
	if (!S_ISDIR(top->mode) || !may_descend(w, top))
		goto out;
	if (sw_grow(&stack, &cap, 1, sizeof(*stack), 64) < 0)
		return -ENOMEM;
	stack[depth++] = top;
	while (depth) {
		const struct node *dir = stack[--depth];

		for (const struct edge *e = dir->u.dir->head; e; e = e->next) {
			const struct node *c = e->child;

			if (!c)
				continue;
			rc = count_node(d, c, w);
			if (rc < 0) {
				free(stack);
				return rc;
			}
			if (!S_ISDIR(c->mode) || !may_descend(w, c))
				continue;
			if (sw_grow(&stack, &cap, depth + 1, sizeof(*stack),
				    64) < 0) {
				free(stack);
				return -ENOMEM;
			}
			stack[depth++] = c;
		}
	}
	free(stack);
out:
	d->elapsed_us = (uint64_t)(sw_mono_ns() - t0) / 1000;
	return 0;
}

struct dirinfo_run {
	struct master *m;
	const struct node *top; /* in the child's copy of memory */
	struct req *req;
	struct sw_child child;
};

/* The child: count, pack, write. */
static int child_count(void *arg, int fd)
{
	struct dirinfo_run *f = arg;
	Sweepfs__DirinfoReply d = SWEEPFS__DIRINFO_REPLY__INIT;
	struct tree_walk w = { NULL, UINT64_MAX }; /* an admin's, whole */
	uint8_t *buf;
	size_t len;
	int rc = tree_count(f->top, &d, &w);

	if (rc < 0)
		return rc;
	len = sweepfs__dirinfo_reply__get_packed_size(&d);
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	sweepfs__dirinfo_reply__pack(&d, buf);
	return sw_write_all(fd, buf, len);
}

static void on_child_exit(struct sw_child *c, int rc)
{
	struct dirinfo_run *f = c->data;
	struct sw_buf *out = &f->child.out;
	Sweepfs__DirinfoReply *d = NULL;

	if (rc == 0)
		d = sweepfs__dirinfo_reply__unpack(NULL, sw_buf_used(out),
						   sw_buf_head(out));
	if (d) {
		req_reply(f->req, &d->base);
		sweepfs__dirinfo_reply__free_unpacked(d, NULL);
	} else {
		sw_err(TAG, "a tree summary did not finish: %s",
		       strerror(rc < 0 ? -rc : EPROTO));
		req_error(f->req, -EIO);
	}
	req_done(f->req);
	f->m->dirinfo = NULL;
	sw_buf_release(out);
	free(f);
}

/* A tree too big for the loop: count it in a child (@r deferred). */
static int dirinfo_fork(struct req *r, const struct node *top)
{
	struct dirinfo_run *f;
	int rc;

	if (r->m->dirinfo || r->m->fsck)
		return -EBUSY; /* one fork slot for both */
	if (r->m->dirinfo_forked &&
	    sw_mono_ns() - r->m->dirinfo_forked < DIRINFO_FORK_GAP)
		return -EAGAIN;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->req = req_defer(r);
	if (!f->req) {
		free(f);
		return -ENOMEM;
	}
	f->m = r->m;
	f->top = top;
	f->child.data = f;
	f->child.on_exit = on_child_exit;
	f->child.out_max = SW_FRAME_MAX_META;
	r->m->dirinfo = f;
	r->m->dirinfo_forked = sw_mono_ns();
	rc = sw_child_start(&f->child, r->m->loop, child_count, f);
	if (rc < 0) {
		/* on_exit does not come: answer here. */
		r->m->dirinfo = NULL;
		req_error(f->req, rc);
		req_done(f->req);
		free(f);
	}
	return 0;
}

void op_dirinfo(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__DirinfoReq *q = (const void *)msg;
	Sweepfs__DirinfoReply d = SWEEPFS__DIRINFO_REPLY__INIT;
	struct sw_cred cred = req_cred(q->cred);
	struct node *n = req_node(r, q->ino);
	bool admin = req_admin(r, &cred);
	struct tree_walk w = { admin ? NULL : &cred, DIRINFO_WORK };
	int rc = -E2BIG;

	if (!n) {
		req_error(r, req_node_err(r, q->ino));
		return;
	}
	if (!S_ISDIR(n->mode) || ns_tree_names(n) <= DIRINFO_INLINE)
		rc = tree_count(n, &d, &w);
	if (rc == -E2BIG && admin) {
		/* Too big for the loop: walked again in a child. */
		rc = dirinfo_fork(r, n);
		if (rc < 0)
			req_error(r, rc);
		return;
	}
	if (rc < 0)
		req_error(r, rc);
	else
		req_reply(r, &d.base);
}
