/*
 * sweepfs top: a live view of the master, redrawn every second (as
 * `juicefs stats` and `mfscli -S` give): requests per second by type and
 * by client, the purge and the chunk deletions with their rates and when
 * they should be done, and the slowest requests of the last seconds.
 *
 * Each refresh is one INFO request; rates are the differences between
 * two. On a terminal the screen is redrawn in place (alternate screen,
 * 'q' or ^C quits); otherwise, or with -b, frames are printed one after
 * the other, like `top -b`, -n of them.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "tool.h"
#include "util.h"

#define TOP_ROWS 10 /* types and clients shown */

static volatile sig_atomic_t top_stop, top_suspend;

static void on_signal(int sig)
{
	if (sig == SIGTSTP)
		top_suspend = 1;
	else
		top_stop = 1;
}

/* The terminal while top runs: its own screen, no cursor, keys one at a
 * time without echo; and back as it was. */
struct term {
	bool on;
	bool saved_ok;
	struct termios saved;
};

static void term_enter(struct term *t)
{
	struct termios raw;

	t->saved_ok = tcgetattr(STDIN_FILENO, &t->saved) == 0;
	if (t->saved_ok) {
		raw = t->saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	}
	fputs("\033[?1049h\033[?25l", stdout);
	fflush(stdout);
	t->on = true;
}

static void term_leave(struct term *t)
{
	if (!t->on)
		return;
	fputs("\033[?25h\033[?1049l", stdout);
	fflush(stdout);
	if (t->saved_ok)
		tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
	t->on = false;
}

/* Every way a person stops or interrupts it leaves the terminal as it
 * was; on one (@tty), ^Z gives it back until fg. */
static void catch_signals(bool tty)
{
	struct sigaction sa = { .sa_handler = on_signal };
	const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP };

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < SW_ARRAY_SIZE(sigs) - !tty; i++)
		sigaction(sigs[i], &sa, NULL);
}

/* ^Z: the terminal back, stop; after fg, top's screen again. */
static void suspend(struct term *t)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };

	top_suspend = 0;
	term_leave(t);
	sigemptyset(&dfl.sa_mask);
	sigaction(SIGTSTP, &dfl, NULL);
	raise(SIGTSTP); /* stopped here until SIGCONT */
	catch_signals(true);
	term_enter(t);
}

/* One frame: lines, each cut to the terminal's width when drawn. */
struct screen {
	char line[64][160];
	int n;
};

static void put(struct screen *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put(struct screen *s, const char *fmt, ...)
{
	va_list ap;

	if (s->n == (int)SW_ARRAY_SIZE(s->line))
		return;
	va_start(ap, fmt);
	vsnprintf(s->line[s->n++], sizeof(s->line[0]), fmt, ap);
	va_end(ap);
}

/* @v with thousands separators ("12,345"), or with one decimal under 10. */
static const char *num(double v, char *buf, size_t len)
{
	char digits[32];
	size_t n, out = 0;

	if (v > -10 && v < 10 && v != (double)(int64_t)v) {
		snprintf(buf, len, "%.1f", v);
		return buf;
	}
	n = (size_t)snprintf(digits, sizeof(digits), "%.0f", v);
	for (size_t i = 0; i < n && out + 2 < len; i++) {
		if (i && digits[i - 1] != '-' && (n - i) % 3 == 0)
			buf[out++] = ',';
		buf[out++] = digits[i];
	}
	buf[out] = '\0';
	return buf;
}

/* "1h02m", "3m05s", "12s" */
static const char *dur(uint64_t ms, char *buf, size_t len)
{
	uint64_t s = (ms + 999) / 1000;

	if (s >= 3600)
		snprintf(buf, len, "%" PRIu64 "h%02" PRIu64 "m", s / 3600,
			 s / 60 % 60);
	else if (s >= 60)
		snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s", s / 60,
			 s % 60);
	else
		snprintf(buf, len, "%" PRIu64 "s", s);
	return buf;
}

static uint64_t sum_requests(const Sweepfs__Counters *c)
{
	uint64_t n = 0;

	for (size_t i = 0; c && i < c->n_requests; i++)
		n += c->requests[i];
	return n;
}

/* The same session in the previous sample, or NULL. */
static const Sweepfs__SessionInfo *prev_session(const Sweepfs__InfoReply *prev,
						uint64_t id)
{
	for (size_t i = 0; prev && i < prev->n_sessions; i++)
		if (prev->sessions[i]->id == id)
			return prev->sessions[i];
	return NULL;
}

/*
 * @p if it came from the master process @r came from, else NULL: after a
 * restart or a group's failover the new master's counters start again
 * from 0, and differences with the old one's are no rates (a deletion
 * rate of 0 or a fraction of the real one, and an ETA to match).
 */
static const Sweepfs__InfoReply *same_master(const Sweepfs__InfoReply *r,
					     const Sweepfs__InfoReply *p)
{
	if (!p || p->has_started_at != r->has_started_at ||
	    p->started_at != r->started_at)
		return NULL;
	return p;
}

struct rank {
	double rate;
	size_t i;
};

static int by_rate(const void *a, const void *b)
{
	const struct rank *x = a, *y = b;

	return (x->rate < y->rate) - (x->rate > y->rate);
}

static void header(struct screen *s, const Sweepfs__InfoReply *r,
		   const Sweepfs__InfoReply *p, double dt, const char *where)
{
	char b1[32], b2[32], b3[32], b4[32], now[16];
	double reqs = 0, errs = 0, in = 0, out = 0;
	uint64_t up = r->uptime_ms / 1000, mounts = 0;
	time_t t = time(NULL);

	strftime(now, sizeof(now), "%H:%M:%S", localtime(&t));
	if (p && p->total && r->total) {
		reqs = (double)(sum_requests(r->total) -
				sum_requests(p->total)) /
		       dt;
		errs = (double)(r->total->errors - p->total->errors) / dt;
		in = (double)(r->total->bytes_in - p->total->bytes_in) / dt;
		out = (double)(r->total->bytes_out - p->total->bytes_out) / dt;
	}
	for (size_t i = 0; i < r->n_sessions; i++)
		mounts += r->sessions[i]->role == SWEEPFS__ROLE__ROLE_MOUNT;
	put(s,
	    "sweepfs top - master %s %s, up %" PRIu64 "d %02" PRIu64
	    ":%02" PRIu64 ", %s",
	    where, r->server_version ? r->server_version : "?", up / 86400,
	    up / 3600 % 24, up / 60 % 60, now);
	put(s,
	    "requests %s/s  errors %s/s  in %s/s  out %s/s  sessions %" PRIu64
	    " (%" PRIu64 " mounts)  delegations %" PRIu64,
	    num(reqs, b1, sizeof(b1)), num(errs, b2, sizeof(b2)),
	    fmt_bytes((uint64_t)in, b3, sizeof(b3)),
	    fmt_bytes((uint64_t)out, b4, sizeof(b4)), r->sessions_total, mounts,
	    r->delegations);
	put(s,
	    "namespace %s nodes, %s B/node resident, trash %" PRIu64
	    " items, changelog at %" PRIu64 " (durable %" PRIu64 ")",
	    num((double)r->nodes, b1, sizeof(b1)),
	    num(r->nodes ? (double)r->rss_bytes / (double)r->nodes : 0, b2,
		sizeof(b2)),
	    r->trash_items, r->meta_version, r->durable_version);
}

/* Deletions a second server @x acknowledged since frame @p (NULL: the
 * first frame, 0), matched by address: a master that restarted between
 * the frames may list its servers in another order. */
static double server_rate(const Sweepfs__ServerInfo *x,
			  const Sweepfs__InfoReply *p, double dt)
{
	for (size_t i = 0; p && x->listen && i < p->n_servers; i++) {
		const Sweepfs__ServerInfo *y = p->servers[i];

		if (y->listen && !strcmp(x->listen, y->listen))
			return x->deleted >= y->deleted ?
				       (double)(x->deleted - y->deleted) / dt :
				       0;
	}
	return 0;
}

/* "done in ETA" for @pending at @rate a second, "?" at no rate yet. */
static const char *eta_of(uint64_t pending, double rate, char *buf, size_t len)
{
	if (rate <= 0) {
		snprintf(buf, len, "?");
		return buf;
	}
	return dur((uint64_t)((double)pending / rate * 1000), buf, len);
}

static void background(struct screen *s, const Sweepfs__InfoReply *r,
		       const Sweepfs__InfoReply *p, double dt)
{
	char b1[32], b2[32], b3[32], eta[32];
	uint64_t deleted = 0, pdeleted = 0;
	double drate;

	put(s, "%s", "");
	if (r->purge_left)
		put(s,
		    "purge      %s nodes left in %" PRIu64
		    " trees, %s/s, done in %s",
		    num((double)r->purge_left, b1, sizeof(b1)), r->purge_roots,
		    num(r->purge_rate, b2, sizeof(b2)),
		    r->has_purge_eta_ms ?
			    dur(r->purge_eta_ms, eta, sizeof(eta)) :
			    "?");
	else
		put(s, "purge      idle (%s nodes purged since start)",
		    num((double)r->purged, b1, sizeof(b1)));
	for (size_t i = 0; i < r->n_servers; i++)
		deleted += r->servers[i]->deleted;
	for (size_t i = 0; p && i < p->n_servers; i++)
		pdeleted += p->servers[i]->deleted;
	drate = p && deleted >= pdeleted ? (double)(deleted - pdeleted) / dt :
					   0;
	if (r->chunk_deletes_pending) {
		put(s, "chunks     %s deletions pending, %s/s, done in %s",
		    num((double)r->chunk_deletes_pending, b1, sizeof(b1)),
		    num(drate, b2, sizeof(b2)),
		    eta_of(r->chunk_deletes_pending, drate, eta, sizeof(eta)));
		for (size_t i = 0; i < r->n_servers && i < 4; i++) {
			const Sweepfs__ServerInfo *x = r->servers[i];
			double rate = server_rate(x, p, dt);

			put(s,
			    "             %-24s %s pending, %s/s, done in %s%s",
			    x->listen ? x->listen : "?",
			    num((double)x->deletes_pending, b3, sizeof(b3)),
			    num(rate, b2, sizeof(b2)),
			    eta_of(x->deletes_pending, rate, eta, sizeof(eta)),
			    x->connected ? "" : " (away)");
		}
	} else {
		put(s, "chunks     no deletions pending (%s chunks)",
		    num((double)r->chunks, b1, sizeof(b1)));
	}
	if (r->chunks_missing || r->chunks_undergoal || r->chunks_overgoal ||
	    r->chunks_goal_unreachable)
		put(s,
		    "health     %" PRIu64 " MISSING, %" PRIu64
		    " endangered, %" PRIu64 " under goal, %" PRIu64
		    " over, %" PRIu64 " goal unreachable",
		    r->chunks_missing, r->chunks_endangered,
		    r->chunks_undergoal, r->chunks_overgoal,
		    r->chunks_goal_unreachable);
	else if (r->has_health_age_ms)
		put(s, "health     all chunks at their goal");
	if (r->snapshot_id)
		put(s,
		    "snapshot   %016" PRIx64 ": %s nodes copied, %" PRIu64
		    " waiting",
		    r->snapshot_id,
		    num((double)r->snapshot_nodes, b1, sizeof(b1)),
		    r->snapshots_waiting);
}

/* Two columns: requests/s by type, and by client. */
static void rates(struct screen *s, const Sweepfs__InfoReply *r,
		  const Sweepfs__InfoReply *p, double dt)
{
	struct rank types[SW_MSG__COUNT], clients[TOP_ROWS * 100];
	size_t nt = 0, nc = 0;
	char b1[32], b2[32], left[80];

	for (size_t t = 0; r->total && p && p->total &&
			   t < r->total->n_requests && t < p->total->n_requests;
	     t++) {
		double v = (double)(r->total->requests[t] -
				    p->total->requests[t]) /
			   dt;

		if (v > 0 && nt < SW_ARRAY_SIZE(types))
			types[nt++] = (struct rank){ v, t };
	}
	for (size_t i = 0; i < r->n_sessions && nc < SW_ARRAY_SIZE(clients);
	     i++) {
		const Sweepfs__SessionInfo *was =
			prev_session(p, r->sessions[i]->id);
		uint64_t now = sum_requests(r->sessions[i]->counters);
		uint64_t then = was ? sum_requests(was->counters) : now;

		if (now > then)
			clients[nc++] =
				(struct rank){ (double)(now - then) / dt, i };
	}
	qsort(types, nt, sizeof(types[0]), by_rate);
	qsort(clients, nc, sizeof(clients[0]), by_rate);
	put(s, "%s", "");
	put(s, "%-32s %s", "REQUESTS/S BY TYPE", "REQUESTS/S BY CLIENT");
	for (size_t k = 0; k < TOP_ROWS && (k < nt || k < nc); k++) {
		left[0] = '\0';
		if (k < nt) {
			const struct sw_msg_info *info =
				sw_msg_info((uint16_t)types[k].i);

			snprintf(left, sizeof(left), "%-14s %10s",
				 info ? info->name : "?",
				 num(types[k].rate, b1, sizeof(b1)));
		}
		if (k < nc) {
			const Sweepfs__SessionInfo *si =
				r->sessions[clients[k].i];

			put(s, "%-32s %-28.28s %10s", left,
			    si->name && *si->name ? si->name :
			    si->peer		  ? si->peer :
						    "?",
			    num(clients[k].rate, b2, sizeof(b2)));
		} else {
			put(s, "%s", left);
		}
	}
	if (!nt && !nc)
		put(s, "(no requests)");
}

static void slowest(struct screen *s, const Sweepfs__InfoReply *r)
{
	put(s, "%s", "");
	put(s, "SLOWEST REQUESTS (last 10 s)");
	if (!r->n_slowest)
		put(s, "(none)");
	for (size_t i = 0; i < r->n_slowest && i < 5; i++) {
		const Sweepfs__SlowRequest *q = r->slowest[i];
		const struct sw_msg_info *info = sw_msg_info((uint16_t)q->type);

		char who[32];

		/* A session that has ended has no name any more; other
		 * sessions' requests reach admin root only (a limited
		 * reply holds the caller's own). */
		if (q->has_session_id)
			snprintf(who, sizeof(who), "session %08" PRIx64,
				 q->session_id >> 32);
		else
			snprintf(who, sizeof(who), "another session");
		put(s, "%10.3f ms  %-12s %-28.28s %4" PRIu64 " s ago",
		    (double)q->us / 1000, info ? info->name : "?",
		    q->client && *q->client ? q->client : who,
		    q->age_ms / 1000);
	}
}

/* An INFO as the caller; -EPERM when it is not admin root (a reply
 * `limited`: no counters to show). */
static int fetch(struct sw_client *c, Sweepfs__InfoReply **out)
{
	Sweepfs__InfoReq q = SWEEPFS__INFO_REQ__INIT;
	struct tool_caller who;
	int rc;

	q.has_sessions = q.sessions = 1;
	q.cred = tool_caller(&who);
	rc = tool_call(c, SW_MSG_INFO, &q.base, (ProtobufCMessage **)out);
	if (rc == 0 && (*out)->limited) {
		protobuf_c_message_free_unpacked(&(*out)->base, NULL);
		*out = NULL;
		rc = -EPERM;
	}
	return rc;
}

/* Draw @s: in place on a terminal, else as a block of lines. */
static void draw(const struct screen *s, bool tty)
{
	struct winsize ws = { 0 };
	int cols = 160, rows = 64;

	if (tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col) {
		cols = ws.ws_col;
		rows = ws.ws_row;
	}
	if (tty)
		fputs("\033[H", stdout);
	for (int i = 0; i < s->n && i < rows; i++) {
		printf("%.*s", cols, s->line[i]);
		fputs(tty ? "\033[K" : "", stdout);
		if (!tty || i + 1 < SW_MIN(s->n, rows))
			putchar('\n');
	}
	fputs(tty ? "\033[J" : "\n", stdout);
	fflush(stdout);
}

/* Wait @ms, or less if 'q' is typed or a signal comes: false to stop. */
static bool pause_ms(int ms, bool tty)
{
	struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
	char ch;

	if (!tty) {
		struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

		nanosleep(&ts, NULL);
		return !top_stop;
	}
	while (!top_stop && poll(&p, 1, ms) > 0) {
		if (read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q'))
			return false;
		ms = 100; /* another key: redraw soon */
		break;
	}
	return !top_stop;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: sweepfs top [-b] [-d SECONDS] [-n FRAMES] [PATH]\n"
		   "  -b  batch: frames one after the other, no screen "
		   "control\n"
		   "  -d  seconds between frames (default 1)\n"
		   "  -n  stop after this many frames\n");
}

int cmd_top(int argc, char **argv)
{
	Sweepfs__InfoReply *cur = NULL, *prev = NULL;
	const Sweepfs__InfoReply *base;
	struct term term = { .on = false };
	struct sw_target t;
	struct sw_client *c = NULL;
	double delay = 1, dt;
	long frames = -1;
	bool batch = false, tty;
	int64_t t_prev = 0;
	char where[300];
	int opt, rc = 0;

	optind = 1;
	while ((opt = getopt(argc, argv, "bd:n:h")) != -1) {
		switch (opt) {
		case 'b':
			batch = true;
			break;
		case 'd':
			delay = atof(optarg);
			break;
		case 'n':
			frames = atol(optarg);
			break;
		case 'h':
			usage(stdout);
			return TOOL_OK;
		default:
			usage(stderr);
			return TOOL_USAGE;
		}
	}
	if (delay < 0.1 || delay > 3600 || frames == 0 || argc - optind > 1) {
		usage(stderr);
		return TOOL_USAGE;
	}
	if (tool_target(optind < argc ? argv[optind] : NULL, &t) < 0 ||
	    tool_connect_target(&t, &c) < 0)
		return TOOL_FAILED;
	snprintf(where, sizeof(where), "%s", c->master); /* of a list: which */
	tty = !batch && isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
	catch_signals(tty);
	if (tty)
		term_enter(&term);
	/* The first sample only starts the rates. */
	rc = fetch(c, &prev);
	t_prev = sw_mono_ns();
	if (rc == 0 && tty) {
		struct screen s = { .n = 0 };

		header(&s, prev, NULL, 1, where);
		put(&s, "(measuring...)");
		draw(&s, tty);
	}
	for (long n = 0; rc == 0 && (frames < 0 || n < frames); n++) {
		struct screen s = { .n = 0 };
		int64_t now;

		if (!pause_ms((int)(delay * 1000), tty))
			break;
		if (top_suspend && tty)
			suspend(&term);
		rc = fetch(c, &cur);
		if (rc < 0)
			break;
		now = sw_mono_ns();
		dt = (double)(now - t_prev) / 1e9;
		base = same_master(cur, prev);
		header(&s, cur, base, dt, where);
		background(&s, cur, base, dt);
		rates(&s, cur, base, dt);
		slowest(&s, cur);
		draw(&s, tty);
		protobuf_c_message_free_unpacked(&prev->base, NULL);
		prev = cur;
		t_prev = now;
	}
	term_leave(&term);
	if (prev)
		protobuf_c_message_free_unpacked(&prev->base, NULL);
	sw_client_close(c);
	if (rc < 0) {
		fprintf(stderr, "sweepfs top: %s\n",
			rc == -EPERM ? tool_admin_refusal() : strerror(-rc));
		tool_record_errno(rc);
		return TOOL_FAILED;
	}
	return TOOL_OK;
}
