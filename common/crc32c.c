/*
 * Two implementations behind one entry point: the SSE4.2 crc32 instruction
 * (8 bytes a step) and a portable slicing-by-8 table. The choice is made on
 * first call from CPUID; both give the same result, which the unit test
 * checks.
 */
#include <stdbool.h>
#include <string.h>

#include "crc32c.h"

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t table[8][256];
static int impl; /* 0: unknown, 1: table, 2: sse4.2 */

static void table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			table[t][i] = (table[t - 1][i] >> 8) ^
				      table[0][table[t - 1][i] & 0xff];
}

static uint32_t crc_table(uint32_t crc, const uint8_t *p, size_t len)
{
	while (len >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		w ^= crc;
		crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^
		      table[5][(w >> 16) & 0xff] ^ table[4][(w >> 24) & 0xff] ^
		      table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
		      table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
crc_sse42(uint32_t crc, const uint8_t *p, size_t len)
{
	uint64_t c = crc;

	while (len >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		c = __builtin_ia32_crc32di(c, w);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}

static bool have_sse42(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("sse4.2");
}
#else
static uint32_t crc_sse42(uint32_t crc, const uint8_t *p, size_t len)
{
	return crc_table(crc, p, len);
}

static bool have_sse42(void)
{
	return false;
}
#endif

/*
 * Benign race: two threads may both initialise; they compute the same
 * values, and impl is set last.
 */
static void crc_init(void)
{
	table_init();
	__atomic_store_n(&impl, have_sse42() ? 2 : 1, __ATOMIC_RELEASE);
}

uint32_t sw_crc32c(uint32_t crc, const void *p, size_t len)
{
	int which = __atomic_load_n(&impl, __ATOMIC_ACQUIRE);

	if (!which) {
		crc_init();
		which = impl;
	}
	crc = ~crc;
	crc = which == 2 ? crc_sse42(crc, p, len) : crc_table(crc, p, len);
	return ~crc;
}

uint32_t sw_crc32c_portable(uint32_t crc, const void *p, size_t len)
{
	if (!impl)
		crc_init();
	return ~crc_table(~crc, p, len);
}
