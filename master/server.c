/*
 * The master's network side: accept, read frames, dispatch, queue replies.
 *
 * Each loop iteration reads whatever arrived on every connection and runs
 * the handlers; handlers append changelog records and queue replies. Then,
 * in the check phase, the changelog is written (one write(2) for all
 * records of the iteration) and every connection's replies go out with one
 * write each. A reply to a mutation is held on its connection until the
 * changelog reports its version durable (server_durable()); replies that
 * changed nothing go out at once.
 *
 * Connections and their buffers are freed only in the uv_close callback.
 * A frame that cannot be parsed, or a peer that sends too much or stalls
 * mid-frame, costs that connection and nothing else.
 */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "server.h"
#include "admin.h"
#include "dispatch.h"
#include "log.h"
#include "deleg.h"
#include "group.h"
#include "context.h"
#include "csrv.h"
#include "purge.h"
#include "req.h"
#include "session.h"
#include "net.h"
#include "util.h"

#define TAG "server"

/*
 * What a peer may make us hold. A connection's unsent replies (out, being
 * written, and held for durability) are checked before each request is
 * handled: past cfg.output_max no further request is read until they fall
 * below a quarter of it, so a client that pipelines requests and never
 * reads the replies costs at most that, plus one reply.
 *
 * Before its hello a peer is nobody: its frames are at most
 * PRE_HELLO_FRAME bytes (a hello listing tens of thousands of open files
 * fits), and what all such peers have sent us but not completed is at
 * most PRE_HELLO_TOTAL; the peer that would pass it is closed. Such peers
 * are also capped in number (cfg.pre_hello_max, pre_hello_per_address)
 * and in time (cfg.hello_timeout) by uvserver.h.
 *
 * The unsent replies of all connections are capped too
 * (cfg.output_total_max): the memory a connection's buffers hold is told
 * to uvserver.h at each change (conn_note_out()), which closes the
 * connections holding the most once the total is past the cap. A light
 * client is never the one closed while a heavier one is open. And no
 * connection's requests run for longer than CONSUME_SLICE_NS at a time.
 */
#define PRE_HELLO_FRAME (256u << 10)
#define PRE_HELLO_TOTAL (16u << 20)
/*
 * The longest one connection's requests run in one go: a client that
 * pipelines costly requests (READDIRs of a big directory, never read)
 * then delays every other client by at most this per loop turn, and the
 * rest of its input waits, unread, for its next turn.
 */
#define CONSUME_SLICE_NS (250 * 1000)
/* An empty buffer bigger than this is freed (its burst is over). */
#define BUF_KEEP (256u << 10)

/*
 * While a request of a connection waits for a delegation, what the
 * connection sends after it is read only up to PARKED_IN_MAX bytes
 * unhandled (room for the waiting request, at most a frame, and as
 * much again): then reading stops until the wait ends, so a client
 * that pumps requests behind a waiting one costs at most that. Past a
 * waiting request at most PARKED_SKIP_MAX frames that must stay behind
 * it are looked past, naming at most PARKED_NODES_MAX nodes; what
 * comes after them waits too.
 */
#define PARKED_IN_MAX (2 * SW_FRAME_MAX_META)
#define PARKED_SKIP_MAX 64u
#define PARKED_NODES_MAX 256u

static void conn_write(struct conn *c);

/*
 * @c's buffers changed: count the memory they hold (not the bytes in
 * them: a buffer grown by doubling holds up to twice those, and a write
 * in flight has one of its own) against output_total_max, which may
 * close @c, or a heavier connection. Its input buffer is counted too,
 * by uvserver.h (count_input), as soon as a read grows it.
 */
static void conn_note_out(struct conn *c)
{
	sw_sconn_output(&c->sc, sw_wq_held(&c->wq) + c->held.cap);
}

/*
 * No memory for @c's output (@doing): give up on @c. It is closed in the
 * check phase (sw_sconn_shed()), not here: the caller may be a handler
 * that still uses the connection's session, which a tool's or a
 * chunkserver's close frees (session_detach()).
 */
static void conn_out_of_memory(struct conn *c, const char *doing)
{
	sw_err(TAG, "%s: out of memory %s; closing", c->sc.peer, doing);
	sw_sconn_shed(&c->sc);
}

void server_resume(struct conn *c)
{
	/* What consume_parked() judged may change: judged afresh. */
	c->park_judged = false;
	/* Not now: the caller may be a handler, or the flush. */
	sw_sconn_go(&c->sc, SW_READ_WAIT, false);
}

/* ---- replies -------------------------------------------------------- */

/*
 * Invalidations and the replies that wait for them. A change that sent
 * invalidations (watch.c) to other sessions is answered once each of
 * those sessions has acknowledged the ones sent for it, so that its
 * caller, and anyone it tells, never finds the old name in another
 * mount's cache. Who waits for whom:
 *
 *  - A reply waits only for the invalidations numbered within its own
 *    request, (inval0, inval]: the sessions that watch the directories
 *    it changed, never the slowest session of the master, nor one on
 *    another export that watches nothing it changed. (A deferred
 *    request's range may take in others' invalidations sent meanwhile:
 *    that costs it, at most, the same bound.)
 *  - Each session keeps what it owes in order, with when each went; an
 *    INVAL_ACK (any session, of its own only: the number is clamped to
 *    what it was sent) takes off those up to its number.
 *  - Bound: an invalidation unacknowledged for inval_timeout (a few
 *    hundred ms) stops being waited for; its session turns lax, and no
 *    reply waits for it again while it lasts. (Waiting for it again once
 *    it caught up made every create of a storm in one shared directory
 *    wait the whole timeout: mounts that create there hold the
 *    directory's lock in their kernels while their own create waits, so
 *    their invalidations cannot be taken and acknowledged meanwhile; the
 *    cycle ends only by the timeout, each time.) Its invalidations still go; what it costs that client is
 *    that for a while it may see a name another client changed until
 *    it reads the notice, as NFS clients do within their attribute
 *    timeout. The clock of each invalidation starts when it goes: a
 *    client that acknowledges a little at a time cannot extend it.
 *  - Memory: at most INVAL_OWED_MAX owed per session; past it the
 *    session turns lax at once.
 */
#define INVAL_OWED_MAX 4096u

/*
 * Notices, what a client is sent without asking (invalidations,
 * recalls), and what a connection that does not read them may make the
 * master hold: output_max stops reading a client, not its notices,
 * which other clients' changes make. After each write (conn_write(),
 * once a loop turn and at the end of each uv_write), conn->notices is
 * cut to what the socket left unsent; past SERVER_NOTICES_MAX then, its
 * session is behind: it is sent no more invalidations, and one of
 * everything (InvalNotify.all, which makes its mount drop every listing
 * and name) replaces them, queued once its backlog is under
 * SERVER_NOTICES_MAX / 4 again, after what it was sent before and
 * before any later one. A mount that takes all it is sent each turn is
 * never behind, whatever one turn sends it. The ack of that one is
 * owed from the overflow: each invalidation not sent is numbered within
 * it, so the replies that made them wait for it as for any ack, up to
 * inval_timeout from the overflow (server_inval_tick()). A session
 * whose hello did not say its mount takes one (an older mount, a bare
 * client) is still sent its invalidations, and closed if it stays
 * behind SERVER_BEHIND_MS, or at once past SERVER_NOTICES_HARD unsent:
 * a mount drops its listings when it connects again. So a connection
 * holds at most SERVER_NOTICES_MAX plus one turn's notices (or
 * SERVER_NOTICES_HARD plus one turn's, without inval_all). Recalls are
 * still sent (a holder must see them) and counted: one per delegation,
 * and a session behind is granted none (deleg.c); each is answered or
 * taken back within deleg_timeout, as from any holder.
 */

/* Owed: the ack of (first, seq] numbered to the session (first + 1 ==
 * seq but for the one reserved for a session behind on its notices,
 * which grows to cover each invalidation it is not sent). */
struct inval_owed {
	uint64_t first; /* below the first number it covers */
	uint64_t seq;	/* m->inval_seq of the last it covers */
	int64_t at;	/* mono ns it was sent (or the overflow) */
};

/* Whether @s owes an ack of an invalidation numbered in (@lo, @hi]. */
static bool owes_within(const struct session *s, uint64_t lo, uint64_t hi)
{
	const struct inval_owed *o = s->owed + s->owed_head;
	size_t a = 0, b = s->owed_n - s->owed_head;

	/* The first owed past @lo, by bisection: they are in order. */
	while (a < b) {
		size_t mid = a + (b - a) / 2;

		if (o[mid].seq <= lo)
			a = mid + 1;
		else
			b = mid;
	}
	return a < s->owed_n - s->owed_head && o[a].first < hi;
}

/* Whether a reply whose request sent invalidations (@lo, @hi] must wait
 * for some (@hi 0: it sent none). */
static bool inval_waits(const struct master *m, uint64_t lo, uint64_t hi)
{
	if (!hi)
		return false;
	for (const struct session *s = m->owing; s; s = s->owe_next)
		if (owes_within(s, lo, hi))
			return true;
	return false;
}

static int held_push(struct conn *c, uint64_t version, uint64_t inval0,
		     uint64_t inval, size_t size)
{
	if (c->marks_head == c->nmarks) {
		c->marks_head = c->nmarks = 0;
	}
	if (sw_grow(&c->marks, &c->marks_cap, c->nmarks + 1, sizeof(*c->marks),
		    16) < 0)
		return -ENOMEM;
	c->marks[c->nmarks++] = (struct held_mark){ .version = version,
						    .inval0 = inval0,
						    .inval = inval,
						    .size = size };
	return 0;
}

void server_req_send(struct req *r, const ProtobufCMessage *reply, bool error)
{
	struct conn *c = r->conn;
	struct master *m = r->m;
	/* It sent invalidations: answered once they are acknowledged. */
	uint64_t inval = m->inval_seq > r->inval0 ? m->inval_seq : 0;
	struct sw_buf *b;
	size_t before;
	int rc;

	if (error) {
		if (c && !c->sc.closing && c->s)
			c->s->ctr.errors++;
		m->total->errors++;
	}
	admin_note_latency(m, r);
	if (!c || sw_sconn_gone(&c->sc))
		return;
	b = r->version > (m->cl ? changelog_durable(m->cl) :
				  m->closed_durable) ||
			    inval_waits(m, r->inval0, inval) ?
		    &c->held :
		    &c->wq.out;
	/* Counted in bytes used, not by the end: making room may slide
	 * what is left of a buffer partly sent down to its start. */
	before = sw_buf_used(b);
	rc = sw_buf_add_frame(b, r->hdr.type, SW_FRAME_REPLY, r->hdr.id, reply);
	if (rc == 0 && b == &c->held)
		rc = held_push(c, r->version, r->inval0, inval,
			       sw_buf_used(b) - before);
	if (rc < 0) {
		conn_out_of_memory(c, "queueing a reply");
		return;
	}
	/* The connection's session, not r->s: a deferred request may
	 * outlive the session it started in. */
	if (c->s)
		c->s->ctr.bytes_out += sw_buf_used(b) - before;
	r->m->total->bytes_out += sw_buf_used(b) - before;
	if (b == &c->wq.out)
		sw_sconn_flush_add(&c->sc);
	conn_note_out(c);
}

struct session *server_req_session(const struct conn *c)
{
	return c->s;
}

struct req_link *server_req_link(struct conn *c)
{
	return &c->link;
}

void server_req_resume(struct req_link *l)
{
	server_resume((struct conn *)((char *)l - offsetof(struct conn, link)));
}

void server_req_hold(struct conn *c, bool hold)
{
	if (hold)
		sw_sconn_get(&c->sc);
	else
		sw_sconn_put(&c->sc);
}

void conn_notify(struct conn *c, uint16_t type, const ProtobufCMessage *msg)
{
	size_t before;

	if (sw_sconn_gone(&c->sc))
		return;
	before = sw_buf_used(&c->wq.out);
	if (sw_buf_add_frame(&c->wq.out, type, SW_FRAME_NOTIFY, 0, msg) < 0) {
		conn_out_of_memory(c, "queueing a notification");
		return;
	}
	/* What the bound is about (a client's invalidations and recalls);
	 * a chunkserver's commands wait on their own timeout. */
	if (type == SW_MSG_INVAL || type == SW_MSG_DELEG_RECALL)
		c->notices += sw_buf_used(&c->wq.out) - before;
	sw_sconn_flush_add(&c->sc);
	conn_note_out(c);
}

/* Move held replies with versions up to @version, whose invalidations
 * are acknowledged, to the output (in order). */
static void release_held(struct conn *c, uint64_t version)
{
	size_t n = 0;

	while (c->marks_head < c->nmarks &&
	       c->marks[c->marks_head].version <= version &&
	       !inval_waits(c->m, c->marks[c->marks_head].inval0,
			    c->marks[c->marks_head].inval))
		n += c->marks[c->marks_head++].size;
	if (n == 0)
		return;
	if (sw_buf_add(&c->wq.out, sw_buf_head(&c->held), n) < 0) {
		conn_out_of_memory(c, "releasing replies");
		return;
	}
	sw_buf_consume(&c->held, n);
	sw_sconn_flush_add(&c->sc);
}

static void owing_remove(struct master *m, struct session *s)
{
	if (!s->owing)
		return;
	s->owing = false;
	if (s->owe_prev)
		s->owe_prev->owe_next = s->owe_next;
	else
		m->owing = s->owe_next;
	if (s->owe_next)
		s->owe_next->owe_prev = s->owe_prev;
	s->owe_next = s->owe_prev = NULL;
	s->owed_head = s->owed_n = 0;
	/* Up to INVAL_OWED_MAX (96 KiB) it may have grown: not kept for a
	 * session that owes nothing. */
	if (s->owed_cap > 64) {
		free(s->owed);
		s->owed = NULL;
		s->owed_cap = 0;
	}
}

int64_t server_silent_since(struct conn *c, int64_t now)
{
	if (c->sc.stops || sw_buf_used(&c->sc.in) || c->sc.big)
		return now;
	return c->sc.heard_at;
}

void server_inval_give_up(struct master *m, struct session *s)
{
	s->inval_lax = true;
	owing_remove(m, s);
	if (m->cl)
		server_durable(m, changelog_durable(m->cl));
}

/* Number an invalidation sent to @s at @at, and owe it unless @s is
 * lax. */
static uint64_t inval_number(struct master *m, struct session *s, int64_t at)
{
	uint64_t seq = ++m->inval_seq;

	s->inval_sent = seq;
	/* Lax, or its connection marked to close (sw_sconn_shed()): that
	 * close acknowledges everything; nobody waits till then. */
	if (s->inval_lax || (s->conn && sw_sconn_gone(&s->conn->sc)))
		return seq;
	if (s->owed_n - s->owed_head >= INVAL_OWED_MAX) {
		sw_notice(TAG,
			  "%s: owes %u invalidations; not waited for again",
			  s->peer, INVAL_OWED_MAX);
		m->inval_timeouts++;
		server_inval_give_up(m, s);
		return seq;
	}
	if (s->owed_head == s->owed_n)
		s->owed_head = s->owed_n = 0;
	if (s->owed_n == s->owed_cap && s->owed_head) {
		memmove(s->owed, s->owed + s->owed_head,
			(s->owed_n - s->owed_head) * sizeof(*s->owed));
		s->owed_n -= s->owed_head;
		s->owed_head = 0;
	}
	if (sw_grow(&s->owed, &s->owed_cap, s->owed_n + 1, sizeof(*s->owed),
		    16) < 0) {
		/* Not waited for rather than waited for forever. */
		server_inval_give_up(m, s);
		return seq;
	}
	s->owed[s->owed_n++] =
		(struct inval_owed){ .first = seq - 1, .seq = seq, .at = at };
	if (!s->owing) {
		s->owing = true;
		s->owe_prev = NULL;
		s->owe_next = m->owing;
		if (m->owing)
			m->owing->owe_prev = s;
		m->owing = s;
		master_wait_arm(m);
	}
	return seq;
}

uint64_t server_inval_sent(struct master *m, struct session *s)
{
	uint64_t seq;

	if (!s->inval_all)
		return inval_number(m, s, sw_mono_ns());
	/* Not sent (the one of everything covers it) but numbered, and
	 * owed within the ack reserved at the overflow: a reply that made
	 * it waits for that ack, as for any (inval_timeout from then). */
	seq = ++m->inval_seq;
	s->inval_sent = seq;
	if (s->owing && s->owed_n > s->owed_head)
		s->owed[s->owed_n - 1].seq = seq;
	return seq;
}

/* @c's notices still unsent after a write passed SERVER_NOTICES_MAX. */
static void inval_behind(struct conn *c)
{
	struct session *s = c->s;
	struct master *m = c->m;
	int64_t now = sw_mono_ns();

	/* Once a second at most, for all sessions: a hostile one may go
	 * behind again at each read. */
	if (now - m->behind_logged >= 1000000000) {
		m->behind_logged = now;
		sw_notice(TAG, "%s: has not read %zu bytes of notices; %s",
			  s->peer, c->notices,
			  s->inval_all_ok ?
				  "one invalidation of everything will "
				  "replace the next ones" :
				  "closed if it stays behind");
	}
	m->inval_overflows++;
	s->behind_at = now;
	if (!s->inval_all_ok)
		return;
	s->inval_all = true;
	/* The ack the one of everything will bring: replies that send
	 * invalidations to @s meanwhile wait for it (server_inval_sent()). */
	(void)inval_number(m, s, now);
}

/*
 * @c was written to: what is left of its notices is at most what is
 * left. Past SERVER_NOTICES_MAX still unsent, @c is behind
 * (inval_behind()). If its session is behind and it has read most of
 * what it was sent, the one of everything goes now (true when queued);
 * a session whose mount does not take it is closed if it stays behind
 * SERVER_BEHIND_MS (at @now), or at once past SERVER_NOTICES_HARD.
 */
static bool inval_catch_up(struct conn *c, int64_t now)
{
	Sweepfs__InvalNotify note = SWEEPFS__INVAL_NOTIFY__INIT;
	struct session *s = c->s;
	size_t backlog = sw_wq_backlog(&c->wq);

	c->notices = SW_MIN(c->notices, backlog);
	if (!s || sw_sconn_gone(&c->sc))
		return false;
	if (!s->behind_at) {
		if (c->notices > SERVER_NOTICES_MAX)
			inval_behind(c);
		return false;
	}
	if (c->notices > SERVER_NOTICES_MAX / 4) {
		if (!s->inval_all_ok &&
		    (c->notices > SERVER_NOTICES_HARD ||
		     now - s->behind_at >
			     (int64_t)SERVER_BEHIND_MS * 1000000)) {
			sw_notice(TAG, "%s: behind on its notices; closing",
				  s->peer);
			conn_close(c);
		}
		return false;
	}
	s->behind_at = 0;
	if (!s->inval_all)
		return false;
	s->inval_all = false;
	note.has_all = note.all = 1;
	note.has_seq = 1;
	note.seq = inval_number(c->m, s, sw_mono_ns());
	conn_notify(c, SW_MSG_INVAL, &note.base);
	s->ctr.invalidations++;
	return !c->sc.closing;
}

void server_inval_written(struct conn *c)
{
	(void)inval_catch_up(c, sw_mono_ns()); /* queued with a flush */
}

void server_inval_acked(struct master *m, struct session *s, uint64_t seq)
{
	if (seq == UINT64_MAX) {
		/* It went, or forgot all it had: nothing to wait for. */
		s->inval_acked = s->inval_sent;
		s->inval_all = false; /* its mount drops all it had */
		s->behind_at = 0;
		owing_remove(m, s);
		free(s->owed);
		s->owed = NULL;
		s->owed_cap = 0;
		if (m->cl)
			server_durable(m, changelog_durable(m->cl));
		return;
	}
	s->inval_acked = SW_MAX(s->inval_acked, SW_MIN(seq, s->inval_sent));
	if (!s->owing)
		return;
	while (s->owed_head < s->owed_n &&
	       s->owed[s->owed_head].seq <= s->inval_acked)
		s->owed_head++;
	if (s->owed_head < s->owed_n)
		return; /* the replies it held still wait for the rest */
	owing_remove(m, s);
	if (m->cl)
		server_durable(m, changelog_durable(m->cl));
}

void server_inval_tick(struct master *m, int64_t seen)
{
	int64_t limit = (int64_t)m->cfg.inval_timeout_ms * 1000000;
	struct session *s, *next;

	for (s = m->owing; s; s = next) {
		next = s->owe_next;
		if (seen - s->owed[s->owed_head].at <= limit)
			continue;
		/* Slow, stopped or hostile: no change waits for it longer. */
		sw_info(TAG,
			"%s: did not acknowledge an invalidation in %" PRIu64
			" ms; not waited for again",
			s->peer, m->cfg.inval_timeout_ms);
		m->inval_timeouts++;
		server_inval_give_up(m, s);
	}
}

void server_durable(struct master *m, uint64_t version)
{
	for (struct conn *c = conn_first(m); c; c = conn_next(c))
		if (c->marks_head < c->nmarks && !c->sc.closing)
			release_held(c, version);
}

/* ---- writing -------------------------------------------------------- */

static void on_written(struct sw_wq *q, int status)
{
	struct conn *c = q->data;

	if (status < 0) {
		if (!c->sc.closing)
			sw_info(TAG, "%s: write failed: %s", c->sc.peer,
				uv_strerror(status));
		conn_close(c);
		return;
	}
	if (c->sc.closing)
		return;
	conn_write(c);
}

/* Bytes of replies @c has not taken yet. */
static size_t conn_backlog(const struct conn *c)
{
	return sw_wq_backlog(&c->wq) + sw_buf_used(&c->held);
}

static void conn_write(struct conn *c)
{
	int rc = c->sc.closing ? 0 : sw_wq_flush(&c->wq);

	/* As of the last poll: the backlog is as the last write left it,
	 * and what the peer read while the loop was held up is not known
	 * before the next (in on_written(), a turn older: it errs towards
	 * waiting). */
	if (rc == 0 && inval_catch_up(c, server_answers_seen(c->m)))
		rc = sw_wq_flush(&c->wq);
	if (rc < 0) {
		sw_info(TAG, "%s: write failed: %s", c->sc.peer,
			uv_strerror(rc));
		conn_close(c);
		return;
	}
	sw_wq_shrink(&c->wq, BUF_KEEP);
	if (!sw_buf_used(&c->held) && c->held.cap > BUF_KEEP)
		sw_buf_release(&c->held);
	conn_note_out(c);
	/* Reading stopped for too much output: go on once most is gone. */
	if (c->sc.closing || !(c->sc.stops & SW_READ_OUTPUT) ||
	    conn_backlog(c) >= c->m->cfg.output_max / 4)
		return;
	/* Requests read before the pause are still waiting: handled in the
	 * next loop turn, whose check phase flushes what they journal and
	 * reply (not now: this may be that flush). */
	sw_sconn_go(&c->sc, SW_READ_OUTPUT, false);
}

void server_flush(struct master *m)
{
	sw_server_flush(&m->server);
}

/* ---- connections ---------------------------------------------------- */

/* ---- uvserver.h's ops ------------------------------------------------ */

static int conn_accepted(struct sw_sconn *sc)
{
	struct conn *c = (struct conn *)sc;
	struct master *m = sc->srv->data;

	c->m = m;
	sw_wq_init(&c->wq, (uv_stream_t *)&sc->tcp, on_written, c);
	return 0; /* uvserver.c reads it */
}

static void conn_flush(struct sw_sconn *sc)
{
	conn_write((struct conn *)sc);
}

static void conn_closing(struct sw_sconn *sc)
{
	struct conn *c = (struct conn *)sc;

	deleg_unpark(&c->link);
	session_detach(c->m, c);
	/* Its replies go now, not when the last reference does: a loop
	 * turn that closes many heavy connections for output_total_max
	 * would hold all their memory till its end. (The buffer of a write
	 * in flight stays until libuv is done with it.) */
	sw_buf_release(&c->wq.out);
	sw_buf_release(&c->held);
	c->nmarks = c->marks_head = 0;
	c->notices = 0;
}

/* Marked to be closed, for output_total_max (sw_sconn_output()) or out
 * of memory for it (conn_out_of_memory()): its replies go now, as
 * conn_closing() lets them go, but it stays open, with its session, until
 * the check phase closes it. */
static void conn_shed(struct sw_sconn *sc)
{
	struct conn *c = (struct conn *)sc;

	/* A chunkserver's: chosen for no new command meanwhile. */
	csrv_going(c->m, c);
	sw_buf_release(&c->wq.out);
	sw_buf_release(&c->held);
	c->nmarks = c->marks_head = 0;
	c->notices = 0;
}

static void conn_release(struct sw_sconn *sc)
{
	struct conn *c = (struct conn *)sc;

	sw_wq_release(&c->wq);
	sw_buf_release(&c->held);
	free(c->marks);
	free(c->park_nodes);
}

void conn_close(struct conn *c)
{
	sw_sconn_close(&c->sc);
}

/* A request's message is done with: the arena empties once none is. */
static void arena_done(struct master *m)
{
	if (--m->arena_depth == 0)
		sw_arena_reset(&m->arena);
}

/*
 * Handle one request. Returns false when it must wait for a delegation
 * to come back (deleg.h): it stays in @c's buffer, to be handled again
 * when @c is resumed.
 */
static bool handle_frame(struct conn *c, const struct sw_frame_hdr *hdr,
			 const uint8_t *payload)
{
	struct master *m = c->m;
	const struct sw_msg_info *info = sw_msg_info(hdr->type);
	struct req r = { .m = m,
			 .conn = c,
			 .s = c->s,
			 .hdr = *hdr,
			 .inval0 = m->inval_seq,
			 .t0 = sw_mono_ns() };
	ProtobufCMessage *msg;
	const struct route *rt;
	int rc;

	/* Left in the buffer: handled once the lease is renewed. */
	if (!group_may_answer(m, r.t0))
		return false;
	if (hdr->flags & ~SW_FRAME_AGAIN ||
	    (hdr->flags && !(info && info->once))) {
		sw_notice(TAG,
			  "%s: sent a frame flagged as reply or "
			  "notification, or a %s flagged again; closing",
			  c->sc.peer, info ? info->name : "request");
		conn_close(c);
		return true;
	}
	if (!c->s && hdr->type != SW_MSG_HELLO) {
		sw_notice(TAG, "%s: request before hello; closing", c->sc.peer);
		conn_close(c);
		return true;
	}
	if (!info) {
		sw_info(TAG, "%s: unknown request type %u", c->sc.peer,
			hdr->type);
		req_error(&r, -ENOSYS);
		return true;
	}
	/* Into the arena: freed at once when the outermost request is
	 * done (a handler never keeps the message). */
	m->arena_depth++;
	msg = protobuf_c_message_unpack(info->req, sw_arena_pb(&m->arena),
					hdr->len, payload);
	if (!msg) {
		arena_done(m);
		sw_notice(TAG, "%s: unparsable %s request (%u bytes); closing",
			  c->sc.peer, info->name, hdr->len);
		conn_close(c);
		return true;
	}
	if (info->once)
		req_digest(&r, m->once_key, hdr->type, payload, hdr->len);
	rt = dispatch_route(hdr->type);
	rc = 0;
	if (hdr->type != SW_MSG_HELLO && c->s &&
	    (rc = rt ? dispatch_admit(rt, c->s, msg) : -ENOSYS) == 0 &&
	    (rc = session_vouched_msg(m, c->s, hdr->type, msg)) == 0 &&
	    deleg_wait(c->m, c->s, &c->link, hdr->type, msg)) {
		arena_done(m);
		return false;
	}
	if (c->s) {
		c->s->ctr.requests[hdr->type]++;
		c->s->ctr.bytes_in += SW_FRAME_HDR + hdr->len;
	}
	m->total->requests[hdr->type]++;
	m->total->bytes_in += SW_FRAME_HDR + hdr->len;

	if (hdr->type == SW_MSG_HELLO) {
		if (c->s) {
			req_error(&r, -EISCONN);
		} else if (session_hello(&r, (Sweepfs__Hello *)msg) < 0) {
			server_flush(m);
			conn_close(c);
		} else if (c->s) {
			sw_sconn_known(&c->sc); /* out of the pre-hello caps */
		}
	} else if (rc < 0) {
		req_error(&r, rc);
	} else {
		/* Mounts at work: background work steps back (purge.c).
		 * (Not for tools: a status poll is no load.) */
		if (c->s->role == SWEEPFS__ROLE__ROLE_MOUNT)
			m->bg->last_client_request = r.t0;
		/* Sent again, and done the first time: answered as then. */
		if (!dispatch_done_before(&r, msg))
			rt->fn(&r, msg);
	}
	arena_done(m);
	return true;
}

/*
 * The nodes the frame @hdr, @payload names, added to @nodes (*@nn of
 * them so far, at most PARKED_NODES_MAX): false if it cannot tell
 * (unparsable, or too many), and then nothing past it may go on.
 */
static bool frame_nodes(struct conn *c, const struct sw_frame_hdr *hdr,
			const uint8_t *payload, uint64_t *nodes, size_t *nn)
{
	const struct sw_msg_info *info = sw_msg_info(hdr->type);
	struct master *m = c->m;
	ProtobufCMessage *msg;
	size_t n;

	if (!info)
		return true; /* answered ENOSYS in its turn */
	m->arena_depth++;
	msg = protobuf_c_message_unpack(info->req, sw_arena_pb(&m->arena),
					hdr->len, payload);
	n = msg ? sw_msg_nodes(hdr->type, msg, nodes + *nn,
			       PARKED_NODES_MAX - *nn) :
		  SIZE_MAX;
	arena_done(m);
	if (n > PARKED_NODES_MAX - *nn)
		return false;
	*nn += n;
	return true;
}

/*
 * Whether the frame @hdr, @payload, after a request that waits, may be
 * handled before it: it changes nothing and names none of @nodes (those
 * of the frames it would pass); or its type overtakes (messages.def: a
 * batch, a delegation's return, a ping, an invalidation's ack), which
 * always go on (below), but for batches and returns behind a batch that
 * waits or stays behind (@behind_batch).
 */
static bool may_pass(struct conn *c, const struct sw_frame_hdr *hdr,
		     const uint8_t *payload, const uint64_t *nodes, size_t nn,
		     bool behind_batch)
{
	const struct sw_msg_info *info = sw_msg_info(hdr->type);
	const struct route *rt = dispatch_route(hdr->type);
	struct master *m = c->m;
	uint64_t mine[8];
	ProtobufCMessage *msg;
	bool pass;
	size_t n;

	if (info && info->overtakes)
		return !behind_batch || (hdr->type != SW_MSG_BATCH &&
					 hdr->type != SW_MSG_DELEG_RETURN);
	if (!info || !rt || hdr->flags)
		return false;
	m->arena_depth++;
	msg = protobuf_c_message_unpack(info->req, sw_arena_pb(&m->arena),
					hdr->len, payload);
	pass = msg && !dispatch_writes(rt, msg);
	if (pass) {
		n = sw_msg_nodes(hdr->type, msg, mine, SW_ARRAY_SIZE(mine));
		pass = n <= SW_ARRAY_SIZE(mine);
		for (size_t i = 0; pass && i < n; i++)
			for (size_t j = 0; pass && j < nn; j++)
				pass = mine[i] != nodes[j];
	}
	arena_done(m);
	return pass;
}

/*
 * Too many of @c's chunk requests wait (threat model, finding 23): a
 * request of @type waits, and what follows it, until half are answered
 * (dataops.c resumes @c); they wait on chunkservers, never on @c.
 */
static bool chunk_capped(const struct conn *c, uint16_t type)
{
	return type == SW_MSG_CHUNK && c->link.chunk_jobs >= REQ_CHUNK_JOBS_MAX;
}

/*
 * @c's oldest request waits for a delegation (deleg.h): the requests
 * after it are handled, in their order, when they change nothing and
 * name no node any request they pass names, and need not wait
 * themselves. So a GETATTR of another file, a listing elsewhere, are
 * answered while a request in a recalled directory waits: waiting for
 * one client holds up the request that needs it, not the connection.
 *
 * Order: the mount relies on requests on the same node being handled in
 * the order it sent them (a CREATE then a LOOKUP of the same parent; a
 * WRITE_END then a GETATTR); those stay behind. Changes stay behind
 * every earlier request: the journal keeps a connection's changes in
 * the order they were sent.
 *
 * Batches, delegation returns and pings go on regardless, as they
 * always did: two mounts that each wait for a directory the other
 * holds would otherwise wait for deleg_timeout, each return behind the
 * request that waits for the other's; a mount of a group tells a live
 * master from a frozen one by pings (mount/master_conn.c). (Handled
 * early, what a mount acknowledged reaches the master sooner than a
 * request it sent before: no one can have seen the difference.)
 * Invalidation acks too: they only end waits.
 *
 * But not past a batch that waits, or stays behind what waits: the
 * mount acknowledged its operations before those of its later batches
 * (a file made in a directory the waiting batch makes), and sends a
 * return after what it queued under that delegation. A mount's batch
 * waits only for a directory it does not hold (deleg.c): sent again
 * after a reconnect, when it holds nothing (session.c drops what a
 * session held with its connection, or when it resumes on another) and
 * is granted nothing while the batch waits (its recall refuses every
 * grant, deleg.c's refusal()), so its returns held back keep nobody
 * waiting; or, rarely, for a directory it made past twice deleg_max.
 */
static void consume_parked(struct conn *c)
{
	uint64_t *nodes = c->park_nodes;
	size_t off = 0, nn = 0;
	unsigned skipped = 0;
	bool batch = false; /* a batch waits, or stays behind */

	if (!nodes) {
		nodes = malloc(PARKED_NODES_MAX * sizeof(*nodes));
		if (!nodes)
			return; /* looks past nothing: it only waits */
		c->park_nodes = nodes;
	}
	/* Go on from where the last look stopped: what it passed over
	 * stays behind still (a resume forgets it, server_resume()). */
	if (c->park_judged) {
		if (c->park_full)
			return;
		off = c->park_off;
		nn = c->park_nn;
		skipped = c->park_skipped;
		batch = c->park_batch;
	}
	c->park_judged = false;
	while (!sw_sconn_gone(&c->sc) && c->link.parked) {
		uint8_t *p = sw_buf_head(&c->sc.in) + off;
		size_t avail = sw_buf_used(&c->sc.in) - off, flen;
		struct sw_frame_hdr hdr;

		if (sw_frame_whole(p, avail, SW_FRAME_MAX_META, &hdr) <= 0) {
			/* The usual path judges it, in its turn; till it
			 * is whole, nothing before it changes. */
			c->park_judged = true;
			c->park_full = false;
			break;
		}
		flen = SW_FRAME_HDR + hdr.len;
		if (conn_backlog(c) > c->m->cfg.output_max)
			break; /* its replies first (conn_write() resumes) */
		if (off == 0 || chunk_capped(c, hdr.type) ||
		    !may_pass(c, &hdr, p + SW_FRAME_HDR, nodes, nn, batch)) {
stays:
			/* It stays behind: so does what names its nodes,
			 * and past a batch, the later batches and returns. */
			batch |= hdr.type == SW_MSG_BATCH;
			if (++skipped > PARKED_SKIP_MAX ||
			    !frame_nodes(c, &hdr, p + SW_FRAME_HDR, nodes,
					 &nn)) {
				/* Nothing past it may go on till the wait
				 * ends. */
				c->park_judged = true;
				c->park_full = true;
				break;
			}
			off += flen;
			continue;
		}
		if (!handle_frame(c, &hdr, p + SW_FRAME_HDR)) {
			if (!group_may_answer(c->m, sw_mono_ns()))
				break;
			goto stays; /* it waits too */
		}
		if (c->sc.closing)
			break;
		/* Out of the buffer: what follows moves up. */
		memmove(p, p + flen, avail - flen);
		c->sc.in.len -= flen;
	}
	c->park_off = off;
	c->park_nn = nn;
	c->park_skipped = skipped;
	c->park_batch = batch;
}

/*
 * uvserver.h's frame callback: handle @c's oldest request, unless its
 * replies are over output_max (reading stops till conn_write() sees
 * most of them gone), or the lease is in doubt (reading stops till it
 * is renewed), or it waits for a delegation: then the requests behind
 * it that need not wait are handled (consume_parked()), and reading
 * goes on until PARKED_IN_MAX is read behind it (uvserver.h's kept_max
 * says the same, should a path here forget to stop).
 */
static enum sw_frame_verdict conn_frame(struct sw_sconn *sc,
					const struct sw_frame_hdr *hdr,
					uint8_t *payload, bool own)
{
	struct conn *c = (struct conn *)sc;

	(void)own; /* never: no own_above */
	/* Its other requests at the head go on (pings, acks). */
	if (chunk_capped(c, hdr->type)) {
		sc->waits = true;
		sw_sconn_stop(sc, SW_READ_WAIT);
		return SW_FRAME_KEEP;
	}
	if (!c->link.parked) {
		if (conn_backlog(c) > c->m->cfg.output_max) {
			sw_sconn_stop(sc, SW_READ_OUTPUT);
			return SW_FRAME_KEEP;
		}
		if (handle_frame(c, hdr, payload)) {
			/* Its oldest request is done waiting. */
			c->link.park_t0 = 0;
			c->park_judged = false;
			return SW_FRAME_DONE;
		}
		if (!c->link.parked) {
			/* Declined while the lease is in doubt: nothing more
			 * is read till it is renewed (gloop_lease_resume() resumes
			 * every connection) or this master exits, and the
			 * wait is ours, not the peer's. */
			sc->waits = true;
			sw_sconn_stop(sc, SW_READ_WAIT);
			return SW_FRAME_KEEP;
		}
	}
	consume_parked(c);
	/* Waiting, whole: not a peer stalled mid-frame. */
	sc->waits = c->link.parked != NULL;
	if (c->link.parked && sw_buf_used(&sc->in) >= PARKED_IN_MAX)
		sw_sconn_stop(sc, SW_READ_WAIT); /* server_resume() */
	return SW_FRAME_KEEP;
}

static const struct sw_server_ops conn_ops = {
	.conn_size = sizeof(struct conn),
	.accepted = conn_accepted,
	.flush = conn_flush,
	.closing = conn_closing,
	.shed = conn_shed,
	.release = conn_release,
	.frame = conn_frame,
	.frame_max = SW_FRAME_MAX_META,
	.kept_max = PARKED_IN_MAX,
	.count_input = true,
	.pre_hello_frame = PRE_HELLO_FRAME,
	.pre_hello_total = PRE_HELLO_TOTAL,
	.slice_ns = CONSUME_SLICE_NS,
};

void server_reap_stalled(struct master *m)
{
	/* As of the last poll (server_answers_seen()): after the loop was
	 * held up, what a peer sent, or read of what it was sent,
	 * meanwhile is not taken for nothing. */
	int64_t seen = server_answers_seen(m);

	/* Behind and no longer written to: closed on time all the same. */
	for (struct conn *c = conn_first(m); c; c = conn_next(c))
		if (c->s && c->s->behind_at && !sw_sconn_gone(&c->sc))
			(void)inval_catch_up(c, seen); /* queued with a flush */
	sw_server_reap_stalled(&m->server, seen,
			       (int64_t)m->cfg.frame_timeout_ms * 1000000);
	sw_server_reap_silent(&m->server, seen,
			      (int64_t)m->cfg.hello_timeout_ms * 1000000);
}

int64_t server_answers_seen(const struct master *m)
{
	return m->polled_at;
}

void server_note_poll(struct master *m)
{
	/* libuv takes the loop's time as its poll returns, and nothing in
	 * the master updates it (uv_update_time()) before this runs; its
	 * clock is CLOCK_MONOTONIC or the coarse one, in whole ms: never
	 * ahead of sw_mono_ns(). Frames held back for a lease in doubt are
	 * parsed again in an idle callback, before the next turn's poll:
	 * the time moves on at the end of that turn. */
	if (!m->group ||
	    (group_may_answer(m, sw_mono_ns()) && !group_held_back(m)))
		m->polled_at = (int64_t)uv_now(m->loop) * 1000000;
}

static void on_check(uv_check_t *h)
{
	struct master *m = h->data;

	server_note_poll(m);
	changelog_flush(m->cl);
	/* The flush may mark more (out of memory, out_max): closed now,
	 * not a loop turn later with what waits on them. Each pass closes
	 * what it marks, so this ends. */
	do {
		sw_server_shed(&m->server);
		server_flush(m);
	} while (m->server.shed);
}

int server_start(struct master *m)
{
	int rc;

	m->server.data = m;
	sw_arena_init(&m->arena);
	/* A mount whose network vanished sends no FIN or RST: without
	 * keepalives its connection, and so its session with its open
	 * files, would never end (session_timeout counts from the
	 * disconnection). */
	m->server.peer_timeout_ms = (unsigned)m->cfg.peer_timeout_ms;
	m->server.anon_max = m->cfg.pre_hello_max;
	m->server.anon_per_addr = m->cfg.pre_hello_per_address;
	m->server.out_max = (size_t)m->cfg.output_total_max;
	rc = sw_server_listen(&m->server, m->loop, &conn_ops, TAG,
			      m->cfg.listen_host, (uint16_t)m->cfg.listen_port,
			      m->cfg.max_connections, NULL);
	if (rc < 0)
		return rc;
	uv_check_init(m->loop, &m->check);
	m->check.data = m;
	uv_check_start(&m->check, on_check);
	return 0;
}

void server_stop(struct master *m)
{
	sw_server_unlisten(&m->server, NULL);
	uv_check_stop(&m->check);
	uv_close((uv_handle_t *)&m->check, NULL);
	for (struct conn *c = conn_first(m); c; c = conn_next(c)) {
		conn_write(c);
		conn_close(c);
	}
}
