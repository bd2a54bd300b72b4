/*
 * Deletion pacing: foreground first, deletions at full speed otherwise.
 *
 * The signal is what clients see: the mean latency of the reads (and,
 * apart, the writes) this server answered during a tick, against its
 * baseline, the same mean over ticks when no deletion ran (a slow
 * average, so one odd tick does not set it). Deletions that make the
 * clients' requests 1.3 times slower than that (DELPACE_SLOW_TENTHS)
 * halve the share of time the deletion threads may use, down to the
 * floor (the chunkserver's delete_share_min); each tick that does not
 * gives back DELPACE_STEP, up to DELPACE_SERVED: AIMD, as TCP shares a
 * link. With no client request in a tick there is nobody to yield to:
 * the full share at once.
 *
 * Why latency and not the disk's queue or the CPU: on a shared VM
 * neither says what slows our own clients (last session's fixed cap on
 * the CPU share made deletions 2-3x slower and the reader no faster;
 * the idle I/O class does nothing with the `none` scheduler). Latency is
 * the thing to protect, measured where it is served.
 *
 * Why at most half while clients are served, and a floor of half by
 * default, which is the former fixed share: measured side by side on
 * the shared 2-core VM (bench/reclaim.py --files 20000, a reader and a
 * writer, load average about 20), neither more nor less helped. Up to
 * all of it (a mean share of 0.58-0.64) gave 574-937 chunk files/s
 * against 758-1,257 for the fixed half in four pairs, and the reader
 * 0.60-0.76 of its idle speed against 0.87-1.36 (a fourth pair's idle
 * figure was 84 MB/s); a floor of 1/32 (a mean share of 0.20-0.45) gave
 * 365-1,057 against 688-991 in four pairs and the reader no better
 * (its idle figure alone ranged from 84 to 554 MB/s between runs). So
 * the default is the former behaviour, and the back-off below half is
 * there for an operator who wants readers first at any cost
 * (delete_share_min), with /metrics showing the share.
 *
 * The baseline may be stale (the machine got busier since, and stays
 * so whether we delete or not): while the share is at its floor and the
 * clients are still slow, the baseline moves towards what they see, so
 * deletions do not crawl for good because of someone else's load.
 *
 * Requests of a kind fewer than SAMPLES_MIN in a tick tell nothing about
 * that kind (one odd request is noise), but count as a client present.
 */
#include "delpace.h"

#include "util.h"

/* Slower than this, in tenths of the baseline: deletions hurt. Not
 * tuned: on the loaded VM a share with a floor of 1/32 went up and down
 * between 0.15 and 0.9 every few seconds with it (the bench's timeline),
 * so it does react; whether 1.5 would hold readers as well is not
 * measured. */
#define DELPACE_SLOW_TENTHS 13
/* Given back per tick without harm: from the lowest floor to half in
 * about 3 s at a 200 ms tick. */
#define DELPACE_STEP (DELPACE_FULL / 32)
#define SAMPLES_MIN 4
/* Weights of a new tick's mean in the baseline: 1/8 while no deletion
 * ran, 1/16 while the share is at its floor and clients are still slow. */
#define BASE_SHIFT_IDLE 3
#define BASE_SHIFT_DRIFT 4

void delpace_init(struct delpace *p, uint32_t floor)
{
	*p = (struct delpace){
		.floor = SW_MIN(SW_MAX(floor, DELPACE_MIN), DELPACE_FULL),
		.share = DELPACE_FULL,
	};
}

void delpace_fg(struct delpace *p, enum delpace_kind kind, int64_t ns)
{
	if (kind >= DELPACE_KINDS || ns < 0)
		return;
	p->sum_ns[kind] += ns;
	p->n[kind]++;
}

static void base_move(int64_t *base, int64_t mean, unsigned shift)
{
	if (!*base)
		*base = mean;
	else
		*base += (mean - *base) / (1 << shift);
}

static bool slow(int64_t mean, int64_t base)
{
	return base > 0 && mean * 10 > base * DELPACE_SLOW_TENTHS;
}

/* At the floor and still slow: the baselines follow what clients see. */
static void drift(struct delpace *p, const int64_t *mean)
{
	for (int k = 0; k < DELPACE_KINDS; k++)
		if (mean[k] && slow(mean[k], p->base_ns[k]))
			base_move(&p->base_ns[k], mean[k], BASE_SHIFT_DRIFT);
}

uint32_t delpace_tick(struct delpace *p)
{
	uint64_t deleted =
		__atomic_exchange_n(&p->deleted, 0, __ATOMIC_RELAXED);
	uint32_t share = __atomic_load_n(&p->share, __ATOMIC_RELAXED);
	bool clients = false, hurt = false;
	int64_t mean[DELPACE_KINDS] = { 0 };

	for (int k = 0; k < DELPACE_KINDS; k++) {
		if (p->n[k])
			clients = true;
		if (p->n[k] < SAMPLES_MIN)
			continue;
		mean[k] = p->sum_ns[k] / p->n[k];
		if (!deleted)
			base_move(&p->base_ns[k], mean[k], BASE_SHIFT_IDLE);
		else if (slow(mean[k], p->base_ns[k]))
			hurt = true;
	}
	if (!clients)
		share = DELPACE_FULL;
	else if (hurt && share <= p->floor)
		drift(p, mean);
	else if (hurt)
		share = SW_MAX(share / 2, p->floor);
	else if (deleted)
		share += DELPACE_STEP;
	if (clients)
		share = SW_MIN(share, SW_MAX(DELPACE_SERVED, p->floor));
	for (int k = 0; k < DELPACE_KINDS; k++) {
		p->sum_ns[k] = 0;
		p->n[k] = 0;
	}
	__atomic_store_n(&p->share, share, __ATOMIC_RELAXED);
	return share;
}

void delpace_deleted(struct delpace *p, uint32_t n)
{
	__atomic_add_fetch(&p->deleted, n, __ATOMIC_RELAXED);
}

int64_t delpace_pause_ns(const struct delpace *p, int64_t spent_ns)
{
	uint32_t share = delpace_share(p);
	int64_t pause;

	if (spent_ns <= 0 || share >= DELPACE_FULL)
		return 0;
	if (spent_ns >= DELPACE_PAUSE_MAX_NS)
		return DELPACE_PAUSE_MAX_NS;
	pause = spent_ns * (int64_t)(DELPACE_FULL - share) / (int64_t)share;
	return SW_MIN(pause, DELPACE_PAUSE_MAX_NS);
}

uint32_t delpace_share(const struct delpace *p)
{
	uint32_t share = __atomic_load_n(&p->share, __ATOMIC_RELAXED);

	return SW_MAX(share, p->floor);
}
