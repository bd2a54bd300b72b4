#!/bin/bash
# A tree's holder told it goes (DelegRecall.removed) leaves the names its
# kernel caches there; the master keeps it watching the tree for as long
# as those names may live, so that a change by anyone else reaches it.
# Here the holder answers the recall only after deleg_timeout (its mount
# stopped with SIGSTOP a little longer: a slow flush, a loaded machine),
# so the master revokes it, and the removal (rmsnapshot of a tree without
# the flag) is refused. Two things cover it: the master holds the tree
# from the revocation (the late return finds no delegation; unit.deleg
# test_revoked_removed_held), and the mount, whose lease ran out while it
# was stopped, gives everything back when it resumes, on what it counts
# as a new connection, so leaves no names. A process on the holder whose working
# directory is in the tree then sees at once what another mount removes,
# replaces and renames there, after the holder's ordinary watch would
# have idled out. (A reviewer's probe of 9c6ffb3: there, the process
# opened a replaced file as gone and saw a renamed one.)
. "$(dirname "$0")/../lib.sh"
sw_init revoked_cwd --root

start_master --set deleg_timeout=2s --set session_timeout=10s
start_mount "$SW_TMP/m1"
apid=${SW_MOUNT_PIDS[-1]}
start_mount "$SW_TMP/m2"
A=$SW_TMP/m1
B=$SW_TMP/m2
N=100

mkdir -p "$A/p/keep"
chmod 755 "$A/p" "$A/p/keep"
fifo=$SW_TMP/go
mkfifo "$fifo"
out=$SW_TMP/cwd.out
"$PYTHON" -c '
import os, sys
d, n, fifo, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
os.chdir(d)
for i in range(n):
    with open("f%06d" % i, "w") as f:
        f.write("old %d\n" % i)
for i in range(n):
    os.stat("f%06d" % i)
fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY); os.fsync(fd); os.close(fd)
with open(out, "w") as o:
    o.write("ready\n")
with open(fifo) as f:
    f.read()
res = ["f000010 exists=%s" % os.path.exists("f000010")]
try:
    with open("f000011") as f:
        res.append("f000011 reads=%r" % f.read())
except OSError as e:
    res.append("f000011 error=%s" % e)
res.append("f000012 exists=%s" % os.path.exists("f000012"))
res.append("new exists=%s" % os.path.exists("new"))
with open(out, "a") as o:
    o.write("\n".join(res) + "\n")
' "$A/p/keep" "$N" "$fifo" "$out" &
cwd_pid=$!
for ((i = 0; i < 600; i++)); do
	grep -q ready "$out" 2>/dev/null && break
	sleep 0.1
done
grep -q ready "$out" || fail "the cwd process did not get ready"

# A stalls past deleg_timeout while the recall is out.
kill -STOP "$apid"
# Whatever happens below, it runs again (a stopped daemon ignores the
# cleanup's SIGTERM).
(sleep 3; kill -CONT "$apid" 2>/dev/null) &
st=0
sw_tool rmsnapshot "$B/p/keep" >"$SW_TMP/tool.out" 2>&1 || st=$?
sed 's/^/    tool: /' "$SW_TMP/tool.out" >&2
sleep 0.5
kill -CONT "$apid"
log "rmsnapshot of p/keep (A stopped meanwhile): status $st"
assert_ne 0 "$st" "rmsnapshot of keep"
sleep 1.5 # A's late return, and its ordinary watch idles out
touch "$B/p/keep/bx"
rm "$B/p/keep/f000010"
echo "new 11" >"$B/p/keep/tmp"
mv "$B/p/keep/tmp" "$B/p/keep/f000011"
mv "$B/p/keep/f000012" "$B/p/keep/moved12"
touch "$B/p/keep/new"
sleep 0.5
echo go >"$fifo"
wait "$cwd_pid"
log "the process in keep/ on A sees:"
sed 's/^/    /' "$out" >&2
stop_mount "$A"
grep -h "given back\|reconnect\|lease" "$A.log" | sed 's/^/    A: /' >&2 || true
grep -q "f000010 exists=False" "$out" ||
	fail "A's process in keep/ still resolves f000010, which B removed"
grep -q "f000011 reads='new 11" "$out" ||
	fail "A's process in keep/ still opens the old f000011, which B replaced"
grep -q "f000012 exists=False" "$out" ||
	fail "A's process in keep/ still resolves f000012, which B renamed"
sw_pass
