/*
 * sweepfs-master: options, the process, signals; the master itself starts,
 * keeps house and stops in master.c.
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfg.h"
#include "changelog.h"
#include "daemon.h"
#include "frame.h"
#include "checkpoint.h"
#include "log.h"
#include "master.h"
#include "session.h"
#include "net.h"
#include "sdnotify.h"
#include "util.h"

#define TAG "master"
#define DEFAULT_CONFIG "/etc/sweepfs/master.cfg"

static const char *const sync_choices[] = { "always", "interval", "never",
					    NULL };
static const char *const writer_choices[] = { "auto", "thread", NULL };

/* Options in each table (the second ends with the terminating { 0 }). */
#define NOPTS_SERVICE 37
#define NOPTS_LIMITS 15
#define NOPTS_CAPS 8
#define NOPTS (NOPTS_SERVICE + NOPTS_CAPS + NOPTS_LIMITS)

/* The keys of the service itself; their number. */
static size_t config_service(struct master_config *c, struct sw_opt *o)
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
		  "replying, fdatasync within changelog_sync_interval of a "
		  "write; never" },
		{ "changelog_writer", SW_OPT_ENUM, &c->changelog_writer, 0, 0,
		  writer_choices,
		  "auto: the loop writes the changelog while the disk is "
		  "calm, a thread while a checkpoint is written or a write "
		  "was slow; thread: always a thread (the loop never waits "
		  "for the disk; two thread wake-ups more per change)" },
		{ "changelog_sync_interval", SW_OPT_DURATION,
		  &c->sync_interval_ms, 1, 3600 * 1000, NULL,
		  "fdatasync period for changelog_sync = interval (none "
		  "while nothing is written)" },
		{ "checkpoint_interval", SW_OPT_DURATION,
		  &c->checkpoint_interval_ms, 1000, UINT64_MAX, NULL,
		  "write a checkpoint this often (if anything changed)" },
		{ "checkpoint_changes", SW_OPT_UINT, &c->checkpoint_changes, 1,
		  UINT64_MAX, NULL,
		  "... or once replaying the changes since the last would "
		  "cost this many: one a change, plus one a node a purge "
		  "freed or a snapshot copy made" },
		{ "keep_checkpoints", SW_OPT_UINT, &c->keep_checkpoints, 1, 100,
		  NULL, "checkpoints kept on disk" },
		{ "session_timeout", SW_OPT_DURATION, &c->session_timeout_ms,
		  1000, UINT64_MAX, NULL,
		  "keep a disconnected client's session (open files) this "
		  "long" },
		{ "frame_timeout", SW_OPT_DURATION, &c->frame_timeout_ms, 100,
		  UINT64_MAX, NULL,
		  "drop a peer that stops in the middle of a frame" },
		{ "peer_timeout", SW_OPT_DURATION, &c->peer_timeout_ms, 1000,
		  3600 * 1000, NULL,
		  "close a connection whose peer's network is gone (no "
		  "answer to TCP keepalives or data) after this long; its "
		  "session then waits session_timeout" },
		{ "max_connections", SW_OPT_UINT, &c->max_connections, 1,
		  1000000, NULL, "connections accepted at once" },
		{ "log_level", SW_OPT_STRING, c->log_level, 0,
		  sizeof(c->log_level), NULL,
		  "err, warning, notice, info or debug" },
		{ "goal", SW_OPT_UINT, &c->goal, 1, 8, NULL,
		  "copies kept of each chunk" },
		{ "delete_rate", SW_OPT_UINT, &c->delete_rate, 1, 1000000, NULL,
		  "most chunk deletions per second sent to each chunkserver "
		  "(they go at its disks' pace below this cap)" },
		{ "chunkserver_grace", SW_OPT_DURATION,
		  &c->chunkserver_grace_ms, 0, 3600 * 1000, NULL,
		  "after start-up, requests for a chunk no chunkserver has "
		  "reported yet wait this long for it to register again" },
		{ "stray_grace", SW_OPT_DURATION, &c->stray_grace_ms, 0,
		  7 * 24 * 3600 * 1000ULL, NULL,
		  "a chunk file a chunkserver reports that the master does "
		  "not know, numbered above every chunk it has journaled, is "
		  "deleted only after this long (a replay or another master "
		  "may still bring it back); 0: at once. Files of chunks it "
		  "removed go at once" },
		{ "purge_slice", SW_OPT_UINT, &c->purge_slice_us, 10, 100000,
		  NULL, "longest run of the purge between requests, in us" },
		{ "purge_duty", SW_OPT_UINT, &c->purge_duty, 1, 100, NULL,
		  "percent of the master's time the purge may take" },
		{ "purge_duty_busy", SW_OPT_UINT, &c->purge_duty_busy, 1, 100,
		  NULL,
		  "... while mounts' requests come in (within the last "
		  "100 ms): the purge's CPU competes with theirs" },
		{ "exports_file", SW_OPT_STRING, c->exports_file, 0,
		  sizeof(c->exports_file), NULL,
		  "who may mount what (missing: everyone, everything)" },
		{ "snapshot_sync_max", SW_OPT_UINT, &c->snapshot_sync_max, 0,
		  UINT64_MAX, NULL,
		  "snapshots of at most this many nodes are copied at once; "
		  "bigger ones by a forked child, in the background" },
		{ "metrics_listen", SW_OPT_STRING, c->metrics_listen, 0,
		  sizeof(c->metrics_listen), NULL,
		  "serve Prometheus metrics over HTTP on HOST:PORT (empty: "
		  "off); anyone who reaches it may read them" },
		{ "id", SW_OPT_UINT, &c->group_id, 0, 255, NULL,
		  "this master's id in its group (0: no group, it serves "
		  "alone)" },
		{ "group", SW_OPT_STRING, c->group, 0, sizeof(c->group), NULL,
		  "the group's members, ID=HOST:PORT,...: each one's address "
		  "for clients" },
		{ "etcd", SW_OPT_STRING, c->etcd, 0, sizeof(c->etcd), NULL,
		  "a group's etcd, HOST:PORT,... (its own member first): the "
		  "election and the replicated changelog" },
		{ "group_prefix", SW_OPT_STRING, c->group_prefix, 1,
		  sizeof(c->group_prefix), NULL,
		  "the group's keys in etcd are under this" },
		{ "etcd_cacert", SW_OPT_STRING, c->etcd_cacert, 0,
		  sizeof(c->etcd_cacert), NULL,
		  "etcd over TLS (https), its certificate checked against "
		  "this CA file (PEM)" },
		{ "etcd_cert", SW_OPT_STRING, c->etcd_cert, 0,
		  sizeof(c->etcd_cert), NULL,
		  "the certificate (PEM) this member shows etcd (etcd's "
		  "--client-cert-auth)" },
		{ "etcd_key", SW_OPT_STRING, c->etcd_key, 0,
		  sizeof(c->etcd_key), NULL,
		  "etcd_cert's private key (PEM), not readable by others" },
		{ "etcd_user", SW_OPT_STRING, c->etcd_user, 0,
		  sizeof(c->etcd_user), NULL,
		  "the etcd user this member authenticates as (etcd's auth "
		  "enabled), with the password in etcd_password_file" },
		{ "etcd_password_file", SW_OPT_STRING, c->etcd_password_file, 0,
		  sizeof(c->etcd_password_file), NULL,
		  "a file holding etcd_user's password (its first line), "
		  "not readable by others" },
		{ "group_lease", SW_OPT_DURATION, &c->group_lease_ms, 2000,
		  60000, NULL,
		  "a leader that stops renewing its lease for this long is "
		  "replaced (whole seconds)" },
		{ "group_disk_timeout", SW_OPT_DURATION,
		  &c->group_disk_timeout_ms, 1000, 3600000, NULL,
		  "a leader whose changelog disk makes no progress for this "
		  "long while changes wait for it lets its lease go" },
		{ "group_log_keep", SW_OPT_UINT, &c->group_log_keep, 0,
		  UINT64_MAX, NULL,
		  "etcd keeps this many versions of the group's log more "
		  "than its slowest member has" },
		{ "group_log_away", SW_OPT_DURATION, &c->group_log_away_ms,
		  1000, UINT64_MAX, NULL,
		  "a member silent for this long is not waited for: the log "
		  "it lacks goes, and it catches up from the leader's "
		  "checkpoint" },
	};

	_Static_assert(SW_ARRAY_SIZE(t) == NOPTS_SERVICE,
		       "NOPTS_SERVICE must count the options");
	memcpy(o, t, sizeof(t));
	return SW_ARRAY_SIZE(t);
}

/* The limits that keep a client (or many) from taking the master over,
 * and the delegations'; their number, with the terminator. */
static size_t config_limits(struct master_config *c, struct sw_opt *o)
{
	const struct sw_opt t[] = {
		{ "chunkserver_key_file", SW_OPT_STRING,
		  c->chunkserver_key_file, 0, sizeof(c->chunkserver_key_file),
		  NULL,
		  "the key chunkservers must prove they hold (give each "
		  "chunkserver a copy, mode 0600); empty: "
		  "data_dir/chunkserver.key, made at first start" },
		{ "chunkserver_allow", SW_OPT_STRING, c->chunkserver_allow, 0,
		  sizeof(c->chunkserver_allow), NULL,
		  "addresses chunkservers may register from, as in the "
		  "exports file, comma-separated (* for any)" },
		{ "max_sessions", SW_OPT_UINT, &c->max_sessions, 1, UINT64_MAX,
		  NULL, "client sessions at once, in all" },
		{ "max_sessions_per_address", SW_OPT_UINT,
		  &c->max_sessions_per_address, 1, UINT64_MAX, NULL,
		  "... from one address" },
		{ "session_idle_timeout", SW_OPT_DURATION,
		  &c->session_idle_timeout_ms, 0, UINT64_MAX, NULL,
		  "keep a disconnected session that holds no open file and "
		  "no lock this long (not session_timeout)" },
		{ "output_max", SW_OPT_SIZE, &c->output_max, 64 << 10,
		  UINT64_MAX, NULL,
		  "stop reading a client's requests while this many bytes of "
		  "its replies are unsent" },
		{ "grants_max", SW_OPT_UINT, &c->grants_max, 1024, UINT64_MAX,
		  NULL,
		  "files a session confined to a subtree may know by number "
		  "at once (the oldest are forgotten; it looks them up "
		  "again)" },
		{ "locks_per_session", SW_OPT_UINT, &c->locks_per_session, 1,
		  UINT64_MAX, NULL,
		  "file locks one session may hold (a split byte range counts "
		  "two); more fail with ENOLCK" },
		{ "locks_per_file", SW_OPT_UINT, &c->locks_per_file, 1,
		  UINT64_MAX, NULL,
		  "file locks all sessions may hold on one "
		  "file" },
		{ "lock_waiters_per_session", SW_OPT_UINT,
		  &c->lock_waiters_per_session, 1, UINT64_MAX, NULL,
		  "blocked lock requests of one session" },
		{ "lock_waiters_per_file", SW_OPT_UINT,
		  &c->lock_waiters_per_file, 1, UINT64_MAX, NULL,
		  "blocked lock requests on one file" },
		{ "deleg_max", SW_OPT_UINT, &c->deleg_max, 0, UINT64_MAX, NULL,
		  "directories one mount may hold delegated at once, to "
		  "answer and change alone (0: none; each costs the master "
		  "a few dozen bytes and a flag per entry)" },
		{ "deleg_timeout", SW_OPT_DURATION, &c->deleg_timeout_ms, 1,
		  UINT64_MAX, NULL,
		  "a mount asked to give a delegation back that has not "
		  "answered in this long loses it; others' requests wait "
		  "for it meanwhile (250 ms, if nothing at all has come "
		  "from it for this long). Mounts trust what they hold for half "
		  "the smaller of this and peer_timeout after their last "
		  "answer, then drop it" },
		{ "inval_timeout", SW_OPT_DURATION, &c->inval_timeout_ms, 1,
		  UINT64_MAX, NULL,
		  "a change another mount caches is answered once that mount "
		  "has dropped it from its caches, or after this long" },
		{ 0 },
	};

	_Static_assert(SW_ARRAY_SIZE(t) == NOPTS_LIMITS,
		       "NOPTS_LIMITS must count the options");
	memcpy(o, t, sizeof(t));
	return SW_ARRAY_SIZE(t);
}

/* The caps, over all clients, on what they make the master hold, and on
 * peers that have not said who they are; their number. */
static size_t config_caps(struct master_config *c, struct sw_opt *o)
{
	const struct sw_opt t[] = {
		{ "hello_timeout", SW_OPT_DURATION, &c->hello_timeout_ms, 100,
		  3600 * 1000, NULL,
		  "close a connection that has not finished its hello this "
		  "long after it was accepted" },
		{ "pre_hello_max", SW_OPT_UINT, &c->pre_hello_max, 1, 1000000,
		  NULL,
		  "connections without a hello yet, in all; past it the "
		  "oldest is closed for a new one (keep it well below "
		  "max_connections)" },
		{ "pre_hello_per_address", SW_OPT_UINT,
		  &c->pre_hello_per_address, 1, 1000000, NULL,
		  "... from one address" },
		{ "output_total_max", SW_OPT_SIZE, &c->output_total_max,
		  1 << 20, UINT64_MAX, NULL,
		  "unsent replies of all connections; past it the "
		  "connection with the most is closed" },
		{ "locks_total", SW_OPT_UINT, &c->locks_total, 1, UINT64_MAX,
		  NULL,
		  "file locks held in all; past 7/8 of it only sessions "
		  "holding less than 1/64 of it get more (ENOLCK)" },
		{ "lock_waiters_total", SW_OPT_UINT, &c->lock_waiters_total, 1,
		  UINT64_MAX, NULL,
		  "blocked lock requests in all (the same rule)" },
		{ "locks_per_ro_session", SW_OPT_UINT, &c->locks_per_ro_session,
		  0, UINT64_MAX, NULL,
		  "file locks, held and waited for, of a session on a "
		  "read-only export (its read locks keep no writer of its "
		  "own out; others' writers wait for them)" },
		{ "lock_waiters_per_ro_session", SW_OPT_UINT,
		  &c->lock_waiters_per_ro_session, 0, UINT64_MAX, NULL,
		  "... blocked lock requests of such a session" },
	};

	_Static_assert(SW_ARRAY_SIZE(t) == NOPTS_CAPS,
		       "NOPTS_CAPS must count the options");
	memcpy(o, t, sizeof(t));
	return SW_ARRAY_SIZE(t);
}

static void config_table(struct master_config *c, struct sw_opt *o)
{
	size_t n = config_service(c, o);

	n += config_caps(c, o + n);
	config_limits(c, o + n);
}

static void usage(FILE *f)
{
	sw_daemon_usage(
		f, "sweepfs-master", DEFAULT_CONFIG,
		"  -d, --data-dir DIR     metadata directory\n"
		"  -l, --listen HOST:PORT address to listen on\n"
		"  -I, --id N             this master's id in its group\n"
		"  -G, --group ID=HOST:PORT,...  the group of masters\n");
}

/* ---- signals ------------------------------------------------------- */

static void shutdown_master(struct master *m)
{
	if (m->stopping)
		return;
	sw_sdnotify_stopping();
	master_stop(m);
	for (size_t i = 0; i < SW_ARRAY_SIZE(m->sig); i++)
		uv_close((uv_handle_t *)&m->sig[i], NULL);
}

static void on_signal(uv_signal_t *h, int signum)
{
	struct master *m = h->data;

	if (signum == SIGHUP) {
		if (master_load_exports(m) == 0)
			sessions_reexport(m);
		return;
	}
	shutdown_master(m);
}

/* ---- process -------------------------------------------------------- */

static const struct sw_daemon_flag flags[] = {
	{ 'd', "data-dir", "data_dir=" },
	{ 'l', "listen", "listen=" },
	{ 'I', "id", "id=" },
	{ 'G', "group", "group=" },
	{ 0 },
};

/* The configuration file, then the settings of the command line, on top
 * of the defaults. -1: go on; else the exit status. */
static int configure(struct master *m, struct sw_opt *opts,
		     struct sw_daemon_args *a)
{
	struct sw_target listen;

	if (sw_daemon_load_config(a, DEFAULT_CONFIG, opts) < 0)
		return 2;
	for (int i = 0; i < a->nsets; i++) {
		const char *kv = a->sets[i];

		if (!strncmp(kv, "listen=", 7)) {
			/* One address: a group's members are the group key's
			 * (sw_target_parse() takes lists, for clients). */
			if (sw_target_parse(kv + 7, SW_MASTER_PORT, &listen) <
				    0 ||
			    listen.naddrs > 1) {
				fprintf(stderr,
					"sweepfs-master: listen = %s: must be "
					"one HOST[:PORT]\n",
					kv + 7);
				return 2;
			}
			snprintf(m->cfg.listen_host, sizeof(m->cfg.listen_host),
				 "%s", listen.host);
			m->cfg.listen_port = listen.port;
			continue;
		}
		if (sw_daemon_set(opts, kv) < 0)
			return 2;
	}
	return -1;
}

/* For the watchdog: how long the changelog's disk has kept records
 * waiting without progress (the loop itself no longer waits for it). */
static int64_t changelog_stalled(void *arg)
{
	struct master *m = arg;

	return m->cl ? changelog_lag_ns(m->cl, sw_mono_ns()) : 0;
}

/* Become the daemon and serve until stopped; the exit status. */
static int run(struct master *m, const struct sw_daemon_args *a)
{
	const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT };
	int rc, ready_fd = -1;

	signal(SIGPIPE, SIG_IGN);
	sw_raise_fd_limit();
	if (!a->foreground) {
		ready_fd = sw_daemonize("sweepfs-master");
		if (ready_fd < 0) {
			fprintf(stderr, "cannot daemonize: %s\n",
				strerror(-ready_fd));
			return 1;
		}
	}
	if (sw_lock_dir(TAG, m->cfg.data_dir, "lock", &m->lock_fd) < 0)
		goto out_fail;
	if (a->pidfile && (rc = sw_pidfile_write(a->pidfile)) < 0)
		sw_err(TAG, "cannot write %s: %s", a->pidfile, strerror(-rc));

	if (master_start(m, uv_default_loop()) < 0)
		goto out_fail;
	for (size_t i = 0; i < SW_ARRAY_SIZE(sigs); i++) {
		uv_signal_init(m->loop, &m->sig[i]);
		m->sig[i].data = m;
		uv_signal_start(&m->sig[i], on_signal, sigs[i]);
	}
	sw_notice(TAG, "listening on %s:%" PRIu64 " (changelog_sync = %s)",
		  m->cfg.listen_host, m->cfg.listen_port,
		  sync_choices[m->cfg.changelog_sync]);
	sw_daemon_ready(&ready_fd, 0);
	sw_sdnotify_stalled(changelog_stalled, m);
	sw_sdnotify_ready(m->loop, "listening");

	uv_run(m->loop, UV_RUN_DEFAULT);

	/* The digest lets whoever runs a group compare its members. */
	sw_notice(TAG, "stopped at version %" PRIu64 ", digest %016" PRIx64,
		  m->ns.version, ns_digest(&m->ns));
	master_release(m);
	uv_loop_close(m->loop);
	if (a->pidfile)
		unlink(a->pidfile);
	return 0;

out_fail:
	sw_daemon_ready(&ready_fd, 1);
	return 1;
}

int main(int argc, char **argv)
{
	static struct master m;
	struct sw_opt opts[NOPTS];
	struct sw_daemon_args a = { 0 };
	uint16_t bad_type;
	int rc, level;

	/* What recalls delegations for each request (messages.def): a
	 * field that does not resolve would silently recall less. */
	if (sw_msg_check(&bad_type) < 0) {
		fprintf(stderr,
			"sweepfs-master: message type %u: its node fields in "
			"proto/messages.def do not match its request\n",
			(unsigned)bad_type);
		return 2;
	}
	master_config_defaults(&m.cfg);
	config_table(&m.cfg, opts);
	rc = sw_daemon_parse(argc, argv, "sweepfs-master", flags, usage, &a);
	if (rc < 0)
		rc = configure(&m, opts, &a);
	sw_daemon_args_free(&a);
	if (rc >= 0)
		return rc;
	level = sw_log_parse_level(m.cfg.log_level);
	if (level < 0) {
		fprintf(stderr,
			"sweepfs-master: log_level = %s: must be one of err, "
			"warning, notice, info, debug\n",
			m.cfg.log_level);
		return 2;
	}
	if (a.dump) {
		sw_opt_dump(stdout, opts);
		return 0;
	}
	sw_log_level = level;
	sw_log_set_ident("sweepfs-master");
	if (!a.foreground || a.use_syslog)
		sw_log_to_syslog("sweepfs-master");
	return run(&m, &a);
}
