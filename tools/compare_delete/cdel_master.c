/*
 * cdel_master: what compare-delete asks the master directly, on blocking
 * tool connections (common/client.h): the counters before and after each
 * method, copies by snapshot, and the server-side removals (rmr,
 * seteattr + rmsnapshot) with the wait for their purge.
 *
 * The timed requests take an inode and a name resolved beforehand, so
 * that the lookups of the path are not part of what is measured.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdel.h"
#include "util.h"

int cdel_info(struct sw_client *c, bool sessions, Sweepfs__InfoReply **out)
{
	Sweepfs__InfoReq q = SWEEPFS__INFO_REQ__INIT;
	struct tool_caller who;
	ProtobufCMessage *reply;
	int rc;

	q.has_sessions = 1;
	q.sessions = sessions;
	q.cred = tool_caller(&who);
	rc = tool_call(c, SW_MSG_INFO, &q.base, &reply);
	if (rc == 0)
		*out = (Sweepfs__InfoReply *)reply;
	return rc;
}

static void wire_from(const Sweepfs__Counters *c, struct cdel_wire *w)
{
	memset(w, 0, sizeof(*w));
	if (!c)
		return;
	for (size_t t = 0; t < c->n_requests && t < SW_MSG__COUNT; t++)
		w->requests[t] = c->requests[t];
	w->errors = c->errors;
	w->bytes_in = c->bytes_in;
	w->bytes_out = c->bytes_out;
	w->readdir_entries = c->readdir_entries;
	w->batch_ops = c->batch_ops;
}

int cdel_counters(struct sw_client *c, uint64_t session,
		  struct cdel_counters *out)
{
	Sweepfs__InfoReply *s;
	int rc = cdel_info(c, session != 0, &s);

	memset(out, 0, sizeof(*out));
	if (rc < 0)
		return rc;
	out->cpu_ms = s->cpu_user_ms + s->cpu_system_ms;
	out->nodes = s->nodes;
	out->purge_roots = s->purge_roots;
	wire_from(s->total, &out->total);
	for (size_t i = 0; i < s->n_sessions; i++) {
		if (s->sessions[i]->id != session)
			continue;
		wire_from(s->sessions[i]->counters, &out->session);
		out->has_session = true;
	}
	protobuf_c_message_free_unpacked(&s->base, NULL);
	return 0;
}

/* Counters only grow; a master restarted in between would make them
 * smaller, and 0 is the least wrong delta then. */
static uint64_t delta(uint64_t from, uint64_t to)
{
	return to >= from ? to - from : 0;
}

void cdel_wire_delta(const struct cdel_wire *a, const struct cdel_wire *b,
		     struct cdel_wire *d)
{
	for (size_t t = 0; t < SW_MSG__COUNT; t++)
		d->requests[t] = delta(a->requests[t], b->requests[t]);
	d->errors = delta(a->errors, b->errors);
	d->bytes_in = delta(a->bytes_in, b->bytes_in);
	d->bytes_out = delta(a->bytes_out, b->bytes_out);
	d->readdir_entries = delta(a->readdir_entries, b->readdir_entries);
	d->batch_ops = delta(a->batch_ops, b->batch_ops);
}

uint64_t cdel_find_session(struct sw_client *c, const char *name)
{
	Sweepfs__InfoReply *s;
	uint64_t id = 0;

	if (cdel_info(c, true, &s) < 0)
		return 0;
	/* A client that reconnected under the same name: the newest. */
	for (size_t i = 0; i < s->n_sessions; i++) {
		const Sweepfs__SessionInfo *si = s->sessions[i];

		if (si->role == SWEEPFS__ROLE__ROLE_MOUNT && si->connected &&
		    si->name && !strcmp(si->name, name) && si->id > id)
			id = si->id;
	}
	protobuf_c_message_free_unpacked(&s->base, NULL);
	return id;
}

int cdel_wait_purge(struct sw_client *c, uint64_t purge_id, double timeout_s)
{
	int64_t end = sw_mono_ns() + (int64_t)(timeout_s * 1e9);

	for (;;) {
		Sweepfs__InfoReply *s;
		bool done;
		int rc = cdel_info(c, false, &s);

		if (rc < 0)
			return rc;
		done = s->purge_roots == 0 ||
		       (purge_id && s->purge_oldest > purge_id);
		protobuf_c_message_free_unpacked(&s->base, NULL);
		if (done)
			return 0;
		if (atomic_load(&cdel_stop))
			return -EINTR;
		if (sw_mono_ns() > end)
			return -ETIMEDOUT;
		/* The purge's own pace is what is measured: 20 ms is the
		 * resolution of purge_s, at 50 small requests a second. */
		usleep(20 * 1000);
	}
}

int cdel_snapshot(struct sw_client *c, const char *src_rel, const char *dir_rel,
		  const char *name, double timeout_s)
{
	Sweepfs__SnapshotReq q = SWEEPFS__SNAPSHOT_REQ__INIT;
	ProtobufCMessage *reply;
	uint64_t src, dir;
	uint32_t mode;
	struct tool_caller who;
	int rc, per_call = c->timeout_ms;

	rc = tool_resolve(c, src_rel, &src, &mode);
	if (rc == 0)
		rc = tool_resolve(c, dir_rel, &dir, &mode);
	if (rc < 0)
		return rc;
	q.cred = tool_caller(&who);
	q.src = src;
	q.parent = dir;
	q.name = tool_name(name);
	/* The copy is applied on the purge's budget (purge_duty of the
	 * master's loop), so a big tree on a busy or throttled master takes
	 * longer than the 30 s a tool gives an answer: that time-out failed
	 * the method, and the run said "master cannot be reached". A broken
	 * connection still ends the wait at once. A full queue of snapshots
	 * (EAGAIN) is waited out as sweepfs snapshot does. */
	c->timeout_ms =
		(int)SW_MIN(SW_MAX(timeout_s * 1000, 1.0), (double)INT_MAX);
	rc = tool_call_paced(c, SW_MSG_SNAPSHOT, &q.base, &reply,
			     TOOL_PACED_SNAPSHOT);
	c->timeout_ms = per_call;
	if (rc == 0)
		protobuf_c_message_free_unpacked(reply, NULL);
	return rc;
}

/* An RMR or RMSNAPSHOT paced as sweepfs rmr's: a user's check may find
 * the budget spent. */
static int removal_call(struct sw_client *c, uint16_t type,
			const ProtobufCMessage *q, uint64_t *purge_id,
			uint64_t *nodes)
{
	struct tool_removal rm;
	int rc = tool_remove_paced(c, type, q, &rm);

	*purge_id = rm.purge_id;
	*nodes = rm.nodes;
	return rc;
}

int cdel_rmr(struct sw_client *c, uint64_t parent, const char *name,
	     uint64_t *purge_id, uint64_t *nodes)
{
	Sweepfs__RmrReq q = SWEEPFS__RMR_REQ__INIT;
	struct tool_caller who;

	q.cred = tool_caller(&who);
	q.parent = parent;
	q.name = tool_name(name);
	q.has_skip_trash = 1;
	q.skip_trash = true;
	return removal_call(c, SW_MSG_RMR, &q.base, purge_id, nodes);
}

int cdel_rmr_path(struct sw_client *c, const char *rel, double timeout_s)
{
	char name[256];
	uint64_t parent, purge_id, nodes;
	int rc = tool_walk(c, rel, &parent, name, sizeof(name));

	if (rc == 0)
		rc = cdel_rmr(c, parent, name, &purge_id, &nodes);
	if (rc == 0 && purge_id)
		rc = cdel_wait_purge(c, purge_id, timeout_s);
	return rc;
}

int cdel_set_snapshot_flag(struct sw_client *c, uint64_t parent,
			   const char *name, uint64_t *changed)
{
	ProtobufCMessage *reply;
	int rc = tool_eattr(c, parent, name, true, false, true, &reply);

	if (rc == 0) {
		*changed = ((Sweepfs__EattrReply *)reply)->changed;
		protobuf_c_message_free_unpacked(reply, NULL);
	}
	return rc;
}

int cdel_rmsnapshot(struct sw_client *c, uint64_t parent, const char *name,
		    uint64_t *purge_id, uint64_t *nodes)
{
	Sweepfs__RmsnapshotReq q = SWEEPFS__RMSNAPSHOT_REQ__INIT;
	struct tool_caller who;

	q.cred = tool_caller(&who);
	q.parent = parent;
	q.name = tool_name(name);
	return removal_call(c, SW_MSG_RMSNAPSHOT, &q.base, purge_id, nodes);
}

int cdel_trashtime(struct sw_client *c, const char *rel, uint32_t *get,
		   bool zero)
{
	Sweepfs__TrashtimeReq q = SWEEPFS__TRASHTIME_REQ__INIT;
	ProtobufCMessage *reply;
	uint32_t mode;
	struct tool_caller who;
	uint64_t ino;
	int rc = tool_resolve(c, rel, &ino, &mode);

	if (rc < 0)
		return rc;
	q.cred = tool_caller(&who);
	q.ino = ino;
	if (zero) {
		q.has_seconds = 1;
		q.seconds = 0;
	}
	rc = tool_call(c, SW_MSG_TRASHTIME, &q.base, &reply);
	if (rc == 0) {
		*get = ((Sweepfs__TrashtimeReply *)reply)->seconds;
		protobuf_c_message_free_unpacked(reply, NULL);
	}
	return rc;
}
