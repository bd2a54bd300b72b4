/*
 * The trash's requests and expiry (trash.c); its structure is trash.h.
 */
#ifndef SWEEPFS_MASTER_TRASHOPS_H
#define SWEEPFS_MASTER_TRASHOPS_H

#include <stdbool.h>

struct master;
struct req;
struct trash_item;

/* Drop trash items whose time is up (once a second). */
void trash_expire(struct master *m);

/* Whether @r's session may see item @t: one confined to a subtree sees
 * only what was removed inside it (the owner check comes on top). */
bool trash_item_visible(const struct req *r, const struct trash_item *t);

#endif
