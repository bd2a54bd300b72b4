/*
 * Locks: the pool's `mu` guards the list of connections. Each connection
 * has `wmu` for writes (taken first) and `mu` for its in-flight table and
 * state. A request holds a reference while its sender writes it, as in
 * master_conn.c, since the reply may complete it first.
 *
 * A connection's receiver thread lives as long as its socket; when the
 * socket fails it fails the table, marks the connection closed and exits.
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
#include "client.h"
#include "cspool.h"
#include "frame.h"
#include "frameio.h"
#include "log.h"
#include "net.h"

#define TAG "cspool"
#define SLOTS 256u

struct csreq {
	uint64_t id;
	uint16_t type;
	int refs;
	cs_cb cb;
	void *arg;
	struct csreq *next;
	size_t len;
	uint8_t frame[];
};

struct csconn {
	char addr[128];
	pthread_mutex_t wmu; /* taken before mu */
	pthread_mutex_t mu;
	int fd; /* -1: closed */
	uint64_t next_id;
	struct csreq *table[SLOTS];
	pthread_t rx;
	bool rx_joinable;
	struct csconn *next;
};

struct cspool {
	pthread_mutex_t mu;
	struct csconn *conns;
};

static void req_put(struct csreq *q)
{
	if (__atomic_sub_fetch(&q->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(q);
}

static void req_complete(struct csreq *q, int rc, ProtobufCMessage *reply)
{
	if (q->cb)
		q->cb(q->arg, rc, &reply);
	if (reply)
		protobuf_c_message_free_unpacked(reply, NULL);
	req_put(q);
}

static struct csreq *take(struct csconn *c, uint64_t id)
{
	for (struct csreq **pp = &c->table[id % SLOTS]; *pp;
	     pp = &(*pp)->next) {
		struct csreq *q = *pp;

		if (q->id == id) {
			*pp = q->next;
			return q;
		}
	}
	return NULL;
}

/* Fail everything in flight on @c (its socket is gone). */
static void fail_all(struct csconn *c)
{
	struct csreq *list = NULL;

	pthread_mutex_lock(&c->mu);
	for (unsigned i = 0; i < SLOTS; i++) {
		while (c->table[i]) {
			struct csreq *q = c->table[i];

			c->table[i] = q->next;
			q->next = list;
			list = q;
		}
	}
	pthread_mutex_unlock(&c->mu);
	while (list) {
		struct csreq *q = list;

		list = q->next;
		req_complete(q, -EIO, NULL);
	}
}

/* A reply came: complete the request it answers, if it still waits. */
static void deliver(struct csconn *c, const struct sw_frame_hdr *hdr,
		    const uint8_t *payload)
{
	const struct sw_msg_info *info = sw_msg_info(hdr->type);
	ProtobufCMessage *reply = NULL;
	struct csreq *q;

	pthread_mutex_lock(&c->mu);
	q = take(c, hdr->id);
	pthread_mutex_unlock(&c->mu);
	if (!q)
		return;
	if (info && q->type == hdr->type)
		reply = protobuf_c_message_unpack(info->reply, NULL, hdr->len,
						  payload);
	req_complete(q, reply ? sw_reply_err(reply) : -EIO, reply);
}

static void *rx_main(void *arg)
{
	struct csconn *c = arg;
	struct sw_buf in = SW_BUF_INIT;
	int fd = c->fd, rc = 0;

	while (rc == 0) {
		struct sw_frame_hdr hdr;

		rc = sw_frame_whole(sw_buf_head(&in), sw_buf_used(&in),
				    SW_FRAME_MAX_DATA, &hdr);
		if (rc == 0) {
			rc = sw_frame_fill(fd, &in, 256 << 10, -1);
			continue;
		}
		if (rc < 0)
			break;
		deliver(c, &hdr, sw_buf_head(&in) + SW_FRAME_HDR);
		sw_buf_consume(&in, SW_FRAME_HDR + hdr.len);
		rc = 0;
	}
	sw_buf_release(&in);
	/* Closed under wmu so that no writer is using the fd. */
	shutdown(fd, SHUT_RDWR);
	pthread_mutex_lock(&c->wmu);
	pthread_mutex_lock(&c->mu);
	c->fd = -1;
	pthread_mutex_unlock(&c->mu);
	close(fd);
	pthread_mutex_unlock(&c->wmu);
	fail_all(c);
	return NULL;
}

/* Connect and say hello; wmu held. Returns 0 or -errno. */
static int conn_open(struct csconn *c)
{
	Sweepfs__Hello hello = SWEEPFS__HELLO__INIT;
	struct sw_target t;
	struct sw_client cl = { 0 };
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
	/* The hello goes through the blocking client on the same socket. */
	cl.fd = fd;
	cl.next_id = 1;
	cl.timeout_ms = 5000;
	cl.max_payload = SW_FRAME_MAX_DATA;
	hello.version = SW_PROTO_VERSION;
	hello.role = SWEEPFS__ROLE__ROLE_MOUNT;
	rc = sw_client_call(&cl, SW_MSG_HELLO, &hello.base, &reply);
	if (rc == 0) {
		rc = sw_reply_err(reply);
		protobuf_c_message_free_unpacked(reply, NULL);
	}
	if (rc == 0 && sw_buf_used(&cl.in))
		rc = -EPROTO; /* nothing may follow the hello reply */
	sw_buf_release(&cl.in);
	if (rc < 0) {
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
		c->next_id = 1;
		c->next = p->conns;
		p->conns = c;
	}
	pthread_mutex_unlock(&p->mu);
	return c;
}

void cspool_send(struct cspool *p, const char *addr, uint16_t type,
		 const ProtobufCMessage *req, cs_cb cb, void *arg)
{
	struct csconn *c = conn_get(p, addr);
	size_t size = sw_frame_size(req);
	struct csreq *q = c ? malloc(sizeof(*q) + size) : NULL;
	struct sw_frame_hdr hdr;
	int rc = 0, fd;

	if (!q) {
		ProtobufCMessage *none = NULL;

		if (cb)
			cb(arg, -ENOMEM, &none);
		return;
	}
	q->type = type;
	q->refs = 2;
	q->cb = cb;
	q->arg = arg;
	q->len = sw_frame_pack(q->frame, type, 0, 0, req);

	pthread_mutex_lock(&c->wmu);
	pthread_mutex_lock(&c->mu);
	fd = c->fd;
	pthread_mutex_unlock(&c->mu);
	if (fd < 0) {
		rc = conn_open(c);
		fd = c->fd;
	}
	if (rc == 0) {
		pthread_mutex_lock(&c->mu);
		q->id = c->next_id++;
		q->next = c->table[q->id % SLOTS];
		c->table[q->id % SLOTS] = q;
		pthread_mutex_unlock(&c->mu);
		sw_frame_get_hdr(q->frame, SW_FRAME_HDR, UINT32_MAX, &hdr);
		hdr.id = q->id;
		sw_frame_put_hdr(q->frame, &hdr);
		for (size_t off = 0; off < q->len;) {
			ssize_t w = send(fd, q->frame + off, q->len - off,
					 MSG_NOSIGNAL);

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				shutdown(fd, SHUT_RDWR); /* rx fails the rest */
				break;
			}
			off += (size_t)w;
		}
	}
	pthread_mutex_unlock(&c->wmu);
	if (rc < 0) {
		sw_info(TAG, "%s: %s", addr, strerror(-rc));
		q->refs = 1;
		req_complete(q, -EIO, NULL);
		return;
	}
	req_put(q);
}

int cspool_new(struct cspool **out)
{
	struct cspool *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->mu, NULL);
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
		fail_all(c);
		pthread_mutex_destroy(&c->wmu);
		pthread_mutex_destroy(&c->mu);
		free(c);
	}
	pthread_mutex_destroy(&p->mu);
	free(p);
}
