/*
 * leaseflood -m PORT -s SECONDS
 *
 * Review finding L1: a peer that floods a master with requests while the
 * master's etcd lease is in doubt (it answers nothing then) must not make
 * it buffer what it sends. This is the peer; lease_flood.py freezes etcd
 * around it and watches the master.
 *
 * Connects to the master on 127.0.0.1:PORT, says hello as a tool, prints
 * "ready", then for SECONDS sends PING frames as fast as the master takes
 * them (never blocking) and reads and drops whatever comes back, so that
 * its own replies never stop the master reading it. Then prints
 * "sent=BYTES recv=BYTES", and checks that the master serves: a new
 * connection's hello and ping are answered ("answered"). Exit 0, or 1
 * with "FAIL: ..." on stderr.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frame.h"
#include "peer.h"
#include "util.h"

#define BATCH (64u << 10)

int main(int argc, char **argv)
{
	static uint8_t batch[BATCH], sink[BATCH];
	Sweepfs__PingReq q = SWEEPFS__PING_REQ__INIT;
	size_t len, n = 0, off = 0, sent = 0, recvd = 0;
	long seconds = 10;
	uint16_t port = 0;
	struct peer p, other;
	int64_t end;
	int opt;

	while ((opt = getopt(argc, argv, "m:s:")) != -1) {
		switch (opt) {
		case 'm':
			port = (uint16_t)atoi(optarg);
			break;
		case 's':
			seconds = atol(optarg);
			break;
		default:
			return 2;
		}
	}
	if (!port || seconds <= 0 || seconds > 120) {
		fprintf(stderr, "usage: see the top of leaseflood.c\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	rng_state = 1;
	peer_connect(&p, port);
	peer_hello(&p, SWEEPFS__ROLE__ROLE_TOOL);
	q.has_token = 1;
	q.token = 7;
	len = sw_frame_size(&q.base);
	for (uint64_t id = 1000; n + len <= BATCH; id++)
		n += sw_frame_pack(batch + n, SW_MSG_PING, 0, id, &q.base);
	printf("ready\n");
	fflush(stdout);
	end = now_ms() + seconds * 1000;
	while (now_ms() < end) {
		struct pollfd pf = { .fd = p.fd, .events = POLLIN | POLLOUT };
		ssize_t r;

		if (poll(&pf, 1, 10) < 0 && errno != EINTR)
			fail("poll: %s", strerror(errno));
		while ((r = recv(p.fd, sink, sizeof(sink), MSG_DONTWAIT)) > 0)
			recvd += (size_t)r;
		if (r == 0)
			fail("the master closed the flooding connection");
		r = send(p.fd, batch + off, n - off,
			 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
		    errno != EINTR)
			fail("send: %s", strerror(errno));
		if (r > 0) {
			sent += (size_t)r;
			off = (off + (size_t)r) % n;
		}
	}
	printf("sent=%zu recv=%zu\n", sent, recvd);
	fflush(stdout);
	peer_connect(&other, port);
	peer_hello(&other, SWEEPFS__ROLE__ROLE_TOOL);
	peer_ping(&other);
	peer_close(&other);
	close(p.fd);
	sw_buf_release(&p.in);
	printf("answered\n");
	return 0;
}
