/*
 * chunkfile: the on-disk format of one chunk and the checksummed I/O on
 * it. Knows nothing of paths, locks or inventories (store.h does).
 *
 * Layout of a chunk file, all integers little-endian:
 *
 *   0      header (CF_HDR_SIZE): "SWCK", format, chunk id, version,
 *          logical length, block size, data offset, CRC-32C of the header
 *   4096   CRC table: per 64 KiB block, two 32-bit slots
 *          [committed CRC][pending CRC]
 *   12288  data: block b at CF_DATA_OFF + b * SW_BLOCK_SIZE
 *
 * A block's CRC always covers the whole 64 KiB block, bytes past the
 * file's end counting as zeros. Invariant: the data at and after the
 * logical length is zero (or absent), so a never-written block (a hole)
 * carries cf_zero_crc() in both slots and reads as zeros.
 *
 * Crash rule (two slots): a write stores the new CRC in the pending slot,
 * then the data, then copies it to the committed slot. A block verifies
 * when its data matches either slot; a match of the pending slot repairs
 * the committed one. When the slots differ and the data matches neither,
 * the last write to the block was interrupted mid-data (kill -9 can stop a
 * write(2) between pages): that write was never acknowledged, the bytes it
 * did not cover are the old ones, so the block is accepted as it is and
 * both slots are set to its CRC. A block whose slots agree and whose data
 * does not match is damaged: -EBADMSG.
 *
 * Locking is the caller's: cf_read() may run concurrently with other
 * cf_read()s of the same file (slot repairs use atomic stores of the same
 * values); everything else needs the file to itself.
 */
#ifndef SWEEPFS_CHUNKSERVER_CHUNKFILE_H
#define SWEEPFS_CHUNKSERVER_CHUNKFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frame.h"

#define CF_MAGIC "SWCK"
#define CF_FORMAT 1u
#define CF_HDR_SIZE 4096u
#define CF_HDR_USED 44u /* encoded header bytes; the rest is zero */
#define CF_TABLE_OFF CF_HDR_SIZE
#define CF_ENTRY_SIZE 8u
#define CF_TABLE_SIZE (SW_CHUNK_BLOCKS * CF_ENTRY_SIZE)
#define CF_DATA_OFF (CF_TABLE_OFF + CF_TABLE_SIZE)

/* What the header says. */
struct cf_meta {
	uint64_t chunk_id;
	uint32_t version;
	uint32_t length; /* logical bytes, <= SW_CHUNK_SIZE */
};

/* An open chunk file: the descriptor and a copy of its CRC table. */
struct cf_file {
	int fd;
	/* slots[2b]: committed CRC of block b, slots[2b + 1]: pending.
	 * Accessed with __atomic builtins (see the locking note above). */
	uint32_t slots[2 * SW_CHUNK_BLOCKS];
};

/* What an operation found, for the caller to log. */
struct cf_report {
	uint32_t repaired; /* committed slots fixed from the pending one */
	uint32_t torn;	   /* blocks accepted after an interrupted write */
	int32_t bad_block; /* a block that failed verification, or -1 */
};

static inline void cf_report_init(struct cf_report *r)
{
	r->repaired = r->torn = 0;
	r->bad_block = -1;
}

/* CRC-32C of a 64 KiB block of zeros: the slot value of a hole. */
uint32_t cf_zero_crc(void);

/* Encode @m into the CF_HDR_USED bytes at @out. */
void cf_header_encode(uint8_t *out, const struct cf_meta *m);

/*
 * Decode a header from the @len bytes at @in. Returns 0, or -EUCLEAN when
 * the bytes are not a valid header of this format.
 */
int cf_header_decode(const uint8_t *in, size_t len, struct cf_meta *m);

/* Read and decode the header of the chunk file @fd; -errno or -EUCLEAN. */
int cf_read_header(int fd, struct cf_meta *m);

/* Rewrite the header of @fd with @m. Returns 0 or -errno. */
int cf_put_header(int fd, const struct cf_meta *m);

/*
 * Make the empty file @fd a chunk file for @m: header and a table of
 * holes. @m->length must be 0. Returns 0 or -errno.
 */
int cf_init(int fd, const struct cf_meta *m);

/*
 * Load the chunk file @fd: its header into *@m and a new struct cf_file
 * (which takes over @fd only on success) into *@out. The caller frees it
 * with cf_close(). Returns 0, -ENOMEM, -errno, or -EUCLEAN for a bad
 * header.
 */
int cf_load(int fd, struct cf_meta *m, struct cf_file **out);

/* Close the descriptor and free @f (NULL is fine). */
void cf_close(struct cf_file *f);

/*
 * Read @size bytes at chunk offset @off into @buf, verifying every block
 * touched. Stops at the logical length @m->length: returns the bytes read
 * (short past the end, 0 at or after it), -EBADMSG if a block failed
 * (@r->bad_block names it) or -errno. @off + @size <= SW_CHUNK_SIZE.
 */
int cf_read(struct cf_file *f, const struct cf_meta *m, uint32_t off,
	    uint32_t size, uint8_t *buf, struct cf_report *r);

/*
 * Write @size bytes from @data at chunk offset @off (@off + @size <=
 * SW_CHUNK_SIZE), with read-modify-write of partial blocks and the
 * two-slot rule. The header is updated first when the write extends the
 * chunk; *@new_length is the chunk's length afterwards (also on failure:
 * the header may have been updated before the failure). Returns 0,
 * -EBADMSG when a partially overwritten block was damaged (nothing was
 * written), or -errno.
 */
int cf_write(struct cf_file *f, const struct cf_meta *m, uint32_t off,
	     const uint8_t *data, uint32_t size, uint32_t *new_length,
	     struct cf_report *r);

/*
 * Set the logical length to @length (<= SW_CHUNK_SIZE): growing exposes
 * zeros; shrinking clears the tail of the new last block and frees the
 * blocks after it. *@new_length as for cf_write(). Returns 0, -EINVAL,
 * -EBADMSG (the new last block was damaged; nothing changed) or -errno.
 */
int cf_truncate(struct cf_file *f, const struct cf_meta *m, uint32_t length,
		uint32_t *new_length, struct cf_report *r);

/* Whether the @len bytes at @p are all zero. */
bool cf_all_zero(const uint8_t *p, size_t len);

#endif
