/*
 * Threads and locks. FUSE workers call mconn_send(): they encode the
 * frame, register it under `mu`, and write it under `wmu` (taken first;
 * the order is always wmu, then mu). The receiver thread reads replies,
 * takes the matching request out under `mu` and runs its callback with no
 * lock held. Writing and reading are separate so that a writer blocked on
 * a full socket never stops replies from being taken.
 *
 * A request may complete (on the receiver) while its sender is still
 * inside write(2): requests are reference-counted, one reference for the
 * table and one for the sender.
 *
 * Framing, request ids, the in-flight table and the sorting of what is
 * in flight at a break (sent again if messages.def says it may be, else
 * failed) are the pipelined client core's (common/pclient.h), guarded by
 * `mu`; this file adds the threads, the hello, the lease, lazy frames
 * and reconnection. Replies to ids nobody waits for (pings, lazy frames)
 * are expected; a reply to an id never issued ends the connection.
 *
 * Reconnection, expiry of requests waiting for the master, and sending
 * what waited all happen on the receiver thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "buf.h"
#include "calls.h"
#include "client.h"
#include "frame.h"
#include "fsio.h"
#include "hset.h"
#include "log.h"
#include "master_conn.h"
#include "pclient.h"
#include "util.h"

#define TAG "mconn"
/* Lazy requests wait at most this long for a request to ride along. */
#define LAZY_NS (2 * 1000 * 1000)
/*
 * A group's member that has answered nothing for PROBE_NS while requests
 * wait gets a ping; one silent for DEAD_NS is given up, as a dead one is.
 * A master frozen (a paused VM) or whose loop is stuck still has its
 * kernel acknowledge what is sent: TCP never times out, and the mount
 * would wait on it while another member leads. (The master answers a
 * ping even while the connection waits for a delegation: server.c.)
 *
 * The lease: what the mount holds from the master (delegations, cached
 * listings) it trusts for the master's lease_ms (HelloReply) past the
 * sending of the newest request the master answered, and pings a few
 * times a lease while it holds any; past that it drops them (o.lapsed). A
 * mount cut off from its master then stops answering from them before
 * the master takes its delegations back, and with them the kernel's
 * long-lived names (deleg.c), instead of answering stale for as long as
 * the cut lasts.
 */
#define PROBE_NS (1000 * 1000000LL)
/* The longest pause between rounds of the list while the group elects a
 * leader for the one that went silent (sw_target_electing()): followers
 * learn the new one from etcd at once, and the mount should too. */
#define ELECTING_RETRY_MS 200
#define DEAD_NS (2 * SW_GROUP_PEER_TIMEOUT_MS * 1000000LL)

struct mconn {
	struct mconn_opts o;
	char client_name[256];

	pthread_mutex_t wmu; /* socket writes; taken before mu */
	pthread_mutex_t mu;
	int fd; /* -1 while disconnected */
	uint64_t session_id;
	uint64_t root_ino;
	/* The cluster's identity from the first hello that carried one
	 * (HelloReply.cluster_id); written before the receiver runs. */
	uint8_t cluster_id[SW_CLUSTER_ID_LEN];
	bool has_cluster_id;
	bool read_only; /* the export is, as of the last hello */
	/* The session's secret, which proves to the master on a reconnect
	 * that the session is ours (receiver thread, or before it runs). */
	uint8_t secret[SW_AUTH_TAG];
	bool has_secret;
	struct sw_pclient pc;	 /* in flight, by id (mu); input (rx) */
	struct sw_call *waiting; /* not sent: no connection */
	struct sw_call **waiting_tail;
	struct sw_buf lazy; /* frames of mconn_send_lazy(), unsent */
	int64_t lazy_since; /* mono ns of the oldest */
	int rx_sleep_ms;    /* the receiver's poll timeout (-1: none) */
	bool stop;

	int wake_fd; /* eventfd: wakes the receiver */
	pthread_t rx;
	bool rx_started;
	/* Receiver thread only. */
	int64_t heard;	/* mono ns: bytes came, or nothing was awaited */
	int64_t probed; /* mono ns of the last ping */
	uint64_t ping_id;
	/* Written by the receiver thread, read by others (atomic). */
	int64_t lease_ns; /* the master's lease (0: it has none) */
	int64_t trusted;  /* mono ns: sent, the newest request answered */
	bool lapsed;	  /* the lease ran out; o.lapsed was called */
};

static void wake_rx(struct mconn *mc)
{
	uint64_t one = 1;

	if (write(mc->wake_fd, &one, sizeof(one)) < 0)
		sw_debug(TAG, "wake: %s", strerror(errno));
}

static void wait_add(struct mconn *mc, struct sw_call *p)
{
	p->next = NULL;
	p->deadline = sw_mono_ns() + (int64_t)mc->o.timeout_ms * 1000000;
	*mc->waiting_tail = p;
	mc->waiting_tail = &p->next;
}

/* ---- sending -------------------------------------------------------- */

/* Write the lazy frames, giving them ids nobody waits for. wmu held. */
static int flush_lazy(struct mconn *mc, int fd)
{
	uint8_t *f = sw_buf_head(&mc->lazy), *end = f + sw_buf_used(&mc->lazy);
	int rc;

	pthread_mutex_lock(&mc->mu);
	for (; f < end;
	     f += SW_FRAME_HDR + (f[0] << 24 | f[1] << 16 | f[2] << 8 | f[3])) {
		struct sw_frame_hdr hdr;

		sw_frame_get_hdr(f, SW_FRAME_HDR, UINT32_MAX, &hdr);
		hdr.id = sw_pclient_issue(&mc->pc);
		sw_frame_put_hdr(f, &hdr);
	}
	pthread_mutex_unlock(&mc->mu);
	rc = sw_send_all(fd, sw_buf_head(&mc->lazy), sw_buf_used(&mc->lazy));
	sw_buf_reset(&mc->lazy);
	return rc;
}

void mconn_send(struct mconn *mc, uint16_t type, const ProtobufCMessage *req,
		mconn_cb cb, void *arg)
{
	const struct sw_msg_info *info = sw_msg_info(type);
	struct hset_msg w;
	struct sw_call *p;
	int fd, rc = 0;

	if (mc->o.before_send &&
	    !(mc->rx_started && pthread_equal(pthread_self(), mc->rx)))
		mc->o.before_send(mc->o.arg, type);
	p = sw_call_new(type,
			hset_attach(&w, type, req, mc->o.handle, mc->o.arg), cb,
			arg);
	hset_detach(&w);
	if (!p) {
		ProtobufCMessage *none = NULL;

		if (cb) /* exactly once, as promised */
			cb(arg, -ENOMEM, &none);
		return;
	}
	p->resend = info && info->resend;
	p->once = info && info->once;
	if (!sw_pclient_fits(&mc->pc, p)) {
		sw_call_put(p); /* the sender's: never sent */
		sw_call_complete(p, -EMSGSIZE, NULL);
		return;
	}

	pthread_mutex_lock(&mc->wmu);
	pthread_mutex_lock(&mc->mu);
	fd = mc->fd;
	if (fd >= 0) {
		sw_pclient_assign(&mc->pc, p); /* it fits */
		p->sent_at = sw_mono_ns();
	} else {
		wait_add(mc, p);
		wake_rx(mc); /* so that it expires on time */
	}
	pthread_mutex_unlock(&mc->mu);
	if (fd >= 0 && sw_buf_used(&mc->lazy))
		rc = flush_lazy(mc, fd);
	if (fd >= 0 && rc == 0)
		rc = sw_send_all(fd, p->frame, p->len);
	if (rc < 0)
		shutdown(fd, SHUT_RDWR); /* the receiver settles the rest */
	pthread_mutex_unlock(&mc->wmu);
	sw_call_put(p);
}

void mconn_send_lazy(struct mconn *mc, uint16_t type,
		     const ProtobufCMessage *req)
{
	struct hset_msg w;
	bool first, poke;
	int rc;

	req = hset_attach(&w, type, req, mc->o.handle, mc->o.arg);
	pthread_mutex_lock(&mc->wmu);
	first = sw_buf_used(&mc->lazy) == 0;
	rc = sw_buf_add_frame(&mc->lazy, type, 0, 0, req);
	hset_detach(&w);
	if (rc < 0) {
		pthread_mutex_unlock(&mc->wmu);
		return; /* bookkeeping only; a reconnect reconciles it */
	}
	if (first)
		mc->lazy_since = sw_mono_ns();
	pthread_mutex_unlock(&mc->wmu);
	pthread_mutex_lock(&mc->mu);
	/* Woken if it sleeps past when these are due. */
	poke = first && (mc->rx_sleep_ms < 0 ||
			 (int64_t)mc->rx_sleep_ms * 1000000 > LAZY_NS);
	pthread_mutex_unlock(&mc->mu);
	if (poke)
		wake_rx(mc); /* so that it sends them in time */
}

/* Receiver thread: send lazy frames that waited long enough. Returns the
 * poll timeout in ms until the next check (-1: nothing waits). */
static int lazy_tick(struct mconn *mc, int fd)
{
	int64_t left;
	int rc = 0, timeout = -1;

	/* Never blocking: a writer stuck on a full socket holds wmu (and
	 * sends these with its own frame), and the liveness checks after
	 * this must go on. */
	if (pthread_mutex_trylock(&mc->wmu) != 0)
		return (int)(LAZY_NS / 1000000) + 1;
	if (sw_buf_used(&mc->lazy)) {
		left = mc->lazy_since + LAZY_NS - sw_mono_ns();
		if (left <= 0)
			rc = flush_lazy(mc, fd);
		else
			timeout = (int)(left / 1000000) + 1;
	}
	pthread_mutex_unlock(&mc->wmu);
	if (rc < 0)
		shutdown(fd, SHUT_RDWR);
	return timeout;
}

/* Receiver thread: send a ping (never blocking: a writer stuck on a full
 * socket holds wmu, and the checks must go on; its shutdown() frees that
 * writer). Its id nobody waits for: the reply only says the master lives. */
static void ping(struct mconn *mc, int fd, int64_t now)
{
	Sweepfs__PingReq q = SWEEPFS__PING_REQ__INIT;
	struct sw_buf b;
	int rc;

	if (pthread_mutex_trylock(&mc->wmu) != 0)
		return;
	sw_buf_init(&b);
	pthread_mutex_lock(&mc->mu);
	mc->ping_id = sw_pclient_issue(&mc->pc);
	rc = sw_buf_add_frame(&b, SW_MSG_PING, 0, mc->ping_id, &q.base);
	pthread_mutex_unlock(&mc->mu);
	if (rc == 0) {
		ssize_t n = send(fd, sw_buf_head(&b), sw_buf_used(&b),
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		/* Half a frame would garble the stream: give it up. */
		if (n > 0 && (size_t)n < sw_buf_used(&b))
			shutdown(fd, SHUT_RDWR);
	}
	pthread_mutex_unlock(&mc->wmu);
	sw_buf_release(&b);
	mc->probed = now;
}

/* Receiver thread: drop what the mount holds under the lease, once until
 * the master answers again. */
static void lapse(struct mconn *mc)
{
	if (mc->lapsed)
		return;
	mc->lapsed = true;
	if (mc->o.lapsed)
		mc->o.lapsed(mc->o.arg);
}

/*
 * Receiver thread: the lease, and a group's member's liveness. While the
 * mount holds anything under the lease, ping a few times a lease, and drop it
 * all once the lease ran out. A group's member silent for PROBE_NS while
 * requests wait gets a ping too; -ETIMEDOUT (*@dead) when it has been
 * silent for DEAD_NS. Returns the poll timeout in ms until the next check
 * (-1: none).
 */
static int liveness_tick(struct mconn *mc, int fd, int *dead)
{
	int64_t now = sw_mono_ns(), probe = PROBE_NS;
	bool holds, watch;
	size_t flight;

	*dead = 0;
	/* A few pings per lease: one lost or late does not end it. */
	if (mc->lease_ns && mc->lease_ns / 4 < probe)
		probe = mc->lease_ns / 4;
	pthread_mutex_lock(&mc->mu);
	flight = mc->pc.nflight;
	pthread_mutex_unlock(&mc->mu);
	/* Answers keep coming while the mount is busy: ask only when none
	 * came for a while. */
	holds = mc->lease_ns && now - mc->trusted >= probe && mc->o.holds &&
		mc->o.holds(mc->o.arg);
	if (holds && now - mc->trusted >= mc->lease_ns) {
		if (!mc->lapsed)
			sw_warn(TAG,
				"no answer from the master for %" PRId64
				" ms: dropping the delegations and listings "
				"this mount holds",
				(now - mc->trusted) / 1000000);
		lapse(mc);
	} else if (now - mc->trusted < mc->lease_ns) {
		mc->lapsed = false;
	}
	watch = mc->o.target.naddrs > 1 && flight;
	if (!flight)
		mc->heard = now;
	if (watch && now - mc->heard >= DEAD_NS) {
		sw_warn(TAG,
			"the master has answered nothing for %" PRId64
			" ms: giving it up",
			(now - mc->heard) / 1000000);
		*dead = -ETIMEDOUT;
		return 0;
	}
	if (!holds && !(watch && now - mc->heard >= PROBE_NS))
		return mc->lease_ns || mc->o.target.naddrs > 1 ?
			       (int)(probe / 1000000) :
			       -1;
	if (now - mc->probed >= probe)
		ping(mc, fd, now);
	return (int)(probe / 1000000);
}

bool mconn_lease_holds(struct mconn *mc)
{
	int64_t lease = __atomic_load_n(&mc->lease_ns, __ATOMIC_RELAXED);
	int64_t t = __atomic_load_n(&mc->trusted, __ATOMIC_RELAXED);
	bool connected;

	pthread_mutex_lock(&mc->mu);
	connected = mc->fd >= 0;
	pthread_mutex_unlock(&mc->mu);
	return connected && lease && sw_mono_ns() - t < lease;
}

/* ---- hello ---------------------------------------------------------- */

/*
 * Whether @hr comes from a master of another cluster than the one this
 * mount was made on (HelloReply.cluster_id), said in the log.
 */
static bool other_cluster(struct mconn *mc, const Sweepfs__HelloReply *hr)
{
	char was[2 * SW_CLUSTER_ID_LEN + 1], now[2 * SW_CLUSTER_ID_LEN + 1];
	char where[SW_ADDR_STRLEN];

	if (!mc->has_cluster_id || !hr->has_cluster_id ||
	    hr->cluster_id.len != SW_CLUSTER_ID_LEN ||
	    !memcmp(mc->cluster_id, hr->cluster_id.data, SW_CLUSTER_ID_LEN))
		return false;
	for (size_t i = 0; i < SW_CLUSTER_ID_LEN; i++) {
		snprintf(was + 2 * i, 3, "%02x", mc->cluster_id[i]);
		snprintf(now + 2 * i, 3, "%02x", hr->cluster_id.data[i]);
	}
	sw_err(TAG,
	       "the master at %s serves cluster %s, not %s that this mount "
	       "is of: not resuming there (unmount, and mount again to use "
	       "it)",
	       sw_addr_str(mc->o.target.host, mc->o.target.port, where,
			   sizeof(where)),
	       now, was);
	return true;
}

/*
 * Connect to the target's current address within @connect_ms and
 * exchange hellos on a fresh socket, synchronously (twice when the export
 * asks for a password). Returns the socket, or -errno; for a refused
 * hello sets *@refused, and for -EREMOTE puts the leader the follower
 * named into @leader (SW_ADDR_STRLEN bytes; "" if none).
 */
static int connect_hello(struct mconn *mc, uint64_t *session_id,
			 uint64_t *root_ino, int connect_ms, char *leader,
			 bool *refused)
{
	Sweepfs__Hello hello = SWEEPFS__HELLO__INIT;
	Sweepfs__HelloReply *hr = NULL;
	ProtobufCMessage *reply;
	uint8_t tag[SW_AUTH_TAG];
	Sweepfs__OpenClaim **claims = NULL;
	Sweepfs__InoClaim **inos = NULL;
	size_t nclaims = 0, ninos = 0;
	int fd, rc, tries = 0;
	int64_t t0;

	*leader = '\0';
	*refused = false;
	t0 = sw_mono_ns();
	fd = sw_tcp_connect(mc->o.target.host, mc->o.target.port, connect_ms);
	if (fd < 0)
		return fd;
	/* A master whose network vanished sends no FIN or RST: without
	 * this, requests in flight on the dead connection would wait for
	 * TCP to give up (~15 minutes), not master_timeout; a group's
	 * member, a few seconds, since another one takes over. */
	sw_tcp_dead_peer_timeout(
		fd, sw_target_peer_timeout(&mc->o.target,
					   (unsigned)mc->o.timeout_ms));
	hello.version = SW_PROTO_VERSION;
	hello.role = SWEEPFS__ROLE__ROLE_MOUNT;
	hello.has_session_id = *session_id != 0;
	hello.session_id = *session_id;
	if (*session_id && mc->has_secret) {
		hello.has_session_secret = 1;
		hello.session_secret.data = mc->secret;
		hello.session_secret.len = sizeof(mc->secret);
	}
	hello.has_subdir = 1;
	hello.subdir.data = (uint8_t *)mc->o.target.subdir;
	hello.subdir.len = strlen(mc->o.target.subdir);
	hello.has_cache_ms = 1;
	hello.cache_ms = mc->o.cache_ms;
	/* main.c's notify_cb() drops all it caches when told to. */
	hello.has_inval_all = 1;
	hello.inval_all = 1;
	hello.has_client_name = 1;
	hello.client_name.data = (uint8_t *)mc->client_name;
	hello.client_name.len = strlen(mc->client_name);
	if (*session_id && mc->o.open_claims) {
		mc->o.open_claims(mc->o.arg, &claims, &nclaims);
		hello.n_opens = nclaims;
		hello.opens = claims;
		hello.has_reclaim = 1;
		hello.reclaim = 1;
	}
	if (*session_id && mc->has_secret && mc->o.ino_claims) {
		mc->o.ino_claims(mc->o.arg, &inos, &ninos);
		hello.n_ino_ranges = ninos;
		hello.ino_ranges = inos;
	}
again:
	/* Through the connection's core, whose table is empty while there
	 * is no connection: what follows the reply stays in its input for
	 * the receiver. A member of a group that does not answer within the
	 * peer timeout is frozen or stuck (its kernel still accepts
	 * connections): the next one may lead. */
	rc = sw_pclient_call(&mc->pc, fd, SW_MSG_HELLO, &hello.base,
			     (int)sw_target_peer_timeout(&mc->o.target, 10000),
			     &reply);
	if (rc == 0) {
		if (hr)
			sweepfs__hello_reply__free_unpacked(hr, NULL);
		hr = (Sweepfs__HelloReply *)reply;
		if (hr->has_role && hr->role != SWEEPFS__ROLE__ROLE_MASTER) {
			/* A chunkserver's port, say: no use trying again. */
			rc = -EPROTOTYPE;
			*refused = true;
		} else if (hr->has_err && hr->err) {
			rc = -hr->err;
			if (rc == -EACCES)
				rc = sw_hello_refusal(&mc->o.target, hr, &hello,
						      tag, tries++);
			if (rc == 0)
				goto again;
			*refused = true;
			if (rc == -EREMOTE)
				sw_hello_leader(hr, leader);
		} else if (!hr->has_session_id || !hr->has_root_ino) {
			rc = -EPROTO;
		} else if (other_cluster(mc, hr)) {
			/* Our inode numbers mean nothing there: a master
			 * started afresh on the same address, say. */
			rc = -ESTALE;
			*refused = true;
		} else {
			*session_id = hr->session_id;
			*root_ino = hr->root_ino;
			__atomic_store_n(&mc->lease_ns,
					 hr->has_lease_ms ?
						 (int64_t)hr->lease_ms *
							 1000000 :
						 0,
					 __ATOMIC_RELAXED);
			__atomic_store_n(&mc->trusted, t0, __ATOMIC_RELAXED);
			mc->has_secret = hr->has_session_secret &&
					 hr->session_secret.len ==
						 sizeof(mc->secret);
			if (mc->has_secret)
				memcpy(mc->secret, hr->session_secret.data,
				       sizeof(mc->secret));
			mc->read_only = hr->has_read_only && hr->read_only;
			if (!mc->has_cluster_id && hr->has_cluster_id &&
			    hr->cluster_id.len == SW_CLUSTER_ID_LEN) {
				memcpy(mc->cluster_id, hr->cluster_id.data,
				       SW_CLUSTER_ID_LEN);
				mc->has_cluster_id = true;
			}
		}
	}
	if (hr)
		sweepfs__hello_reply__free_unpacked(hr, NULL);
	free(claims);
	free(inos);
	if (rc < 0) {
		/* Nothing read on it may reach the next connection; the
		 * table holds nothing while there is no connection. */
		sw_pclient_fail_all(&mc->pc, -EIO);
		close(fd);
		return rc;
	}
	return fd;
}

/* ---- receiving ------------------------------------------------------ */

/* A notification frame (pclient ops.notify). */
static int on_notify(void *arg, const struct sw_frame_hdr *hdr,
		     const uint8_t *payload)
{
	struct mconn *mc = arg;

	if (mc->o.notify)
		mc->o.notify(mc->o.arg, hdr->type, payload, hdr->len);
	return 0;
}

/* A reply nobody waits for (ops.stray): a ping's says the master lives;
 * a lazy frame's means nothing. */
static int on_stray(void *arg, const struct sw_frame_hdr *hdr,
		    const uint8_t *payload)
{
	struct mconn *mc = arg;

	(void)payload;
	if (hdr->id == mc->ping_id && mc->probed > mc->trusted)
		__atomic_store_n(&mc->trusted, mc->probed, __ATOMIC_RELAXED);
	return 0;
}

/* A call's reply came (ops.answered). The master was alive when it got
 * the request: the lease runs from the sending. */
static void on_answered(void *arg, const struct sw_call *p)
{
	struct mconn *mc = arg;

	if (!p->sent_at) /* the hello: no request of the session yet */
		return;
	if (p->sent_at > mc->trusted)
		__atomic_store_n(&mc->trusted, p->sent_at, __ATOMIC_RELAXED);
	if (mc->o.answered)
		mc->o.answered(mc->o.arg, p->type, sw_mono_ns() - p->sent_at);
}

/* Read and deliver what arrived. Returns 0, or why the connection ended. */
static int receive(struct mconn *mc, int fd)
{
	int rc = sw_pclient_read(&mc->pc, fd, 64 << 10, 0);

	if (rc == -EAGAIN)
		return 0;
	/* Bytes came (or the end, which tears it down anyway). */
	mc->heard = sw_mono_ns();
	return rc;
}

/* What messages.def says may go again after a break (sw_pclient_keep_fn):
 * harmless, or with its id (SW_FRAME_AGAIN). */
static bool resent(const struct sw_call *p)
{
	return p->resend || p->once;
}

/*
 * The connection broke. What was in flight either waits to be sent again
 * (if harmless) or fails now.
 */
static void disconnected(struct mconn *mc)
{
	struct sw_call *fail, *kept, *p, *next;

	shutdown(mc->fd, SHUT_RDWR); /* unblock a writer */
	pthread_mutex_lock(&mc->wmu);
	pthread_mutex_lock(&mc->mu);
	close(mc->fd);
	mc->fd = -1;
	pthread_mutex_unlock(&mc->mu);
	/* wmu held: nothing is assigned meanwhile. */
	sw_pclient_disconnect(&mc->pc, resent, &kept, &fail);
	pthread_mutex_lock(&mc->mu);
	for (p = kept; p; p = next) {
		next = p->next;
		wait_add(mc, p);
	}
	pthread_mutex_unlock(&mc->mu);
	sw_buf_reset(&mc->lazy); /* a reconnect's reclaim covers these */
	pthread_mutex_unlock(&mc->wmu);
	sw_call_fail_list(fail, -EIO);
}

/* Fail requests that waited for a connection longer than allowed. */
static void expire_waiting(struct mconn *mc, bool all)
{
	int64_t now = sw_mono_ns();
	struct sw_call *expired = NULL, **pp, *p;

	pthread_mutex_lock(&mc->mu);
	for (pp = &mc->waiting; (p = *pp);) {
		if (all || p->deadline <= now) {
			*pp = p->next;
			p->next = expired;
			expired = p;
		} else {
			pp = &p->next;
		}
	}
	mc->waiting_tail = pp;
	pthread_mutex_unlock(&mc->mu);
	sw_call_fail_list(expired, -EIO);
}

/* Connected again: send everything that waited, in order. */
static void connected(struct mconn *mc, int fd)
{
	struct sw_call **v, *p;
	size_t n = 0;
	int rc = 0;

	pthread_mutex_lock(&mc->wmu);
	pthread_mutex_lock(&mc->mu);
	for (p = mc->waiting; p; p = p->next)
		n++;
	v = malloc((n ? n : 1) * sizeof(*v));
	if (!v) {
		/* Leave them waiting; they expire if this persists. */
		pthread_mutex_unlock(&mc->mu);
		pthread_mutex_unlock(&mc->wmu);
		close(fd);
		return;
	}
	n = 0;
	for (p = mc->waiting; p; p = p->next)
		v[n++] = p;
	mc->waiting = NULL;
	mc->waiting_tail = &mc->waiting;
	mc->fd = fd;
	mc->heard = sw_mono_ns();
	/* Ids and table entries first: replies may come as soon as sent.
	 * Each gets a sender's reference for the write below. */
	for (size_t i = 0; i < n; i++) {
		sw_call_get(v[i]);
		sw_pclient_assign(&mc->pc, v[i]); /* fits: mconn_send() */
		v[i]->sent_at = mc->heard;
	}
	pthread_mutex_unlock(&mc->mu);
	for (size_t i = 0; i < n; i++) {
		if (rc == 0)
			rc = sw_send_all(fd, v[i]->frame, v[i]->len);
		sw_call_put(v[i]);
	}
	if (rc < 0)
		shutdown(fd, SHUT_RDWR);
	pthread_mutex_unlock(&mc->wmu);
	free(v);
}

static void drain_wake(struct mconn *mc)
{
	uint64_t v;

	if (read(mc->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		sw_debug(TAG, "wake read: %s", strerror(errno));
}

/*
 * One try to reconnect, to the target's current address, resuming the
 * session. Returns the socket; or -EAGAIN when the next try, to a leader
 * named or the next master of the list, is due at once; or -errno when a
 * round of the list failed, to wait before the next. Switches are logged
 * at notice level until a round failed (*@quiet), then at debug level:
 * a long outage of every master writes no line per try.
 */
static int reconnect(struct mconn *mc, bool *quiet)
{
	uint64_t sid = mc->session_id, root = 0;
	char leader[SW_ADDR_STRLEN], why[SW_TARGET_WHYLEN];
	char where[SW_ADDR_STRLEN];
	bool refused, round;
	int fd;

	/* A member of a group that does not answer a connect within the
	 * peer timeout is as good as gone; the next one may lead. */
	fd = connect_hello(mc, &sid, &root,
			   (int)sw_target_peer_timeout(&mc->o.target, 5000),
			   leader, &refused);
	if (fd >= 0) {
		sw_target_ok(&mc->o.target);
		if (sid != mc->session_id)
			sw_warn(TAG, "the master started a new session for us");
		mc->session_id = sid;
		sw_notice(TAG, "reconnected to the master at %s",
			  sw_addr_str(mc->o.target.host, mc->o.target.port,
				      where, sizeof(where)));
		if (mc->o.reconnected)
			mc->o.reconnected(mc->o.arg);
		return fd;
	}
	if (refused && fd != -EREMOTE)
		sw_err(TAG, "the master refuses us: %s", strerror(-fd));
	round = sw_target_failed(&mc->o.target, fd, leader, why, sizeof(why));
	if (*why && !*quiet)
		sw_notice(TAG, "%s", why);
	else if (*why)
		sw_debug(TAG, "%s", why);
	if (!round)
		return -EAGAIN;
	*quiet = true;
	return fd == -EAGAIN ? -EIO : fd;
}

static void *rx_main(void *arg)
{
	struct mconn *mc = arg;
	int delay_ms = 50;
	bool quiet = false; /* a whole round of the list failed */

	mc->heard = sw_mono_ns();
	for (;;) {
		struct pollfd pfd[2];
		bool stop;
		int fd, rc;

		pthread_mutex_lock(&mc->mu);
		fd = mc->fd;
		stop = mc->stop;
		pthread_mutex_unlock(&mc->mu);
		if (stop)
			break;
		if (fd >= 0) {
			int timeout, live, dead;

			/* Asleep for senders from here: a lazy frame added
			 * before the poll wakes it (mconn_send_lazy()). */
			pthread_mutex_lock(&mc->mu);
			mc->rx_sleep_ms = -1;
			pthread_mutex_unlock(&mc->mu);
			timeout = lazy_tick(mc, fd);
			live = liveness_tick(mc, fd, &dead);

			if (live >= 0 && (timeout < 0 || live < timeout))
				timeout = live;

			pfd[0] = (struct pollfd){ .fd = fd, .events = POLLIN };
			pfd[1] = (struct pollfd){ .fd = mc->wake_fd,
						  .events = POLLIN };
			pthread_mutex_lock(&mc->mu);
			mc->rx_sleep_ms = timeout;
			pthread_mutex_unlock(&mc->mu);
			rc = poll(pfd, 2, timeout);
			pthread_mutex_lock(&mc->mu);
			mc->rx_sleep_ms = 0;
			pthread_mutex_unlock(&mc->mu);
			if (rc < 0 && errno != EINTR)
				break;
			if (rc > 0 && pfd[1].revents)
				drain_wake(mc);
			if (dead && !(rc > 0 && pfd[0].revents))
				rc = dead;
			else if (rc <= 0 || !pfd[0].revents)
				continue;
			else
				rc = receive(mc, fd);
			if (rc == 0)
				continue;
			pthread_mutex_lock(&mc->mu);
			stop = mc->stop;
			pthread_mutex_unlock(&mc->mu);
			if (!stop)
				sw_warn(TAG,
					"connection to the master lost: "
					"%s; reconnecting",
					strerror(-rc));
			disconnected(mc);
			/* What the master said may be lost from here on, and
			 * it drops our delegations when it sees the break:
			 * nothing more is answered from them. */
			lapse(mc);
			/* Timed out: that master's machine or network is
			 * gone; another member of a group takes over, so
			 * try it first rather than wait on a connect. */
			if (rc == -ETIMEDOUT && mc->o.target.naddrs > 1)
				sw_target_silent(&mc->o.target);
			delay_ms = 50;
			quiet = false;
			continue;
		}

		expire_waiting(mc, false);
		fd = reconnect(mc, &quiet);
		if (fd >= 0) {
			connected(mc, fd);
			continue;
		}
		if (fd == -EAGAIN)
			continue; /* the next master of the list, at once */
		expire_waiting(mc, false);
		pfd[0] = (struct pollfd){ .fd = mc->wake_fd, .events = POLLIN };
		if (poll(pfd, 1, delay_ms) > 0)
			drain_wake(mc);
		delay_ms = SW_MIN(delay_ms * 2, 1000);
		if (sw_target_electing(&mc->o.target))
			delay_ms = SW_MIN(delay_ms, ELECTING_RETRY_MS);
	}
	return NULL;
}

/* ---- lifecycle ------------------------------------------------------ */

/* The first hello, to each master of the list in turn (sw_walk_fn). */
static int first_hello(void *arg, const struct sw_target *t, int connect_ms,
		       char *leader, bool *refused)
{
	struct mconn *mc = arg;

	/* t is mc->o.target. A single address: 5 s, as before lists. */
	return connect_hello(mc, &mc->session_id, &mc->root_ino,
			     t->naddrs > 1 ? SW_MIN(connect_ms, 5000) : 5000,
			     leader, refused);
}

static void note_switch(void *arg, const char *why)
{
	(void)arg;
	sw_notice(TAG, "%s", why);
}

int mconn_open(const struct mconn_opts *o, struct mconn **out)
{
	struct mconn *mc = calloc(1, sizeof(*mc));
	struct sw_pclient_ops ops = {
		.notify = on_notify,
		.stray = on_stray,
		.answered = on_answered,
		.arg = mc,
	};
	int fd;

	if (!mc)
		return -ENOMEM;
	mc->o = *o;
	snprintf(mc->client_name, sizeof(mc->client_name), "%s",
		 o->client_name ? o->client_name : "");
	mc->o.client_name = mc->client_name;
	sw_pclient_init(&mc->pc, SW_FRAME_MAX_META, &mc->mu, &ops);
	mc->waiting_tail = &mc->waiting;
	mc->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (mc->wake_fd < 0) {
		free(mc);
		return -errno;
	}
	pthread_mutex_init(&mc->mu, NULL);
	pthread_mutex_init(&mc->wmu, NULL);
	fd = sw_target_walk(&mc->o.target, mc->o.timeout_ms, first_hello, mc,
			    note_switch);
	if (fd < 0) {
		/* The hellos' replies were read into its input. */
		sw_pclient_release(&mc->pc);
		close(mc->wake_fd);
		pthread_mutex_destroy(&mc->mu);
		pthread_mutex_destroy(&mc->wmu);
		free(mc);
		return fd;
	}
	mc->fd = fd;
	*out = mc;
	return 0;
}

uint64_t mconn_root_ino(const struct mconn *mc)
{
	return mc->root_ino;
}

bool mconn_read_only(const struct mconn *mc)
{
	return mc->read_only;
}

bool mconn_cluster_id(const struct mconn *mc, uint8_t id[SW_CLUSTER_ID_LEN])
{
	if (mc->has_cluster_id)
		memcpy(id, mc->cluster_id, SW_CLUSTER_ID_LEN);
	return mc->has_cluster_id;
}

uint64_t mconn_session_id(const struct mconn *mc)
{
	return mc->session_id;
}

int mconn_start(struct mconn *mc)
{
	int rc = pthread_create(&mc->rx, NULL, rx_main, mc);

	if (rc)
		return -rc;
	mc->rx_started = true;
	return 0;
}

void mconn_close(struct mconn *mc)
{
	pthread_mutex_lock(&mc->mu);
	mc->stop = true;
	pthread_mutex_unlock(&mc->mu);
	wake_rx(mc);
	if (mc->rx_started)
		pthread_join(mc->rx, NULL);
	if (mc->fd >= 0)
		disconnected(mc);
	expire_waiting(mc, true);
	sw_pclient_release(&mc->pc);
	sw_buf_release(&mc->lazy);
	close(mc->wake_fd);
	pthread_mutex_destroy(&mc->mu);
	pthread_mutex_destroy(&mc->wmu);
	free(mc);
}
