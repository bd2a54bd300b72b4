/*
 * SipHash-1-3 (one compression round, three finalisation rounds) for hash
 * tables and SipHash-2-4 as a MAC, after the reference description by
 * Aumasson and Bernstein. The per-process key
 * comes from getrandom(2) on first use.
 */
#include <pthread.h>
#include <string.h>
#include <sys/random.h>

#include "hash.h"
#include "util.h"

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND                   \
	do {                       \
		v0 += v1;          \
		v1 = ROTL(v1, 13); \
		v1 ^= v0;          \
		v0 = ROTL(v0, 32); \
		v2 += v3;          \
		v3 = ROTL(v3, 16); \
		v3 ^= v2;          \
		v0 += v3;          \
		v3 = ROTL(v3, 21); \
		v3 ^= v0;          \
		v2 += v1;          \
		v1 = ROTL(v1, 17); \
		v1 ^= v2;          \
		v2 = ROTL(v2, 32); \
	} while (0)

#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
static uint64_t le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return __builtin_bswap64(v);
}
#else
static uint64_t le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}
#endif

static uint64_t siphash(const uint8_t key[16], const void *data, size_t len,
			int crounds, int drounds)
{
	const uint8_t *p = data;
	uint64_t k0 = le64(key), k1 = le64(key + 8);
	uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
	uint64_t v1 = 0x646f72616e646f6dULL ^ k1;
	uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
	uint64_t v3 = 0x7465646279746573ULL ^ k1;
	uint64_t b = (uint64_t)len << 56;
	size_t left = len & 7;
	const uint8_t *end = p + len - left;

	for (; p != end; p += 8) {
		uint64_t m = le64(p);

		v3 ^= m;
		for (int r = 0; r < crounds; r++)
			SIPROUND;
		v0 ^= m;
	}
	for (size_t i = 0; i < left; i++)
		b |= (uint64_t)p[i] << (8 * i);
	v3 ^= b;
	for (int r = 0; r < crounds; r++)
		SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	for (int r = 0; r < drounds; r++)
		SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t sw_siphash13(const uint8_t key[16], const void *data, size_t len)
{
	return siphash(key, data, len, 1, 3);
}

uint64_t sw_siphash24(const uint8_t key[16], const void *data, size_t len)
{
	return siphash(key, data, len, 2, 4);
}

static uint8_t process_key[16];
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void key_init(void)
{
	if (getrandom(process_key, sizeof(process_key), 0) !=
	    (ssize_t)sizeof(process_key)) {
		/* No entropy: fall back to something that differs per run. */
		uint64_t t = (uint64_t)sw_mono_ns() ^ (uint64_t)sw_now_ns();

		memcpy(process_key, &t, 8);
		t = sw_hash_u64(t);
		memcpy(process_key + 8, &t, 8);
	}
}

uint64_t sw_hash_bytes(const void *p, size_t len)
{
	pthread_once(&key_once, key_init);
	return sw_siphash13(process_key, p, len);
}
