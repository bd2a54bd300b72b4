/*
 * cs_driver -b CHUNKSERVER -d DIR [-s SEED]
 *
 * Drives a real sweepfs-chunkserver (the binary CHUNKSERVER) with nobody else around: this
 * program plays the master (it listens, takes the chunkserver's hello and
 * registration, hands out the token key, sends commands and checks their
 * CS_DONE answers and the chunk files on disk) and the clients (mounts
 * writing and reading with tokens it makes itself). DIR holds the data
 * directories and the daemons' logs (cs-a.log, cs-b.log).
 *
 * Checked, in order:
 *   1. registration with an empty inventory; before the key, EAGAIN;
 *   2. CREATE (and EEXIST, and EINVAL for a malformed command);
 *   3. pipelined random writes and reads (block and chunk boundaries,
 *      up to SW_IO_MAX) against a reference; short reads past the end;
 *   4. bad tokens (forged, expired, read-for-write) EACCES, wrong version
 *      ESTALE, unknown chunk ENOENT, out-of-range EINVAL, unknown request
 *      ENOSYS, ping, wrong protocol version refused;
 *   5. SET_VERSION (file renamed), DUPLICATE, TRUNCATE, DELETE;
 *   6. a corrupted block reads as EIO, the master gets CS_DAMAGED, the
 *      other blocks still read;
 *   7. an unparsable frame and a peer stalled mid-frame cost only their
 *      own connection; a client that reads no replies is throttled while
 *      others are served;
 *   8. kill -9 during writes: after a restart every block reads, all
 *      acknowledged (and synced) data is intact, and the chunkserver
 *      re-registers with its server id and full inventory;
 *   9. the master connection breaks: clients are still served, the
 *      chunkserver comes back and re-registers;
 *  10. REPLICATE to a second chunkserver; deletions run on threads at
 *      I/O priority best-effort 7;
 *  11. SIGTERM: both exit 0.
 * Prints the seed; exit status 0 when everything held.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "buf.h"
#include "frame.h"
#include "fsio.h"
#include "net.h"
#include "token.h"
#include "util.h"

#define CS SW_CHUNK_SIZE
#define BS SW_BLOCK_SIZE
#define TIMEOUT_MS 20000
#define SERVER_ID 0x5eed0001ull
#define DATA_OFF 12288 /* chunkfile.h CF_DATA_OFF */

extern char **environ;

static uint64_t rng_state;
static const char *cs_bin, *work_dir;
static uint8_t key[SW_TOKEN_KEY];

/* ---- failing ---------------------------------------------------------- */

struct daemon {
	const char *name; /* "a" or "b" */
	pid_t pid;
	uint16_t port;
	char dirs[2][512];
	int ndirs;
	char log[512];
};

static struct daemon cs_a = { .name = "a" }, cs_b = { .name = "b" };

static void kill_all(void)
{
	struct daemon *ds[] = { &cs_a, &cs_b };

	for (int i = 0; i < 2; i++) {
		if (ds[i]->pid > 0) {
			kill(ds[i]->pid, SIGKILL);
			waitpid(ds[i]->pid, NULL, 0);
			ds[i]->pid = 0;
		}
	}
}

__attribute__((format(printf, 1, 2), noreturn)) static void
fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	kill_all();
	exit(1);
}

static void step(const char *what)
{
	printf("ok - %s\n", what);
	fflush(stdout);
}

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

static uint64_t below(uint64_t n)
{
	return rnd() % n;
}

static void fill(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rnd();
}

static uint64_t now_ms(void)
{
	return (uint64_t)(sw_now_ns() / 1000000);
}

/* ---- frames over a blocking socket ------------------------------------ */

struct peer {
	int fd;
	struct sw_buf in;
	uint64_t next_id;
};

static void peer_send(struct peer *p, uint16_t type, uint16_t flags,
		      uint64_t id, const ProtobufCMessage *msg)
{
	size_t size = sw_frame_size(msg);
	uint8_t *buf = malloc(size);
	int rc;

	if (!buf)
		fail("out of memory");
	sw_frame_pack(buf, type, flags, id, msg);
	rc = sw_write_all(p->fd, buf, size);
	free(buf);
	if (rc < 0)
		fail("send: %s", strerror(-rc));
}

static uint64_t peer_request(struct peer *p, uint16_t type,
			     const ProtobufCMessage *msg)
{
	uint64_t id = p->next_id++;

	peer_send(p, type, 0, id, msg);
	return id;
}

/*
 * The next frame, its payload copied into *@payload (free it). Returns 0,
 * -ETIMEDOUT, or -ECONNRESET at EOF.
 */
static int peer_recv(struct peer *p, struct sw_frame_hdr *hdr,
		     uint8_t **payload, int timeout_ms)
{
	for (;;) {
		struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
		int rc = sw_frame_get_hdr(sw_buf_head(&p->in),
					  sw_buf_used(&p->in),
					  SW_FRAME_MAX_DATA, hdr);
		ssize_t n;

		if (rc < 0)
			fail("bad frame header from the chunkserver");
		if (rc > 0 && sw_buf_used(&p->in) >= SW_FRAME_HDR + hdr->len) {
			*payload = malloc(hdr->len + 1);
			memcpy(*payload, sw_buf_head(&p->in) + SW_FRAME_HDR,
			       hdr->len);
			sw_buf_consume(&p->in, SW_FRAME_HDR + hdr->len);
			return 0;
		}
		rc = poll(&pfd, 1, timeout_ms);
		if (rc == 0)
			return -ETIMEDOUT;
		if (rc < 0 && errno != EINTR)
			return -errno;
		if (sw_buf_reserve(&p->in, 1 << 20) < 0)
			fail("out of memory");
		n = read(p->fd, p->in.data + p->in.len, p->in.cap - p->in.len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == ECONNRESET ? -ECONNRESET : -errno;
		if (n == 0)
			return -ECONNRESET;
		p->in.len += (size_t)n;
	}
}

static void peer_close(struct peer *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	sw_buf_release(&p->in);
}

/* A reply, unpacked with @type's reply descriptor. */
static ProtobufCMessage *recv_reply(struct peer *p, struct sw_frame_hdr *hdr)
{
	uint8_t *payload;
	ProtobufCMessage *m;
	int rc = peer_recv(p, hdr, &payload, TIMEOUT_MS);

	if (rc < 0)
		fail("waiting for a reply: %s", strerror(-rc));
	if (!(hdr->flags & SW_FRAME_REPLY) || !sw_msg_info(hdr->type))
		fail("unexpected frame type %u flags %u", hdr->type,
		     hdr->flags);
	m = protobuf_c_message_unpack(sw_msg_info(hdr->type)->reply, NULL,
				      hdr->len, payload);
	free(payload);
	if (!m)
		fail("unparsable reply of type %u", hdr->type);
	return m;
}

static int reply_err(const ProtobufCMessage *m)
{
	const Sweepfs__StatusReply *r = (const void *)m;

	/* Every reply has err as field 1 (sweepfs.proto). */
	return r->has_err ? -r->err : 0;
}

/* ---- clients ------------------------------------------------------------ */

static void client_open(struct peer *p, uint16_t port, int role)
{
	Sweepfs__Hello h = SWEEPFS__HELLO__INIT;
	Sweepfs__HelloReply *r;
	struct sw_frame_hdr hdr;

	p->fd = sw_tcp_connect("127.0.0.1", port, TIMEOUT_MS);
	if (p->fd < 0)
		fail("connect to port %u: %s", port, strerror(-p->fd));
	sw_buf_init(&p->in);
	p->next_id = 1;
	h.version = SW_PROTO_VERSION;
	h.role = role;
	peer_request(p, SW_MSG_HELLO, &h.base);
	r = (Sweepfs__HelloReply *)recv_reply(p, &hdr);
	if (reply_err(&r->base) || !r->has_session_id || !r->has_root_ino)
		fail("hello refused or incomplete");
	sweepfs__hello_reply__free_unpacked(r, NULL);
}

enum tok_kind { TOK_GOOD, TOK_FORGED, TOK_EXPIRED, TOK_READ, TOK_NONE };

struct tok {
	uint8_t b[SW_TOKEN_LEN];
	uint64_t expires;
	bool has;
};

static struct tok make_tok(uint64_t id, uint32_t version,
			   enum sw_token_mode mode, enum tok_kind kind)
{
	struct tok t = { .expires = now_ms() + 600000, .has = true };

	if (kind == TOK_EXPIRED)
		t.expires = now_ms() - 1000;
	if (kind == TOK_READ)
		mode = SW_TOKEN_READ;
	sw_token_make(key, id, version, mode, t.expires, t.b);
	if (kind == TOK_FORGED)
		t.b[3] ^= 0x10;
	t.has = kind != TOK_NONE;
	return t;
}

static uint64_t send_read(struct peer *p, uint64_t id, uint32_t version,
			  uint32_t off, uint32_t size, enum tok_kind kind)
{
	Sweepfs__CsReadReq q = SWEEPFS__CS_READ_REQ__INIT;
	struct tok t = make_tok(id, version, SW_TOKEN_READ, kind);

	q.chunk_id = id;
	q.version = version;
	q.offset = off;
	q.size = size;
	q.has_token = q.has_expires = t.has;
	q.token.data = t.b;
	q.token.len = sizeof(t.b);
	q.expires = t.expires;
	return peer_request(p, SW_MSG_CS_READ, &q.base);
}

static uint64_t send_write(struct peer *p, uint64_t id, uint32_t version,
			   uint32_t off, const uint8_t *data, uint32_t size,
			   enum tok_kind kind)
{
	Sweepfs__CsWriteReq q = SWEEPFS__CS_WRITE_REQ__INIT;
	struct tok t = make_tok(id, version, SW_TOKEN_WRITE, kind);

	q.chunk_id = id;
	q.version = version;
	q.offset = off;
	q.data.data = (uint8_t *)data;
	q.data.len = size;
	q.has_token = q.has_expires = t.has;
	q.token.data = t.b;
	q.token.len = sizeof(t.b);
	q.expires = t.expires;
	return peer_request(p, SW_MSG_CS_WRITE, &q.base);
}

static int cs_sync(struct peer *p, uint64_t id, uint32_t version)
{
	Sweepfs__CsSyncReq q = SWEEPFS__CS_SYNC_REQ__INIT;
	struct tok t = make_tok(id, version, SW_TOKEN_WRITE, TOK_GOOD);
	struct sw_frame_hdr hdr;
	ProtobufCMessage *r;
	int rc;

	q.chunk_id = id;
	q.version = version;
	q.has_token = q.has_expires = 1;
	q.token.data = t.b;
	q.token.len = sizeof(t.b);
	q.expires = t.expires;
	peer_request(p, SW_MSG_CS_SYNC, &q.base);
	r = recv_reply(p, &hdr);
	rc = reply_err(r);
	protobuf_c_message_free_unpacked(r, NULL);
	return rc;
}

/* One read; the data goes to @buf. Returns bytes or -errno. */
static int cs_read(struct peer *p, uint64_t id, uint32_t version, uint32_t off,
		   uint32_t size, uint8_t *buf, enum tok_kind kind)
{
	struct sw_frame_hdr hdr;
	Sweepfs__CsReadReply *r;
	uint64_t rid = send_read(p, id, version, off, size, kind);
	int rc;

	r = (Sweepfs__CsReadReply *)recv_reply(p, &hdr);
	if (hdr.id != rid)
		fail("reply to %" PRIu64 " for %" PRIu64, hdr.id, rid);
	rc = reply_err(&r->base);
	if (rc == 0) {
		rc = r->has_data ? (int)r->data.len : 0;
		if (rc > (int)size)
			fail("read returned more than asked");
		if (rc)
			memcpy(buf, r->data.data, (size_t)rc);
	}
	sweepfs__cs_read_reply__free_unpacked(r, NULL);
	return rc;
}

static int cs_write(struct peer *p, uint64_t id, uint32_t version, uint32_t off,
		    const uint8_t *data, uint32_t size, enum tok_kind kind)
{
	struct sw_frame_hdr hdr;
	ProtobufCMessage *r;
	int rc;

	send_write(p, id, version, off, data, size, kind);
	r = recv_reply(p, &hdr);
	rc = reply_err(r);
	protobuf_c_message_free_unpacked(r, NULL);
	return rc;
}

/* ---- the fake master ------------------------------------------------------ */

struct chunk_rec {
	uint64_t id;
	uint32_t version;
	bool damaged;
};

struct fmaster {
	int lfd;
	uint16_t port;
	char key_file[4200];	  /* the chunkserver key we give them */
	uint8_t key[SW_AUTH_KEY]; /* its contents */
	bool wrong_proof;	  /* prove with another key (a fake master) */
};

/* What a chunkserver's master connection saw. */
struct mconn {
	struct peer p;
	uint64_t server_id; /* in its registration */
	char listen[128];
	struct chunk_rec inv[64];
	int ninv;
	uint64_t next_cmd;
	uint64_t done_id; /* last CS_DONE */
	int done_err;
	bool done;
	uint64_t damaged_id; /* last CS_DAMAGED */
	int ndamaged;
	int nheartbeats;
};

static struct fmaster master;

static void master_listen(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);

	master.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (master.lfd < 0 || bind(master.lfd, (void *)&sa, sizeof(sa)) < 0 ||
	    listen(master.lfd, 16) < 0 ||
	    getsockname(master.lfd, (void *)&sa, &len) < 0)
		fail("master listen: %s", strerror(errno));
	master.port = ntohs(sa.sin_port);
}

static void reply_status(struct mconn *m, const struct sw_frame_hdr *hdr)
{
	Sweepfs__StatusReply r = SWEEPFS__STATUS_REPLY__INIT;

	peer_send(&m->p, hdr->type, SW_FRAME_REPLY, hdr->id, &r.base);
}

static void reply_register(struct mconn *m, uint64_t id)
{
	Sweepfs__CsRegisterReply r = SWEEPFS__CS_REGISTER_REPLY__INIT;

	r.has_server_id = r.has_token_key = 1;
	r.server_id = SERVER_ID;
	r.token_key.data = key;
	r.token_key.len = sizeof(key);
	peer_send(&m->p, SW_MSG_CS_REGISTER, SW_FRAME_REPLY, id, &r.base);
}

/*
 * Take one frame from the chunkserver and deal with it: heartbeats,
 * done and damaged requests are answered and recorded; a registration
 * part is recorded and answered unless @hold (then its id goes to
 * *@held). Returns the frame's type, or -ETIMEDOUT.
 */
static int master_pump(struct mconn *m, int timeout_ms, bool hold,
		       uint64_t *held)
{
	struct sw_frame_hdr hdr;
	uint8_t *payload;
	int rc = peer_recv(&m->p, &hdr, &payload, timeout_ms);
	ProtobufCMessage *msg;

	if (rc == -ETIMEDOUT)
		return rc;
	if (rc < 0)
		fail("master connection: %s", strerror(-rc));
	if (hdr.flags || !sw_msg_info(hdr.type))
		fail("chunkserver sent type %u flags %u", hdr.type, hdr.flags);
	msg = protobuf_c_message_unpack(sw_msg_info(hdr.type)->req, NULL,
					hdr.len, payload);
	free(payload);
	if (!msg)
		fail("unparsable %s from the chunkserver",
		     sw_msg_info(hdr.type)->name);
	switch (hdr.type) {
	case SW_MSG_CS_HEARTBEAT:
		m->nheartbeats++;
		reply_status(m, &hdr);
		break;
	case SW_MSG_CS_DONE:
		m->done = true;
		m->done_id = ((Sweepfs__CsDoneReq *)msg)->id;
		m->done_err = ((Sweepfs__CsDoneReq *)msg)->err;
		reply_status(m, &hdr);
		break;
	case SW_MSG_CS_DAMAGED:
		m->ndamaged++;
		m->damaged_id = ((Sweepfs__CsDamagedReq *)msg)->chunk_id;
		reply_status(m, &hdr);
		break;
	case SW_MSG_CS_REGISTER: {
		Sweepfs__CsRegisterReq *q = (void *)msg;

		m->server_id = q->has_server_id ? q->server_id : 0;
		snprintf(m->listen, sizeof(m->listen), "%s", q->listen);
		for (size_t i = 0; i < q->n_chunks && m->ninv < 64; i++)
			m->inv[m->ninv++] =
				(struct chunk_rec){ q->chunks[i]->chunk_id,
						    q->chunks[i]->version,
						    q->chunks[i]->damaged };
		if (hold && !q->more)
			*held = hdr.id;
		else
			reply_register(m, hdr.id);
		if (q->more)
			rc = -EAGAIN; /* not the last part */
		break;
	}
	default:
		fail("unexpected %s from the chunkserver",
		     sw_msg_info(hdr.type)->name);
	}
	protobuf_c_message_free_unpacked(msg, NULL);
	return rc == -EAGAIN ? 0 : hdr.type;
}

/* Deal with whatever the chunkserver sent meanwhile. */
static void master_idle(struct mconn *m)
{
	while (master_pump(m, 0, false, NULL) > 0)
		;
}

/*
 * Accept a chunkserver, take its hello and whole registration. With
 * @hold the last registration part is left unanswered; its id is
 * returned for reply_register().
 */
/* The next frame on @m, which must be a chunkserver's hello. */
static Sweepfs__Hello *hello_from(struct mconn *m, struct sw_frame_hdr *hdr)
{
	Sweepfs__Hello *h;
	uint8_t *payload;
	int rc = peer_recv(&m->p, hdr, &payload, TIMEOUT_MS);

	if (rc < 0 || hdr->type != SW_MSG_HELLO)
		fail("no hello from the chunkserver");
	h = sweepfs__hello__unpack(NULL, hdr->len, payload);
	free(payload);
	if (!h || h->role != SWEEPFS__ROLE__ROLE_CHUNKSERVER ||
	    h->version != sw_proto_hello_version(
				  SWEEPFS__ROLE__ROLE_CHUNKSERVER, true))
		fail("bad hello from the chunkserver");
	return h;
}

static uint64_t master_accept(struct mconn *m, bool hold)
{
	struct pollfd pfd = { .fd = master.lfd, .events = POLLIN };
	Sweepfs__HelloReply hr = SWEEPFS__HELLO_REPLY__INIT;
	uint8_t nonce[SW_AUTH_NONCE], want[SW_AUTH_TAG];
	Sweepfs__Hello *h;
	struct sw_frame_hdr hdr;
	uint64_t held = 0;
	int rc;

	memset(m, 0, sizeof(*m));
	m->next_cmd = 1000;
	if (poll(&pfd, 1, TIMEOUT_MS) != 1)
		fail("no chunkserver connected to the master");
	m->p.fd = accept4(master.lfd, NULL, NULL, SOCK_CLOEXEC);
	if (m->p.fd < 0)
		fail("accept: %s", strerror(errno));
	h = hello_from(m, &hdr);
	if (!h->has_cs_nonce || h->cs_nonce.len != SW_AUTH_NONCE)
		fail("the chunkserver's hello has no challenge for us");
	/* Challenge it; it must answer with the key. */
	fill(nonce, sizeof(nonce));
	hr.has_err = hr.has_challenge = 1;
	hr.err = EACCES;
	hr.challenge.data = nonce;
	hr.challenge.len = sizeof(nonce);
	peer_send(&m->p, SW_MSG_HELLO, SW_FRAME_REPLY, hdr.id, &hr.base);
	sweepfs__hello__free_unpacked(h, NULL);
	h = hello_from(m, &hdr);
	sw_auth_tag(master.key, SW_AUTH_CHUNKSERVER, nonce, sizeof(nonce), NULL,
		    0, want);
	if (!h->has_auth || h->auth.len != SW_AUTH_TAG ||
	    memcmp(h->auth.data, want, SW_AUTH_TAG))
		fail("the chunkserver's answer does not prove the key");
	/* And prove ours (or, as a fake master, fail to). */
	sw_auth_tag(master.key, SW_AUTH_MASTER, h->cs_nonce.data,
		    h->cs_nonce.len, NULL, 0, want);
	if (master.wrong_proof)
		want[0] ^= 1;
	sweepfs__hello__free_unpacked(h, NULL);
	hr = (Sweepfs__HelloReply)SWEEPFS__HELLO_REPLY__INIT;
	hr.has_version = hr.has_session_id = hr.has_root_ino = 1;
	hr.has_cs_proof = 1;
	hr.cs_proof.data = want;
	hr.cs_proof.len = sizeof(want);
	hr.version = SW_PROTO_VERSION;
	hr.session_id = 77;
	peer_send(&m->p, SW_MSG_HELLO, SW_FRAME_REPLY, hdr.id, &hr.base);
	if (master.wrong_proof)
		return 0;
	while ((rc = master_pump(m, TIMEOUT_MS, hold, &held)) !=
	       SW_MSG_CS_REGISTER) {
		if (rc < 0)
			fail("no registration");
	}
	return held;
}

/* Send a command and wait for its CS_DONE; returns -err. */
static int master_cmd(struct mconn *m, Sweepfs__CsCommand *c)
{
	uint64_t deadline = now_ms() + TIMEOUT_MS;

	c->id = m->next_cmd++;
	m->done = false;
	peer_send(&m->p, SW_MSG_CS_COMMAND, SW_FRAME_NOTIFY, 0, &c->base);
	while (!(m->done && m->done_id == c->id)) {
		if (now_ms() > deadline)
			fail("command %" PRIu64 " not done", c->id);
		master_pump(m, 1000, false, NULL);
	}
	return m->done_err ? -m->done_err : 0;
}

static int cmd_simple(struct mconn *m, int op, uint64_t id, uint32_t version)
{
	Sweepfs__CsCommand c = SWEEPFS__CS_COMMAND__INIT;

	c.op = op;
	c.chunk_id = id;
	c.version = version;
	return master_cmd(m, &c);
}

/* ---- chunkserver processes ---------------------------------------------------- */

static uint16_t free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || bind(fd, (void *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (void *)&sa, &len) < 0)
		fail("no free port: %s", strerror(errno));
	close(fd);
	return ntohs(sa.sin_port);
}

static void cs_setup(struct daemon *d, int ndirs)
{
	d->ndirs = ndirs;
	for (int i = 0; i < ndirs; i++)
		snprintf(d->dirs[i], sizeof(d->dirs[i]), "%s/%s%d", work_dir,
			 d->name, i + 1);
	snprintf(d->log, sizeof(d->log), "%s/cs-%s.log", work_dir, d->name);
	d->port = free_port();
}

static void cs_start(struct daemon *d)
{
	char listen[64], mst[64], *argv[32], key_opt[4300];
	posix_spawn_file_actions_t fa;
	int argc = 0, rc;

	snprintf(listen, sizeof(listen), "127.0.0.1:%u", d->port);
	snprintf(mst, sizeof(mst), "127.0.0.1:%u", master.port);
	snprintf(key_opt, sizeof(key_opt), "master_key_file=%s",
		 master.key_file);
	argv[argc++] = (char *)cs_bin;
	argv[argc++] = "-f";
	for (int i = 0; i < d->ndirs; i++) {
		argv[argc++] = "-d";
		argv[argc++] = d->dirs[i];
	}
	argv[argc++] = "-l";
	argv[argc++] = listen;
	argv[argc++] = "-m";
	argv[argc++] = mst;
	argv[argc++] = "-v";
	argv[argc++] = "debug";
	argv[argc++] = "--set";
	argv[argc++] = "frame_timeout=1s";
	argv[argc++] = "--set";
	argv[argc++] = "heartbeat_interval=1s";
	argv[argc++] = "--set";
	argv[argc++] = "open_files=4";
	argv[argc++] = "--set";
	argv[argc++] = key_opt;
	argv[argc] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, d->log,
					 O_WRONLY | O_CREAT | O_APPEND, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	rc = posix_spawn(&d->pid, cs_bin, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		fail("cannot start %s: %s", cs_bin, strerror(rc));
}

static void cs_kill(struct daemon *d)
{
	kill(d->pid, SIGKILL);
	waitpid(d->pid, NULL, 0);
	d->pid = 0;
}

/* SIGTERM; the chunkserver must exit 0 within the time limit. */
static void cs_stop(struct daemon *d)
{
	int status;

	kill(d->pid, SIGTERM);
	for (int i = 0; i < 600; i++) {
		pid_t r = waitpid(d->pid, &status, WNOHANG);

		if (r == d->pid) {
			d->pid = 0;
			if (!WIFEXITED(status) || WEXITSTATUS(status))
				fail("chunkserver %s: exit status %d after "
				     "SIGTERM",
				     d->name, status);
			return;
		}
		usleep(50000);
	}
	fail("chunkserver %s did not stop after SIGTERM", d->name);
}

/* Whether chunk @id at @version has a file in one of @d's directories. */
static bool chunk_file(const struct daemon *d, uint64_t id, uint32_t version,
		       char *path, size_t len)
{
	for (int i = 0; i < d->ndirs; i++) {
		snprintf(path, len, "%s/%02x/chunk_%016" PRIx64 "_%08x.swc",
			 d->dirs[i], (unsigned)(id & 0xff), id, version);
		if (access(path, F_OK) == 0)
			return true;
	}
	return false;
}

/* ---- workloads ---------------------------------------------------------------- */

/* A write in flight: its range and bytes. */
struct wr {
	uint64_t rid;
	uint32_t off, size;
	uint8_t *data;
	bool acked;
};

/* An offset near a block boundary more often than not, within [lo, hi). */
static uint32_t pick_off(uint32_t lo, uint32_t hi)
{
	uint32_t o = lo + (uint32_t)below(hi - lo);

	switch (below(4)) {
	case 0:
		o -= o % BS;
		break;
	case 1:
		o = o - o % BS + BS - 1;
		break;
	default:
		break;
	}
	return SW_MIN(SW_MAX(o, lo), hi - 1);
}

/*
 * Send @n writes to disjoint random slots of [0, @span), all in flight
 * at once. The caller collects the acknowledgements.
 */
static void send_writes(struct peer *p, uint64_t id, uint32_t version,
			uint32_t span, struct wr *w, int n)
{
	uint32_t slot = span / (uint32_t)n;

	for (int i = 0; i < n; i++) {
		uint32_t lo = slot * (uint32_t)i, hi = lo + slot;
		uint32_t off = pick_off(lo, hi);
		uint32_t max = SW_MIN(hi - off, SW_IO_MAX);

		w[i].off = off;
		w[i].size = below(3) ? (uint32_t)below(max) + 1 : max;
		w[i].data = malloc(w[i].size);
		w[i].acked = false;
		fill(w[i].data, w[i].size);
		w[i].rid = send_write(p, id, version, off, w[i].data, w[i].size,
				      TOK_GOOD);
	}
}

/* Wait for one acknowledgement and apply its write to @ref. */
static void ack_one(struct peer *p, struct wr *w, int n, uint8_t *ref,
		    uint32_t *length)
{
	struct sw_frame_hdr hdr;
	ProtobufCMessage *r = recv_reply(p, &hdr);
	int rc = reply_err(r), i;

	protobuf_c_message_free_unpacked(r, NULL);
	for (i = 0; i < n && w[i].rid != hdr.id; i++)
		;
	if (i == n || w[i].acked)
		fail("acknowledgement for an unknown write %" PRIu64, hdr.id);
	if (rc < 0)
		fail("write at %u+%u: %s", w[i].off, w[i].size, strerror(-rc));
	w[i].acked = true;
	memcpy(ref + w[i].off, w[i].data, w[i].size);
	*length = SW_MAX(*length, w[i].off + w[i].size);
}

static void free_writes(struct wr *w, int n)
{
	for (int i = 0; i < n; i++)
		free(w[i].data);
}

/* Pipelined reads of random ranges, checked against @ref. */
static void read_check(struct peer *p, uint64_t id, uint32_t version,
		       const uint8_t *ref, uint32_t length, int n)
{
	uint64_t rid[16];
	uint32_t off[16], size[16];
	struct sw_frame_hdr hdr;

	for (int i = 0; i < n; i++) {
		uint32_t size_any = (uint32_t)below(SW_IO_MAX + 1);

		off[i] = pick_off(0, CS);
		size[i] = SW_MIN(size_any, CS - off[i]);
		rid[i] = send_read(p, id, version, off[i], size[i], TOK_GOOD);
	}
	for (int k = 0; k < n; k++) {
		Sweepfs__CsReadReply *r =
			(Sweepfs__CsReadReply *)recv_reply(p, &hdr);
		int i = 0;
		uint32_t want;

		while (i < n && rid[i] != hdr.id)
			i++;
		if (i == n || reply_err(&r->base))
			fail("read reply %" PRIu64 " (%u+%u): %d", hdr.id,
			     i < n ? off[i] : 0, i < n ? size[i] : 0,
			     reply_err(&r->base));
		want = off[i] >= length ? 0 : SW_MIN(size[i], length - off[i]);
		if (r->data.len != want ||
		    (want && memcmp(r->data.data, ref + off[i], want)))
			fail("read %u+%u of chunk %" PRIx64 ": wrong data "
			     "(%zu bytes, want %u)",
			     off[i], size[i], id, r->data.len, want);
		sweepfs__cs_read_reply__free_unpacked(r, NULL);
	}
}

/* Read the whole chunk and compare it with @ref. */
static void full_check(struct peer *p, uint64_t id, uint32_t version,
		       const uint8_t *ref, uint32_t length)
{
	uint8_t *buf = malloc(SW_IO_MAX);

	for (uint32_t off = 0; off < CS; off += SW_IO_MAX) {
		int n = cs_read(p, id, version, off, SW_IO_MAX, buf, TOK_GOOD);
		uint32_t want = off >= length ? 0 :
						SW_MIN(SW_IO_MAX, length - off);

		if (n != (int)want || memcmp(buf, ref + off, want))
			fail("chunk %" PRIx64 " at %u: %d bytes, want %u, or "
			     "wrong data",
			     id, off, n, want);
	}
	free(buf);
}

static void expect_rc(int got, int want, const char *what)
{
	if (got != want)
		fail("%s: got %d (%s), want %d (%s)", what, got, strerror(-got),
		     want, strerror(-want));
}

/* ---- the scenario -------------------------------------------------------------- */

static struct mconn ma, mb;
static struct peer cl; /* the main client, on chunkserver a */
static uint8_t *ref1, *ref3, *ref4;
static uint32_t len1, len3, len4;

static void t_register(void)
{
	uint8_t buf[16];
	char want[64];
	uint64_t held;
	int rc = -EAGAIN;

	cs_setup(&cs_a, 2);
	cs_start(&cs_a);
	/* A master that cannot prove it holds the chunkserver key gets no
	 * registration (it could hand out a token key and commands). */
	master.wrong_proof = true;
	master_accept(&ma, false);
	{
		struct sw_frame_hdr hdr;
		uint8_t *payload;

		/* It closes the connection (and tries again later). */
		if (peer_recv(&ma.p, &hdr, &payload, TIMEOUT_MS) != -ECONNRESET)
			fail("the chunkserver went on with a master that did "
			     "not prove the key");
	}
	peer_close(&ma.p);
	master.wrong_proof = false;
	step("a master without the chunkserver key is refused");
	held = master_accept(&ma, true);
	snprintf(want, sizeof(want), "127.0.0.1:%u", cs_a.port);
	if (strcmp(ma.listen, want) || ma.ninv || ma.server_id)
		fail("first registration: listen %s, %d chunks, id %" PRIx64,
		     ma.listen, ma.ninv, ma.server_id);
	client_open(&cl, cs_a.port, SWEEPFS__ROLE__ROLE_MOUNT);
	expect_rc(cs_read(&cl, 1, 1, 0, 10, buf, TOK_GOOD), -EAGAIN,
		  "read before the master gave a key");
	reply_register(&ma, held);
	for (int i = 0; i < 100 && rc == -EAGAIN; i++) {
		usleep(20000);
		rc = cs_read(&cl, 1, 1, 0, 10, buf, TOK_GOOD);
	}
	expect_rc(rc, -ENOENT, "read of a chunk that does not exist");
	step("registration, EAGAIN without a key, ENOENT");
}

static void t_create(void)
{
	Sweepfs__CsCommand c = SWEEPFS__CS_COMMAND__INIT;
	char path[600];

	expect_rc(cmd_simple(&ma, SWEEPFS__CS_COMMAND__OP__CREATE, 1, 1), 0,
		  "CREATE");
	if (!chunk_file(&cs_a, 1, 1, path, sizeof(path)))
		fail("no chunk file after CREATE");
	expect_rc(cmd_simple(&ma, SWEEPFS__CS_COMMAND__OP__CREATE, 1, 1),
		  -EEXIST, "CREATE twice");
	c.op = SWEEPFS__CS_COMMAND__OP__REPLICATE;
	c.chunk_id = 9;
	c.version = 1;
	expect_rc(master_cmd(&ma, &c), -EINVAL, "REPLICATE without a source");
	c.op = SWEEPFS__CS_COMMAND__OP__SET_VERSION;
	expect_rc(master_cmd(&ma, &c), -EINVAL, "SET_VERSION without old");
	c.op = 99;
	expect_rc(master_cmd(&ma, &c), -EINVAL, "unknown command");
	step("CREATE, EEXIST, malformed commands");
}

static void t_io(void)
{
	static const uint32_t edges[][2] = {
		{ 0, 1 },
		{ BS - 1, 2 },
		{ BS, BS },
		{ CS - 1, 1 },
		{ CS - BS - 1, BS + 1 },
		{ 3 * BS + 1, SW_IO_MAX },
		{ CS - SW_IO_MAX, SW_IO_MAX },
	};
	struct wr w[8];

	ref1 = calloc(1, CS);
	for (size_t i = 0; i < SW_ARRAY_SIZE(edges); i++) {
		uint32_t off = edges[i][0], size = edges[i][1];

		fill(ref1 + off, size);
		expect_rc(cs_write(&cl, 1, 1, off, ref1 + off, size, TOK_GOOD),
			  0, "write at an edge");
		len1 = SW_MAX(len1, off + size);
	}
	full_check(&cl, 1, 1, ref1, len1);
	memset(ref1, 0, CS);
	expect_rc(cmd_simple(&ma, SWEEPFS__CS_COMMAND__OP__DELETE, 1, 1), 0,
		  "DELETE");
	expect_rc(cmd_simple(&ma, SWEEPFS__CS_COMMAND__OP__CREATE, 1, 1), 0,
		  "CREATE again");
	len1 = 0;
	for (int round = 0; round < 20; round++) {
		send_writes(&cl, 1, 1, round < 10 ? 8u << 20 : CS, w, 8);
		for (int i = 0; i < 8; i++)
			ack_one(&cl, w, 8, ref1, &len1);
		free_writes(w, 8);
		read_check(&cl, 1, 1, ref1, len1, 8);
		master_idle(&ma);
	}
	full_check(&cl, 1, 1, ref1, len1);
	step("pipelined random writes and reads");
}

static void t_errors(void)
{
	Sweepfs__Hello h = SWEEPFS__HELLO__INIT;
	Sweepfs__PingReq ping = SWEEPFS__PING_REQ__INIT;
	uint8_t buf[64], *payload;
	struct sw_frame_hdr hdr;
	struct peer x;
	ProtobufCMessage *r;

	expect_rc(cs_read(&cl, 1, 1, 0, 10, buf, TOK_FORGED), -EACCES,
		  "forged token");
	expect_rc(cs_read(&cl, 1, 1, 0, 10, buf, TOK_EXPIRED), -EACCES,
		  "expired token");
	expect_rc(cs_read(&cl, 1, 1, 0, 10, buf, TOK_NONE), -EACCES,
		  "no token");
	expect_rc(cs_write(&cl, 1, 1, 0, buf, 10, TOK_READ), -EACCES,
		  "write with a read token");
	expect_rc(cs_write(&cl, 1, 1, 0, buf, 10, TOK_FORGED), -EACCES,
		  "write with a forged token");
	expect_rc(cs_read(&cl, 1, 2, 0, 10, buf, TOK_GOOD), -ESTALE,
		  "read at another version");
	expect_rc(cs_write(&cl, 1, 7, 0, buf, 10, TOK_GOOD), -ESTALE,
		  "write at another version");
	expect_rc(cs_read(&cl, 999, 1, 0, 10, buf, TOK_GOOD), -ENOENT,
		  "unknown chunk");
	expect_rc(cs_read(&cl, 1, 1, CS - 10, 20, buf, TOK_GOOD), -EINVAL,
		  "read past the chunk");
	expect_rc(cs_read(&cl, 1, 1, 0, SW_IO_MAX + 1, buf, TOK_GOOD), -EINVAL,
		  "read over SW_IO_MAX");
	expect_rc(cs_write(&cl, 1, 1, CS - 5, buf, 10, TOK_GOOD), -EINVAL,
		  "write past the chunk");
	peer_request(&cl, SW_MSG_GETATTR, NULL);
	r = recv_reply(&cl, &hdr);
	expect_rc(reply_err(r), -ENOSYS, "metadata request");
	protobuf_c_message_free_unpacked(r, NULL);
	ping.has_token = 1;
	ping.token = 0x1234;
	peer_request(&cl, SW_MSG_PING, &ping.base);
	r = recv_reply(&cl, &hdr);
	if (reply_err(r) || !((Sweepfs__PingReply *)r)->has_token ||
	    ((Sweepfs__PingReply *)r)->token != 0x1234)
		fail("ping");
	protobuf_c_message_free_unpacked(r, NULL);
	/* A wrong protocol version is refused, and the connection ends. */
	x.fd = sw_tcp_connect("127.0.0.1", cs_a.port, TIMEOUT_MS);
	sw_buf_init(&x.in);
	x.next_id = 1;
	h.version = 99;
	h.role = SWEEPFS__ROLE__ROLE_MOUNT;
	peer_request(&x, SW_MSG_HELLO, &h.base);
	r = recv_reply(&x, &hdr);
	expect_rc(reply_err(r), -EPROTONOSUPPORT, "hello version 99");
	protobuf_c_message_free_unpacked(r, NULL);
	expect_rc(peer_recv(&x, &hdr, &payload, TIMEOUT_MS), -ECONNRESET,
		  "connection after a refused hello");
	peer_close(&x);
	/* A request before the hello costs the connection. */
	x.fd = sw_tcp_connect("127.0.0.1", cs_a.port, TIMEOUT_MS);
	send_read(&x, 1, 1, 0, 10, TOK_GOOD);
	expect_rc(peer_recv(&x, &hdr, &payload, TIMEOUT_MS), -ECONNRESET,
		  "request before hello");
	peer_close(&x);
	step("EACCES, ESTALE, ENOENT, EINVAL, ENOSYS, ping, bad hellos");
}

static void t_versions(void)
{
	Sweepfs__CsCommand c = SWEEPFS__CS_COMMAND__INIT;
	uint8_t *buf = malloc(SW_IO_MAX);
	char path[600];

	c.op = SWEEPFS__CS_COMMAND__OP__SET_VERSION;
	c.chunk_id = 1;
	c.version = 2;
	c.has_old_version = 1;
	c.old_version = 1;
	expect_rc(master_cmd(&ma, &c), 0, "SET_VERSION");
	if (chunk_file(&cs_a, 1, 1, path, sizeof(path)) ||
	    !chunk_file(&cs_a, 1, 2, path, sizeof(path)))
		fail("SET_VERSION did not rename the chunk file");
	expect_rc(master_cmd(&ma, &c), -ESTALE, "SET_VERSION from a stale one");
	expect_rc(cs_read(&cl, 1, 1, 0, 10, buf, TOK_GOOD), -ESTALE,
		  "read at the old version");
	full_check(&cl, 1, 2, ref1, len1);

	c = (Sweepfs__CsCommand)SWEEPFS__CS_COMMAND__INIT;
	c.op = SWEEPFS__CS_COMMAND__OP__DUPLICATE;
	c.chunk_id = 2;
	c.version = 1;
	c.has_src_chunk_id = c.has_src_version = 1;
	c.src_chunk_id = 1;
	c.src_version = 2;
	expect_rc(master_cmd(&ma, &c), 0, "DUPLICATE");
	full_check(&cl, 2, 1, ref1, len1);
	expect_rc(master_cmd(&ma, &c), -EEXIST, "DUPLICATE twice");

	c = (Sweepfs__CsCommand)SWEEPFS__CS_COMMAND__INIT;
	c.op = SWEEPFS__CS_COMMAND__OP__TRUNCATE;
	c.chunk_id = 2;
	c.version = 1;
	c.has_length = 1;
	c.length = 100000;
	expect_rc(master_cmd(&ma, &c), 0, "TRUNCATE");
	if (cs_read(&cl, 2, 1, 0, SW_IO_MAX, buf, TOK_GOOD) != 100000 ||
	    memcmp(buf, ref1, 100000))
		fail("chunk 2 after TRUNCATE");
	c.version = 3;
	c.has_old_version = 1;
	c.old_version = 1;
	c.length = 5000;
	expect_rc(master_cmd(&ma, &c), 0, "TRUNCATE with a new version");
	if (cs_read(&cl, 2, 3, 0, SW_IO_MAX, buf, TOK_GOOD) != 5000 ||
	    memcmp(buf, ref1, 5000) ||
	    !chunk_file(&cs_a, 2, 3, path, sizeof(path)))
		fail("chunk 2 after TRUNCATE to version 3");
	expect_rc(cmd_simple(&ma, SWEEPFS__CS_COMMAND__OP__DELETE, 1, 1),
		  -ESTALE, "DELETE of an older version than held");
	expect_rc(cmd_simple(&ma, SWEEPFS__CS_COMMAND__OP__DELETE, 2, 3), 0,
		  "DELETE");
	if (chunk_file(&cs_a, 2, 3, path, sizeof(path)))
		fail("chunk file still there after DELETE");
	expect_rc(cmd_simple(&ma, SWEEPFS__CS_COMMAND__OP__DELETE, 2, 3),
		  -ENOENT, "DELETE twice");
	full_check(&cl, 1, 2, ref1, len1);
	free(buf);
	step("SET_VERSION, DUPLICATE, TRUNCATE, DELETE");
}

static void t_damage(void)
{
	uint8_t *buf = malloc(BS), x;
	char path[600];
	int fd;

	ref3 = calloc(1, CS);
	len3 = 4 * BS;
	fill(ref3, len3);
	expect_rc(cmd_simple(&ma, SWEEPFS__CS_COMMAND__OP__CREATE, 3, 1), 0,
		  "CREATE 3");
	expect_rc(cs_write(&cl, 3, 1, 0, ref3, len3, TOK_GOOD), 0, "write 3");
	expect_rc(cs_sync(&cl, 3, 1), 0, "CS_SYNC");
	if (!chunk_file(&cs_a, 3, 1, path, sizeof(path)))
		fail("no file for chunk 3");
	fd = open(path, O_WRONLY);
	x = ref3[2 * BS + 100] ^ 0x80;
	if (fd < 0 || pwrite(fd, &x, 1, DATA_OFF + 2 * BS + 100) != 1)
		fail("cannot corrupt %s", path);
	close(fd);
	expect_rc(cs_read(&cl, 3, 1, 2 * BS, 10, buf, TOK_GOOD), -EIO,
		  "read of a corrupted block");
	for (int i = 0; i < 50 && !ma.ndamaged; i++)
		master_pump(&ma, 100, false, NULL);
	if (ma.damaged_id != 3)
		fail("the master heard of no damaged chunk 3");
	if (cs_read(&cl, 3, 1, BS, BS, buf, TOK_GOOD) != BS ||
	    memcmp(buf, ref3 + BS, BS) ||
	    cs_read(&cl, 3, 1, 3 * BS, BS, buf, TOK_GOOD) != BS ||
	    memcmp(buf, ref3 + 3 * BS, BS))
		fail("blocks next to the corrupted one");
	free(buf);
	step("a corrupted block: EIO, CS_DAMAGED, the rest reads");
}

static void t_bad_peers(void)
{
	uint8_t garbage[SW_FRAME_HDR + 8], *payload;
	struct sw_frame_hdr hdr = { .len = 8, .type = SW_MSG_CS_READ, .id = 5 };
	uint8_t *buf = malloc(SW_IO_MAX);
	struct peer x, y, z;
	uint64_t first;
	int64_t t0;

	client_open(&x, cs_a.port, SWEEPFS__ROLE__ROLE_MOUNT);
	sw_frame_put_hdr(garbage, &hdr);
	memset(garbage + SW_FRAME_HDR, 0xff, 8);
	sw_write_all(x.fd, garbage, sizeof(garbage));
	expect_rc(peer_recv(&x, &hdr, &payload, TIMEOUT_MS), -ECONNRESET,
		  "an unparsable request");
	peer_close(&x);

	client_open(&y, cs_a.port, SWEEPFS__ROLE__ROLE_MOUNT);
	hdr.len = 100;
	sw_frame_put_hdr(garbage, &hdr);
	sw_write_all(y.fd, garbage, SW_FRAME_HDR + 8);
	t0 = sw_mono_ns();
	expect_rc(peer_recv(&y, &hdr, &payload, TIMEOUT_MS), -ECONNRESET,
		  "a peer stalled mid-frame");
	if (sw_mono_ns() - t0 > 5 * SW_NSEC_PER_SEC)
		fail("the stalled peer was dropped only after %lld ms",
		     (long long)((sw_mono_ns() - t0) / 1000000));
	peer_close(&y);

	/* A client that reads no replies is held back; others are not. */
	client_open(&z, cs_a.port, SWEEPFS__ROLE__ROLE_MOUNT);
	client_open(&x, cs_a.port, SWEEPFS__ROLE__ROLE_MOUNT);
	first = x.next_id;
	for (int i = 0; i < 100; i++)
		send_read(&x, 1, 2, (uint32_t)(i % 64) << 20, SW_IO_MAX,
			  TOK_GOOD);
	usleep(500000);
	t0 = sw_mono_ns();
	if (cs_read(&z, 1, 2, 0, SW_IO_MAX, buf, TOK_GOOD) !=
		    (int)SW_MIN(SW_IO_MAX, len1) ||
	    memcmp(buf, ref1, SW_MIN(SW_IO_MAX, len1)))
		fail("a read next to a client that takes no replies");
	if (sw_mono_ns() - t0 > 5 * SW_NSEC_PER_SEC)
		fail("a read next to a slow client took %lld ms",
		     (long long)((sw_mono_ns() - t0) / 1000000));
	for (int i = 0; i < 100; i++) {
		Sweepfs__CsReadReply *r =
			(Sweepfs__CsReadReply *)recv_reply(&x, &hdr);
		uint32_t off = (uint32_t)((hdr.id - first) % 64) << 20;
		uint32_t want = off >= len1 ? 0 : SW_MIN(SW_IO_MAX, len1 - off);

		if (reply_err(&r->base) || r->data.len != want ||
		    (want && memcmp(r->data.data, ref1 + off, want)))
			fail("read %" PRIu64 " of the slow client", hdr.id);
		sweepfs__cs_read_reply__free_unpacked(r, NULL);
	}
	peer_close(&x);
	peer_close(&z);
	free(buf);
	master_idle(&ma);
	step("unparsable frame, stalled peer, a client that reads nothing");
}

/* Check chunk 4 after the crash: acknowledged bytes are there, bytes of
 * writes in flight at the kill are old or new. */
static void check_after_crash(struct peer *p, const struct wr *w, int n)
{
	uint8_t *buf = malloc(SW_IO_MAX);

	for (uint32_t off = 0; off < CS; off += SW_IO_MAX) {
		int got = cs_read(p, 4, 1, off, SW_IO_MAX, buf, TOK_GOOD);
		uint32_t want = off >= len4 ? 0 : SW_MIN(SW_IO_MAX, len4 - off);

		if (got < (int)want)
			fail("chunk 4 at %u after the crash: %d (%s)", off, got,
			     got < 0 ? strerror(-got) : "short");
		for (uint32_t i = 0; i < (uint32_t)got; i++) {
			uint32_t at = off + i;
			bool ok = buf[i] == ref4[at];

			for (int k = 0; k < n && !ok; k++)
				ok = !w[k].acked && at >= w[k].off &&
				     at < w[k].off + w[k].size &&
				     buf[i] == w[k].data[at - w[k].off];
			if (!ok)
				fail("chunk 4 byte %u after the crash", at);
		}
	}
	free(buf);
}

static bool inv_has(const struct mconn *m, uint64_t id, uint32_t version)
{
	for (int i = 0; i < m->ninv; i++)
		if (m->inv[i].id == id && m->inv[i].version == version)
			return true;
	return false;
}

static void t_crash(void)
{
	struct wr w[16];
	int acked = 0;

	ref4 = calloc(1, CS);
	expect_rc(cmd_simple(&ma, SWEEPFS__CS_COMMAND__OP__CREATE, 4, 1), 0,
		  "CREATE 4");
	for (int round = 0; round < 3; round++) {
		send_writes(&cl, 4, 1, CS, w, 8);
		for (int i = 0; i < 8; i++)
			ack_one(&cl, w, 8, ref4, &len4);
		free_writes(w, 8);
	}
	expect_rc(cs_sync(&cl, 4, 1), 0, "CS_SYNC of chunk 4");
	/* Overwrite: some of these are in flight at the kill. */
	send_writes(&cl, 4, 1, CS, w, 16);
	for (; acked < 4 + (int)below(6); acked++)
		ack_one(&cl, w, 16, ref4, &len4);
	cs_kill(&cs_a);
	peer_close(&cl);
	peer_close(&ma.p);

	cs_start(&cs_a);
	master_accept(&ma, false);
	if (ma.server_id != SERVER_ID)
		fail("re-registration with server id %" PRIx64, ma.server_id);
	if (ma.ninv != 3 || !inv_has(&ma, 1, 2) || !inv_has(&ma, 3, 1) ||
	    !inv_has(&ma, 4, 1))
		fail("inventory after the restart: %d chunks", ma.ninv);
	client_open(&cl, cs_a.port, SWEEPFS__ROLE__ROLE_MOUNT);
	check_after_crash(&cl, w, 16);
	free_writes(w, 16);
	full_check(&cl, 1, 2, ref1, len1);
	printf("    (%d of 16 writes acknowledged at the kill)\n", acked);
	step("kill -9 during writes: data intact, re-registration");
}

static void t_master_gone(void)
{
	uint8_t *buf = malloc(SW_IO_MAX);

	peer_close(&ma.p);
	if (cs_read(&cl, 1, 2, 0, SW_IO_MAX, buf, TOK_GOOD) !=
	    (int)SW_MIN(SW_IO_MAX, len1))
		fail("read while the master is away");
	master_accept(&ma, false);
	if (ma.server_id != SERVER_ID || ma.ninv != 3)
		fail("re-registration after a lost master connection");
	free(buf);
	step("master connection lost: clients served, re-registration");
}

static void t_replicate(void)
{
	Sweepfs__CsCommand c = SWEEPFS__CS_COMMAND__INIT;
	struct tok t = make_tok(1, 2, SW_TOKEN_READ, TOK_GOOD);
	char src[64], path[600];
	struct peer pb;

	cs_setup(&cs_b, 1);
	cs_start(&cs_b);
	master_accept(&mb, false);
	snprintf(src, sizeof(src), "127.0.0.1:%u", cs_a.port);
	c.op = SWEEPFS__CS_COMMAND__OP__REPLICATE;
	c.chunk_id = 1;
	c.version = 2;
	c.source = src;
	c.has_token = c.has_expires = 1;
	c.token.data = t.b;
	c.token.len = sizeof(t.b);
	c.expires = t.expires;
	expect_rc(master_cmd(&mb, &c), 0, "REPLICATE");
	if (!chunk_file(&cs_b, 1, 2, path, sizeof(path)))
		fail("no chunk file on b after REPLICATE");
	client_open(&pb, cs_b.port, SWEEPFS__ROLE__ROLE_MOUNT);
	full_check(&pb, 1, 2, ref1, len1);
	peer_close(&pb);
	expect_rc(master_cmd(&mb, &c), -EEXIST, "REPLICATE twice");
	c.chunk_id = 4;
	c.version = 1;
	expect_rc(master_cmd(&mb, &c), -EACCES, "REPLICATE with a bad token");
	if (chunk_file(&cs_b, 4, 1, path, sizeof(path)))
		fail("a failed REPLICATE left a file");
	master_idle(&ma);
	step("REPLICATE from a peer chunkserver");
}

/* The background threads of @pid run at best-effort 7 and nice 19. */
static void check_bg_priority(pid_t pid)
{
	char dir[64], path[400], comm[32];
	struct dirent *de;
	int found = 0;
	DIR *dp;

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	dp = opendir(dir);
	if (!dp)
		fail("%s: %s", dir, strerror(errno));
	while ((de = readdir(dp))) {
		FILE *f;
		long prio;

		snprintf(path, sizeof(path), "%s/%s/comm", dir, de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(comm, sizeof(comm), f) ||
		    strncmp(comm, "cs-bg", 5)) {
			fclose(f);
			continue;
		}
		fclose(f);
		prio = syscall(SYS_ioprio_get, 1, atoi(de->d_name));
		if (prio != ((2 << 13) | 7))
			fail("thread %s has I/O priority %#lx", de->d_name,
			     prio);
		found++;
	}
	closedir(dp);
	if (!found)
		fail("no cs-bg threads");
}

static void t_delete_priority(void)
{
	char path[600];

	check_bg_priority(cs_a.pid);
	expect_rc(cmd_simple(&ma, SWEEPFS__CS_COMMAND__OP__DELETE, 3, 1), 0,
		  "DELETE 3");
	if (chunk_file(&cs_a, 3, 1, path, sizeof(path)))
		fail("chunk 3 still there");
	step("deletions on threads at I/O priority best-effort 7");
}

int main(int argc, char **argv)
{
	uint64_t seed = (uint64_t)sw_now_ns();
	int opt;

	while ((opt = getopt(argc, argv, "b:d:s:")) != -1) {
		if (opt == 'b')
			cs_bin = optarg;
		else if (opt == 'd')
			work_dir = optarg;
		else if (opt == 's')
			seed = strtoull(optarg, NULL, 0);
		else
			return 2;
	}
	if (!cs_bin || !work_dir) {
		fprintf(stderr, "usage: cs_driver -b CHUNKSERVER -d DIR "
				"[-s SEED]\n");
		return 2;
	}
	printf("seed %" PRIu64 "\n", seed);
	rng_state = seed | 1;
	fill(key, sizeof(key));
	signal(SIGPIPE, SIG_IGN);
	snprintf(master.key_file, sizeof(master.key_file), "%s/cs.key",
		 work_dir);
	unlink(master.key_file);
	if (sw_auth_key_create(master.key_file, master.key) < 0)
		fail("cannot make %s", master.key_file);
	master_listen();
	t_register();
	t_create();
	t_io();
	t_errors();
	t_versions();
	t_damage();
	t_bad_peers();
	t_crash();
	t_master_gone();
	t_replicate();
	t_delete_priority();
	peer_close(&cl);
	cs_stop(&cs_a);
	cs_stop(&cs_b);
	step("SIGTERM: clean exit");
	peer_close(&ma.p);
	peer_close(&mb.p);
	free(ref1);
	free(ref3);
	free(ref4);
	printf("PASS\n");
	return 0;
}
