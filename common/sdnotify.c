/*
 * sdnotify on libsystemd: sd_notify(3) and sd_watchdog_enabled(3) read
 * $NOTIFY_SOCKET and $WATCHDOG_USEC/$WATCHDOG_PID themselves, so a daemon
 * not started by systemd (or started by a test with its own socket) gets
 * the right behaviour without asking. See sdnotify.h.
 */
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-daemon.h>

#include "sdnotify.h"

static uv_timer_t watchdog; /* pings while the loop turns */
static bool watchdog_on;    /* watchdog is initialised and not closed */
static int64_t watchdog_half_ns;
static int64_t (*stalled_fn)(void *arg);
static void *stalled_arg;

void sw_sdnotify_stalled(int64_t (*stalled)(void *arg), void *arg)
{
	stalled_fn = stalled;
	stalled_arg = arg;
}

/* A ping, unless what the loop waits on is stuck. */
static void ping(void)
{
	if (stalled_fn && stalled_fn(stalled_arg) >= watchdog_half_ns)
		return;
	sd_notify(0, "WATCHDOG=1");
}

static void on_watchdog(uv_timer_t *t)
{
	(void)t;
	ping();
}

int sw_sdnotify_ready(uv_loop_t *loop, const char *status)
{
	uint64_t usec = 0;
	int rc;

	rc = sd_notifyf(0, "READY=1\nSTATUS=%s", status ? status : "ready");
	if (rc < 0)
		return rc;
	if (!watchdog_on && sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
		/* Half the period, as sd_watchdog_enabled(3) advises; at
		 * least a millisecond. */
		uint64_t ms = usec / 2000 ? usec / 2000 : 1;

		uv_timer_init(loop, &watchdog);
		uv_timer_start(&watchdog, on_watchdog, ms, ms);
		uv_unref((uv_handle_t *)&watchdog);
		watchdog_on = true;
		watchdog_half_ns = (int64_t)ms * 1000000;
		ping();
	}
	return 0;
}

void sw_sdnotify_stopping(void)
{
	sd_notify(0, "STOPPING=1");
	if (watchdog_on) {
		uv_timer_stop(&watchdog);
		uv_close((uv_handle_t *)&watchdog, NULL);
		watchdog_on = false;
	}
}
