#!/bin/bash
# health: chunk health in plain view (issue 30, item 3). With goal 2 on
# the only chunkserver, and then with that chunkserver stopped, the
# master's chunk health census shows the chunks under goal, endangered,
# beyond reach of their goal, and missing in `sweepfs status` (text and
# JSON), `sweepfs top` and /metrics; `sweepfs fsck` names the files whose
# chunks are bad, by path (text and JSON, which a strict parser reads),
# cuts the list at -n and says so, and exits 1 while chunks are lost.
# With the chunkserver back, all is well again everywhere.
. "$(dirname "$0")/lib.sh"
sw_init health
PY3=/usr/bin/python3
$PY3 -c 'import prometheus_client' 2>/dev/null ||
	skip "python3-prometheus-client is not installed"

MPORT=$(pick_port)
start_master --set metrics_listen=$SW_MASTER_HOST:$MPORT
start_mount
M=$SW_MNT
MURL=http://$SW_MASTER_HOST:$MPORT/metrics
scrape() { $PY3 "$SW_SRC/scrape.py" "$@" >"$SW_TMP/scrape.out" 2>&1 || fail "$(cat "$SW_TMP/scrape.out")"; }

# health KEY: the chunk health count KEY of `sweepfs status --json`.
health() { sw_status "d['chunk_health'].get('$1', -1)"; }
health_is() { [[ "$(health "$1")" == "$2" ]]; }

log "files with data: 5 chunks in 4 files"
mkdir -p "$M/d/sub" "$M/e"
head -c 100K /dev/urandom >"$M/d/a"
head -c 100K /dev/urandom >"$M/d/sub/b"
head -c 100K /dev/urandom >"$M/e/c"
# a name that is not UTF-8: the JSON must still parse, strictly
head -c 100K /dev/urandom >"$M/d/"$'caf\xe9'
printf x | dd of="$M/d/a" bs=1 seek=$((64 << 20)) conv=notrunc status=none
sync
counted() { [[ "$(sw_status 'd["chunks"]')" == 5 && "$(health age_ms)" != -1 ]]; }
wait_until 30 "5 chunks, and a census pass" counted
wait_until 10 "a clean census" health_is undergoal 0
for k in missing endangered overgoal goal_unreachable; do
	assert_eq 0 "$(health $k)" "chunk health $k, all well"
done
sw_tool status | grep -q "chunk health: all chunks at their goal" ||
	fail "status does not say all chunks are well: $(sw_tool status)"
fsck_ok || fail "fsck is not clean: $(sw_tool fsck)"

log "goal 2 on the only chunkserver: under goal, endangered, unreachable"
sw_tool setgoal 2 "$M/e/c" >/dev/null || fail "setgoal 2"
wait_until 10 "the census to see e/c under goal" health_is undergoal 1
assert_eq 1 "$(health endangered)" "endangered chunks"
assert_eq 1 "$(health goal_unreachable)" "chunks beyond reach of their goal"
assert_eq 0 "$(health missing)" "missing chunks"
out=$(sw_tool status)
grep -q "1 under goal" <<<"$out" || fail "status hides the undergoal chunk: $out"
out=$(sw_tool fsck) || fail "fsck exits non-zero with only an undergoal chunk: $out"
grep -q "cannot be replicated" <<<"$out" ||
	fail "fsck says nothing of a goal that cannot be met: $out"
grep -q "being replicated" <<<"$out" &&
	fail "fsck says 'being replicated' though nothing can be: $out"
grep -q "^  /e/c: 1 under goal" <<<"$out" || fail "fsck does not name /e/c: $out"
scrape "$MURL" \
	'v("sweepfs_master_chunks_unhealthy", state="undergoal") == 1' \
	'v("sweepfs_master_chunks_unhealthy", state="endangered") == 1' \
	'v("sweepfs_master_chunks_unhealthy", state="goal_unreachable") == 1' \
	'v("sweepfs_master_chunks_unhealthy", state="missing") == 0' \
	'v("sweepfs_master_chunk_census_age_seconds") >= 0'
sw_tool setgoal 1 "$M/e/c" >/dev/null || fail "setgoal 1"

log "the only chunkserver stopped: every chunk missing, every file named"
stop_chunkserver 1
wait_until 10 "the census to see 5 chunks missing" health_is missing 5
assert_eq 0 "$(health undergoal)" "undergoal (missing ones are not)"
out=$(sw_tool status)
grep -q "5 MISSING" <<<"$out" || fail "status hides the missing chunks: $out"
out=$(sw_tool top -b -n 1)
grep -q "health *5 MISSING" <<<"$out" || fail "top hides the missing chunks: $out"
scrape "$MURL" 'v("sweepfs_master_chunks_unhealthy", state="missing") == 5'
rc=0
out=$(sw_tool fsck) || rc=$?
assert_eq 1 "$rc" "fsck's exit status with chunks lost"
for f in /d/a /d/sub/b /e/c; do
	grep -q "^  $f: [0-9]* chunks LOST" <<<"$out" ||
		fail "fsck does not name $f: $out"
done
grep -q "^  /d/a: 2 chunks LOST" <<<"$out" || fail "fsck does not count both chunks of /d/a: $out"
j=$(sw_tool fsck --json) && fail "fsck --json exits 0 with chunks lost"
$PY3 - "$j" <<'PY' || fail "fsck --json: $j"
import json, sys
d = json.loads(sys.argv[1], strict=True)
assert d["lost_chunks"] == 5, d["lost_chunks"]
files = {f["path"].encode("utf-8", "surrogateescape"): f for f in d["bad_files"]}
assert set(files) == {b"/d/a", b"/d/sub/b", b"/e/c", b"/d/caf\xe9"}, files
assert files[b"/d/a"]["lost"] == 2 and len(files[b"/d/a"]["chunks"]) == 2
assert [c["index"] for c in files[b"/d/a"]["chunks"]] == [0, 1]
assert all(c["copies"] == 0 for f in d["bad_files"] for c in f["chunks"])
assert d["bad_files_total"] == 4 and d["bad_files_cut"] is False
PY
out=$(sw_tool fsck -n 2) && fail "fsck -n 2 exits 0"
[[ $(grep -c "chunks LOST" <<<"$out") == 2 ]] || fail "fsck -n 2 lists other than 2 files: $out"
grep -q "the list stops here: 4 files in all" <<<"$out" ||
	fail "fsck -n 2 does not say the list was cut: $out"

log "the chunkserver back: all well again"
restart_chunkserver 1 start
wait_until 10 "the census to see no chunk missing" health_is missing 0
assert_eq 0 "$(health undergoal)" "undergoal chunks"
scrape "$MURL" 'v("sweepfs_master_chunks_unhealthy", state="missing") == 0'
wait_fsck_clean 30 "the chunkserver back"
drop_caches
cat "$M/d/a" "$M/d/sub/b" "$M/e/c" >/dev/null || fail "reading back"

sw_pass
