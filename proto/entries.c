/*
 * Packing and reading the directory entries of ReaddirReply.entries
 * (entries.h).
 */
#include <errno.h>
#include <string.h>

#include "entries.h"

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

static int get_varint(const uint8_t *p, size_t len, uint64_t *v)
{
	uint64_t r = 0;

	for (size_t i = 0; i < len && i < 10; i++) {
		r |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80)) {
			*v = r;
			return (int)i + 1;
		}
	}
	return -EPROTO;
}

size_t sw_dirent_put(uint8_t *p, const struct sw_dirent *d)
{
	size_t n = put_varint(p, d->cookie);

	n += put_varint(p + n, d->ino);
	p[n++] = d->type;
	p[n++] = d->namelen;
	memcpy(p + n, d->name, d->namelen);
	return n + d->namelen;
}

int sw_dirent_get(const uint8_t *p, size_t len, struct sw_dirent *d)
{
	int a, b;
	size_t off;

	a = get_varint(p, len, &d->cookie);
	if (a < 0)
		return a;
	b = get_varint(p + a, len - (size_t)a, &d->ino);
	if (b < 0)
		return b;
	off = (size_t)a + (size_t)b;
	if (len - off < 2)
		return -EPROTO;
	d->type = p[off];
	d->namelen = p[off + 1];
	off += 2;
	if (d->namelen == 0 || len - off < d->namelen)
		return -EPROTO;
	d->name = (const char *)p + off;
	return (int)(off + d->namelen);
}
