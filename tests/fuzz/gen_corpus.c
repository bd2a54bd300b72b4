/*
 * gen_corpus CORPUS_DIR DICT
 *
 * Writes the seed inputs of the fuzz targets, CORPUS_DIR/<target>/seed-*,
 * and their dictionary: valid frames of every request type the targets
 * serve, in the input layouts fuzz_frame.c, fuzz_master.c and
 * fuzz_chunkserver.c describe, and the frame headers, type numbers and
 * field tags a mutator cannot guess. The output is the same on every
 * run (tokens carry a fixed expiry), so the seeds are committed as
 * generated; run it again after a protocol change:
 *
 *   build-fz/tests/fuzz/gen_corpus tests/fuzz/corpus tests/fuzz/sweepfs.dict
 *
 * Inputs the fuzzers found and crashes they once hit live next to the
 * seeds and are never overwritten here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "entries.h"
#include "frame.h"
#include "token.h"
#include "util.h"

/* fuzz_chunkserver.c's key, and an expiry no run reaches (2100-01-01). */
#define FUZZ_KEY "sweepfs-fuzz-key"
#define FAR_EXPIRY 4102444800000ull
#define ROOT 1

static const char *corpus_dir;

static ProtobufCBinaryData bytes(const char *s);

/* ---- building inputs ---------------------------------------------------- */

struct input {
	uint8_t data[1u << 20];
	size_t len;
	uint64_t next_id;
};

static struct input in;

static void die(const char *what)
{
	fprintf(stderr, "gen_corpus: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void begin(uint8_t mode)
{
	in.len = 0;
	in.next_id = 2; /* 1 is the harness's hello */
	in.data[in.len++] = mode;
}

static void raw(const void *p, size_t n)
{
	if (n > sizeof(in.data) - in.len) {
		fprintf(stderr, "gen_corpus: input too large\n");
		exit(1);
	}
	memcpy(in.data + in.len, p, n);
	in.len += n;
}

/* The first payload made of each type, for fuzz_frame's seeds. */
static struct {
	uint8_t *p;
	size_t len;
} first[SW_MSG__COUNT];

static void frame_f(uint16_t type, uint16_t flags, const ProtobufCMessage *msg)
{
	uint8_t *buf = malloc(sw_frame_size(msg));
	size_t n;

	if (!buf)
		die("malloc");
	n = sw_frame_pack(buf, type, flags, in.next_id++, msg);
	raw(buf, n);
	if (type < SW_MSG__COUNT && msg && !first[type].p) {
		first[type].len = n - SW_FRAME_HDR;
		first[type].p = malloc(first[type].len);
		if (!first[type].p)
			die("malloc");
		memcpy(first[type].p, buf + SW_FRAME_HDR, first[type].len);
	}
	free(buf);
}

static void frame(uint16_t type, const ProtobufCMessage *msg)
{
	frame_f(type, 0, msg);
}

/* A bare header, as a peer might send one. */
static void header(uint32_t len, uint16_t type, uint16_t flags, uint64_t id)
{
	struct sw_frame_hdr h = { len, type, flags, id };
	uint8_t b[SW_FRAME_HDR];

	sw_frame_put_hdr(b, &h);
	raw(b, sizeof(b));
}

static void end(const char *target, const char *name)
{
	char path[4200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", corpus_dir, target);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		die(path);
	snprintf(path, sizeof(path), "%s/%s/seed-%s", corpus_dir, target, name);
	f = fopen(path, "w");
	if (!f || fwrite(in.data, 1, in.len, f) != in.len || fclose(f))
		die(path);
}

/*
 * A message of type @d with every required field set and nothing else:
 * numbers 1 (the root's inode), bytes and strings "a", enums their first
 * value, messages likewise. Free it with free_message().
 */
static ProtobufCMessage *min_message(const ProtobufCMessageDescriptor *d)
{
	ProtobufCMessage *m = calloc(1, d->sizeof_message);

	if (!m)
		die("calloc");
	protobuf_c_message_init(d, m);
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		void *p = (char *)m + f->offset;

		if (f->label != PROTOBUF_C_LABEL_REQUIRED)
			continue;
		switch (f->type) {
		case PROTOBUF_C_TYPE_INT32:
		case PROTOBUF_C_TYPE_SINT32:
		case PROTOBUF_C_TYPE_SFIXED32:
		case PROTOBUF_C_TYPE_UINT32:
		case PROTOBUF_C_TYPE_FIXED32:
			*(uint32_t *)p = 1;
			break;
		case PROTOBUF_C_TYPE_INT64:
		case PROTOBUF_C_TYPE_SINT64:
		case PROTOBUF_C_TYPE_SFIXED64:
		case PROTOBUF_C_TYPE_UINT64:
		case PROTOBUF_C_TYPE_FIXED64:
			*(uint64_t *)p = 1;
			break;
		case PROTOBUF_C_TYPE_FLOAT:
			*(float *)p = 1;
			break;
		case PROTOBUF_C_TYPE_DOUBLE:
			*(double *)p = 1;
			break;
		case PROTOBUF_C_TYPE_BOOL:
			*(protobuf_c_boolean *)p = 1;
			break;
		case PROTOBUF_C_TYPE_ENUM:
			*(int *)p =
				((const ProtobufCEnumDescriptor *)f->descriptor)
					->values[0]
					.value;
			break;
		case PROTOBUF_C_TYPE_STRING:
			*(const char **)p = "a";
			break;
		case PROTOBUF_C_TYPE_BYTES:
			*(ProtobufCBinaryData *)p = bytes("a");
			break;
		case PROTOBUF_C_TYPE_MESSAGE:
			*(ProtobufCMessage **)p = min_message(f->descriptor);
			break;
		}
	}
	return m;
}

static void free_message(ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	for (unsigned i = 0; i < d->n_fields; i++)
		if (d->fields[i].label == PROTOBUF_C_LABEL_REQUIRED &&
		    d->fields[i].type == PROTOBUF_C_TYPE_MESSAGE)
			free_message(
				*(ProtobufCMessage **)((char *)m +
						       d->fields[i].offset));
	free(m);
}

/* ---- master requests ---------------------------------------------------- */

static Sweepfs__Cred root_cred = SWEEPFS__CRED__INIT;
static Sweepfs__Cred user_cred = SWEEPFS__CRED__INIT;

static ProtobufCBinaryData bytes(const char *s)
{
	return (ProtobufCBinaryData){ strlen(s), (uint8_t *)s };
}

static void hello(uint32_t version, int role, uint64_t session)
{
	Sweepfs__Hello q = SWEEPFS__HELLO__INIT;

	q.version = version;
	q.role = role;
	q.session_id = session;
	q.has_session_id = session != 0;
	frame(SW_MSG_HELLO, &q.base);
}

static void mknod_(uint16_t type, uint64_t parent, ProtobufCBinaryData name,
		   uint32_t mode)
{
	Sweepfs__MknodReq q = SWEEPFS__MKNOD_REQ__INIT;

	q.cred = &root_cred;
	q.parent = parent;
	q.name = name;
	q.mode = mode;
	frame(type, &q.base);
}

static void mkdir_(uint64_t parent, const char *name)
{
	mknod_(SW_MSG_MKDIR, parent, bytes(name), 040755);
}

static void create_(uint64_t parent, const char *name)
{
	Sweepfs__CreateReq q = SWEEPFS__CREATE_REQ__INIT;

	q.cred = &root_cred;
	q.parent = parent;
	q.name = bytes(name);
	q.mode = 0100644;
	q.flags = O_RDWR | O_CREAT;
	frame(SW_MSG_CREATE, &q.base);
}

static void name_req(uint16_t type, uint64_t parent, ProtobufCBinaryData n)
{
	Sweepfs__NameReq q = SWEEPFS__NAME_REQ__INIT;

	q.cred = &root_cred;
	q.parent = parent;
	q.name = n;
	frame(type, &q.base);
}

static void lookup(uint64_t parent, const char *name)
{
	Sweepfs__LookupReq q = SWEEPFS__LOOKUP_REQ__INIT;

	q.cred = &root_cred;
	q.parent = parent;
	q.name = bytes(name);
	frame(SW_MSG_LOOKUP, &q.base);
}

static void getattr(uint64_t ino)
{
	Sweepfs__GetattrReq q = SWEEPFS__GETATTR_REQ__INIT;

	q.ino = ino;
	frame(SW_MSG_GETATTR, &q.base);
}

static void ino_req(uint16_t type, uint64_t ino)
{
	Sweepfs__InoReq q = SWEEPFS__INO_REQ__INIT;

	q.cred = &root_cred;
	q.ino = ino;
	frame(type, &q.base);
}

static void setattr(uint64_t ino, uint32_t valid, uint32_t mode, uint64_t size)
{
	Sweepfs__SetattrReq q = SWEEPFS__SETATTR_REQ__INIT;

	q.cred = &root_cred;
	q.ino = ino;
	q.valid = valid;
	q.has_mode = 1;
	q.mode = mode;
	q.has_uid = q.has_gid = 1;
	q.uid = q.gid = 1000;
	q.has_size = 1;
	q.size = size;
	q.has_atime = q.has_mtime = 1;
	q.atime = 1000000000;
	q.mtime = -1;
	frame(SW_MSG_SETATTR, &q.base);
}

static void readdir_(uint64_t ino, uint64_t cookie, bool plus)
{
	Sweepfs__ReaddirReq q = SWEEPFS__READDIR_REQ__INIT;

	q.cred = &root_cred;
	q.ino = ino;
	q.cookie = cookie;
	q.max_entries = 100;
	q.max_bytes = 4096;
	q.has_plus = 1;
	q.plus = plus;
	frame(SW_MSG_READDIR, &q.base);
}

static void rename_(uint64_t p, const char *n, uint64_t np, const char *nn,
		    uint32_t flags)
{
	Sweepfs__RenameReq q = SWEEPFS__RENAME_REQ__INIT;

	q.cred = &root_cred;
	q.parent = p;
	q.name = bytes(n);
	q.newparent = np;
	q.newname = bytes(nn);
	q.has_flags = flags != 0;
	q.flags = flags;
	frame(SW_MSG_RENAME, &q.base);
}

static void link_(uint64_t ino, uint64_t np, const char *nn)
{
	Sweepfs__LinkReq q = SWEEPFS__LINK_REQ__INIT;

	q.cred = &root_cred;
	q.ino = ino;
	q.newparent = np;
	q.newname = bytes(nn);
	frame(SW_MSG_LINK, &q.base);
}

static void symlink_(uint64_t p, const char *n, const char *target)
{
	Sweepfs__SymlinkReq q = SWEEPFS__SYMLINK_REQ__INIT;

	q.cred = &root_cred;
	q.parent = p;
	q.name = bytes(n);
	q.target = bytes(target);
	frame(SW_MSG_SYMLINK, &q.base);
}

static void open_(uint64_t ino, uint32_t flags)
{
	Sweepfs__OpenReq q = SWEEPFS__OPEN_REQ__INIT;

	q.cred = &user_cred;
	q.ino = ino;
	q.flags = flags;
	frame(SW_MSG_OPEN, &q.base);
}

static void access_(uint64_t ino, uint32_t mask)
{
	Sweepfs__AccessReq q = SWEEPFS__ACCESS_REQ__INIT;

	q.cred = &user_cred;
	q.ino = ino;
	q.mask = mask;
	frame(SW_MSG_ACCESS, &q.base);
}

static void setxattr_(uint64_t ino, const char *name, const char *value,
		      uint32_t flags)
{
	Sweepfs__SetxattrReq q = SWEEPFS__SETXATTR_REQ__INIT;

	q.cred = &root_cred;
	q.ino = ino;
	q.name = bytes(name);
	q.value = bytes(value);
	q.has_flags = 1;
	q.flags = flags;
	frame(SW_MSG_SETXATTR, &q.base);
}

static void getxattr_(uint16_t type, uint64_t ino, const char *name,
		      uint32_t size)
{
	Sweepfs__GetxattrReq q = SWEEPFS__GETXATTR_REQ__INIT;

	q.cred = &root_cred;
	q.ino = ino;
	if (name) {
		q.has_name = 1;
		q.name = bytes(name);
	}
	q.size = size;
	frame(type, &q.base);
}

static void removexattr_(uint64_t ino, const char *name)
{
	Sweepfs__RemovexattrReq q = SWEEPFS__REMOVEXATTR_REQ__INIT;

	q.cred = &root_cred;
	q.ino = ino;
	q.name = bytes(name);
	frame(SW_MSG_REMOVEXATTR, &q.base);
}

static void info_(bool sessions)
{
	Sweepfs__InfoReq q = SWEEPFS__INFO_REQ__INIT;

	q.has_sessions = 1;
	q.sessions = sessions;
	frame(SW_MSG_INFO, &q.base);
}

static void ping(uint64_t token)
{
	Sweepfs__PingReq q = SWEEPFS__PING_REQ__INIT;

	q.has_token = 1;
	q.token = token;
	frame(SW_MSG_PING, &q.base);
}

static void chunk_(uint64_t ino, uint32_t index, bool write)
{
	Sweepfs__ChunkReq q = SWEEPFS__CHUNK_REQ__INIT;

	q.cred = &root_cred;
	q.ino = ino;
	q.index = index;
	q.has_write = 1;
	q.write = write;
	frame(SW_MSG_CHUNK, &q.base);
}

static void write_end(uint64_t ino, uint64_t size)
{
	Sweepfs__WriteEndReq q = SWEEPFS__WRITE_END_REQ__INIT;

	q.cred = &root_cred;
	q.ino = ino;
	q.size = size;
	q.has_mtime = 1;
	q.mtime = 1700000000000000000;
	frame(SW_MSG_WRITE_END, &q.base);
}

static void rmr(uint64_t parent, const char *name, bool skip_trash)
{
	Sweepfs__RmrReq q = SWEEPFS__RMR_REQ__INIT;

	q.cred = &root_cred;
	q.parent = parent;
	q.name = bytes(name);
	q.has_skip_trash = 1;
	q.skip_trash = skip_trash;
	frame(SW_MSG_RMR, &q.base);
}

static void eattr(uint64_t parent, const char *name, bool set, bool rec)
{
	Sweepfs__EattrReq q = SWEEPFS__EATTR_REQ__INIT;

	q.cred = &root_cred;
	q.parent = parent;
	q.name = bytes(name);
	q.has_set = q.has_recursive = 1;
	q.set = set;
	q.recursive = rec;
	frame(SW_MSG_EATTR, &q.base);
}

static void snapshot(uint64_t src, uint64_t parent, const char *name)
{
	Sweepfs__SnapshotReq q = SWEEPFS__SNAPSHOT_REQ__INIT;

	q.cred = &root_cred;
	q.src = src;
	q.parent = parent;
	q.name = bytes(name);
	frame(SW_MSG_SNAPSHOT, &q.base);
}

static void rmsnapshot(uint64_t parent, const char *name, bool force)
{
	Sweepfs__RmsnapshotReq q = SWEEPFS__RMSNAPSHOT_REQ__INIT;

	q.cred = &root_cred;
	q.parent = parent;
	q.name = bytes(name);
	q.has_force = 1;
	q.force = force;
	frame(SW_MSG_RMSNAPSHOT, &q.base);
}

static void trashtime(uint64_t ino, int64_t seconds, bool rec)
{
	Sweepfs__TrashtimeReq q = SWEEPFS__TRASHTIME_REQ__INIT;

	q.cred = &root_cred;
	q.ino = ino;
	q.has_seconds = seconds >= 0;
	q.seconds = seconds >= 0 ? (uint32_t)seconds : 0;
	q.has_recursive = 1;
	q.recursive = rec;
	frame(SW_MSG_TRASHTIME, &q.base);
}

static void trash(uint32_t op, uint64_t id, uint64_t parent, const char *name)
{
	Sweepfs__TrashReq q = SWEEPFS__TRASH_REQ__INIT;

	q.cred = &root_cred;
	q.op = op;
	q.has_id = id != 0;
	q.id = id;
	q.has_parent = parent != 0;
	q.parent = parent;
	if (name) {
		q.has_name = 1;
		q.name = bytes(name);
	}
	frame(SW_MSG_TRASH, &q.base);
}

static void fsck(uint32_t max)
{
	Sweepfs__FsckReq q = SWEEPFS__FSCK_REQ__INIT;

	q.has_max_problems = 1;
	q.max_problems = max;
	frame(SW_MSG_FSCK, &q.base);
}

/* sweepfs info and du: a file's chunks from slot @first, a tree. */
static void fileinfo(uint64_t ino, uint32_t first)
{
	Sweepfs__FileinfoReq q = SWEEPFS__FILEINFO_REQ__INIT;

	q.cred = &root_cred;
	q.ino = ino;
	q.has_first = 1;
	q.first = first;
	frame(SW_MSG_FILEINFO, &q.base);
}

static void dirinfo(uint64_t ino)
{
	Sweepfs__DirinfoReq q = SWEEPFS__DIRINFO_REQ__INIT;

	q.cred = &root_cred;
	q.ino = ino;
	frame(SW_MSG_DIRINFO, &q.base);
}

/* fuzz_master.c's mode byte: what the harness says first, exports. */
enum { M_MOUNT = 0, M_TOOL = 1, M_CS = 2, M_RAW = 3 };
#define M_EXPORTS(x) ((x) << 2)

static void namespace_ops(void)
{
	mkdir_(ROOT, "a");				/* 2 */
	mkdir_(2, "b");					/* 3 */
	create_(2, "f");				/* 4 */
	mknod_(SW_MSG_MKNOD, 2, bytes("fifo"), 010644); /* 5 */
	lookup(ROOT, "a");
	lookup(2, "nope");
	getattr(4);
	setattr(4, 1 | 8 | 16 | 32, 0600, 100);
	readdir_(ROOT, 0, false);
	readdir_(2, 0, true);
	rename_(2, "f", 3, "g", 0);
	rename_(3, "g", 2, "fifo", 2);
	link_(4, ROOT, "h");
	symlink_(ROOT, "s", "a/b/g");
	ino_req(SW_MSG_READLINK, 7);
	access_(4, 4);
	ino_req(SW_MSG_STATFS, ROOT);
	open_(4, O_RDONLY);
	ino_req(SW_MSG_RELEASE, 4);
	name_req(SW_MSG_UNLINK, ROOT, bytes("h"));
	name_req(SW_MSG_RMDIR, 2, bytes("b"));
	readdir_(2, 1, false);
	info_(true);
	ping(42);
}

static void master_seeds(void)
{
	static const char *const bad_names[] = { "", ".", "..", "a/b", "/" };
	char long_name[257];

	root_cred.uid = root_cred.gid = 0;
	user_cred.uid = user_cred.gid = 1000;

	for (unsigned e = 0; e < 4; e++) {
		char name[32];

		begin(M_MOUNT | M_EXPORTS(e));
		namespace_ops();
		snprintf(name, sizeof(name), "namespace-exports%u", e);
		end("fuzz_master", name);
	}

	begin(M_MOUNT);
	create_(ROOT, "x"); /* 2 */
	setxattr_(2, "user.a", "value", 0);
	setxattr_(2, "user.a", "again", 1);
	setxattr_(2, "trusted.b", "", 2);
	getxattr_(SW_MSG_GETXATTR, 2, "user.a", 0);
	getxattr_(SW_MSG_GETXATTR, 2, "user.a", 100);
	getxattr_(SW_MSG_LISTXATTR, 2, NULL, 0);
	getxattr_(SW_MSG_LISTXATTR, 2, NULL, 1000);
	removexattr_(2, "user.a");
	removexattr_(2, "system.posix_acl_access");
	end("fuzz_master", "xattr");

	begin(M_MOUNT);
	mkdir_(ROOT, "t"); /* 2 */
	mkdir_(2, "u");	   /* 3 */
	create_(3, "v");   /* 4 */
	create_(2, "w");   /* 5 */
	trashtime(ROOT, 3600, true);
	trashtime(2, -1, false);
	name_req(SW_MSG_UNLINK, 2, bytes("w"));
	trash(1, 0, 0, NULL);
	trash(2, 1, 0, NULL);
	trash(2, 1, 2, "restored");
	trash(3, 1, 0, NULL);
	rmr(ROOT, "t", false);
	trash(1, 0, 0, NULL);
	mkdir_(ROOT, "t2");
	rmr(ROOT, "t2", true);
	end("fuzz_master", "removal");

	begin(M_MOUNT);
	mkdir_(ROOT, "d"); /* 2 */
	create_(2, "f1");  /* 3 */
	mkdir_(2, "sub");  /* 4 */
	create_(4, "f2");  /* 5 */
	snapshot(2, ROOT, "snap");
	eattr(ROOT, "snap", true, true);
	eattr(ROOT, "snap", false, false);
	snapshot(3, ROOT, "filecopy");
	snapshot(2, 2, "inside");
	rmsnapshot(ROOT, "snap", false);
	rmsnapshot(ROOT, "d", true);
	end("fuzz_master", "snapshot");

	begin(M_MOUNT);
	create_(ROOT, "data"); /* 2 */
	open_(2, O_RDWR);
	chunk_(2, 0, false);
	chunk_(2, 0, true);
	chunk_(2, 4000000000u, true);
	write_end(2, 1 << 20);
	setattr(2, 8, 0, 5);
	chunk_(2, 0, false);
	ino_req(SW_MSG_RELEASE, 2);
	end("fuzz_master", "data");

	/* An open file loses its last name: an orphan until released. */
	begin(M_MOUNT);
	create_(ROOT, "o"); /* 2 */
	open_(2, O_RDONLY);
	name_req(SW_MSG_UNLINK, ROOT, bytes("o"));
	getattr(2);
	end("fuzz_master", "orphan");

	begin(M_MOUNT);
	for (size_t i = 0; i < SW_ARRAY_SIZE(bad_names); i++)
		mknod_(SW_MSG_MKDIR, ROOT, bytes(bad_names[i]), 040755);
	mknod_(SW_MSG_MKDIR, ROOT,
	       (ProtobufCBinaryData){ 3, (uint8_t *)"a\0b" }, 040755);
	memset(long_name, 'n', 256);
	long_name[256] = '\0';
	mknod_(SW_MSG_MKDIR, ROOT, bytes(long_name), 040755);
	long_name[255] = '\0';
	mknod_(SW_MSG_MKDIR, ROOT, bytes(long_name), 040755);
	readdir_(ROOT, 0, true);
	end("fuzz_master", "names");

	{
		Sweepfs__CsRegisterReq reg = SWEEPFS__CS_REGISTER_REQ__INIT;
		Sweepfs__ChunkInfo ci[2] = { SWEEPFS__CHUNK_INFO__INIT,
					     SWEEPFS__CHUNK_INFO__INIT };
		Sweepfs__ChunkInfo *cip[2] = { &ci[0], &ci[1] };
		Sweepfs__CsHeartbeatReq hb = SWEEPFS__CS_HEARTBEAT_REQ__INIT;
		Sweepfs__CsDoneReq done = SWEEPFS__CS_DONE_REQ__INIT;
		Sweepfs__CsDamagedReq dmg = SWEEPFS__CS_DAMAGED_REQ__INIT;

		begin(M_CS);
		reg.listen = "127.0.0.1:9";
		reg.has_total_bytes = reg.has_used_bytes = 1;
		reg.total_bytes = 1ull << 40;
		reg.used_bytes = 1 << 20;
		ci[0].chunk_id = 1;
		ci[0].version = 1;
		ci[1].chunk_id = 77;
		ci[1].version = 3;
		ci[1].has_damaged = 1;
		ci[1].damaged = 1;
		reg.n_chunks = 2;
		reg.chunks = cip;
		reg.has_more = 1;
		reg.more = 1;
		frame(SW_MSG_CS_REGISTER, &reg.base);
		reg.more = 0;
		reg.n_chunks = 0;
		frame(SW_MSG_CS_REGISTER, &reg.base);
		hb.has_total_bytes = hb.has_used_bytes = hb.has_chunks = 1;
		hb.total_bytes = 1ull << 40;
		hb.chunks = 2;
		frame(SW_MSG_CS_HEARTBEAT, &hb.base);
		done.id = 1;
		done.has_err = 1;
		done.err = EIO;
		frame(SW_MSG_CS_DONE, &done.base);
		dmg.chunk_id = 1;
		dmg.version = 1;
		frame(SW_MSG_CS_DAMAGED, &dmg.base);
		lookup(ROOT, "x");
		end("fuzz_master", "chunkserver");
	}

	begin(M_TOOL);
	info_(true);
	fsck(10);
	mkdir_(ROOT, "a");
	create_(2, "f");
	fileinfo(3, 0);
	fileinfo(3, 4000000000u);
	fileinfo(2, 0);
	dirinfo(ROOT);
	dirinfo(2);
	dirinfo(3);
	ping(7);
	end("fuzz_master", "tool");

	/* What no client should send. */
	begin(M_RAW);
	getattr(ROOT); /* before hello: closed */
	end("fuzz_master", "before-hello");

	begin(M_RAW);
	hello(SW_PROTO_VERSION + 1, SWEEPFS__ROLE__ROLE_MOUNT, 0);
	end("fuzz_master", "bad-version");

	begin(M_RAW);
	hello(SW_PROTO_VERSION, 9, 0);
	end("fuzz_master", "bad-role");

	begin(M_RAW);
	hello(SW_PROTO_VERSION, SWEEPFS__ROLE__ROLE_MOUNT, 0x1234);
	hello(SW_PROTO_VERSION, SWEEPFS__ROLE__ROLE_MOUNT, 0);
	getattr(ROOT);
	end("fuzz_master", "second-hello");

	begin(M_MOUNT);
	frame_f(SW_MSG_GETATTR, SW_FRAME_REPLY, NULL);
	end("fuzz_master", "reply-flag");

	begin(M_MOUNT);
	frame(0, NULL);
	frame(SW_MSG__COUNT, NULL);
	frame(999, NULL);
	frame(0xffff, NULL);
	frame(SW_MSG_INVAL, NULL);
	frame(SW_MSG_CS_COMMAND, NULL);
	frame(SW_MSG_CS_READ, NULL);
	getattr(ROOT);
	end("fuzz_master", "unknown-types");

	begin(M_MOUNT);
	header(SW_FRAME_MAX_META + 1, SW_MSG_GETATTR, 0, 9);
	end("fuzz_master", "oversized");

	begin(M_MOUNT);
	header(100, SW_MSG_GETATTR, 0, 9);
	raw("\x08\x01", 2);
	end("fuzz_master", "half-frame");

	begin(M_MOUNT);
	header(3, SW_MSG_GETATTR, 0, 9);
	raw("\xff\xff\xff", 3);
	end("fuzz_master", "garbage-payload");

	/* Every type with an empty payload, one input each: most do not
	 * parse (required fields) and close the connection; and with its
	 * required fields set, which reaches its handler. */
	for (unsigned t = 1; t < SW_MSG__COUNT; t++) {
		ProtobufCMessage *msg = min_message(sw_msg_info(t)->req);
		char name[32];

		begin(M_MOUNT);
		frame((uint16_t)t, NULL);
		snprintf(name, sizeof(name), "empty-%s", sw_msg_info(t)->name);
		end("fuzz_master", name);
		begin(M_MOUNT);
		frame((uint16_t)t, msg);
		snprintf(name, sizeof(name), "min-%s", sw_msg_info(t)->name);
		end("fuzz_master", name);
		free_message(msg);
	}
}

/* ---- chunkserver requests ------------------------------------------------ */

static uint8_t toks[8][SW_TOKEN_LEN];
static unsigned ntoks;

static ProtobufCBinaryData token(uint64_t id, uint32_t version,
				 enum sw_token_mode mode, uint64_t expires)
{
	uint8_t *t = toks[ntoks++ % SW_ARRAY_SIZE(toks)];

	sw_token_make((const uint8_t *)FUZZ_KEY, id, version, mode, expires, t);
	return (ProtobufCBinaryData){ SW_TOKEN_LEN, t };
}

static void cs_write(uint64_t id, uint32_t version, uint32_t off,
		     const uint8_t *p, size_t n, enum sw_token_mode mode,
		     uint64_t expires)
{
	Sweepfs__CsWriteReq q = SWEEPFS__CS_WRITE_REQ__INIT;

	q.chunk_id = id;
	q.version = version;
	q.offset = off;
	q.data = (ProtobufCBinaryData){ n, (uint8_t *)p };
	q.has_token = q.has_expires = 1;
	q.token = token(id, version, mode, expires);
	q.expires = expires;
	frame(SW_MSG_CS_WRITE, &q.base);
}

static void cs_read(uint64_t id, uint32_t version, uint32_t off, uint32_t size,
		    enum sw_token_mode mode, uint64_t expires)
{
	Sweepfs__CsReadReq q = SWEEPFS__CS_READ_REQ__INIT;

	q.chunk_id = id;
	q.version = version;
	q.offset = off;
	q.size = size;
	q.has_token = q.has_expires = 1;
	q.token = token(id, version, mode, expires);
	q.expires = expires;
	frame(SW_MSG_CS_READ, &q.base);
}

static void cs_sync(uint64_t id, uint32_t version)
{
	Sweepfs__CsSyncReq q = SWEEPFS__CS_SYNC_REQ__INIT;

	q.chunk_id = id;
	q.version = version;
	q.has_token = q.has_expires = 1;
	q.token = token(id, version, SW_TOKEN_READ, FAR_EXPIRY);
	q.expires = FAR_EXPIRY;
	frame(SW_MSG_CS_SYNC, &q.base);
}

enum { C_HELLO = 0, C_RAW = 1, C_SIGN = 2 };

static void chunkserver_seeds(void)
{
	static uint8_t big[40000];
	const uint8_t *hi = (const uint8_t *)"hello, chunk";
	const enum sw_token_mode W = SW_TOKEN_WRITE, R = SW_TOKEN_READ;

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7);

	begin(C_HELLO);
	cs_write(1, 1, 0, hi, 12, W, FAR_EXPIRY);
	cs_read(1, 1, 0, 12, R, FAR_EXPIRY);
	cs_read(1, 1, 0, 100, W, FAR_EXPIRY);
	cs_sync(1, 1);
	ping(5);
	end("fuzz_chunkserver", "write-read");

	begin(C_HELLO);
	cs_write(2, 1, SW_BLOCK_SIZE - 6, hi, 12, W, FAR_EXPIRY);
	cs_read(2, 1, 0, 2 * SW_BLOCK_SIZE, R, FAR_EXPIRY);
	cs_write(2, 1, SW_CHUNK_SIZE - 12, hi, 12, W, FAR_EXPIRY);
	cs_read(2, 1, SW_CHUNK_SIZE - 100, 1000, R, FAR_EXPIRY);
	cs_read(2, 1, SW_CHUNK_SIZE, 1, R, FAR_EXPIRY);
	cs_write(2, 1, SW_CHUNK_SIZE - 6, hi, 12, W, FAR_EXPIRY);
	cs_read(2, 1, 0, SW_IO_MAX + 1, R, FAR_EXPIRY);
	end("fuzz_chunkserver", "boundaries");

	begin(C_HELLO);
	cs_write(3, 1, 1000, big, sizeof(big), W, FAR_EXPIRY);
	cs_read(3, 1, 0, sizeof(big) + 2000, R, FAR_EXPIRY);
	end("fuzz_chunkserver", "big-write");

	begin(C_HELLO);
	{
		Sweepfs__CsWriteReq q = SWEEPFS__CS_WRITE_REQ__INIT;
		uint8_t forged[SW_TOKEN_LEN] = { 1, 2, 3, 4, 5, 6, 7, 8 };

		q.chunk_id = 1;
		q.version = 1;
		q.data = (ProtobufCBinaryData){ 4, (uint8_t *)"evil" };
		q.has_token = q.has_expires = 1;
		q.token = (ProtobufCBinaryData){ sizeof(forged), forged };
		q.expires = FAR_EXPIRY;
		frame(SW_MSG_CS_WRITE, &q.base);
		q.has_token = 0;
		frame(SW_MSG_CS_WRITE, &q.base);
	}
	cs_write(1, 1, 0, hi, 4, R, FAR_EXPIRY); /* read token */
	cs_write(1, 1, 0, hi, 4, W, 1000);	 /* expired */
	cs_write(9, 1, 0, hi, 4, W, FAR_EXPIRY); /* no chunk 9 */
	cs_write(1, 2, 0, hi, 4, W, FAR_EXPIRY); /* wrong version */
	cs_read(2, 1, 0, 10, W, 1000);
	cs_read(1, 1, SW_CHUNK_SIZE + 1, 1, R, FAR_EXPIRY);
	end("fuzz_chunkserver", "bad-tokens");

	begin(C_HELLO);
	ping(1);
	frame(999, NULL);
	getattr(ROOT);
	hello(SW_PROTO_VERSION, SWEEPFS__ROLE__ROLE_MOUNT, 0);
	frame_f(SW_MSG_PING, SW_FRAME_REPLY, NULL);
	end("fuzz_chunkserver", "other-types");

	begin(C_RAW);
	cs_read(1, 1, 0, 10, R, FAR_EXPIRY);
	end("fuzz_chunkserver", "before-hello");

	begin(C_RAW);
	hello(SW_PROTO_VERSION + 1, SWEEPFS__ROLE__ROLE_MOUNT, 0);
	ping(1);
	end("fuzz_chunkserver", "bad-version");

	begin(C_RAW);
	hello(SW_PROTO_VERSION, SWEEPFS__ROLE__ROLE_CHUNKSERVER, 0);
	cs_sync(3, 1);
	end("fuzz_chunkserver", "peer-hello");

	begin(C_SIGN);
	cs_write(1, 1, 5, hi, 12, W, FAR_EXPIRY);
	cs_write(7, 1, 5, hi, 12, W, FAR_EXPIRY);
	cs_read(1, 1, 0, 100, R, FAR_EXPIRY);
	cs_sync(2, 3);
	end("fuzz_chunkserver", "signed");

	begin(C_HELLO);
	header(SW_FRAME_MAX_DATA + 1, SW_MSG_CS_WRITE, 0, 3);
	end("fuzz_chunkserver", "oversized");

	begin(C_HELLO);
	header(30000, SW_MSG_CS_WRITE, 0, 3);
	raw(big, 1000);
	end("fuzz_chunkserver", "half-big-frame");

	begin(C_HELLO);
	header(10, SW_MSG_CS_READ, 0, 3);
	raw("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 10);
	end("fuzz_chunkserver", "garbage-payload");
}

/* ---- frame decoding ---------------------------------------------------------- */

static void frame_seeds(void)
{
	static const char *const strs[] = {
		"host",
		"host:9521",
		"10.0.0.1:80:/a/b",
		"[::1]:9521:/x",
		"[::1",
		"h::",
		"64k",
		"10MiB",
		"1T",
		"30s",
		"100ms",
		"2d",
		"yes",
		"off",
		"/a/./b//../c/",
		"/..",
		"name",
		"..",
		".",
	};
	uint8_t buf[SW_DIRENT_MAX];
	struct sw_dirent d = {
		.cookie = 1, .ino = 2, .type = 4, .namelen = 4, .name = "abcd"
	};

	/* 0: all of fuzz_master's first namespace seed, as a stream. */
	begin(0);
	namespace_ops();
	end("fuzz_frame", "stream");

	/* 1: one payload of each type the other seeds send. */
	for (unsigned t = 1; t < SW_MSG__COUNT; t++) {
		char name[48];
		uint8_t sel[2] = { (uint8_t)t, 0 };

		if (!first[t].p)
			continue;
		begin(1);
		raw(sel, 2);
		raw(first[t].p, first[t].len);
		snprintf(name, sizeof(name), "payload-%s",
			 sw_msg_info(t)->name);
		end("fuzz_frame", name);
	}

	/* 2: readdir entries. */
	begin(2);
	for (int i = 0; i < 3; i++) {
		d.cookie = (uint64_t)1 << (i * 30);
		raw(buf, sw_dirent_put(buf, &d));
	}
	end("fuzz_frame", "dirents");

	/* 3: strings. */
	for (size_t i = 0; i < SW_ARRAY_SIZE(strs); i++) {
		char name[32];

		begin(3);
		raw(strs[i], strlen(strs[i]));
		snprintf(name, sizeof(name), "string-%zu", i);
		end("fuzz_frame", name);
	}

	/* 4: an exports file. */
	begin(4);
	{
		static const char text[] =
			"# comment\n"
			"127.0.0.1 / rw,alldirs,admin,maproot=0\n"
			"10.1.0.0/16 /projects rw,alldirs,maproot=nobody\n"
			"10.2.0.1-10.2.0.9 /scratch rw,password=s3cret\n"
			"10.3.0.0/255.255.0.0 /m mapall=1000:1000\n"
			"* /public ro\n";

		raw(text, sizeof(text) - 1);
	}
	end("fuzz_frame", "exports");
}

/* ---- the dictionary --------------------------------------------------------- */

static void dict_bytes(FILE *f, const char *name, const uint8_t *p, size_t n)
{
	fprintf(f, "%s=\"", name);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "\\x%02x", p[i]);
	fprintf(f, "\"\n");
}

static void write_dict(const char *path)
{
	static const char *const words[] = {
		".",
		"..",
		"/",
		"user.",
		"trusted.",
		"security.",
		"system.posix_acl_access",
		"127.0.0.1:",
		"[::1]:",
	};
	FILE *f = fopen(path, "w");
	uint8_t b[SW_FRAME_HDR];

	if (!f)
		die(path);
	fprintf(f, "# sweepfs frames for libFuzzer's -dict (written by "
		   "tests/fuzz/gen_corpus.c)\n");
	for (unsigned t = 0; t <= SW_MSG__COUNT; t++) {
		const struct sw_msg_info *info = sw_msg_info((uint16_t)t);
		struct sw_frame_hdr h = { 0, (uint16_t)t, 0, 0 };
		char name[64];

		/* An empty frame of this type, and its type field. */
		sw_frame_put_hdr(b, &h);
		snprintf(name, sizeof(name), "hdr_%s",
			 info ? info->name : "unknown");
		dict_bytes(f, name, b, sizeof(b));
		snprintf(name, sizeof(name), "type_%s",
			 info ? info->name : "unknown");
		dict_bytes(f, name, b + 4, 4);
	}
	dict_bytes(f, "flags_reply", (const uint8_t *)"\x00\x01", 2);
	dict_bytes(f, "flags_notify", (const uint8_t *)"\x00\x02", 2);
	dict_bytes(f, "len_max_meta", (const uint8_t *)"\x00\x10\x00\x00", 4);
	dict_bytes(f, "len_max_data", (const uint8_t *)"\x00\x10\x10\x00", 4);
	dict_bytes(f, "len_over", (const uint8_t *)"\x00\x10\x10\x01", 4);
	/* Field 1 = a Cred {uid 0, gid 0}, and uid/gid 1000. */
	dict_bytes(f, "cred_root", (const uint8_t *)"\x0a\x04\x08\x00\x10\x00",
		   6);
	dict_bytes(f, "cred_user",
		   (const uint8_t *)"\x0a\x06\x08\xe8\x07\x10\xe8\x07", 8);
	/* parent/ino = the root, and a name field. */
	dict_bytes(f, "f2_root", (const uint8_t *)"\x10\x01", 2);
	dict_bytes(f, "f3_name", (const uint8_t *)"\x1a\x01\x61", 3);
	dict_bytes(f, "varint_max",
		   (const uint8_t *)"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
		   10);
	for (size_t i = 0; i < SW_ARRAY_SIZE(words); i++) {
		char name[32];

		snprintf(name, sizeof(name), "word%zu", i);
		dict_bytes(f, name, (const uint8_t *)words[i],
			   strlen(words[i]));
	}
	if (fclose(f))
		die(path);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: gen_corpus CORPUS_DIR DICT\n");
		return 2;
	}
	corpus_dir = argv[1];
	if (mkdir(corpus_dir, 0755) < 0 && errno != EEXIST)
		die(corpus_dir);
	master_seeds();
	chunkserver_seeds();
	frame_seeds();
	write_dict(argv[2]);
	return 0;
}
