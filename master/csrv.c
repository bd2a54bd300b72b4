/*
 * Chunkserver bookkeeping.
 *
 * Registration reconciles a server's inventory with the namespace: a copy
 * of a chunk nobody references, or of an older version, or reported
 * damaged, is queued for deletion; a copy at the current version is
 * valid. Copies are not journaled: after a master restart every server
 * registers again and the picture is rebuilt.
 *
 * Deletions leave each server's queue in DELETE_BATCH commands of up to
 * CSRV_DELQ_BATCH chunks, at most CSRV_DELQ_WINDOW of them in flight per
 * server. The window is the pacing: a server acknowledges a batch only
 * once its files are unlinked, and unlinks at low priority, slower while
 * its clients are busy (chunkserver/master_link.c), so the queue drains
 * at the pace the server's disks and foreground load allow, and the next
 * batch goes as soon as one is acknowledged, not at the next tick.
 * delete_rate stays an operator's cap on top (a token bucket refilled
 * every tick, holding at most half a second's worth). A queued deletion
 * counts as pending until its batch is acknowledged; a batch that timed
 * out or was lost with its connection goes back to the queue, to be sent
 * again once the server is (back) up.
 *
 * A deletion is sent only once the change that made it is durable: each
 * entry carries the metadata version the change will have, and waits
 * until the changelog is durable that far (or holds nothing that is
 * not). Else a master crash could bring a file back whose chunk its
 * server had already deleted.
 *
 * Profile of the former one-command-per-chunk scheme (64 in flight,
 * refilled each 100 ms tick): it could not pass 640 deletions per second
 * per server whatever the disk, and spent one frame each way per chunk.
 *
 * The deletion queue is not journaled: it is derived. A chunk file a
 * server reports that the master does not know is one of two kinds:
 *  - dead: its id is below next_chunk_named and it is in no table
 *    (ns_chunk_dead(), chunks.h). A change of this metadata named it
 *    and a later one freed it; ids are never handed out again, so
 *    nothing can bring it back. Its deletion was lost with a master
 *    that restarted or failed over, or with a connection: it is queued
 *    at once. This is how a restarted master or a group's new leader
 *    knows the deletions its predecessor had not finished, at no cost
 *    to rm -rf (nothing journaled per chunk, nothing kept per deleted
 *    chunk on followers): each server's inventory at registration is
 *    the list.
 *  - an orphan: at or above next_chunk_named, or an id this metadata
 *    skipped for such a file (ns->chunk_unnamed_lo/hi), so possibly
 *    named by a change this master has not seen (one that stopped
 *    before journaling it, or metadata restored from an older copy). It is
 *    deleted only after stray_grace, and only if the master still does
 *    not know the chunk then: a changelog replay or another master of a
 *    group may bring it back meanwhile, and then it is a copy like any
 *    other. The wait is the master's, in memory: a server that
 *    disconnects, or a master that restarts, starts it again at the
 *    next registration.
 * A file already queued for deletion (or in a batch in flight) is
 * neither: it goes with its queue. Invariant: no chunk this master
 * knows (in the table: referenced by a file, the trash, a snapshot
 * being copied, or a write) is ever queued from a report; a copy of a
 * known chunk is deleted only when it is stale, damaged or over the
 * goal. Only a serving master (alone, or a group's leader) has
 * chunkservers: a follower answers their hello with EREMOTE, and its
 * chunk_gone hook is not wired, so it deletes nothing.
 *
 * Replication walks the chunk table in slices each tick and gives chunks
 * with fewer valid copies than the goal a new one, a few at a time per
 * server.
 *
 * A server's connection is an opaque pointer here: commands go out by
 * req_notify() and which server a connection registered as is kept in
 * its struct req_link (req_link_of()), both the request layer's hooks
 * (req.h), so that this handler names nothing of the server above it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "auth.h"
#include "fsio.h"
#include "changelog.h"
#include "csrv.h"
#include "hash.h"
#include "log.h"
#include "handlers.h"
#include "dataops.h"
#include "context.h"
#include "req.h"
#include "sessrec.h"
#include "util.h"

#define TAG "csrv"
#define TICK_MS 100
#define REPL_PER_SERVER 2 /* replications in flight per server */
#define REPL_TOTAL 16
#define REPL_SCAN_BUDGET 4096 /* chunks examined per tick */
/* How far past next_chunk a reported unknown chunk id may push it: more
 * chunks than a master creates between two journal flushes, by far. */
#define CSRV_ID_AHEAD (1ull << 32)

struct cs_cmd {
	uint64_t id;
	uint32_t srv;
	bool replicate;
	csrv_cb cb;
	void *arg;
	int64_t deadline;
};

static uint64_t cmd_hash(const void *e)
{
	return sw_hash_u64(((const struct cs_cmd *)e)->id);
}

static bool cmd_eq(const void *e, const void *key)
{
	return ((const struct cs_cmd *)e)->id == *(const uint64_t *)key;
}

int csrvs_init(struct master *m)
{
	htab_init(&m->cs->cmds, cmd_hash);
	m->cs->next_cmd = 1;
	return 0;
}

static void deleted_cb(struct master *m, void *arg, uint32_t srv, int rc);

static int free_cmd(void *e, void *arg)
{
	struct cs_cmd *k = e;

	/* A batch of deletions in flight owns its list of chunks. */
	if (k->cb == deleted_cb)
		free(k->arg);
	free(e);
	return 0;
}

void csrvs_release(struct master *m)
{
	htab_foreach(&m->cs->cmds, free_cmd, NULL);
	htab_release(&m->cs->cmds);
	for (uint32_t i = 1; i <= m->cs->n; i++) {
		free(m->cs->srv[i]->delq);
		free(m->cs->srv[i]->strays);
		free(m->cs->srv[i]);
	}
	m->cs->n = 0;
}

struct csrv *csrv_get(struct master *m, uint32_t id)
{
	return id && id <= m->cs->n ? m->cs->srv[id] : NULL;
}

void csrv_token_epoch(struct master *m)
{
	uint64_t epoch;

	/* (Never the one before, even from a random source made
	 * deterministic, as the fuzzers make it.) */
	sw_auth_random(&epoch, sizeof(epoch));
	if (epoch == m->cs->token_epoch)
		epoch++;
	m->cs->token_epoch = epoch;
	m->cs->epoch_at = sw_mono_ns();
	sw_token_epoch_key(m->cs->token_base, epoch, m->cs->token_key);
	sw_notice(TAG,
		  "chunk tokens: epoch %016" PRIx64 " (tokens granted before "
		  "are refused: their holders ask again)",
		  epoch);
}

int64_t csrv_epoch_wait_ns(const struct master *m)
{
	return m->cs->epoch_at +
	       (int64_t)m->cfg.chunkserver_grace_ms * 1000000 - sw_mono_ns();
}

void csrv_token(struct master *m, uint64_t chunk, uint32_t version,
		enum sw_token_mode mode, uint8_t out[SW_TOKEN_LEN],
		uint64_t *expires_ms)
{
	*expires_ms = (uint64_t)(sw_now_ns() / 1000000) + CSRV_TOKEN_TTL_MS;
	sw_token_make(m->cs->token_key, chunk, version, mode, *expires_ms, out);
}

/* ---- copies --------------------------------------------------------- */

static struct chunk_copy *copy_find(struct chunk *c, uint32_t srv)
{
	for (int i = 0; i < c->ncopies; i++)
		if (c->copies[i].srv == srv)
			return &c->copies[i];
	return NULL;
}

static void copy_remove(struct chunk *c, uint32_t srv)
{
	for (int i = 0; i < c->ncopies; i++) {
		if (c->copies[i].srv != srv)
			continue;
		c->copies[i] = c->copies[--c->ncopies];
		return;
	}
}

int csrv_valid_copies(struct master *m, const struct chunk *c)
{
	int n = 0;

	for (int i = 0; i < c->ncopies; i++)
		if (c->copies[i].state == COPY_VALID &&
		    csrv_up(csrv_get(m, c->copies[i].srv)))
			n++;
	return n;
}

/* Append (@chunk, @version), sendable once @gate is durable, to @s's
 * queue. 0 or -ENOMEM. */
static int delq_push(struct csrv *s, uint64_t chunk, uint32_t version,
		     uint64_t gate)
{
	if (s->delq_head && s->delq_head * 2 >= s->delq_len) {
		memmove(s->delq, s->delq + s->delq_head,
			(s->delq_len - s->delq_head) * sizeof(*s->delq));
		s->delq_len -= s->delq_head;
		s->delq_head = 0;
	}
	if (sw_grow(&s->delq, &s->delq_cap, s->delq_len + CSRV_DELQ_ENTRY,
		    sizeof(*s->delq), 1024) < 0)
		return -ENOMEM;
	s->delq[s->delq_len++] = chunk;
	s->delq[s->delq_len++] = version;
	s->delq[s->delq_len++] = gate;
	return 0;
}

void csrv_queue_delete(struct master *m, uint32_t srv, uint64_t chunk,
		       uint32_t version)
{
	struct csrv *s = csrv_get(m, srv);

	if (!s)
		return;
	/* Called while a change is applied, before it is journaled as the
	 * next version; or by the purge, after its change was. */
	if (delq_push(s, chunk, version, m->ns.version + 1) < 0) {
		/* The copy stays; the next registration finds it
		 * orphaned and queues it again. */
		sw_err(TAG, "out of memory queueing a deletion");
		return;
	}
	m->cs->pending_deletes++;
}

void csrv_chunk_gone(void *arg, const struct chunk *c)
{
	struct master *m = arg;

	data_chunk_gone(m, c);
	for (int i = 0; i < c->ncopies; i++)
		csrv_queue_delete(m, c->copies[i].srv, c->id,
				  SW_MAX(c->version, c->copies[i].version));
}

/* ---- strays: orphaned chunk files ------------------------------- */

/* Append @chunk at @version to @s's orphans, due for deletion after
 * stray_grace. 0 or -ENOMEM. */
static int stray_push(struct master *m, struct csrv *s, uint64_t chunk,
		      uint32_t version)
{
	if (s->strays_head && s->strays_head * 2 >= s->strays_len) {
		memmove(s->strays, s->strays + s->strays_head,
			csrv_strays(s) * sizeof(*s->strays));
		s->strays_len -= s->strays_head;
		s->strays_head = 0;
	}
	if (sw_grow(&s->strays, &s->strays_cap, s->strays_len + 1,
		    sizeof(*s->strays), 256) < 0)
		return -ENOMEM;
	s->strays[s->strays_len++] = (struct csrv_stray){
		.chunk = chunk,
		.version = version,
		.due = sw_mono_ns() + (int64_t)m->cfg.stray_grace_ms * 1000000,
	};
	return 0;
}

/* Forget @s's orphans: its next registration reports them again. */
static void strays_drop(struct csrv *s)
{
	s->strays_head = s->strays_len = 0;
}

/*
 * Chunk ids of @s's deletions queued or in flight, sorted, to tell a file
 * reported at registration that is already on its way out from an
 * orphan. Built on first use by one registration message.
 */
struct queued {
	uint64_t *ids;
	size_t n, cap;
	bool built;
	size_t dead; /* files of chunks gone for good, queued */
};

static void deleted_cb(struct master *m, void *arg, uint32_t srv, int rc);
static void reconcile(struct master *m, struct csrv *s,
		      const Sweepfs__ChunkInfo *ci, struct queued *qd);

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

struct inflight_ids {
	struct queued *qd;
	uint32_t srv;
};

/* A DELETE_BATCH in flight: its (chunk id, version) pairs. */
struct del_batch {
	uint32_t n;   /* pairs */
	uint64_t v[]; /* 2 * n: id, version */
};

static int collect_inflight(void *e, void *arg)
{
	const struct cs_cmd *k = e;
	struct inflight_ids *in = arg;
	const struct del_batch *b = k->arg;

	if (k->cb != deleted_cb || k->srv != in->srv)
		return 0;
	if (sw_grow(&in->qd->ids, &in->qd->cap, in->qd->n + b->n,
		    sizeof(*in->qd->ids), 1024) < 0)
		return -ENOMEM;
	for (uint32_t i = 0; i < b->n; i++)
		in->qd->ids[in->qd->n++] = b->v[2 * i];
	return 0;
}

/* Whether @chunk is queued or in flight for deletion on @s. On no memory
 * to tell, says no: the file then waits its grace as an orphan. */
static bool queued_has(struct master *m, struct csrv *s, struct queued *qd,
		       uint64_t chunk)
{
	if (!qd->built) {
		size_t n = csrv_deletes_pending(s);
		struct inflight_ids in = { .qd = qd, .srv = s->id };

		qd->built = true;
		if (!n)
			return false;
		if (sw_grow(&qd->ids, &qd->cap, n, sizeof(*qd->ids), 1024) < 0)
			return false;
		for (size_t i = s->delq_head; i < s->delq_len;
		     i += CSRV_DELQ_ENTRY)
			qd->ids[qd->n++] = s->delq[i];
		if (s->del_inflight &&
		    htab_foreach(&m->cs->cmds, collect_inflight, &in) < 0)
			qd->n = 0;
		qsort(qd->ids, qd->n, sizeof(*qd->ids), cmp_u64);
	}
	return qd->n &&
	       bsearch(&chunk, qd->ids, qd->n, sizeof(*qd->ids), cmp_u64);
}

/* @s's orphans whose grace ended: deleted if still unknown, else taken
 * as the copies they are. */
static void strays_expire(struct master *m, struct csrv *s, int64_t now)
{
	size_t n = 0;

	while (s->strays_head < s->strays_len &&
	       s->strays[s->strays_head].due <= now) {
		const struct csrv_stray *o = &s->strays[s->strays_head++];
		Sweepfs__ChunkInfo ci = SWEEPFS__CHUNK_INFO__INIT;

		ci.chunk_id = o->chunk;
		ci.version = o->version;
		if (!chunk_get(&m->ns, o->chunk)) {
			csrv_queue_delete(m, s->id, o->chunk, o->version);
			n++;
		} else {
			sw_notice(TAG,
				  "%s: chunk %016" PRIx64 " is known again "
				  "after its grace as an orphan; kept",
				  s->listen, o->chunk);
			reconcile(m, s, &ci, NULL);
		}
	}
	if (s->strays_head == s->strays_len)
		strays_drop(s);
	if (n)
		sw_info(TAG, "%s: %zu orphaned chunk files queued for deletion",
			s->listen, n);
}

/* ---- commands ------------------------------------------------------- */

int csrv_command(struct master *m, uint32_t srv, Sweepfs__CsCommand *cmd,
		 csrv_cb cb, void *arg)
{
	struct csrv *s = csrv_get(m, srv);
	struct cs_cmd *k;

	if (!csrv_up(s))
		return -ENOTCONN;
	k = malloc(sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->id = m->cs->next_cmd++;
	k->srv = srv;
	k->replicate = cmd->op == SWEEPFS__CS_COMMAND__OP__REPLICATE;
	k->cb = cb;
	k->arg = arg;
	k->deadline = sw_mono_ns() + (int64_t)CSRV_CMD_TIMEOUT_MS * 1000000;
	if (htab_insert(&m->cs->cmds, sw_hash_u64(k->id), k) < 0) {
		free(k);
		return -ENOMEM;
	}
	cmd->id = k->id;
	req_notify(m, s->conn, SW_MSG_CS_COMMAND, &cmd->base);
	s->changed_at = sw_mono_ns();
	s->inflight++;
	if (k->replicate)
		s->replicating++;
	return 0;
}

/* Take command @id out of the table and run its callback with @rc. */
static void cmd_finish(struct master *m, struct cs_cmd *k, int rc)
{
	struct csrv *s = csrv_get(m, k->srv);

	htab_remove(&m->cs->cmds, sw_hash_u64(k->id), k);
	if (s) {
		s->inflight--;
		if (k->replicate)
			s->replicating--;
		s->changed_at = sw_mono_ns();
	}
	if (k->cb)
		k->cb(m, k->arg, k->srv, rc);
	free(k);
}

struct cmd_sweep {
	struct cs_cmd **v;
	size_t n, cap;
	uint32_t srv; /* 0: by deadline */
	int64_t now;
};

static int collect_cmd(void *e, void *arg)
{
	struct cs_cmd *k = e;
	struct cmd_sweep *sw = arg;

	if (sw->srv ? k->srv != sw->srv : k->deadline > sw->now)
		return 0;
	if (sw_grow(&sw->v, &sw->cap, sw->n + 1, sizeof(*sw->v), 64) < 0)
		return -ENOMEM;
	sw->v[sw->n++] = k;
	return 0;
}

/* Fail the commands of server @srv (0: those past their deadline). */
static void fail_cmds(struct master *m, uint32_t srv, int rc)
{
	struct cmd_sweep sw = { .srv = srv, .now = sw_mono_ns() };

	htab_foreach(&m->cs->cmds, collect_cmd, &sw);
	for (size_t i = 0; i < sw.n; i++)
		cmd_finish(m, sw.v[i], rc);
	free(sw.v);
}

/* ---- handlers ------------------------------------------------------- */

static struct csrv *server_of(struct req *r)
{
	struct csrv *s = csrv_get(r->m, req_link_of(r->m, r->conn)->csrv);

	return s && s->conn == r->conn ? s : NULL;
}

static struct csrv *find_or_add(struct master *m, uint64_t server_id,
				const char *listen)
{
	struct csrv *s;

	for (uint32_t i = 1; i <= m->cs->n; i++) {
		s = m->cs->srv[i];
		if (server_id ? s->server_id == server_id :
				!strcmp(s->listen, listen))
			return s;
	}
	if (m->cs->n == CSRV_MAX)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->id = ++m->cs->n;
	s->server_id = server_id;
	while (!s->server_id &&
	       getrandom(&s->server_id, sizeof(s->server_id), 0) < 0)
		;
	m->cs->srv[s->id] = s;
	return s;
}

/*
 * A copy of @c newer than the namespace: the master journaled nothing of
 * that version (it stopped before the record reached the disk, after
 * the servers had it), so nothing was written under it and its data is
 * the namespace version's. It becomes the chunk's version; copies at the
 * older one are stale.
 */
static void take_newer(struct master *m, struct csrv *s, struct chunk *c,
		       uint32_t version)
{
	sw_notice(TAG,
		  "%s: chunk %016" PRIx64 " at version %u, the journal's is "
		  "%u (a change the master made as it stopped); taking %u",
		  s->listen, c->id, version, c->version, version);
	c->version = version;
	ns_intent_done(&m->ns, c->id, version);
	for (int i = 0; i < c->ncopies;) {
		struct chunk_copy *cp = &c->copies[i];

		if (cp->version < version && cp->state != COPY_PENDING) {
			csrv_queue_delete(m, cp->srv, c->id, cp->version);
			*cp = c->copies[--c->ncopies];
		} else {
			i++;
		}
	}
}

/* One entry of a server's inventory against the namespace; @qd, NULL
 * once the entry's grace ended, tells what is queued for deletion. */
static void reconcile(struct master *m, struct csrv *s,
		      const Sweepfs__ChunkInfo *ci, struct queued *qd)
{
	struct chunk *c = chunk_get(&m->ns, ci->chunk_id);
	const struct chunk_intent *in;
	struct chunk_copy *cp;
	uint8_t state = COPY_VALID;

	if (!c) {
		/* Made by a master that stopped before journaling it: its
		 * id must not be handed out again while this is around.
		 * Not past CSRV_ID_AHEAD: no master hands out that many
		 * ids unjournaled, and a report must not use up the id
		 * space (nor wrap it to 0). */
		if (ci->chunk_id >= m->ns.next_chunk &&
		    ci->chunk_id - m->ns.next_chunk < CSRV_ID_AHEAD)
			m->ns.next_chunk = ci->chunk_id + 1;
		if (qd && queued_has(m, s, qd, ci->chunk_id))
			return;
		if (qd && ns_chunk_dead(&m->ns, ci->chunk_id)) {
			/* A deletion lost with a master or a connection. */
			csrv_queue_delete(m, s->id, ci->chunk_id, ci->version);
			qd->dead++;
			return;
		}
		if (!qd || !m->cfg.stray_grace_ms ||
		    stray_push(m, s, ci->chunk_id, ci->version) < 0)
			csrv_queue_delete(m, s->id, ci->chunk_id, ci->version);
		return;
	}
	in = ns_intent_get(&m->ns, c->id);
	if (!ci->damaged && ci->version < c->version && in &&
	    in->kind == INTENT_BUMP && in->version == c->version &&
	    ci->version + 1 == c->version) {
		/* A change not done yet: this may be the newest data. */
		state = COPY_BEHIND;
	} else if (ci->damaged || ci->version < c->version) {
		if (ci->damaged)
			sw_warn(TAG, "%s: chunk %016" PRIx64 " is damaged",
				s->listen, ci->chunk_id);
		copy_remove(c, s->id);
		csrv_queue_delete(m, s->id, ci->chunk_id, ci->version);
		return;
	}
	if (ci->version > c->version && !c->busy)
		take_newer(m, s, c, ci->version);
	cp = copy_find(c, s->id);
	if (!cp) {
		if (c->ncopies == CHUNK_COPIES_MAX) {
			csrv_queue_delete(m, s->id, ci->chunk_id, ci->version);
			return;
		}
		cp = &c->copies[c->ncopies++];
		cp->srv = s->id;
	}
	cp->version = ci->version;
	cp->state = state;
	s->chunks++;
	if (ns_intent_get(&m->ns, c->id))
		data_redo(m, c);
}

void csrv_op_register(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__CsRegisterReq *q = (const Sweepfs__CsRegisterReq *)msg;
	Sweepfs__CsRegisterReply reply = SWEEPFS__CS_REGISTER_REPLY__INIT;
	struct master *m = r->m;
	struct csrv *s = server_of(r);
	struct queued qd = { 0 };
	size_t strays;

	if (r->s->role != SWEEPFS__ROLE__ROLE_CHUNKSERVER) {
		req_error(r, -EPERM);
		return;
	}
	if (!s) {
		s = find_or_add(m, q->server_id, q->listen);
		if (!s) {
			req_error(r, -ENOSPC);
			return;
		}
		if (s->conn && s->conn != r->conn) {
			/* A reconnect before we saw the old one go. */
			fail_cmds(m, s->id, -ECONNRESET);
			req_link_of(m, s->conn)->csrv = 0;
		}
		s->conn = r->conn;
		s->going = false;
		req_link_of(m, r->conn)->csrv = s->id;
		s->chunks = 0;
		strays_drop(s);
		snprintf(s->listen, sizeof(s->listen), "%s", q->listen);
		sw_notice(TAG, "chunkserver %s (%016" PRIx64 ") registered",
			  s->listen, s->server_id);
	}
	s->total_bytes = q->total_bytes;
	s->used_bytes = q->used_bytes;
	s->last_seen = sw_mono_ns();
	strays = csrv_strays(s);
	for (size_t i = 0; i < q->n_chunks; i++)
		reconcile(m, s, q->chunks[i], &qd);
	free(qd.ids);
	if (qd.dead)
		sw_notice(TAG,
			  "%s: %zu chunk files of chunks deleted before "
			  "(deletions lost with a master or a connection); "
			  "queued for deletion",
			  s->listen, qd.dead);
	if (csrv_strays(s) > strays)
		sw_notice(TAG,
			  "%s: %zu chunk files the master does not know; "
			  "deleted in %" PRIu64 " s unless it learns of them",
			  s->listen, csrv_strays(s) - strays,
			  m->cfg.stray_grace_ms / 1000);
	reply.has_server_id = 1;
	reply.server_id = s->server_id;
	reply.has_token_key = 1;
	reply.token_key.data = m->cs->token_key;
	reply.token_key.len = SW_TOKEN_KEY;
	req_reply(r, &reply.base);
	/* After the reply, which gives the server this epoch's token key:
	 * the requests held run now, and their tokens go to clients. */
	data_registered(m);
}

void csrv_op_heartbeat(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__CsHeartbeatReq *q = (const Sweepfs__CsHeartbeatReq *)msg;
	Sweepfs__StatusReply reply = SWEEPFS__STATUS_REPLY__INIT;
	struct csrv *s = server_of(r);

	if (!s) {
		req_error(r, -ENOTCONN);
		return;
	}
	s->total_bytes = q->total_bytes;
	s->used_bytes = q->used_bytes;
	if (q->has_chunks) {
		s->reported_chunks = q->chunks;
		s->reported_at = sw_mono_ns();
	}
	s->last_seen = sw_mono_ns();
	req_reply(r, &reply.base);
}

void csrv_op_done(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__CsDoneReq *q = (const Sweepfs__CsDoneReq *)msg;
	Sweepfs__StatusReply reply = SWEEPFS__STATUS_REPLY__INIT;
	struct csrv *s = server_of(r);
	struct cs_cmd *k =
		htab_find(&r->m->cs->cmds, sw_hash_u64(q->id), cmd_eq, &q->id);

	req_reply(r, &reply.base);
	if (!s || !k || k->srv != s->id)
		return; /* timed out already, or not this server's */
	cmd_finish(r->m, k, q->has_err && q->err ? -abs(q->err) : 0);
}

void csrv_op_damaged(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__CsDamagedReq *q = (const Sweepfs__CsDamagedReq *)msg;
	Sweepfs__StatusReply reply = SWEEPFS__STATUS_REPLY__INIT;
	struct csrv *s = server_of(r);
	struct chunk *c = chunk_get(&r->m->ns, q->chunk_id);

	req_reply(r, &reply.base);
	if (!s || !c || !copy_find(c, s->id))
		return;
	sw_warn(TAG, "%s: chunk %016" PRIx64 " version %u failed a checksum",
		s->listen, q->chunk_id, q->version);
	/*
	 * With a good copy elsewhere the damaged one goes, and replication
	 * makes up the goal. Without, it stays (marked): its other blocks
	 * are still readable, which beats deleting the last copy of 64 MiB
	 * for one bad block.
	 */
	for (int i = 0; i < c->ncopies; i++) {
		struct chunk_copy *cp = &c->copies[i];

		if (cp->srv != s->id && cp->state == COPY_VALID &&
		    csrv_up(csrv_get(r->m, cp->srv))) {
			copy_remove(c, s->id);
			csrv_queue_delete(r->m, s->id, q->chunk_id, q->version);
			return;
		}
	}
	copy_find(c, s->id)->state = COPY_DAMAGED;
	sw_err(TAG,
	       "chunk %016" PRIx64 ": no good copy left; the damaged "
	       "one is kept and read from as far as it goes",
	       q->chunk_id);
}

void csrv_detach(struct master *m, struct conn *c)
{
	struct req_link *l = req_link_of(m, c);
	struct csrv *s = csrv_get(m, l->csrv);

	if (!s || s->conn != c)
		return;
	sw_notice(TAG, "chunkserver %s disconnected", s->listen);
	s->conn = NULL;
	l->csrv = 0;
	strays_drop(s);
	fail_cmds(m, s->id, -ECONNRESET);
}

void csrv_going(struct master *m, struct conn *c)
{
	struct csrv *s = csrv_get(m, req_link_of(m, c)->csrv);

	if (s && s->conn == c)
		s->going = true;
}

/* ---- choosing, space ------------------------------------------------ */

static double free_ratio(const struct csrv *s)
{
	if (!s->total_bytes)
		return 0;
	return (double)(s->total_bytes -
			SW_MIN(s->used_bytes, s->total_bytes)) /
	       (double)s->total_bytes;
}

int csrv_choose(struct master *m, uint32_t *out, int n, const uint32_t *exclude,
		int nx)
{
	int got = 0;

	while (got < n) {
		struct csrv *best = NULL;

		for (uint32_t i = 1; i <= m->cs->n; i++) {
			struct csrv *s = m->cs->srv[i];
			bool skip = !csrv_up(s) ||
				    s->used_bytes + SW_CHUNK_SIZE >
					    s->total_bytes;

			for (int k = 0; !skip && k < nx; k++)
				skip = exclude[k] == s->id;
			for (int k = 0; !skip && k < got; k++)
				skip = out[k] == s->id;
			if (!skip &&
			    (!best || free_ratio(s) > free_ratio(best)))
				best = s;
		}
		if (!best)
			break;
		out[got++] = best->id;
	}
	return got;
}

void csrvs_space(struct master *m, uint64_t *total, uint64_t *avail,
		 uint64_t *pending_delete)
{
	*total = *avail = 0;
	for (uint32_t i = 1; i <= m->cs->n; i++) {
		struct csrv *s = m->cs->srv[i];

		if (!csrv_up(s))
			continue;
		*total += s->total_bytes;
		*avail +=
			s->total_bytes - SW_MIN(s->used_bytes, s->total_bytes);
	}
	*pending_delete = m->cs->pending_deletes;
}

/* ---- background: deletions, replication ----------------------------- */

static void deleted_cb(struct master *m, void *arg, uint32_t srv, int rc)
{
	struct del_batch *b = arg;
	struct csrv *s = csrv_get(m, srv);

	if (s) {
		s->del_inflight -= b->n;
		s->del_batches--;
	}
	if (s && (rc == -ETIMEDOUT || rc == -ECONNRESET || rc == -ENOTCONN)) {
		/* It may have done them, or not: again, now or once it is
		 * back (an id it no longer has costs it nothing). Kept in
		 * the queue, the files it still reports at its next
		 * registration are no strays, and go without the grace. */
		for (uint32_t i = 0; i < b->n; i++)
			if (delq_push(s, b->v[2 * i], (uint32_t)b->v[2 * i + 1],
				      0) < 0)
				m->cs->pending_deletes--;
		free(b);
		return;
	}
	m->cs->pending_deletes -= b->n;
	if (s && rc == 0)
		s->deleted += b->n;
	else if (rc != -ECONNRESET && rc != -ENOTCONN)
		sw_info(TAG, "%s: a batch of %u chunk deletions failed: %s",
			s ? s->listen : "?", b->n, strerror(-rc));
	/* Failures: the files stay and the next registration finds them. */
	free(b);
	if (s && csrv_up(s))
		csrv_drain_deletions(m, s);
}

/*
 * How many of @s's queued deletions, at most @max, may go now: those
 * whose change is durable, all of them when nothing journaled is not.
 */
static size_t durable_prefix(struct master *m, const struct csrv *s, size_t max)
{
	uint64_t durable = m->cl ? changelog_durable(m->cl) : UINT64_MAX;
	bool all = !m->cl || durable >= changelog_last(m->cl);
	size_t n = 0;
	const uint64_t *e = s->delq + s->delq_head;

	while (n < max && s->delq_head + CSRV_DELQ_ENTRY * n < s->delq_len &&
	       (all || e[CSRV_DELQ_ENTRY * n + 2] <= durable))
		n++;
	return n;
}

/* Move the deletions @s's window and delete_rate allow into batches. */
void csrv_drain_deletions(struct master *m, struct csrv *s)
{
	while (s->del_batches < CSRV_DELQ_WINDOW && s->delete_credit >= 1 &&
	       s->delq_head < s->delq_len) {
		Sweepfs__CsCommand cmd = SWEEPFS__CS_COMMAND__INIT;
		uint32_t n = (uint32_t)durable_prefix(
			m, s,
			SW_MIN((size_t)CSRV_DELQ_BATCH,
			       (size_t)s->delete_credit));
		uint64_t ids[CSRV_DELQ_BATCH];
		uint32_t versions[CSRV_DELQ_BATCH];
		const uint64_t *e = s->delq + s->delq_head;
		struct del_batch *b;

		if (!n)
			break;
		b = malloc(sizeof(*b) + 2 * n * sizeof(b->v[0]));
		if (!b)
			break;
		b->n = n;
		for (uint32_t i = 0; i < n; i++) {
			ids[i] = b->v[2 * i] = e[CSRV_DELQ_ENTRY * i];
			versions[i] = (uint32_t)e[CSRV_DELQ_ENTRY * i + 1];
			b->v[2 * i + 1] = versions[i];
		}
		cmd.op = SWEEPFS__CS_COMMAND__OP__DELETE_BATCH;
		cmd.chunk_id = ids[0];
		cmd.version = versions[0];
		cmd.n_batch_ids = cmd.n_batch_versions = n;
		cmd.batch_ids = ids;
		cmd.batch_versions = versions;
		if (csrv_command(m, s->id, &cmd, deleted_cb, b) < 0) {
			free(b);
			break;
		}
		s->delq_head += CSRV_DELQ_ENTRY * (size_t)n;
		s->del_inflight += n;
		s->del_batches++;
		s->delete_credit -= n;
	}
	if (s->delq_head == s->delq_len)
		s->delq_head = s->delq_len = 0;
}

/* A tick's worth of delete_rate, then whatever the window takes. */
static void drain_deletions(struct master *m, struct csrv *s)
{
	double rate = (double)m->cfg.delete_rate;

	s->delete_credit =
		SW_MIN(s->delete_credit + rate * TICK_MS / 1000, rate / 2 + 1);
	csrv_drain_deletions(m, s);
}

struct repl {
	uint64_t chunk;
	uint32_t version;
};

static void replicated_cb(struct master *m, void *arg, uint32_t srv, int rc)
{
	struct repl *rp = arg;
	struct chunk *c = chunk_get(&m->ns, rp->chunk);
	struct chunk_copy *cp;

	if (c && (cp = copy_find(c, srv)) && cp->state == COPY_PENDING) {
		if (rc == 0 && c->version == rp->version) {
			cp->state = COPY_VALID;
			cp->version = rp->version;
		} else {
			copy_remove(c, srv);
			if (rc == 0)
				csrv_queue_delete(m, srv, rp->chunk,
						  rp->version);
		}
	}
	free(rp);
}

static void replicate(struct master *m, struct chunk *c, uint32_t goal)
{
	Sweepfs__CsCommand cmd = SWEEPFS__CS_COMMAND__INIT;
	uint32_t have[CHUNK_COPIES_MAX], target, source = 0;
	uint8_t token[SW_TOKEN_LEN];
	struct csrv *src;
	struct repl *rp;
	int nvalid = 0;

	for (int i = 0; i < c->ncopies; i++) {
		have[i] = c->copies[i].srv;
		if (c->copies[i].state == COPY_PENDING)
			return; /* one at a time */
		if (c->copies[i].state == COPY_VALID &&
		    csrv_up(csrv_get(m, c->copies[i].srv))) {
			nvalid++;
			if (!source)
				source = c->copies[i].srv;
		}
	}
	/* Not while a writer may write it: it is changing the data, and a
	 * copy at the same version would miss its later writes. Its token
	 * outlives the lease (lease_writable()). */
	if (!source || nvalid >= (int)goal || c->ncopies == CHUNK_COPIES_MAX ||
	    c->busy || lease_writable(c, sw_mono_ns()))
		return;
	src = csrv_get(m, source);
	if (src->replicating >= REPL_PER_SERVER ||
	    csrv_choose(m, &target, 1, have, c->ncopies) != 1 ||
	    csrv_get(m, target)->replicating >= REPL_PER_SERVER)
		return;
	rp = malloc(sizeof(*rp));
	if (!rp)
		return;
	rp->chunk = c->id;
	rp->version = c->version;
	cmd.op = SWEEPFS__CS_COMMAND__OP__REPLICATE;
	cmd.chunk_id = c->id;
	cmd.version = c->version;
	cmd.source = src->listen;
	csrv_token(m, c->id, c->version, SW_TOKEN_READ, token, &cmd.expires);
	cmd.has_expires = 1;
	cmd.has_token = 1;
	cmd.token.data = token;
	cmd.token.len = SW_TOKEN_LEN;
	if (csrv_command(m, target, &cmd, replicated_cb, rp) < 0) {
		free(rp);
		return;
	}
	c->copies[c->ncopies].srv = target;
	c->copies[c->ncopies].version = c->version;
	c->copies[c->ncopies].state = COPY_PENDING;
	c->ncopies++;
}

/*
 * @c has more valid copies than it needs (its goal went down): one goes,
 * from the fullest server. Not while anything is in flight for it or a
 * writer may write it (the writer writes to the copies it was told).
 */
static void trim(struct master *m, struct chunk *c, unsigned goal)
{
	int victim = -1;
	double fullest = -1;

	if (c->busy || lease_writable(c, sw_mono_ns()))
		return;
	for (int i = 0; i < c->ncopies; i++) {
		struct csrv *s = csrv_get(m, c->copies[i].srv);
		double used;

		if (c->copies[i].state != COPY_VALID || !csrv_up(s))
			continue;
		used = s->total_bytes ?
			       (double)s->used_bytes / (double)s->total_bytes :
			       0;
		if (used > fullest) {
			fullest = used;
			victim = i;
		}
	}
	if (victim < 0 || csrv_valid_copies(m, c) <= (int)goal)
		return;
	{
		uint32_t srv = c->copies[victim].srv;

		sw_info(TAG,
			"chunk %016" PRIx64 ": over its goal of %u, "
			"dropping the copy on %s",
			c->id, goal, csrv_get(m, srv)->listen);
		copy_remove(c, srv);
		csrv_queue_delete(m, srv, c->id, c->version);
	}
}

struct repl_scan {
	struct master *m;
	uint32_t inflight;
};

static int scan_chunk(void *e, void *arg)
{
	struct repl_scan *rs = arg;
	struct chunk *c = e;

	if (rs->inflight >= REPL_TOTAL)
		return 1;
	unsigned goal = chunk_goal(c, (unsigned)rs->m->cfg.goal);
	int valid = csrv_valid_copies(rs->m, c);

	if (valid < (int)goal) {
		replicate(rs->m, c, goal);
		rs->inflight++;
	} else if (valid > (int)goal) {
		trim(rs->m, c, goal);
	}
	return 0;
}

void csrvs_tick(struct master *m)
{
	struct repl_scan rs = { .m = m };
	static int64_t last_timeout_scan;
	int64_t now = sw_mono_ns();

	data_tick(m);
	for (uint32_t i = 1; i <= m->cs->n; i++) {
		struct csrv *s = m->cs->srv[i];

		if (csrv_up(s)) {
			strays_expire(m, s, now);
			drain_deletions(m, s);
		}
		rs.inflight += s->replicating;
	}
	if (now - last_timeout_scan > SW_NSEC_PER_SEC) {
		last_timeout_scan = now;
		fail_cmds(m, 0, -ETIMEDOUT);
	}
	if (m->cs->n > 1)
		htab_scan(&m->ns.chunks, &m->cs->repl_cursor, REPL_SCAN_BUDGET,
			  scan_chunk, &rs);
}
