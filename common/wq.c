/*
 * The write queue of a framed libuv connection (wq.h).
 */
#include "util.h"
#include "wq.h"

void sw_wq_init(struct sw_wq *q, uv_stream_t *stream,
		void (*written)(struct sw_wq *q, int status), void *data)
{
	*q = (struct sw_wq){ .stream = stream,
			     .written = written,
			     .data = data };
	q->wreq.data = q;
}

void sw_wq_release(struct sw_wq *q)
{
	sw_buf_release(&q->out);
	sw_buf_release(&q->wbuf);
}

void sw_wq_shrink(struct sw_wq *q, size_t keep)
{
	if (!sw_buf_used(&q->out) && q->out.cap > keep)
		sw_buf_release(&q->out);
	if (!q->writing && q->wbuf.cap > keep)
		sw_buf_release(&q->wbuf);
}

static void on_written(uv_write_t *w, int status)
{
	struct sw_wq *q = w->data;

	q->writing = false;
	sw_buf_reset(&q->wbuf);
	q->written(q, status);
}

int sw_wq_flush(struct sw_wq *q)
{
	struct sw_buf tmp;
	uv_buf_t b;
	int n, rc;

	if (q->writing || !sw_buf_used(&q->out))
		return 0;
	b = uv_buf_init((char *)sw_buf_head(&q->out),
			(unsigned)SW_MIN(sw_buf_used(&q->out), 1u << 30));
	n = uv_try_write(q->stream, &b, 1);
	if (n > 0)
		sw_buf_consume(&q->out, (size_t)n);
	else if (n < 0 && n != UV_EAGAIN)
		return n;
	if (!sw_buf_used(&q->out))
		return 0;
	/* The kernel is full: hand the rest to libuv, and queue anew. */
	tmp = q->wbuf;
	q->wbuf = q->out;
	q->out = tmp;
	sw_buf_reset(&q->out);
	b = uv_buf_init((char *)sw_buf_head(&q->wbuf),
			(unsigned)sw_buf_used(&q->wbuf));
	rc = uv_write(&q->wreq, q->stream, &b, 1, on_written);
	if (rc < 0)
		return rc;
	q->writing = true;
	return 0;
}
