/*
 * Metrics for Prometheus: the text exposition format, served over HTTP
 * on an address of the daemon's choosing (its metrics_listen key, off by
 * default) by libmicrohttpd in a thread of its own. A scrape of GET
 * /metrics has the daemon's loop call its render function (a uv_async),
 * so rendering reads the daemon's state as any request handler does; it
 * writes the text with the sw_prom_*() helpers below.
 */
#ifndef SWEEPFS_COMMON_METRICS_H
#define SWEEPFS_COMMON_METRICS_H

#include <stdint.h>

#include <uv.h>

#include "buf.h"
#include "hist.h"

struct sw_metrics;

/* Write every metric into @out (sw_prom_*); runs on the loop thread. */
typedef void (*sw_metrics_render_fn)(void *arg, struct sw_buf *out);

/*
 * Serve metrics on @listen ("HOST:PORT") from @loop. 0 with *@out, or
 * -errno (logged under @tag).
 */
int sw_metrics_start(uv_loop_t *loop, const char *listen, const char *tag,
		     sw_metrics_render_fn render, void *arg,
		     struct sw_metrics **out);

/* The port it listens on. */
uint16_t sw_metrics_port(const struct sw_metrics *mx);

/* Stop serving (connections are dropped) and free, once the loop has
 * closed the handles. NULL is fine. */
void sw_metrics_stop(struct sw_metrics *mx);

/* ---- the text format ---------------------------------------------------- */

/* "# HELP" and "# TYPE" (counter, gauge, histogram) of metric @name. */
void sw_prom_head(struct sw_buf *b, const char *name, const char *type,
		  const char *help);

/*
 * One sample: @name, then @labels (NULL, or label pairs as an array of
 * key, value strings ending with NULL; values are escaped here), @v.
 */
void sw_prom_sample(struct sw_buf *b, const char *name,
		    const char *const *labels, double v);

/* A histogram's _bucket, _sum and _count samples, with @labels. */
void sw_prom_hist(struct sw_buf *b, const char *name, const char *const *labels,
		  const struct sw_hist *h);

/* Head and one unlabelled sample, for the many single gauges/counters. */
void sw_prom_one(struct sw_buf *b, const char *name, const char *type,
		 const char *help, double v);

#endif
