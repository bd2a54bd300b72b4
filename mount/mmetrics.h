/*
 * The mount's Prometheus metrics (-o metrics_listen=HOST:PORT): what it
 * asked the master, by request type, and how long each took to be
 * answered. Served by common/metrics.c (libmicrohttpd) from a libuv loop
 * on a thread of its own, since the mount's threads are FUSE's and its
 * connections'.
 */
#ifndef SWEEPFS_MOUNT_MMETRICS_H
#define SWEEPFS_MOUNT_MMETRICS_H

#include <stdint.h>

struct mmetrics;

/*
 * Serve metrics on @listen ("HOST:PORT"); @master names the master (a
 * label). Starts a thread: call after daemonizing. 0 with *@out, or
 * -errno (logged). Free with mmetrics_stop().
 */
int mmetrics_start(const char *listen, const char *master,
		   struct mmetrics **out);

/* A request of @type answered @ns after it went out. Any thread. */
void mmetrics_note(struct mmetrics *mm, uint16_t type, int64_t ns);

/* Stop serving, join the thread, free. NULL is fine. */
void mmetrics_stop(struct mmetrics *mm);

#endif
