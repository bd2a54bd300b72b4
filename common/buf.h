/*
 * sw_buf: a growable byte buffer with a read offset, for frames going out
 * and bytes coming in.
 *
 * Bytes live in data[off, len); appending grows the allocation, consuming
 * moves off, and the buffer compacts itself when it is drained or when the
 * dead prefix is larger than the live bytes. A buffer owns its memory;
 * sw_buf_release() frees it and leaves the buffer empty and reusable.
 */
#ifndef SWEEPFS_COMMON_BUF_H
#define SWEEPFS_COMMON_BUF_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

struct sw_buf {
	uint8_t *data; /* allocation, NULL when empty and released */
	size_t off;    /* first unread byte */
	size_t len;    /* end of written bytes */
	size_t cap;    /* bytes allocated */
};

#define SW_BUF_INIT \
	{           \
		0   \
	}

static inline void sw_buf_init(struct sw_buf *b)
{
	*b = (struct sw_buf)SW_BUF_INIT;
}

/* Free the storage; the buffer is empty afterwards. */
void sw_buf_release(struct sw_buf *b);

/* Forget the contents, keep the allocation. */
static inline void sw_buf_reset(struct sw_buf *b)
{
	b->off = b->len = 0;
}

/* Unread bytes. */
static inline size_t sw_buf_used(const struct sw_buf *b)
{
	return b->len - b->off;
}

static inline uint8_t *sw_buf_head(const struct sw_buf *b)
{
	/* NULL + 0 is undefined behaviour: a buffer never filled. */
	return b->data ? b->data + b->off : NULL;
}

/*
 * Make room for @extra more bytes after len. Returns 0 or -ENOMEM (the
 * buffer is unchanged on failure).
 */
int sw_buf_reserve(struct sw_buf *b, size_t extra);

/* Append @n bytes from @p. Returns 0 or -ENOMEM. */
int sw_buf_add(struct sw_buf *b, const void *p, size_t n);

/* Mark @n unread bytes as read. */
void sw_buf_consume(struct sw_buf *b, size_t n);

/*
 * Append one frame (proto/frame.h) carrying @msg, which may be NULL for an
 * empty payload. Returns 0 or -ENOMEM.
 */
int sw_buf_add_frame(struct sw_buf *b, uint16_t type, uint16_t flags,
		     uint64_t id, const ProtobufCMessage *msg);

#endif
