/*
 * Daemon start-up shared by the master and the chunkserver (daemon.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "log.h"

int sw_daemonize(void)
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

void sw_daemon_ready(int *fd, int status)
{
	char c = (char)status;

	if (*fd < 0)
		return;
	if (write(*fd, &c, 1) < 0) {
		/* The parent is gone: nobody to tell. */
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
