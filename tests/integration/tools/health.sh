#!/bin/bash
# health: chunk health in plain view (issue 30, item 3). With goal 2 on
# the only chunkserver, and then with that chunkserver stopped, the
# master's chunk health census shows the chunks under goal, endangered,
# beyond reach of their goal, and missing in `sweepfs status` (text and
# JSON), `sweepfs top` and /metrics; `sweepfs fsck` names the files whose
# chunks are bad, by path (text and JSON, which a strict parser reads),
# cuts the list at -n and says so, and exits 1 while chunks are lost.
# With the chunkserver back, all is well again everywhere. `sweepfs info`
# shows a file's chunks with their copies and servers; `sweepfs du` counts
# a tree on the master (a big one in a forked child, for root only). The
# alert rules and the Grafana dashboard in dist/monitoring name only
# metrics that the master, the chunkserver and the mount (-o
# metrics_listen) serve. A file restored from
# the trash whose directory is gone gets its directories made again.
. "$(dirname "$0")/../lib.sh"
sw_init health --root
start_metrics_cluster
NPORT=$(pick_port)
start_mount "$SW_TMP/mnt" "" "metrics_listen=127.0.0.1:$NPORT"
M=$SW_MNT
NURL=http://127.0.0.1:$NPORT/metrics
DIST=$SW_SRC/../../dist/monitoring

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

log "the mount serves metrics: its requests to the master and their latency"
scrape "$NURL" \
	'v("sweepfs_mount_info") == 1' \
	'v("sweepfs_mount_uptime_seconds") > 0' \
	'v("sweepfs_mount_master_requests_total", type="lookup") >= 1' \
	'v("sweepfs_mount_master_requests_total", type="chunk") >= 1' \
	'v("sweepfs_mount_master_request_duration_seconds_count", type="lookup") == v("sweepfs_mount_master_requests_total", type="lookup")' \
	'v("sweepfs_mount_master_request_duration_seconds_sum") > 0'

log "dist/monitoring: every metric the alert rules and the dashboard name is served"
$PY3 "$SW_HERE/dist_metrics.py" "$DIST/sweepfs-alerts.yml" \
	"$DIST/sweepfs-dashboard.json" "$MURL" "$CURL" "$NURL" >"$SW_TMP/dist.out" 2>&1 ||
	fail "$(cat "$SW_TMP/dist.out")"
cat "$SW_TMP/dist.out" >&2
# The check can fail: a rule naming a metric nobody serves.
sed 's/sweepfs_master_chunks_unhealthy/sweepfs_master_chunks_unhealty/' \
	"$DIST/sweepfs-alerts.yml" >"$SW_TMP/bad-alerts.yml"
! $PY3 "$SW_HERE/dist_metrics.py" "$SW_TMP/bad-alerts.yml" \
	"$DIST/sweepfs-dashboard.json" "$MURL" "$CURL" "$NURL" >/dev/null 2>&1 ||
	fail "dist_metrics.py passed a rule naming a metric nobody serves"

log "info: a file's chunks, versions, copies and servers"
CS_ADDR=$SW_CS_HOST:${SW_CS_PORTS[1]}
out=$(sw_tool info "$M/d/a") || fail "sweepfs info: $out"
grep -q "^$M/d/a: 67108865 bytes, 2 chunks, goal 1$" <<<"$out" || fail "info's head: $out"
[[ $(grep -c "^  chunk [01]: [0-9a-f]\{16\} version [0-9]*, 1 of 1 copies$" <<<"$out") == 2 ]] ||
	fail "info's chunks: $out"
[[ $(grep -c "^    copy on $CS_ADDR: version [0-9]*, valid$" <<<"$out") == 2 ]] ||
	fail "info's copies: $out"
# A name that no JSON writer gets right by accident: a byte outside UTF-8,
# a control byte, a backslash, the text of an escape, a quote.
ODD=$'o\x01\\u0001"\xff\xc3'
touch "$M/e/$ODD"
j=$(sw_tool info --json "$M/d/a" "$M/d/"$'caf\xe9' "$M/e/$ODD") || fail "sweepfs info --json"
$PY3 - "$j" "$CS_ADDR" <<'PY' || fail "info --json: $j"
import json, sys
d = json.loads(sys.argv[1], strict=True)
a, cafe, odd = d
assert odd["path"].encode("utf-8", "surrogateescape").endswith(b'/e/o\x01\\u0001"\xff\xc3'), odd
assert odd["size"] == 0 and odd["chunks"] == []
assert a["size"] == 64 * 2**20 + 1 and a["slots"] == 2, a
assert [c["index"] for c in a["chunks"]] == [0, 1]
for c in a["chunks"] + cafe["chunks"]:
    assert c["valid_copies"] == 1 and c["goal"] == 1, c
    assert [(k["server"], k["state"], k["connected"]) for k in c["copies"]] == [(sys.argv[2], "valid", True)], c
    assert all(k["version"] == c["version"] for k in c["copies"])
assert cafe["path"].encode("utf-8", "surrogateescape").endswith(b"/d/caf\xe9")
PY
rc=0
out=$(sw_tool info "$M/d" 2>&1) || rc=$?
assert_eq 1 "$rc" "info of a directory"
grep -q "a directory (sweepfs du" <<<"$out" || fail "info of a directory: $out"

log "du: a tree's files, directories, bytes and chunks, counted on the master"
out=$(sw_tool du "$M/d") || fail "sweepfs du: $out"
assert_eq "$M/d: 3 files, 2 directories, 0 others, $((64 * 2**20 + 1 + 2 * 102400)) bytes (64.2 MiB), 4 chunks" \
	"$out" "du of d"
ln -s a "$M/d/link"
j=$(sw_tool du --json "$M/d" "$M/e/c") || fail "sweepfs du --json"
$PY3 - "$j" <<'PY' || fail "du --json: $j"
import json, sys
d, c = json.loads(sys.argv[1], strict=True)
assert (d["files"], d["dirs"], d["others"], d["chunks"]) == (3, 2, 1, 4), d
assert (c["files"], c["dirs"], c["bytes"], c["chunks"]) == (1, 0, 102400, 1), c
PY
# A tree over the bound: a forked child counts it for root on an admin
# export; another user is told it is too big for it.
mkdir "$M/big" "$M/big/s"
(cd "$M/big/s" && seq -f 'f%g' 20001 | xargs touch)
t0=$(date +%s%N)
out=$(sw_tool du "$M/big") || fail "du of a big tree as root: $out"
assert_eq "$M/big: 20001 files, 2 directories, 0 others, 0 bytes (0 B), 0 chunks" "$out" "du of big"
# A second fork within a second of the first is refused (checked only
# when the machine was quick enough for the two to come that close).
rc=0
out=$(sw_tool du "$M/big" 2>&1) || rc=$?
if (($(date +%s%N) - t0 < 900000000)); then
	assert_eq 1 "$rc" "a second fork within a second"
	grep -q "temporarily unavailable" <<<"$out" || fail "a second fork within a second: $out"
fi
chmod 755 "$SW_TMP"
rc=0
out=$(as_user 65534 65534 "" "$SW_TOOL_BIN" -m "$SW_MASTER_HOST:$SW_PORT" du "$M/big" 2>&1) || rc=$?
assert_eq 1 "$rc" "du of a big tree as a user"
grep -q "too big a tree for this session" <<<"$out" || fail "du of a big tree as a user: $out"
out=$(as_user 65534 65534 "" "$SW_TOOL_BIN" -m "$SW_MASTER_HOST:$SW_PORT" du "$M/e") ||
	fail "du of a small tree as a user: $out"
assert_eq "$M/e: 2 files, 1 directories, 0 others, 102400 bytes (100.0 KiB), 1 chunks" "$out" "du of e as a user"
sw_tool rmr "$M/big" >/dev/null || fail "rmr big"
# A user's count stops at directories it may not search; root's does not.
mkdir -p "$M/p/hidden"
touch "$M/p/y" "$M/p/hidden/x" "$M/p/hidden/z"
chmod 700 "$M/p/hidden"
out=$(as_user 65534 65534 "" "$SW_TOOL_BIN" -m "$SW_MASTER_HOST:$SW_PORT" du "$M/p") ||
	fail "du of p as a user: $out"
assert_eq "$M/p: 1 files, 2 directories, 0 others, 0 bytes (0 B), 0 chunks" "$out" "du of p as a user"
out=$(sw_tool du "$M/p") || fail "du of p as root: $out"
assert_eq "$M/p: 3 files, 2 directories, 0 others, 0 bytes (0 B), 0 chunks" "$out" "du of p as root"
# Few names, many chunk slots: too much for the loop, a child for root.
mkdir "$M/huge"
printf x | dd of="$M/huge/f" bs=1 seek=$((200001 * 64 * 2**20)) conv=notrunc status=none ||
	fail "a write past 200001 chunks"
rc=0
out=$(as_user 65534 65534 "" "$SW_TOOL_BIN" -m "$SW_MASTER_HOST:$SW_PORT" du "$M/huge" 2>&1) || rc=$?
assert_eq 1 "$rc" "du of a file of 200002 chunk slots as a user"
grep -q "too big a tree for this session" <<<"$out" || fail "du of many chunk slots as a user: $out"
sleep 1.1 # the last fork's gap
out=$(sw_tool du "$M/huge") || fail "du of many chunk slots as root: $out"
grep -q "^$M/huge: 1 files, 1 directories, 0 others, .*, 1 chunks$" <<<"$out" ||
	fail "du of many chunk slots as root: $out"
rm -rf "$M/p" "$M/huge"

log "trash restore of a file whose directory is gone makes the directory again"
mkdir "$M/t"
sw_tool settrashtime 3600 "$M/t" >/dev/null || fail "settrashtime"
mkdir -p "$M/t/x/y"
echo restored >"$M/t/x/y/f"
rm -rf "$M/t/x"
tid=$(sw_tool trash ls --json | $PY3 -c 'import json, sys
print([i["id"] for i in json.load(sys.stdin)["items"] if i["path"] == "/t/x/y/f"][0])') ||
	fail "no /t/x/y/f in the trash: $(sw_tool trash ls)"
touch "$M/t/x"
rc=0
out=$(sw_tool trash restore "$tid" 2>&1) || rc=$?
assert_eq 1 "$rc" "restoring under a file"
grep -q "Not a directory" <<<"$out" || fail "restoring under a file: $out"
rm "$M/t/x"
out=$(sw_tool trash restore "$tid" 2>&1) || fail "trash restore: $out"
grep -q "its directory was gone: made 2 directories again" <<<"$out" ||
	fail "trash restore does not say what it made: $out"
wait_until 5 "the restored file" test -f "$M/t/x/y/f"
assert_eq restored "$(cat "$M/t/x/y/f")" "the restored file's data"
assert_eq "$(id -u) 755" "$(stat -c '%u %a' "$M/t/x/y")" "a directory made again"
sw_tool rmr "$M/t" >/dev/null || fail "rmr t"

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
out=$(sw_tool info "$M/d/sub/b") || fail "sweepfs info, server down: $out"
grep -q "0 of 1 copies - LOST" <<<"$out" || fail "info hides a lost chunk: $out"
grep -q "valid (server down)" <<<"$out" || fail "info hides the server down: $out"
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
