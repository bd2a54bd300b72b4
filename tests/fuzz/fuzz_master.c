/*
 * fuzz_master: the master's request path, from the socket in.
 *
 * A real master (master_start(), as sweepfs-master runs it) listens on
 * 127.0.0.1 in this process, with its changelog in a temporary directory
 * (changelog_sync = never). Each input is one client connection:
 *
 *   byte 0, bits 0-1   what the harness says first: a valid hello as a
 *                      mount (0), a tool (1) or a chunkserver (2); or
 *                      nothing (3: the input must say hello itself)
 *           bits 2-3   the exports in force: none (everything allowed,
 *                      admin); rw with root squashed; ro; rw with
 *                      everybody mapped to uid 1000
 *   the rest           bytes sent after that, as they are; then the
 *                      harness shuts down writing
 *
 * and then the harness runs the loop until the master has closed the
 * connection and freed it. Every frame the master sends back must decode
 * (fuzz_io.c). Afterwards sessions are expired and the purge is run to
 * its end; if the input changed anything, the namespace must still pass
 * the master's own consistency check (fsck_check(): link counts,
 * directory counts, chunk references, nothing leaked), and the master is
 * then restarted on an empty directory, so that every input starts from
 * the same fresh state and a crash reproduces from its input alone.
 *
 * A chunkserver proves it holds the master's chunkserver key by
 * answering a random challenge, which a prelude written in advance
 * cannot: the target links with --wrap=sw_auth_random, whose nonces are
 * all zeros here, so the prelude's second hello answers the challenge
 * the first one gets, and inputs reach the chunkserver role.
 *
 * Requests that would fork stay in-process: snapshots are always copied
 * by the loop (snapshot_sync_max is unlimited), and fork() itself fails
 * (the target links with --wrap=fork), so fsck requests are answered
 * with EAGAIN. Checkpoints are never due.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csrv.h"
#include "fuzz_io.h"
#include "fsck.h"
#include "master.h"
#include "purge.h"
#include "session.h"
#include "snapjob.h"
#include "util.h"

/* Longest loop time the purge and snapshot copies get after an input. */
#define SETTLE_NS (5 * SW_NSEC_PER_SEC)

static struct master m;
static uv_loop_t loop;
static char data_dir[600];
static char exports[4][600];
static unsigned exports_in_force;
static struct fz_server server;

static const char *const exports_text[4] = {
	NULL, /* no file: open to all */
	"127.0.0.1 / rw,alldirs,maproot=65534:65534\n",
	"127.0.0.1 / ro,alldirs,admin,maproot=0\n",
	"* / rw,alldirs,mapall=1000:1000\n",
};

pid_t __wrap_fork(void);
void __wrap_sw_auth_random(void *p, size_t n);

/* Nonces the prelude can answer in advance (see the top). */
void __wrap_sw_auth_random(void *p, size_t n)
{
	memset(p, 0, n);
}

/* fork() for the master's objects: a fuzzer that forks is slow and
 * checks nothing in the child. */
pid_t __wrap_fork(void)
{
	errno = EAGAIN;
	return -1;
}

static bool master_idle(void *arg)
{
	const struct master *mm = arg;

	return mm->server.nconns == 0;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0 || fclose(f)) {
		fprintf(stderr, "fuzz_master: cannot write %s\n", path);
		abort();
	}
}

static void master_up(void)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss);

	memset(&m, 0, sizeof(m));
	master_config_defaults(&m.cfg);
	strcpy(m.cfg.listen_host, "127.0.0.1");
	m.cfg.listen_port = 0;
	snprintf(m.cfg.data_dir, sizeof(m.cfg.data_dir), "%s", data_dir);
	snprintf(m.cfg.exports_file, sizeof(m.cfg.exports_file), "%s",
		 exports[exports_in_force]);
	m.cfg.changelog_sync = CL_SYNC_NEVER;
	m.cfg.session_timeout_ms = 0; /* expired by hand after each input */
	m.cfg.session_idle_timeout_ms = 0;
	m.cfg.snapshot_sync_max = UINT64_MAX;
	m.cfg.purge_duty = 100;
	/* No chunkserver will come: chunk requests are answered at once. */
	m.cfg.chunkserver_grace_ms = 0;
	/* Restarted after every input that changed something: 16 MiB of
	 * fallocate each time would dominate. */
	m.cfg.changelog_prealloc = 64u << 10;
	if (master_start(&m, &loop) < 0 ||
	    uv_tcp_getsockname(&m.server.listener, (struct sockaddr *)&ss,
			       &len) < 0) {
		fprintf(stderr, "fuzz_master: the master did not start\n");
		abort();
	}
	server.port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static void master_down(void)
{
	master_stop(&m);
	uv_run(&loop, UV_RUN_DEFAULT);
	master_release(&m);
}

/* Empty the data directory (the master leaves no subdirectories). */
static void wipe_data_dir(void)
{
	char path[900];
	DIR *d = opendir(data_dir);
	struct dirent *e;

	if (!d)
		abort();
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", data_dir, e->d_name);
		unlink(path);
	}
	closedir(d);
}

static void at_exit(void)
{
	master_down();
	uv_loop_close(&loop);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = fz_tmpdir("fuzz-master");

	(void)argc;
	(void)argv;
	signal(SIGPIPE, SIG_IGN);
	fz_quiet_logs();
	snprintf(data_dir, sizeof(data_dir), "%s/meta", tmp);
	if (mkdir(data_dir, 0700) < 0)
		abort();
	for (unsigned i = 0; i < 4; i++) {
		snprintf(exports[i], sizeof(exports[i]), "%s/exports%u.cfg",
			 tmp, i);
		if (exports_text[i])
			write_file(exports[i], exports_text[i]);
	}
	uv_loop_init(&loop);
	server = (struct fz_server){ .loop = &loop,
				     .max_reply = SW_FRAME_MAX_META,
				     .idle = master_idle,
				     .arg = &m };
	master_up();
	atexit(at_exit);
	return 0;
}

/* The hello the harness sends for @role (0: none). */
static size_t prelude(uint8_t *out, size_t cap, int role)
{
	Sweepfs__Hello h = SWEEPFS__HELLO__INIT;
	size_t n = 0;

	if (!role)
		return 0;
	h.version = SW_PROTO_VERSION;
	h.role = role;
	h.has_client_name = 1;
	h.client_name.data = (uint8_t *)"fuzz";
	h.client_name.len = 4;
	if (role == SWEEPFS__ROLE__ROLE_CHUNKSERVER) {
		/* Challenged (the nonce is zeros), then the answer. */
		static const uint8_t zeros[SW_AUTH_NONCE];
		uint8_t tag[SW_AUTH_TAG];

		h.has_cs_nonce = 1;
		h.cs_nonce.data = (uint8_t *)zeros;
		h.cs_nonce.len = sizeof(zeros);
		fz_put_frame(out, cap, &n, SW_MSG_HELLO, 1, &h.base);
		sw_auth_tag(m.cs->key, SW_AUTH_CHUNKSERVER, zeros,
			    sizeof(zeros), NULL, 0, tag);
		h.has_auth = 1;
		h.auth.data = tag;
		h.auth.len = sizeof(tag);
		fz_put_frame(out, cap, &n, SW_MSG_HELLO, 2, &h.base);
		return n;
	}
	fz_put_frame(out, cap, &n, SW_MSG_HELLO, 1, &h.base);
	return n;
}

/* Run the background work the input started to its end. */
static void settle(void)
{
	int64_t until = sw_mono_ns() + SETTLE_NS;

	while ((purge_left(&m) || snapjob_busy(&m) || snapjob_waiting(&m)) &&
	       sw_mono_ns() < until)
		uv_run(&loop, UV_RUN_NOWAIT);
}

/* The namespace after the input must be consistent. */
static void check_consistent(void)
{
	Sweepfs__FsckReply *r = fsck_check(&m, 8);

	if (!r)
		abort();
	if (r->leaked_nodes || r->bad_links || r->bad_dirs ||
	    r->missing_chunks || r->bad_refs || r->unreferenced_chunks) {
		fprintf(stderr,
			"fuzz_master: inconsistent namespace after the input: "
			"%lu leaked nodes, %lu bad links, %lu bad dirs, "
			"%lu missing chunks, %lu bad refs, %lu unreferenced "
			"chunks\n",
			(unsigned long)r->leaked_nodes,
			(unsigned long)r->bad_links, (unsigned long)r->bad_dirs,
			(unsigned long)r->missing_chunks,
			(unsigned long)r->bad_refs,
			(unsigned long)r->unreferenced_chunks);
		for (size_t i = 0; i < r->n_problems; i++)
			fprintf(stderr, "  %s\n", r->problems[i]);
		abort();
	}
	fsck_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int roles[4] = { SWEEPFS__ROLE__ROLE_MOUNT,
				      SWEEPFS__ROLE__ROLE_TOOL,
				      SWEEPFS__ROLE__ROLE_CHUNKSERVER, 0 };
	uint8_t pre[256];
	unsigned mode = size ? data[0] : 0;
	uint64_t version = m.ns.version;

	if (size) {
		data++;
		size--;
	}
	if (((mode >> 2) & 3) != exports_in_force) {
		exports_in_force = (mode >> 2) & 3;
		snprintf(m.cfg.exports_file, sizeof(m.cfg.exports_file), "%s",
			 exports[exports_in_force]);
		if (master_load_exports(&m) < 0)
			abort();
	}
	fz_exchange(&server, pre, prelude(pre, sizeof(pre), roles[mode & 3]),
		    data, size);
	sessions_expire(&m);
	settle();
	if (m.ns.version == version && !m.cs->n && !m.nsessions)
		return 0;
	check_consistent();
	master_down();
	wipe_data_dir();
	master_up();
	return 0;
}
