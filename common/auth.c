#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "hash.h"

/* Fixed keys that separate the uses of SipHash here from each other. */
static const uint8_t kdf_a[16] = "sweepfs-auth-kd1";
static const uint8_t kdf_b[16] = "sweepfs-auth-kd2";

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

void sw_auth_key(const char *password, uint8_t key[SW_AUTH_KEY])
{
	size_t len = strlen(password);
	uint64_t h1 = sw_siphash24(kdf_a, password, len);
	uint64_t h2 = sw_siphash24(kdf_b, password, len);
	uint8_t k[16], in[16];

	for (uint32_t i = 0; i < SW_AUTH_ROUNDS; i++) {
		put64(k, h1);
		put64(k + 8, h2);
		put64(in, i);
		put64(in + 8, h1 ^ h2);
		h1 = sw_siphash24(k, in, sizeof(in));
		in[0] ^= 0x80;
		h2 = sw_siphash24(k, in, sizeof(in));
	}
	put64(key, h1);
	put64(key + 8, h2);
}

void sw_auth_response(const uint8_t key[SW_AUTH_KEY],
		      const uint8_t nonce[SW_AUTH_NONCE], const char *subdir,
		      uint8_t tag[SW_AUTH_TAG])
{
	size_t slen = strlen(subdir);
	uint8_t buf[1 + SW_AUTH_NONCE + 4096];

	if (slen > 4096)
		slen = 4096;
	memcpy(buf + 1, nonce, SW_AUTH_NONCE);
	memcpy(buf + 1 + SW_AUTH_NONCE, subdir, slen);
	buf[0] = 'A';
	put64(tag, sw_siphash24(key, buf, 1 + SW_AUTH_NONCE + slen));
	buf[0] = 'B';
	put64(tag + 8, sw_siphash24(key, buf, 1 + SW_AUTH_NONCE + slen));
}

bool sw_auth_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
	uint8_t d = 0;

	for (size_t i = 0; i < n; i++)
		d |= a[i] ^ b[i];
	return d == 0;
}

int sw_auth_password(const char *file, char *out, size_t outlen)
{
	const char *env = getenv("SWEEPFS_PASSWORD");

	if (file && *file) {
		FILE *f = fopen(file, "re");
		size_t n;

		if (!f)
			return -errno;
		if (!fgets(out, (int)outlen, f))
			out[0] = '\0';
		fclose(f);
		n = strcspn(out, "\r\n");
		out[n] = '\0';
		return 1;
	}
	if (env && *env) {
		snprintf(out, outlen, "%s", env);
		return 1;
	}
	return 0;
}
