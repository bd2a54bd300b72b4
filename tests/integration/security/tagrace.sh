#!/bin/bash
# A review's finding on grants walked in slices (master/deleg.c): two
# sessions ask for the same large directory at once, and a third names
# one of its files by number: whichever holds it must be recalled
# (tests/integration/progs/tagrace.c). Needs no mount.
. "$(dirname "$0")/../lib.sh"

sw_init tagrace
PROG=$SWEEPFS_BUILD/tests/integration/progs/tagrace
[[ -x "$PROG" ]] || fail "no $PROG (build with -Dtests=enabled)"
EXPORTS=$SW_TMP/exports.cfg
cat >"$EXPORTS" <<EOT
127.0.0.1 / rw,alldirs,admin,maproot=0
EOT
SW_CHUNKSERVERS=0
start_master --set "exports_file=$EXPORTS" --set deleg_timeout=3000ms
"$PROG" "$SW_PORT" || fail "tagrace"
stop_master
sw_pass
