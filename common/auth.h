/*
 * Proofs between sweepfs peers, so that nothing secret crosses the wire:
 * - a client of a password-protected export (exports with password=...)
 *   answers the master's random nonce with a MAC over it and the subtree
 *   it asked for, keyed by a key derived from the password;
 * - a chunkserver and the master prove to each other that they hold the
 *   same key file (the master's chunkserver.key), each answering the
 *   other's nonce;
 * - a session's secret, which only its client holds, lets the client
 *   resume it after a reconnect (a MAC of the session id under a key the
 *   master keeps on disk, so it holds across a master restart);
 * - the members of a group of masters, which all hold that session key,
 *   prove it to each other the way a chunkserver and the master do.
 *
 * The primitives are libsodium's (no home-made cryptography): Argon2id
 * (crypto_pwhash) makes a password's key, so each guess against a
 * recorded exchange costs a real memory-hard hash; HMAC-SHA-512-256
 * (crypto_auth) makes every tag; randombytes_buf() every nonce and key.
 * Like any scheme without a PAKE it cannot make a weak password strong.
 *
 * Functions return 0 or -errno and never print.
 */
#ifndef SWEEPFS_COMMON_AUTH_H
#define SWEEPFS_COMMON_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SW_AUTH_KEY 32	 /* crypto_auth_KEYBYTES */
#define SW_AUTH_NONCE 16 /* random, fresh per challenge */
#define SW_AUTH_TAG 32	 /* crypto_auth_BYTES */

/* What a tag proves: domain separation between the uses above. */
enum sw_auth_use {
	SW_AUTH_EXPORT = 1,  /* a client, for an export's subtree */
	SW_AUTH_CHUNKSERVER, /* a chunkserver, to the master */
	SW_AUTH_MASTER,	     /* the master, to a chunkserver */
	SW_AUTH_SESSION,     /* a session's secret */
	SW_AUTH_MEMBER,	     /* a group's member, to its leader */
	SW_AUTH_LEADER,	     /* the leader, to a member */
	SW_AUTH_ONCE,	     /* the master's digest of a once request */
	SW_AUTH_INO_RANGE,   /* inode numbers given to a session */
	SW_AUTH_HANDLE,	     /* the key of node handles */
	SW_AUTH_TOKEN,	     /* the key of chunk tokens, for one epoch */
};

/* Set libsodium up (idempotent, thread-safe). 0 or -EIO. */
int sw_auth_init(void);

/* The key for @password (NUL-terminated): deterministic, ~0.1 s and
 * 64 MiB of work. 0, -ENOMEM or -EIO. */
int sw_auth_key(const char *password, uint8_t key[SW_AUTH_KEY]);

/*
 * The tag for @use over @a (@alen bytes) then @b (@blen bytes; may be
 * NULL with 0) under @key.
 */
void sw_auth_tag(const uint8_t key[SW_AUTH_KEY], enum sw_auth_use use,
		 const void *a, size_t alen, const void *b, size_t blen,
		 uint8_t tag[SW_AUTH_TAG]);

/* The response to @nonce for a client asking for @subdir. */
void sw_auth_response(const uint8_t key[SW_AUTH_KEY],
		      const uint8_t nonce[SW_AUTH_NONCE], const char *subdir,
		      uint8_t tag[SW_AUTH_TAG]);

/*
 * Node handles (sweepfs.proto, "Node handles"): a 64-bit keyed hash of an
 * inode number, SipHash-2-4 (libsodium's crypto_shorthash), under a key
 * derived from the master's session key, so that every member of a group
 * makes the same handles and they hold across restarts. Never 0. A
 * handle is checked by making it again: guessing one takes ~2^63 tries.
 */
#define SW_HANDLE_KEY 16 /* crypto_shorthash_KEYBYTES */

void sw_handle_key(const uint8_t session_key[SW_AUTH_KEY],
		   uint8_t key[SW_HANDLE_KEY]);
uint64_t sw_node_handle(const uint8_t key[SW_HANDLE_KEY], uint64_t ino);

/*
 * The key that signs chunk tokens (token.h) in token epoch @epoch: derived
 * from the master's token.key, so that a key given to chunkservers says
 * nothing of another epoch's. A master leads in an epoch of its own, a
 * fresh random one at each start and each promotion, so no token granted
 * before it led (whose write lease it does not know) is accepted by a
 * chunkserver that registered with it.
 */
#define SW_TOKEN_EPOCH_KEY 16 /* token.h's SW_TOKEN_KEY */

void sw_token_epoch_key(const uint8_t token_key[SW_AUTH_KEY], uint64_t epoch,
			uint8_t key[SW_TOKEN_EPOCH_KEY]);

/* @n bytes equal, in time independent of where they differ. */
bool sw_auth_equal(const void *a, const void *b, size_t n);

/* Fill @p with @n unpredictable bytes. */
void sw_auth_random(void *p, size_t n);

/*
 * Read a key file: SW_AUTH_KEY bytes written as hexadecimal, white space
 * around them ignored. 0, -errno from open/read, -EINVAL for contents that
 * are not such a key, -EPERM when others may read it (mode & 077).
 */
int sw_auth_key_load(const char *path, uint8_t key[SW_AUTH_KEY]);

/*
 * Make a new random key file at @path (mode 0600), atomically (a
 * temporary file, fsync, rename, fsync of the directory); an existing
 * file is kept and -EEXIST returned. The key is also put in @key.
 */
int sw_auth_key_create(const char *path, uint8_t key[SW_AUTH_KEY]);

/*
 * The password for a client: the contents of @file (first line) if
 * given, else $SWEEPFS_PASSWORD, else none. Returns 1 with @out filled,
 * 0 for none, -errno if @file cannot be read.
 */
int sw_auth_password(const char *file, char *out, size_t outlen);

#endif
