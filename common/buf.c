/*
 * sw_buf (buf.h): a growable byte buffer with a read offset.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "frame.h"

void sw_buf_release(struct sw_buf *b)
{
	free(b->data);
	sw_buf_init(b);
}

int sw_buf_reserve(struct sw_buf *b, size_t extra)
{
	size_t live = b->len - b->off;
	size_t want, cap;
	uint8_t *p;

	if (b->cap - b->len >= extra)
		return 0;
	/* Slide live bytes down first when that alone makes room. */
	if (b->off && b->cap - live >= extra && b->off >= live) {
		memmove(b->data, b->data + b->off, live);
		b->off = 0;
		b->len = live;
		return 0;
	}
	if (extra > SIZE_MAX / 2 - live)
		return -ENOMEM;
	want = live + extra;
	cap = b->cap ? b->cap : 256;
	while (cap < want)
		cap *= 2;
	if (b->off == 0) {
		p = realloc(b->data, cap);
		if (!p)
			return -ENOMEM;
	} else {
		p = malloc(cap);
		if (!p)
			return -ENOMEM;
		memcpy(p, b->data + b->off, live);
		free(b->data);
		b->off = 0;
		b->len = live;
	}
	b->data = p;
	b->cap = cap;
	return 0;
}

int sw_buf_add(struct sw_buf *b, const void *p, size_t n)
{
	int rc = sw_buf_reserve(b, n);

	if (rc < 0)
		return rc;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

void sw_buf_consume(struct sw_buf *b, size_t n)
{
	b->off += n;
	if (b->off == b->len)
		b->off = b->len = 0;
}

int sw_buf_add_frame(struct sw_buf *b, uint16_t type, uint16_t flags,
		     uint64_t id, const ProtobufCMessage *msg)
{
	size_t size = sw_frame_size(msg);
	int rc = sw_buf_reserve(b, size);

	if (rc < 0)
		return rc;
	b->len += sw_frame_pack(b->data + b->len, type, flags, id, msg);
	return 0;
}
