/*
 * The packed directory entries of ReaddirReply.entries (sweepfs.proto):
 *
 *   varint cookie | varint ino | u8 d_type | u8 name length | name
 *
 * Varints are protobuf's (7 bits a byte, low first).
 */
#ifndef SWEEPFS_PROTO_ENTRIES_H
#define SWEEPFS_PROTO_ENTRIES_H

#include <stddef.h>
#include <stdint.h>

/* Largest encoding of one entry. */
#define SW_DIRENT_MAX (10 + 10 + 1 + 1 + 255)

struct sw_dirent {
	uint64_t cookie;
	uint64_t ino;
	uint8_t type; /* DT_* */
	uint8_t namelen;
	const char *name; /* points into the buffer; not NUL-terminated */
};

/* Encode @d at @p (room for SW_DIRENT_MAX); returns the bytes written. */
size_t sw_dirent_put(uint8_t *p, const struct sw_dirent *d);

/*
 * Decode one entry from the @len bytes at @p into @d. Returns the bytes
 * consumed, or -EPROTO when the entry is truncated or malformed (an
 * overlong varint, an empty name).
 */
int sw_dirent_get(const uint8_t *p, size_t len, struct sw_dirent *d);

#endif
