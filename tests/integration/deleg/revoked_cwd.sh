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

mkdir -p "$A/p/keep"
chmod 755 "$A/p" "$A/p/keep"
inside_start "$A/p/keep" "$SW_TMP/cwd.out" "$SW_TMP/go"

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
inside_change "$B/p/keep"
sleep 0.5
inside_check "$SW_TMP/cwd.out" "$SW_TMP/go" "keep/ on A"
stop_mount "$A"
sw_pass
