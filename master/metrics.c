/*
 * The master's Prometheus metrics (admin.h: metrics_start): what `sweepfs
 * status` reports, for a scraper, plus what only a time series shows well
 * (latency histograms). Rendered on the loop thread at each scrape, from
 * the same fill functions as the INFO request, so the two agree.
 *
 * Names follow Prometheus' conventions: sweepfs_master_ prefix, base
 * units (seconds, bytes), _total for counters.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "admin.h"
#include "changelog.h"
#include "context.h"
#include "csrv.h"
#include "dataops.h"
#include "purge.h"
#include "req.h"
#include "sessrec.h"
#include "util.h"

#define TAG "metrics"

/* Metrics with one sample and no labels: a table of them. */
struct one {
	const char *name, *type, *help;
	double v;
};

static void put_all(struct sw_buf *b, const struct one *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sw_prom_one(b, v[i].name, v[i].type, v[i].help, v[i].v);
}

#define G "gauge"
#define C "counter"
#define D(x) ((double)(x))

static void requests(struct master *m, struct sw_buf *b)
{
	static const char lat[] = "sweepfs_master_request_duration_seconds";
	static const char cnt[] = "sweepfs_master_requests_total";

	sw_prom_head(b, cnt, "counter", "Requests handled, by type.");
	for (uint16_t t = 0; t < SW_MSG__COUNT; t++) {
		const struct sw_msg_info *info = sw_msg_info(t);
		const char *labels[] = { "type", info ? info->name : "", NULL };

		if (info && m->total->requests[t])
			sw_prom_sample(b, cnt, labels,
				       (double)m->total->requests[t]);
	}
	sw_prom_head(b, lat, "histogram",
		     "Time in the master from a request's arrival to its reply "
		     "being ready, by type (the changelog's fdatasync is "
		     "sweepfs_master_changelog_fsync_duration_seconds).");
	for (uint16_t t = 0; t < SW_MSG__COUNT; t++) {
		const struct sw_msg_info *info = sw_msg_info(t);
		const char *labels[] = { "type", info ? info->name : "", NULL };

		if (info && m->latency->by_type[t].count)
			sw_prom_hist(b, lat, labels, &m->latency->by_type[t]);
	}
	{
		const struct one v[] = {
			{ "sweepfs_master_request_errors_total", C,
			  "Requests answered with an error.",
			  D(m->total->errors) },
			{ "sweepfs_master_received_bytes_total", C,
			  "Request bytes received.", D(m->total->bytes_in) },
			{ "sweepfs_master_sent_bytes_total", C,
			  "Reply and notification bytes sent.",
			  D(m->total->bytes_out) },
			{ "sweepfs_master_batch_operations_total", C,
			  "Operations applied from mounts' batches.",
			  D(m->total->batch_ops) },
		};

		put_all(b, v, SW_ARRAY_SIZE(v));
	}
}

static void sessions(struct master *m, struct sw_buf *b)
{
	static const char *const roles[] = { "mount", "tool", "chunkserver",
					     "member" };
	static const int role_of[] = { SWEEPFS__ROLE__ROLE_MOUNT,
				       SWEEPFS__ROLE__ROLE_TOOL,
				       SWEEPFS__ROLE__ROLE_CHUNKSERVER,
				       SWEEPFS__ROLE__ROLE_MEMBER };
	uint64_t n[4] = { 0 }, connected = 0;

	for (struct session *s = m->session_list; s; s = s->next) {
		for (size_t i = 0; i < 4; i++)
			if (s->role == role_of[i])
				n[i]++;
		connected += s->conn != NULL;
	}
	sw_prom_head(
		b, "sweepfs_master_sessions", "gauge",
		"Sessions, by the role of their client (a session outlives "
		"its connection for session_timeout).");
	for (size_t i = 0; i < 4; i++) {
		const char *labels[] = { "role", roles[i], NULL };

		sw_prom_sample(b, "sweepfs_master_sessions", labels,
			       (double)n[i]);
	}
	sw_prom_one(b, "sweepfs_master_sessions_connected", "gauge",
		    "Sessions with a connection now.", (double)connected);
	sw_prom_one(b, "sweepfs_master_connections", "gauge",
		    "TCP connections open.", (double)m->server.nconns);
}

static void namespace(struct sw_buf *b, const Sweepfs__InfoReply *r)
{
	const struct one v[] = {
		{ "sweepfs_master_nodes", G,
		  "Files, directories and other nodes.", D(r->nodes) },
		{ "sweepfs_master_directories", G, "Directories.", D(r->dirs) },
		{ "sweepfs_master_chunks", G, "Chunks.", D(r->chunks) },
		{ "sweepfs_master_trash_items", G, "Items in the trash.",
		  D(r->trash_items) },
		{ "sweepfs_master_metadata_bytes", G,
		  "Bytes the namespace structures hold.", D(r->meta_bytes) },
		{ "sweepfs_master_resident_memory_bytes", G,
		  "The master's resident set.", D(r->rss_bytes) },
		{ "sweepfs_master_resident_bytes_per_node", G,
		  "Resident set divided by nodes (the goal is 150 for empty "
		  "files).",
		  r->nodes ? D(r->rss_bytes) / D(r->nodes) : 0 },
		{ "sweepfs_master_meta_version", G,
		  "Changes applied in memory.", D(r->meta_version) },
		{ "sweepfs_master_durable_version", G,
		  "Changes durable in the changelog.", D(r->durable_version) },
		{ "sweepfs_master_checkpoint_version", G,
		  "Changes in the newest checkpoint.",
		  D(r->checkpoint_version) },
	};

	put_all(b, v, SW_ARRAY_SIZE(v));
	sw_prom_head(b, "sweepfs_master_cpu_seconds_total", C,
		     "CPU time the master used, by mode.");
	sw_prom_sample(b, "sweepfs_master_cpu_seconds_total",
		       (const char *[]){ "mode", "user", NULL },
		       D(r->cpu_user_ms) / 1e3);
	sw_prom_sample(b, "sweepfs_master_cpu_seconds_total",
		       (const char *[]){ "mode", "system", NULL },
		       D(r->cpu_system_ms) / 1e3);
}

static void background(struct master *m, struct sw_buf *b,
		       const Sweepfs__InfoReply *r)
{
	static const char slices[] =
		"sweepfs_master_background_slice_duration_seconds";
	static const char fsyncs[] =
		"sweepfs_master_changelog_fsync_duration_seconds";
	const struct one v[] = {
		{ "sweepfs_master_purge_trees", G,
		  "Removed trees waiting to be purged.", D(r->purge_roots) },
		{ "sweepfs_master_purge_nodes_left", G, "Nodes left to purge.",
		  D(r->purge_left) },
		{ "sweepfs_master_purged_nodes_total", C,
		  "Nodes purged since start.", D(r->purged) },
		{ "sweepfs_master_snapflag_walked_names_total", C,
		  "Names the snapshot flag's walks visited since start.",
		  D(r->snapflag_walked) },
		{ "sweepfs_master_snapflag_settled_marks_total", C,
		  "Recursive snapshot flags written out on every name since "
		  "start.",
		  D(r->snapflag_settled) },
		{ "sweepfs_master_purge_rate", G,
		  "Nodes purged per second, over the last few seconds.",
		  r->purge_rate },
		{ "sweepfs_master_purge_eta_seconds", G,
		  "When the purge should be done at its pace (0: nothing "
		  "left, or no pace yet).",
		  r->has_purge_eta_ms ? D(r->purge_eta_ms) / 1e3 : 0 },
		{ "sweepfs_master_snapshot_nodes", G,
		  "Nodes copied by the snapshot being made.",
		  D(r->snapshot_nodes) },
		{ "sweepfs_master_lease_revocations_total", C,
		  "Write leases snapshots took back since start (a version "
		  "bump each): only those of the files a snapshot copies, "
		  "or all for one copied by a child.",
		  D(m->data->revoked) },
		{ "sweepfs_master_delegations", G,
		  "Directory delegations held by mounts.", D(r->delegations) },
		{ "sweepfs_master_delegations_granted_total", C,
		  "Directory delegations granted.", D(r->deleg_granted) },
		{ "sweepfs_master_delegation_recalls_total", C,
		  "Directory delegations recalled.", D(r->deleg_recalls) },
		{ "sweepfs_master_delegation_recall_timeouts_total", C,
		  "Recalls the holder did not answer within deleg_timeout.",
		  D(r->deleg_timeouts) },
		{ "sweepfs_master_invalidation_ack_timeouts_total", C,
		  "Sessions no longer waited for, for not acknowledging an "
		  "invalidation within inval_timeout or owing too many.",
		  D(m->inval_timeouts) },
		{ "sweepfs_master_locks", G, "File locks held.", D(r->locks) },
	};
	struct sw_hist fsync;

	put_all(b, v, SW_ARRAY_SIZE(v));
	sw_prom_head(b, slices, "histogram",
		     "Slices of background work (purge, snapshot copies): the "
		     "longest is what a request may have waited for.");
	sw_prom_hist(b, slices, NULL, &m->bg->slice_time);
	changelog_fsync_time(m->cl, &fsync);
	sw_prom_head(b, fsyncs, "histogram",
		     "The changelog's fdatasync calls.");
	sw_prom_hist(b, fsyncs, NULL, &fsync);
}

static void servers(struct master *m, struct sw_buf *b)
{
	static const char pending[] = "sweepfs_master_chunk_deletions_pending";
	static const char deleted[] = "sweepfs_master_chunk_deletions_total";
	static const char strays[] = "sweepfs_master_chunk_strays";

	sw_prom_head(b, pending, "gauge",
		     "Chunk deletions queued for each chunkserver.");
	for (uint32_t i = 1; i <= m->cs->n; i++) {
		const struct csrv *s = m->cs->srv[i];
		const char *labels[] = { "server", s->listen, NULL };

		sw_prom_sample(b, pending, labels,
			       (double)csrv_deletes_pending(s));
	}
	/* With the pending gauge, the rate and the ETA: rate() of this,
	 * and pending / rate. A new master (a restart, a group's new
	 * leader) counts from 0 again, which rate() takes as a reset. */
	sw_prom_head(b, deleted, "counter",
		     "Chunk deletions each chunkserver acknowledged since "
		     "this master started.");
	for (uint32_t i = 1; i <= m->cs->n; i++) {
		const struct csrv *s = m->cs->srv[i];
		const char *labels[] = { "server", s->listen, NULL };

		sw_prom_sample(b, deleted, labels, (double)s->deleted);
	}
	sw_prom_head(b, strays, "gauge",
		     "Chunk files each chunkserver reported that the master "
		     "does not know, waiting out stray_grace.");
	for (uint32_t i = 1; i <= m->cs->n; i++) {
		const struct csrv *s = m->cs->srv[i];
		const char *labels[] = { "server", s->listen, NULL };

		sw_prom_sample(b, strays, labels, (double)csrv_strays(s));
	}
	sw_prom_head(b, "sweepfs_master_chunkserver_up", "gauge",
		     "Whether each chunkserver is registered now.");
	for (uint32_t i = 1; i <= m->cs->n; i++) {
		const struct csrv *s = m->cs->srv[i];
		const char *labels[] = { "server", s->listen, NULL };

		sw_prom_sample(b, "sweepfs_master_chunkserver_up", labels,
			       csrv_up(s));
	}
}

/* The chunk health census (health.h); a follower of a group has none
 * (its chunkservers talk to the leader): nothing to alert on. */
static void health(struct master *m, struct sw_buf *b,
		   const Sweepfs__InfoReply *r)
{
	static const char name[] = "sweepfs_master_chunks_unhealthy";
	const struct {
		const char *state;
		uint64_t v;
	} v[] = {
		{ "missing", r->chunks_missing },
		{ "endangered", r->chunks_endangered },
		{ "undergoal", r->chunks_undergoal },
		{ "overgoal", r->chunks_overgoal },
		{ "goal_unreachable", r->chunks_goal_unreachable },
	};

	if (!req_serving(m))
		return;
	sw_prom_head(b, name, "gauge",
		     "Chunks by health, as of the last census pass: no valid "
		     "copy on a connected server (missing), one copy left of "
		     "more wanted (endangered), fewer copies than the goal "
		     "(undergoal, endangered included), more (overgoal), a "
		     "goal above the chunkservers connected "
		     "(goal_unreachable).");
	for (size_t i = 0; i < SW_ARRAY_SIZE(v); i++) {
		const char *labels[] = { "state", v[i].state, NULL };

		sw_prom_sample(b, name, labels, D(v[i].v));
	}
	sw_prom_one(b, "sweepfs_master_chunk_census_age_seconds", G,
		    "Seconds since the chunk health census last ended a pass "
		    "(-1: none yet).",
		    r->has_health_age_ms ? D(r->health_age_ms) / 1e3 : -1);
}

static void render(void *arg, struct sw_buf *b)
{
	struct master *m = arg;
	Sweepfs__InfoReply r = SWEEPFS__INFO_REPLY__INIT;

	admin_info_fill(m, &r);
	sw_prom_head(b, "sweepfs_master_info", "gauge",
		     "The master's version (the value is 1).");
	sw_prom_sample(b, "sweepfs_master_info",
		       (const char *[]){ "version", SWEEPFS_VERSION, NULL }, 1);
	sw_prom_one(b, "sweepfs_master_uptime_seconds", "gauge",
		    "Seconds since the master started.",
		    (double)r.uptime_ms / 1e3);
	requests(m, b);
	sessions(m, b);
	namespace(b, &r);
	background(m, b, &r);
	servers(m, b);
	health(m, b, &r);
}

int metrics_start(struct master *m)
{
	if (!m->cfg.metrics_listen[0])
		return 0;
	return sw_metrics_start(m->loop, m->cfg.metrics_listen, TAG, render, m,
				&m->latency->endpoint);
}

void metrics_stop(struct master *m)
{
	sw_metrics_stop(m->latency->endpoint);
	m->latency->endpoint = NULL;
}
