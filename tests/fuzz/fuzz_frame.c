/*
 * fuzz_frame: the decoders every sweepfs process runs on bytes from the
 * network, without a server around them.
 *
 * Byte 0 of the input picks what the rest goes to:
 *   0  a stream of frames, cut as the servers cut them (sw_frame_get_hdr()
 *      with the metadata and the data limits), each payload unpacked with
 *      the request and the reply type of its message type
 *   1  one payload (byte 1 picks the message type, byte 2 bit 0 request
 *      or reply), and the metadata records of the changelog
 *   2  packed readdir entries (proto/entries.h)
 *   3  the string checks: entry names (sw_name_valid()), addresses
 *      (sw_target_parse()), sizes, durations, booleans, export paths
 *      (exports_norm_path())
 *   4  an exports file (exports_load())
 * A payload that unpacks must re-pack to a message that unpacks to the
 * same bytes again; a decoded entry must encode back to itself.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "entries.h"
#include "exports.h"
#include "frame.h"
#include "meta.pb-c.h"
#include "net.h"
#include "util.h"

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "fuzz_frame: %s:%d: %s\n", __FILE__, \
				__LINE__, #cond);                            \
			abort();                                             \
		}                                                            \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether @m or a message in it kept fields its type does not know. */
static bool has_unknown(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	if (m->n_unknown_fields)
		return true;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *p = (const char *)m + f->offset;

		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)((const char *)m +
						     f->quantifier_offset);

			for (size_t j = 0; j < n; j++)
				if (has_unknown(
					    (*(ProtobufCMessage *const *const *)
						     p)[j]))
					return true;
		} else if (*(ProtobufCMessage *const *)p &&
			   has_unknown(*(ProtobufCMessage *const *)p)) {
			return true;
		}
	}
	return false;
}

/*
 * Unpack @len bytes at @p as @d; what unpacks must pack and unpack again
 * to the same bytes. (Not quite when it kept unknown fields: protobuf-c
 * accepts some encodings of tags it refuses once re-encoded, "80 00" for
 * field 0. The servers never re-encode what they receive.)
 */
static void roundtrip(const ProtobufCMessageDescriptor *d, const uint8_t *p,
		      size_t len)
{
	ProtobufCMessage *msg = protobuf_c_message_unpack(d, NULL, len, p);
	ProtobufCMessage *again;
	uint8_t *a, *b;
	size_t na, nb;

	if (!msg)
		return;
	CHECK(protobuf_c_message_check(msg));
	na = protobuf_c_message_get_packed_size(msg);
	a = malloc(na + 1);
	CHECK(a);
	CHECK(protobuf_c_message_pack(msg, a) == na);
	again = protobuf_c_message_unpack(d, NULL, na, a);
	if (!again && has_unknown(msg)) {
		free(a);
		protobuf_c_message_free_unpacked(msg, NULL);
		return;
	}
	CHECK(again);
	nb = protobuf_c_message_get_packed_size(again);
	CHECK(nb == na);
	b = malloc(nb + 1);
	CHECK(b);
	CHECK(protobuf_c_message_pack(again, b) == nb);
	CHECK(memcmp(a, b, na) == 0);
	free(a);
	free(b);
	protobuf_c_message_free_unpacked(again, NULL);
	protobuf_c_message_free_unpacked(msg, NULL);
}

static void frames(const uint8_t *p, size_t len)
{
	static const uint32_t limits[] = { SW_FRAME_MAX_META,
					   SW_FRAME_MAX_DATA };

	for (size_t l = 0; l < SW_ARRAY_SIZE(limits); l++) {
		const uint8_t *q = p;
		size_t left = len;

		for (;;) {
			const struct sw_msg_info *info;
			struct sw_frame_hdr hdr;
			uint8_t again[SW_FRAME_HDR];
			int rc = sw_frame_get_hdr(q, left, limits[l], &hdr);

			CHECK(rc == -EMSGSIZE || rc == -EPROTO || rc == 0 ||
			      rc == 1);
			if (rc <= 0)
				break;
			CHECK(hdr.len <= limits[l]);
			CHECK(!(hdr.flags & ~(SW_FRAME_REPLY | SW_FRAME_NOTIFY |
					      SW_FRAME_AGAIN)));
			sw_frame_put_hdr(again, &hdr);
			CHECK(memcmp(again, q, SW_FRAME_HDR) == 0);
			if (left - SW_FRAME_HDR < hdr.len)
				break;
			info = sw_msg_info(hdr.type);
			if (info) {
				CHECK(info->name && info->req && info->reply);
				roundtrip(info->req, q + SW_FRAME_HDR, hdr.len);
				roundtrip(info->reply, q + SW_FRAME_HDR,
					  hdr.len);
			}
			q += SW_FRAME_HDR + hdr.len;
			left -= SW_FRAME_HDR + hdr.len;
		}
	}
}

static void payload(const uint8_t *p, size_t len)
{
	const struct sw_msg_info *info;

	if (len < 2)
		return;
	info = sw_msg_info(p[0]);
	if (info)
		roundtrip(p[1] & 1 ? info->reply : info->req, p + 2, len - 2);
	else
		roundtrip(p[1] & 1 ? &sweepfs__meta__mutation__descriptor :
				     &sweepfs__status_reply__descriptor,
			  p + 2, len - 2);
}

static void dirents(const uint8_t *p, size_t len)
{
	while (len) {
		struct sw_dirent d, e;
		uint8_t buf[SW_DIRENT_MAX];
		int n = sw_dirent_get(p, len, &d);
		size_t m;

		if (n < 0) {
			CHECK(n == -EPROTO);
			return;
		}
		CHECK(n > 0 && (size_t)n <= len);
		CHECK(d.namelen > 0);
		CHECK(d.name >= (const char *)p &&
		      d.name + d.namelen <= (const char *)p + n);
		m = sw_dirent_put(buf, &d);
		CHECK(m <= SW_DIRENT_MAX && m <= (size_t)n);
		CHECK(sw_dirent_get(buf, m, &e) == (int)m);
		CHECK(e.cookie == d.cookie && e.ino == d.ino &&
		      e.type == d.type && e.namelen == d.namelen &&
		      memcmp(e.name, d.name, d.namelen) == 0);
		p += n;
		len -= (size_t)n;
	}
}

static void strings(const uint8_t *p, size_t len)
{
	char s[SW_PATH_MAX + 64], out[SW_PATH_MAX];
	struct sw_target t;
	uint64_t u;
	bool b;
	size_t n = SW_MIN(len, sizeof(s) - 1);
	bool valid = sw_name_valid(p, len);

	/* The rule itself, spelled out differently. */
	CHECK(valid ==
	      (len >= 1 && len <= SW_NAME_MAX && !memchr(p, '/', len) &&
	       !memchr(p, '\0', len) && !(len == 1 && p[0] == '.') &&
	       !(len == 2 && p[0] == '.' && p[1] == '.')));
	memcpy(s, p, n);
	s[n] = '\0';
	if (sw_target_parse(s, 9521, &t) == 0) {
		CHECK(memchr(t.host, '\0', sizeof(t.host)));
		CHECK(t.naddrs >= 1 && t.naddrs <= SW_TARGET_MAX);
		for (unsigned i = 0; i < t.naddrs; i++)
			CHECK(memchr(t.addrs[i].host, '\0',
				     sizeof(t.addrs[i].host)) &&
			      t.addrs[i].host[0] && t.addrs[i].port);
		CHECK(memchr(t.subdir, '\0', sizeof(t.subdir)));
		CHECK(t.subdir[0] == '/');
	}
	sw_parse_size(s, &u);
	sw_parse_duration_ms(s, &u);
	sw_parse_bool(s, &b);
	if (exports_norm_path(s, out, sizeof(out)) == 0) {
		size_t l = strlen(out);

		CHECK(out[0] == '/');
		CHECK(l == 1 || out[l - 1] != '/');
		CHECK(!strstr(out, "//") && !strstr(out, "/./") &&
		      !strstr(out, "/../"));
	}
}

static void exports_file(const uint8_t *p, size_t len)
{
	static int fd = -1;
	struct exports ex = { 0 };
	char path[64], err[256];

	if (fd < 0)
		fd = memfd_create("exports", MFD_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(ftruncate(fd, 0) == 0);
	CHECK(pwrite(fd, p, len, 0) == (ssize_t)len);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (exports_load(path, &ex, err, sizeof(err)) == 0)
		exports_free(&ex);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	switch (data[0] % 5) {
	case 0:
		frames(data + 1, size - 1);
		break;
	case 1:
		payload(data + 1, size - 1);
		break;
	case 2:
		dirents(data + 1, size - 1);
		break;
	case 3:
		strings(data + 1, size - 1);
		break;
	default:
		exports_file(data + 1, size - 1);
		break;
	}
	return 0;
}
