#!/bin/bash
# Instant removal, snapshots and the trash (issue 5), with file data:
#
#  1. snapshot, then write to both copies: each sees its own data, and
#     the shared chunk is copied once (the master's chunk count and the
#     chunk files on disk grow by exactly one);
#  2. a snapshot big enough to be copied in the background (by a forked
#     child: snapshot_sync_max is 100) while another client renames
#     pairs of files (p.a <-> p.b, in order, round after round), creates
#     numbered files one after the other and appends fsync'd blocks to a
#     file in the source tree: the copy shows one instant (one name of
#     each pair, and the pairs' states change at one point at most; the
#     numbered files are a prefix; the file holds every acknowledged
#     block up to its size);
#  3. rmsnapshot: without -f nothing goes while any object lacks the
#     flag; with -f exactly the flagged objects go, 5,000 of them in
#     three requests added up by the tool; a fully flagged tree goes
#     whole without -f;
#  4. a file open in a process survives rmr of its tree: readable until
#     closed (contents checked), then gone, its chunk deleted, fsck
#     clean;
#  5. the trash: settrashtime, removals through the mount and rmr, trash
#     ls lists them with their paths, restore brings the data back (in
#     place and elsewhere), purge removes one, and a short trash time
#     expires another;
#  6. rmr of a 51,000-file tree sharing 1000 chunks (built with
#     snapshots), SIGKILL of the master in the middle of the purge
#     (purge_duty is 1%), restart: the purge completes, the chunks are
#     deleted on the chunkserver, and fsck is clean: no node, chunk or
#     chunk file leaked.
# The chunkserver keeps its chunks on a tmpfs. REMOVAL_SEED (random,
# printed) repeats the contents and choices.
. "$(dirname "$0")/../lib.sh"
sw_init removal --root

SEED=${REMOVAL_SEED:-$(date +%s%N | cut -c10-18)}
SEED=$((10#$SEED)) # digits from the clock may start with 0: not octal
log "seed $SEED (REMOVAL_SEED=$SEED to repeat)"
RANDOM=$SEED
DF=$SW_SRC/datafile.py
MiB=$((1 << 20))

sw_tmpfs "$SW_TMP/cs1" 1g
# stray_grace: when the chunkserver comes back after the killed master's
# restart has purged the tree (its reconnect back-off reaches 30 s on a
# loaded machine), its files are strays, deleted after stray_grace (5 min
# by default): the last wait below, 60 s, passed then only while it
# counted polls.
start_master --set purge_duty=1 --set purge_slice=20 --set snapshot_sync_max=100 \
	--set stray_grace=5s
start_mount
M=$SW_MNT

nodes() { sw_status 'd["nodes"]'; }
chunks() { sw_status 'd["chunks"]'; }
status_is() { [[ "$(sw_status "d[\"$1\"]")" == "$2" ]]; }
gone() { [[ ! -e "$1" ]]; }
# chunk files on disk = chunks the master knows, and nothing queued
chunks_settled() {
	status_is chunk_deletes_pending 0 &&
		(($(chunk_files) == $(chunks)))
}
sha() { sha256sum <"$1" | cut -d' ' -f1; }

# make_files DIR N SIZE: N files of SIZE random bytes each.
make_files() {
	"$PYTHON" - "$@" "$SEED" <<'EOF'
import os, random, sys
d, n, size, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random("%s/%d" % (os.path.basename(d), seed))
os.makedirs(d, exist_ok=True)
for i in range(n):
    with open(os.path.join(d, "f%04d" % i), "wb") as f:
        f.write(rng.randbytes(size))
EOF
}

# ---- 1. snapshot, then write to both copies ----------------------------------------
log "snapshot, then write to both copies"
mkdir "$M/cow"
"$PYTHON" "$DF" write "$M/cow/f" $((3 * MiB)) "$SEED" seq >/dev/null
orig=$(sha "$M/cow/f")
wait_until 10 "chunk files to match the master's chunks" chunks_settled
c0=$(chunks)
f0=$(chunk_files)
sw_tool snapshot "$M/cow" "$M/cow2"
assert_eq "$c0" "$(chunks)" "chunks after the snapshot (shared, not copied)"
assert_eq "$orig" "$(sha "$M/cow2/f")" "the snapshot's copy of the file"
# write to the source: its chunk is shared, so it is copied first
printf 'source' | dd of="$M/cow/f" bs=1 seek=1000 conv=notrunc status=none
assert_eq $((c0 + 1)) "$(chunks)" "chunks after writing to the source (one copy)"
# write to the snapshot: the old chunk is now its own, written in place
printf 'snapshot' | dd of="$M/cow2/f" bs=1 seek=2000 conv=notrunc status=none
assert_eq $((c0 + 1)) "$(chunks)" "chunks after writing to the snapshot too"
# and again to both: nothing more is copied
printf 'again' | dd of="$M/cow/f" bs=1 seek=3000 conv=notrunc status=none
printf 'again' | dd of="$M/cow2/f" bs=1 seek=4000 conv=notrunc status=none
assert_eq $((c0 + 1)) "$(chunks)" "chunks after more writes to both"
wait_until 10 "the copied chunk's file on disk" chunks_settled
assert_eq $((f0 + 1)) "$(chunk_files)" "chunk files after the copy-on-write"
# each sees its own data
expect_content() { # FILE EDITS...: the original with "OFFSET:TEXT" edits
	"$PYTHON" - "$DF" "$SEED" "$@" <<'EOF'
import hashlib, importlib.util, sys
spec = importlib.util.spec_from_file_location("datafile", sys.argv[1])
df = importlib.util.module_from_spec(spec)
spec.loader.exec_module(df)
data, _, _ = df.plan(3 << 20, int(sys.argv[2]), "seq")
for e in sys.argv[4:]:
    off, text = e.split(":", 1)
    data[int(off):int(off) + len(text)] = text.encode()
print(hashlib.sha256(data).hexdigest())
EOF
}
drop_caches
assert_eq "$(expect_content f 1000:source 3000:again)" "$(sha "$M/cow/f")" \
	"the source after writes to both copies"
assert_eq "$(expect_content f 2000:snapshot 4000:again)" "$(sha "$M/cow2/f")" \
	"the snapshot after writes to both copies"
sw_tool rmr "$M/cow" "$M/cow2"
wait_until 30 "the chunks of the copy-on-write test to go" chunks_settled
assert_eq 0 "$(chunks)" "chunks after removing both copies"
wait_fsck_clean 30 "after the copy-on-write test"

# ---- 2. a background snapshot while the source changes -------------------------------
log "a background snapshot while another client renames, creates and writes"
start_mount "$SW_TMP/mnt2"
M2=$SW_TMP/mnt2
mkdir -p "$M/bg/pairs" "$M/bg/seq" "$M/bg/data" "$M/bg/filler"
PAIRS=300
(cd "$M/bg/pairs" && for ((i = 0; i < PAIRS; i++)); do : >"p$i.a"; done)
# filler: 20 x 1000 files, so the copy takes a while
make_files "$M/bg/filler/src" 1000 512
for i in $(seq 1 19); do
	sw_tool snapshot "$M/bg/filler/src" "$M/bg/filler/s$i"
done
# nodes outside the directories that change
static_nodes() {
	find "$1" -path "$1/pairs" -prune -o -path "$1/seq" -prune \
		-o -path "$1/data" -prune -o -print | wc -l
}
n_bg=$(static_nodes "$M/bg")
log "source tree: $n_bg nodes besides $PAIRS pairs"
rm -f "$SW_TMP/mut.stop"
: >"$SW_TMP/bg.log"
"$PYTHON" - "$M2/bg" "$PAIRS" "$SW_TMP/mut.stop" "$SW_TMP/mut.out" <<'EOF' &
import os, sys
root, pairs, stop, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
r = 0
made = 0
while not os.path.exists(stop) or r < 2:
    a, b = (".a", ".b") if r % 2 == 0 else (".b", ".a")
    for i in range(pairs):
        os.rename(os.path.join(root, "pairs", "p%d%s" % (i, a)),
                  os.path.join(root, "pairs", "p%d%s" % (i, b)))
        if i % 10 == 0:
            open(os.path.join(root, "seq", "c%06d" % made), "w").close()
            made += 1
    r += 1
with open(out, "w") as f:
    f.write("%d %d\n" % (r, made))
EOF
mutator=$!
"$PYTHON" "$DF" append "$M2/bg/data/f" "$SEED" "$SW_TMP/bg.log" 65536 100000 \
	"$SW_TMP/mut.stop" 2>"$SW_TMP/bg.err" &
appender=$!
# Both under way before the snapshot, however slowly they start (1 s
# of sleep once saw neither start at load 25: no file to copy).
writing() { [[ -s "$SW_TMP/bg.log" && -e "$M2/bg/seq/c000000" ]]; }
wait_until 60 "both clients to be under way" writing
n_before=$(wc -l <"$SW_TMP/bg.log")
bg0=$(grep -c 'started (child' "$SW_MASTER_LOG" || true)
sw_tool snapshot "$M/bg" "$M/bgcopy"
n_after=$(wc -l <"$SW_TMP/bg.log")
sleep 0.5
touch "$SW_TMP/mut.stop"
wait "$mutator" || fail "the renaming client failed"
wait "$appender" || { cat "$SW_TMP/bg.err" >&2; fail "the appending client failed"; }
log "mutator: $(cat "$SW_TMP/mut.out") (rounds, files made); appender: $n_before blocks before the snapshot, $n_after after"
assert_eq $((bg0 + 1)) "$(grep -c 'started (child' "$SW_MASTER_LOG" || true)" \
	"snapshots copied by a forked child"
assert_eq "$n_bg" "$(static_nodes "$M/bgcopy")" "nodes of the copy outside the changing directories"
"$PYTHON" - "$M/bgcopy" "$PAIRS" <<'EOF' || fail "the background snapshot is not one instant (seed $SEED)"
import os, sys
root, pairs = sys.argv[1], int(sys.argv[2])
names = set(os.listdir(os.path.join(root, "pairs")))
states = []
for i in range(pairs):
    a, b = "p%d.a" % i in names, "p%d.b" % i in names
    if a == b:
        sys.exit("pair %d: %s" % (i, "both names" if a else "neither name"))
    states.append("b" if b else "a")
if len(names) != pairs:
    sys.exit("%d names for %d pairs" % (len(names), pairs))
changes = sum(1 for i in range(1, pairs) if states[i] != states[i - 1])
if changes > 1:
    sys.exit("the pairs change state %d times: %s" % (changes, "".join(states)))
seq = sorted(os.listdir(os.path.join(root, "seq")))
if seq != ["c%06d" % i for i in range(len(seq))]:
    sys.exit("the numbered files are not a prefix: %s" % seq[:20])
print("pairs: %s...; %d numbered files" % ("".join(states)[:40], len(seq)))
EOF
size=$(stat -c %s "$M/bgcopy/data/f")
assert_eq 0 $((size % 65536)) "the copied file's size is whole blocks"
assert_ge $((n_before * 65536)) "$size" "the copied file's size (blocks acknowledged before the snapshot)"
assert_le $(((n_after + 1) * 65536)) "$size" "the copied file's size (blocks acknowledged after the snapshot)"
head -n $((size / 65536)) "$SW_TMP/bg.log" >"$SW_TMP/bg.copylog"
drop_caches
out=$("$PYTHON" "$DF" verify "$M/bgcopy/data/f" "$SW_TMP/bg.copylog") ||
	{ printf '%s\n' "$out" >&2; fail "the snapshot's copy of a file being written"; }
log "the copy's file: $out"
out=$("$PYTHON" "$DF" verify "$M/bg/data/f" "$SW_TMP/bg.log") ||
	{ printf '%s\n' "$out" >&2; fail "the source file written during the snapshot"; }
stop_mount "$M2"
sw_tool rmr "$M/bg" "$M/bgcopy"
wait_until 60 "the purge of the background-snapshot trees" status_is purge_left 0
wait_until 30 "their chunks to go" chunks_settled
wait_fsck_clean 30 "after the background snapshot"

# ---- 3. rmsnapshot and the snapshot flag ---------------------------------------------
log "rmsnapshot with and without -f"
cd "$M"
mkdir -p t/d1 t/d2/sub
echo 1 >t/d1/f1
echo 2 >t/d1/f2
echo 3 >t/d2/f3
echo 4 >t/d2/sub/f4
echo 5 >t/f5
sw_tool seteattr -f snapshot -r t
# objects made after the flag was set lack it
echo 6 >t/d2/new
echo 7 >t/f6
assert_eq "t/d1/f1: snapshot" "$(sw_tool geteattr t/d1/f1)" "geteattr of a flagged file"
assert_eq "t/d2/new: -" "$(sw_tool geteattr t/d2/new)" "geteattr of a file made afterwards"
find t | sort >"$SW_TMP/t.before"
st=0
sw_tool rmsnapshot t >"$SW_TMP/rms.out" 2>&1 || st=$?
assert_ne 0 "$st" "rmsnapshot of a tree with unflagged objects, without -f"
find t | sort >"$SW_TMP/t.after"
assert_same_text "$SW_TMP/t.before" "$SW_TMP/t.after" "the tree after a refused rmsnapshot"
n0=$(nodes)
sw_tool rmsnapshot -f t
printf '%s\n' t t/d2 t/d2/new t/f6 | sort >"$SW_TMP/t.expect"
# The master tells the mount, which tells the kernel, after the tool has
# its answer: the mount's view follows within moments, not at once.
tree_is() { find t | sort | cmp -s - "$SW_TMP/t.expect"; }
wait_until 3 "the mount to see the tree after rmsnapshot -f" tree_is
find t | sort >"$SW_TMP/t.after"
assert_same_text "$SW_TMP/t.expect" "$SW_TMP/t.after" "the tree after rmsnapshot -f"
assert_eq 6 "$(cat t/d2/new)" "an unflagged file's content after rmsnapshot -f"
wait_until 10 "the removed objects to be purged" status_is purge_left 0
# gone: d1, f1, f2, f3, sub, f4, f5 (7 nodes)
assert_eq $((n0 - 7)) "$(nodes)" "nodes after rmsnapshot -f"
st=0
sw_tool rmsnapshot t >/dev/null 2>&1 || st=$?
assert_ne 0 "$st" "rmsnapshot without -f of what is left (unflagged)"
assert_exists t/d2/new t/f6
# a tree flagged throughout goes whole without -f; deleattr takes the flag off
mkdir -p u/d
echo 8 >u/d/f
echo 9 >u/g
sw_tool seteattr -f snapshot -r u
sw_tool deleattr -f snapshot u/g
assert_eq "u/g: -" "$(sw_tool geteattr u/g)" "geteattr after deleattr"
st=0
sw_tool rmsnapshot u >/dev/null 2>&1 || st=$?
assert_ne 0 "$st" "rmsnapshot of a tree with one object unflagged by deleattr"
sw_tool seteattr -f snapshot u/g
sw_tool rmsnapshot u
wait_until 3 "the removed tree to disappear from the mount" gone u
# -f removes at most 2,048 names a request (master/snapshot.c) and says
# EAGAIN with what it removed; the tool asks again at once and adds up
# (root here pays no budget: no answer without a removal, exactly 3)
mkdir w
(cd w && seq -f f%g 5000 | xargs touch)
sw_tool seteattr -f snapshot -r w
sw_tool deleattr -f snapshot w
echo 10 >w/keep
sw_tool rmsnapshot -v -f w >"$SW_TMP/rmsf.out"
assert_eq "removed w: 5000 nodes (3 requests)" \
	"$(sed 's/ in [0-9.]* ms//' "$SW_TMP/rmsf.out")" \
	"rmsnapshot -f of 5,000 flagged files, three requests' worth"
w_is_keep() { [[ "$(ls w)" == keep ]]; }
wait_until 3 "the mount to see w after rmsnapshot -f" w_is_keep
cd /
rm -rf "$M/t" "$M/w"
wait_until 30 "the flag tests' chunks to go" chunks_settled
wait_fsck_clean 30 "after the rmsnapshot tests"

# ---- 4. an open file survives rmr ----------------------------------------------------
log "a file open in a process survives rmr of its tree"
mkdir -p "$M/held/d"
sum=$("$PYTHON" "$DF" write "$M/held/d/f" $((2 * MiB)) "$SEED" random)
make_files "$M/held/other" 20 4096
wait_until 10 "chunk files to match the master's chunks" chunks_settled
c0=$(chunks)
assert_eq 0 "$(sw_status 'd["orphans"]')" "open-unlinked files before"
rm -f "$SW_TMP"/held.*
"$PYTHON" - "$M/held/d/f" "$SW_TMP" "$sum" <<'EOF' &
import hashlib, os, sys, time
path, tmp, want = sys.argv[1], sys.argv[2], sys.argv[3]
def wait_for(name):
    for _ in range(1200):
        if os.path.exists(os.path.join(tmp, name)):
            return
        time.sleep(0.05)
    sys.exit("timed out waiting for " + name)
fd = os.open(path, os.O_RDONLY)
open(os.path.join(tmp, "held.open"), "w").close()
wait_for("held.removed")
st = os.fstat(fd)
h = hashlib.sha256()
off = 0
while True:
    b = os.pread(fd, 1 << 20, off)
    if not b:
        break
    h.update(b)
    off += len(b)
if h.hexdigest() != want or st.st_size != 2 << 20:
    sys.exit("the open file after rmr: %d bytes, sha256 %s" % (st.st_size, h.hexdigest()))
wait_for("held.close")
os.close(fd)
EOF
holder=$!
wait_until 30 "the holder to open its file" test -e "$SW_TMP/held.open"
sw_tool rmr "$M/held"
# the master tells the mount, which drops the kernel's entry (at once,
# give or take the invalidation thread)
wait_until 3 "the removed tree to disappear from the mount" gone "$M/held"
wait_until 30 "the purge of the rest of the tree" status_is purge_left 0
assert_eq 1 "$(sw_status 'd["orphans"]')" "open-unlinked files while the holder has it open"
drop_caches
touch "$SW_TMP/held.removed"
sleep 1.5 # the holder reads; past the attribute cache
wait_until 30 "the chunks of the closed files to go" chunks_settled
assert_eq $((c0 - 20)) "$(chunks)" "chunks while the file is still open (only its own left)"
touch "$SW_TMP/held.close"
wait "$holder" || fail "the open file did not survive rmr of its tree"
wait_until 10 "the file to go after close" status_is orphans 0
wait_until 30 "its chunk to go" chunks_settled
assert_eq $((c0 - 21)) "$(chunks)" "chunks after the close"
wait_fsck_clean 30 "after the open-file test"

# ---- 5. the trash -------------------------------------------------------------------
log "trash"
mkdir -p "$M/tr/sub" "$M/tr/tree/in" "$M/ex"
sw_tool settrashtime -r 3600 "$M/tr"
assert_eq "$M/tr/sub: 3600" "$(sw_tool gettrashtime "$M/tr/sub")" "gettrashtime"
sa=$("$PYTHON" "$DF" write "$M/tr/a" $((1 * MiB + 7)) "$SEED" random)
sb=$("$PYTHON" "$DF" write "$M/tr/sub/b" 70000 $((SEED + 1)) random)
st=$("$PYTHON" "$DF" write "$M/tr/tree/in/t" 100000 $((SEED + 2)) random)
n0=$(nodes)
rm "$M/tr/a"
rm -rf "$M/tr/sub"
sw_tool rmr "$M/tr/tree"
wait_until 3 "the removed tree to disappear from the mount" gone "$M/tr/tree"
assert_missing "$M/tr/a" "$M/tr/sub" "$M/tr/tree"
trash_json() { sw_tool trash ls --json; }
trash_q() { # EXPR on the items (i)
	trash_json | "$PYTHON" -c 'import json, sys; d = json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"
}
assert_eq "['/tr/a', '/tr/sub/b', '/tr/tree']" \
	"$(trash_q 'sorted(i["path"] for i in d["items"])')" "paths in trash ls --json"
assert_eq "[False, False, True]" \
	"$(trash_q '[i["dir"] for i in sorted(d["items"], key=lambda i: i["path"])]')" \
	"directories in trash ls --json"
sw_tool trash ls | grep -q ' /tr/sub/b$' || fail "trash ls does not list /tr/sub/b"
id_of() { trash_q "[i['id'] for i in d['items'] if i['path'] == '$1'][0]"; }
# the data stays while in the trash
wait_until 10 "chunk files to match the master's chunks" chunks_settled
c_trash=$(chunks)
# restore in place, and elsewhere
sw_tool trash restore "$(id_of /tr/a)"
sw_tool trash restore "$(id_of /tr/tree)" "$M/restored"
drop_caches
assert_eq "$sa" "$(sha "$M/tr/a")" "a file restored from the trash"
assert_eq "$st" "$(sha "$M/restored/in/t")" "a tree restored from the trash elsewhere"
assert_eq "['/tr/sub/b']" "$(trash_q 'sorted(i["path"] for i in d["items"])')" \
	"the trash after two restores"
# purge: gone, and its chunk too
sw_tool trash purge "$(id_of /tr/sub/b)"
assert_eq "[]" "$(trash_q 'd["items"]')" "the trash after purge"
wait_until 30 "the purged file's chunk to go" chunks_settled
assert_eq $((c_trash - 1)) "$(chunks)" "chunks after purging one file from the trash"
# expiry
sw_tool settrashtime 2 "$M/ex"
"$PYTHON" "$DF" write "$M/ex/e" 5000 "$SEED" random >/dev/null
wait_until 10 "chunk files to match the master's chunks" chunks_settled
c1=$(chunks)
rm "$M/ex/e"
assert_eq "['/ex/e']" "$(trash_q 'sorted(i["path"] for i in d["items"])')" \
	"the trash with a 2 s trash time"
trash_empty() { [[ "$(trash_q 'len(d["items"])')" == 0 ]]; }
wait_until 30 "the trash time to expire" trash_empty
wait_until 30 "the expired file's chunk to go" chunks_settled
assert_eq $((c1 - 1)) "$(chunks)" "chunks after the trash time expired"
sw_tool rmr --skip-trash "$M/tr" "$M/restored" "$M/ex"
assert_eq "[]" "$(trash_q 'd["items"]')" "the trash after rmr --skip-trash"
wait_until 30 "the trash tests' chunks to go" chunks_settled
assert_eq 0 "$(chunks)" "chunks after the trash tests"
wait_fsck_clean 30 "after the trash tests"

# ---- 6. rmr of a big tree, SIGKILL mid-purge -----------------------------------------
log "rmr of a big tree, SIGKILL of the master in the middle of the purge"
SNAPS=50
n_base=$(nodes)
make_files "$M/big/src" 1000 4096
for ((i = 1; i <= SNAPS; i++)); do
	sw_tool snapshot "$M/big/src" "$M/big/s$i"
done
n_big=$((1 + (SNAPS + 1) * 1001))
assert_eq $((n_base + n_big)) "$(nodes)" "nodes with the big tree"
assert_eq 1000 "$(chunks)" "chunks of the big tree (shared by its snapshots)"
wait_until 10 "chunk files to match the master's chunks" chunks_settled
assert_eq 1000 "$(chunk_files)" "chunk files of the big tree"
sw_tool rmr "$M/big"
wait_until 3 "the removed tree to disappear from the mount" gone "$M/big"
mid() {
	local left
	left=$(sw_status 'd["purge_left"]')
	((left > n_big / 5 && left < n_big * 9 / 10))
}
wait_until 60 "the purge to get going" mid
left_kill=$(sw_status 'd["purge_left"]')
# Read before waiting for the chunkservers, whose reconnect back-off may
# take seconds while the purge goes on (as in faults.sh).
kill_master
_launch_master --fixed-port || fail "the master did not restart"
left_restart=$(sw_status 'd["purge_left"]')
wait_chunkservers
log "purge: $left_kill nodes left at the kill, $left_restart after the restart"
# The purge's steps are not journaled: a restart goes on from the last
# checkpoint's picture, so it may purge again what was purged since
# (here there is no checkpoint since the start: the earlier trees too).
assert_ge 1 "$left_restart" "nodes left to purge after the restart"
wait_until 120 "the purge to finish after the restart" status_is purge_left 0
assert_eq 0 "$(sw_status 'd["purge_roots"]')" "trees being purged"
assert_eq "$n_base" "$(nodes)" "nodes after the purge"
# The purge ran in slices of purge_slice (200 us) of the loop's time:
# none took more than a few milliseconds on the CPU, even under ASan
# (wall time would also count the moments the kernel ran others).
slices=$(sw_status 'd["bg_slices"]')
slice_cpu=$(sw_status 'd["bg_slice_max_cpu_us"]')
log "purge: $slices background slices, longest $slice_cpu us on the CPU"
assert_ge 100 "$slices" "background slices of a 51,000-node purge"
assert_le 20000 "$slice_cpu" "the longest background slice's CPU time (us)"
assert_eq 0 "$(chunks)" "chunks after the purge"
no_chunk_files() { (($(chunk_files) == 0)); }
wait_until 60 "the chunk files to leave the disk" no_chunk_files
wait_fsck_clean 30 "after the purge"
assert_eq 0 "$(fsck_json 'd["leaked_nodes"] + d["unreferenced_chunks"] + d["bad_refs"] + d["inventory_mismatches"]')" \
	"leaks fsck counts"
stop_mount
sw_pass
