/*
 * The core of a pipelined client connection (pclient.h).
 *
 * Design. The owner's transport puts bytes at the end of one sw_buf
 * (read(2) or libuv's alloc callback read into place: no copy), and
 * sw_pclient_feed() cuts frames at its head with sw_frame_whole(), the
 * same cutter the servers use. A frame's payload is handed to its
 * consumer in place, then consumed; a partial frame stays at the head,
 * and the buffer compacts itself (buf.h), so the input stays within one
 * read chunk of the largest frame accepted.
 *
 * Matching: ids come from the table's counter (calls.h), which only
 * grows on a connection's owner, so "never issued" is one comparison
 * with the counter. A reply takes its call out of the table under the
 * owner's lock; the call's callback runs after the lock is dropped, so
 * that it may send (and take the owner's locks) at will.
 *
 * A callback that runs on the reader (a single-threaded owner's) may end
 * the connection from inside the feed; the generation, bumped by every
 * disconnection, tells the feed to stop touching the input it reset.
 *
 * Disconnection hands the owner two lists instead of completing
 * anything: owners hold their write lock while the table is emptied (so
 * that nothing is assigned to the dead connection meanwhile), and a
 * callback run under it would deadlock on its next request.
 */
#include <errno.h>
#include <limits.h>

#include "frameio.h"
#include "fsio.h" /* sw_send_all() */
#include "pclient.h"
#include "util.h"

static void lock(struct sw_pclient *pc)
{
	if (pc->mu)
		pthread_mutex_lock(pc->mu);
}

static void unlock(struct sw_pclient *pc)
{
	if (pc->mu)
		pthread_mutex_unlock(pc->mu);
}

void sw_pclient_init(struct sw_pclient *pc, uint32_t max_payload,
		     pthread_mutex_t *mu, const struct sw_pclient_ops *ops)
{
	sw_calls_init(&pc->calls);
	pc->nflight = 0;
	pc->mu = mu;
	sw_buf_init(&pc->in);
	pc->max_payload = max_payload;
	pc->gen = 0;
	pc->ops = ops ? *ops : (struct sw_pclient_ops){ 0 };
}

void sw_pclient_release(struct sw_pclient *pc)
{
	sw_buf_release(&pc->in);
}

int sw_pclient_assign(struct sw_pclient *pc, struct sw_call *c)
{
	if (!sw_pclient_fits(pc, c))
		return -EMSGSIZE;
	sw_calls_assign(&pc->calls, c);
	pc->nflight++;
	return 0;
}

uint64_t sw_pclient_issue(struct sw_pclient *pc)
{
	return pc->calls.next_id++;
}

long sw_pclient_room(struct sw_pclient *pc, size_t chunk, uint8_t **buf)
{
	int rc = sw_buf_reserve(&pc->in, chunk);

	if (rc < 0)
		return rc;
	*buf = pc->in.data + pc->in.len;
	return (long)(pc->in.cap - pc->in.len);
}

/* One whole frame: to its call, or to the owner. */
static int deliver(struct sw_pclient *pc, const struct sw_frame_hdr *hdr,
		   const uint8_t *payload)
{
	struct sw_call *c = NULL;
	bool issued;

	if (hdr->flags & SW_FRAME_NOTIFY)
		return pc->ops.notify ?
			       pc->ops.notify(pc->ops.arg, hdr, payload) :
			       0;
	if (!(hdr->flags & SW_FRAME_REPLY))
		return -EPROTO; /* a server asks nothing of its clients */
	lock(pc);
	issued = hdr->id != 0 && hdr->id < pc->calls.next_id;
	if (issued)
		c = sw_calls_take(&pc->calls, hdr->id);
	if (c)
		pc->nflight--;
	unlock(pc);
	if (!issued)
		return -EPROTO;
	if (!c)
		return pc->ops.stray ?
			       pc->ops.stray(pc->ops.arg, hdr, payload) :
			       -EPROTO;
	if (pc->ops.answered)
		pc->ops.answered(pc->ops.arg, c);
	sw_call_answer(c, hdr, payload);
	return 0;
}

int sw_pclient_feed(struct sw_pclient *pc, size_t n)
{
	uint64_t gen = pc->gen;
	struct sw_frame_hdr hdr;
	int rc;

	pc->in.len += n;
	while ((rc = sw_frame_whole(sw_buf_head(&pc->in), sw_buf_used(&pc->in),
				    pc->max_payload, &hdr)) == 1) {
		rc = deliver(pc, &hdr, sw_buf_head(&pc->in) + SW_FRAME_HDR);
		/* A callback ended the connection: the input is gone. */
		if (gen != pc->gen)
			return -ECANCELED;
		sw_buf_consume(&pc->in, SW_FRAME_HDR + hdr.len);
		if (rc < 0)
			return rc;
	}
	return rc;
}

int sw_pclient_read(struct sw_pclient *pc, int fd, size_t chunk, int timeout_ms)
{
	int rc = sw_frame_fill(fd, &pc->in, chunk, timeout_ms);

	return rc < 0 ? rc : sw_pclient_feed(pc, 0);
}

static void on_waited(void *arg, int rc, ProtobufCMessage **reply)
{
	struct sw_pclient_waiter *w = arg;

	w->done = true;
	/* A reply, with or without its own error; else why not (calls.h
	 * says -EIO for a reply that does not unpack as it should). */
	w->rc = *reply ? 0 : rc == -EIO ? -EPROTO : rc;
	w->reply = *reply;
	*reply = NULL;
}

/*
 * What is left of @deadline (mono ns; 0: none) for one wait, in ms for
 * poll(2): at least 1 while any is left (rounded up, so that a wait never
 * becomes "do not wait"), 0 for no deadline, -ETIMEDOUT once it passed.
 */
static int deadline_left_ms(int64_t deadline)
{
	int64_t left;

	if (!deadline)
		return 0;
	left = deadline - sw_mono_ns();
	if (left <= 0)
		return -ETIMEDOUT;
	return (int)SW_MIN((left + 999999) / 1000000, (int64_t)INT_MAX);
}

int sw_pclient_send(struct sw_pclient *pc, int fd, uint16_t type,
		    const ProtobufCMessage *req, struct sw_pclient_waiter *w)
{
	struct sw_call *c;
	int rc;

	*w = (struct sw_pclient_waiter){ 0 };
	c = sw_call_new(type, req, on_waited, w);
	if (!c)
		return -ENOMEM; /* @w done: its callback ran */
	lock(pc);
	rc = sw_pclient_assign(pc, c);
	unlock(pc);
	if (rc < 0) {
		sw_call_put(c);
		sw_call_complete(c, rc, NULL); /* never in the table */
		return rc;
	}
	rc = sw_send_all(fd, c->frame, c->len);
	sw_call_put(c); /* the sender's */
	return rc;
}

int sw_pclient_wait(struct sw_pclient *pc, int fd, struct sw_pclient_waiter *w,
		    int timeout_ms)
{
	/* For the whole wait, not per read: a server that dribbles a byte
	 * now and then would otherwise hold the caller for ever. */
	int64_t deadline =
		timeout_ms > 0 ? sw_mono_ns() + (int64_t)timeout_ms * 1000000 :
				 0;
	int rc = 0;

	while (rc == 0 && !w->done) {
		int left = deadline_left_ms(deadline);

		rc = left < 0 ? left : sw_pclient_read(pc, fd, 64 << 10, left);
	}
	if (!w->done) /* ours is among them: no waiter outlives us */
		sw_pclient_fail_all(pc, rc);
	return w->rc;
}

int sw_pclient_call(struct sw_pclient *pc, int fd, uint16_t type,
		    const ProtobufCMessage *req, int timeout_ms,
		    ProtobufCMessage **reply)
{
	struct sw_pclient_waiter w;
	int rc = sw_pclient_send(pc, fd, type, req, &w);

	if (rc == 0)
		sw_pclient_wait(pc, fd, &w, timeout_ms);
	else if (!w.done)
		sw_pclient_fail_all(pc, rc);
	*reply = w.reply;
	return w.rc;
}

void sw_pclient_disconnect(struct sw_pclient *pc, sw_pclient_keep_fn keep,
			   struct sw_call **kept, struct sw_call **failed)
{
	struct sw_call *all, *next, **kt = kept, **ft = failed;

	sw_buf_reset(&pc->in);
	pc->gen++;
	lock(pc);
	all = sw_calls_take_all(&pc->calls);
	pc->nflight = 0;
	unlock(pc);
	for (; all; all = next) {
		next = all->next;
		if (keep && keep(all)) {
			*kt = all;
			kt = &all->next;
		} else {
			*ft = all;
			ft = &all->next;
		}
	}
	*kt = NULL;
	*ft = NULL;
}

void sw_pclient_fail_all(struct sw_pclient *pc, int rc)
{
	struct sw_call *kept, *failed;

	sw_pclient_disconnect(pc, NULL, &kept, &failed);
	sw_call_fail_list(failed, rc);
}
