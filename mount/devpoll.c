/*
 * Reading /dev/fuse: one reader at a time, polling before it sleeps
 * (devpoll.h).
 */
#include <errno.h>
#include <linux/fuse.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include "devpoll.h"
#include "util.h"

/* The turn this thread has (NULL: none); given back if it exits. */
static pthread_key_t turn_key;
static pthread_once_t turn_once = PTHREAD_ONCE_INIT;

static void give_turn(struct devpoll *dp)
{
	pthread_setspecific(turn_key, NULL);
	atomic_store(&dp->busy_since, 0);
	pthread_mutex_lock(&dp->mu);
	dp->taken = false;
	pthread_mutex_unlock(&dp->mu);
	pthread_cond_signal(&dp->cv);
}

static void exiting_with_turn(void *arg)
{
	give_turn(arg);
}

static void make_key(void)
{
	if (pthread_key_create(&turn_key, exiting_with_turn) != 0)
		abort();
}

int devpoll_init(struct devpoll *dp, unsigned max_us)
{
	int rc;

	if (max_us > 1000000)
		return -EINVAL;
	pthread_once(&turn_once, make_key);
	*dp = (struct devpoll){ .max_ns = max_us * 1000u };
	rc = pthread_mutex_init(&dp->mu, NULL);
	if (rc)
		return -rc;
	rc = sw_cond_init_mono(&dp->cv);
	if (rc) {
		pthread_mutex_destroy(&dp->mu);
		return -rc;
	}
	return 0;
}

void devpoll_destroy(struct devpoll *dp)
{
	pthread_cond_destroy(&dp->cv);
	pthread_mutex_destroy(&dp->mu);
}

uint32_t devpoll_next_window(uint32_t window_ns, uint32_t max_ns,
			     uint64_t waited_ns, bool caught)
{
	if (caught)
		return window_ns;
	if (waited_ns > max_ns) {
		window_ns /= 2;
		return window_ns < DEVPOLL_START_NS ? 0 : window_ns;
	}
	if (window_ns < DEVPOLL_START_NS)
		window_ns = DEVPOLL_START_NS;
	else
		window_ns *= 2;
	return window_ns < max_ns ? window_ns : max_ns;
}

bool devpoll_keeps_turn(const void *buf, ssize_t n)
{
	const struct fuse_in_header *in = buf;

	if (n < (ssize_t)sizeof(*in))
		return false;
	switch (in->opcode) {
	case FUSE_LOOKUP:
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_GETATTR:
	case FUSE_UNLINK:
	case FUSE_RMDIR:
	case FUSE_MKDIR:
	case FUSE_MKNOD:
	case FUSE_SYMLINK:
	case FUSE_CREATE:
	case FUSE_FLUSH:
	case FUSE_RELEASE:
		return true;
	default:
		return false;
	}
}

void devpoll_yield(void)
{
	struct devpoll *dp;

	pthread_once(&turn_once, make_key);
	dp = pthread_getspecific(turn_key);
	if (dp)
		give_turn(dp);
}

static void unlock(void *arg)
{
	pthread_mutex_unlock(arg);
}

/*
 * Wait for the turn and take it; false if, instead, its keeper has been
 * busy with one request for DEVPOLL_STUCK_NS. One waiter at a time
 * looks every DEVPOLL_STUCK_NS while the keeper is busy; the others, and
 * it while the keeper reads, every ten times that (should the one who
 * looked have taken the turn since, another looks next).
 */
static bool take_turn(struct devpoll *dp)
{
	volatile bool stuck = false; /* across the cleanup handler's setjmp */

	pthread_mutex_lock(&dp->mu);
	pthread_cleanup_push(unlock, &dp->mu);
	while (dp->taken) {
		int64_t since = atomic_load(&dp->busy_since);
		int64_t now = sw_mono_ns();
		struct timespec ts;

		if (since && now - since >= DEVPOLL_STUCK_NS) {
			stuck = true;
			break;
		}
		if (dp->watching) {
			ts = sw_ns_to_timespec(now + 10 * DEVPOLL_STUCK_NS);
			pthread_cond_timedwait(&dp->cv, &dp->mu, &ts);
			continue;
		}
		ts = sw_ns_to_timespec(now + (since ? DEVPOLL_STUCK_NS :
						      10 * DEVPOLL_STUCK_NS));
		dp->watching = true;
		pthread_cond_timedwait(&dp->cv, &dp->mu, &ts);
		dp->watching = false;
	}
	if (!stuck) {
		dp->taken = true;
		pthread_setspecific(turn_key, dp);
	}
	pthread_cleanup_pop(1);
	return !stuck;
}

/* Whether a read of @fd would not wait (or would fail). */
static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) != 0;
}

/*
 * Whether @fd became readable within @window_ns of @start. It looks at
 * least once: a thread preempted past its window still finds a request
 * that came meanwhile without going to sleep.
 */
static bool poll_for(int fd, int64_t start, uint32_t window_ns)
{
	do {
		if (readable(fd))
			return true;
	} while (sw_mono_ns() - start < window_ns);
	return false;
}

ssize_t devpoll_read(struct devpoll *dp, int fd, void *buf, size_t len)
{
	int64_t start;
	ssize_t n;
	bool caught;
	int err;

	if (!dp->max_ns) /* libfuse's way: every thread reads */
		return read(fd, buf, len);
	if (pthread_getspecific(turn_key) != dp && !take_turn(dp)) {
		atomic_fetch_add(&dp->stolen, 1);
		return read(fd, buf, len);
	}
	atomic_store(&dp->busy_since, 0);
	start = sw_mono_ns();
	caught = dp->window_ns && poll_for(fd, start, dp->window_ns);
	n = read(fd, buf, len);
	err = errno;
	if (n >= 0) {
		dp->window_ns = devpoll_next_window(dp->window_ns, dp->max_ns,
						    sw_mono_ns() - start,
						    caught);
		atomic_fetch_add(caught ? &dp->caught : &dp->slept, 1);
	}
	/* More requests waiting: they need not wait for this one. */
	if (devpoll_keeps_turn(buf, n) && !readable(fd))
		atomic_store(&dp->busy_since, sw_mono_ns());
	else
		give_turn(dp);
	errno = err;
	return n;
}
