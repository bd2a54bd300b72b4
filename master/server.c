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
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "server.h"
#include "admin.h"
#include "dispatch.h"
#include "log.h"
#include "deleg.h"
#include "group.h"
#include "master.h"
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
#define READ_CHUNK (64u << 10)
/*
 * The longest one connection's requests run in one go: a client that
 * pipelines costly requests (READDIRs of a big directory, never read)
 * then delays every other client by at most this per loop turn, and the
 * rest of its input waits, unread, for its next turn.
 */
#define CONSUME_SLICE_NS (250 * 1000)
/* An empty buffer bigger than this is freed (its burst is over). */
#define BUF_KEEP (256u << 10)

static void conn_write(struct conn *c);
static void conn_consume(struct conn *c);
static void conn_account(struct conn *c);
static void on_consume_idle(uv_idle_t *h);

/*
 * @c's buffers changed: count the memory they hold (not the bytes in
 * them: a buffer grown by doubling holds up to twice those, and a write
 * in flight has one of its own) against output_total_max, which may
 * close @c, or a heavier connection.
 */
static void conn_note_out(struct conn *c)
{
	sw_sconn_output(&c->sc, sw_wq_held(&c->wq) + c->held.cap + c->in.cap);
}

/* Handle @c's buffered requests in the next loop turn (it holds @c). */
static void consume_add(struct conn *c)
{
	if (c->in_consume_list)
		return;
	c->in_consume_list = true;
	sw_sconn_get(&c->sc);
	c->consume_next = c->m->consume_list;
	c->m->consume_list = c;
	uv_idle_start(&c->m->consume_idle, on_consume_idle);
}

void server_resume(struct conn *c)
{
	if (!c->sc.closing)
		consume_add(c);
}

/* ---- replies -------------------------------------------------------- */

/* The lowest invalidation some session still owes an ack for, or
 * UINT64_MAX. (Replies wait for all of them before it: a little longer,
 * at times, than for their own; no longer than inval_timeout.) */
static uint64_t inval_floor(const struct master *m)
{
	uint64_t floor = UINT64_MAX;

	for (const struct session *s = m->owing; s; s = s->owe_next)
		floor = SW_MIN(floor, s->inval_acked + 1);
	return floor;
}

static int held_push(struct conn *c, uint64_t version, uint64_t inval,
		     size_t size)
{
	if (c->marks_head == c->nmarks) {
		c->marks_head = c->nmarks = 0;
	}
	if (sw_grow(&c->marks, &c->marks_cap, c->nmarks + 1, sizeof(*c->marks),
		    16) < 0)
		return -ENOMEM;
	c->marks[c->nmarks++] = (struct held_mark){ .version = version,
						    .inval = inval,
						    .size = size };
	return 0;
}

void req_reply(struct req *r, const ProtobufCMessage *reply)
{
	struct conn *c = r->conn;
	struct master *m = r->m;
	/* It sent invalidations: answered once they are acknowledged. */
	uint64_t inval = m->inval_seq > r->inval0 ? m->inval_seq : 0;
	struct sw_buf *b;
	size_t before;
	int rc;

	admin_note_latency(m, r);
	if (!c || c->sc.closing)
		return;
	b = r->version > (m->cl ? changelog_durable(m->cl) :
				  m->closed_durable) ||
			    (inval && inval >= inval_floor(m)) ?
		    &c->held :
		    &c->wq.out;
	/* Counted in bytes used, not by the end: making room may slide
	 * what is left of a buffer partly sent down to its start. */
	before = sw_buf_used(b);
	rc = sw_buf_add_frame(b, r->hdr.type, SW_FRAME_REPLY, r->hdr.id, reply);
	if (rc == 0 && b == &c->held)
		rc = held_push(c, r->version, inval, sw_buf_used(b) - before);
	if (rc < 0) {
		sw_err(TAG, "%s: out of memory queueing a reply; closing",
		       c->sc.peer);
		conn_close(c);
		return;
	}
	/* The connection's session, not r->s: a deferred request may
	 * outlive the session it started in. */
	if (c->s)
		c->s->ctr.bytes_out += sw_buf_used(b) - before;
	r->m->total.bytes_out += sw_buf_used(b) - before;
	if (b == &c->wq.out)
		sw_sconn_flush_add(&c->sc);
	conn_note_out(c);
}

struct session *req_session(const struct req *r)
{
	return r->conn ? r->conn->s : NULL;
}

struct req *req_defer(const struct req *r)
{
	struct req *d = malloc(sizeof(*d));

	if (!d)
		return NULL;
	*d = *r;
	sw_sconn_get(&d->conn->sc);
	return d;
}

void req_done(struct req *d)
{
	sw_sconn_put(&d->conn->sc);
	free(d);
}

void conn_notify(struct conn *c, uint16_t type, const ProtobufCMessage *msg)
{
	if (c->sc.closing)
		return;
	if (sw_buf_add_frame(&c->wq.out, type, SW_FRAME_NOTIFY, 0, msg) < 0) {
		sw_err(TAG,
		       "%s: out of memory queueing a notification; "
		       "closing",
		       c->sc.peer);
		conn_close(c);
		return;
	}
	sw_sconn_flush_add(&c->sc);
	conn_note_out(c);
}

void req_error(struct req *r, int rc)
{
	Sweepfs__StatusReply reply = SWEEPFS__STATUS_REPLY__INIT;

	reply.has_err = 1;
	reply.err = -rc;
	if (r->conn && !r->conn->sc.closing && r->conn->s)
		r->conn->s->ctr.errors++;
	r->m->total.errors++;
	req_reply(r, &reply.base);
}

/* Move held replies with versions up to @version, whose invalidations
 * are acknowledged, to the output (in order). */
static void release_held(struct conn *c, uint64_t version)
{
	uint64_t floor = inval_floor(c->m);
	size_t n = 0;

	while (c->marks_head < c->nmarks &&
	       c->marks[c->marks_head].version <= version &&
	       (!c->marks[c->marks_head].inval ||
		c->marks[c->marks_head].inval < floor))
		n += c->marks[c->marks_head++].size;
	if (n == 0)
		return;
	if (sw_buf_add(&c->wq.out, sw_buf_head(&c->held), n) < 0) {
		sw_err(TAG, "%s: out of memory releasing replies; closing",
		       c->sc.peer);
		conn_close(c);
		return;
	}
	sw_buf_consume(&c->held, n);
	sw_sconn_flush_add(&c->sc);
}

uint64_t server_inval_sent(struct master *m, struct session *s)
{
	s->inval_sent = ++m->inval_seq;
	if (!s->owing && !s->inval_lax) {
		s->owing = true;
		s->owing_since = sw_mono_ns();
		s->owe_prev = NULL;
		s->owe_next = m->owing;
		if (m->owing)
			m->owing->owe_prev = s;
		m->owing = s;
	}
	return s->inval_sent;
}

void server_inval_acked(struct master *m, struct session *s, uint64_t seq)
{
	if (!s->owing)
		return;
	s->inval_acked = SW_MAX(s->inval_acked, SW_MIN(seq, s->inval_sent));
	if (s->inval_acked < s->inval_sent) {
		s->owing_since = sw_mono_ns();
		return;
	}
	s->owing = false;
	if (s->owe_prev)
		s->owe_prev->owe_next = s->owe_next;
	else
		m->owing = s->owe_next;
	if (s->owe_next)
		s->owe_next->owe_prev = s->owe_prev;
	s->owe_next = s->owe_prev = NULL;
	if (m->cl)
		server_durable(m, changelog_durable(m->cl));
}

void server_inval_tick(struct master *m)
{
	int64_t limit = (int64_t)m->cfg.inval_timeout_ms * 1000000;
	int64_t now = sw_mono_ns();
	struct session *s, *next;

	for (s = m->owing; s; s = next) {
		next = s->owe_next;
		if (now - s->owing_since <= limit)
			continue;
		/* Slow, stopped or hostile: others' changes are not to wait
		 * for it again while this session lasts. */
		sw_notice(TAG,
			  "%s: did not acknowledge an invalidation in %" PRIu64
			  " ms; not waited for again",
			  s->peer, m->cfg.inval_timeout_ms);
		m->inval_timeouts++;
		s->inval_lax = true;
		server_inval_acked(m, s, UINT64_MAX);
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

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);

/* Bytes of replies @c has not taken yet. */
static size_t conn_backlog(const struct conn *c)
{
	return sw_wq_backlog(&c->wq) + sw_buf_used(&c->held);
}

static void conn_write(struct conn *c)
{
	int rc = c->sc.closing ? 0 : sw_wq_flush(&c->wq);

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
	if (c->sc.closing || !c->paused ||
	    conn_backlog(c) >= c->m->cfg.output_max / 4)
		return;
	c->paused = false;
	c->yielded = false;
	uv_read_start((uv_stream_t *)&c->sc.tcp, on_alloc, on_read);
	/* Requests read before the pause are still waiting: handle them
	 * in the next loop turn, whose check phase flushes what they
	 * journal and reply (not now: this may be that flush). */
	if (sw_buf_used(&c->in))
		consume_add(c);
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
	return uv_read_start((uv_stream_t *)&sc->tcp, on_alloc, on_read);
}

static void conn_flush(struct sw_sconn *sc)
{
	conn_write((struct conn *)sc);
}

static void conn_closing(struct sw_sconn *sc)
{
	struct conn *c = (struct conn *)sc;

	deleg_unpark(c);
	session_detach(c->m, c);
	/* Its replies go now, not when the last reference does: a loop
	 * turn that closes many heavy connections for output_total_max
	 * would hold all their memory till its end. (The buffer of a write
	 * in flight stays until libuv is done with it.) */
	sw_buf_release(&c->wq.out);
	sw_buf_release(&c->held);
	c->nmarks = c->marks_head = 0;
}

static void conn_release(struct sw_sconn *sc)
{
	struct conn *c = (struct conn *)sc;

	sw_buf_release(&c->in);
	sw_wq_release(&c->wq);
	sw_buf_release(&c->held);
	free(c->marks);
}

static const struct sw_server_ops conn_ops = {
	.conn_size = sizeof(struct conn),
	.accepted = conn_accepted,
	.flush = conn_flush,
	.closing = conn_closing,
	.release = conn_release,
};

void conn_close(struct conn *c)
{
	sw_sconn_close(&c->sc);
}

/*
 * Reads land in one buffer of the loop's and are copied into the
 * connection's own only as far as they go: a thousand idle peers then
 * hold no 64 KiB buffer each. (The loop has one thread, and on_read
 * takes the bytes before the next read is allocated.)
 */
static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	static char chunk[READ_CHUNK];

	(void)h;
	(void)hint;
	buf->base = chunk;
	buf->len = sizeof(chunk);
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
	rt = dispatch_route(hdr->type);
	rc = 0;
	if (hdr->type != SW_MSG_HELLO && c->s &&
	    (rc = rt ? dispatch_admit(rt, c->s, msg) : -ENOSYS) == 0 &&
	    deleg_wait(c, hdr->type, msg)) {
		arena_done(m);
		return false;
	}
	if (c->s) {
		c->s->ctr.requests[hdr->type]++;
		c->s->ctr.bytes_in += SW_FRAME_HDR + hdr->len;
	}
	m->total.requests[hdr->type]++;
	m->total.bytes_in += SW_FRAME_HDR + hdr->len;

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
			m->bg.last_client_request = r.t0;
		/* Sent again, and done the first time: answered as then. */
		if (!dispatch_done_before(&r, msg))
			rt->fn(&r, msg);
	}
	arena_done(m);
	return true;
}

/*
 * Count what @c has sent us unfinished while it has no session, against
 * PRE_HELLO_TOTAL over all such peers (m->unauth_bytes).
 */
static void conn_account(struct conn *c)
{
	sw_sconn_account(&c->sc, c->s ? 0 : sw_buf_used(&c->in));
}

/*
 * @c waits for a delegation (deleg.h): its batches and delegation returns
 * go on past the waiting request, in their order, as long as they need
 * not wait themselves; so do pings, by which a mount of a group tells a
 * live master from a frozen one (mount/master_conn.c). Two mounts that each wait for a directory the
 * other holds would otherwise wait for deleg_timeout: each return sits
 * behind the request that waits for the other's. (Handled early, what a
 * mount acknowledged reaches the master sooner than a request it sent
 * before: no one can have seen the difference.)
 */
static void consume_parked(struct conn *c)
{
	size_t off = 0;

	while (!c->sc.closing && c->parked) {
		uint8_t *p = sw_buf_head(&c->in) + off;
		size_t avail = sw_buf_used(&c->in) - off, flen;
		struct sw_frame_hdr hdr;

		if (sw_frame_whole(p, avail, SW_FRAME_MAX_META, &hdr) <= 0)
			break; /* the usual path judges it, in its turn */
		flen = SW_FRAME_HDR + hdr.len;
		if (conn_backlog(c) > c->m->cfg.output_max)
			break; /* its replies first (conn_write() resumes) */
		if (off == 0 || (hdr.type != SW_MSG_BATCH &&
				 hdr.type != SW_MSG_DELEG_RETURN &&
				 hdr.type != SW_MSG_PING)) {
			off += flen;
			continue;
		}
		if (!handle_frame(c, &hdr, p + SW_FRAME_HDR))
			break;
		if (c->sc.closing)
			break;
		/* Out of the buffer: what follows moves up. */
		memmove(p, p + flen, avail - flen);
		c->in.len -= flen;
	}
}

/* Handle the complete requests in @c's input, while its replies are
 * within budget; with too much unsent, stop reading it (conn_write()
 * resumes). */
static void conn_consume(struct conn *c)
{
	int64_t t0 = sw_mono_ns();
	bool yield = false;

	if (c->parked)
		consume_parked(c);
	while (!c->sc.closing && !c->parked) {
		uint32_t max = c->s ? SW_FRAME_MAX_META : PRE_HELLO_FRAME;
		struct sw_frame_hdr hdr;
		int rc = sw_frame_whole(sw_buf_head(&c->in),
					sw_buf_used(&c->in), max, &hdr);

		if (rc < 0) {
			sw_notice(TAG, "%s: %s; closing", c->sc.peer,
				  rc == -EMSGSIZE ? "frame too large" :
						    "bad frame header");
			conn_close(c);
			return;
		}
		if (rc == 0)
			break;
		if (conn_backlog(c) > c->m->cfg.output_max) {
			if (!c->paused) {
				uv_read_stop((uv_stream_t *)&c->sc.tcp);
				c->paused = true;
			}
			break;
		}
		if (!handle_frame(c, &hdr,
				  sw_buf_head(&c->in) + SW_FRAME_HDR)) {
			consume_parked(c);
			break;
		}
		sw_buf_consume(&c->in, SW_FRAME_HDR + hdr.len);
		if (sw_buf_used(&c->in) &&
		    sw_mono_ns() - t0 > CONSUME_SLICE_NS) {
			yield = true;
			break;
		}
	}
	if (c->sc.closing)
		return;
	if (yield) {
		/* Others first; the rest in the next turn, read no further
		 * meanwhile. */
		if (!c->yielded && !c->paused)
			uv_read_stop((uv_stream_t *)&c->sc.tcp);
		c->yielded = true;
		consume_add(c);
	} else if (c->yielded) {
		/* Its backlog is done: read on (a parked one too, as
		 * before; a paused one when conn_write() says). */
		c->yielded = false;
		if (!c->paused)
			uv_read_start((uv_stream_t *)&c->sc.tcp, on_alloc,
				      on_read);
	}
	conn_account(c);
	/* Waiting, whole: not stalled mid-frame. */
	if (sw_buf_used(&c->in) == 0 || c->parked)
		c->sc.partial_since = 0;
	else if (!c->sc.partial_since)
		c->sc.partial_since = sw_mono_ns();
}

static void on_consume_idle(uv_idle_t *h)
{
	struct master *m = h->data;

	uv_idle_stop(h);
	while (m->consume_list) {
		struct conn *c = m->consume_list;

		m->consume_list = c->consume_next;
		c->in_consume_list = false;
		if (!c->sc.closing && !c->paused)
			conn_consume(c);
		sw_sconn_put(&c->sc);
	}
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct conn *c = s->data;

	if (nread < 0) {
		sw_sconn_read_end(&c->sc, nread);
		return;
	}
	if (nread == 0)
		return;
	if (!c->s && sw_server_unauth_over(&c->m->server, (size_t)nread,
					   PRE_HELLO_TOTAL)) {
		sw_notice(TAG,
			  "%s: unfinished frames before hello pass %u bytes "
			  "in all; closing",
			  c->sc.peer, PRE_HELLO_TOTAL);
		conn_close(c);
		return;
	}
	if (sw_buf_add(&c->in, buf->base, (size_t)nread) < 0) {
		sw_err(TAG, "%s: out of memory for input; closing", c->sc.peer);
		conn_close(c);
		return;
	}
	conn_consume(c);
}

void server_reap_stalled(struct master *m)
{
	sw_server_reap_stalled(&m->server,
			       (int64_t)m->cfg.frame_timeout_ms * 1000000);
	sw_server_reap_silent(&m->server,
			      (int64_t)m->cfg.hello_timeout_ms * 1000000);
}

static void on_check(uv_check_t *h)
{
	struct master *m = h->data;

	changelog_flush(m->cl);
	server_flush(m);
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
	uv_idle_init(m->loop, &m->consume_idle);
	m->consume_idle.data = m;
	return 0;
}

void server_stop(struct master *m)
{
	sw_server_unlisten(&m->server, NULL);
	uv_check_stop(&m->check);
	uv_close((uv_handle_t *)&m->check, NULL);
	uv_close((uv_handle_t *)&m->consume_idle, NULL);
	for (struct conn *c = conn_first(m); c; c = conn_next(c)) {
		conn_write(c);
		conn_close(c);
	}
}
