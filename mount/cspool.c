/*
 * The rule for completion callbacks: a callback runs on the receiver
 * thread of the connection its reply came on (or, failed, on the thread
 * that failed it), with no lock held, and must not send on that same
 * connection. The receiver is the only reader of its socket: a send
 * from it blocks once the chunkserver's receive buffer is full, while
 * the chunkserver blocks writing the replies nobody reads any more, and
 * the connection, with every call in flight on it, hangs for good (and a
 * callback run as the receiver ends would join its own thread to
 * reconnect). Nor on another connection: two receivers each sending to
 * the other's chunkserver from a callback wait on each other the same
 * way. So cspool_send() from any receiver fails that request at once
 * with -EDEADLK (logged) instead: no callback today sends at all, and one
 * that must hands the send to another thread. (The failure completes the
 * request on the caller's thread: a callback that retries on -EDEADLK
 * would recurse.)
 *
 * Locks: the pool's `mu` guards the list of connections. Each connection
 * has `wmu` for writes (taken first) and `mu` for its in-flight table and
 * state. A request holds a reference while its sender writes it, as in
 * master_conn.c, since the reply may complete it first.
 *
 * A connection's framing, ids and in-flight table are common/pclient.h's
 * (the mount's master connection uses the same core). Its receiver
 * thread lives as long as its socket; when the socket fails, or the
 * chunkserver sends a frame over the limit or a reply to no call, it
 * fails the table, marks the connection closed and exits.
 * The next send joins that thread and connects again.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "calls.h"
#include "client.h"
#include "cspool.h"
#include "devpoll.h"
#include "frame.h"
#include "fsio.h"
#include "log.h"
#include "net.h"
#include "pclient.h"

#define TAG "cspool"

struct csconn {
	char addr[128];
	pthread_mutex_t wmu; /* taken before mu */
	pthread_mutex_t mu;
	int fd;		      /* -1: closed */
	struct sw_pclient pc; /* in flight (mu); input (rx) */
	pthread_t rx;
	bool rx_joinable;
	struct csconn *next;
};

struct cspool {
	pthread_mutex_t mu;
	unsigned timeout_ms;
	struct csconn *conns;
};

/* The connection whose receiver this thread is (NULL: none). */
static _Thread_local struct csconn *rx_self;

static void *rx_main(void *arg)
{
	struct csconn *c = arg;
	int fd = c->fd, rc;

	rx_self = c;

	/* A reply that answers no call, or garbage, ends it (pclient.h):
	 * every call leaves the table only by its reply or by this end. */
	while ((rc = sw_pclient_read(&c->pc, fd, 256 << 10, -1)) == 0)
		;
	if (rc == -EPROTO || rc == -EMSGSIZE)
		sw_info(TAG, "%s: bad frame: %s", c->addr, strerror(-rc));
	/* Closed under wmu so that no writer is using the fd. */
	shutdown(fd, SHUT_RDWR);
	pthread_mutex_lock(&c->wmu);
	pthread_mutex_lock(&c->mu);
	c->fd = -1;
	pthread_mutex_unlock(&c->mu);
	close(fd);
	pthread_mutex_unlock(&c->wmu);
	sw_pclient_fail_all(&c->pc, -EIO);
	return NULL;
}

/* Connect and say hello; wmu held. Returns 0 or -errno. */
static int conn_open(struct cspool *p, struct csconn *c)
{
	Sweepfs__Hello hello = SWEEPFS__HELLO__INIT;
	struct sw_target t;
	ProtobufCMessage *reply;
	int fd, rc;

	if (c->rx_joinable) {
		pthread_join(c->rx, NULL);
		c->rx_joinable = false;
	}
	rc = sw_target_parse(c->addr, 0, &t);
	if (rc < 0)
		return rc;
	fd = sw_tcp_connect(t.host, t.port, 3000);
	if (fd < 0)
		return fd;
	/* A server whose network vanished sends no FIN or RST: without
	 * this, what is in flight would wait for TCP to give up. */
	sw_tcp_dead_peer_timeout(fd, p->timeout_ms);
	/* The hello goes through the connection's own core before its
	 * receiver runs, which takes over the input as it is. */
	hello.version =
		sw_proto_hello_version(SWEEPFS__ROLE__ROLE_MOUNT, false);
	hello.role = SWEEPFS__ROLE__ROLE_MOUNT;
	rc = sw_pclient_call(&c->pc, fd, SW_MSG_HELLO, &hello.base, 5000,
			     &reply);
	if (rc == 0) {
		rc = sw_reply_err(reply);
		protobuf_c_message_free_unpacked(reply, NULL);
	}
	if (rc < 0) {
		/* None but the hello's; the input goes. */
		sw_pclient_fail_all(&c->pc, -EIO);
		close(fd);
		return rc;
	}
	pthread_mutex_lock(&c->mu);
	c->fd = fd;
	pthread_mutex_unlock(&c->mu);
	rc = -pthread_create(&c->rx, NULL, rx_main, c);
	if (rc < 0) {
		pthread_mutex_lock(&c->mu);
		c->fd = -1;
		pthread_mutex_unlock(&c->mu);
		close(fd);
		return rc;
	}
	c->rx_joinable = true;
	return 0;
}

static struct csconn *conn_get(struct cspool *p, const char *addr)
{
	struct csconn *c;

	pthread_mutex_lock(&p->mu);
	for (c = p->conns; c; c = c->next)
		if (!strcmp(c->addr, addr))
			break;
	if (!c && strlen(addr) < sizeof(c->addr) &&
	    (c = calloc(1, sizeof(*c)))) {
		snprintf(c->addr, sizeof(c->addr), "%s", addr);
		pthread_mutex_init(&c->wmu, NULL);
		pthread_mutex_init(&c->mu, NULL);
		c->fd = -1;
		sw_pclient_init(&c->pc, SW_FRAME_MAX_DATA, &c->mu, NULL);
		c->next = p->conns;
		p->conns = c;
	}
	pthread_mutex_unlock(&p->mu);
	return c;
}

void cspool_send(struct cspool *p, const char *addr, uint16_t type,
		 const ProtobufCMessage *req, cs_cb cb, void *arg)
{
	struct csconn *c;
	struct sw_call *q;
	int rc = 0;

	/* A connect, or another sender's, may keep us a while. */
	devpoll_yield();
	c = conn_get(p, addr);
	if (!c) {
		ProtobufCMessage *none = NULL;

		if (cb)
			cb(arg, -ENOMEM, &none);
		return;
	}
	q = sw_call_new(type, req, cb, arg);
	if (!q)
		return;
	if (rx_self) {
		/* From a callback on a receiver (see the top): it would
		 * wait on itself, or on another receiver waiting on it. */
		sw_err(TAG,
		       "%s: a completion sends from a connection's "
		       "receiver; refused",
		       addr);
		sw_call_put(q); /* the table's, never taken */
		sw_call_complete(q, -EDEADLK, NULL);
		return;
	}
	pthread_mutex_lock(&c->wmu);
	if (c->fd < 0) /* only a writer (under wmu) opens it */
		rc = conn_open(p, c);
	if (rc == 0) {
		pthread_mutex_lock(&c->mu);
		rc = sw_pclient_assign(&c->pc, q);
		pthread_mutex_unlock(&c->mu);
		if (rc == 0 && sw_send_all(c->fd, q->frame, q->len) < 0)
			shutdown(c->fd, SHUT_RDWR); /* rx fails the rest */
	}
	pthread_mutex_unlock(&c->wmu);
	if (rc < 0) {
		sw_info(TAG, "%s: %s", addr, strerror(-rc));
		sw_call_put(q); /* the table's, never taken */
		sw_call_complete(q, rc == -EMSGSIZE ? rc : -EIO, NULL);
		return;
	}
	sw_call_put(q);
}

int cspool_new(unsigned peer_timeout_ms, struct cspool **out)
{
	struct cspool *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->mu, NULL);
	p->timeout_ms = peer_timeout_ms;
	*out = p;
	return 0;
}
void cspool_free(struct cspool *p)
{
	while (p->conns) {
		struct csconn *c = p->conns;

		p->conns = c->next;
		pthread_mutex_lock(&c->mu);
		if (c->fd >= 0)
			shutdown(c->fd, SHUT_RDWR);
		pthread_mutex_unlock(&c->mu);
		if (c->rx_joinable)
			pthread_join(c->rx, NULL);
		sw_pclient_fail_all(&c->pc, -EIO);
		sw_pclient_release(&c->pc);
		pthread_mutex_destroy(&c->wmu);
		pthread_mutex_destroy(&c->mu);
		free(c);
	}
	pthread_mutex_destroy(&p->mu);
	free(p);
}
