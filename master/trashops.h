/*
 * The trash's requests and expiry (trash.c); its structure is trash.h.
 */
#ifndef SWEEPFS_MASTER_TRASHOPS_H
#define SWEEPFS_MASTER_TRASHOPS_H

struct master;

/* Drop trash items whose time is up (once a second). */
void trash_expire(struct master *m);

#endif
