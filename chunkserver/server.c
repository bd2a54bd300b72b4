/*
 * The chunkserver's network side for clients (mounts, tools) and peer
 * chunkservers: accept, frame, dispatch to the thread pool, send replies.
 *
 * A connection starts with a hello, answered here on the loop, as are
 * pings; other metadata requests get ENOSYS. CS_READ, CS_WRITE and
 * CS_SYNC go to libuv's thread pool as they arrive:
 * many per connection at once, each with its own reply, in whatever
 * order they finish. The worker unpacks the request (a parse failure
 * closes the connection), checks the token and the fields, runs the store
 * operation and packs the reply frame; the loop only moves bytes.
 *
 * Input is uvserver.h's read loop: frames are cut out of a read buffer
 * (read into in place); a large frame (a write) gets a buffer of its own
 * once its header is known, and the socket is read straight into it, so
 * that the loop copies at most a read's worth of any frame (own_above).
 * Output: each reply is its own allocation, queued on its
 * connection and written with one uv_write per loop iteration for all
 * that are ready (the check phase).
 *
 * Backpressure: a connection stops being read while it has too many
 * requests in the pool, or too many bytes of them, or too many reply
 * bytes it has not taken (cfg.output_max); and all connections stop while
 * the requests in the pool hold more than cfg.max_inflight bytes in all.
 * A read in the pool counts as the reply it will make (SW_IO_MAX), not
 * as its few bytes of request: a peer that pipelines reads and takes no
 * reply holds at most CONN_MAX_REQ_BYTES of them in the pool and
 * output_max of replies, and all peers' reads in the pool are within
 * max_inflight. Replies not taken, over all connections, are capped by
 * cfg.output_total_max: past it the connection holding the most is
 * closed (uvserver.h), never a lighter one, which keeps taking its own.
 * Their memory goes back to the system once it is freed (malloc_trim:
 * the reply frames are made by the pool's threads, in their own malloc
 * arenas, which glibc does not give back by itself).
 *
 * A peer stuck in the middle of a frame for frame_timeout, not taking
 * replies for send_timeout, or without a hello for hello_timeout, is
 * dropped; peers without a hello are capped in number too (uvserver.h).
 *
 * Lifetime: a connection is freed when it is closed and no request in
 * the pool refers to it any more (refs).
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "chunkserver_i.h"
#include "frame.h"
#include "buf.h"
#include "log.h"
#include "metrics.h"
#include "net.h"
#include "util.h"
#include "uvserver.h"

#define TAG "server"

/* A frame larger than this, not whole, gets a buffer of its own. */
#define BIG_FRAME (16u << 10)
/*
 * Before its hello a peer is nobody: its frames are at most
 * PRE_HELLO_FRAME bytes (a hello is a few dozen), so it never gets a big
 * buffer, and what all such peers have sent but not completed is at most
 * PRE_HELLO_TOTAL; the peer that would pass it is closed.
 */
#define PRE_HELLO_FRAME 4096u
#define PRE_HELLO_TOTAL (8u << 20)
/* Per connection: stop reading past these (and cfg.output_max)... */
#define CONN_MAX_REQS 64u
#define CONN_MAX_REQ_BYTES (32u << 20)
/* Replies freed since the last malloc_trim() that call for one. */
#define TRIM_SLACK (32u << 20)
/* ...bytes per uv_write. */
#define WRITE_MAX (4u << 20)
/* After server_stop(), connections get this long to finish. */
#define STOP_GRACE_NS (10 * SW_NSEC_PER_SEC)

struct outframe {
	struct outframe *next;
	size_t len;
	uint8_t data[];
};

struct conn {
	struct sw_sconn sc; /* uvserver.h: handle, peer, refs, closing... */
	struct server *srv;
	struct outframe *out, *out_tail; /* replies not yet written */
	struct outframe *wlist;		 /* replies in the uv_write */
	size_t out_bytes;		 /* bytes of both lists */
	uv_write_t wreq;
	unsigned reqs;		/* requests in the pool */
	size_t req_bytes;	/* their payload bytes */
	int64_t write_since;	/* mono ns: the uv_write began */
	bool hello;		/* hello done */
	bool writing;		/* wreq in flight */
	bool close_after_write; /* a refused hello: say why, then go */
};

/* Requests served, for the metrics: CS_READ, CS_WRITE, CS_SYNC. */
enum { ST_READ, ST_WRITE, ST_SYNC, ST_N };

struct server {
	struct sw_server base; /* first: uvserver.h's data is the server */
	struct cs *cs;
	uint64_t served[ST_N];
	struct sw_hist time[ST_N]; /* from arrival to reply queued */
	uint64_t bytes_in, bytes_out;
	uv_check_t check; /* end of each loop iteration: write */
	size_t req_bytes; /* cost of all requests in the pool (req_cost()) */
	bool throttled;	  /* req_bytes went over cfg.max_inflight */
	size_t mem_peak;  /* req_bytes + queued replies, since the trim */
	bool stopping;
	bool listener_closed;
	int64_t stop_deadline; /* mono ns */
};

/* A request on its way through the pool. */
struct req {
	uv_work_t work;
	struct conn *c;
	struct store *store;
	struct sw_frame_hdr hdr;
	uint8_t *payload; /* freed by the worker once unpacked */
	size_t cost;	  /* in c->req_bytes and srv->req_bytes */
	bool has_key, has_prev_key;
	int64_t t0; /* mono ns it came */
	uint8_t key[SW_TOKEN_KEY], prev_key[SW_TOKEN_KEY];
	/* results */
	struct outframe *reply;
	bool unparsable;
	bool damaged; /* report chunk_id/version to the master */
	uint64_t chunk_id;
	uint32_t version;
};

static void conn_close(struct conn *c);

/* The server's connections, in no order. */
#define conn_first(srv) ((struct conn *)(srv)->base.conns)
#define conn_next(c) ((struct conn *)(c)->sc.next)
static void conn_update_reading(struct conn *c);

/* ---- replies ---------------------------------------------------------- */

static struct outframe *frame_new(uint16_t type, uint16_t flags, uint64_t id,
				  const ProtobufCMessage *msg)
{
	size_t size = sw_frame_size(msg);
	struct outframe *f = malloc(sizeof(*f) + size);

	if (!f)
		return NULL;
	f->next = NULL;
	f->len = sw_frame_pack(f->data, type, flags, id, msg);
	return f;
}

static struct outframe *status_frame(const struct sw_frame_hdr *hdr, int rc)
{
	Sweepfs__StatusReply reply = SWEEPFS__STATUS_REPLY__INIT;

	if (rc < 0) {
		reply.has_err = 1;
		reply.err = -rc;
	}
	return frame_new(hdr->type, SW_FRAME_REPLY, hdr->id, &reply.base);
}

static void queue_reply(struct conn *c, struct outframe *f)
{
	if (!f) {
		sw_err(TAG, "%s: out of memory for a reply; closing",
		       c->sc.peer);
		conn_close(c);
		return;
	}
	if (c->out_tail)
		c->out_tail->next = f;
	else
		c->out = f;
	c->out_tail = f;
	c->out_bytes += f->len;
	c->srv->mem_peak = SW_MAX(c->srv->mem_peak,
				  c->srv->req_bytes + c->srv->base.out_total);
	sw_sconn_flush_add(&c->sc);
	/* May close @c, or a heavier one: past output_total_max. */
	sw_sconn_output(&c->sc, c->out_bytes);
}

static void free_frames(struct outframe *f)
{
	while (f) {
		struct outframe *next = f->next;

		free(f);
		f = next;
	}
}

/* ---- writing ------------------------------------------------------------ */

static void conn_write(struct conn *c);

/* Close a stopping connection that has nothing left to do. */
static void maybe_finish(struct conn *c)
{
	if (c->sc.closing)
		return;
	if ((c->srv->stopping || c->close_after_write) && !c->reqs &&
	    !c->out_bytes)
		conn_close(c);
}

static void on_written(uv_write_t *w, int status)
{
	struct conn *c = w->data;

	c->writing = false;
	for (struct outframe *f = c->wlist; f; f = f->next)
		c->out_bytes -= f->len;
	free_frames(c->wlist);
	c->wlist = NULL;
	if (c->sc.closing)
		return;
	sw_sconn_output(&c->sc, c->out_bytes);
	if (status < 0) {
		sw_info(TAG, "%s: write failed: %s", c->sc.peer,
			uv_strerror(status));
		conn_close(c);
		return;
	}
	conn_write(c);
	conn_update_reading(c);
	maybe_finish(c);
}

static void conn_write(struct conn *c)
{
	uv_buf_t bufs[64];
	struct outframe *f, *last = NULL;
	unsigned n = 0;
	size_t bytes = 0;
	int rc;

	if (c->writing || c->sc.closing || !c->out)
		return;
	for (f = c->out; f && n < SW_ARRAY_SIZE(bufs) &&
			 (n == 0 || bytes + f->len <= WRITE_MAX);
	     f = f->next) {
		bufs[n++] = uv_buf_init((char *)f->data, (unsigned)f->len);
		bytes += f->len;
		last = f;
	}
	c->wlist = c->out;
	c->out = last->next;
	if (!c->out)
		c->out_tail = NULL;
	last->next = NULL;
	c->wreq.data = c;
	rc = uv_write(&c->wreq, (uv_stream_t *)&c->sc.tcp, bufs, n, on_written);
	if (rc < 0) {
		sw_info(TAG, "%s: write failed: %s", c->sc.peer,
			uv_strerror(rc));
		conn_close(c);
		return;
	}
	c->writing = true;
	c->write_since = sw_mono_ns();
}

static void on_check(uv_check_t *h)
{
	struct server *srv = h->data;

	sw_server_shed(&srv->base);
	sw_server_flush(&srv->base);
}

/* ---- connections ---------------------------------------------------------- */

static void conn_close(struct conn *c)
{
	sw_sconn_close(&c->sc);
}

static bool over_limits(const struct conn *c)
{
	return c->reqs >= CONN_MAX_REQS || c->req_bytes >= CONN_MAX_REQ_BYTES ||
	       c->out_bytes >= c->srv->cs->cfg.output_max || c->srv->throttled;
}

/*
 * Read @c, or not, as its limits say; with none in the way, the frames
 * that arrived before the pause come first (now: nothing here is a
 * handler). A stopped peer is not stalled: the limits are ours.
 */
static void conn_update_reading(struct conn *c)
{
	if (c->sc.closing || c->close_after_write)
		return;
	if (c->srv->stopping)
		sw_sconn_stop(&c->sc, SW_READ_DONE);
	else if (over_limits(c))
		sw_sconn_stop(&c->sc, SW_READ_WAIT);
	else
		sw_sconn_go(&c->sc, SW_READ_WAIT, true);
}

/* The global limit: throttle everyone, or let everyone go again. */
static void update_throttle(struct server *srv)
{
	bool over = srv->req_bytes >= srv->cs->cfg.max_inflight;

	if (over == srv->throttled)
		return;
	srv->throttled = over;
	if (over)
		sw_info(TAG, "%zu request bytes in progress: reading paused",
			srv->req_bytes);
	for (struct conn *c = conn_first(srv); c; c = conn_next(c))
		conn_update_reading(c);
}

/* ---- requests in the pool --------------------------------------------------- */

static uint64_t now_ms(void)
{
	return (uint64_t)(sw_now_ns() / 1000000);
}

static bool token_ok(const struct req *r, uint64_t id, uint32_t version,
		     enum sw_token_need need, const ProtobufCBinaryData *tok,
		     bool has_tok, bool has_expires, uint64_t expires)
{
	return has_tok && has_expires &&
	       sw_token_check(r->key, id, version, need, expires, now_ms(),
			      tok->data, tok->len);
}

/* The reply for a failed operation; -EBADMSG is the client's EIO. */
static struct outframe *error_frame(struct req *r, int rc)
{
	if (rc == -EBADMSG) {
		r->damaged = true;
		rc = -EIO;
	}
	return status_frame(&r->hdr, rc);
}

static void do_read(struct req *r, const Sweepfs__CsReadReq *q)
{
	Sweepfs__CsReadReply reply = SWEEPFS__CS_READ_REPLY__INIT;
	uint8_t *buf;
	int n;

	r->chunk_id = q->chunk_id;
	r->version = q->version;
	if (!r->has_key)
		n = -EAGAIN;
	else if (!token_ok(r, q->chunk_id, q->version, SW_NEED_READ, &q->token,
			   q->has_token, q->has_expires, q->expires))
		n = -EACCES;
	else if (q->size > SW_IO_MAX || q->offset > SW_CHUNK_SIZE ||
		 q->size > SW_CHUNK_SIZE - q->offset)
		n = -EINVAL;
	else
		n = 0;
	if (n < 0) {
		r->reply = error_frame(r, n);
		return;
	}
	buf = malloc(SW_MAX(q->size, 1u));
	if (!buf) {
		r->reply = error_frame(r, -ENOMEM);
		return;
	}
	n = store_read(r->store, q->chunk_id, q->version, q->offset, q->size,
		       buf);
	if (n < 0) {
		r->reply = error_frame(r, n);
	} else {
		reply.has_data = 1;
		reply.data.data = buf;
		reply.data.len = (size_t)n;
		r->reply = frame_new(r->hdr.type, SW_FRAME_REPLY, r->hdr.id,
				     &reply.base);
	}
	free(buf);
}

static void do_write(struct req *r, const Sweepfs__CsWriteReq *q)
{
	int rc;

	r->chunk_id = q->chunk_id;
	r->version = q->version;
	if (!r->has_key)
		rc = -EAGAIN;
	else if (!token_ok(r, q->chunk_id, q->version, SW_NEED_WRITE, &q->token,
			   q->has_token, q->has_expires, q->expires))
		rc = -EACCES;
	else if (q->data.len > SW_IO_MAX || q->offset > SW_CHUNK_SIZE ||
		 q->data.len > SW_CHUNK_SIZE - q->offset)
		rc = -EINVAL;
	else
		rc = store_write(r->store, q->chunk_id, q->version, q->offset,
				 q->data.data, (uint32_t)q->data.len);
	r->reply = rc < 0 ? error_frame(r, rc) : status_frame(&r->hdr, 0);
}

/* A sync's token of the master's previous key (chunkserver_i.h). */
static bool prev_token_ok(const struct req *r, const Sweepfs__CsSyncReq *q)
{
	return r->has_prev_key && q->has_token && q->has_expires &&
	       sw_token_check(r->prev_key, q->chunk_id, q->version,
			      SW_NEED_WRITE, q->expires, now_ms(),
			      q->token.data, q->token.len);
}

static void do_sync(struct req *r, const Sweepfs__CsSyncReq *q)
{
	int rc;

	r->chunk_id = q->chunk_id;
	r->version = q->version;
	if (!r->has_key)
		rc = -EAGAIN;
	/* A sync is of what its client wrote, with the token it wrote
	 * with: a reader's token would let anyone who may read a chunk
	 * make its server fsync it, again and again. */
	else if (!token_ok(r, q->chunk_id, q->version, SW_NEED_WRITE, &q->token,
			   q->has_token, q->has_expires, q->expires) &&
		 !prev_token_ok(r, q))
		rc = -EACCES;
	else
		rc = store_sync(r->store, q->chunk_id, q->version);
	r->reply = rc < 0 ? error_frame(r, rc) : status_frame(&r->hdr, 0);
}

/* Thread pool: everything that touches the disk or parses a payload. */
static void req_work(uv_work_t *w)
{
	struct req *r = w->data;
	const struct sw_msg_info *info = sw_msg_info(r->hdr.type);
	ProtobufCMessage *msg;

	msg = protobuf_c_message_unpack(info->req, NULL, r->hdr.len,
					r->payload);
	free(r->payload);
	r->payload = NULL;
	if (!msg) {
		r->unparsable = true;
		return;
	}
	switch (r->hdr.type) {
	case SW_MSG_CS_READ:
		do_read(r, (Sweepfs__CsReadReq *)msg);
		break;
	case SW_MSG_CS_WRITE:
		do_write(r, (Sweepfs__CsWriteReq *)msg);
		break;
	default:
		do_sync(r, (Sweepfs__CsSyncReq *)msg);
		break;
	}
	protobuf_c_message_free_unpacked(msg, NULL);
}

static void req_after(uv_work_t *w, int status)
{
	struct req *r = w->data;
	struct conn *c = r->c;
	struct server *srv = c->srv;

	c->reqs--;
	c->req_bytes -= r->cost;
	srv->req_bytes -= r->cost;
	if (r->damaged)
		mlink_damaged(srv->cs, r->chunk_id, r->version);
	if (c->sc.closing) {
		free(r->reply);
	} else if (r->unparsable) {
		sw_notice(TAG, "%s: unparsable %s request (%u bytes); closing",
			  c->sc.peer, sw_msg_info(r->hdr.type)->name,
			  r->hdr.len);
		conn_close(c);
	} else {
		unsigned k = r->hdr.type == SW_MSG_CS_READ  ? ST_READ :
			     r->hdr.type == SW_MSG_CS_WRITE ? ST_WRITE :
							      ST_SYNC;

		int64_t ns = sw_mono_ns() - r->t0;

		srv->served[k]++;
		sw_hist_add(&srv->time[k], ns);
		if (k != ST_SYNC)
			delpace_fg(&srv->cs->del_pace,
				   k == ST_READ ? DELPACE_READ : DELPACE_WRITE,
				   ns);
		srv->bytes_in += SW_FRAME_HDR + r->hdr.len;
		srv->bytes_out += r->reply ? r->reply->len : 0;
		queue_reply(c, r->reply);
	}
	free(r->payload);
	free(r);
	update_throttle(srv);
	conn_update_reading(c);
	maybe_finish(c);
	sw_sconn_put(&c->sc);
}

/* What a request holds while in the pool: its payload, and for a read
 * the reply it will make. */
static size_t req_cost(const struct sw_frame_hdr *hdr)
{
	return hdr->len + (hdr->type == SW_MSG_CS_READ ? SW_IO_MAX : 0);
}

static void queue_req(struct conn *c, const struct sw_frame_hdr *hdr,
		      uint8_t *payload)
{
	struct server *srv = c->srv;
	struct req *r = calloc(1, sizeof(*r));
	int rc;

	if (!r) {
		free(payload);
		queue_reply(c, status_frame(hdr, -ENOMEM));
		return;
	}
	r->c = c;
	r->store = srv->cs->store;
	r->hdr = *hdr;
	r->payload = payload;
	r->cost = req_cost(hdr);
	r->has_key = srv->cs->has_key;
	r->has_prev_key = srv->cs->has_prev_key;
	r->t0 = sw_mono_ns();
	memcpy(r->key, srv->cs->key, SW_TOKEN_KEY);
	memcpy(r->prev_key, srv->cs->prev_key, SW_TOKEN_KEY);
	r->work.data = r;
	rc = uv_queue_work(srv->cs->loop, &r->work, req_work, req_after);
	if (rc < 0) {
		free(payload);
		free(r);
		queue_reply(c, status_frame(hdr, rc));
		return;
	}
	sw_sconn_get(&c->sc);
	c->reqs++;
	c->req_bytes += r->cost;
	srv->req_bytes += r->cost;
	update_throttle(srv);
}

/* ---- frames ------------------------------------------------------------------ */

static void handle_hello(struct conn *c, const struct sw_frame_hdr *hdr,
			 const uint8_t *payload)
{
	Sweepfs__HelloReply reply = SWEEPFS__HELLO_REPLY__INIT;
	Sweepfs__Hello *h;
	int rc = 0;

	h = sweepfs__hello__unpack(NULL, hdr->len, payload);
	if (!h) {
		sw_notice(TAG, "%s: unparsable hello; closing", c->sc.peer);
		conn_close(c);
		return;
	}
	if (c->hello)
		rc = -EISCONN;
	else if (!sw_proto_accepts(h->version, h->role, false))
		rc = -EPROTONOSUPPORT;
	else if (h->role != SWEEPFS__ROLE__ROLE_MOUNT &&
		 h->role != SWEEPFS__ROLE__ROLE_TOOL &&
		 h->role != SWEEPFS__ROLE__ROLE_CHUNKSERVER)
		rc = -EINVAL;
	reply.has_version = 1;
	reply.version = SW_PROTO_VERSION;
	/* A mount or a tool pointed here by mistake can say what
	 * answered. */
	reply.has_role = 1;
	reply.role = SWEEPFS__ROLE__ROLE_CHUNKSERVER;
	if (rc < 0) {
		sw_notice(TAG, "%s: hello refused: %s", c->sc.peer,
			  strerror(-rc));
		reply.has_err = 1;
		reply.err = -rc;
		c->close_after_write = !c->hello;
	} else {
		/* sw_client_open() wants both; a chunkserver has no
		 * sessions and no namespace. */
		reply.has_session_id = 1;
		reply.has_root_ino = 1;
		c->hello = true;
		sw_sconn_known(&c->sc); /* out of the pre-hello caps */
	}
	sweepfs__hello__free_unpacked(h, NULL);
	queue_reply(c,
		    frame_new(hdr->type, SW_FRAME_REPLY, hdr->id, &reply.base));
	if (c->close_after_write)
		sw_sconn_stop(&c->sc, SW_READ_DONE);
}

/* A ping: the token comes back (clients check that we are alive). */
static void handle_ping(struct conn *c, const struct sw_frame_hdr *hdr,
			const uint8_t *payload)
{
	Sweepfs__PingReply reply = SWEEPFS__PING_REPLY__INIT;
	Sweepfs__PingReq *q =
		sweepfs__ping_req__unpack(NULL, hdr->len, payload);

	if (!q) {
		sw_notice(TAG, "%s: unparsable ping; closing", c->sc.peer);
		conn_close(c);
		return;
	}
	reply.has_token = q->has_token;
	reply.token = q->token;
	sweepfs__ping_req__free_unpacked(q, NULL);
	queue_reply(c,
		    frame_new(hdr->type, SW_FRAME_REPLY, hdr->id, &reply.base));
}

/* One whole frame; takes @payload (malloc'd). */
static void dispatch(struct conn *c, const struct sw_frame_hdr *hdr,
		     uint8_t *payload)
{
	if (hdr->flags) {
		sw_notice(TAG,
			  "%s: sent a reply or notification frame; "
			  "closing",
			  c->sc.peer);
		conn_close(c);
	} else if (hdr->type == SW_MSG_HELLO) {
		handle_hello(c, hdr, payload);
	} else if (!c->hello) {
		sw_notice(TAG, "%s: request before hello; closing", c->sc.peer);
		conn_close(c);
	} else if (hdr->type == SW_MSG_PING) {
		handle_ping(c, hdr, payload);
	} else if (hdr->type == SW_MSG_CS_READ ||
		   hdr->type == SW_MSG_CS_WRITE ||
		   hdr->type == SW_MSG_CS_SYNC) {
		queue_req(c, hdr, payload);
		return;
	} else {
		sw_info(TAG, "%s: request type %u is not served here",
			c->sc.peer, hdr->type);
		queue_reply(c, status_frame(hdr, -ENOSYS));
	}
	free(payload);
}

/*
 * uvserver.h's frame callback: the pool's requests take their payload
 * (@own: read straight into it; else a copy of it, a small frame), and
 * reading stops past the limits.
 */
static enum sw_frame_verdict conn_frame(struct sw_sconn *sc,
					const struct sw_frame_hdr *hdr,
					uint8_t *payload, bool own)
{
	struct conn *c = (struct conn *)sc;
	uint8_t *p = payload;

	if (!own) {
		p = malloc(SW_MAX(hdr->len, 1u));
		if (!p) {
			sw_err(TAG, "%s: out of memory for a request; closing",
			       c->sc.peer);
			conn_close(c);
			return SW_FRAME_DONE;
		}
		memcpy(p, payload, hdr->len);
	}
	dispatch(c, hdr, p);
	if (!sw_sconn_gone(sc) && over_limits(c))
		sw_sconn_stop(sc, SW_READ_WAIT);
	return SW_FRAME_DONE;
}

/* ---- uvserver.h's ops ------------------------------------------------------ */

static int conn_accepted(struct sw_sconn *sc)
{
	struct conn *c = (struct conn *)sc;

	c->srv = (struct server *)sc->srv;
	conn_update_reading(c); /* throttled: not yet (uvserver reads it) */
	return 0;
}

static void conn_flush(struct sw_sconn *sc)
{
	conn_write((struct conn *)sc);
}

static void conn_release(struct sw_sconn *sc)
{
	struct conn *c = (struct conn *)sc;

	free_frames(c->out);
	free_frames(c->wlist);
}

static const struct sw_server_ops conn_ops = {
	.conn_size = sizeof(struct conn),
	.accepted = conn_accepted,
	.flush = conn_flush,
	.release = conn_release,
	.frame = conn_frame,
	.frame_max = SW_FRAME_MAX_DATA,
	.pre_hello_frame = PRE_HELLO_FRAME,
	.pre_hello_total = PRE_HELLO_TOTAL,
	.own_above = BIG_FRAME,
	.read_in_place = true,
};

/* ---- the server ----------------------------------------------------------------- */

void server_metrics(struct cs *cs, struct sw_buf *b)
{
	static const char *const names[ST_N] = { "read", "write", "sync" };
	static const char cnt[] = "sweepfs_chunkserver_requests_total";
	static const char lat[] =
		"sweepfs_chunkserver_request_duration_seconds";
	struct server *srv = cs->srv;

	if (!srv)
		return;
	sw_prom_head(b, cnt, "counter", "Client requests served, by type.");
	for (unsigned k = 0; k < ST_N; k++)
		sw_prom_sample(b, cnt,
			       (const char *[]){ "type", names[k], NULL },
			       (double)srv->served[k]);
	sw_prom_head(b, lat, "histogram",
		     "Time from a request's arrival to its reply being queued "
		     "(disk I/O in the worker pool included), by type.");
	for (unsigned k = 0; k < ST_N; k++)
		sw_prom_hist(b, lat, (const char *[]){ "type", names[k], NULL },
			     &srv->time[k]);
	sw_prom_one(b, "sweepfs_chunkserver_received_bytes_total", "counter",
		    "Bytes of requests served.", (double)srv->bytes_in);
	sw_prom_one(b, "sweepfs_chunkserver_sent_bytes_total", "counter",
		    "Bytes of their replies.", (double)srv->bytes_out);
	sw_prom_one(b, "sweepfs_chunkserver_connections", "gauge",
		    "Client connections open.", (double)srv->base.nconns);
	sw_prom_one(b, "sweepfs_chunkserver_queued_reply_bytes", "gauge",
		    "Reply bytes queued for clients that have not taken them "
		    "(past output_total_max the heaviest is closed).",
		    (double)srv->base.out_total);
	sw_prom_one(b, "sweepfs_chunkserver_connections_shed_total", "counter",
		    "Connections closed for holding the most replies past "
		    "output_total_max, or for no hello in time or in number.",
		    (double)(srv->base.out_shed + srv->base.anon_evicted));
	sw_prom_one(b, "sweepfs_chunkserver_inflight_bytes", "gauge",
		    "Request bytes being served now (reading pauses over "
		    "max_inflight).",
		    (double)srv->req_bytes);
}

/* Give freed reply memory back to the system, once enough was freed
 * since the last time to be worth the walk over malloc's arenas. */
static void trim(struct server *srv)
{
	size_t now = srv->req_bytes + srv->base.out_total;

	if (srv->mem_peak < now + TRIM_SLACK) {
		srv->mem_peak = SW_MAX(srv->mem_peak, now);
		return;
	}
	malloc_trim(0);
	srv->mem_peak = now;
}

void server_tick(struct cs *cs)
{
	struct server *srv = cs->srv;
	int64_t now = sw_mono_ns();
	int64_t frame_limit = (int64_t)cs->cfg.frame_timeout_ms * 1000000;
	int64_t send_limit = (int64_t)cs->cfg.send_timeout_ms * 1000000;

	if (!srv)
		return;
	sw_server_reap_stalled(&srv->base, now, frame_limit);
	sw_server_reap_silent(&srv->base, now,
			      (int64_t)cs->cfg.hello_timeout_ms * 1000000);
	trim(srv);
	for (struct conn *c = conn_first(srv); c; c = conn_next(c)) {
		if (c->sc.closing)
			continue;
		if (srv->stopping && now > srv->stop_deadline) {
			sw_notice(TAG, "%s: still busy at shutdown; closing",
				  c->sc.peer);
			conn_close(c);
		} else if (c->writing && now - c->write_since > send_limit) {
			sw_notice(TAG,
				  "%s: took no replies for %" PRIu64
				  " ms; closing",
				  c->sc.peer, cs->cfg.send_timeout_ms);
			conn_close(c);
		}
	}
}

/* The last handle of a server closed: free it. */
static void on_handle_closed(uv_handle_t *h)
{
	free(h->data);
}

int server_start(struct cs *cs)
{
	struct server *srv = calloc(1, sizeof(*srv));
	int rc;

	if (!srv)
		return -ENOMEM;
	srv->cs = cs;
	srv->base.peer_timeout_ms = (unsigned)cs->cfg.peer_timeout_ms;
	srv->base.anon_max = cs->cfg.pre_hello_max;
	srv->base.anon_per_addr = cs->cfg.pre_hello_per_address;
	srv->base.out_max = (size_t)cs->cfg.output_total_max;
	/* Writes being read, before the pool has them: as much again. */
	srv->base.big_max = (size_t)cs->cfg.max_inflight;
	/* On failure the listener's close callback frees srv. */
	rc = sw_server_listen(&srv->base, cs->loop, &conn_ops, TAG,
			      cs->listen_host, cs->listen_port,
			      cs->cfg.max_connections, on_handle_closed);
	if (rc < 0)
		return rc;
	uv_check_init(cs->loop, &srv->check);
	srv->check.data = srv;
	uv_check_start(&srv->check, on_check);
	cs->srv = srv;
	return 0;
}

static void on_listener_closed(uv_handle_t *h)
{
	struct server *srv = h->data;

	srv->listener_closed = true;
}

void server_stop(struct cs *cs)
{
	struct server *srv = cs->srv;

	if (!srv || srv->stopping)
		return;
	srv->stopping = true;
	srv->stop_deadline = sw_mono_ns() + STOP_GRACE_NS;
	sw_server_unlisten(&srv->base, on_listener_closed);
	for (struct conn *c = conn_first(srv); c; c = conn_next(c)) {
		conn_update_reading(c);
		maybe_finish(c);
	}
}

bool server_stopped(struct cs *cs)
{
	struct server *srv = cs->srv;

	if (!srv)
		return true;
	if (!srv->stopping || srv->base.conns || !srv->listener_closed)
		return false;
	uv_check_stop(&srv->check);
	uv_close((uv_handle_t *)&srv->check, on_handle_closed);
	cs->srv = NULL;
	return true;
}
