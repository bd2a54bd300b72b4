/*
 * The shared part of the libuv servers (uvserver.h).
 *
 * The read loop. A connection is read while nothing stops it (stops, a
 * set of SW_READ_* reasons; uv_read_stop() otherwise, so the kernel's
 * buffers and then TCP's window push back on the peer). What arrives
 * goes to its input buffer (read there in place, or copied from one
 * buffer of the process's: ops->read_in_place), and sw_sconn_parse()
 * cuts whole frames off its head for ops->frame, one at a time, until
 * the input holds no whole frame, the connection is stopped or closed,
 * the owner keeps a frame (SW_FRAME_KEEP), or its slice of the turn is
 * used up (then it yields: not read, and parsed again by the idle
 * handle in the next turn). A large payload not whole when its header
 * comes (ops->own_above) is read straight into a buffer of its own.
 *
 * What a peer can make the server hold or wait for, here:
 *  - its input: one frame's payload cap plus a read (ops->frame_max, or
 *    ops->pre_hello_frame before its hello), and behind a kept frame
 *    what the owner lets it read, at most ops->kept_max and a read
 *    (kept_stop(): the owner need not remember to stop);
 *  - before its hello, the bytes of all such peers' unhandled input,
 *    ops->pre_hello_total, and frames of at most pre_hello_frame: the
 *    peer whose read would pass the total is closed;
 *  - memory, counted (ops->count_input): its input buffer's, with the
 *    output its owner tells, against the total out_max, from the read
 *    that grew it;
 *  - time: a peer with part of a frame in its input, read and not
 *    stopped for the server's reasons, is timed (partial_since) and
 *    closed by sw_server_reap_stalled(); one connection's frames run
 *    for at most ops->slice_ns per loop turn.
 * A header that is bad or over the cap closes the connection, as does
 * running out of memory for input.
 *
 * Resuming a stopped connection hands over the frames it read before in
 * the next loop turn (not in the caller's: that may be a flush, or a
 * handler), unless the caller says now; an idle handle keeps the loop
 * from blocking in between, and the list holds a reference.
 */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "net.h"
#include "util.h"
#include "uvserver.h"

static void on_conn_closed(uv_handle_t *h)
{
	sw_sconn_put(h->data);
}

void sw_sconn_put(struct sw_sconn *c)
{
	struct sw_server *srv = c->srv;

	if (--c->refs)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	srv->nconns--;
	srv->ops->release(c);
	sw_buf_release(&c->in);
	free(c->big);
	free(c);
}

static void anon_unlink(struct sw_sconn *c)
{
	struct sw_server *srv = c->srv;

	if (!c->anon)
		return;
	if (c->anon_prev)
		c->anon_prev->anon_next = c->anon_next;
	else
		srv->anon_head = c->anon_next;
	if (c->anon_next)
		c->anon_next->anon_prev = c->anon_prev;
	else
		srv->anon_tail = c->anon_prev;
	c->anon_next = c->anon_prev = NULL;
	c->anon = false;
	srv->nanon--;
}

static void anon_append(struct sw_sconn *c)
{
	struct sw_server *srv = c->srv;

	c->anon = true;
	c->anon_prev = srv->anon_tail;
	if (srv->anon_tail)
		srv->anon_tail->anon_next = c;
	else
		srv->anon_head = c;
	srv->anon_tail = c;
	srv->nanon++;
}

static void out_set(struct sw_sconn *c, size_t bytes)
{
	c->srv->out_total += bytes - c->out_counted;
	c->out_counted = bytes;
}

/* The open connection holding the most output. O(connections): only
 * past the cap, and each call frees that connection's share. */
static struct sw_sconn *out_heaviest(struct sw_server *srv)
{
	struct sw_sconn *top = NULL;

	for (struct sw_sconn *c = srv->conns; c; c = c->next)
		if (!c->closing && !c->shed &&
		    (!top || c->out_counted > top->out_counted))
			top = c;
	return top;
}

/* What @c holds as out_max counts it: the owner's output, and its
 * input buffer's memory if ops->count_input. */
static size_t held(const struct sw_sconn *c)
{
	if (c->closing || c->shed)
		return 0;
	return c->out_owner + (c->srv->ops->count_input ? c->in.cap : 0);
}

void sw_sconn_shed(struct sw_sconn *c)
{
	struct sw_server *srv = c->srv;

	if (sw_sconn_gone(c))
		return;
	out_set(c, 0);
	c->shed = true;
	c->shed_next = srv->shed;
	srv->shed = c;
	if (c->started && srv->ops->shed)
		srv->ops->shed(c);
}

void sw_sconn_output(struct sw_sconn *c, size_t bytes)
{
	struct sw_server *srv = c->srv;

	c->out_owner = bytes;
	out_set(c, held(c));
	while (srv->out_max && srv->out_total > srv->out_max) {
		struct sw_sconn *top = out_heaviest(srv);

		if (!top || !top->out_counted)
			break;
		sw_warn(srv->tag,
			"%s: holds %zu bytes of output not taken (and of "
			"input), the most while all hold %zu (more than %zu); "
			"closing",
			top->peer, top->out_counted, srv->out_total,
			srv->out_max);
		srv->out_shed++;
		sw_sconn_shed(top); /* never gone: out_heaviest() */
	}
}

void sw_server_shed(struct sw_server *srv)
{
	while (srv->shed) {
		struct sw_sconn *c = srv->shed;

		srv->shed = c->shed_next;
		c->shed_next = NULL;
		sw_sconn_close(c); /* finds itself off the list */
	}
}

void sw_sconn_known(struct sw_sconn *c)
{
	c->known = true;
	anon_unlink(c);
}

void sw_server_reap_silent(struct sw_server *srv, int64_t now, int64_t limit_ns)
{
	while (srv->anon_head && now - srv->anon_head->accepted_at > limit_ns) {
		struct sw_sconn *c = srv->anon_head;

		sw_notice(srv->tag, "%s: no hello in %" PRId64 " ms; closing",
			  c->peer, limit_ns / 1000000);
		srv->anon_evicted++;
		sw_sconn_close(c); /* unlinks it */
	}
}

void sw_sconn_account(struct sw_sconn *c, size_t buffered)
{
	size_t now = c->closing ? 0 : buffered;

	c->srv->unauth_bytes += now - c->unauth_counted;
	c->unauth_counted = now;
}

/* @freed bytes of big payloads went: those waiting for room try again
 * (in the next loop turn). */
static void big_room(struct sw_server *srv, size_t freed)
{
	srv->big_total -= freed;
	if (!srv->big_wanted)
		return;
	srv->big_wanted = false;
	for (struct sw_sconn *c = srv->conns; c; c = c->next)
		if (c->stops & SW_READ_ROOM)
			sw_sconn_go(c, SW_READ_ROOM, false);
}

void sw_sconn_close(struct sw_sconn *c)
{
	struct sw_server *srv = c->srv;

	if (c->closing)
		return;
	c->closing = true;
	anon_unlink(c);
	if (c->big) {
		/* Read no more (the handle is closing): its room now. */
		free(c->big);
		c->big = NULL;
		big_room(srv, c->big_hdr.len);
	}
	if (c->shed) {
		/* Closed before sw_server_shed() got to it. */
		struct sw_sconn **pp = &srv->shed;

		while (*pp && *pp != c)
			pp = &(*pp)->shed_next;
		if (*pp)
			*pp = c->shed_next;
	}
	out_set(c, 0);
	sw_sconn_account(c, 0);
	/* Uncounted from now on, and never read again: not kept for as long
	 * as a deferred request holds the connection. */
	if (srv->ops->count_input && !c->parsing)
		sw_buf_release(&c->in);
	if (c->started && srv->ops->closing)
		srv->ops->closing(c);
	if (c->in_flush) {
		/* Unlinked, so that the flush list never holds a freed one. */
		struct sw_sconn **pp = &srv->flush;

		while (*pp != c)
			pp = &(*pp)->flush_next;
		*pp = c->flush_next;
		c->in_flush = false;
	}
	uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

void sw_sconn_read_end(struct sw_sconn *c, ssize_t nread)
{
	if (nread != UV_EOF)
		sw_info(c->srv->tag, "%s: read failed: %s", c->peer,
			uv_strerror((int)nread));
	sw_sconn_close(c);
}

void sw_sconn_flush_add(struct sw_sconn *c)
{
	if (c->in_flush || c->closing)
		return;
	c->in_flush = true;
	c->flush_next = c->srv->flush;
	c->srv->flush = c;
}

void sw_server_flush(struct sw_server *srv)
{
	while (srv->flush) {
		struct sw_sconn *c = srv->flush;

		srv->flush = c->flush_next;
		c->in_flush = false;
		srv->ops->flush(c);
	}
}

void sw_sconn_partial(struct sw_sconn *c, bool incomplete)
{
	if (!incomplete)
		c->partial_since = 0;
	else if (!c->partial_since)
		c->partial_since = sw_mono_ns();
}

void sw_server_reap_stalled(struct sw_server *srv, int64_t now,
			    int64_t limit_ns)
{
	for (struct sw_sconn *c = srv->conns; c; c = c->next) {
		if (c->closing || !c->partial_since ||
		    now - c->partial_since <= limit_ns)
			continue;
		sw_notice(srv->tag,
			  "%s: stalled mid-frame for %" PRId64 " ms; closing",
			  c->peer, limit_ns / 1000000);
		sw_sconn_close(c);
	}
}

/* ---- reading -------------------------------------------------------- */

/* The largest read: a frame of the chunkserver's takes few, and one
 * buffer this big is all that the master's idle peers need. */
#define READ_CHUNK (64u << 10)

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void on_parse_idle(uv_idle_t *h);

static uint32_t frame_cap(const struct sw_sconn *c)
{
	const struct sw_server_ops *ops = c->srv->ops;

	return c->known ? ops->frame_max : ops->pre_hello_frame;
}

/* How much one read may bring: a read's worth, or a whole frame of a
 * peer without a hello (it gets no more till that is handled). */
static size_t read_size(const struct sw_sconn *c)
{
	return SW_MIN((size_t)READ_CHUNK, (size_t)frame_cap(c) + SW_FRAME_HDR);
}

/* Whether @c holds part of a frame its peer owes: read, and not stopped
 * for the server's reasons nor waiting for it. */
static bool owes_input(const struct sw_sconn *c)
{
	return (c->big || sw_buf_used(&c->in)) && !c->waits &&
	       !(c->stops & (SW_READ_WAIT | SW_READ_DONE | SW_READ_ROOM));
}

/* Read @c, or not, as its stops say; keep its clock. */
static void read_set(struct sw_sconn *c)
{
	if (c->closing || !c->srv->ops->frame)
		return;
	if (!c->stops && !c->reading) {
		int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc,
				       on_read);

		if (rc < 0) {
			sw_info(c->srv->tag, "%s: cannot read: %s", c->peer,
				uv_strerror(rc));
			sw_sconn_close(c);
			return;
		}
		c->reading = true;
	} else if (c->stops && c->reading) {
		uv_read_stop((uv_stream_t *)&c->tcp);
		c->reading = false;
	}
	sw_sconn_partial(c, owes_input(c));
}

/* Hand @c's input over in the next loop turn (the list holds @c).
 * Whether it will be: not once the server stopped listening. */
static bool parse_later(struct sw_sconn *c)
{
	struct sw_server *srv = c->srv;

	if (c->in_parse)
		return true;
	if (c->closing || !srv->parse_idle_on)
		return false;
	c->in_parse = true;
	sw_sconn_get(c);
	c->parse_next = srv->parse;
	srv->parse = c;
	uv_idle_start(&srv->parse_idle, on_parse_idle);
	return true;
}

static void on_parse_idle(uv_idle_t *h)
{
	struct sw_server *srv = h->data;
	struct sw_sconn *list = srv->parse;

	/* Those a yield adds meanwhile wait for the turn after. */
	srv->parse = NULL;
	uv_idle_stop(h);
	while (list) {
		struct sw_sconn *c = list;

		list = c->parse_next;
		c->in_parse = false;
		c->parse_next = NULL;
		sw_sconn_go(c, SW_READ_YIELD, true);
		sw_sconn_put(c);
	}
}

void sw_sconn_stop(struct sw_sconn *c, unsigned why)
{
	c->stops |= why;
	read_set(c);
}

void sw_sconn_go(struct sw_sconn *c, unsigned why, bool now)
{
	c->wakes++;
	c->stops &= ~why;
	if (c->closing)
		return;
	/* Still stopped, only its clock may change (read_set()). */
	if (!c->stops && !now)
		parse_later(c);
	else if (!c->stops && sw_buf_used(&c->in))
		sw_sconn_parse(c);
	read_set(c);
}

/*
 * @c's head frame was kept: past kept_max of input (0: the frame cap and
 * a read) it is read no more, a wait of the server's (not timed as the
 * peer's), until the owner's sw_sconn_go(SW_READ_WAIT). An owner that
 * stops it itself, for whatever reason, is not second-guessed.
 */
static void kept_stop(struct sw_sconn *c)
{
	const struct sw_server_ops *ops = c->srv->ops;
	size_t max = ops->kept_max ?
			     ops->kept_max :
			     (size_t)frame_cap(c) + SW_FRAME_HDR + READ_CHUNK;

	if (c->stops || sw_sconn_gone(c) || sw_buf_used(&c->in) <= max)
		return;
	c->waits = true;
	c->stops |= SW_READ_WAIT;
}

/* The payload of @hdr, not whole yet, goes to a buffer of its own: what
 * the input has of it is copied, the rest is read straight into it. */
static void big_start(struct sw_sconn *c, const struct sw_frame_hdr *hdr)
{
	size_t have = sw_buf_used(&c->in) - SW_FRAME_HDR;
	uint8_t *p = malloc(hdr->len);

	if (!p) {
		sw_err(c->srv->tag, "%s: out of memory for a request; closing",
		       c->peer);
		sw_sconn_close(c);
		return;
	}
	memcpy(p, sw_buf_head(&c->in) + SW_FRAME_HDR, have);
	sw_buf_consume(&c->in, SW_FRAME_HDR + have);
	c->big = p;
	c->big_hdr = *hdr;
	c->big_have = have;
	c->srv->big_total += hdr->len;
}

/* Whether a payload of @len may have a buffer of its own now: always
 * when none is being read, else within big_max. */
static bool big_fits(const struct sw_server *srv, uint32_t len)
{
	return !srv->big_max || !srv->big_total ||
	       srv->big_total + len <= srv->big_max;
}

void sw_sconn_parse(struct sw_sconn *c)
{
	const struct sw_server_ops *ops = c->srv->ops;
	int64_t t0 = ops->slice_ns ? sw_mono_ns() : 0;
	unsigned wakes;

	if (c->parsing)
		return;
	c->parsing = true;
	while (!sw_sconn_gone(c) && !c->stops && !c->big) {
		size_t used = sw_buf_used(&c->in);
		struct sw_frame_hdr hdr;
		int rc = sw_frame_get_hdr(sw_buf_head(&c->in), used,
					  frame_cap(c), &hdr);

		if (rc < 0) {
			sw_notice(c->srv->tag, "%s: %s; closing", c->peer,
				  rc == -EMSGSIZE ? "frame too large" :
						    "bad frame header");
			sw_sconn_close(c);
			break;
		}
		if (rc == 0)
			break;
		if (used - SW_FRAME_HDR < hdr.len) {
			if (!ops->own_above || hdr.len <= ops->own_above)
				break;
			if (big_fits(c->srv, hdr.len)) {
				big_start(c, &hdr);
			} else {
				/* big_room() lets it go on. */
				c->srv->big_wanted = true;
				c->stops |= SW_READ_ROOM;
			}
			break;
		}
		wakes = c->wakes;
		if (ops->frame(c, &hdr, sw_buf_head(&c->in) + SW_FRAME_HDR,
			       false) == SW_FRAME_KEEP) {
			/* Not when the callback woke it meanwhile: that wake
			 * is the one the kept frame waited for. */
			if (c->wakes == wakes)
				kept_stop(c);
			break;
		}
		sw_buf_consume(&c->in, SW_FRAME_HDR + hdr.len);
		c->waits = false; /* the owner's wait was for that one */
		if (ops->slice_ns && sw_buf_used(&c->in) &&
		    sw_mono_ns() - t0 > ops->slice_ns && parse_later(c)) {
			/* Others first; the rest in the next turn. */
			c->stops |= SW_READ_YIELD;
			break;
		}
	}
	c->parsing = false;
	if (c->closing) {
		if (ops->count_input)
			sw_buf_release(&c->in); /* nothing reads it again */
		return;
	}
	/* A large frame answered leaves a large buffer: an idle connection
	 * gives it back rather than hold its share of out_total_max. */
	if (ops->count_input && !sw_buf_used(&c->in) &&
	    c->in.cap > READ_CHUNK) {
		sw_buf_release(&c->in);
		if (!c->shed)
			sw_sconn_output(c, c->out_owner);
	}
	sw_sconn_account(c, c->known ? 0 : sw_buf_used(&c->in));
	read_set(c);
}

/*
 * Read into @c's input, or (ops->read_in_place false) into one buffer
 * of the process's, copied into the input by on_read() before the next
 * read is allocated: the loop has one thread. A payload being read into
 * its own buffer is read straight into it.
 */
static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	static char chunk[READ_CHUNK];
	struct sw_sconn *c = h->data;
	size_t want = read_size(c);

	(void)hint;
	if (c->big) {
		buf->base = (char *)c->big + c->big_have;
		buf->len = c->big_hdr.len - c->big_have;
	} else if (!c->srv->ops->read_in_place) {
		buf->base = chunk;
		buf->len = want;
	} else if (sw_buf_reserve(&c->in, want) < 0) {
		buf->base = NULL; /* on_read() gets UV_ENOBUFS */
		buf->len = 0;
	} else {
		buf->base = (char *)c->in.data + c->in.len;
		buf->len = SW_MIN(c->in.cap - c->in.len, want);
	}
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct sw_sconn *c = s->data;
	struct sw_server *srv = c->srv;

	if (nread < 0) {
		sw_sconn_read_end(c, nread);
		return;
	}
	if (nread == 0 || c->shed)
		return; /* (marked: closed in this turn's check phase) */
	c->heard_at = sw_mono_ns();
	if (!c->known && sw_server_unauth_over(srv, (size_t)nread,
					       srv->ops->pre_hello_total)) {
		sw_notice(srv->tag,
			  "%s: unfinished frames before hello pass %zu bytes "
			  "in all; closing",
			  c->peer, srv->ops->pre_hello_total);
		sw_sconn_close(c);
		return;
	}
	if (c->big) {
		c->big_have += (size_t)nread;
		if (c->big_have == c->big_hdr.len) {
			uint8_t *p = c->big;

			c->big = NULL;
			big_room(srv, c->big_hdr.len);
			srv->ops->frame(c, &c->big_hdr, p, true);
		}
	} else if (srv->ops->read_in_place) {
		c->in.len += (size_t)nread;
	} else if (sw_buf_add(&c->in, buf->base, (size_t)nread) < 0) {
		sw_err(srv->tag, "%s: out of memory for input; closing",
		       c->peer);
		sw_sconn_close(c);
		return;
	}
	/* Its input may have grown (on_alloc(), or the copy above): the
	 * cap sees it now, not at the owner's next output. Shed, it is
	 * served no more (closed in this turn's check phase). */
	if (srv->ops->count_input && c->out_counted != held(c))
		sw_sconn_output(c, c->out_owner);
	sw_sconn_parse(c);
}

static bool same_host(const struct sockaddr_storage *a,
		      const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr,
			       sizeof(struct in6_addr));
	return true; /* unix sockets: one "address" */
}

/*
 * @c, just accepted, has not said hello: past the caps, the oldest silent
 * connection of its address (or, past the total, of all) is closed to
 * make room. O(anon_max).
 */
static void anon_admit(struct sw_sconn *c)
{
	struct sw_server *srv = c->srv;
	struct sw_sconn *oldest = NULL, *victim = NULL;
	uint64_t same = 0, count = 0;
	const char *why = NULL;

	if (srv->anon_per_addr) {
		for (struct sw_sconn *o = srv->anon_head; o; o = o->anon_next)
			if (same_host(&o->addr, &c->addr) && !same++)
				oldest = o;
		if (same >= srv->anon_per_addr) {
			victim = oldest;
			count = same;
			why = "from its address";
		}
	}
	if (!victim && srv->anon_max && srv->nanon >= srv->anon_max) {
		victim = srv->anon_head;
		count = srv->nanon;
		why = "in all";
	}
	if (victim) {
		sw_notice(srv->tag,
			  "%s: closed, the oldest of %" PRIu64
			  " connections %s without a hello",
			  victim->peer, count, why);
		srv->anon_evicted++;
		sw_sconn_close(victim);
	}
	c->accepted_at = c->heard_at = sw_mono_ns();
	anon_append(c);
}

static void on_connection(uv_stream_t *listener, int status)
{
	struct sw_server *srv = listener->data;
	int len = sizeof(struct sockaddr_storage);
	struct sw_sconn *c;

	if (status < 0) {
		sw_err(srv->tag, "accept: %s", uv_strerror(status));
		return;
	}
	c = calloc(1, srv->ops->conn_size);
	if (!c)
		return;
	c->srv = srv;
	c->refs = 1;
	uv_tcp_init(srv->loop, &c->tcp);
	c->tcp.data = c;
	c->next = srv->conns;
	if (srv->conns)
		srv->conns->prev = c;
	srv->conns = c;
	srv->nconns++;
	if (uv_accept(listener, (uv_stream_t *)&c->tcp) < 0) {
		sw_sconn_close(c);
		return;
	}
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&c->addr, &len) == 0)
		sw_sockaddr_str((struct sockaddr *)&c->addr, c->peer,
				sizeof(c->peer));
	else
		strcpy(c->peer, "unknown");
	if (srv->nconns > srv->max_conns || srv->refusing) {
		sw_warn(srv->tag, "%s: refused: %" PRIu64 " connections open",
			c->peer, srv->nconns - 1);
		sw_sconn_close(c);
		return;
	}
	anon_admit(c);
	uv_tcp_nodelay(&c->tcp, 1);
	if (srv->peer_timeout_ms) {
		uv_os_fd_t fd;

		if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0)
			sw_tcp_dead_peer_timeout(fd, srv->peer_timeout_ms);
	}
	c->started = true;
	if (srv->ops->accepted(c) != 0)
		sw_sconn_close(c);
	else
		read_set(c);
}

static int resolve(const char *host, uint16_t port,
		   struct sockaddr_storage *out)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE };
	struct addrinfo *res;
	char service[8];

	snprintf(service, sizeof(service), "%u", port);
	if (getaddrinfo(*host ? host : NULL, service, &hints, &res))
		return -EADDRNOTAVAIL;
	memcpy(out, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

int sw_server_listen(struct sw_server *srv, uv_loop_t *loop,
		     const struct sw_server_ops *ops, const char *tag,
		     const char *host, uint16_t port, uint64_t max_conns,
		     uv_close_cb on_fail)
{
	struct sockaddr_storage ss;
	int rc;

	srv->loop = loop;
	srv->ops = ops;
	srv->tag = tag;
	srv->max_conns = max_conns;
	uv_tcp_init(loop, &srv->listener);
	srv->listener.data = srv;
	rc = resolve(host, port, &ss);
	if (rc < 0) {
		sw_crit(tag, "cannot resolve listen address %s", host);
		goto out_close;
	}
	rc = uv_tcp_bind(&srv->listener, (struct sockaddr *)&ss, 0);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&srv->listener, 1024,
			       on_connection);
	if (rc == 0) {
		uv_idle_init(loop, &srv->parse_idle);
		srv->parse_idle.data = srv;
		srv->parse_idle_on = true;
		return 0;
	}
	sw_crit(tag, "cannot listen on %s:%u: %s", host, port, uv_strerror(rc));
out_close:
	uv_close((uv_handle_t *)&srv->listener, on_fail);
	return rc;
}

void sw_server_unlisten(struct sw_server *srv, uv_close_cb cb)
{
	srv->refusing = true;
	uv_close((uv_handle_t *)&srv->listener, cb);
	if (!srv->parse_idle_on)
		return;
	srv->parse_idle_on = false;
	while (srv->parse) {
		struct sw_sconn *c = srv->parse;

		srv->parse = c->parse_next;
		c->in_parse = false;
		c->parse_next = NULL;
		sw_sconn_put(c);
	}
	/* Closed after the listener, so gone before @cb runs: libuv ends
	 * the handles closed in one turn last first. */
	uv_close((uv_handle_t *)&srv->parse_idle, NULL);
}
