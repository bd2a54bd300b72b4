/*
 * Locks: `mu` guards the pending calls and the connection state; `wmu`
 * serialises writes to the socket. They are separate so that a writer
 * blocked on a full socket never stops the receiver from taking replies
 * (which is what unblocks the master, and then the writer).
 *
 * Each call lives on its caller's stack with its own condition variable;
 * the receiver fills it in and signals. A broken connection bumps `epoch`;
 * a call sent in an older epoch is settled by the receiver before it
 * reconnects: resent later or failed, as master_conn.h explains.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "client.h"
#include "frame.h"
#include "log.h"
#include "master_conn.h"
#include "util.h"

#define TAG "mconn"

struct mcall {
	uint64_t id;
	uint16_t type;
	bool done;
	int err;		  /* -errno when done without a reply */
	ProtobufCMessage *reply;
	pthread_cond_t cond;
	struct mcall *next;	  /* pending list */
};

struct mconn {
	struct mconn_opts o;
	char client_name[256];

	pthread_mutex_t mu;
	pthread_cond_t conn_cond; /* connection (re)established */
	int fd;			  /* -1 while disconnected */
	uint64_t epoch;		  /* bumped at each disconnect */
	uint64_t session_id;
	uint64_t root_ino;
	struct mcall *pending;
	bool stop;

	pthread_mutex_t wmu;	  /* taken before mu, never after */
	uint64_t next_id;	  /* under mu */

	pthread_t rx;
	bool rx_started;
	struct sw_buf in;	  /* receiver thread only */
};

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* ---- hello ---------------------------------------------------------- */

/*
 * Connect and exchange hellos on a fresh socket, synchronously. Returns
 * the socket, or -errno.
 */
static int connect_hello(struct mconn *mc, uint64_t *session_id,
			 uint64_t *root_ino)
{
	Sweepfs__Hello hello = SWEEPFS__HELLO__INIT;
	Sweepfs__HelloReply *hr;
	struct sw_frame_hdr hdr;
	struct sw_buf b = SW_BUF_INIT;
	uint64_t *inos = NULL;
	size_t ninos = 0;
	int fd, rc;

	fd = sw_tcp_connect(mc->o.target.host, mc->o.target.port, 5000);
	if (fd < 0)
		return fd;
	hello.version = SW_PROTO_VERSION;
	hello.role = SWEEPFS__ROLE__ROLE_MOUNT;
	hello.has_session_id = *session_id != 0;
	hello.session_id = *session_id;
	hello.has_subdir = 1;
	hello.subdir.data = (uint8_t *)mc->o.target.subdir;
	hello.subdir.len = strlen(mc->o.target.subdir);
	hello.has_client_name = 1;
	hello.client_name.data = (uint8_t *)mc->client_name;
	hello.client_name.len = strlen(mc->client_name);
	if (*session_id && mc->o.open_inodes) {
		mc->o.open_inodes(mc->o.arg, &inos, &ninos);
		hello.n_open_inodes = ninos;
		hello.open_inodes = inos;
	}
	rc = sw_buf_add_frame(&b, SW_MSG_HELLO, 0, 0, &hello.base);
	free(inos);
	if (rc == 0)
		rc = write_all(fd, sw_buf_head(&b), sw_buf_used(&b));
	sw_buf_reset(&b);
	/* Read exactly the hello reply; nothing else comes before it. */
	while (rc == 0) {
		ssize_t n;

		rc = sw_frame_get_hdr(sw_buf_head(&b), sw_buf_used(&b),
				      SW_FRAME_MAX_META, &hdr);
		if (rc < 0)
			break;
		if (rc == 1 && sw_buf_used(&b) >= SW_FRAME_HDR + hdr.len)
			break;
		rc = sw_buf_reserve(&b, 4096);
		if (rc < 0)
			break;
		n = read(fd, b.data + b.len, b.cap - b.len);
		if (n <= 0) {
			rc = n < 0 ? -errno : -ECONNRESET;
			break;
		}
		b.len += (size_t)n;
		rc = 0;
	}
	if (rc == 1) {
		hr = sweepfs__hello_reply__unpack(NULL, hdr.len,
						  sw_buf_head(&b) + SW_FRAME_HDR);
		if (!hr || hdr.type != SW_MSG_HELLO) {
			rc = -EPROTO;
		} else if (hr->has_err && hr->err) {
			rc = -hr->err;
		} else if (!hr->has_session_id || !hr->has_root_ino) {
			rc = -EPROTO;
		} else {
			*session_id = hr->session_id;
			*root_ino = hr->root_ino;
			rc = 0;
		}
		if (hr)
			sweepfs__hello_reply__free_unpacked(hr, NULL);
	}
	sw_buf_release(&b);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

/* ---- receiving ------------------------------------------------------ */

static struct mcall *take_pending(struct mconn *mc, uint64_t id)
{
	for (struct mcall **pp = &mc->pending; *pp; pp = &(*pp)->next) {
		struct mcall *c = *pp;

		if (c->id == id) {
			*pp = c->next;
			return c;
		}
	}
	return NULL;
}

static void deliver(struct mconn *mc, const struct sw_frame_hdr *hdr,
		    const uint8_t *payload)
{
	const struct sw_msg_info *info = sw_msg_info(hdr->type);
	ProtobufCMessage *reply = NULL;
	struct mcall *c;

	if (hdr->flags & SW_FRAME_NOTIFY) {
		if (mc->o.notify)
			mc->o.notify(mc->o.arg, hdr->type, payload, hdr->len);
		return;
	}
	if (info)
		reply = protobuf_c_message_unpack(info->reply, NULL, hdr->len,
						  payload);
	pthread_mutex_lock(&mc->mu);
	c = take_pending(mc, hdr->id);
	if (c) {
		c->done = true;
		c->reply = reply;
		c->err = reply ? 0 : -EPROTO;
		pthread_cond_signal(&c->cond);
		reply = NULL;
	}
	pthread_mutex_unlock(&mc->mu);
	if (reply)
		protobuf_c_message_free_unpacked(reply, NULL);
}

/* Read frames until the connection fails; returns why. */
static int receive(struct mconn *mc, int fd)
{
	for (;;) {
		struct sw_frame_hdr hdr;
		ssize_t n;
		int rc;

		rc = sw_frame_get_hdr(sw_buf_head(&mc->in), sw_buf_used(&mc->in),
				      SW_FRAME_MAX_META, &hdr);
		if (rc < 0)
			return rc;
		if (rc == 1 && sw_buf_used(&mc->in) >= SW_FRAME_HDR + hdr.len) {
			deliver(mc, &hdr, sw_buf_head(&mc->in) + SW_FRAME_HDR);
			sw_buf_consume(&mc->in, SW_FRAME_HDR + hdr.len);
			continue;
		}
		rc = sw_buf_reserve(&mc->in, 64 << 10);
		if (rc < 0)
			return rc;
		n = read(fd, mc->in.data + mc->in.len, mc->in.cap - mc->in.len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		mc->in.len += (size_t)n;
	}
}

/* The connection broke: wake every pending call to settle itself. */
static void disconnected(struct mconn *mc)
{
	/* Unblock a writer, then close only once no writer holds the fd. */
	shutdown(mc->fd, SHUT_RDWR);
	pthread_mutex_lock(&mc->wmu);
	pthread_mutex_lock(&mc->mu);
	if (mc->fd >= 0) {
		close(mc->fd);
		mc->fd = -1;
	}
	mc->epoch++;
	while (mc->pending) {
		struct mcall *c = mc->pending;

		mc->pending = c->next;
		c->done = true;
		c->err = -ECONNRESET;
		pthread_cond_signal(&c->cond);
	}
	pthread_mutex_unlock(&mc->mu);
	pthread_mutex_unlock(&mc->wmu);
	sw_buf_reset(&mc->in);
}

static void *rx_main(void *arg)
{
	struct mconn *mc = arg;
	int delay_ms = 50;

	for (;;) {
		int fd, rc;

		pthread_mutex_lock(&mc->mu);
		fd = mc->fd;
		pthread_mutex_unlock(&mc->mu);
		if (fd >= 0) {
			rc = receive(mc, fd);
			pthread_mutex_lock(&mc->mu);
			if (mc->stop) {
				pthread_mutex_unlock(&mc->mu);
				break;
			}
			pthread_mutex_unlock(&mc->mu);
			sw_warn(TAG, "connection to the master lost: %s; "
				     "reconnecting",
				strerror(-rc));
			disconnected(mc);
			delay_ms = 50;
			continue;
		}
		pthread_mutex_lock(&mc->mu);
		if (mc->stop) {
			pthread_mutex_unlock(&mc->mu);
			break;
		}
		pthread_mutex_unlock(&mc->mu);

		{
			uint64_t sid = mc->session_id, root = 0;

			fd = connect_hello(mc, &sid, &root);
			if (fd >= 0) {
				pthread_mutex_lock(&mc->mu);
				mc->fd = fd;
				if (sid != mc->session_id)
					sw_warn(TAG, "the master gave a new "
						     "session");
				mc->session_id = sid;
				pthread_cond_broadcast(&mc->conn_cond);
				pthread_mutex_unlock(&mc->mu);
				sw_notice(TAG, "reconnected to the master");
				continue;
			}
			if (fd == -EACCES || fd == -EPROTONOSUPPORT ||
			    fd == -ENOENT)
				sw_err(TAG, "the master refuses us: %s",
				       strerror(-fd));
		}
		usleep((useconds_t)delay_ms * 1000);
		delay_ms = SW_MIN(delay_ms * 2, 1000);
	}
	return NULL;
}

/* ---- calls ---------------------------------------------------------- */

/*
 * Wait until connected or the deadline passes; called and returns with
 * mu held. Returns the epoch, or -EIO.
 */
static int64_t wait_connected(struct mconn *mc, int64_t deadline)
{
	while (mc->fd < 0 && !mc->stop) {
		struct timespec ts;

		if (sw_mono_ns() >= deadline)
			return -EIO;
		ts = sw_ns_to_timespec(deadline);
		pthread_cond_timedwait(&mc->conn_cond, &mc->mu, &ts);
	}
	return mc->stop ? -EIO : (int64_t)mc->epoch;
}

int mconn_call(struct mconn *mc, uint16_t type, const ProtobufCMessage *req,
	       ProtobufCMessage **reply)
{
	const struct sw_msg_info *info = sw_msg_info(type);
	int64_t deadline = sw_mono_ns() + (int64_t)mc->o.timeout_ms * 1000000;
	size_t size = sw_frame_size(req);
	uint8_t stackbuf[1024], *frame = stackbuf;
	struct mcall c = { .type = type };
	pthread_condattr_t ca;
	int rc;

	*reply = NULL;
	if (size > sizeof(stackbuf)) {
		frame = malloc(size);
		if (!frame)
			return -ENOMEM;
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c.cond, &ca);
	pthread_condattr_destroy(&ca);

	for (;;) {
		int64_t epoch;
		int fd;

		pthread_mutex_lock(&mc->mu);
		epoch = wait_connected(mc, deadline);
		pthread_mutex_unlock(&mc->mu);
		if (epoch < 0) {
			rc = -EIO;
			break;
		}
		/* Lock order: wmu, then mu. */
		pthread_mutex_lock(&mc->wmu);
		pthread_mutex_lock(&mc->mu);
		if (mc->fd < 0 || (int64_t)mc->epoch != epoch) {
			pthread_mutex_unlock(&mc->mu);
			pthread_mutex_unlock(&mc->wmu);
			continue;
		}
		fd = mc->fd;
		/* Register before sending: the reply may beat us back. */
		c.id = mc->next_id++;
		c.done = false;
		c.next = mc->pending;
		mc->pending = &c;
		pthread_mutex_unlock(&mc->mu);
		sw_frame_pack(frame, type, 0, c.id, req);
		rc = write_all(fd, frame, size);
		if (rc < 0)
			shutdown(fd, SHUT_RDWR); /* the receiver settles us */
		pthread_mutex_unlock(&mc->wmu);

		pthread_mutex_lock(&mc->mu);
		while (!c.done)
			pthread_cond_wait(&c.cond, &mc->mu);
		pthread_mutex_unlock(&mc->mu);

		if (c.err == 0) {
			rc = sw_reply_err(c.reply);
			if (rc < 0) {
				protobuf_c_message_free_unpacked(c.reply, NULL);
				c.reply = NULL;
			}
			*reply = c.reply;
			break;
		}
		if (c.err != -ECONNRESET) {
			rc = c.err;
			break;
		}
		/* Lost with the connection. Resend only what is harmless. */
		if (info && info->mutating) {
			rc = -EIO;
			break;
		}
	}
	pthread_cond_destroy(&c.cond);
	if (frame != stackbuf)
		free(frame);
	return rc;
}

/* ---- lifecycle ------------------------------------------------------ */

int mconn_open(const struct mconn_opts *o, struct mconn **out)
{
	struct mconn *mc = calloc(1, sizeof(*mc));
	pthread_condattr_t ca;
	int fd;

	if (!mc)
		return -ENOMEM;
	mc->o = *o;
	snprintf(mc->client_name, sizeof(mc->client_name), "%s",
		 o->client_name ? o->client_name : "");
	mc->o.client_name = mc->client_name;
	mc->next_id = 1;
	pthread_mutex_init(&mc->mu, NULL);
	pthread_mutex_init(&mc->wmu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&mc->conn_cond, &ca);
	pthread_condattr_destroy(&ca);
	fd = connect_hello(mc, &mc->session_id, &mc->root_ino);
	if (fd < 0) {
		pthread_mutex_destroy(&mc->mu);
		pthread_mutex_destroy(&mc->wmu);
		pthread_cond_destroy(&mc->conn_cond);
		free(mc);
		return fd;
	}
	mc->fd = fd;
	*out = mc;
	return 0;
}

uint64_t mconn_root_ino(const struct mconn *mc)
{
	return mc->root_ino;
}

uint64_t mconn_session_id(const struct mconn *mc)
{
	return mc->session_id;
}

int mconn_start(struct mconn *mc)
{
	int rc = pthread_create(&mc->rx, NULL, rx_main, mc);

	if (rc)
		return -rc;
	mc->rx_started = true;
	return 0;
}

void mconn_close(struct mconn *mc)
{
	pthread_mutex_lock(&mc->mu);
	mc->stop = true;
	if (mc->fd >= 0)
		shutdown(mc->fd, SHUT_RDWR);
	pthread_cond_broadcast(&mc->conn_cond);
	pthread_mutex_unlock(&mc->mu);
	if (mc->rx_started)
		pthread_join(mc->rx, NULL);
	if (mc->fd >= 0)
		close(mc->fd);
	sw_buf_release(&mc->in);
	pthread_mutex_destroy(&mc->mu);
	pthread_mutex_destroy(&mc->wmu);
	pthread_cond_destroy(&mc->conn_cond);
	free(mc);
}
