/*
 * tagrace PORT: two sessions ask for the same large directory at once
 * (past DELEG_WALK_SYNC: a grant walked in slices, master/deleg.c), and a
 * third names one of its files by number. At most one is granted, and
 * that one must be recalled: before the fix the loser's walk re-marked
 * the files with a tag that went stale when it was refused, and the
 * third session's GETATTR cleared the holder's mark and recalled nothing
 * (found by review: its proof of concept, turned into this check).
 * Rounds in fresh directories, since which walk starts first varies.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "frame.h"
#include "peer.h"
#include "util.h"

static uint16_t m_port;
static Sweepfs__Cred root_cred = SWEEPFS__CRED__INIT;

static uint64_t mknod_in(struct peer *p, uint64_t parent, const char *name)
{
	Sweepfs__MknodReq q = SWEEPFS__MKNOD_REQ__INIT;

	q.cred = &root_cred;
	q.parent = parent;
	q.name = str(name);
	q.mode = S_IFREG | 0644;
	return peer_send(p, SW_MSG_MKNOD, 0, &q.base);
}

static uint64_t send_deleg(struct peer *p, uint64_t dir)
{
	Sweepfs__DelegReq q = SWEEPFS__DELEG_REQ__INIT;

	q.dir = dir;
	return peer_send(p, SW_MSG_DELEG, 0, &q.base);
}

/* Reply to @id: granted? Counts recalls seen on the way. */
static int deleg_reply(struct peer *p, uint64_t want)
{
	Sweepfs__DelegReply *r;
	int err;

	r = (Sweepfs__DelegReply *)peer_reply(p, SW_MSG_DELEG, want, &err);
	if (err)
		fail("deleg: %s", strerror(err));
	err = r->has_granted && r->granted;
	sweepfs__deleg_reply__free_unpacked(r, NULL);
	return err;
}

/* Whether a DELEG_RECALL for @dir comes on @p within @ms. */
static int recall_seen(struct peer *p, uint64_t dir, int ms)
{
	int64_t end = now_ms() + ms;
	struct sw_frame_hdr hdr;
	uint8_t *payload;

	for (;;) {
		int64_t left = end - now_ms();
		int rc = peer_recv(p, &hdr, &payload, left > 0 ? (int)left : 0);

		if (rc <= 0)
			return 0;
		if (hdr.type == SW_MSG_DELEG_RECALL) {
			Sweepfs__DelegRecall *n = sweepfs__deleg_recall__unpack(
				NULL, hdr.len, payload);
			int hit = n && n->dir == dir;

			sweepfs__deleg_recall__free_unpacked(n, NULL);
			free(payload);
			if (hit)
				return 1;
			continue;
		}
		free(payload);
	}
}

/* @p gives @dir back (it held it). */
static void give_back(struct peer *p, uint64_t dir)
{
	Sweepfs__DelegReturnReq q = SWEEPFS__DELEG_RETURN_REQ__INIT;

	q.dir = dir;
	must(peer_call(p, SW_MSG_DELEG_RETURN, &q.base), "deleg return");
}

/* A directory of @n files in the root; its first file in *@first. */
static uint64_t make_dir(int round, int n, uint64_t *first)
{
	struct peer adm;
	char name[32];
	uint64_t d;
	int err;

	peer_session(&adm, m_port, "/", 0);
	snprintf(name, sizeof(name), "D%d-%d", round, getpid());
	d = peer_mkdir(&adm, &root_cred, ROOT, name);
	*first = 0;
	for (int i = 0; i < n; i += 500) {
		uint64_t ids[500];
		int k = 0;

		for (int j = i; j < i + 500 && j < n; j++) {
			snprintf(name, sizeof(name), "f%d", j);
			ids[k++] = mknod_in(&adm, d, name);
		}
		for (int j = 0; j < k; j++) {
			Sweepfs__EntryReply *r =
				(Sweepfs__EntryReply *)peer_reply(
					&adm, SW_MSG_MKNOD, ids[j], &err);

			must(err, "mknod");
			if (!*first)
				*first = r->attr->ino;
			sweepfs__entry_reply__free_unpacked(r, NULL);
		}
	}
	peer_close(&adm);
	return d;
}

int main(int argc, char **argv)
{
	const int n = 16500, rounds = 3;

	if (argc < 2)
		fail("usage: tagrace PORT");
	m_port = (uint16_t)atoi(argv[1]);
	for (int round = 0; round < rounds; round++) {
		Sweepfs__GetattrReq q = SWEEPFS__GETATTR_REQ__INIT;
		struct peer a, b, c, *holder;
		uint64_t first, d = make_dir(round, n, &first);
		uint64_t ida, idb, idc;
		int ga, gb, err;
		ProtobufCMessage *r;

		peer_session(&a, m_port, "/", 0);
		peer_session(&b, m_port, "/", 0);
		peer_session(&c, m_port, "/", 0);
		ida = send_deleg(&a, d);
		idb = send_deleg(&b, d);
		ga = deleg_reply(&a, ida);
		gb = deleg_reply(&b, idb);
		if (ga && gb) {
			/* In turn, not at once: the second ask came after the
			 * first's walk had ended (a loaded machine), waited for
			 * that delegation, recalled it and, unanswered, got it
			 * after deleg_timeout. The first must have been told. */
			if (!recall_seen(&a, d, 1000) &&
			    !recall_seen(&b, d, 1000))
				fail("round %d: both sessions were granted "
				     "%" PRIu64 ", neither recalled",
				     round, d);
			ok("round %d: granted in turn, the first recalled",
			   round);
			goto next;
		}
		if (!ga && !gb) {
			ok("round %d: neither granted (busy)", round);
			goto next;
		}
		holder = ga ? &a : &b;
		q.ino = first;
		idc = peer_send(&c, SW_MSG_GETATTR, 0, &q.base);
		if (!recall_seen(holder, d, 5000))
			fail("round %d: a GETATTR by number of a file in %s's "
			     "held directory recalled nothing",
			     round, ga ? "A" : "B");
		give_back(holder, d);
		r = peer_reply(&c, SW_MSG_GETATTR, idc, &err);
		protobuf_c_message_free_unpacked(r, NULL);
		must(err, "getattr");
		ok("round %d: %s granted, recalled by a GETATTR of a file",
		   round, ga ? "A" : "B");
next:
		peer_close(&a);
		peer_close(&b);
		peer_close(&c);
	}
	return 0;
}
