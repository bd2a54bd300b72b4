/*
 * Metrics over HTTP (metrics.h). libmicrohttpd runs in a thread of its
 * own (MHD_USE_INTERNAL_POLLING_THREAD); a scrape asks the daemon's loop
 * for the text through a uv_async and waits for it, so that rendering
 * runs on the loop thread and reads the daemon's state as a request
 * handler does, with no locks of the daemon's. (Driving MHD from the loop
 * itself, through its epoll descriptor, left a scrape unanswered now and
 * then on a loaded machine: MHD's edge-triggered connections then need
 * MHD_run() calls that nothing asked for.)
 *
 * Slow clients. Anyone who reaches the port may connect, and a client
 * that sends its request a byte at a time (slowloris) is never idle long
 * enough for MHD's inactivity timeout. So no client may hold a slot that
 * a scraper needs for long, whatever it sends:
 *  - a connection has REQUEST_DEADLINE_MS from its accept, or from its
 *    last answer, to send a whole request; a sweep on the loop
 *    (SWEEP_MS) shuts down the late ones (shutdown(2) on the socket MHD
 *    owns: MHD sees the end and closes it; the descriptor stays MHD's
 *    until its close notification, which takes the same lock as the
 *    sweep, so a reused descriptor is never shut down);
 *  - one address holds at most CONNS_PER_HOST connections;
 *  - past CONNS_MAX in all, a new connection evicts the oldest one of
 *    the address holding the most, when that address holds more than
 *    the newcomer's, and is refused otherwise: the heaviest client loses
 *    first, and a scraper from an address of its own always gets in.
 * The guard's table (conns[]) is shared by MHD's thread (accept policy,
 * connection notifications, requests) and the loop (the sweep), under mu.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "log.h"
#include "metrics.h"
#include "net.h"
#include "util.h"

/* A scraper is a trusted operator's tool, but the port may be reachable
 * by others: short lives, small requests, few connections per address.
 * A scrape (connect, GET, answer) takes milliseconds; 5 s is plenty for
 * a scraper across a slow network and little for an attacker. */
#define CONNS_MAX 32
#define CONNS_PER_HOST 4
/* MHD's own limit: room for evicted connections on their way out. */
#define CONN_SLOTS (CONNS_MAX + 16)
#define IDLE_TIMEOUT_S 5
#define REQUEST_DEADLINE_MS 5000
#define SWEEP_MS 500
/* How long a scrape waits for the loop to render (a busy loop: 503). */
#define RENDER_WAIT_S 10

/* One connection MHD has open, as the guard sees it. */
struct mconn {
	bool used;		    /* MHD notified its start, not its close */
	bool evicted;		    /* shut down by the guard, closing */
	int fd;			    /* MHD's socket, valid while used */
	int64_t since;		    /* accepted (for the oldest first) */
	int64_t deadline;	    /* its next request answered by then */
	struct sockaddr_storage ss; /* the client's address */
};

struct sw_metrics {
	struct MHD_Daemon *d;
	uv_async_t async;
	uv_timer_t sweep; /* the guard's deadlines */
	int open_handles; /* of async and sweep: freed at 0 */
	sw_metrics_render_fn render;
	void *arg;
	const char *tag;
	uint16_t port;

	/* Between MHD's thread and the loop: */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t asked;	   /* renders asked for */
	uint64_t rendered; /* asked when the last render was made */
	struct sw_buf text;
	bool stopping;
	struct mconn conns[CONN_SLOTS]; /* the guard's table */
	uint64_t evicted;		/* connections shut down, in all */
};

/* Loop thread: render for every scrape waiting. */
static void on_async(uv_async_t *h)
{
	struct sw_metrics *mx = h->data;
	struct sw_buf b = SW_BUF_INIT;
	uint64_t asked, evicted;

	pthread_mutex_lock(&mx->mu);
	asked = mx->asked;
	evicted = mx->evicted;
	pthread_mutex_unlock(&mx->mu);
	mx->render(mx->arg, &b);
	sw_prom_one(&b, "sweepfs_metrics_connections_closed_total", "counter",
		    "Connections to this endpoint closed for being slow or "
		    "for the heaviest address.",
		    (double)evicted);
	pthread_mutex_lock(&mx->mu);
	sw_buf_release(&mx->text);
	mx->text = b;
	mx->rendered = asked;
	pthread_cond_broadcast(&mx->cv);
	pthread_mutex_unlock(&mx->mu);
}

/* MHD's thread: the text, rendered by the loop after we asked, into
 * @out (allocated); false when the loop did not answer in time. */
static bool fetch_text(struct sw_metrics *mx, struct sw_buf *out)
{
	struct timespec until;
	uint64_t mine;
	bool ok = false;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += RENDER_WAIT_S;
	pthread_mutex_lock(&mx->mu);
	mine = ++mx->asked;
	uv_async_send(&mx->async);
	while (!mx->stopping && mx->rendered < mine &&
	       pthread_cond_timedwait(&mx->cv, &mx->mu, &until) == 0)
		;
	if (!mx->stopping && mx->rendered >= mine)
		ok = sw_buf_add(out, sw_buf_head(&mx->text),
				sw_buf_used(&mx->text)) == 0;
	pthread_mutex_unlock(&mx->mu);
	return ok;
}

static void on_closed(uv_handle_t *h)
{
	struct sw_metrics *mx = h->data;

	if (--mx->open_handles > 0)
		return;
	sw_buf_release(&mx->text);
	pthread_cond_destroy(&mx->cv);
	pthread_mutex_destroy(&mx->mu);
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

/* ---- the guard against slow clients (see the top) -------------------- */

/* Whether @a and @b are the same host (ports aside). */
static bool same_host(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->sa_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr,
			       sizeof(struct in6_addr));
	return false;
}

/* Live (not evicted) connections from @addr's host. Under mu. */
static unsigned host_conns(const struct sw_metrics *mx,
			   const struct sockaddr *addr)
{
	unsigned n = 0;

	for (size_t i = 0; i < CONN_SLOTS; i++) {
		const struct mconn *c = &mx->conns[i];

		n += c->used && !c->evicted &&
		     same_host((const struct sockaddr *)&c->ss, addr);
	}
	return n;
}

/* Shut @c down: MHD finds its end and closes it. Under mu. */
static void evict(struct sw_metrics *mx, struct mconn *c)
{
	shutdown(c->fd, SHUT_RDWR);
	c->evicted = true;
	mx->evicted++;
}

/*
 * Make room for a connection from a host holding @mine: evict the oldest
 * connection of the host holding the most, if it holds more than @mine.
 * False when there is none to evict. Under mu.
 */
static bool evict_heaviest(struct sw_metrics *mx, unsigned mine)
{
	struct mconn *victim = NULL;
	unsigned most = 0;

	for (size_t i = 0; i < CONN_SLOTS; i++) {
		struct mconn *c = &mx->conns[i];
		unsigned n;

		if (!c->used || c->evicted)
			continue;
		n = host_conns(mx, (const struct sockaddr *)&c->ss);
		if (n > most || (n == most && c->since < victim->since)) {
			most = n;
			victim = c;
		}
	}
	if (!victim || most <= mine)
		return false;
	evict(mx, victim);
	return true;
}

/* MHD's thread, before it takes a connection from @addr. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr,
				 socklen_t len)
{
	struct sw_metrics *mx = cls;
	unsigned live = 0, free_slots = 0, mine;
	enum MHD_Result rc = MHD_YES;

	(void)len;
	pthread_mutex_lock(&mx->mu);
	for (size_t i = 0; i < CONN_SLOTS; i++) {
		live += mx->conns[i].used && !mx->conns[i].evicted;
		free_slots += !mx->conns[i].used;
	}
	mine = host_conns(mx, addr);
	if (!free_slots || mine >= CONNS_PER_HOST)
		rc = MHD_NO;
	else if (live >= CONNS_MAX && !evict_heaviest(mx, mine))
		rc = MHD_NO;
	pthread_mutex_unlock(&mx->mu);
	return rc;
}

/* MHD's thread: a connection starts (a slot for it) or ends. */
static void on_connection(void *cls, struct MHD_Connection *conn,
			  void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct sw_metrics *mx = cls;
	struct mconn *c = *socket_context;
	const union MHD_ConnectionInfo *fd, *addr;

	pthread_mutex_lock(&mx->mu);
	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (c)
			c->used = false;
		*socket_context = NULL;
		goto out_unlock;
	}
	fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	addr = MHD_get_connection_info(conn,
				       MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	for (size_t i = 0; fd && addr && i < CONN_SLOTS; i++) {
		c = &mx->conns[i];
		if (c->used)
			continue;
		*c = (struct mconn){ .used = true,
				     .fd = fd->connect_fd,
				     .since = sw_mono_ns() };
		c->deadline = c->since + REQUEST_DEADLINE_MS * 1000000LL;
		memcpy(&c->ss, addr->client_addr,
		       addr->client_addr->sa_family == AF_INET6 ?
			       sizeof(struct sockaddr_in6) :
			       sizeof(struct sockaddr_in));
		*socket_context = c;
		break;
	}
out_unlock:
	pthread_mutex_unlock(&mx->mu);
}

/* MHD's thread: @conn was answered; its next request has until the
 * deadline again. */
static void renew(struct sw_metrics *mx, struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct mconn *c = ci ? ci->socket_context : NULL;

	if (!c)
		return;
	pthread_mutex_lock(&mx->mu);
	c->deadline = sw_mono_ns() + REQUEST_DEADLINE_MS * 1000000LL;
	pthread_mutex_unlock(&mx->mu);
}

/* Loop thread: shut down the connections past their deadline. */
static void on_sweep(uv_timer_t *t)
{
	struct sw_metrics *mx = t->data;
	int64_t now = sw_mono_ns();
	unsigned late = 0;

	pthread_mutex_lock(&mx->mu);
	for (size_t i = 0; i < CONN_SLOTS; i++) {
		struct mconn *c = &mx->conns[i];

		if (c->used && !c->evicted && c->deadline <= now) {
			evict(mx, c);
			late++;
		}
	}
	pthread_mutex_unlock(&mx->mu);
	if (late)
		sw_debug(mx->tag, "metrics: %u connection(s) too slow, closed",
			 late);
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
	renew(mx, conn);
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
	if (!fetch_text(mx, &body) || !sw_buf_used(&body)) {
		why = "the daemon did not render its metrics in time\n";
		sw_buf_release(&body);
		sw_buf_add(&body, why, strlen(why));
		return answer(conn, MHD_HTTP_SERVICE_UNAVAILABLE, &body, text);
	}
	renew(mx, conn);
	return answer(conn, MHD_HTTP_OK, &body,
		      "text/plain; version=0.0.4; charset=utf-8");
}

/* libmicrohttpd's messages: @fmt is its own format. */
__attribute__((format(printf, 2, 0))) static void
mhd_log(void *cls, const char *fmt, va_list ap)
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
	struct sw_target t;
	int fd, rc;

	if (sw_target_parse(listen, 0, &t) < 0 || t.naddrs != 1) {
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
	rc = uv_async_init(loop, &mx->async, on_async);
	if (rc < 0) {
		sw_crit(tag, "metrics: %s", uv_strerror(rc));
		close(fd);
		free(mx);
		return rc;
	}
	mx->async.data = mx;
	mx->open_handles = 1;
	pthread_mutex_init(&mx->mu, NULL);
	sw_cond_init_mono(&mx->cv);
	/* MHD owns @fd from here, and closes it when stopped. */
	mx->d = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
			MHD_USE_ERROR_LOG,
		0, on_accept, mx, on_request, mx, MHD_OPTION_EXTERNAL_LOGGER,
		mhd_log, mx, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONN_SLOTS,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)CONNS_PER_HOST,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, mx,
		MHD_OPTION_END);
	if (!mx->d) {
		/* Not @fd's close: whether a daemon that failed to start
		 * closed it already depends on where it failed (a daemon
		 * whose start fails exits; the descriptor goes with it). */
		sw_crit(tag,
			"cannot serve metrics on %s: libmicrohttpd "
			"refused",
			listen);
		uv_close((uv_handle_t *)&mx->async, on_closed);
		return -EIO;
	}
	uv_timer_init(loop, &mx->sweep);
	mx->sweep.data = mx;
	mx->open_handles++;
	uv_timer_start(&mx->sweep, on_sweep, SWEEP_MS, SWEEP_MS);
	/* The sweep alone keeps no loop running. */
	uv_unref((uv_handle_t *)&mx->sweep);
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
	/* A scrape waiting for the loop (this thread) gives up at once. */
	pthread_mutex_lock(&mx->mu);
	mx->stopping = true;
	pthread_cond_broadcast(&mx->cv);
	pthread_mutex_unlock(&mx->mu);
	MHD_stop_daemon(mx->d);
	uv_timer_stop(&mx->sweep);
	uv_close((uv_handle_t *)&mx->sweep, on_closed);
	uv_close((uv_handle_t *)&mx->async, on_closed);
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
