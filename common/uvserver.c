/*
 * The shared part of the libuv servers (uvserver.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
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
