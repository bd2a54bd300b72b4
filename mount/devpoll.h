/*
 * Reading requests from /dev/fuse: one reader at a time, which polls
 * briefly before it sleeps, and which keeps reading while the requests
 * it gets are answered without waiting.
 *
 * A program that removes or creates files one after another sends the
 * next request some 20-40 us after it got the last reply. A FUSE thread
 * that went to sleep in read() in between is woken through the
 * scheduler, and on a virtual machine an idle CPU's wake-up costs about
 * as much as the request itself: `rm -rf` left both CPUs of a test VM
 * idle 45% of the time. So the thread whose turn it is to read polls
 * the device for a little while first, as KVM's halt polling does, and
 * sizes that while by how long requests have recently taken to come.
 *
 * Handing the turn to another thread with every request would wake
 * that thread every time, which costs as much again. So a thread that
 * read a request of the kinds the mount answers from memory or with a
 * message to the master it does not wait for (lookups, attributes,
 * creates, removals, flush and release), with no other request queued
 * behind it, keeps the turn, and gives it up only when it is about to
 * wait for something: devpoll_yield(), which every wait on the request
 * path calls. Any other request gives the turn up at once,
 * so that a reader is always free to take the requests that a waiting
 * one may need (an unlock, an interrupt). Should a keeper wait without
 * saying so, a waiting thread takes one request without the turn once
 * the keeper has been busy for DEVPOLL_STUCK_NS.
 */
#ifndef SWEEPFS_MOUNT_DEVPOLL_H
#define SWEEPFS_MOUNT_DEVPOLL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The polling window's first step up from 0, in nanoseconds. */
#define DEVPOLL_START_NS 10000u
/* How long a keeper of the turn may be busy before others read. */
#define DEVPOLL_STUCK_NS (100 * 1000000LL)

struct devpoll {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* the turn is free, or a keeper may be stuck */
	bool taken;	   /* a thread has the turn */
	bool watching;	   /* a waiter wakes now and then to see */
	_Atomic int64_t busy_since; /* the keeper's request came (0: none) */
	uint32_t max_ns;	    /* longest window; 0: never poll */
	uint32_t window_ns;	    /* the turn's: how long to poll next */
	_Atomic uint64_t caught;    /* requests caught by polling */
	_Atomic uint64_t slept;	    /* reads that slept */
	_Atomic uint64_t stolen;    /* read without the turn */
};

/* Poll for at most @max_us microseconds (0: sleep at once). 0 or
 * -errno. */
int devpoll_init(struct devpoll *dp, unsigned max_us);
void devpoll_destroy(struct devpoll *dp);

/*
 * read(2) of @fd (a FUSE device, or anything poll(2) works on) into
 * @buf, once it is this thread's turn; the result and errno are
 * read(2)'s. Whether the thread keeps the turn depends on the request
 * read (see above).
 */
ssize_t devpoll_read(struct devpoll *dp, int fd, void *buf, size_t len);

/* This thread is about to wait: give up the turn if it has it. */
void devpoll_yield(void);

/*
 * The next window after a read that came @waited_ns after it was
 * started with window @window_ns, and that was @caught by polling or
 * not (exposed for the unit test). A request caught keeps the window;
 * one that came soon after the window ran out widens it; a long idle
 * spell narrows it, down to 0, so an idle mount polls for nothing.
 */
uint32_t devpoll_next_window(uint32_t window_ns, uint32_t max_ns,
			     uint64_t waited_ns, bool caught);

/* Whether a reader keeps the turn after reading @buf (@n bytes). */
bool devpoll_keeps_turn(const void *buf, ssize_t n);

#endif
