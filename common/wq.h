/*
 * The write side of a framed connection on a libuv stream, shared by the
 * master's server and the chunkserver's link to the master: frames are
 * appended to @out while @wbuf is being written; a flush first offers
 * the bytes to the kernel with uv_try_write (which usually takes them
 * all, with no request and no copy) and hands what is left to one
 * uv_write at a time. The owner bounds what it queues (backpressure: it
 * stops reading a peer whose backlog is too large) and closes the
 * connection when a write fails.
 *
 * (The chunkserver's client server keeps a list of reply frames instead:
 * a read's reply is written from its own buffer, not copied into one.)
 */
#ifndef SWEEPFS_COMMON_WQ_H
#define SWEEPFS_COMMON_WQ_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#include "buf.h"

struct sw_wq {
	struct sw_buf out;  /* queued, not yet handed to the kernel */
	struct sw_buf wbuf; /* in the uv_write in flight */
	uv_write_t wreq;
	uv_stream_t *stream;
	bool writing;
	/* A uv_write ended: @status 0, or a libuv error (then close). Not
	 * called for what uv_try_write took. */
	void (*written)(struct sw_wq *q, int status);
	void *data;
};

void sw_wq_init(struct sw_wq *q, uv_stream_t *stream,
		void (*written)(struct sw_wq *q, int status), void *data);

/* Free the buffers (the stream is closed, no write in flight). */
void sw_wq_release(struct sw_wq *q);

/* Bytes allocated for both buffers (what the queue holds in memory). */
static inline size_t sw_wq_held(const struct sw_wq *q)
{
	return q->out.cap + q->wbuf.cap;
}

/* Free the buffers that are empty, not in a write, and bigger than
 * @keep: a burst of output costs its memory only while it lasts. */
void sw_wq_shrink(struct sw_wq *q, size_t keep);

/*
 * Hand what is queued to the kernel (nothing while a uv_write is in
 * flight: its end flushes again through @written, if the owner wants).
 * 0, or a libuv error: the connection is broken, close it.
 */
int sw_wq_flush(struct sw_wq *q);

/* Bytes queued and not yet taken by the kernel. */
static inline size_t sw_wq_backlog(const struct sw_wq *q)
{
	return sw_buf_used(&q->out) + sw_buf_used(&q->wbuf);
}

#endif
