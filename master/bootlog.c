/*
 * Progress lines of long start-up steps (bootlog.h). The rate is the
 * last interval's, not the average since the start: a step that slows
 * down (a table that outgrew the cache, a machine that got busy) shows
 * it. Counts are printed in millions with one decimal, as operators read
 * namespace sizes; below a million, whole.
 */
#include <inttypes.h>
#include <stdio.h>

#include "bootlog.h"
#include "log.h"
#include "util.h"

void bootlog_start(struct bootlog *b, const char *tag, const char *what,
		   const char *unit, uint64_t total, int64_t now)
{
	*b = (struct bootlog){
		.tag = tag,
		.what = what,
		.unit = unit,
		.total = total,
		.last = now,
	};
}

/* @v as "12.3 M", or whole below a million. */
static void count(char *buf, size_t len, double v)
{
	if (v >= 1e6)
		snprintf(buf, len, "%.1f M", v / 1e6);
	else
		snprintf(buf, len, "%.0f", v);
}

int bootlog_format(char *buf, size_t len, const struct bootlog *b,
		   uint64_t done, double rate)
{
	char d[32], t[32], r[32];

	count(d, sizeof(d), (double)done);
	count(r, sizeof(r), rate);
	if (!b->total)
		return snprintf(buf, len, "%s: %s %s, %s/s", b->what, d,
				b->unit, r);
	count(t, sizeof(t), (double)b->total);
	/* The total is an estimate: never claim more than 99% before the
	 * step's own closing line. */
	return snprintf(buf, len, "%s: %s of %s %s (%u%%), %s/s", b->what, d, t,
			b->unit, (unsigned)SW_MIN(99, done * 100 / b->total),
			r);
}

bool bootlog_check(struct bootlog *b, uint64_t done, int64_t now)
{
	char line[200];
	double rate;

	if (now - b->last < BOOTLOG_INTERVAL_NS)
		return false;
	rate = (double)(done - SW_MIN(done, b->last_done)) * 1e9 /
	       (double)(now - b->last);
	bootlog_format(line, sizeof(line), b, done, rate);
	sw_notice(b->tag, "%s", line);
	b->last = now;
	b->last_done = done;
	b->lines++;
	return true;
}

void bootlog_tick_slow(struct bootlog *b, uint64_t done)
{
	bootlog_check(b, done, sw_mono_ns());
}
