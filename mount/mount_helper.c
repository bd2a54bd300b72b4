/*
 * mount.sweepfs: what mount(8) runs for "-t sweepfs" and for fstab lines
 * such as
 *
 *   master:9521:/data  /mnt/data  sweepfs  defaults,_netdev  0 0
 *
 * mount(8) calls "mount.sweepfs SPEC DIR [-sfnv] [-o OPTS]". The options
 * that only mean something to mount(8) or to fstab (defaults, auto,
 * _netdev, nofail, x-*, ...) are dropped; the rest go to sweepfs-mount,
 * which is run in place of this process (found beside this program, then
 * on PATH).
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const dropped[] = {
	"defaults", "auto",  "noauto",	"user",	  "nouser", "users",
	"owner",    "group", "_netdev", "nofail", "rw",	    NULL,
};

static int keep_option(const char *o)
{
	if (!strncmp(o, "x-", 2) || !strncmp(o, "comment=", 8))
		return 0;
	for (int i = 0; dropped[i]; i++)
		if (!strcmp(o, dropped[i]))
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	char opts[4096] = "", self[PATH_MAX], prog[PATH_MAX + 32];
	const char *spec, *dir;
	char *args[8];
	int n = 0, i;
	ssize_t len;

	if (argc < 3) {
		fprintf(stderr, "usage: mount.sweepfs SPEC DIR [-sfnv] "
				"[-o options]\n");
		return 1;
	}
	spec = argv[1];
	dir = argv[2];
	for (i = 3; i < argc; i++) {
		char *list, *tok, *save;

		if (strcmp(argv[i], "-o") || i + 1 == argc)
			continue; /* -s -f -n -v: nothing to pass on */
		list = argv[++i];
		for (tok = strtok_r(list, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save)) {
			if (!keep_option(tok))
				continue;
			if (strlen(opts) + strlen(tok) + 2 > sizeof(opts)) {
				fprintf(stderr, "mount.sweepfs: options too "
						"long\n");
				return 1;
			}
			if (*opts)
				strcat(opts, ",");
			strcat(opts, tok);
		}
	}

	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len > 0) {
		self[len] = '\0';
		snprintf(prog, sizeof(prog), "%s/sweepfs-mount", dirname(self));
	}
	args[n++] = "sweepfs-mount";
	args[n++] = (char *)spec;
	args[n++] = (char *)dir;
	if (*opts) {
		args[n++] = "-o";
		args[n++] = opts;
	}
	args[n] = NULL;
	if (len > 0 && access(prog, X_OK) == 0)
		execv(prog, args);
	execvp("sweepfs-mount", args);
	fprintf(stderr, "mount.sweepfs: cannot run sweepfs-mount: %s\n",
		strerror(errno));
	return 1;
}
