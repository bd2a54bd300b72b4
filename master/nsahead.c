/*
 * The namespace's read-ahead (the namespace core, split out of
 * namespace.c): hints that start the cache misses a change about to be
 * applied will take (its node's inode slot, its name's slot in its
 * directory, the rest of a hash cluster a deletion shifts), so that the
 * changelog's replay and a follower's apply (changelog.c's two-stage
 * hints) overlap them instead of taking them one after another. A hint
 * reads nothing that has to be there: an entry already gone is no hint.
 *
 * It reaches the core's internals only through namespace_i.h.
 */
#include "hash.h"
#include "htab.h"
#include "namespace.h"
#include "namespace_i.h"

void ns_prefetch(const struct ns *ns, uint64_t ino)
{
	htab_prefetch(&ns->inodes, sw_hash_u64(ino));
}

void ns_prefetch_name(const struct node *dir, const char *name, size_t len)
{
	const struct htab *names = &dir->u.dir->names;

	if (names->slots)
		htab_prefetch(names, sw_hash_bytes(name, len));
}

void ns_prefetch_entry(const struct ns *ns, const struct node *dir,
		       const char *name, size_t len)
{
	const struct htab *names = &dir->u.dir->names;
	const struct edge *e = ns_lookup(ns, dir, name, len);

	if (!e || !e->child)
		return;
	ns_prefetch(ns, e->child->ino);
	if (names->slots)
		htab_prefetch_cluster(names, sw_hash_bytes(name, len));
}

void ns_prefetch_cluster(const struct ns *ns, uint64_t ino)
{
	htab_prefetch_cluster(&ns->inodes, sw_hash_u64(ino));
}

void ns_prefetch_name_cluster(const struct node *dir, const char *name,
			      size_t len)
{
	const struct htab *names = &dir->u.dir->names;

	if (names->slots)
		htab_prefetch_cluster(names, sw_hash_bytes(name, len));
}
