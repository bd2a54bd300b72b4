/*
 * snaplease -m PORT -p PID -c CSPORT -C CSPID [-n SNAPS] [-M]
 *
 * What a user's snapshots cost every writer (threat model, finding 13;
 * master/snapjob.c): a snapshot takes back the write leases of the files
 * it copies and no others, and snapshots wait in a bounded queue. Against
 * a real master (port -m, pid -p) and its one chunkserver (port -c, pid
 * -C), with no exports file (root is admin):
 *
 *   build    root makes /w/f and /t/g (files) and /u (0777); uid 1000
 *            makes /u/d, an empty directory of its own, and uids
 *            2000..2031 /u/o0../u/o31
 *   seen     root's session W takes a write lease on /w/f and writes it;
 *            uid 1000 pipelines SNAPS (800) SNAPSHOTs of /u/d into /u,
 *            8 in flight, while W asks for /w/f's chunk for writing back
 *            to back: every snapshot is made or EAGAIN, and W's chunk
 *            keeps its version all along (no lease taken back: no bump),
 *            and W's first token still writes it. Prints W's CHUNK
 *            round trips (median, max). With -M only that, no checks:
 *            the same figures from any build
 *   cap      W takes a lease on /t/g and writes "A"s; the chunkserver is
 *            stopped (SIGSTOP); root's session S snapshots /t as /tsnap,
 *            whose reply waits for the bump that takes W's lease back.
 *            Meanwhile W asks for /t/g's chunk for writing again (it
 *            waits too); a fresh uid 1000 session pipelines SNAPS
 *            snapshots of /u/d: exactly 8 wait, the rest are EAGAIN at
 *            once; 40 more sessions of uid 1000 pipeline 8 each: all
 *            EAGAIN (a user's sessions share its cap: finding 22); 32
 *            other users (uids 2000..2031, each its own /u/oN) pipeline
 *            8 each from those sessions: 248 more wait (256 in all), the
 *            rest EAGAIN; root's one more waits (admins are not refused
 *            by the global cap)
 *   cow      the chunkserver goes on (SIGCONT): S's snapshot is made, W's
 *            waiting request gets a copy of the chunk (a new id), W's
 *            first token no longer writes (its version moved on), W
 *            writes "B"s through the copy; /tsnap/g still reads "A"s,
 *            /t/g "B"s; every waiting snapshot is made; /w/f's chunk
 *            still has the version W's lease had at the start
 *
 * Prints "ok - ..." per check; exit status 0 when every check held, 1 at
 * the first that did not.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frame.h"
#include "fsio.h"
#include "peer.h"
#include "util.h"

/* master/snapjob.h */
#define SESSION_MAX 8 /* SNAPJOB_USER_MAX */
#define QUEUE_MAX 256
#define SESSIONS 40
#define USERS (QUEUE_MAX / SESSION_MAX) /* the others', to fill it */
#define DATA 4096

static uint16_t m_port, cs_port;
static pid_t m_pid, cs_pid;
static unsigned snaps = 800;
static bool measure_only;
static uint64_t wdir, wf, tdir, tg, udir, ud, od[USERS];

static Sweepfs__Cred root_cred = SWEEPFS__CRED__INIT;
static Sweepfs__Cred user_cred = SWEEPFS__CRED__INIT;
static Sweepfs__Cred other_cred[USERS];

/* CREATE @name in @parent as root, open for reading and writing. */
static uint64_t create(struct peer *p, uint64_t parent, const char *name)
{
	Sweepfs__CreateReq c = SWEEPFS__CREATE_REQ__INIT;
	uint64_t ino = 0;

	c.cred = &root_cred;
	c.parent = parent;
	c.name = str(name);
	c.mode = S_IFREG | 0644;
	c.flags = O_RDWR;
	must(peer_entry(p, SW_MSG_CREATE, &c.base, &ino), name);
	return ino;
}

static uint64_t lookup(struct peer *p, uint64_t parent, const char *name)
{
	Sweepfs__LookupReq q = SWEEPFS__LOOKUP_REQ__INIT;
	uint64_t ino = 0;

	q.cred = &root_cred;
	q.parent = parent;
	q.name = str(name);
	must(peer_entry(p, SW_MSG_LOOKUP, &q.base, &ino), name);
	return ino;
}

static void check_build(struct peer *w)
{
	struct peer u;

	wdir = peer_mkdir(w, &root_cred, ROOT, "w");
	wf = create(w, wdir, "f");
	tdir = peer_mkdir(w, &root_cred, ROOT, "t");
	tg = create(w, tdir, "g");
	udir = peer_mkdir(w, &root_cred, ROOT, "u");
	must(peer_chmod(w, &root_cred, udir, 0777), "chmod /u");
	peer_session(&u, m_port, "/", 0);
	ud = peer_mkdir(&u, &user_cred, udir, "d");
	for (unsigned i = 0; i < USERS; i++) {
		char name[16];

		snprintf(name, sizeof(name), "o%u", i);
		od[i] = peer_mkdir(&u, &other_cred[i], udir, name);
	}
	peer_close(&u);
	ok("build: /w/f, /t/g, /u/d (uid 1000's), /u/o0../u/o%u", USERS - 1);
}

/* A SNAPSHOT of /u/d into /u as @name, as uid 1000, into @buf at @len. */
static size_t pack_snapshot(uint8_t *buf, size_t len, Sweepfs__Cred *cred,
			    uint64_t src, uint64_t parent, const char *name,
			    uint64_t id)
{
	Sweepfs__SnapshotReq q = SWEEPFS__SNAPSHOT_REQ__INIT;
	uint64_t h[SW_HANDLES_MAX];

	q.cred = cred;
	q.src = src;
	q.parent = parent;
	q.name = str(name);
	peer_vouch(SW_MSG_SNAPSHOT, &q.base, h);
	return len + sw_frame_pack(buf + len, SW_MSG_SNAPSHOT, 0, id, &q.base);
}

/* @n snapshots of @src into /u as "PREFIXi" by @cred in one write. */
static void send_as(struct peer *p, Sweepfs__Cred *cred, uint64_t src,
		    const char *prefix, unsigned n)
{
	uint8_t *buf = malloc((size_t)n * 256);
	size_t len = 0;
	char name[64];

	if (!buf)
		fail("out of memory");
	for (unsigned i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%s%u", prefix, i);
		len = pack_snapshot(buf, len, cred, src, udir, name, 1000 + i);
	}
	if (write_all(p->fd, buf, len) < 0)
		fail("sending %u SNAPSHOTs: %s", n, strerror(errno));
	free(buf);
}

/* @n snapshots of /u/d as "PREFIXi" by uid 1000 in one write. */
static void send_snapshots(struct peer *p, const char *prefix, unsigned n)
{
	send_as(p, &user_cred, ud, prefix, n);
}

/* Read the snapshot replies @p has within @ms: counts made and EAGAIN;
 * any other answer fails. */
static unsigned read_snapshots(struct peer *p, int ms, unsigned *made,
			       unsigned *eagain)
{
	struct sw_frame_hdr h;
	uint8_t *payload;
	unsigned got = 0;

	while (peer_recv(p, &h, &payload, ms) == 1) {
		Sweepfs__SnapshotReply *r =
			sweepfs__snapshot_reply__unpack(NULL, h.len, payload);
		int err;

		free(payload);
		if (h.flags == SW_FRAME_NOTIFY) {
			sweepfs__snapshot_reply__free_unpacked(r, NULL);
			continue;
		}
		if (!r || h.type != SW_MSG_SNAPSHOT)
			fail("a bad reply to a SNAPSHOT (type %u)", h.type);
		err = r->has_err ? r->err : 0;
		sweepfs__snapshot_reply__free_unpacked(r, NULL);
		if (err == EAGAIN)
			++*eagain;
		else if (err == 0)
			++*made;
		else
			fail("a SNAPSHOT of /u/d by uid 1000: %s",
			     strerror(err));
		got++;
	}
	return got;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static void write_data(struct peer *cs, const struct chunk_grant *g, char c,
		       const char *what)
{
	char buf[DATA];

	memset(buf, c, sizeof(buf));
	must(peer_cs_write(cs, g, buf, sizeof(buf)), what);
}

/* The first byte of the chunk of @ino, read as root: and all the same. */
static char read_back(struct peer *w, struct peer *cs, uint64_t ino,
		      uint64_t *chunk)
{
	struct chunk_grant g;
	char buf[DATA];
	size_t got;

	must(peer_chunk(w, &root_cred, ino, false, &g), "CHUNK read");
	must(peer_cs_read(cs, &g, buf, sizeof(buf), &got), "CS_READ");
	if (got != sizeof(buf))
		fail("read %zu bytes of inode %" PRIu64 ", not %d", got, ino,
		     DATA);
	for (size_t i = 1; i < got; i++)
		if (buf[i] != buf[0])
			fail("inode %" PRIu64 ": mixed data at %zu", ino, i);
	*chunk = g.chunk_id;
	return buf[0];
}

static void check_seen(struct peer *w, struct peer *cs, struct chunk_grant *g0)
{
	struct peer u;
	unsigned made = 0, eagain = 0, done = 0, sent = 0, bumped = 0;
	int64_t *rt = NULL;
	size_t n = 0, cap = 0;
	int64_t t0;

	must(peer_chunk(w, &root_cred, wf, true, g0), "CHUNK write of /w/f");
	write_data(cs, g0, 'W', "writing /w/f");
	peer_session(&u, m_port, "/", 0);
	t0 = sw_mono_ns();
	while (done < snaps) {
		struct chunk_grant g;
		int64_t t = sw_mono_ns();

		if (t - t0 > 60 * 1000000000ll)
			fail("seen: %u of %u SNAPSHOTs answered after 60 s",
			     done, snaps);
		/* SESSION_MAX in flight, one more for each answered. */
		while (sent < snaps && sent - done < SESSION_MAX) {
			uint8_t buf[256];
			char name[32];
			size_t len;

			snprintf(name, sizeof(name), "s%u", sent);
			len = pack_snapshot(buf, 0, &user_cred, ud, udir, name,
					    1000 + sent++);
			if (write_all(u.fd, buf, len) < 0)
				fail("sending a SNAPSHOT: %s", strerror(errno));
		}
		t = sw_mono_ns();
		must(peer_chunk(w, &root_cred, wf, true, &g),
		     "CHUNK write of /w/f meanwhile");
		if (sw_grow(&rt, &cap, n + 1, sizeof(*rt), 1024) < 0)
			fail("out of memory");
		rt[n++] = sw_mono_ns() - t;
		bumped += g.chunk_id != g0->chunk_id ||
			  g.version != g0->version;
		done += read_snapshots(&u, 1, &made, &eagain);
	}
	qsort(rt, n, sizeof(*rt), cmp_i64);
	printf("# seen: %u SNAPSHOTs of /u/d by uid 1000, %d in flight, in "
	       "%.3f s (%u made, %u EAGAIN); the writer's %zu CHUNK writes of "
	       "/w/f: median %.3f ms, max %.3f ms; %u of them at a new "
	       "version\n",
	       snaps, SESSION_MAX, (double)(sw_mono_ns() - t0) / 1e9, made,
	       eagain, n, (double)rt[n / 2] / 1e6, (double)rt[n - 1] / 1e6,
	       bumped);
	free(rt);
	peer_close(&u);
	if (measure_only)
		return;
	if (bumped)
		fail("seen: %u of the writer's CHUNK writes of /w/f came at a "
		     "new version: snapshots of /u/d took its lease back",
		     bumped);
	if (!made)
		fail("seen: no snapshot of /u/d was made");
	write_data(cs, g0, 'X', "writing /w/f with the first token");
	ok("seen: %u snapshots of /u/d (%u made, %u EAGAIN), the writer of "
	   "/w/f kept its lease (same version) and its first token",
	   snaps, made, eagain);
}

/* A CHUNK write request of @ino's chunk 0 as root, its reply not read. */
static uint64_t send_chunk_write(struct peer *p, uint64_t ino)
{
	Sweepfs__ChunkReq q = SWEEPFS__CHUNK_REQ__INIT;

	q.cred = &root_cred;
	q.ino = ino;
	q.has_write = 1;
	q.write = 1;
	return peer_send(p, SW_MSG_CHUNK, 0, &q.base);
}

/* Read the snapshot replies of @n peers until @want EAGAINs came, for
 * seconds (a loaded or ASan master answers late), then a last look for
 * any more. */
static void read_until(struct peer *p, unsigned n, unsigned want,
		       unsigned *made, unsigned *eagain)
{
	int64_t until = sw_mono_ns() + 20 * SW_NSEC_PER_SEC;

	while (!*made && *eagain < want && sw_mono_ns() < until)
		for (unsigned i = 0; i < n; i++)
			read_snapshots(&p[i], 20, made, eagain);
	for (unsigned i = 0; i < n; i++)
		read_snapshots(&p[i], 20, made, eagain);
}

/* Nothing answered on @p within @ms (what waits, waits). */
static void nothing_yet(struct peer *p, int ms, const char *what)
{
	struct sw_frame_hdr h;
	uint8_t *payload;

	if (peer_recv(p, &h, &payload, ms) == 1)
		fail("%s: answered (type %u) while the chunkserver is stopped",
		     what, h.type);
}

static void check_cap_and_cow(struct peer *w, struct peer *cs,
			      const struct chunk_grant *g0)
{
	static struct peer many[SESSIONS];
	struct chunk_grant gt, g;
	struct peer s, s2, u;
	uint8_t buf[256];
	unsigned made = 0, eagain = 0, got = 0, want;
	uint64_t chunk_req, tsnap, c;
	char name[32];
	int err;

	must(peer_chunk(w, &root_cred, tg, true, &gt), "CHUNK write of /t/g");
	write_data(cs, &gt, 'A', "writing /t/g");
	peer_session(&s, m_port, "/", 0);
	peer_session(&s2, m_port, "/", 0);
	peer_session(&u, m_port, "/", 0);
	for (unsigned i = 0; i < SESSIONS; i++)
		peer_session(&many[i], m_port, "/", 0);

	if (kill(cs_pid, SIGSTOP) < 0)
		fail("SIGSTOP the chunkserver: %s", strerror(errno));
	{
		size_t len = pack_snapshot(buf, 0, &root_cred, tdir, ROOT,
					   "tsnap", 77);

		if (write_all(s.fd, buf, len) < 0)
			fail("sending the SNAPSHOT of /t");
	}
	nothing_yet(&s, 300, "the SNAPSHOT of /t");
	chunk_req = send_chunk_write(w, tg);

	send_snapshots(&u, "q", snaps);
	while (got < snaps - SESSION_MAX)
		if (!read_snapshots(&u, 5000, &made, &eagain))
			fail("cap: %u of %u SNAPSHOTs answered", got, snaps);
		else
			got = made + eagain;
	nothing_yet(&u, 200, "cap: a queued SNAPSHOT");
	if (made || eagain != snaps - SESSION_MAX)
		fail("cap: %u made, %u EAGAIN of one session's %u while the "
		     "queue is held: want 0 and %u",
		     made, eagain, snaps, snaps - SESSION_MAX);
	/* The same user's other sessions: its cap is theirs too. */
	want = SESSIONS * SESSION_MAX;
	eagain = 0;
	for (unsigned i = 0; i < SESSIONS; i++) {
		snprintf(name, sizeof(name), "m%u_", i);
		send_snapshots(&many[i], name, SESSION_MAX);
	}
	read_until(many, SESSIONS, want, &made, &eagain);
	if (made || eagain != want)
		fail("cap: uid 1000's %u other sessions' %u each: %u made, "
		     "%u EAGAIN: want 0 and %u (the user's cap is %d)",
		     SESSIONS, SESSION_MAX, made, eagain, want, SESSION_MAX);
	/* Other users fill the queue. */
	want = USERS * SESSION_MAX - (QUEUE_MAX - SESSION_MAX);
	eagain = 0;
	for (unsigned i = 0; i < USERS; i++) {
		snprintf(name, sizeof(name), "o%u_", i);
		send_as(&many[i], &other_cred[i], od[i], name, SESSION_MAX);
	}
	read_until(many, USERS, want, &made, &eagain);
	if (made || eagain != want)
		fail("cap: %u users' %u each: %u made, %u EAGAIN: want 0 "
		     "and %u (the queue holds %d)",
		     USERS, SESSION_MAX, made, eagain, want, QUEUE_MAX);
	{
		size_t len = pack_snapshot(buf, 0, &root_cred, ud, udir,
					   "admin", 88);

		if (write_all(s2.fd, buf, len) < 0)
			fail("sending root's SNAPSHOT");
	}
	nothing_yet(&s2, 200, "root's SNAPSHOT past the global cap");
	ok("cap: while a snapshot waits, one session's %u pipelined: %u "
	   "EAGAIN at once, %d wait; the same user's %u other sessions' %d "
	   "each: all EAGAIN; %u other users' %d each: %u EAGAIN; root's "
	   "one waits",
	   snaps, snaps - SESSION_MAX, SESSION_MAX, SESSIONS, SESSION_MAX,
	   USERS, SESSION_MAX, want);

	if (kill(cs_pid, SIGCONT) < 0)
		fail("SIGCONT the chunkserver: %s", strerror(errno));
	protobuf_c_message_free_unpacked(
		peer_reply(&s, SW_MSG_SNAPSHOT, 77, &err), NULL);
	must(err, "root's SNAPSHOT of /t");
	{
		Sweepfs__ChunkReply *r = (Sweepfs__ChunkReply *)peer_reply(
			w, SW_MSG_CHUNK, chunk_req, &err);

		must(err, "CHUNK write of /t/g during the snapshot");
		if (!r->loc || !r->loc->token.len)
			fail("CHUNK write of /t/g: no location");
		g = gt;
		g.chunk_id = r->loc->chunk_id;
		g.version = r->loc->version;
		g.token_len = r->loc->token.len;
		memcpy(g.token, r->loc->token.data, g.token_len);
		g.expires = r->loc->expires;
		sweepfs__chunk_reply__free_unpacked(r, NULL);
	}
	if (g.chunk_id == gt.chunk_id)
		fail("cow: the writer of /t/g got its shared chunk back");
	{
		char data[DATA];

		memset(data, 'C', sizeof(data));
		if (peer_cs_write(cs, &gt, data, sizeof(data)) == 0)
			fail("cow: the first token of /t/g still writes");
	}
	write_data(cs, &g, 'B', "writing /t/g's copy");
	tsnap = lookup(w, lookup(w, ROOT, "tsnap"), "g");
	if (read_back(w, cs, tsnap, &c) != 'A' || c != gt.chunk_id)
		fail("cow: /tsnap/g does not read the 'A's of before");
	if (read_back(w, cs, tg, &c) != 'B' || c != g.chunk_id)
		fail("cow: /t/g does not read the 'B's written after");
	ok("cow: the snapshot's /tsnap/g reads what /t/g held, the writer's "
	   "lease was taken back (its token refused) and its write during "
	   "the snapshot went to a copy");

	made = eagain = 0;
	read_snapshots(&s2, 5000, &made, &eagain);
	read_snapshots(&u, 5000, &made, &eagain);
	for (unsigned i = 0; i < SESSIONS; i++)
		while (read_snapshots(&many[i], 100, &made, &eagain))
			;
	if (made != QUEUE_MAX + 1 || eagain)
		fail("cow: %u waiting snapshots made, %u EAGAIN: want %d, 0",
		     made, eagain, QUEUE_MAX + 1);
	must(peer_chunk(w, &root_cred, wf, true, &g), "CHUNK write of /w/f");
	if (g.chunk_id != g0->chunk_id || g.version != g0->version)
		fail("cow: /w/f's lease was taken back meanwhile");
	ok("cow: the %d waiting snapshots made; /w/f kept its lease through "
	   "them all",
	   QUEUE_MAX + 1);
	for (unsigned i = 0; i < SESSIONS; i++)
		peer_close(&many[i]);
	peer_close(&u);
	peer_close(&s2);
	peer_close(&s);
}

int main(int argc, char **argv)
{
	struct chunk_grant g0;
	struct peer w, cs;
	int opt;

	while ((opt = getopt(argc, argv, "m:p:c:C:n:M")) != -1) {
		switch (opt) {
		case 'm':
			m_port = (uint16_t)atoi(optarg);
			break;
		case 'p':
			m_pid = (pid_t)atoi(optarg);
			break;
		case 'c':
			cs_port = (uint16_t)atoi(optarg);
			break;
		case 'C':
			cs_pid = (pid_t)atoi(optarg);
			break;
		case 'n':
			snaps = (unsigned)atoi(optarg);
			break;
		case 'M':
			measure_only = true;
			break;
		default:
			fprintf(stderr, "usage: snaplease -m PORT -p PID -c "
					"CSPORT -C CSPID [-n SNAPS] [-M]\n");
			return 2;
		}
	}
	if (!m_port || !m_pid || !cs_port || !cs_pid || snaps <= SESSION_MAX)
		fail("-m, -p, -c and -C are needed, and -n above %d",
		     SESSION_MAX);
	setvbuf(stdout, NULL, _IOLBF, 0);
	user_cred.uid = user_cred.gid = 1000;
	for (unsigned i = 0; i < USERS; i++) {
		other_cred[i] = (Sweepfs__Cred)SWEEPFS__CRED__INIT;
		other_cred[i].uid = other_cred[i].gid = 2000 + i;
	}
	peer_session(&w, m_port, "/", 0);
	peer_open(&cs, cs_port);
	check_build(&w);
	check_seen(&w, &cs, &g0);
	if (!measure_only)
		check_cap_and_cow(&w, &cs, &g0);
	alive(m_pid, "master");
	peer_close(&cs);
	peer_close(&w);
	return 0;
}
