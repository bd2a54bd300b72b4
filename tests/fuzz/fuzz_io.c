/*
 * The client side of the fuzz targets that drive a real server (see
 * fuzz_io.h). The connection is non-blocking; the loop runs one
 * non-blocking iteration at a time between sends and receives, and when
 * neither side can move, poll() waits on the socket and on the loop's
 * backend descriptor together, so that nothing spins and nothing waits
 * for a timer it does not need.
 */
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "frame.h"
#include "fuzz_io.h"
#include "log.h"

#define RECV_CHUNK (256u << 10)
/* Longest poll() between loop iterations, in ms. */
#define POLL_MAX_MS 20

__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt,
								...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "fuzz: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	abort();
}

/* ---- checking what the server sends ---------------------------------- */

/*
 * Check and consume the whole frames at the head of @in. A reply decodes
 * with its type's reply payload, or as a StatusReply (an error reply, or
 * the answer to a type the table does not know); a notification with its
 * type's request payload.
 */
static size_t check_frames(const struct fz_server *s, struct sw_buf *in)
{
	size_t n = 0;

	for (;;) {
		const struct sw_msg_info *info;
		const ProtobufCMessageDescriptor *d;
		struct sw_frame_hdr hdr;
		ProtobufCMessage *msg;
		int rc = sw_frame_get_hdr(sw_buf_head(in), sw_buf_used(in),
					  s->max_reply, &hdr);

		if (rc < 0)
			die("the server sent a bad frame header (%s, %zu bytes "
			    "left)",
			    strerror(-rc), sw_buf_used(in));
		if (rc == 0 || sw_buf_used(in) < SW_FRAME_HDR + hdr.len)
			return n;
		info = sw_msg_info(hdr.type);
		if (hdr.flags == SW_FRAME_REPLY)
			d = info ? info->reply :
				   &sweepfs__status_reply__descriptor;
		else if (hdr.flags == SW_FRAME_NOTIFY && info)
			d = info->req;
		else
			die("the server sent a frame of type %u with flags %#x",
			    hdr.type, hdr.flags);
		msg = protobuf_c_message_unpack(d, NULL, hdr.len,
						sw_buf_head(in) + SW_FRAME_HDR);
		if (!msg)
			die("the server sent an undecodable %s (type %u, %u "
			    "bytes)",
			    d->name, hdr.type, hdr.len);
		protobuf_c_message_free_unpacked(msg, NULL);
		sw_buf_consume(in, SW_FRAME_HDR + hdr.len);
		n++;
	}
}

/* ---- the connection ---------------------------------------------------- */

static int connect_to(uint16_t port)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	struct pollfd pfd = { .events = POLLOUT };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int err = 0;
	socklen_t len = sizeof(err);

	if (fd < 0)
		die("socket: %s", strerror(errno));
	/* Loopback: the handshake completes in the kernel, before the
	 * server's loop accepts. Non-blocking, so that libFuzzer's timer
	 * signals cannot interrupt it half-way. */
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 &&
	    errno != EINPROGRESS && errno != EINTR)
		die("connect to port %u: %s", port, strerror(errno));
	pfd.fd = fd;
	while (poll(&pfd, 1, -1) < 0)
		if (errno != EINTR)
			die("poll: %s", strerror(errno));
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err)
		die("connect to port %u: %s", port,
		    strerror(err ? err : errno));
	return fd;
}

/* Send what the socket takes of the @n bytes at @p; -1 when the peer is
 * gone. */
static ssize_t send_some(int fd, const uint8_t *p, size_t n)
{
	ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);

	if (w >= 0)
		return w;
	if (errno == EAGAIN || errno == EINTR)
		return 0;
	if (errno == EPIPE || errno == ECONNRESET)
		return -1;
	die("send: %s", strerror(errno));
}

/* Receive what there is; false at the end of the stream. */
static bool recv_some(int fd, struct sw_buf *in)
{
	for (;;) {
		ssize_t r;

		if (sw_buf_reserve(in, RECV_CHUNK) < 0)
			die("out of memory");
		r = recv(fd, in->data + in->len, in->cap - in->len,
			 MSG_DONTWAIT);
		if (r > 0) {
			in->len += (size_t)r;
			continue;
		}
		if (r == 0)
			return false;
		if (errno == EAGAIN || errno == EINTR)
			return true;
		if (errno == ECONNRESET)
			return false;
		die("recv: %s", strerror(errno));
	}
}

size_t fz_exchange(const struct fz_server *s, const uint8_t *pre, size_t plen,
		   const uint8_t *data, size_t len)
{
	struct sw_buf in = SW_BUF_INIT;
	size_t sent = 0, frames = 0, total = plen + len;
	bool writing = true, open = true;
	int fd = connect_to(s->port);

	while (open || !s->idle(s->arg)) {
		struct pollfd pfd[2] = {
			{ .fd = fd, .events = POLLIN },
			{ .fd = uv_backend_fd(s->loop), .events = POLLIN },
		};
		int timeout;

		while (writing && sent < total) {
			const uint8_t *p = sent < plen ? pre + sent :
							 data + (sent - plen);
			size_t n = sent < plen ? plen - sent : total - sent;
			ssize_t w = send_some(fd, p, n);

			if (w <= 0) {
				writing = w == 0;
				break;
			}
			sent += (size_t)w;
		}
		if (writing && sent == total) {
			shutdown(fd, SHUT_WR);
			writing = false;
		}
		uv_run(s->loop, UV_RUN_NOWAIT);
		if (open) {
			open = recv_some(fd, &in);
			frames += check_frames(s, &in);
		}
		if (!open && s->idle(s->arg))
			break;
		timeout = uv_backend_timeout(s->loop);
		if (timeout < 0 || timeout > POLL_MAX_MS)
			timeout = POLL_MAX_MS;
		if (writing)
			pfd[0].events |= POLLOUT;
		if (!open)
			pfd[0].fd = -1;
		poll(pfd, 2, timeout);
	}
	close(fd);
	sw_buf_release(&in);
	return frames;
}

bool fz_put_frame(uint8_t *out, size_t cap, size_t *used, uint16_t type,
		  uint64_t id, const ProtobufCMessage *msg)
{
	size_t n = sw_frame_size(msg);

	if (n > cap - *used)
		return false;
	*used += sw_frame_pack(out + *used, type, 0, id, msg);
	return true;
}

/* ---- the process -------------------------------------------------------- */

static char tmpdir[512];

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void rm_tmpdir(void)
{
	if (tmpdir[0])
		nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *fz_tmpdir(const char *what)
{
	const char *base = getenv("TMPDIR");

	/* Memory is the fastest disk for the servers' files. */
	if (!base || !*base)
		base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(tmpdir, sizeof(tmpdir), "%s/sweepfs-%s.XXXXXX", base, what);
	if (!mkdtemp(tmpdir))
		die("mkdtemp %s: %s", tmpdir, strerror(errno));
	atexit(rm_tmpdir);
	return tmpdir;
}

static void drop_line(int level, const char *tag, const char *msg, void *opaque)
{
	(void)level;
	(void)tag;
	(void)msg;
	(void)opaque;
}

void fz_quiet_logs(void)
{
	const char *e = getenv("SWEEPFS_FUZZ_LOG");

	sw_log_level = LOG_DEBUG;
	if (!e || strcmp(e, "1"))
		sw_log_set_sink(drop_line, NULL);
}
