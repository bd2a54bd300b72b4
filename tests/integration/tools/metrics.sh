#!/bin/bash
# metrics: the master and a chunkserver serve Prometheus metrics on
# metrics_listen; a real mount works through the cluster and the scrapes
# must parse with Prometheus' own text parser (scrape.py), with
# histograms well formed, and say what happened: requests by type and
# their latency, sessions, the purge of a removed tree and the chunk
# deletions it queued per chunkserver, the changelog's fdatasyncs,
# background slices, memory per node; on the chunkserver, reads and
# writes and each data directory's space and chunks. Also: a wrong path
# gets 404 and a POST 405, idle connections to the endpoint do not stop
# the master, and without the key no daemon listens for metrics.

. "$(dirname "$0")/../lib.sh"
sw_init metrics
start_metrics_cluster --set purge_duty=2 --set purge_duty_busy=2
start_mount
M=$SW_MNT
export SWEEPFS_MASTER=$SW_MASTER_HOST:$SW_PORT
grep -q "metrics at $MURL" "$SW_MASTER_LOG" || fail "the master does not say where its metrics are"

log "an idle cluster: every family parses"
scrape "$MURL" \
	'v("sweepfs_master_sessions", role="mount") == 1' \
	'v("sweepfs_master_sessions", role="chunkserver") == 1' \
	'v("sweepfs_master_nodes") >= 1' \
	'v("sweepfs_master_info", version="'"$("$SW_MASTER_BIN" --version | awk '{print $2}')"'") == 1' \
	'"sweepfs_master_changelog_fsync_duration_seconds" in fams' \
	'"sweepfs_master_background_slice_duration_seconds" in fams' \
	'n("sweepfs_master_chunk_deletions_pending") == 1' \
	'v("sweepfs_master_chunkserver_up") == 1'

# The checker itself can fail: a false check, a missing sample.
! $PY3 "$SW_SRC/scrape.py" "$MURL" 'v("sweepfs_master_nodes") < 0' >/dev/null 2>&1 ||
	fail "scrape.py passed a false check"
! $PY3 "$SW_SRC/scrape.py" "$MURL" 'v("sweepfs_no_such_metric") >= 0' >/dev/null 2>&1 ||
	fail "scrape.py passed a check of a missing metric"

log "work through the mount: 3000 files, data in 4, read back, a tree removed"
mkdir "$M/d" "$M/big"
(cd "$M/d" && seq -f 'f%g' 1000 | xargs touch)
(cd "$M/big" && seq -f 'g%g' 2000 | xargs touch)
for i in 1 2 3 4; do
	head -c 3M /dev/urandom >"$M/big/data$i"
done
sync
drop_caches
cat "$M"/big/data* >/dev/null
ls -l "$M/d" >/dev/null
"$SW_TOOL_BIN" rmr "$M/big"
scrape "$MURL" \
	'v("sweepfs_master_requests_total") >= 1000' \
	'v("sweepfs_master_requests_total", type="lookup") >= 1' \
	'v("sweepfs_master_request_duration_seconds_count", type="lookup") >= 1' \
	'v("sweepfs_master_request_duration_seconds_count") <= v("sweepfs_master_requests_total")' \
	'v("sweepfs_master_request_duration_seconds_sum") > 0' \
	'v("sweepfs_master_nodes") >= 1000' \
	'v("sweepfs_master_resident_bytes_per_node") > 0' \
	'v("sweepfs_master_purge_nodes_left") + v("sweepfs_master_purged_nodes_total") >= 2000' \
	'v("sweepfs_master_changelog_fsync_duration_seconds_count") >= 1' \
	'v("sweepfs_master_cpu_seconds_total", mode="user") > 0' \
	'v("sweepfs_master_received_bytes_total") > 0'
cat "$SW_TMP/scrape.out"
status_is() { [[ "$(sw_status "d[\"$1\"]")" == "$2" ]]; }
wait_until 120 "the purge to end" status_is purge_left 0
CS_ADDR=$SW_CS_HOST:${SW_CS_PORTS[1]}
scrape "$MURL" \
	'v("sweepfs_master_purge_nodes_left") == 0' \
	'v("sweepfs_master_purged_nodes_total") >= 2004' \
	'v("sweepfs_master_background_slice_duration_seconds_count") >= 1' \
	'n("sweepfs_master_chunk_deletions_pending") == 1' \
	'v("sweepfs_master_chunk_deletions_pending", server="'"$CS_ADDR"'") >= 0'
scrape "$CURL" \
	'v("sweepfs_chunkserver_requests_total", type="write") >= 4' \
	'v("sweepfs_chunkserver_requests_total", type="read") >= 4' \
	'v("sweepfs_chunkserver_request_duration_seconds_count", type="write") == v("sweepfs_chunkserver_requests_total", type="write")' \
	'v("sweepfs_chunkserver_received_bytes_total") >= 12 << 20' \
	'v("sweepfs_chunkserver_sent_bytes_total") >= 12 << 20' \
	'v("sweepfs_chunkserver_master_registered") == 1' \
	'v("sweepfs_chunkserver_dir_size_bytes", dir="'"$SW_TMP/cs1"'") > 0' \
	'v("sweepfs_chunkserver_dir_avail_bytes", dir="'"$SW_TMP/cs1"'") > 0' \
	'n("sweepfs_chunkserver_dir_chunks") == 1'
cat "$SW_TMP/scrape.out"

log "the chunks of the removed files are deleted, and the metrics say so"
wait_until 60 "the chunk deletions to be done" \
	$PY3 "$SW_SRC/scrape.py" "$MURL" 'v("sweepfs_master_chunk_deletions_pending") == 0'
wait_until 60 "the chunkserver to hold no chunk" \
	$PY3 "$SW_SRC/scrape.py" "$CURL" 'v("sweepfs_chunkserver_chunks") == 0' \
	'v("sweepfs_chunkserver_dir_chunks") == 0'

log "a wrong path, a wrong method"
code() { $PY3 -c '
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(urllib.request.Request(sys.argv[1], method=sys.argv[2]), timeout=10)
    print(200)
except urllib.error.HTTPError as e:
    print(e.code)' "$@"; }
assert_eq 404 "$(code "http://$SW_MASTER_HOST:$MPORT/" GET)" "GET /"
assert_eq 405 "$(code "$MURL" POST)" "POST /metrics"
assert_eq 200 "$(code "$MURL" HEAD)" "HEAD /metrics"

log "40 idle connections to the endpoint: the filesystem goes on"
$PY3 - "$SW_MASTER_HOST" "$MPORT" "$M" <<'PYEOF' || fail "the master stalled behind idle metrics connections"
import os, socket, sys, time
host, port, mnt = sys.argv[1], int(sys.argv[2]), sys.argv[3]
held = []
for _ in range(40):
    try:
        held.append(socket.create_connection((host, port), timeout=2))
    except OSError:
        pass  # refused over the limit: fine
t = time.monotonic()
for i in range(200):
    os.stat(os.path.join(mnt, "d", "f%d" % (i + 1)))
assert time.monotonic() - t < 5, "200 stats took %.1f s" % (time.monotonic() - t)
for s in held:
    s.close()
PYEOF
wait_until 20 "a scrape after the idle connections closed" \
	$PY3 "$SW_SRC/scrape.py" "$MURL" 'v("sweepfs_master_nodes") >= 1000'

log "off by default: a chunkserver without the key serves none"
start_chunkservers 1
! grep -q "metrics at" "${SW_CS_LOGS[2]}" || fail "metrics served without metrics_listen"
sw_pass
