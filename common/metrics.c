/*
 * Metrics over HTTP (metrics.h): libmicrohttpd without a thread of its
 * own. MHD_USE_EPOLL gives one descriptor that is readable whenever MHD
 * has something to do; the loop watches it and calls MHD_run(), and a
 * timer covers MHD's own deadlines (idle connections).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "log.h"
#include "metrics.h"
#include "net.h"
#include "util.h"

/* A scraper is a trusted operator's tool, but the port may be reachable
 * by others: few connections, short lives, small requests. */
#define MAX_CONNS 16
#define CONN_TIMEOUT_S 10

struct sw_metrics {
	struct MHD_Daemon *d;
	uv_poll_t poll;
	uv_timer_t timer;
	sw_metrics_render_fn render;
	void *arg;
	const char *tag;
	uint16_t port;
	int closed; /* handles closed, of 2 */
};

static void run(struct sw_metrics *mx);

static void on_poll(uv_poll_t *h, int status, int events)
{
	(void)status;
	(void)events;
	run(h->data);
}

static void on_timer(uv_timer_t *t)
{
	run(t->data);
}

static void run(struct sw_metrics *mx)
{
	MHD_UNSIGNED_LONG_LONG ms;

	MHD_run(mx->d);
	/* 0 when MHD has more to do now: the next loop turn. */
	if (MHD_get_timeout(mx->d, &ms) == MHD_YES)
		uv_timer_start(&mx->timer, on_timer, ms, 0);
	else
		uv_timer_stop(&mx->timer);
}

static void on_closed(uv_handle_t *h)
{
	struct sw_metrics *mx = h->data;

	if (++mx->closed == 2)
		free(mx);
}

static enum MHD_Result answer(struct MHD_Connection *conn, unsigned status,
			      struct sw_buf *body, const char *type)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		sw_buf_used(body), body->data, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result rc;

	if (!resp) {
		sw_buf_release(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
					"GET, HEAD");
	rc = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **state)
{
	static const char text[] = "text/plain; charset=utf-8";
	struct sw_metrics *mx = cls;
	struct sw_buf body = SW_BUF_INIT;
	const char *why;

	(void)version;
	(void)upload;
	(void)upload_size;
	(void)state;
	if (strcmp(method, MHD_HTTP_METHOD_GET) &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD)) {
		why = "only GET /metrics is served here\n";
		sw_buf_add(&body, why, strlen(why));
		return answer(conn, MHD_HTTP_METHOD_NOT_ALLOWED, &body, text);
	}
	if (strcmp(url, "/metrics")) {
		why = "not found: the metrics are at /metrics\n";
		sw_buf_add(&body, why, strlen(why));
		return answer(conn, MHD_HTTP_NOT_FOUND, &body, text);
	}
	mx->render(mx->arg, &body);
	if (!sw_buf_used(&body)) {
		why = "out of memory\n";
		sw_buf_release(&body);
		sw_buf_add(&body, why, strlen(why));
		return answer(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, &body,
			      text);
	}
	return answer(conn, MHD_HTTP_OK, &body,
		      "text/plain; version=0.0.4; charset=utf-8");
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct sw_metrics *mx = cls;
	char msg[256];
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	sw_info(mx->tag, "metrics: %s", msg);
}

/* A listening socket on @host:@port; its port in *@bound. */
static int listen_on(const char *host, uint16_t port, uint16_t *bound)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE };
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct addrinfo *res;
	char service[8];
	int fd, on = 1, rc;

	snprintf(service, sizeof(service), "%u", port);
	rc = getaddrinfo(*host ? host : NULL, service, &hints, &res);
	if (rc)
		return rc == EAI_SYSTEM ? -errno : -EADDRNOTAVAIL;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    0);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) < 0 ||
	    bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		freeaddrinfo(res);
		return rc;
	}
	freeaddrinfo(res);
	*bound = ntohs(ss.ss_family == AF_INET6 ?
			       ((struct sockaddr_in6 *)&ss)->sin6_port :
			       ((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

int sw_metrics_start(uv_loop_t *loop, const char *listen, const char *tag,
		     sw_metrics_render_fn render, void *arg,
		     struct sw_metrics **out)
{
	struct sw_metrics *mx;
	const union MHD_DaemonInfo *info;
	struct sw_target t;
	int fd, rc;

	if (sw_target_parse(listen, 0, &t) < 0) {
		sw_crit(tag, "bad metrics_listen address: %s", listen);
		return -EINVAL;
	}
	mx = calloc(1, sizeof(*mx));
	if (!mx)
		return -ENOMEM;
	*mx = (struct sw_metrics){ .render = render, .arg = arg, .tag = tag };
	fd = listen_on(t.host, t.port, &mx->port);
	if (fd < 0) {
		sw_crit(tag, "cannot serve metrics on %s: %s", listen,
			strerror(-fd));
		free(mx);
		return fd;
	}
	/* MHD owns @fd from here, and closes it when stopped. */
	mx->d = MHD_start_daemon(
		MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request,
		mx, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNS,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONN_TIMEOUT_S,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, mx, MHD_OPTION_END);
	info = mx->d ? MHD_get_daemon_info(mx->d, MHD_DAEMON_INFO_EPOLL_FD) :
		       NULL;
	if (!info) {
		sw_crit(tag,
			"cannot serve metrics on %s: libmicrohttpd "
			"refused",
			listen);
		/* Not @fd's close: whether a daemon that failed to start
		 * closed it already depends on where it failed (a daemon
		 * whose start fails exits; the descriptor goes with it). */
		if (mx->d)
			MHD_stop_daemon(mx->d);
		free(mx);
		return -EIO;
	}
	uv_timer_init(loop, &mx->timer);
	mx->poll.data = mx->timer.data = mx;
	rc = uv_poll_init(loop, &mx->poll, info->epoll_fd);
	if (rc < 0) {
		sw_crit(tag, "metrics: %s", uv_strerror(rc));
		MHD_stop_daemon(mx->d);
		mx->closed = 1; /* the poll handle never was */
		uv_close((uv_handle_t *)&mx->timer, on_closed);
		return rc;
	}
	rc = uv_poll_start(&mx->poll, UV_READABLE, on_poll);
	if (rc < 0) {
		sw_crit(tag, "metrics: %s", uv_strerror(rc));
		sw_metrics_stop(mx);
		return rc;
	}
	sw_notice(tag, "metrics at http://%s%s%s:%u/metrics",
		  strchr(t.host, ':') ? "[" : "", *t.host ? t.host : "0.0.0.0",
		  strchr(t.host, ':') ? "]" : "", mx->port);
	*out = mx;
	return 0;
}

uint16_t sw_metrics_port(const struct sw_metrics *mx)
{
	return mx->port;
}

void sw_metrics_stop(struct sw_metrics *mx)
{
	if (!mx)
		return;
	/* Unwatched before MHD closes the descriptor. */
	uv_poll_stop(&mx->poll);
	MHD_stop_daemon(mx->d);
	uv_close((uv_handle_t *)&mx->poll, on_closed);
	uv_close((uv_handle_t *)&mx->timer, on_closed);
}

/* ---- the text format ---------------------------------------------------- */

static const char *const bound_text[SW_HIST_BUCKETS + 1] = {
	"1e-05",  "2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005", "0.001",
	"0.0025", "0.005",   "0.01",  "0.025",	"0.05",	   "0.1",    "0.25",
	"0.5",	  "1",	     "2.5",   "5",	"10",	   "+Inf",
};

static void put(struct sw_buf *b, const char *s)
{
	sw_buf_add(b, s, strlen(s));
}

static void putf(struct sw_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void putf(struct sw_buf *b, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		sw_buf_add(b, tmp, SW_MIN((size_t)n, sizeof(tmp) - 1));
}

/* @v escaped as the format asks: \\ and \n, and \" in a label value
 * (@quotes) but not in help text. */
static void put_escaped(struct sw_buf *b, const char *v, bool quotes)
{
	for (; *v; v++) {
		if (*v == '\\')
			put(b, "\\\\");
		else if (*v == '"' && quotes)
			put(b, "\\\"");
		else if (*v == '\n')
			put(b, "\\n");
		else
			sw_buf_add(b, v, 1);
	}
}

static void put_value(struct sw_buf *b, double v)
{
	if (v != v)
		put(b, "NaN");
	else if (v > 1e300 || v < -1e300)
		put(b, v > 0 ? "+Inf" : "-Inf");
	else if (v < 1e15 && v > -1e15 && v == (double)(int64_t)v)
		putf(b, "%" PRId64, (int64_t)v);
	else
		putf(b, "%.9g", v);
}

void sw_prom_head(struct sw_buf *b, const char *name, const char *type,
		  const char *help)
{
	putf(b, "# HELP %s ", name);
	put_escaped(b, help, false);
	putf(b, "\n# TYPE %s %s\n", name, type);
}

/* @name{labels,@extra_key="@extra_value"} */
static void put_series(struct sw_buf *b, const char *name,
		       const char *const *labels, const char *extra_key,
		       const char *extra_value)
{
	bool any = false;

	put(b, name);
	for (; labels && labels[0]; labels += 2) {
		put(b, any ? "," : "{");
		put(b, labels[0]);
		put(b, "=\"");
		put_escaped(b, labels[1] ? labels[1] : "", true);
		put(b, "\"");
		any = true;
	}
	if (extra_key) {
		put(b, any ? "," : "{");
		putf(b, "%s=\"%s\"", extra_key, extra_value);
		any = true;
	}
	if (any)
		put(b, "}");
	put(b, " ");
}

void sw_prom_sample(struct sw_buf *b, const char *name,
		    const char *const *labels, double v)
{
	put_series(b, name, labels, NULL, NULL);
	put_value(b, v);
	put(b, "\n");
}

void sw_prom_hist(struct sw_buf *b, const char *name, const char *const *labels,
		  const struct sw_hist *h)
{
	char series[128];
	uint64_t cum = 0;

	snprintf(series, sizeof(series), "%s_bucket", name);
	for (unsigned i = 0; i <= SW_HIST_BUCKETS; i++) {
		cum += h->bucket[i];
		put_series(b, series, labels, "le", bound_text[i]);
		put_value(b, (double)cum);
		put(b, "\n");
	}
	snprintf(series, sizeof(series), "%s_sum", name);
	sw_prom_sample(b, series, labels, (double)h->sum_ns / 1e9);
	snprintf(series, sizeof(series), "%s_count", name);
	sw_prom_sample(b, series, labels, (double)h->count);
}

void sw_prom_one(struct sw_buf *b, const char *name, const char *type,
		 const char *help, double v)
{
	sw_prom_head(b, name, type, help);
	sw_prom_sample(b, name, NULL, v);
}
