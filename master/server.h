/*
 * Connections (server.c): framing, the reply queues held back until
 * the changelog is durable and invalidations are acknowledged, output
 * budgets, and the handling of each request through dispatch.h.
 */
#ifndef SWEEPFS_MASTER_SERVER_H
#define SWEEPFS_MASTER_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "buf.h"
#include "frame.h"
#include "req.h"
#include "sweepfs.pb-c.h"
#include "uvserver.h"
#include "wq.h"

struct master;
struct session;
struct req;

/*
 * Bytes of notices (invalidations, recalls) a connection may leave
 * unsent after a write (what its socket did not take) before its
 * session's invalidations are replaced by one of everything (server.c
 * says how). Counted after the write, not as queued: a mount that takes
 * all it is sent each turn is never behind, however much one turn sends
 * it (a BATCH of 1,024 unlinks of 255-byte names is about 290 KiB). 256
 * KiB: about 900 invalidations of 255-byte names, 2,300 of 80-byte ones.
 */
#define SERVER_NOTICES_MAX (256u << 10)
/* A session whose mount takes no one of everything is closed if it stays
 * behind (over a quarter of SERVER_NOTICES_MAX unsent) this long, or at
 * once past SERVER_NOTICES_HARD unsent. */
#define SERVER_BEHIND_MS 5000
#define SERVER_NOTICES_HARD (16 * SERVER_NOTICES_MAX)

/* A reply waiting for the changelog to be durable up to its version. */
struct held_mark {
	uint64_t version;
	/* Invalidations its request sent, (inval0, inval]; 0: none. */
	uint64_t inval0, inval;
	size_t size; /* bytes of this reply at the head of conn->held */
};

/* One TCP connection. Freed in its close callback. */
/*
 * One client connection. The shared part (uvserver.h: the handle, peer
 * address, references, closing, flush list, pre-hello budget, partial
 * frame clock) comes first; freed in its close callback once no
 * deferred request holds it.
 */
struct conn {
	struct sw_sconn sc;
	struct master *m;
	struct session *s; /* after a successful hello */
	uint8_t nonce[16]; /* password challenge sent, if nonce_set */
	bool nonce_set;
	struct sw_wq wq;    /* replies ready to send (wq.out), being sent */
	struct sw_buf held; /* replies waiting for durability */
	struct held_mark *marks;
	size_t nmarks, marks_cap, marks_head;
	/* Bytes of notices (conn_notify()) that may still be in wq: what
	 * was queued since, at most its backlog after each write. */
	size_t notices;
	/* What the handlers keep on it (req.h): the chunkserver it is, the
	 * delegation its oldest request waits for. */
	struct req_link link;
	/*
	 * How far consume_parked() got behind the waiting request: the
	 * input up to park_off stays behind it, naming park_nodes
	 * (park_nn of them, PARKED_NODES_MAX allocated on the first wait),
	 * after park_skipped frames; park_full: no frame past them may go
	 * on; park_batch: a batch is among them (later batches and returns
	 * stay too). Valid while park_judged: the next call goes on from there,
	 * so that what arrives a byte at a time costs a look at the next
	 * frame's header, not another parse of all that waits. Forgotten
	 * when the wait ends or the connection is resumed.
	 */
	uint64_t *park_nodes;
	size_t park_nn, park_off;
	unsigned park_skipped;
	bool park_judged, park_full, park_batch;
};

/* The connections of @m, in no order: for (c = conn_first(m); c; c =
 * conn_next(c)). */
#define conn_first(m) ((struct conn *)(m)->server.conns)
#define conn_next(c) ((struct conn *)(c)->sc.next)

int server_start(struct master *m);
void server_stop(struct master *m);

/* Close @c (its session detaches; deferred requests finish unanswered). */
void conn_close(struct conn *c);

/*
 * The request layer's hooks into the server (struct req_hooks, wired by
 * master.c): queue a reply for a request on its connection, keep a
 * connection for a deferred request, a connection's session.
 */
void server_req_send(struct req *r, const ProtobufCMessage *reply, bool error);
void server_req_hold(struct conn *c, bool hold);
struct session *server_req_session(const struct conn *c);
struct req_link *server_req_link(struct conn *c);
void server_req_resume(struct req_link *l);

/* Queue an unasked notification frame to @c. */
void conn_notify(struct conn *c, uint16_t type, const ProtobufCMessage *msg);

/* Records up to @version are durable: release held replies. */
void server_durable(struct master *m, uint64_t version);

/* Flush pending output of every connection that has some. */
void server_flush(struct master *m);

/* Close connections stuck in the middle of a frame for frame_timeout,
 * without a hello for hello_timeout, or behind on their notices
 * (server.c), judged as of server_answers_seen(). */
void server_reap_stalled(struct master *m);

/* Handle @c's buffered requests again (after a wait, deleg.c). */
void server_resume(struct conn *c);

/*
 * The time (mono ns, never later than the truth; zero before the first
 * poll) up to which the loop has read what its clients sent: when its
 * last poll for their sockets returned. Waits on clients (deleg_tick(),
 * server_inval_tick()) are judged as of then, not as of now: libuv runs
 * due timers before it polls, so after the loop was held up (a long
 * turn, a fork, a stalled machine) an answer that came meanwhile is
 * still unread, and judged as of now a client that answered in time
 * would be taken for one that did not. As of the last poll, a wait ends
 * at the first tick after a poll returned past its bound, and what had
 * come by then was read: a tick past its bound when the loop is idle,
 * up to two loop turns more when it is busy. (Read, and handled but for
 * what a connection's frames did not get to in that turn,
 * CONSUME_SLICE_NS: a busy loop may still take an ack behind a client's
 * own requests for none.) While a group's lease is in doubt frames stay
 * in their buffers (handle_frame()), and the time stays where it was
 * until the end of the turn after the loop saw the lease renewed
 * (group_held_back()).
 *
 * server_note_poll(), at the end of each loop turn (the check handle),
 * moves it on; a test calls it from its own.
 */
int64_t server_answers_seen(const struct master *m);
void server_note_poll(struct master *m);

/*
 * Invalidations (watch.c): server_inval_sent() numbers one sent to @s
 * (not sent if @s->inval_all: its connection left too many notices
 * unsent; one of everything goes later, and its ack covers this one);
 * server_inval_acked() takes @s's ack (INVAL_ACK) up to @seq, or with
 * @seq UINT64_MAX forgets what it owes (it went, or lost its
 * connection). Replies to requests that sent invalidations wait for
 * the acks of those, as they wait for the changelog, for at most
 * inval_timeout (server.c). server_inval_tick(): give up on acks
 * older than that at @seen (server_answers_seen()); called every
 * WAIT_TICK_MS.
 */
uint64_t server_inval_sent(struct master *m, struct session *s);
void server_inval_acked(struct master *m, struct session *s, uint64_t seq);
void server_inval_tick(struct master *m, int64_t seen);

/*
 * @c was written to (conn_write() does this after each write; a test,
 * for a connection on no socket): past SERVER_NOTICES_MAX of notices
 * still unsent, its session is behind; once behind and it has read most
 * of the rest, the one of everything is queued now; if its mount does
 * not take one and it stays behind, @c is closed.
 */
void server_inval_written(struct conn *c);

/* @s is not waited for again while the session lasts (what it owes is
 * forgotten): it let an ack or a recall time out. */
void server_inval_give_up(struct master *m, struct session *s);
/* req_hooks.silent_since: when bytes last came from @c, or @now if its
 * input waits (not read, or not parsed: it spoke, the master has not
 * listened yet). */
int64_t server_silent_since(struct conn *c, int64_t now);

#endif
