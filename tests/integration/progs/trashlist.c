/*
 * trashlist -m PORT -p PID [-n ITEMS] [-l LISTS] CHECK...
 *
 * Threat model, finding 8: a user's TRASH list in a trash of many items
 * owned by another uid must cost what it returns, not a walk of the
 * whole trash, and the listing pages. Each check is tried for real on the
 * wire against a master with no exports file (every session may be
 * admin; a session on /jail is confined to it):
 *
 *   setup     makes /d (0777, trash time one hour) and /jail; uid 1000
 *             makes ITEMS files in /d and removes them, uid 2000 three
 *             (after the first half): ITEMS + 3 items in the trash
 *   own       uid 2000's list answers its 3 items and no `more`, with a
 *             cursor and without one (a client from before pages), and
 *             the time of one list is printed
 *   pipeline  LISTS of uid 2000's lists sent at once on one connection
 *             cost under 20 GETATTRs each, LISTS GETATTRs of / sent the
 *             same way in the same run (a walk of 100,000 items costs
 *             some 400; see check_pipeline()). The master serves
 *             connections in turn, so the time a list takes is what a
 *             pipelining client costs the others
 *   paging    uid 1000 pages 1,000 at a time and gets its ITEMS items
 *             once each, in order of id; an admin (root) pages through
 *             all ITEMS + 3; a list with no cursor (a client from before
 *             pages) gets the first 10,000 and `more`
 *   confined  a session confined to /jail, where nothing was removed,
 *             pages as root through the whole trash: each page has no
 *             item, says `more` and moves on, and the pages are about
 *             ITEMS / 1,000 (the master looks at 1,000 items a page at
 *             most for a confined session); prints the slowest page
 *   recalls   (threat model, finding 3) a session holds /h delegated,
 *             gives it back at each recall and takes it again; another
 *             session sends RECALL_LISTS first pages, one after the
 *             other: the first four recall /h (a list sees what holders
 *             queued), and after that at most one a second does (each
 *             recall of every delegation is paid from the lister's
 *             bucket), the others are answered at once; the holder is
 *             never recalled by a next page or a purge
 *
 * Prints "ok - ..." per check; exit 0 when all held, 1 at the first that
 * did not ("FAIL: ..." on stderr), 2 for bad arguments. After each check
 * the master (PID) must still be running.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "peer.h"
#include "util.h"

#define OTHER 1000
#define USER 2000
#define PAGE_ITEMS 10000     /* the master's page (master/trashops.c) */
#define CONFINED_VISITS 1000 /* items a confined session's page looks at */

static uint16_t m_port;
static pid_t m_pid;
static unsigned n_items = 100000;
static unsigned n_lists = 2000;

static Sweepfs__Cred cred_of(uint32_t uid)
{
	Sweepfs__Cred c = SWEEPFS__CRED__INIT;

	c.uid = uid;
	c.gid = uid;
	return c;
}

static uint64_t lookup(struct peer *p, uint64_t parent, const char *name)
{
	Sweepfs__LookupReq q = SWEEPFS__LOOKUP_REQ__INIT;
	Sweepfs__Cred root = cred_of(0);
	Sweepfs__EntryReply *r;
	uint64_t id, ino;
	int err;

	q.cred = &root;
	q.parent = parent;
	q.name = str(name);
	id = peer_send(p, SW_MSG_LOOKUP, 0, &q.base);
	r = (Sweepfs__EntryReply *)peer_reply(p, SW_MSG_LOOKUP, id, &err);
	must(err, name);
	ino = r->attr->ino;
	sweepfs__entry_reply__free_unpacked(r, NULL);
	return ino;
}

/* @n files named PREFIX%07u made by @uid in @dir, then removed: @n items
 * in the trash, 500 requests in flight at a time. */
static void fill_trash(struct peer *p, uint64_t dir, uint32_t uid,
		       const char *prefix, unsigned n)
{
	Sweepfs__Cred cred = cred_of(uid);
	char name[32];

	for (int step = 0; step < 2; step++) {
		for (unsigned done = 0; done < n;) {
			unsigned k = SW_MIN(500u, n - done);
			uint64_t first = p->next_id;
			uint16_t type = step ? SW_MSG_UNLINK : SW_MSG_MKNOD;

			for (unsigned i = 0; i < k; i++) {
				Sweepfs__MknodReq m = SWEEPFS__MKNOD_REQ__INIT;
				Sweepfs__NameReq u = SWEEPFS__NAME_REQ__INIT;

				snprintf(name, sizeof(name), "%s%07u", prefix,
					 done + i);
				m.cred = u.cred = &cred;
				m.parent = u.parent = dir;
				m.name = u.name = str(name);
				m.mode = S_IFREG | 0644;
				peer_send(p, type, 0, step ? &u.base : &m.base);
			}
			for (unsigned i = 0; i < k; i++) {
				ProtobufCMessage *r;
				int err;

				r = peer_reply(p, type, first + i, &err);
				must(err, step ? "unlink" : "mknod");
				protobuf_c_message_free_unpacked(r, NULL);
			}
			done += k;
		}
	}
}

static void check_setup(void)
{
	Sweepfs__MknodReq d = SWEEPFS__MKNOD_REQ__INIT;
	Sweepfs__TrashtimeReq t = SWEEPFS__TRASHTIME_REQ__INIT;
	Sweepfs__Cred root = cred_of(0);
	struct peer p;
	uint64_t dir;

	peer_open(&p, m_port);
	d.cred = t.cred = &root;
	d.parent = ROOT;
	d.mode = S_IFDIR | 0777;
	d.name = str("d");
	must(peer_call(&p, SW_MSG_MKDIR, &d.base), "mkdir /d");
	d.name = str("jail");
	must(peer_call(&p, SW_MSG_MKDIR, &d.base), "mkdir /jail");
	dir = lookup(&p, ROOT, "d");
	t.ino = dir;
	t.has_seconds = 1;
	t.seconds = 3600;
	must(peer_call(&p, SW_MSG_TRASHTIME, &t.base), "trash time of /d");
	fill_trash(&p, dir, OTHER, "a", n_items / 2);
	fill_trash(&p, dir, USER, "u", 3);
	fill_trash(&p, dir, OTHER, "b", n_items - n_items / 2);
	peer_close(&p);
	ok("setup: %u items of uid %u and 3 of uid %u in the trash", n_items,
	   OTHER, USER);
}

/* One TRASH list as @uid: after @after (with @cursor), at most @max (0:
 * not said). The reply (free it), fail() on an error. */
static Sweepfs__TrashReply *list(struct peer *p, uint32_t uid, bool cursor,
				 uint64_t after, uint32_t max)
{
	Sweepfs__TrashReq q = SWEEPFS__TRASH_REQ__INIT;
	Sweepfs__Cred cred = cred_of(uid);
	Sweepfs__TrashReply *r;
	uint64_t id;
	int err;

	q.cred = &cred;
	q.op = 1;
	q.has_after = cursor;
	q.after = after;
	q.has_max = max != 0;
	q.max = max;
	id = peer_send(p, SW_MSG_TRASH, 0, &q.base);
	r = (Sweepfs__TrashReply *)peer_reply(p, SW_MSG_TRASH, id, &err);
	must(err, "trash list");
	return r;
}

static void check_own(void)
{
	Sweepfs__TrashReply *r;
	struct peer p;
	int64_t t0;
	double ms;

	peer_open(&p, m_port);
	for (int cursor = 1; cursor >= 0; cursor--) {
		t0 = sw_mono_ns();
		r = list(&p, USER, cursor, 0, 0);
		ms = (double)(sw_mono_ns() - t0) / 1e6;
		if (r->n_items != 3 || (r->has_more && r->more))
			fail("own: uid %u's list %s a cursor: %zu items, "
			     "more %d (want 3, no more)",
			     USER, cursor ? "with" : "without", r->n_items,
			     r->has_more && r->more);
		for (size_t i = 0; i < 3; i++)
			if (r->items[i]->uid != USER)
				fail("own: an item of uid %u",
				     r->items[i]->uid);
		sweepfs__trash_reply__free_unpacked(r, NULL);
	}
	peer_close(&p);
	ok("own: uid %u's 3 items among %u of uid %u, with a cursor and "
	   "without; one list took %.3f ms",
	   USER, n_items, OTHER, ms);
}

/* @n requests @q of @type sent at once on @p, then their @n replies (a
 * TRASH list must answer USER's 3 items): the time of each, in us. */
static double batch(struct peer *p, uint16_t type, const ProtobufCMessage *q,
		    unsigned n)
{
	uint64_t first = p->next_id;
	int64_t t0 = sw_mono_ns();

	for (unsigned i = 0; i < n; i++)
		peer_send(p, type, 0, q);
	for (unsigned i = 0; i < n; i++) {
		ProtobufCMessage *r;
		int err;

		r = peer_reply(p, type, first + i, &err);
		must(err, "pipelined request");
		if (type == SW_MSG_TRASH &&
		    ((Sweepfs__TrashReply *)r)->n_items != 3)
			fail("pipeline: %zu items, not 3",
			     ((Sweepfs__TrashReply *)r)->n_items);
		protobuf_c_message_free_unpacked(r, NULL);
	}
	return (double)(sw_mono_ns() - t0) / 1e3 / n;
}

/*
 * No bound in microseconds here: on a loaded 2-core CI machine, or under a
 * sanitizer, any wall-clock bound is either too tight to hold or too loose
 * to catch anything. A list is compared instead with a GETATTR of /, sent
 * the same way on the same connection in the same run: both pay the same
 * framing, dispatch and reply, and whatever slows the one slows the other.
 * Rounds alternate the two and the fastest round of each is kept, so a
 * burst of load in one round does not count.
 *
 * The bound, a list under LIST_PER_GETATTR GETATTRs, is wide: a list of 3
 * items costs 1.3 to 2 GETATTRs (measured ~6 us against ~4 us), 10 times
 * under it. The walk of the whole trash this replaced cost 1.7 to 2.0 ms a
 * list at 100,000 items, some 400 GETATTRs: it fails the check by a factor
 * of 20. Below some 10,000 items
 * (-n) a walk would pass; the check means something at the default size.
 */
#define LIST_PER_GETATTR 20
#define ROUNDS 5

static void check_pipeline(void)
{
	Sweepfs__TrashReq q = SWEEPFS__TRASH_REQ__INIT;
	Sweepfs__GetattrReq g = SWEEPFS__GETATTR_REQ__INIT;
	Sweepfs__Cred cred = cred_of(USER);
	double list_us = 0, getattr_us = 0;
	struct peer p;

	peer_open(&p, m_port);
	q.cred = &cred;
	q.op = 1; /* as a client from before pages asks: no cursor */
	g.ino = ROOT;
	for (int i = 0; i < ROUNDS; i++) {
		double t = batch(&p, SW_MSG_GETATTR, &g.base, n_lists);

		getattr_us = i ? SW_MIN(getattr_us, t) : t;
		t = batch(&p, SW_MSG_TRASH, &q.base, n_lists);
		list_us = i ? SW_MIN(list_us, t) : t;
	}
	peer_close(&p);
	if (list_us > LIST_PER_GETATTR * getattr_us)
		fail("pipeline: a list of uid %u's 3 items in a trash of %u "
		     "took %.1f us, %.0f GETATTRs of %.1f us (at most %d)",
		     USER, n_items + 3, list_us, list_us / getattr_us,
		     getattr_us, LIST_PER_GETATTR);
	ok("pipeline: a list of uid %u's 3 items in a trash of %u took %.1f "
	   "us, %.1f GETATTRs of %.1f us (at most %d; best of %d rounds of "
	   "%u)",
	   USER, n_items + 3, list_us, list_us / getattr_us, getattr_us,
	   LIST_PER_GETATTR, ROUNDS, n_lists);
}

/* Page through what @uid may list, @max a page: how many, each id above
 * the last. */
static unsigned page_all(struct peer *p, uint32_t uid, uint32_t max,
			 unsigned *pages)
{
	uint64_t after = 0, last = 0;
	unsigned n = 0;
	bool more;

	*pages = 0;
	do {
		Sweepfs__TrashReply *r = list(p, uid, true, after, max);

		if (r->n_items > max)
			fail("paging: %zu items in a page of %u", r->n_items,
			     max);
		for (size_t i = 0; i < r->n_items; i++) {
			if (r->items[i]->id <= last)
				fail("paging: item %" PRIu64 " after %" PRIu64,
				     r->items[i]->id, last);
			if (uid && r->items[i]->uid != uid)
				fail("paging: uid %u got an item of %u", uid,
				     r->items[i]->uid);
			last = r->items[i]->id;
			n++;
		}
		more = r->has_more && r->more;
		if (!r->has_next || (more && r->next <= after))
			fail("paging: the cursor did not move on from %" PRIu64,
			     after);
		after = r->next;
		(*pages)++;
		sweepfs__trash_reply__free_unpacked(r, NULL);
	} while (more);
	return n;
}

static void check_paging(void)
{
	Sweepfs__TrashReply *r;
	unsigned n, pages;
	struct peer p;

	peer_open(&p, m_port);
	n = page_all(&p, OTHER, 1000, &pages);
	if (n != n_items)
		fail("paging: uid %u listed %u of its %u items", OTHER, n,
		     n_items);
	ok("paging: uid %u's %u items once each in %u pages of 1,000", OTHER, n,
	   pages);
	n = page_all(&p, 0, PAGE_ITEMS, &pages);
	if (n != n_items + 3)
		fail("paging: root listed %u of %u items", n, n_items + 3);
	ok("paging: root's %u items once each in %u pages", n, pages);
	r = list(&p, OTHER, false, 0, 0);
	if (r->n_items != SW_MIN(n_items, PAGE_ITEMS) ||
	    (n_items > PAGE_ITEMS && !(r->has_more && r->more)))
		fail("paging: a list with no cursor got %zu items, more %d",
		     r->n_items, r->has_more && r->more);
	sweepfs__trash_reply__free_unpacked(r, NULL);
	peer_close(&p);
	ok("paging: a list with no cursor gets the first page and `more`");
}

static void check_confined(void)
{
	uint64_t after = 0;
	unsigned pages = 0;
	double worst = 0;
	struct peer p;
	bool more;

	peer_session(&p, m_port, "/jail", 0);
	do {
		int64_t t0 = sw_mono_ns();
		Sweepfs__TrashReply *r = list(&p, 0, true, after, 0);

		worst = SW_MAX(worst, (double)(sw_mono_ns() - t0) / 1e6);
		if (r->n_items)
			fail("confined: /jail sees %zu items removed outside "
			     "it",
			     r->n_items);
		more = r->has_more && r->more;
		if (!r->has_next || (more && r->next <= after))
			fail("confined: the cursor did not move on");
		after = r->next;
		pages++;
		sweepfs__trash_reply__free_unpacked(r, NULL);
	} while (more);
	peer_close(&p);
	if (pages < (n_items + 3) / CONFINED_VISITS)
		fail("confined: %u pages for %u items: a page looked at more "
		     "than %u",
		     pages, n_items + 3, CONFINED_VISITS);
	ok("confined: /jail pages through %u items outside it in %u empty "
	   "pages; the slowest took %.1f ms",
	   n_items + 3, pages, worst);
}

#define RECALL_LISTS 20

/* Send @q (TRASH) from @l and wait for its reply; meanwhile @h, holding
 * @dir, gives it back when it is recalled: whether it was. */
static bool trash_recalls(struct peer *l, struct peer *h, uint64_t dir,
			  const Sweepfs__TrashReq *q)
{
	uint64_t id = peer_send(l, SW_MSG_TRASH, 0, &q->base);
	int64_t deadline = now_ms() + 30000;
	bool recalled = false;

	/* Whichever comes first: the reply, or the recall it waits for. */
	while (now_ms() < deadline) {
		struct sw_frame_hdr hdr;
		uint8_t *payload;
		int rc = peer_recv(h, &hdr, &payload, 20);

		if (rc == 0)
			fail("recalls: the holder's connection closed");
		if (rc == 1) {
			free(payload);
			if (hdr.type == SW_MSG_DELEG_RECALL && !recalled) {
				recalled = true;
				peer_deleg_return(h, dir);
			}
			continue;
		}
		rc = peer_recv(l, &hdr, &payload, 20);
		if (rc == 0)
			fail("recalls: the lister's connection closed");
		if (rc == 1) {
			free(payload);
			if (hdr.id == id && hdr.type == SW_MSG_TRASH)
				break;
		}
	}
	if (now_ms() >= deadline)
		fail("recalls: no answer to a trash request in 30 s");
	if (recalled && !peer_deleg(h, dir))
		fail("recalls: the holder could not take /h again");
	return recalled;
}

static void check_recalls(void)
{
	Sweepfs__TrashReq q = SWEEPFS__TRASH_REQ__INIT;
	Sweepfs__Cred root = cred_of(0);
	struct peer h, l;
	unsigned n = 0, late = 0;
	uint64_t dir;
	int64_t t0;

	peer_open(&h, m_port);
	peer_open(&l, m_port);
	dir = peer_mkdir(&h, &root, ROOT, "h");
	if (!peer_deleg(&h, dir))
		fail("recalls: /h was not delegated");
	q.cred = &root;
	/* A next page, a purge: nothing to see of what /h's holder did. */
	q.op = 1;
	q.has_after = 1;
	q.after = 1;
	if (trash_recalls(&l, &h, dir, &q))
		fail("recalls: a next page recalled /h");
	q.op = 3;
	q.has_after = 0;
	q.has_id = 1;
	q.id = 1;
	if (trash_recalls(&l, &h, dir, &q))
		fail("recalls: a purge recalled /h");
	q.op = 1;
	q.has_id = 0;
	q.has_after = 1;
	q.after = 0;
	t0 = now_ms();
	for (unsigned i = 0; i < RECALL_LISTS; i++) {
		bool r = trash_recalls(&l, &h, dir, &q);

		if (i < 4 && !r)
			fail("recalls: first page %u did not recall /h", i);
		n += r;
		late += r && i >= 4;
	}
	/* Four at once, then one a second (and one for a part of one). */
	if (late > (unsigned)((now_ms() - t0) / 1000) + 1)
		fail("recalls: %u of %u first pages recalled /h in %.1f s", n,
		     RECALL_LISTS, (double)(now_ms() - t0) / 1000);
	peer_close(&l);
	peer_close(&h);
	ok("recalls: %u of %u first pages recalled the holder's directory, "
	   "in %.1f s",
	   n, RECALL_LISTS, (double)(now_ms() - t0) / 1000);
}

static const struct {
	const char *name;
	void (*run)(void);
} checks[] = {
	{ "setup", check_setup },	{ "own", check_own },
	{ "pipeline", check_pipeline }, { "paging", check_paging },
	{ "confined", check_confined }, { "recalls", check_recalls },
};

int main(int argc, char **argv)
{
	int opt;

	while ((opt = getopt(argc, argv, "m:p:n:l:")) != -1) {
		switch (opt) {
		case 'm':
			m_port = (uint16_t)atoi(optarg);
			break;
		case 'p':
			m_pid = (pid_t)atoi(optarg);
			break;
		case 'n':
			n_items = (unsigned)atoi(optarg);
			break;
		case 'l':
			n_lists = (unsigned)atoi(optarg);
			break;
		default:
			return 2;
		}
	}
	if (!m_port || !m_pid || optind == argc || n_items < 2 || !n_lists) {
		fprintf(stderr, "usage: see the comment at the top of "
				"trashlist.c\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	rng_state = (uint64_t)getpid();
	for (int i = optind; i < argc; i++) {
		size_t k = 0;

		while (k < SW_ARRAY_SIZE(checks) &&
		       strcmp(checks[k].name, argv[i]))
			k++;
		if (k == SW_ARRAY_SIZE(checks))
			fail("unknown check %s", argv[i]);
		checks[k].run();
		alive(m_pid, "master");
	}
	return 0;
}
