/*
 * Addresses and plain blocking sockets for clients: parsing the
 * "HOST[:PORT][,HOST[:PORT]...][:/subdir]" form every sweepfs command
 * takes, choosing which master of a list to try next, and connecting with
 * a time limit. The daemons' listening side is libuv's.
 */
#ifndef SWEEPFS_COMMON_NET_H
#define SWEEPFS_COMMON_NET_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define SW_MASTER_PORT 9521
#define SW_CHUNKSERVER_PORT 9522

/*
 * A client's masters: up to this many (a group of 1, 3, 5 or 7), the
 * list given with commas ("m1:9521,m2:9521,m3:9521").
 */
#define SW_TARGET_MAX 7
/* Followers that name a leader who is a follower too, in a row, before a
 * client stops believing them: an election under way. */
#define SW_TARGET_REDIRECTS 3
/* A client of a group gives up on a connection to a master that stopped
 * answering (its machine or its network gone) after this long, rather
 * than a lone master's timeout: another member is there to take over
 * (sw_target_peer_timeout()). */
#define SW_GROUP_PEER_TIMEOUT_MS 2000
/* How long a client may go on skipping a silent member that followers
 * still name as leader (sw_target_failed()): its lease (group_lease),
 * etcd's election if the member's machine held etcd's leader too, and
 * the lease again, which etcd extends as it elects. */
#define SW_GROUP_SILENT_MAX_MS (3 * SW_GROUP_PEER_TIMEOUT_MS)
/* "HOST:PORT" or "[HOST]:PORT" with its NUL. */
#define SW_ADDR_STRLEN (255 + 2 + 1 + 5 + 1)
/* A line of sw_target_failed() with its NUL. */
#define SW_TARGET_WHYLEN (2 * SW_ADDR_STRLEN + 96)

struct sw_addr {
	char host[256]; /* name or address, without IPv6 brackets */
	uint16_t port;
};

struct sw_target {
	/* The address to try now: one of addrs[], or the leader a master
	 * named (sw_target_leader()), which may be outside the list. */
	char host[256];
	uint16_t port;
	struct sw_addr addrs[SW_TARGET_MAX]; /* the list, as given */
	unsigned naddrs;		     /* 0 only if filled by hand */
	unsigned cur;	    /* addrs[cur]: the list address tried last */
	unsigned failed;    /* tries failed in this round of the list */
	unsigned redirects; /* leaders followed in a row */
	char subdir[4096];  /* "/" when the string had none */
	bool has_key;	    /* a password for exports that ask (auth.h) */
	uint8_t key[32];    /* SW_AUTH_KEY */
	/* The address that stopped answering last (sw_target_silent()),
	 * not followed as a leader named until @silent_until (mono ns);
	 * silent since @silent_since. */
	struct sw_addr silent;
	int64_t silent_until;
	int64_t silent_since;
};

/*
 * Parse "HOST", "HOST:PORT", "HOST:/sub/dir", "HOST:PORT:/sub/dir" or the
 * same with "[v6addr]" as HOST; or a list of up to SW_TARGET_MAX such
 * addresses separated by commas, the "/sub/dir" after the last one only
 * ("m1:9521,m2,[::1]:9600:/sub"). A port left out is @default_port. The
 * first address becomes the current one. Returns 0 or -EINVAL (an empty
 * element, a bad port in any, too many).
 */
int sw_target_parse(const char *s, uint16_t default_port,
		    struct sw_target *out);

/* The dead-peer timeout (sw_tcp_dead_peer_timeout()) for a connection to
 * @t's masters: @dflt, or for a list at most SW_GROUP_PEER_TIMEOUT_MS. */
static inline unsigned sw_target_peer_timeout(const struct sw_target *t,
					      unsigned dflt)
{
	return t->naddrs > 1 && dflt > SW_GROUP_PEER_TIMEOUT_MS ?
		       SW_GROUP_PEER_TIMEOUT_MS :
		       dflt;
}

/* Make the next address of the list current; after the last, the first
 * (a list of one: that one again). */
void sw_target_next(struct sw_target *t);

/*
 * The current address stopped answering: a connection or a connect to it
 * timed out, its machine or its network gone. Make the next address of
 * the list current, and for SW_GROUP_PEER_TIMEOUT_MS do not follow a
 * follower that names the silent one as leader. Followers name the
 * leader they last knew until its lease runs out and the group elects
 * another; a client that believed them would wait out a second timeout
 * on it, instead of asking them again until they know the new one.
 * While they go on naming it, the window goes on too, up to
 * SW_GROUP_SILENT_MAX_MS after it went silent.
 */
void sw_target_silent(struct sw_target *t);

/* Whether a master of @t went silent a moment ago (sw_target_silent()):
 * while the group elects another, a client asks the others again soon
 * rather than after its usual pause. */
bool sw_target_electing(const struct sw_target *t);

/*
 * Make @leader ("HOST:PORT" or "[v6]:PORT", as a follower's
 * HelloReply.leader; without a port, the current one) the current
 * address, whether or not it is in the list: the group knows its members
 * better than our configuration. Returns 0, or -EINVAL (@t unchanged).
 */
int sw_target_leader(struct sw_target *t, const char *leader);

/*
 * A try on @t's current address failed with @rc (-EREMOTE: the master
 * is a follower, and @leader, NULL or "" when it did not say, is the
 * leader it named; -ETIMEDOUT: it is silent, as sw_target_silent() says;
 * 0: a cause the caller states itself). Move to the address to try next:
 * the leader named, unless SW_TARGET_REDIRECTS leaders in a row were
 * followers too or it went silent a moment ago; else the next in the
 * list (after a leader named, the one after the follower that named
 * it). Writes into @why (SW_TARGET_WHYLEN bytes) one line for the log,
 * from where to where and why, or "" when the address stays the same (a
 * list of one).
 *
 * Returns true when every address of the list has failed once since the
 * last success or the last true: the caller pauses before going on (with
 * a single address: at every failure but a redirect, as before lists).
 */
bool sw_target_failed(struct sw_target *t, int rc, const char *leader,
		      char *why, size_t whylen);

/* A try on the current address succeeded: the next failure starts a new
 * round. */
void sw_target_ok(struct sw_target *t);

/* Whether @a and @b name the same masters: some address in both lists
 * (a master belongs to one group). Not the subdirectories. */
bool sw_target_same(const struct sw_target *a, const struct sw_target *b);

/* Format @host:@port into @buf of @len bytes (SW_ADDR_STRLEN is enough),
 * with brackets around an IPv6 address. Returns @buf. */
char *sw_addr_str(const char *host, uint16_t port, char *buf, size_t len);

/* Format @t's list as "h1:p1,h2:p2" into @buf of @len bytes (truncated
 * if short). Returns @buf. */
char *sw_target_list_str(const struct sw_target *t, char *buf, size_t len);

/* The local address outgoing connections bind to (NULL: the kernel
 * chooses): a client machine with several addresses picks one. */
extern const char *sw_net_bind;

/*
 * Connect a TCP socket to @host:@port, trying each resolved address, within
 * @timeout_ms in all. Returns a blocking, close-on-exec descriptor with
 * TCP_NODELAY set, or -errno (-EHOSTUNREACH when the name does not resolve,
 * -ETIMEDOUT when time ran out).
 */
int sw_tcp_connect(const char *host, uint16_t port, int timeout_ms);

/*
 * Give up on a TCP peer that stopped answering after about @timeout_ms:
 * keepalive probes while the connection is idle (TCP_KEEPIDLE, _KEEPINTVL,
 * _KEEPCNT) and TCP_USER_TIMEOUT while sent data goes unacknowledged.
 * Without this a peer whose network vanished (a cable, a cut namespace: no
 * FIN, no RST) leaves the connection up for tcp_retries2 (~15 minutes) when
 * there is data in flight, and for ever when it is idle. A live peer's
 * kernel answers probes and acks data whatever its process does, so a slow
 * peer is not cut. Returns 0 or -errno.
 */
int sw_tcp_dead_peer_timeout(int fd, unsigned timeout_ms);

/* Format @sa as "addr:port" ("[v6]:port") into @buf of @len bytes. */
void sw_sockaddr_str(const struct sockaddr *sa, char *buf, size_t len);

#endif
