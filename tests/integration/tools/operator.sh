#!/bin/bash
# An operator's ordinary mistakes (issue 30, items 1 and 2), with a second
# cluster on the same host: a path-taking command given a master of
# another cluster (-m or $SWEEPFS_MASTER) is refused and removes nothing
# on either cluster; rmr and rmsnapshot refuse "." and ".."; a tool or a
# mount pointed at a chunkserver's port says what answered; a mount point
# that is not empty, already a mount or not a directory is refused (-o
# nonempty mounts anyway); a daemon that detaches prints why it did not
# start on the starting process's stderr.
. "$(dirname "$0")/../lib.sh"
sw_init operator --root

start_master
start_mount
M=$SW_MNT
A=127.0.0.1:$SW_PORT

# The second cluster: its own launcher directory, master and mount, no
# chunkserver (only metadata is touched); stopped by our cleanup hook.
C2=$SW_TMP/c2
mkdir -p "$C2"
_swc2() {
	"$PYTHON" "$SW_CLUSTER_PY" -w "$C2" --build "$SWEEPFS_BUILD" "$@"
}
JUNK_PID=
sw_scenario_cleanup() {
	[[ -n "$JUNK_PID" ]] && kill "$JUNK_PID" 2>/dev/null
	[[ -d "$C2/.swcluster" ]] && _swc2 down
}
read -r _ B_PORT <<<"$(_swc2 master start --host 127.0.0.1 \
	--data "$C2/meta" --log "$C2/master.log")" ||
	fail "the second master did not start"
B=127.0.0.1:$B_PORT
_swc2 mount "$C2/mnt" --spec "$B" >/dev/null || fail "mounting $B failed"
MB=$C2/mnt

# cluster_id MNT: the cluster identity a mount shows on its root.
cluster_id() {
	"$PYTHON" -c 'import os, sys
print(os.getxattr(sys.argv[1], "sweepfs.cluster_id").decode())' "$1"
}

log "each cluster has an identity, shown on its mount's root"
ida=$(cluster_id "$M")
idb=$(cluster_id "$MB")
[[ "$ida" =~ ^[0-9a-f]{32}$ ]] || fail "cluster id of A: '$ida'"
[[ "$idb" =~ ^[0-9a-f]{32}$ ]] || fail "cluster id of B: '$idb'"
assert_ne "$ida" "$idb" "two clusters' ids"
got=$("$PYTHON" -c 'import errno, os, sys
try:
    os.setxattr(sys.argv[1], "sweepfs.cluster_id", b"x")
    print("set")
except OSError as e:
    print(errno.errorcode[e.errno])
print(" ".join(os.listxattr(sys.argv[1])) or "-")' "$M")
assert_eq "EPERM"$'\n'"-" "$got" "setting the cluster id, and the root's list"


log "the identity survives a restart (checkpoint and changelog)"
restart_master kill
assert_eq "$ida" "$(cluster_id "$M")" \
	"cluster id after a crash (from the changelog)"
restart_master term
start_mount "$SW_TMP/mnt2"
assert_eq "$ida" "$(cluster_id "$SW_TMP/mnt2")" \
	"cluster id after a clean restart (checkpoint)"
stop_mount "$SW_TMP/mnt2"

log "rmr of a path with a master of another cluster is refused"
mkdir -p "$M/victim/sub" "$M/victim2" "$MB/victim" "$MB/victim2"
touch "$M/victim/sub/f" "$MB/victim/f"
rc=0
"$SW_TOOL_BIN" -m "$B" rmr -v "$M/victim" 2>"$SW_TMP/err" || rc=$?
assert_eq 8 "$rc" "exit status of rmr with -m of another cluster"
grep -q "is on cluster $ida .* but -m $B is cluster $idb: refusing" \
	"$SW_TMP/err" || fail "unclear message: $(cat "$SW_TMP/err")"
rc=0
SWEEPFS_MASTER=$B "$SW_TOOL_BIN" rmr "$M/victim2" 2>"$SW_TMP/err" || rc=$?
assert_eq 8 "$rc" "exit status of rmr with \$SWEEPFS_MASTER of another cluster"
grep -q "but \$SWEEPFS_MASTER $B is cluster $idb: refusing" \
	"$SW_TMP/err" || fail "unclear message: $(cat "$SW_TMP/err")"
assert_eq 1 "$(wc -l <"$SW_TMP/err")" "lines of the refusal"
rc=0
"$SW_TOOL_BIN" -m "$B" rmsnapshot "$M/victim" 2>/dev/null || rc=$?
assert_eq 8 "$rc" "exit status of rmsnapshot with -m of another cluster"
rc=0
"$SW_TOOL_BIN" -m "$B" setgoal 2 "$M/victim" 2>/dev/null || rc=$?
assert_eq 8 "$rc" "exit status of setgoal with -m of another cluster"
drop_caches
for f in "$M/victim/sub/f" "$M/victim2" "$MB/victim/f" "$MB/victim2"; do
	assert_exists "$f"
done

log "the same cluster through -m, \$SWEEPFS_MASTER and the mount alone"
"$SW_TOOL_BIN" -m "$A" rmr "$M/victim2" || fail "rmr with -m of its own cluster"
assert_missing "$M/victim2"
assert_exists "$MB/victim2"
mkdir "$M/v3" "$M/v4"
SWEEPFS_MASTER=$A "$SW_TOOL_BIN" rmr "$M/v3" ||
	fail "rmr with \$SWEEPFS_MASTER of its own cluster"
"$SW_TOOL_BIN" rmr "$M/v4" || fail "rmr with the mount's own master"
assert_missing "$M/v3"
assert_missing "$M/v4"

log "--fs-path: a path inside the filesystem of -m, said plainly"
mkdir "$SW_TMP/not-sweepfs"
rc=0
"$SW_TOOL_BIN" -m "$B" rmr "$SW_TMP/not-sweepfs" 2>"$SW_TMP/err" || rc=$?
assert_eq 5 "$rc" "exit status of rmr of a path not on sweepfs"
grep -q "not on a sweepfs mount" "$SW_TMP/err" ||
	fail "unclear message: $(cat "$SW_TMP/err")"
"$SW_TOOL_BIN" -m "$B" --fs-path rmr /victim2 || fail "rmr --fs-path"
assert_missing "$MB/victim2"
assert_exists "$M/victim"
rc=0
(unset SWEEPFS_MASTER; "$SW_TOOL_BIN" --fs-path rmr /victim) 2>/dev/null || rc=$?
assert_eq 2 "$rc" "exit status of --fs-path without a master"
rc=0
"$SW_TOOL_BIN" -m "$B" --fs-path rmr /victim/../victim 2>/dev/null || rc=$?
assert_eq 2 "$rc" "exit status of --fs-path with .."
assert_exists "$MB/victim/f"

log "rmr and rmsnapshot refuse . and .., as rm does"
mkdir -p "$M/one/two"
for cmd in rmr rmsnapshot; do
	for p in . .. ./ two/.. two/../ ../one/.; do
		rc=0
		(cd "$M/one" && "$SW_TOOL_BIN" "$cmd" "$p") 2>"$SW_TMP/err" || rc=$?
		assert_eq 1 "$rc" "exit status of $cmd $p"
		grep -q "refusing to remove '.' or '..'" "$SW_TMP/err" ||
			fail "$cmd $p: unclear message: $(cat "$SW_TMP/err")"
	done
done
rc=0
"$SW_TOOL_BIN" rmr "$M" 2>/dev/null || rc=$?
assert_eq 7 "$rc" "exit status of rmr of a mount's root"
rc=0
"$SW_TOOL_BIN" rmsnapshot "$M/" 2>/dev/null || rc=$?
assert_eq 7 "$rc" "exit status of rmsnapshot of a mount's root"
assert_exists "$M/one/two"

log "a chunkserver's port is not a master's"
CS_PORT=${SW_CS_PORTS[1]}
rc=0
"$SW_TOOL_BIN" -m "127.0.0.1:$CS_PORT" status 2>"$SW_TMP/err" || rc=$?
assert_eq 3 "$rc" "exit status of status against a chunkserver"
grep -q "is a sweepfs chunkserver, not a master" "$SW_TMP/err" ||
	fail "unclear message: $(cat "$SW_TMP/err")"
mkdir "$SW_TMP/csm"
rc=0
timeout 30 "$SW_MOUNT_BIN" "127.0.0.1:$CS_PORT" "$SW_TMP/csm" -f \
	2>"$SW_TMP/err" || rc=$?
assert_ne 0 "$rc" "exit status of a mount of a chunkserver"
if is_sweepfs_mount "$SW_TMP/csm"; then
	_unmount "$SW_TMP/csm"
	fail "a chunkserver's port was mounted"
fi
grep -q "is a sweepfs chunkserver, not a master" "$SW_TMP/err" ||
	fail "unclear message: $(cat "$SW_TMP/err")"

log "a mount point that is not empty, already a mount, or not a directory"
# refused_mount WHAT TEXT ARGS...: sweepfs-mount ARGS must fail, mount
# nothing, and say TEXT on stderr.
refused_mount() {
	local what=$1 text=$2 rc=0
	shift 2
	timeout 30 "$SW_MOUNT_BIN" "$@" 2>"$SW_TMP/err" || rc=$?
	assert_ne 0 "$rc" "exit status of a mount on $what"
	grep -q "$text" "$SW_TMP/err" ||
		fail "a mount on $what: unclear message: $(cat "$SW_TMP/err")"
}
mkdir "$SW_TMP/full"
touch "$SW_TMP/full/precious"
refused_mount "a non-empty directory" "full: not empty" "$A" "$SW_TMP/full"
is_sweepfs_mount "$SW_TMP/full" && fail "a non-empty directory was mounted"
refused_mount "a mount point" "already a mount point" "$A" "$M"
refused_mount "a file" "not a directory" "$A" "$SW_TMP/full/precious"
assert_exists "$SW_TMP/full/precious" "$M/one/two"
start_mount "$SW_TMP/full" "$A" nonempty
is_sweepfs_mount "$SW_TMP/full" || fail "-o nonempty did not mount"
assert_exists "$SW_TMP/full/one/two"
stop_mount "$SW_TMP/full"
assert_exists "$SW_TMP/full/precious"

log "a daemon that detaches says why it did not start"
mkdir "$SW_TMP/m3"
rc=0
timeout 30 "$SW_MASTER_BIN" -d "$SW_TMP/m3" -l "$A" 2>"$SW_TMP/err" || rc=$?
assert_eq 1 "$rc" "exit status of a detached master on a taken port"
grep -q "^sweepfs-master: cannot listen on $A: address already in use" \
	"$SW_TMP/err" || fail "unclear message: $(cat "$SW_TMP/err")"
rc=0
timeout 30 "$SW_MASTER_BIN" -d "$SW_TMP/full/precious" \
	-l "127.0.0.1:$(pick_port)" 2>"$SW_TMP/err" || rc=$?
assert_eq 1 "$rc" "exit status of a detached master on a file"
grep -q "^sweepfs-master: cannot .*precious" "$SW_TMP/err" ||
	fail "unclear message: $(cat "$SW_TMP/err")"
rc=0
timeout 30 "$SW_CS_BIN" -d "$SW_TMP/full/precious" -s "master=$A" \
	-l "127.0.0.1:$(pick_port)" 2>"$SW_TMP/err" || rc=$?
assert_eq 1 "$rc" "exit status of a detached chunkserver on a file"
grep -q "^sweepfs-chunkserver: cannot .*precious" "$SW_TMP/err" ||
	fail "unclear message: $(cat "$SW_TMP/err")"
mkdir "$SW_TMP/csm2"
rc=0
timeout 30 "$SW_MOUNT_BIN" "127.0.0.1:$CS_PORT" "$SW_TMP/csm2" \
	2>"$SW_TMP/err" || rc=$?
assert_ne 0 "$rc" "exit status of a detaching mount of a chunkserver"
grep -q "is a sweepfs chunkserver, not a master" "$SW_TMP/err" ||
	fail "unclear message: $(cat "$SW_TMP/err")"
is_sweepfs_mount "$SW_TMP/csm2" && fail "a chunkserver's port was mounted"
# And one that starts: the starting process returns 0, the daemon serves.
mkdir "$SW_TMP/dm"
timeout 30 "$SW_MOUNT_BIN" "$A" "$SW_TMP/dm" 2>"$SW_TMP/err" ||
	fail "a detaching mount failed: $(cat "$SW_TMP/err")"
[[ ! -s "$SW_TMP/err" ]] || fail "a mount that worked said: $(cat "$SW_TMP/err")"
is_sweepfs_mount "$SW_TMP/dm" || fail "the detached mount is not mounted"
adopt_mount "$SW_TMP/dm"
assert_exists "$SW_TMP/dm/one/two"
stop_adopted "$SW_TMP/dm" "$SW_ADOPTED_PID"

log "a configuration error names the program, the key, the value, what is valid"
rc=0
"$SW_MASTER_BIN" --set goal=12 --dump-config >/dev/null 2>"$SW_TMP/err" || rc=$?
assert_eq 2 "$rc" "exit status of a bad goal"
assert_eq "sweepfs-master: goal = 12: must be 1 to 8" "$(cat "$SW_TMP/err")" \
	"the message for a bad goal"
printf 'reserve = lots\n' >"$SW_TMP/cs.cfg"
rc=0
"$SW_CS_BIN" -c "$SW_TMP/cs.cfg" --dump-config >/dev/null 2>"$SW_TMP/err" ||
	rc=$?
assert_eq 2 "$rc" "exit status of a bad reserve"
grep -q "^sweepfs-chunkserver: $SW_TMP/cs.cfg:1: reserve = lots: must be a size" \
	"$SW_TMP/err" || fail "unclear message: $(cat "$SW_TMP/err")"
mkdir "$SW_TMP/cfgm"
rc=0
"$SW_MOUNT_BIN" "$A" "$SW_TMP/cfgm" -f -o dircache_entries=lots \
	2>"$SW_TMP/err" || rc=$?
assert_eq 2 "$rc" "exit status of a bad mount option"
assert_eq "sweepfs-mount: dircache_entries = lots: must be a whole number" \
	"$(cat "$SW_TMP/err")" "the message for a bad mount option"

log "compare-delete that cannot write its results fails"
mkdir -p "$M/bench"
rc=0
"$SW_TOOL_BIN" compare-delete -n 50 --methods removeall --strace off \
	--no-drop-caches --json "$SW_TMP/no/such/dir/run.json" "$M/bench" \
	>"$SW_TMP/out" 2>"$SW_TMP/err" || rc=$?
assert_eq 1 "$rc" "exit status of compare-delete with nowhere to write"
grep -q "cannot write the results to $SW_TMP/no/such/dir/run.json" \
	"$SW_TMP/err" || fail "unclear message: $(cat "$SW_TMP/err")"
if grep -q "^results:" "$SW_TMP/out"; then
	fail "compare-delete pointed at results it did not write"
fi

log "a chunk directory smaller than reserve: a warning, and ENOSPC"
sw_tmpfs "$C2/small" 16m
_swc2 chunkserver start --data "$C2/small" --log "$C2/cs1.log" >/dev/null ||
	fail "the second cluster's chunkserver did not start"
_swc2 wait-registered >/dev/null || fail "B's chunkserver did not register"
grep -q "$C2/small.*reserve" "$C2/cs1.log" ||
	fail "no warning about the reserve: $(tail -n 5 "$C2/cs1.log")"
got=$("$PYTHON" -c 'import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"x" * 65536)
    os.fsync(fd)
    os.close(fd)
    print("OK")
except OSError as e:
    print(errno.errorcode[e.errno])' "$MB/big")
assert_eq ENOSPC "$got" "a write with no room on any chunkserver"
# status shows the space net of the reserve: none here.
"$SW_TOOL_BIN" -m "$B" status --json | "$PYTHON" -c 'import json, sys
s = json.load(sys.stdin)["servers"]
assert len(s) == 1 and s[0]["total_bytes"] == 0 and s[0]["free_bytes"] == 0, s' ||
	fail "status of a chunkserver with no room over its reserve"
"$SW_TOOL_BIN" -m "$B" status | grep -q "used of 0 B, 0 B free" ||
	fail "status text: $("$SW_TOOL_BIN" -m "$B" status | grep chunkserver)"

log "JSON parses with a strict parser; times are exact"
mkdir "$M/tr"
"$SW_TOOL_BIN" settrashtime 3600 "$M/tr" || fail "settrashtime"
"$PYTHON" -c 'import os, sys
open(os.path.join(sys.argv[1].encode(), b"caf\xe9\x01\"\\"), "w").close()' "$M/tr"
t0=$(date +%s)
rm -f "$M/tr/"caf*
# Under a delegation rm returns once the mount has it, and the master
# applies (and stamps) the removal when the mount's batch arrives, which
# nothing orders before the tool's request: asked until it shows (5 s at
# most), and the bound taken after that (taken after rm, a removal
# applied just past that second failed the check one run in a while).
for ((i = 0; i < 50; i++)); do
	"$SW_TOOL_BIN" trash ls --json "$M" >"$SW_TMP/trash.json" ||
		fail "trash ls --json"
	grep -q caf "$SW_TMP/trash.json" && break
	sleep 0.1
done
t1=$(date +%s)
"$PYTHON" - "$SW_TMP/trash.json" "$t0" "$t1" <<'PYEOF' || fail "trash ls --json: $(cat "$SW_TMP/trash.json")"
import json, re, sys
raw = open(sys.argv[1], "rb").read()
raw.decode("utf-8")  # strict: well-formed UTF-8 throughout
def strict(s):
    raise ValueError("not JSON: " + s)
d = json.loads(raw, parse_constant=strict)
names = [i["path"].encode("utf-8", "surrogateescape") for i in d["items"]]
assert any(n.endswith(b"/caf\xe9\x01\"\\") for n in names), names
assert not re.search(rb"[0-9]e[+-]?[0-9]", raw), "a number in exponent form"
for i in d["items"]:
    assert int(sys.argv[2]) <= i["deleted_at"] <= int(sys.argv[3]) + 1, i
    assert i["expires_at"] - i["deleted_at"] == 3600, i
PYEOF
"$SW_TOOL_BIN" status --json "$M" | "$PYTHON" -c 'import json, sys
json.loads(sys.stdin.buffer.read().decode("utf-8"))' ||
	fail "status --json does not parse"

log "every command takes -h, --help and sweepfs help CMD; global options anywhere"
cmds=$("$SW_TOOL_BIN" --help | awk '/^commands:/ { on = 1; next } on { print $1 }')
[[ $(wc -w <<<"$cmds") -ge 15 ]] || fail "the command list: $cmds"
for c in $cmds; do
	for how in "$c -h" "$c --help" "help $c"; do
		# shellcheck disable=SC2086 # $how is words
		out=$("$SW_TOOL_BIN" $how 2>&1) || fail "sweepfs $how: status $?"
		grep -q "^usage: sweepfs" <<<"$out" ||
			fail "sweepfs $how: no usage line: $out"
	done
done
"$SW_TOOL_BIN" status -m "$A" --json | "$PYTHON" -c 'import json, sys
json.load(sys.stdin)' || fail "sweepfs status -m A --json"
"$SW_TOOL_BIN" --json -m "$A" status | "$PYTHON" -c 'import json, sys
json.load(sys.stdin)' || fail "sweepfs --json -m A status"
rc=0
"$SW_TOOL_BIN" status -m "127.0.0.1:$CS_PORT" 2>/dev/null || rc=$?
assert_eq 3 "$rc" "-m after the command is the master"

log "every option in --help is in the man page"
DOC=$SW_SRC/../../doc
# options_missing HELP_TEXT MAN_SOURCE: the -o names and long options of
# HELP_TEXT that MAN_SOURCE (scdoc) does not mention, one a line.
options_missing() {
	local o
	for o in $(grep -oE -- '(--[a-z][a-z-]+|-o [a-z_]+)' <<<"$1" |
		sed 's/^-o /-o_/' | sort -u); do
		case $o in
		-o_*) grep -qE "\*-o ${o#-o_}[*=]" "$2" || echo "$o" ;;
		*) grep -qF -- "*$o*" "$2" || echo "$o" ;;
		esac
	done
}
missing=$(options_missing "$("$SW_MOUNT_BIN" --help 2>&1)" \
	"$DOC/sweepfs-mount.8.scd")
[[ -z "$missing" ]] || fail "sweepfs-mount(8) lacks: $missing"
missing=$(options_missing "$("$SW_MASTER_BIN" --help 2>&1)" \
	"$DOC/sweepfs-master.8.scd")
[[ -z "$missing" ]] || fail "sweepfs-master(8) lacks: $missing"
missing=$(options_missing "$("$SW_CS_BIN" --help 2>&1)" \
	"$DOC/sweepfs-chunkserver.8.scd")
[[ -z "$missing" ]] || fail "sweepfs-chunkserver(8) lacks: $missing"
missing=$(options_missing "$("$SW_TOOL_BIN" --help 2>&1)" "$DOC/sweepfs.1.scd")
[[ -z "$missing" ]] || fail "sweepfs(1) lacks: $missing"
for c in $cmds; do
	missing=$(options_missing "$("$SW_TOOL_BIN" help "$c" 2>&1)" \
		"$DOC/sweepfs-$c.1.scd")
	[[ -z "$missing" ]] || fail "sweepfs-$c(1) lacks: $missing"
done

log "a refused mount says why; so does the tool"
mkdir "$SW_TMP/r1"
refused_mount "an unknown host" "bad master address 'no-such-host.invalid'" \
	no-such-host.invalid "$SW_TMP/r1" -f
# Something that is not sweepfs: answers every connection with bytes no
# frame starts with, for a minute at most.
"$PYTHON" -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
s.settimeout(60)
end = time.time() + 60
while time.time() < end:
    try:
        c, _ = s.accept()
    except OSError:
        break
    c.sendall(b"HTTP/1.0 400 Bad Request\r\n" + b"\xff" * 64)
    time.sleep(0.2)
    c.close()' >"$SW_TMP/junk.port" &
JUNK_PID=$!
wait_until 10 "the stand-in listening" test -s "$SW_TMP/junk.port"
JUNK=127.0.0.1:$(cat "$SW_TMP/junk.port")
refused_mount "a peer that is not sweepfs" "does not speak the sweepfs protocol" \
	"$JUNK" "$SW_TMP/r1" -f
rc=0
"$SW_TOOL_BIN" -m "$JUNK" status 2>"$SW_TMP/err" || rc=$?
assert_eq 3 "$rc" "exit status of status against something not sweepfs"
grep -q "does not answer as a sweepfs master" "$SW_TMP/err" ||
	fail "unclear message: $(cat "$SW_TMP/err")"
kill "$JUNK_PID" 2>/dev/null || true
wait "$JUNK_PID" 2>/dev/null || true

_swc2 unmount "$MB" >/dev/null || fail "unmounting $MB"
printf '%s\n' '127.0.0.6 / ro,alldirs' \
	'127.0.0.1 / rw,alldirs,maproot=0,password=open-sesame' \
	>"$C2/exports.cfg"
_swc2 master stop >/dev/null || fail "stopping the second master"
_swc2 master start --host 127.0.0.1 --port "$B_PORT" --data "$C2/meta" \
	--log "$C2/master.log" -- --set "exports_file=$C2/exports.cfg" \
	>/dev/null || fail "the second master did not restart"
refused_mount "an export without its password" "wants a password" \
	"$B" "$SW_TMP/r1" -f
refused_mount "an export with a wrong password" "refuses the password" \
	"$B" "$SW_TMP/r1" -f -o password=open-sesam
rc=0
SWEEPFS_PASSWORD=open-sesam "$SW_TOOL_BIN" -m "$B" status \
	2>"$SW_TMP/err" || rc=$?
assert_eq 6 "$rc" "exit status of status with a wrong password"
grep -q "wants a password, and the one given is wrong" "$SW_TMP/err" ||
	fail "unclear message: $(cat "$SW_TMP/err")"
SWEEPFS_PASSWORD=open-sesame "$SW_TOOL_BIN" -m "$B" status >/dev/null ||
	fail "status with the right password"
start_mount "$SW_TMP/ro" "$B" bind=127.0.0.6
grep -q "exports / to this client read-only: mounting read-only" \
	"$SW_TMP/ro.log" || fail "no word of the read-only export"
findmnt -n -M "$SW_TMP/ro" -o OPTIONS | grep -Eq '(^|,)ro(,|$)' ||
	fail "a read-only export mounted read-write"
expect_errno EROFS fsop mkdir "$SW_TMP/ro/new"
stop_mount "$SW_TMP/ro"

log "a mount does not resume on another cluster at its master's address"
start_mount "$SW_TMP/mb2" "$B" password=open-sesame,master_timeout=3
MB2=$SW_TMP/mb2
assert_exists "$MB2/victim/f"
_swc2 master stop >/dev/null || fail "stopping the second master"
_swc2 master start --host 127.0.0.1 --port "$B_PORT" --data "$C2/meta2" \
	--log "$C2/master2.log" -- --set "exports_file=$C2/exports.cfg" \
	>/dev/null || fail "a new master on the second one's port"
wait_until 20 "the mount to refuse the new cluster" \
	grep -q "serves cluster .*, not $idb that this mount is of" "$MB2.log"
got=$(timeout 30 "$PYTHON" -c 'import errno, os, sys
try:
    os.mkdir(sys.argv[1])
    print("OK")
except OSError as e:
    print(errno.errorcode[e.errno])' "$MB2/made-after")
assert_eq EIO "$got" "a mkdir once the master serves another cluster"
rc=0
SWEEPFS_PASSWORD=open-sesame "$SW_TOOL_BIN" -m "$B" --fs-path rmr \
	/made-after 2>"$SW_TMP/err" || rc=$?
assert_eq 1 "$rc" "rmr of what the mount should not have made"
grep -q "No such file or directory" "$SW_TMP/err" ||
	fail "the new cluster: $(cat "$SW_TMP/err")"
_unmount "$MB2"

sw_pass
