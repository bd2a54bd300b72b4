#!/bin/bash
# A writer's own size, after its writes reached the master. A file's new
# size goes to the master after the data (a WRITE_END, one at a time per
# file); until the master has it, attributes the mount hands the kernel
# are overlaid with it. Attributes the master gave in the meantime, and
# the mount's inode table kept, are older than the size once the overlay
# ends: handed to the kernel then, they shrank the file under its writer
# until attr_timeout, and reads past the old size came back short (fio
# --verify in integration.data's job failed 1 to 3 runs in 40).
#
# Made certain here with a stopped master: the second write's WRITE_END
# waits on it, the third is held back behind that one, and a stat waits
# behind both, so its answer has the second write's size, not the
# third's. Once the master goes on, the third reaches it too (fsync);
# a read then ages the kernel's atime, so an fstat asks the mount, which
# answers from what it kept, and must overlay it with the third write's
# size. The size and a read of the whole file must both say 3 writes,
# and so must a stat of its name, through the default mount and through
# one that checks permissions itself (-o no_default_permissions).
. "$(dirname "$0")/../lib.sh"
sw_init written_size

start_master
start_mount "$SW_TMP/a"
start_mount "$SW_TMP/p" "" no_default_permissions

for m in "$SW_TMP/a" "$SW_TMP/p"; do
	log "$(basename "$m"): 3 writes, the last two behind a stopped master"
	"$PYTHON" - "$m" "$SW_MASTER_PID" <<'EOP' ||
import os, signal, sys, threading, time
mnt, master = sys.argv[1], int(sys.argv[2])
B = 65536
for r in range(3):
    path = os.path.join(mnt, "f%d" % r)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    os.pwrite(fd, b"a" * B, 0)  # the chunk is now the mount's to write
    os.fsync(fd)
    os.kill(master, signal.SIGSTOP)
    try:
        os.pwrite(fd, b"b" * B, B)  # its WRITE_END waits on the master
        os.pwrite(fd, b"c" * B, 2 * B)  # held back behind that one
        st = threading.Thread(target=os.stat, args=(path,), daemon=True)
        st.start()  # a GETATTR behind both
        time.sleep(0.5)
        if not st.is_alive():
            sys.exit("round %d: the stat did not wait for the stopped "
                     "master (nothing tested)" % r)
    finally:
        os.kill(master, signal.SIGCONT)
    st.join(30)
    if st.is_alive():
        sys.exit("round %d: the stat did not come back" % r)
    os.fsync(fd)  # the third write's size is the master's too
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.pread(fd, 10, 0)  # the kernel's atime is now stale: fstat asks
    size = os.fstat(fd).st_size
    got = os.pread(fd, 4 * B, 0)
    named = os.stat(path).st_size
    os.close(fd)
    if size != 3 * B or named != 3 * B or \
            got != b"a" * B + b"b" * B + b"c" * B:
        sys.exit("round %d: fstat says %d bytes, stat %d, a read gave %d "
                 "(%d c), after 3 writes of %d" %
                 (r, size, named, len(got), got.count(b"c"), B))
EOP
		fail "in $(basename "$m"), the writer saw its file shrink"
done
sw_pass
