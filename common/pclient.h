/*
 * The core of a pipelined client connection, whatever carries its bytes
 * (a libuv stream, a thread blocked in read(2)): the input buffer and the
 * cutting of whole frames out of it, with the largest payload it accepts;
 * request ids; the in-flight table of calls, each with its callback
 * (calls.h); what a reply means (the call it names, a notification, a
 * stray); and what becomes of the calls in flight when the connection
 * ends, by the owner's policy (sent again, or failed).
 *
 * It owns no socket, no thread and no timer: the owner reads and writes,
 * reconnects, and times out. The mount's connections to the master
 * (mount/master_conn.c) and to chunkservers (mount/cspool.c) and the
 * chunkserver's link to its master (chunkserver/master_link.c) all
 * frame, match and fail through it.
 *
 * What a server may make it do: a frame is cut only once whole, never
 * larger than max_payload (larger: -EMSGSIZE, close), so the input never
 * holds more than one frame's worth beyond what was read; a frame that
 * is neither a reply nor a notification (a server asks nothing of its
 * clients) and a reply naming
 * an id never issued on this connection (0 included) is a protocol error
 * (-EPROTO, close); a reply to an id issued but not waited for (a ping,
 * a frame sent without a call, a call already answered) goes to the
 * owner's @stray, which may close too. A reply whose payload does not
 * unpack fails its call with -EIO (calls.h) without closing.
 *
 * Locking: the table, the id counter and nflight are guarded by the
 * owner's mutex @mu (NULL for a client used from one thread, as on a
 * libuv loop). sw_pclient_feed() and sw_pclient_disconnect() take it
 * themselves and run no callback while holding it; the sending side
 * (sw_pclient_assign(), sw_pclient_issue()) is called with it held, so
 * that the owner's "connected?" test and the assignment are one step.
 * The input buffer belongs to the one reader.
 */
#ifndef SWEEPFS_COMMON_PCLIENT_H
#define SWEEPFS_COMMON_PCLIENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "calls.h"
#include "frame.h"

/*
 * A frame no call waits for: a notification (SW_FRAME_NOTIFY), or a reply
 * to an id issued but not in the table. Runs on the reader with no lock
 * held. Returns 0 to go on, or -errno to end the connection (the feed
 * returns it).
 */
typedef int (*sw_pclient_frame_fn)(void *arg, const struct sw_frame_hdr *hdr,
				   const uint8_t *payload);

/*
 * Whether a call in flight when the connection ended is to be sent again
 * on the next one (true) or failed (false). No lock is held; @c is the
 * owner's to look at, not to complete.
 */
typedef bool (*sw_pclient_keep_fn)(const struct sw_call *c);

struct sw_pclient_ops {
	sw_pclient_frame_fn notify; /* NULL: notifications dropped */
	sw_pclient_frame_fn stray;  /* NULL: stray replies are -EPROTO */
	/* A call about to complete with its reply, before its callback
	 * (the owner's clocks: the answer's latency, a lease). May be
	 * NULL. No lock held. */
	void (*answered)(void *arg, const struct sw_call *c);
	void *arg;
};

struct sw_pclient {
	struct sw_calls calls; /* in flight, by id (under *mu) */
	size_t nflight;	       /* calls in the table (under *mu) */
	pthread_mutex_t *mu;   /* the owner's; NULL: one thread */
	struct sw_buf in;      /* received, not yet a whole frame (reader) */
	uint32_t max_payload;  /* largest payload accepted, either way */
	uint64_t gen;	       /* disconnections so far (reader) */
	struct sw_pclient_ops ops;
};

/*
 * Ready @pc for a connection whose frames carry at most @max_payload
 * bytes, its table guarded by @mu (may be NULL), frames no call waits
 * for going to @ops (copied; may be NULL). Allocates nothing.
 */
void sw_pclient_init(struct sw_pclient *pc, uint32_t max_payload,
		     pthread_mutex_t *mu, const struct sw_pclient_ops *ops);

/*
 * Free the input buffer. The table must be empty (sw_pclient_disconnect()
 * first): its calls are their callers' to complete.
 */
void sw_pclient_release(struct sw_pclient *pc);

/* Whether @c's payload is within what the peer accepts (max_payload). */
static inline bool sw_pclient_fits(const struct sw_pclient *pc,
				   const struct sw_call *c)
{
	return c->len - SW_FRAME_HDR <= pc->max_payload;
}

/*
 * Give @c the next id (or, a once call sent again, its own with
 * SW_FRAME_AGAIN: calls.h) and put it in the table; *mu held. Returns 0,
 * or -EMSGSIZE, @c untouched, when its payload is larger than the peer
 * accepts (sending it would only make the peer close).
 */
int sw_pclient_assign(struct sw_pclient *pc, struct sw_call *c);

/* An id for a frame no call waits for (its reply goes to ops.stray);
 * *mu held. */
uint64_t sw_pclient_issue(struct sw_pclient *pc);

/*
 * Room for at least @chunk more bytes at the end of the input: its start
 * in *@buf and its size returned (>= @chunk), or -ENOMEM. For a reader
 * that reads into place (libuv's alloc callback); sw_pclient_feed() then
 * says how much came.
 */
long sw_pclient_room(struct sw_pclient *pc, size_t chunk, uint8_t **buf);

/*
 * @n more bytes were written at the end of the input (into the room):
 * cut every whole frame and deliver it, in order: a reply to the call
 * it names (ops.answered, then the call's callback), anything else to
 * ops.notify or ops.stray. Returns 0 (a partial frame may stay), -EPROTO
 * (garbage, a request, a reply to an id never issued), -EMSGSIZE, or
 * what ops said: the owner then ends the connection. No lock may be held
 * (callbacks run from here and may send). A callback may end the
 * connection itself (sw_pclient_disconnect()): the feed then stops at
 * once and returns -ECANCELED, the connection already ended.
 */
int sw_pclient_feed(struct sw_pclient *pc, size_t n);

/*
 * Read once from blocking socket @fd into the input (waiting at most
 * @timeout_ms, as sw_frame_fill() does) and feed what came. 0, -EAGAIN
 * (nothing to read on a non-blocking socket), or sw_frame_fill()'s and
 * sw_pclient_feed()'s errors.
 */
int sw_pclient_read(struct sw_pclient *pc, int fd, size_t chunk,
		    int timeout_ms);

/*
 * One call for a thread that does its own reading (a tool, a hello before
 * a receiver thread runs): send @req as @type on blocking socket @fd and
 * read and feed until its reply came, for at most @timeout_ms in all once
 * it is sent (a deadline on the monotonic clock, however the server slices
 * its bytes; <= 0: none); frames before it are delivered as
 * sw_pclient_feed() does. The send is not timed: a request is small and
 * goes into the socket's buffer, unless the server left a buffer's worth
 * of earlier requests unread.
 * Returns 0 with the unpacked reply in *@reply (its own err field is the
 * caller's to read: sw_reply_err()), which the caller frees with
 * protobuf_c_message_free_unpacked(); or -errno with *@reply NULL:
 * -EMSGSIZE (not sent), -EPROTO (a reply of another type or that does
 * not unpack, or the feed's), or the transport's failure, after which
 * every call in flight has failed with it and the connection is
 * unusable. Takes *mu to assign; no lock may be held.
 */
int sw_pclient_call(struct sw_pclient *pc, int fd, uint16_t type,
		    const ProtobufCMessage *req, int timeout_ms,
		    ProtobufCMessage **reply);

/*
 * sw_pclient_call() in two halves, for a caller with several calls in
 * flight on the same blocking socket (a group member reading the
 * leader's checkpoint a few pieces ahead, master/catchup.c).
 *
 * sw_pclient_send() sends @req as @type on @fd, to complete @w when its
 * reply comes; 0, or -errno. On -errno @w may not be done: the caller
 * then ends the connection (sw_pclient_fail_all()), which completes it.
 *
 * sw_pclient_wait() reads and feeds until @w is done, for at most
 * @timeout_ms from now (<= 0: no limit); replies to other calls complete
 * theirs on the way. If it fails first, every call in flight fails with
 * it and the connection is unusable. Returns @w's result: 0 with
 * w->reply (the caller's to free), or -errno with w->reply NULL, as
 * sw_pclient_call() returns it.
 */
struct sw_pclient_waiter {
	bool done;
	int rc;
	ProtobufCMessage *reply;
};

int sw_pclient_send(struct sw_pclient *pc, int fd, uint16_t type,
		    const ProtobufCMessage *req, struct sw_pclient_waiter *w);
int sw_pclient_wait(struct sw_pclient *pc, int fd, struct sw_pclient_waiter *w,
		    int timeout_ms);

/* Bytes of an incomplete frame waiting for the rest (reader). */
static inline size_t sw_pclient_partial(const struct sw_pclient *pc)
{
	return sw_buf_used(&pc->in);
}

/*
 * The connection ended: drop the input and take every call out of the
 * table. Those @keep (NULL: none) wants are linked in *@kept, in the
 * order they were sent, to send again; the rest in *@failed, for the
 * owner to complete (sw_call_fail_list()) once it holds no lock that a
 * callback's new request would take. Takes *mu; call it with the owner's
 * write side held, so that no call is assigned meanwhile.
 */
void sw_pclient_disconnect(struct sw_pclient *pc, sw_pclient_keep_fn keep,
			   struct sw_call **kept, struct sw_call **failed);

/*
 * sw_pclient_disconnect() with every call failed: each completes with
 * @rc, here and now (no lock may be held). For an owner that sends
 * nothing again.
 */
void sw_pclient_fail_all(struct sw_pclient *pc, int rc);

#endif
