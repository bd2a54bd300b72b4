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

enum sw_token_mode {
	SW_TOKEN_READ = 1,
	SW_TOKEN_WRITE = 2, /* implies read */
};

/*
 * The token for @mode access to @chunk_id at @version until @expires_ms
 * (ms since the epoch), written into @out (SW_TOKEN_LEN bytes).
 */
void sw_token_make(const uint8_t key[SW_TOKEN_KEY], uint64_t chunk_id,
		   uint32_t version, enum sw_token_mode mode,
		   uint64_t expires_ms, uint8_t out[SW_TOKEN_LEN]);

/*
 * Whether the @len bytes at @token grant @mode access to @chunk_id at
 * @version at time @now_ms, given the expiry @expires_ms the client sent
 * along. A write token also grants reading. Constant-time comparison.
 */
bool sw_token_check(const uint8_t key[SW_TOKEN_KEY], uint64_t chunk_id,
		    uint32_t version, enum sw_token_mode mode,
		    uint64_t expires_ms, uint64_t now_ms, const uint8_t *token,
		    size_t len);

#endif
