/*
 * The purge: freeing detached subtrees in the background.
 *
 * Freeing goes deepest first: from the subtree's current directory, take
 * its first entry; a non-empty directory is entered, anything else is
 * unlinked (freed when it was its last name); an empty directory is freed
 * and its parent becomes current. Only the purge changes a detached
 * subtree (nothing can be created in it), so the current directory's
 * first entry is always the one the walk came down by.
 *
 * Slices: each runs at most purge_slice microseconds and the loop handles
 * whatever requests arrived before the next one, so a request waits for
 * one slice at worst. A token bucket keeps the purge to purge_duty
 * percent of the loop's time, leaving the rest to requests and to the
 * machine; to purge_duty_busy while mounts' requests keep coming (one
 * in the last 100 ms). On a machine the clients share with the master,
 * the purge's CPU is what they wait for: at 50% of a core, a client's
 * stat p99 during a 1M-file purge was 4x its idle p99 on two cores; at
 * 20-25%, a little over 2x.
 *
 * Persistence: each slice journals how many changes it made (PurgeSteps,
 * a few bytes): the walk (ns_purge_next()) is the same on every member of
 * a group and in replay, so followers free what the leader freed, and
 * their memory shrinks with its. A file some client still has open is
 * unlinked through the changelog instead (it becomes an orphan, kept
 * until closed), because later changes to it depend on that; only the
 * serving master knows what is open, so the purge makes its changes first
 * and journals them after (master_journal()).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "purge.h"
#include "log.h"
#include "context.h"
#include "req.h"
#include "util.h"

#define TAG "purge"

/* Unlink open file @e->child from @dir through the changelog. */
static int unlink_open(struct master *m, struct node *dir, struct edge *e)
{
	Sweepfs__Meta__Unlink u = SWEEPFS__META__UNLINK__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;

	u.parent = dir->ino;
	u.name.data = (uint8_t *)e->name;
	u.name.len = e->namelen;
	u.has_keep = 1;
	u.keep = true;
	mut.time = sw_now_ns();
	mut.op_case = SWEEPFS__META__MUTATION__OP_UNLINK;
	mut.unlink = &u;
	return master_commit(m, NULL, &mut);
}

/* Journal the @count changes the walk just made, the last taking @last. */
static void journal_steps(struct master *m, uint64_t count, uint64_t last,
			  int64_t now)
{
	Sweepfs__Meta__PurgeSteps p = SWEEPFS__META__PURGE_STEPS__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;

	if (!count)
		return;
	p.count = count;
	p.last = last;
	mut.time = now;
	mut.op_case = SWEEPFS__META__MUTATION__OP_PURGE_STEPS;
	mut.purge_steps = &p;
	master_journal(m, &mut);
}

/*
 * Free nodes of the oldest subtrees until @deadline (checked every few
 * steps). Returns how many were freed, or -errno when the changelog takes
 * no change now (the purge waits for it).
 */
static int64_t purge_slice(struct master *m, int64_t deadline)
{
	struct ns *ns = &m->ns;
	struct ns_purge_step s = { 0 };
	struct ns_purge_ahead ahead = { 0 };
	int64_t now = sw_now_ns(), freed = 0;
	uint64_t steps = 0, batch = 0;
	struct node *c;
	int rc;

	rc = master_may_change(m);
	if (rc < 0)
		return rc;
	while (ns_purge_next(ns, &s)) {
		/* Every few steps, whatever each cost: a step is O(log n)
		 * (directories' counts, lct.h), but the slice is a time. */
		if ((steps++ & 7) == 0 && sw_mono_ns() > deadline)
			break;
		c = s.e ? s.e->child : NULL;
		if (c && c->nlink == 1 && (c->flags & NODE_OPEN)) {
			/* An open file is unlinked through the changelog:
			 * it stays as an orphan, and later changes to it
			 * depend on that. The steps before it go first. */
			journal_steps(m, batch, s.ino, now);
			batch = 0;
			rc = unlink_open(m, s.dir, s.e);
			if (rc < 0)
				return rc;
			ahead = (struct ns_purge_ahead){ 0 }; /* not a step */
			freed++;
			continue;
		}
		ns_purge_ahead(ns, &ahead, &s);
		ns_purge_take(ns, &s, now);
		if (s.done)
			sw_info(TAG,
				"purge %" PRIu64 " done: %" PRIu64 " nodes",
				s.done, s.done_nodes);
		batch++;
		freed++;
	}
	journal_steps(m, batch, s.ino, now);
	return freed;
}

uint64_t purge_left(const struct master *m)
{
	return ns_purge_left(&m->ns);
}

static void purge_run(uv_idle_t *h);

static void purge_resume(uv_timer_t *t)
{
	struct master *m = t->data;

	uv_idle_start(&m->purge->idle, purge_run);
}

/*
 * The budget background work (the purge, snapshot copies) shares: time is
 * earned at purge_duty of the clock and spent by slices. Savings are
 * capped at a few slices, so that the work comes in short runs with the
 * loop (and the CPU) left to others in between, at every time scale
 * above a few milliseconds; a big saving would let it run flat out for
 * as long. Returns whether a slice may run now.
 */
bool background_may_run(struct master *m)
{
	int64_t now = sw_mono_ns();
	bool busy = now - m->bg->last_client_request < 100 * 1000000LL;
	double duty =
		(double)(busy ? m->cfg.purge_duty_busy : m->cfg.purge_duty) /
		100;
	double cap = 4.0 * (double)m->cfg.purge_slice_us * 1000;

	m->purge->credit += (double)(now - m->purge->last) * duty;
	m->purge->credit = SW_MIN(m->purge->credit, cap);
	m->purge->last = now;
	return m->purge->credit > 0;
}

void background_spent(struct master *m, int64_t ns, int64_t cpu_ns)
{
	m->purge->credit -= (double)ns;
	/* What a request arriving meanwhile waited for, at worst. */
	m->bg->slices++;
	sw_hist_add(&m->bg->slice_time, ns);
	if (ns > m->bg->slice_max_ns)
		m->bg->slice_max_ns = ns;
	if (cpu_ns > m->bg->slice_max_cpu_ns)
		m->bg->slice_max_cpu_ns = cpu_ns;
	if (ns > 1000000)
		m->bg->slices_over_1ms++;
}

static void purge_run(uv_idle_t *h)
{
	struct master *m = h->data;
	int64_t t0, cpu0, spent;
	int64_t rc;

	if (!m->ns.purge_head || m->stopping) {
		uv_idle_stop(h);
		return;
	}
	if (!background_may_run(m)) {
		uv_idle_stop(h);
		uv_timer_start(&m->purge->timer, purge_resume, 1, 0);
		return;
	}
	t0 = sw_mono_ns();
	cpu0 = sw_thread_cpu_ns();
	rc = purge_slice(m, t0 + (int64_t)m->cfg.purge_slice_us * 1000);
	spent = sw_mono_ns() - t0;
	background_spent(m, spent, sw_thread_cpu_ns() - cpu0);
	m->purge->busy_ns += (uint64_t)spent;
	if (rc < 0) {
		/* The changelog is full: try again in a second. */
		uv_idle_stop(h);
		uv_timer_start(&m->purge->timer, purge_resume, 1000, 0);
	}
}

void purge_kick(struct master *m)
{
	if (!m->ns.purge_head || m->stopping ||
	    uv_is_active((uv_handle_t *)&m->purge->idle) ||
	    uv_is_active((uv_handle_t *)&m->purge->timer))
		return;
	m->purge->last = sw_mono_ns();
	uv_idle_start(&m->purge->idle, purge_run);
}

void purge_init(struct master *m)
{
	uv_idle_init(m->loop, &m->purge->idle);
	m->purge->idle.data = m;
	uv_timer_init(m->loop, &m->purge->timer);
	m->purge->timer.data = m;
}

void purge_stop(struct master *m)
{
	uv_idle_stop(&m->purge->idle);
	uv_close((uv_handle_t *)&m->purge->idle, NULL);
	uv_timer_stop(&m->purge->timer);
	uv_close((uv_handle_t *)&m->purge->timer, NULL);
}
