/*
 * A blocking connection to a sweepfs master for tools, tests and
 * benchmarks: connect, hello, then calls that send one request and wait for
 * its reply. Not thread-safe: one caller at a time per connection. (The
 * mount, which needs many requests in flight from many threads, has its own
 * connection in mount/master_conn.c; both frame and match through the
 * pipelined client core, pclient.h.)
 */
#ifndef SWEEPFS_COMMON_CLIENT_H
#define SWEEPFS_COMMON_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "buf.h"
#include "frame.h"
#include "net.h"
#include "pclient.h"

/* Node handles a blocking client remembers (sw_client_call()): a tool
 * names what it resolved a moment ago, a few paths of any depth. */
#define SW_CLIENT_HANDLES 256

/*
 * Handles of nodes replies gave the attributes of (sweepfs.proto, "Node
 * handles"), the last @cap of them (a ring, looked through: for tools and
 * tests, which name what they just looked up or made).
 */
struct sw_handle_slot {
	uint64_t ino, handle;
};

struct sw_handles {
	struct sw_handle_slot *v; /* @cap of them; NULL: none kept */
	unsigned cap, next;
};

/* Remember the handles of the attributes @reply carries (its fields of
 * type Attr, single or repeated). */
void sw_handles_remember(struct sw_handles *hs, const ProtobufCMessage *reply);

/* @ino's handle in @hs (void * for sw_msg_vouch()), or 0. */
uint64_t sw_handles_find(void *hs, uint64_t ino);

struct sw_client {
	int fd;
	struct sw_pclient pc; /* framing, ids, the call in flight */
	uint64_t session_id;  /* from the hello reply */
	uint64_t root_ino;    /* inode of the exported root */
	int timeout_ms;	      /* per call; 0 waits forever */
	uint32_t max_payload; /* largest reply taken; may be raised */
	bool broken;	      /* a call ended the connection: shut down */
	/* Unused: a client made by hand (master/catchup.c) still sets it;
	 * its pc is readied at its first call. To go once such clients are
	 * made with sw_client_attach(). */
	uint64_t next_id;
	char master[SW_ADDR_STRLEN]; /* "HOST:PORT" it is connected to */
	/* What answered the hello (SWEEPFS__ROLE__*; 0: a peer too old to
	 * say) and, from a master, the cluster's identity (HelloReply). */
	int peer_role;
	bool has_cluster_id;
	uint8_t cluster_id[SW_CLUSTER_ID_LEN];
	/* The handles of the last nodes its replies gave attributes of:
	 * what its requests naming them carry (sw_client_call()). */
	struct sw_handle_slot handles[SW_CLIENT_HANDLES];
	unsigned handles_next;
};

/*
 * Connect to the master named by @t, say hello as @role (SWEEPFS__ROLE__*)
 * for subtree @t->subdir, and return the connection in *@out. @timeout_ms
 * bounds the connect and every later call. With a list of masters, they
 * are tried as sw_target_walk() says, within @timeout_ms in all. Returns
 * 0, -errno from the connection, -EPROTO for a reply that makes no sense,
 * or the master's refusal as -errno (-EACCES, -ENOKEY, -EKEYREJECTED as
 * sw_hello_refusal() says, -EPROTONOSUPPORT, ...; -EREMOTE when no master
 * of the list leads).
 * On success the caller owns *@out and frees it with sw_client_close().
 */
int sw_client_open(const struct sw_target *t, int role, const char *name,
		   int timeout_ms, struct sw_client **out);

/*
 * Remember @password for @t: a master whose export asks for one gets the
 * answer to its challenge (common/auth.h). The key is derived here, once
 * (about 0.1 s). 0, or -errno from sw_auth_key().
 */
int sw_target_password(struct sw_target *t, const char *password);

/*
 * For a hello that came back refused with a challenge: fill @hello's auth
 * (into @tag) so that it can be sent again. Returns 0, or the refusal
 * (-EACCES) when there is no challenge or no password to answer it.
 */
int sw_hello_answer(const struct sw_target *t, const Sweepfs__HelloReply *hr,
		    Sweepfs__Hello *hello, uint8_t tag[32]);

/*
 * A hello refused with EACCES (@hr), the @tries-th time on this
 * connection: 0 with @hello answered as sw_hello_answer() does (send it
 * again); else the refusal as a client should say it: -EACCES (no exports
 * rule lets this client have that directory), -ENOKEY (the export wants a
 * password and none was given), -EKEYREJECTED (the password was wrong).
 */
int sw_hello_refusal(const struct sw_target *t, const Sweepfs__HelloReply *hr,
		     Sweepfs__Hello *hello, uint8_t tag[32], int tries);

/*
 * The leader a refusing follower named (HelloReply.leader) into @buf of
 * SW_ADDR_STRLEN bytes, NUL-terminated; "" when it named none, or
 * nothing that could be an address.
 */
void sw_hello_leader(const Sweepfs__HelloReply *hr, char *buf);

/*
 * One try on @t's current address for sw_target_walk(), connecting within
 * @connect_ms. Returns >= 0 on success, or -errno; sets *@refused when
 * the master answered the hello with a refusal, and for -EREMOTE fills
 * @leader (SW_ADDR_STRLEN bytes) as sw_hello_leader() does.
 */
typedef int (*sw_walk_fn)(void *arg, const struct sw_target *t, int connect_ms,
			  char *leader, bool *refused);

/*
 * Try @t's masters with @try until one accepts. After a failure the
 * next try goes to the leader a follower named, else to the next address
 * (sw_target_failed()); up to SW_WALK_ROUNDS rounds of the list, pausing
 * 100 ms, doubling up to 1 s, between rounds, within @timeout_ms (0: 30 s)
 * in all. A refusal other than -EREMOTE ends the walk at once: only
 * followers refuse with it, so any other comes from the leader. A single
 * address is tried once (and the leader it names, if any), connecting
 * within all of @timeout_ms, as before lists; in a list each connect gets
 * at most SW_WALK_CONNECT_MS, so that a dead machine cannot eat the time
 * of the others. @note (may be NULL) gets each switch's line for the log.
 * Returns what the successful @try returned, or the last failure; @t is
 * left at the address tried last.
 */
#define SW_WALK_ROUNDS 5
#define SW_WALK_CONNECT_MS 3000
int sw_target_walk(struct sw_target *t, int timeout_ms, sw_walk_fn try,
		   void *arg, void (*note)(void *arg, const char *why));

/* Close the connection and free @c (NULL is fine). */
void sw_client_close(struct sw_client *c);

/*
 * Send request @req of @type and wait for its reply, which is unpacked into
 * *@reply with the reply descriptor of @type. The caller frees *@reply with
 * protobuf_c_message_free_unpacked(*@reply, NULL). Notifications that
 * arrive meanwhile are dropped. Returns 0 (the reply's own err field is the
 * caller's to read, see sw_reply_err()), or -errno for a transport failure
 * or a reply that makes no sense (-EPROTO), after which the connection is
 * unusable (sw_pclient_call()): it is shut down at once, so the master
 * sees it go, and every later call on it fails with -ENOTCONN without
 * reading. Above all after a timeout: the reply that was late may still
 * come, and the bytes of it read already were dropped, so what follows
 * on that stream can no longer be framed (it is not read as a stray or a
 * later call's reply). A caller that wants to go on opens a new
 * connection (sw_client_open(); with a list of masters the next member
 * is tried, which is what a timeout usually calls for).
 *
 * A request that names nodes goes with their handles (sweepfs.proto,
 * "Node handles"), those of the last SW_CLIENT_HANDLES nodes replies on
 * @c gave the attributes of: a tool looks a path up and then names what
 * it found. @req's field `handles` is set for the call and put back
 * (@req must be writable memory, as every caller's is); a request that
 * carries handles already is sent as it is.
 */
int sw_client_call(struct sw_client *c, uint16_t type,
		   const ProtobufCMessage *req, ProtobufCMessage **reply);

/*
 * sw_client_call() in halves (sw_pclient_send(), sw_pclient_wait()), for
 * several calls in flight at once on @c: each waited for within
 * @c->timeout_ms of the wait's start. A request so sent carries no node
 * handles: one that names nodes goes through sw_client_call(). A failure
 * of either leaves @c as a failed call does (every call in flight
 * failed, the connection shut down, later calls -ENOTCONN); a waiter
 * failed so is done, and sw_client_wait() returns its error at once.
 */
int sw_client_send(struct sw_client *c, uint16_t type,
		   const ProtobufCMessage *req, struct sw_pclient_waiter *w);
int sw_client_wait(struct sw_client *c, struct sw_pclient_waiter *w);

/*
 * A client on connected socket @fd, for calls (sw_client_call()) before
 * its owner takes the socket over: @c's fields are set, nothing is
 * allocated. Release with sw_pclient_release(&c->pc); @fd stays open.
 */
void sw_client_attach(struct sw_client *c, int fd, uint32_t max_payload,
		      int timeout_ms);

/*
 * The err field (field 1) of any reply message, as a negative errno, or 0.
 */
int sw_reply_err(const ProtobufCMessage *reply);

#endif
