/*
 * Addresses and blocking client sockets (net.h): the HOST[:PORT][:/subdir]
 * form and its lists, and connecting with a time limit.
 *
 * A list of masters is walked in rounds: each failure moves to the
 * leader the refusing master named, or else to the next address; a round
 * ends when as many tries failed as the list is long, and the caller
 * pauses between rounds. Redirects do not count towards a round (the
 * leader they name is where the work is), but only SW_TARGET_REDIRECTS in
 * a row are followed, so that two members with stale ideas of the leader
 * cannot bounce a client between them for ever. A single address thus
 * behaves as before lists: every failure ends a round.
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

/*
 * One "HOST[:PORT]" at @s, which ends at a ',', at a ":/" (the subdir)
 * or at the end of the string: *@end points there.
 */
static int parse_addr(const char *s, uint16_t default_port, struct sw_addr *a,
		      const char **end)
{
	const char *host = s, *rest;
	size_t hlen;

	a->port = default_port;
	if (*s == '[') {
		const char *close = strchr(s, ']');

		if (!close)
			return -EINVAL;
		host = s + 1;
		hlen = (size_t)(close - host);
		rest = close + 1;
	} else {
		hlen = strcspn(s, ":,");
		rest = s + hlen;
	}
	if (hlen == 0 || hlen >= sizeof(a->host))
		return -EINVAL;
	memcpy(a->host, host, hlen);
	a->host[hlen] = '\0';
	if (rest[0] == ':' && rest[1] != '/') {
		size_t n = strcspn(rest + 1, ":,");

		if (parse_port(rest + 1, n, &a->port) < 0)
			return -EINVAL;
		rest += 1 + n;
	}
	*end = rest;
	return 0;
}

static void set_current(struct sw_target *t, const struct sw_addr *a)
{
	memcpy(t->host, a->host, sizeof(t->host));
	t->port = a->port;
}

int sw_target_parse(const char *s, uint16_t default_port, struct sw_target *out)
{
	const char *rest;
	int rc;

	out->naddrs = 0;
	out->cur = 0;
	out->failed = 0;
	out->redirects = 0;
	out->silent_until = 0;
	strcpy(out->subdir, "/");
	for (;;) {
		if (out->naddrs == SW_TARGET_MAX)
			return -EINVAL;
		rc = parse_addr(s, default_port, &out->addrs[out->naddrs],
				&rest);
		if (rc < 0)
			return rc;
		out->naddrs++;
		if (*rest != ',')
			break;
		s = rest + 1;
	}
	set_current(out, &out->addrs[0]);
	if (*rest == '\0')
		return 0;
	if (rest[0] != ':' || rest[1] != '/')
		return -EINVAL;
	rest++;
	if (strlen(rest) >= sizeof(out->subdir))
		return -EINVAL;
	strcpy(out->subdir, rest);
	return 0;
}

void sw_target_next(struct sw_target *t)
{
	if (t->naddrs == 0)
		return; /* filled by hand: host and port are all there is */
	t->cur = (t->cur + 1) % t->naddrs;
	set_current(t, &t->addrs[t->cur]);
}

bool sw_target_electing(const struct sw_target *t)
{
	return t->silent_until && sw_mono_ns() < t->silent_until;
}

/* Whether @a went silent a moment ago. */
static bool is_silent(const struct sw_target *t, const struct sw_addr *a)
{
	return sw_target_electing(t) && a->port == t->silent.port &&
	       !strcmp(a->host, t->silent.host);
}

static void mark_silent(struct sw_target *t)
{
	struct sw_addr cur;
	int64_t now = sw_mono_ns();

	memcpy(cur.host, t->host, sizeof(cur.host));
	cur.port = t->port;
	if (!is_silent(t, &cur))
		t->silent_since = now;
	t->silent = cur;
	t->silent_until = now + (int64_t)SW_GROUP_PEER_TIMEOUT_MS * 1000000;
}

/* A follower named the silent one again: skip it a while longer, but not
 * for ever (it may be back, and lead still). */
static void still_silent(struct sw_target *t)
{
	int64_t now = sw_mono_ns();

	t->silent_until = SW_MIN(
		now + (int64_t)SW_GROUP_PEER_TIMEOUT_MS * 1000000,
		t->silent_since + (int64_t)SW_GROUP_SILENT_MAX_MS * 1000000);
}

/*
 * The next address of the list, but not @from ("host:port", the one that
 * just failed) again when there are others (after a chain of redirects
 * the list may point back at it), nor the one that went silent: the
 * others are asked until they know who leads now.
 */
static void next_other(struct sw_target *t, const char *from)
{
	char at[SW_ADDR_STRLEN];

	sw_target_next(t);
	for (unsigned i = 1; i < t->naddrs; i++) {
		if (strcmp(sw_addr_str(t->host, t->port, at, sizeof(at)),
			   from) &&
		    !is_silent(t, &t->addrs[t->cur]))
			break;
		sw_target_next(t);
	}
}

void sw_target_silent(struct sw_target *t)
{
	char from[SW_ADDR_STRLEN];

	sw_addr_str(t->host, t->port, from, sizeof(from));
	mark_silent(t);
	next_other(t, from);
}

/* Whether @leader, as a follower named it, went silent a moment ago. */
static bool named_silent(const struct sw_target *t, const char *leader)
{
	struct sw_addr a;
	const char *end;

	return parse_addr(leader, t->port, &a, &end) == 0 && !*end &&
	       is_silent(t, &a);
}

int sw_target_leader(struct sw_target *t, const char *leader)
{
	struct sw_addr a;
	const char *end;

	if (!leader || parse_addr(leader, t->port, &a, &end) < 0 || *end)
		return -EINVAL;
	for (unsigned i = 0; i < t->naddrs; i++) {
		if (!strcmp(t->addrs[i].host, a.host) &&
		    t->addrs[i].port == a.port) {
			t->cur = i;
			break;
		}
	}
	set_current(t, &a);
	return 0;
}

bool sw_target_failed(struct sw_target *t, int rc, const char *leader,
		      char *why, size_t whylen)
{
	char from[SW_ADDR_STRLEN], to[SW_ADDR_STRLEN];
	bool named = rc == -EREMOTE && leader && *leader;
	bool gone = named && named_silent(t, leader);
	unsigned cur = t->cur;
	bool round = false;

	sw_addr_str(t->host, t->port, from, sizeof(from));
	if (rc == -ETIMEDOUT)
		mark_silent(t);
	if (gone)
		still_silent(t);
	if (named && !gone && t->redirects < SW_TARGET_REDIRECTS &&
	    sw_target_leader(t, leader) == 0 &&
	    strcmp(sw_addr_str(t->host, t->port, to, sizeof(to)), from)) {
		/*
		 * If the leader named fails too, the list goes on after the
		 * follower that named it, not after the leader's own place:
		 * during an election followers name the dead leader, and the
		 * members after them may be the ones that lead next.
		 */
		t->cur = cur;
		t->redirects++;
		snprintf(why, whylen, "master %s is a follower; leader is %s",
			 from, to);
		return false;
	}
	t->redirects = 0;
	next_other(t, from);
	if (++t->failed >= SW_MAX(t->naddrs, 1u)) {
		t->failed = 0;
		round = true;
	}
	sw_addr_str(t->host, t->port, to, sizeof(to));
	if (!strcmp(to, from))
		*why = '\0';
	else if (gone)
		snprintf(why, whylen,
			 "master %s is a follower and names %s as leader, "
			 "which stopped answering; trying %s",
			 from, leader, to);
	else if (rc == -EREMOTE)
		snprintf(why, whylen,
			 "master %s is a follower and names %s as leader; "
			 "trying %s",
			 from, named ? leader : "no one", to);
	else if (rc < 0)
		snprintf(why, whylen, "master %s: %s; trying %s", from,
			 strerror(-rc), to);
	else
		snprintf(why, whylen, "leaving master %s; trying %s", from, to);
	return round;
}

void sw_target_ok(struct sw_target *t)
{
	t->failed = 0;
	t->redirects = 0;
	t->silent_until = 0;
}

bool sw_target_same(const struct sw_target *a, const struct sw_target *b)
{
	/* A target filled by hand is its host and port. */
	struct sw_addr one_a, one_b;
	const struct sw_addr *la = a->addrs, *lb = b->addrs;
	unsigned na = a->naddrs, nb = b->naddrs;

	if (!na) {
		memcpy(one_a.host, a->host, sizeof(one_a.host));
		one_a.port = a->port;
		la = &one_a;
		na = 1;
	}
	if (!nb) {
		memcpy(one_b.host, b->host, sizeof(one_b.host));
		one_b.port = b->port;
		lb = &one_b;
		nb = 1;
	}
	for (unsigned i = 0; i < na; i++)
		for (unsigned j = 0; j < nb; j++)
			if (la[i].port == lb[j].port &&
			    !strcmp(la[i].host, lb[j].host))
				return true;
	return false;
}

char *sw_addr_str(const char *host, uint16_t port, char *buf, size_t len)
{
	snprintf(buf, len, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
	return buf;
}

char *sw_target_list_str(const struct sw_target *t, char *buf, size_t len)
{
	size_t used = 0;

	if (!t->naddrs)
		return sw_addr_str(t->host, t->port, buf, len);
	*buf = '\0';
	for (unsigned i = 0; i < t->naddrs && used < len; i++) {
		char one[SW_ADDR_STRLEN];

		sw_addr_str(t->addrs[i].host, t->addrs[i].port, one,
			    sizeof(one));
		used += (size_t)snprintf(buf + used, len - used, "%s%s",
					 i ? "," : "", one);
	}
	return buf;
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
