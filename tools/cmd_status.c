/*
 * sweepfs status [--json] [PATH]: the master's state at a glance.
 * sweepfs stats [--json] [--sessions] [PATH]: request counters, in total
 * and per session.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsio.h"
#include "tool.h"
#include "util.h"

/*
 * The master lists sessions a page at a time: the later pages' replies
 * are kept here, and the first reply's list swapped for all of them
 * until status_free() puts it back.
 */
struct pages {
	Sweepfs__InfoReply **v;
	size_t n, cap;
	Sweepfs__SessionInfo **first_sessions;
	size_t first_n;
};

static struct pages pages;

static int info_call(struct sw_client *c, bool sessions, uint64_t offset,
		     Sweepfs__InfoReply **out)
{
	Sweepfs__InfoReq q = SWEEPFS__INFO_REQ__INIT;
	struct tool_caller who;
	ProtobufCMessage *reply;
	int rc;

	q.has_sessions = 1;
	q.sessions = sessions;
	q.has_session_offset = offset != 0;
	q.session_offset = offset;
	q.cred = tool_caller(&who);
	rc = sw_client_call(c, SW_MSG_INFO, &q.base, &reply);
	if (rc == 0) {
		rc = sw_reply_err(reply);
		if (rc < 0)
			protobuf_c_message_free_unpacked(reply, NULL);
	}
	if (rc == 0)
		*out = (Sweepfs__InfoReply *)reply;
	return rc;
}

/* Fetch the pages after @r's sessions and list them all in @r. */
static int more_sessions(struct sw_client *c, Sweepfs__InfoReply *r)
{
	Sweepfs__SessionInfo **all = NULL;
	size_t n = r->n_sessions, cap = 0;
	int rc = 0;

	if (!r->has_sessions_total || n >= r->sessions_total || !n)
		return 0;
	if (sw_grow(&all, &cap, n, sizeof(*all), 64) < 0)
		return -ENOMEM;
	memcpy(all, r->sessions, n * sizeof(*all));
	while (n < r->sessions_total) {
		Sweepfs__InfoReply *p;

		rc = info_call(c, true, n, &p);
		if (rc < 0 || !p->n_sessions) {
			if (rc == 0)
				protobuf_c_message_free_unpacked(&p->base,
								 NULL);
			break; /* sessions went meanwhile: what we have */
		}
		if (sw_grow(&pages.v, &pages.cap, pages.n + 1, sizeof(*pages.v),
			    4) < 0 ||
		    sw_grow(&all, &cap, n + p->n_sessions, sizeof(*all), 64) <
			    0) {
			protobuf_c_message_free_unpacked(&p->base, NULL);
			rc = -ENOMEM;
			break;
		}
		pages.v[pages.n++] = p;
		memcpy(all + n, p->sessions, p->n_sessions * sizeof(*all));
		n += p->n_sessions;
	}
	pages.first_sessions = r->sessions;
	pages.first_n = r->n_sessions;
	r->sessions = all;
	r->n_sessions = n;
	return rc;
}

static void status_free(Sweepfs__InfoReply *r)
{
	if (pages.first_sessions) {
		free(r->sessions);
		r->sessions = pages.first_sessions;
		r->n_sessions = pages.first_n;
	}
	for (size_t i = 0; i < pages.n; i++)
		protobuf_c_message_free_unpacked(&pages.v[i]->base, NULL);
	free(pages.v);
	memset(&pages, 0, sizeof(pages));
	protobuf_c_message_free_unpacked(&r->base, NULL);
}

static int fetch_status(const char *path, bool sessions,
			Sweepfs__InfoReply **out)
{
	struct sw_client *c;
	int rc = tool_connect(path, &c);

	*out = NULL;
	if (rc < 0)
		return rc;
	rc = info_call(c, sessions, 0, out);
	if (rc == 0 && sessions)
		rc = more_sessions(c, *out);
	sw_client_close(c);
	if (rc < 0) {
		if (*out && rc == -ENOMEM)
			status_free(*out);
		fprintf(stderr, "sweepfs: status: %s\n",
			strerror(-tool_record_errno(rc)));
		return rc;
	}
	return 0;
}

static const char *role_name(int role)
{
	switch (role) {
	case SWEEPFS__ROLE__ROLE_MOUNT:
		return "mount";
	case SWEEPFS__ROLE__ROLE_TOOL:
		return "tool";
	case SWEEPFS__ROLE__ROLE_CHUNKSERVER:
		return "chunkserver";
	case SWEEPFS__ROLE__ROLE_MEMBER:
		return "member";
	default:
		return "?";
	}
}

static void json_counters(struct json *j, const char *key,
			  const Sweepfs__Counters *c)
{
	json_obj_begin(j, key);
	json_obj_begin(j, "requests");
	for (size_t t = 0; t < c->n_requests; t++) {
		const struct sw_msg_info *info = sw_msg_info((uint16_t)t);

		if (info && c->requests[t])
			json_u64(j, info->name, c->requests[t]);
	}
	json_obj_end(j);
	json_u64(j, "errors", c->errors);
	json_u64(j, "bytes_in", c->bytes_in);
	json_u64(j, "bytes_out", c->bytes_out);
	json_u64(j, "readdir_entries", c->readdir_entries);
	json_u64(j, "batch_ops", c->batch_ops);
	json_obj_end(j);
}

/* The chunk health census's counts: everyone's (a limited reply too). */
static void json_health(struct json *j, const Sweepfs__InfoReply *s)
{
	json_obj_begin(j, "chunk_health");
	json_u64(j, "missing", s->chunks_missing);
	json_u64(j, "endangered", s->chunks_endangered);
	json_u64(j, "undergoal", s->chunks_undergoal);
	json_u64(j, "overgoal", s->chunks_overgoal);
	json_u64(j, "goal_unreachable", s->chunks_goal_unreachable);
	if (s->has_health_age_ms)
		json_u64(j, "age_ms", s->health_age_ms);
	json_obj_end(j);
}

/* What only admin root is told (InfoReply.limited says it was not). */
static void json_admin(struct json *j, const Sweepfs__InfoReply *s)
{
	json_u64(j, "meta_version", s->meta_version);
	json_u64(j, "durable_version", s->durable_version);
	json_u64(j, "checkpoint_version", s->checkpoint_version);
	json_str(j, "changelog_sync", s->changelog_sync);
	json_u64(j, "nodes", s->nodes);
	json_u64(j, "dirs", s->dirs);
	json_u64(j, "names", s->names);
	json_u64(j, "orphans", s->orphans);
	json_u64(j, "meta_bytes", s->meta_bytes);
	json_u64(j, "rss_bytes", s->rss_bytes);
	json_u64(j, "cpu_user_ms", s->cpu_user_ms);
	json_u64(j, "cpu_system_ms", s->cpu_system_ms);
	json_u64(j, "connections", s->connections);
	json_u64(j, "chunks", s->chunks);
	json_u64(j, "purge_roots", s->purge_roots);
	json_u64(j, "purge_left", s->purge_left);
	json_u64(j, "purge_oldest", s->purge_oldest);
	json_u64(j, "purged", s->purged);
	json_u64(j, "snapflag_walked", s->snapflag_walked);
	json_u64(j, "snapflag_settled", s->snapflag_settled);
	json_u64(j, "snapflag_marks", s->snapflag_marks);
	json_u64(j, "purge_busy_ms", s->purge_busy_ms);
	json_u64(j, "chunk_deletes_pending", s->chunk_deletes_pending);
	json_dbl(j, "ops_per_sec", s->ops_per_sec);
	json_dbl(j, "purge_rate", s->purge_rate);
	if (s->has_purge_eta_ms)
		json_u64(j, "purge_eta_ms", s->purge_eta_ms);
	json_u64(j, "snapshot_id", s->snapshot_id);
	json_u64(j, "snapshot_nodes", s->snapshot_nodes);
	json_u64(j, "snapshots_waiting", s->snapshots_waiting);
	json_u64(j, "trash_items", s->trash_items);
	json_u64(j, "bg_slices", s->bg_slices);
	json_u64(j, "bg_slice_max_us", s->bg_slice_max_us);
	json_u64(j, "bg_slices_over_1ms", s->bg_slices_over_1ms);
	json_u64(j, "bg_slice_max_cpu_us", s->bg_slice_max_cpu_us);
	json_u64(j, "tables_resizing", s->tables_resizing);
	json_u64(j, "locks", s->locks);
	json_u64(j, "lock_waiters", s->lock_waiters);
	json_u64(j, "delegations", s->delegations);
	json_u64(j, "deleg_granted", s->deleg_granted);
	json_u64(j, "deleg_refused", s->deleg_refused);
	json_u64(j, "deleg_recalls", s->deleg_recalls);
	json_u64(j, "deleg_timeouts", s->deleg_timeouts);
	json_u64(j, "deleg_recall_max_us", s->deleg_recall_max_us);
	json_u64(j, "batch_ops", s->batch_ops);
	json_health(j, s);
	json_arr_begin(j, "servers");
	for (size_t i = 0; i < s->n_servers; i++) {
		const Sweepfs__ServerInfo *si = s->servers[i];

		json_obj_begin(j, NULL);
		json_str(j, "listen", si->listen);
		json_flag(j, "connected", si->connected);
		json_u64(j, "total_bytes", si->total_bytes);
		json_u64(j, "used_bytes", si->used_bytes);
		json_u64(j, "free_bytes",
			 si->total_bytes -
				 SW_MIN(si->used_bytes, si->total_bytes));
		json_u64(j, "chunks", si->chunks);
		json_u64(j, "deletes_pending", si->deletes_pending);
		json_u64(j, "deleted", si->deleted);
		json_obj_end(j);
	}
	json_arr_end(j);
}

static void json_status(const Sweepfs__InfoReply *s, bool counters)
{
	struct json j;

	json_init(&j, stdout);
	json_obj_begin(&j, NULL);
	json_str(&j, "server_version", s->server_version);
	json_u64(&j, "uptime_ms", s->uptime_ms);
	json_flag(&j, "limited", s->limited);
	if (s->limited) {
		json_u64(&j, "purge_roots", s->purge_roots);
		json_u64(&j, "purge_left", s->purge_left);
		json_u64(&j, "purge_oldest", s->purge_oldest);
		json_u64(&j, "snapshot_id", s->snapshot_id);
		json_u64(&j, "snapshot_nodes", s->snapshot_nodes);
		json_health(&j, s);
	} else {
		json_admin(&j, s);
	}
	if (s->role) {
		json_str(&j, "role", s->role);
		json_u64(&j, "member_id", s->member_id);
		json_str(&j, "leader", s->leader ? s->leader : "");
		json_arr_begin(&j, "members");
		for (size_t i = 0; i < s->n_members; i++) {
			const Sweepfs__GroupMember *gm = s->members[i];

			json_obj_begin(&j, NULL);
			json_u64(&j, "id", gm->id);
			json_str(&j, "addr", gm->addr ? gm->addr : "");
			json_str(&j, "role", gm->role ? gm->role : "");
			json_u64(&j, "meta_version", gm->meta_version);
			json_i64(&j, "behind",
				 (int64_t)(s->meta_version - gm->meta_version));
			json_i64(&j, "age_ms", gm->age_ms);
			json_obj_end(&j);
		}
		json_arr_end(&j);
	}
	if (counters && s->total)
		json_counters(&j, "total", s->total);
	json_arr_begin(&j, "sessions");
	for (size_t i = 0; i < s->n_sessions; i++) {
		const Sweepfs__SessionInfo *si = s->sessions[i];
		char id[20];

		snprintf(id, sizeof(id), "%016" PRIx64, si->id);
		json_obj_begin(&j, NULL);
		json_str(&j, "id", id);
		json_str(&j, "role", role_name(si->role));
		json_str(&j, "peer", si->peer);
		json_str(&j, "name", si->name);
		json_flag(&j, "connected", si->connected);
		json_u64(&j, "root_ino", si->root_ino);
		json_u64(&j, "open_files", si->open_files);
		json_u64(&j, "delegations", si->delegations);
		if (si->export)
			json_str(&j, "export", si->export);
		if (si->has_read_only)
			json_flag(&j, "read_only", si->read_only);
		if (si->has_admin)
			json_flag(&j, "admin", si->admin);
		if (counters && si->counters)
			json_counters(&j, "counters", si->counters);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_obj_end(&j);
}

static void parse_common(int argc, char **argv, bool *json, bool *sessions,
			 const char **path)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "sessions", no_argument, NULL, 's' },
		{ 0 },
	};
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "js", longopts, NULL)) != -1) {
		if (opt == 'j')
			*json = true;
		else if (opt == 's')
			*sessions = true;
		else
			exit(2);
	}
	*path = optind < argc ? argv[optind] : NULL;
}

/* The chunk health census: a line that says all is well, or one that
 * says what is wrong, worst first (what mfscli -SIC would show red). */
static void print_health(const Sweepfs__InfoReply *s)
{
	if (!s->has_health_age_ms) {
		printf("chunk health: not counted yet\n");
		return;
	}
	if (!s->chunks_missing && !s->chunks_undergoal && !s->chunks_overgoal &&
	    !s->chunks_goal_unreachable) {
		printf("chunk health: all chunks at their goal (counted %.1f s "
		       "ago)\n",
		       (double)s->health_age_ms / 1000);
		return;
	}
	printf("chunk health: %" PRIu64 " MISSING (no copy on a connected "
	       "server), %" PRIu64 " endangered (one copy left), %" PRIu64
	       " under goal, %" PRIu64 " over goal, %" PRIu64
	       " with a goal above the chunkservers connected (counted "
	       "%.1f s ago; `sweepfs fsck` names the files)\n",
	       s->chunks_missing, s->chunks_endangered, s->chunks_undergoal,
	       s->chunks_overgoal, s->chunks_goal_unreachable,
	       (double)s->health_age_ms / 1000);
}

static void print_session(const Sweepfs__SessionInfo *si)
{
	printf("  %016" PRIx64 " %-5s %-22s %-9s %" PRIu64 " open %" PRIu64
	       " deleg  %s%s%s%s\n",
	       si->id, role_name(si->role), si->peer,
	       si->connected ? "connected" : "detached", si->open_files,
	       si->delegations, si->name, si->export ? "  [" : "",
	       si->export ? si->export : "", si->export ? "]" : "");
}

/* A reply to a caller who is not admin root: what it holds, and why
 * that is all. */
static void print_limited(const Sweepfs__InfoReply *s)
{
	printf("not shown: the namespace's counters, the chunkservers and "
	       "the group's members (%s)\n",
	       tool_admin_refusal());
	if (s->role)
		printf("group: member %u is the %s; the leader is %s\n",
		       s->member_id, s->role, s->leader ? s->leader : "?");
	if (s->purge_roots)
		printf("purge: %" PRIu64 " trees, %" PRIu64 " nodes left\n",
		       s->purge_roots, s->purge_left);
	if (s->snapshot_id)
		printf("snapshot: %" PRIu64 " being copied (%" PRIu64
		       " nodes so far)\n",
		       s->snapshot_id, s->snapshot_nodes);
	print_health(s);
	printf("this session:\n");
	for (size_t i = 0; i < s->n_sessions; i++)
		print_session(s->sessions[i]);
}

int cmd_status(int argc, char **argv)
{
	Sweepfs__InfoReply *s;
	bool json = false, sessions = true;
	const char *path;
	char b1[32], b2[32];
	uint64_t up;

	parse_common(argc, argv, &json, &sessions, &path);
	if (fetch_status(path, true, &s) < 0)
		return 1;
	/* On stderr, so that a monitoring script that reads stdout (or
	 * only the JSON) and its log still notice; the exit status stays 0:
	 * the master answered what this caller may know. */
	if (s->limited)
		fprintf(stderr,
			"limited: not root on an admin export; the "
			"chunkservers, members and counters are left out\n");
	if (json) {
		json_status(s, false);
		goto out;
	}
	up = s->uptime_ms / 1000;
	printf("master %s, up %" PRIu64 "d %02" PRIu64 ":%02" PRIu64
	       ":%02" PRIu64 "\n",
	       s->server_version, up / 86400, up / 3600 % 24, up / 60 % 60,
	       up % 60);
	if (s->limited) {
		print_limited(s);
		goto out;
	}
	printf("metadata version %" PRIu64 " (durable %" PRIu64
	       ", checkpoint %" PRIu64 "), changelog_sync %s\n",
	       s->meta_version, s->durable_version, s->checkpoint_version,
	       s->changelog_sync);
	if (s->role) {
		printf("group: member %u is the %s; %zu members\n",
		       s->member_id, s->role, s->n_members);
		for (size_t i = 0; i < s->n_members; i++) {
			const Sweepfs__GroupMember *gm = s->members[i];

			printf("  %u %-22s %-9s", gm->id, gm->addr,
			       gm->role && gm->role[0] ? gm->role : "?");
			if (gm->age_ms < 0)
				printf(" never heard from\n");
			else
				printf(" version %" PRIu64 " (%" PRId64
				       " behind), %.1f s ago\n",
				       gm->meta_version,
				       (int64_t)(s->meta_version -
						 gm->meta_version),
				       (double)gm->age_ms / 1000);
		}
	}
	printf("%" PRIu64 " nodes (%" PRIu64 " directories), %" PRIu64
	       " names, %" PRIu64 " open-unlinked\n",
	       s->nodes, s->dirs, s->names, s->orphans);
	printf("memory: %s in namespace structures, %s resident",
	       fmt_bytes(s->meta_bytes, b1, sizeof(b1)),
	       fmt_bytes(s->rss_bytes, b2, sizeof(b2)));
	if (s->nodes)
		printf(" (%.0f bytes per node)",
		       (double)s->rss_bytes / (double)s->nodes);
	printf("\ncpu: %.2f s user, %.2f s system; %.0f requests/s\n",
	       (double)s->cpu_user_ms / 1000, (double)s->cpu_system_ms / 1000,
	       s->ops_per_sec);
	printf("purge: %" PRIu64 " trees, %" PRIu64 " nodes left, %.0f "
	       "nodes/s, %" PRIu64 " freed since start (%.1f s busy)",
	       s->purge_roots, s->purge_left, s->purge_rate, s->purged,
	       (double)s->purge_busy_ms / 1000);
	if (s->has_purge_eta_ms)
		printf(", done in ~%.1f s", (double)s->purge_eta_ms / 1000);
	printf("\n");
	if (s->bg_slices)
		printf("background: %" PRIu64 " slices, longest %.3f ms "
		       "(%.3f ms on the CPU), %" PRIu64 " over 1 ms\n",
		       s->bg_slices, (double)s->bg_slice_max_us / 1000,
		       (double)s->bg_slice_max_cpu_us / 1000,
		       s->bg_slices_over_1ms);
	if (s->snapshot_id || s->snapshots_waiting)
		printf("snapshot: %" PRIu64 " being copied (%" PRIu64
		       " nodes so far), %" PRIu64 " waiting\n",
		       s->snapshot_id, s->snapshot_nodes, s->snapshots_waiting);
	if (s->trash_items)
		printf("trash: %" PRIu64 " items\n", s->trash_items);
	if (s->locks || s->lock_waiters)
		printf("file locks: %" PRIu64 " held, %" PRIu64
		       " requests waiting\n",
		       s->locks, s->lock_waiters);
	if (s->deleg_granted)
		printf("delegations: %" PRIu64 " held; %" PRIu64
		       " granted, %" PRIu64 " refused, %" PRIu64
		       " recalled (%" PRIu64 " timed out, slowest answer "
		       "%.1f ms); %" PRIu64 " operations from batches\n",
		       s->delegations, s->deleg_granted, s->deleg_refused,
		       s->deleg_recalls, s->deleg_timeouts,
		       (double)s->deleg_recall_max_us / 1000, s->batch_ops);
	printf("%" PRIu64 " chunks, %" PRIu64 " chunk deletions queued\n",
	       s->chunks, s->chunk_deletes_pending);
	print_health(s);
	for (size_t i = 0; i < s->n_servers; i++) {
		const Sweepfs__ServerInfo *si = s->servers[i];
		char u[32], t[32], fr[32];

		/* total is net of the chunkserver's reserve. */
		printf("  chunkserver %-22s %-12s %s used of %s, %s free, "
		       "%" PRIu64 " chunks, %" PRIu64 " deletions pending\n",
		       si->listen, si->connected ? "connected" : "down",
		       fmt_bytes(si->used_bytes, u, sizeof(u)),
		       fmt_bytes(si->total_bytes, t, sizeof(t)),
		       fmt_bytes(si->total_bytes - SW_MIN(si->used_bytes,
							  si->total_bytes),
				 fr, sizeof(fr)),
		       si->chunks, si->deletes_pending);
	}
	printf("%zu sessions, %" PRIu64 " connections\n", s->n_sessions,
	       s->connections);
	for (size_t i = 0; i < s->n_sessions; i++)
		print_session(s->sessions[i]);
out:
	status_free(s);
	return 0;
}

static void print_counters(const char *title, const Sweepfs__Counters *c)
{
	char b1[32], b2[32];

	printf("%s: %s in, %s out, %" PRIu64 " readdir entries, %" PRIu64
	       " errors\n",
	       title, fmt_bytes(c->bytes_in, b1, sizeof(b1)),
	       fmt_bytes(c->bytes_out, b2, sizeof(b2)), c->readdir_entries,
	       c->errors);
	for (size_t t = 0; t < c->n_requests; t++) {
		const struct sw_msg_info *info = sw_msg_info((uint16_t)t);

		if (info && c->requests[t])
			printf("  %-12s %12" PRIu64 "\n", info->name,
			       c->requests[t]);
	}
}

int cmd_stats(int argc, char **argv)
{
	Sweepfs__InfoReply *s;
	bool json = false, sessions = false;
	const char *path;

	parse_common(argc, argv, &json, &sessions, &path);
	if (fetch_status(path, sessions, &s) < 0)
		return 1;
	if (json) {
		json_status(s, true);
	} else {
		if (s->limited)
			printf("not shown: the master's counters in total "
			       "and other sessions' (%s)\n",
			       tool_admin_refusal());
		if (s->total)
			print_counters("total", s->total);
		for (size_t i = 0; i < s->n_sessions; i++) {
			const Sweepfs__SessionInfo *si = s->sessions[i];
			char title[300];

			snprintf(title, sizeof(title),
				 "session %016" PRIx64 " (%s)", si->id,
				 si->name);
			if (si->counters)
				print_counters(title, si->counters);
		}
	}
	status_free(s);
	return 0;
}
