/*
 * Administrative requests: status and counters for `sweepfs status` and
 * `sweepfs stats`, and for benchmarks, which read the master's own
 * counters (requests by type, bytes, readdir entries, CPU, memory) rather
 * than guess them from the outside.
 *
 * The group's status and its admin requests (membership, transfer) go
 * through the request layer's hooks (req_group_*(), req.h), and
 * sessions are looked up in sesstab.h's table: a handler names nothing
 * above it (scripts/layers.py).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "admin.h"
#include "handlers.h"
#include "csrv.h"
#include "deleg.h"
#include "health.h"
#include "context.h"
#include "purge.h"
#include "req.h"
#include "sesstab.h"
#include "snapjob.h"
#include "util.h"

static const char *const sync_names[] = { "always", "interval", "never" };

static uint64_t rss_bytes(void)
{
	unsigned long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &resident) != 2)
		resident = 0;
	fclose(f);
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void fill_counters(Sweepfs__Counters *out, uint64_t *reqs,
			  const struct op_counters *c)
{
	sweepfs__counters__init(out);
	memcpy(reqs, c->requests, sizeof(c->requests));
	out->n_requests = SW_MSG__COUNT;
	out->requests = reqs;
	out->has_errors = out->has_bytes_in = out->has_bytes_out = 1;
	out->has_readdir_entries = 1;
	out->errors = c->errors;
	out->bytes_in = c->bytes_in;
	out->bytes_out = c->bytes_out;
	out->readdir_entries = c->readdir_entries;
	out->has_batch_ops = 1;
	out->batch_ops = c->batch_ops;
}

/* Forget the slow requests older than the window; the floor follows. */
static void slow_expire(struct latency *l, int64_t now)
{
	int64_t floor = INT64_MAX;

	for (size_t i = 0; i < SLOW_KEEP; i++) {
		if (l->slow[i].ns && now - l->slow[i].at > SLOW_WINDOW_NS)
			l->slow[i].ns = 0;
		floor = SW_MIN(floor, l->slow[i].ns);
	}
	l->slow_floor = floor;
}

void admin_note_latency(struct master *m, const struct req *r)
{
	struct latency *l = m->latency;
	struct session *s;
	int64_t now, ns;
	size_t min = 0;

	/* Not a request a client sent, or not one we know (ENOSYS). */
	if (!r->t0 || r->hdr.type >= SW_MSG__COUNT)
		return;
	now = sw_mono_ns();
	ns = now - r->t0;
	sw_hist_add(&l->by_type[r->hdr.type], ns);
	if (ns <= l->slow_floor)
		return;
	/* Take the place of the fastest kept (or of a free one). Not
	 * r->s: a deferred request may outlive its session. */
	s = req_session(r);
	for (size_t i = 1; i < SLOW_KEEP; i++)
		if (l->slow[i].ns < l->slow[min].ns)
			min = i;
	l->slow[min] = (struct slow_req){ .ns = ns,
					  .at = now,
					  .session_id = s ? s->id : 0,
					  .type = r->hdr.type };
	l->slow_floor = INT64_MAX;
	for (size_t i = 0; i < SLOW_KEEP; i++)
		l->slow_floor = SW_MIN(l->slow_floor, l->slow[i].ns);
}

static int slower_first(const void *a, const void *b)
{
	const struct slow_req *x = a, *y = b;

	return (x->ns < y->ns) - (x->ns > y->ns);
}

size_t admin_slowest(struct master *m, struct slow_req *out)
{
	int64_t now = sw_mono_ns();
	size_t n = 0;

	for (size_t i = 0; i < SLOW_KEEP; i++) {
		const struct slow_req *s = &m->latency->slow[i];

		if (s->ns && now - s->at <= SLOW_WINDOW_NS)
			out[n++] = *s;
	}
	qsort(out, n, sizeof(*out), slower_first);
	return n;
}

void admin_sample(struct master *m)
{
	struct rate_sample *s =
		&m->rates[m->nrates++ % SW_ARRAY_SIZE(m->rates)];

	s->t = sw_mono_ns();
	s->requests = 0;
	for (size_t i = 0; i < SW_MSG__COUNT; i++)
		s->requests += m->total->requests[i];
	s->purged = m->ns.purged;
	slow_expire(m->latency, s->t);
}

/* Requests and purged nodes per second over the samples kept. */
static void admin_rates(const struct master *m, double *ops, double *purge)
{
	size_t cap = SW_ARRAY_SIZE(m->rates);
	const struct rate_sample *new, *old;
	double dt;

	*ops = *purge = 0;
	if (m->nrates < 2)
		return;
	new = &m->rates[(m->nrates - 1) % cap];
	old = &m->rates[m->nrates > cap ? m->nrates % cap : 0];
	dt = (double)(new->t - old->t) / 1e9;
	if (dt <= 0)
		return;
	*ops = (double)(new->requests - old->requests) / dt;
	*purge = (double)(new->purged - old->purged) / dt;
}

/* Sessions one INFO reply lists at most (a page; about 1 KiB each). */
#define INFO_SESSIONS_MAX 1000

static void session_info(Sweepfs__SessionInfo *si, Sweepfs__Counters *ctr,
			 uint64_t *reqs, const struct session *s)
{
	sweepfs__session_info__init(si);
	si->has_id = si->has_role = si->has_root_ino = 1;
	si->has_connected = si->has_connected_at = 1;
	si->has_open_files = 1;
	si->id = s->id;
	si->role = s->role;
	si->peer = (char *)s->peer;
	si->name = (char *)s->name;
	si->root_ino = s->root_ino;
	si->connected = s->conn != NULL;
	si->connected_at = s->connected_at;
	si->open_files = htab_count(&s->opens);
	if (!session_is_peer(s)) {
		si->export = (char *)s->export_text;
		si->has_read_only = si->has_admin = 1;
		si->read_only = !s->rw;
		si->admin = s->admin;
		si->has_delegations = 1;
		si->delegations = s->ndelegs;
	}
	fill_counters(ctr, reqs, &s->ctr);
	si->counters = ctr;
}

/* What runs, since when: anyone's to know. */
static void info_version(struct master *m, Sweepfs__InfoReply *reply)
{
	reply->server_version = SWEEPFS_VERSION;
	reply->has_started_at = reply->has_uptime_ms = 1;
	reply->started_at = m->started_at;
	reply->uptime_ms = (uint64_t)(sw_mono_ns() - m->started_mono) / 1000000;
}

/* The process, the namespace and the changelog. */
static void info_master(struct master *m, Sweepfs__InfoReply *reply)
{
	struct rusage ru;

	info_version(m, reply);
	reply->has_meta_version = reply->has_durable_version = 1;
	reply->has_checkpoint_version = 1;
	reply->meta_version = m->ns.version;
	reply->durable_version = changelog_durable(m->cl);
	reply->checkpoint_version = m->ckpt.version;
	reply->changelog_sync = (char *)sync_names[m->cfg.changelog_sync];
	reply->has_nodes = reply->has_dirs = reply->has_names = 1;
	reply->has_orphans = reply->has_meta_bytes = reply->has_rss_bytes = 1;
	reply->nodes = m->ns.nnodes;
	reply->dirs = m->ns.ndirs;
	reply->names = m->ns.nedges;
	reply->orphans = htab_count(&m->ns.orphans);
	reply->meta_bytes = ns_memory(&m->ns);
	reply->rss_bytes = rss_bytes();
	reply->has_connections = 1;
	reply->connections = m->server.nconns;
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		reply->has_cpu_user_ms = reply->has_cpu_system_ms = 1;
		reply->cpu_user_ms = (uint64_t)ru.ru_utime.tv_sec * 1000 +
				     (uint64_t)ru.ru_utime.tv_usec / 1000;
		reply->cpu_system_ms = (uint64_t)ru.ru_stime.tv_sec * 1000 +
				       (uint64_t)ru.ru_stime.tv_usec / 1000;
	}
	reply->has_locks = reply->has_lock_waiters = 1;
	reply->locks = m->locks.nlocks;
	reply->lock_waiters = m->locks.nwaiters;
	reply->has_tables_resizing = 1;
	reply->tables_resizing = ns_resizing(&m->ns);
}

/* Background work: the purge with its rate and ETA, snapshot copies,
 * the trash, the slices they take. */
static void info_background(struct master *m, Sweepfs__InfoReply *reply)
{
	double ops, rate;

	reply->has_purge_roots = reply->has_purge_left = 1;
	reply->has_purge_oldest = reply->has_purged = 1;
	reply->has_purge_busy_ms = reply->has_chunk_deletes_pending = 1;
	reply->has_chunks = 1;
	reply->purge_roots = m->ns.purge_roots;
	reply->purge_left = purge_left(m);
	reply->purge_oldest = ns_purge_oldest(&m->ns);
	reply->purged = m->ns.purged;
	reply->has_snapflag_walked = reply->has_snapflag_settled = 1;
	reply->has_snapflag_marks = 1;
	reply->snapflag_walked = m->ns.snap_walked;
	reply->snapflag_settled = m->ns.snap_settled;
	reply->snapflag_marks = m->ns.nsnapmarks;
	reply->purge_busy_ms = m->purge->busy_ns / 1000000;
	reply->chunk_deletes_pending = m->cs->pending_deletes;
	reply->chunks = m->ns.nchunks;
	admin_rates(m, &ops, &rate);
	reply->has_ops_per_sec = reply->has_purge_rate = 1;
	reply->ops_per_sec = ops;
	reply->purge_rate = rate;
	if (reply->purge_left) {
		/* At the recent pace, or else at what the purge did per
		 * second of its budget so far. */
		double per_s = rate;

		if (per_s <= 0 && m->purge->busy_ns && m->ns.purged)
			per_s = (double)m->ns.purged /
				((double)m->purge->busy_ns / 1e9) *
				(double)m->cfg.purge_duty / 100;
		if (per_s > 0) {
			reply->has_purge_eta_ms = 1;
			reply->purge_eta_ms =
				(uint64_t)((double)reply->purge_left / per_s *
					   1000);
		}
	}
	reply->has_snapshot_id = reply->has_snapshot_nodes = 1;
	reply->has_snapshots_waiting = reply->has_trash_items = 1;
	ns_copy_active(&m->ns, &reply->snapshot_id);
	reply->snapshot_nodes = ns_copy_nodes(&m->ns);
	reply->snapshots_waiting = snapjob_waiting(m);
	reply->trash_items = m->ns.ntrash;
	reply->has_bg_slices = reply->has_bg_slice_max_us = 1;
	reply->has_bg_slices_over_1ms = 1;
	reply->bg_slices = m->bg->slices;
	reply->bg_slice_max_us = (uint64_t)m->bg->slice_max_ns / 1000;
	reply->bg_slices_over_1ms = m->bg->slices_over_1ms;
	reply->has_bg_slice_max_cpu_us = 1;
	reply->bg_slice_max_cpu_us = (uint64_t)m->bg->slice_max_cpu_ns / 1000;
}

/* The chunk health census's last pass (health.h). */
static void info_health(struct master *m, Sweepfs__InfoReply *reply)
{
	const struct health_counts *h = health_counts(m);
	uint64_t age = health_age_ms(m);

	reply->has_chunks_missing = reply->has_chunks_endangered = 1;
	reply->has_chunks_undergoal = reply->has_chunks_overgoal = 1;
	reply->has_chunks_goal_unreachable = 1;
	reply->chunks_missing = h->missing;
	reply->chunks_endangered = h->endangered;
	reply->chunks_undergoal = h->undergoal;
	reply->chunks_overgoal = h->overgoal;
	reply->chunks_goal_unreachable = h->unreachable;
	reply->has_health_age_ms = age != UINT64_MAX;
	reply->health_age_ms = age;
}

static void info_delegations(struct master *m, Sweepfs__InfoReply *reply)
{
	struct deleg_stats ds;

	deleg_stats(m, &ds);
	reply->has_delegations = reply->has_deleg_granted = 1;
	reply->has_deleg_refused = reply->has_deleg_recalls = 1;
	reply->has_deleg_timeouts = reply->has_deleg_recall_max_us = 1;
	reply->has_batch_ops = 1;
	reply->delegations = ds.held;
	reply->deleg_granted = ds.granted;
	reply->deleg_refused = ds.refused;
	reply->deleg_recalls = ds.recalls;
	reply->deleg_timeouts = ds.timeouts;
	reply->deleg_recall_max_us = ds.recall_max_ns / 1000;
	reply->batch_ops = m->total->batch_ops;
}

/* The group's leader, and with @all its members, in @gs and @mem (which
 * @reply points into). The leader's address is no secret: a follower
 * tells it any client in its hello's refusal (EREMOTE). */
static void info_group(struct master *m, Sweepfs__InfoReply *reply, bool all,
		       struct group_status *gs, Sweepfs__GroupMember *mem,
		       Sweepfs__GroupMember **memp)
{
	if (!req_group_status(m, gs))
		return;
	reply->role = (char *)gs->role;
	reply->has_member_id = 1;
	reply->member_id = gs->id;
	reply->leader = gs->leader;
	for (size_t i = 0; all && i < gs->n; i++) {
		sweepfs__group_member__init(&mem[i]);
		mem[i].has_id = mem[i].has_meta_version = mem[i].has_age_ms = 1;
		mem[i].id = gs->members[i].id;
		mem[i].addr = gs->members[i].addr;
		mem[i].role = gs->members[i].role;
		mem[i].meta_version = gs->members[i].version;
		mem[i].age_ms = gs->members[i].age_ms;
		memp[i] = &mem[i];
	}
	reply->n_members = all ? gs->n : 0;
	reply->members = memp;
}

/*
 * What a caller who is not admin root learns (InfoReply.limited): the
 * server's version and age, and the progress its own requests wait for
 * (tool_wait_purge() after a user's rmr or rmsnapshot, the progress line
 * of a user's snapshot), which is the whole queue's: a purge or a copy
 * has no owner it could be cut by. No address, space or count of the
 * namespace, the chunkservers or the group's members. The chunk health
 * census's counts (missing, endangered, ...) stay: they say nothing of
 * any user, and monitoring run as a user needs them.
 */
static void info_limited(struct master *m, Sweepfs__InfoReply *reply)
{
	reply->has_limited = reply->limited = 1;
	info_version(m, reply);
	reply->has_purge_roots = reply->has_purge_left = 1;
	reply->has_purge_oldest = 1;
	reply->purge_roots = m->ns.purge_roots;
	reply->purge_left = purge_left(m);
	reply->purge_oldest = ns_purge_oldest(&m->ns);
	reply->has_snapshot_id = reply->has_snapshot_nodes = 1;
	ns_copy_active(&m->ns, &reply->snapshot_id);
	reply->snapshot_nodes = ns_copy_nodes(&m->ns);
	info_health(m, reply);
}

void admin_info_fill(struct master *m, Sweepfs__InfoReply *reply)
{
	info_master(m, reply);
	info_background(m, reply);
	info_delegations(m, reply);
	info_health(m, reply);
}

/*
 * The slowest requests, into @sr/@sp (room for SLOW_KEEP): all of them
 * for @admin, for any other asker only its own session's. What other
 * sessions sent, when and how slow, is none of its business, with or
 * without their ids and names.
 */
static void info_slowest(const struct req *r, bool admin,
			 Sweepfs__InfoReply *reply, Sweepfs__SlowRequest *sr,
			 Sweepfs__SlowRequest **sp)
{
	struct master *m = r->m;
	struct slow_req v[SLOW_KEEP];
	int64_t now = sw_mono_ns();
	size_t n = admin_slowest(m, v), k = 0;

	for (size_t i = 0; i < n; i++) {
		struct session *s;

		if (!admin && v[i].session_id != r->s->id)
			continue;
		s = session_find(m, v[i].session_id);
		sweepfs__slow_request__init(&sr[k]);
		sr[k].has_type = sr[k].has_us = sr[k].has_age_ms = 1;
		sr[k].has_session_id = 1;
		sr[k].type = v[i].type;
		sr[k].session_id = v[i].session_id;
		sr[k].client = s ? (char *)s->name : NULL;
		sr[k].us = (uint64_t)v[i].ns / 1000;
		sr[k].age_ms = (uint64_t)(now - v[i].at) / 1000000;
		sp[k] = &sr[k];
		k++;
	}
	reply->n_slowest = k;
	reply->slowest = sp;
}

/* The chunkservers, into @si/@sp (room for all; left out without it). */
static void info_servers(struct master *m, Sweepfs__InfoReply *reply,
			 Sweepfs__ServerInfo *si, Sweepfs__ServerInfo **sp)
{
	if (!si || !sp)
		return;
	for (uint32_t i = 1; i <= m->cs->n; i++) {
		struct csrv *s = m->cs->srv[i];
		Sweepfs__ServerInfo *x = &si[i - 1];

		sweepfs__server_info__init(x);
		x->listen = s->listen;
		x->has_connected = x->has_total_bytes = 1;
		x->has_used_bytes = x->has_chunks = 1;
		x->has_deletes_pending = x->has_deleted = 1;
		x->connected = csrv_up(s);
		x->total_bytes = s->total_bytes;
		x->used_bytes = s->used_bytes;
		x->chunks = s->reported_chunks;
		x->deletes_pending = csrv_deletes_pending(s);
		x->deleted = s->deleted;
		sp[i - 1] = x;
	}
	reply->n_servers = m->cs->n;
	reply->servers = sp;
}

/* One page of the sessions @r's session may see into the arrays of
 * @cap: @all for admin root, any other caller only its own. */
static size_t info_sessions(const struct req *r, const Sweepfs__InfoReq *q,
			    bool all, Sweepfs__InfoReply *reply, size_t cap,
			    Sweepfs__SessionInfo *infos,
			    Sweepfs__SessionInfo **ptrs,
			    Sweepfs__Counters *ctrs, uint64_t *reqs)
{
	struct master *m = r->m;
	uint64_t skip = q->has_session_offset ? q->session_offset : 0;
	size_t n = 0;

	reply->has_sessions_total = 1;
	reply->sessions_total = all ? m->nsessions : 1;
	for (struct session *s = all ? m->session_list : r->s; s && n < cap;
	     s = all ? s->next : NULL) {
		if (skip) {
			skip--;
			continue;
		}
		session_info(&infos[n], &ctrs[n], reqs + n * SW_MSG__COUNT, s);
		ptrs[n] = &infos[n];
		n++;
	}
	reply->n_sessions = n;
	reply->sessions = ptrs;
	return n;
}

void op_info(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__InfoReq *q = (const void *)msg;
	Sweepfs__InfoReply reply = SWEEPFS__INFO_REPLY__INIT;
	struct master *m = r->m;
	uint64_t total_reqs[SW_MSG__COUNT];
	Sweepfs__Counters total;
	Sweepfs__SessionInfo *infos = NULL, **ptrs = NULL;
	Sweepfs__ServerInfo *si = NULL, **sp = NULL;
	Sweepfs__Counters *ctrs = NULL;
	Sweepfs__SlowRequest slow[SLOW_KEEP], *slowp[SLOW_KEEP];
	struct group_status gs;
	Sweepfs__GroupMember mem[GROUP_MAX], *memp[GROUP_MAX];
	uint64_t *reqs = NULL;
	/* q->cred as the export mapped it (dispatch_admit()); the whole
	 * filesystem's figures only to a session that sees all of it, as
	 * FSCK and GROUP (SW_MSG_F_WHOLE). */
	bool admin = session_admin_whole(r->s, q->cred);

	if (admin) {
		admin_info_fill(m, &reply);
		fill_counters(&total, total_reqs, m->total);
		reply.total = &total;
		si = calloc(m->cs->n + 1, sizeof(*si));
		sp = calloc(m->cs->n + 1, sizeof(*sp));
		info_servers(m, &reply, si, sp);
	} else {
		info_limited(m, &reply);
	}
	info_group(m, &reply, admin, &gs, mem, memp);
	info_slowest(r, admin, &reply, slow, slowp);
	if (q->sessions) {
		/* A page at a time, so that the reply fits a frame however
		 * many there are. */
		size_t cap = q->has_session_limit && q->session_limit &&
					     q->session_limit <
						     INFO_SESSIONS_MAX ?
				     q->session_limit :
				     INFO_SESSIONS_MAX;

		infos = calloc(cap, sizeof(*infos));
		ptrs = calloc(cap, sizeof(*ptrs));
		ctrs = calloc(cap, sizeof(*ctrs));
		reqs = calloc(cap * SW_MSG__COUNT, sizeof(*reqs));
		if (!infos || !ptrs || !ctrs || !reqs) {
			req_error(r, -ENOMEM);
			goto out;
		}
		info_sessions(r, q, admin, &reply, cap, infos, ptrs, ctrs,
			      reqs);
	}
	req_reply(r, &reply.base);
out:
	free(si);
	free(sp);
	free(infos);
	free(ptrs);
	free(ctrs);
	free(reqs);
}

void op_group(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__GroupReq *q = (const void *)msg;
	Sweepfs__GroupReply reply = SWEEPFS__GROUP_REPLY__INIT;
	bool change = (q->add && q->add[0]) || q->has_remove;
	int rc;

	if (change) {
		/* Answered by the group once etcd has it. */
		rc = req_group_change(r->m, r, q->add ? q->add : "", q->remove);
		if (rc == 0)
			return;
	} else {
		rc = req_group_transfer(r->m, q->transfer_to);
	}
	if (rc < 0) {
		reply.has_err = 1;
		reply.err = -rc;
	}
	req_reply(r, &reply.base);
}
