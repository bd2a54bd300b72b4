/*
 * Catching up from the leader's checkpoint (catchup.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catchup.h"
#include "checkpoint.h"
#include "client.h"
#include "crc32c.h"
#include "fsio.h"
#include "group.h"
#include "handlers.h"
#include "log.h"
#include "master.h"
#include "session.h"
#include "util.h"

#define TAG "catchup"
/* A leader without a checkpoint new enough writes one: asked again every
 * half second, for a minute. */
#define EAGAIN_TRIES 120

/* ---- the leader ----------------------------------------------------- */

/* Read @n bytes at @off of @fd into @p: 0, or -errno (-EIO: it ended). */
static int pread_all(int fd, uint8_t *p, size_t n, uint64_t off)
{
	while (n) {
		ssize_t got = pread(fd, p, n, (off_t)off);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? -errno : -EIO;
		p += got;
		n -= (size_t)got;
		off += (uint64_t)got;
	}
	return 0;
}

void op_meta_read(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__MetaReadReq *q = (const void *)msg;
	Sweepfs__MetaReadReply reply = SWEEPFS__META_READ_REPLY__INIT;
	struct master *m = r->m;
	uint64_t version = q->version;
	uint8_t *piece = NULL;
	char path[4200];
	struct stat st;
	size_t n = 0;
	int fd = -1, rc = 0;

	if (!version) {
		rc = checkpoint_newest(m->cfg.data_dir, &version);
		if (rc == 0 || (rc == 1 && version < q->need)) {
			/* One of the version the group is at now. */
			sw_notice(TAG,
				  "session %016" PRIx64 " needs a checkpoint "
				  "of version %" PRIu64 " or later: writing "
				  "one",
				  r->s->id, q->need);
			master_checkpoint(m);
			group_pin(m, q->need);
			rc = -EAGAIN;
		}
		if (rc < 0)
			goto out;
	}
	checkpoint_name(path, sizeof(path), m->cfg.data_dir, version);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	if (q->offset > (uint64_t)st.st_size) {
		rc = -EINVAL;
		goto out;
	}
	n = (size_t)SW_MIN((uint64_t)CATCHUP_PIECE,
			   (uint64_t)st.st_size - q->offset);
	piece = malloc(n ? n : 1);
	if (!piece) {
		rc = -ENOMEM;
		goto out;
	}
	rc = pread_all(fd, piece, n, q->offset);
	if (rc < 0)
		goto out;
	if (q->offset == 0)
		sw_notice(TAG,
			  "session %016" PRIx64 " reads checkpoint %" PRIu64
			  " (%" PRIu64 " bytes)",
			  r->s->id, version, (uint64_t)st.st_size);
	group_pin(m, version);
	reply.has_version = reply.has_size = reply.has_data = 1;
	reply.version = version;
	reply.size = (uint64_t)st.st_size;
	reply.data.data = piece;
	reply.data.len = n;
out:
	if (fd >= 0)
		close(fd);
	if (rc < 0) {
		reply.has_err = 1;
		reply.err = -rc;
	}
	req_reply(r, &reply.base);
	free(piece);
}

/* ---- the member ----------------------------------------------------- */

/*
 * Connect to @leader as a member: answer its challenge with @key and check
 * its answer to ours. 0 with *@out, or -errno (-EACCES: a wrong key on
 * either side).
 */
static int member_open(const char *leader, const uint8_t key[SW_AUTH_KEY],
		       const char *name, int timeout_ms, struct sw_client **out)
{
	Sweepfs__Hello hello = SWEEPFS__HELLO__INIT;
	Sweepfs__HelloReply *hr = NULL;
	ProtobufCMessage *reply = NULL;
	uint8_t nonce[SW_AUTH_NONCE], tag[SW_AUTH_TAG], want[SW_AUTH_TAG];
	struct sw_target t;
	struct sw_client *c;
	int rc;

	if (sw_target_parse(leader, SW_MASTER_PORT, &t) < 0 || t.naddrs != 1)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->next_id = 1;
	c->timeout_ms = timeout_ms;
	c->max_payload = SW_FRAME_MAX_META;
	c->fd = sw_tcp_connect(t.host, t.port,
			       SW_MIN(timeout_ms, SW_WALK_CONNECT_MS));
	if (c->fd < 0) {
		rc = c->fd;
		free(c);
		return rc;
	}
	snprintf(c->master, sizeof(c->master), "%s", leader);
	sw_auth_random(nonce, sizeof(nonce));
	hello.version =
		sw_proto_hello_version(SWEEPFS__ROLE__ROLE_MEMBER, true);
	hello.role = SWEEPFS__ROLE__ROLE_MEMBER;
	hello.has_client_name = 1;
	hello.client_name.data = (uint8_t *)name;
	hello.client_name.len = strlen(name);
	hello.has_cs_nonce = 1;
	hello.cs_nonce.data = nonce;
	hello.cs_nonce.len = sizeof(nonce);
	for (int round = 0; round < 2; round++) {
		if (reply)
			protobuf_c_message_free_unpacked(reply, NULL);
		rc = sw_client_call(c, SW_MSG_HELLO, &hello.base, &reply);
		if (rc < 0) {
			reply = NULL;
			goto out;
		}
		hr = (Sweepfs__HelloReply *)reply;
		rc = sw_reply_err(reply);
		if (rc != -EACCES || round > 0 || !hr->has_challenge ||
		    hr->challenge.len != SW_AUTH_NONCE)
			break;
		sw_auth_tag(key, SW_AUTH_MEMBER, hr->challenge.data,
			    hr->challenge.len, NULL, 0, tag);
		hello.has_auth = 1;
		hello.auth.data = tag;
		hello.auth.len = sizeof(tag);
	}
	if (rc < 0)
		goto out;
	sw_auth_tag(key, SW_AUTH_LEADER, nonce, sizeof(nonce), NULL, 0, want);
	if (!hr->has_cs_proof || hr->cs_proof.len != SW_AUTH_TAG ||
	    !sw_auth_equal(hr->cs_proof.data, want, SW_AUTH_TAG)) {
		sw_warn(TAG, "%s does not prove the group's session key",
			leader);
		rc = -EACCES;
	}
out:
	if (reply)
		protobuf_c_message_free_unpacked(reply, NULL);
	if (rc < 0) {
		sw_client_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

struct download {
	int fd;
	uint64_t version;
	struct catchup_ends e;
};

void catchup_take(struct catchup_ends *e, const uint8_t *p, size_t n)
{
	uint64_t tail_at = e->size - sizeof(e->tail), end = e->got + n;

	if (e->got < sizeof(e->head))
		memcpy(e->head + e->got, p,
		       (size_t)SW_MIN((uint64_t)n, sizeof(e->head) - e->got));
	if (end > tail_at) {
		uint64_t from = SW_MAX(e->got, tail_at);

		memcpy(e->tail + (from - tail_at), p + (from - e->got),
		       (size_t)(end - from));
	}
	if (e->got < tail_at)
		e->crc = sw_crc32c(e->crc, p,
				   (size_t)SW_MIN((uint64_t)n,
						  tail_at - e->got));
	e->got = end;
}

/*
 * Pieces asked for at once: one at a time, each piece waits a round trip
 * besides its bytes, which between machines is what counts (over
 * loopback four gained about a tenth: bench/group_catchup.py). The
 * leader answers each on its loop (a pread and a copy of CATCHUP_PIECE
 * bytes), so a few ahead, not the file.
 */
#define CATCHUP_AHEAD 4u

struct piece {
	struct sw_pclient_waiter w;
	uint64_t offset;
};

/*
 * Take the reply to @p, the piece that starts at d->e.got: 0, 1 when it
 * was not CATCHUP_PIECE bytes or the rest of the file (a leader whose
 * pieces are of another size: stop asking ahead), or -errno.
 */
static int take_reply(struct download *d, const struct piece *p, uint64_t need)
{
	const Sweepfs__MetaReadReply *mr = (const void *)p->w.reply;
	int rc = sw_reply_err(p->w.reply);

	/* The first reply says which file and its size, for good: the
	 * size, never 0, says the first has come (a checkpoint of version
	 * 0 asked for again would be "the newest"). */
	if (rc == 0 &&
	    (!mr->has_version || !mr->has_size ||
	     mr->size < CHECKPOINT_HEAD + CHECKPOINT_TAIL || !mr->has_data ||
	     mr->version < need ||
	     (d->e.size &&
	      (mr->version != d->version || mr->size != d->e.size)) ||
	     mr->size < d->e.got || mr->data.len > mr->size - d->e.got ||
	     (mr->data.len == 0 && d->e.got < mr->size)))
		rc = -EPROTO;
	if (rc < 0)
		return rc;
	if (!d->e.size) {
		d->version = mr->version;
		d->e.size = mr->size;
	}
	rc = sw_write_all(d->fd, mr->data.data, mr->data.len);
	if (rc < 0)
		return rc;
	catchup_take(&d->e, mr->data.data, mr->data.len);
	return mr->data.len !=
	       SW_MIN((uint64_t)CATCHUP_PIECE, d->e.size - p->offset);
}

/*
 * One read of the whole file into d->fd: 0 with d->version, -EAGAIN (not
 * yet: ask again), or -errno (-ECANCELED: @stop said so). The first piece
 * is asked for alone; then up to CATCHUP_AHEAD at once, each at the
 * offset the pieces before it end at if they are whole. A piece of
 * another size turns that off: what was asked at offsets that are not
 * where it ended is read and dropped, and the rest is asked for one
 * piece at a time, where the last ended.
 */
static int read_pieces(struct sw_client *c, struct download *d, uint64_t need,
		       bool (*stop)(void *arg), void *arg)
{
	Sweepfs__MetaReadReq q = SWEEPFS__META_READ_REQ__INIT;
	struct piece ring[CATCHUP_AHEAD];
	unsigned head = 0, n = 0; /* ring[head...] in flight, n of them */
	uint64_t asked = 0;	  /* where the next piece asked ahead starts */
	bool ahead = true;
	int rc = 0;

	q.has_need = q.has_version = q.has_offset = 1;
	q.need = need;
	while (rc == 0 && (d->e.got < d->e.size || !d->e.size || n)) {
		unsigned most = ahead && d->e.size ? CATCHUP_AHEAD : 1;
		struct piece *p;

		/* Told to stop: nothing more is asked for (a first piece
		 * could make the leader write a checkpoint). */
		if (stop && stop(arg)) {
			rc = -ECANCELED;
			break;
		}
		while (n < most) {
			/* Ahead of the pieces in flight, or where the file
			 * read so far ends. */
			uint64_t at = n && ahead ? asked : d->e.got;

			if (d->e.size && at >= d->e.size)
				break;
			p = &ring[(head + n++) % CATCHUP_AHEAD];
			p->offset = q.offset = at;
			q.version = d->version;
			asked = at + CATCHUP_PIECE;
			rc = sw_client_send(c, SW_MSG_META_READ, &q.base,
					    &p->w);
			if (rc < 0 || !d->e.size)
				break;
		}
		if (rc < 0)
			break;
		p = &ring[head];
		head = (head + 1) % CATCHUP_AHEAD;
		n--;
		rc = sw_client_wait(c, &p->w);
		/* One asked past a piece of another size is dropped. */
		if (rc == 0 && p->offset == d->e.got)
			rc = take_reply(d, p, need);
		if (rc == 1) {
			ahead = false;
			rc = 0;
		}
		if (p->w.reply)
			protobuf_c_message_free_unpacked(p->w.reply, NULL);
	}
	/* What is still asked for comes, or fails, before @ring goes. */
	for (; n; n--, head = (head + 1) % CATCHUP_AHEAD) {
		sw_client_wait(c, &ring[head].w);
		if (ring[head].w.reply)
			protobuf_c_message_free_unpacked(ring[head].w.reply,
							 NULL);
	}
	return rc;
}

int catchup_read(struct sw_client *c, int fd, uint64_t need,
		 bool (*stop)(void *arg), void *arg, uint64_t *version,
		 struct catchup_ends *e)
{
	struct download d = { .fd = fd };
	int rc = read_pieces(c, &d, need, stop, arg);

	*version = d.version;
	*e = d.e;
	return rc;
}

int catchup_fetch(const char *leader, const uint8_t key[SW_AUTH_KEY],
		  const char *dir, uint64_t need, const char *name,
		  int timeout_ms, bool (*stop)(void *arg), void *arg,
		  uint64_t *version)
{
	struct download d = { .fd = -1 };
	struct sw_client *c = NULL;
	char tmp[4200], final[4200];
	int64_t t0 = sw_mono_ns();
	int rc, waits = 0;

	snprintf(tmp, sizeof(tmp), "%s/catchup.tmp", dir);
	rc = member_open(leader, key, name, timeout_ms, &c);
	if (rc < 0)
		return rc;
	for (;;) {
		d.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			    0640);
		if (d.fd < 0) {
			rc = -errno;
			break;
		}
		rc = catchup_read(c, d.fd, need, stop, arg, &d.version, &d.e);
		if (rc == -EAGAIN && ++waits < EAGAIN_TRIES) {
			close(d.fd);
			sw_sleep_ms(500);
			continue;
		}
		if (rc == 0 && !checkpoint_ends_check(d.e.head, d.e.tail,
						      d.e.crc, d.version))
			rc = -EBADMSG;
		if (rc == 0 && fdatasync(d.fd) < 0)
			rc = -errno;
		if (close(d.fd) < 0 && rc == 0)
			rc = -errno;
		break;
	}
	sw_client_close(c);
	if (rc == 0) {
		checkpoint_name(final, sizeof(final), dir, d.version);
		if (rename(tmp, final) < 0)
			rc = -errno;
	}
	if (rc == 0)
		rc = sw_fsync_dir(dir);
	if (rc < 0) {
		unlink(tmp);
		return rc;
	}
	sw_notice(TAG,
		  "checkpoint %" PRIu64 " (%" PRIu64 " bytes) read from %s "
		  "in %.3f s",
		  d.version, d.e.size, leader,
		  (double)(sw_mono_ns() - t0) / 1e9);
	*version = d.version;
	return 0;
}
