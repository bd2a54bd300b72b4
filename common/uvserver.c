/*
 * The shared part of the libuv servers (uvserver.h).
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

void sw_sconn_output(struct sw_sconn *c, size_t bytes)
{
	struct sw_server *srv = c->srv;

	out_set(c, c->closing || c->shed ? 0 : bytes);
	while (srv->out_max && srv->out_total > srv->out_max) {
		struct sw_sconn *top = out_heaviest(srv);

		if (!top || !top->out_counted)
			break;
		sw_warn(srv->tag,
			"%s: holds %zu bytes of output not taken, the most "
			"while all hold %zu (more than %zu); closing",
			top->peer, top->out_counted, srv->out_total,
			srv->out_max);
		srv->out_shed++;
		out_set(top, 0);
		top->shed = true;
		top->shed_next = srv->shed;
		srv->shed = top;
		if (top->started && srv->ops->shed)
			srv->ops->shed(top);
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

void sw_server_reap_silent(struct sw_server *srv, int64_t limit_ns)
{
	int64_t now = sw_mono_ns();

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

void sw_sconn_close(struct sw_sconn *c)
{
	struct sw_server *srv = c->srv;

	if (c->closing)
		return;
	c->closing = true;
	anon_unlink(c);
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

void sw_server_reap_stalled(struct sw_server *srv, int64_t limit_ns)
{
	int64_t now = sw_mono_ns();

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
	c->accepted_at = sw_mono_ns();
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
	if (rc == 0)
		return 0;
	sw_crit(tag, "cannot listen on %s:%u: %s", host, port, uv_strerror(rc));
out_close:
	uv_close((uv_handle_t *)&srv->listener, on_fail);
	return rc;
}

void sw_server_unlisten(struct sw_server *srv, uv_close_cb cb)
{
	srv->refusing = true;
	uv_close((uv_handle_t *)&srv->listener, cb);
}
