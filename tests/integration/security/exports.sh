#!/bin/bash
# Access control end to end: an exports file, clients at different
# loopback addresses (each mount and tool binds its own: -o bind=,
# $SWEEPFS_BIND), and what each may do.
#
#   127.0.0.1  /       rw,alldirs,admin,maproot=0   (lib.sh's own checks)
#   127.0.0.2  /       rw,alldirs,admin,maproot=0   the administrator
#   127.0.0.3  /proj   rw,maproot=nobody            a confined, squashed client
#   127.0.0.4  /       ro                           read-only
#   127.0.0.5  /vault  rw,maproot=0,password=...    challenge-response
#   127.0.0.6  /       ro,admin,maproot=0           read-only admin
#   127.0.0.7  /proj   rw,alldirs,admin,maproot=0   a confined admin
#   127.0.0.8  /       rw,admin                     admin, root squashed
#   anyone else: nothing
#
#  1. the admin mounts everything and may rmr anything; status lists the
#     sessions with their addresses and exports;
#  2. the /proj client sees /proj as its root and cannot mount anything
#     else, its root works as nobody, and rmr does not let it remove
#     what nobody could not; a file it has open survives a restart of
#     the master (files outside by inode number: hostile.sh, confine);
#  3. the read-only client reads and gets EROFS for every change;
#  4. /vault: no password or a wrong one is refused (logged with the
#     peer's address), the right one from a password file mounts;
#  5. fsck and group changes need an admin export of the whole
#     filesystem, and group changes a read-write one; and root there:
#     another user of the admin client is refused them, root squashed
#     by maproot too; status tells only root on an admin export the
#     chunkservers' addresses and the namespace's counters, anyone else
#     its own session; df in a confined mount counts its own files;
#  6. an address with no export, or an export asked for a directory it
#     does not cover, is refused and the refusal is logged with the
#     address;
#  7. SIGHUP reloads the file: a session still allowed keeps working on
#     its mount, one no longer allowed is disconnected, a newly allowed
#     address mounts.
. "$(dirname "$0")/../lib.sh"

sw_init exports --root

NOBODY=$(id -u nobody)
EXPORTS=$SW_TMP/exports.cfg
PW=$SW_TMP/vault.pw
echo 'correct-horse-battery' >"$PW"
chmod 600 "$PW"
write_exports() {
	cat >"$EXPORTS" <<EOF
# ADDRESS   DIRECTORY  OPTIONS
127.0.0.1   /          rw,alldirs,admin,maproot=0
127.0.0.2   /          rw,alldirs,admin,maproot=0
127.0.0.3   /proj      rw,maproot=nobody
127.0.0.4   /          ro
127.0.0.5   /vault     rw,maproot=0,password=correct-horse-battery
127.0.0.6   /          ro,admin,maproot=0
127.0.0.7   /proj      rw,alldirs,admin,maproot=0
127.0.0.8   /          rw,admin
$1
EOF
}
write_exports ""

start_master --set "exports_file=$EXPORTS"
SPEC=$SW_MASTER_HOST:$SW_PORT

# as ADDR TOOL-ARGS...: the sweepfs command from ADDR.
as() {
	local addr=$1
	shift
	SWEEPFS_BIND=$addr "$SW_TOOL_BIN" -m "$SPEC" "$@"
}

# refused ADDR SUBDIR [OPTS] WHAT: a mount from ADDR of SUBDIR fails
# (the helper exits non-zero) and nothing gets mounted.
refused() {
	local addr=$1 sub=$2 opts=$3 what=$4 mnt=$SW_TMP/refused rc=0
	mkdir -p "$mnt"
	timeout 30 "$SW_MOUNT_BIN" "$SPEC:$sub" "$mnt" \
		-o "bind=$addr${opts:+,$opts}" >"$SW_TMP/refused.log" 2>&1 ||
		rc=$?
	if is_sweepfs_mount "$mnt"; then
		fusermount3 -u "$mnt"
		fail "$what: mounted"
	fi
	((rc != 0)) || fail "$what: the mount helper exited 0"
	log "refused as expected ($what): $(tail -n 1 "$SW_TMP/refused.log")"
}

# logged TEXT WHAT: the master's log names the refusal.
logged() {
	grep -qF -- "$1" "$SW_MASTER_LOG" || fail "$2: no '$1' in the master log"
}

# ---- 1. the administrator -------------------------------------------------------
log "the admin client"
A=$SW_TMP/admin
start_mount "$A" "$SPEC" bind=127.0.0.2
mkdir -p "$A/proj/sub" "$A/vault" "$A/other/deep"
echo "outside" >"$A/other/secret"
chmod 700 "$A/other"
echo "project data" >"$A/proj/readme"
touch "$A/proj/sub/f"
chmod 777 "$A/proj"   # squashed root (nobody) may create here
secret_ino=$(stat -c %i "$A/other/secret")
as 127.0.0.2 status --json >"$SW_TMP/status.json"
"$PYTHON" - "$SW_TMP/status.json" <<'EOF' || fail "status lists the admin session"
import json, sys
d = json.load(open(sys.argv[1]))
s = [x for x in d["sessions"] if x.get("address", x.get("peer", "")).startswith("127.0.0.2:")]
assert s, d["sessions"]
assert any("admin" in json.dumps(x) for x in s), s
EOF

# ---- 2. a confined, squashed client -----------------------------------------------
log "the /proj client"
P=$SW_TMP/proj
start_mount "$P" "$SPEC:/proj" bind=127.0.0.3
assert_eq "project data" "$(cat "$P/readme")" "a file of the export"
assert_eq "readme sub" "$(ls "$P" | tr '\n' ' ' | sed 's/ $//')" "the export's root"
assert_missing "$P/other" "$P/vault"
touch "$P/made-by-root"
assert_eq "$NOBODY" "$(stat -c %u "$P/made-by-root")" "owner of root's file (squashed)"
assert_eq "$NOBODY" "$(stat -c %u "$A/proj/made-by-root")" "owner seen by the admin"
expect_errno EPERM fsop chmod "$P/readme" 600
# Asking for something outside: another directory, and / itself.
refused 127.0.0.3 /other "" "/proj client asking for /other"
logged "127.0.0.3" "a refused subdirectory"
refused 127.0.0.3 / "" "/proj client asking for /"
# An admin request from a client without admin rights on something it
# does not own: refused by ownership, as POSIX.
expect_fail() { ! "$@" >/dev/null 2>&1; }
expect_fail as 127.0.0.3 rmr "$P/sub" ||
	fail "a non-admin, squashed client removed root's tree with rmr"
assert_exists "$A/proj/sub/f"
# Its files are the ones it was told of (the master cannot tell where a
# file is from its number alone): after a master restart, a file it has
# open comes back (found below /proj), and the kernel's cached names are
# looked up again.
exec {fd}<"$P/readme"
stat "$P/sub/f" >/dev/null
restart_master kill
drop_caches
assert_eq "project data" \
	"$("$PYTHON" -c 'import os, sys; print(os.pread(int(sys.argv[1]), 100, 0).decode().strip())' "$fd")" \
	"reading a file the confined client had open across a master restart"
exec {fd}<&-
assert_eq "made-by-root readme sub" "$(ls "$P" | tr '\n' ' ' | sed 's/ $//')" \
	"the export's root after the restart"
assert_eq "" "$(cat "$P/sub/f")" "a file below it after the restart"

# ---- 3. read-only ----------------------------------------------------------------
log "the read-only client"
R=$SW_TMP/ro
# (master_timeout: once its export is gone, its calls fail soon.)
start_mount "$R" "$SPEC" bind=127.0.0.4,master_timeout=5
assert_eq "project data" "$(cat "$R/proj/readme")" "reading through a read-only export"
expect_errno EROFS fsop create "$R/proj/new"
expect_errno EROFS fsop mkdir "$R/newdir"
expect_errno EROFS fsop unlink "$R/proj/readme"
expect_errno EROFS fsop rename "$R/proj/readme" "$R/proj/x"
expect_errno EROFS fsop chmod "$R/proj/readme" 644
expect_errno EROFS fsop setxattr "$R/proj/readme" user.k v
expect_fail as 127.0.0.4 rmr "$R/proj/sub" || fail "rmr through a read-only export"
assert_exists "$A/proj/readme" "$A/proj/sub/f"

# ---- 4. a password -----------------------------------------------------------------
log "the password-protected export"
refused 127.0.0.5 /vault "" "/vault without a password"
echo wrong >"$SW_TMP/wrong.pw"
refused 127.0.0.5 /vault "passwordfile=$SW_TMP/wrong.pw" "/vault with a wrong password"
logged "127.0.0.5" "a wrong password"
logged "wrong password" "a wrong password"
V=$SW_TMP/vault
start_mount "$V" "$SPEC:/vault" "bind=127.0.0.5,passwordfile=$PW"
echo "in the vault" >"$V/inside"
assert_eq "in the vault" "$(cat "$A/vault/inside")" "a file written in the vault"
# The password never crosses the wire: the master's log does not have it
# either.
if grep -q "correct-horse" "$SW_MASTER_LOG"; then
	fail "the password is in the master's log"
fi

# ---- 5. the whole cluster's requests --------------------------------------------
# fsck reports files anywhere by their paths from the root, and a group
# request changes the leader or the members: an admin export reaches
# them only if it is the whole filesystem's, and for the group's only if
# it is read-write.
log "fsck and group through a read-only and a confined admin export"
# tool_refused TEXT WHAT COMMAND...: COMMAND fails, saying TEXT.
tool_refused() {
	local text=$1 what=$2
	shift 2
	if "$@" >/dev/null 2>"$SW_TMP/tool.err"; then
		fail "$what: not refused"
	fi
	grep -q "$text" "$SW_TMP/tool.err" ||
		fail "$what: refused without saying '$text': $(cat "$SW_TMP/tool.err")"
	log "refused as expected ($what): $(cat "$SW_TMP/tool.err")"
}
as 127.0.0.6 fsck >/dev/null || fail "fsck through a read-only admin export"
tool_refused "read-only" "a group change through a read-only admin export" \
	as 127.0.0.6 group add 3=127.0.0.1:1
PA=$SW_TMP/proj-admin
start_mount "$PA" "$SPEC:/proj" bind=127.0.0.7
assert_eq "project data" "$(cat "$PA/readme")" "a file of the confined admin export"
tool_refused "whole filesystem" "fsck through an admin export of /proj" \
	env SWEEPFS_BIND=127.0.0.7 "$SW_TOOL_BIN" fsck "$PA"
tool_refused "whole filesystem" "a group change through an admin export of /proj" \
	env SWEEPFS_BIND=127.0.0.7 "$SW_TOOL_BIN" -m "$SPEC:/proj" group add 3=127.0.0.1:1
stop_mount "$PA"

log "admin is root: another user of the admin client, squashed root"
U=4242
# uas ADDR TOOL-ARGS...: the sweepfs command from ADDR as user $U.
uas() {
	local addr=$1
	shift
	as_user "$U" "$U" "" env SWEEPFS_BIND="$addr" "$SW_TOOL_BIN" -m "$SPEC" "$@"
}
tool_refused "only root may" "fsck by a user of the admin client" uas 127.0.0.2 fsck
tool_refused "only root may" "a group transfer by a user of the admin client" \
	uas 127.0.0.2 group transfer
tool_refused "only root may" "a group add by a user of the admin client" \
	uas 127.0.0.2 group add 3=127.0.0.1:1
tool_refused "only root may" "a group remove by a user of the admin client" \
	uas 127.0.0.2 group remove 3
rc=0
uas 127.0.0.2 fsck >/dev/null 2>&1 || rc=$?
assert_eq 6 "$rc" "fsck's exit status for a user refused (permission denied)"
# Root squashed (127.0.0.4 maps root to nobody), and root without admin.
tool_refused "gives root no admin rights" "fsck by squashed root" as 127.0.0.4 fsck
# admin with the default maproot: root is squashed, admin gives it nothing,
# and the master says so when it loads the file.
tool_refused "gives root no admin rights" "fsck by squashed root of an admin export" \
	as 127.0.0.8 fsck
logged ":$(grep -n '^127.0.0.8' "$EXPORTS" | cut -d: -f1): admin gives root nothing while root is squashed" \
	"an admin export that squashes root"
# as_proj TOOL-ARGS...: the sweepfs command of the confined /proj client.
as_proj() {
	SWEEPFS_BIND=127.0.0.3 "$SW_TOOL_BIN" -m "$SPEC:/proj" "$@"
}
tool_refused "gives root no admin rights" "fsck by root of a client without admin" \
	as_proj fsck
as 127.0.0.2 fsck >/dev/null || fail "fsck by root of the admin client"
grep -q "this master is not in a group" < <(as 127.0.0.2 group add 3=127.0.0.1:1 2>&1) ||
	fail "root of the admin client got past admission with a group change"

# status_of FILE EXPR: EXPR on the status JSON in FILE (bound to d).
status_of() {
	"$PYTHON" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
as 127.0.0.2 status --json >"$SW_TMP/st-root.json" 2>"$SW_TMP/st-root.err"
assert_eq "" "$(cat "$SW_TMP/st-root.err")" "root's status on stderr"
assert_eq False "$(status_of "$SW_TMP/st-root.json" 'd["limited"]')" "root's status limited"
cs_listen=$(status_of "$SW_TMP/st-root.json" 'd["servers"][0]["listen"]')
assert_ne "" "$cs_listen" "a chunkserver's address in root's status"
assert_ge 2 "$(status_of "$SW_TMP/st-root.json" 'len(d["sessions"])')" "sessions root sees"
assert_ge 8 "$(status_of "$SW_TMP/st-root.json" 'd["nodes"]')" "nodes root sees"
# (status prints no "total": that is stats'.)
assert_eq True "$(status_of "$SW_TMP/st-root.json" '"meta_version" in d')" "root's meta_version"
for who in "uas 127.0.0.2" "as 127.0.0.4" as_proj "as 127.0.0.8"; do
	$who status --json >"$SW_TMP/st-user.json" 2>"$SW_TMP/st-user.err" ||
		fail "status --json ($who)"
	grep -q "^limited: not root on an admin export" "$SW_TMP/st-user.err" ||
		fail "status ($who) does not say on stderr it is limited"
	assert_eq 0 "$(status_of "$SW_TMP/st-user.json" 'd["chunk_health"]["missing"]')" \
		"missing chunks counted for $who"
	assert_eq True "$(status_of "$SW_TMP/st-user.json" 'd["limited"]')" "limited ($who)"
	assert_eq "0 0 1" "$(status_of "$SW_TMP/st-user.json" \
		'" ".join(str(len(d.get(k, ()))) for k in ("servers", "members", "sessions"))')" \
		"chunkservers, members, sessions shown ($who)"
	assert_eq None "$(status_of "$SW_TMP/st-user.json" 'd.get("nodes")')" "node count ($who)"
	assert_eq False "$(status_of "$SW_TMP/st-user.json" '"meta_version" in d')" "meta_version ($who)"
	if grep -qF "$cs_listen" "$SW_TMP/st-user.json"; then
		fail "a chunkserver's address in the status of $who"
	fi
	$who status >"$SW_TMP/st-user.txt" || fail "status ($who)"
	grep -q "not shown: the namespace's counters, the chunkservers" "$SW_TMP/st-user.txt" ||
		fail "status ($who) does not say what it leaves out: $(cat "$SW_TMP/st-user.txt")"
done
tool_refused "only root may" "top by a user of the admin client" uas 127.0.0.2 top -b -n 1
as 127.0.0.2 top -b -n 1 -d 0.1 >/dev/null || fail "top by root of the admin client"

log "df in a confined mount counts its own files"
used() { stat -f -c '%c %d' "$1" | awk '{ print $1 - $2 }'; }
proj_names=$(find "$A/proj" | wc -l) # /proj itself and every name below
assert_eq "$proj_names" "$(used "$P")" "files df counts in the /proj mount"
assert_ge $((proj_names + 5)) "$(used "$A")" "files df counts in the admin mount"
assert_eq "$(stat -f -c %b "$A")" "$(stat -f -c %b "$P")" "the space df shows, confined or not"

# ---- 6. nobody else ---------------------------------------------------------------
log "an address with no export"
refused 127.0.0.9 / "" "an address without an export"
logged "127.0.0.9" "an address without an export"
expect_fail as 127.0.0.9 status || fail "a tool from an address without an export"

# ---- 7. SIGHUP -----------------------------------------------------------------------
log "reloading the exports file"
# .4 loses its line, .9 gains one; .2, .3 and .5 keep theirs.
write_exports "127.0.0.9   /          ro"
sed -i '/^127\.0\.0\.4 /d' "$EXPORTS"
kill -HUP "$SW_MASTER_PID"
logged_session_gone() { grep -q "no longer exported" "$SW_MASTER_LOG"; }
wait_until 10 "the master to drop the read-only session" logged_session_gone
alive "$SW_MASTER_PID" || fail "the master died on SIGHUP"
# Still allowed: working, on the same mounts, without a remount.
touch "$A/after-reload" "$P/after-reload" "$V/after-reload"
assert_exists "$A/proj/after-reload" "$A/vault/after-reload"
# No longer allowed: its reconnects are refused.
ro_refused() { ! stat "$R/proj/readme" >/dev/null 2>&1; }
wait_until 30 "the dropped read-only client to lose access" ro_refused
R9=$SW_TMP/new9
start_mount "$R9" "$SPEC" bind=127.0.0.9
assert_eq "project data" "$(cat "$R9/proj/readme")" "the newly exported address"
as 127.0.0.2 status >"$SW_TMP/status.txt"
grep -q "127.0.0.9" "$SW_TMP/status.txt" || fail "status lists the new session"
grep -q "/proj" "$SW_TMP/status.txt" || fail "status shows the sessions' exports"
alive "$SW_MASTER_PID" || fail "the master is gone"
sw_pass
