/*
 * The part of a framed-protocol server on libuv that the master and the
 * chunkserver share: listening, accepting (with a cap on connections),
 * keepalives (a peer whose network vanished is noticed), the list of
 * connections and their references (a request in flight
 * holds its connection; the memory goes when the handle is closed and
 * the last reference dropped), a list of connections with output to
 * flush once per loop turn, the budget of bytes buffered from peers that
 * have not said hello, closing peers stuck in the middle of a frame, and
 * the caps on peers that have not said hello: how many, from one address
 * and in all, and for how long (sw_server_reap_silent()).
 *
 * A server's connection type embeds a struct sw_sconn as its first
 * member (as libuv's handles embed uv_handle_t); the server's ops say
 * how big it is and do what is the server's own: handle a frame, write,
 * detach what the connection had, free what it held. Writing is the
 * owner's (wq.h, or the chunkserver's reply list).
 *
 * Reading is here, one loop for every server: the input buffer, cutting
 * frames (sw_frame_get_hdr(), the payload cap before and after the
 * hello), the budget of pre-hello bytes, handing each whole frame to
 * ops->frame, stopping and restarting the socket for the owner's reasons
 * (sw_sconn_stop(), sw_sconn_go()), a slice of time per connection and
 * loop turn, and the clock of a peer stuck mid-frame. See uvserver.c.
 */
#ifndef SWEEPFS_COMMON_UVSERVER_H
#define SWEEPFS_COMMON_UVSERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <uv.h>

#include "buf.h"
#include "frame.h"

struct sw_server;

/*
 * Why a connection is not read (struct sw_sconn's stops, a set): it is
 * read while the set is empty. The owner's reasons say whether a frame
 * left in the input meanwhile is the peer's doing, and so is timed as a
 * peer stuck mid-frame (sw_server_reap_stalled()), or the server's.
 */
enum {
	/* Its peer takes too little of its output: the peer's doing. */
	SW_READ_OUTPUT = 1u << 0,
	/* The server's own limits or a wait of its own: not timed. */
	SW_READ_WAIT = 1u << 1,
	/* No more input is wanted (stopping, a refused hello): not timed. */
	SW_READ_DONE = 1u << 2,
	/* uvserver's: its slice of the loop turn is used up; the rest of
	 * its input is handed over in the next turn (ops->slice_ns). */
	SW_READ_YIELD = 1u << 3,
	/* uvserver's: its next frame is to be read into a buffer of its
	 * own, and those being read hold big_max already: it waits for
	 * room (the server's reason: not timed). */
	SW_READ_ROOM = 1u << 4,
};

/* What ops->frame did with a frame. */
enum sw_frame_verdict {
	/* Handled (or @c closed): cut from the input, on to the next. */
	SW_FRAME_DONE,
	/* Not now: it stays at the head of the input and no frame after it
	 * is handed over. It is handed over again when more input arrives,
	 * or after sw_sconn_go(); the owner stops reading if it must, and
	 * past ops->kept_max uvserver stops it (SW_READ_WAIT, c->waits):
	 * the owner that keeps a frame must sw_sconn_go(c, SW_READ_WAIT)
	 * when its wait ends. */
	SW_FRAME_KEEP,
};

struct sw_sconn {
	uv_tcp_t tcp; /* first: the handle is the connection */
	struct sw_server *srv;
	char peer[64];		      /* "addr:port" */
	struct sockaddr_storage addr; /* the peer's */
	int refs;		      /* 1 while open, +1 per holder */
	bool closing;
	bool started; /* ops->accepted ran: ops->closing will */
	bool in_flush;
	size_t unauth_counted; /* in srv->unauth_bytes */
	int64_t partial_since; /* mono ns: an incomplete frame, or 0 */
	int64_t accepted_at;   /* mono ns */
	int64_t heard_at;      /* mono ns bytes last came from the peer */
	bool known;	       /* said hello: sw_sconn_known() */
	bool anon;	       /* on srv's list of those that have not */
	size_t out_counted;    /* in srv->out_total */
	size_t out_owner;      /* of it, the owner's (sw_sconn_output()) */
	unsigned wakes;	       /* sw_sconn_go() calls, to tell a wake-up
				* during a frame callback */
	bool shed;	       /* to be closed (sw_sconn_shed()) */
	struct sw_sconn *next, *prev, *flush_next, *shed_next;
	struct sw_sconn *anon_next, *anon_prev; /* oldest first */
	/* Input (uvserver.c's; the owner may look, and ops->frame may take
	 * frames out from behind the head, see master/server.c). */
	struct sw_buf in;	     /* read, not handed over yet */
	uint8_t *big;		     /* a payload read into its own buffer */
	struct sw_frame_hdr big_hdr; /* its header */
	size_t big_have;	     /* bytes of it read */
	unsigned stops;		     /* SW_READ_*: read only while 0 */
	bool reading;		     /* uv_read_start() in effect */
	bool parsing;		     /* in sw_sconn_parse(): not again */
	bool in_parse;		     /* on srv's parse list (holds a ref) */
	/* Set by the owner's ops->frame: its head frame, kept, waits for
	 * the server (not the peer), so it is not timed as a peer stuck
	 * mid-frame (cleared once a frame is done). */
	bool waits;
	struct sw_sconn *parse_next;
};

struct sw_server_ops {
	size_t conn_size; /* of the owner's type, sw_sconn first */
	/* Accepted and counted: start reading (nonzero: close it). */
	int (*accepted)(struct sw_sconn *c);
	/* Write what it has queued (the check phase, or server_stop). */
	void (*flush)(struct sw_sconn *c);
	/* It is being closed: let go of what refers to it (optional; only
	 * for a connection ops->accepted was called for). */
	void (*closing)(struct sw_sconn *c);
	/* Marked to be closed (sw_sconn_shed(), sw_sconn_output()): let go
	 * of its output now if it can (optional); ops->closing follows in
	 * the check phase. */
	void (*shed)(struct sw_sconn *c);
	/* The last reference went: free what it holds, not itself (also
	 * for one refused before ops->accepted: its fields are zero). */
	void (*release)(struct sw_sconn *c);
	/*
	 * A whole frame from @c's peer, its header checked (flags aside)
	 * and its payload within the cap. @own: @payload was read into a
	 * buffer of its own (own_above): the callback owns it (free(3)), and
	 * must return SW_FRAME_DONE. Otherwise it points into @c's input,
	 * valid until the callback returns. The callback may close @c, stop
	 * it (sw_sconn_stop()) or take other frames out of c->in behind the
	 * head. NULL: uvserver does not read (the owner's tests).
	 */
	enum sw_frame_verdict (*frame)(struct sw_sconn *c,
				       const struct sw_frame_hdr *hdr,
				       uint8_t *payload, bool own);
	uint32_t frame_max;	  /* payload cap after the hello */
	uint32_t pre_hello_frame; /* and before it */
	/* What all peers without a hello may have sent and not had handled,
	 * in all: the peer whose read would pass it is closed. */
	size_t pre_hello_total;
	/* What a connection whose head frame ops->frame keeps, and which
	 * the owner did not stop, may hold in its input (0: the frame cap
	 * and a read): once past it (by at most a read) uvserver stops
	 * reading it for the server's wait (SW_READ_WAIT, waits), so that
	 * an owner that forgets to stop costs that much and no more. */
	size_t kept_max;
	/* The input buffer's memory counts with the output the owner tells
	 * (sw_sconn_output()) against srv->out_max, recounted whenever it
	 * grows (true); or only that output. */
	bool count_input;
	/* A frame whose payload is longer than this (0: none) and not whole
	 * when its header is cut is read straight into a buffer of its own
	 * (malloc'd, handed to ops->frame with @own): the loop copies at most
	 * a read's worth of it. */
	uint32_t own_above;
	/* Read into the connection's input buffer, which then holds up to a
	 * read (64 KiB) even while idle (true); or into one buffer of the
	 * process's and copy what arrived, so that idle peers hold none. */
	bool read_in_place;
	/* One connection's frames are handed over for at most this long per
	 * loop turn (0: no limit): then it yields (SW_READ_YIELD) and the
	 * rest waits, unread behind, for the next turn. */
	int64_t slice_ns;
};

struct sw_server {
	uv_tcp_t listener;
	uv_loop_t *loop;
	const struct sw_server_ops *ops;
	const char *tag; /* for logs */
	void *data;
	struct sw_sconn *conns;
	uint64_t nconns;
	uint64_t max_conns;
	/* Set before listening: a peer whose network died (no FIN, no RST,
	 * no answer to keepalives) is dropped after this long (0: never). */
	unsigned peer_timeout_ms;
	bool refusing; /* stopping: new connections are closed at once */
	struct sw_sconn *flush;
	size_t unauth_bytes; /* buffered from peers before their hello */
	/*
	 * Peers that have not said hello yet, oldest first. Set before
	 * listening (0: no cap): at most anon_per_addr from one address
	 * and anon_max in all; a new one past either cap makes the oldest
	 * silent one (of that address, or of all) go, so that a flood of
	 * silent connections costs the flooder its own oldest ones and
	 * never a real client, whose hello follows its connect at once.
	 */
	struct sw_sconn *anon_head, *anon_tail;
	uint64_t nanon;
	uint64_t anon_max;
	uint64_t anon_per_addr;
	uint64_t anon_evicted; /* closed for those caps, or the timeout */
	/* Output queued for peers and not taken yet, as the owner counts
	 * it (sw_sconn_output()); past out_max (0: no cap) the connection
	 * with the most is closed, then the next, until under it. */
	size_t out_total;
	size_t out_max;
	uint64_t out_shed;     /* connections closed for it */
	struct sw_sconn *shed; /* marked, not closed yet (sw_server_shed()) */
	/* Connections whose input is handed over in the next loop turn
	 * (sw_sconn_go(), a yield): an idle handle keeps that turn from
	 * blocking in poll. */
	struct sw_sconn *parse;
	uv_idle_t parse_idle;
	/*
	 * Payloads being read into buffers of their own (ops->own_above),
	 * allocated when their headers come: big_total bytes. Set before
	 * listening (0: no cap): past big_max a connection whose next
	 * frame would take another waits (SW_READ_ROOM) until one is
	 * handed over or its connection closed, so that peers that stop
	 * one byte short of large frames hold at most that much.
	 */
	size_t big_total;
	size_t big_max;
	bool big_wanted;    /* some connection waits for room */
	bool parse_idle_on; /* initialised: sw_server_unlisten() closes it */
};

/*
 * Listen on @host:@port ("" for every address) for @ops's connections,
 * at most @max_conns at once. 0, or -errno / a libuv error (logged under
 * @tag): then the listener is being closed, and @on_fail (may be NULL)
 * runs once it is, with the listener's handle (data: @srv).
 */
int sw_server_listen(struct sw_server *srv, uv_loop_t *loop,
		     const struct sw_server_ops *ops, const char *tag,
		     const char *host, uint16_t port, uint64_t max_conns,
		     uv_close_cb on_fail);

/* Close the listener (@cb may be NULL); connections are the owner's to
 * close. Input waiting for a later turn is no longer handed over. */
void sw_server_unlisten(struct sw_server *srv, uv_close_cb cb);

/* Queue @c for the next sw_server_flush(). */
void sw_sconn_flush_add(struct sw_sconn *c);

/* Flush every queued connection (ops->flush), in the check phase. */
void sw_server_flush(struct sw_server *srv);

/* Close @c (ops->closing first); freed when its last reference goes. */
void sw_sconn_close(struct sw_sconn *c);

static inline void sw_sconn_get(struct sw_sconn *c)
{
	c->refs++;
}

/* Drop a reference; the last one frees @c (ops->release, then free). */
void sw_sconn_put(struct sw_sconn *c);

/*
 * Count @buffered bytes as @c's share of the pre-hello budget (0 once it
 * is known, or closing). Whether another @more bytes would pass @limit
 * in all: sw_server_unauth_over().
 */
void sw_sconn_account(struct sw_sconn *c, size_t buffered);

static inline bool sw_server_unauth_over(const struct sw_server *srv,
					 size_t more, size_t limit)
{
	return srv->unauth_bytes + more > limit;
}

/*
 * @c now holds @bytes of output its peer has not taken (0 once closing),
 * counted with its input buffer when ops->count_input (uvserver recounts
 * that itself as it grows). Past srv->out_max in all, the connections
 * holding the most are marked to be closed (with a log line; @c may be
 * one) until the total is under it again, and no longer count. They are
 * closed by sw_server_shed(), not here: a caller may be walking lists
 * that closing a connection changes (a directory's watchers, a lock's
 * waiters, a session's requests).
 */
void sw_sconn_output(struct sw_sconn *c, size_t bytes);

/*
 * Mark @c to be closed by sw_server_shed(), as sw_sconn_output() does
 * past out_max (ops->shed lets go of its output now): for a handler that
 * must give up on its own connection (out of memory for a reply), whose
 * close now would free what its callers still use (the master's
 * session). Nothing if @c is closing or marked already.
 */
void sw_sconn_shed(struct sw_sconn *c);

/* Whether @c is being closed, or is marked to be: serve it no more. */
static inline bool sw_sconn_gone(const struct sw_sconn *c)
{
	return c->closing || c->shed;
}

/* Close the connections sw_sconn_shed() marked. From the loop's check
 * phase only, where no handler is running. */
void sw_server_shed(struct sw_server *srv);

/* @c said hello: it leaves the pre-hello caps and timeout. */
void sw_sconn_known(struct sw_sconn *c);

/* Close the connections that have not said hello within @limit_ns of
 * being accepted, judged as of @now (mono ns: the owner's time up to
 * which it has read its sockets), with a log line each; O(those
 * closed). */
void sw_server_reap_silent(struct sw_server *srv, int64_t now,
			   int64_t limit_ns);

/* A read on @c ended with @nread < 0: log why (unless end of stream)
 * and close it. */
void sw_sconn_read_end(struct sw_sconn *c, ssize_t nread);

/* Stop reading @c for the SW_READ_* reasons @why (added to those it
 * has). Frames already read wait too. */
void sw_sconn_stop(struct sw_sconn *c, unsigned why);

/*
 * Take the reasons @why off @c's. With none left it is read again, and
 * the frames read before are handed over: at once when @now (the caller
 * is not in a handler, nor in a flush that must see their replies), else
 * in the next loop turn, whose check phase then sends what they queue
 * (not at all once the server stopped listening: it is closing them).
 */
void sw_sconn_go(struct sw_sconn *c, unsigned why, bool now);

/* Hand @c's whole frames to ops->frame while it is not stopped; then
 * count its pre-hello bytes and keep its clock. Not reentrant for @c. */
void sw_sconn_parse(struct sw_sconn *c);

/* Keep @c's clock of an incomplete frame: @incomplete says whether one
 * is being read now (a peer we stopped reading is not stalled). */
void sw_sconn_partial(struct sw_sconn *c, bool incomplete);

/* Close connections stuck mid-frame for longer than @limit_ns at @now
 * (as sw_server_reap_silent()). */
void sw_server_reap_stalled(struct sw_server *srv, int64_t now,
			    int64_t limit_ns);

#endif
