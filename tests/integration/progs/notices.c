/*
 * notices -m PORT -p PID [-n CREATES] [-b MIB]
 *
 * What a client that does not read what it is sent may make the master
 * hold (threat model, finding 5; master/server.c, SERVER_NOTICES_MAX).
 * Against a real master (port -m, pid -p) with no exports file (root is
 * admin), root's session C makes files by pipelined MKNODs:
 *
 *   rss      C makes CREATES (150,000) files in /a, then as many in /b,
 *            which a session N that listed /b reads nothing of; the
 *            master's RSS may grow by at most -b MIB (8) more for /b
 *            than for /a (it grew by 31 MiB more without the bound),
 *            and another session's pings, back to back all along, take
 *            at most QUICK_MS each
 *   reader   a session R lists /r, then reads nothing while C makes
 *            BEHIND (30,000) files there and removes r/victim; then R reads:
 *            after the invalidations it was sent comes one of
 *            everything (InvalNotify.all), and none names the victim
 *            (it was removed while R was behind); R acknowledges it,
 *            and C's removal of r/f0 reaches R as its own invalidation
 *   old      a session O whose hello does not say it takes one of
 *            everything (an older mount) lists /r and reads nothing
 *            while C makes BEHIND more files there and for 7 s more:
 *            the master closes O's connection, behind for
 *            SERVER_BEHIND_MS (its mount drops its listings when it
 *            connects again)
 *
 * Prints "ok - ..." per check; exit 0 when all held, 1 at the first that
 * did not.
 */
#include <errno.h>
#include <poll.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "client.h"
#include "frame.h"
#include "peer.h"
#include "util.h"

/* A stall (the master held up by the notices), not scheduling noise on
 * a loaded machine of 2 cores: pings take well under 10 ms here. */
#if defined(__SANITIZE_ADDRESS__)
#define QUICK_MS 600
#else
#define QUICK_MS 300
#endif
/* Creates a reader does not read: their invalidations, about 230 bytes
 * each, fill the sockets' buffers (a few MiB on loopback) and then
 * SERVER_NOTICES_MAX. */
#define BEHIND 30000u
/* MKNODs in flight at once from C. */
#define WINDOW 256

static uint16_t m_port;
static pid_t m_pid;
static unsigned creates;
static long bound_mib;
static Sweepfs__Cred root_cred = SWEEPFS__CRED__INIT;

static uint64_t send_name_op(struct peer *p, uint64_t dir, const char *name,
			     bool unlink)
{
	Sweepfs__MknodReq q = SWEEPFS__MKNOD_REQ__INIT;
	Sweepfs__NameReq u = SWEEPFS__NAME_REQ__INIT;

	q.cred = u.cred = &root_cred;
	q.parent = u.parent = dir;
	q.name = u.name = str(name);
	q.mode = S_IFREG | 0644;
	return unlink ? peer_send(p, SW_MSG_UNLINK, 0, &u.base) :
			peer_send(p, SW_MSG_MKNOD, 0, &q.base);
}

/* The next reply on @p (notifications skipped); fail() on an error. */
static void reply_ok(struct peer *p, const char *what)
{
	struct sw_frame_hdr hdr;
	uint8_t *payload;
	int rc;

	do {
		rc = peer_recv(p, &hdr, &payload, TIMEOUT_MS);
		if (rc <= 0)
			fail("%s: no reply (%d)", what, rc);
		if (hdr.flags == SW_FRAME_NOTIFY)
			free(payload);
	} while (hdr.flags == SW_FRAME_NOTIFY);
	{
		ProtobufCMessage *m = protobuf_c_message_unpack(
			sw_msg_info(hdr.type) ?
				sw_msg_info(hdr.type)->reply :
				&sweepfs__status_reply__descriptor,
			NULL, hdr.len, payload);
		int err;

		free(payload);
		if (!m)
			fail("%s: unparsable reply", what);
		err = sw_reply_err(m);
		protobuf_c_message_free_unpacked(m, NULL);
		if (err)
			fail("%s: %s", what, strerror(err > 0 ? err : -err));
	}
}

/*
 * MKNOD @n files @prefix0.. in @dir from @p, WINDOW at a time. Each
 * name is NAME_LEN bytes (the number padded with 'x'): about 230 bytes
 * of invalidation a file, as the finding's 31 MiB for 150,000 creates.
 */
#define NAME_LEN 200

static void make_files(struct peer *p, uint64_t dir, const char *prefix,
		       unsigned n)
{
	unsigned sent = 0, done = 0;
	char name[NAME_LEN + 1];

	while (done < n) {
		while (sent < n && sent - done < WINDOW) {
			int len = snprintf(name, sizeof(name), "%s%u", prefix,
					   sent++);

			memset(name + len, 'x', NAME_LEN - (size_t)len);
			name[NAME_LEN] = '\0';
			send_name_op(p, dir, name, false);
		}
		reply_ok(p, "mknod");
		done++;
	}
}

/* READDIR of @dir's first page on @p, its reply read: @p watches it. */
static void list_dir(struct peer *p, uint64_t dir)
{
	Sweepfs__ReaddirReq q = SWEEPFS__READDIR_REQ__INIT;
	int err;

	q.cred = &root_cred;
	q.ino = dir;
	q.max_entries = 128;
	q.max_bytes = 16384;
	protobuf_c_message_free_unpacked(
		peer_reply(p, SW_MSG_READDIR,
			   peer_send(p, SW_MSG_READDIR, 0, &q.base), &err),
		NULL);
	must(err, "readdir");
}

/* A session @p (its hello's inval_all @inval_all) that lists @dir and
 * will read nothing: its socket buffers a few KiB, whatever the host's
 * TCP buffers, so what it does not read stays in the master. */
static void deaf_session(struct peer *p, bool inval_all, uint64_t dir)
{
	peer_inval_all = inval_all;
	peer_rcvbuf = 4096;
	peer_session(p, m_port, "/", 1000);
	peer_rcvbuf = 0;
	list_dir(p, dir);
}

static void check_rss(struct peer *c, uint64_t a, uint64_t b)
{
	struct peer_pinger pg;
	struct peer n;
	long r0, r1, r2, grow_a, grow_b;
	double worst;

	peer_pinger_start(&pg, m_port, "/");
	r0 = rss_kb(m_pid);
	make_files(c, a, "a", creates);
	r1 = rss_kb(m_pid);
	deaf_session(&n, true, b); /* kept, not closed: only bounded */
	make_files(c, b, "b", creates);
	r2 = rss_kb(m_pid);
	worst = peer_pinger_stop(&pg);
	alive(m_pid, "the master");
	grow_a = r1 - r0;
	grow_b = r2 - r1;
	printf("# %u creates: RSS +%ld KiB alone, +%ld KiB with a session "
	       "that reads nothing; slowest ping %.1f ms\n",
	       creates, grow_a, grow_b, worst);
	if (grow_b - grow_a > bound_mib * 1024)
		fail("the master's RSS grew by %ld KiB more with a session "
		     "that reads nothing (bound %ld MiB)",
		     grow_b - grow_a, bound_mib);
	if (worst > QUICK_MS)
		fail("a ping took %.1f ms (bound %d)", worst, QUICK_MS);
	peer_close(&n);
	ok("rss: +%ld KiB more for a session that reads nothing, pings "
	   "within %.1f ms",
	   grow_b - grow_a, worst);
}

/*
 * Read @p's notifications until a reply or @timeout_ms of quiet: how many
 * invalidations named @victim, whether one of everything came, and
 * whether one that names something came after it.
 */
struct seen {
	unsigned named_victim, items_after_all;
	bool all;
	uint64_t all_seq;
};

static void read_notices(struct peer *p, const char *victim, int timeout_ms,
			 struct seen *sn)
{
	struct sw_frame_hdr hdr;
	uint8_t *payload;

	while (peer_recv(p, &hdr, &payload, timeout_ms) == 1) {
		Sweepfs__InvalNotify *n;

		if (hdr.flags != SW_FRAME_NOTIFY || hdr.type != SW_MSG_INVAL) {
			free(payload);
			continue;
		}
		n = sweepfs__inval_notify__unpack(NULL, hdr.len, payload);
		free(payload);
		if (!n)
			fail("unparsable invalidation");
		for (size_t i = 0; i < n->n_items; i++) {
			const Sweepfs__Inval *it = n->items[i];

			if (sn->all)
				sn->items_after_all++;
			if (it->has_name && it->name.len == strlen(victim) &&
			    !memcmp(it->name.data, victim, it->name.len))
				sn->named_victim++;
		}
		if (n->has_all && n->all) {
			if (sn->all)
				fail("two invalidations of everything");
			sn->all = true;
			sn->all_seq = n->seq;
		}
		sweepfs__inval_notify__free_unpacked(n, NULL);
	}
}

static void check_reader(struct peer *c, uint64_t r)
{
	Sweepfs__InvalAckReq a = SWEEPFS__INVAL_ACK_REQ__INIT;
	struct seen sn = { 0 };
	char f0[NAME_LEN + 1];
	struct peer rd;

	make_files(c, r, "f", 1);
	send_name_op(c, r, "victim", false);
	reply_ok(c, "mknod victim");
	deaf_session(&rd, true, r);
	/* R reads nothing meanwhile. */
	make_files(c, r, "r", BEHIND);
	send_name_op(c, r, "victim", true);
	reply_ok(c, "unlink victim");
	read_notices(&rd, "victim", 500, &sn);
	if (!sn.all)
		fail("reader: no invalidation of everything after %u "
		     "creates it did not read",
		     BEHIND);
	if (sn.named_victim)
		fail("reader: the victim's removal was named (%u), not "
		     "taken in the one of everything",
		     sn.named_victim);
	if (sn.items_after_all)
		fail("reader: %u invalidations after the one of everything",
		     sn.items_after_all);
	a.seq = sn.all_seq;
	peer_send(&rd, SW_MSG_INVAL_ACK, 0, &a.base);
	memset(f0, 'x', NAME_LEN);
	memcpy(f0, "f0", 2);
	f0[NAME_LEN] = '\0';
	send_name_op(c, r, f0, true);
	reply_ok(c, "unlink f0");
	sn = (struct seen){ 0 };
	read_notices(&rd, f0, 500, &sn);
	if (sn.all || sn.named_victim != 1)
		fail("reader: the removal of f0 after it caught up came as "
		     "%u named invalidations%s",
		     sn.named_victim, sn.all ? " and one of everything" : "");
	peer_close(&rd);
	ok("reader: one invalidation of everything once it read, then "
	   "names again");
}

/* Read @fd's bytes, frames or not (a connection closed with output
 * unsent ends in the middle of one), until the end (0) or @timeout_ms
 * of quiet (-ETIMEDOUT). */
static int read_to_end(int fd, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char buf[65536];
	ssize_t n;
	int rc;

	for (;;) {
		rc = poll(&pfd, 1, timeout_ms);
		if (rc == 0)
			return -ETIMEDOUT;
		if (rc < 0 && errno != EINTR)
			return -errno;
		if (rc < 0)
			continue;
		n = recv(fd, buf, sizeof(buf), 0);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

static void check_old(struct peer *c, uint64_t r)
{
	struct peer o;

	deaf_session(&o, false, r);
	make_files(c, r, "o", BEHIND);
	/* Still reading nothing past SERVER_BEHIND_MS (5 s) and the
	 * once-a-second look: it was closed (what it was sent, then the
	 * end), unless it went past 4 MiB unsent before. */
	sleep(7);
	if (read_to_end(o.fd, 2000) != 0)
		fail("old: the connection of a session that reads nothing "
		     "and takes no invalidation of everything was not closed");
	peer_close(&o);
	ok("old: a session that takes no invalidation of everything is "
	   "closed");
}

int main(int argc, char **argv)
{
	long vals[2] = { 150000, 8 }; /* -n, -b */
	uint64_t a, b, r;
	struct peer c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (peer_args(argc, argv, &m_port, &m_pid, "nb", vals) < 0 ||
	    vals[0] <= 0) {
		fprintf(stderr, "usage: notices -m PORT -p PID [-n CREATES] "
				"[-b MIB]\n");
		return 2;
	}
	creates = (unsigned)vals[0];
	bound_mib = vals[1];
	rng_state = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull | 1;
	peer_session(&c, m_port, "/", 1000);
	a = peer_mkdir(&c, &root_cred, ROOT, "a");
	b = peer_mkdir(&c, &root_cred, ROOT, "b");
	r = peer_mkdir(&c, &root_cred, ROOT, "r");
	check_rss(&c, a, b);
	check_reader(&c, r);
	check_old(&c, r);
	peer_close(&c);
	return 0;
}
