/*
 * peer.h: raw framed connections for the hostile test clients.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "net.h"
#include "peer.h"
#include "util.h"

/* ---- failing ----------------------------------------------------------- */

void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void ok(const char *fmt, ...)
{
	va_list ap;

	printf("ok - ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

uint64_t rng_state;

uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

int64_t now_ms(void)
{
	return sw_mono_ns() / 1000000;
}

void alive(pid_t pid, const char *who)
{
	if (kill(pid, 0) < 0)
		fail("the %s (pid %d) is gone", who, (int)pid);
}

/* ---- raw connections ------------------------------------------------------ */

ProtobufCBinaryData bin(const void *p, size_t n)
{
	return (ProtobufCBinaryData){ n, (uint8_t *)p };
}

ProtobufCBinaryData str(const char *s)
{
	return bin(s, strlen(s));
}

void must(int err, const char *what)
{
	if (err)
		fail("%s: %s", what, strerror(err));
}

void expect(int err, int want, const char *what)
{
	if (err != want)
		fail("%s: got %s, want %s", what,
		     err ? strerror(err) : "success",
		     want ? strerror(want) : "success");
}

long rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		fail("cannot read %s", path);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

int peer_rcvbuf;

/* A blocking connect to 127.0.0.1:@port with SO_RCVBUF @rcvbuf set
 * first (the window is chosen at the handshake). */
static int connect_small(uint16_t port, int rcvbuf)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) <
		    0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

void peer_connect(struct peer *p, uint16_t port)
{
	memset(p, 0, sizeof(*p));
	p->fd = peer_rcvbuf ? connect_small(port, peer_rcvbuf) :
			      sw_tcp_connect("127.0.0.1", port, TIMEOUT_MS);
	if (p->fd < 0)
		fail("connect to port %u: %s", port, strerror(-p->fd));
	p->next_id = 1;
	p->port = port;
	p->max = SW_FRAME_MAX_DATA;
}

void peer_close(struct peer *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	sw_buf_release(&p->in);
}

int write_all(int fd, const void *buf, size_t n)
{
	const uint8_t *q = buf;

	while (n) {
		ssize_t w = send(fd, q, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		q += w;
		n -= (size_t)w;
	}
	return 0;
}

void peer_raw(struct peer *p, const void *buf, size_t n)
{
	int rc = write_all(p->fd, buf, n);

	if (rc < 0)
		fail("send to port %u: %s", p->port, strerror(-rc));
}

/* Send a frame; returns its id. */
/*
 * Node handles (sweepfs.proto, "Node handles") every reply to this process
 * gave, by inode, direct-mapped: a test process is one client machine,
 * whose connections all know what any of them was told. Inode numbers
 * are mostly consecutive, so they seldom collide; a collision forgets the
 * older one.
 */
#define HANDLE_SLOTS (1u << 18)

static struct sw_handle_slot handles[HANDLE_SLOTS];

static void handle_learn(void *arg, const Sweepfs__Attr *a)
{
	(void)arg;
	if (a->has_handle)
		handles[a->ino % HANDLE_SLOTS] =
			(struct sw_handle_slot){ a->ino, a->handle };
}

static uint64_t handle_of(void *arg, uint64_t ino)
{
	(void)arg;
	return peer_handle(ino);
}

/*
 * The batches in flight: the nodes each makes, by request id, whose
 * handles its reply gives in order (BatchReply.handles). Ids are per
 * connection; a test's batches in flight at once are few, and a reply
 * matched to another connection's batch of the same id only teaches a
 * wrong handle, which the master then refuses.
 */
#define BATCHES 64

static struct batch_sent {
	uint64_t id;
	size_t n;
	uint64_t *inos; /* 0: no node made */
	bool *dirs;
} batches[BATCHES];
static unsigned batches_next;

static void batch_sent(uint64_t id, const Sweepfs__BatchReq *q)
{
	struct batch_sent *b = &batches[batches_next++ % BATCHES];

	free(b->inos);
	free(b->dirs);
	b->id = id;
	b->n = q->n_ops;
	b->inos = calloc(q->n_ops ? q->n_ops : 1, sizeof(*b->inos));
	b->dirs = calloc(q->n_ops ? q->n_ops : 1, sizeof(*b->dirs));
	if (!b->inos || !b->dirs)
		fail("out of memory");
	for (size_t i = 0; i < q->n_ops; i++) {
		b->inos[i] = q->ops[i]->has_ino ? q->ops[i]->ino : 0;
		b->dirs[i] = S_ISDIR(q->ops[i]->mode);
	}
}

static void batch_answered(uint64_t id, const Sweepfs__BatchReply *r)
{
	for (unsigned k = 0; k < BATCHES; k++) {
		struct batch_sent *b = &batches[k];

		if (!b->inos || b->id != id)
			continue;
		/* Files into free slots only: a batch makes thousands at
		 * once, which would push out the directories they are in
		 * (and tests name what they make in bulk by name). */
		for (size_t i = 0; i < b->n && i < r->n_handles; i++) {
			struct sw_handle_slot *s =
				&handles[b->inos[i] % HANDLE_SLOTS];

			if (b->inos[i] && r->handles[i] &&
			    (b->dirs[i] || !s->handle))
				*s = (struct sw_handle_slot){ b->inos[i],
							      r->handles[i] };
		}
		free(b->inos);
		free(b->dirs);
		b->inos = NULL;
		b->dirs = NULL;
		return;
	}
}

/* Learn the handles a reply carries, however its reader takes it. */
static void learn(const struct sw_frame_hdr *hdr, const uint8_t *payload)
{
	const struct sw_msg_info *info = sw_msg_info(hdr->type);
	ProtobufCMessage *m;

	if (!(hdr->flags & SW_FRAME_REPLY) || !info || !info->reply)
		return;
	m = protobuf_c_message_unpack(info->reply, NULL, hdr->len, payload);
	if (!m)
		return; /* its reader says what is wrong with it */
	sw_msg_attrs(m, handle_learn, NULL);
	if (hdr->type == SW_MSG_BATCH)
		batch_answered(hdr->id, (const Sweepfs__BatchReply *)m);
	protobuf_c_message_free_unpacked(m, NULL);
}

uint64_t peer_handle(uint64_t ino)
{
	const struct sw_handle_slot *s = &handles[ino % HANDLE_SLOTS];

	return s->ino == ino ? s->handle : 0;
}

void peer_handle_set(uint64_t ino, uint64_t handle)
{
	handles[ino % HANDLE_SLOTS] = (struct sw_handle_slot){ ino, handle };
}

void peer_vouch(uint16_t type, ProtobufCMessage *msg,
		uint64_t h[SW_HANDLES_MAX])
{
	(void)sw_msg_vouch(type, msg, handle_of, NULL, h);
}

void peer_claim(Sweepfs__OpenClaim *c, uint64_t ino, uint32_t flags,
		Sweepfs__Cred *cred)
{
	sweepfs__open_claim__init(c);
	c->ino = ino;
	c->flags = flags;
	c->cred = cred;
	c->handle = peer_handle(ino);
	c->has_handle = c->handle != 0;
}

uint64_t peer_send(struct peer *p, uint16_t type, uint16_t flags,
		   const ProtobufCMessage *msg)
{
	ProtobufCMessage *q = (ProtobufCMessage *)msg; /* put back below */
	uint64_t id = p->next_id++, h[SW_HANDLES_MAX];
	size_t vouched = p->raw ? 0 : sw_msg_vouch(type, q, handle_of, NULL, h);
	size_t size = sw_frame_size(msg);
	uint8_t *buf = malloc(size);

	if (!buf)
		fail("out of memory");
	sw_frame_pack(buf, type, flags, id, msg);
	if (vouched)
		sw_msg_set_handles(q, NULL, 0);
	if (type == SW_MSG_BATCH &&
	    msg->descriptor == &sweepfs__batch_req__descriptor)
		batch_sent(id, (const Sweepfs__BatchReq *)msg);
	peer_raw(p, buf, size);
	free(buf);
	return id;
}

/*
 * The next frame from @p within @timeout_ms: 1 with its header and a
 * copy of its payload in *@payload (free it), 0 when the peer closed the
 * connection (EOF or reset), -ETIMEDOUT.
 */
int peer_recv(struct peer *p, struct sw_frame_hdr *hdr, uint8_t **payload,
	      int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;

	for (;;) {
		struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
		int rc = sw_frame_get_hdr(sw_buf_head(&p->in),
					  sw_buf_used(&p->in), p->max, hdr);
		int64_t left = deadline - now_ms();
		ssize_t n;

		if (rc < 0)
			fail("port %u sent a bad frame header", p->port);
		if (rc > 0 && sw_buf_used(&p->in) >= SW_FRAME_HDR + hdr->len) {
			*payload = malloc(hdr->len + 1);
			if (!*payload)
				fail("out of memory");
			memcpy(*payload, sw_buf_head(&p->in) + SW_FRAME_HDR,
			       hdr->len);
			sw_buf_consume(&p->in, SW_FRAME_HDR + hdr->len);
			learn(hdr, *payload);
			return 1;
		}
		if (left <= 0)
			return -ETIMEDOUT;
		rc = poll(&pfd, 1, (int)left);
		if (rc < 0 && errno != EINTR)
			fail("poll: %s", strerror(errno));
		if (rc <= 0)
			continue;
		if (sw_buf_reserve(&p->in, 1 << 20) < 0)
			fail("out of memory");
		n = recv(p->fd, p->in.data + p->in.len, p->in.cap - p->in.len,
			 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == ECONNRESET)
			return 0;
		if (n < 0)
			fail("recv from port %u: %s", p->port, strerror(errno));
		if (n == 0) {
			if (sw_buf_used(&p->in))
				fail("port %u closed in the middle of a frame",
				     p->port);
			return 0;
		}
		p->in.len += (size_t)n;
	}
}

/*
 * The reply to request @id of @type: unpacked, its error in *@err.
 * Notifications (the master's cache invalidations) are checked and
 * skipped.
 */
ProtobufCMessage *peer_reply(struct peer *p, uint16_t type, uint64_t id,
			     int *err)
{
	const struct sw_msg_info *info = sw_msg_info(type);
	struct sw_frame_hdr hdr;
	ProtobufCMessage *m;
	uint8_t *payload;
	int rc;

	while ((rc = peer_recv(p, &hdr, &payload, TIMEOUT_MS)) == 1 &&
	       hdr.flags == SW_FRAME_NOTIFY && sw_msg_info(hdr.type)) {
		m = protobuf_c_message_unpack(sw_msg_info(hdr.type)->req, NULL,
					      hdr.len, payload);
		free(payload);
		if (!m)
			fail("an unparsable notification from port %u",
			     p->port);
		protobuf_c_message_free_unpacked(m, NULL);
	}
	if (rc == 0)
		fail("port %u closed the connection instead of answering "
		     "type %u",
		     p->port, type);
	if (rc < 0)
		fail("no answer from port %u to type %u: %s", p->port, type,
		     strerror(-rc));
	if (hdr.flags != SW_FRAME_REPLY || hdr.type != type || hdr.id != id)
		fail("port %u answered type %u id %" PRIu64 " with type %u id "
		     "%" PRIu64 " flags %#x",
		     p->port, type, id, hdr.type, hdr.id, hdr.flags);
	m = protobuf_c_message_unpack(info ? info->reply :
					     &sweepfs__status_reply__descriptor,
				      NULL, hdr.len, payload);
	free(payload);
	if (!m)
		fail("unparsable reply to type %u from port %u", type, p->port);
	*err = -sw_reply_err(m);
	return m;
}

/* Send a request and return its reply's error (positive errno or 0). */
int peer_call(struct peer *p, uint16_t type, const ProtobufCMessage *q)
{
	uint64_t id = peer_send(p, type, 0, q);
	int err;

	protobuf_c_message_free_unpacked(peer_reply(p, type, id, &err), NULL);
	return err;
}

int peer_entry(struct peer *p, uint16_t type, const ProtobufCMessage *q,
	       uint64_t *ino)
{
	Sweepfs__EntryReply *r;
	uint64_t id = peer_send(p, type, 0, q);
	int err;

	r = (Sweepfs__EntryReply *)peer_reply(p, type, id, &err);
	if (!err && ino && r->attr)
		*ino = r->attr->ino;
	sweepfs__entry_reply__free_unpacked(r, NULL);
	return err;
}

int peer_batch_one(struct peer *p, Sweepfs__BatchOp *op)
{
	Sweepfs__BatchReq q = SWEEPFS__BATCH_REQ__INIT;
	Sweepfs__BatchReply *r;
	uint64_t id;
	int err;

	q.n_ops = 1;
	q.ops = &op;
	id = peer_send(p, SW_MSG_BATCH, 0, &q.base);
	r = (Sweepfs__BatchReply *)peer_reply(p, SW_MSG_BATCH, id, &err);
	if (err)
		fail("batch: %s", strerror(err));
	if (r->n_errs != 1)
		fail("batch: %zu errors for one op", r->n_errs);
	err = r->errs[0]; /* positive errno, as all errors on the wire */
	sweepfs__batch_reply__free_unpacked(r, NULL);
	return err;
}

void peer_create_op(Sweepfs__BatchOp *op, Sweepfs__Cred *cred, uint64_t parent,
		    const char *name, uint32_t mode, uint64_t ino)
{
	sweepfs__batch_op__init(op);
	op->type = SWEEPFS__BATCH_TYPE__BATCH_CREATE;
	op->cred = cred;
	op->parent = parent;
	op->name = str(name);
	op->has_ino = op->has_mode = 1;
	op->ino = ino;
	op->mode = mode;
}

void peer_hello(struct peer *p, int role)
{
	Sweepfs__Hello h = SWEEPFS__HELLO__INIT;
	int err;

	h.version = SW_PROTO_VERSION;
	h.role = role;
	err = peer_call(p, SW_MSG_HELLO, &h.base);
	if (err)
		fail("hello to port %u: %s", p->port, strerror(err));
}

void peer_open(struct peer *p, uint16_t port)
{
	peer_connect(p, port);
	peer_hello(p, SWEEPFS__ROLE__ROLE_MOUNT);
}

int peer_args(int argc, char **argv, uint16_t *port, pid_t *pid,
	      const char *more, long *vals)
{
	char spec[32] = "m:p:";
	size_t n = strlen(spec);
	int opt;

	for (size_t i = 0; more[i] && n + 2 < sizeof(spec); i++) {
		spec[n++] = more[i];
		spec[n++] = ':';
	}
	spec[n] = '\0';
	while ((opt = getopt(argc, argv, spec)) != -1) {
		const char *at = opt != ':' && opt != '?' ? strchr(more, opt) :
							    NULL;

		if (opt == 'm')
			*port = (uint16_t)atoi(optarg);
		else if (opt == 'p')
			*pid = (pid_t)atoi(optarg);
		else if (at)
			vals[at - more] = atol(optarg);
		else
			return -1;
	}
	return *port && *pid ? 0 : -1;
}

bool peer_inval_all;

uint64_t peer_session(struct peer *p, uint16_t port, const char *subdir,
		      uint32_t cache_ms)
{
	Sweepfs__Hello h = SWEEPFS__HELLO__INIT;
	Sweepfs__HelloReply *r;
	uint64_t id, root;
	int err;

	peer_connect(p, port);
	h.version = SW_PROTO_VERSION;
	h.role = SWEEPFS__ROLE__ROLE_MOUNT;
	h.has_subdir = 1;
	h.subdir = str(subdir);
	h.has_cache_ms = 1;
	h.cache_ms = cache_ms;
	h.has_inval_all = peer_inval_all;
	h.inval_all = peer_inval_all;
	id = peer_send(p, SW_MSG_HELLO, 0, &h.base);
	r = (Sweepfs__HelloReply *)peer_reply(p, SW_MSG_HELLO, id, &err);
	if (err)
		fail("hello on %s: %s", subdir, strerror(err));
	root = r->root_ino;
	sweepfs__hello_reply__free_unpacked(r, NULL);
	return root;
}

void peer_ping(struct peer *p)
{
	Sweepfs__PingReq q = SWEEPFS__PING_REQ__INIT;
	Sweepfs__PingReply *r;
	uint64_t token = rnd(), id;
	int err;

	q.has_token = 1;
	q.token = token;
	id = peer_send(p, SW_MSG_PING, 0, &q.base);
	r = (Sweepfs__PingReply *)peer_reply(p, SW_MSG_PING, id, &err);
	if (err || !r->has_token || r->token != token)
		fail("ping on port %u: wrong answer", p->port);
	sweepfs__ping_reply__free_unpacked(r, NULL);
}

void peer_pinger_start(struct peer_pinger *pg, uint16_t port,
		       const char *subdir)
{
	int stop[2], out[2];
	double worst = 0;
	struct peer p;

	if (pipe(stop) < 0 || pipe(out) < 0)
		fail("pipe: %s", strerror(errno));
	pg->pid = fork();
	if (pg->pid < 0)
		fail("fork: %s", strerror(errno));
	if (pg->pid) {
		close(stop[0]);
		close(out[1]);
		pg->stop = stop[1];
		pg->out = out[0];
		usleep(100000);
		return;
	}
	/* Only the parent's end of @stop may keep it open. */
	close(stop[1]);
	close(out[0]);
	peer_session(&p, port, subdir, 0);
	for (;;) {
		struct pollfd pfd = { .fd = stop[0], .events = POLLIN };
		int64_t t0 = sw_mono_ns();
		double ms;

		peer_ping(&p);
		ms = (double)(sw_mono_ns() - t0) / 1e6;
		worst = SW_MAX(worst, ms);
		if (poll(&pfd, 1, 5) != 0)
			break;
	}
	if (write(out[1], &worst, sizeof(worst)) != sizeof(worst))
		_exit(1);
	_exit(0);
}

double peer_pinger_stop(struct peer_pinger *pg)
{
	double worst;
	int st;

	close(pg->stop);
	if (read(pg->out, &worst, sizeof(worst)) != sizeof(worst) ||
	    waitpid(pg->pid, &st, 0) != pg->pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st))
		fail("the pinger failed");
	close(pg->out);
	return worst;
}

/* The connection must be closed within @timeout_ms with nothing sent. */
void expect_closed(struct peer *p, const char *what, int timeout_ms)
{
	struct sw_frame_hdr hdr;
	uint8_t *payload;
	int rc = peer_recv(p, &hdr, &payload, timeout_ms);

	if (rc > 0)
		fail("%s: port %u answered (type %u, flags %#x) instead of "
		     "closing the connection",
		     what, p->port, hdr.type, hdr.flags);
	if (rc < 0)
		fail("%s: port %u kept the connection open for %d ms", what,
		     p->port, timeout_ms);
	peer_close(p);
}

uint64_t peer_mkdir(struct peer *p, Sweepfs__Cred *cred, uint64_t parent,
		    const char *name)
{
	Sweepfs__MknodReq q = SWEEPFS__MKNOD_REQ__INIT;
	Sweepfs__EntryReply *r;
	uint64_t id, ino;
	int err;

	q.cred = cred;
	q.parent = parent;
	q.name = str(name);
	q.mode = S_IFDIR | 0777;
	id = peer_send(p, SW_MSG_MKDIR, 0, &q.base);
	r = (Sweepfs__EntryReply *)peer_reply(p, SW_MSG_MKDIR, id, &err);
	if (err || !r->attr)
		fail("mkdir %s: %s", name, strerror(err));
	ino = r->attr->ino;
	sweepfs__entry_reply__free_unpacked(r, NULL);
	return ino;
}

int peer_chmod(struct peer *p, Sweepfs__Cred *cred, uint64_t ino, uint32_t mode)
{
	Sweepfs__SetattrReq q = SWEEPFS__SETATTR_REQ__INIT;

	q.cred = cred;
	q.ino = ino;
	q.valid = SWEEPFS__SETATTR_VALID__SET_MODE;
	q.has_mode = 1;
	q.mode = mode;
	return peer_call(p, SW_MSG_SETATTR, &q.base);
}

bool peer_deleg(struct peer *p, uint64_t dir)
{
	Sweepfs__DelegReq q = SWEEPFS__DELEG_REQ__INIT;
	Sweepfs__DelegReply *r;
	uint64_t id;
	bool granted;
	int err;

	q.dir = dir;
	id = peer_send(p, SW_MSG_DELEG, 0, &q.base);
	r = (Sweepfs__DelegReply *)peer_reply(p, SW_MSG_DELEG, id, &err);
	if (err)
		fail("deleg: %s", strerror(err));
	granted = r->has_granted && r->granted;
	sweepfs__deleg_reply__free_unpacked(r, NULL);
	return granted;
}

void peer_deleg_return(struct peer *p, uint64_t dir)
{
	Sweepfs__DelegReturnReq q = SWEEPFS__DELEG_RETURN_REQ__INIT;

	q.dir = dir;
	if (peer_call(p, SW_MSG_DELEG_RETURN, &q.base))
		fail("deleg return refused");
}

int peer_lock(struct peer *p, uint64_t ino, uint64_t owner, int type,
	      uint64_t start, uint64_t end)
{
	Sweepfs__LockReq q = SWEEPFS__LOCK_REQ__INIT;

	q.ino = ino;
	q.op = SWEEPFS__LOCK_OP__LOCK_OP_SET;
	q.kind = SWEEPFS__LOCK_KIND__LOCK_POSIX;
	q.owner = owner;
	q.has_type = q.has_start = q.has_end = 1;
	q.type = type;
	q.start = start;
	q.end = end;
	return peer_call(p, SW_MSG_LOCK, &q.base);
}

/* ---- chunks ------------------------------------------------------------------ */

int peer_chunk(struct peer *p, Sweepfs__Cred *cred, uint64_t ino, bool write,
	       struct chunk_grant *g)
{
	Sweepfs__ChunkReq q = SWEEPFS__CHUNK_REQ__INIT;
	Sweepfs__ChunkReply *r;
	uint64_t id;
	int err;

	q.cred = cred;
	q.ino = ino;
	q.has_write = 1;
	q.write = write;
	id = peer_send(p, SW_MSG_CHUNK, 0, &q.base);
	r = (Sweepfs__ChunkReply *)peer_reply(p, SW_MSG_CHUNK, id, &err);
	if (!err && (!r->loc || !r->loc->n_servers || !r->loc->token.len ||
		     r->loc->token.len > sizeof(g->token)))
		fail("chunk of inode %" PRIu64 " (write %d): no location", ino,
		     write);
	if (!err) {
		g->chunk_id = r->loc->chunk_id;
		g->version = r->loc->version;
		g->token_len = r->loc->token.len;
		memcpy(g->token, r->loc->token.data, g->token_len);
		g->expires = r->loc->expires;
		g->write_only = r->loc->write_only;
	}
	sweepfs__chunk_reply__free_unpacked(r, NULL);
	return err;
}

void peer_cs_read_req(Sweepfs__CsReadReq *q, const struct chunk_grant *g,
		      uint32_t size)
{
	sweepfs__cs_read_req__init(q);
	q->chunk_id = g->chunk_id;
	q->version = g->version;
	q->offset = 0;
	q->size = size;
	q->has_token = 1;
	q->token = bin(g->token, g->token_len);
	q->has_expires = 1;
	q->expires = g->expires;
}

int peer_cs_read(struct peer *cs, const struct chunk_grant *g, void *out,
		 uint32_t size, size_t *got)
{
	Sweepfs__CsReadReq q;
	Sweepfs__CsReadReply *r;
	uint64_t id;
	int err;

	peer_cs_read_req(&q, g, size);
	id = peer_send(cs, SW_MSG_CS_READ, 0, &q.base);
	r = (Sweepfs__CsReadReply *)peer_reply(cs, SW_MSG_CS_READ, id, &err);
	*got = 0;
	if (!err && r->has_data) {
		*got = SW_MIN(r->data.len, (size_t)size);
		memcpy(out, r->data.data, *got);
	}
	sweepfs__cs_read_reply__free_unpacked(r, NULL);
	return err;
}

int peer_cs_write(struct peer *cs, const struct chunk_grant *g,
		  const void *data, size_t len)
{
	Sweepfs__CsWriteReq w = SWEEPFS__CS_WRITE_REQ__INIT;

	w.chunk_id = g->chunk_id;
	w.version = g->version;
	w.data = bin(data, len);
	w.has_token = w.has_expires = 1;
	w.token = bin(g->token, g->token_len);
	w.expires = g->expires;
	return peer_call(cs, SW_MSG_CS_WRITE, &w.base);
}
