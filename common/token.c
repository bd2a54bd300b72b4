/*
 * Chunk access tokens (token.h): made by the master, checked by
 * chunkservers, a MAC over what they grant.
 */
#include <string.h>

#include "hash.h"
#include "token.h"

void sw_token_make(const uint8_t key[SW_TOKEN_KEY], uint64_t chunk_id,
		   uint32_t version, enum sw_token_mode mode,
		   uint64_t expires_ms, uint8_t out[SW_TOKEN_LEN])
{
	uint8_t msg[8 + 4 + 1 + 8];
	uint64_t mac;

	memcpy(msg, &chunk_id, 8);
	memcpy(msg + 8, &version, 4);
	msg[12] = (uint8_t)mode;
	memcpy(msg + 13, &expires_ms, 8);
	mac = sw_siphash24(key, msg, sizeof(msg));
	memcpy(out, &mac, SW_TOKEN_LEN);
}

static bool token_equal(const uint8_t *a, const uint8_t *b)
{
	uint8_t diff = 0;

	for (size_t i = 0; i < SW_TOKEN_LEN; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

bool sw_token_check(const uint8_t key[SW_TOKEN_KEY], uint64_t chunk_id,
		    uint32_t version, enum sw_token_mode mode,
		    uint64_t expires_ms, uint64_t now_ms, const uint8_t *token,
		    size_t len)
{
	uint8_t want[SW_TOKEN_LEN];

	if (len != SW_TOKEN_LEN || now_ms > expires_ms)
		return false;
	sw_token_make(key, chunk_id, version, mode, expires_ms, want);
	if (token_equal(want, token))
		return true;
	if (mode == SW_TOKEN_READ) {
		sw_token_make(key, chunk_id, version, SW_TOKEN_WRITE,
			      expires_ms, want);
		return token_equal(want, token);
	}
	return false;
}
