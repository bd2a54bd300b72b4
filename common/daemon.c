/*
 * Daemon start-up shared by the master and the chunkserver (daemon.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon.h"
#include "log.h"
#include "util.h"

/* ---- the command line ---------------------------------------------------- */

#define MAX_FLAGS 8

static int add_set(struct sw_daemon_args *a, const char *key, const char *v)
{
	char *kv;

	if (a->nsets == (int)SW_ARRAY_SIZE(a->sets)) {
		fprintf(stderr, "too many settings\n");
		return 2;
	}
	kv = malloc(strlen(key) + strlen(v) + 1);
	if (!kv)
		return 1;
	sprintf(kv, "%s%s", key, v);
	a->sets[a->nsets++] = kv;
	return -1;
}

int sw_daemon_parse(int argc, char **argv, const char *prog,
		    const struct sw_daemon_flag *flags, void (*usage)(FILE *),
		    struct sw_daemon_args *a)
{
	static const struct option common[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "set", required_argument, NULL, 's' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "syslog", no_argument, NULL, 'S' },
		{ "pidfile", required_argument, NULL, 'p' },
		{ "log-level", required_argument, NULL, 'v' },
		{ "dump-config", no_argument, NULL, 'D' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
	};
	struct option longopts[SW_ARRAY_SIZE(common) + MAX_FLAGS + 1];
	char shortopts[32] = "c:s:fp:v:Vh";
	size_t n = SW_ARRAY_SIZE(common);
	int opt, rc = -1;

	/* Errors from here on name the program (sw_daemon_set()). */
	sw_log_set_ident(prog);
	memcpy(longopts, common, sizeof(common));
	for (size_t i = 0; flags[i].opt && i < MAX_FLAGS; i++) {
		char o[3] = { (char)flags[i].opt, ':', 0 };

		longopts[n++] = (struct option){ flags[i].longname,
						 required_argument, NULL,
						 flags[i].opt };
		strcat(shortopts, o);
	}
	longopts[n] = (struct option){ 0 };
	optind = 1;
	while (rc < 0 && (opt = getopt_long(argc, argv, shortopts, longopts,
					    NULL)) != -1) {
		const struct sw_daemon_flag *f = flags;

		while (f->opt && f->opt != opt)
			f++;
		if (f->opt) {
			rc = add_set(a, f->key, optarg);
			continue;
		}
		switch (opt) {
		case 'c':
			a->config = optarg;
			break;
		case 's':
			rc = add_set(a, "", optarg);
			break;
		case 'v':
			rc = add_set(a, "log_level=", optarg);
			break;
		case 'f':
			a->foreground = true;
			break;
		case 'S':
			a->use_syslog = true;
			break;
		case 'p':
			a->pidfile = optarg;
			break;
		case 'D':
			a->dump = true;
			break;
		case 'V':
			printf("%s %s\n", prog, SWEEPFS_VERSION);
			rc = 0;
			break;
		case 'h':
			usage(stdout);
			rc = 0;
			break;
		default:
			usage(stderr);
			rc = 2;
		}
	}
	if (rc < 0 && optind < argc) {
		usage(stderr);
		rc = 2;
	}
	return rc;
}

void sw_daemon_usage(FILE *f, const char *prog, const char *default_config,
		     const char *own)
{
	fprintf(f,
		"usage: %s [options]\n"
		"\n"
		"  -c, --config FILE      configuration file (default %s, if "
		"it exists)\n"
		"%s"
		"  -s, --set KEY=VALUE    set a configuration key\n"
		"  -f, --foreground       do not detach; log to stderr\n"
		"      --syslog           log to syslog even in the foreground\n"
		"  -p, --pidfile FILE     write the daemon's pid here\n"
		"  -v, --log-level LEVEL  err, warning, notice, info, debug\n"
		"      --dump-config      print the configuration and exit\n"
		"  -V, --version          print the version and exit\n"
		"  -h, --help             this text\n",
		prog, default_config, own);
}

void sw_daemon_args_free(struct sw_daemon_args *a)
{
	for (int i = 0; i < a->nsets; i++)
		free(a->sets[i]);
	a->nsets = 0;
}

int sw_daemon_load_config(struct sw_daemon_args *a, const char *default_config,
			  const struct sw_opt *opts)
{
	struct sw_cfg_error where;
	int rc;

	if (!a->config && access(default_config, R_OK) == 0)
		a->config = default_config;
	if (!a->config)
		return 0;
	rc = sw_cfg_load(a->config, opts, &where);
	if (rc < 0 && where.line) {
		char why[512];

		if (!where.value[0] && rc == -EINVAL)
			snprintf(why, sizeof(why), "%s: not KEY = VALUE",
				 where.key);
		else
			sw_opt_explain(opts, where.key, where.value, rc, why,
				       sizeof(why));
		fprintf(stderr, "%s: %s:%u: %s\n", sw_log_get_ident(),
			a->config, where.line, why);
	} else if (rc < 0) {
		fprintf(stderr, "%s: %s: %s\n", sw_log_get_ident(), a->config,
			strerror(-rc));
	}
	return rc;
}

int sw_daemon_set(const struct sw_opt *opts, const char *kv)
{
	const char *eq = strchr(kv, '=');
	int rc = sw_opt_set_kv(opts, kv);
	char name[64], why[512];

	if (rc == 0)
		return 0;
	if (!eq) {
		fprintf(stderr, "%s: --set %s: not KEY=VALUE\n",
			sw_log_get_ident(), kv);
		return rc;
	}
	snprintf(name, sizeof(name), "%.*s", (int)(eq - kv), kv);
	sw_opt_explain(opts, name, eq + 1, rc, why, sizeof(why));
	fprintf(stderr, "%s: %s\n", sw_log_get_ident(), why);
	return rc;
}

/* ---- becoming a daemon ------------------------------------------------- */

/*
 * The starting process's side of start-up: copy to stderr what the daemon
 * says on @fd (its errors, sw_log_tee_stderr()) until the NUL byte that
 * precedes its status (sw_daemon_ready()). The status, or -1 if the daemon
 * went away without one.
 */
static int relay_start(int fd)
{
	char buf[4096], *nul;
	ssize_t n;

	for (;;) {
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		nul = memchr(buf, '\0', (size_t)n);
		if (write(STDERR_FILENO, buf,
			  nul ? (size_t)(nul - buf) : (size_t)n) < 0) {
			/* Our stderr is gone: the status still counts. */
		}
		if (!nul)
			continue;
		if (nul + 1 < buf + n)
			return (unsigned char)nul[1];
		do
			n = read(fd, buf, 1);
		while (n < 0 && errno == EINTR);
		return n == 1 ? (unsigned char)buf[0] : -1;
	}
}

/* The starting process: wait for the daemon's word, exit with it. */
static _Noreturn void wait_for_daemon(const char *prog, pid_t pid, int fd)
{
	int status = relay_start(fd), ws;

	if (status >= 0)
		_exit(status);
	/* Gone without a word: say how, since its log may be nowhere. It
	 * closed the pipe by exiting, so its status comes at once; a
	 * second at most, not to hang whoever started us. */
	for (int i = 0; i < 100; i++) {
		if (waitpid(pid, &ws, WNOHANG) == pid) {
			if (WIFSIGNALED(ws))
				fprintf(stderr,
					"%s: died during start-up: %s\n", prog,
					strsignal(WTERMSIG(ws)));
			else
				fprintf(stderr,
					"%s: exited during start-up "
					"(status %d)\n",
					prog, WEXITSTATUS(ws));
			break;
		}
		usleep(10 * 1000);
	}
	_exit(1);
}

int sw_daemonize(const char *prog)
{
	int fds[2], null;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(fds[1]);
		wait_for_daemon(prog, pid, fds[0]);
	}
	close(fds[0]);
	setsid();
	if (chdir("/") < 0)
		return -errno;
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		if (null > 2)
			close(null);
	}
	/* Until ready, stderr and every error and warning logged go to
	 * the starting process, which shows them (sw_daemon_ready() ends
	 * it): a warning at start-up (a chunk directory with no room) is
	 * for whoever starts the daemon to see. */
	dup2(fds[1], STDERR_FILENO);
	sw_log_tee_stderr(LOG_WARNING);
	return fds[1];
}

void sw_daemon_ready(int *fd, int status)
{
	char end[2] = { '\0', (char)status };
	int null;

	if (*fd < 0)
		return;
	sw_log_tee_stderr(-1);
	fflush(stderr);
	if (write(*fd, end, sizeof(end)) < 0) {
		/* The parent is gone: nobody to tell. */
	}
	null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDERR_FILENO);
		close(null);
	}
	close(*fd);
	*fd = -1;
}

int sw_lock_dir(const char *tag, const char *dir, const char *name, int *fd)
{
	char path[4200];

	*fd = -1;
	if (mkdir(dir, 0750) < 0 && errno != EEXIST) {
		sw_crit(tag, "cannot create %s: %s", dir, strerror(errno));
		return -errno;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	*fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
	if (*fd < 0) {
		sw_crit(tag, "cannot open %s: %s", path, strerror(errno));
		return -errno;
	}
	if (flock(*fd, LOCK_EX | LOCK_NB) < 0) {
		sw_crit(tag, "%s is in use by another %s", dir, tag);
		close(*fd);
		*fd = -1;
		return -EBUSY;
	}
	return 0;
}

int sw_pidfile_write(const char *path)
{
	FILE *f = fopen(path, "we");

	if (!f)
		return -errno;
	fprintf(f, "%d\n", (int)getpid());
	return fclose(f) ? -errno : 0;
}

void sw_raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}
