/*
 * Token buckets (bucket.h). The bucket keeps no rate of its own, so that
 * one struct bucket per session costs 16 bytes whatever the rule, and a
 * rule changed in the code applies to every bucket at once. Time comes
 * from the caller: one clock read serves several buckets paid together
 * (a session's and everyone's), and tests give any time they like.
 */
#include "bucket.h"

double bucket_fill(struct bucket *b, const struct bucket_rule *rule,
		   int64_t now)
{
	double tokens;

	if (!b->at) {
		tokens = rule->cap;
	} else {
		tokens = b->tokens + rule->rate * (double)(now - b->at) / 1e9;
		if (tokens > rule->cap)
			tokens = rule->cap;
	}
	b->tokens = tokens;
	b->at = now;
	return tokens;
}

bool bucket_take(struct bucket *b, const struct bucket_rule *rule, double cost,
		 int64_t now)
{
	if (bucket_fill(b, rule, now) < cost)
		return false;
	b->tokens -= cost;
	return true;
}

void bucket_spend(struct bucket *b, double cost)
{
	b->tokens = b->tokens > cost ? b->tokens - cost : 0;
}
