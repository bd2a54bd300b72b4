/*
 * Addresses and blocking client sockets (net.h): the HOST[:PORT][:/subdir]
 * form, and connecting with a time limit.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net.h"
#include "util.h"

static int parse_port(const char *s, size_t n, uint16_t *out)
{
	unsigned v = 0;

	if (n == 0 || n > 5)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -EINVAL;
	*out = (uint16_t)v;
	return 0;
}

int sw_target_parse(const char *s, uint16_t default_port, struct sw_target *out)
{
	const char *host = s, *rest;
	size_t hlen;

	out->port = default_port;
	strcpy(out->subdir, "/");
	if (*s == '[') {
		const char *close = strchr(s, ']');

		if (!close)
			return -EINVAL;
		host = s + 1;
		hlen = (size_t)(close - host);
		rest = close + 1;
	} else {
		rest = strchr(s, ':');
		if (!rest)
			rest = s + strlen(s);
		hlen = (size_t)(rest - s);
	}
	if (hlen == 0 || hlen >= sizeof(out->host))
		return -EINVAL;
	memcpy(out->host, host, hlen);
	out->host[hlen] = '\0';
	if (*rest == '\0')
		return 0;
	if (*rest != ':')
		return -EINVAL;
	rest++;
	if (*rest != '/') {
		const char *end = strchr(rest, ':');
		size_t n = end ? (size_t)(end - rest) : strlen(rest);

		if (parse_port(rest, n, &out->port) < 0)
			return -EINVAL;
		rest += n;
		if (*rest == '\0')
			return 0;
		rest++; /* the ':' before the subdir */
		if (*rest != '/')
			return -EINVAL;
	}
	if (strlen(rest) >= sizeof(out->subdir))
		return -EINVAL;
	strcpy(out->subdir, rest);
	return 0;
}

const char *sw_net_bind;

static int connect_one(const struct addrinfo *ai, int64_t deadline)
{
	int fd, rc, one = 1;
	struct pollfd pfd;
	socklen_t len = sizeof(rc);

	fd = socket(ai->ai_family,
		    ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    ai->ai_protocol);
	if (fd < 0)
		return -errno;
	if (sw_net_bind && *sw_net_bind) {
		struct sockaddr_storage ss = { .ss_family = ai->ai_family };
		void *a =
			ai->ai_family == AF_INET ?
				(void *)&((struct sockaddr_in *)&ss)->sin_addr :
				(void *)&((struct sockaddr_in6 *)&ss)->sin6_addr;

		if (inet_pton(ai->ai_family, sw_net_bind, a) != 1) {
			rc = -EADDRNOTAVAIL;
			goto out_close;
		}
		if (bind(fd, (struct sockaddr *)&ss,
			 ai->ai_family == AF_INET ?
				 sizeof(struct sockaddr_in) :
				 sizeof(struct sockaddr_in6)) < 0) {
			rc = -errno;
			goto out_close;
		}
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		if (errno != EINPROGRESS) {
			rc = -errno;
			goto out_close;
		}
		pfd = (struct pollfd){ .fd = fd, .events = POLLOUT };
		for (;;) {
			int64_t left = (deadline - sw_mono_ns()) / 1000000;

			if (left <= 0) {
				rc = -ETIMEDOUT;
				goto out_close;
			}
			rc = poll(&pfd, 1, (int)left);
			if (rc > 0)
				break;
			if (rc < 0 && errno != EINTR) {
				rc = -errno;
				goto out_close;
			}
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &rc, &len) < 0) {
			rc = -errno;
			goto out_close;
		}
		if (rc) {
			rc = -rc;
			goto out_close;
		}
	}
	if (fcntl(fd, F_SETFL, 0) < 0) {
		rc = -errno;
		goto out_close;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;

out_close:
	close(fd);
	return rc;
}

int sw_tcp_connect(const char *host, uint16_t port, int timeout_ms)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_ADDRCONFIG };
	struct addrinfo *res, *ai;
	int64_t deadline = sw_mono_ns() + (int64_t)timeout_ms * 1000000;
	char service[8];
	int rc, fd = -ECONNREFUSED;

	snprintf(service, sizeof(service), "%u", port);
	rc = getaddrinfo(host, service, &hints, &res);
	if (rc)
		return rc == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = connect_one(ai, deadline);
		if (fd >= 0 || fd == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	return fd;
}

int sw_tcp_dead_peer_timeout(int fd, unsigned timeout_ms)
{
	/* Idle for half the time, then 3 probes over the other half:
	 * whole seconds, at least 1 each (the kernel's unit). */
	int on = 1, cnt = 3;
	int idle = (int)SW_MAX(timeout_ms / 2000, 1u);
	int intvl = (int)SW_MAX(timeout_ms / 6000, 1u);
	unsigned user = timeout_ms;

	if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on)) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) <
		    0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) <
		    0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof(user)) <
		    0)
		return -errno;
	return 0;
}

void sw_sockaddr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char addr[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		inet_ntop(AF_INET, &in->sin_addr, addr, sizeof(addr));
		snprintf(buf, len, "%s:%u", addr, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr));
		snprintf(buf, len, "[%s]:%u", addr, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, len, "unknown");
	}
}
