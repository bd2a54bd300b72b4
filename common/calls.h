/*
 * Requests in flight on a pipelined connection (the table of pclient.h,
 * the core of every client: the mount's connections, the chunkserver's
 * master link, tools): each request is one encoded frame, waiting in a
 * table under its request id until the reply with that id completes it.
 * The event-loop servers answer requests; this is the other end, which
 * asks.
 *
 * A call has two references when made: one for the table, one for the
 * thread that writes it, since the reply may come (and complete it on
 * the receiver thread) while the sender is still inside write(2).
 *
 * The table has no lock of its own: its owner holds whatever guards its
 * connection state (the table and the socket change together).
 */
#ifndef SWEEPFS_COMMON_CALLS_H
#define SWEEPFS_COMMON_CALLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "frame.h"

/*
 * A call's completion: @rc is 0 with the unpacked *@reply, the reply's
 * own error as -errno (*@reply still valid, for its other fields), or
 * -EIO/-ENOMEM with *@reply NULL. *@reply is freed after the callback
 * returns, unless the callback takes it by setting *@reply to NULL.
 */
typedef void (*sw_call_cb)(void *arg, int rc, ProtobufCMessage **reply);

struct sw_call {
	uint64_t id; /* 0 until assigned */
	uint16_t type;
	bool resend;	  /* the owner's: safe to send again */
	bool once;	  /* keeps its id when sent again (SW_FRAME_AGAIN) */
	int refs;	  /* atomic */
	int64_t deadline; /* the owner's: while waiting to be sent */
	int64_t sent_at;  /* the owner's: mono ns it last went out */
	sw_call_cb cb;
	void *arg;
	struct sw_call *next; /* in the table, or the owner's lists */
	size_t len;
	uint8_t frame[]; /* header + payload; the id is set by assign */
};

/*
 * Encode @req as a frame of @type in a new call with two references.
 * NULL when out of memory: @cb (unless NULL) has then run with -ENOMEM.
 */
struct sw_call *sw_call_new(uint16_t type, const ProtobufCMessage *req,
			    sw_call_cb cb, void *arg);

/*
 * As sw_call_new(), for a payload packed already: @len bytes at
 * @payload, copied (the chunkserver's registration is packed on the
 * thread pool).
 */
struct sw_call *sw_call_new_packed(uint16_t type, const uint8_t *payload,
				   size_t len, sw_call_cb cb, void *arg);

/* Take a reference (another thread may drop one meanwhile). */
static inline void sw_call_get(struct sw_call *c)
{
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
}

/* Drop a reference; the last one frees @c. */
void sw_call_put(struct sw_call *c);

/* Run @c's callback with @rc and @reply (freed after unless taken) and
 * drop the table's reference. */
void sw_call_complete(struct sw_call *c, int rc, ProtobufCMessage *reply);

/*
 * Complete @c with the reply frame @hdr/@payload: unpacked with the reply
 * type of @c's request, @rc the reply's err; a reply of another type, or
 * one that does not unpack, completes it with -EIO.
 */
void sw_call_answer(struct sw_call *c, const struct sw_frame_hdr *hdr,
		    const uint8_t *payload);

/* Complete every call of the list @head (linked by next) with @rc. */
void sw_call_fail_list(struct sw_call *head, int rc);

#define SW_CALLS_SLOTS 1024u /* buckets: ids are sequential */

struct sw_calls {
	uint64_t next_id; /* of the next request; ids start at 1 */
	struct sw_call *slot[SW_CALLS_SLOTS];
};

void sw_calls_init(struct sw_calls *t);

/* Give @c the next id (also in its frame; a once call sent again keeps
 * its own) and put it in @t. */
void sw_calls_assign(struct sw_calls *t, struct sw_call *c);

/* Take the call with @id out of @t: NULL if none waits for it. */
struct sw_call *sw_calls_take(struct sw_calls *t, uint64_t id);

/* Take every call out of @t, as one list in the order of their ids (the
 * order they were sent in: a reconnect sends them again in it). */
struct sw_call *sw_calls_take_all(struct sw_calls *t);

#endif
