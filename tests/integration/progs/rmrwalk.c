/*
 * rmrwalk -m PORT -p PID [-f FILES] [-n RMRS] [-s SESSIONS] [-b MS]
 *
 * What a user's RMR makes the master's loop walk before it may remove a
 * tree (threat model, finding 4; master/rmr.c): a directory of FILES
 * files (1,000,000) with a subdirectory made last is read whole for a
 * user, about 9 ms a walk here, and the master must bound what one
 * session, and all sessions together, make its loop spend on such
 * walks. (The server runs one connection's frames for a slice of each
 * loop turn, so one session's pipeline alone delays others by a walk a
 * turn; sessions together delay them by a walk each a turn.) Against a
 * real master (port -m, pid -p), with no exports file (root is admin):
 *
 *   build      root makes /pub (0777), /pub/big (0777) with FILES files
 *              and then big/z (0755, with one file in it) by batched
 *              creates: uid 1000 may empty big but not z, so its RMR of
 *              big walks big's whole list and is refused (EACCES)
 *   many       SESSIONS (64) fresh sessions each pipeline RMRS /
 *              SESSIONS RMRs of big as uid 1000, all at once, while
 *              another session pings back to back: every RMR is refused
 *              with EACCES (a walk paid) or EAGAIN (a bucket spent); no
 *              ping waits -b MS (200) or more (unbounded, a turn of the
 *              loop walked once for each session: about 600 ms); and at
 *              most the walks everyone's full bucket and its refill
 *              meanwhile pay for are EACCES
 *   one        once everyone's bucket refilled, one session pipelines
 *              RMRS (256) in one write: the same, with at most the walks
 *              a session's full bucket and its refill pay for
 *   rmsnapshot root makes /pub/snap (0777): first s (0777, flagged
 *              alone, one unflagged file in it), then FILES files; a
 *              fresh session of uid 1000 pipelines 16 RMSNAPSHOT -f of
 *              snap: its permission walk costs one visit, but -f reads
 *              snap's whole list and removes nothing, so at most the
 *              reads a session's full bucket and its refill pay for are
 *              answered (nothing removed), the rest are EAGAIN
 *   flagged    root makes /pub/fl (0777) with FILES files and keep,
 *              flags its tree and then clears keep's flag; a fresh
 *              session of uid 1000 sends RMSNAPSHOT -f of fl, one at a
 *              time until one is answered without EAGAIN, while another
 *              session pings: all FILES flagged files go, no answer
 *              removes more than 2,048 (one request removing them all
 *              held the loop 2.2 s), no ping waits -b MS
 *   resume     root makes /pub/fk (0777) with FILES files and then
 *              10,000 more it flags one by one; a fresh session of uid
 *              1000 sends RMSNAPSHOT -f of fk the same way: the 10,000
 *              go, and no answer is EAGAIN with nothing removed (each
 *              request goes on where the last stopped; reading the
 *              FILES kept files again each time spent the session's
 *              bucket by the third)
 *   moved      root makes /pub/fm/a/b, 5,000 flagged files in b and
 *              10 more in a after b; uid 1000's first -f of fm stops in
 *              b; root moves b to fm/b and a into it; the same
 *              session's next -f starts over (going on from the note,
 *              as it did unchecked, ASan sees a use after free) and all
 *              5,010 go
 *   honest     once the buckets refilled, root makes z writable and a
 *              fresh session of uid 1000 removes big, all FILES files of
 *              it, with its first RMR
 *
 * Prints "ok - ..." per check with the pings' p50/p99/max; exit status 0
 * when every check held, 1 at the first that did not.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frame.h"
#include "fsio.h"
#include "peer.h"
#include "util.h"

/* The master's budget (master/rmr.h), in visits: a walk here costs
 * FILES + 1 of them. */
#define WALK_MAX 2000000.0
#define SESSION_RATE 500000.0
#define ALL_CAP WALK_MAX
#define ALL_RATE 2000000.0
/* What one rmsnapshot -f removes at most (master/snapshot.c). */
#define REMOVALS_MAX 2048

static uint16_t m_port;
static pid_t m_pid;
static unsigned files = 1000000, rmrs = 256, sessions = 64;
static int64_t bound_ms = 200;
static uint64_t pub, big, zdir;

static Sweepfs__Cred root_cred = SWEEPFS__CRED__INIT;
static Sweepfs__Cred user_cred = SWEEPFS__CRED__INIT;

/* ---- build ----------------------------------------------------------- */

static void ino_range(struct peer *p, uint64_t *first, uint32_t *count)
{
	Sweepfs__InoRangeReq q = SWEEPFS__INO_RANGE_REQ__INIT;
	Sweepfs__InoRangeReply *r;
	uint64_t id;
	int err;

	q.count = 4096;
	id = peer_send(p, SW_MSG_INO_RANGE, 0, &q.base);
	r = (Sweepfs__InoRangeReply *)peer_reply(p, SW_MSG_INO_RANGE, id, &err);
	if (err || !r->has_first || !r->count)
		fail("inode range: %s", strerror(err));
	*first = r->first;
	*count = r->count;
	sweepfs__ino_range_reply__free_unpacked(r, NULL);
}

/* Make @n entries "f<i>" ("@name<i>"; @name for one) of @mode in
 * @parent as root, in batches, several sent before their replies are
 * read; the first's inode. */
static uint64_t make_many(struct peer *p, uint64_t parent, unsigned n,
			  uint32_t mode, const char *name)
{
	static Sweepfs__BatchOp ops[SW_BATCH_OPS_MAX];
	static Sweepfs__BatchOp *opp[SW_BATCH_OPS_MAX];
	static char names[SW_BATCH_OPS_MAX][24];
	uint64_t first = 0, ino = 0, ids[8], made = 0;
	uint32_t left = 0;

	while (made < n) {
		Sweepfs__BatchReq q = SWEEPFS__BATCH_REQ__INIT;
		unsigned sent = 0;

		/* A range, then its batches pipelined. */
		ino_range(p, &ino, &left);
		if (!first)
			first = ino;
		while (left && made < n && sent < SW_ARRAY_SIZE(ids)) {
			size_t k = SW_MIN(SW_MIN(left, SW_BATCH_OPS_MAX),
					  n - made);

			for (size_t i = 0; i < k; i++) {
				if (name && n == 1)
					snprintf(names[i], sizeof(names[i]),
						 "%s", name);
				else
					snprintf(names[i], sizeof(names[i]),
						 "%s%07" PRIu64,
						 name ? name : "f", made + i);
				peer_create_op(&ops[i], &root_cred, parent,
					       names[i], mode, ino + i);
				opp[i] = &ops[i];
			}
			q.n_ops = k;
			q.ops = opp;
			ids[sent++] = peer_send(p, SW_MSG_BATCH, 0, &q.base);
			ino += k;
			left -= (uint32_t)k;
			made += k;
		}
		for (unsigned b = 0; b < sent; b++) {
			Sweepfs__BatchReply *r;
			struct sw_frame_hdr h;
			uint8_t *payload;

			if (peer_recv(p, &h, &payload, TIMEOUT_MS) != 1)
				fail("build: no reply to a batch");
			r = sweepfs__batch_reply__unpack(NULL, h.len, payload);
			free(payload);
			if (!r || h.type != SW_MSG_BATCH)
				fail("build: a bad reply to a batch");
			if (r->has_err && r->err)
				fail("build: batch: %s", strerror(r->err));
			for (size_t i = 0; i < r->n_errs; i++)
				if (r->errs[i])
					fail("build: create: %s",
					     strerror(r->errs[i]));
			sweepfs__batch_reply__free_unpacked(r, NULL);
		}
	}
	return first;
}

/* A delegation of @dir for @p: batched creates need one. Asked again
 * for a while: none is granted for a lease after the master started. */
static void deleg(struct peer *p, uint64_t dir)
{
	int64_t t0 = now_ms();

	while (!peer_deleg(p, dir)) {
		if (now_ms() - t0 > 20000)
			fail("deleg: not granted in 20 s");
		usleep(100 * 1000);
	}
}

static void check_build(void)
{
	struct peer p;
	int64_t t0 = now_ms();

	peer_session(&p, m_port, "/", 1000);
	pub = peer_mkdir(&p, &root_cred, ROOT, "pub");
	big = peer_mkdir(&p, &root_cred, pub, "big");
	deleg(&p, big);
	make_many(&p, big, files, S_IFREG | 0644, NULL);
	/* A directory it makes is delegated to it at birth. */
	zdir = make_many(&p, big, 1, S_IFDIR | 0755, "z");
	make_many(&p, zdir, 1, S_IFREG | 0644, "f");
	/* Given back: an RMR of big must recall nothing. */
	peer_deleg_return(&p, zdir);
	peer_deleg_return(&p, big);
	/* mkdir's 0777 went through no umask: as said. */
	must(peer_chmod(&p, &root_cred, pub, 0777), "chmod /pub");
	must(peer_chmod(&p, &root_cred, big, 0777), "chmod /pub/big");
	peer_close(&p);
	ok("build: /pub/big: %u files of root's, then z (0755, one file), "
	   "in %.1f s",
	   files, (double)(now_ms() - t0) / 1000);
}

/* ---- attacks --------------------------------------------------------- */

/* Pings sent back to back, and how long each waited (ns). */
struct pings {
	int64_t *ns;
	size_t n, cap;
};

static void ping_once(struct peer *c, struct pings *pg)
{
	int64_t t0 = sw_mono_ns();

	peer_ping(c);
	if (sw_grow(&pg->ns, &pg->cap, pg->n + 1, sizeof(*pg->ns), 256) < 0)
		fail("out of memory");
	pg->ns[pg->n++] = sw_mono_ns() - t0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* The pings' p50, p99 and max in ms, into @out; the max. */
static double ping_stats(struct pings *pg, char *out, size_t len)
{
	double p50, p99, max;

	if (!pg->n)
		fail("no ping was answered meanwhile");
	qsort(pg->ns, pg->n, sizeof(*pg->ns), cmp_i64);
	p50 = (double)pg->ns[pg->n / 2] / 1e6;
	p99 = (double)pg->ns[(pg->n * 99) / 100] / 1e6;
	max = (double)pg->ns[pg->n - 1] / 1e6;
	snprintf(out, len, "%zu pings: p50 %.2f ms, p99 %.2f ms, max %.2f ms",
		 pg->n, p50, p99, max);
	return max;
}

/* All @n RMRs of big as uid 1000 in one buffer, ids 1000.. */
static void send_rmrs(struct peer *p, unsigned n)
{
	Sweepfs__RmrReq q = SWEEPFS__RMR_REQ__INIT;
	uint64_t h[SW_HANDLES_MAX];
	size_t one, len = 0;
	uint8_t *buf;

	q.cred = &user_cred;
	q.parent = pub;
	q.name = str("big");
	peer_vouch(SW_MSG_RMR, &q.base, h);
	one = SW_FRAME_HDR + protobuf_c_message_get_packed_size(&q.base);
	buf = malloc(one * n);
	if (!buf)
		fail("out of memory");
	for (unsigned i = 0; i < n; i++)
		len += sw_frame_pack(buf + len, SW_MSG_RMR, 0, 1000 + i,
				     &q.base);
	if (write_all(p->fd, buf, len) < 0)
		fail("sending %u RMRs: %s", n, strerror(errno));
	free(buf);
}

/* Read what replies @p has now (within 1 ms): counts by errno. */
static unsigned read_rmrs(struct peer *p, unsigned *eacces, unsigned *eagain)
{
	struct sw_frame_hdr h;
	uint8_t *payload;
	unsigned got = 0;

	while (peer_recv(p, &h, &payload, 1) == 1) {
		Sweepfs__RmrReply *r =
			sweepfs__rmr_reply__unpack(NULL, h.len, payload);
		int err;

		free(payload);
		if (h.flags == SW_FRAME_NOTIFY)
			continue;
		if (!r || h.type != SW_MSG_RMR || h.flags != SW_FRAME_REPLY)
			fail("a bad reply to an RMR (type %u)", h.type);
		err = r->has_err ? r->err : 0;
		sweepfs__rmr_reply__free_unpacked(r, NULL);
		if (err == EACCES)
			++*eacces;
		else if (err == EAGAIN)
			++*eagain;
		else
			fail("an RMR of big by uid 1000: %s, not EACCES or "
			     "EAGAIN",
			     err ? strerror(err) : "removed");
		got++;
	}
	return got;
}

/*
 * @nsess fresh sessions pipeline @per RMRs each while another pings;
 * every walk paid (EACCES) must fit what the buckets hold and refill
 * meanwhile (@cap, @rate), no ping may wait bound_ms.
 */
static void attack(const char *what, unsigned nsess, unsigned per, double cap,
		   double rate)
{
	struct peer *att = calloc(nsess, sizeof(*att));
	unsigned *got = calloc(nsess, sizeof(*got));
	unsigned eacces = 0, eagain = 0, done = 0;
	struct pings pg = { 0 };
	struct peer c;
	int64_t t0;
	double secs, paid_max, max;
	char stats[128];

	if (!att || !got)
		fail("out of memory");
	peer_open(&c, m_port);
	for (unsigned i = 0; i < nsess; i++)
		peer_open(&att[i], m_port);
	ping_once(&c, &pg);
	pg.n = 0;
	t0 = sw_mono_ns();
	for (unsigned i = 0; i < nsess; i++)
		send_rmrs(&att[i], per);
	while (done < nsess) {
		if (sw_mono_ns() - t0 > 60 * 1000000000ll)
			fail("%s: %u of %u RMRs answered after 60 s", what,
			     eacces + eagain, nsess * per);
		ping_once(&c, &pg);
		for (unsigned i = 0; i < nsess; i++) {
			if (got[i] == per)
				continue;
			got[i] += read_rmrs(&att[i], &eacces, &eagain);
			done += got[i] == per;
		}
	}
	secs = (double)(sw_mono_ns() - t0) / 1e9;
	/* A few more, the loop quiet again. */
	for (int i = 0; i < 20; i++)
		ping_once(&c, &pg);
	max = ping_stats(&pg, stats, sizeof(stats));
	/* Walks paid whole: what the buckets held and refilled while the
	 * requests were answered, over a walk's cost (files + 1). */
	paid_max = (cap + rate * secs) / (files + 1.0) + 1;
	if (max >= (double)bound_ms)
		fail("%s: another session's ping waited %.0f ms (bound %" PRId64
		     " ms): %s; %u EACCES, %u EAGAIN",
		     what, max, bound_ms, stats, eacces, eagain);
	if (eacces < 1 || eacces > paid_max)
		fail("%s: %u RMRs walked the tree (EACCES), at most %.0f "
		     "paid for; %u EAGAIN; %s",
		     what, eacces, paid_max, eagain, stats);
	ok("%s: %u x %u pipelined RMRs of %u files by uid 1000 in %.2f s: "
	   "%u walked (EACCES, at most %.0f paid for), %u EAGAIN; another "
	   "session's %s",
	   what, nsess, per, files, secs, eacces, paid_max, eagain, stats);
	for (unsigned i = 0; i < nsess; i++)
		peer_close(&att[i]);
	peer_close(&c);
	free(att);
	free(got);
	free(pg.ns);
	alive(m_pid, "master");
}

/* uid 1000's RMSNAPSHOT -f of @name in /pub, into @q. */
static void rms_f(Sweepfs__RmsnapshotReq *q, const char *name)
{
	*q = (Sweepfs__RmsnapshotReq)SWEEPFS__RMSNAPSHOT_REQ__INIT;
	q->cred = &user_cred;
	q->parent = pub;
	q->name = str(name);
	q->has_force = 1;
	q->force = 1;
}

/* ---- rmsnapshot -f ---------------------------------------------------- */

static void check_rmsnapshot(void)
{
	Sweepfs__EattrReq ea = SWEEPFS__EATTR_REQ__INIT;
	Sweepfs__RmsnapshotReq q;
	const unsigned n = 16;
	unsigned answered = 0, eagain = 0, got = 0;
	struct peer p, user;
	uint64_t snap, s;
	int64_t t0;
	double secs, paid_max;

	peer_session(&p, m_port, "/", 1000);
	snap = peer_mkdir(&p, &root_cred, pub, "snap");
	deleg(&p, snap);
	s = make_many(&p, snap, 1, S_IFDIR | 0777, "s");
	make_many(&p, s, 1, S_IFREG | 0644, "f");
	make_many(&p, snap, files, S_IFREG | 0644, NULL);
	peer_deleg_return(&p, s);
	peer_deleg_return(&p, snap);
	must(peer_chmod(&p, &root_cred, s, 0777), "chmod /pub/snap/s");
	ea.cred = &root_cred;
	ea.parent = snap;
	ea.name = str("s");
	ea.has_set = 1;
	ea.set = 1;
	must(peer_call(&p, SW_MSG_EATTR, &ea.base), "flag /pub/snap/s");
	peer_close(&p);
	usleep(2500 * 1000); /* everyone's bucket full again */

	peer_open(&user, m_port);
	rms_f(&q, "snap");
	t0 = sw_mono_ns();
	for (unsigned i = 0; i < n; i++)
		peer_send(&user, SW_MSG_RMSNAPSHOT, 0, &q.base);
	while (got < n) {
		Sweepfs__RmrReply *r;
		struct sw_frame_hdr h;
		uint8_t *payload;
		int err;

		if (peer_recv(&user, &h, &payload, TIMEOUT_MS) != 1)
			fail("rmsnapshot: %u of %u answered", got, n);
		if (h.flags == SW_FRAME_NOTIFY) {
			free(payload);
			continue;
		}
		r = sweepfs__rmr_reply__unpack(NULL, h.len, payload);
		free(payload);
		if (!r || h.type != SW_MSG_RMSNAPSHOT)
			fail("rmsnapshot: a bad reply (type %u)", h.type);
		err = r->has_err ? r->err : 0;
		if (r->nodes)
			fail("rmsnapshot: %" PRIu64 " nodes removed, none "
			     "flagged alone",
			     r->nodes);
		sweepfs__rmr_reply__free_unpacked(r, NULL);
		if (err == 0)
			answered++;
		else if (err == EAGAIN)
			eagain++;
		else
			fail("rmsnapshot -f of snap by uid 1000: %s",
			     strerror(err));
		got++;
	}
	secs = (double)(sw_mono_ns() - t0) / 1e9;
	/* Reads of snap's list paid whole (files + 2 visits each). */
	paid_max = (WALK_MAX + SESSION_RATE * secs) / (files + 2.0) + 1;
	if (answered > paid_max || !eagain)
		fail("rmsnapshot: %u of %u pipelined RMSNAPSHOT -f read "
		     "snap's %u files in %.3f s, at most %.0f paid for; "
		     "%u EAGAIN",
		     answered, n, files, secs, paid_max, eagain);
	peer_close(&user);
	ok("rmsnapshot: %u pipelined RMSNAPSHOT -f of %u files by uid 1000 "
	   "in %.2f s: %u read them (at most %.0f paid for), %u EAGAIN",
	   n, files, secs, answered, paid_max, eagain);
	alive(m_pid, "master");
}

/* ---- rmsnapshot -f of many flagged names ------------------------------ */

/* Root's EATTR of @name in @parent: the snapshot flag set (@set) or
 * cleared, on the tree (@recursive) or the name alone. */
static void flag(struct peer *p, uint64_t parent, const char *name, bool set,
		 bool recursive)
{
	Sweepfs__EattrReq ea = SWEEPFS__EATTR_REQ__INIT;

	ea.cred = &root_cred;
	ea.parent = parent;
	ea.name = str(name);
	ea.has_set = ea.has_clear = ea.has_recursive = 1;
	ea.set = set;
	ea.clear = !set;
	ea.recursive = recursive;
	must(peer_call(p, SW_MSG_EATTR, &ea.base), "eattr");
}

/* What one rmsnapshot -f took, request by request. */
struct rf_run {
	unsigned asked;	  /* requests */
	unsigned partial; /* answered EAGAIN with names removed */
	unsigned stalled; /* answered EAGAIN with none */
	uint64_t removed, most;
	double secs;
};

/*
 * uid 1000's rmsnapshot -f of @name in /pub through session @user, the
 * way sweepfs rmsnapshot -f sends it: one request at a time, again at
 * once after each answer that removed something, 200 ms later after one
 * that did not, until one is answered without EAGAIN. With @c, another
 * session pings back to back meanwhile, into @pg.
 */
static void rmsnapshot_f(const char *what, const char *name, struct peer *user,
			 struct peer *c, struct pings *pg, struct rf_run *run)
{
	Sweepfs__RmsnapshotReq q;
	int64_t t0 = sw_mono_ns();

	*run = (struct rf_run){ 0 };
	rms_f(&q, name);
	for (bool done = false; !done;) {
		uint64_t id = peer_send(user, SW_MSG_RMSNAPSHOT, 0, &q.base);
		Sweepfs__RmrReply *r = NULL;
		struct sw_frame_hdr h;
		uint8_t *payload;
		int err;

		run->asked++;
		while (!r) {
			if (sw_mono_ns() - t0 > 45 * 1000000000ll)
				fail("%s: %" PRIu64 " removed after 45 s, %u "
				     "asked",
				     what, run->removed, run->asked);
			if (c)
				ping_once(c, pg);
			if (peer_recv(user, &h, &payload, c ? 1 : TIMEOUT_MS) !=
			    1)
				continue;
			if (h.flags == SW_FRAME_NOTIFY) {
				free(payload);
				continue;
			}
			r = sweepfs__rmr_reply__unpack(NULL, h.len, payload);
			free(payload);
			if (!r || h.type != SW_MSG_RMSNAPSHOT || h.id != id)
				fail("%s: a bad reply (type %u)", what, h.type);
		}
		err = r->has_err ? r->err : 0;
		run->removed += r->nodes;
		run->most = SW_MAX(run->most, r->nodes);
		if (err == 0)
			done = true;
		else if (err == EAGAIN && r->nodes)
			run->partial++;
		else if (err == EAGAIN)
			run->stalled++;
		else
			fail("%s: rmsnapshot -f by uid 1000: %s", what,
			     strerror(err));
		if (err == EAGAIN && !r->nodes)
			usleep(200 * 1000);
		sweepfs__rmr_reply__free_unpacked(r, NULL);
	}
	run->secs = (double)(sw_mono_ns() - t0) / 1e9;
}

/* Root's directory @name in @parent, 0777, with @n files "f<i>" and
 * then @nmore named after @more (make_many()), delegated to @p while
 * they are made and given back: uid 1000 may empty it. */
static uint64_t files_dir(struct peer *p, uint64_t parent, const char *name,
			  unsigned n, const char *more, unsigned nmore)
{
	uint64_t d = peer_mkdir(p, &root_cred, parent, name);

	deleg(p, d);
	make_many(p, d, n, S_IFREG | 0644, NULL);
	make_many(p, d, nmore, S_IFREG | 0644, more);
	peer_deleg_return(p, d);
	must(peer_chmod(p, &root_cred, d, 0777), "chmod");
	return d;
}

/*
 * /pub/fl (0777) with FILES files of root's, every one flagged, and one
 * more, keep, not: uid 1000's rmsnapshot -f removes each flagged file,
 * one change each, and its permission walk costs one visit. While
 * another session pings: every flagged file goes, no answer removes
 * more than a request's share, and no ping waits the bound (one request
 * removing 1 M names held the loop for seconds).
 */
static void check_flagged(void)
{
	struct pings pg = { 0 };
	struct rf_run run;
	struct peer p, user, c;
	uint64_t fl;
	double max;
	char stats[128];

	peer_session(&p, m_port, "/", 1000);
	fl = files_dir(&p, pub, "fl", files, "keep", 1);
	/* Root's recursive set is a mark; the clear below it writes the
	 * mark out (a walk of fl's names, row 2 of the threat model's
	 * findings: not what is measured here). */
	flag(&p, pub, "fl", true, true);
	flag(&p, fl, "keep", false, false);
	peer_close(&p);
	usleep(2500 * 1000); /* the buckets full again */

	peer_open(&user, m_port);
	peer_open(&c, m_port);
	rmsnapshot_f("flagged", "fl", &user, &c, &pg, &run);
	peer_close(&user);
	max = ping_stats(&pg, stats, sizeof(stats));
	if (run.removed != files)
		fail("flagged: %" PRIu64 " removed, not %u", run.removed,
		     files);
	if (run.most > REMOVALS_MAX)
		fail("flagged: one request removed %" PRIu64 " names (at most "
		     "%u)",
		     run.most, REMOVALS_MAX);
	if (max >= (double)bound_ms)
		fail("flagged: another session's ping waited %.0f ms (bound "
		     "%" PRId64 " ms) while rmsnapshot -f removed %u names "
		     "(at most %" PRIu64 " a request): %s",
		     max, bound_ms, files, run.most, stats);
	ok("flagged: uid 1000's rmsnapshot -f removed %u flagged files in "
	   "%u requests (%u partial, %u with none) in %.2f s; another "
	   "session's %s",
	   files, run.asked, run.partial, run.stalled, run.secs, stats);
	peer_close(&c);
	free(pg.ns);
	alive(m_pid, "master");
}

/*
 * /pub/fk (0777): FILES files of root's, unflagged, then FLAGGED_LATE
 * files flagged one by one (EATTR). uid 1000's rmsnapshot -f reads the
 * kept files once: a session's stopped -f goes on where it stopped. Read
 * again for each request, the kept files would cost a walk's worth of
 * visits by the second request, and the third would find the session's
 * bucket spent: answered EAGAIN with nothing removed.
 */
#define FLAGGED_LATE 10000

static void check_resume(void)
{
	struct rf_run run;
	struct peer p, user;
	uint64_t fk;
	char name[24];

	peer_session(&p, m_port, "/", 1000);
	fk = files_dir(&p, pub, "fk", files, "g", FLAGGED_LATE);
	for (unsigned i = 0; i < FLAGGED_LATE; i++) {
		snprintf(name, sizeof(name), "g%07u", i);
		flag(&p, fk, name, true, false);
	}
	peer_close(&p);
	usleep(2500 * 1000); /* the buckets full again */

	peer_open(&user, m_port);
	rmsnapshot_f("resume", "fk", &user, NULL, NULL, &run);
	peer_close(&user);
	if (run.removed != FLAGGED_LATE || run.stalled)
		fail("resume: uid 1000's rmsnapshot -f of %u kept files and "
		     "then %u flagged removed %" PRIu64 " in %u requests, %u "
		     "of them answered EAGAIN with none removed (the kept "
		     "files read again)",
		     files, FLAGGED_LATE, run.removed, run.asked, run.stalled);
	ok("resume: uid 1000's rmsnapshot -f of %u kept files and then %u "
	   "flagged removed them in %u requests, none stopped by the "
	   "budget, in %.2f s",
	   files, FLAGGED_LATE, run.asked, run.secs);
	alive(m_pid, "master");
}

/* Root's rename of @name in @parent to @newname in @newparent. */
static void move(struct peer *p, uint64_t parent, const char *name,
		 uint64_t newparent, const char *newname)
{
	Sweepfs__RenameReq q = SWEEPFS__RENAME_REQ__INIT;

	q.cred = &root_cred;
	q.parent = parent;
	q.name = str(name);
	q.newparent = newparent;
	q.newname = str(newname);
	must(peer_call(p, SW_MSG_RENAME, &q.base), "rename");
}

/*
 * /pub/fm/a/b with 5,000 flagged files in b and y, not flagged, and in
 * a after b 10 flagged files and x, not flagged. uid 1000's first
 * RMSNAPSHOT -f of fm stops in b after 2,048 (noted: fm, a at its first
 * flagged file, b). Root then moves b to fm/b and a into it, fm/b/a:
 * the note's a is no longer fm's child. The same session's next -f must
 * not go on from the note (walking b would reach a, remove the entry
 * the note's a frame would go on from, and that frame would read it
 * freed: ASan's use after free), and must remove every flagged file:
 * 5,010 in all; x and y stay.
 */
static void check_moved(void)
{
	Sweepfs__RmsnapshotReq q;
	Sweepfs__RmrReply *r;
	struct peer p, user;
	struct rf_run run;
	uint64_t fm, a, b, first = 0, id;
	int err;

	peer_session(&p, m_port, "/", 1000);
	fm = peer_mkdir(&p, &root_cred, pub, "fm");
	a = peer_mkdir(&p, &root_cred, fm, "a");
	b = files_dir(&p, a, "b", 5000, "y", 1);
	deleg(&p, a);
	make_many(&p, a, 10, S_IFREG | 0644, "g");
	make_many(&p, a, 1, S_IFREG | 0644, "x");
	peer_deleg_return(&p, a);
	must(peer_chmod(&p, &root_cred, fm, 0777), "chmod fm");
	must(peer_chmod(&p, &root_cred, a, 0777), "chmod a");
	flag(&p, pub, "fm", true, true);
	flag(&p, a, "x", false, false);
	flag(&p, b, "y", false, false);

	peer_open(&user, m_port);
	rms_f(&q, "fm");
	id = peer_send(&user, SW_MSG_RMSNAPSHOT, 0, &q.base);
	r = (Sweepfs__RmrReply *)peer_reply(&user, SW_MSG_RMSNAPSHOT, id, &err);
	if (err != EAGAIN || !r || r->nodes != REMOVALS_MAX)
		fail("moved: the first -f of fm: %s, %" PRIu64 " removed, "
		     "not EAGAIN with %u",
		     strerror(err), r ? r->nodes : 0, REMOVALS_MAX);
	first = r->nodes;
	sweepfs__rmr_reply__free_unpacked(r, NULL);
	move(&p, a, "b", fm, "b");
	move(&p, fm, "a", b, "a");
	peer_close(&p);

	/* The same session: its note. */
	rmsnapshot_f("moved", "fm", &user, NULL, NULL, &run);
	peer_close(&user);
	if (first + run.removed != 5010)
		fail("moved: %" PRIu64 " removed in all, not 5010",
		     first + run.removed);
	ok("moved: -f of fm stopped in fm/a/b, a and b moved (fm/b/a), "
	   "then went on: 5,010 flagged files removed in %u more requests",
	   run.asked);
	alive(m_pid, "master");
}

/* ---- honest ---------------------------------------------------------- */

static void check_honest(void)
{
	Sweepfs__RmrReq q = SWEEPFS__RMR_REQ__INIT;
	Sweepfs__LookupReq l = SWEEPFS__LOOKUP_REQ__INIT;
	Sweepfs__RmrReply *r;
	struct peer root, user;
	uint64_t id, nodes;
	int err;

	/* Everyone's bucket refills in 2 s. */
	usleep(2500 * 1000);
	peer_open(&root, m_port);
	must(peer_chmod(&root, &root_cred, zdir, 0777), "chmod z");
	peer_open(&user, m_port);
	q.cred = &user_cred;
	q.parent = pub;
	q.name = str("big");
	id = peer_send(&user, SW_MSG_RMR, 0, &q.base);
	r = (Sweepfs__RmrReply *)peer_reply(&user, SW_MSG_RMR, id, &err);
	if (err)
		fail("honest: uid 1000's first RMR of big (z now 0777): %s",
		     strerror(err));
	nodes = r->nodes;
	sweepfs__rmr_reply__free_unpacked(r, NULL);
	if (nodes != files + 3)
		fail("honest: %" PRIu64 " nodes removed, not %u", nodes,
		     files + 3);
	l.cred = &root_cred;
	l.parent = pub;
	l.name = str("big");
	expect(peer_call(&root, SW_MSG_LOOKUP, &l.base), ENOENT,
	       "lookup of big after its RMR");
	peer_close(&user);
	peer_close(&root);
	ok("honest: a fresh session of uid 1000 removed big (%u files, a "
	   "subdirectory last) with its first RMR",
	   files);
}

int main(int argc, char **argv)
{
	int opt;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "m:p:f:n:s:b:")) != -1) {
		switch (opt) {
		case 'm':
			m_port = (uint16_t)atoi(optarg);
			break;
		case 'p':
			m_pid = (pid_t)atoi(optarg);
			break;
		case 'f':
			files = (unsigned)atoi(optarg);
			break;
		case 'n':
			rmrs = (unsigned)atoi(optarg);
			break;
		case 's':
			sessions = (unsigned)atoi(optarg);
			break;
		case 'b':
			bound_ms = atoi(optarg);
			break;
		default:
			fprintf(stderr,
				"usage: rmrwalk -m PORT -p PID [-f FILES] "
				"[-n RMRS] [-s SESSIONS] [-b MS]\n");
			return 2;
		}
	}
	if (!m_port || !m_pid || !files || !sessions || rmrs < sessions) {
		fprintf(stderr, "rmrwalk: -m and -p are needed\n");
		return 2;
	}
	rng_state = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull | 1;
	user_cred.uid = user_cred.gid = 1000;
	check_build();
	attack("many", sessions, rmrs / sessions, ALL_CAP, ALL_RATE);
	usleep(2500 * 1000); /* everyone's bucket full again */
	attack("one", 1, rmrs, WALK_MAX, SESSION_RATE);
	check_rmsnapshot();
	check_flagged();
	check_resume();
	check_moved();
	check_honest();
	alive(m_pid, "master");
	return 0;
}
