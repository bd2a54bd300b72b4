/*
 * metrics.h and hist.h: histogram buckets and quantiles, the text format
 * (escaping, cumulative buckets, numbers), and the endpoint served from a
 * libuv loop: /metrics, 404, 405, and stopping cleanly.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "metrics.h"

static void test_hist(void **state)
{
	struct sw_hist h = { 0 };

	(void)state;
	assert_int_equal(sw_hist_quantile(&h, 0.5), 0);
	sw_hist_add(&h, 5000);	  /* 5 µs: first bucket (<= 10 µs) */
	sw_hist_add(&h, 10000);	  /* on the bound: still the first */
	sw_hist_add(&h, 10001);	  /* just over: the second (25 µs) */
	sw_hist_add(&h, 3000000); /* 3 ms: the 5 ms bucket */
	sw_hist_add(&h, 20LL * 1000000000); /* 20 s: +Inf */
	sw_hist_add(&h, -5);		    /* a clock step: counted as 0 */
	assert_int_equal(h.count, 6);
	assert_int_equal(h.bucket[0], 3);
	assert_int_equal(h.bucket[1], 1);
	assert_int_equal(h.bucket[8], 1);
	assert_int_equal(h.bucket[SW_HIST_BUCKETS], 1);
	assert_int_equal(h.sum_ns,
			 5000 + 10000 + 10001 + 3000000 + 20LL * 1000000000);
	assert_int_equal(sw_hist_quantile(&h, 0.5), 10000);
	assert_int_equal(sw_hist_quantile(&h, 0.6), 25000);
	assert_int_equal(sw_hist_quantile(&h, 0.8), 5000000);
	assert_int_equal(sw_hist_quantile(&h, 1.0), INT64_MAX);
}

/* @b's text, NUL-terminated. */
static const char *text(struct sw_buf *b)
{
	sw_buf_add(b, "", 1);
	b->len--;
	return (const char *)sw_buf_head(b);
}

static void test_format(void **state)
{
	struct sw_buf b = SW_BUF_INIT;
	struct sw_hist h = { 0 };
	const char *t;

	(void)state;
	sw_prom_head(&b, "x_total", "counter", "Line one\nback\\slash");
	sw_prom_sample(&b, "x_total",
		       (const char *[]){ "type", "a\"b\\c\nd", "k", "v", NULL },
		       42);
	sw_prom_sample(&b, "y", NULL, 0.25);
	sw_prom_sample(&b, "z", NULL, 1e20);
	t = text(&b);
	assert_non_null(strstr(t, "# HELP x_total Line one\\nback\\\\slash\n"
				  "# TYPE x_total counter\n"));
	assert_non_null(
		strstr(t, "x_total{type=\"a\\\"b\\\\c\\nd\",k=\"v\"} 42\n"));
	assert_non_null(strstr(t, "\ny 0.25\n"));
	assert_non_null(strstr(t, "\nz 1e+20\n"));

	sw_buf_reset(&b);
	sw_hist_add(&h, 1000);
	sw_hist_add(&h, 40000);
	sw_prom_hist(&b, "lat_seconds", (const char *[]){ "op", "r", NULL },
		     &h);
	t = text(&b);
	/* Cumulative, with +Inf equal to the count. */
	assert_non_null(
		strstr(t, "lat_seconds_bucket{op=\"r\",le=\"1e-05\"} 1\n"));
	assert_non_null(
		strstr(t, "lat_seconds_bucket{op=\"r\",le=\"2.5e-05\"} 1\n"));
	assert_non_null(
		strstr(t, "lat_seconds_bucket{op=\"r\",le=\"5e-05\"} 2\n"));
	assert_non_null(
		strstr(t, "lat_seconds_bucket{op=\"r\",le=\"+Inf\"} 2\n"));
	assert_non_null(strstr(t, "lat_seconds_sum{op=\"r\"} 4.1e-05\n"));
	assert_non_null(strstr(t, "lat_seconds_count{op=\"r\"} 2\n"));
	sw_buf_release(&b);
}

static int renders;

static void render(void *arg, struct sw_buf *b)
{
	(void)arg;
	renders++;
	sw_prom_one(b, "t_renders", "counter", "Scrapes.", renders);
}

/* Ask @port for "@method @path" over HTTP/1.0 while running @loop; the
 * whole answer into @out. */
static void fetch(uv_loop_t *loop, uint16_t port, const char *method,
		  const char *path, char *out, size_t cap)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	char req[128];
	size_t have = 0;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 ||
		    errno == EINPROGRESS);
	for (int i = 0; i < 100; i++) { /* connected by the loop's accept */
		struct pollfd p = { .fd = fd, .events = POLLOUT };

		uv_run(loop, UV_RUN_NOWAIT);
		if (poll(&p, 1, 10) == 1)
			break;
	}
	snprintf(req, sizeof(req), "%s %s HTTP/1.0\r\n\r\n", method, path);
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	for (int i = 0; i < 5000; i++) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		uv_run(loop, UV_RUN_NOWAIT);
		if (poll(&p, 1, 1) != 1)
			continue;
		n = read(fd, out + have, cap - 1 - have);
		if (n <= 0)
			break; /* HTTP/1.0: the server closes when done */
		have += (size_t)n;
	}
	out[have] = '\0';
	close(fd);
}

/* A port nobody listens on now, as "127.0.0.1:PORT" into @addr. */
static void free_port(char *addr, size_t cap)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	snprintf(addr, cap, "127.0.0.1:%u", ntohs(a.sin_port));
	close(fd);
}

static void test_endpoint(void **state)
{
	struct sw_metrics *mx = NULL;
	uv_loop_t loop;
	char out[4096], addr[64];
	uint16_t port;

	(void)state;
	free_port(addr, sizeof(addr));
	uv_loop_init(&loop);
	assert_int_equal(sw_metrics_start(&loop, "", "test", render, NULL, &mx),
			 -EINVAL);
	assert_int_equal(
		sw_metrics_start(&loop, addr, "test", render, NULL, &mx), 0);
	port = sw_metrics_port(mx);
	assert_int_equal(port, atoi(strchr(addr, ':') + 1));

	fetch(&loop, port, "GET", "/metrics", out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.0 200") ?:
				strstr(out, "HTTP/1.1 200"));
	assert_non_null(strstr(out, "text/plain; version=0.0.4"));
	assert_non_null(strstr(out, "\r\n\r\n# HELP t_renders Scrapes.\n"
				    "# TYPE t_renders counter\n"
				    "t_renders 1\n"));
	fetch(&loop, port, "GET", "/metrics", out, sizeof(out));
	assert_non_null(strstr(out, "t_renders 2\n"));
	fetch(&loop, port, "GET", "/", out, sizeof(out));
	assert_non_null(strstr(out, " 404 "));
	fetch(&loop, port, "POST", "/metrics", out, sizeof(out));
	assert_non_null(strstr(out, " 405 "));
	assert_non_null(strstr(out, "Allow: GET, HEAD"));
	assert_int_equal(renders, 2);

	sw_metrics_stop(mx);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&loop), 0);
	/* The port is free again. */
	uv_loop_init(&loop);
	assert_int_equal(
		sw_metrics_start(&loop, addr, "test", render, NULL, &mx), 0);
	sw_metrics_stop(mx);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hist),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_endpoint),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
