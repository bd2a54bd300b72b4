#!/bin/bash
# File data through the mount, two chunkservers and the master (issue 3):
#
#  1. sizes 0, 1, 64 KiB +-1, 64 MiB +-1, 200 MiB and a sparse file, each
#     written at random offsets (datafile.py: pieces in random order,
#     garbage first then overwritten, holes), read back after dropping
#     the kernel's caches and through a second mount: sha256 as expected;
#  2. four writers at once, each its own file;
#  3. fio with --verify=crc32c: written through one mount, verified
#     (--verify_only) through the other after dropping caches;
#  4. one byte of a chunk file flipped on disk, goal 1: reading the block
#     fails with EIO, the rest of the file still reads, nothing crashes,
#     fsck reports the chunk; after rm it is clean again;
#  5. 10,000 files with data removed with rm -rf: their chunk files
#     leave the chunkservers' disks at delete_rate per server (not
#     faster, not much slower), and the space comes back in statfs;
#  6. kill -9 of the chunkserver under a writer that fsyncs each block,
#     goal 1: the writer waits it out, and every block acknowledged by
#     fsync reads back intact after the restart;
#  7. goal 2: every chunk on both servers; kill -9 of one under the
#     writer: writes go on, reads work while it is down, and after its
#     restart replication makes fsck clean and its copies hold the data
#     (checked with the other server stopped);
#  8. goal 2 and the same one-byte corruption of one copy: the read
#     succeeds from the other copy, the damaged copy is replaced, fsck
#     is clean.
# The chunkservers' data directories are tmpfs mounts of their own, so
# that the space statfs reports is theirs alone. DATA_SEED (random,
# printed) repeats the contents and choices.
. "$(dirname "$0")/../lib.sh"
sw_init data --root
command -v fio >/dev/null || skip "fio is not installed"

SEED=${DATA_SEED:-$(date +%s%N | cut -c10-18)}
SEED=$((10#$SEED)) # digits from the clock may start with 0: not octal
RATE=1000 # delete_rate: chunk deletions per second per chunkserver
log "seed $SEED (DATA_SEED=$SEED to repeat)"
RANDOM=$SEED
DF=$SW_SRC/datafile.py
MiB=$((1 << 20))

sw_tmpfs "$SW_TMP/cs1" 1536m
sw_tmpfs "$SW_TMP/cs2" 1536m
SW_CHUNKSERVERS=2
start_master --set goal=1 --set "delete_rate=$RATE"
start_mount "$SW_TMP/mnt"
start_mount "$SW_TMP/mnt2"
M=$SW_TMP/mnt
M2=$SW_TMP/mnt2

# Bytes used, as statfs on the mount says (the chunkservers' sum).
used_bytes() {
	stat -f -c '%S %b %f' "$M" | awk '{ printf "%d\n", $1 * ($2 - $3) }'
}

# check_sum FILE SHA256 WHAT: the file's sha256 through both mounts,
# after dropping the kernel's caches.
check_sum() {
	local rel=${1#"$M"/} got
	drop_caches
	got=$(sha256sum <"$M/$rel" | cut -d' ' -f1)
	assert_eq "$2" "$got" "sha256 of $rel ($3) through the first mount"
	got=$(sha256sum <"$M2/$rel" | cut -d' ' -f1)
	assert_eq "$2" "$got" "sha256 of $rel ($3) through the second mount"
}

# wait_no_chunks SECONDS: every chunk file gone from the disks.
no_chunks() { (($(chunk_files) == 0)); }
wait_no_chunks() {
	wait_until "$1" "the chunk files to leave the disks" no_chunks
}

# fsck_is FIELD VALUE: fsck --json says FIELD is VALUE.
fsck_is() { [[ "$(fsck_json "d[\"$1\"]")" == "$2" ]]; }

all_alive() {
	local i
	alive "$SW_MASTER_PID" || fail "the master died"
	for i in "${!SW_CS_PIDS[@]}"; do
		[[ -n "${SW_CS_PIDS[i]}" ]] || continue
		alive "${SW_CS_PIDS[i]}" || fail "chunkserver $i died"
	done
	for i in "${!SW_MOUNT_PIDS[@]}"; do
		alive "${SW_MOUNT_PIDS[i]}" || fail "mount ${SW_MOUNTS[i]} died"
	done
}

# ---- 1. sizes, random offsets ------------------------------------------------
log "sizes, written at random offsets"
mkdir "$M/sizes"
sizes=(0 1 $((64 << 10)) $((64 << 10)) $((64 << 10))
	$((64 * MiB)) $((64 * MiB)) $((64 * MiB)) $((200 * MiB)))
deltas=(0 0 -1 0 1 -1 0 1 0)
declare -A want
for k in "${!sizes[@]}"; do
	size=$((sizes[k] + deltas[k]))
	f=$M/sizes/f$size
	want[$f]=$("$PYTHON" "$DF" write "$f" "$size" "$SEED" random)
	assert_stat %s "$size" "$f" "size of f$size"
done
f=$M/sizes/sparse
want[$f]=$("$PYTHON" "$DF" write "$f" $((100 * MiB + 12345)) "$SEED" sparse)
# the same content made front to back, for comparison with the sparse one
assert_eq "${want[$f]}" "$("$PYTHON" "$DF" expect $((100 * MiB + 12345)) "$SEED" sparse)" \
	"sha256 of the sparse plan, twice"
for f in "${!want[@]}"; do
	check_sum "$f" "${want[$f]}" "$(stat -c %s "$f") bytes"
done
# a sparse file takes less than its size on the chunkservers (holes)
blocks=$(stat -c %b "$M/sizes/sparse")
log "sparse file: $blocks blocks of 512 for $((100 * MiB + 12345)) bytes"
rm -rf "$M/sizes"
wait_no_chunks 60
all_alive

# ---- 2. concurrent writers ------------------------------------------------------
log "four writers at once"
mkdir "$M/conc"
pids=()
for w in 1 2 3 4; do
	"$PYTHON" "$DF" write "$M/conc/w$w" $((24 * MiB + w * 4097)) $((SEED + w)) random \
		>"$SW_TMP/conc.$w" &
	pids+=($!)
done
for p in "${pids[@]}"; do
	wait "$p" || fail "a concurrent writer failed"
done
for w in 1 2 3 4; do
	check_sum "$M/conc/w$w" "$(cat "$SW_TMP/conc.$w")" "writer $w of 4"
done
rm -rf "$M/conc"
all_alive

# ---- 3. fio --verify=crc32c ---------------------------------------------------------
log "fio: write through one mount, verify through the other"
mkdir "$M/fio"
fio_job=(--name=sweepfs --directory=DIR --numjobs=2 --size=80m --bs=64k
	--rw=randwrite --ioengine=psync --verify=crc32c --verify_fatal=1
	--randseed=$SEED --group_reporting)
fio_run() { # DIR ARGS...
	local dir=$1
	shift
	fio "${fio_job[@]/--directory=DIR/--directory=$dir}" "$@"
}
fio_run "$M/fio" --do_verify=0 >"$SW_TMP/fio.write" 2>&1 ||
	{ cat "$SW_TMP/fio.write" >&2; fail "fio (write phase)"; }
drop_caches
fio_run "$M2/fio" --verify_only >"$SW_TMP/fio.verify" 2>&1 ||
	{ cat "$SW_TMP/fio.verify" >&2; fail "fio --verify_only through the second mount"; }
# the verify pass read what the write pass wrote: 2 jobs x 80 MiB
grep -Eq 'READ: bw=.* io=160MiB' "$SW_TMP/fio.verify" ||
	{ cat "$SW_TMP/fio.verify" >&2; fail "fio --verify_only did not read 160 MiB"; }
# and a job that writes blocks of mixed sizes and verifies as it goes
fio --name=mixed --directory="$M/fio" --size=48m --bsrange=4k-1m --rw=write \
	--ioengine=psync --verify=crc32c --do_verify=1 --verify_fatal=1 \
	--randseed=$SEED >"$SW_TMP/fio.mixed" 2>&1 ||
	{ cat "$SW_TMP/fio.mixed" >&2; fail "fio write+verify with mixed block sizes"; }
rm -rf "$M/fio"
wait_no_chunks 60
all_alive

# ---- 4. a corrupted block, goal 1 ------------------------------------------------------
log "one byte of a chunk file flipped, goal 1"
wait_fsck_clean 30 "before the corruption"
mkdir "$M/bad"
size=$((8 * MiB))
sum=$("$PYTHON" "$DF" write "$M/bad/f" "$size" "$SEED" seq --fsync)
find "$SW_TMP"/cs[12] -name 'chunk_*.swc' >"$SW_TMP/chunks.bad"
assert_eq 1 "$(wc -l <"$SW_TMP/chunks.bad")" "chunk files of the 8 MiB file"
cf=$(cat "$SW_TMP/chunks.bad")
BAD_OFF=$((6 * MiB + 12345)) # in the file, and in the chunk (one chunk)
flip_byte() { # FILE OFFSET
	"$PYTHON" - "$1" "$2" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
off = 12288 + int(sys.argv[2])   # the chunk's data follows a 12 KiB header
b = os.pread(fd, 1, off)
os.pwrite(fd, bytes([b[0] ^ 0x5a]), off)
os.fsync(fd)
os.close(fd)
EOF
}
flip_byte "$cf" "$BAD_OFF"
drop_caches
start_mount "$SW_TMP/cold"
assert_eq EIO "$("$PYTHON" "$DF" read "$SW_TMP/cold/bad/f")" "reading the corrupted file"
assert_eq EIO "$("$PYTHON" "$DF" read "$SW_TMP/cold/bad/f" $((6 * MiB)) $((64 << 10)))" \
	"reading the 64 KiB block with the flipped byte"
# the other blocks are intact, and read
assert_eq "OK $("$PYTHON" "$DF" expect "$size" "$SEED" seq 0 $((4 * MiB)))" \
	"$("$PYTHON" "$DF" read "$SW_TMP/cold/bad/f" 0 $((4 * MiB)))" \
	"the first 4 MiB of the corrupted file"
assert_eq "OK $("$PYTHON" "$DF" expect "$size" "$SEED" seq $((7 * MiB)) $((1 * MiB)))" \
	"$("$PYTHON" "$DF" read "$SW_TMP/cold/bad/f" $((7 * MiB)) $((1 * MiB)))" \
	"the last MiB of the corrupted file"
stop_mount "$SW_TMP/cold"
all_alive
wait_until 10 "fsck to report the damaged chunk" fsck_is lost_chunks 1
st=0
sw_tool fsck >"$SW_TMP/fsck.bad" 2>&1 || st=$?
assert_eq 1 "$st" "fsck's exit status with a damaged chunk"
grep -q 'no valid copy' "$SW_TMP/fsck.bad" ||
	{ cat "$SW_TMP/fsck.bad" >&2; fail "fsck does not name the damaged chunk"; }
rm -rf "$M/bad"
wait_no_chunks 30
wait_fsck_clean 30 "after removing the damaged file"
all_alive

# ---- 5. 10,000 files removed: paced chunk deletion, space back ----------------------
N=10000
log "$N files with data, removed with rm -rf (delete_rate $RATE per server)"
wait_fsck_clean 30 "before the $N files"
used0=$(used_bytes)
mkdir "$M/many"
pids=()
for w in 0 1 2 3; do
	"$PYTHON" - "$M/many" "$w" $((N / 4)) $((SEED + w)) <<'EOF2' &
import os, random, sys
root, w, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
for i in range(n):
    if i % 100 == 0:
        d = os.path.join(root, "w%d_%03d" % (w, i // 100))
        os.mkdir(d)
    with open(os.path.join(d, "f%03d" % (i % 100)), "wb") as f:
        f.write(rng.randbytes(4096))
EOF2
	pids+=($!)
done
for p in "${pids[@]}"; do
	wait "$p" || fail "a writer of the $N files failed"
done
assert_eq "$N" "$(find "$M/many" -type f | wc -l)" "files made"
assert_eq "$N" "$(chunk_files)" "chunk files on the disks for $N one-chunk files"
assert_eq "$N" "$(sw_status 'd["chunks"]')" "chunks the master counts"
n1=$(chunk_files 1)
n2=$(chunk_files 2)
log "chunk files: $n1 on chunkserver 1, $n2 on chunkserver 2"
grew() { (($(used_bytes) >= used0 + N * 4096)); }
wait_until 10 "statfs to count the new files' space" grew
used1=$(used_bytes)
log "statfs: $used0 bytes used before, $used1 with the files"
t0=$(date +%s%N)
rm -rf "$M/many"
t_rm=$((($(date +%s%N) - t0) / 1000000))
pending=$(sw_status 'd["chunk_deletes_pending"]')
log "rm -rf took $t_rm ms; $pending chunk deletions still queued, $(chunk_files) chunk files left"
t_end=
for ((i = 0; i < 1200; i++)); do
	if (($(chunk_files) == 0)); then
		t_end=$((($(date +%s%N) - t0) / 1000000))
		break
	fi
	sleep 0.1
done
[[ -n "$t_end" ]] || fail "chunk files still on the disks 120 s after rm -rf: $(chunk_files)"
nmax=$((n1 > n2 ? n1 : n2))
# a token bucket of delete_rate per second holding at most delete_rate/2
# + 1, refilled every 100 ms: n deletions on one server take at least
# (n - rate/2 - 1) / rate seconds
min_ms=$(((nmax - RATE / 2 - 1) * 1000 / RATE - 200))
max_ms=$((t_rm + nmax * 3000 / RATE + 10000))
log "chunk files gone $t_end ms after rm -rf began (pace allows $min_ms..$max_ms ms)"
assert_ge "$min_ms" "$t_end" "ms for $nmax chunk deletions at $RATE/s (faster than delete_rate)"
assert_le "$max_ms" "$t_end" "ms for $nmax chunk deletions at $RATE/s (far slower than delete_rate)"
assert_eq 0 "$(sw_status 'd["chunk_deletes_pending"]')" "chunk deletions queued after the drain"
assert_eq 0 "$(sw_status 'd["chunks"]')" "chunks the master counts after the drain"
back() { (($(used_bytes) == used0)); }
wait_until 10 "statfs to give the space back (used $(used_bytes), was $used0)" back
wait_fsck_clean 30 "after the $N files"
all_alive

# ---- 6. kill -9 of the chunkserver under fsync'd writes, goal 1 -------------------------
log "kill -9 of the chunkserver under fsync'd writes, goal 1"
stop_chunkserver 2 # every chunk goes to chunkserver 1
mkdir "$M/ack"
BLOCK=$MiB
COUNT=96 # crosses a chunk boundary
kill_at=$((8 + RANDOM % 48))
: >"$SW_TMP/ack.g1"
"$PYTHON" "$DF" append "$M/ack/g1" "$SEED" "$SW_TMP/ack.g1" "$BLOCK" "$COUNT" \
	2>"$SW_TMP/ack.g1.err" &
writer=$!
acked() { wc -l <"$1"; }
wait_acked() { # LOG N
	local i
	for ((i = 0; i < 1200; i++)); do
		(($(acked "$1") >= $2)) && return 0
		alive "$writer" || return 0
		sleep 0.05
	done
	fail "timed out waiting for $2 acknowledged blocks in $1"
}
wait_acked "$SW_TMP/ack.g1" "$kill_at"
kill_chunkserver 1
log "chunkserver 1 killed after $(acked "$SW_TMP/ack.g1") acknowledged blocks"
sleep 1.5
restart_chunkserver 1 start
wait "$writer" || { cat "$SW_TMP/ack.g1.err" >&2; fail "the writer failed (goal 1)"; }
log "writer: $(grep -c . "$SW_TMP/ack.g1.err" || true) failed calls while the chunkserver was down"
assert_eq "$COUNT" "$(acked "$SW_TMP/ack.g1")" "acknowledged blocks (goal 1)"
drop_caches
assert_stat %s $((COUNT * BLOCK)) "$M/ack/g1" "size of the file (goal 1), writer's mount"
assert_stat %s $((COUNT * BLOCK)) "$M2/ack/g1" "size of the file (goal 1), other mount"
out=$("$PYTHON" "$DF" verify "$M2/ack/g1" "$SW_TMP/ack.g1") ||
	{ printf '%s\n' "$out" >&2; fail "fsync'd data lost after kill -9 of the chunkserver (goal 1, seed $SEED)"; }
log "goal 1: $out"
restart_chunkserver 2 start
wait_fsck_clean 30 "after the chunkserver's restart (goal 1)"
rm -rf "$M/ack"
wait_no_chunks 30
all_alive

# ---- 7. goal 2: kill -9 of one chunkserver under fsync'd writes ---------------------------
log "goal 2: kill -9 of a chunkserver under fsync'd writes"
SW_MASTER_ARGS=(--set goal=2 --set "delete_rate=$RATE")
restart_master term
mkdir "$M/ack2"
kill_at=$((8 + RANDOM % 32))
: >"$SW_TMP/ack.g2"
"$PYTHON" "$DF" append "$M/ack2/g2" "$((SEED + 1))" "$SW_TMP/ack.g2" "$BLOCK" "$COUNT" \
	2>"$SW_TMP/ack.g2.err" &
writer=$!
wait_acked "$SW_TMP/ack.g2" "$kill_at"
kill_chunkserver 1
k=$(acked "$SW_TMP/ack.g2")
log "chunkserver 1 killed after $k acknowledged blocks"
# writes go on with one copy
wait_acked "$SW_TMP/ack.g2" $((k + 16 < COUNT ? k + 16 : COUNT))
# reads work while it is down
cp "$SW_TMP/ack.g2" "$SW_TMP/ack.g2.down"
drop_caches
out=$("$PYTHON" "$DF" verify "$M2/ack2/g2" "$SW_TMP/ack.g2.down") ||
	{ printf '%s\n' "$out" >&2; fail "reads with one of two chunkservers down (goal 2)"; }
log "goal 2, one chunkserver down: $out"
restart_chunkserver 1 start
wait "$writer" || { cat "$SW_TMP/ack.g2.err" >&2; fail "the writer failed (goal 2)"; }
assert_eq "$COUNT" "$(acked "$SW_TMP/ack.g2")" "acknowledged blocks (goal 2)"
wait_fsck_clean 90 "replication after the chunkserver's restart (goal 2)"
drop_caches
assert_stat %s $((COUNT * BLOCK)) "$M/ack2/g2" "size of the file (goal 2), writer's mount"
assert_stat %s $((COUNT * BLOCK)) "$M2/ack2/g2" "size of the file (goal 2), other mount"
out=$("$PYTHON" "$DF" verify "$M2/ack2/g2" "$SW_TMP/ack.g2") ||
	{ printf '%s\n' "$out" >&2; fail "fsync'd data lost after kill -9 of a chunkserver (goal 2, seed $SEED)"; }
log "goal 2, both up: $out"
# chunkserver 1's copies alone (re-replicated ones included) hold the data
stop_chunkserver 2
drop_caches
out=$("$PYTHON" "$DF" verify "$M2/ack2/g2" "$SW_TMP/ack.g2") ||
	{ printf '%s\n' "$out" >&2; fail "chunkserver 1's copies after re-replication (goal 2, seed $SEED)"; }
log "goal 2, chunkserver 1 alone: $out"
restart_chunkserver 2 start
wait_fsck_clean 30 "with both chunkservers back (goal 2)"
rm -rf "$M/ack2"
wait_no_chunks 30
all_alive

# ---- 8. goal 2: a corrupted copy -------------------------------------------------------
log "goal 2: one byte of one copy flipped"
mkdir "$M/bad2"
sum=$("$PYTHON" "$DF" write "$M/bad2/f" "$size" "$SEED" seq --fsync)
two_copies() { (($(chunk_files 1) == 1 && $(chunk_files 2) == 1)); }
wait_until 10 "the chunk to be on both chunkservers" two_copies
wait_fsck_clean 30 "before the corruption (goal 2)"
# A reader tries the copies in the order the master lists them, which
# after a restart is the order the chunkservers registered in: make it
# 1 then 2, so that the read meets the damaged copy first.
stop_chunkserver 2
restart_master kill
restart_chunkserver 2 start
cf1=$(find "$SW_TMP/cs1" -name 'chunk_*.swc')
cf2=$(find "$SW_TMP/cs2" -name 'chunk_*.swc')
assert_eq "${cf1##*/}" "${cf2##*/}" "the chunk file on both chunkservers"
flip_byte "$cf1" "$BAD_OFF"
byte_at() { # FILE OFFSET: the chunk's data byte, in hex
	od -An -tx1 -j $((12288 + $2)) -N1 "$1" | tr -d ' '
}
good=$(byte_at "$cf2" "$BAD_OFF")
assert_ne "$good" "$(byte_at "$cf1" "$BAD_OFF")" "the flipped byte"
drop_caches
start_mount "$SW_TMP/cold"
assert_eq "OK $sum" "$("$PYTHON" "$DF" read "$SW_TMP/cold/bad2/f")" \
	"reading the file with one damaged copy (goal 2)"
stop_mount "$SW_TMP/cold"
grep -q 'failed a checksum' "$SW_MASTER_LOG" ||
	fail "the master never heard of the damaged copy"
wait_fsck_clean 60 "replacing the damaged copy"
repaired() {
	local f
	f=$(find "$SW_TMP/cs1" -name 'chunk_*.swc')
	[[ "$(wc -l <<<"$f")" == 1 && "${f##*/}" == "${cf2##*/}" ]] || return 1
	[[ "$(byte_at "$f" "$BAD_OFF")" == "$good" ]]
}
wait_until 30 "chunkserver 1 to hold a good copy again" repaired
# chunkserver 1's new copy alone
stop_chunkserver 2
drop_caches
assert_eq "OK $sum" "$("$PYTHON" "$DF" read "$M2/bad2/f")" \
	"reading the file from the replaced copy alone"
restart_chunkserver 2 start
wait_fsck_clean 30 "at the end"
all_alive
stop_mount "$M2"
stop_mount "$M"
sw_pass
