/*
 * Password checks between clients and the master (exports with
 * password=...), by challenge and response, so that nothing secret
 * crosses the wire: the master sends a random nonce, the client answers
 * with a MAC over it (and the subtree it asked for) keyed by a key
 * derived from the password, the master computes the same and compares.
 *
 * The MAC is SipHash-2-4 (a keyed PRF designed for exactly this), two
 * halves with different inputs for a 128-bit tag. The key is stretched
 * from the password by SW_AUTH_ROUNDS chained SipHash computations, which
 * makes every guess against a recorded exchange cost that many hashes;
 * like any scheme without a PAKE it cannot make a weak password strong.
 */
#ifndef SWEEPFS_COMMON_AUTH_H
#define SWEEPFS_COMMON_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SW_AUTH_KEY 16
#define SW_AUTH_NONCE 16
#define SW_AUTH_TAG 16
#define SW_AUTH_ROUNDS 65536

/* The key for @password (NUL-terminated). Deterministic. */
void sw_auth_key(const char *password, uint8_t key[SW_AUTH_KEY]);

/* The response to @nonce for a client asking for @subdir. */
void sw_auth_response(const uint8_t key[SW_AUTH_KEY],
		      const uint8_t nonce[SW_AUTH_NONCE], const char *subdir,
		      uint8_t tag[SW_AUTH_TAG]);

/* @n bytes equal, in time independent of where they differ. */
bool sw_auth_equal(const uint8_t *a, const uint8_t *b, size_t n);

/*
 * The password for a client: the contents of @file (first line) if
 * given, else $SWEEPFS_PASSWORD, else none. Returns 1 with @out filled,
 * 0 for none, -errno if @file cannot be read.
 */
int sw_auth_password(const char *file, char *out, size_t outlen);

#endif
