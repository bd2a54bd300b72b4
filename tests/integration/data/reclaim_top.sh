#!/bin/bash
# `sweepfs top` during a chunk deletion (issue 32): per server, the
# deletions pending, their rate and when they should be done, right at
# the rate they go.
#
# N one-chunk files removed with delete_rate at CAP a second, so that the
# deletion takes seconds; `sweepfs top -b` meanwhile: the chunkserver's
# line shows a rate near CAP (the cap holds; its bucket lets half a
# second more through), pending near what status says, and an ETA that
# the deletion then keeps within a factor of two (plus a second or two
# of a loaded machine).
. "$(dirname "$0")/../lib.sh"
sw_init reclaim_top --root

N=6000
CAP=600 # deletions/s: N of them take 10 s
M=$SW_TMP/mnt

start_master --set goal=1 --set "delete_rate=$CAP"
start_mount

"$PYTHON" - "$M/many" "$N" <<'EOF' || fail "writing $N files"
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    if i % 500 == 0:
        sub = os.path.join(d, "d%02d" % (i // 500))
        os.makedirs(sub)
    with open(os.path.join(sub, "f%03d" % (i % 500)), "wb") as f:
        f.write(b"x" * 4096)
EOF
assert_eq "$N" "$(chunk_files)" "chunk files before the removal"
rm -rf "$M/many"
pending=$(sw_status 'd["chunk_deletes_pending"]')
log "rm -rf returned; $pending deletions pending, $(chunk_files) chunk files left"
((pending > CAP * 4)) || fail "too few deletions pending to measure ($pending): raise N"

sw_tool top -b -n 3 -d 1 "$M" >"$SW_TMP/top.out" || fail "sweepfs top failed"
t_top=$(date +%s%N)
sed -n '/^chunks /,/^$/p' "$SW_TMP/top.out" | tail -n 3 >&2
listen=$(sw_status 'd["servers"][0]["listen"]')
# The last frame's line for the chunkserver: pending, rate, ETA.
read -r s_pending s_rate s_eta <<<"$(top_deletions "$SW_TMP/top.out" "$listen")" || true
[[ -n "$s_eta" ]] || fail "no pending/rate/ETA line for $listen in sweepfs top"
log "top: $s_pending pending on $listen, $s_rate/s, done in $s_eta s"
assert_ge $((CAP / 4)) "$s_rate" "deletions/s top shows (delete_rate $CAP)"
assert_le $((CAP * 3 / 2 + 1)) "$s_rate" "deletions/s top shows (delete_rate $CAP)"
assert_ge 1 "$s_pending" "deletions pending top shows"
assert_le "$pending" "$s_pending" "deletions pending top shows (at most those after rm -rf)"
# ETA = pending / rate, rounded up to a second
want=$(((s_pending + s_rate - 1) / s_rate))
assert_le 1 $((s_eta - want < 0 ? want - s_eta : s_eta - want)) "ETA against pending / rate"

pend() { (($(sw_status 'd["chunk_deletes_pending"]') == 0)); }
wait_until 120 "the deletions to finish" pend
t=$((($(date +%s%N) - t_top) / 1000000))
log "the deletions finished $t ms after top's last frame (it said $s_eta s)"
assert_le $((s_eta * 2000 + 2000)) "$t" "ms to finish after an ETA of $s_eta s"
assert_ge $((s_eta * 500 - 2000)) "$t" "ms to finish after an ETA of $s_eta s"
assert_eq 0 "$(chunk_files)" "chunk files once the deletions are done"
sw_pass
