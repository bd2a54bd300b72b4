/*
 * cdel_proc: the programs compare-delete runs (rm, strace, the Go
 * program, go build, sweepfs-mount, fusermount3, gnuplot).
 *
 * posix_spawn, not fork: the tool is multi-threaded when it spawns (the
 * probe and progress threads), and DESIGN.md asks for it. Each child gets
 * a process group of its own so that stopping it stops strace's tracee
 * too. Waiting uses a pidfd when the kernel has one, so that the wall
 * time of a child is exact to the wake-up, not to a polling period; the
 * waits still wake every 100 ms to notice a stop.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cdel.h"
#include "util.h"

extern char **environ;

/* environ followed by @env: the array is malloc()ed, the strings not. */
static char **merge_env(char *const env[])
{
	size_t n = 0, m = 0;
	char **v;

	while (environ[n])
		n++;
	while (env[m])
		m++;
	v = malloc((n + m + 1) * sizeof(*v));
	if (!v)
		return NULL;
	memcpy(v, environ, n * sizeof(*v));
	memcpy(v + n, env, m * sizeof(*v));
	v[n + m] = NULL;
	return v;
}

int cdel_spawn(char *const argv[], const char *cwd, const char *out,
	       char *const env[], pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, reset;
	char **envp = environ;
	int rc;

	if (env) {
		envp = merge_env(env);
		if (!envp)
			return -ENOMEM;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, out ? out : "/dev/null",
					 O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	if (cwd)
		posix_spawn_file_actions_addchdir_np(&fa, cwd);
	posix_spawnattr_init(&at);
	sigemptyset(&none);
	sigemptyset(&reset);
	sigaddset(&reset, SIGINT);
	sigaddset(&reset, SIGTERM);
	sigaddset(&reset, SIGHUP);
	sigaddset(&reset, SIGPIPE);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &reset);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK |
					      POSIX_SPAWN_SETSIGDEF |
					      POSIX_SPAWN_SETPGROUP);
	rc = -posix_spawn(pid, argv[0], &fa, &at, argv, envp);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	if (envp != environ)
		free(envp);
	return rc;
}

static int status_of(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + WTERMSIG(st);
}

/* Stop @pid's group: SIGTERM, then SIGKILL after 5 s; reap it. */
static void kill_child(pid_t pid)
{
	int st;

	kill(-pid, SIGTERM);
	kill(pid, SIGTERM);
	for (int i = 0; i < 500; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid) {
			kill(-pid, SIGKILL); /* a straggler in the group */
			return;
		}
		usleep(10000);
	}
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
}

int cdel_wait(pid_t pid, int64_t deadline)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	int rc;

	for (;;) {
		int64_t left = 100 * 1000 * 1000;
		int st;
		pid_t w = waitpid(pid, &st, WNOHANG);

		if (w == pid) {
			rc = status_of(st);
			break;
		}
		if (w < 0 && errno != EINTR) {
			rc = -errno;
			break;
		}
		if (atomic_load(&cdel_stop)) {
			kill_child(pid);
			rc = -EINTR;
			break;
		}
		if (deadline) {
			int64_t now = sw_mono_ns();

			if (now >= deadline) {
				kill_child(pid);
				rc = -ETIMEDOUT;
				break;
			}
			left = SW_MIN(left, deadline - now);
		}
		if (pfd >= 0) {
			struct pollfd p = { .fd = pfd, .events = POLLIN };

			poll(&p, 1, (int)(left / 1000000) + 1);
		} else {
			usleep(1000); /* no pidfd: poll the child often */
		}
	}
	if (pfd >= 0)
		close(pfd);
	return rc;
}

int cdel_run_prog(char *const argv[], const char *cwd, const char *out,
		  char *const env[])
{
	pid_t pid;
	int rc = cdel_spawn(argv, cwd, out, env, &pid);

	return rc < 0 ? rc : cdel_wait(pid, 0);
}

void cdel_prog_line(char *const argv[], const char *tmp, char *buf, size_t len)
{
	char out[PATH_MAX];
	FILE *f;

	buf[0] = '\0';
	snprintf(out, sizeof(out), "%s/version.txt", tmp);
	if (cdel_run_prog(argv, NULL, out, NULL) != 0)
		return;
	f = fopen(out, "re");
	if (!f)
		return;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
	unlink(out);
}

bool cdel_which(const char *name, char *out, size_t len)
{
	const char *path = getenv("PATH");
	char *copy, *save, *dir;
	bool found = false;

	if (strchr(name, '/')) {
		snprintf(out, len, "%s", name);
		return access(out, X_OK) == 0;
	}
	copy = strdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
	if (!copy)
		return false;
	for (dir = strtok_r(copy, ":", &save); dir && !found;
	     dir = strtok_r(NULL, ":", &save)) {
		snprintf(out, len, "%s/%s", dir, name);
		found = access(out, X_OK) == 0;
	}
	free(copy);
	if (!found)
		out[0] = '\0';
	return found;
}
