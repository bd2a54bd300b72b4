/*
 * The chunkserver's connection to the master.
 *
 * States: IDLE -> RESOLVING -> CONNECTING -> HELLO -> REGISTERING ->
 * READY. Any failure (refusal, broken connection, unparsable frame, no
 * answer for ANSWER_TIMEOUT, a frame stuck half-way) closes the
 * connection and goes back to IDLE, to reconnect after a backoff (1 s,
 * doubling to 2 s, reset by a successful registration). Clients are
 * served throughout with the last token key the master gave.
 *
 * With a group of masters (a list), a failure moves on to the leader a
 * follower named (EREMOTE), else to the next master of the list, at
 * once; the backoff applies only when every master of the list failed
 * in a row (sw_target_failed()).
 *
 * Registration: the whole inventory, snapshotted and packed on the thread
 * pool (register.c), in parts of at most REG_MAX_CHUNKS chunks (and
 * REG_MAX_BYTES), sent one after the other, each waiting for its reply;
 * `more` is set on all but the last. The server id the master assigns is
 * kept (in <data dir>/.server_id, so that it survives restarts) and sent
 * again on every re-registration (server_id.c). Every reply may carry the
 * token key.
 *
 * Commands arrive as SW_MSG_CS_COMMAND notifications and are answered
 * with a CS_DONE request {id, err}. They run in arrival order per chunk:
 * a command waits while an earlier one for the same chunk (or, for
 * DUPLICATE, its source) is running. CREATE, SET_VERSION, TRUNCATE and
 * DUPLICATE run on libuv's pool (at most FG_MAX at once, so that clients'
 * I/O keeps most of it); DELETE and REPLICATE on the low-priority
 * background threads (bgwork.h). A command that finishes after its
 * connection broke is not answered: the re-registration's inventory
 * tells the master the outcome.
 *
 * DELETE_BATCH (up to SW_DELETE_BATCH_MAX chunks) runs on low-priority
 * threads of its own (CS_DELETE_THREADS), so that a deletion backlog
 * never queues ahead of a replication, and is answered once every file
 * is unlinked, with the counts of those unlinked and those not there:
 * the answer is the master's pacing (csrv.c). It names chunks the master no longer
 * references, so it does not wait behind other commands for them;
 * store_delete() is atomic per chunk and deletes nothing newer than the
 * version named. No fsync: a file that comes back after a crash is in
 * the next registration's inventory and the master deletes it again.
 * After each slice of DEL_SLICE unlinks, a thread pauses so that
 * deletions take only the share of its time delpace.h allows: all of it
 * while no client is served, less while deletions slow the clients'
 * reads and writes down (AIMD on their latency). Only the master's link
 * carries commands (an authenticated hello, both ways); server.c answers
 * a command frame from any client with ENOSYS.
 *
 * Framing, request ids and the calls in flight are the pipelined client
 * core's (common/pclient.h), fed from libuv's read callback: every
 * request is a call whose reply goes to its own callback (the hello's,
 * a registration part's, or one that only logs a refusal), a command
 * notification to on_notify(). A reply to no call, a frame over the
 * limit or garbage ends the connection; a break cancels every call in
 * flight (-ECANCELED: nothing is sent again, the next registration
 * starts afresh).
 *
 * A generation number, bumped at every disconnection, lets callbacks
 * that outlive their connection recognise it.
 */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "chunkserver_i.h"
#include "client.h"
#include "frame.h"
#include "idmap.h"
#include "log.h"
#include "net.h"
#include "pclient.h"
#include "register.h"
#include "util.h"
#include "wq.h"

#define TAG "master"

/* A master back from a restart is back within 2 s: it leads in a new
 * token epoch, and until a chunkserver registers with it again, that
 * one still takes the tokens of before (and a snapshot waits for it,
 * master/csrv.h, csrv_epoch_wait_ns()). Connecting to a master that is
 * down costs a refused connection. */
#define BACKOFF_MIN_MS 1000u
#define BACKOFF_MAX_MS 2000u
/* A group: its next leader is a few seconds away at most. */
#define BACKOFF_GROUP_MIN_MS 200u
#define BACKOFF_GROUP_MAX_MS 2000u
#define ANSWER_TIMEOUT_NS (60 * SW_NSEC_PER_SEC)
#define FG_MAX 2u
#define READ_CHUNK (64u << 10)
#define PEER_TIMEOUT_MS 30000
#define DEL_SLICE 64u /* unlinks between looks at the foreground */

enum ml_state {
	ML_IDLE,
	ML_RESOLVING,
	ML_CONNECTING,
	ML_HELLO,
	ML_REGISTERING,
	ML_READY,
};

/* One connection attempt; freed in its close callback. */
struct mconn {
	uv_tcp_t tcp;
	uv_connect_t creq;
	struct mlink *ml; /* NULL once abandoned */
	struct sw_wq wq;  /* frames to send (wq.out), being sent */
};

struct cmd {
	struct cmd *next; /* waiting list */
	struct mlink *ml;
	uint64_t gen; /* connection it came on */
	uint64_t id;
	int op; /* SWEEPFS__CS_COMMAND__OP__* */
	uint64_t chunk_id, src_id;
	uint32_t version, old_version, src_version;
	bool has_old_version, has_length, bg;
	uint64_t length;
	char source[300];
	uint8_t token[SW_TOKEN_LEN];
	uint64_t expires;
	uint64_t *batch; /* DELETE_BATCH: 2 * nbatch (id, version) */
	size_t nbatch;
	uint32_t deleted; /* DELETE_BATCH: unlinked, */
	uint32_t absent;  /* and not there (or newer) */
	int rc;
	uv_work_t work;
	struct bg_job job;
};

struct mlink {
	struct cs *cs;
	struct sw_target master;
	enum ml_state st;
	uint64_t gen;
	struct mconn *mc; /* the current connection, or NULL */
	uv_getaddrinfo_t gai;
	struct sw_pclient pc;	/* the current connection's frames and calls */
	uint64_t server_id;	/* 0 until the master gives one */
	struct reg_part *parts; /* registration being sent */
	size_t nparts, next_part;
	bool hb_busy;	       /* heartbeat space refresh in the pool */
	bool logged_down;      /* failures are logged once, then quietly */
	bool warned_cluster;   /* a master of another cluster was named */
	int64_t since;	       /* mono ns: entered the current state */
	int64_t last_rx;       /* mono ns: last frame from the master */
	int64_t partial_since; /* mono ns: an incomplete frame */
	int64_t next_hb;       /* mono ns */
	int64_t retry_at;      /* mono ns, in IDLE */
	uint64_t backoff_ms;
	struct cmd *wait, *wait_tail; /* commands not started */
	struct idmap busy;	      /* chunk id -> running commands (count) */
	struct idmap reported;	      /* chunk id -> version + 1 sent damaged */
	unsigned fg_running;
	bool stopping;
	/* The hello of the current connection: our challenge to the
	 * master, and our answer to its challenge (auth.h). */
	uint8_t cs_nonce[SW_AUTH_NONCE];
	uint8_t answer[SW_AUTH_TAG];
	bool answered;
	/* The master refused our hello as a follower (EREMOTE), naming
	 * this leader ("" if none): for ml_fail() to go there. */
	bool follower;
	char leader[SW_ADDR_STRLEN];
	/* The master stopped answering (a timeout): for ml_fail() to tell
	 * sw_target_failed(), which then does not follow a follower back
	 * to it while the group elects another. */
	bool silent;
};

static const char *const op_names[] = {
	[SWEEPFS__CS_COMMAND__OP__CREATE] = "create",
	[SWEEPFS__CS_COMMAND__OP__DELETE] = "delete",
	[SWEEPFS__CS_COMMAND__OP__SET_VERSION] = "set_version",
	[SWEEPFS__CS_COMMAND__OP__DUPLICATE] = "duplicate",
	[SWEEPFS__CS_COMMAND__OP__REPLICATE] = "replicate",
	[SWEEPFS__CS_COMMAND__OP__TRUNCATE] = "truncate",
	[SWEEPFS__CS_COMMAND__OP__DELETE_BATCH] = "delete_batch",
};

static void ml_fail(struct mlink *ml, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void ml_connect(struct mlink *ml);
static void pump(struct mlink *ml);

/* ---- the connection ---------------------------------------------------- */

static void on_mc_closed(uv_handle_t *h)
{
	struct mconn *mc = h->data;

	sw_wq_release(&mc->wq);
	free(mc);
}

static void mc_close(struct mconn *mc)
{
	mc->ml = NULL;
	uv_close((uv_handle_t *)&mc->tcp, on_mc_closed);
}

static void free_parts(struct mlink *ml)
{
	register_parts_free(ml->parts, ml->nparts);
	ml->parts = NULL;
	ml->nparts = ml->next_part = 0;
}

static void drop_waiting(struct mlink *ml)
{
	while (ml->wait) {
		struct cmd *k = ml->wait;

		ml->wait = k->next;
		free(k->batch);
		free(k);
	}
	ml->wait_tail = NULL;
}

/*
 * End the current connection, if any: what was being sent, registered
 * or run for it is dropped, and its calls in flight are cancelled.
 */
static void ml_drop(struct mlink *ml)
{
	if (ml->mc)
		mc_close(ml->mc);
	ml->mc = NULL;
	ml->gen++;
	free_parts(ml);
	drop_waiting(ml);
	/* Their callbacks see -ECANCELED and no reply. */
	sw_pclient_fail_all(&ml->pc, -ECANCELED);
}

/* Whether a call's completion says only that its connection ended. */
static bool cancelled(int rc, ProtobufCMessage *const *reply)
{
	return rc == -ECANCELED && !*reply;
}

static void set_state(struct mlink *ml, enum ml_state st)
{
	ml->st = st;
	ml->since = sw_mono_ns();
}

static uint64_t backoff_min(const struct mlink *ml)
{
	return ml->master.naddrs > 1 ? BACKOFF_GROUP_MIN_MS : BACKOFF_MIN_MS;
}

/*
 * Drop the connection and schedule a new one: to the leader or the next
 * master of a list at once, to the same (or the first) after the backoff
 * when the whole list failed.
 */
static void ml_fail(struct mlink *ml, const char *fmt, ...)
{
	char why[256], sw[SW_TARGET_WHYLEN], at[SW_ADDR_STRLEN];
	char line[sizeof(why) + sizeof(sw) + 64], to[SW_ADDR_STRLEN];
	bool round, follower = ml->follower;
	int cause = 0; /* for sw_target_failed() */
	uint64_t delay_ms;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	snprintf(at, sizeof(at), "%s:%u", ml->master.host, ml->master.port);
	if (follower)
		cause = -EREMOTE;
	else if (ml->silent)
		cause = -ETIMEDOUT;
	round = sw_target_failed(&ml->master, cause, ml->leader, sw,
				 sizeof(sw));
	ml->follower = false;
	ml->silent = false;
	ml->leader[0] = '\0';
	delay_ms = round ? ml->backoff_ms : 0;
	sw_addr_str(ml->master.host, ml->master.port, to, sizeof(to));
	if (!*sw) /* one master: as it always was */
		snprintf(line, sizeof(line),
			 "%s: %s; retrying in %" PRIu64 " ms", at, why,
			 delay_ms);
	else if (follower) /* "master A is a follower; leader is B" */
		snprintf(line, sizeof(line), "%s", sw);
	else if (round)
		snprintf(line, sizeof(line),
			 "master %s: %s; trying %s in %" PRIu64 " ms", at, why,
			 to, delay_ms);
	else
		snprintf(line, sizeof(line), "master %s: %s; trying %s", at,
			 why, to);
	if (!ml->logged_down)
		sw_notice(TAG, "%s", line);
	else
		sw_info(TAG, "%s", line);
	if (round)
		ml->logged_down = true;
	ml_drop(ml);
	idmap_release(&ml->reported);
	ml->partial_since = 0;
	set_state(ml, ML_IDLE);
	ml->retry_at = sw_mono_ns() + (int64_t)delay_ms * 1000000;
	/* A group between two leaders for a few seconds is the usual
	 * reason for a whole round to fail: its next leader is not waited
	 * for longer than that. */
	if (round)
		ml->backoff_ms = SW_MIN(ml->backoff_ms * 2,
					ml->master.naddrs > 1 ?
						BACKOFF_GROUP_MAX_MS :
						BACKOFF_MAX_MS);
	/* While it elects one for a leader that went silent, the others
	 * are asked again soon: they learn the new one at once. */
	if (sw_target_electing(&ml->master))
		ml->backoff_ms = BACKOFF_GROUP_MIN_MS;
	/*
	 * The leader named, or the next of the list: at once, not at the
	 * next tick (a second away). The resolver and the connect call back
	 * later, so this recurses only when they fail at once, and then at
	 * most once per master of the list before a round ends.
	 */
	if (!round && !ml->stopping)
		ml_connect(ml);
}

static void mc_write(struct mconn *mc);

static void on_mc_written(struct sw_wq *q, int status)
{
	struct mconn *mc = q->data;

	if (!mc->ml)
		return;
	if (status < 0) {
		ml_fail(mc->ml, "write failed: %s", uv_strerror(status));
		return;
	}
	mc_write(mc);
}

static void mc_write(struct mconn *mc)
{
	int rc = sw_wq_flush(&mc->wq);

	if (rc < 0)
		ml_fail(mc->ml, "write failed: %s", uv_strerror(rc));
}

/*
 * Send call @c (made with its two references) to the master. Not
 * connected, it is cancelled as a broken connection's calls are; too
 * large for the master, it fails with -EMSGSIZE.
 */
static void send_call(struct mlink *ml, struct sw_call *c)
{
	int rc = -ECANCELED;

	if (ml->mc && ml->st >= ML_HELLO)
		rc = sw_pclient_assign(&ml->pc, c);
	if (rc == 0 && sw_buf_add(&ml->mc->wq.out, c->frame, c->len) < 0) {
		sw_call_put(c);
		ml_fail(ml, "out of memory"); /* cancels it too */
		return;
	}
	sw_call_put(c); /* the sender's */
	if (rc < 0)
		sw_call_complete(c, rc, NULL);
	else
		mc_write(ml->mc);
}

/* The reply to a request whose outcome only matters when refused;
 * @arg is its type. */
static void on_status(void *arg, int rc, ProtobufCMessage **reply)
{
	const struct sw_msg_info *info = sw_msg_info((uint16_t)(uintptr_t)arg);

	if (rc < 0 && !cancelled(rc, reply))
		sw_info(TAG, "%s refused: %s", info ? info->name : "request",
			strerror(-rc));
}

/* Send @msg as a request of @type: its reply to @cb(@ml, ...), or with
 * @cb NULL only logged if refused. */
static void send_request(struct mlink *ml, uint16_t type,
			 const ProtobufCMessage *msg, sw_call_cb cb)
{
	struct sw_call *c =
		cb ? sw_call_new(type, msg, cb, ml) :
		     sw_call_new(type, msg, on_status, (void *)(uintptr_t)type);

	if (c) /* else its callback saw -ENOMEM */
		send_call(ml, c);
}

/* ---- registration --------------------------------------------------------- */

struct reg_work {
	uv_work_t work;
	struct mlink *ml;
	uint64_t gen;
	uint64_t server_id;
	const char *listen;
	struct reg_part *parts;
	size_t nparts;
	size_t nchunks;
	int rc;
};

/* Thread pool: snapshot the inventory and pack it (register.h). */
static void reg_work(uv_work_t *w)
{
	struct reg_work *rw = w->data;

	rw->rc = register_pack(rw->ml->cs->store, rw->server_id, rw->listen,
			       &rw->parts, &rw->nparts, &rw->nchunks);
}

static void on_register(void *arg, int rc, ProtobufCMessage **reply);

static void send_part(struct mlink *ml)
{
	const struct reg_part *p = &ml->parts[ml->next_part];
	struct sw_call *c = sw_call_new_packed(SW_MSG_CS_REGISTER, p->data,
					       p->len, on_register, ml);

	if (c) /* else on_register() saw -ENOMEM */
		send_call(ml, c);
}

static void reg_after(uv_work_t *w, int status)
{
	struct reg_work *rw = w->data;
	struct mlink *ml = rw->ml;

	if (rw->gen == ml->gen && !ml->stopping && ml->st == ML_REGISTERING) {
		if (rw->rc < 0) {
			ml_fail(ml, "cannot build the registration: %s",
				strerror(-rw->rc));
		} else {
			ml->parts = rw->parts;
			ml->nparts = rw->nparts;
			ml->next_part = 0;
			rw->parts = NULL;
			rw->nparts = 0;
			sw_info(TAG, "registering %zu chunks in %zu message(s)",
				rw->nchunks, ml->nparts);
			send_part(ml);
		}
	}
	register_parts_free(rw->parts, rw->nparts);
	free(rw);
}

static void start_register(struct mlink *ml)
{
	struct reg_work *rw = calloc(1, sizeof(*rw));

	if (!rw) {
		ml_fail(ml, "out of memory");
		return;
	}
	set_state(ml, ML_REGISTERING);
	rw->ml = ml;
	rw->gen = ml->gen;
	rw->server_id = ml->server_id;
	rw->listen = ml->cs->advertise;
	rw->work.data = rw;
	if (uv_queue_work(ml->cs->loop, &rw->work, reg_work, reg_after) < 0) {
		free(rw);
		ml_fail(ml, "cannot queue the registration");
	}
}

/*
 * When the next heartbeat is due. To a group, at least four per peer
 * timeout: with a heartbeat always in flight, a cut leader's connection
 * fails within the timeout (TCP_USER_TIMEOUT), as a mount's does, and
 * the chunkserver registers with the new leader as soon as the mounts
 * reach it; requests for new chunks wait for that.
 */
static int64_t next_heartbeat(const struct mlink *ml)
{
	uint64_t ms = ml->cs->cfg.heartbeat_ms;

	if (ml->master.naddrs > 1)
		ms = SW_MIN(ms, SW_GROUP_PEER_TIMEOUT_MS / 4);
	return sw_mono_ns() + (int64_t)ms * 1000000;
}

/* The answer to a part of the registration (sw_call_cb). */
static void on_register(void *arg, int rc, ProtobufCMessage **reply)
{
	const Sweepfs__CsRegisterReply *r = (void *)*reply;
	struct mlink *ml = arg;
	struct cs *cs = ml->cs;

	if (cancelled(rc, reply) || ml->st != ML_REGISTERING)
		return;
	if (!r) {
		ml_fail(ml, "registration failed: %s", strerror(-rc));
		return;
	}
	if (rc < 0) {
		ml_fail(ml, "registration refused: %s", strerror(-rc));
		return;
	}
	if (r->has_token_key && r->token_key.len != SW_TOKEN_KEY) {
		ml_fail(ml, "token key of %zu bytes", r->token_key.len);
		return;
	}
	if (r->has_token_key) {
		if (cs->has_key &&
		    memcmp(cs->key, r->token_key.data, SW_TOKEN_KEY)) {
			memcpy(cs->prev_key, cs->key, SW_TOKEN_KEY);
			cs->has_prev_key = true;
		}
		memcpy(cs->key, r->token_key.data, SW_TOKEN_KEY);
		cs->has_key = true;
	}
	if (r->has_server_id && r->server_id && r->server_id != ml->server_id) {
		ml->server_id = r->server_id;
		cs_server_id_save(ml->cs, ml->server_id);
	}
	if (++ml->next_part < ml->nparts) {
		send_part(ml);
		return;
	}
	free_parts(ml);
	set_state(ml, ML_READY);
	sw_target_ok(&ml->master);
	ml->backoff_ms = backoff_min(ml);
	ml->logged_down = false;
	ml->next_hb = next_heartbeat(ml);
	sw_notice(TAG,
		  "registered with %s:%u as server %016" PRIx64
		  " (%zu chunks)%s",
		  ml->master.host, ml->master.port, ml->server_id,
		  store_count(cs->store),
		  cs->has_key ? "" : "; no token key yet");
}

/* ---- heartbeats ------------------------------------------------------------- */

struct hb_work {
	uv_work_t work;
	struct mlink *ml;
	uint64_t gen;
	uint64_t total, used;
	size_t chunks;
};

static void hb_work(uv_work_t *w)
{
	struct hb_work *hw = w->data;
	struct store *st = hw->ml->cs->store;

	store_refresh_space(st);
	store_space(st, &hw->total, &hw->used, NULL);
	hw->chunks = store_count(st);
}

static void hb_after(uv_work_t *w, int status)
{
	struct hb_work *hw = w->data;
	struct mlink *ml = hw->ml;
	Sweepfs__CsHeartbeatReq q = SWEEPFS__CS_HEARTBEAT_REQ__INIT;

	ml->hb_busy = false;
	if (hw->gen == ml->gen && ml->st == ML_READY) {
		q.has_total_bytes = q.has_used_bytes = q.has_chunks = 1;
		q.total_bytes = hw->total;
		q.used_bytes = hw->used;
		q.chunks = (uint32_t)SW_MIN(hw->chunks, UINT32_MAX);
		send_request(ml, SW_MSG_CS_HEARTBEAT, &q.base, NULL);
	}
	free(hw);
}

static void heartbeat(struct mlink *ml)
{
	struct hb_work *hw;

	ml->next_hb = next_heartbeat(ml);
	if (ml->hb_busy)
		return;
	hw = calloc(1, sizeof(*hw));
	if (!hw)
		return;
	hw->ml = ml;
	hw->gen = ml->gen;
	hw->work.data = hw;
	if (uv_queue_work(ml->cs->loop, &hw->work, hb_work, hb_after) < 0) {
		free(hw);
		return;
	}
	ml->hb_busy = true;
}

/* ---- commands ------------------------------------------------------------------ */

/* Fetch from a peer chunkserver for REPLICATE (a background thread). */
struct fetch_ctx {
	struct sw_client *c;
	const struct cmd *k;
	const struct cs *cs;
};

static int fetch(void *arg, uint32_t off, uint8_t *buf, uint32_t size)
{
	struct fetch_ctx *fc = arg;
	Sweepfs__CsReadReq q = SWEEPFS__CS_READ_REQ__INIT;
	Sweepfs__CsReadReply *r;
	ProtobufCMessage *reply;
	int rc;

	if (cs_stopping(fc->cs))
		return -ECANCELED;
	q.chunk_id = fc->k->chunk_id;
	q.version = fc->k->version;
	q.offset = off;
	q.size = size;
	q.has_token = q.has_expires = 1;
	q.token.data = (uint8_t *)fc->k->token;
	q.token.len = SW_TOKEN_LEN;
	q.expires = fc->k->expires;
	rc = sw_client_call(fc->c, SW_MSG_CS_READ, &q.base, &reply);
	if (rc < 0)
		return rc;
	r = (Sweepfs__CsReadReply *)reply;
	rc = sw_reply_err(reply);
	if (rc == 0 && r->has_data && r->data.len > size)
		rc = -EPROTO;
	if (rc == 0 && r->has_data) {
		if (r->data.len) /* an empty one has no buffer at all */
			memcpy(buf, r->data.data, r->data.len);
		rc = (int)r->data.len;
	}
	protobuf_c_message_free_unpacked(reply, NULL);
	return rc;
}

static int replicate(struct cs *cs, const struct cmd *k)
{
	struct fetch_ctx fc = { .k = k, .cs = cs };
	struct sw_target t;
	int rc;

	if (sw_target_parse(k->source, SW_CHUNKSERVER_PORT, &t) < 0)
		return -EINVAL;
	rc = sw_client_open(&t, SWEEPFS__ROLE__ROLE_CHUNKSERVER, cs->name,
			    PEER_TIMEOUT_MS, &fc.c);
	if (rc < 0)
		return rc;
	fc.c->max_payload = SW_FRAME_MAX_DATA;
	rc = store_import(cs->store, k->chunk_id, k->version, fetch, &fc);
	sw_client_close(fc.c);
	return rc;
}

/* A slice of unlinks took @spent_ns: pause for the clients' sake. */
static void yield_to_clients(struct cs *cs, int64_t spent_ns)
{
	int64_t pause = delpace_pause_ns(&cs->del_pace, spent_ns);
	struct timespec ts;

	if (pause <= 0)
		return;
	ts.tv_sec = pause / SW_NSEC_PER_SEC;
	ts.tv_nsec = pause % SW_NSEC_PER_SEC;
	nanosleep(&ts, NULL);
}

/*
 * DELETE_BATCH on the deletion thread: every chunk, counted into @k.
 * Returns 0, or the first error other than "not there" (the others are
 * still tried), or -ECANCELED at shutdown.
 */
static int delete_batch(struct cs *cs, struct cmd *k)
{
	int64_t t0 = sw_mono_ns();
	int first = 0;

	for (size_t i = 0; i < k->nbatch; i++) {
		int rc = store_delete(cs->store, k->batch[2 * i],
				      (uint32_t)k->batch[2 * i + 1]);

		if (rc == 0)
			k->deleted++;
		else if (rc == -ENOENT || rc == -ESTALE)
			k->absent++;
		else if (!first)
			first = rc;
		if ((i + 1) % DEL_SLICE && i + 1 < k->nbatch)
			continue;
		delpace_deleted(&cs->del_pace, (uint32_t)((i % DEL_SLICE) + 1));
		if (cs_stopping(cs))
			return -ECANCELED;
		yield_to_clients(cs, sw_mono_ns() - t0);
		t0 = sw_mono_ns();
	}
	__atomic_add_fetch(&cs->batch_deleted, k->deleted, __ATOMIC_RELAXED);
	__atomic_add_fetch(&cs->batch_absent, k->absent, __ATOMIC_RELAXED);
	return first;
}

/* Run command @k (a pool or background thread). */
static int cmd_exec(struct cs *cs, struct cmd *k)
{
	struct store *st = cs->store;
	int64_t len = k->has_length ? (int64_t)k->length : -1;

	switch (k->op) {
	case SWEEPFS__CS_COMMAND__OP__CREATE:
		return store_create(st, k->chunk_id, k->version);
	case SWEEPFS__CS_COMMAND__OP__DELETE:
		return store_delete(st, k->chunk_id, k->version);
	case SWEEPFS__CS_COMMAND__OP__DELETE_BATCH:
		return delete_batch(cs, k);
	case SWEEPFS__CS_COMMAND__OP__SET_VERSION:
		return store_set_version(st, k->chunk_id, k->old_version,
					 k->version, len);
	case SWEEPFS__CS_COMMAND__OP__DUPLICATE: {
		int rc = store_duplicate(st, k->src_id, k->src_version,
					 k->chunk_id, k->version);

		/* With a length: the copy of a shared chunk being cut
		 * (the master duplicates rather than cut what others see). */
		if (rc == 0 && k->has_length)
			rc = store_truncate(st, k->chunk_id, k->version,
					    (uint32_t)k->length);
		return rc;
	}
	case SWEEPFS__CS_COMMAND__OP__REPLICATE:
		return replicate(cs, k);
	case SWEEPFS__CS_COMMAND__OP__TRUNCATE:
		if (k->has_old_version)
			return store_set_version(st, k->chunk_id,
						 k->old_version, k->version,
						 len);
		return store_truncate(st, k->chunk_id, k->version,
				      (uint32_t)k->length);
	default:
		return -EINVAL;
	}
}

static void send_done_counts(struct mlink *ml, uint64_t gen, uint64_t id,
			     int rc, const struct cmd *k)
{
	Sweepfs__CsDoneReq q = SWEEPFS__CS_DONE_REQ__INIT;

	if (gen != ml->gen)
		return;
	q.id = id;
	q.has_err = rc < 0;
	q.err = -rc;
	if (k && k->op == SWEEPFS__CS_COMMAND__OP__DELETE_BATCH) {
		q.has_deleted = q.has_absent = 1;
		q.deleted = k->deleted;
		q.absent = k->absent;
	}
	send_request(ml, SW_MSG_CS_DONE, &q.base, NULL);
}

static void send_done(struct mlink *ml, uint64_t gen, uint64_t id, int rc)
{
	send_done_counts(ml, gen, id, rc, NULL);
}

static void busy_add(struct idmap *m, uint64_t id, long delta)
{
	uintptr_t n = (uintptr_t)idmap_get(m, id) + (uintptr_t)delta;

	if (n)
		idmap_put(m, id, (void *)n);
	else
		idmap_del(m, id);
}

/* A command failed on a bad checksum: of which chunk copy? */
static void report_damaged(struct mlink *ml, const struct cmd *k)
{
	if (k->op == SWEEPFS__CS_COMMAND__OP__DUPLICATE)
		mlink_damaged(ml->cs, k->src_id, k->src_version);
	else
		mlink_damaged(ml->cs, k->chunk_id,
			      k->has_old_version ? k->old_version : k->version);
}

/* Back on the loop: answer, let waiting commands go. */
static void cmd_finish(struct cmd *k, bool cancelled)
{
	struct mlink *ml = k->ml;

	if (k->op != SWEEPFS__CS_COMMAND__OP__DELETE_BATCH)
		busy_add(&ml->busy, k->chunk_id, -1);
	if (k->op == SWEEPFS__CS_COMMAND__OP__DUPLICATE)
		busy_add(&ml->busy, k->src_id, -1);
	if (!k->bg)
		ml->fg_running--;
	if (k->rc == -EBADMSG)
		report_damaged(ml, k);
	if (cancelled)
		k->rc = -ECANCELED;
	if (k->rc < 0)
		sw_info(TAG,
			"command %" PRIu64 " (%s chunk %016" PRIx64 " v%u): %s",
			k->id, op_names[k->op], k->chunk_id, k->version,
			strerror(-k->rc));
	else
		sw_debug(TAG,
			 "command %" PRIu64 " (%s chunk %016" PRIx64
			 " v%u) done",
			 k->id, op_names[k->op], k->chunk_id, k->version);
	if (!ml->stopping && !cancelled)
		send_done_counts(ml, k->gen, k->id, k->rc, k);
	free(k->batch);
	free(k);
	if (!ml->stopping)
		pump(ml);
}

static void cmd_work(uv_work_t *w)
{
	struct cmd *k = w->data;

	k->rc = cmd_exec(k->ml->cs, k);
}

static void cmd_after(uv_work_t *w, int status)
{
	cmd_finish(w->data, false);
}

static void cmd_bg_work(struct bg_job *j)
{
	struct cmd *k = (struct cmd *)((char *)j - offsetof(struct cmd, job));

	k->rc = cmd_exec(k->ml->cs, k);
}

static void cmd_bg_done(struct bg_job *j, bool cancelled)
{
	cmd_finish((struct cmd *)((char *)j - offsetof(struct cmd, job)),
		   cancelled);
}

static void cmd_start(struct mlink *ml, struct cmd *k)
{
	int rc;

	if (k->op == SWEEPFS__CS_COMMAND__OP__DELETE_BATCH) {
		k->job.work = cmd_bg_work;
		k->job.done = cmd_bg_done;
		bg_submit(ml->cs->bg_del, &k->job);
		return;
	}
	busy_add(&ml->busy, k->chunk_id, 1);
	if (k->op == SWEEPFS__CS_COMMAND__OP__DUPLICATE)
		busy_add(&ml->busy, k->src_id, 1);
	if (k->bg) {
		k->job.work = cmd_bg_work;
		k->job.done = cmd_bg_done;
		bg_submit(ml->cs->bg, &k->job);
		return;
	}
	ml->fg_running++;
	k->work.data = k;
	rc = uv_queue_work(ml->cs->loop, &k->work, cmd_work, cmd_after);
	if (rc < 0) {
		/* Not cmd_finish(): pump() is iterating the list. */
		busy_add(&ml->busy, k->chunk_id, -1);
		if (k->op == SWEEPFS__CS_COMMAND__OP__DUPLICATE)
			busy_add(&ml->busy, k->src_id, -1);
		ml->fg_running--;
		send_done(ml, k->gen, k->id, rc);
		free(k);
	}
}

static bool blocked(const struct idmap *busy, const struct idmap *skipped,
		    const struct cmd *k)
{
	bool dup = k->op == SWEEPFS__CS_COMMAND__OP__DUPLICATE;

	if (k->op == SWEEPFS__CS_COMMAND__OP__DELETE_BATCH)
		return false;
	return idmap_get(busy, k->chunk_id) ||
	       idmap_get(skipped, k->chunk_id) ||
	       (dup &&
		(idmap_get(busy, k->src_id) || idmap_get(skipped, k->src_id)));
}

/*
 * Start every waiting command that may run now, in order: one that must
 * wait also holds back later commands for its chunks (@skipped).
 */
static void pump(struct mlink *ml)
{
	struct cmd **pp = &ml->wait, *k;
	struct idmap skipped;

	idmap_init(&skipped);
	ml->wait_tail = NULL;
	while ((k = *pp)) {
		if (blocked(&ml->busy, &skipped, k) ||
		    (!k->bg && ml->fg_running >= FG_MAX)) {
			idmap_put(&skipped, k->chunk_id, k);
			if (k->op == SWEEPFS__CS_COMMAND__OP__DUPLICATE)
				idmap_put(&skipped, k->src_id, k);
			ml->wait_tail = k;
			pp = &k->next;
			continue;
		}
		*pp = k->next;
		cmd_start(ml, k);
	}
	idmap_release(&skipped);
}

static int cmd_check(const Sweepfs__CsCommand *q)
{
	switch (q->op) {
	case SWEEPFS__CS_COMMAND__OP__CREATE:
	case SWEEPFS__CS_COMMAND__OP__DELETE:
		return 0;
	case SWEEPFS__CS_COMMAND__OP__SET_VERSION:
		return q->has_old_version && (!q->has_length ||
					      q->length <= SW_CHUNK_SIZE) ?
			       0 :
			       -EINVAL;
	case SWEEPFS__CS_COMMAND__OP__DUPLICATE:
		return q->has_src_chunk_id && q->has_src_version ? 0 : -EINVAL;
	case SWEEPFS__CS_COMMAND__OP__REPLICATE:
		return q->source && *q->source && strlen(q->source) < 300 &&
				       q->has_token &&
				       q->token.len == SW_TOKEN_LEN &&
				       q->has_expires ?
			       0 :
			       -EINVAL;
	case SWEEPFS__CS_COMMAND__OP__TRUNCATE:
		return q->has_length && q->length <= SW_CHUNK_SIZE ? 0 :
								     -EINVAL;
	case SWEEPFS__CS_COMMAND__OP__DELETE_BATCH:
		return q->n_batch_ids >= 1 &&
				       q->n_batch_ids <= SW_DELETE_BATCH_MAX &&
				       q->n_batch_versions == q->n_batch_ids ?
			       0 :
			       -EINVAL;
	default:
		return -EINVAL;
	}
}

static void on_command(struct mlink *ml, const Sweepfs__CsCommand *q)
{
	int rc = cmd_check(q);
	uint64_t *batch = NULL;
	struct cmd *k;

	if (rc == 0 && !(k = calloc(1, sizeof(*k))))
		rc = -ENOMEM;
	if (rc == 0 && q->op == SWEEPFS__CS_COMMAND__OP__DELETE_BATCH &&
	    !(batch = malloc(2 * q->n_batch_ids * sizeof(*batch)))) {
		free(k);
		rc = -ENOMEM;
	}
	if (rc < 0) {
		sw_info(TAG, "command %" PRIu64 " (op %d): %s", q->id, q->op,
			strerror(-rc));
		send_done(ml, ml->gen, q->id, rc);
		return;
	}
	*k = (struct cmd){
		.ml = ml,
		.gen = ml->gen,
		.id = q->id,
		.op = q->op,
		.chunk_id = q->chunk_id,
		.version = q->version,
		.old_version = q->old_version,
		.has_old_version = q->has_old_version,
		.src_id = q->src_chunk_id,
		.src_version = q->src_version,
		.has_length = q->has_length,
		.length = q->length,
		.expires = q->expires,
		.bg = q->op == SWEEPFS__CS_COMMAND__OP__DELETE ||
		      q->op == SWEEPFS__CS_COMMAND__OP__REPLICATE ||
		      q->op == SWEEPFS__CS_COMMAND__OP__DELETE_BATCH,
		.batch = batch,
		.nbatch = batch ? q->n_batch_ids : 0,
	};
	for (size_t i = 0; i < k->nbatch; i++) {
		batch[2 * i] = q->batch_ids[i];
		batch[2 * i + 1] = q->batch_versions[i];
	}
	if (q->source)
		snprintf(k->source, sizeof(k->source), "%s", q->source);
	if (q->has_token && q->token.len == SW_TOKEN_LEN)
		memcpy(k->token, q->token.data, SW_TOKEN_LEN);
	if (ml->wait_tail)
		ml->wait_tail->next = k;
	else
		ml->wait = k;
	ml->wait_tail = k;
	pump(ml);
}

void mlink_damaged(struct cs *cs, uint64_t id, uint32_t version)
{
	Sweepfs__CsDamagedReq q = SWEEPFS__CS_DAMAGED_REQ__INIT;
	struct mlink *ml = cs->ml;

	if (!ml || ml->st < ML_REGISTERING)
		return;
	if ((uintptr_t)idmap_get(&ml->reported, id) == (uintptr_t)version + 1)
		return;
	idmap_put(&ml->reported, id, (void *)((uintptr_t)version + 1));
	sw_warn(TAG, "reporting chunk %016" PRIx64 " v%u as damaged", id,
		version);
	q.chunk_id = id;
	q.version = version;
	send_request(ml, SW_MSG_CS_DAMAGED, &q.base, NULL);
}

/* ---- frames from the master ------------------------------------------------------ */

static void send_hello(struct mlink *ml, const Sweepfs__HelloReply *ch);

/*
 * Whether the master that proved it holds our key serves the cluster
 * whose chunks these data directories hold (cs->cluster_id, taken from
 * the first master that said its id). One of another cluster (a stray
 * master address, a chunkserver key copied between clusters) gets no
 * registration: its chunk ids name other files, and it would take ours
 * for stale copies of its own, or for chunks it freed, and delete them.
 * The pin is never moved by the chunkserver itself: an operator who
 * means to move it removes .cluster_id (or empties the directories). A
 * master that says no id (one older than cluster ids, or a new one whose
 * id is not durable yet: session_hello()) is believed only by a
 * chunkserver that holds none: one that does waits for it.
 */
static bool cluster_ours(struct mlink *ml, const Sweepfs__HelloReply *r)
{
	struct cs *cs = ml->cs;
	char ours[2 * SW_CLUSTER_ID_LEN + 1], theirs[2 * SW_CLUSTER_ID_LEN + 1];

	if (!r->has_cluster_id || r->cluster_id.len != SW_CLUSTER_ID_LEN) {
		if (!cs->has_cluster_id)
			return true;
		ml_fail(ml, "says no cluster id (ours is kept in .cluster_id)");
		return false;
	}
	if (!cs->has_cluster_id) {
		memcpy(cs->cluster_id, r->cluster_id.data, SW_CLUSTER_ID_LEN);
		cs->has_cluster_id = true;
		cs_cluster_id_save(cs);
		return true;
	}
	if (!memcmp(cs->cluster_id, r->cluster_id.data, SW_CLUSTER_ID_LEN))
		return true;
	cs_cluster_id_str(cs->cluster_id, ours);
	cs_cluster_id_str(r->cluster_id.data, theirs);
	/* Said loudly once, then at each round's usual level. */
	if (!ml->warned_cluster)
		sw_err(TAG,
		       "the master at %s:%u serves cluster %s, but the chunks "
		       "in this chunkserver's data directories are of cluster "
		       "%s: not registering with it (a wrong master address? "
		       "if these chunks are that cluster's, remove .cluster_id "
		       "from the data directories; to reuse this chunkserver "
		       "for another cluster, empty them first)",
		       ml->master.host, ml->master.port, theirs, ours);
	ml->warned_cluster = true;
	ml_fail(ml, "serves cluster %s, not ours (%s)", theirs, ours);
	return false;
}

/*
 * The master's answer to our hello. The first asks us to prove that we
 * hold the chunkserver key (a challenge); the second must prove that it
 * holds it too, before we take its token key or any command from it.
 */
static void on_hello_reply(struct mlink *ml, const Sweepfs__HelloReply *r)
{
	int rc = sw_reply_err(&r->base);
	uint8_t want[SW_AUTH_TAG];

	if (ml->st != ML_HELLO)
		return;
	if (rc == -EACCES && r->has_challenge && !ml->answered &&
	    r->challenge.len == SW_AUTH_NONCE) {
		send_hello(ml, r);
		return;
	}
	if (rc == -EREMOTE) {
		ml->follower = true;
		sw_hello_leader(r, ml->leader);
		ml_fail(ml, "a follower in a group of masters");
		return;
	}
	if (rc < 0) {
		ml_fail(ml, "hello refused: %s%s", strerror(-rc),
			rc == -EACCES ? " (is master_key_file the master's "
					"chunkserver key, and this address in "
					"its chunkserver_allow?)" :
					"");
		return;
	}
	sw_auth_tag(ml->cs->master_key, SW_AUTH_MASTER, ml->cs_nonce,
		    sizeof(ml->cs_nonce), NULL, 0, want);
	if (!r->has_cs_proof || r->cs_proof.len != SW_AUTH_TAG ||
	    !sw_auth_equal(r->cs_proof.data, want, SW_AUTH_TAG)) {
		ml_fail(ml, "the master did not prove it holds our key; "
			    "not registering with it");
		return;
	}
	if (!cluster_ours(ml, r))
		return;
	start_register(ml);
}

/* The master's answer to our hello (sw_call_cb). */
static void on_hello(void *arg, int rc, ProtobufCMessage **reply)
{
	struct mlink *ml = arg;

	if (cancelled(rc, reply) || ml->st != ML_HELLO)
		return;
	if (!*reply) {
		ml_fail(ml, "hello failed: %s", strerror(-rc));
		return;
	}
	on_hello_reply(ml, (const Sweepfs__HelloReply *)*reply);
}

/* A notification from the master (pclient ops.notify): a command, for
 * the only one meant for us. -EPROTO (the connection ends) when it does
 * not parse. */
static int on_notify(void *arg, const struct sw_frame_hdr *hdr,
		     const uint8_t *payload)
{
	struct mlink *ml = arg;
	Sweepfs__CsCommand *q;

	if (hdr->type != SW_MSG_CS_COMMAND)
		return 0;
	q = sweepfs__cs_command__unpack(NULL, hdr->len, payload);
	if (!q)
		return -EPROTO;
	on_command(ml, q);
	sweepfs__cs_command__free_unpacked(q, NULL);
	return 0;
}

static void on_mc_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct mconn *mc = h->data;
	uint8_t *room = NULL;
	long n = mc->ml ? sw_pclient_room(&mc->ml->pc, READ_CHUNK, &room) :
			  -ENOTCONN;

	(void)hint;
	buf->base = n < 0 ? NULL : (char *)room;
	buf->len = n < 0 ? 0 : (size_t)n;
}

static void on_mc_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct mconn *mc = s->data;
	struct mlink *ml = mc->ml;
	int rc;

	if (!ml)
		return;
	if (nread < 0 || !buf->base) {
		ml->silent = nread == UV_ETIMEDOUT;
		ml_fail(ml, "connection lost: %s",
			nread < 0 ? uv_strerror((int)nread) : "out of memory");
		return;
	}
	ml->last_rx = sw_mono_ns();
	rc = sw_pclient_feed(&ml->pc, (size_t)nread);
	if (rc == -ECANCELED) /* a reply's handling ended it */
		return;
	if (rc < 0) {
		ml_fail(ml, "bad frame from the master: %s", strerror(-rc));
		return;
	}
	if (!sw_pclient_partial(&ml->pc))
		ml->partial_since = 0;
	else if (!ml->partial_since)
		ml->partial_since = sw_mono_ns();
}

/* ---- connecting ---------------------------------------------------------------- */

/* Say hello: first with our challenge only, then (@ch) with the answer
 * to the master's. */
static void send_hello(struct mlink *ml, const Sweepfs__HelloReply *ch)
{
	Sweepfs__Hello h = SWEEPFS__HELLO__INIT;

	if (!ch) {
		sw_auth_random(ml->cs_nonce, sizeof(ml->cs_nonce));
		ml->answered = false;
	} else {
		sw_auth_tag(ml->cs->master_key, SW_AUTH_CHUNKSERVER,
			    ch->challenge.data, ch->challenge.len, NULL, 0,
			    ml->answer);
		ml->answered = true;
		h.has_auth = 1;
		h.auth.data = ml->answer;
		h.auth.len = sizeof(ml->answer);
	}
	h.has_cs_nonce = 1;
	h.cs_nonce.data = ml->cs_nonce;
	h.cs_nonce.len = sizeof(ml->cs_nonce);
	h.version =
		sw_proto_hello_version(SWEEPFS__ROLE__ROLE_CHUNKSERVER, true);
	h.role = SWEEPFS__ROLE__ROLE_CHUNKSERVER;
	h.has_client_name = 1;
	h.client_name.data = (uint8_t *)ml->cs->name;
	h.client_name.len = strlen(ml->cs->name);
	send_request(ml, SW_MSG_HELLO, &h.base, on_hello);
}

static void on_connected(uv_connect_t *req, int status)
{
	struct mconn *mc = req->data;
	struct mlink *ml = mc->ml;

	if (!ml)
		return;
	if (status < 0) {
		ml->silent = status == UV_ETIMEDOUT;
		ml_fail(ml, "cannot connect: %s", uv_strerror(status));
		return;
	}
	uv_tcp_nodelay(&mc->tcp, 1);
	/* A master of a group whose machine or network went: the next one,
	 * within seconds (heartbeats are data in flight; keepalives cover
	 * the quiet times). */
	if (ml->master.naddrs > 1) {
		uv_os_fd_t fd;

		if (uv_fileno((uv_handle_t *)&mc->tcp, &fd) == 0)
			sw_tcp_dead_peer_timeout(
				fd, sw_target_peer_timeout(&ml->master,
							   UINT32_MAX));
	}
	uv_read_start((uv_stream_t *)&mc->tcp, on_mc_alloc, on_mc_read);
	set_state(ml, ML_HELLO);
	ml->last_rx = sw_mono_ns();
	sw_info(TAG, "connected to %s:%u", ml->master.host, ml->master.port);
	send_hello(ml, NULL);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
	struct mlink *ml = req->data;
	struct mconn *mc;
	int rc;

	if (ml->stopping) {
		uv_freeaddrinfo(res);
		set_state(ml, ML_IDLE);
		return;
	}
	if (status < 0) {
		uv_freeaddrinfo(res);
		ml_fail(ml, "cannot resolve: %s", uv_strerror(status));
		return;
	}
	mc = calloc(1, sizeof(*mc));
	if (!mc) {
		uv_freeaddrinfo(res);
		ml_fail(ml, "out of memory");
		return;
	}
	mc->ml = ml;
	uv_tcp_init(ml->cs->loop, &mc->tcp);
	mc->tcp.data = mc;
	sw_wq_init(&mc->wq, (uv_stream_t *)&mc->tcp, on_mc_written, mc);
	mc->creq.data = mc;
	ml->mc = mc;
	set_state(ml, ML_CONNECTING);
	rc = uv_tcp_connect(&mc->creq, &mc->tcp, res->ai_addr, on_connected);
	uv_freeaddrinfo(res);
	if (rc < 0)
		ml_fail(ml, "cannot connect: %s", uv_strerror(rc));
}

static void ml_connect(struct mlink *ml)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	char port[8];
	int rc;

	snprintf(port, sizeof(port), "%u", ml->master.port);
	set_state(ml, ML_RESOLVING);
	ml->gai.data = ml;
	rc = uv_getaddrinfo(ml->cs->loop, &ml->gai, on_resolved,
			    ml->master.host, port, &hints);
	if (rc < 0)
		ml_fail(ml, "cannot resolve: %s", uv_strerror(rc));
}

/* ---- entry points ---------------------------------------------------------------- */

void mlink_tick(struct cs *cs)
{
	struct mlink *ml = cs->ml;
	int64_t now = sw_mono_ns();
	int64_t silent = SW_MAX(ANSWER_TIMEOUT_NS,
				4 * (int64_t)cs->cfg.heartbeat_ms * 1000000);
	int64_t answer;

	if (!ml || ml->stopping)
		return;
	/* A member of a group that does not answer a connect or a hello
	 * within seconds is gone (its machine, its network): the next. */
	answer = (int64_t)sw_target_peer_timeout(&ml->master,
						 ANSWER_TIMEOUT_NS / 1000000) *
		 1000000;
	if (ml->st == ML_IDLE && now >= ml->retry_at) {
		ml_connect(ml);
	} else if (ml->st >= ML_CONNECTING && ml->st < ML_READY &&
		   now - ml->since > answer) {
		ml->silent = true;
		ml_fail(ml, "no answer for %d s",
			(int)(answer / SW_NSEC_PER_SEC));
	} else if (ml->st == ML_READY && now - ml->last_rx > silent) {
		ml->silent = true;
		ml_fail(ml, "silent for %d s", (int)(silent / SW_NSEC_PER_SEC));
	} else if (ml->partial_since &&
		   now - ml->partial_since >
			   (int64_t)cs->cfg.frame_timeout_ms * 1000000) {
		ml_fail(ml, "stalled in the middle of a frame");
	} else if (ml->st == ML_READY && now >= ml->next_hb) {
		heartbeat(ml);
	}
}

bool mlink_ready(const struct cs *cs)
{
	return cs->ml && cs->ml->st == ML_READY;
}

int mlink_start(struct cs *cs)
{
	struct mlink *ml = calloc(1, sizeof(*ml));
	struct sw_pclient_ops ops = { .notify = on_notify, .arg = ml };
	int rc;

	if (!ml)
		return -ENOMEM;
	rc = sw_target_parse(cs->cfg.master, SW_MASTER_PORT, &ml->master);
	if (rc < 0) {
		sw_crit(TAG, "bad master address: %s", cs->cfg.master);
		free(ml);
		return rc;
	}
	rc = cs_cluster_id_load(cs);
	if (rc < 0) {
		free(ml);
		return rc;
	}
	ml->cs = cs;
	sw_pclient_init(&ml->pc, SW_FRAME_MAX_META, NULL, &ops);
	ml->backoff_ms = backoff_min(ml);
	ml->server_id = cs_server_id_load(cs);
	idmap_init(&ml->busy);
	idmap_init(&ml->reported);
	cs->ml = ml;
	ml_connect(ml);
	return 0;
}

void mlink_stop(struct cs *cs)
{
	struct mlink *ml = cs->ml;

	if (!ml || ml->stopping)
		return;
	ml->stopping = true;
	if (ml->st == ML_RESOLVING)
		uv_cancel((uv_req_t *)&ml->gai);
	ml_drop(ml);
}

void mlink_release(struct cs *cs)
{
	struct mlink *ml = cs->ml;

	if (!ml)
		return;
	/* None left after mlink_stop(). */
	sw_pclient_fail_all(&ml->pc, -ECANCELED);
	sw_pclient_release(&ml->pc);
	idmap_release(&ml->busy);
	idmap_release(&ml->reported);
	free(ml);
	cs->ml = NULL;
}
