/*
 * progress: the redrawn status line (see progress.h). The rate is an
 * exponential moving average of the samples taken at each redraw (about
 * ten a second, weight 0.3), so that it follows a change of pace within a
 * second or two without jumping with every sample; the time left is what
 * remains at that rate. Each redraw is "\r" + the line + "erase to the end
 * of the line", written with one write(2), cut to the terminal's width so
 * that it never wraps (a wrapped line cannot be redrawn in place).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "progress.h"
#include "util.h"

#define REDRAW_NS (100 * 1000 * 1000)
#define RATE_WEIGHT 0.3
/* Longest label drawn: the numbers need the rest of an 80-column line. */
#define LABEL_MAX 24

static bool wanted(void)
{
	const char *env = getenv("SWEEPFS_PROGRESS");

	if (env && *env)
		return strcmp(env, "0") != 0;
	return isatty(STDERR_FILENO);
}

void progress_start(struct progress *p, const char *label, const char *unit,
		    uint64_t total)
{
	size_t n = strlen(label);

	memset(p, 0, sizeof(*p));
	/* A long label (a deep path) keeps its end, where the name is. */
	if (n > LABEL_MAX)
		snprintf(p->label, sizeof(p->label), "...%s",
			 label + n - (LABEL_MAX - 3));
	else
		snprintf(p->label, sizeof(p->label), "%s", label);
	p->unit = unit;
	p->total = total;
	p->on = wanted();
	p->t0 = sw_mono_ns();
	p->rate_t = p->t0;
	p->rate = -1;
}

void progress_set_total(struct progress *p, uint64_t total)
{
	p->total = total;
}

/* @v with thousands separators. */
static const char *grouped(uint64_t v, char *buf, size_t len)
{
	char digits[32], *o = buf;
	int n = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)v);

	for (int i = 0; i < n && (size_t)(o - buf) + 2 < len; i++) {
		if (i && (n - i) % 3 == 0)
			*o++ = ',';
		*o++ = digits[i];
	}
	*o = '\0';
	return buf;
}

size_t progress_format(char *buf, size_t len, const char *label,
		       const char *unit, uint64_t done, uint64_t total,
		       double rate, int width)
{
	char a[32], b[32], r[32];
	size_t n;

	if (len == 0)
		return 0;
	if (total)
		n = (size_t)snprintf(buf, len, "%s: %s/%s %s  %3d%%", label,
				     grouped(done, a, sizeof(a)),
				     grouped(total, b, sizeof(b)), unit,
				     (int)(100.0 * (double)SW_MIN(done, total) /
					   (double)total));
	else
		n = (size_t)snprintf(buf, len, "%s: %s %s", label,
				     grouped(done, a, sizeof(a)), unit);
	if (n < len && rate >= 0)
		n += (size_t)snprintf(buf + n, len - n, "  %s/s",
				      grouped((uint64_t)(rate + 0.5), r,
					      sizeof(r)));
	if (n < len && total && rate > 0 && done < total) {
		uint64_t s = (uint64_t)((double)(total - done) / rate + 0.5);

		n += (size_t)snprintf(buf + n, len - n,
				      "  ETA %llu:%02llu:%02llu",
				      (unsigned long long)(s / 3600),
				      (unsigned long long)(s / 60 % 60),
				      (unsigned long long)(s % 60));
	}
	if (n >= len)
		n = len - 1;
	if (width > 0 && n > (size_t)width) {
		n = (size_t)width;
		buf[n] = '\0';
	}
	return n;
}

static int term_width(void)
{
	struct winsize ws;

	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1)
		return ws.ws_col - 1;
	return 79;
}

static void draw(struct progress *p, uint64_t done, int64_t now)
{
	char line[512];
	size_t n;

	if (now > p->rate_t && done >= p->rate_done) {
		double sample = (double)(done - p->rate_done) * 1e9 /
				(double)(now - p->rate_t);

		p->rate = p->rate < 0 ? sample :
					RATE_WEIGHT * sample +
						(1 - RATE_WEIGHT) * p->rate;
		p->rate_t = now;
		p->rate_done = done;
	}
	line[0] = '\r';
	n = 1 + progress_format(line + 1, sizeof(line) - 8, p->label, p->unit,
				done, p->total, p->rate, term_width());
	memcpy(line + n, "\033[K", 3);
	n += 3;
	if (write(STDERR_FILENO, line, n) < 0)
		p->on = false;
	p->drawn = true;
	p->last = now;
}

void progress_update(struct progress *p, uint64_t done)
{
	int64_t now;

	if (!p->on)
		return;
	now = sw_mono_ns();
	if (now - p->last < REDRAW_NS)
		return;
	draw(p, done, now);
}

void progress_end(struct progress *p, uint64_t done)
{
	if (!p->on || (!p->drawn && done == 0))
		return;
	draw(p, done, sw_mono_ns());
	if (write(STDERR_FILENO, "\n", 1) < 0)
		p->on = false;
	p->drawn = false;
}
