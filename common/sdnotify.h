/*
 * sdnotify: tell systemd how a daemon is doing (sd_notify(3)), for units
 * of Type=notify: READY=1 once it serves, watchdog pings from its own
 * loop while WATCHDOG_USEC asks for them, STOPPING=1 when it shuts down.
 * Outside systemd (no $NOTIFY_SOCKET) every call does nothing.
 *
 * The state is the process's, as $NOTIFY_SOCKET is: one daemon, one
 * notification socket, one watchdog timer. Built on libsystemd
 * (sdnotify.c) or, without it, as no-ops (sdnotify_none.c).
 */
#ifndef SWEEPFS_COMMON_SDNOTIFY_H
#define SWEEPFS_COMMON_SDNOTIFY_H

#include <stdint.h>

#include <uv.h>

/*
 * The daemon serves: send READY=1 and STATUS=@status (may be NULL). If
 * systemd asked for a watchdog (WATCHDOG_USEC, for this pid), start a
 * timer on @loop that sends WATCHDOG=1 every half of that period; the
 * timer does not keep the loop alive (uv_unref), so the daemon's own
 * handles decide when uv_run() returns. A loop that stalls stops the
 * pings, and systemd restarts the daemon. Returns 0 (also outside
 * systemd) or -errno if a message could not be sent.
 */
int sw_sdnotify_ready(uv_loop_t *loop, const char *status);

/*
 * How long the daemon has been stuck though its loop turns (a thread it
 * waits on made no progress): @stalled(@arg) in ns, asked before each
 * watchdog ping. While it is half the watchdog's period or more, no ping
 * goes, and systemd restarts the daemon as one whose loop hung. May be
 * called before or after sw_sdnotify_ready(); NULL forgets it.
 */
void sw_sdnotify_stalled(int64_t (*stalled)(void *arg), void *arg);

/*
 * The daemon is shutting down: send STOPPING=1 and close the watchdog
 * timer, if any (its close callback runs on the loop, so call this before
 * the loop's last uv_run()). Safe to call more than once.
 */
void sw_sdnotify_stopping(void);

#endif
