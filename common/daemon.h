/*
 * What both daemons (master, chunkserver) do to become one: detach from
 * the terminal with the starting process waiting to hear whether start-up
 * worked (so that `sweepfs-master` returns 0 only once it listens), lock
 * their data directories against a second instance, write a pid file,
 * and take every file descriptor the hard limit allows.
 */
#ifndef SWEEPFS_COMMON_DAEMON_H
#define SWEEPFS_COMMON_DAEMON_H

#include <stdbool.h>
#include <stdio.h>

#include "cfg.h"

/* A daemon's own option that stands for a configuration key: -d DIR is
 * "data_dir=DIR" ("+KEY=" for a key the daemon accumulates). */
struct sw_daemon_flag {
	int opt;	      /* 'd' */
	const char *longname; /* "data-dir" */
	const char *key;      /* "data_dir=" */
};

/* The command line, before the configuration is built from it. */
struct sw_daemon_args {
	const char *config, *pidfile;
	char *sets[64]; /* "KEY=VALUE", in order, each allocated */
	int nsets;
	bool foreground, use_syslog, dump;
};

/*
 * Parse the options both daemons take (-c FILE, -s KEY=VALUE, -f,
 * --syslog, -p FILE, -v LEVEL, --dump-config, -V, -h) and @flags (ending
 * with opt 0) into @a. -1 to go on; else the exit status: 0 after
 * --version or --help, 2 for a usage error (@usage(stderr) said so), 1
 * out of memory. Free @a with sw_daemon_args_free().
 */
int sw_daemon_parse(int argc, char **argv, const char *prog,
		    const struct sw_daemon_flag *flags, void (*usage)(FILE *),
		    struct sw_daemon_args *a);
void sw_daemon_args_free(struct sw_daemon_args *a);

/*
 * Print @prog's usage to @f: -c (whose default is @default_config), then
 * @own (the daemon's own options, one "  -x, --long ARG  text\n" line
 * each), then the options sw_daemon_parse() handles for every daemon.
 */
void sw_daemon_usage(FILE *f, const char *prog, const char *default_config,
		     const char *own);

/*
 * Load @a->config, or @default_config if there is none and it exists,
 * into @opts. 0, or -errno after saying on stderr where and why.
 */
int sw_daemon_load_config(struct sw_daemon_args *a, const char *default_config,
			  const struct sw_opt *opts);

/* Set "KEY=VALUE" in @opts; 0, or -errno after saying why on stderr. */
int sw_daemon_set(const struct sw_opt *opts, const char *kv);

/*
 * Detach from the terminal (fork, setsid, chdir /, stdin and stdout on
 * /dev/null). Returns in the daemon with the write end of a pipe for
 * sw_daemon_ready(); the original process waits on the read end and exits
 * with the status the daemon reports (1 if it dies first, saying how, as
 * @prog). Until then the daemon's stderr is that pipe and every error
 * and warning it logs is copied there too (sw_log_tee_stderr()), so that the original
 * process prints why start-up failed, as mfsmaster does, even with no
 * syslog to read. -errno.
 */
int sw_daemonize(const char *prog);

/* Report start-up's outcome (0: ready) to the waiting parent through
 * *@fd, once, and put stderr on /dev/null; nothing when *@fd is -1 (in
 * the foreground). */
void sw_daemon_ready(int *fd, int status);

/*
 * Create directory @dir if needed and hold an exclusive lock on its file
 * @name (for as long as *@fd stays open). 0, -EBUSY when another process
 * holds it, or -errno; logs why under @tag.
 */
int sw_lock_dir(const char *tag, const char *dir, const char *name, int *fd);

/* Write this process's pid to @path. 0 or -errno. */
int sw_pidfile_write(const char *path);

/* Raise the soft limit on open files to the hard one. */
void sw_raise_fd_limit(void);

#endif
