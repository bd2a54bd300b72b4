/*
 * Hash functions for in-memory tables.
 *
 * Names come from clients, so a table keyed by name must not let a client
 * pick colliding names: sw_hash_bytes() is SipHash-1-3 under a key drawn at
 * random once per process (as Python and Redis do). Integers the servers
 * assign themselves (inode numbers) only need spreading: sw_hash_u64().
 */
#ifndef SWEEPFS_COMMON_HASH_H
#define SWEEPFS_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

/* Keyed hash of @len bytes at @p. Thread-safe. */
uint64_t sw_hash_bytes(const void *p, size_t len);

/* Same, under an explicit 16-byte @key: for tests and test vectors. */
uint64_t sw_siphash13(const uint8_t key[16], const void *p, size_t len);

/*
 * SipHash-2-4 under @key: a MAC for short messages (the reference
 * parameters; SipHash-2-4("000102..0e0f", "") == 0x726fdb47dd0e0e31).
 */
uint64_t sw_siphash24(const uint8_t key[16], const void *p, size_t len);

/* A bijective mix of @x (the murmur3 finaliser). */
static inline uint64_t sw_hash_u64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

#endif
