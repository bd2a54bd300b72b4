/*
 * auth.h on libsodium. The password key's salt is fixed (a client and the
 * master must derive the same key from the password alone); Argon2id's
 * cost is what protects a recorded exchange, not the salt. Key files are
 * hex so that an operator can copy one by hand.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "auth.h"
#include "token.h"
#include "fsio.h"

static const unsigned char pw_salt[crypto_pwhash_SALTBYTES] =
	"sweepfs-export-1";

int sw_auth_init(void)
{
	return sodium_init() < 0 ? -EIO : 0;
}

int sw_auth_key(const char *password, uint8_t key[SW_AUTH_KEY])
{
	if (sw_auth_init() < 0)
		return -EIO;
	if (crypto_pwhash(key, SW_AUTH_KEY, password, strlen(password), pw_salt,
			  crypto_pwhash_OPSLIMIT_INTERACTIVE,
			  crypto_pwhash_MEMLIMIT_INTERACTIVE,
			  crypto_pwhash_ALG_ARGON2ID13) < 0)
		return -ENOMEM; /* its only failure: memory */
	return 0;
}

void sw_auth_tag(const uint8_t key[SW_AUTH_KEY], enum sw_auth_use use,
		 const void *a, size_t alen, const void *b, size_t blen,
		 uint8_t tag[SW_AUTH_TAG])
{
	crypto_auth_hmacsha512256_state st;
	uint8_t u = (uint8_t)use;

	crypto_auth_hmacsha512256_init(&st, key, SW_AUTH_KEY);
	crypto_auth_hmacsha512256_update(&st, &u, 1);
	crypto_auth_hmacsha512256_update(&st, a, alen);
	if (blen)
		crypto_auth_hmacsha512256_update(&st, b, blen);
	crypto_auth_hmacsha512256_final(&st, tag);
	sodium_memzero(&st, sizeof(st));
}

void sw_auth_response(const uint8_t key[SW_AUTH_KEY],
		      const uint8_t nonce[SW_AUTH_NONCE], const char *subdir,
		      uint8_t tag[SW_AUTH_TAG])
{
	sw_auth_tag(key, SW_AUTH_EXPORT, nonce, SW_AUTH_NONCE, subdir,
		    strlen(subdir), tag);
}

bool sw_auth_equal(const void *a, const void *b, size_t n)
{
	return sodium_memcmp(a, b, n) == 0;
}

void sw_handle_key(const uint8_t session_key[SW_AUTH_KEY],
		   uint8_t key[SW_HANDLE_KEY])
{
	static const char what[] = "node handles";
	uint8_t tag[SW_AUTH_TAG];

	_Static_assert(SW_HANDLE_KEY == crypto_shorthash_KEYBYTES,
		       "a handle key is a crypto_shorthash key");
	sw_auth_tag(session_key, SW_AUTH_HANDLE, what, sizeof(what) - 1, NULL,
		    0, tag);
	memcpy(key, tag, SW_HANDLE_KEY);
	sodium_memzero(tag, sizeof(tag));
}

void sw_token_epoch_key(const uint8_t token_key[SW_AUTH_KEY], uint64_t epoch,
			uint8_t key[SW_TOKEN_EPOCH_KEY])
{
	static const char what[] = "chunk tokens";
	uint8_t in[8], tag[SW_AUTH_TAG];

	_Static_assert(SW_TOKEN_EPOCH_KEY == SW_TOKEN_KEY,
		       "an epoch's key is a token key");

	for (int i = 0; i < 8; i++)
		in[i] = (uint8_t)(epoch >> (8 * i));
	sw_auth_tag(token_key, SW_AUTH_TOKEN, what, sizeof(what) - 1, in,
		    sizeof(in), tag);
	memcpy(key, tag, SW_TOKEN_EPOCH_KEY);
	sodium_memzero(tag, sizeof(tag));
}

uint64_t sw_node_handle(const uint8_t key[SW_HANDLE_KEY], uint64_t ino)
{
	uint8_t in[8], out[crypto_shorthash_BYTES];
	uint64_t h = 0;

	for (int i = 0; i < 8; i++)
		in[i] = (uint8_t)(ino >> (8 * i));
	crypto_shorthash(out, in, sizeof(in), key);
	for (int i = 0; i < 8; i++)
		h |= (uint64_t)out[i] << (8 * i);
	/* 0 means "none" on the wire and in the mount's tables. */
	return h ? h : 1;
}

void sw_auth_random(void *p, size_t n)
{
	/* Without sodium_init() randombytes_buf() still works (it opens
	 * its source lazily); init first all the same. */
	(void)sw_auth_init();
	randombytes_buf(p, n);
}

int sw_auth_key_load(const char *path, uint8_t key[SW_AUTH_KEY])
{
	char text[4 * SW_AUTH_KEY + 2];
	const char *end;
	size_t got = 0;
	struct stat st;
	ssize_t n;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	if (st.st_mode & 077) {
		rc = -EPERM;
		goto out;
	}
	n = read(fd, text, sizeof(text) - 1);
	if (n < 0) {
		rc = -errno;
		goto out;
	}
	text[n] = '\0';
	if (sodium_hex2bin(key, SW_AUTH_KEY, text, (size_t)n, " \t\r\n", &got,
			   &end) < 0 ||
	    got != SW_AUTH_KEY || end[strspn(end, " \t\r\n")] != '\0')
		rc = -EINVAL;
out:
	close(fd);
	return rc;
}

int sw_auth_key_create(const char *path, uint8_t key[SW_AUTH_KEY])
{
	char hex[2 * SW_AUTH_KEY + 2], tmp[PATH_MAX], dir[PATH_MAX];
	char *slash;
	int fd, rc;

	if (access(path, F_OK) == 0)
		return -EEXIST;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp) ||
	    snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return -ENAMETOOLONG;
	slash = strrchr(dir, '/');
	if (slash == dir)
		dir[1] = '\0';
	else if (slash)
		*slash = '\0';
	else
		strcpy(dir, ".");
	sw_auth_random(key, SW_AUTH_KEY);
	sodium_bin2hex(hex, sizeof(hex), key, SW_AUTH_KEY);
	strcat(hex, "\n");
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = sw_write_all(fd, hex, strlen(hex));
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	/* link() does not replace: a key another process made meanwhile
	 * wins, and both end up using it. */
	if (rc == 0 && link(tmp, path) < 0)
		rc = -errno;
	unlink(tmp);
	if (rc == 0)
		rc = sw_fsync_dir(dir);
	sodium_memzero(hex, sizeof(hex));
	return rc;
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
