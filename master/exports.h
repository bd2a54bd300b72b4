/*
 * Exports: which client addresses may mount which subtree, and how. The
 * file is MooseFS's mfsexports.cfg, trimmed to what sweepfs has:
 *
 *   # ADDRESS          DIRECTORY   OPTIONS
 *   127.0.0.1          /           rw,alldirs,admin,maproot=0
 *   10.1.0.0/16        /projects   rw,alldirs,maproot=nobody
 *   10.2.0.1-10.2.0.9  /scratch    rw,password=s3cret
 *   *                  /public     ro
 *
 * ADDRESS: "*", A.B.C.D, A.B.C.D/BITS, A.B.C.D/MASK or A.B.C.D-E.F.G.H
 * (IPv4; "*" also matches IPv6 peers). DIRECTORY: the subtree, which the
 * client's root becomes; with alldirs any directory below it may be asked
 * for too. OPTIONS, comma-separated:
 *   ro | readonly, rw | readwrite   (default ro)
 *   alldirs                         mount subdirectories of DIRECTORY
 *   admin                           administrative requests (below)
 *   maproot=USER[:GROUP]            root's requests run as USER (default
 *                                   nobody; maproot=0 keeps root root)
 *   mapall=USER[:GROUP]             everybody's requests run as USER
 *   password=PASS                   the client must prove it knows PASS
 *                                   (challenge-response, common/auth.h)
 * USER and GROUP are names or numbers. Lines are tried in order; the
 * first whose address and directory fit decides.
 *
 * "admin" lets root on that client act on other users' objects through
 * the sweepfs-specific requests: snapshot, rmsnapshot, the snapshot flag,
 * trash times, other users' trash, rmr of trees it could not otherwise
 * remove, fsck. Without it those requests follow ownership and POSIX
 * permissions only, whoever asks.
 *
 * Without an exports file every address may mount anything, read-write,
 * as admin, root unsquashed: a trusted single-host setup (the demo).
 */
#ifndef SWEEPFS_MASTER_EXPORTS_H
#define SWEEPFS_MASTER_EXPORTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "auth.h"

#define EXPORT_NO_MAP UINT32_MAX

/* Addresses a rule (or chunkserver_allow) admits. */
struct export_addr {
	bool any;	 /* "*" */
	uint32_t lo, hi; /* IPv4 range, host order, inclusive */
};

struct export_rule {
	struct export_addr addr;
	char path[4096]; /* "/" or "/a/b", normalized */
	bool alldirs;
	bool rw;
	bool admin;
	uint32_t maproot_uid, maproot_gid; /* EXPORT_NO_MAP: keep root */
	uint32_t mapall_uid, mapall_gid;   /* EXPORT_NO_MAP: no mapping */
	bool has_password;
	uint8_t key[SW_AUTH_KEY]; /* derived from the password */
	int line;		  /* in the file, for logs */
	char text[160];		  /* the line's options, for status */
};

struct exports {
	struct export_rule *rules;
	size_t n;
	bool open; /* no file: everything allowed */
};

/*
 * Parse @path into @out. A missing file (-ENOENT) is the caller's to
 * decide on; any other problem returns -EINVAL with the line and reason
 * in @err. @out is untouched on failure.
 */
int exports_load(const char *path, struct exports *out, char *err,
		 size_t errlen);

/* The open policy (no file). */
void exports_open(struct exports *out);

void exports_free(struct exports *ex);

/*
 * The rule for a client at @peer asking for subtree @subdir (normalized
 * or not), or NULL with *@why: -EACCES (no rule for this address) or
 * -EPERM (the address has rules, none for that subtree). With the open
 * policy, a static rule allowing everything.
 */
const struct export_rule *exports_match(const struct exports *ex,
					const struct sockaddr *peer,
					const char *subdir, int *why);

/*
 * Parse a list of addresses in the forms of ADDRESS above, separated by
 * commas or blanks ("127.0.0.1, 10.0.0.0/8"), into at most @cap entries
 * of @out; *@n says how many. 0, or -EINVAL (also for more than @cap).
 */
int exports_addrs_parse(const char *list, struct export_addr *out, size_t cap,
			size_t *n);

/* Whether @sa is one of the addresses @a stands for. */
bool exports_addr_fits(const struct export_addr *a, const struct sockaddr *sa);

/* Normalize @in ("a//b/", "/a/./b") into @out ("/a/b"); -EINVAL for
 * "..", -ENAMETOOLONG. */
int exports_norm_path(const char *in, char *out, size_t outlen);

#endif
