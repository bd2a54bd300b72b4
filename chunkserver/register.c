/*
 * The registration, packed (register.h).
 *
 * The parts are cut by the size of their entries, computed as protobuf
 * packs them (entry_size()), so that none exceeds REG_MAX_BYTES however
 * large the chunk ids; each holds at least one chunk, so the packing
 * always ends. The inventory is a snapshot: chunks created or deleted
 * meanwhile are the master's to reconcile (its commands and the next
 * registration).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "register.h"
#include "sweepfs.pb-c.h"
#include "util.h"

static size_t varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Bytes ChunkInfo @ci adds to a CsRegisterReq. */
static size_t entry_size(const struct store_chunk_info *ci)
{
	size_t n = 1 + varint_len(ci->chunk_id) + 1 + varint_len(ci->version) +
		   (ci->damaged ? 2 : 0);

	return 1 + varint_len(n) + n;
}

/* What every part says beside its chunks. */
struct reg_head {
	uint64_t server_id;
	const char *listen;
	uint64_t total, used;
};

/* Pack the @n entries at @v as one registration message into @p. */
static int pack_part(const struct reg_head *h, const struct store_chunk_info *v,
		     size_t n, bool more, struct reg_part *p)
{
	Sweepfs__CsRegisterReq q = SWEEPFS__CS_REGISTER_REQ__INIT;
	Sweepfs__ChunkInfo *infos = calloc(SW_MAX(n, 1u), sizeof(*infos));
	Sweepfs__ChunkInfo **ptrs = calloc(SW_MAX(n, 1u), sizeof(*ptrs));
	int rc = -ENOMEM;

	if (!infos || !ptrs)
		goto out_free;
	for (size_t i = 0; i < n; i++) {
		sweepfs__chunk_info__init(&infos[i]);
		infos[i].chunk_id = v[i].chunk_id;
		infos[i].version = v[i].version;
		infos[i].has_damaged = v[i].damaged;
		infos[i].damaged = v[i].damaged;
		ptrs[i] = &infos[i];
	}
	q.listen = (char *)h->listen;
	q.has_total_bytes = q.has_used_bytes = 1;
	q.total_bytes = h->total;
	q.used_bytes = h->used;
	q.n_chunks = n;
	q.chunks = ptrs;
	q.has_more = more;
	q.more = more;
	q.has_server_id = h->server_id != 0;
	q.server_id = h->server_id;
	p->len = sweepfs__cs_register_req__get_packed_size(&q);
	p->data = malloc(SW_MAX(p->len, 1u));
	if (p->data) {
		sweepfs__cs_register_req__pack(&q, p->data);
		rc = 0;
	}
out_free:
	free(infos);
	free(ptrs);
	return rc;
}

int register_pack(struct store *st, uint64_t server_id, const char *listen,
		  struct reg_part **parts, size_t *nparts, size_t *nchunks)
{
	struct reg_head h = { .server_id = server_id, .listen = listen };
	struct store_chunk_info *v;
	struct reg_part *pv;
	size_t n, i = 0, np = 0;
	int rc;

	store_refresh_space(st);
	store_space(st, &h.total, &h.used, NULL);
	rc = store_inventory(st, &v, &n);
	if (rc < 0)
		return rc;
	/* A part holds REG_MAX_CHUNKS, or REG_MAX_BYTES of entries of at
	 * most 32 bytes: this many parts are always enough. */
	pv = calloc(n / SW_MIN(REG_MAX_CHUNKS, REG_MAX_BYTES / 32) + 2,
		    sizeof(*pv));
	if (!pv)
		rc = -ENOMEM;
	while (rc == 0) {
		size_t j = i, bytes = 0;

		while (j < n && j - i < REG_MAX_CHUNKS &&
		       bytes + entry_size(&v[j]) <= REG_MAX_BYTES)
			bytes += entry_size(&v[j++]);
		rc = pack_part(&h, v + i, j - i, j < n, &pv[np]);
		if (rc == 0)
			np++;
		i = j;
		if (i >= n)
			break;
	}
	free(v);
	if (rc < 0) {
		register_parts_free(pv, np);
		return rc;
	}
	*parts = pv;
	*nparts = np;
	*nchunks = n;
	return 0;
}

void register_parts_free(struct reg_part *parts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(parts[i].data);
	free(parts);
}
