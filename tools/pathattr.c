/*
 * The set/get command pair over paths (pathattr.h): argument parsing,
 * usage, and the exit status, once for every such pair.
 */
#include <getopt.h>
#include <stdio.h>

#include "pathattr.h"
#include "tool.h"
#include "util.h"

int pathattr_open(const char *path, struct pathattr_node *pn)
{
	int rc = tool_open_ino(path, &pn->c, &pn->ino, &pn->mode);

	if (rc == 0)
		tool_cred(&pn->cred, pn->groups, SW_ARRAY_SIZE(pn->groups));
	return rc;
}

int pathattr_set(const struct pathattr *a, int argc, char **argv)
{
	bool recursive = false;
	int64_t value;
	int opt, status = 0;

	optind = 1;
	while ((opt = getopt(argc, argv, "rh")) != -1) {
		if (opt != 'r')
			goto usage;
		recursive = true;
	}
	if (argc - optind < 2)
		goto usage;
	value = a->parse(argv[optind]);
	if (value < 0)
		return 2;
	for (int i = optind + 1; i < argc; i++)
		if (a->one(argv[i], value, recursive) < 0)
			status = 1;
	return status;
usage:
	fprintf(opt == 'h' ? stdout : stderr,
		"usage: sweepfs %s [-r] %s PATH...\n", a->set_name, a->value);
	return opt == 'h' ? 0 : 2;
}

int pathattr_get(const struct pathattr *a, int argc, char **argv)
{
	int status = 0;

	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: sweepfs %s PATH...\n", a->get_name);
		return 2;
	}
	for (int i = 1; i < argc; i++)
		if (a->one(argv[i], -1, false) < 0)
			status = 1;
	return status;
}
