/*
 * sweepfs-chunkserver: configuration, start-up, signals.
 *
 * Start-up: lock every data directory (flock on <dir>/.lock, so that two
 * chunkservers never share one), scan them into the inventory, listen,
 * then connect to the master, which may be down: clients are served
 * anyway once a token key has been received. In daemon mode the parent
 * process waits on a pipe until the chunkserver listens (or has failed).
 *
 * SIGTERM/SIGINT: stop accepting and reading requests, let the ones in
 * progress finish and answer, leave the master, then flush every data
 * directory to disk (syncfs) and exit 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfg.h"
#include "daemon.h"
#include "chunkserver_i.h"
#include "log.h"
#include "net.h"
#include "sdnotify.h"
#include "util.h"

#define TAG "chunkserver"
#define DEFAULT_CONFIG "/etc/sweepfs/chunkserver.cfg"
#define MAX_DIRS 64

struct daemon {
	struct cs cs;
	uv_timer_t tick; /* housekeeping, once a second */
	uv_signal_t sig[4];
	char *dirs[MAX_DIRS]; /* split data_dirs */
	size_t ndirs;
	int lock_fds[MAX_DIRS];
	bool shutting_down;
};

static void config_defaults(struct cs_config *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->data_dirs, "/var/lib/sweepfs/chunks");
	snprintf(c->listen, sizeof(c->listen), "0.0.0.0:%u",
		 SW_CHUNKSERVER_PORT);
	snprintf(c->master, sizeof(c->master), "127.0.0.1:%u", SW_MASTER_PORT);
	strcpy(c->master_key_file, "/etc/sweepfs/chunkserver.key");
	c->heartbeat_ms = 5000;
	c->frame_timeout_ms = 30 * 1000;
	c->send_timeout_ms = 120 * 1000;
	c->peer_timeout_ms = 30 * 1000;
	c->max_connections = 10000;
	c->workers = 16;
	c->bg_threads = 2;
	c->delete_share_min = 50;
	c->open_files = 256;
	c->reserve = 256ull << 20;
	c->max_inflight = 128ull << 20;
	c->hello_timeout_ms = 5000;
	c->pre_hello_max = 4096;
	c->pre_hello_per_address = 1024;
	c->output_max = 16u << 20;
	c->output_total_max = 256u << 20;
	strcpy(c->log_level, "notice");
}

#define NOPTS 24 /* options, and the terminating { 0 } */

static void config_table(struct cs_config *c, struct sw_opt *o)
{
	const struct sw_opt t[] = {
		{ "data_dirs", SW_OPT_STRING, c->data_dirs, 0,
		  sizeof(c->data_dirs), NULL,
		  "chunk directories, comma-separated (one per disk)" },
		{ "listen", SW_OPT_STRING, c->listen, 0, sizeof(c->listen),
		  NULL,
		  "HOST:PORT to listen on for clients and other chunkservers" },
		{ "advertise", SW_OPT_STRING, c->advertise, 0,
		  sizeof(c->advertise), NULL,
		  "HOST:PORT clients are told to use (default: the listen "
		  "address; 127.0.0.1 if that is 0.0.0.0)" },
		{ "master", SW_OPT_STRING, c->master, 0, sizeof(c->master),
		  NULL,
		  "the master, HOST[:PORT], or a group's, H1:P1,H2:P2,..." },
		{ "master_key_file", SW_OPT_STRING, c->master_key_file, 0,
		  sizeof(c->master_key_file), NULL,
		  "a copy of the master's chunkserver key (its data_dir/"
		  "chunkserver.key, or its chunkserver_key_file), mode 0600: "
		  "the master takes only chunkservers that hold it" },
		{ "heartbeat_interval", SW_OPT_DURATION, &c->heartbeat_ms, 100,
		  3600 * 1000, NULL,
		  "report space to the master this often (to a group of "
		  "masters, at least every 0.5 s)" },
		{ "frame_timeout", SW_OPT_DURATION, &c->frame_timeout_ms, 100,
		  UINT64_MAX, NULL,
		  "drop a peer that stops in the middle of a frame" },
		{ "send_timeout", SW_OPT_DURATION, &c->send_timeout_ms, 100,
		  UINT64_MAX, NULL,
		  "drop a peer that takes no replies this long" },
		{ "peer_timeout", SW_OPT_DURATION, &c->peer_timeout_ms, 1000,
		  3600 * 1000, NULL,
		  "close a connection whose peer's network is gone (no "
		  "answer to TCP keepalives or data) after this long" },
		{ "max_connections", SW_OPT_UINT, &c->max_connections, 1,
		  1000000, NULL, "connections accepted at once" },
		{ "workers", SW_OPT_UINT, &c->workers, 1, 1024, NULL,
		  "threads doing disk I/O for clients (ignored when "
		  "UV_THREADPOOL_SIZE is set)" },
		{ "bg_threads", SW_OPT_UINT, &c->bg_threads, 1, 64, NULL,
		  "low-priority threads for deletion and replication" },
		{ "delete_share_min", SW_OPT_UINT, &c->delete_share_min, 3, 100,
		  NULL,
		  "percent of their time chunk deletion threads keep however "
		  "much they slow clients down (100: no pacing)" },
		{ "open_files", SW_OPT_UINT, &c->open_files, 1, 1000000, NULL,
		  "idle chunk files kept open" },
		{ "reserve", SW_OPT_SIZE, &c->reserve, 0, UINT64_MAX, NULL,
		  "free space no new chunk may take, per data directory" },
		{ "max_inflight", SW_OPT_SIZE, &c->max_inflight, 1 << 20,
		  UINT64_MAX, NULL,
		  "request bytes in progress at once before reading pauses "
		  "(a read counts as its largest reply)" },
		{ "hello_timeout", SW_OPT_DURATION, &c->hello_timeout_ms, 100,
		  3600 * 1000, NULL,
		  "close a connection that has not said hello this long "
		  "after it was accepted" },
		{ "pre_hello_max", SW_OPT_UINT, &c->pre_hello_max, 1, 1000000,
		  NULL,
		  "connections without a hello yet, in all; past it the "
		  "oldest is closed for a new one" },
		{ "pre_hello_per_address", SW_OPT_UINT,
		  &c->pre_hello_per_address, 1, 1000000, NULL,
		  "... from one address" },
		{ "output_max", SW_OPT_SIZE, &c->output_max, 1 << 20,
		  UINT64_MAX, NULL,
		  "stop reading a client's requests while this many bytes of "
		  "its replies are not taken" },
		{ "output_total_max", SW_OPT_SIZE, &c->output_total_max,
		  1 << 20, UINT64_MAX, NULL,
		  "replies not taken by all clients; past it the client "
		  "connection holding the most is closed" },
		{ "metrics_listen", SW_OPT_STRING, c->metrics_listen, 0,
		  sizeof(c->metrics_listen), NULL,
		  "serve Prometheus metrics over HTTP on HOST:PORT (empty: "
		  "off); anyone who reaches it may read them" },
		{ "log_level", SW_OPT_STRING, c->log_level, 0,
		  sizeof(c->log_level), NULL,
		  "err, warning, notice, info or debug" },
		{ 0 },
	};

	_Static_assert(SW_ARRAY_SIZE(t) == NOPTS, "NOPTS must count them");
	memcpy(o, t, sizeof(t));
}

static void usage(FILE *f)
{
	sw_daemon_usage(
		f, "sweepfs-chunkserver", DEFAULT_CONFIG,
		"  -d, --data-dir DIR     a chunk directory (repeat, or DIR,DIR)\n"
		"  -l, --listen HOST:PORT address to listen on\n"
		"  -m, --master HOST[:PORT] the master; a group's: H1:P1,H2:P2,...\n");
}

/* ---- configuration ------------------------------------------------------ */

/* Split cfg.data_dirs at commas into d->dirs. */
static int split_dirs(struct daemon *d)
{
	char *s = d->cs.cfg.data_dirs, *tok, *save = NULL;

	for (tok = strtok_r(s, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		while (*tok == ' ')
			tok++;
		if (!*tok)
			continue;
		if (d->ndirs == MAX_DIRS) {
			fprintf(stderr,
				"sweepfs-chunkserver: data_dirs: more than %d "
				"directories\n",
				MAX_DIRS);
			return -E2BIG;
		}
		d->dirs[d->ndirs++] = tok;
	}
	if (!d->ndirs) {
		fprintf(stderr, "sweepfs-chunkserver: data_dirs: none given "
				"(-d DIR)\n");
		return -EINVAL;
	}
	return 0;
}

/* Listen and advertised addresses from the configuration. */
static int addresses(struct cs *cs)
{
	struct sw_target t;
	const char *h;

	if (sw_target_parse(cs->cfg.listen, SW_CHUNKSERVER_PORT, &t) < 0 ||
	    t.naddrs != 1) {
		fprintf(stderr,
			"sweepfs-chunkserver: listen = %s: must be one "
			"HOST[:PORT]\n",
			cs->cfg.listen);
		return -EINVAL;
	}
	snprintf(cs->listen_host, sizeof(cs->listen_host), "%s", t.host);
	cs->listen_port = t.port;
	if (cs->cfg.advertise[0]) {
		if (sw_target_parse(cs->cfg.advertise, t.port, &t) < 0 ||
		    t.naddrs != 1) {
			fprintf(stderr,
				"sweepfs-chunkserver: advertise = %s: must be "
				"one HOST[:PORT]\n",
				cs->cfg.advertise);
			return -EINVAL;
		}
	} else if (!strcmp(t.host, "0.0.0.0") || !strcmp(t.host, "::")) {
		strcpy(t.host, "127.0.0.1");
	}
	h = t.host;
	snprintf(cs->advertise, sizeof(cs->advertise),
		 strchr(h, ':') ? "[%s]:%u" : "%s:%u", h, t.port);
	return 0;
}

/* Apply -d/-l/-m/-v/--set in order; -d accumulates. */
static int apply_sets(struct sw_opt *opts, struct cs_config *c, char **sets,
		      int nsets)
{
	bool dirs_given = false;

	for (int i = 0; i < nsets; i++) {
		int rc;

		if (!strncmp(sets[i], "+data_dirs=", 11)) {
			size_t len = strlen(c->data_dirs);

			if (!dirs_given)
				c->data_dirs[0] = '\0', len = 0;
			dirs_given = true;
			if (len + strlen(sets[i] + 11) + 2 >
			    sizeof(c->data_dirs))
				return -ERANGE;
			snprintf(c->data_dirs + len, sizeof(c->data_dirs) - len,
				 "%s%s", len ? "," : "", sets[i] + 11);
			continue;
		}
		rc = sw_daemon_set(opts, sets[i]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- process -------------------------------------------------------------- */

static int lock_dirs(struct daemon *d)
{
	for (size_t i = 0; i < d->ndirs; i++) {
		int rc = sw_lock_dir(TAG, d->dirs[i], ".lock", &d->lock_fds[i]);

		if (rc < 0)
			return rc;
	}
	return 0;
}

static void unlock_dirs(struct daemon *d)
{
	for (size_t i = 0; i < d->ndirs; i++)
		if (d->lock_fds[i] >= 0)
			close(d->lock_fds[i]);
}

/* ---- the loop ------------------------------------------------------------ */

static void on_tick(uv_timer_t *t)
{
	struct daemon *d = t->data;

	server_tick(&d->cs);
	mlink_tick(&d->cs);
	delpace_tick(&d->cs.del_pace);
	if (d->shutting_down && server_stopped(&d->cs)) {
		uv_timer_stop(&d->tick);
		uv_close((uv_handle_t *)&d->tick, NULL);
	}
}

static void shutdown_cs(struct daemon *d)
{
	struct cs *cs = &d->cs;

	if (d->shutting_down)
		return;
	d->shutting_down = true;
	sw_sdnotify_stopping();
	__atomic_store_n(&cs->stopping, true, __ATOMIC_RELAXED);
	sw_notice(TAG, "shutting down");
	cs_metrics_stop(cs);
	server_stop(cs);
	mlink_stop(cs);
	/* Waits for the deletion or replication in progress, if any. */
	bg_stop(cs->bg);
	cs->bg = NULL;
	bg_stop(cs->bg_del);
	cs->bg_del = NULL;
	for (size_t i = 0; i < SW_ARRAY_SIZE(d->sig); i++)
		uv_close((uv_handle_t *)&d->sig[i], NULL);
	/* The tick closes itself once the connections are gone. */
	uv_timer_start(&d->tick, on_tick, 100, 100);
}

static void on_signal(uv_signal_t *h, int signum)
{
	struct daemon *d = h->data;

	if (signum == SIGHUP) {
		sw_notice(TAG, "SIGHUP: nothing to reload");
		return;
	}
	shutdown_cs(d);
}

/* Open the store, listen, start the master link and the loop's timers. */
static int start(struct daemon *d)
{
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT };
	struct cs *cs = &d->cs;
	struct store_opts so = {
		.dirs = (const char *const *)d->dirs,
		.ndirs = d->ndirs,
		.max_open = (unsigned)cs->cfg.open_files,
		.reserve = cs->cfg.reserve,
	};
	int rc;

	cs->dirs = d->dirs;
	cs->ndirs = d->ndirs;
	rc = sw_auth_key_load(cs->cfg.master_key_file, cs->master_key);
	if (rc < 0) {
		sw_crit(TAG,
			"cannot use the master's chunkserver key %s: %s (copy "
			"the master's data_dir/chunkserver.key there, mode "
			"0600, or set master_key_file)",
			cs->cfg.master_key_file,
			rc == -EPERM  ? "others may read it" :
			rc == -EINVAL ? "not a key" :
					strerror(-rc));
		return rc;
	}
	rc = store_open(&so, &cs->store);
	if (rc < 0) {
		sw_crit(TAG, "cannot open the chunk store: %s", strerror(-rc));
		return rc;
	}
	delpace_init(&cs->del_pace,
		     (uint32_t)(cs->cfg.delete_share_min * DELPACE_FULL / 100));
	rc = bg_start(cs->loop, (unsigned)cs->cfg.bg_threads, &cs->bg);
	if (rc == 0)
		rc = bg_start_nice(cs->loop, CS_DELETE_THREADS, CS_DELETE_NICE,
				   &cs->bg_del);
	if (rc < 0) {
		sw_crit(TAG, "cannot start background threads: %s",
			strerror(-rc));
		return rc;
	}
	rc = cs_metrics_start(cs);
	if (rc == 0)
		rc = mlink_start(cs);
	if (rc == 0)
		rc = server_start(cs);
	if (rc < 0)
		return rc;
	uv_timer_init(cs->loop, &d->tick);
	d->tick.data = d;
	/* Five times a second: a group's next leader is tried within
	 * BACKOFF_GROUP_MIN_MS (master_link.c), not a second later. */
	uv_timer_start(&d->tick, on_tick, 200, 200);
	for (size_t i = 0; i < SW_ARRAY_SIZE(sigs); i++) {
		uv_signal_init(cs->loop, &d->sig[i]);
		d->sig[i].data = d;
		uv_signal_start(&d->sig[i], on_signal, sigs[i]);
	}
	return 0;
}

/* start() failed: undo what it did (the server, last, did not start). */
static void abort_start(struct daemon *d)
{
	struct cs *cs = &d->cs;

	__atomic_store_n(&cs->stopping, true, __ATOMIC_RELAXED);
	cs_metrics_stop(cs);
	mlink_stop(cs);
	if (cs->bg)
		bg_stop(cs->bg);
	if (cs->bg_del)
		bg_stop(cs->bg_del);
	uv_run(cs->loop, UV_RUN_DEFAULT);
	mlink_release(cs);
	store_close(cs->store);
	uv_loop_close(cs->loop);
}

/* ---- main ------------------------------------------------------------------ */

static const struct sw_daemon_flag flags[] = {
	{ 'd', "data-dir", "+data_dirs=" },
	{ 'l', "listen", "listen=" },
	{ 'm', "master", "master=" },
	{ 0 },
};

/* Configuration from file and flags into @d; -1 to go on, or a status. */
static int configure(struct daemon *d, struct sw_daemon_args *a)
{
	struct sw_opt opts[NOPTS];
	struct sw_target t;
	int level;

	config_defaults(&d->cs.cfg);
	config_table(&d->cs.cfg, opts);
	if (sw_daemon_load_config(a, DEFAULT_CONFIG, opts) < 0)
		return 2;
	if (apply_sets(opts, &d->cs.cfg, a->sets, a->nsets) < 0)
		return 2;
	level = sw_log_parse_level(d->cs.cfg.log_level);
	if (level < 0) {
		fprintf(stderr,
			"sweepfs-chunkserver: log_level = %s: must be one of "
			"err, warning, notice, info, debug\n",
			d->cs.cfg.log_level);
		return 2;
	}
	if (a->dump) {
		sw_opt_dump(stdout, opts);
		return 0;
	}
	if (addresses(&d->cs) < 0 || split_dirs(d) < 0)
		return 2;
	if (sw_target_parse(d->cs.cfg.master, SW_MASTER_PORT, &t) < 0) {
		fprintf(stderr,
			"sweepfs-chunkserver: master = %s: must be "
			"HOST[:PORT], or a list HOST[:PORT],...\n",
			d->cs.cfg.master);
		return 2;
	}
	sw_log_level = level;
	return -1;
}

static void set_pool_size(const struct cs_config *c)
{
	char n[32];

	/* libuv reads it when the pool starts: before the first work. */
	snprintf(n, sizeof(n), "%" PRIu64, c->workers);
	setenv("UV_THREADPOOL_SIZE", n, 0);
}

int main(int argc, char **argv)
{
	static struct daemon d;
	struct sw_daemon_args a = { 0 };
	int rc, ready_fd = -1;

	for (size_t i = 0; i < MAX_DIRS; i++)
		d.lock_fds[i] = -1;
	rc = sw_daemon_parse(argc, argv, "sweepfs-chunkserver", flags, usage,
			     &a);
	if (rc < 0)
		rc = configure(&d, &a);
	if (rc >= 0)
		goto out_sets;
	sw_log_set_ident("sweepfs-chunkserver");
	if (!a.foreground || a.use_syslog)
		sw_log_to_syslog("sweepfs-chunkserver");
	signal(SIGPIPE, SIG_IGN);
	sw_raise_fd_limit();
	set_pool_size(&d.cs.cfg);
	gethostname(d.cs.name, sizeof(d.cs.name) - 1);
	if (!a.foreground) {
		ready_fd = sw_daemonize("sweepfs-chunkserver");
		if (ready_fd < 0) {
			fprintf(stderr, "cannot daemonize: %s\n",
				strerror(-ready_fd));
			rc = 1;
			goto out_sets;
		}
	}
	if (lock_dirs(&d) < 0)
		goto out_fail;
	if (a.pidfile && (rc = sw_pidfile_write(a.pidfile)) < 0)
		sw_err(TAG, "cannot write %s: %s", a.pidfile, strerror(-rc));
	d.cs.loop = uv_default_loop();
	if (start(&d) < 0) {
		abort_start(&d);
		goto out_fail;
	}
	sw_notice(TAG,
		  "listening on %s:%u (clients are told %s), master %s, "
		  "%zu chunks",
		  d.cs.listen_host, d.cs.listen_port, d.cs.advertise,
		  d.cs.cfg.master, store_count(d.cs.store));
	sw_daemon_ready(&ready_fd, 0);
	sw_sdnotify_ready(d.cs.loop, "listening");

	uv_run(d.cs.loop, UV_RUN_DEFAULT);

	mlink_release(&d.cs);
	store_close(d.cs.store);
	uv_loop_close(d.cs.loop);
	sw_notice(TAG, "stopped");
	if (a.pidfile)
		unlink(a.pidfile);
	unlock_dirs(&d);
	rc = 0;
	goto out_sets;

out_fail:
	sw_daemon_ready(&ready_fd, 1);
	unlock_dirs(&d);
	rc = 1;
out_sets:
	sw_daemon_args_free(&a);
	return rc;
}
