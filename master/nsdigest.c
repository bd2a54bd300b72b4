/*
 * The namespace's digest (the namespace core, split out of namespace.c):
 * one 64-bit sum over every node's attributes and every directory's
 * names, which the masters of a group compare to prove they hold the same
 * tree (group.c), and which tests compare across a restart. A sum, so
 * that neither the order of the inode table nor that of a directory's
 * names (the cookies', which a checkpoint need not keep) changes it.
 *
 * It reaches the core's internals only through namespace_i.h.
 */
#include <sys/stat.h>

#include "crc32c.h"
#include "htab.h"
#include "namespace.h"
#include "namespace_i.h"

/* 64 bits from two CRC32Cs of @p with different seeds. */
static uint64_t digest64(uint64_t seed, const void *p, size_t n)
{
	return (uint64_t)sw_crc32c((uint32_t)seed, p, n) << 32 |
	       sw_crc32c((uint32_t)(seed >> 32) ^ 0x5bd1e995u, p, n);
}

static int digest_node(void *elem, void *arg)
{
	const struct node *n = elem;
	uint64_t *sum = arg;
	struct {
		uint64_t ino, size;
		int64_t mtime, ctime;
		uint32_t mode, uid, gid, nlink;
	} f = {
		.ino = n->ino,
		.size = S_ISDIR(n->mode) ? 0 : n->size,
		.mtime = n->mtime,
		.ctime = n->ctime,
		.mode = n->mode,
		.uid = n->uid,
		.gid = n->gid,
		.nlink = n->nlink,
	};
	uint64_t h = digest64(0, &f, sizeof(f));

	if (S_ISLNK(n->mode))
		h = digest64(h, n->u.target, n->size);
	else if (S_ISCHR(n->mode) || S_ISBLK(n->mode))
		h = digest64(h, &n->u.rdev, sizeof(n->u.rdev));
	else if (S_ISREG(n->mode) && n->u.chunks)
		h = digest64(h, n->u.chunks->id,
			     n->u.chunks->n * sizeof(n->u.chunks->id[0]));
	else if (S_ISDIR(n->mode))
		for (const struct edge *e = n->u.dir->head; e; e = e->next) {
			if (!e->child)
				continue;
			/* Summed: the order of names is the cookies', which
			 * a checkpoint need not keep. */
			*sum += digest64(digest64(n->ino, &e->child->ino,
						  sizeof(e->child->ino)),
					 e->name, e->namelen);
		}
	*sum += h;
	return 0;
}

uint64_t ns_digest(const struct ns *ns)
{
	uint64_t sum = 0;

	htab_foreach(&ns->inodes, digest_node, &sum);
	return sum;
}
