/*
 * Addresses and plain blocking sockets for clients: parsing the
 * "HOST[:PORT][:/subdir]" form every sweepfs command takes, and connecting
 * with a time limit. The daemons' listening side is libuv's.
 */
#ifndef SWEEPFS_COMMON_NET_H
#define SWEEPFS_COMMON_NET_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define SW_MASTER_PORT 9521
#define SW_CHUNKSERVER_PORT 9522

struct sw_target {
	char host[256];	   /* name or address, without IPv6 brackets */
	uint16_t port;	   /* default port when the string had none */
	char subdir[4096]; /* "/" when the string had none */
	bool has_key;	   /* a password for exports that ask (auth.h) */
	uint8_t key[32];   /* SW_AUTH_KEY */
};

/*
 * Parse "HOST", "HOST:PORT", "HOST:/sub/dir", "HOST:PORT:/sub/dir" or the
 * same with "[v6addr]" as HOST. Returns 0 or -EINVAL.
 */
int sw_target_parse(const char *s, uint16_t default_port,
		    struct sw_target *out);

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
