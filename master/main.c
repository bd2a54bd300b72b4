/*
 * sweepfs-master: configuration, start-up, signals, housekeeping.
 *
 * Start-up: lock the data directory, load the newest checkpoint, replay
 * the changelog after it (cutting a torn tail), start a new changelog
 * file, listen. In daemon mode the parent process waits on a pipe until
 * the daemon is listening (or has failed), so `sweepfs-master` returns
 * only when the master is usable, with an exit status that says whether
 * it is.
 *
 * SIGTERM/SIGINT: stop accepting, flush and sync the changelog, write a
 * checkpoint, exit 0. SIGHUP: reopen logs and reload what can be reloaded.
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
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfg.h"
#include "checkpoint.h"
#include "log.h"
#include "master_i.h"
#include "mutation.h"
#include "net.h"
#include "util.h"

#define TAG "master"
#define DEFAULT_CONFIG "/etc/sweepfs/master.cfg"

static const char *const sync_choices[] = { "always", "interval", "never",
					    NULL };

static void config_defaults(struct master_config *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->listen_host, "0.0.0.0");
	c->listen_port = SW_MASTER_PORT;
	strcpy(c->data_dir, "/var/lib/sweepfs/master");
	strcpy(c->exports_file, "/etc/sweepfs/exports.cfg");
	c->changelog_sync = CL_SYNC_INTERVAL;
	c->sync_interval_ms = 100;
	c->checkpoint_interval_ms = 3600 * 1000;
	c->checkpoint_changes = 10 * 1000 * 1000;
	c->keep_checkpoints = 2;
	c->session_timeout_ms = 120 * 1000;
	c->frame_timeout_ms = 30 * 1000;
	c->max_connections = 10000;
	strcpy(c->log_level, "notice");
	c->goal = 1;
	c->delete_rate = 2000;
	c->purge_slice_us = 200;
	c->purge_duty = 50;
	c->snapshot_sync_max = 20000;
}

static void config_table(struct master_config *c, struct sw_opt *o)
{
	const struct sw_opt t[] = {
		{ "listen_host", SW_OPT_STRING, c->listen_host, 0,
		  sizeof(c->listen_host), NULL, "address to listen on" },
		{ "listen_port", SW_OPT_UINT, &c->listen_port, 1, 65535, NULL,
		  "TCP port for mounts and tools" },
		{ "data_dir", SW_OPT_STRING, c->data_dir, 0,
		  sizeof(c->data_dir), NULL,
		  "checkpoints and changelog live here" },
		{ "changelog_sync", SW_OPT_ENUM, &c->changelog_sync, 0, 0,
		  sync_choices,
		  "always: fdatasync before replying; interval: write before "
		  "replying, fdatasync every changelog_sync_interval; never" },
		{ "changelog_sync_interval", SW_OPT_DURATION,
		  &c->sync_interval_ms, 1, 3600 * 1000, NULL,
		  "fdatasync period for changelog_sync = interval" },
		{ "checkpoint_interval", SW_OPT_DURATION,
		  &c->checkpoint_interval_ms, 1000, UINT64_MAX, NULL,
		  "write a checkpoint this often (if anything changed)" },
		{ "checkpoint_changes", SW_OPT_UINT, &c->checkpoint_changes, 1,
		  UINT64_MAX, NULL, "... or after this many changes" },
		{ "keep_checkpoints", SW_OPT_UINT, &c->keep_checkpoints, 1, 100,
		  NULL, "checkpoints kept on disk" },
		{ "session_timeout", SW_OPT_DURATION, &c->session_timeout_ms,
		  1000, UINT64_MAX, NULL,
		  "keep a disconnected client's session (open files) this "
		  "long" },
		{ "frame_timeout", SW_OPT_DURATION, &c->frame_timeout_ms, 100,
		  UINT64_MAX, NULL,
		  "drop a peer that stops in the middle of a frame" },
		{ "max_connections", SW_OPT_UINT, &c->max_connections, 1,
		  1000000, NULL, "connections accepted at once" },
		{ "log_level", SW_OPT_STRING, c->log_level, 0,
		  sizeof(c->log_level), NULL,
		  "err, warning, notice, info or debug" },
		{ "goal", SW_OPT_UINT, &c->goal, 1, 8, NULL,
		  "copies kept of each chunk" },
		{ "delete_rate", SW_OPT_UINT, &c->delete_rate, 1, 1000000, NULL,
		  "chunk deletions per second sent to each chunkserver" },
		{ "purge_slice", SW_OPT_UINT, &c->purge_slice_us, 10, 100000,
		  NULL, "longest run of the purge between requests, in us" },
		{ "purge_duty", SW_OPT_UINT, &c->purge_duty, 1, 100, NULL,
		  "percent of the master's time the purge may take" },
		{ "exports_file", SW_OPT_STRING, c->exports_file, 0,
		  sizeof(c->exports_file), NULL,
		  "who may mount what (missing: everyone, everything)" },
		{ "snapshot_sync_max", SW_OPT_UINT, &c->snapshot_sync_max, 0,
		  UINT64_MAX, NULL,
		  "snapshots of at most this many nodes are copied at once; "
		  "bigger ones by a forked child, in the background" },
		{ 0 },
	};

	memcpy(o, t, sizeof(t));
}

#define NOPTS 19

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sweepfs-master [options]\n"
		"\n"
		"  -c, --config FILE      configuration file (default %s, if "
		"it exists)\n"
		"  -d, --data-dir DIR     metadata directory\n"
		"  -l, --listen HOST:PORT address to listen on\n"
		"  -s, --set KEY=VALUE    set a configuration key\n"
		"  -f, --foreground       do not detach; log to stderr\n"
		"      --syslog           log to syslog even in the foreground\n"
		"  -p, --pidfile FILE     write the daemon's pid here\n"
		"  -v, --log-level LEVEL  err, warning, notice, info, debug\n"
		"      --dump-config      print the configuration and exit\n"
		"  -V, --version          print the version and exit\n"
		"  -h, --help             this text\n",
		DEFAULT_CONFIG);
}

/* ---- replay --------------------------------------------------------- */

static int replay_one(void *arg, uint64_t version, const uint8_t *payload,
		      size_t len)
{
	struct ns *ns = arg;
	Sweepfs__Meta__Mutation *m;
	int rc;

	m = sweepfs__meta__mutation__unpack(NULL, len, payload);
	if (!m)
		return -EUCLEAN;
	rc = mutation_apply(ns, m, version);
	sweepfs__meta__mutation__free_unpacked(m, NULL);
	return rc;
}

static int load_metadata(struct master *m)
{
	uint64_t cp_version, last;
	int64_t t0 = sw_mono_ns();
	int rc;

	rc = ns_init(&m->ns, sw_now_ns());
	if (rc < 0)
		return rc;
	rc = checkpoint_load(&m->ns, m->cfg.data_dir, &cp_version);
	if (rc < 0) {
		sw_crit(TAG, "no usable checkpoint in %s: %s",
			m->cfg.data_dir, strerror(-rc));
		return rc;
	}
	m->checkpoint_version = cp_version;
	rc = changelog_replay(m->cfg.data_dir, cp_version, replay_one, &m->ns,
			      &last);
	if (rc < 0) {
		sw_crit(TAG, "changelog replay failed: %s", strerror(-rc));
		return rc;
	}
	m->ns.version = last;
	sw_notice(TAG, "metadata at version %" PRIu64 " (checkpoint %" PRIu64
		       ", %" PRIu64 " changes replayed): %" PRIu64
		       " nodes in %.3f s",
		  last, cp_version, last - cp_version, m->ns.nnodes,
		  (double)(sw_mono_ns() - t0) / 1e9);
	if (htab_count(&m->ns.orphans)) {
		m->orphan_deadline = sw_mono_ns() +
				     (int64_t)m->cfg.session_timeout_ms * 1000000;
		sw_notice(TAG, "%zu open-but-unlinked files wait for their "
			       "clients to reclaim them",
			  htab_count(&m->ns.orphans));
	}
	return 0;
}

/* ---- checkpoints ---------------------------------------------------- */

static uint64_t checkpoint_target;

static void on_checkpoint_done(void *arg, int rc)
{
	struct master *m = arg;
	int64_t oldest;

	m->checkpoint_running = false;
	if (rc < 0) {
		sw_err(TAG, "checkpoint %" PRIu64 " failed: %s",
		       checkpoint_target, strerror(-rc));
		return;
	}
	m->checkpoint_version = checkpoint_target;
	oldest = checkpoint_prune(m->cfg.data_dir,
				  (unsigned)m->cfg.keep_checkpoints);
	if (oldest > 0)
		changelog_prune(m->cfg.data_dir, (uint64_t)oldest);
	sw_info(TAG, "checkpoint %" PRIu64 " written", checkpoint_target);
}

void master_checkpoint(struct master *m)
{
	int rc;

	/* Half a snapshot copy is not something to checkpoint: the
	 * changelog holds it until it is done (snapjob.c). */
	if (m->checkpoint_running || m->stopping || ns_copy_active(&m->ns, NULL))
		return;
	m->last_checkpoint = sw_mono_ns();
	if (m->ns.version == m->checkpoint_version)
		return;
	rc = changelog_rotate(m->cl);
	if (rc < 0) {
		sw_err(TAG, "cannot start a new changelog file: %s",
		       strerror(-rc));
		return;
	}
	checkpoint_target = m->ns.version;
	rc = checkpoint_start(m->loop, &m->ns, m->cfg.data_dir,
			      checkpoint_target, on_checkpoint_done, m);
	if (rc < 0) {
		sw_err(TAG, "cannot start a checkpoint: %s", strerror(-rc));
		return;
	}
	m->checkpoint_running = true;
}

/* ---- exports --------------------------------------------------------- */

/*
 * (Re)load the exports file. A missing file means the open policy; a
 * broken one keeps what was in force (at start-up: refuses to start).
 */
static int load_exports(struct master *m)
{
	char err[512] = "";
	int rc = exports_load(m->cfg.exports_file, &m->exports, err,
			      sizeof(err));

	if (rc == -ENOENT) {
		if (!m->exports.open)
			sw_notice(TAG, "%s does not exist: every client may "
				       "mount everything, read-write, as admin",
				  m->cfg.exports_file);
		exports_open(&m->exports);
		return 0;
	}
	if (rc < 0) {
		sw_err(TAG, "exports not (re)loaded: %s",
		       err[0] ? err : strerror(-rc));
		return rc;
	}
	sw_notice(TAG, "%s: %zu exports", m->cfg.exports_file, m->exports.n);
	return 0;
}

/* ---- loop callbacks ------------------------------------------------- */

static void on_durable(void *arg, uint64_t version)
{
	server_durable(arg, version);
}

/*
 * The key that signs chunk access tokens, kept in data_dir/token.key so
 * that tokens mounts hold stay valid across a master restart.
 */
static int load_token_key(struct master *m)
{
	char path[4200];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/token.key", m->cfg.data_dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, m->token_key, sizeof(m->token_key));
		close(fd);
		if (n == (ssize_t)sizeof(m->token_key))
			return 0;
		sw_warn(TAG, "%s is short; making a new key", path);
	}
	if (getrandom(m->token_key, sizeof(m->token_key), 0) !=
	    (ssize_t)sizeof(m->token_key))
		return -EIO;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	n = write(fd, m->token_key, sizeof(m->token_key));
	if (n != (ssize_t)sizeof(m->token_key) || fsync(fd) < 0) {
		close(fd);
		return -EIO;
	}
	close(fd);
	return 0;
}

static void on_cs_tick(uv_timer_t *t)
{
	csrvs_tick(t->data);
}

static void on_tick(uv_timer_t *t)
{
	struct master *m = t->data;
	int64_t now = sw_mono_ns();

	admin_sample(m);
	sessions_expire(m);
	orphans_expire(m);
	trash_expire(m);
	server_reap_stalled(m);
	if (m->ns.version - m->checkpoint_version >= m->cfg.checkpoint_changes ||
	    now - m->last_checkpoint >=
		    (int64_t)m->cfg.checkpoint_interval_ms * 1000000)
		master_checkpoint(m);
	while (ns_housekeep(&m->ns) && sw_mono_ns() - now < 1000000)
		;
}

static void shutdown_master(struct master *m)
{
	if (m->stopping)
		return;
	m->stopping = true;
	sw_notice(TAG, "shutting down");
	snapjob_stop(m);
	/* Flushed and synced first, so that held replies go out below. */
	changelog_close(m->cl);
	m->cl = NULL;
	server_stop(m);
	uv_timer_stop(&m->tick);
	uv_close((uv_handle_t *)&m->tick, NULL);
	uv_timer_stop(&m->cs_tick);
	uv_close((uv_handle_t *)&m->cs_tick, NULL);
	purge_stop(m);
	for (size_t i = 0; i < SW_ARRAY_SIZE(m->sig); i++)
		uv_close((uv_handle_t *)&m->sig[i], NULL);
}

static void on_signal(uv_signal_t *h, int signum)
{
	struct master *m = h->data;

	if (signum == SIGHUP) {
		if (load_exports(m) == 0)
			sessions_reexport(m);
		return;
	}
	shutdown_master(m);
}

/* ---- process -------------------------------------------------------- */

static int lock_data_dir(struct master *m)
{
	char path[4200];
	int fd;

	if (mkdir(m->cfg.data_dir, 0750) < 0 && errno != EEXIST) {
		sw_crit(TAG, "cannot create %s: %s", m->cfg.data_dir,
			strerror(errno));
		return -errno;
	}
	snprintf(path, sizeof(path), "%s/lock", m->cfg.data_dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0) {
		sw_crit(TAG, "cannot open %s: %s", path, strerror(errno));
		return -errno;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		sw_crit(TAG, "%s is in use by another master", m->cfg.data_dir);
		close(fd);
		return -EBUSY;
	}
	m->lock_fd = fd;
	return 0;
}

/*
 * Detach from the terminal. Returns in the daemon with the write end of a
 * pipe on which to report readiness; the original process waits on the
 * read end and exits with the daemon's status.
 */
static int daemonize(void)
{
	int fds[2], null;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		char status = 1;

		close(fds[1]);
		if (read(fds[0], &status, 1) != 1)
			status = 1;
		_exit(status);
	}
	close(fds[0]);
	setsid();
	if (chdir("/") < 0)
		return -errno;
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (null > 2)
			close(null);
	}
	return fds[1];
}

static void report_ready(int fd, char status)
{
	if (fd < 0)
		return;
	if (write(fd, &status, 1) < 0)
		status = 1;
	close(fd);
}

static int write_pidfile(const char *path)
{
	FILE *f = fopen(path, "we");

	if (!f)
		return -errno;
	fprintf(f, "%d\n", (int)getpid());
	return fclose(f) ? -errno : 0;
}

static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "data-dir", required_argument, NULL, 'd' },
		{ "listen", required_argument, NULL, 'l' },
		{ "set", required_argument, NULL, 's' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "syslog", no_argument, NULL, 'S' },
		{ "pidfile", required_argument, NULL, 'p' },
		{ "log-level", required_argument, NULL, 'v' },
		{ "dump-config", no_argument, NULL, 'D' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	static struct master m;
	struct sw_opt opts[NOPTS];
	const char *config = NULL, *pidfile = NULL;
	char *sets[64];
	bool owned[64] = { false }; /* sets[i] was allocated here */
	int nsets = 0, opt, rc, ready_fd = -1, level;
	bool foreground = false, use_syslog = false, dump = false;
	struct changelog_opts clo;
	struct sw_target listen;
	const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT };

	config_defaults(&m.cfg);
	config_table(&m.cfg, opts);
	while ((opt = getopt_long(argc, argv, "c:d:l:s:fp:v:Vh", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'c':
			config = optarg;
			break;
		case 'd':
		case 'l':
		case 'v':
		case 's':
			if (nsets == (int)SW_ARRAY_SIZE(sets)) {
				fprintf(stderr, "too many settings\n");
				return 2;
			}
			if (opt == 's') {
				sets[nsets++] = optarg;
			} else {
				const char *key = opt == 'd'   ? "data_dir="
						  : opt == 'v' ? "log_level="
							       : "listen=";
				char *kv = malloc(strlen(key) + strlen(optarg) + 1);

				if (!kv)
					return 1;
				sprintf(kv, "%s%s", key, optarg);
				owned[nsets] = true;
				sets[nsets++] = kv;
			}
			break;
		case 'f':
			foreground = true;
			break;
		case 'S':
			use_syslog = true;
			break;
		case 'p':
			pidfile = optarg;
			break;
		case 'D':
			dump = true;
			break;
		case 'V':
			printf("sweepfs-master %s\n", SWEEPFS_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	if (!config && access(DEFAULT_CONFIG, R_OK) == 0)
		config = DEFAULT_CONFIG;
	if (config) {
		struct sw_cfg_error where;

		rc = sw_cfg_load(config, opts, &where);
		if (rc < 0) {
			if (where.line)
				fprintf(stderr, "%s:%u: %s: %s\n", config,
					where.line, where.key,
					rc == -ENOENT ? "unknown key"
						      : "bad value");
			else
				fprintf(stderr, "%s: %s\n", config,
					strerror(-rc));
			return 2;
		}
	}
	rc = 0;
	for (int i = 0; i < nsets && rc == 0; i++) {
		if (!strncmp(sets[i], "listen=", 7)) {
			if (sw_target_parse(sets[i] + 7, SW_MASTER_PORT,
					    &listen) < 0) {
				fprintf(stderr, "bad listen address: %s\n",
					sets[i] + 7);
				rc = -EINVAL;
				break;
			}
			snprintf(m.cfg.listen_host, sizeof(m.cfg.listen_host),
				 "%s", listen.host);
			m.cfg.listen_port = listen.port;
			continue;
		}
		rc = sw_opt_set_kv(opts, sets[i]);
		if (rc < 0)
			fprintf(stderr, "%s: %s\n", sets[i],
				rc == -ENOENT ? "unknown key" : "bad value");
	}
	for (int i = 0; i < nsets; i++)
		if (owned[i])
			free(sets[i]);
	if (rc < 0)
		return 2;
	level = sw_log_parse_level(m.cfg.log_level);
	if (level < 0) {
		fprintf(stderr, "bad log level: %s\n", m.cfg.log_level);
		return 2;
	}
	if (dump) {
		sw_opt_dump(stdout, opts);
		return 0;
	}
	sw_log_level = level;
	sw_log_set_ident("sweepfs-master");
	if (!foreground || use_syslog)
		sw_log_to_syslog("sweepfs-master");

	signal(SIGPIPE, SIG_IGN);
	raise_fd_limit();
	if (!foreground) {
		ready_fd = daemonize();
		if (ready_fd < 0) {
			fprintf(stderr, "cannot daemonize: %s\n",
				strerror(-ready_fd));
			return 1;
		}
	}
	if (lock_data_dir(&m) < 0)
		goto out_fail;
	if (pidfile && write_pidfile(pidfile) < 0)
		sw_err(TAG, "cannot write %s: %s", pidfile, strerror(errno));

	m.loop = uv_default_loop();
	m.started_at = sw_now_ns();
	m.started_mono = m.last_checkpoint = sw_mono_ns();
	if (load_token_key(&m) < 0) {
		sw_crit(TAG, "cannot make %s/token.key", m.cfg.data_dir);
		goto out_fail;
	}
	/* Replay drops chunks too; their copies are found orphaned when the
	 * chunkservers register, so the deletion hook starts only now. */
	if (load_metadata(&m) < 0)
		goto out_fail;
	csrvs_init(&m);
	clo = (struct changelog_opts){
		.dir = m.cfg.data_dir,
		.sync = (enum cl_sync)m.cfg.changelog_sync,
		.interval_ms = m.cfg.sync_interval_ms,
		.on_durable = on_durable,
		.arg = &m,
	};
	rc = changelog_open(m.loop, &clo, m.ns.version, &m.cl);
	if (rc < 0) {
		sw_crit(TAG, "cannot open the changelog in %s: %s",
			m.cfg.data_dir, strerror(-rc));
		goto out_fail;
	}
	sessions_init(&m);
	if (load_exports(&m) < 0)
		goto out_fail;
	if (server_start(&m) < 0)
		goto out_fail;
	uv_timer_init(m.loop, &m.tick);
	m.tick.data = &m;
	uv_timer_start(&m.tick, on_tick, 1000, 1000);
	uv_timer_init(m.loop, &m.cs_tick);
	m.cs_tick.data = &m;
	uv_timer_start(&m.cs_tick, on_cs_tick, 100, 100);
	purge_init(&m);
	if (snapjob_init(&m) < 0) {
		sw_crit(TAG, "cannot give up an interrupted snapshot");
		goto out_fail;
	}
	purge_kick(&m); /* a purge interrupted by a restart goes on */
	for (size_t i = 0; i < SW_ARRAY_SIZE(sigs); i++) {
		uv_signal_init(m.loop, &m.sig[i]);
		m.sig[i].data = &m;
		uv_signal_start(&m.sig[i], on_signal, sigs[i]);
	}
	sw_notice(TAG, "listening on %s:%" PRIu64 " (changelog_sync = %s)",
		  m.cfg.listen_host, m.cfg.listen_port,
		  sync_choices[m.cfg.changelog_sync]);
	report_ready(ready_fd, 0);

	uv_run(m.loop, UV_RUN_DEFAULT);

	/* Stopped: make the state on disk complete and quick to load. */
	if (m.ns.version != m.checkpoint_version &&
	    !ns_copy_active(&m.ns, NULL)) {
		rc = checkpoint_write(&m.ns, m.cfg.data_dir, m.ns.version);
		if (rc < 0) {
			sw_err(TAG, "final checkpoint failed: %s",
			       strerror(-rc));
		} else {
			int64_t oldest = checkpoint_prune(
				m.cfg.data_dir, (unsigned)m.cfg.keep_checkpoints);

			if (oldest > 0)
				changelog_prune(m.cfg.data_dir,
						(uint64_t)oldest);
		}
	}
	sw_notice(TAG, "stopped at version %" PRIu64, m.ns.version);
	snapjob_release(&m);
	exports_free(&m.exports);
	sessions_release(&m);
	csrvs_release(&m);
	ns_release(&m.ns);
	uv_loop_close(m.loop);
	if (pidfile)
		unlink(pidfile);
	return 0;

out_fail:
	report_ready(ready_fd, 1);
	return 1;
}
