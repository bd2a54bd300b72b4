/*
 * Chunk access tokens (token.h): made by the master, checked by
 * chunkservers, a MAC over what they grant.
 */
#include <string.h>

#include "hash.h"
#include "token.h"
#include "util.h"

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

/* The modes of token that grant each need, in the order tried. */
static const enum sw_token_mode granting[][2] = {
	[SW_NEED_READ] = { SW_TOKEN_READ, SW_TOKEN_WRITE },
	[SW_NEED_WRITE] = { SW_TOKEN_WRITE, SW_TOKEN_WRITE_ONLY },
};

bool sw_token_check(const uint8_t key[SW_TOKEN_KEY], uint64_t chunk_id,
		    uint32_t version, enum sw_token_need need,
		    uint64_t expires_ms, uint64_t now_ms, const uint8_t *token,
		    size_t len)
{
	uint8_t want[SW_TOKEN_LEN];

	if (len != SW_TOKEN_LEN || now_ms > expires_ms ||
	    (unsigned)need >= SW_ARRAY_SIZE(granting))
		return false;
	for (size_t i = 0; i < SW_ARRAY_SIZE(granting[0]); i++) {
		if (!granting[need][i])
			break;
		sw_token_make(key, chunk_id, version, granting[need][i],
			      expires_ms, want);
		if (token_equal(want, token))
			return true;
	}
	return false;
}
