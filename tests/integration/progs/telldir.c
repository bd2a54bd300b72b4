/*
 * telldir DIR [-n FILES] [-s SEED] [-c]
 *
 * Checks the promises readdir(3), telldir(3) and seekdir(3) make while a
 * directory changes under the reader (POSIX readdir: "If a file is removed
 * from or added to the directory after the most recent call to opendir()
 * or rewinddir(), whether a subsequent call to readdir() returns an entry
 * for that file is unspecified"; every other entry comes exactly once):
 *
 *  1. DIR (empty) gets FILES files: "s<N>" stay for the whole test,
 *     "v<N>" may be unlinked.
 *  2. One pass of readdir. After each entry it may unlink a random "v"
 *     file and create a new "n" file; it records telldir() before each
 *     entry and now and then goes back with seekdir() to a recorded
 *     position of an "s" entry, checks that readdir() returns that same
 *     entry, and seeks back to where it was.
 *     With -c a child process meanwhile creates and unlinks "c" files in
 *     the same directory, as fast as it can.
 *  3. Every "s" file was returned exactly once, nothing more than once,
 *     no unknown name; "." and ".." once each.
 *  4. After the child stopped: rewinddir() and a quiet pass lists exactly
 *     the files that exist, once each; then seekdir() to 1000 random
 *     recorded positions of "s" entries returns those entries.
 *  5. In a small subdirectory (one readdir page): read a few entries,
 *     unlink and create some files, rewinddir(): the listing is the
 *     current one
 *     ("rewinddir() shall also cause the directory stream to refer to the
 *     current state of the corresponding directory").
 *
 * Prints the seed first, so that a failure can be replayed with -s.
 * Exit status 0 when every check held, 1 otherwise, 2 for usage errors.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The child's limit on creations, so that it stops on its own. */
#define CHILD_MAX 200000
/* How many "c" files the child keeps at once. */
#define CHILD_LIVE 64

/* Per name: what the test knows about it. */
struct ent {
	bool exists; /* now */
	bool stable; /* existed all through the pass */
	int seen;    /* times readdir returned it in the current pass */
	long pos;    /* telldir() just before it was returned, or -1 */
};

struct cls {
	char prefix;
	int n; /* names 0 .. n-1 were ever made */
	int cap;
	struct ent *v;
};

static const char *dir;
static int dirfd_;
static struct cls s_cls = { 's', 0, 0, NULL };
static struct cls v_cls = { 'v', 0, 0, NULL };
static struct cls n_cls = { 'n', 0, 0, NULL };
static int child_seen[CHILD_MAX];
static int errors;
static uint64_t rng;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ull;
}

static void err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void err(const char *fmt, ...)
{
	va_list ap;

	if (++errors > 50)
		return;
	va_start(ap, fmt);
	fputs("telldir: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void die(const char *what)
{
	fprintf(stderr, "telldir: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void cls_init(struct cls *c, int cap)
{
	c->cap = cap;
	c->v = calloc((size_t)cap, sizeof(*c->v));
	if (!c->v)
		die("calloc");
}

static void mkname(char *buf, size_t len, char prefix, int i)
{
	snprintf(buf, len, "%c%06d", prefix, i);
}

static void create_file(char prefix, int i)
{
	char name[32];
	int fd;

	mkname(name, sizeof(name), prefix, i);
	fd = openat(dirfd_, name, O_CREAT | O_EXCL | O_WRONLY, 0644);
	if (fd < 0)
		die(name);
	close(fd);
}

static void unlink_file(char prefix, int i)
{
	char name[32];

	mkname(name, sizeof(name), prefix, i);
	if (unlinkat(dirfd_, name, 0) < 0)
		die(name);
}

/* The entry @name stands for, or NULL (then *@child is set for "c"). */
static struct ent *lookup(const char *name, int *child)
{
	struct cls *c;
	char *end;
	long i;

	*child = -1;
	switch (name[0]) {
	case 's':
		c = &s_cls;
		break;
	case 'v':
		c = &v_cls;
		break;
	case 'n':
		c = &n_cls;
		break;
	case 'c':
		c = NULL;
		break;
	default:
		return NULL;
	}
	errno = 0;
	i = strtol(name + 1, &end, 10);
	if (*end || errno || i < 0 || strlen(name) != 7)
		return NULL;
	if (!c) {
		if (i < CHILD_MAX)
			*child = (int)i;
		return NULL;
	}
	return i < c->n ? &c->v[i] : NULL;
}

/* Forget what the last pass saw. */
static void reset_seen(void)
{
	struct cls *all[] = { &s_cls, &v_cls, &n_cls };

	for (int k = 0; k < 3; k++)
		for (int i = 0; i < all[k]->n; i++)
			all[k]->v[i].seen = 0;
	memset(child_seen, 0, sizeof(child_seen));
}

static volatile sig_atomic_t child_stop;

static void on_usr1(int sig)
{
	(void)sig;
	child_stop = 1;
}

/* The child: create and unlink "c" files until told to stop (SIGUSR1). */
static void child_main(void)
{
	int made = 0;

	while (made < CHILD_MAX && !child_stop) {
		create_file('c', made);
		if (made >= CHILD_LIVE)
			unlink_file('c', made - CHILD_LIVE);
		made++;
		if (getppid() == 1)
			break;
	}
	_exit(0);
}

/* Account for one entry returned by readdir in the changing pass. */
static void saw(const char *name, long pos, int *dots)
{
	struct ent *e;
	int child;

	if (!strcmp(name, ".") || !strcmp(name, "..")) {
		(*dots)++;
		return;
	}
	e = lookup(name, &child);
	if (child >= 0) {
		if (++child_seen[child] > 1)
			err("%s returned %d times", name, child_seen[child]);
		return;
	}
	if (!e) {
		err("unknown entry '%s'", name);
		return;
	}
	if (++e->seen > 1)
		err("%s returned %d times", name, e->seen);
	if (e->pos == -1)
		e->pos = pos;
}

/*
 * Seek to the recorded position of a random "s" entry returned before,
 * check that readdir returns it again, and come back to @here.
 */
static void check_seek(DIR *d, long here)
{
	struct dirent *de;
	struct ent *e;
	char name[32];
	int i, tries;

	for (tries = 0; tries < 20; tries++) {
		i = (int)(rnd() % (uint64_t)s_cls.n);
		if (s_cls.v[i].pos != -1)
			break;
	}
	if (tries == 20)
		return;
	e = &s_cls.v[i];
	mkname(name, sizeof(name), 's', i);
	seekdir(d, e->pos);
	errno = 0;
	de = readdir(d);
	if (!de)
		err("seekdir to the position of %s: readdir returned nothing (%s)",
		    name, errno ? strerror(errno) : "end");
	else if (strcmp(de->d_name, name))
		err("seekdir to the position of %s: readdir returned %s", name,
		    de->d_name);
	seekdir(d, here);
}

/* The next entry of @d, or NULL at its end; an error ends the program. */
static struct dirent *next_entry(DIR *d)
{
	struct dirent *de;

	errno = 0;
	de = readdir(d);
	if (!de && errno)
		die("readdir");
	return de;
}

static void changing_pass(DIR *d)
{
	struct dirent *de;
	int dots = 0, entries = 0, created = 0, unlinked = 0, seeks = 0;
	long pos;

	for (;;) {
		pos = telldir(d);
		de = next_entry(d);
		if (!de)
			break;
		saw(de->d_name, pos, &dots);
		entries++;
		/* Unlink a random "v" file (maybe one not reached yet). */
		if (rnd() % 100 < 30) {
			int i = (int)(rnd() % (uint64_t)v_cls.n);

			if (v_cls.v[i].exists) {
				unlink_file('v', i);
				v_cls.v[i].exists = false;
				unlinked++;
			}
		}
		if (rnd() % 100 < 30 && n_cls.n < n_cls.cap) {
			create_file('n', n_cls.n);
			n_cls.v[n_cls.n].exists = true;
			n_cls.v[n_cls.n].pos = -1;
			n_cls.n++;
			created++;
		}
		if (rnd() % 100 < 5) {
			check_seek(d, telldir(d));
			seeks++;
		}
	}
	if (dots != 2)
		err("'.' and '..' returned %d times in all, not 2", dots);
	for (int i = 0; i < s_cls.n; i++)
		if (s_cls.v[i].seen != 1)
			err("s%06d (there all along) returned %d times", i,
			    s_cls.v[i].seen);
	printf("changing pass: %d entries, %d unlinked, %d created, %d "
	       "seeks\n",
	       entries, unlinked, created, seeks);
}

/* A pass with nothing changing: exactly what exists, once each. */
static void quiet_pass(DIR *d)
{
	struct cls *all[] = { &s_cls, &v_cls, &n_cls };
	struct dirent *de;
	int entries = 0, dots = 0;

	reset_seen();
	rewinddir(d);
	for (;;) {
		struct ent *e;
		int child;

		de = next_entry(d);
		if (!de)
			break;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) {
			dots++;
			continue;
		}
		entries++;
		e = lookup(de->d_name, &child);
		if (child >= 0) {
			/* The child is gone; its last files stay. */
			child_seen[child]++;
			continue;
		}
		if (!e) {
			err("quiet pass: unknown entry '%s'", de->d_name);
			continue;
		}
		e->seen++;
	}
	if (dots != 2)
		err("quiet pass: '.' and '..' returned %d times in all", dots);
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < all[k]->n; i++) {
			struct ent *e = &all[k]->v[i];

			if (e->seen != (e->exists ? 1 : 0))
				err("quiet pass: %c%06d (%s) returned %d "
				    "times",
				    all[k]->prefix, i,
				    e->exists ? "exists" : "unlinked", e->seen);
		}
	for (int i = 0; i < CHILD_MAX; i++)
		if (child_seen[i] > 1)
			err("quiet pass: c%06d returned %d times", i,
			    child_seen[i]);
	printf("quiet pass: %d entries\n", entries);
}

/* Seek to recorded positions of "s" entries in random order. */
static void seek_storm(DIR *d, int count)
{
	int done = 0;

	for (int k = 0; k < count; k++) {
		int i = (int)(rnd() % (uint64_t)s_cls.n);
		struct dirent *de;
		char name[32];

		if (s_cls.v[i].pos == -1)
			continue;
		mkname(name, sizeof(name), 's', i);
		seekdir(d, s_cls.v[i].pos);
		errno = 0;
		de = readdir(d);
		if (!de || strcmp(de->d_name, name))
			err("seek storm: position of %s gave %s", name,
			    de ? de->d_name : "nothing");
		done++;
	}
	printf("seek storm: %d seeks\n", done);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* Names in @d from the start, sorted, comma-separated, into @buf. */
static void list_names(DIR *d, char *buf, size_t len)
{
	static char names[64][NAME_MAX + 1];
	struct dirent *de;
	int n = 0;
	size_t off = 0;

	rewinddir(d);
	while ((de = readdir(d)) && n < 64)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			snprintf(names[n++], sizeof(names[0]), "%s",
				 de->d_name);
	qsort(names, (size_t)n, sizeof(names[0]), cmp_names);
	buf[0] = '\0';
	for (int i = 0; i < n; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s",
					i ? "," : "", names[i]);
}

static void rewind_check(void)
{
	char path[4096], got[4096];
	const char *want = "a1,a3,a5,a7,a9,b0,b1,b2";
	int sub;
	DIR *d;

	snprintf(path, sizeof(path), "%s/rewind", dir);
	if (mkdir(path, 0755) < 0)
		die(path);
	sub = open(path, O_RDONLY | O_DIRECTORY);
	if (sub < 0)
		die(path);
	for (int i = 0; i < 10; i++) {
		char name[8];
		int fd;

		snprintf(name, sizeof(name), "a%d", i);
		fd = openat(sub, name, O_CREAT | O_WRONLY, 0644);
		if (fd < 0)
			die(name);
		close(fd);
	}
	d = opendir(path);
	if (!d)
		die(path);
	/* Read a few entries only: the rest of the page stays unread. */
	for (int i = 0; i < 3; i++)
		if (!readdir(d))
			die("readdir");
	for (int i = 0; i < 10; i += 2) {
		char name[8];

		snprintf(name, sizeof(name), "a%d", i);
		if (unlinkat(sub, name, 0) < 0)
			die(name);
	}
	for (int i = 0; i < 3; i++) {
		char name[8];
		int fd;

		snprintf(name, sizeof(name), "b%d", i);
		fd = openat(sub, name, O_CREAT | O_WRONLY, 0644);
		if (fd < 0)
			die(name);
		close(fd);
	}
	list_names(d, got, sizeof(got));
	if (strcmp(got, want))
		err("rewinddir: listed %s, expected %s", got, want);
	closedir(d);
	close(sub);
	printf("rewind check done\n");
}

int main(int argc, char **argv)
{
	int files = 5000, opt;
	bool concurrent = false;
	pid_t child = -1;
	DIR *d;

	rng = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	while ((opt = getopt(argc, argv, "n:s:c")) != -1) {
		switch (opt) {
		case 'n':
			files = atoi(optarg);
			break;
		case 's':
			rng = strtoull(optarg, NULL, 0);
			break;
		case 'c':
			concurrent = true;
			break;
		default:
			fprintf(stderr, "usage: telldir DIR [-n FILES] "
					"[-s SEED] [-c]\n");
			return 2;
		}
	}
	if (optind + 1 != argc || files < 2) {
		fprintf(stderr, "usage: telldir DIR [-n FILES] [-s SEED] "
				"[-c]\n");
		return 2;
	}
	if (!rng)
		rng = 1;
	printf("seed %llu\n", (unsigned long long)rng);
	fflush(stdout);
	dir = argv[optind];
	dirfd_ = open(dir, O_RDONLY | O_DIRECTORY);
	if (dirfd_ < 0)
		die(dir);

	cls_init(&s_cls, files);
	cls_init(&v_cls, files);
	cls_init(&n_cls, files);
	/* Interleave the two kinds so that unlinks hit all over. */
	for (int i = 0; i < files; i++) {
		if (i % 3 == 0) {
			create_file('v', v_cls.n);
			v_cls.v[v_cls.n].exists = true;
			v_cls.v[v_cls.n].pos = -1;
			v_cls.n++;
		} else {
			create_file('s', s_cls.n);
			s_cls.v[s_cls.n].exists = true;
			s_cls.v[s_cls.n].stable = true;
			s_cls.v[s_cls.n].pos = -1;
			s_cls.n++;
		}
	}

	if (concurrent) {
		struct sigaction sa = { .sa_handler = on_usr1 };

		sigaction(SIGUSR1, &sa, NULL);
		fflush(stdout);
		child = fork();
		if (child < 0)
			die("fork");
		if (child == 0)
			child_main();
		/* Let it get going. */
		usleep(100000);
	}
	d = opendir(dir);
	if (!d)
		die(dir);
	changing_pass(d);
	if (child > 0) {
		int status;

		kill(child, SIGUSR1);
		if (waitpid(child, &status, 0) < 0)
			die("waitpid");
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			err("the child failed (status %#x)", status);
	}
	quiet_pass(d);
	seek_storm(d, 1000);
	closedir(d);
	rewind_check();
	close(dirfd_);
	if (errors) {
		fprintf(stderr, "telldir: %d errors\n", errors);
		return 1;
	}
	printf("ok\n");
	return 0;
}
