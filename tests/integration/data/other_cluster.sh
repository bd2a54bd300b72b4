#!/bin/bash
# A chunkserver pointed at a master of another cluster (a stray -m, or a
# chunkserver key copied between clusters) does not register with it:
# that master's chunk ids name other files, and it would take this
# chunkserver's chunk files for stale copies of its own chunks, or for
# chunks it freed, and delete them.
#
#  1. Cluster A: a chunkserver holds 20 files' chunks; its data directory
#     says whose they are (.cluster_id).
#  2. Cluster B: another metadata directory holding A's chunkserver key,
#     its own chunkserver and 40 files of its own (its chunk ids cover
#     A's). A's chunkserver, started against B, refuses it, says why in
#     its log, and not a byte of its chunk files changes.
#  3. Back on A: it registers, and A's files read back whole.
#  4. A chunkserver given data directories of two clusters (a disk moved
#     in from another cluster's chunkserver) refuses to start, naming both.

. "$(dirname "$0")/../lib.sh"
sw_init other_cluster

disk_sums() {
	(cd "$SW_TMP/cs1" && find . -name 'chunk_*.swc' -type f | sort |
		xargs -r sha256sum)
}

# ---- 1. cluster A -----------------------------------------------------------

start_master
start_mount "$SW_TMP/mnt"
for i in $(seq 1 20); do
	head -c 65536 /dev/urandom >"$SW_TMP/mnt/a$i"
done
sync
(cd "$SW_TMP/mnt" && sha256sum a*) >"$SW_TMP/a.sums"
stop_mount "$SW_TMP/mnt"
stop_chunkserver 1
[[ -s "$SW_TMP/cs1/.cluster_id" ]] ||
	fail "the chunkserver did not note its cluster in its data directory"
disk_sums >"$SW_TMP/disk1"
assert_eq 20 "$(wc -l <"$SW_TMP/disk1")" "chunk files of cluster A"
stop_master
META_A=$SW_META

# ---- 2. cluster B, with A's chunkserver key -----------------------------------

log "cluster B, A's chunkserver pointed at it"
mkdir -p "$SW_TMP/meta-b"
cp "$META_A/chunkserver.key" "$SW_TMP/meta-b/"
SW_META=$SW_TMP/meta-b
SW_MASTER_LOG=$SW_TMP/master-b.log
_launch_master --fixed-port || fail "master B did not start"
start_chunkservers 1
start_mount "$SW_TMP/mnt-b"
for i in $(seq 1 40); do
	head -c 65536 /dev/urandom >"$SW_TMP/mnt-b/b$i"
done
sync
_launch_chunkserver 1 --fixed-port || fail "chunkserver 1 did not start"
wait_until 20 "chunkserver 1 to refuse cluster B" \
	grep -q "serves cluster .* are of cluster" "${SW_CS_LOGS[1]}"
# Long enough for a registration and a deletion batch, had there been one.
sleep 3
connected_chunkservers | grep -qx "127.0.0.1:${SW_CS_PORTS[1]}" &&
	fail "chunkserver 1 registered with another cluster's master"
disk_sums >"$SW_TMP/disk2"
cmp -s "$SW_TMP/disk1" "$SW_TMP/disk2" ||
	fail "chunkserver 1's chunk files changed while it was pointed at cluster B: $(diff "$SW_TMP/disk1" "$SW_TMP/disk2" | head -5)"
stop_mount "$SW_TMP/mnt-b"
stop_chunkserver 1
stop_chunkserver 2
stop_master

# ---- 3. back on A -------------------------------------------------------------

log "back on cluster A"
SW_META=$META_A
SW_MASTER_LOG=$SW_TMP/master.log
_launch_master --fixed-port || fail "master A did not start again"
_launch_chunkserver 1 --fixed-port || fail "chunkserver 1 did not start"
wait_chunkservers
start_mount "$SW_TMP/mnt2"
(cd "$SW_TMP/mnt2" && sha256sum -c --quiet "$SW_TMP/a.sums") ||
	fail "cluster A's files do not read back whole"

# ---- 4. data directories of two clusters ---------------------------------------

log "data directories of two clusters"
stop_chunkserver 1 # its directory is locked while it runs
cmp -s "$SW_TMP/cs1/.cluster_id" "$SW_TMP/cs2/.cluster_id" &&
	fail "clusters A and B have the same id"
rc=0
timeout 20 "$SW_CS_BIN" -f -d "$SW_TMP/cs2" -d "$SW_TMP/cs1" \
	-l 127.0.0.1:"$(pick_port)" -m "$SW_MASTER_HOST:$SW_PORT" \
	--set master_key_file="$META_A/chunkserver.key" \
	>"$SW_TMP/two.log" 2>&1 || rc=$?
assert_ne 0 "$rc" "exit status of a chunkserver with two clusters' directories"
grep -q "data directories of two clusters" "$SW_TMP/two.log" ||
	fail "no reason given on stderr: $(tail -3 "$SW_TMP/two.log")"
sw_pass
