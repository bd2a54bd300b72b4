/*
 * Chunk access tokens: the master grants a client access to one chunk at
 * one version, for reading or writing, until an expiry, and chunkservers
 * check the grant without asking the master. A token is a MAC
 * (SipHash-2-4, 128-bit key the master gives each chunkserver when it
 * registers) over those fields; a client cannot make one for a chunk it
 * was not given, or turn a read grant into a write grant.
 */
#ifndef SWEEPFS_COMMON_TOKEN_H
#define SWEEPFS_COMMON_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SW_TOKEN_KEY 16
#define SW_TOKEN_LEN 8

/* What a token grants (the value is part of what the MAC covers). */
enum sw_token_mode {
	SW_TOKEN_READ = 1,
	SW_TOKEN_WRITE = 2,	 /* reading too */
	SW_TOKEN_WRITE_ONLY = 3, /* for a writer who may not read the file */
};

/* What a chunkserver operation needs of a token. */
enum sw_token_need {
	SW_NEED_READ,  /* a READ or WRITE token */
	SW_NEED_WRITE, /* a WRITE or WRITE_ONLY token (a write, a sync) */
};

/*
 * The token for @mode access to @chunk_id at @version until @expires_ms
 * (ms since the epoch), written into @out (SW_TOKEN_LEN bytes).
 */
void sw_token_make(const uint8_t key[SW_TOKEN_KEY], uint64_t chunk_id,
		   uint32_t version, enum sw_token_mode mode,
		   uint64_t expires_ms, uint8_t out[SW_TOKEN_LEN]);

/*
 * Whether the @len bytes at @token grant what @need asks of @chunk_id at
 * @version at time @now_ms, given the expiry @expires_ms the client sent
 * along. Constant-time comparison of each candidate.
 */
bool sw_token_check(const uint8_t key[SW_TOKEN_KEY], uint64_t chunk_id,
		    uint32_t version, enum sw_token_need need,
		    uint64_t expires_ms, uint64_t now_ms, const uint8_t *token,
		    size_t len);

#endif
