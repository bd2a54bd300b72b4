/*
 * Fixed-bucket latency histograms (hist.h).
 */
#include "hist.h"

const int64_t sw_hist_bound_ns[SW_HIST_BUCKETS] = {
	10000,	    25000,	50000,	    100000,	 250000,
	500000,	    1000000,	2500000,    5000000,	 10000000,
	25000000,   50000000,	100000000,  250000000,	 500000000,
	1000000000, 2500000000, 5000000000, 10000000000,
};

void sw_hist_add(struct sw_hist *h, int64_t ns)
{
	unsigned i = 0;

	if (ns < 0)
		ns = 0;
	while (i < SW_HIST_BUCKETS && ns > sw_hist_bound_ns[i])
		i++;
	h->bucket[i]++;
	h->count++;
	h->sum_ns += (uint64_t)ns;
}

int64_t sw_hist_quantile(const struct sw_hist *h, double q)
{
	uint64_t seen = 0, want;

	if (!h->count)
		return 0;
	want = (uint64_t)(q * (double)h->count);
	if ((double)want < q * (double)h->count)
		want++;
	for (unsigned i = 0; i < SW_HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= want && seen)
			return sw_hist_bound_ns[i];
	}
	return INT64_MAX;
}
