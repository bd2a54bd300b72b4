/*
 * What both daemons (master, chunkserver) do to become one: detach from
 * the terminal with the starting process waiting to hear whether start-up
 * worked (so that `sweepfs-master` returns 0 only once it listens), lock
 * their data directories against a second instance, write a pid file,
 * and take every file descriptor the hard limit allows.
 */
#ifndef SWEEPFS_COMMON_DAEMON_H
#define SWEEPFS_COMMON_DAEMON_H

/*
 * Detach from the terminal (fork, setsid, chdir /, stdio on /dev/null).
 * Returns in the daemon with the write end of a pipe for
 * sw_daemon_ready(); the original process waits on the read end and exits
 * with the status the daemon reports (1 if it dies first). -errno.
 */
int sw_daemonize(void);

/* Report start-up's outcome (0: ready) to the waiting parent through
 * *@fd, once; nothing when *@fd is -1 (in the foreground). */
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
