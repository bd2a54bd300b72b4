/*
 * trust -m PORT -p PID -k SESSIONKEY -P ADMINPW [-c CSPORT] [-s SEED] CHECK...
 *
 * What a client says that the master must not believe (issue 28, part A),
 * each tried for real on the wire against a master that runs with the
 * exports trust.sh writes:
 *
 *   127.0.0.1  /pub     ro
 *   127.0.0.1  /jail    rw,alldirs,maproot=nobody
 *   127.0.0.1  /shared  rw,alldirs,mapall=nobody
 *   127.0.0.1  /team    rw,alldirs,maproot=0
 *   127.0.0.2  /        ro
 *   127.0.0.3  /team    rw,alldirs,maproot=0
 *   127.0.0.1  /        rw,alldirs,admin,maproot=0,password=ADMINPW
 *
 * "setup" (first) makes, through the admin export: /private (root 0700)
 * with secret (root 0600), /pub/closed (root 0600) and /pub/open (0644),
 * in each of /jail, /shared and /team a root 0644 file "victim" of 30
 * bytes, a directory "w" (0777) and a root:root 0660 file "g0".
 * -k is the master's session.key, to prove a session the master does not
 * know (as a client does after a master restart).
 *
 *   reclaim  open files claimed at a hello are checked as opens: a first
 *            hello's claims (no secret) are ignored, on the confined
 *            read-only /pub and on the unconfined read-only / alike; a
 *            proven session's claim of a file its caller may not open
 *            (root 0600 as uid 1000; a root 0644 file for writing
 *            through /jail and /shared, where root is squashed; anything
 *            for writing through a read-only export) is refused, so a
 *            CHUNK for reading or writing it gets EACCES; a claim its
 *            caller may make (a 0644 file for reading) is taken
 *   viafd    SETATTR of the size with SET_VIA_FD, by a session that does
 *            not have the file open for writing, is checked as a truncate
 *            by path: EACCES and the size unchanged; with the file open
 *            for writing (the creator's own file, mode 0444) it is allowed
 *   again    a CREATE O_RDWR flagged AGAIN under the id of a LINK that
 *            linked a root file into a writable directory is not answered
 *            "made before": it is made as a new request and refused, and
 *            the session has no write access to the root file; the LINK
 *            sent again is answered as made
 *   again-made  the same after a restart, the LINK made by "again"
 *   gid0     under maproot=nobody, uid 1000 with gid 0 or supplementary
 *            group 0 cannot open a root:root 0660 file for writing; under
 *            maproot=0 (no squashing) it can
 *   info     a read-only session's INFO names no other session among the
 *            slowest requests; an admin's does
 *   byno     uid 1000 names /private/readable (root 0644 in a root 0700
 *            directory its lookup may not search) by number: without the
 *            handle a reply gives, and with a forged one, GETATTR, OPEN,
 *            CHUNK, LINK and SETATTR are ESTALE, through the read-only "/"
 *            of 127.0.0.2 and the read-write admin one; with the handle
 *            they are served, and root needs none
 *   rootonly through /team (no squashing), uid 1000 may not clear the
 *            set-id bits of a root 04755 file, nor set security.* names
 *            on its own file; it may on what it owns, root may
 *   recall   a /pub session's GETATTR, by number, of a file in a
 *            directory delegated to another session is refused at once,
 *            and sends the holder no recall
 *   recursive  uid 1000's recursive GOAL and TRASHTIME of its own
 *            directory leave the root file and directory in it as they
 *            were; an admin's root changes them
 *   times    uid 1000's MTIME_NOW and WRITE_END carrying 1970 on a root
 *            0666 file leave an mtime of about now; root may set 1970
 *   inos     a /team session of 127.0.0.3 (one that may hold delegations)
 *            is given an inode range with a proof, the session key's tag
 *            of the session, the range's first number and its count;
 *            prints "inos: range FIRST COUNT" for inos-after
 *   inos-after=FIRST:COUNT  after a master restart, which forgets the
 *            ranges: a new session's batch create with a number of that
 *            range is refused (EINVAL); so is the range's own session's
 *            when it claims the range with a wrong proof, or claims none;
 *            with the right proof it makes the node with that number
 *   resume   a session that holds a delegation resumes on a new
 *            connection while its old one is still open (the client gave
 *            it up first): the delegation went with the old connection,
 *            so another session is granted the directory at once, not
 *            after deleg_timeout
 *   wronly   (needs -c, a chunkserver's port) an open for writing only
 *            does not read: through /team (no squashing) as uid 1000,
 *            and through /shared (everyone squashed to nobody), a root
 *            0602 file with data: OPEN for reading is EACCES; OPEN
 *            O_WRONLY is allowed and its reply says "not readable"; a
 *            CHUNK read is EACCES; a CHUNK write is granted with a token
 *            marked write-only, which the chunkserver refuses for a
 *            CS_READ and takes for a CS_WRITE and a CS_SYNC (the write
 *            is there when root reads the file). The same open claimed
 *            at a proven hello gives the same (and the claim is taken: a
 *            POSIX write lock is granted). A CREATE O_WRONLY|O_TRUNC,
 *            without O_EXCL, of a root 0602 file in a 0777 directory
 *            opens it, replies "not readable", and sent again with the
 *            AGAIN flag (answered from the journal: not truncated again)
 *            still gives no read. A reclaim sets what a session's opens
 *            may do: one that read and wrote a 0606 file, and after a
 *            chmod to 0602 claims only its open for writing, reads no
 *            more; an owner's claim of its 0200 file for writing reads.
 *            The control: O_WRONLY of a 0606 file gives a token that
 *            reads what root wrote
 *   grants=N 400 pipelined DELEG/DELEG_RETURN pairs of a directory of N
 *            entries, from 127.0.0.3's /team (which may hold
 *            delegations): some granted, not all, and another client's
 *            pings meanwhile all under -t ms (default 100)
 *
 * Prints "ok - ..." per check; exit 0 when all held, 1 at the first that
 * did not.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "client.h"
#include "frame.h"
#include "peer.h"
#include "util.h"

static uint16_t m_port, c_port;
static pid_t m_pid;
static const char *session_key_file, *admin_pw;
static Sweepfs__Cred root_cred = SWEEPFS__CRED__INIT;
static Sweepfs__Cred user_cred = SWEEPFS__CRED__INIT; /* uid/gid 1000 */
static uint64_t last_sid; /* the session the last hello got */

/* What setup made. */
static uint64_t priv, secret, readable, listable, pub, closed, open_file;
static struct {
	const char *name;
	uint64_t dir, victim, w, g0;
} ex[] = { { .name = "jail" }, { .name = "shared" }, { .name = "team" } };

/* ---- hellos --------------------------------------------------------------- */

struct hello {
	const char *subdir;
	const char *from; /* source address; NULL: 127.0.0.1 */
	bool password;	  /* answer the admin export's challenge */
	uint64_t proven;  /* a session id to prove with its secret */
	Sweepfs__OpenClaim **claims;
	size_t nclaims;
	Sweepfs__InoClaim **inos; /* Hello.ino_ranges */
	size_t ninos;
};

/* Connect from @from (an address of the loopback network). */
static void connect_from(struct peer *p, const char *from)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int fd;

	if (!from) {
		peer_connect(p, m_port);
		return;
	}
	memset(p, 0, sizeof(*p));
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || inet_pton(AF_INET, from, &a.sin_addr) != 1 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		fail("bind to %s: %s", from, strerror(errno));
	a.sin_port = htons(m_port);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		fail("connect from %s: %s", from, strerror(errno));
	p->fd = fd;
	p->next_id = 1;
	p->port = m_port;
	p->max = SW_FRAME_MAX_DATA;
}

/* The secret of session @sid, as the master makes it from session.key. */
static void session_secret(uint64_t sid, uint8_t out[SW_AUTH_TAG])
{
	uint8_t key[SW_AUTH_KEY], b[8];

	if (sw_auth_key_load(session_key_file, key) < 0)
		fail("cannot read %s", session_key_file);
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(sid >> (8 * i));
	sw_auth_tag(key, SW_AUTH_SESSION, b, sizeof(b), NULL, 0, out);
}

/* Connect and say hello as @o says; the session's root inode. */
static uint64_t hello(struct peer *p, const struct hello *o)
{
	Sweepfs__Hello h = SWEEPFS__HELLO__INIT;
	Sweepfs__HelloReply *r;
	struct sw_target t = { .has_key = false };
	uint8_t tag[SW_AUTH_TAG], sec[SW_AUTH_TAG];
	uint64_t id, root;
	int err;

	connect_from(p, o->from);
	h.version = SW_PROTO_VERSION;
	h.role = SWEEPFS__ROLE__ROLE_MOUNT;
	h.has_subdir = 1;
	h.subdir = str(o->subdir);
	if (o->proven) {
		session_secret(o->proven, sec);
		h.has_session_id = h.has_session_secret = 1;
		h.session_id = o->proven;
		h.session_secret = (ProtobufCBinaryData){ sizeof(sec), sec };
	}
	h.has_reclaim = h.reclaim = o->nclaims != 0;
	h.n_opens = o->nclaims;
	h.opens = o->claims;
	h.n_ino_ranges = o->ninos;
	h.ino_ranges = o->inos;
	for (int round = 0;; round++) {
		id = peer_send(p, SW_MSG_HELLO, 0, &h.base);
		r = (Sweepfs__HelloReply *)peer_reply(p, SW_MSG_HELLO, id,
						      &err);
		if (err != EACCES || !o->password || round)
			break;
		snprintf(t.subdir, sizeof(t.subdir), "%s", o->subdir);
		if (sw_target_password(&t, admin_pw) < 0 ||
		    sw_hello_answer(&t, r, &h, tag) < 0)
			fail("cannot answer the admin export's challenge");
		sweepfs__hello_reply__free_unpacked(r, NULL);
	}
	if (err || !r->has_root_ino)
		fail("hello for %s: %s", o->subdir, strerror(err));
	last_sid = r->session_id;
	if (o->proven && r->session_id != o->proven)
		fail("the proven session %" PRIx64 " was not made again",
		     o->proven);
	root = r->root_ino;
	sweepfs__hello_reply__free_unpacked(r, NULL);
	return root;
}

static uint64_t session(struct peer *p, const char *subdir)
{
	struct hello o = { .subdir = subdir, .password = !strcmp(subdir, "/") };

	return hello(p, &o);
}

/* ---- requests --------------------------------------------------------------- */

static int entry(struct peer *p, uint16_t type, uint16_t flags,
		 const ProtobufCMessage *q, uint64_t *ino)
{
	Sweepfs__EntryReply *r;
	uint64_t id = peer_send(p, type, flags, q);
	int err;

	r = (Sweepfs__EntryReply *)peer_reply(p, type, id, &err);
	if (!err && ino && r->attr)
		*ino = r->attr->ino;
	sweepfs__entry_reply__free_unpacked(r, NULL);
	return err;
}

static uint64_t make(struct peer *p, uint64_t parent, const char *name,
		     uint32_t mode)
{
	Sweepfs__CreateReq c = SWEEPFS__CREATE_REQ__INIT;
	Sweepfs__MknodReq d = SWEEPFS__MKNOD_REQ__INIT;
	uint64_t ino = 0;

	if (S_ISDIR(mode)) {
		d.cred = &root_cred;
		d.parent = parent;
		d.name = str(name);
		d.mode = mode;
		must(entry(p, SW_MSG_MKDIR, 0, &d.base, &ino), name);
	} else {
		c.cred = &root_cred;
		c.parent = parent;
		c.name = str(name);
		c.mode = S_IFREG | mode;
		c.flags = O_RDWR;
		must(entry(p, SW_MSG_CREATE, 0, &c.base, &ino), name);
	}
	return ino;
}

static int lookup(struct peer *p, uint64_t parent, const char *name,
		  uint64_t *ino)
{
	Sweepfs__LookupReq q = SWEEPFS__LOOKUP_REQ__INIT;

	q.cred = &root_cred;
	q.parent = parent;
	q.name = str(name);
	return entry(p, SW_MSG_LOOKUP, 0, &q.base, ino);
}

static int open_as(struct peer *p, Sweepfs__Cred *cred, uint64_t ino,
		   uint32_t flags)
{
	Sweepfs__OpenReq q = SWEEPFS__OPEN_REQ__INIT;

	q.cred = cred;
	q.ino = ino;
	q.flags = flags;
	return peer_call(p, SW_MSG_OPEN, &q.base);
}

/* A CHUNK request for reading or writing @ino's first chunk as @cred. */
static int chunk(struct peer *p, Sweepfs__Cred *cred, uint64_t ino, bool write)
{
	Sweepfs__ChunkReq q = SWEEPFS__CHUNK_REQ__INIT;

	q.cred = cred;
	q.ino = ino;
	q.index = 0;
	q.has_write = 1;
	q.write = write;
	return peer_call(p, SW_MSG_CHUNK, &q.base);
}

static int write_end(struct peer *p, Sweepfs__Cred *cred, uint64_t ino,
		     uint64_t size)
{
	Sweepfs__WriteEndReq q = SWEEPFS__WRITE_END_REQ__INIT;

	q.cred = cred;
	q.ino = ino;
	q.size = size;
	return peer_call(p, SW_MSG_WRITE_END, &q.base);
}

static int setattr(struct peer *p, Sweepfs__Cred *cred, uint64_t ino,
		   uint32_t valid, uint64_t size)
{
	Sweepfs__SetattrReq q = SWEEPFS__SETATTR_REQ__INIT;

	q.cred = cred;
	q.ino = ino;
	q.valid = valid;
	q.has_size = 1;
	q.size = size;
	return peer_call(p, SW_MSG_SETATTR, &q.base);
}

static Sweepfs__Attr attr_of(struct peer *p, uint64_t ino)
{
	Sweepfs__GetattrReq q = SWEEPFS__GETATTR_REQ__INIT;
	Sweepfs__AttrReply *r;
	Sweepfs__Attr a;
	uint64_t id;
	int err;

	q.ino = ino;
	id = peer_send(p, SW_MSG_GETATTR, 0, &q.base);
	r = (Sweepfs__AttrReply *)peer_reply(p, SW_MSG_GETATTR, id, &err);
	if (err || !r->attr)
		fail("getattr of %" PRIu64 ": %s", ino, strerror(err));
	a = *r->attr;
	sweepfs__attr_reply__free_unpacked(r, NULL);
	return a;
}

static uint64_t size_of(struct peer *p, uint64_t ino)
{
	return attr_of(p, ino).size;
}

/* ---- setup ------------------------------------------------------------------ */

static void check_setup(void)
{
	struct peer adm;

	session(&adm, "/");
	priv = make(&adm, ROOT, "private", S_IFDIR | 0700);
	secret = make(&adm, priv, "secret", 0600);
	readable = make(&adm, priv, "readable", 0644);
	listable = make(&adm, ROOT, "listable", S_IFDIR | 0744);
	make(&adm, listable, "inside", 0644);
	pub = make(&adm, ROOT, "pub", S_IFDIR | 0755);
	closed = make(&adm, pub, "closed", 0600);
	open_file = make(&adm, pub, "open", 0644);
	for (size_t i = 0; i < SW_ARRAY_SIZE(ex); i++) {
		ex[i].dir = make(&adm, ROOT, ex[i].name, S_IFDIR | 0755);
		ex[i].victim = make(&adm, ex[i].dir, "victim", 0644);
		must(setattr(&adm, &root_cred, ex[i].victim,
			     SWEEPFS__SETATTR_VALID__SET_SIZE, 30),
		     "size the victim");
		ex[i].w = make(&adm, ex[i].dir, "w", S_IFDIR | 0777);
		ex[i].g0 = make(&adm, ex[i].dir, "g0", 0660);
	}
	peer_close(&adm);
	ok("setup: /private/secret and readable, /pub/closed, /pub/open; victim, w and "
	   "g0 in /jail, /shared and /team");
}

/* ---- by number -------------------------------------------------------------- */

static int getattr(struct peer *p, uint64_t ino)
{
	Sweepfs__GetattrReq q = SWEEPFS__GETATTR_REQ__INIT;

	q.ino = ino;
	return peer_call(p, SW_MSG_GETATTR, &q.base);
}

static int link_as(struct peer *p, Sweepfs__Cred *cred, uint64_t ino,
		   uint64_t parent, const char *name)
{
	Sweepfs__LinkReq q = SWEEPFS__LINK_REQ__INIT;

	q.cred = cred;
	q.ino = ino;
	q.newparent = parent;
	q.newname = str(name);
	return entry(p, SW_MSG_LINK, 0, &q.base, NULL);
}

static int lookup_as(struct peer *p, Sweepfs__Cred *cred, uint64_t parent,
		     const char *name)
{
	Sweepfs__LookupReq q = SWEEPFS__LOOKUP_REQ__INIT;

	q.cred = cred;
	q.parent = parent;
	q.name = str(name);
	return entry(p, SW_MSG_LOOKUP, 0, &q.base, NULL);
}

/* A READDIR with attributes of @dir as @cred: how many entries came, and
 * how many of their attributes carried a handle. */
static void list_plus(struct peer *p, Sweepfs__Cred *cred, uint64_t dir,
		      size_t *entries, size_t *handles)
{
	Sweepfs__ReaddirReq q = SWEEPFS__READDIR_REQ__INIT;
	Sweepfs__ReaddirReply *r;
	uint64_t id;
	int err;

	q.cred = cred;
	q.ino = dir;
	q.max_entries = 100;
	q.max_bytes = 64 << 10;
	q.has_plus = 1;
	q.plus = 1;
	id = peer_send(p, SW_MSG_READDIR, 0, &q.base);
	r = (Sweepfs__ReaddirReply *)peer_reply(p, SW_MSG_READDIR, id, &err);
	must(err, "byno: READDIR with attributes");
	*entries = r->n_attrs;
	*handles = 0;
	for (size_t i = 0; i < r->n_attrs; i++)
		*handles += r->attrs[i]->has_handle;
	sweepfs__readdir_reply__free_unpacked(r, NULL);
}

/*
 * What uid 1000 may not reach by its path (/private is root's 0700) it may
 * not reach by its number either: not without the handle a reply gives,
 * not with a forged one, through a read-only and a read-write unconfined
 * export; with the handle it may (a client that was once let in keeps
 * what it was given, as an NFS file handle does), and root needs none.
 */
static void check_by_number(void)
{
	uint64_t real = peer_handle(readable), team_w = ex[2].w;
	struct hello o = { .subdir = "/", .from = "127.0.0.2" };
	struct peer ro, rw;

	if (!real || !peer_handle(team_w))
		fail("byno: setup's replies gave no handles");
	hello(&ro, &o);
	session(&rw, "/");
	expect(lookup_as(&ro, &user_cred, priv, "readable"), EACCES,
	       "byno: uid 1000's lookup in root's 0700 directory");
	for (int forged = 0; forged < 2; forged++) {
		const char *how = forged ? "a forged handle" : "no handle";

		/* The read-write session sends every other handle it knows
		 * (the directory LINK names, its own), so what is refused is
		 * the file's missing or forged one. */
		ro.raw = !forged;
		rw.raw = false;
		peer_handle_set(readable, forged ? real ^ (rnd() | 1) : 0);
		expect(getattr(&ro, readable), ESTALE, "byno: GETATTR");
		expect(open_as(&ro, &user_cred, readable, O_RDONLY), ESTALE,
		       "byno: OPEN for reading");
		expect(chunk(&ro, &user_cred, readable, false), ESTALE,
		       "byno: CHUNK read");
		if (!forged)
			expect(getattr(&ro, priv), ESTALE,
			       "byno: GETATTR of the directory");
		expect(open_as(&rw, &user_cred, readable, O_RDONLY), ESTALE,
		       "byno: OPEN through the read-write export");
		expect(link_as(&rw, &user_cred, readable, team_w, "stolen"),
		       ESTALE, "byno: LINK into a directory of its own");
		expect(setattr(&rw, &user_cred, readable,
			       SWEEPFS__SETATTR_VALID__SET_SIZE, 0),
		       ESTALE, "byno: SETATTR");
		ok("byno: uid 1000 names /private/readable by number with %s: "
		   "GETATTR, OPEN, CHUNK, LINK and SETATTR are ESTALE",
		   how);
	}
	peer_handle_set(readable, real);
	ro.raw = rw.raw = false;
	must(getattr(&ro, readable), "byno: GETATTR with the handle");
	must(open_as(&ro, &user_cred, readable, O_RDONLY),
	     "byno: OPEN with the handle");
	rw.raw = true;
	must(open_as(&rw, &root_cred, readable, O_RDONLY),
	     "byno: root's OPEN without a handle");
	/* A directory it may read but not search (root's 0744): the names
	 * and their attributes, not their handles, as Linux refuses the
	 * lookup there. Its own search of /pub (0755) gives them. */
	{
		size_t n, h;

		list_plus(&ro, &user_cred, listable, &n, &h);
		if (n != 1 || h != 0)
			fail("byno: uid 1000's listing of a 0744 directory "
			     "gave %zu handles of %zu entries",
			     h, n);
		list_plus(&ro, &user_cred, pub, &n, &h);
		if (n == 0 || h != n)
			fail("byno: uid 1000's listing of /pub (0755) gave "
			     "%zu handles of %zu entries",
			     h, n);
	}
	peer_close(&ro);
	peer_close(&rw);
	ok("byno: with the handle a reply gave, it may; root needs none; "
	   "a listing of a directory it may not search gives no handles");
}

/* ---- reclaim ---------------------------------------------------------------- */

/* A claim of @ino open with @flags by @cred, with its handle. */
static Sweepfs__OpenClaim claim_of(uint64_t ino, uint32_t flags,
				   Sweepfs__Cred *cred)
{
	Sweepfs__OpenClaim c;

	peer_claim(&c, ino, flags, cred);
	return c;
}

/* A session id for a proven hello the master has never seen. */
static uint64_t fresh_sid(void)
{
	return rnd() | 1ull << 62;
}

static void check_reclaim(void)
{
	Sweepfs__OpenClaim c[3], *cv[3] = { &c[0], &c[1], &c[2] };
	struct peer p;
	struct hello o;

	/* 1. A first hello's claims, on the read-only /pub and on the
	 * unconfined read-only "/" (from 127.0.0.2): not believed. */
	c[0] = claim_of(closed, O_RDONLY, &user_cred);
	c[1] = claim_of(open_file, O_RDONLY, &user_cred);
	o = (struct hello){ .subdir = "/pub", .claims = cv, .nclaims = 2 };
	hello(&p, &o);
	/* Named to it: confinement is not what refuses it. */
	must(lookup(&p, pub, "closed", NULL), "lookup /pub/closed");
	expect(chunk(&p, &user_cred, closed, false), EACCES,
	       "/pub, first hello: a CHUNK read of the claimed root 0600 file");
	peer_close(&p);
	c[0] = claim_of(secret, O_RDONLY, &user_cred);
	c[1] = claim_of(closed, O_RDWR, &user_cred);
	o = (struct hello){
		.subdir = "/", .from = "127.0.0.2", .claims = cv, .nclaims = 2
	};
	hello(&p, &o);
	expect(chunk(&p, &user_cred, secret, false), EACCES,
	       "/ read-only, first hello: a CHUNK read of /private/secret");
	expect(chunk(&p, &user_cred, closed, true), EROFS,
	       "/ read-only, first hello: a CHUNK write");
	peer_close(&p);
	ok("reclaim: a first hello's claims are not believed (/pub, and / "
	   "read-only unconfined)");

	/* 2. A proven session (after a "restart") claims what its caller
	 * may not open: refused; what it may: taken. */
	c[0] = claim_of(secret, O_RDONLY, &user_cred);
	c[1] = claim_of(closed, O_RDWR, &root_cred);
	c[2] = claim_of(open_file, O_RDONLY, &user_cred);
	o = (struct hello){ .subdir = "/",
			    .from = "127.0.0.2",
			    .proven = fresh_sid(),
			    .claims = cv,
			    .nclaims = 3 };
	hello(&p, &o);
	expect(chunk(&p, &user_cred, secret, false), EACCES,
	       "proven /, read-only: CHUNK read of a root 0600 file claimed "
	       "by uid 1000");
	expect(chunk(&p, &root_cred, closed, true), EROFS,
	       "proven /, read-only: CHUNK write of a file claimed for "
	       "writing");
	/* The positive control: a claim its caller could make is taken,
	 * so reads through it need no permission check any more. */
	if (chunk(&p, &user_cred, open_file, false) == EACCES)
		fail("proven /, read-only: CHUNK read of a 0644 file claimed "
		     "by uid 1000: EACCES");
	peer_close(&p);
	c[0] = claim_of(closed, O_RDONLY, &user_cred);
	o = (struct hello){ .subdir = "/pub",
			    .proven = fresh_sid(),
			    .claims = cv,
			    .nclaims = 1 };
	hello(&p, &o);
	must(lookup(&p, pub, "closed", NULL), "lookup /pub/closed");
	expect(chunk(&p, &user_cred, closed, false), EACCES,
	       "proven /pub: CHUNK read of /pub/closed claimed by uid 1000");
	peer_close(&p);

	/* 3. Through /jail and /shared root is squashed: a claim of a
	 * root 0644 file for writing, "as root", is refused. */
	for (size_t i = 0; i < 2; i++) {
		char sub[32];
		uint64_t before;

		snprintf(sub, sizeof(sub), "/%s", ex[i].name);
		c[0] = claim_of(ex[i].victim, O_RDWR, &root_cred);
		o = (struct hello){ .subdir = sub,
				    .proven = fresh_sid(),
				    .claims = cv,
				    .nclaims = 1 };
		hello(&p, &o);
		/* Confined: it must have been told of the victim. */
		must(lookup(&p, ex[i].dir, "victim", NULL), "lookup victim");
		before = size_of(&p, ex[i].victim);
		expect(chunk(&p, &root_cred, ex[i].victim, true), EACCES,
		       "squashed root: CHUNK write of a root 0644 file it "
		       "claimed");
		expect(write_end(&p, &root_cred, ex[i].victim, 4), EACCES,
		       "squashed root: WRITE_END of a root 0644 file it "
		       "claimed");
		if (size_of(&p, ex[i].victim) != before)
			fail("%s: the victim's size changed", sub);
		peer_close(&p);
	}
	ok("reclaim: a proven session's claims are checked as opens: root "
	   "0600 and root 0700/0600 refused to uid 1000, writes refused on "
	   "read-only exports and to squashed root; a 0644 file for reading "
	   "taken");
}

/* ---- write-only opens ---------------------------------------------------------- */

/* OPEN of @ino with @flags as @cred: 0 or the errno; *@readable is what
 * the reply says of reading through it. */
static int open_readable(struct peer *p, Sweepfs__Cred *cred, uint64_t ino,
			 uint32_t flags, bool *readable)
{
	Sweepfs__OpenReq q = SWEEPFS__OPEN_REQ__INIT;
	Sweepfs__OpenReply *r;
	uint64_t id;
	int err;

	q.cred = cred;
	q.ino = ino;
	q.flags = flags;
	id = peer_send(p, SW_MSG_OPEN, 0, &q.base);
	r = (Sweepfs__OpenReply *)peer_reply(p, SW_MSG_OPEN, id, &err);
	*readable = r->has_readable && r->readable;
	if (!err && !r->has_readable)
		fail("OPEN of %" PRIu64 ": the reply says nothing of reading",
		     ino);
	sweepfs__open_reply__free_unpacked(r, NULL);
	return err;
}

static int cs_sync(struct peer *cs, const struct chunk_grant *g)
{
	Sweepfs__CsSyncReq q = SWEEPFS__CS_SYNC_REQ__INIT;

	q.chunk_id = g->chunk_id;
	q.version = g->version;
	q.has_token = q.has_expires = 1;
	q.token = bin(g->token, g->token_len);
	q.expires = g->expires;
	return peer_call(cs, SW_MSG_CS_SYNC, &q.base);
}

static const char root_bytes[] = "root's own bytes";

/* A root file of @mode in @dir with root_bytes in it, made by @adm. */
static uint64_t make_with_data(struct peer *adm, struct peer *cs, uint64_t dir,
			       const char *name, uint32_t mode)
{
	uint64_t ino = make(adm, dir, name, mode);
	struct chunk_grant g;

	must(peer_chunk(adm, &root_cred, ino, true, &g), "root's CHUNK write");
	must(peer_cs_write(cs, &g, root_bytes, sizeof(root_bytes)),
	     "root's CS_WRITE");
	must(write_end(adm, &root_cred, ino, sizeof(root_bytes)),
	     "root's WRITE_END");
	return ino;
}

/* What session @p, holding @ino open for writing only as @cred, may do
 * with its data: write, not read. @what names the case. */
static void expect_write_only(struct peer *p, struct peer *cs,
			      Sweepfs__Cred *cred, uint64_t ino,
			      const char *what)
{
	static const char mine[] = "X";
	struct chunk_grant g;
	uint8_t buf[64];
	size_t got;
	int err;

	expect(chunk(p, cred, ino, false), EACCES, what);
	err = peer_chunk(p, cred, ino, true, &g);
	if (err)
		fail("%s: CHUNK write: %s", what, strerror(err));
	if (!g.write_only)
		fail("%s: CHUNK write's token is not marked write-only", what);
	err = peer_cs_read(cs, &g, buf, sizeof(buf), &got);
	if (err != EACCES)
		fail("%s: CS_READ with the write token: %s (%zu bytes), not "
		     "EACCES",
		     what, err ? strerror(err) : "read", got);
	must(peer_cs_write(cs, &g, mine, 1), what);
	must(cs_sync(cs, &g), what);
}

static void check_wronly_create(struct peer *adm, struct peer *cs)
{
	Sweepfs__CreateReq c = SWEEPFS__CREATE_REQ__INIT;
	Sweepfs__EntryReply *r;
	struct peer p;
	uint64_t ino, id = 7000, got;
	int err;

	ino = make_with_data(adm, cs, ex[2].w, "wo", 0602);
	session(&p, "/team");
	must(lookup(&p, ex[2].dir, "w", NULL), "lookup w");
	c.cred = &user_cred;
	c.parent = ex[2].w;
	c.name = str("wo");
	c.mode = S_IFREG | 0644;
	c.flags = O_WRONLY | O_TRUNC;
	for (int again = 0; again < 2; again++) {
		p.next_id = id;
		id = peer_send(&p, SW_MSG_CREATE, again ? SW_FRAME_AGAIN : 0,
			       &c.base);
		r = (Sweepfs__EntryReply *)peer_reply(&p, SW_MSG_CREATE, id,
						      &err);
		got = !err && r->attr ? r->attr->ino : 0;
		if (err || got != ino)
			fail("CREATE O_WRONLY|O_TRUNC of the root 0602 file "
			     "(again %d): %s, inode %" PRIu64,
			     again, strerror(err), got);
		if (!r->has_readable || r->readable)
			fail("CREATE of the root 0602 file (again %d): the "
			     "reply says readable",
			     again);
		sweepfs__entry_reply__free_unpacked(r, NULL);
		/* Answered from the journal, not truncated again. */
		if (again && size_of(adm, ino) != sizeof(root_bytes))
			fail("CREATE sent again truncated the file again");
		expect_write_only(&p, cs, &user_cred, ino,
				  again ? "CREATE sent again" :
					  "CREATE of another's file");
		must(write_end(adm, &root_cred, ino, sizeof(root_bytes)),
		     "root's WRITE_END");
	}
	peer_close(&p);
}

/* SETATTR of @ino's mode bits to @mode, as root. */
static void chmod_as_root(struct peer *adm, uint64_t ino, uint32_t mode)
{
	must(peer_chmod(adm, &root_cred, ino, mode), "chmod");
}

/*
 * A reclaim is the whole truth of what a session has open: one that read
 * a 0606 file and wrote it, and after a chmod to 0602 claims only its open
 * for writing, reads no more. And the owner keeps reading what it made
 * 0200 and claims for writing, as its creator did.
 */
static void check_wronly_reclaim(struct peer *adm, struct peer *cs)
{
	Sweepfs__CreateReq c = SWEEPFS__CREATE_REQ__INIT;
	Sweepfs__OpenClaim cl, *clv[1] = { &cl };
	struct hello o = { .subdir = "/team", .proven = fresh_sid() };
	uint64_t ino, own = 0;
	struct peer p;
	bool readable;

	ino = make_with_data(adm, cs, ex[2].dir, "was-rw", 0606);
	hello(&p, &o);
	must(lookup(&p, ex[2].dir, "was-rw", NULL), "lookup was-rw");
	must(open_readable(&p, &user_cred, ino, O_RDONLY, &readable),
	     "O_RDONLY of a 0606 file");
	must(open_readable(&p, &user_cred, ino, O_WRONLY, &readable),
	     "O_WRONLY of a 0606 file");
	must(chunk(&p, &user_cred, ino, false), "CHUNK read of a 0606 file");
	c.cred = &user_cred;
	c.parent = ex[2].w;
	c.name = str("own0200");
	c.mode = S_IFREG | 0200;
	c.flags = O_WRONLY | O_EXCL;
	must(entry(&p, SW_MSG_CREATE, 0, &c.base, &own), "create own0200");
	peer_close(&p);
	chmod_as_root(adm, ino, 0602);

	cl = claim_of(ino, O_WRONLY, &user_cred);
	o.claims = clv;
	o.nclaims = 1;
	hello(&p, &o);
	must(peer_lock(&p, ino, 1, SWEEPFS__LOCK_TYPE__LOCK_WRITE, 0, 0),
	     "write lock of was-rw after the claim");
	expect_write_only(&p, cs, &user_cred, ino,
			  "the same session, its open for reading not claimed "
			  "after a chmod to 0602");
	peer_close(&p);

	cl = claim_of(own, O_WRONLY, &user_cred);
	o.proven = fresh_sid();
	hello(&p, &o);
	must(chunk(&p, &user_cred, own, false),
	     "the owner's CHUNK read of its 0200 file, claimed for writing");
	peer_close(&p);
}

static void check_wronly(void)
{
	static const struct {
		size_t ex; /* in ex[] */
		const char *how;
	} via[] = { { 2, "/team, uid 1000" }, { 1, "/shared, squashed" } };
	Sweepfs__OpenClaim c, *cv[1] = { &c };
	struct peer adm, cs, p;
	uint64_t wo[2], rw;
	struct chunk_grant g;
	bool readable;
	uint8_t buf[64];
	size_t got;
	char sub[32], what[64];

	if (!c_port)
		fail("wronly needs -c, a chunkserver's port");
	session(&adm, "/");
	peer_open(&cs, c_port);
	for (size_t i = 0; i < SW_ARRAY_SIZE(via); i++)
		wo[i] = make_with_data(&adm, &cs, ex[via[i].ex].dir, "wo",
				       0602);
	rw = make_with_data(&adm, &cs, ex[2].dir, "rw", 0606);

	for (size_t i = 0; i < SW_ARRAY_SIZE(via); i++) {
		snprintf(sub, sizeof(sub), "/%s", ex[via[i].ex].name);
		session(&p, sub);
		must(lookup(&p, ex[via[i].ex].dir, "wo", NULL), "lookup wo");
		expect(open_readable(&p, &user_cred, wo[i], O_RDONLY,
				     &readable),
		       EACCES, via[i].how);
		must(open_readable(&p, &user_cred, wo[i], O_WRONLY, &readable),
		     via[i].how);
		if (readable)
			fail("%s: O_WRONLY of a 0602 file said readable",
			     via[i].how);
		expect_write_only(&p, &cs, &user_cred, wo[i], via[i].how);
		peer_close(&p);

		/* The same open claimed by a proven session. */
		c = claim_of(wo[i], O_WRONLY, &user_cred);
		struct hello o = { .subdir = sub,
				   .proven = fresh_sid(),
				   .claims = cv,
				   .nclaims = 1 };
		hello(&p, &o);
		must(lookup(&p, ex[via[i].ex].dir, "wo", NULL), "lookup wo");
		snprintf(what, sizeof(what), "%s, claimed", via[i].how);
		must(peer_lock(&p, wo[i], 1, SWEEPFS__LOCK_TYPE__LOCK_WRITE, 0,
			       0),
		     what);
		expect_write_only(&p, &cs, &user_cred, wo[i], what);
		peer_close(&p);

		/* Root sees the writes. */
		must(peer_chunk(&adm, &root_cred, wo[i], false, &g),
		     "root's CHUNK read");
		must(peer_cs_read(&cs, &g, buf, sizeof(buf), &got),
		     "root's CS_READ");
		if (got < sizeof(root_bytes) || buf[0] != 'X' ||
		    memcmp(buf + 1, root_bytes + 1, sizeof(root_bytes) - 1))
			fail("%s: root reads %zu bytes, not the write-only "
			     "writer's X over its own",
			     via[i].how, got);
	}

	/* A CREATE that opens what someone else made, and the same sent
	 * again: checked as the open it is, then and the second time. */
	check_wronly_create(&adm, &cs);
	check_wronly_reclaim(&adm, &cs);

	/* The control: a writer who may also read gets a token that does. */
	session(&p, "/team");
	must(lookup(&p, ex[2].dir, "rw", NULL), "lookup rw");
	must(open_readable(&p, &user_cred, rw, O_WRONLY, &readable),
	     "O_WRONLY of a 0606 file");
	if (!readable)
		fail("O_WRONLY of a 0606 file by uid 1000 said not readable");
	must(peer_chunk(&p, &user_cred, rw, true, &g), "CHUNK write of rw");
	if (g.write_only)
		fail("uid 1000's token for a 0606 file is write-only");
	must(peer_cs_read(&cs, &g, buf, sizeof(buf), &got),
	     "CS_READ of rw with the write token");
	if (got < sizeof(root_bytes) ||
	    memcmp(buf, root_bytes, sizeof(root_bytes)))
		fail("CS_READ of rw: %zu bytes, not root's", got);
	peer_close(&p);
	peer_close(&cs);
	peer_close(&adm);
	ok("wronly: an open for writing only of a root 0602 file, made or "
	   "claimed, through /team and squashed /shared: no CHUNK read, a "
	   "write-only token that the chunkserver does not read with and "
	   "writes and syncs with; a 0606 file's token reads");
}

/* ---- SET_VIA_FD --------------------------------------------------------------- */

static void check_viafd(void)
{
	const uint32_t via_fd = SWEEPFS__SETATTR_VALID__SET_SIZE |
				SWEEPFS__SETATTR_VALID__SET_VIA_FD;
	struct peer p;
	uint64_t mine;

	for (size_t i = 0; i < 2; i++) {
		char sub[32];

		snprintf(sub, sizeof(sub), "/%s", ex[i].name);
		session(&p, sub);
		must(lookup(&p, ex[i].dir, "victim", NULL), "lookup victim");
		expect(setattr(&p, &root_cred, ex[i].victim, via_fd, 4), EACCES,
		       "squashed root: SET_SIZE|SET_VIA_FD of a root 0644 file "
		       "it never opened");
		if (size_of(&p, ex[i].victim) != 30)
			fail("%s: the victim was cut to %" PRIu64 " bytes", sub,
			     size_of(&p, ex[i].victim));
		/* Opened for reading only: still no. */
		must(open_as(&p, &root_cred, ex[i].victim, O_RDONLY),
		     "open victim for reading");
		expect(setattr(&p, &root_cred, ex[i].victim, via_fd, 4), EACCES,
		       "SET_VIA_FD through a read-only open");
		peer_close(&p);
	}
	/* The control: ftruncate() through a descriptor open for writing
	 * needs no write permission on the file (its creator, 0444). */
	session(&p, "/jail");
	mine = make(&p, ex[0].w, "mine", 0444);
	must(setattr(&p, &root_cred, mine, via_fd, 7),
	     "SET_VIA_FD on the session's own 0444 file open for writing");
	if (size_of(&p, mine) != 7)
		fail("ftruncate through a descriptor did not take");
	peer_close(&p);
	ok("viafd: SET_VIA_FD needs the file open for writing in this "
	   "session; the victims stay 30 bytes");
}

/* ---- a resent request's id -------------------------------------------------- */

/*
 * @made: the LINK was made by an earlier run of this check, before the
 * master restarted; the requests sent again must still be told apart,
 * from the digests the master journaled.
 */
static void check_again(uint64_t seed, bool made)
{
	Sweepfs__LinkReq l = SWEEPFS__LINK_REQ__INIT;
	Sweepfs__CreateReq c = SWEEPFS__CREATE_REQ__INIT;
	struct hello o = { .subdir = "/jail",
			   .proven = 0x7a5e000000000000ull |
				     (seed & 0xffffffff) };
	struct peer p;
	uint64_t id = 4242, got = 0;

	if (!ex[0].dir) {
		struct peer adm;

		session(&adm, "/");
		must(lookup(&adm, ROOT, "jail", &ex[0].dir), "lookup /jail");
		must(lookup(&adm, ex[0].dir, "victim", &ex[0].victim),
		     "lookup victim");
		must(lookup(&adm, ex[0].dir, "w", &ex[0].w), "lookup w");
		peer_close(&adm);
	}
	hello(&p, &o);
	must(lookup(&p, ex[0].dir, "victim", NULL), "lookup victim");
	/* Request X: link the root file into the writable directory. */
	l.cred = &root_cred;
	l.ino = ex[0].victim;
	l.newparent = ex[0].w;
	l.newname = str("lnk");
	if (!made) {
		p.next_id = id;
		must(entry(&p, SW_MSG_LINK, 0, &l.base, NULL),
		     "link the root file into /jail/w");
	}
	/* "Request X, sent again": a CREATE O_RDWR of that name. */
	c.cred = &root_cred;
	c.parent = ex[0].w;
	c.name = str("lnk");
	c.mode = S_IFREG | 0644;
	c.flags = O_RDWR;
	p.next_id = id;
	expect(entry(&p, SW_MSG_CREATE, SW_FRAME_AGAIN, &c.base, &got), EACCES,
	       "a CREATE O_RDWR flagged AGAIN under a LINK's id, of the "
	       "linked root 0644 file");
	p.next_id = id + 1;
	expect(chunk(&p, &root_cred, ex[0].victim, true), EACCES,
	       "a CHUNK write of the root file after the CREATE");
	expect(write_end(&p, &root_cred, ex[0].victim, 4), EACCES,
	       "a WRITE_END of the root file after the CREATE");
	/* The LINK itself sent again is answered as made, not made twice
	 * (which would fail with EEXIST). */
	p.next_id = id;
	must(entry(&p, SW_MSG_LINK, SW_FRAME_AGAIN, &l.base, &got),
	     "the LINK itself sent again");
	if (got != ex[0].victim)
		fail("the LINK sent again answered inode %" PRIu64, got);
	peer_close(&p);
	ok("again%s: a request sent again is matched by type and arguments, "
	   "not by id alone",
	   made ? " (after a restart)" : "");
}

/* ---- group 0 ---------------------------------------------------------------- */

static void check_gid0(void)
{
	uint32_t groups[2] = { 0, 1000 };
	Sweepfs__Cred g0 = SWEEPFS__CRED__INIT, sup0 = SWEEPFS__CRED__INIT;
	struct peer p;

	g0.uid = 1000;
	g0.gid = 0;
	sup0.uid = sup0.gid = 1000;
	sup0.n_groups = 2;
	sup0.groups = groups;
	session(&p, "/jail");
	must(lookup(&p, ex[0].dir, "g0", NULL), "lookup g0");
	expect(open_as(&p, &g0, ex[0].g0, O_RDWR), EACCES,
	       "maproot=nobody: uid 1000 gid 0 opens a root:root 0660 file");
	expect(open_as(&p, &sup0, ex[0].g0, O_RDWR), EACCES,
	       "maproot=nobody: uid 1000 with group 0 opens a root:root "
	       "0660 file");
	expect(chunk(&p, &g0, ex[0].g0, true), EACCES,
	       "maproot=nobody: a CHUNK write as gid 0");
	peer_close(&p);
	/* maproot=0: nothing is squashed, group 0 is group 0. */
	session(&p, "/team");
	must(lookup(&p, ex[2].dir, "g0", NULL), "lookup g0");
	must(open_as(&p, &g0, ex[2].g0, O_RDWR),
	     "maproot=0: uid 1000 gid 0 opens a root:root 0660 file");
	must(open_as(&p, &sup0, ex[2].g0, O_RDWR),
	     "maproot=0: uid 1000 with group 0 opens it");
	peer_close(&p);
	ok("gid0: group 0 is squashed with root under maproot=nobody, as "
	   "knfsd does; not under maproot=0");
}

/* ---- what only root or a writer may do ------------------------------------ */

static int set_xattr(struct peer *p, Sweepfs__Cred *cred, uint64_t ino,
		     const char *name)
{
	Sweepfs__SetxattrReq q = SWEEPFS__SETXATTR_REQ__INIT;

	q.cred = cred;
	q.ino = ino;
	q.name = str(name);
	q.value = str("\x01\x00\x00\x02");
	return peer_call(p, SW_MSG_SETXATTR, &q.base);
}

/*
 * Through /team (no squashing): uid 1000 may not clear the set-id bits
 * of a root 04755 file it may not write (the kernel's "kill suid" of a
 * write), nor set security.* names on its own file (file capabilities
 * would be given to whoever runs it on any client); it may do both on
 * what it owns or may write, and root may set security.* names.
 */
static void check_root_only(void)
{
	struct peer adm, p;
	uint64_t team, suid, mine;

	session(&adm, "/");
	must(lookup(&adm, ROOT, "team", &team), "lookup /team");
	suid = make(&adm, team, "suid", 04755);
	mine = make(&adm, team, "mine", 04755);
	{
		Sweepfs__SetattrReq q = SWEEPFS__SETATTR_REQ__INIT;

		q.cred = &root_cred;
		q.ino = mine;
		q.valid = SWEEPFS__SETATTR_VALID__SET_UID |
			  SWEEPFS__SETATTR_VALID__SET_GID |
			  SWEEPFS__SETATTR_VALID__SET_MODE;
		q.has_uid = q.has_gid = q.has_mode = 1;
		q.uid = q.gid = 1000;
		q.mode = 04755;
		must(peer_call(&adm, SW_MSG_SETATTR, &q.base),
		     "chown mine to 1000");
	}
	session(&p, "/team");
	must(lookup(&p, team, "suid", NULL), "lookup suid");
	must(lookup(&p, team, "mine", NULL), "lookup mine");
	expect(setattr(&p, &user_cred, suid,
		       SWEEPFS__SETATTR_VALID__SET_KILL_SUIDGID, 0),
	       EPERM, "uid 1000 clears the set-id bits of a root 04755 file");
	if ((attr_of(&p, suid).mode & 07777) != 04755)
		fail("the root file's set-id bit went");
	must(setattr(&p, &user_cred, mine,
		     SWEEPFS__SETATTR_VALID__SET_KILL_SUIDGID, 0),
	     "uid 1000 clears the set-id bits of its own file");
	if ((attr_of(&p, mine).mode & 07777) != 0755)
		fail("the owner's kill-suid did not take");
	expect(set_xattr(&p, &user_cred, mine, "security.capability"), EPERM,
	       "uid 1000 sets security.capability on its own file");
	expect(set_xattr(&p, &user_cred, mine, "security.other"), EPERM,
	       "uid 1000 sets a security.* name on its own file");
	must(set_xattr(&p, &user_cred, mine, "user.fine"),
	     "uid 1000 sets a user.* name on its own file");
	must(set_xattr(&p, &root_cred, mine, "security.capability"),
	     "root sets security.capability");
	peer_close(&p);
	peer_close(&adm);
	ok("root-only: kill-suid needs write access; security.* names need "
	   "root");
}

/*
 * A session may not make another's delegation be recalled through a
 * node it may not use: a /pub session's GETATTR of a file in a
 * directory 127.0.0.3's /team holds is refused at once (ESTALE), and the
 * holder is sent no recall.
 */
static void check_recall_confined(void)
{
	struct hello o = { .subdir = "/team", .from = "127.0.0.3" };
	Sweepfs__DelegReq d = SWEEPFS__DELEG_REQ__INIT;
	Sweepfs__DelegReply *dr;
	Sweepfs__GetattrReq g = SWEEPFS__GETATTR_REQ__INIT;
	struct sw_frame_hdr hdr;
	struct peer holder, p;
	uint64_t team, held, f, id;
	uint8_t *payload;
	int64_t t0;
	int err, rc;

	team = hello(&holder, &o);
	held = make(&holder, team, "held", S_IFDIR | 0755);
	f = make(&holder, held, "f", 0644);
	d.dir = held;
	id = peer_send(&holder, SW_MSG_DELEG, 0, &d.base);
	dr = (Sweepfs__DelegReply *)peer_reply(&holder, SW_MSG_DELEG, id, &err);
	if (err || !dr->granted)
		fail("recall: the holder was not granted its directory");
	sweepfs__deleg_reply__free_unpacked(dr, NULL);
	session(&p, "/pub");
	g.ino = f;
	t0 = now_ms();
	expect(peer_call(&p, SW_MSG_GETATTR, &g.base), ESTALE,
	       "a /pub session's GETATTR of a file in /team, by number");
	if (now_ms() - t0 > 1000)
		fail("recall: the refusal took %" PRId64 " ms", now_ms() - t0);
	rc = peer_recv(&holder, &hdr, &payload, 300);
	if (rc > 0) {
		free(payload);
		if (hdr.type == SW_MSG_DELEG_RECALL)
			fail("recall: the holder was told to give its directory "
			     "back for a request that could not use it");
	}
	peer_close(&p);
	peer_close(&holder);
	ok("recall: a node a confined session may not use recalls nothing");
}

/* ---- inode ranges ------------------------------------------------------------ */

/* The session of the range, the same before and after the restart. */
static uint64_t inos_sid(uint64_t seed)
{
	return 0x1205000000000000ull | (seed & 0xffffffff);
}

/* The proof of [@first, @first + @count) for session @sid, as the master
 * makes it from session.key. */
static void ino_proof(uint64_t sid, uint64_t first, uint32_t count,
		      uint8_t out[SW_AUTH_TAG])
{
	uint8_t key[SW_AUTH_KEY], b[20];

	if (sw_auth_key_load(session_key_file, key) < 0)
		fail("cannot read %s", session_key_file);
	for (int i = 0; i < 8; i++) {
		b[i] = (uint8_t)(sid >> (8 * i));
		b[8 + i] = (uint8_t)(first >> (8 * i));
	}
	for (int i = 0; i < 4; i++)
		b[16 + i] = (uint8_t)(count >> (8 * i));
	sw_auth_tag(key, SW_AUTH_INO_RANGE, b, sizeof(b), NULL, 0, out);
}

/* A BATCH of one create of @name in @parent numbered @ino: its error. */
static int batch_create(struct peer *p, uint64_t parent, const char *name,
			uint64_t ino)
{
	Sweepfs__BatchOp o;

	peer_create_op(&o, &root_cred, parent, name, S_IFREG | 0644, ino);
	return peer_batch_one(p, &o);
}

static void check_inos(uint64_t seed)
{
	struct hello o = { .subdir = "/team",
			   .from = "127.0.0.3",
			   .proven = inos_sid(seed) };
	Sweepfs__DelegReq d = SWEEPFS__DELEG_REQ__INIT;
	Sweepfs__InoRangeReq q = SWEEPFS__INO_RANGE_REQ__INIT;
	Sweepfs__DelegReply *dr;
	Sweepfs__InoRangeReply *r;
	uint8_t want[SW_AUTH_TAG];
	struct peer p;
	uint64_t team, dir, id, first;
	uint32_t count;
	int err;

	team = hello(&p, &o);
	dir = make(&p, team, "inos", S_IFDIR | 0755);
	d.dir = dir;
	id = peer_send(&p, SW_MSG_DELEG, 0, &d.base);
	dr = (Sweepfs__DelegReply *)peer_reply(&p, SW_MSG_DELEG, id, &err);
	if (err || !dr->granted)
		fail("inos: the session was not granted its directory");
	sweepfs__deleg_reply__free_unpacked(dr, NULL);
	q.count = 16;
	id = peer_send(&p, SW_MSG_INO_RANGE, 0, &q.base);
	r = (Sweepfs__InoRangeReply *)peer_reply(&p, SW_MSG_INO_RANGE, id,
						 &err);
	if (err || !r->first || r->count != 16)
		fail("inos: no range of 16 numbers (%s)", strerror(err));
	first = r->first;
	count = r->count;
	ino_proof(o.proven, first, count, want);
	if (!r->has_proof || r->proof.len != sizeof(want) ||
	    memcmp(r->proof.data, want, sizeof(want)))
		fail("inos: the range came without its proof");
	sweepfs__ino_range_reply__free_unpacked(r, NULL);
	must(batch_create(&p, dir, "first", first),
	     "a batch create with the range's first number");
	peer_close(&p);
	printf("inos: range %" PRIu64 " %" PRIu32 "\n", first, count);
	ok("inos: a range comes with the session key's proof");
}

static void check_inos_after(uint64_t seed, const char *arg)
{
	struct hello o = { .subdir = "/team", .from = "127.0.0.3" };
	Sweepfs__InoClaim claim = SWEEPFS__INO_CLAIM__INIT,
			  *claims[1] = { &claim };
	uint8_t proof[SW_AUTH_TAG];
	struct peer p;
	uint64_t team, dir, mine, first, ino = 0;
	unsigned count;

	if (sscanf(arg, "%" SCNu64 ":%u", &first, &count) != 2 || !count)
		fail("inos-after=FIRST:COUNT, not %s", arg);
	/* Another session, in its own directory. */
	team = hello(&p, &o);
	dir = make(&p, team, "inos-other", S_IFDIR | 0755);
	expect(batch_create(&p, dir, "taken", first + 1), EINVAL,
	       "another session's batch create with a number of the range, "
	       "after a restart");
	must(lookup(&p, team, "inos", &mine), "lookup /team/inos");
	peer_close(&p);
	/* The range's own session, claiming it with a wrong proof, then
	 * with none. */
	ino_proof(inos_sid(seed), first, count, proof);
	proof[0] ^= 1;
	claim.first = first;
	claim.count = count;
	claim.proof = (ProtobufCBinaryData){ sizeof(proof), proof };
	o.proven = inos_sid(seed);
	o.inos = claims;
	o.ninos = 1;
	hello(&p, &o);
	expect(batch_create(&p, mine, "mine", first + 1), EINVAL,
	       "the session's batch create, its range claimed with a wrong "
	       "proof");
	peer_close(&p);
	o.ninos = 0;
	hello(&p, &o);
	expect(batch_create(&p, mine, "mine", first + 1), EINVAL,
	       "the session's batch create, its range not claimed");
	peer_close(&p);
	/* With the right proof: made, with that number. */
	proof[0] ^= 1;
	o.ninos = 1;
	hello(&p, &o);
	must(batch_create(&p, mine, "mine", first + 1),
	     "the session's batch create, its range claimed with its proof");
	must(lookup(&p, mine, "mine", &ino), "lookup inos/mine");
	if (ino != first + 1)
		fail("inos: the node made has number %" PRIu64 ", not %" PRIu64,
		     ino, first + 1);
	peer_close(&p);
	ok("inos: after a restart only the session that proves it was given "
	   "a range makes nodes with its numbers");
}

/* ---- a session resumed on another connection ------------------------------ */

static void check_resume(uint64_t seed)
{
	struct hello o = { .subdir = "/team",
			   .from = "127.0.0.3",
			   .proven = 0x2e50000000000000ull |
				     (seed & 0xffffffff) };
	struct hello other = { .subdir = "/team", .from = "127.0.0.3" };
	Sweepfs__DelegReq d = SWEEPFS__DELEG_REQ__INIT;
	Sweepfs__DelegReply *dr;
	struct peer old, again, q;
	uint64_t team, dir, id;
	int64_t t0;
	int err;

	team = hello(&old, &o);
	dir = make(&old, team, "resumed", S_IFDIR | 0755);
	d.dir = dir;
	id = peer_send(&old, SW_MSG_DELEG, 0, &d.base);
	dr = (Sweepfs__DelegReply *)peer_reply(&old, SW_MSG_DELEG, id, &err);
	if (err || !dr->granted)
		fail("resume: the session was not granted its directory");
	sweepfs__deleg_reply__free_unpacked(dr, NULL);
	/* The same session on a new connection; the old one stays open
	 * and unread. */
	hello(&again, &o);
	hello(&q, &other);
	t0 = now_ms();
	id = peer_send(&q, SW_MSG_DELEG, 0, &d.base);
	dr = (Sweepfs__DelegReply *)peer_reply(&q, SW_MSG_DELEG, id, &err);
	if (err || !dr->granted)
		fail("resume: another session was not granted the directory "
		     "(%s)",
		     err ? strerror(err) : "refused");
	sweepfs__deleg_reply__free_unpacked(dr, NULL);
	if (now_ms() - t0 > 1000)
		fail("resume: the grant took %" PRId64 " ms: the resumed "
		     "session's old connection still held the directory",
		     now_ms() - t0);
	peer_close(&q);
	peer_close(&again);
	peer_close(&old);
	ok("resume: a session resumed on a new connection holds nothing of "
	   "its old one's");
}

/* ---- times ------------------------------------------------------------------- */

/*
 * A writer that is not the owner may set "now", not any time: uid 1000's
 * SETATTR of MTIME_NOW carrying 1970-01-02, and its WRITE_END carrying
 * the same, on a root 0666 file leave an mtime of about now; the owner
 * may set any time.
 */
static void check_times(void)
{
	const int64_t past = 86400LL * 1000000000LL,
		      skew = 120LL * 1000000000LL;
	Sweepfs__SetattrReq q = SWEEPFS__SETATTR_REQ__INIT;
	Sweepfs__WriteEndReq w = SWEEPFS__WRITE_END_REQ__INIT;
	struct peer adm, p;
	uint64_t team, f;
	int64_t now;

	session(&adm, "/");
	must(lookup(&adm, ROOT, "team", &team), "lookup /team");
	f = make(&adm, team, "times", 0666);
	session(&p, "/team");
	must(lookup(&p, team, "times", NULL), "lookup times");
	q.cred = &user_cred;
	q.ino = f;
	q.valid = SWEEPFS__SETATTR_VALID__SET_MTIME_NOW;
	q.has_mtime = 1;
	q.mtime = past;
	must(peer_call(&p, SW_MSG_SETATTR, &q.base), "uid 1000 touches");
	now = (int64_t)time(NULL) * 1000000000LL;
	if (llabs(attr_of(&p, f).mtime - now) > skew)
		fail("times: a writer set mtime %" PRId64 " s with \"now\"",
		     (int64_t)(attr_of(&p, f).mtime / 1000000000));
	w.cred = &user_cred;
	w.ino = f;
	w.size = 0;
	w.has_mtime = 1;
	w.mtime = past;
	must(peer_call(&p, SW_MSG_WRITE_END, &w.base), "uid 1000 write-end");
	if (llabs(attr_of(&p, f).mtime - now) > skew)
		fail("times: a writer's WRITE_END set mtime %" PRId64 " s",
		     (int64_t)(attr_of(&p, f).mtime / 1000000000));
	/* The owner (root) may set the past. */
	q.cred = &root_cred;
	q.valid = SWEEPFS__SETATTR_VALID__SET_MTIME;
	must(peer_call(&adm, SW_MSG_SETATTR, &q.base), "root sets mtime");
	if (attr_of(&adm, f).mtime != past)
		fail("times: the owner could not set the past");
	peer_close(&p);
	peer_close(&adm);
	ok("times: a writer that is not the owner sets now, not any time");
}

/* ---- recursive changes ------------------------------------------------------ */

/* GOAL of @ino as @cred: with @goal >= 0 set it (recursively with @rec);
 * the goal it has after, or -errno. */
static int goal(struct peer *p, Sweepfs__Cred *cred, uint64_t ino, int goal,
		bool rec)
{
	Sweepfs__GoalReq q = SWEEPFS__GOAL_REQ__INIT;
	Sweepfs__GoalReply *r;
	uint64_t id;
	int err, g;

	q.cred = cred;
	q.ino = ino;
	q.has_goal = goal >= 0;
	q.goal = (uint32_t)goal;
	q.has_recursive = 1;
	q.recursive = rec;
	id = peer_send(p, SW_MSG_GOAL, 0, &q.base);
	r = (Sweepfs__GoalReply *)peer_reply(p, SW_MSG_GOAL, id, &err);
	g = err ? -err : (int)r->goal;
	sweepfs__goal_reply__free_unpacked(r, NULL);
	return g;
}

static int trashtime(struct peer *p, Sweepfs__Cred *cred, uint64_t ino,
		     int64_t seconds, bool rec)
{
	Sweepfs__TrashtimeReq q = SWEEPFS__TRASHTIME_REQ__INIT;
	Sweepfs__TrashtimeReply *r;
	uint64_t id;
	int err;
	int64_t s;

	q.cred = cred;
	q.ino = ino;
	q.has_seconds = seconds >= 0;
	q.seconds = (uint32_t)seconds;
	q.has_recursive = 1;
	q.recursive = rec;
	id = peer_send(p, SW_MSG_TRASHTIME, 0, &q.base);
	r = (Sweepfs__TrashtimeReply *)peer_reply(p, SW_MSG_TRASHTIME, id,
						  &err);
	s = err ? -err : (int64_t)r->seconds;
	sweepfs__trashtime_reply__free_unpacked(r, NULL);
	return (int)s;
}

/*
 * uid 1000's own directory in /team holds a root file and a root
 * directory: its recursive goal and trash time change its own nodes
 * only, as mfssetgoal -r does for whoever is not root; an admin's root
 * changes them all.
 */
static void check_recursive(void)
{
	struct peer adm, p;
	uint64_t team, u, rf, rd, of;
	Sweepfs__SetattrReq q = SWEEPFS__SETATTR_REQ__INIT;

	session(&adm, "/");
	must(lookup(&adm, ROOT, "team", &team), "lookup /team");
	u = make(&adm, team, "u", S_IFDIR | 0777);
	rf = make(&adm, u, "rootfile", 0644);
	rd = make(&adm, u, "rootdir", S_IFDIR | 0755);
	of = make(&adm, u, "own", 0644);
	q.cred = &root_cred;
	q.valid = SWEEPFS__SETATTR_VALID__SET_UID |
		  SWEEPFS__SETATTR_VALID__SET_GID;
	q.has_uid = q.has_gid = 1;
	q.uid = q.gid = 1000;
	q.ino = u;
	must(peer_call(&adm, SW_MSG_SETATTR, &q.base), "chown u");
	q.ino = of;
	must(peer_call(&adm, SW_MSG_SETATTR, &q.base), "chown own");
	session(&p, "/team");
	must(lookup(&p, u, "rootfile", NULL), "lookup rootfile");
	must(lookup(&p, u, "own", NULL), "lookup own");
	if (goal(&p, &user_cred, u, 7, true) != 7)
		fail("recursive: uid 1000 could not set its directory's goal");
	if (goal(&p, &user_cred, of, -1, false) != 7)
		fail("recursive: uid 1000's own file did not take goal 7");
	if (goal(&adm, &root_cred, rf, -1, false) == 7)
		fail("recursive: uid 1000's recursive goal reached a root "
		     "file");
	if (trashtime(&p, &user_cred, u, 2000000000, true) < 0)
		fail("recursive: uid 1000 could not set its trash time");
	if (trashtime(&adm, &root_cred, rd, -1, false) == 2000000000)
		fail("recursive: uid 1000's recursive trash time reached a "
		     "root directory");
	/* An admin's root changes everything below. */
	if (goal(&adm, &root_cred, u, 6, true) != 6 ||
	    goal(&adm, &root_cred, rf, -1, false) != 6)
		fail("recursive: the admin's recursive goal did not reach the "
		     "root file");
	peer_close(&p);
	peer_close(&adm);
	ok("recursive: a user's recursive goal and trash time change only "
	   "its own nodes; an admin's all");
}

/* ---- grants --------------------------------------------------------------- */

/* Make @n empty files in @dir, pipelined 500 at a time. */
static void fill(struct peer *p, uint64_t dir, unsigned n)
{
	char name[32];

	for (unsigned done = 0; done < n;) {
		unsigned k = SW_MIN(500u, n - done);
		uint64_t first = p->next_id;

		for (unsigned i = 0; i < k; i++) {
			Sweepfs__CreateReq c = SWEEPFS__CREATE_REQ__INIT;

			snprintf(name, sizeof(name), "f%07u", done + i);
			c.cred = &root_cred;
			c.parent = dir;
			c.name = str(name);
			c.mode = S_IFREG | 0644;
			c.flags = O_RDONLY;
			peer_send(p, SW_MSG_CREATE, 0, &c.base);
		}
		for (unsigned i = 0; i < k; i++) {
			ProtobufCMessage *r;
			int err;

			r = peer_reply(p, SW_MSG_CREATE, first + i, &err);
			must(err, "create in the large directory");
			protobuf_c_message_free_unpacked(r, NULL);
		}
		done += k;
	}
}

/*
 * Pipelined DELEG and DELEG_RETURN of a directory of @n entries, @pairs
 * times, from an export that may hold delegations: another client's
 * pings stay under @max_ms, and grants are refused once their cost is
 * spent (or, past DELEG_WALK_SYNC entries, while the session's walk in
 * slices is on), rather than freezing the loop.
 */
static void check_grants(unsigned n, unsigned pairs, double max_ms)
{
	struct peer p;
	struct hello o = { .subdir = "/team", .from = "127.0.0.3" };
	struct peer_pinger pg;
	unsigned granted = 0;
	uint64_t team, big, first;
	double worst;

	/* Made by the session that asks for it: another that had listed
	 * or made it would be caching it, and no grant would be made. */
	team = hello(&p, &o);
	big = make(&p, team, "big", S_IFDIR | 0777);
	fill(&p, big, n);
	peer_pinger_start(&pg, m_port, "/pub");
	first = p.next_id;
	for (unsigned i = 0; i < pairs; i++) {
		Sweepfs__DelegReq d = SWEEPFS__DELEG_REQ__INIT;
		Sweepfs__DelegReturnReq r = SWEEPFS__DELEG_RETURN_REQ__INIT;

		d.dir = r.dir = big;
		peer_send(&p, SW_MSG_DELEG, 0, &d.base);
		peer_send(&p, SW_MSG_DELEG_RETURN, 0, &r.base);
	}
	/* In any order: a grant of a large directory is answered when its
	 * walk ends (master/deleg.c), after the requests behind it. */
	for (unsigned got = 0; got < 2 * pairs;) {
		struct sw_frame_hdr h;
		uint8_t *payload;
		Sweepfs__DelegReply *d;
		int rc = peer_recv(&p, &h, &payload, 30000);

		if (rc != 1)
			fail("grants: no answer to the DELEG/DELEG_RETURN "
			     "pairs (%d)",
			     rc);
		if (h.flags == SW_FRAME_NOTIFY) {
			free(payload);
			continue;
		}
		if (h.flags != SW_FRAME_REPLY || h.id < first ||
		    h.id >= first + 2 * pairs ||
		    h.type != ((h.id - first) % 2 ? SW_MSG_DELEG_RETURN :
						    SW_MSG_DELEG))
			fail("grants: type %u id %" PRIu64 " flags %#x is "
			     "no answer to a pair",
			     h.type, h.id, h.flags);
		if (h.type == SW_MSG_DELEG) {
			d = sweepfs__deleg_reply__unpack(NULL, h.len, payload);
			if (!d || !d->has_granted)
				fail("grants: DELEG answered without "
				     "granted");
			granted += d->granted;
			sweepfs__deleg_reply__free_unpacked(d, NULL);
		}
		free(payload);
		got++;
	}
	worst = peer_pinger_stop(&pg);
	peer_close(&p);
	if (worst > max_ms)
		fail("grants: another client's ping took %.1f ms (at most "
		     "%.0f) during %u DELEG/DELEG_RETURN pairs of %u entries",
		     worst, max_ms, pairs, n);
	if (!granted)
		fail("grants: no DELEG of the %u-entry directory was granted",
		     n);
	if (granted == pairs)
		fail("grants: all %u grants of the %u-entry directory were "
		     "made at once",
		     pairs, n);
	ok("grants: %u pipelined DELEG/DELEG_RETURN pairs of a %u-entry "
	   "directory: %u granted, the rest refused; another client's "
	   "slowest ping %.1f ms",
	   pairs, n, granted, worst);
}

/* ---- INFO ------------------------------------------------------------------- */

/* INFO as @cred (NULL: none sent) on @p's session. */
static Sweepfs__InfoReply *info(struct peer *p, Sweepfs__Cred *cred)
{
	Sweepfs__InfoReq q = SWEEPFS__INFO_REQ__INIT;
	Sweepfs__InfoReply *r;
	uint64_t id;
	int err;

	q.cred = cred;
	id = peer_send(p, SW_MSG_INFO, 0, &q.base);
	r = (Sweepfs__InfoReply *)peer_reply(p, SW_MSG_INFO, id, &err);
	if (err)
		fail("info: %s", strerror(err));
	return r;
}

/* Fail unless @r, the INFO reply to @who, is limited (InfoReply): no
 * count of the namespace, no chunkserver, no member, and among the
 * slowest requests only its own session @sid's (which may be named). */
static void check_limited(Sweepfs__InfoReply *r, const char *who, uint64_t sid)
{
	if (!r->limited || r->has_nodes || r->has_names || r->has_connections ||
	    r->total || r->n_servers || r->n_members || r->has_trash_items)
		fail("info: %s is told the master's counters (limited %d, "
		     "nodes %d, servers %zu)",
		     who, r->limited, r->has_nodes, r->n_servers);
	for (size_t i = 0; i < r->n_slowest; i++) {
		const Sweepfs__SlowRequest *s = r->slowest[i];

		if (!s->has_session_id || s->session_id != sid)
			fail("info: %s sees another session's request among "
			     "the slowest",
			     who);
	}
}

static void check_info(void)
{
	struct peer adm, ro;
	Sweepfs__InfoReply *r;
	size_t others = 0;

	uint64_t ro_sid, adm_sid;

	session(&adm, "/");
	adm_sid = last_sid;
	session(&ro, "/pub");
	ro_sid = last_sid;
	/* Requests of the admin's session fill the slowest list. */
	for (int i = 0; i < 200; i++)
		attr_of(&adm, ROOT);
	peer_ping(&ro);
	/* Admin is root on an admin export: its other users, and root on
	 * an export without admin, learn nothing of the others. */
	r = info(&adm, &user_cred);
	check_limited(r, "uid 1000 on the admin export", adm_sid);
	sweepfs__info_reply__free_unpacked(r, NULL);
	r = info(&adm, NULL);
	check_limited(r, "a caller naming no one on the admin export", adm_sid);
	sweepfs__info_reply__free_unpacked(r, NULL);
	r = info(&ro, &root_cred);
	check_limited(r, "root on the read-only export", ro_sid);
	if (!r->has_purge_roots || !r->server_version)
		fail("info: a limited reply without the purge's progress");
	sweepfs__info_reply__free_unpacked(r, NULL);
	/* The admin's many getattrs above fill the slowest list: check_limited()
	 * failed had the read-only session seen any of them. */
	r = info(&adm, &root_cred);
	for (size_t i = 0; i < r->n_slowest; i++)
		others += r->slowest[i]->has_session_id;
	if (r->limited || !r->has_nodes || !r->nodes || !r->total)
		fail("info: root on the admin export is not told the "
		     "counters");
	sweepfs__info_reply__free_unpacked(r, NULL);
	if (!others)
		fail("info: the admin sees no session ids among the slowest");
	peer_close(&ro);
	peer_close(&adm);
	ok("info: counters and the slowest requests' sessions to admin "
	   "root only");
}

int main(int argc, char **argv)
{
	uint64_t seed = 1;
	double max_ms = 100;
	int opt;

	while ((opt = getopt(argc, argv, "m:p:k:P:c:s:t:")) != -1) {
		switch (opt) {
		case 'c':
			c_port = (uint16_t)atoi(optarg);
			break;
		case 't':
			max_ms = atof(optarg);
			break;
		case 'm':
			m_port = (uint16_t)atoi(optarg);
			break;
		case 'p':
			m_pid = (pid_t)atoi(optarg);
			break;
		case 'k':
			session_key_file = optarg;
			break;
		case 'P':
			admin_pw = optarg;
			break;
		case 's':
			seed = strtoull(optarg, NULL, 10);
			break;
		default:
			return 2;
		}
	}
	if (!m_port || !m_pid || !session_key_file || !admin_pw ||
	    optind == argc) {
		fprintf(stderr, "usage: see the top of trust.c\n");
		return 2;
	}
	rng_state = seed | 1;
	user_cred.uid = user_cred.gid = 1000;
	signal(SIGPIPE, SIG_IGN);
	for (int i = optind; i < argc; i++) {
		const char *c = argv[i];

		if (!strcmp(c, "setup"))
			check_setup();
		else if (!strcmp(c, "reclaim"))
			check_reclaim();
		else if (!strcmp(c, "viafd"))
			check_viafd();
		else if (!strcmp(c, "again"))
			check_again(seed, false);
		else if (!strcmp(c, "again-made"))
			check_again(seed, true);
		else if (!strcmp(c, "gid0"))
			check_gid0();
		else if (!strcmp(c, "info"))
			check_info();
		else if (!strcmp(c, "byno"))
			check_by_number();
		else if (!strcmp(c, "rootonly"))
			check_root_only();
		else if (!strcmp(c, "recall"))
			check_recall_confined();
		else if (!strcmp(c, "recursive"))
			check_recursive();
		else if (!strcmp(c, "times"))
			check_times();
		else if (!strcmp(c, "resume"))
			check_resume(seed);
		else if (!strcmp(c, "inos"))
			check_inos(seed);
		else if (!strncmp(c, "inos-after=", 11))
			check_inos_after(seed, c + 11);
		else if (!strcmp(c, "wronly"))
			check_wronly();
		else if (!strncmp(c, "grants=", 7))
			check_grants((unsigned)atoi(c + 7), 400, max_ms);
		else
			fail("unknown check %s", c);
		alive(m_pid, "master");
	}
	return 0;
}
