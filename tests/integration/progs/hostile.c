/*
 * hostile -m PORT -p PID [-c PORT -q PID -k KEYFILE -e EPOCH] [-t MS]
 *         [-s SEED] CHECK...
 *
 * A hostile client against a real master (port -m, pid -p) and, for the
 * checks that need one, a real chunkserver registered with it (port -c,
 * pid -q; -k is the master's data_dir/token.key and -e the token epoch
 * its log says it leads in, for making tokens that only the key can
 * make). -t is the servers' frame_timeout in ms. Each
 * CHECK runs in the order given and asserts exact outcomes:
 *
 *   frames      on the master, then on the chunkserver: a frame one byte
 *               over the size limit closes that connection with no reply
 *               while other connections are served, and one exactly at
 *               the limit is answered; unknown types get ENOSYS and the
 *               connection stays; a request before the hello, a frame
 *               flagged as a reply or notification, unknown flag bits,
 *               and garbage (seeded random bytes; an unparsable payload)
 *               close the connection with no reply; a second hello gets
 *               EISCONN and the connection stays
 *   names       '/', NUL, ".", "..", "" and 256-byte names in every
 *               request that names an entry: EINVAL, or ENAMETOOLONG for
 *               256 bytes; the root's listing is the same before and after
 *   tokens      a file's chunk written and read with the tokens the
 *               master grants; then forged, expired (made with the real
 *               key), other-chunk, other-version, missing, extended,
 *               read-only, another epoch's and token.key's own tokens
 *               used for writing (and forged ones for
 *               reading and syncing) get EACCES, and both chunks still
 *               hold exactly their data
 *   stall       connections that stop mid-header, mid-payload and (on
 *               the chunkserver) mid-way through a large frame are
 *               dropped after the frame timeout, at the servers' next
 *               once-a-second housekeeping (2.5 s of slack in all),
 *               while another client's requests every 20 ms all
 *               succeed meanwhile
 *   flood=N[/MAX]  N connections opened at once, each saying hello and
 *               pinging: all are answered, or with the master's
 *               max_connections MAX exactly those that fit are and the
 *               others are closed with no reply; the master answers
 *               another client throughout; afterwards its descriptor
 *               count and connection count are back where they were
 *   csflood=N   the same against the chunkserver (all answered)
 *   csbig=N     N peers each stop one byte short of a largest
 *               CS_WRITE: the chunkserver's RSS grows by less than
 *               max_inflight + 32 MiB
 *   confine     a session confined to a subdirectory (/jail) cannot use
 *               a file outside it by its inode number: getattr, open,
 *               setattr, getxattr, link into the subtree, lock, chunk
 *               (read and write) and write-end all fail with ESTALE and
 *               change nothing, while the same on a file inside works
 *               once a lookup named it; a new session claiming both
 *               files open in its hello gets neither; the client of a
 *               session the master forgot, proving it with its secret,
 *               gets the inside one back (found below its root) and
 *               still not the outside one
 *   chunkjobs   with the chunkserver stopped (SIGSTOP), another
 *               session's write moves a file's chunk on and leaves it
 *               busy; a client then sends 400,000 CHUNK reads of it as
 *               fast as its socket takes them, reading no reply: the
 *               master stops reading it (it cannot send them all within
 *               2 s of trying) and its RSS grows by less than 48 MiB,
 *               while another client's pings are answered; once the
 *               chunkserver goes on (SIGCONT), every read sent is
 *               answered (threat model, finding 23)
 *   groups      a request whose credentials carry more supplementary
 *               groups than Linux gives a process (SW_GROUPS_MAX + 1)
 *               gets EINVAL, and so does a batched operation's, which
 *               makes nothing; SW_GROUPS_MAX are served
 *
 * Prints "ok - ..." per check and the seed; exit status 0 when every
 * check held, 1 at the first that did not.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "buf.h"
#include "client.h"
#include "entries.h"
#include "frame.h"
#include "net.h"
#include "peer.h"
#include "token.h"
#include "util.h"

static uint16_t m_port, c_port;
static pid_t m_pid, c_pid;
static const char *key_file;
static uint64_t token_epoch; /* -e, hex */
static uint64_t frame_timeout_ms = 2000;

/* ---- frames ----------------------------------------------------------------- */

/* A ping whose payload is exactly @len bytes: an unknown field pads it. */
static uint8_t *padded_ping(size_t len, size_t *size)
{
	uint8_t *buf = malloc(SW_FRAME_HDR + len);
	struct sw_frame_hdr h = { (uint32_t)len, SW_MSG_PING, 0, 77 };
	size_t pad, n = SW_FRAME_HDR;

	if (!buf)
		fail("out of memory");
	sw_frame_put_hdr(buf, &h);
	/* field 15, length-delimited: tag 0x7a, varint length, bytes */
	buf[n++] = 0x7a;
	pad = len - 1 - 3;
	buf[n++] = (uint8_t)(pad | 0x80);
	buf[n++] = (uint8_t)((pad >> 7) | 0x80);
	buf[n++] = (uint8_t)(pad >> 14);
	if (pad >> 21)
		fail("padded_ping: too long");
	memset(buf + n, 'p', pad);
	*size = n + pad;
	return buf;
}

static void check_frames_on(uint16_t port, uint32_t limit, const char *who,
			    pid_t pid)
{
	static const uint16_t unknown[] = { 0, SW_MSG__COUNT, 999, 0xffff };
	struct peer a, b, c;
	struct sw_frame_hdr h;
	uint8_t *buf, hdr[SW_FRAME_HDR];
	size_t n;
	int err;

	/* Over the limit by one byte: that connection goes, others stay. */
	peer_open(&a, port);
	peer_open(&b, port);
	h = (struct sw_frame_hdr){ limit + 1, SW_MSG_PING, 0, 5 };
	sw_frame_put_hdr(hdr, &h);
	peer_raw(&a, hdr, sizeof(hdr));
	expect_closed(&a, "an oversized frame", 5000);
	peer_ping(&b);
	peer_open(&c, port);
	peer_ping(&c);
	peer_close(&c);
	/* Exactly at the limit: answered. */
	buf = padded_ping(limit, &n);
	peer_raw(&b, buf, n);
	free(buf);
	{
		struct sw_frame_hdr rh;
		uint8_t *payload;

		if (peer_recv(&b, &rh, &payload, TIMEOUT_MS) != 1 ||
		    rh.type != SW_MSG_PING || rh.id != 77 ||
		    rh.flags != SW_FRAME_REPLY)
			fail("%s: no answer to a frame of exactly %u bytes",
			     who, limit);
		free(payload);
	}
	ok("%s: a frame of %u + 1 bytes closes its connection only; one "
	   "of %u bytes is answered",
	   who, limit, limit);

	/* Unknown types: ENOSYS, and the connection stays. */
	for (size_t i = 0; i < SW_ARRAY_SIZE(unknown); i++) {
		uint64_t id = peer_send(&b, unknown[i], 0, NULL);

		protobuf_c_message_free_unpacked(
			peer_reply(&b, unknown[i], id, &err), NULL);
		if (err != ENOSYS)
			fail("%s: type %u answered with %s, not ENOSYS", who,
			     unknown[i], strerror(err));
	}
	if (port == m_port) {
		/* A chunkserver's request, well-formed, to the master. */
		Sweepfs__CsSyncReq q = SWEEPFS__CS_SYNC_REQ__INIT;

		q.chunk_id = 1;
		q.version = 1;
		err = peer_call(&b, SW_MSG_CS_SYNC, &q.base);
		if (err != ENOSYS)
			fail("master: cs_sync answered with %s, not ENOSYS",
			     strerror(err));
	} else {
		/* A namespace request to the chunkserver. */
		Sweepfs__GetattrReq q = SWEEPFS__GETATTR_REQ__INIT;

		q.ino = ROOT;
		err = peer_call(&b, SW_MSG_GETATTR, &q.base);
		if (err != ENOSYS)
			fail("chunkserver: getattr answered with %s, not "
			     "ENOSYS",
			     strerror(err));
	}
	peer_ping(&b);
	ok("%s: unknown and misdirected request types get ENOSYS, the "
	   "connection stays",
	   who);

	/* A second hello: EISCONN, the connection stays. */
	{
		Sweepfs__Hello q = SWEEPFS__HELLO__INIT;

		q.version = SW_PROTO_VERSION;
		q.role = SWEEPFS__ROLE__ROLE_MOUNT;
		err = peer_call(&b, SW_MSG_HELLO, &q.base);
		if (err != EISCONN)
			fail("%s: a second hello answered with %s, not "
			     "EISCONN",
			     who, strerror(err));
		peer_ping(&b);
	}
	ok("%s: a second hello gets EISCONN, the connection stays", who);

	/* Requests before the hello. */
	{
		Sweepfs__PingReq q = SWEEPFS__PING_REQ__INIT;

		peer_connect(&a, port);
		peer_send(&a, SW_MSG_PING, 0, &q.base);
		expect_closed(&a, "a request before hello", 5000);
	}
	ok("%s: a request before the hello closes the connection, no reply",
	   who);

	/* Frames only a server sends, and unknown flag bits. */
	{
		static const uint16_t flags[] = {
			SW_FRAME_REPLY, SW_FRAME_NOTIFY,
			SW_FRAME_REPLY | SW_FRAME_NOTIFY, 0x4, 0x8000
		};
		Sweepfs__PingReq q = SWEEPFS__PING_REQ__INIT;

		for (size_t i = 0; i < SW_ARRAY_SIZE(flags); i++) {
			peer_open(&a, port);
			peer_send(&a, SW_MSG_PING, flags[i], &q.base);
			expect_closed(&a, "a frame with server flags", 5000);
		}
	}
	ok("%s: reply-flagged, notification-flagged and unknown-flag frames "
	   "close the connection, no reply",
	   who);

	/* Garbage. */
	{
		uint8_t junk[4096];
		struct sw_frame_hdr gh = { 64, SW_MSG_PING, 0, 3 };

		for (size_t i = 0; i < sizeof(junk); i++)
			junk[i] = (uint8_t)rnd();
		junk[0] |= 0x40; /* the length is then over any limit */
		peer_open(&a, port);
		peer_raw(&a, junk, sizeof(junk));
		expect_closed(&a, "random bytes", 5000);
		/* A well-framed payload that is not protobuf. */
		sw_frame_put_hdr(junk, &gh);
		memset(junk + SW_FRAME_HDR, 0xff, 64);
		peer_open(&a, port);
		peer_raw(&a, junk, SW_FRAME_HDR + 64);
		expect_closed(&a, "an unparsable payload", 5000);
		peer_connect(&a, port);
		peer_raw(&a, junk + SW_FRAME_HDR, 64);
		expect_closed(&a, "0xff bytes before the hello", 5000);
	}
	ok("%s: random bytes, 0xff bytes and an unparsable payload close the "
	   "connection, no reply",
	   who);

	peer_ping(&b);
	peer_close(&b);
	alive(pid, who);
	peer_open(&c, port);
	peer_ping(&c);
	peer_close(&c);
	ok("%s: still up and serving", who);
}

static void check_frames(void)
{
	check_frames_on(m_port, SW_FRAME_MAX_META, "master", m_pid);
	if (c_port)
		check_frames_on(c_port, SW_FRAME_MAX_DATA, "chunkserver",
				c_pid);
}

/* ---- names -------------------------------------------------------------------- */

static Sweepfs__Cred root_cred = SWEEPFS__CRED__INIT;

/* The root's listing: names, one per line, into @out. */
static void listing(struct peer *p, struct sw_buf *out)
{
	uint64_t cookie = 0;

	sw_buf_reset(out);
	for (;;) {
		Sweepfs__ReaddirReq q = SWEEPFS__READDIR_REQ__INIT;
		Sweepfs__ReaddirReply *r;
		const uint8_t *e;
		size_t left;
		uint64_t id;
		int err;

		q.cred = &root_cred;
		q.ino = ROOT;
		q.cookie = cookie;
		q.max_entries = 1000;
		q.max_bytes = 64 << 10;
		id = peer_send(p, SW_MSG_READDIR, 0, &q.base);
		r = (Sweepfs__ReaddirReply *)peer_reply(p, SW_MSG_READDIR, id,
							&err);
		if (err)
			fail("readdir /: %s", strerror(err));
		e = r->entries.data;
		left = r->entries.len;
		while (left) {
			struct sw_dirent d;
			int n = sw_dirent_get(e, left, &d);

			if (n < 0)
				fail("readdir /: bad entries");
			sw_buf_add(out, d.name, d.namelen);
			sw_buf_add(out, "\n", 1);
			cookie = d.cookie;
			e += n;
			left -= (size_t)n;
		}
		if (r->eof || !r->count) {
			sweepfs__readdir_reply__free_unpacked(r, NULL);
			return;
		}
		sweepfs__readdir_reply__free_unpacked(r, NULL);
	}
}

/* The inode of @name in the root (it must exist). */
static uint64_t lookup_ino(struct peer *p, const char *name)
{
	Sweepfs__LookupReq q = SWEEPFS__LOOKUP_REQ__INIT;
	Sweepfs__EntryReply *r;
	uint64_t id, ino;
	int err;

	q.cred = &root_cred;
	q.parent = ROOT;
	q.name = bin(name, strlen(name));
	id = peer_send(p, SW_MSG_LOOKUP, 0, &q.base);
	r = (Sweepfs__EntryReply *)peer_reply(p, SW_MSG_LOOKUP, id, &err);
	if (err || !r->attr)
		fail("lookup %s: %s", name, strerror(err));
	ino = r->attr->ino;
	sweepfs__entry_reply__free_unpacked(r, NULL);
	return ino;
}

static int make_entry(struct peer *p, uint16_t type, ProtobufCBinaryData name,
		      uint64_t file_ino, uint64_t dir_ino)
{
	switch (type) {
	case SW_MSG_MKDIR:
	case SW_MSG_MKNOD: {
		Sweepfs__MknodReq q = SWEEPFS__MKNOD_REQ__INIT;

		q.cred = &root_cred;
		q.parent = ROOT;
		q.name = name;
		q.mode = type == SW_MSG_MKDIR ? 040755 : 010644;
		return peer_call(p, type, &q.base);
	}
	case SW_MSG_CREATE: {
		Sweepfs__CreateReq q = SWEEPFS__CREATE_REQ__INIT;

		q.cred = &root_cred;
		q.parent = ROOT;
		q.name = name;
		q.mode = 0100644;
		q.flags = O_RDWR | O_CREAT;
		return peer_call(p, type, &q.base);
	}
	case SW_MSG_SYMLINK: {
		Sweepfs__SymlinkReq q = SWEEPFS__SYMLINK_REQ__INIT;

		q.cred = &root_cred;
		q.parent = ROOT;
		q.name = name;
		q.target = bin("target", 6);
		return peer_call(p, type, &q.base);
	}
	case SW_MSG_LINK: {
		Sweepfs__LinkReq q = SWEEPFS__LINK_REQ__INIT;

		q.cred = &root_cred;
		q.ino = file_ino;
		q.newparent = ROOT;
		q.newname = name;
		return peer_call(p, type, &q.base);
	}
	case SW_MSG_SNAPSHOT: {
		Sweepfs__SnapshotReq q = SWEEPFS__SNAPSHOT_REQ__INIT;

		q.cred = &root_cred;
		q.src = dir_ino;
		q.parent = ROOT;
		q.name = name;
		return peer_call(p, type, &q.base);
	}
	default:
		fail("make_entry: type %u", type);
	}
}

static int rename_entry(struct peer *p, ProtobufCBinaryData from,
			ProtobufCBinaryData to)
{
	Sweepfs__RenameReq q = SWEEPFS__RENAME_REQ__INIT;

	q.cred = &root_cred;
	q.parent = ROOT;
	q.name = from;
	q.newparent = ROOT;
	q.newname = to;
	return peer_call(p, SW_MSG_RENAME, &q.base);
}

static int remove_entry(struct peer *p, uint16_t type, ProtobufCBinaryData n)
{
	if (type == SW_MSG_RMR) {
		Sweepfs__RmrReq q = SWEEPFS__RMR_REQ__INIT;

		q.cred = &root_cred;
		q.parent = ROOT;
		q.name = n;
		return peer_call(p, type, &q.base);
	} else if (type == SW_MSG_LOOKUP) {
		Sweepfs__LookupReq q = SWEEPFS__LOOKUP_REQ__INIT;

		q.cred = &root_cred;
		q.parent = ROOT;
		q.name = n;
		return peer_call(p, type, &q.base);
	} else {
		Sweepfs__NameReq q = SWEEPFS__NAME_REQ__INIT;

		q.cred = &root_cred;
		q.parent = ROOT;
		q.name = n;
		return peer_call(p, type, &q.base);
	}
}

static void check_names(void)
{
	static const uint16_t makers[] = { SW_MSG_MKDIR,  SW_MSG_MKNOD,
					   SW_MSG_CREATE, SW_MSG_SYMLINK,
					   SW_MSG_LINK,	  SW_MSG_SNAPSHOT };
	static const uint16_t removers[] = { SW_MSG_UNLINK, SW_MSG_RMDIR,
					     SW_MSG_RMR, SW_MSG_LOOKUP };
	char long_name[256], ok_name[255];
	struct {
		const char *what;
		ProtobufCBinaryData name;
		int err;
		bool lookup_ok; /* lookup of "." and ".." is fine */
	} bad[] = {
		{ "a slash", bin("a/b", 3), EINVAL, false },
		{ "only a slash", bin("/", 1), EINVAL, false },
		{ "a NUL", bin("a\0b", 3), EINVAL, false },
		{ "a trailing NUL", bin("ab\0", 3), EINVAL, false },
		{ "\".\"", bin(".", 1), EINVAL, true },
		{ "\"..\"", bin("..", 2), EINVAL, true },
		{ "an empty name", bin("", 0), EINVAL, false },
		{ "256 bytes", bin(long_name, sizeof(long_name)), ENAMETOOLONG,
		  false },
	};
	struct sw_buf before = SW_BUF_INIT, after = SW_BUF_INIT;
	uint64_t file_ino, dir_ino;
	unsigned checks = 0;
	struct peer p;
	int err;

	memset(long_name, 'n', sizeof(long_name));
	memset(ok_name, 'k', sizeof(ok_name));
	peer_open(&p, m_port);
	p.max = SW_FRAME_MAX_META;
	if (make_entry(&p, SW_MSG_CREATE, bin("file", 4), 0, 0) ||
	    make_entry(&p, SW_MSG_MKDIR, bin("dir", 3), 0, 0))
		fail("cannot create /file and /dir");
	file_ino = lookup_ino(&p, "file");
	dir_ino = lookup_ino(&p, "dir");
	listing(&p, &before);

	for (size_t i = 0; i < SW_ARRAY_SIZE(bad); i++) {
		for (size_t j = 0; j < SW_ARRAY_SIZE(makers); j++) {
			err = make_entry(&p, makers[j], bad[i].name, file_ino,
					 dir_ino);
			if (err != bad[i].err)
				fail("%s with %s: %s, not %s",
				     sw_msg_info(makers[j])->name, bad[i].what,
				     strerror(err), strerror(bad[i].err));
			checks++;
		}
		for (size_t j = 0; j < SW_ARRAY_SIZE(removers); j++) {
			int want = removers[j] == SW_MSG_LOOKUP &&
						   bad[i].lookup_ok ?
					   0 :
					   bad[i].err;

			err = remove_entry(&p, removers[j], bad[i].name);
			if (err != want)
				fail("%s of %s: %s, not %s",
				     sw_msg_info(removers[j])->name,
				     bad[i].what, strerror(err),
				     strerror(want));
			checks++;
		}
		err = rename_entry(&p, bin("file", 4), bad[i].name);
		if (err != bad[i].err)
			fail("rename to %s: %s, not %s", bad[i].what,
			     strerror(err), strerror(bad[i].err));
		err = rename_entry(&p, bad[i].name, bin("x", 1));
		if (err != bad[i].err)
			fail("rename of %s: %s, not %s", bad[i].what,
			     strerror(err), strerror(bad[i].err));
		checks += 2;
	}
	listing(&p, &after);
	if (sw_buf_used(&before) != sw_buf_used(&after) ||
	    memcmp(sw_buf_head(&before), sw_buf_head(&after),
		   sw_buf_used(&before)))
		fail("the root's listing changed:\n%.*s----\n%.*s",
		     (int)sw_buf_used(&before),
		     (const char *)sw_buf_head(&before),
		     (int)sw_buf_used(&after),
		     (const char *)sw_buf_head(&after));
	/* The longest name there may be works. */
	err = make_entry(&p, SW_MSG_MKDIR, bin(ok_name, sizeof(ok_name)), 0, 0);
	if (err)
		fail("mkdir of a 255-byte name: %s", strerror(err));
	err = remove_entry(&p, SW_MSG_RMDIR, bin(ok_name, sizeof(ok_name)));
	if (err)
		fail("rmdir of a 255-byte name: %s", strerror(err));
	peer_close(&p);
	sw_buf_release(&before);
	sw_buf_release(&after);
	ok("names: %u requests with '/', NUL, \".\", \"..\", \"\" and 256 "
	   "bytes refused (EINVAL, ENAMETOOLONG); the listing is unchanged "
	   "(%s); 255 bytes work",
	   checks, "file, dir");
}

/* ---- groups ------------------------------------------------------------------- */

static void check_groups(void)
{
	static uint32_t groups[SW_GROUPS_MAX + 1];
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;
	Sweepfs__AccessReq q = SWEEPFS__ACCESS_REQ__INIT;
	Sweepfs__BatchOp op;
	struct peer p;
	int err;

	for (size_t i = 0; i < SW_ARRAY_SIZE(groups); i++)
		groups[i] = 100000 + (uint32_t)i;
	peer_open(&p, m_port);
	cred.uid = cred.gid = 1000;
	cred.groups = groups;
	q.cred = &cred;
	q.ino = ROOT;
	q.mask = 5;
	cred.n_groups = SW_GROUPS_MAX + 1;
	expect(peer_call(&p, SW_MSG_ACCESS, &q.base), EINVAL,
	       "ACCESS with SW_GROUPS_MAX + 1 groups");
	cred.n_groups = SW_GROUPS_MAX;
	must(peer_call(&p, SW_MSG_ACCESS, &q.base),
	     "ACCESS with SW_GROUPS_MAX groups");
	/* A batch checks each operation's credentials on its own: the
	 * unlink of a name that is not there is ENOENT (for root, who may
	 * write the root directory), but not with too many groups. */
	cred.uid = cred.gid = 0;
	for (int too_many = 0; too_many < 2; too_many++) {
		sweepfs__batch_op__init(&op);
		op.type = SWEEPFS__BATCH_TYPE__BATCH_UNLINK;
		op.cred = &cred;
		op.parent = ROOT;
		op.name = str("not-here");
		cred.n_groups = SW_GROUPS_MAX + (size_t)too_many;
		err = peer_batch_one(&p, &op);
		if (err != (too_many ? EINVAL : ENOENT))
			fail("a batched unlink with %zu groups: %s",
			     cred.n_groups, err ? strerror(err) : "done");
	}
	peer_ping(&p);
	peer_close(&p);
	ok("groups: %u supplementary groups are served, %u refused (a "
	   "request, a batched unlink)",
	   SW_GROUPS_MAX, SW_GROUPS_MAX + 1);
}

/* ---- tokens ------------------------------------------------------------------- */

struct loc {
	uint64_t chunk_id;
	uint32_t version;
	uint8_t token[SW_TOKEN_LEN];
	uint64_t expires;
	char server[64];
};

/* Create @name in directory @parent, open; its inode. */
static uint64_t create_in(struct peer *p, uint64_t parent, const char *name)
{
	Sweepfs__CreateReq q = SWEEPFS__CREATE_REQ__INIT;
	Sweepfs__EntryReply *r;
	uint64_t id, ino;
	int err;

	q.cred = &root_cred;
	q.parent = parent;
	q.name = bin(name, strlen(name));
	q.mode = 0100644;
	q.flags = O_RDWR | O_CREAT;
	id = peer_send(p, SW_MSG_CREATE, 0, &q.base);
	r = (Sweepfs__EntryReply *)peer_reply(p, SW_MSG_CREATE, id, &err);
	if (err || !r->attr)
		fail("create %s: %s", name, strerror(err));
	ino = r->attr->ino;
	sweepfs__entry_reply__free_unpacked(r, NULL);
	return ino;
}

static uint64_t create_open(struct peer *p, const char *name)
{
	return create_in(p, ROOT, name);
}

static void chunk_loc(struct peer *p, uint64_t ino, bool write, struct loc *l)
{
	Sweepfs__ChunkReq q = SWEEPFS__CHUNK_REQ__INIT;
	Sweepfs__ChunkReply *r;
	uint64_t id;
	int err;

	q.cred = &root_cred;
	q.ino = ino;
	q.index = 0;
	q.has_write = 1;
	q.write = write;
	id = peer_send(p, SW_MSG_CHUNK, 0, &q.base);
	r = (Sweepfs__ChunkReply *)peer_reply(p, SW_MSG_CHUNK, id, &err);
	if (err || !r->loc || !r->loc->n_servers ||
	    r->loc->token.len != SW_TOKEN_LEN)
		fail("chunk of inode %" PRIu64 " (write %d): %s", ino, write,
		     err ? strerror(err) : "no location");
	l->chunk_id = r->loc->chunk_id;
	l->version = r->loc->version;
	memcpy(l->token, r->loc->token.data, SW_TOKEN_LEN);
	l->expires = r->loc->expires;
	snprintf(l->server, sizeof(l->server), "%s", r->loc->servers[0]);
	sweepfs__chunk_reply__free_unpacked(r, NULL);
}

/* How a request presents a token. */
struct grant {
	uint64_t chunk_id;
	uint32_t version;
	const uint8_t *token; /* NULL: none */
	uint64_t expires;
};

static struct grant grant_of(const struct loc *l)
{
	return (struct grant){ l->chunk_id, l->version, l->token, l->expires };
}

static int cs_write(struct peer *cs, struct grant g, uint32_t off,
		    const void *data, size_t n)
{
	Sweepfs__CsWriteReq q = SWEEPFS__CS_WRITE_REQ__INIT;

	q.chunk_id = g.chunk_id;
	q.version = g.version;
	q.offset = off;
	q.data = bin(data, n);
	q.has_token = g.token != NULL;
	q.token = bin(g.token, g.token ? SW_TOKEN_LEN : 0);
	q.has_expires = 1;
	q.expires = g.expires;
	return peer_call(cs, SW_MSG_CS_WRITE, &q.base);
}

static int cs_sync(struct peer *cs, struct grant g)
{
	Sweepfs__CsSyncReq q = SWEEPFS__CS_SYNC_REQ__INIT;

	q.chunk_id = g.chunk_id;
	q.version = g.version;
	q.has_token = g.token != NULL;
	q.token = bin(g.token, g.token ? SW_TOKEN_LEN : 0);
	q.has_expires = 1;
	q.expires = g.expires;
	return peer_call(cs, SW_MSG_CS_SYNC, &q.base);
}

/* Read @n bytes at 0 into @out (NULL: just the error). */
static int cs_read(struct peer *cs, struct grant g, size_t n, uint8_t *out)
{
	Sweepfs__CsReadReq q = SWEEPFS__CS_READ_REQ__INIT;
	Sweepfs__CsReadReply *r;
	uint64_t id;
	int err;

	q.chunk_id = g.chunk_id;
	q.version = g.version;
	q.offset = 0;
	q.size = (uint32_t)n;
	q.has_token = g.token != NULL;
	q.token = bin(g.token, g.token ? SW_TOKEN_LEN : 0);
	q.has_expires = 1;
	q.expires = g.expires;
	id = peer_send(cs, SW_MSG_CS_READ, 0, &q.base);
	r = (Sweepfs__CsReadReply *)peer_reply(cs, SW_MSG_CS_READ, id, &err);
	if (!err && out) {
		if (r->data.len != n)
			fail("read of %zu bytes returned %zu", n, r->data.len);
		memcpy(out, r->data.data, n);
	}
	sweepfs__cs_read_reply__free_unpacked(r, NULL);
	return err;
}

/*
 * The token key of the master's epoch (-e), from its token.key; and in
 * @other that of the next epoch, which no chunkserver takes, and in @raw
 * token.key's first bytes, the key of builds before epochs.
 */
static void read_key(uint8_t key[SW_TOKEN_KEY], uint8_t other[SW_TOKEN_KEY],
		     uint8_t raw[SW_TOKEN_KEY])
{
	uint8_t full[SW_AUTH_KEY];
	int rc = sw_auth_key_load(key_file, full);

	if (rc < 0)
		fail("cannot read the token key from %s: %s", key_file,
		     strerror(-rc));
	sw_token_epoch_key(full, token_epoch, key);
	sw_token_epoch_key(full, token_epoch + 1, other);
	memcpy(raw, full, SW_TOKEN_KEY);
}

static void expect_data(struct peer *cs, const struct loc *l,
			const uint8_t *want, size_t n, const char *what)
{
	uint8_t got[4096];
	int err = cs_read(cs, grant_of(l), n, got);

	if (err)
		fail("reading %s back: %s", what, strerror(err));
	if (memcmp(got, want, n))
		fail("%s changed", what);
}

static void check_tokens(void)
{
	uint8_t key[SW_TOKEN_KEY], other[SW_TOKEN_KEY], raw[SW_TOKEN_KEY];
	uint8_t data_a[4096], data_b[4096], evil[4096];
	uint8_t forged[SW_TOKEN_LEN], made[5][SW_TOKEN_LEN];
	struct loc a, b, a_read;
	struct peer p, cs;
	struct grant g;
	uint64_t ino_a, ino_b, now = (uint64_t)(sw_now_ns() / 1000000);
	char want_server[64];
	unsigned refused = 0;
	int err;

	if (!c_port || !key_file || !token_epoch)
		fail("tokens needs -c, -k and -e");
	read_key(key, other, raw);
	for (size_t i = 0; i < sizeof(data_a); i++) {
		data_a[i] = (uint8_t)rnd();
		data_b[i] = (uint8_t)rnd();
		evil[i] = (uint8_t)~data_a[i];
	}
	peer_open(&p, m_port);
	p.max = SW_FRAME_MAX_META;
	ino_a = create_open(&p, "granted-a");
	ino_b = create_open(&p, "granted-b");
	chunk_loc(&p, ino_a, true, &a);
	chunk_loc(&p, ino_b, true, &b);
	snprintf(want_server, sizeof(want_server), "127.0.0.1:%u", c_port);
	if (strcmp(a.server, want_server))
		fail("the master sent clients to %s, not %s", a.server,
		     want_server);
	peer_open(&cs, c_port);
	if ((err = cs_write(&cs, grant_of(&a), 0, data_a, sizeof(data_a))) ||
	    (err = cs_write(&cs, grant_of(&b), 0, data_b, sizeof(data_b))) ||
	    (err = cs_sync(&cs, grant_of(&a))))
		fail("writing with granted tokens: %s", strerror(err));
	chunk_loc(&p, ino_a, false, &a_read);
	expect_data(&cs, &a_read, data_a, sizeof(data_a), "chunk a");
	ok("tokens: chunks %" PRIu64 " and %" PRIu64 " written and read with "
	   "the tokens the master granted",
	   a.chunk_id, b.chunk_id);

	for (size_t i = 0; i < sizeof(forged); i++)
		forged[i] = (uint8_t)rnd();
	sw_token_make(key, a.chunk_id, a.version, SW_TOKEN_WRITE, now - 1000,
		      made[0]);
	sw_token_make(key, a.chunk_id, a.version + 1, SW_TOKEN_WRITE,
		      now + 60000, made[1]);
	sw_token_make(key, a.chunk_id, a.version, SW_TOKEN_READ, now + 60000,
		      made[2]);
	sw_token_make(other, a.chunk_id, a.version, SW_TOKEN_WRITE, now + 60000,
		      made[3]);
	sw_token_make(raw, a.chunk_id, a.version, SW_TOKEN_WRITE, now + 60000,
		      made[4]);
	{
		struct {
			const char *what;
			struct grant g;
		} writes[] = {
			{ "a forged token",
			  { a.chunk_id, a.version, forged, a.expires } },
			{ "no token",
			  { a.chunk_id, a.version, NULL, a.expires } },
			{ "an expired token (signed with the key)",
			  { a.chunk_id, a.version, made[0], now - 1000 } },
			{ "a token with its expiry pushed back",
			  { a.chunk_id, a.version, a.token,
			    a.expires + 3600000 } },
			{ "the token of another chunk",
			  { a.chunk_id, a.version, b.token, b.expires } },
			{ "another chunk's token, its own id",
			  { a.chunk_id, b.version, b.token, b.expires } },
			{ "a token for the next version",
			  { a.chunk_id, a.version, made[1], now + 60000 } },
			{ "a read token the master granted",
			  grant_of(&a_read) },
			{ "a read token signed with the key",
			  { a.chunk_id, a.version, made[2], now + 60000 } },
			{ "a write token of another epoch",
			  { a.chunk_id, a.version, made[3], now + 60000 } },
			{ "a write token signed with token.key itself",
			  { a.chunk_id, a.version, made[4], now + 60000 } },
		};

		for (size_t i = 0; i < SW_ARRAY_SIZE(writes); i++) {
			err = cs_write(&cs, writes[i].g, 0, evil, sizeof(evil));
			if (err != EACCES)
				fail("a write with %s: %s, not EACCES",
				     writes[i].what, strerror(err));
			refused++;
		}
	}
	g = (struct grant){ a.chunk_id, a.version, forged, a.expires };
	if ((err = cs_read(&cs, g, 16, NULL)) != EACCES)
		fail("a read with a forged token: %s, not EACCES",
		     strerror(err));
	g = (struct grant){ a.chunk_id, a.version, b.token, b.expires };
	if ((err = cs_read(&cs, g, 16, NULL)) != EACCES)
		fail("a read with another chunk's token: %s, not EACCES",
		     strerror(err));
	g = (struct grant){ a.chunk_id, a.version, made[0], now - 1000 };
	if ((err = cs_read(&cs, g, 16, NULL)) != EACCES)
		fail("a read with an expired token: %s, not EACCES",
		     strerror(err));
	g = (struct grant){ a.chunk_id, a.version, forged, a.expires };
	if ((err = cs_sync(&cs, g)) != EACCES)
		fail("a sync with a forged token: %s, not EACCES",
		     strerror(err));
	/* A sync is a writer's: a reader cannot make the server fsync. */
	if ((err = cs_sync(&cs, grant_of(&a_read))) != EACCES)
		fail("a sync with the read token the master granted: %s, "
		     "not EACCES",
		     strerror(err));
	g = (struct grant){ a.chunk_id, a.version, made[2], now + 60000 };
	if ((err = cs_sync(&cs, g)) != EACCES)
		fail("a sync with a read token signed with the key: %s, not "
		     "EACCES",
		     strerror(err));
	refused += 6;
	/* The key is the chunkserver's (else the refusals above prove
	 * nothing of expiry or mode): a read token made with it reads. */
	g = (struct grant){ a.chunk_id, a.version, made[2], now + 60000 };
	if ((err = cs_read(&cs, g, 16, NULL)) != 0)
		fail("a read with a read token made with the epoch's key: "
		     "%s, not success",
		     strerror(err));
	{
		/* Chunk deletion in batches (issue 32) is the master's
		 * command on its own link: a client that sends it, to the
		 * chunkserver or to the master, as a request or as a
		 * notification, deletes nothing. */
		Sweepfs__CsCommand q = SWEEPFS__CS_COMMAND__INIT;
		uint64_t ids[2] = { a.chunk_id, b.chunk_id };
		uint32_t versions[2] = { a.version + 100, b.version + 100 };

		q.id = 1;
		q.op = SWEEPFS__CS_COMMAND__OP__DELETE_BATCH;
		q.chunk_id = ids[0];
		q.version = versions[0];
		q.n_batch_ids = q.n_batch_versions = 2;
		q.batch_ids = ids;
		q.batch_versions = versions;
		if ((err = peer_call(&cs, SW_MSG_CS_COMMAND, &q.base)) !=
		    ENOSYS)
			fail("DELETE_BATCH to the chunkserver from a client: "
			     "%s, not ENOSYS",
			     strerror(err));
		if ((err = peer_call(&p, SW_MSG_CS_COMMAND, &q.base)) != ENOSYS)
			fail("DELETE_BATCH to the master from a mount: %s, "
			     "not ENOSYS",
			     strerror(err));
		{
			struct peer n;

			peer_open(&n, c_port);
			peer_send(&n, SW_MSG_CS_COMMAND, SW_FRAME_NOTIFY,
				  &q.base);
			peer_close(&n);
		}
		peer_ping(&cs);
		ok("tokens: DELETE_BATCH from a client, to the chunkserver "
		   "and to the master, gets ENOSYS and deletes nothing");
	}
	expect_data(&cs, &a_read, data_a, sizeof(data_a), "chunk a");
	expect_data(&cs, &b, data_b, sizeof(data_b), "chunk b");
	peer_close(&cs);
	peer_close(&p);
	alive(c_pid, "chunkserver");
	ok("tokens: %u reads, writes and syncs with forged, expired, "
	   "extended, other-chunk, other-version, missing and read-only "
	   "tokens got EACCES; both chunks hold exactly their data",
	   refused);
}

/* ---- stalls ------------------------------------------------------------------- */

struct staller {
	struct peer p;
	const char *what;
	int64_t closed_ms; /* after the stall began; -1: still open */
};

/* Whether @s's connection was closed (without sending anything). */
static bool stall_closed(struct staller *s)
{
	struct pollfd pfd = { .fd = s->p.fd, .events = POLLIN };
	uint8_t b[64];
	ssize_t n;

	if (s->p.fd < 0)
		return true;
	if (poll(&pfd, 1, 0) <= 0)
		return false;
	n = recv(s->p.fd, b, sizeof(b), MSG_DONTWAIT);
	if (n > 0)
		fail("%s: the server sent %zd bytes to a stalled peer", s->what,
		     n);
	if (n < 0 && errno == EAGAIN)
		return false;
	return true;
}

/*
 * Stall @n peers (already half-way through a frame) on @port, keep
 * @worker busy with @work meanwhile, and check the drop times.
 */
static void run_stall(const char *who, struct staller *s, size_t n,
		      struct peer *worker, void (*work)(struct peer *))
{
	int64_t t0 = now_ms(), limit = (int64_t)frame_timeout_ms + 2500;
	int64_t worst = 0, total = 0;
	unsigned done = 0, calls = 0;

	for (size_t i = 0; i < n; i++)
		s[i].closed_ms = -1;
	while (done < n && now_ms() - t0 < limit + 3000) {
		int64_t c0 = now_ms(), took;

		work(worker);
		took = now_ms() - c0;
		worst = SW_MAX(worst, took);
		total += took;
		calls++;
		for (size_t i = 0; i < n; i++) {
			if (s[i].closed_ms >= 0 || !stall_closed(&s[i]))
				continue;
			s[i].closed_ms = now_ms() - t0;
			peer_close(&s[i].p);
			done++;
		}
		usleep(20000);
	}
	for (size_t i = 0; i < n; i++) {
		if (s[i].closed_ms < 0)
			fail("%s: %s still connected after %" PRId64 " ms", who,
			     s[i].what, now_ms() - t0);
		if (s[i].closed_ms < (int64_t)frame_timeout_ms - 50 ||
		    s[i].closed_ms > limit)
			fail("%s: %s dropped after %" PRId64 " ms; the frame "
			     "timeout is %" PRIu64 " ms",
			     who, s[i].what, s[i].closed_ms, frame_timeout_ms);
		ok("%s: %s dropped after %" PRId64 " ms (frame_timeout %" PRIu64
		   " ms)",
		   who, s[i].what, s[i].closed_ms, frame_timeout_ms);
	}
	if (calls < frame_timeout_ms / 100)
		fail("%s: only %u requests of the other client got through "
		     "during the stall",
		     who, calls);
	ok("%s: meanwhile another client's %u requests all succeeded "
	   "(latency mean %.1f ms, worst %" PRId64 " ms)",
	   who, calls, (double)total / calls, worst);
}

static void work_master(struct peer *p)
{
	Sweepfs__GetattrReq q = SWEEPFS__GETATTR_REQ__INIT;

	q.ino = ROOT;
	if (peer_call(p, SW_MSG_GETATTR, &q.base))
		fail("getattr / failed during the stall");
}

static struct loc stall_loc;

static void work_chunkserver(struct peer *p)
{
	uint8_t buf[4096];

	if (cs_read(p, grant_of(&stall_loc), sizeof(buf), buf))
		fail("a read failed during the stall");
}

/* Threat model, finding 23: see the header. */
static void check_chunkjobs(void)
{
	enum { N = 400000, BATCH = 4096 };
	Sweepfs__ChunkReq q = SWEEPFS__CHUNK_REQ__INIT;
	uint64_t h[SW_HANDLES_MAX], ino, wid, id = 1;
	struct peer p, w, flood, other, cs;
	uint8_t data[4096], *buf;
	size_t fsz, off = 0, have = 0, sent = 0;
	long rss0, grown;
	int64_t stuck_since = 0, t0;
	double ping_max = 0;
	struct loc a;
	int err;

	if (!c_port || !c_pid)
		fail("chunkjobs needs -c and -q");
	peer_open(&p, m_port);
	p.max = SW_FRAME_MAX_META;
	ino = create_open(&p, "chunkjobs");
	chunk_loc(&p, ino, true, &a);
	memset(data, 'j', sizeof(data));
	peer_open(&cs, c_port);
	if ((err = cs_write(&cs, grant_of(&a), 0, data, sizeof(data))))
		fail("chunkjobs: writing the chunk: %s", strerror(err));
	peer_close(&cs);
	peer_open(&w, m_port);
	peer_open(&flood, m_port);
	peer_open(&other, m_port);
	rss0 = rss_kb(m_pid);

	/* Another session's write: the lease is p's, so the chunk moves on
	 * with a command the stopped chunkserver does not answer. */
	if (kill(c_pid, SIGSTOP) < 0)
		fail("chunkjobs: SIGSTOP: %s", strerror(errno));
	q.cred = &root_cred;
	q.ino = ino;
	q.has_write = 1;
	q.write = 1;
	wid = peer_send(&w, SW_MSG_CHUNK, 0, &q.base);
	peer_ping(&w); /* (the write was handled: it waits) */

	q.write = 0;
	peer_vouch(SW_MSG_CHUNK, &q.base, h);
	fsz = sw_frame_size(&q.base);
	buf = malloc(fsz * BATCH);
	if (!buf)
		fail("out of memory");
	t0 = now_ms();
	while (sent < N) {
		ssize_t n;

		if (off == have) {
			size_t k = SW_MIN((size_t)BATCH, N - sent);

			for (size_t i = 0; i < k; i++)
				sw_frame_pack(buf + i * fsz, SW_MSG_CHUNK, 0,
					      id++, &q.base);
			off = 0;
			have = k * fsz;
		}
		n = send(flood.fd, buf + off, have - off, MSG_DONTWAIT);
		if (n > 0) {
			size_t before = off / fsz;

			off += (size_t)n;
			sent += off / fsz - before;
			stuck_since = 0;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			fail("chunkjobs: send: %s", strerror(errno));
		if (!stuck_since)
			stuck_since = now_ms();
		if (now_ms() - stuck_since >= 2000)
			break; /* the master reads no more of it */
		{
			int64_t p0 = now_ms();

			peer_ping(&other);
			ping_max = SW_MAX(ping_max, (double)(now_ms() - p0));
		}
		usleep(10000);
	}
	grown = rss_kb(m_pid) - rss0;
	if (sent >= N)
		fail("chunkjobs: the master read all %d waiting CHUNK requests "
		     "(in %" PRId64 " ms)",
		     N, now_ms() - t0);
	if (grown > 48 * 1024)
		fail("chunkjobs: the master grew by %ld KiB with %zu CHUNK "
		     "requests sent",
		     grown, sent);
	if (ping_max > 1000)
		fail("chunkjobs: another client's ping took %.0f ms", ping_max);
	if (kill(c_pid, SIGCONT) < 0)
		fail("chunkjobs: SIGCONT: %s", strerror(errno));
	/* Whatever was sent is answered: the frame cut short, never. */
	for (size_t got = 0; got < sent;) {
		struct sw_frame_hdr hdr;
		uint8_t *payload;
		int rc = peer_recv(&flood, &hdr, &payload, 60000);

		if (rc <= 0)
			fail("chunkjobs: %zu of %zu CHUNK requests answered: "
			     "%s",
			     got, sent, rc ? strerror(-rc) : "closed");
		free(payload);
		got += hdr.type == SW_MSG_CHUNK;
	}
	{
		ProtobufCMessage *r = peer_reply(&w, SW_MSG_CHUNK, wid, &err);

		if (r)
			protobuf_c_message_free_unpacked(r, NULL);
	}
	alive(m_pid, "master");
	alive(c_pid, "chunkserver");
	ok("chunkjobs: %zu of %d CHUNK reads of a busy chunk read before the "
	   "master stopped reading; RSS +%ld KiB; another client's ping at "
	   "most %.0f ms; all answered once the chunkserver went on",
	   sent, N, grown, ping_max);
	free(buf);
	peer_close(&flood);
	peer_close(&other);
	peer_close(&w);
	peer_close(&p);
}

static void check_stall(void)
{
	struct staller s[3];
	struct peer worker, p;
	uint8_t hdr[SW_FRAME_HDR], junk[20000];
	struct sw_frame_hdr h;

	memset(junk, 'j', sizeof(junk));
	/* The master: mid-header, and mid-payload. */
	s[0].what = "a peer 10 bytes into a header";
	peer_open(&s[0].p, m_port);
	s[1].what = "a peer half-way through a 100-byte frame";
	peer_open(&s[1].p, m_port);
	peer_open(&worker, m_port);
	h = (struct sw_frame_hdr){ 100, SW_MSG_GETATTR, 0, 9 };
	sw_frame_put_hdr(hdr, &h);
	peer_raw(&s[0].p, hdr, 10);
	peer_raw(&s[1].p, hdr, sizeof(hdr));
	peer_raw(&s[1].p, junk, 50);
	run_stall("master", s, 2, &worker, work_master);
	peer_close(&worker);
	alive(m_pid, "master");
	if (!c_port)
		return;

	/* The chunkserver: the same, and a large frame read straight into
	 * its own buffer. */
	peer_open(&p, m_port);
	p.max = SW_FRAME_MAX_META;
	chunk_loc(&p, create_open(&p, "stall-file"), true, &stall_loc);
	peer_open(&worker, c_port);
	if (cs_write(&worker, grant_of(&stall_loc), 0, junk, 4096))
		fail("cannot write the chunk the stall test reads");
	s[0].what = "a peer 10 bytes into a header";
	peer_open(&s[0].p, c_port);
	s[1].what = "a peer half-way through a 100-byte frame";
	peer_open(&s[1].p, c_port);
	s[2].what = "a peer 20000 bytes into a 100000-byte write";
	peer_open(&s[2].p, c_port);
	h = (struct sw_frame_hdr){ 100, SW_MSG_CS_READ, 0, 9 };
	sw_frame_put_hdr(hdr, &h);
	peer_raw(&s[0].p, hdr, 10);
	peer_raw(&s[1].p, hdr, sizeof(hdr));
	peer_raw(&s[1].p, junk, 50);
	h = (struct sw_frame_hdr){ 100000, SW_MSG_CS_WRITE, 0, 9 };
	sw_frame_put_hdr(hdr, &h);
	peer_raw(&s[2].p, hdr, sizeof(hdr));
	peer_raw(&s[2].p, junk, sizeof(junk));
	run_stall("chunkserver", s, 3, &worker, work_chunkserver);
	peer_close(&worker);
	peer_close(&p);
	alive(c_pid, "chunkserver");
}

/* ---- large frames never finished --------------------------------------- */

/*
 * @n peers that said hello to the chunkserver (no credential needed) each
 * send the header of a CS_WRITE as large as allowed and all its payload
 * but one byte, then stop. Each such frame is read into a buffer of its
 * own, malloc'd when its header comes (common/uvserver.c big_start()):
 * those buffers hold at most max_inflight in all (big_max), the rest
 * wait for room. The chunkserver's RSS must grow by less than
 * max_inflight (128 MiB by default) plus 32 MiB. (Before big_max, 300
 * such peers grew it by 315 MiB; max_connections allowed 10 GiB.)
 */
#define CSBIG_BUDGET_MB (128 + 32)

static void check_csbig(unsigned n)
{
	struct peer *p = calloc(n, sizeof(*p));
	uint8_t hdr[SW_FRAME_HDR], *junk = malloc(SW_FRAME_MAX_DATA);
	struct sw_frame_hdr h = { SW_FRAME_MAX_DATA, SW_MSG_CS_WRITE, 0, 9 };
	long rss0, peak;
	int64_t t0 = now_ms();

	if (!p || !junk)
		fail("out of memory");
	memset(junk, 'b', SW_FRAME_MAX_DATA);
	sw_frame_put_hdr(hdr, &h);
	rss0 = peak = rss_kb(c_pid);
	for (unsigned i = 0; i < n; i++) {
		size_t off = 0, want = SW_FRAME_MAX_DATA - 1;
		int64_t give_up = now_ms() + 200;

		peer_open(&p[i], c_port);
		peer_raw(&p[i], hdr, sizeof(hdr));
		/* What the chunkserver takes: one that waits for room takes
		 * only what the kernel buffers. */
		fcntl(p[i].fd, F_SETFL, fcntl(p[i].fd, F_GETFL) | O_NONBLOCK);
		while (off < want && now_ms() < give_up) {
			struct pollfd pfd = { .fd = p[i].fd,
					      .events = POLLOUT };
			ssize_t k = write(p[i].fd, junk + off, want - off);

			if (k > 0)
				off += (size_t)k;
			else if (k < 0 && errno != EAGAIN)
				fail("csbig: %s", strerror(errno));
			else
				poll(&pfd, 1, 10);
		}
		peak = SW_MAX(peak, rss_kb(c_pid));
	}
	for (int k = 0; k < 10; k++) {
		usleep(20000);
		peak = SW_MAX(peak, rss_kb(c_pid));
	}
	for (unsigned i = 0; i < n; i++)
		peer_close(&p[i]);
	free(p);
	free(junk);
	alive(c_pid, "chunkserver");
	if ((peak - rss0) / 1024 >= CSBIG_BUDGET_MB)
		fail("csbig: %u unfinished %u-byte writes (sent in %" PRId64
		     " ms) grew the chunkserver's RSS by %ld MiB (budget %d "
		     "MiB: max_inflight and slack)",
		     n, SW_FRAME_MAX_DATA, now_ms() - t0, (peak - rss0) / 1024,
		     CSBIG_BUDGET_MB);
	ok("csbig: %u unfinished writes grew the chunkserver's RSS by %ld "
	   "MiB (budget %d MiB)",
	   n, (peak - rss0) / 1024, CSBIG_BUDGET_MB);
}

/* ---- floods ------------------------------------------------------------------- */

static unsigned count_fds(pid_t pid)
{
	char path[64];
	unsigned n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		fail("cannot list %s: %s", path, strerror(errno));
	while (readdir(d))
		n++;
	closedir(d);
	return n - 2;
}

static uint64_t master_connections(struct peer *p)
{
	Sweepfs__InfoReq q = SWEEPFS__INFO_REQ__INIT;
	Sweepfs__InfoReply *r;
	uint64_t id, n;
	int err;

	q.cred = &root_cred; /* the counters are admin root's */
	id = peer_send(p, SW_MSG_INFO, 0, &q.base);
	r = (Sweepfs__InfoReply *)peer_reply(p, SW_MSG_INFO, id, &err);
	if (err || !r->has_connections)
		fail("info: %s", strerror(err));
	n = r->connections;
	sweepfs__info_reply__free_unpacked(r, NULL);
	return n;
}

enum flood_state { F_CONNECTING, F_WAITING, F_SERVED, F_REFUSED };

struct flooder {
	int fd;
	enum flood_state st;
	uint8_t in[256];
	size_t have;
};

/* Read what came for @f; false when the connection was closed. */
static bool flood_read(struct flooder *f)
{
	ssize_t n = recv(f->fd, f->in + f->have, sizeof(f->in) - f->have,
			 MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n <= 0)
		return false;
	f->have += (size_t)n;
	return true;
}

/* How many whole reply frames @f has, in order (ids 1, 2). */
static unsigned flood_replies(const struct flooder *f)
{
	struct sw_frame_hdr fh;
	unsigned frames = 0;
	size_t off = 0;

	while (sw_frame_get_hdr(f->in + off, f->have - off, SW_FRAME_MAX_META,
				&fh) == 1 &&
	       f->have - off >= SW_FRAME_HDR + fh.len) {
		if (fh.flags != SW_FRAME_REPLY || fh.id != frames + 1)
			fail("flood: a bad reply (type %u, flags %#x, id "
			     "%" PRIu64 ")",
			     fh.type, fh.flags, fh.id);
		off += SW_FRAME_HDR + fh.len;
		frames++;
	}
	return frames;
}

static void check_flood(uint16_t port, pid_t pid, const char *who,
			unsigned count, unsigned max_conns)
{
	Sweepfs__Hello h = SWEEPFS__HELLO__INIT;
	Sweepfs__PingReq q = SWEEPFS__PING_REQ__INIT;
	struct flooder *f = calloc(count, sizeof(*f));
	struct pollfd *pfd = calloc(count, sizeof(*pfd));
	uint8_t req[128];
	size_t reqlen;
	unsigned fds0, fds1 = 0, served = 0, refused = 0, pings = 0;
	uint64_t conns0 = 0, expect = count;
	int64_t t0, worst = 0;
	struct peer ctl;

	if (!f || !pfd)
		fail("out of memory");
	peer_open(&ctl, port);
	ctl.max = SW_FRAME_MAX_META;
	if (port == m_port) {
		conns0 = master_connections(&ctl);
		if (max_conns)
			expect = SW_MIN(count, max_conns - conns0);
	}
	fds0 = count_fds(pid);

	h.version = SW_PROTO_VERSION;
	h.role = SWEEPFS__ROLE__ROLE_TOOL;
	reqlen = sw_frame_pack(req, SW_MSG_HELLO, 0, 1, &h.base);
	q.has_token = 1;
	q.token = 7;
	reqlen += sw_frame_pack(req + reqlen, SW_MSG_PING, 0, 2, &q.base);
	/* All at once: non-blocking connects, then every request. */
	t0 = now_ms();
	for (unsigned i = 0; i < count; i++) {
		struct sockaddr_in sin = {
			.sin_family = AF_INET,
			.sin_port = htons(port),
			.sin_addr.s_addr = htonl(0x7f000001),
		};

		f[i].fd = socket(AF_INET,
				 SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (f[i].fd < 0)
			fail("socket %u: %s", i, strerror(errno));
		if (connect(f[i].fd, (struct sockaddr *)&sin, sizeof(sin)) <
			    0 &&
		    errno != EINPROGRESS)
			fail("connect %u: %s", i, strerror(errno));
		f[i].st = F_CONNECTING;
	}
	while (served + refused < count) {
		unsigned left = 0;

		if (now_ms() - t0 > 60000)
			fail("flood: %u of %u connections neither served nor "
			     "refused after 60 s",
			     count - served - refused, count);
		for (unsigned i = 0; i < count; i++) {
			pfd[i].fd = f[i].st >= F_SERVED ? -1 : f[i].fd;
			pfd[i].events = f[i].st == F_CONNECTING ? POLLOUT :
								  POLLIN;
			left += pfd[i].fd >= 0;
		}
		if (poll(pfd, count, 100) < 0 && errno != EINTR)
			fail("poll: %s", strerror(errno));
		for (unsigned i = 0; i < count; i++) {
			if (pfd[i].fd < 0 || !pfd[i].revents)
				continue;
			if (f[i].st == F_CONNECTING) {
				int e = 0;
				socklen_t l = sizeof(e);

				getsockopt(f[i].fd, SOL_SOCKET, SO_ERROR, &e,
					   &l);
				if (e)
					fail("flood: connect %u: %s", i,
					     strerror(e));
				if (write_all(f[i].fd, req, reqlen) < 0) {
					/* Refused before we could write. */
					f[i].st = F_REFUSED;
					refused++;
					continue;
				}
				f[i].st = F_WAITING;
				continue;
			}
			if (!flood_read(&f[i])) {
				/* Refused cleanly: closed with nothing
				 * sent. */
				if (f[i].have)
					fail("flood: a connection was closed "
					     "after %zu bytes of replies",
					     f[i].have);
				f[i].st = F_REFUSED;
				refused++;
			} else if (flood_replies(&f[i]) == 2) {
				f[i].st = F_SERVED;
				served++;
			}
		}
		/* The master answers another client meanwhile. */
		if (left) {
			int64_t c0 = now_ms();

			peer_ping(&ctl);
			worst = SW_MAX(worst, now_ms() - c0);
			pings++;
		}
	}
	if (served != expect)
		fail("flood: %u of %u connections served, expected %" PRIu64
		     " (%u refused)",
		     served, count, expect, refused);
	ok("%s: %u connections at once: %u served, %u refused with no reply "
	   "(%.1f s); %u pings from another client meanwhile, worst %" PRId64
	   " ms",
	   who, count, served, refused, (double)(now_ms() - t0) / 1000, pings,
	   worst);
	for (unsigned i = 0; i < count; i++)
		close(f[i].fd);
	/* Everything goes back to where it was. */
	t0 = now_ms();
	for (;;) {
		uint64_t conns = port == m_port ? master_connections(&ctl) : 0;

		fds1 = count_fds(pid);
		if (fds1 <= fds0 && conns <= conns0)
			break;
		if (now_ms() - t0 > 20000)
			fail("%s: %u descriptors and %" PRIu64 " connections "
			     "20 s after the flood; %u and %" PRIu64 " before",
			     who, fds1, conns, fds0, conns0);
		usleep(50000);
	}
	peer_ping(&ctl);
	peer_close(&ctl);
	alive(pid, who);
	ok("%s: back to %u descriptors%s after the flood, still serving", who,
	   fds1, port == m_port ? " and its connection count" : "");
	free(f);
	free(pfd);
}

/* ---- main ---------------------------------------------------------------------- */

static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* ---- confinement ---------------------------------------------------------- */

/* Hello as a mount confined to @subdir, claiming @open (n) open; the
 * session's root inode. */
/*
 * A hello for @subdir, claiming @open files open. With @sid, as the client
 * of session @sid that the master no longer knows (it restarted): with
 * the session's secret, made from the master's session.key beside the
 * token key (-k) as the master makes it.
 */
static uint64_t confined_hello_as(struct peer *p, const char *subdir,
				  uint64_t *open, size_t n, uint64_t sid)
{
	Sweepfs__Hello h = SWEEPFS__HELLO__INIT;
	Sweepfs__HelloReply *r;
	Sweepfs__OpenClaim claim[4], *claims[4];
	uint8_t secret[SW_AUTH_TAG];
	uint64_t id, root;
	int err;

	if (n > 4)
		fail("confined_hello_as: at most 4 claims");
	for (size_t i = 0; i < n; i++) {
		peer_claim(&claim[i], open[i], O_RDONLY, &root_cred);
		claims[i] = &claim[i];
	}
	peer_connect(p, m_port);
	h.version = SW_PROTO_VERSION;
	h.role = SWEEPFS__ROLE__ROLE_MOUNT;
	h.has_subdir = 1;
	h.subdir = bin(subdir, strlen(subdir));
	h.n_opens = n;
	h.opens = claims;
	h.has_reclaim = n != 0;
	h.reclaim = n != 0;
	if (sid) {
		uint8_t key[SW_AUTH_KEY], b[8];
		char path[4200], *slash;

		snprintf(path, sizeof(path), "%s", key_file);
		slash = strrchr(path, '/');
		snprintf(slash ? slash + 1 : path,
			 sizeof(path) - (size_t)(slash ? slash + 1 - path : 0),
			 "session.key");
		if (sw_auth_key_load(path, key) < 0)
			fail("cannot read %s", path);
		for (int i = 0; i < 8; i++)
			b[i] = (uint8_t)(sid >> (8 * i));
		sw_auth_tag(key, SW_AUTH_SESSION, b, sizeof(b), NULL, 0,
			    secret);
		h.has_session_id = h.has_session_secret = h.has_reclaim = 1;
		h.session_id = sid;
		h.session_secret = bin(secret, sizeof(secret));
		h.reclaim = 1;
	}
	id = peer_send(p, SW_MSG_HELLO, 0, &h.base);
	r = (Sweepfs__HelloReply *)peer_reply(p, SW_MSG_HELLO, id, &err);
	if (err || !r->has_root_ino)
		fail("hello for %s: %s", subdir, strerror(err));
	root = r->root_ino;
	sweepfs__hello_reply__free_unpacked(r, NULL);
	return root;
}

static uint64_t confined_hello(struct peer *p, const char *subdir,
			       uint64_t *open, size_t n)
{
	return confined_hello_as(p, subdir, open, n, 0);
}

/* The attributes of inode @ino, as @p's session sees them. */
static void attr_of(struct peer *p, uint64_t ino, Sweepfs__Attr *out)
{
	Sweepfs__GetattrReq q = SWEEPFS__GETATTR_REQ__INIT;
	Sweepfs__AttrReply *r;
	uint64_t id;
	int err;

	q.ino = ino;
	id = peer_send(p, SW_MSG_GETATTR, 0, &q.base);
	r = (Sweepfs__AttrReply *)peer_reply(p, SW_MSG_GETATTR, id, &err);
	if (err || !r->attr)
		fail("getattr of inode %" PRIu64 ": %s", ino, strerror(err));
	*out = *r->attr;
	sweepfs__attr_reply__free_unpacked(r, NULL);
}

/* What each request about inode @ino gets from @p's session: 0 or the
 * errno; "" (ok) or the first request's name whose answer was not @want. */
static const char *try_all(struct peer *p, uint64_t ino, uint64_t root,
			   int want)
{
	char name[32];
	int err;

	{
		Sweepfs__GetattrReq q = SWEEPFS__GETATTR_REQ__INIT;

		q.ino = ino;
		if (peer_call(p, SW_MSG_GETATTR, &q.base) != want)
			return "getattr";
	}
	{
		Sweepfs__OpenReq q = SWEEPFS__OPEN_REQ__INIT;

		q.cred = &root_cred;
		q.ino = ino;
		q.flags = O_RDONLY;
		if (peer_call(p, SW_MSG_OPEN, &q.base) != want)
			return "open";
	}
	{
		Sweepfs__SetattrReq q = SWEEPFS__SETATTR_REQ__INIT;

		q.cred = &root_cred;
		q.ino = ino;
		q.valid = 1; /* mode */
		q.has_mode = 1;
		q.mode = 0644;
		if (peer_call(p, SW_MSG_SETATTR, &q.base) != want)
			return "setattr";
	}
	{
		Sweepfs__GetxattrReq q = SWEEPFS__GETXATTR_REQ__INIT;

		q.cred = &root_cred;
		q.ino = ino;
		q.has_name = 1;
		q.name = bin("user.k", 6);
		q.size = 100;
		err = peer_call(p, SW_MSG_GETXATTR, &q.base);
		/* Inside, the file has no such attribute. */
		if (err != (want ? want : ENODATA))
			return "getxattr";
	}
	{
		Sweepfs__LockReq q = SWEEPFS__LOCK_REQ__INIT;

		q.ino = ino;
		q.op = SWEEPFS__LOCK_OP__LOCK_OP_GET;
		q.kind = SWEEPFS__LOCK_KIND__LOCK_POSIX;
		q.owner = 7;
		q.has_type = 1;
		q.type = SWEEPFS__LOCK_TYPE__LOCK_WRITE;
		q.has_start = q.has_end = 1;
		q.start = 0;
		q.end = 10;
		if (peer_call(p, SW_MSG_LOCK, &q.base) != want)
			return "lock";
	}
	for (int w = 0; w < 2; w++) {
		Sweepfs__ChunkReq q = SWEEPFS__CHUNK_REQ__INIT;

		q.cred = &root_cred;
		q.ino = ino;
		q.has_write = 1;
		q.write = w;
		if (peer_call(p, SW_MSG_CHUNK, &q.base) != want)
			return w ? "chunk (write)" : "chunk (read)";
	}
	{
		Sweepfs__WriteEndReq q = SWEEPFS__WRITE_END_REQ__INIT;

		q.cred = &root_cred;
		q.ino = ino;
		q.size = 5;
		if (peer_call(p, SW_MSG_WRITE_END, &q.base) != want)
			return "write_end";
	}
	{
		Sweepfs__LinkReq q = SWEEPFS__LINK_REQ__INIT;

		snprintf(name, sizeof(name), "link-%" PRIu64, ino);
		q.cred = &root_cred;
		q.ino = ino;
		q.newparent = root;
		q.newname = bin(name, strlen(name));
		if (peer_call(p, SW_MSG_LINK, &q.base) != want)
			return "link";
	}
	return "";
}

static void check_confine(void)
{
	struct peer adm, p;
	const char *bad;
	uint64_t jail, in, out, root, open[2];
	Sweepfs__Attr before, after;

	peer_open(&adm, m_port);
	if (make_entry(&adm, SW_MSG_MKDIR, bin("jail", 4), 0, 0))
		fail("mkdir /jail");
	jail = lookup_ino(&adm, "jail");
	out = create_open(&adm, "outside");
	in = create_in(&adm, jail, "inside");
	attr_of(&adm, out, &before);

	root = confined_hello(&p, "/jail", NULL, 0);
	if (root != jail)
		fail("the /jail session's root is %" PRIu64 ", not %" PRIu64,
		     root, jail);
	bad = try_all(&p, out, root, ESTALE);
	if (*bad)
		fail("%s of a file outside the export, by its number, was "
		     "not refused with ESTALE",
		     bad);
	/* Not named to it yet: the inside file is refused too. */
	bad = try_all(&p, in, root, ESTALE);
	if (*bad)
		fail("%s of a file inside, never looked up, was not refused",
		     bad);
	{
		Sweepfs__LookupReq q = SWEEPFS__LOOKUP_REQ__INIT;

		q.cred = &root_cred;
		q.parent = root;
		q.name = bin("inside", 6);
		if (peer_call(&p, SW_MSG_LOOKUP, &q.base))
			fail("lookup inside from the /jail session");
	}
	bad = try_all(&p, in, root, 0);
	if (*bad)
		fail("%s of the file inside, after its lookup, failed", bad);
	peer_close(&p);
	ok("confine: a /jail session gets ESTALE for a file outside by "
	   "number (getattr, open, setattr, getxattr, lock, chunk, "
	   "write_end, link), and the inside file after its lookup");

	/* A new session says it has both open: it proved no session, so
	 * it is given neither (what it holds open, it never opened). */
	open[0] = in < out ? in : out;
	open[1] = in < out ? out : in;
	root = confined_hello(&p, "/jail", open, 2);
	{
		Sweepfs__GetattrReq q = SWEEPFS__GETATTR_REQ__INIT;

		q.ino = in;
		if (peer_call(&p, SW_MSG_GETATTR, &q.base) != ESTALE)
			fail("a new session's claim was believed");
	}
	peer_close(&p);
	/* The client of a session the master forgot (after a restart)
	 * proves it with its secret: the inside file is found below its
	 * root and given back, the outside one is not. */
	root = confined_hello_as(&p, "/jail", open, 2, 0x5eed5eed5eedULL);
	{
		Sweepfs__GetattrReq q = SWEEPFS__GETATTR_REQ__INIT;

		q.ino = in;
		if (peer_call(&p, SW_MSG_GETATTR, &q.base))
			fail("the inside file, claimed open, was not given "
			     "back");
		q.ino = out;
		if (peer_call(&p, SW_MSG_GETATTR, &q.base) != ESTALE)
			fail("the outside file, claimed open, was given");
	}
	peer_close(&p);
	/* Nothing changed outside. */
	attr_of(&adm, out, &after);
	if (after.mode != before.mode || after.size != before.size ||
	    after.nlink != before.nlink || after.mtime != before.mtime)
		fail("the outside file changed");
	peer_close(&adm);
	ok("confine: a new /jail session claiming both files open gets "
	   "the inside one and not the outside one; the outside file is "
	   "unchanged");
}

int main(int argc, char **argv)
{
	uint64_t seed = 0;
	int opt;

	while ((opt = getopt(argc, argv, "m:p:c:q:k:e:t:s:")) != -1) {
		switch (opt) {
		case 'm':
			m_port = (uint16_t)atoi(optarg);
			break;
		case 'p':
			m_pid = atoi(optarg);
			break;
		case 'c':
			c_port = (uint16_t)atoi(optarg);
			break;
		case 'q':
			c_pid = atoi(optarg);
			break;
		case 'k':
			key_file = optarg;
			break;
		case 'e':
			token_epoch = strtoull(optarg, NULL, 16);
			break;
		case 't':
			frame_timeout_ms = strtoull(optarg, NULL, 10);
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		default:
			fprintf(stderr, "usage: see the comment at the top of "
					"hostile.c\n");
			return 2;
		}
	}
	if (!m_port || !m_pid || optind == argc) {
		fprintf(stderr, "hostile: -m PORT -p PID and a CHECK are "
				"required\n");
		return 2;
	}
	if (!seed)
		seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	rng_state = seed | 1;
	printf("# seed %" PRIu64 " (-s %" PRIu64 " repeats it)\n", seed, seed);
	signal(SIGPIPE, SIG_IGN);
	raise_fd_limit();
	root_cred.uid = root_cred.gid = 0;

	for (int i = optind; i < argc; i++) {
		unsigned n, max = 0;

		if (!strcmp(argv[i], "frames"))
			check_frames();
		else if (!strcmp(argv[i], "names"))
			check_names();
		else if (!strcmp(argv[i], "tokens"))
			check_tokens();
		else if (!strcmp(argv[i], "stall"))
			check_stall();
		else if (!strcmp(argv[i], "confine"))
			check_confine();
		else if (!strcmp(argv[i], "groups"))
			check_groups();
		else if (!strcmp(argv[i], "chunkjobs"))
			check_chunkjobs();
		else if (sscanf(argv[i], "flood=%u/%u", &n, &max) >= 1)
			check_flood(m_port, m_pid, "master", n, max);
		else if (sscanf(argv[i], "csflood=%u", &n) == 1 && c_port)
			check_flood(c_port, c_pid, "chunkserver", n, 0);
		else if (sscanf(argv[i], "csbig=%u", &n) == 1 && c_port)
			check_csbig(n);
		else
			fail("unknown check %s", argv[i]);
	}
	return 0;
}
