/*
 * sweepfs-mount HOST[:PORT][,HOST[:PORT]...][:/subdir] MOUNTPOINT [-f] [-d]
 *               [-s] [-o opt,...]
 *
 * With a list of masters (a group), the mount talks to whichever leads
 * and follows the leader when it changes (master_conn.c).
 *
 * Connects to the master first, so that a wrong address or a refusal is
 * reported on the command line, then mounts, detaches (unless -f), starts
 * the connection's receiver thread and serves FUSE requests on a pool of
 * threads. Run as root it adds allow_other, as mfsmount does, so that every
 * user of the machine sees the filesystem.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "auth.h"
#include "client.h"
#include "cspool.h"
#include "daemon.h"
#include "data.h"
#include "deleg.h"
#include "devpoll.h"
#include "dircache.h"
#include "frame.h"
#include "inval.h"
#include "log.h"
#include "mmetrics.h"
#include "mount_i.h"
#include "ring.h"
#include "util.h"

#define TAG "mount"

struct cli {
	char *attr_timeout;
	char *entry_timeout;
	char *negative_timeout;
	char *master_timeout;
	char *readdirplus;
	char *dircache_entries;
	char *password;
	char *passwordfile;
	char *bind;
	char *busy_poll;
	char *metrics_listen;
	int writeback;
	int wsync;
	int io_uring;
	int own_perms;
	int nonempty;
	int help;
	int version;
};

#define CLI_OPT(t, p)                         \
	{                                     \
		t, offsetof(struct cli, p), 1 \
	}

static const struct fuse_opt cli_opts[] = {
	CLI_OPT("attr_timeout=%s", attr_timeout),
	CLI_OPT("entry_timeout=%s", entry_timeout),
	CLI_OPT("negative_timeout=%s", negative_timeout),
	CLI_OPT("master_timeout=%s", master_timeout),
	CLI_OPT("readdirplus=%s", readdirplus),
	CLI_OPT("dircache_entries=%s", dircache_entries),
	CLI_OPT("password=%s", password),
	CLI_OPT("passwordfile=%s", passwordfile),
	CLI_OPT("bind=%s", bind),
	CLI_OPT("busy_poll=%s", busy_poll),
	CLI_OPT("metrics_listen=%s", metrics_listen),
	CLI_OPT("writeback_cache", writeback),
	CLI_OPT("wsync", wsync),
	CLI_OPT("io_uring", io_uring),
	CLI_OPT("no_default_permissions", own_perms),
	CLI_OPT("nonempty", nonempty),
	CLI_OPT("-h", help),
	CLI_OPT("--help", help),
	CLI_OPT("-V", version),
	CLI_OPT("--version", version),
	FUSE_OPT_END
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sweepfs-mount HOST[:PORT][:/subdir] MOUNTPOINT [options]\n"
		"       sweepfs-mount H1:P1,H2:P2,H3:P3[:/subdir] MOUNTPOINT "
		"[options]\n"
		"                          (a group of masters: any order)\n"
		"\n"
		"  -f                      stay in the foreground\n"
		"  -d                      debug: foreground, log every request\n"
		"  -s                      one thread\n"
		"  -o attr_timeout=SEC     cache attributes this long (1.0)\n"
		"  -o entry_timeout=SEC    cache names this long (1.0)\n"
		"  -o negative_timeout=SEC cache absent names this long (0)\n"
		"  -o master_timeout=SEC   fail requests with EIO after the "
		"master\n"
		"                          has been unreachable this long (30)\n"
		"  -o readdirplus=MODE     always (default), auto (the kernel "
		"decides), never\n"
		"  -o dircache_entries=N   directory entries cached, in all "
		"(2000000)\n"
		"  -o bind=ADDR            connect from this local address\n"
		"  -o busy_poll=USEC       poll the FUSE device up to this "
		"long before\n"
		"                          sleeping (50; 0: never)\n"
		"  -o writeback_cache      let the kernel buffer writes (faster "
		"small\n"
		"                          writes; a file's size and mtime as "
		"this client\n"
		"                          sees them no longer follow other "
		"clients)\n"
		"  -o wsync                every unlink and rmdir waits for the "
		"master\n"
		"                          (no directory delegations: see "
		"README)\n"
		"  -o io_uring             FUSE requests through io_uring where "
		"the kernel\n"
		"                          offers it (Linux 6.14; the fuse "
		"module's\n"
		"                          enable_uring parameter): see README\n"
		"  -o no_default_permissions\n"
		"                          the kernel checks no permission, the "
		"master\n"
		"                          and the mount do (faster creates and "
		"removals;\n"
		"                          opening FIFOs and sockets goes "
		"unchecked: see\n"
		"                          README)\n"
		"  -o nonempty             mount even on a directory that is "
		"not empty\n"
		"                          or already a mount point\n"
		"  -o metrics_listen=HOST:PORT\n"
		"                          serve Prometheus metrics there "
		"(off)\n"
		"  -o passwordfile=FILE    the export's password, first line "
		"of FILE\n"
		"                          (also $SWEEPFS_PASSWORD; password=PASS "
		"works\n"
		"                          too but shows in ps)\n"
		"  -o OPT                  any FUSE mount option (ro, "
		"allow_other, ...)\n");
}

/*
 * -o @name=@s in seconds (@def when not given) into *@out; a bad one is
 * said, naming the option, the value and what is valid.
 */
static int parse_seconds(const char *name, const char *s, double def,
			 double *out)
{
	char *end;

	if (!s) {
		*out = def;
		return 0;
	}
	*out = strtod(s, &end);
	if (!*end && end != s && *out >= 0 && *out <= 86400)
		return 0;
	fprintf(stderr,
		"sweepfs-mount: %s = %s: must be seconds, 0 to 86400 (such as "
		"1.5)\n",
		name, s);
	return -EINVAL;
}

/*
 * The master sent no invalidations for a while (we did not read them in
 * time: master/server.c's SERVER_NOTICES_MAX): anything may have changed. Every
 * listing goes, with every attribute the inode table remembers, and
 * every name the kernel caches is to be looked up again before use;
 * where the kernel cannot do that (before Linux 6.16), names last at
 * most entry_timeout, as after a reconnect. Before the ack: what the
 * master waits for then is done.
 */
static void forget_all(struct mount *m)
{
	dircache_clear(m->dcache);
	dircache_expire_all_attrs(m->dcache);
	itable_expire_all_attrs(&m->inodes);
	if (inval_all_names(m->se) < 0 &&
	    !__atomic_exchange_n(&m->no_epoch, true, __ATOMIC_RELAXED))
		sw_info(TAG, "this kernel cannot drop every cached name at "
			     "once: names another client changed while we "
			     "were behind last up to entry_timeout");
}

/* Another client changed directories whose listings we cache. */
static void notify_cb(void *arg, uint16_t type, const uint8_t *payload,
		      size_t len)
{
	struct mount *m = arg;
	Sweepfs__InvalNotify *n;

	if (type == SW_MSG_DELEG_RECALL) {
		Sweepfs__DelegRecall *r =
			sweepfs__deleg_recall__unpack(NULL, len, payload);

		if (r) {
			deleg_recall(m->deleg, r->dir,
				     r->has_removed && r->removed);
			sweepfs__deleg_recall__free_unpacked(r, NULL);
		}
		return;
	}
	if (type != SW_MSG_INVAL)
		return;
	n = sweepfs__inval_notify__unpack(NULL, len, payload);
	if (!n)
		return;
	if (n->has_all && n->all)
		forget_all(m);
	for (size_t i = 0; i < n->n_items; i++) {
		const Sweepfs__Inval *it = n->items[i];
		fuse_ino_t dir = mount_to_fuse(m, it->dir);

		dircache_drop(m->dcache, it->dir);
		itable_set_attr_expired(&m->inodes, it->dir);
		if (it->has_name && it->name.len &&
		    it->name.len <= SW_NAME_MAX &&
		    !memchr(it->name.data, '\0', it->name.len))
			inval_queue(m->inval, dir, (const char *)it->name.data,
				    it->name.len);
		inval_queue(m->inval, dir, NULL, 0);
	}
	if (n->has_seq)
		inval_queue_ack(m->inval, n->seq);
	sweepfs__inval_notify__free_unpacked(n, NULL);
}

/* Invalidations sent while we were away are lost: forget all listings. */
/* Connected again after a break, or the master's lease ran out: what it
 * said meanwhile (recalls, invalidations) may be lost. */
static void reconnected_cb(void *arg)
{
	struct mount *m = arg;

	deleg_reconnected(m->deleg);
	dircache_clear(m->dcache);
}

static bool holds_cb(void *arg)
{
	struct mount *m = arg;

	/* A summary holds no entries, but answers for a directory all the
	 * same (dircache.h). */
	return deleg_any(m->deleg) || dircache_entries(m->dcache) > 0 ||
	       dircache_summaries(m->dcache) > 0;
}

/* The kernel forgot what the master's invalidations up to @seq named. */
static void inval_ack_cb(void *arg, uint64_t seq)
{
	struct mount *m = arg;
	Sweepfs__InvalAckReq q = SWEEPFS__INVAL_ACK_REQ__INIT;

	q.seq = seq;
	mconn_send(m->mc, SW_MSG_INVAL_ACK, &q.base, NULL, NULL);
}

/* Whatever this mount acknowledged goes out before its next request. */
static void before_send_cb(void *arg, uint16_t type)
{
	struct mount *m = arg;
	const struct sw_msg_info *info = sw_msg_info(type);

	/* What the kernel asks after a delegated operation sees it done;
	 * the delegation's own messages are the exception (messages.def). */
	if (!info || !info->no_flush)
		deleg_flush(m->deleg);
}

static void open_claims_cb(void *arg, Sweepfs__OpenClaim ***claims, size_t *n)
{
	struct mount *m = arg;

	itable_open_claims(&m->inodes, claims, n);
}

/* A node's handle for a request naming it (master_conn.h). A directory
 * the kernel forgot may still be held, and a batch or a return name it:
 * the delegation keeps its handle. */
static uint64_t handle_cb(void *arg, uint64_t ino)
{
	struct mount *m = arg;
	uint64_t h = itable_handle(&m->inodes, ino);

	return h ? h : deleg_handle(m->deleg, ino);
}

static void ino_claims_cb(void *arg, Sweepfs__InoClaim ***claims, size_t *n)
{
	struct mount *m = arg;

	deleg_ino_claims(m->deleg, claims, n);
}

/* The mount's own options (-o KEY=VALUE) into @m and @target. -1 after
 * saying what is wrong. */
static int apply_cli(const struct cli *cli, struct mount *m,
		     struct sw_target *target, double *master_timeout)
{
	char pw[256];
	int got;

	if (parse_seconds("attr_timeout", cli->attr_timeout, 1.0,
			  &m->attr_timeout) < 0 ||
	    parse_seconds("entry_timeout", cli->entry_timeout, 1.0,
			  &m->entry_timeout) < 0 ||
	    parse_seconds("negative_timeout", cli->negative_timeout, 0.0,
			  &m->negative_timeout) < 0 ||
	    parse_seconds("master_timeout", cli->master_timeout, 30.0,
			  master_timeout) < 0)
		return -1;
	/*
	 * always by default: a reader that goes on to unlink or stat what it
	 * listed (rm -rf, find -delete) then needs no lookup per name, which
	 * halves the round trips of a removal.
	 */
	if (!cli->readdirplus || !strcmp(cli->readdirplus, "always")) {
		m->readdirplus = RDPLUS_ALWAYS;
	} else if (!strcmp(cli->readdirplus, "auto")) {
		m->readdirplus = RDPLUS_AUTO;
	} else if (!strcmp(cli->readdirplus, "never")) {
		m->readdirplus = RDPLUS_NEVER;
	} else {
		fprintf(stderr,
			"sweepfs-mount: readdirplus = %s: must be always, auto "
			"or never\n",
			cli->readdirplus);
		return -1;
	}
	got = cli->password ?
		      (snprintf(pw, sizeof(pw), "%s", cli->password), 1) :
		      sw_auth_password(cli->passwordfile, pw, sizeof(pw));
	if (got < 0) {
		fprintf(stderr, "sweepfs-mount: %s: %s\n", cli->passwordfile,
			strerror(-got));
		return -1;
	}
	if (got > 0)
		sw_target_password(target, pw);
	explicit_bzero(pw, sizeof(pw));
	sw_net_bind = cli->bind;
	m->busy_poll_us = 50;
	if (cli->busy_poll) {
		char *end;
		unsigned long us = strtoul(cli->busy_poll, &end, 10);

		if (*end || end == cli->busy_poll || us > 1000000) {
			fprintf(stderr,
				"sweepfs-mount: busy_poll = %s: must be "
				"microseconds, 0 to 1000000\n",
				cli->busy_poll);
			return -1;
		}
		m->busy_poll_us = (unsigned)us;
	}
	m->metrics_listen = cli->metrics_listen;
	m->dircache_entries = 2000000;
	if (cli->dircache_entries) {
		char *end;

		errno = 0;
		m->dircache_entries = strtoull(cli->dircache_entries, &end, 10);
		if (*end || end == cli->dircache_entries || errno ||
		    cli->dircache_entries[0] == '-') {
			fprintf(stderr,
				"sweepfs-mount: dircache_entries = %s: must be "
				"a whole number\n",
				cli->dircache_entries);
			return -1;
		}
	}
	m->writeback = cli->writeback;
	m->own_perms = cli->own_perms;
	m->io_uring = cli->io_uring;
	return 0;
}

/* A request of @type answered after @ns: counted for the metrics. */
static void answered_cb(void *arg, uint16_t type, int64_t ns)
{
	struct mount *m = arg;

	mmetrics_note(m->metrics, type, ns);
}

/* How the master connection of @m (mounted on @mountpoint) behaves;
 * @client (of @len) is where its name for the master is kept. */
static void connection_opts(struct mount *m, struct mconn_opts *mo,
			    const char *mountpoint, double master_timeout,
			    char *client, size_t len)
{
	char host[256];

	if (gethostname(host, sizeof(host)) < 0)
		strcpy(host, "?");
	snprintf(client, len, "%s:%s", host, mountpoint);
	mo->client_name = client;
	mo->timeout_ms = (int)(master_timeout * 1000);
	mo->cache_ms =
		(uint32_t)(SW_MAX(m->entry_timeout, m->negative_timeout) *
			   1000);
	mo->open_claims = open_claims_cb;
	mo->handle = handle_cb;
	mo->ino_claims = ino_claims_cb;
	mo->notify = notify_cb;
	mo->reconnected = reconnected_cb;
	mo->before_send = before_send_cb;
	mo->holds = holds_cb;
	mo->lapsed = reconnected_cb;
	mo->answered = answered_cb;
	mo->arg = m;
}

static ssize_t dev_read(int fd, void *buf, size_t len, void *arg)
{
	static atomic_bool said;
	struct mount *m = arg;
	ssize_t n = devpoll_read(&m->devpoll, fd, buf, len);

	if (m->ring)
		ring_read(m->ring, buf, n);

	/*
	 * The kernel tore the connection down while it was copying a request
	 * to this thread (fuse_dev_do_read()). An unmount does that: with a
	 * lazy one, as the last file closes and its RELEASE is being read.
	 * The file system is gone either way, but libfuse ends its loop
	 * quietly only for ENODEV; for this the mount exited with 1.
	 */
	if (n < 0 && errno == ECONNABORTED) {
		if (!atomic_exchange(&said, true))
			sw_notice(TAG, "the kernel ended the connection "
				       "during a read");
		errno = ENODEV;
	}
	return n;
}

static ssize_t dev_writev(int fd, struct iovec *iov, int count, void *arg)
{
	struct mount *m = arg;

	if (m->ring)
		return ring_writev(m->ring, fd, iov, count);
	return writev(fd, iov, count);
}

/* libfuse's own I/O, except that requests are read by devpoll.h. */
static const struct fuse_custom_io dev_io = {
	.read = dev_read,
	.writev = dev_writev,
};

/* How the device was read, at unmount: a request read past a stuck
 * reader means a wait on the request path without devpoll_yield(). */
static void log_devpoll(struct devpoll *dp)
{
	unsigned long long stolen = atomic_load(&dp->stolen);

	if (stolen)
		sw_warn(TAG,
			"%llu FUSE request(s) read past a reader busy for "
			"over %lld ms",
			stolen, DEVPOLL_STUCK_NS / 1000000);
	sw_info(TAG,
		"FUSE requests: %llu caught by polling, %llu after "
		"sleeping",
		(unsigned long long)atomic_load(&dp->caught),
		(unsigned long long)atomic_load(&dp->slept));
}

/* Serve FUSE requests until unmounted; libfuse's status. */
static int serve(struct fuse_session *se, const struct fuse_cmdline_opts *fo)
{
	struct fuse_loop_config *lc;
	int ret;

	if (fo->singlethread)
		return fuse_session_loop(se);
	lc = fuse_loop_cfg_create();
	fuse_loop_cfg_set_clone_fd(lc, fo->clone_fd);
	fuse_loop_cfg_set_max_threads(lc, 32);
	/* UINT_MAX: not given on the command line; keep libfuse's default
	 * rather than have it warn about the value. */
	if (fo->max_idle_threads != UINT_MAX)
		fuse_loop_cfg_set_idle_threads(lc, fo->max_idle_threads);
	ret = fuse_session_loop_mt(se, lc);
	fuse_loop_cfg_destroy(lc);
	return ret;
}

/*
 * Mount @m (its master connection open) as @fo says, become a daemon
 * unless in the foreground, and serve until unmounted; then send what
 * was acknowledged here within @timeout_ms. The exit status.
 */
static int mount_and_serve(struct mount *m, struct fuse_args *args,
			   struct fuse_cmdline_opts *fo, const char *spec,
			   int timeout_ms)
{
	int rc, ret = 1, ready_fd = -1;

	if (devpoll_init(&m->devpoll, m->busy_poll_us) < 0)
		return 1;
	m->se = fuse_session_new(args, &sw_mount_ops, sizeof(sw_mount_ops), m);
	if (!m->se)
		goto out_devpoll;
	if (fuse_set_signal_handlers(m->se) != 0)
		goto out_session;
	if (fuse_session_mount(m->se, fo->mountpoint) != 0)
		goto out_signals;
	if (m->io_uring) {
		rc = ring_new(m->se, fuse_session_fd(m->se), fo->mountpoint,
			      &m->ring);
		if (rc < 0)
			sw_err(TAG,
			       "cannot set up io_uring (%s): reading "
			       "/dev/fuse",
			       strerror(-rc));
	}
	/* The device libfuse opened, read our way (not closed by this). */
	if (fuse_session_custom_io(m->se, &dev_io, fuse_session_fd(m->se)) != 0)
		goto out_unmount;
	/* Not fuse_daemonize(), whose parent exits 0 before the threads
	 * below start: ours waits for them and prints why they did not. */
	if (!fo->foreground) {
		ready_fd = sw_daemonize("sweepfs-mount");
		if (ready_fd < 0) {
			sw_crit(TAG, "cannot daemonize: %s",
				strerror(-ready_fd));
			goto out_unmount;
		}
	}
	/* Threads only now: they do not survive the fork in daemonize. */
	rc = 0;
	if (m->metrics_listen)
		rc = mmetrics_start(m->metrics_listen, spec, &m->metrics);
	if (rc == 0)
		rc = inval_start(m->se, inval_ack_cb, m, &m->inval);
	if (rc == 0)
		rc = deleg_start(m->deleg);
	if (rc == 0)
		rc = mconn_start(m->mc);
	if (rc < 0) {
		sw_crit(TAG, "cannot start: %s", strerror(-rc));
		goto out_unmount;
	}
	sw_notice(TAG, "%s mounted on %s (session %016llx)", spec,
		  fo->mountpoint, (unsigned long long)mconn_session_id(m->mc));
	sw_daemon_ready(&ready_fd, 0);
	ret = serve(m->se, fo) ? 1 : 0;
	log_devpoll(&m->devpoll);

out_unmount:
	/* What was acknowledged here reaches the master before we go. */
	deleg_stop(m->deleg, timeout_ms);
	if (m->inval)
		inval_stop(m->inval);
	fuse_session_unmount(m->se);
	/* After the unmount, which gives back the kernel's entries. */
	if (m->ring) {
		ring_stop(m->ring);
		sw_notice(TAG, "FUSE requests through io_uring: %llu",
			  (unsigned long long)ring_served(m->ring));
	}
out_signals:
	fuse_remove_signal_handlers(m->se);
	sw_daemon_ready(&ready_fd, 1); /* if still waited for: failed */
out_session:
	fuse_session_destroy(m->se);
out_devpoll:
	devpoll_destroy(&m->devpoll);
	return ret;
}

/*
 * "-ofsname=sweepfs:SOURCE", malloc'd (the caller frees it), or NULL. The
 * source shows in /proc/self/mountinfo, where the sweepfs command finds
 * the masters of a mount; FUSE splits options at commas, so those of a
 * list of masters (and backslashes) are escaped with a backslash.
 */
static char *fsname_opt(const char *source)
{
	static const char head[] = "-ofsname=sweepfs:";
	char *opt = malloc(sizeof(head) + 2 * strlen(source));
	char *p;

	if (!opt)
		return NULL;
	p = stpcpy(opt, head);
	for (; *source; source++) {
		if (*source == ',' || *source == '\\')
			*p++ = '\\';
		*p++ = *source;
	}
	*p = '\0';
	return opt;
}

/* Whether a name of @t resolves (mconn_open() reports an unknown host
 * as EHOSTUNREACH, as it does a host that does not answer). */
static bool target_resolves(const struct sw_target *t, int *gai)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	unsigned n = t->naddrs ? t->naddrs : 1;

	for (unsigned i = 0; i < n; i++) {
		*gai = getaddrinfo(t->naddrs ? t->addrs[i].host : t->host, NULL,
				   &hints, &res);
		if (*gai == 0)
			freeaddrinfo(res);
		if (*gai == 0 || *gai == EAI_AGAIN || *gai == EAI_SYSTEM ||
		    *gai == EAI_MEMORY)
			return true; /* or not the name's fault */
	}
	return false;
}

/* One line on stderr: why the master at @spec (@t) did not take us. */
static void say_not_mounted(const char *spec, const struct sw_target *t, int rc)
{
	const char *sub = t->subdir[0] ? t->subdir : "/";
	int gai;

	switch (-rc) {
	case EPROTOTYPE:
		fprintf(stderr,
			"sweepfs-mount: %s is a sweepfs chunkserver, not a "
			"master: a wrong port? (the master's is %d by "
			"default)\n",
			spec, SW_MASTER_PORT);
		return;
	case EACCES:
	case EPERM:
		fprintf(stderr,
			"sweepfs-mount: the master at %s refuses this "
			"client: no exports rule lets this address mount "
			"%s\n",
			spec, sub);
		return;
	case ENOKEY:
		fprintf(stderr,
			"sweepfs-mount: the export of %s at %s wants a "
			"password: -o password=... or -o passwordfile=...\n",
			sub, spec);
		return;
	case EKEYREJECTED:
		fprintf(stderr,
			"sweepfs-mount: the master at %s refuses the "
			"password given for %s\n",
			spec, sub);
		return;
	case ENOENT:
	case ENOTDIR:
		fprintf(stderr,
			"sweepfs-mount: the master at %s has no directory "
			"%s to mount (%s)\n",
			spec, sub, strerror(-rc));
		return;
	case EPROTO:
	case EMSGSIZE:
	case EBADMSG:
		fprintf(stderr,
			"sweepfs-mount: %s does not speak the sweepfs "
			"protocol (%s): a wrong address or port?\n",
			spec, strerror(-rc));
		return;
	case EHOSTUNREACH:
		if (!target_resolves(t, &gai)) {
			fprintf(stderr,
				"sweepfs-mount: bad master address '%s': "
				"%s\n",
				spec, gai_strerror(gai));
			return;
		}
		break;
	}
	fprintf(stderr, "sweepfs-mount: cannot reach the master at %s: %s\n",
		spec, strerror(-rc));
}

/* Whether @path (resolved) is a mount point: in /proc/self/mountinfo,
 * whose paths escape blanks and backslashes as octal. */
static bool is_mount_point(const char *path)
{
	char line[8192], mnt[4096], raw[4096];
	bool found = false;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		size_t n = 0;

		if (sscanf(line, "%*s %*s %*s %*s %4095s", raw) != 1)
			continue;
		for (const char *r = raw; *r && n < sizeof(mnt) - 1; n++) {
			unsigned v;

			if (r[0] == '\\' && sscanf(r + 1, "%3o", &v) == 1) {
				mnt[n] = (char)v;
				r += 4;
			} else {
				mnt[n] = *r++;
			}
		}
		mnt[n] = '\0';
		found = !strcmp(mnt, path);
	}
	fclose(f);
	return found;
}

/* Whether directory @path has an entry besides . and ..; -errno. */
static int dir_has_entries(const char *path)
{
	struct dirent *de;
	DIR *d = opendir(path);
	int rc = 0;

	if (!d)
		return -errno;
	while (rc == 0 && (de = readdir(d)))
		rc = strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return rc;
}

/*
 * Whether @path may be mounted on, as mfsmount checks (libfuse 3 no
 * longer does): a directory, not already a mount point, and empty, the
 * last two unless @nonempty. 0, or -errno after one line on stderr.
 */
static int check_mount_point(const char *path, bool nonempty)
{
	struct stat st;
	int rc;

	if (stat(path, &st) < 0) {
		rc = -errno;
		fprintf(stderr, "sweepfs-mount: %s: %s\n", path, strerror(-rc));
		return rc;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "sweepfs-mount: %s: not a directory\n", path);
		return -ENOTDIR;
	}
	if (nonempty)
		return 0;
	if (is_mount_point(path)) {
		fprintf(stderr,
			"sweepfs-mount: %s: already a mount point; unmount "
			"it first (or -o nonempty to mount over it)\n",
			path);
		return -EBUSY;
	}
	rc = dir_has_entries(path);
	if (rc < 0) {
		fprintf(stderr, "sweepfs-mount: %s: %s\n", path, strerror(-rc));
		return rc;
	}
	if (rc > 0) {
		fprintf(stderr,
			"sweepfs-mount: %s: not empty; its files would be "
			"hidden (-o nonempty to mount anyway)\n",
			path);
		return -ENOTEMPTY;
	}
	return 0;
}

/* No master address first: --version, --help, or a usage error. */
static int no_address(int argc, char **argv)
{
	bool help = argc >= 2 &&
		    (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));

	if (argc >= 2 &&
	    (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version"))) {
		printf("sweepfs-mount %s (libfuse %s)\n", SWEEPFS_VERSION,
		       fuse_pkgversion());
		return 0;
	}
	usage(help ? stdout : stderr);
	return help ? 0 : 2;
}

static void cli_free(struct cli *cli)
{
	free(cli->attr_timeout);
	free(cli->entry_timeout);
	free(cli->negative_timeout);
	free(cli->master_timeout);
	free(cli->readdirplus);
	free(cli->dircache_entries);
	if (cli->password)
		explicit_bzero(cli->password, strlen(cli->password));
	free(cli->password);
	free(cli->passwordfile);
	free(cli->bind);
	free(cli->busy_poll);
	free(cli->metrics_listen);
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_cmdline_opts fo = { 0 };
	struct mconn_opts mo = { 0 };
	struct cli cli = { 0 };
	static struct mount m;
	char *fsname, client[400];
	double master_timeout;
	int rc, ret = 1;

	if (argc < 2 || argv[1][0] == '-')
		return no_address(argc, argv);
	if (sw_target_parse(argv[1], SW_MASTER_PORT, &mo.target) < 0) {
		fprintf(stderr, "sweepfs-mount: bad master address '%s'\n",
			argv[1]);
		return 2;
	}
	/* Everything after the address is FUSE's command line. */
	fuse_opt_add_arg(&args, argv[0]);
	for (int i = 2; i < argc; i++)
		fuse_opt_add_arg(&args, argv[i]);
	ret = 2; /* a bad command line, until it is parsed */
	if (fuse_opt_parse(&args, &cli, cli_opts, NULL) < 0)
		goto out_args;
	if (cli.help) {
		usage(stdout);
		ret = 0;
		goto out_args;
	}
	if (apply_cli(&cli, &m, &mo.target, &master_timeout) < 0)
		goto out_args;
	fsname = fsname_opt(argv[1]);
	if (!fsname || fuse_opt_add_arg(&args, fsname) < 0) {
		free(fsname);
		goto out_args;
	}
	free(fsname);
	fuse_opt_add_arg(&args, "-osubtype=sweepfs");
	if (getuid() == 0)
		fuse_opt_add_arg(&args, "-oallow_other");
	/*
	 * With default_permissions the kernel checks mode bits against the
	 * attributes it caches, and the master checks every request again
	 * against the current state. To check, the kernel refreshes a
	 * directory's attributes after every change in it (Linux up to 6.18
	 * at least): a GETATTR round trip per file created or removed, half
	 * of what rm -rf costs.
	 *
	 * -o no_default_permissions leaves the checks to the master and to
	 * the mount for what it answers itself. The kernel then checks no
	 * search permission on a walk through names it caches, so names in a
	 * directory not everyone may search are not cached (see
	 * mount_searchable()); and it opens FIFOs and sockets without asking
	 * anyone, so their permissions go unchecked.
	 */
	if (!cli.own_perms)
		fuse_opt_add_arg(&args, "-odefault_permissions");
	if (fuse_parse_cmdline(&args, &fo) != 0)
		goto out_args;
	if (!fo.mountpoint) {
		fprintf(stderr, "sweepfs-mount: no mount point\n");
		usage(stderr);
		goto out_args;
	}
	ret = 1;
	if (check_mount_point(fo.mountpoint, cli.nonempty) < 0)
		goto out_args;

	sw_log_set_ident("sweepfs-mount");
	if (fo.debug)
		sw_log_level = LOG_DEBUG;
	if (!fo.foreground) {
		sw_log_to_syslog("sweepfs-mount");
		/* Until detached and serving, errors are seen here too. */
		sw_log_tee_stderr(LOG_ERR);
	}

	connection_opts(&m, &mo, fo.mountpoint, master_timeout, client,
			sizeof(client));
	pthread_mutex_init(&m.dirs_mu, NULL);
	if (itable_init(&m.inodes) < 0)
		goto out_args;
	if (cspool_new((unsigned)mo.timeout_ms, &m.cs) < 0 ||
	    data_new(&m, &m.data) < 0 ||
	    dircache_new(m.dircache_entries, &m.dcache) < 0 ||
	    deleg_new(&m, !cli.wsync, &m.deleg) < 0 ||
	    lock_table_new(&m.locks) < 0)
		goto out_inodes;
	rc = mconn_open(&mo, &m.mc);
	if (rc < 0) {
		say_not_mounted(argv[1], &mo.target, rc);
		goto out_inodes;
	}
	if (mconn_read_only(m.mc)) {
		/* Writes would fail with EROFS one by one: say why once,
		 * and let the kernel refuse them (mount(8) shows ro). */
		fprintf(stderr,
			"sweepfs-mount: the master exports %s to this client "
			"read-only: mounting read-only\n",
			mo.target.subdir[0] ? mo.target.subdir : "/");
		fuse_opt_add_arg(&args, "-oro");
	}
	m.root_ino = mconn_root_ino(m.mc);
	/* The kernel knows the root from the start and never forgets it. */
	itable_ref(&m.inodes, m.root_ino, 0);

	ret = mount_and_serve(&m, &args, &fo, argv[1],
			      (int)(master_timeout * 1000));
	data_stop(m.data); /* background syncs ask the master nothing now */
	mconn_close(m.mc);
	mmetrics_stop(m.metrics); /* nothing notes any more */
	ring_free(m.ring);	  /* no lock reply can come now */
out_inodes:
	/* First: it ends what is in flight, whose callbacks use the data. */
	if (m.cs)
		cspool_free(m.cs);
	if (m.data)
		data_free(m.data);
	if (m.dcache)
		dircache_free(m.dcache);
	deleg_free(m.deleg);
	if (m.locks)
		lock_table_free(m.locks); /* its waits ended with mconn */
	readdir_release_all(&m);
	itable_release(&m.inodes);
out_args:
	free(fo.mountpoint);
	fuse_opt_free_args(&args);
	cli_free(&cli);
	return ret;
}
