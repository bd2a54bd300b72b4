/*
 * Raw framed connections for the hostile test clients (hostile.c,
 * attack.c, trust.c, stall.c, caps.c): connect, send any frame, read
 * frames with a deadline, and fail the whole test at once with a message
 * when something is off; and the small helpers they all use. Blocking,
 * one thread.
 */
#ifndef SWEEPFS_TESTS_PEER_H
#define SWEEPFS_TESTS_PEER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "frame.h"

#define TIMEOUT_MS 20000
#define ROOT 1

/* Print "FAIL: ..." to stderr and exit 1. */
__attribute__((format(printf, 1, 2), noreturn)) void fail(const char *fmt, ...);
/* Print "ok - ..." to stdout. */
__attribute__((format(printf, 1, 2))) void ok(const char *fmt, ...);

/* xorshift64*, seeded by setting rng_state. */
extern uint64_t rng_state;
uint64_t rnd(void);

int64_t now_ms(void);

/* fail() unless process @pid still exists. */
void alive(pid_t pid, const char *who);

struct peer {
	int fd;
	struct sw_buf in;
	uint64_t next_id;
	uint16_t port;
	uint32_t max; /* payload limit of what we accept */
	/* Send requests as they are: no node handles added (peer_send()).
	 * For the checks of handles themselves. */
	bool raw;
};

/* The handle of @ino some reply to this process gave (peer_send() adds
 * those of the nodes a request names), or 0. */
uint64_t peer_handle(uint64_t ino);

/* Make this process believe @handle is @ino's (a forgery, for tests). */
void peer_handle_set(uint64_t ino, uint64_t handle);

/* Make @msg (of @type) carry, in @h, the handles this process knows of
 * the nodes it names, as peer_send() does; for frames packed by hand. */
void peer_vouch(uint16_t type, ProtobufCMessage *msg,
		uint64_t h[SW_HANDLES_MAX]);

/* @c: a hello's claim of @ino open with @flags by @cred, with the
 * handle this process knows. */
void peer_claim(Sweepfs__OpenClaim *c, uint64_t ino, uint32_t flags,
		Sweepfs__Cred *cred);

/* Bytes for a bytes field: @n at @p, or the string @s. */
ProtobufCBinaryData bin(const void *p, size_t n);
ProtobufCBinaryData str(const char *s);

/* fail() unless @err (a positive errno, 0: success) is 0 / @want. */
void must(int err, const char *what);
void expect(int err, int want, const char *what);

/* Resident set of @pid in KiB (fail() if it cannot be read). */
long rss_kb(pid_t pid);

void peer_connect(struct peer *p, uint16_t port);
void peer_close(struct peer *p);
int write_all(int fd, const void *buf, size_t n);
void peer_raw(struct peer *p, const void *buf, size_t n);
/* Send a frame; returns its id. */
uint64_t peer_send(struct peer *p, uint16_t type, uint16_t flags,
		   const ProtobufCMessage *msg);
/* The next frame within @timeout_ms: 1 (payload malloc'd), 0 closed,
 * -ETIMEDOUT. */
int peer_recv(struct peer *p, struct sw_frame_hdr *hdr, uint8_t **payload,
	      int timeout_ms);
/* The reply to request @id of @type (notifications skipped); its error,
 * as a positive errno, in *@err. */
ProtobufCMessage *peer_reply(struct peer *p, uint16_t type, uint64_t id,
			     int *err);
/* Send request @q of @type whose reply is an EntryReply: its error
 * (positive errno or 0), and the entry's inode into *@ino (if not NULL). */
int peer_entry(struct peer *p, uint16_t type, const ProtobufCMessage *q,
	       uint64_t *ino);
/* Send a request; its reply's error (positive errno or 0). */
int peer_call(struct peer *p, uint16_t type, const ProtobufCMessage *q);
/* Send a BATCH of the one operation @op; that operation's error
 * (positive errno or 0). The batch itself failing fails the check. */
int peer_batch_one(struct peer *p, Sweepfs__BatchOp *op);
/* Fill @op as a batch create of @name (@mode) in @parent numbered @ino,
 * as @cred. */
void peer_create_op(Sweepfs__BatchOp *op, Sweepfs__Cred *cred, uint64_t parent,
		    const char *name, uint32_t mode, uint64_t ino);
void peer_hello(struct peer *p, int role);
/* Connect and say hello as a mount. */
void peer_open(struct peer *p, uint16_t port);
/*
 * The master's port (-m) and process (-p), which every program here
 * takes, into *@port and *@pid, and one number each for the option
 * letters of @more ("nb": -n N -b N) into @vals (in that order; left as
 * they are when not given). 0, or -1 when the arguments are wrong or -m
 * or -p is missing (print the usage).
 */
int peer_args(int argc, char **argv, uint16_t *port, pid_t *pid,
	      const char *more, long *vals);

/* SO_RCVBUF of peer_connect()'s sockets, set before connecting (0: the
 * host's default, autotuned): a client that reads nothing then holds
 * little in its kernel, whatever the host's TCP buffers. */
extern int peer_rcvbuf;
/* Whether peer_session()'s hellos say the client takes one invalidation
 * of everything (Hello.inval_all); false unless set. */
extern bool peer_inval_all;
/* Connect to @port as a mount session on export @subdir whose kernel
 * keeps names for @cache_ms; returns the export's root inode, or fail(). */
uint64_t peer_session(struct peer *p, uint16_t port, const char *subdir,
		      uint32_t cache_ms);
void peer_ping(struct peer *p);
/* A child that pings the master as another session. */
struct peer_pinger {
	pid_t pid;
	int stop; /* closing it stops the child */
	int out;  /* where the child writes its slowest round trip */
};

/* Fork a child that, as a session on export @subdir of @port, pings the
 * master every 5 ms until peer_pinger_stop(); waits 100 ms for it to
 * start. fail() if it cannot be started. */
void peer_pinger_start(struct peer_pinger *pg, uint16_t port,
		       const char *subdir);
/* Stop it: its slowest round trip in ms. fail() if it failed. */
double peer_pinger_stop(struct peer_pinger *pg);
/* MKDIR @name (mode 0777) under @parent as @cred: the new inode, or fail(). */
uint64_t peer_mkdir(struct peer *p, Sweepfs__Cred *cred, uint64_t parent,
		    const char *name);
/* SETATTR of @ino's mode bits to @mode as @cred: 0 or the errno. */
int peer_chmod(struct peer *p, Sweepfs__Cred *cred, uint64_t ino,
	       uint32_t mode);
/* DELEG of directory @dir: whether granted (fail() on an error). */
bool peer_deleg(struct peer *p, uint64_t dir);
/* DELEG_RETURN of @dir, which must be accepted (or fail()). */
void peer_deleg_return(struct peer *p, uint64_t dir);
/* The connection must be closed within @timeout_ms with nothing sent. */
void expect_closed(struct peer *p, const char *what, int timeout_ms);

/* A POSIX lock of @type (SWEEPFS__LOCK_TYPE_*) on bytes @start to @end
 * of @ino for lock owner @owner of @p's session: 0 or the errno. */
int peer_lock(struct peer *p, uint64_t ino, uint64_t owner, int type,
	      uint64_t start, uint64_t end);

/* What a CHUNK reply grants: the first server's copy, and the token. */
struct chunk_grant {
	uint64_t chunk_id;
	uint32_t version;
	uint8_t token[16];
	size_t token_len;
	uint64_t expires;
	bool write_only; /* the master says the token does not read */
};

/* CHUNK for @ino's chunk 0 as @cred, for writing or reading: 0 and *@g,
 * or the errno of the refusal (fails the run if granted and empty). */
int peer_chunk(struct peer *p, Sweepfs__Cred *cred, uint64_t ino, bool write,
	       struct chunk_grant *g);
/* The CS_READ request of @size bytes at 0 of @g's chunk, into @q. */
void peer_cs_read_req(Sweepfs__CsReadReq *q, const struct chunk_grant *g,
		      uint32_t size);
/* CS_READ of up to @size bytes at 0 through @g, on chunkserver
 * connection @cs: 0 with *@got bytes into @out, or the errno. */
int peer_cs_read(struct peer *cs, const struct chunk_grant *g, void *out,
		 uint32_t size, size_t *got);
/* CS_WRITE of @len bytes at 0 through @g: 0 or the errno. */
int peer_cs_write(struct peer *cs, const struct chunk_grant *g,
		  const void *data, size_t len);

#endif
