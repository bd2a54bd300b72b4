/*
 * Directory delegations (deleg.h): granting, recalling, holding back the
 * requests that must wait for a recall, and giving back.
 *
 * Waits on a holder, and their bounds (no client can extend them):
 *
 *  - A recall is answered by DELEG_RETURN, which only the holder's
 *    session can send for its own delegation (others' are ignored).
 *    One unanswered for deleg_timeout is revoked: the delegation ends,
 *    whoever waited for it goes on at once, and the directory is
 *    remembered as revoked for the holder until it sends DELEG_RETURN
 *    for it. Meanwhile its batch operations in that directory are
 *    refused with EKEYREVOKED (the mount then drops what it held there
 *    and gives it back: mount/deleg.c), as CephFS evicts a client
 *    that does not release its capabilities.
 *  - A session with a recall outstanding, or a revocation it has not
 *    acknowledged, is granted nothing: it cannot take a new directory
 *    each time a recall nears its timeout.
 *  - A request waits at most deleg_timeout in all, from when it first
 *    waited, across however many recalls (a holder making directories
 *    under one being recalled, through its batches, makes new ones to
 *    recall): past that, whatever it still waits for is revoked
 *    (req_link->park_t0, req.h).
 *  - Timers are looked at every WAIT_TICK_MS (master.h) while a recall
 *    is outstanding (recall() arms the tick), judged as of when the loop
 *    last polled its sockets (server_answers_seen()): an answer that
 *    came while the loop was held up is read before its sender is taken
 *    for silent. Not while a group's lease is in doubt.
 *
 * Waiting is per request, not per connection (server.c): while a
 * request waits, the requests after it on its connection that read and
 * name none of the nodes the waiting ones name are answered. What is
 * parked is a connection's struct req_link (req.h), which the server
 * embeds in it; recalls, a holder's connection closed, its waiters
 * resumed and the invalidations given up on go through the request
 * layer's hooks (req_notify(), req_close(), req_resume(),
 * req_inval_give_up()): this file names nothing above the handlers.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bucket.h"
#include "deleg.h"
#include "exports.h"
#include "frame.h"
#include "hash.h"
#include "log.h"
#include "handlers.h"
#include "perm.h"
#include "context.h"
#include "req.h"
#include "sessrec.h"
#include "trash.h"
#include "trashops.h"
#include "util.h"
#include "watch.h"

#define TAG "deleg"

/*
 * Marks and tags. A grant marks the directory's files (NODE_DELEG_TAG,
 * namespace.h) with the delegation's tag, 1..NODE_DELEG_TAG_ANY-1, so
 * that a request naming one by number finds the delegations to recall
 * in one flag test (files know no parent; directories do, and are not
 * marked). The end of a delegation unmarks nothing: its tag's count of
 * live delegations drops, and a mark whose tag has none is stale,
 * cleared by the first request that finds it. So giving back, a recall
 * answered, a directory removed and a session gone cost O(1) whatever
 * the directory's size. A grant takes the tag with no live delegation
 * that ended longest ago (its stale marks are the likeliest to be
 * gone); with all in use, the least shared. A stale mark that a new
 * delegation's tag makes look live costs a recall that was not needed,
 * never one that was. A live mark is never replaced by another tag
 * (mark_one()): a file that two grants marked is everyone's.
 */
#define DELEG_TAGS NODE_DELEG_TAG_ANY /* 1..14, and 15: everyone's */

/*
 * What grants may cost the loop. A grant walks the directory once (the
 * check for other names and the marks), about 25 ns an entry here: 5 ms
 * for 200,000 entries. Without a bound, a client pipelining DELEG and
 * DELEG_RETURN of a large directory kept the loop marking (40 KB of
 * requests froze it for 11 s). So a grant is paid for, one visit an
 * entry, from two buckets of visits: its session's and everyone's; a
 * grant walked at once that either cannot pay up front is refused
 * ("busy"), without a walk, and the mount works through the master
 * meanwhile; a grant walked in slices pays each slice, and waits for
 * the buckets to refill when they are empty. A session's bucket
 * refills at DELEG_VISITS_SESSION a second, everyone's at
 * DELEG_VISITS_ALL (about 5% and 10% of a core); each holds two
 * seconds' worth. No turn of the loop walks more than DELEG_WALK_SYNC
 * entries for a grant at once, nor longer than purge_slice for walks.
 */
#define DELEG_VISITS_SESSION 2000000.0
#define DELEG_VISITS_ALL 4000000.0
#define DELEG_VISITS_PER_ENTRY 1

/*
 * Grants of large directories. Past DELEG_WALK_SYNC entries (about
 * 0.4 ms of marking) a grant's walk goes in slices of at most
 * purge_slice, one every DELEG_WALK_EVERY_MS, while its DELEG waits
 * (deferred; the mount works through the master until the answer
 * comes, as when refused). During the walk its tag counts as live, so
 * that its marks are not taken for stale, but nothing is delegated:
 * other sessions go on in the directory unhindered, and the grant is
 * decided again when the walk ends (refusal()), as though the DELEG
 * came then; entries added meanwhile are at the end of the list, which
 * the walk reaches last. It ends refused when an entry has other
 * names, a file marked anywhere got another name meanwhile
 * (ns.marked_links: rare, and it errs the safe way), the directory goes
 * or is granted, another session caches it by then, or the directory
 * grows by DELEG_WALK_SYNC more than it had; it is dropped with its
 * session. A directory being walked is granted to no one else, nor
 * walked again, until the walk ends ("busy"). At most one walk per
 * session and DELEG_WALKS_MAX in all ("busy" past that), each slice
 * paid from the buckets above (everyone's: about 10% of a core), so
 * that the memory and the share of the loop any number of clients
 * can take this way are bounded, and a walk's slot is held only for
 * as long as its directory's size at the rate its session may pay.
 */
#define DELEG_WALK_SYNC 16384u
#define DELEG_WALK_EVERY_MS 1
#define DELEG_WALKS_MAX 8u
#define DELEG_WALK_BATCH 256 /* visits between looks at the clock */

struct walk {
	struct req *r;	   /* the DELEG, deferred */
	struct session *s; /* whose */
	uint64_t dir;	   /* looked up at each slice: it may go */
	unsigned tag;
	struct cursor cur; /* on the last entry marked */
	uint64_t links;	   /* ns.marked_links when it started */
	uint64_t left;	   /* visits it may still make */
	struct walk *next;
};

struct deleg {
	struct node *dir;
	struct session *s;
	unsigned tag;		  /* its marks' (see above) */
	int64_t recall_at;	  /* mono ns the recall went out; 0: none */
	bool removed;		  /* recalled by a removal of its tree */
	bool born;		  /* recalled at birth, nobody waits (yet) */
	struct req_link *waiters; /* parked on it, through park_next */
	struct deleg *next, *prev;
};

/* A delegation taken back from its holder for not answering a recall,
 * until it acknowledges that with DELEG_RETURN or goes. */
struct deleg_revoked {
	uint64_t dir;
	struct deleg_revoked *next;
};

struct delegs {
	struct htab by_dir; /* struct deleg by dir->ino */
	struct deleg *head;
	uint64_t nrecalling; /* delegations being recalled */
	uint64_t nborn;	     /* of those, born ones nobody waits for */
	uint64_t ended;	     /* end() calls: whether a recall freed some */
	struct deleg_stats st;
	struct bucket all;	 /* everyone's visits (see above) */
	struct bucket all_trash; /* everyone's TRASH recalls (conflict_trash) */
	/* By tag (see above): live delegations, and when the last ended
	 * (a count of ends). */
	uint32_t tag_live[DELEG_TAGS];
	uint64_t tag_ended[DELEG_TAGS];
	struct walk *walks; /* grants being walked (see above) */
	unsigned nwalks;
	uv_timer_t *walk_timer; /* their slices; NULL until the first */
};

/* Grants walked in slices, below the requests that start them. */
static struct walk *walk_of(const struct delegs *ds, const struct session *s);
static struct walk *walk_of_dir(const struct delegs *ds, uint64_t dir);
static void walk_end(struct master *m, struct walk *w, const char *why);
static void free_handle(uv_handle_t *h);

/* The buckets' rules: each holds two seconds' worth (see above). */
static const struct bucket_rule session_visits = {
	DELEG_VISITS_SESSION,
	2 * DELEG_VISITS_SESSION,
};
static const struct bucket_rule all_visits = {
	DELEG_VISITS_ALL,
	2 * DELEG_VISITS_ALL,
};

/* Whether @mine and @all may both pay @cost now (then both do). */
static bool both_paid(struct bucket *mine, const struct bucket_rule *mine_rule,
		      struct bucket *all, const struct bucket_rule *all_rule,
		      double cost)
{
	int64_t now = sw_mono_ns();
	struct bucket b = *mine;

	if (!bucket_take(&b, mine_rule, cost, now) ||
	    !bucket_take(all, all_rule, cost, now))
		return false;
	*mine = b;
	return true;
}

/* Whether @s and everyone may pay for a grant of @dir now (see above). */
static bool grant_paid(struct delegs *ds, struct session *s,
		       const struct node *dir)
{
	double cost = (double)dir->u.dir->nentries * DELEG_VISITS_PER_ENTRY;

	return both_paid(&s->deleg_visits, &session_visits, &ds->all,
			 &all_visits, cost);
}

static uint64_t deleg_hash(const void *e)
{
	return sw_hash_u64(((const struct deleg *)e)->dir->ino);
}

static bool deleg_eq(const void *e, const void *key)
{
	return ((const struct deleg *)e)->dir->ino == *(const uint64_t *)key;
}

static struct deleg *find(const struct delegs *ds, uint64_t ino)
{
	return htab_find(&ds->by_dir, sw_hash_u64(ino), deleg_eq, &ino);
}

int delegs_new(struct master *m)
{
	struct delegs *ds = calloc(1, sizeof(*ds));

	if (!ds)
		return -ENOMEM;
	htab_init(&ds->by_dir, deleg_hash);
	m->delegs = ds;
	return 0;
}

static unsigned node_tag(const struct node *n)
{
	return (n->flags & NODE_DELEG_TAG) >> NODE_DELEG_TAG_SHIFT;
}

static void set_tag(struct node *n, unsigned tag)
{
	n->flags = (uint16_t)((n->flags & ~NODE_DELEG_TAG) |
			      (tag << NODE_DELEG_TAG_SHIFT));
}

/* Whether a delegation or a walk has @tag now (NODE_DELEG_TAG_ANY: any;
 * a walk's marks must outlive it if it installs). */
static bool tag_live(const struct delegs *ds, unsigned tag)
{
	return tag == NODE_DELEG_TAG_ANY ? ds->head != NULL || ds->nwalks :
					   ds->tag_live[tag] > 0;
}

/*
 * Mark file @n with @tag. A live mark of another tag is never replaced:
 * it may be that of a delegation or a walk of the same directory (a
 * walk's grant refused at its end, or installed after the other), and
 * replacing it would let a request by number skip that holder's
 * recall. Such a file is marked as everyone's, as mark_deleg_in()
 * (namespace.c) marks a file that two delegations may hold.
 */
static void mark_one(const struct delegs *ds, struct node *n, unsigned tag)
{
	unsigned old = node_tag(n);

	if (old && old != tag && tag_live(ds, old))
		tag = NODE_DELEG_TAG_ANY;
	set_tag(n, tag);
}

/* The tag for a new delegation (see the top). */
static unsigned pick_tag(const struct delegs *ds)
{
	unsigned best = 1;

	for (unsigned t = 2; t < DELEG_TAGS; t++)
		if (ds->tag_live[t] < ds->tag_live[best] ||
		    (ds->tag_live[t] == ds->tag_live[best] &&
		     ds->tag_ended[t] < ds->tag_ended[best]))
			best = t;
	return best;
}

/*
 * Mark @dir's files with @tag, unless one has other names: then false,
 * and the marks made mean nothing (@tag is not live yet). One walk.
 */
static bool mark(struct delegs *ds, struct node *dir, unsigned tag)
{
	for (struct edge *e = ns_edge_live(dir->u.dir->head); e;
	     e = ns_edge_live(e->next)) {
		struct node *n = e->child;

		ds->st.visits++;
		if (S_ISDIR(n->mode))
			continue;
		/* Reachable by another name, which no recall guards. */
		if (n->nlink > 1)
			return false;
		mark_one(ds, n, tag); /* its only name is here */
	}
	return true;
}

/* End @d: unmark, wake whoever waited for it, free it. */
static void end(struct master *m, struct deleg *d, const char *why)
{
	struct delegs *ds = m->delegs;

	if (d->recall_at) {
		uint64_t ns = (uint64_t)(sw_mono_ns() - d->recall_at);

		if (ns > ds->st.recall_max_ns)
			ds->st.recall_max_ns = ns;
		d->s->nrecalling--;
		ds->nrecalling--;
		ds->nborn -= d->born;
	}
	sw_debug(TAG, "session %" PRIu64 ": directory %" PRIu64 " %s", d->s->id,
		 d->dir->ino, why);
	/* Its marks go stale, all at once (see the top). */
	d->dir->flags &= (uint16_t) ~(NODE_DELEG | NODE_DELEG_TAG);
	ds->tag_live[d->tag]--;
	ds->tag_ended[d->tag] = ds->ended + 1;
	htab_remove(&ds->by_dir, deleg_hash(d), d);
	if (d->prev)
		d->prev->next = d->next;
	else
		ds->head = d->next;
	if (d->next)
		d->next->prev = d->prev;
	d->s->ndelegs--;
	ds->ended++;
	while (d->waiters) {
		struct req_link *l = d->waiters;

		d->waiters = l->park_next;
		l->park_next = NULL;
		l->parked = NULL;
		req_resume(m, l);
	}
	free(d);
}

/* Forget @s's revocations (@dir 0: all of them). */
static void unrevoke(struct session *s, uint64_t dir)
{
	struct deleg_revoked **pp = &s->revoked, *rv;

	while ((rv = *pp) != NULL) {
		if (!dir || rv->dir == dir) {
			*pp = rv->next;
			s->nrevoked--;
			free(rv);
		} else {
			pp = &rv->next;
		}
	}
}

bool deleg_revoked(const struct master *m, const struct session *s,
		   uint64_t dir)
{
	(void)m;
	for (const struct deleg_revoked *rv = s->revoked; rv; rv = rv->next)
		if (rv->dir == dir)
			return true;
	return false;
}

bool deleg_held_by_other(const struct master *m, const struct session *s,
			 const struct node *dir)
{
	const struct deleg *d;

	if (!(dir->flags & NODE_DELEG) || !m->delegs)
		return false;
	d = find(m->delegs, dir->ino);
	return d && d->s != s;
}

void delegs_free(struct master *m)
{
	struct delegs *ds = m->delegs;

	if (!ds)
		return;
	while (ds->walks)
		walk_end(m, ds->walks, "shutting down");
	if (ds->walk_timer)
		uv_close((uv_handle_t *)ds->walk_timer, free_handle);
	while (ds->head)
		end(m, ds->head, "dropped at shutdown");
	htab_release(&ds->by_dir);
	free(ds);
	m->delegs = NULL;
}

/* How long a holder's kernel may keep a name it was given (frame.h). */
static int64_t deleg_name_ttl_ns(void)
{
	return (int64_t)SW_DELEG_NAME_TTL_MS * 1000000;
}

/* Tell @s to give @dir back; @removed: the request removes it. */
static void send_recall(struct master *m, struct session *s, uint64_t dir,
			bool removed)
{
	Sweepfs__DelegRecall note = SWEEPFS__DELEG_RECALL__INIT;

	note.dir = dir;
	note.has_removed = removed;
	note.removed = removed;
	if (s->conn)
		req_notify(m, s->conn, SW_MSG_DELEG_RECALL, &note.base);
}

/*
 * Recall @d; returns it, or NULL when it ended: a notice that finds no
 * memory closes the holder's connection at once, and that ends every
 * delegation of the holder (session_detach()), freed.
 */
static struct deleg *recall(struct master *m, struct deleg *d, bool removed)
{
	uint64_t ended = m->delegs->ended;

	if (d->recall_at)
		return d;
	d->recall_at = sw_mono_ns();
	d->s->nrecalling++;
	m->delegs->nrecalling++;
	master_wait_arm(m);
	m->delegs->st.recalls++;
	m->delegs->st.recalls_removed += removed;
	d->removed = removed;
	send_recall(m, d->s, d->dir->ino, removed);
	return m->delegs->ended == ended ? d : NULL;
}

/*
 * Take @d back from a holder that did not give it back in time: its
 * waiters go on, and its holder's later batches there are refused
 * until it acknowledges with DELEG_RETURN (a record it cannot make
 * grow: it is granted nothing meanwhile). Out of memory for the
 * record, the holder's connection is closed: that ends its session's
 * delegations and it resynchronises as after any reconnect.
 */
static void take_back(struct master *m, struct deleg *d, const char *why)
{
	struct delegs *ds = m->delegs;
	struct deleg_revoked *rv = malloc(sizeof(*rv));
	struct session *s = d->s;

	sw_notice(TAG, "%s: directory %" PRIu64 " taken back: %s", s->peer,
		  d->dir->ino, why);
	ds->st.timeouts++;
	if (rv) {
		rv->dir = d->dir->ino;
		rv->next = s->revoked;
		s->revoked = rv;
		s->nrevoked++;
	}
	/* It does not answer: nor is it waited for to acknowledge the
	 * invalidations the waiters' changes send it (server.c). */
	req_inval_give_up(m, s);
	/* Not an answered recall: out of recall_max_ns. */
	d->recall_at = 0;
	s->nrecalling--;
	ds->nrecalling--;
	ds->nborn -= d->born;
	d->born = false;
	/* Told its tree goes, it may leave the names when it gives it back
	 * at last: held as when it answers (op_deleg_return()). Out of
	 * memory, its connection goes (below). */
	if (d->removed && rv &&
	    !watch_hold(m, s, d->dir, deleg_name_ttl_ns())) {
		s->revoked = rv->next;
		s->nrevoked--;
		free(rv);
		rv = NULL;
	}
	end(m, d, "taken back");
	if (!rv && s->conn)
		req_close(m, s->conn);
}

/* Whether @d is of a session other than @s, on @top or below (NULL:
 * anywhere), with @tag (NODE_DELEG_TAG_ANY: any). */
static bool others_below(const struct deleg *d, const struct session *s,
			 const struct node *top, unsigned tag)
{
	return d->s != s && (tag == NODE_DELEG_TAG_ANY || d->tag == tag) &&
	       (!top || ns_is_ancestor(top, d->dir));
}

/*
 * Recall the delegations others_below() picks; returns one of them to
 * wait for, or NULL. A recall that ends some (recall()) frees what the
 * walk would go on to: it starts again from the head, past the ones
 * recalled already.
 */
static struct deleg *recall_others(struct master *m, const struct session *s,
				   const struct node *top, unsigned tag,
				   bool removed)
{
	struct deleg *d;

restart:
	for (d = m->delegs->head; d; d = d->next)
		if (!d->recall_at && others_below(d, s, top, tag) &&
		    !recall(m, d, removed))
			goto restart;
	for (d = m->delegs->head; d && !others_below(d, s, top, tag);
	     d = d->next)
		;
	return d;
}

void deleg_recall_all(struct master *m)
{
	if (m->delegs)
		recall_others(m, NULL, NULL, NODE_DELEG_TAG_ANY, false);
}

/*
 * Whether inode @ino, named by a request of @s, waits for a delegation;
 * with @subtree (the request changes a tree: rmr, rename, snapshot) also
 * for one below it. Recalls what it finds (@removed: the request removes
 * @ino's tree, which the recalls of its own and those below it say);
 * returns one to wait for. @own: the request is @s's own (a batch, the
 * operations it acknowledged under its delegations).
 */
static struct deleg *conflict_ino(struct master *m, struct session *s,
				  uint64_t ino, bool subtree, bool removed,
				  bool own)
{
	/* As the request will see it: a node a confined session may not
	 * use by number is refused, with no recall of another's. */
	struct req as = { .m = m, .s = s };
	struct node *n = req_node(&as, ino);
	struct deleg *d, *wait = NULL;
	unsigned tag;

	if (!n)
		return NULL;
	/* The holder's own batch in a directory taken back from it: the
	 * operations are refused (EKEYREVOKED), nothing to wait for; parked,
	 * the batch would hold up its sender's later batches and returns
	 * (server.c) for nothing. */
	if (own && S_ISDIR(n->mode) && deleg_revoked(m, s, ino))
		return NULL;
	if (S_ISDIR(n->mode)) {
		/* An entry of a delegated directory: its parent says. */
		struct node *up = n->u.dir->parent;
		/*
		 * Not waited for by a mount's own batch (the parent's
		 * holder only hears of the change to its entry's attributes
		 * a recall later; the mount answered the operations long
		 * before): parked, the batch would hold up the mount's
		 * later batches and DELEG_RETURNs, which stay behind it
		 * (server.c), and two mounts could wait for each other's
		 * returns till deleg_timeout. Also where the mount no
		 * longer holds the directory (a batch sent again after a
		 * reconnect).
		 */
		if (up != n && (up->flags & NODE_DELEG) &&
		    (d = find(m->delegs, up->ino)) != NULL && d->s != s &&
		    (d = recall(m, d, false)) != NULL && !own)
			wait = d;
	} else if ((tag = node_tag(n)) != 0) {
		if (tag_live(m->delegs, tag))
			return recall_others(m, s, NULL, tag, false);
		set_tag(n, 0); /* stale (see the top) */
	}
	/* Itself too, at once: one wait for both. (A recall that ended
	 * delegations may have ended this one: looked up afresh.) */
	if (n->flags & NODE_DELEG) {
		d = find(m->delegs, ino);
		if (d && d->s != s && (d = recall(m, d, removed)) != NULL &&
		    !wait)
			wait = d;
	}
	/* And the tree below, in the same round. What this returns may
	 * have ended since (a recall that ended delegations): conflict()
	 * asks again, once every recall went out, for one to wait for. */
	if (subtree && S_ISDIR(n->mode) &&
	    (d = recall_others(m, s, n, NODE_DELEG_TAG_ANY, removed)) && !wait)
		wait = d;
	return wait;
}

/*
 * A request that changes the entry @name of directory @ino (an ENTRY()
 * of messages.def: rmdir, rename, snapshot, rmr, rmsnapshot): that
 * directory's delegation and its parent's, as for any node named, and
 * the entry's node's if it is a directory the caller may reach (searching
 * @ino); with @subtree, those of the tree the entry heads
 * too, told that it goes when the request @removes it. Not those of the
 * entry's siblings, which nothing changes: an rmr of d0 on the mount
 * that made d0 and d1 would otherwise make it forget every name it
 * caches in d1, a rename of one file in the top of a tree every name
 * below. The entry not there yet (a holder of @ino may still have its
 * create queued): recalled when the request looks again after that
 * holder gives @ino back.
 */
static struct deleg *conflict_entry(struct master *m, struct session *s,
				    uint64_t ino,
				    const ProtobufCBinaryData *name,
				    bool subtree, bool removes,
				    const Sweepfs__Cred *cred)
{
	struct req as = { .m = m, .s = s };
	struct node *dir = req_node(&as, ino), *child = NULL;
	struct sw_cred c = { 0 };
	struct edge *e;
	bool goes = false;
	struct deleg *d, *e_d;

	/*
	 * Looked up as the request will (confinement, search permission:
	 * whether it waits tells nobody what a directory they may not
	 * search holds). Only a directory: a file's one name is in @dir,
	 * whose recall covers it, and its mark may be another's stale one
	 * (the top of the file), which would recall unrelated delegations.
	 */
	if (cred)
		c = req_cred(cred);
	if (dir && S_ISDIR(dir->mode) && name->len <= SW_NAME_MAX && cred &&
	    perm_check(&c, dir, PERM_X) == 0 &&
	    (e = ns_lookup(&m->ns, dir, (const char *)name->data, name->len)) !=
		    NULL &&
	    S_ISDIR(e->child->mode))
		child = e->child;
	/*
	 * Told it goes only if the caller may remove the entry as far as
	 * O(1) checks say (write and search in the directory, the sticky
	 * rule): a holder told so keeps its names, watched for a minute,
	 * and nobody else is granted the tree meanwhile; one who may not
	 * costs the holder the recall alone, as any request can.
	 */
	if (removes && child)
		goes = perm_check(&c, dir, PERM_W | PERM_X) == 0 &&
		       perm_sticky(&c, dir, child) == 0;
	/* What it returns is used only once every recall went out
	 * (conflict()). */
	d = conflict_ino(m, s, ino, false, false, false);
	if (child &&
	    (e_d = conflict_ino(m, s, child->ino, subtree, goes, false)) && !d)
		d = e_d;
	return d;
}

/*
 * A TRASH request (messages.def: the only one that recalls all) names
 * no node a holder knows of, but may have to see what holders queued:
 *  - a purge (op 3) drops an item that is the master's alone: nothing;
 *  - a restore (op 2), of an item there that the caller may restore
 *    (as op_trash() checks), into the directory it names (parent), or
 *    where the item was while that is a directory: that directory's
 *    delegation (and its parent's, as for any node named); where it
 *    was, gone since: each directory on the item's path that is there,
 *    which remake_parents() looks names up in and makes the rest below;
 *  - a list (op 1): every one below the session's root, for a first
 *    page (the next ones carry on from it).
 * A list's recall of all, when it sends any, is paid on the request's
 * first look (@first: not again when it is looked at after a recall),
 * one a time, from the session's bucket and everyone's
 * (TRASH_RECALLS_*): past either, or on a later look, the list waits
 * only for the recalls already out, and sees what the master has
 * (removals a holder queued reach the trash after it, as if made after
 * it). So no client's listings take everyone's delegations back more
 * often than that, and nobody waits for the buckets.
 */
#define TRASH_RECALLS_SESSION 1 /* a second, four at once */
#define TRASH_RECALLS_ALL 2	/* a second, eight at once */

static const struct bucket_rule session_trash = { TRASH_RECALLS_SESSION,
						  4 * TRASH_RECALLS_SESSION };
static const struct bucket_rule all_trash = { TRASH_RECALLS_ALL,
					      4 * TRASH_RECALLS_ALL };

/* The first of others_below() @top whose recall is out (@out) or not. */
static struct deleg *first_below(const struct delegs *ds,
				 const struct session *s,
				 const struct node *top, bool out)
{
	struct deleg *d;

	for (d = ds->head; d; d = d->next)
		if (!d->recall_at == !out &&
		    others_below(d, s, top, NODE_DELEG_TAG_ANY))
			break;
	return d;
}

/* Each directory on @t's path that is there, from the root down: what a
 * restore to where it was looks names up in (remake_parents()). */
static struct deleg *conflict_path(struct master *m, struct session *s,
				   const struct trash_item *t)
{
	struct node *dir = m->ns.root;
	struct deleg *wait = NULL, *d;
	const char *p = NULL;
	size_t len;

	for (;;) {
		struct edge *e;

		d = conflict_ino(m, s, dir->ino, false, false, false);
		if (d && !wait)
			wait = d;
		if (!ns_trash_path_next(t, &p, &len))
			return wait;
		e = ns_lookup(&m->ns, dir, p, len);
		if (!e || !e->child || !S_ISDIR(e->child->mode))
			return wait;
		dir = e->child;
	}
}

static struct deleg *conflict_restore(struct master *m, struct session *s,
				      const Sweepfs__TrashReq *q)
{
	const struct trash_item *t = q->has_id ? ns_trash_find(&m->ns, q->id) :
						 NULL;
	struct req as = { .m = m, .s = s };
	struct sw_cred cred = req_cred(q->cred);
	const struct node *dir;

	/* Refused by op_trash(): nothing. */
	if (!t || !trash_item_visible(&as, t) || !req_owns(&as, &cred, t->node))
		return NULL;
	if (q->has_parent)
		return conflict_ino(m, s, q->parent, false, false, false);
	dir = req_node(&as, t->parent);
	if (dir && S_ISDIR(dir->mode) && !ns_detached(dir))
		return conflict_ino(m, s, t->parent, false, false, false);
	return conflict_path(m, s, t);
}

static struct deleg *conflict_trash(struct master *m, struct session *s,
				    const Sweepfs__TrashReq *q, bool first)
{
	struct delegs *ds = m->delegs;
	const struct node *top = NULL;

	if (q->op == 2)
		return conflict_restore(m, s, q);
	if (q->op != 1 || (q->has_after && q->after))
		return NULL; /* a purge, a next page, an op refused */
	if (s->root_ino != NS_ROOT_INO &&
	    (top = ns_get(&m->ns, s->root_ino)) == NULL)
		return NULL;
	if (!first_below(ds, s, top, false))
		return first_below(ds, s, top, true);
	if (!first || !both_paid(&s->trash_recalls, &session_trash,
				 &ds->all_trash, &all_trash, 1)) {
		sw_debug(TAG,
			 "session %" PRIu64 ": a trash list goes on without "
			 "recalling every delegation%s",
			 s->id, first ? " (paid for too many lately)" : "");
		return first_below(ds, s, top, true);
	}
	return recall_others(m, s, top, NODE_DELEG_TAG_ANY, false);
}

/* What node @ino of request @msg, as @it walks it, must wait for. */
static struct deleg *conflict_node(struct master *m, struct session *s,
				   const struct sw_msg_info *info,
				   const struct sw_msg_nodes *it, uint64_t ino,
				   const ProtobufCMessage *msg)
{
	if (it->entry)
		return conflict_entry(m, s, ino, it->entry,
				      info->subtree || info->removes,
				      info->removes, sw_msg_cred(msg));
	return conflict_ino(m, s, ino, info->subtree, false, info->no_flush);
}

/*
 * The delegation request @msg of @type must wait for, recalled: what it
 * names (proto/messages.def says which fields name nodes and entries,
 * and whether it changes their subtrees, removes an entry or recalls
 * all), held by another session. Every node's recalls go out at once,
 * for one round trip; then one is picked to wait for, afresh (a recall
 * that ended delegations may have freed one an earlier node returned).
 */
static struct deleg *conflict(struct master *m, struct session *s,
			      uint16_t type, const ProtobufCMessage *msg,
			      bool first)
{
	const struct sw_msg_info *info = sw_msg_info(type);
	struct deleg *d = NULL;
	struct sw_msg_nodes it;
	bool any = false;
	uint64_t ino;

	if (!info)
		return NULL;
	if (info->recall_all && type == SW_MSG_TRASH)
		return conflict_trash(m, s, (const Sweepfs__TrashReq *)msg,
				      first);
	if (info->recall_all)
		return recall_others(m, s, NULL, NODE_DELEG_TAG_ANY, false);
	sw_msg_nodes_begin(&it, type, msg);
	while (sw_msg_nodes_next(&it, &ino))
		any |= conflict_node(m, s, info, &it, ino, msg) != NULL;
	if (!any)
		return NULL;
	sw_msg_nodes_begin(&it, type, msg);
	while (!d && sw_msg_nodes_next(&it, &ino))
		d = conflict_node(m, s, info, &it, ino, msg);
	return d;
}

/* How long a request may wait for delegations, in all. */
static int64_t wait_limit(const struct master *m)
{
	return (int64_t)SW_MIN(m->cfg.deleg_timeout_ms, INT64_MAX / 1000000) *
	       1000000;
}

bool deleg_wait(struct master *m, struct session *s, struct req_link *l,
		uint16_t type, const ProtobufCMessage *msg)
{
	int64_t now;
	struct deleg *d;

	if (!m->delegs || !m->delegs->head || !s || session_is_peer(s))
		return false;
	/* Past a parked request, a trash list would look for the first time
	 * with its wait clock running: it stays behind it instead. */
	if (l->parked && type == SW_MSG_TRASH)
		return true;
	/* (A first look: not one after a recall.) */
	d = conflict(m, s, type, msg, !l->park_t0);
	if (!d)
		return false;
	if (l->parked)
		return true; /* a request past the parked one (server.c) */
	now = sw_mono_ns();
	if (!l->park_t0) {
		l->park_t0 = now;
	} else if (now - l->park_t0 >= wait_limit(m)) {
		/* Waited its fill, across recalls: what it still waits
		 * for is taken back. Each turn ends one delegation. */
		do
			take_back(m, d, "a request waited for it too long");
		while ((d = conflict(m, s, type, msg, false)) != NULL);
		return false;
	}
	/* Waited for now: a recall like the others (refusal()). */
	if (d->born) {
		d->born = false;
		m->delegs->nborn--;
	}
	l->parked = d;
	l->park_next = d->waiters;
	d->waiters = l;
	return true;
}

void deleg_unpark(struct req_link *l)
{
	struct req_link **pp;

	if (!l->parked)
		return;
	for (pp = &l->parked->waiters; *pp; pp = &(*pp)->park_next) {
		if (*pp == l) {
			*pp = l->park_next;
			break;
		}
	}
	l->parked = NULL;
	l->park_next = NULL;
}

void deleg_drop_session(struct master *m, struct session *s)
{
	struct deleg *d, *next;

	if (!m->delegs)
		return;
	for (d = s->ndelegs ? m->delegs->head : NULL; d; d = next) {
		next = d->next;
		if (d->s == s)
			end(m, d, "dropped: its session is gone");
	}
	if (m->delegs->nwalks) {
		struct walk *w = walk_of(m->delegs, s);

		if (w)
			walk_end(m, w, "its session is gone");
	}
	/* Its mount drops all it held when its connection breaks. */
	unrevoke(s, 0);
}

void deleg_dir_gone(struct master *m, struct node *dir)
{
	struct deleg *d;

	if (!(dir->flags & NODE_DELEG) || !m->delegs)
		return;
	d = find(m->delegs, dir->ino);
	if (d)
		end(m, d, "gone");
}

/* Whether a request waiting for @d has waited its fill. */
static bool waiter_expired(const struct deleg *d, int64_t now, int64_t limit)
{
	for (const struct req_link *l = d->waiters; l; l = l->park_next)
		if (now - l->park_t0 >= limit)
			return true;
	return false;
}

/*
 * A holder nothing has come from for deleg_timeout is stopped or cut off
 * (a mount that holds a delegation pings several times a lease when it
 * has nothing else to say): each request that needs another of its
 * directories would wait deleg_timeout again, one after the other (a
 * rename past a stopped mount waited three times that: its lookup, its
 * entry, the directory below). So a recall of such a holder is waited
 * for this long at most, counted from when the silence reached
 * deleg_timeout if the recall is older; then taken back as any, its
 * notice sent. Bytes from it, read or waiting to be (a connection the
 * master reads no more while its requests wait), and the full wait
 * holds again.
 */
#define DELEG_LAX_MS 250

void deleg_tick(struct master *m, int64_t seen)
{
	int64_t limit = wait_limit(m);
	int64_t lax = SW_MIN(limit, (int64_t)DELEG_LAX_MS * 1000000);
	struct deleg *d, *next;
	int64_t dead;

	if (!m->delegs || !m->delegs->nrecalling)
		return;
restart:
	for (d = m->delegs->head; d; d = next) {
		next = d->next;
		if (!d->recall_at)
			continue;
		/* When its silence reached deleg_timeout (or will). */
		dead = req_silent_since(m, d->s->conn, seen);
		dead = dead > INT64_MAX - limit ? INT64_MAX : dead + limit;
		if (seen - d->recall_at >= limit)
			take_back(m, d,
				  "did not give it back in deleg_timeout");
		else if (seen >= dead &&
			 seen - SW_MAX(d->recall_at, dead) >= lax)
			take_back(m, d,
				  "nothing came from its holder in "
				  "deleg_timeout");
		else if (waiter_expired(d, seen, limit))
			take_back(m, d, "a request waited for it too long");
		else
			continue;
		/* Waking its waiters may have ended others. */
		goto restart;
	}
}

bool deleg_recalling(const struct master *m)
{
	return m->delegs && m->delegs->nrecalling;
}

void deleg_stats(const struct master *m, struct deleg_stats *st)
{
	if (!m->delegs) {
		memset(st, 0, sizeof(*st));
		return;
	}
	*st = m->delegs->st;
	st->held = htab_count(&m->delegs->by_dir);
}

/* ---- requests ------------------------------------------------------- */

uint32_t deleg_lease_ms(const struct master *m)
{
	/* Half the soonest a silent holder loses a delegation: a recall
	 * unanswered for deleg_timeout, or its connection found dead
	 * (peer_timeout with nothing acknowledged). */
	return (uint32_t)SW_MAX(
		SW_MIN(m->cfg.deleg_timeout_ms, m->cfg.peer_timeout_ms) / 2, 1);
}

/*
 * Why @s may not have @dir delegated, or NULL; with @start, what its
 * walk would cost is checked too (not when a walk ended: paid). @made:
 * a directory @s just made in one it holds that nobody recalls
 * (deleg_grant_made()), which others' recalls do not refuse.
 */
static const char *refusal(struct master *m, struct session *s,
			   struct node *dir, bool start, bool made)
{
	if (s->role != SWEEPFS__ROLE__ROLE_MOUNT || !s->rw)
		return "not a read-write mount";
	/* The mount checks permissions with the caller's own credentials:
	 * an export that maps them keeps every operation on the master. */
	if (s->mapall_uid != EXPORT_NO_MAP || s->maproot_uid != EXPORT_NO_MAP)
		return "its export maps credentials";
	if (s->ndelegs >= m->cfg.deleg_max)
		return "deleg_max";
	/* Else a holder could take a new directory each time a recall
	 * nears its end, and keep a request that waits for all of them
	 * (a trash listing, a rename at the top) waiting forever. */
	if (s->nrecalling)
		return "a recall is outstanding";
	/* Nor anyone while some recall is on its way: a request waiting
	 * for it would find new delegations to wait for, and once its time
	 * is up (wait_limit()) they would be taken back with no time to
	 * answer, their holders' queued operations refused. */
	if (m->delegs->nrecalling > m->delegs->nborn && !made)
		return "another recall is outstanding";
	if (s->nrevoked)
		return "a delegation was taken back and not given back";
	/* It does not read what it is sent: its recalls would only pile
	 * up behind the rest (server.c, SERVER_NOTICES_MAX). */
	if (s->behind_at)
		return "behind on its notices";
	/* Just elected: a mount may still trust what the last leader
	 * delegated to it, for a lease from its last answer there. (A
	 * master that restarted reset its connections, and mounts drop
	 * what they hold when theirs breaks.) */
	if (m->group && sw_mono_ns() - m->loaded_mono <
				(int64_t)deleg_lease_ms(m) * 1000000)
		return "taking over";
	/* What a holder answers itself could not be journaled later. */
	if (m->cl && changelog_admit(m->cl) < 0)
		return "the metadata disk is full";
	if (ns_detached(dir))
		return "removed";
	/* Being walked for a grant: its marks are that walk's until it
	 * ends (a second walk, or a grant meanwhile, would mix them). */
	if (start && walk_of_dir(m->delegs, dir->ino))
		return "busy";
	/* Last but the walk: it costs the directory's size. */
	if (start && dir->u.dir->nentries > DELEG_WALK_SYNC &&
	    (walk_of(m->delegs, s) || m->delegs->nwalks >= DELEG_WALKS_MAX))
		return "busy";
	if (start && dir->u.dir->nentries <= DELEG_WALK_SYNC &&
	    !grant_paid(m->delegs, s, dir))
		return "busy";
	/* Last: it drops idle watches of others (and tells them), which
	 * is worth it only for a grant. */
	if (watch_others(m, dir, s))
		return "another session caches it";
	return NULL;
}

/* Delegate @dir, its files marked with @tag, to @s: 0 or -ENOMEM. */
static int install(struct master *m, struct session *s, struct node *dir,
		   unsigned tag, struct deleg **out)
{
	struct delegs *ds = m->delegs;
	struct deleg *d = calloc(1, sizeof(*d));

	if (!d || htab_insert(&ds->by_dir, sw_hash_u64(dir->ino), d)) {
		free(d);
		return -ENOMEM;
	}
	d->dir = dir;
	d->s = s;
	d->tag = tag;
	ds->tag_live[tag]++;
	d->next = ds->head;
	if (ds->head)
		ds->head->prev = d;
	ds->head = d;
	s->ndelegs++;
	dir->flags |= NODE_DELEG;
	set_tag(dir, tag);
	/* Its listing is the holder's: no one else's to invalidate, and its
	 * own is told when the directory goes. */
	watch_add(m, s, dir);
	ds->st.granted++;
	if (out)
		*out = d;
	return 0;
}

/*
 * Delegate @dir to @s (refusal() passed), in one walk: 0, or -ENOMEM,
 * or -EMLINK when an entry has other names (then nothing is delegated).
 */
static int grant(struct master *m, struct session *s, struct node *dir,
		 struct deleg **out)
{
	unsigned tag = pick_tag(m->delegs);

	if (!mark(m->delegs, dir, tag))
		return -EMLINK;
	return install(m, s, dir, tag, out);
}

/* ---- grants walked in slices (see the top) --------------------------- */

static void free_handle(uv_handle_t *h)
{
	free(h);
}

static struct walk *walk_of(const struct delegs *ds, const struct session *s)
{
	struct walk *w = ds->walks;

	while (w && w->s != s)
		w = w->next;
	return w;
}

static struct walk *walk_of_dir(const struct delegs *ds, uint64_t dir)
{
	struct walk *w = ds->walks;

	while (w && w->dir != dir)
		w = w->next;
	return w;
}

/*
 * End walk @w: refused for @why (NULL: decided now), its DELEG answered
 * if its connection is still there, @w freed.
 */
static void walk_end(struct master *m, struct walk *w, const char *why)
{
	struct delegs *ds = m->delegs;
	Sweepfs__DelegReply reply = SWEEPFS__DELEG_REPLY__INIT;
	struct node *dir = ns_get(&m->ns, w->dir);
	struct walk **pp = &ds->walks;
	Sweepfs__Attr attr;

	while (*pp != w)
		pp = &(*pp)->next;
	*pp = w->next;
	ds->nwalks--;
	ds->tag_live[w->tag]--;
	ns_cursor_clear(&m->ns, &w->cur);
	if (!why && (!dir || !S_ISDIR(dir->mode)))
		why = "removed";
	if (!why && !req_session(w->r))
		why = "its session is gone";
	/* Another's walk ended first. */
	if (!why && (dir->flags & NODE_DELEG))
		why = "another session caches it";
	/* A file it marked may have got a name elsewhere since it was
	 * visited (which no recall of this directory guards). */
	if (!why && w->links != m->ns.marked_links)
		why = "an entry got another name";
	if (!why)
		why = refusal(m, w->s, dir, false, false);
	if (!why && install(m, w->s, dir, w->tag, NULL) < 0)
		why = "out of memory";
	if (why) {
		sw_debug(TAG, "directory %" PRIu64 " not delegated: %s", w->dir,
			 why);
		ds->st.refused++;
	}
	if (!dir || !S_ISDIR(dir->mode)) {
		req_error(w->r, -ENOENT);
	} else {
		reply.has_granted = 1;
		reply.granted = why == NULL;
		attr_fill(m, &attr, dir);
		reply.attr = &attr;
		req_reply(w->r, &reply.base);
	}
	req_done(w->r);
	free(w);
	if (!ds->nwalks)
		uv_timer_stop(ds->walk_timer);
}

/*
 * Walk @w on until @deadline (mono ns), as far as its session's and
 * everyone's visits pay (see the top; it waits for them to refill), or
 * to its end: whether it ended (@w is freed then).
 */
static bool walk_slice(struct master *m, struct walk *w, int64_t deadline)
{
	struct delegs *ds = m->delegs;
	struct node *dir = ns_get(&m->ns, w->dir);
	struct edge *e, *last = NULL;
	int64_t now = sw_mono_ns();
	double pay;
	uint64_t k = 0;

	if (!dir || w->cur.dir != dir || ns_detached(dir)) {
		walk_end(m, w, "removed");
		return true;
	}
	/* Granted by then, which this walk would only refuse at its end. */
	if (dir->flags & NODE_DELEG) {
		walk_end(m, w, "another session caches it");
		return true;
	}
	pay = SW_MIN(bucket_fill(&w->s->deleg_visits, &session_visits, now),
		     bucket_fill(&ds->all, &all_visits, now));
	if (pay < DELEG_WALK_BATCH)
		return false;
	e = ns_edge_live(w->cur.pos ? w->cur.pos->next : dir->u.dir->head);
	while (e && k < pay) {
		struct node *n = e->child;

		if (!w->left--) {
			walk_end(m, w, "it grows faster than it is walked");
			return true;
		}
		ds->st.visits++;
		k++;
		if (!S_ISDIR(n->mode)) {
			if (n->nlink > 1) {
				walk_end(m, w, "an entry has other names");
				return true;
			}
			mark_one(ds, n, w->tag);
		}
		last = e;
		e = ns_edge_live(e->next);
		if (k % DELEG_WALK_BATCH == 0 && sw_mono_ns() >= deadline)
			break;
	}
	bucket_spend(&w->s->deleg_visits, (double)k * DELEG_VISITS_PER_ENTRY);
	bucket_spend(&ds->all, (double)k * DELEG_VISITS_PER_ENTRY);
	if (last)
		ns_cursor_set(&m->ns, &w->cur, dir, last);
	if (e)
		return false;
	walk_end(m, w, NULL);
	return true;
}

/* The @i-th walk, oldest first, or NULL. */
static struct walk *walk_nth(const struct delegs *ds, unsigned i)
{
	struct walk *w = ds->walks;

	while (w && i--)
		w = w->next;
	return w;
}

static void on_walk_timer(uv_timer_t *t)
{
	struct master *m = t->data;
	struct delegs *ds = m->delegs;
	int64_t deadline = sw_mono_ns() + (int64_t)m->cfg.purge_slice_us * 1000;
	struct walk *w;
	unsigned i = 0;

	/* The oldest first; one slice for all of them together, each
	 * looked at once (an end frees it: the next takes its place). */
	while ((w = walk_nth(ds, i)) != NULL) {
		if (!walk_slice(m, w, deadline))
			i++;
		if (sw_mono_ns() >= deadline)
			break;
	}
	ds->st.walk_slices++;
}

/*
 * Walk @dir for @r's session in slices, @r deferred: 0, or -ENOMEM
 * (then nothing started).
 */
static int walk_start(struct req *r, struct node *dir)
{
	struct master *m = r->m;
	struct delegs *ds = m->delegs;
	struct walk *w = calloc(1, sizeof(*w)), **pp;

	if (!ds->walk_timer) {
		ds->walk_timer = malloc(sizeof(*ds->walk_timer));
		if (!ds->walk_timer ||
		    uv_timer_init(m->loop, ds->walk_timer) < 0) {
			free(ds->walk_timer);
			ds->walk_timer = NULL;
		} else {
			ds->walk_timer->data = m;
		}
	}
	if (!w || !ds->walk_timer || !(w->r = req_defer(r))) {
		free(w);
		return -ENOMEM;
	}
	w->s = r->s;
	w->dir = dir->ino;
	w->tag = pick_tag(ds);
	w->links = m->ns.marked_links;
	/* Entries added meanwhile are walked too, but not without end: a
	 * directory that grows faster than its walk is refused. */
	w->left = dir->u.dir->nentries + DELEG_WALK_SYNC;
	ds->tag_live[w->tag]++;
	ns_cursor_init(&w->cur);
	ns_cursor_set(&m->ns, &w->cur, dir, NULL);
	/* Last: the oldest walks first. */
	for (pp = &ds->walks; *pp; pp = &(*pp)->next)
		;
	*pp = w;
	if (!ds->nwalks++)
		uv_timer_start(ds->walk_timer, on_walk_timer,
			       DELEG_WALK_EVERY_MS, DELEG_WALK_EVERY_MS);
	return 0;
}

void deleg_grant_made(struct master *m, struct session *s, struct node *dir)
{
	struct node *parent = dir->u.dir->parent;
	struct deleg *d = NULL, *made;

	if (!m->delegs || (dir->flags & NODE_DELEG))
		return;
	if (parent && (parent->flags & NODE_DELEG))
		d = find(m->delegs, parent->ino);
	/*
	 * Made in a directory its maker holds: the maker's at the master
	 * too, so that nobody reaches into it before the maker has sent
	 * what it queued there, and the maker's batches there wait for
	 * nobody. Not delegated, another mount could be granted it
	 * meanwhile, and the maker's batch would wait for that one's
	 * return, holding up the maker's later batches and returns behind
	 * it (server.c), and that mount would have seen the directory
	 * without what the maker had already acknowledged there.
	 *
	 * Given back at once where a grant would be refused (deleg_max, a
	 * recall of the maker's outstanding, ...; others' recalls do not
	 * refuse it: no request waiting for one can come to wait for it, as
	 * one over this tree would have recalled the parent), or under a
	 * parent on its way back (whoever waits for the parent may go on
	 * into this one only once its maker has sent what it queued here).
	 *
	 * Bounded: up to twice deleg_max, and not while the maker owes a
	 * revocation. Past that (a mount making directories faster than it
	 * gives them back, or one that does not answer), it is not
	 * delegated, and its maker is told so at once.
	 *
	 * Given back for a refusal, nobody waits for it: its recall does
	 * not refuse others' grants meanwhile (refusal()), until a request
	 * comes to wait for it (deleg_wait()); a mount at deleg_max that
	 * unpacks a tree would otherwise stop every other mount's grants
	 * at each directory it makes.
	 */
	if (d && d->s == s && !s->nrevoked &&
	    s->ndelegs / 2 < m->cfg.deleg_max) {
		bool under = d->recall_at != 0;
		bool back = under || refusal(m, s, dir, true, true);

		if (grant(m, s, dir, &made) == 0) {
			if (back && recall(m, made, under && d->removed) &&
			    !under) {
				made->born = true;
				m->delegs->nborn++;
			}
			return;
		}
	}
	/* The maker holds what it made from birth: told at once that it
	 * does not, it gives it back (a return of what is not held changes
	 * nothing) and asks the master from then on. */
	send_recall(m, s, dir->ino, false);
}

void op_deleg(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__DelegReq *q = (const Sweepfs__DelegReq *)msg;
	Sweepfs__DelegReply reply = SWEEPFS__DELEG_REPLY__INIT;
	struct master *m = r->m;
	struct delegs *ds = m->delegs;
	Sweepfs__Attr attr;
	struct node *dir = req_node(r, q->dir);
	const char *why;
	struct deleg *d;

	if (!dir) {
		req_error(r, req_node_err(r, q->dir));
		return;
	}
	if (!S_ISDIR(dir->mode)) {
		req_error(r, -ENOTDIR);
		return;
	}
	d = (dir->flags & NODE_DELEG) ? find(ds, dir->ino) : NULL;
	if (d) {
		/* Ours (another's would have made us wait); being recalled,
		 * it is on its way back. */
		why = d->s != r->s || d->recall_at ? "being given back" : NULL;
	} else if ((why = refusal(m, r->s, dir, true, false)) == NULL) {
		int rc;

		if (dir->u.dir->nentries > DELEG_WALK_SYNC) {
			rc = walk_start(r, dir);
			if (rc == 0)
				return; /* answered when the walk ends */
			req_error(r, rc);
			return;
		}
		rc = grant(m, r->s, dir, NULL);

		if (rc == -ENOMEM) {
			req_error(r, rc);
			return;
		}
		if (rc < 0)
			why = "an entry has other names";
	}
	if (why) {
		sw_debug(TAG,
			 "session %" PRIu64 ": directory %" PRIu64
			 " not delegated: %s",
			 r->s->id, dir->ino, why);
		ds->st.refused++;
	}
	reply.has_granted = 1;
	reply.granted = why == NULL;
	attr_fill(m, &attr, dir);
	reply.attr = &attr;
	req_reply(r, &reply.base);
}

void op_deleg_return(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__DelegReturnReq *q = (const Sweepfs__DelegReturnReq *)msg;
	Sweepfs__StatusReply reply = SWEEPFS__STATUS_REPLY__INIT;
	struct deleg *d = find(r->m->delegs, q->dir);
	bool lost = false;

	/* Told its tree goes, the holder's kernel may keep the names it was
	 * given there (mount/knames.c): if the directory stays after all
	 * (the removal refused, or -f spared it), every change to it by
	 * another session must reach the holder as an invalidation, as
	 * long as those names may live. Watched from the moment the
	 * delegation ends: nothing else can change it in between. Out of
	 * memory for that, the holder's connection is closed: a mount that
	 * reconnects forgets all such names (mount/deleg.c). */
	if (d && d->s == r->s) {
		lost = d->removed &&
		       !watch_hold(r->m, r->s, d->dir, deleg_name_ttl_ns());
		end(r->m, d, "given back");
	}
	/* Taken back before: the holder has resynchronised. (0 names
	 * nothing; to unrevoke() it means all.) */
	if (q->dir)
		unrevoke(r->s, q->dir);
	req_reply(r, &reply.base);
	if (lost) {
		sw_warn(TAG,
			"%s: out of memory for a watch of a directory given "
			"back: its connection is closed",
			r->s->peer);
		req_close(r->m, r->conn);
	}
}
