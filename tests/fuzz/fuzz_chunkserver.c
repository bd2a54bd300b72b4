/*
 * fuzz_chunkserver: the chunkserver's client request path, from the
 * socket in: hello, ping, CS_READ, CS_WRITE and CS_SYNC on libuv's
 * thread pool, the token checks and the chunk store under them.
 *
 * The chunkserver's server (chunkserver/server.c) listens on 127.0.0.1
 * in this process over a chunk store in a temporary directory, with a
 * fixed token key (FUZZ_KEY) as if the master had given it, and no
 * master link. Chunks 1, 2 and 3 exist at version 1 when each input
 * starts. Each input is one client connection:
 *
 *   byte 0, bit 0   1: the harness says nothing first (the input must
 *                   say hello); 0: it sends a valid hello
 *           bit 1   1: the harness signs every CS_READ, CS_WRITE and
 *                   CS_SYNC in the input that parses with a valid token
 *                   for the chunk and version it names (for its own
 *                   expiry, or one in an hour if it has none), so that
 *                   mutations reach the store with any chunk id; 0: the
 *                   bytes go as they are, and only tokens the seeds
 *                   carry are valid
 *   the rest        bytes sent after that; then writing is shut down
 *
 * and the harness runs the loop until the server has closed the
 * connection and every request of it has left the thread pool. Every
 * frame sent back must decode (fuzz_io.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "chunkserver_i.h"
#include "frame.h"
#include "fuzz_io.h"
#include "util.h"

/* The token key the seeds' tokens are made with (gen_corpus.c). */
#define FUZZ_KEY "sweepfs-fuzz-key"
#define FUZZ_CHUNKS 3
/* Largest input the signing mode rewrites; more is sent as it is. */
#define SIGN_MAX (4u << 20)

static struct cs cs;
static uv_loop_t loop;
static char chunk_dir[600];
static const char *dirs[1] = { chunk_dir };
static uv_tcp_t *listener;
static struct fz_server server;
static uint8_t *signed_buf;

static void find_listener(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (h->type == UV_TCP)
		listener = (uv_tcp_t *)h;
}

static void count_conns(uv_handle_t *h, void *arg)
{
	if (h->type == UV_TCP && h != (uv_handle_t *)listener)
		(*(unsigned *)arg)++;
}

/* No connection handle left, and no request in the thread pool. */
static bool cs_idle(void *arg)
{
	unsigned n = 0;

	(void)arg;
	uv_walk(&loop, count_conns, &n);
	return n == 0 && loop.active_reqs.count == 0;
}

/* Chunks 1..FUZZ_CHUNKS at version 1, empty; nothing else. */
static void reset_chunks(void)
{
	struct store_chunk_info *inv;
	size_t n;

	if (store_inventory(cs.store, &inv, &n) < 0)
		abort();
	for (size_t i = 0; i < n; i++)
		store_delete(cs.store, inv[i].chunk_id, inv[i].version);
	free(inv);
	/* Placing a chunk takes an estimate off the free space until the
	 * next refresh (the daemon's heartbeat does it). */
	store_refresh_space(cs.store);
	for (uint64_t id = 1; id <= FUZZ_CHUNKS; id++) {
		int rc = store_create(cs.store, id, 1);

		if (rc < 0) {
			fprintf(stderr,
				"fuzz_chunkserver: chunk %" PRIu64 ": %s\n", id,
				strerror(-rc));
			abort();
		}
	}
}

static void at_exit(void)
{
	server_stop(&cs);
	while (!server_stopped(&cs))
		uv_run(&loop, UV_RUN_ONCE);
	uv_run(&loop, UV_RUN_DEFAULT);
	store_close(cs.store);
	uv_loop_close(&loop);
	free(signed_buf);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct store_opts so = { .dirs = dirs, .ndirs = 1, .max_open = 16 };
	struct sockaddr_storage ss;
	int len = sizeof(ss);

	(void)argc;
	(void)argv;
	signal(SIGPIPE, SIG_IGN);
	fz_quiet_logs();
	snprintf(chunk_dir, sizeof(chunk_dir), "%s/chunks",
		 fz_tmpdir("fuzz-chunkserver"));
	if (mkdir(chunk_dir, 0700) < 0 || store_open(&so, &cs.store) < 0)
		abort();
	uv_loop_init(&loop);
	cs.loop = &loop;
	cs.dirs = (char *const *)dirs;
	cs.ndirs = 1;
	strcpy(cs.listen_host, "127.0.0.1");
	cs.listen_port = 0;
	cs.cfg.frame_timeout_ms = 30000;
	cs.cfg.send_timeout_ms = 120000;
	cs.cfg.max_connections = 100;
	cs.cfg.max_inflight = 128u << 20;
	/* The daemon's defaults (chunkserver/main.c): left 0, no reply may
	 * be held, reading stops at the first, and the exchange never
	 * ends. */
	cs.cfg.hello_timeout_ms = 5000;
	cs.cfg.pre_hello_max = 4096;
	cs.cfg.pre_hello_per_address = 1024;
	cs.cfg.output_max = 16u << 20;
	cs.cfg.output_total_max = 256u << 20;
	cs.has_key = true;
	memcpy(cs.key, FUZZ_KEY, SW_TOKEN_KEY);
	if (server_start(&cs) < 0)
		abort();
	uv_walk(&loop, find_listener, NULL);
	if (!listener ||
	    uv_tcp_getsockname(listener, (struct sockaddr *)&ss, &len) < 0)
		abort();
	server = (struct fz_server){
		.loop = &loop,
		.port = ntohs(((struct sockaddr_in *)&ss)->sin_port),
		.max_reply = SW_FRAME_MAX_DATA,
		.idle = cs_idle,
	};
	signed_buf = malloc(SIGN_MAX);
	if (!signed_buf)
		abort();
	reset_chunks();
	atexit(at_exit);
	return 0;
}

/* The token fields of a data request, wherever its type keeps them. */
struct tok {
	uint64_t chunk_id;
	uint32_t version;
	protobuf_c_boolean *has_token, *has_expires;
	ProtobufCBinaryData *token;
	uint64_t *expires;
	enum sw_token_mode mode;
};

static bool is_data_request(uint16_t type)
{
	return type == SW_MSG_CS_READ || type == SW_MSG_CS_WRITE ||
	       type == SW_MSG_CS_SYNC;
}

static bool tok_of(ProtobufCMessage *msg, uint16_t type, struct tok *t)
{
	if (type == SW_MSG_CS_READ) {
		Sweepfs__CsReadReq *q = (Sweepfs__CsReadReq *)msg;

		*t = (struct tok){ q->chunk_id,	    q->version, &q->has_token,
				   &q->has_expires, &q->token,	&q->expires,
				   SW_TOKEN_READ };
	} else if (type == SW_MSG_CS_WRITE) {
		Sweepfs__CsWriteReq *q = (Sweepfs__CsWriteReq *)msg;

		*t = (struct tok){ q->chunk_id,	    q->version, &q->has_token,
				   &q->has_expires, &q->token,	&q->expires,
				   SW_TOKEN_WRITE };
	} else if (type == SW_MSG_CS_SYNC) {
		Sweepfs__CsSyncReq *q = (Sweepfs__CsSyncReq *)msg;

		*t = (struct tok){ q->chunk_id,	    q->version, &q->has_token,
				   &q->has_expires, &q->token,	&q->expires,
				   SW_TOKEN_READ };
	} else {
		return false;
	}
	return true;
}

/*
 * Give @msg, a data request of @type, a valid token for what it names.
 * Appends the frame to signed_buf at *@used; false when it does not fit.
 */
static bool put_signed(ProtobufCMessage *msg, uint16_t type, uint64_t id,
		       size_t *used)
{
	uint8_t mac[SW_TOKEN_LEN];
	ProtobufCBinaryData old;
	struct tok t;
	bool ok;

	tok_of(msg, type, &t);
	if (!*t.has_expires)
		*t.expires = (uint64_t)time(NULL) * 1000 + 3600 * 1000;
	*t.has_expires = *t.has_token = 1;
	sw_token_make(cs.key, t.chunk_id, t.version, t.mode, *t.expires, mac);
	/* The unpacked token stays the message's, to be freed with it. */
	old = *t.token;
	t.token->data = mac;
	t.token->len = sizeof(mac);
	ok = fz_put_frame(signed_buf, SIGN_MAX, used, type, id, msg);
	*t.token = old;
	return ok;
}

/*
 * Copy the @len bytes at @in to signed_buf, with a valid token in every
 * data request that parses; returns the bytes written.
 */
static size_t sign_requests(const uint8_t *in, size_t len)
{
	size_t used = 0;

	len = SW_MIN(len, SIGN_MAX);
	while (len) {
		const struct sw_msg_info *info;
		ProtobufCMessage *msg = NULL;
		struct sw_frame_hdr hdr;
		size_t n;
		bool ok;

		if (sw_frame_get_hdr(in, len, SW_FRAME_MAX_DATA, &hdr) <= 0 ||
		    len - SW_FRAME_HDR < hdr.len)
			break;
		n = SW_FRAME_HDR + hdr.len;
		info = sw_msg_info(hdr.type);
		if (info && !hdr.flags && is_data_request(hdr.type))
			msg = protobuf_c_message_unpack(
				info->req, NULL, hdr.len, in + SW_FRAME_HDR);
		if (msg) {
			ok = put_signed(msg, hdr.type, hdr.id, &used);
			protobuf_c_message_free_unpacked(msg, NULL);
		} else {
			ok = n <= SIGN_MAX - used;
			if (ok) {
				memcpy(signed_buf + used, in, n);
				used += n;
			}
		}
		if (!ok)
			return used;
		in += n;
		len -= n;
	}
	/* A partial or bad frame at the end goes as it is. */
	if (len <= SIGN_MAX - used) {
		memcpy(signed_buf + used, in, len);
		used += len;
	}
	return used;
}

/* The hello the harness sends (a mount's). */
static size_t prelude(uint8_t *out, size_t cap)
{
	Sweepfs__Hello h = SWEEPFS__HELLO__INIT;
	size_t n = 0;

	h.version = SW_PROTO_VERSION;
	h.role = SWEEPFS__ROLE__ROLE_MOUNT;
	fz_put_frame(out, cap, &n, SW_MSG_HELLO, 1, &h.base);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t pre[64];
	unsigned mode = size ? data[0] : 0;
	size_t plen = 0;

	if (size) {
		data++;
		size--;
	}
	if (!(mode & 1))
		plen = prelude(pre, sizeof(pre));
	if (mode & 2) {
		size = sign_requests(data, size);
		data = signed_buf;
	}
	fz_exchange(&server, pre, plen, data, size);
	reset_chunks();
	return 0;
}
