#!/bin/bash
# readme: the README's "Running it yourself" block runs as written (issue
# 30, item 5). The block is read from README.md itself, so the two cannot
# drift; the one change is that "build/" is this build directory and
# scripts/setup.sh (packages and a build) is skipped. It runs with -e in a
# network namespace of its own (the default ports, loopback only, no
# clash with anything else on the machine) and TMPDIR in our temporary
# directory: each command must succeed, the daemons must be gone at the
# end, and nothing may be left mounted.
. "$(dirname "$0")/../lib.sh"
sw_init readme --root
command -v unshare >/dev/null || skip "no unshare"
README=$SW_SRC/../../README.md

BLOCK=$SW_TMP/block.sh
"$PYTHON" - "$README" "$SWEEPFS_BUILD" >"$BLOCK" <<'PY' || fail "no sh block under 'Running it yourself' in README.md"
import re, sys
text = open(sys.argv[1]).read()
sec = text.split("\n## Running it yourself\n", 1)[1].split("\n## ", 1)[0]
block = re.search(r"```sh\n(.*?)```", sec, re.S).group(1)
out = []
for line in block.splitlines():
    if line.startswith("scripts/setup.sh"):
        continue
    out.append(re.sub(r"(^|\s)build/", lambda m: m.group(1) + sys.argv[2] + "/", line))
print("\n".join(out))
PY
grep -q "sweepfs-master" "$BLOCK" || fail "the block starts no master: $(cat "$BLOCK")"
grep -q "chunkserver.key" "$BLOCK" || fail "the block does not give the chunkserver the master's key"
cat "$BLOCK" >&2

RUN=$SW_TMP/run
mkdir "$RUN"
sw_scenario_cleanup() {
	local d p
	for d in "$RUN"/tmp.*; do
		[[ -d "$d" ]] || continue
		mountpoint -q "$d/mnt" && { fusermount3 -u "$d/mnt" || umount -l "$d/mnt"; }
		for p in "$d"/*.pid; do
			[[ -f "$p" ]] && kill "$(cat "$p")" 2>/dev/null
		done
	done
	return 0
}
rc=0
TMPDIR=$RUN timeout 120 unshare --net bash -c \
	'ip link set lo up && exec bash -e "$1"' sh "$BLOCK" >"$SW_TMP/out" 2>&1 || rc=$?
cat "$SW_TMP/out" >&2
assert_eq 0 "$rc" "the README's block's exit status"
D=$(echo "$RUN"/tmp.*)
[[ -d "$D/meta" && -d "$D/chunks" ]] || fail "the block made no \$D: $D"
grep -q "^master " "$SW_TMP/out" || fail "sweepfs status said nothing of the master"
grep -q "chunk health" "$SW_TMP/out" || fail "sweepfs status is not the one built here"
mountpoint -q "$D/mnt" && fail "$D/mnt is still mounted"
for p in master chunkserver; do
	wait_until 30 "the $p to exit" eval "! kill -0 \$(cat $D/$p.pid 2>/dev/null) 2>/dev/null"
done
ls "$D/meta" | grep -q . || fail "the master left no metadata in $D/meta"
sw_pass
