/*
 * Checksummed I/O on one chunk file (format and crash rule: chunkfile.h).
 *
 * A write, in system-call order:
 *   1. read and verify the partially covered first and last blocks;
 *   2. the new CRCs go to the pending slots (one pwrite of the entries);
 *   3. the header, when the chunk grows (so that no data ever lies past
 *      the recorded length);
 *   4. the data, whole blocks from the first to the last touched (one
 *      pwritev);
 *   5. the new CRCs go to the committed slots.
 * A kill -9 after any step leaves every block verifiable: before 4 the
 * data matches the committed slot, after 4 the pending one, and in the
 * middle of 4 the slots differ and the block is taken as written (the
 * bytes outside the interrupted write are the acknowledged ones, since
 * they were rewritten with the same values).
 *
 * The order only holds against a killed process, whose completed write(2)s
 * all reach the page cache in order. Against power loss, data is durable
 * after fdatasync (CS_SYNC), as with any file; a block written since the
 * last sync may then fail verification and is reported as damaged.
 *
 * Slots are read and repaired with relaxed atomics because readers share
 * a file and may repair the same slot at once (always to the same value).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "chunkfile.h"
#include "crc32c.h"
#include "util.h"

#define BS SW_BLOCK_SIZE

static uint32_t zero_crc;

/* ---- little-endian codec ---------------------------------------------- */

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static void put_le64(uint8_t *p, uint64_t v)
{
	put_le32(p, (uint32_t)v);
	put_le32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t get_le64(const uint8_t *p)
{
	return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

static uint32_t slot_get(const struct cf_file *f, size_t i)
{
	return __atomic_load_n(&f->slots[i], __ATOMIC_RELAXED);
}

static void slot_set(struct cf_file *f, size_t i, uint32_t v)
{
	__atomic_store_n(&f->slots[i], v, __ATOMIC_RELAXED);
}

uint32_t cf_zero_crc(void)
{
	uint32_t z = __atomic_load_n(&zero_crc, __ATOMIC_RELAXED);

	if (!z) {
		static const uint8_t zeros[BS];

		z = sw_crc32c(0, zeros, sizeof(zeros));
		__atomic_store_n(&zero_crc, z, __ATOMIC_RELAXED);
	}
	return z;
}

bool cf_all_zero(const uint8_t *p, size_t len)
{
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t v;

		memcpy(&v, p + i, 8);
		if (v)
			return false;
	}
	for (; i < len; i++)
		if (p[i])
			return false;
	return true;
}

/* ---- plain I/O ---------------------------------------------------------- */

/* pread all of @len bytes; past the end of the file the rest is zeros. */
static int pread_full(int fd, uint8_t *buf, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pread(fd, buf, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0) {
			memset(buf, 0, len);
			return 0;
		}
		buf += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static int pwritev_full(int fd, struct iovec *iov, int cnt, uint64_t off)
{
	while (cnt > 0) {
		ssize_t n = pwritev(fd, iov, cnt, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		off += (uint64_t)n;
		while (cnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

static int pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return pwritev_full(fd, &iov, 1, off);
}

/* ---- header and table ------------------------------------------------- */

void cf_header_encode(uint8_t *out, const struct cf_meta *m)
{
	memset(out, 0, CF_HDR_USED);
	memcpy(out, CF_MAGIC, 4);
	put_le32(out + 4, CF_FORMAT);
	put_le64(out + 8, m->chunk_id);
	put_le32(out + 16, m->version);
	put_le64(out + 24, m->length);
	put_le32(out + 32, BS);
	put_le32(out + 36, CF_DATA_OFF);
	put_le32(out + 40, sw_crc32c(0, out, 40));
}

int cf_header_decode(const uint8_t *in, size_t len, struct cf_meta *m)
{
	uint64_t length;

	if (len < CF_HDR_USED || memcmp(in, CF_MAGIC, 4) ||
	    get_le32(in + 4) != CF_FORMAT ||
	    get_le32(in + 40) != sw_crc32c(0, in, 40) ||
	    get_le32(in + 32) != BS || get_le32(in + 36) != CF_DATA_OFF)
		return -EUCLEAN;
	length = get_le64(in + 24);
	if (length > SW_CHUNK_SIZE)
		return -EUCLEAN;
	m->chunk_id = get_le64(in + 8);
	m->version = get_le32(in + 16);
	m->length = (uint32_t)length;
	return 0;
}

int cf_read_header(int fd, struct cf_meta *m)
{
	uint8_t buf[CF_HDR_USED];
	int rc = pread_full(fd, buf, sizeof(buf), 0);

	return rc < 0 ? rc : cf_header_decode(buf, sizeof(buf), m);
}

int cf_put_header(int fd, const struct cf_meta *m)
{
	uint8_t buf[CF_HDR_USED];

	cf_header_encode(buf, m);
	return pwrite_full(fd, buf, sizeof(buf), 0);
}

int cf_init(int fd, const struct cf_meta *m)
{
	uint8_t *buf = calloc(1, CF_DATA_OFF);
	uint32_t z = cf_zero_crc();
	int rc;

	if (!buf)
		return -ENOMEM;
	cf_header_encode(buf, m);
	for (size_t i = 0; i < 2 * SW_CHUNK_BLOCKS; i++)
		put_le32(buf + CF_TABLE_OFF + 4 * i, z);
	rc = pwrite_full(fd, buf, CF_DATA_OFF, 0);
	free(buf);
	return rc;
}

int cf_load(int fd, struct cf_meta *m, struct cf_file **out)
{
	uint8_t *buf = malloc(CF_DATA_OFF);
	struct cf_file *f = malloc(sizeof(*f));
	int rc = -ENOMEM;

	if (!buf || !f)
		goto out_free;
	rc = pread_full(fd, buf, CF_DATA_OFF, 0);
	if (rc == 0)
		rc = cf_header_decode(buf, CF_HDR_USED, m);
	if (rc < 0)
		goto out_free;
	for (size_t i = 0; i < 2 * SW_CHUNK_BLOCKS; i++)
		f->slots[i] = get_le32(buf + CF_TABLE_OFF + 4 * i);
	f->fd = fd;
	*out = f;
	free(buf);
	return 0;

out_free:
	free(f);
	free(buf);
	return rc;
}

void cf_close(struct cf_file *f)
{
	if (!f)
		return;
	close(f->fd);
	free(f);
}

/* Write the table entries of blocks [@b, @b + @n) as they are in memory. */
static int put_entries(struct cf_file *f, uint32_t b, uint32_t n)
{
	uint8_t stackbuf[1024], *buf = stackbuf;
	size_t len = (size_t)n * CF_ENTRY_SIZE;
	int rc;

	if (len > sizeof(stackbuf)) {
		buf = malloc(len);
		if (!buf)
			return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		put_le32(buf + 8 * i, slot_get(f, 2 * (b + i)));
		put_le32(buf + 8 * i + 4, slot_get(f, 2 * (b + i) + 1));
	}
	rc = pwrite_full(f->fd, buf, len, CF_TABLE_OFF + (uint64_t)b * 8);
	if (buf != stackbuf)
		free(buf);
	return rc;
}

/* ---- verification ------------------------------------------------------- */

/*
 * Check block @b, whose 64 KiB are at @data, against its slots (the rule
 * in chunkfile.h), repairing the slots when that is called for. Returns 0
 * or -EBADMSG.
 */
static int verify_block(struct cf_file *f, uint32_t b, const uint8_t *data,
			struct cf_report *r)
{
	uint32_t x = sw_crc32c(0, data, BS);
	uint32_t c = slot_get(f, 2 * b), p = slot_get(f, 2 * b + 1);

	if (x == c)
		return 0;
	if (x == p) {
		slot_set(f, 2 * b, p);
		r->repaired++;
	} else if (p != c) {
		slot_set(f, 2 * b, x);
		slot_set(f, 2 * b + 1, x);
		r->torn++;
	} else {
		r->bad_block = (int32_t)b;
		return -EBADMSG;
	}
	/* Best effort: if this fails the next read repairs again. */
	put_entries(f, b, 1);
	return 0;
}

/* Read blocks [@b, @b + @n) into @buf and verify each. */
static int read_blocks(struct cf_file *f, uint32_t b, uint32_t n, uint8_t *buf,
		       struct cf_report *r)
{
	int rc = pread_full(f->fd, buf, (size_t)n * BS,
			    CF_DATA_OFF + (uint64_t)b * BS);

	for (uint32_t i = 0; rc == 0 && i < n; i++)
		rc = verify_block(f, b + i, buf + (size_t)i * BS, r);
	return rc;
}

int cf_read(struct cf_file *f, const struct cf_meta *m, uint32_t off,
	    uint32_t size, uint8_t *buf, struct cf_report *r)
{
	uint32_t n, b0, b1;
	uint8_t *span;
	int rc;

	if (off >= m->length || size == 0)
		return 0;
	n = SW_MIN(size, m->length - off);
	b0 = off / BS;
	b1 = (off + n - 1) / BS;
	span = malloc((size_t)(b1 - b0 + 1) * BS);
	if (!span)
		return -ENOMEM;
	rc = read_blocks(f, b0, b1 - b0 + 1, span, r);
	if (rc == 0)
		memcpy(buf, span + (off - b0 * BS), n);
	free(span);
	return rc < 0 ? rc : (int)n;
}

/* ---- writing ------------------------------------------------------------ */

/* A write cut into whole blocks: the partial first and last are copies. */
struct wplan {
	uint32_t b0, b1;    /* first and last block touched */
	uint8_t *head;	    /* block b0 after the write, if partially covered */
	uint8_t *tail;	    /* block b1 after the write, if partially covered */
	const uint8_t *mid; /* the request's bytes of the whole blocks */
	uint32_t mid_b0;    /* first whole block */
	uint32_t mid_n;	    /* whole blocks */
};

/* The contents of block @b after the write. */
static const uint8_t *plan_block(const struct wplan *w, uint32_t b)
{
	if (b == w->b0 && w->head)
		return w->head;
	if (b == w->b1 && w->tail)
		return w->tail;
	return w->mid + (size_t)(b - w->mid_b0) * BS;
}

static int plan_write(struct cf_file *f, uint32_t off, const uint8_t *data,
		      uint32_t size, struct wplan *w, struct cf_report *r)
{
	uint32_t end = off + size;
	int rc;

	w->b0 = off / BS;
	w->b1 = (end - 1) / BS;
	w->head = w->tail = NULL;
	if (off % BS || (w->b0 == w->b1 && size < BS)) {
		uint32_t in = off % BS;

		w->head = malloc(BS);
		if (!w->head)
			return -ENOMEM;
		rc = read_blocks(f, w->b0, 1, w->head, r);
		if (rc < 0)
			return rc;
		memcpy(w->head + in, data, SW_MIN(size, BS - in));
	}
	if (w->b1 != w->b0 && end % BS) {
		w->tail = malloc(BS);
		if (!w->tail)
			return -ENOMEM;
		rc = read_blocks(f, w->b1, 1, w->tail, r);
		if (rc < 0)
			return rc;
		memcpy(w->tail, data + size - end % BS, end % BS);
	}
	w->mid_b0 = w->head ? w->b0 + 1 : w->b0;
	w->mid_n = (w->tail ? w->b1 : w->b1 + 1) - w->mid_b0;
	w->mid = w->mid_n ? data + ((size_t)w->mid_b0 * BS - off) : NULL;
	return 0;
}

/*
 * Write the planned blocks, but none of their bytes at or past @length,
 * the chunk's length after the write: those are zeros (the invariant),
 * and zeros past the end of the file read as zeros, so a small chunk
 * takes its bytes on disk, not a whole block's. A 4 KiB file's chunk
 * took 76 KiB (the header and table, and 64 KiB of data of which 60
 * were zeros): 76 GB for a million small files.
 */
static int put_data(struct cf_file *f, const struct wplan *w, uint32_t length)
{
	size_t left = length - (size_t)w->b0 * BS; /* > 0: the write is in */
	struct iovec iov[3];
	int cnt = 0;

	if (w->head)
		iov[cnt++] = (struct iovec){ w->head, BS };
	if (w->mid_n)
		iov[cnt++] =
			(struct iovec){ (void *)w->mid, (size_t)w->mid_n * BS };
	if (w->tail)
		iov[cnt++] = (struct iovec){ w->tail, BS };
	for (int i = 0; i < cnt; i++) {
		iov[i].iov_len = SW_MIN(iov[i].iov_len, left);
		left -= iov[i].iov_len;
		if (!left) {
			cnt = i + 1;
			break;
		}
	}
	return pwritev_full(f->fd, iov, cnt,
			    CF_DATA_OFF + (uint64_t)w->b0 * BS);
}

int cf_write(struct cf_file *f, const struct cf_meta *m, uint32_t off,
	     const uint8_t *data, uint32_t size, uint32_t *new_length,
	     struct cf_report *r)
{
	struct wplan w;
	uint32_t nb, *crc = NULL;
	int rc;

	*new_length = m->length;
	if (size == 0)
		return 0;
	if (off > SW_CHUNK_SIZE || size > SW_CHUNK_SIZE - off)
		return -EINVAL;
	rc = plan_write(f, off, data, size, &w, r);
	if (rc < 0)
		goto out_free;
	nb = w.b1 - w.b0 + 1;
	crc = malloc(nb * sizeof(*crc));
	if (!crc) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (uint32_t i = 0; i < nb; i++) {
		crc[i] = sw_crc32c(0, plan_block(&w, w.b0 + i), BS);
		slot_set(f, 2 * (w.b0 + i) + 1, crc[i]);
	}
	rc = put_entries(f, w.b0, nb);
	if (rc == 0 && off + size > m->length) {
		struct cf_meta grown = *m;

		grown.length = off + size;
		rc = cf_put_header(f->fd, &grown);
		if (rc == 0)
			*new_length = grown.length;
	}
	if (rc == 0)
		rc = put_data(f, &w, SW_MAX(m->length, off + size));
	if (rc < 0)
		goto out_free;
	for (uint32_t i = 0; i < nb; i++)
		slot_set(f, 2 * (w.b0 + i), crc[i]);
	rc = put_entries(f, w.b0, nb);

out_free:
	free(crc);
	free(w.head);
	free(w.tail);
	return rc;
}

/* ---- truncation ----------------------------------------------------------- */

static int shrink(struct cf_file *f, const struct cf_meta *m, uint32_t length,
		  struct cf_report *r)
{
	uint32_t first = length / BS;		  /* first block changed */
	uint32_t end = (m->length + BS - 1) / BS; /* after the last used */
	uint32_t z = cf_zero_crc();
	uint8_t *blk = NULL;
	int rc;

	if (length % BS) {
		blk = malloc(BS);
		if (!blk)
			return -ENOMEM;
		rc = read_blocks(f, first, 1, blk, r);
		if (rc < 0)
			goto out_free;
		memset(blk + length % BS, 0, BS - length % BS);
		slot_set(f, 2 * first + 1, sw_crc32c(0, blk, BS));
	} else {
		slot_set(f, 2 * first + 1, z);
	}
	for (uint32_t b = first + 1; b < end; b++)
		slot_set(f, 2 * b + 1, z);
	rc = put_entries(f, first, end - first);
	if (rc == 0 && ftruncate(f->fd, (off_t)(CF_DATA_OFF + length)) < 0)
		rc = -errno;
	if (rc < 0)
		goto out_free;
	for (uint32_t b = first; b < end; b++)
		slot_set(f, 2 * b, slot_get(f, 2 * b + 1));
	rc = put_entries(f, first, end - first);

out_free:
	free(blk);
	return rc;
}

int cf_truncate(struct cf_file *f, const struct cf_meta *m, uint32_t length,
		uint32_t *new_length, struct cf_report *r)
{
	struct cf_meta nm = *m;
	int rc;

	*new_length = m->length;
	if (length > SW_CHUNK_SIZE)
		return -EINVAL;
	if (length == m->length)
		return 0;
	if (length < m->length) {
		rc = shrink(f, m, length, r);
		if (rc < 0)
			return rc;
	}
	nm.length = length;
	rc = cf_put_header(f->fd, &nm);
	if (rc == 0)
		*new_length = length;
	return rc;
}
