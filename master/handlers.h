/*
 * Every request handler, by the module it lives in: dispatch.c's table
 * routes each message type to one of these. A handler answers its
 * request exactly once (req.h); it may assume the route's checks passed:
 * the session's role may send the message, a read-only export does not
 * write through it, the credentials are mapped as the export says.
 */
#ifndef SWEEPFS_MASTER_HANDLERS_H
#define SWEEPFS_MASTER_HANDLERS_H

#include "req.h"

#define HANDLER(name) void name(struct req *r, const ProtobufCMessage *msg)

/* fsops.c: the namespace */
HANDLER(op_ping);
HANDLER(op_lookup);
HANDLER(op_getattr);
HANDLER(op_setattr);
HANDLER(op_mknod);
HANDLER(op_mkdir);
HANDLER(op_symlink);
HANDLER(op_create);
HANDLER(op_link);
HANDLER(op_unlink);
HANDLER(op_rmdir);
HANDLER(op_rename);
HANDLER(op_readlink);
HANDLER(op_statfs);
HANDLER(op_open);
HANDLER(op_release);
HANDLER(op_access);
HANDLER(op_setxattr);
HANDLER(op_getxattr);
HANDLER(op_listxattr);
HANDLER(op_removexattr);
HANDLER(op_readdir);
HANDLER(op_batch);
HANDLER(op_ino_range);
HANDLER(op_inval_ack);

/* dataops.c: chunks of files */
HANDLER(op_chunk);
HANDLER(op_write_end);
HANDLER(op_goal);

/* csrv.c: chunkservers */
HANDLER(csrv_op_register);
HANDLER(csrv_op_heartbeat);
HANDLER(csrv_op_done);
HANDLER(csrv_op_damaged);

/* rmr.c, snapshot.c, trash.c: removal, snapshots, the trash */
HANDLER(op_rmr);
HANDLER(op_eattr);
HANDLER(op_snapshot);
HANDLER(op_rmsnapshot);
HANDLER(op_trashtime);
HANDLER(op_trash);

/* lockops.c, deleg.c: file locks, delegations */
HANDLER(op_lock);
HANDLER(op_deleg);
HANDLER(op_deleg_return);

/* admin.c, fsck.c: status, the group's leadership, the consistency check */
HANDLER(op_info);
HANDLER(op_fsck);

/* fileinfo.c: a file's chunks, a tree's summary */
HANDLER(op_fileinfo);
HANDLER(op_dirinfo);
HANDLER(op_group);

/* catchup.c: a group's member reading the leader's checkpoint */
HANDLER(op_meta_read);

#undef HANDLER

/*
 * fsops.c: if request @r (flagged SW_FRAME_AGAIN) made its change already,
 * in a sending whose reply was lost, answer it as that one would have
 * and return true (replies.h); false: handle it as new.
 */
bool op_done_before(struct req *r, const ProtobufCMessage *msg);

#endif
