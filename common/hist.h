/*
 * Latency histograms with fixed buckets (10 µs .. 10 s), cheap enough to
 * count every request: the master's by request type, the changelog's
 * fdatasync, background slices. metrics.h writes them for Prometheus.
 * Not thread-safe: each has one writer, or its owner's lock.
 */
#ifndef SWEEPFS_COMMON_HIST_H
#define SWEEPFS_COMMON_HIST_H

#include <stdint.h>

/* Bucket bounds: 10 µs .. 10 s (sw_hist_bound_ns), then +Inf. */
#define SW_HIST_BUCKETS 19

struct sw_hist {
	uint64_t bucket[SW_HIST_BUCKETS + 1]; /* not cumulative; last +Inf */
	uint64_t count;
	uint64_t sum_ns;
};

extern const int64_t sw_hist_bound_ns[SW_HIST_BUCKETS];

/* Count one observation of @ns nanoseconds. */
void sw_hist_add(struct sw_hist *h, int64_t ns);

/* The value below which @q (0..1) of the observations fall, as the
 * upper bound of its bucket, in ns (0 when empty; INT64_MAX past 10 s). */
int64_t sw_hist_quantile(const struct sw_hist *h, double q);

#endif
