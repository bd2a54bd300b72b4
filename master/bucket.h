/*
 * bucket: a token bucket, what bounds the share of the loop (or the
 * rate of anything) one session, or everyone, may take: it refills at
 * a rate up to a cap, and work is paid from it. Plain data, no clock of
 * its own (callers pass the monotonic time), no allocation; not
 * thread-safe. Users: deleg.c (visits of grants), rmr.c (visits of a
 * user's permission walk), session.c (reclaim walks).
 */
#ifndef SWEEPFS_MASTER_BUCKET_H
#define SWEEPFS_MASTER_BUCKET_H

#include <stdbool.h>
#include <stdint.h>

/* A bucket's state. Zeroed, it is full at its first fill. */
struct bucket {
	double tokens; /* what it held at @at */
	int64_t at;    /* mono ns of the last refill; 0: never (full) */
};

/* How a kind of bucket refills: the same for every bucket of a kind. */
struct bucket_rule {
	double rate; /* tokens a second */
	double cap;  /* what it holds at most (> 0) */
};

/* Refill @b by @rule's rate for the time since its last refill, up to
 * the cap, as of @now (mono ns; a bucket never filled is full): what it
 * holds. */
double bucket_fill(struct bucket *b, const struct bucket_rule *rule,
		   int64_t now);

/* bucket_fill(), then take @cost if it holds that much: whether it
 * could pay (nothing is taken when it could not). */
bool bucket_take(struct bucket *b, const struct bucket_rule *rule, double cost,
		 int64_t now);

/* Take @cost, work already done, from a bucket filled just before (it
 * does not refill): down to empty at most, never below, so that work
 * done past what it held is not owed later. */
void bucket_spend(struct bucket *b, double cost);

#endif
