/*
 * statprobe: what another client of a filesystem sees while something
 * heavy runs on it. A thread stat()s one fixed file in a loop, with a
 * pause between calls, and records how long each call took; at the end,
 * the median, 99th percentile and maximum.
 *
 *	struct statprobe *p;
 *	struct statprobe_result r;
 *
 *	statprobe_start("/mnt/probe-mount/dir", "file", 1000, &p);
 *	... the deletion ...
 *	statprobe_stop(p, &r);
 */
#ifndef SWEEPFS_TOOLS_STATPROBE_H
#define SWEEPFS_TOOLS_STATPROBE_H

#include <stdint.h>

struct statprobe;

struct statprobe_result {
	uint64_t samples; /* stat() calls made */
	uint64_t errors;  /* of which failed (the latency still counts) */
	int first_error;  /* errno of the first failure, or 0 */
	double p50_ms;
	double p99_ms;
	double max_ms;
};

/*
 * Open directory @dir and start a thread that fstatat()s @name in it
 * (without following a symlink), sleeping @pause_us microseconds between
 * calls. Returns 0 with *@out, to be passed to statprobe_stop(), or -errno
 * (the directory cannot be opened, no memory, no thread).
 */
int statprobe_start(const char *dir, const char *name, unsigned pause_us,
		    struct statprobe **out);

/* Stop and join the thread, fill *@r and free @p. */
void statprobe_stop(struct statprobe *p, struct statprobe_result *r);

#endif
