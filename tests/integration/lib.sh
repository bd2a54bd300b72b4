# Shared helpers for the integration scenarios (tests/integration/*.sh).
#
# A scenario sources this file, calls sw_init, then starts a real master
# (with SW_CHUNKSERVERS real chunkservers, one by default) and a real
# mount on temporary directories:
#
#   . "$(dirname "$0")/lib.sh"
#   sw_init posix_basic
#   start_master
#   start_mount
#   ... workload, assert_* ...
#   sw_pass
#
# A scenario that wants no chunkserver, or several, sets SW_CHUNKSERVERS
# (0, 2, ...) before start_master; start_chunkservers adds more later.
#
# Daemons and mounts are started and stopped by the cluster launcher,
# scripts/swcluster.py (shared with demo.sh and the benchmarks); the
# functions here wrap it and keep the variables the scenarios read.
#
# Everything started here (mounts, daemons, the temporary directory) is
# torn down by an EXIT trap, also when the scenario fails or is
# interrupted: mounts are unmounted (lazily if need be), daemons stopped,
# first gently so that sanitizer builds report leaks, then with SIGKILL.
# If this script is killed outright (SIGKILL, no trap), the launcher's
# watchers do the same. The temporary directory is removed unless
# SWEEPFS_KEEP_TMP=1.
#
# Environment:
#   SWEEPFS_BUILD     meson build root holding master/sweepfs-master,
#                     chunkserver/sweepfs-chunkserver, mount/sweepfs-mount
#                     and tools/sweepfs (meson passes it; required)
#   SWEEPFS_KEEP_TMP  1: keep the temporary directory for inspection
#   SWEEPFS_MOUNT_OPTS  -o options added to every mount start_mount makes
#   PYTHON            python3 interpreter (default: python3 on PATH)
#
# Exit status: 0 pass, 1 fail, 77 skip (no /dev/fuse, no fusermount3, or a
# scenario's own requirement missing), as meson and libfuse's
# test/cases/README.md expect.
#
# Sanitizers: ASAN_OPTIONS/UBSAN_OPTIONS are set so that a sanitizer build
# of the daemons reports errors and leaks into their logs; a log that
# contains an AddressSanitizer, LeakSanitizer or UBSan report fails the
# scenario even if everything else passed.

set -eEu -o pipefail

SW_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The scenario's own folder: its drivers (*.py) sit beside it.
SW_HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3}
SW_TMP=
SW_NAME=
SW_FAILED=0

# What runs: the master, the chunkservers, and the mounts with their
# clients' pids (the launcher's registry has them too, for the clean-up).
SW_MASTER_PID=
SW_CS_PIDS=()      # chunkserver I's pid ("" while it is stopped)
SW_MOUNTS=()       # mount points
SW_MOUNT_PIDS=()   # their sweepfs-mount processes
SW_TMPFS=()        # tmpfs mounts sw_tmpfs made, unmounted after the daemons
SW_MNT=            # the first mount point start_mount made

# Sanitizer reports go to the daemons' stderr, which is their log.
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=0:${UBSAN_OPTIONS:-}"
export LC_ALL=C

# ---- messages and assertions --------------------------------------------

log() {
	printf '%s [%s] %s\n' "$(date +%H:%M:%S.%N | cut -c1-12)" \
		"${SW_NAME:-it}" "$*" >&2
}

# Fail the scenario with a message; the EXIT trap cleans up.
fail() {
	printf 'FAIL [%s]: %s\n' "${SW_NAME:-it}" "$*" >&2
	SW_FAILED=1
	exit 1
}

skip() {
	printf 'SKIP [%s]: %s\n' "${SW_NAME:-it}" "$*" >&2
	exit 77
}

# assert_eq EXPECTED ACTUAL WHAT
assert_eq() {
	if [[ "$1" != "$2" ]]; then
		fail "$3: expected '$1', got '$2'"
	fi
}

# assert_ne UNEXPECTED ACTUAL WHAT
assert_ne() {
	if [[ "$1" == "$2" ]]; then
		fail "$3: did not expect '$2'"
	fi
}

# assert_ge MIN ACTUAL WHAT (integers)
assert_ge() {
	if ! (($2 >= $1)); then
		fail "$3: expected >= $1, got $2"
	fi
}

# assert_le MAX ACTUAL WHAT (integers)
assert_le() {
	if ! (($2 <= $1)); then
		fail "$3: expected <= $1, got $2"
	fi
}

# assert_exists PATH... / assert_missing PATH... (lstat, not following links)
assert_exists() {
	local p
	for p in "$@"; do
		[[ -e "$p" || -L "$p" ]] || fail "expected $p to exist"
	done
}

assert_missing() {
	local p
	for p in "$@"; do
		if [[ -e "$p" || -L "$p" ]]; then
			fail "expected $p not to exist"
		fi
	done
}

# assert_same_text EXPECTED_FILE ACTUAL_FILE WHAT: fail with a unified diff.
assert_same_text() {
	local d
	if ! d=$(diff -u "$1" "$2"); then
		printf '%s\n' "$d" | head -n 60 >&2 || true
		fail "$3: differs from the expected text (diff above)"
	fi
}

# assert_stat FORMAT EXPECTED PATH [WHAT]: `stat -c FORMAT PATH` (lstat).
assert_stat() {
	local got
	got=$(stat -c "$1" -- "$3" 2>&1) || fail "stat $3: $got"
	assert_eq "$2" "$got" "${4:-stat -c '$1' $3}"
}

# assert_fails CMD...: CMD must exit non-zero.
assert_fails() {
	if "$@" >/dev/null 2>&1; then
		fail "expected to fail: $*"
	fi
}

# fsop OP ARGS...: one system call through tests/integration/fsop.py; prints
# "OK [result]" or the errno name ("EACCES").
fsop() {
	"$PYTHON" "$SW_SRC/fsop.py" "$@"
}

# as_user UID GID GROUPS CMD...: run CMD with those credentials; GROUPS is
# a comma-separated list of supplementary gids, or "" for none.
as_user() {
	local uid=$1 gid=$2 groups=$3
	shift 3
	if [[ -n "$groups" ]]; then
		setpriv --reuid="$uid" --regid="$gid" --groups="$groups" -- "$@"
	else
		setpriv --reuid="$uid" --regid="$gid" --clear-groups -- "$@"
	fi
}

# ufsop UID GID GROUPS OP ARGS...: fsop as another user (needs
# sw_user_python first).
ufsop() {
	local uid=$1 gid=$2 groups=$3
	shift 3
	as_user "$uid" "$gid" "$groups" "$SW_USER_PYTHON" "$SW_TMP/fsop.py" "$@"
}

# sw_user_python: find a python3 that other users may run (a pyenv one
# under /root is not) and put fsop.py where they can read it; skip the
# scenario if there is none.
sw_user_python() {
	local py
	cp "$SW_SRC/fsop.py" "$SW_TMP/fsop.py"
	chmod 644 "$SW_TMP/fsop.py"
	for py in "$("$PYTHON" -c 'import sys; print(sys.executable)')" \
		/usr/bin/python3 /usr/local/bin/python3; do
		[[ -x "$py" ]] || continue
		if as_user 65534 65534 "" "$py" -c pass 2>/dev/null; then
			SW_USER_PYTHON=$py
			return 0
		fi
	done
	skip "no python3 that an unprivileged user can run"
}

# expect_errno EXPECTED CMD...: CMD (fsop or ufsop) must print EXPECTED
# as its first word ("OK" or an errno name such as "EACCES").
expect_errno() {
	local want=$1 got
	shift
	got=$("$@" 2>&1) || true
	got=${got%%$'\n'*}
	got=${got%% *}
	[[ "$got" == "$want" ]] || fail "$*: expected $want, got '$got'"
}

# expect_ok CMD...: the same as expect_errno OK CMD...
expect_ok() {
	expect_errno OK "$@"
}

# ---- processes ----------------------------------------------------------

# Whether @pid is a live process (a zombie child is not).
alive() {
	local st
	st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n "$st" && "$st" != Z ]]
}

dead() { ! alive "$1"; }

# wait_dead PID SECONDS: wait for the process to end; reap it if it is our
# child. Returns 0 if it ended, 1 on timeout. Sets SW_EXIT_STATUS.
wait_dead() {
	local pid=$1
	SW_EXIT_STATUS=
	sw_poll "$2" 0.05 dead "$pid" || return 1
	SW_EXIT_STATUS=0
	wait "$pid" 2>/dev/null || SW_EXIT_STATUS=$?
	return 0
}

# sw_uptime_cs: the monotonic clock (CLOCK_BOOTTIME, /proc/uptime) in
# hundredths of a second, in SW_NOW_CS; no fork.
sw_uptime_cs() {
	local up
	read -r up _ </proc/uptime
	SW_NOW_CS=$((10#${up/./}))
}

# sw_poll SECONDS PAUSE CMD...: run CMD every PAUSE seconds until it
# succeeds (status 0), or until SECONDS (whole or decimal) of monotonic
# time have passed without (status 1). A deadline, not a count of tries:
# a CMD that takes long on a loaded machine does not stretch the wait (it
# did when the waits counted tries), so SECONDS is what the scenario may
# wait, its CMDs' own time included. CMD is tried at least once.
sw_poll() {
	local secs=$1 pause=$2 whole frac deadline
	shift 2
	whole=${secs%%.*}
	frac=${secs#"$whole"}
	frac=${frac#.}00
	sw_uptime_cs
	deadline=$((SW_NOW_CS + 10#${whole:-0} * 100 + 10#${frac:0:2}))
	while :; do
		"$@" >/dev/null 2>&1 && return 0
		sw_uptime_cs
		((SW_NOW_CS < deadline)) || return 1
		sleep "$pause"
	done
}

# wait_until SECONDS WHAT CMD...: run CMD every 50 ms until it succeeds;
# fail if it has not within SECONDS (sw_poll).
# CMD's arguments are expanded once, by the caller: a condition that reads
# something anew each time, like test "$(nodes)" = 5, must be a function.
wait_until() {
	local secs=$1 what=$2
	shift 2
	sw_poll "$secs" 0.05 "$@" ||
		fail "timed out after $secs s waiting for: $what"
}

# wait_slowly SECONDS WHAT CMD...: wait_until, twice a second, for a CMD
# too costly for 20 times a second (one that counts chunk files).
wait_slowly() {
	local secs=$1 what=$2
	shift 2
	sw_poll "$secs" 0.5 "$@" ||
		fail "timed out after $secs s waiting for: $what"
}

# sw_free_prefix: "10.X.Y", a /24 that no route on this host touches, for
# a scenario's network of machines (bridge and namespaces): each its own,
# not a fixed one that another worktree's scenario may hold at the same
# time. Skips the scenario if there is none.
sw_free_prefix() {
	local t p
	for ((t = 0; t < 50; t++)); do
		p=10.$((100 + ($$ + t * 7) % 150)).$((($$ / 150 + t * 13) % 250))
		if ! ip -4 route show table all | grep -q "^[a-z ]*$p\."; then
			SW_NET_PREFIX=$p
			return 0
		fi
	done
	skip "no free 10.x.y.0/24 for the test network"
}

# ---- the cluster launcher -----------------------------------------------

# scripts/swcluster.py starts, waits for, stops and cleans up the master,
# the chunkservers and the mounts (the same code serves demo.sh and the
# benchmarks); the functions below keep the variables the scenarios use
# (SW_PORT, SW_MASTER_PID, SW_CS_PIDS, SW_MOUNT_PIDS, ...) in step with it.
# Its registry lives in $SW_TMP/.swcluster; every daemon runs under a
# watcher that stops it if this script dies without cleaning up.
SW_CLUSTER_PY=$(cd "$SW_SRC/../../scripts" && pwd)/swcluster.py

_swc() {
	"$PYTHON" "$SW_CLUSTER_PY" -w "$SW_TMP" --build "$SWEEPFS_BUILD" "$@"
}

# A TCP port nobody listens on, outside the usual ephemeral range so that
# outgoing connections do not take it between the pick and the bind.
pick_port() {
	"$PYTHON" "$SW_CLUSTER_PY" port
}

# ---- master -------------------------------------------------------------

# Variables of the current master. SW_MASTER_HOST is the address it
# listens on, and the one mounts, chunkservers and tools use (a scenario
# may set it before start_master, e.g. to a veth address).
SW_MASTER_HOST=${SW_MASTER_HOST:-127.0.0.1}
SW_PORT=
SW_META=
SW_MASTER_LOG=
SW_MASTER_ARGS=()

# start_master [ARGS...]: start a master on SW_META (default $SW_TMP/meta)
# listening on SW_MASTER_HOST:SW_PORT (port picked if unset, and another
# if it is taken), in the foreground logging to SW_MASTER_LOG; returns
# once it listens. ARGS (e.g. --set changelog_sync=interval) are
# remembered for restart_master. The first time, it also starts
# SW_CHUNKSERVERS chunkservers (default 1) and waits until they are
# registered.
start_master() {
	SW_META=${SW_META:-$SW_TMP/meta}
	SW_MASTER_LOG=${SW_MASTER_LOG:-$SW_TMP/master.log}
	SW_MASTER_ARGS=("$@")
	_launch_master || fail "the master did not start"
	if ((${#SW_CS_PIDS[@]} == 0 && SW_CHUNKSERVERS > 0)); then
		start_chunkservers "$SW_CHUNKSERVERS"
	else
		wait_chunkservers
	fi
}

# _launch_master [--fixed-port]: start the master with the variables
# above; sets SW_MASTER_PID and SW_PORT. 1 if it did not start (the
# launcher printed why, with the end of the log).
_launch_master() {
	local out
	out=$(_swc master start --host "$SW_MASTER_HOST" \
		${SW_PORT:+--port "$SW_PORT"} "$@" --data "$SW_META" \
		--log "$SW_MASTER_LOG" -- \
		${SW_MASTER_ARGS[@]+"${SW_MASTER_ARGS[@]}"}) || return 1
	read -r SW_MASTER_PID SW_PORT <<<"$out"
}

# stop_master: SIGTERM (clean shutdown with a checkpoint); fails the
# scenario if the master does not exit with status 0 within 30 s.
stop_master() {
	[[ -n "$SW_MASTER_PID" ]] || return 0
	SW_EXIT_STATUS=$(_swc master stop --timeout 30) ||
		fail "the master did not stop after SIGTERM and SIGKILL"
	SW_MASTER_PID=
	[[ "$SW_EXIT_STATUS" != 137 ]] ||
		fail "the master did not stop within 30 s of SIGTERM"
	[[ "$SW_EXIT_STATUS" == 0 ]] ||
		fail "the master exited with status $SW_EXIT_STATUS after SIGTERM"
}

# kill_master: SIGKILL, a crash.
kill_master() {
	[[ -n "$SW_MASTER_PID" ]] || return 0
	_swc master kill >/dev/null || fail "the master survived SIGKILL"
	SW_MASTER_PID=
}

# restart_master [kill|term|start]: stop the master (default: SIGKILL;
# "start": it is stopped already) and start it again on the same
# directory, port and arguments (SW_MASTER_ARGS); returns once it listens
# and the running chunkservers have registered again.
restart_master() {
	case "${1:-kill}" in
	kill) kill_master ;;
	term) stop_master ;;
	start) [[ -z "$SW_MASTER_PID" ]] || fail "the master is running" ;;
	*) fail "restart_master: bad mode $1" ;;
	esac
	_launch_master --fixed-port || fail "the master did not restart"
	wait_chunkservers
}


# ---- the admin tool -------------------------------------------------------

# sw_tool ARGS...: the sweepfs command against the current master.
sw_tool() {
	"$SW_TOOL_BIN" -m "$SW_MASTER_HOST:$SW_PORT" "$@"
}

# sw_status EXPR: evaluate the Python expression EXPR on the master's
# `sweepfs status --json` (bound to d) and print the result, e.g.
# sw_status 'd["chunks"]' or sw_status 'sum(s["chunks"] for s in d["servers"])'.
sw_status() {
	local j
	j=$(sw_tool status --json) || return 1
	"$PYTHON" -c 'import json, sys; d = json.loads(sys.argv[1]); print(eval(sys.argv[2]))' \
		"$j" "$1"
}

# sw_requests NAME...: how many requests of the types NAME... (frame.c's
# names: create, unlink, batch, ...) the master has answered in all.
sw_requests() {
	local j
	j=$(sw_tool stats --json) || fail "sweepfs stats --json"
	"$PYTHON" -c '
import json, sys
r = json.loads(sys.argv[1])["total"]["requests"]
print(sum(r.get(n, 0) for n in sys.argv[2:]))' "$j" "$@"
}

# fsck_ok: `sweepfs fsck` finds nothing wrong (exit status 0).
fsck_ok() {
	sw_tool fsck >/dev/null 2>&1
}

# wait_fsck_clean [SECONDS] [WHAT]: wait (default 30 s) until fsck is
# clean: chunkserver inventories reach the master with their heartbeats
# and replication takes its time. Fails with fsck's report.
wait_fsck_clean() {
	sw_poll "${1:-30}" 0.1 fsck_ok && return 0
	sw_tool fsck >&2 || true
	fail "fsck is not clean after ${1:-30} s${2:+ ($2)}"
}

# fsck_json EXPR: evaluate EXPR on `sweepfs fsck --json` (bound to d).
fsck_json() {
	local j
	j=$(sw_tool fsck --json) || true
	[[ -n "$j" ]] || return 1
	"$PYTHON" -c 'import json, sys; d = json.loads(sys.argv[1]); print(eval(sys.argv[2]))' \
		"$j" "$1"
}

# free_inodes [DIR]: the free inodes statfs(2) reports on DIR (default
# the mount), which the master derives from its node count.
free_inodes() {
	stat -f -c %d "${1:-$SW_MNT}"
}

# drop_caches: write back and drop the kernel's page, dentry and inode
# caches, so that the next reads go through the mounts to the servers.
drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# ---- a process inside a directory another mount changes -------------------
# inside_start DIR OUT FIFO: a process whose working directory is DIR makes
# f000000..f000099 there and stats them (names a mount holding DIR hands its
# kernel for long), writes "ready" to OUT, and waits for a line on FIFO;
# then it looks at what inside_change did, by name relative to DIR, and
# appends what it saw to OUT. INSIDE_PID is its pid.
inside_start() {
	mkfifo "$3"
	"$PYTHON" -c '
import os, sys
d, out, fifo = sys.argv[1], sys.argv[2], sys.argv[3]
os.chdir(d)
for i in range(100):
    with open("f%06d" % i, "w") as f:
        f.write("old %d\n" % i)
for i in range(100):
    os.stat("f%06d" % i)
fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY); os.fsync(fd); os.close(fd)
with open(out, "w") as o:
    o.write("ready\n")
with open(fifo) as f:
    f.read()
res = ["f000010 exists=%s" % os.path.exists("f000010")]
try:
    with open("f000011") as f:
        res.append("f000011 reads=%r" % f.read())
except OSError as e:
    res.append("f000011 error=%s" % e)
res.append("f000012 exists=%s" % os.path.exists("f000012"))
res.append("new exists=%s" % os.path.exists("new"))
with open(out, "a") as o:
    o.write("\n".join(res) + "\n")
' "$1" "$2" "$3" &
	INSIDE_PID=$!
	for ((i = 0; i < 600; i++)); do
		grep -q ready "$2" 2>/dev/null && break
		sleep 0.1
	done
	grep -q ready "$2" || fail "the process in $1 did not get ready"
}

# inside_change DIR: through another mount's DIR, remove f000010, replace
# f000011 ("new 11"), rename f000012 away and make "new"
inside_change() {
	rm "$1/f000010"
	echo "new 11" >"$1/tmp"
	mv "$1/tmp" "$1/f000011"
	mv "$1/f000012" "$1/moved12"
	touch "$1/new"
}

# inside_check OUT FIFO WHAT: let the process go on; fail unless it saw
# every change inside_change made
inside_check() {
	echo go >"$2"
	wait "$INSIDE_PID" || fail "the process in $3 failed"
	log "the process in $3 sees: $(tr '\n' ' ' <"$1")"
	grep -q "f000010 exists=False" "$1" ||
		fail "the process in $3 resolves f000010, removed by another mount"
	grep -q "f000011 reads='new 11" "$1" ||
		fail "the process in $3 opens the old f000011, replaced by another mount"
	grep -q "f000012 exists=False" "$1" ||
		fail "the process in $3 resolves f000012, renamed by another mount"
	grep -q "new exists=True" "$1" ||
		fail "the process in $3 misses new, made by another mount"
}

# ---- metrics -----------------------------------------------------------

# start_metrics_cluster [START_MASTER_ARGS...]: a master and one
# chunkserver serving Prometheus metrics (metrics_listen on free ports),
# for the scenarios that read them with Prometheus' own text parser; skips
# without python3-prometheus-client. Sets PY3, MPORT and CPORT, and MURL
# and CURL, the two endpoints. The mount is the caller's.
start_metrics_cluster() {
	PY3=/usr/bin/python3
	$PY3 -c 'import prometheus_client' 2>/dev/null ||
		skip "python3-prometheus-client is not installed"
	MPORT=$(pick_port)
	CPORT=$(pick_port)
	SW_CHUNKSERVERS=0
	start_master --set metrics_listen="$SW_MASTER_HOST:$MPORT" "$@"
	start_chunkservers 1 --set metrics_listen="$SW_CS_HOST:$CPORT"
	MURL=http://$SW_MASTER_HOST:$MPORT/metrics
	CURL=http://$SW_CS_HOST:$CPORT/metrics
}

# scrape URL [EXPR...]: scrape.py reads URL, which must parse and make
# every EXPR true; else the scenario fails with what scrape.py said.
scrape() {
	$PY3 "$SW_SRC/scrape.py" "$@" >"$SW_TMP/scrape.out" 2>&1 ||
		fail "$(cat "$SW_TMP/scrape.out")"
}

# ---- chunkservers -------------------------------------------------------

# How many chunkservers start_master starts the first time (0: none).
SW_CHUNKSERVERS=${SW_CHUNKSERVERS:-1}
# Arguments every chunkserver gets: a short heartbeat, so that the
# master's picture of their inventories (fsck compares it) and free space
# is fresh within a second.
SW_CS_DEFAULT_ARGS=(--set heartbeat_interval=500ms)
SW_CS_HOST=${SW_CS_HOST:-127.0.0.1} # address chunkservers listen on
SW_CS_DIRS=()  # chunkserver I's data directory ($SW_TMP/csI)
SW_CS_PORTS=() # its port
SW_CS_LOGS=()  # its log ($SW_TMP/csI.log)
SW_CS_ARGS=()  # its extra arguments, one string (word-split on use)

# start_chunkservers N [ARGS...]: start N more chunkservers, each on its
# own data directory $SW_TMP/csI (I counts from 1 over the scenario) and
# a free port, pointed at the current master, in the foreground logging
# to $SW_TMP/csI.log; returns once all of them listen and the master
# lists them as connected. ARGS (no spaces inside one) are remembered for
# restart_chunkserver.
start_chunkservers() {
	local n=$1 k i
	shift
	[[ -n "$SW_PORT" ]] || fail "start_chunkservers: no master yet"
	[[ -x "$SW_CS_BIN" ]] || fail "no $SW_CS_BIN"
	for ((k = 0; k < n; k++)); do
		i=$((${#SW_CS_DIRS[@]} + 1))
		SW_CS_DIRS[i]=$SW_TMP/cs$i
		SW_CS_LOGS[i]=$SW_TMP/cs$i.log
		SW_CS_ARGS[i]="$*"
		SW_CS_PORTS[i]=
		SW_CS_PIDS[i]=
		_launch_chunkserver "$i" || fail "chunkserver $i did not start"
	done
	wait_chunkservers
}

# _launch_chunkserver I [--fixed-port]: start chunkserver I with its
# variables; sets its pid and port. 1 if it did not start.
_launch_chunkserver() {
	local i=$1 out
	shift
	# shellcheck disable=SC2086 # SW_CS_ARGS[i] is a word list
	out=$(_swc chunkserver start "$i" --host "$SW_CS_HOST" \
		${SW_CS_PORTS[i]:+--port "${SW_CS_PORTS[i]}"} "$@" \
		--data "${SW_CS_DIRS[i]}" --log "${SW_CS_LOGS[i]}" -- \
		"${SW_CS_DEFAULT_ARGS[@]}" ${SW_CS_ARGS[i]}) || return 1
	read -r _ "SW_CS_PIDS[i]" "SW_CS_PORTS[i]" <<<"$out"
}

# The chunkservers the master lists as connected, as "HOST:PORT" lines.
connected_chunkservers() {
	sw_status '"\n".join(s["listen"] for s in d["servers"] if s["connected"])'
}

# wait_chunkservers [SECONDS]: wait (default 30 s) until the master lists
# every running chunkserver as connected (after start, or after a master
# restart: they reconnect by themselves within their backoff).
wait_chunkservers() {
	_swc wait-registered --timeout "${1:-30}" ||
		fail "timed out after ${1:-30} s waiting for the chunkservers to register with the master"
}

# kill_chunkserver I: SIGKILL chunkserver I, a crash.
kill_chunkserver() {
	local i=$1
	[[ -n "${SW_CS_PIDS[$1]:-}" ]] || return 0
	_swc chunkserver kill "$i" >/dev/null ||
		fail "chunkserver $i survived SIGKILL"
	SW_CS_PIDS[i]=
}

# stop_chunkserver I: SIGTERM; fails the scenario unless chunkserver I
# exits with status 0 within 30 s.
stop_chunkserver() {
	local i=$1
	[[ -n "${SW_CS_PIDS[$1]:-}" ]] || return 0
	SW_EXIT_STATUS=$(_swc chunkserver stop "$i" --timeout 30) ||
		fail "chunkserver $i did not stop after SIGTERM and SIGKILL"
	SW_CS_PIDS[i]=
	[[ "$SW_EXIT_STATUS" != 137 ]] ||
		fail "chunkserver $i did not stop within 30 s of SIGTERM"
	[[ "$SW_EXIT_STATUS" == 0 ]] ||
		fail "chunkserver $i exited with status $SW_EXIT_STATUS after SIGTERM"
}

# restart_chunkserver I [kill|term|start]: stop chunkserver I (default
# SIGKILL; "start": it is stopped already), start it again on the same
# directory, port and arguments, and wait until it is registered.
restart_chunkserver() {
	local i=$1
	case "${2:-kill}" in
	kill) kill_chunkserver "$i" ;;
	term) stop_chunkserver "$i" ;;
	start) [[ -z "${SW_CS_PIDS[i]}" ]] || fail "chunkserver $i is running" ;;
	*) fail "restart_chunkserver: bad mode $2" ;;
	esac
	_launch_chunkserver "$i" --fixed-port ||
		fail "chunkserver $i did not restart"
	wait_chunkservers
}

# chunk_files [I...]: the number of chunk files on the disks of
# chunkservers I... (default: all of them).
chunk_files() {
	local i dirs=()
	if (($# == 0)); then
		set -- "${!SW_CS_DIRS[@]}"
	fi
	for i in "$@"; do
		dirs+=("${SW_CS_DIRS[i]}")
	done
	find "${dirs[@]}" -name 'chunk_*.swc' -type f | wc -l
}

# make_small_files DIR COUNT: COUNT files of 4 KiB under DIR (made), by 4
# writers, 100 a subdirectory; each holds its own path, repeated.
make_small_files() {
	local dir=$1 n=$2 w pids=()
	mkdir "$dir"
	for w in 0 1 2 3; do
		"$PYTHON" - "$dir" "$w" $((n / 4)) <<'EOF' &
import os, sys
root, w, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    if i % 100 == 0:
        d = os.path.join(root, "w%d_%04d" % (w, i // 100))
        os.mkdir(d)
    p = os.path.join(d, "f%03d" % (i % 100))
    with open(p, "wb") as f:
        f.write((p.encode() * 4096)[:4096])
EOF
		pids+=($!)
	done
	for w in "${pids[@]}"; do
		wait "$w" || fail "a writer under $dir failed"
	done
}

# check_small_files DIR: every file under DIR holds what make_small_files
# wrote (its path under DIR, repeated); prints how many there are.
check_small_files() {
	"$PYTHON" - "$1" <<'EOF' || fail "a file under $1 lost its data"
import os, sys
n = 0
for root, dirs, files in os.walk(sys.argv[1]):
    for name in files:
        p = os.path.join(root, name)
        with open(p, "rb") as f:
            got = f.read()
        # written under the mount's path at the time: the same suffix
        rel = p[len(sys.argv[1]):]
        if len(got) != 4096 or rel.encode() not in got:
            sys.exit("%s: %d bytes, not its own" % (p, len(got)))
        n += 1
print(n)
EOF
}

# top_deletions FILE LISTEN: from the output of `sweepfs top` in FILE (3
# frames or more), chunkserver LISTEN's pending deletions, their rate and
# their ETA in seconds in the last frame, as "PENDING RATE ETA"; prints
# why and returns 1 when they are not there.
top_deletions() {
	"$PYTHON" - "$1" "$2" <<'EOF'
import re, sys
text, listen = open(sys.argv[1]).read(), sys.argv[2]
pat = re.compile(re.escape(listen) +
                 r"\s+([\d,]+) pending, ([\d,.]+)/s, done in (\S+)")
hits = pat.findall(text)
if len(hits) < 3:
    sys.exit("%d frames with the server's line, not 3" % len(hits))
pending, rate, eta = hits[-1]
m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", eta)
if eta == "?" or not m:
    sys.exit("no ETA in the last frame: %r" % eta)
h, mi, s = (int(x or 0) for x in m.groups())
print(pending.replace(",", ""), int(float(rate.replace(",", ""))),
      h * 3600 + mi * 60 + s)
EOF
}

# plant_chunk I ID: on chunkserver I's disk, a copy of one of its chunk
# files renamed and re-headed as chunk ID (hex), version 1, in the
# chunkserver's layout (store.c, chunkfile.h): a chunk file no master
# made. Prints its path. Plant while the chunkserver is down: it reports
# what its start-up scan found. The header's CRC-32C is checked against
# the copied file's first, so that a layout change fails here.
plant_chunk() {
	local dir=${SW_CS_DIRS[$1]} src
	src=$(find "$dir" -name 'chunk_*.swc' -type f | head -n 1)
	[[ -n "$src" ]] || fail "no chunk file to copy on chunkserver $1"
	"$PYTHON" - "$src" "$dir" "$2" <<'EOF' || fail "planting chunk $2"
import os, struct, sys
src, root, cid = sys.argv[1], sys.argv[2], int(sys.argv[3], 16)
T = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    T.append(c)
def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = T[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
data = bytearray(open(src, "rb").read())
if data[:4] != b"SWCK" or struct.unpack_from("<I", data, 40)[0] != crc32c(data[:40]):
    sys.exit("%s: not a chunk header this helper knows" % src)
struct.pack_into("<QI", data, 8, cid, 1)
struct.pack_into("<I", data, 40, crc32c(data[:40]))
d = os.path.join(root, "%02x" % (cid & 0xFF))
os.makedirs(d, exist_ok=True)
p = os.path.join(d, "chunk_%016x_%08x.swc" % (cid, 1))
with open(p, "wb") as f:
    f.write(data)
print(p)
EOF
}

# ---- mounts -------------------------------------------------------------

# Whether PATH is a mount point of a sweepfs mount.
is_sweepfs_mount() {
	local t
	t=$(findmnt -n -M "$1" -o FSTYPE 2>/dev/null | tail -n 1) || return 1
	[[ "$t" == fuse.sweepfs ]]
}

# start_mount [MOUNTPOINT [SPEC [OPTIONS [NETNS]]]]: mount SPEC (default
# SW_MASTER_HOST:SW_PORT) on MOUNTPOINT (default $SW_TMP/mnt) in the
# foreground, logging to MOUNTPOINT.log; returns once mounted. OPTIONS is
# a -o list; NETNS a network namespace file (/run/netns/NAME) the client
# runs in (the mount itself stays the host's). The first mount is SW_MNT.
# SWEEPFS_MOUNT_OPTS, if set, is added to every mount's options (to run
# scenarios by hand with, say, io_uring).
start_mount() {
	local mnt=${1:-$SW_TMP/mnt} spec=${2:-$SW_MASTER_HOST:$SW_PORT}
	local opts=${3:-} net=${4:-} pid
	[[ -z "${SWEEPFS_MOUNT_OPTS:-}" ]] ||
		opts=${opts:+$opts,}$SWEEPFS_MOUNT_OPTS
	pid=$(_swc mount "$mnt" --spec "$spec" ${opts:+-o "$opts"} \
		${net:+--net "$net"}) || fail "mounting $spec on $mnt failed"
	SW_MOUNTS+=("$mnt")
	SW_MOUNT_PIDS+=("$pid")
	SW_MNT=${SW_MNT:-$mnt}
}

# adopt_mount MOUNTPOINT: a sweepfs mount some other program started (the
# mount.sweepfs helper, which daemonizes): find its client's pid, put it
# in SW_ADOPTED_PID and have it cleaned up with the others.
adopt_mount() {
	local mnt=$1 pid
	pid=$(pgrep -f -x -- "[^ ]*sweepfs-mount [^ ]+ $mnt( .*)?" | head -n 1) || true
	[[ -n "$pid" ]] || fail "no sweepfs-mount process for $mnt"
	_swc adopt "$mnt" "$pid"
	SW_ADOPTED_PID=$pid
}

# stop_adopted MOUNTPOINT PID: unmount an adopted mount and wait for its
# client to exit.
stop_adopted() {
	local mnt=$1 pid=$2 i
	_swc unmount "$mnt" >/dev/null || true
	for ((i = 0; i < 400; i++)); do
		[[ -e "/proc/$pid" ]] || return 0
		sleep 0.05
	done
	fail "sweepfs-mount $pid for $mnt did not exit after unmount"
}

# stop_mount [MOUNTPOINT]: unmount and wait for the client to exit;
# fails the scenario if it does not exit with status 0.
stop_mount() {
	local mnt=${1:-$SW_MNT} i ours=0 pid= spy= ok=1 dev
	for i in "${!SW_MOUNTS[@]}"; do
		if [[ "${SW_MOUNTS[$i]}" == "$mnt" ]]; then
			ours=1
			pid=${SW_MOUNT_PIDS[$i]}
			unset 'SW_MOUNTS[i]' 'SW_MOUNT_PIDS[i]'
		fi
	done
	# A client that has not exited 15 s after the unmount began is
	# killed at 20 (swcluster.py): what its threads waited for first.
	if [[ -n "$pid" ]]; then
		dev=$(stat -c %d "$mnt" 2>/dev/null) || dev=none
		(
			trap '[[ -z "${s:-}" ]] || kill "$s" 2>/dev/null; exit 0' TERM
			sleep 15 &
			s=$!
			wait "$s"
			_sw_stuck "$pid" "$mnt" "$dev" >"$SW_TMP/stuck.$pid" 2>&1
		) &
		spy=$!
	fi
	SW_EXIT_STATUS=$(_swc unmount "$mnt") || ok=0
	[[ -z "$spy" ]] || { kill "$spy" 2>/dev/null; wait "$spy" 2>/dev/null; } || true
	if ((ok == 0)) || [[ "$ours" == 1 && "$SW_EXIT_STATUS" == 137 ]]; then
		[[ ! -s "$SW_TMP/stuck.$pid" ]] || cat "$SW_TMP/stuck.$pid" >&2
		fail "sweepfs-mount for $mnt did not exit after unmount"
	fi
	((ours)) || return 0
	[[ "$SW_EXIT_STATUS" == 0 ]] ||
		fail "sweepfs-mount for $mnt exited with status $SW_EXIT_STATUS"
}

# _sw_stuck PID MOUNTPOINT DEV: what a mount client that does not exit is
# doing: each thread's kernel wait and stack, whether the mount point is
# still there, who holds files under it, its log's end.
_sw_stuck() {
	local t f dev=$3
	echo "== sweepfs-mount $1 for $2, still running 15 s after the unmount began"
	for t in /proc/"$1"/task/*; do
		echo "-- thread ${t##*/} $(cat "$t/comm") wchan $(cat "$t/wchan")"
		cat "$t/stack" 2>/dev/null | head -n 12
	done
	grep -F " $2 " /proc/self/mountinfo || echo "(not in this namespace's mount table)"
	# Still mounted in a mount namespace made while it was up (unshare,
	# ip netns exec: a copy of every mount): its connection stays.
	for f in /proc/[0-9]*/mountinfo; do
		t=${f#/proc/}
		t=${t%%/*}
		grep -qF " $2 " "$f" 2>/dev/null || continue
		echo "still mounted in the mount namespace $(readlink "/proc/$t/ns/mnt") of $t ($(tr '\0' ' ' <"/proc/$t/cmdline" 2>/dev/null))"
	done | sort -u -k7,7 | head -n 5
	# After a lazy unmount the paths no longer say: the device does.
	for f in /proc/[0-9]*/cwd /proc/[0-9]*/root /proc/[0-9]*/fd/*; do
		[[ "$(stat -L -c %d "$f" 2>/dev/null)" == "$dev" ]] || continue
		t=${f#/proc/}
		echo "held by ${t%%/*} ($(cat "/proc/${t%%/*}/cmdline" 2>/dev/null | tr '\0' ' ')): $f -> $(readlink "$f")"
	done
	echo "-- log"
	tail -n 30 "$SW_TMP/$(basename "$2").log" 2>/dev/null
	return 0
}

# Unmount, lazily when a plain unmount does not work.
_unmount() {
	_swc unmount "$1" >/dev/null || true
}

# sw_tmpfs DIR SIZE: mount a tmpfs of SIZE (e.g. 1g) on DIR (made if
# need be), unmounted by the EXIT trap after every daemon has stopped;
# e.g. chunkserver data directories whose space only this scenario uses,
# or a small metadata directory that fills up.
sw_tmpfs() {
	mkdir -p "$1"
	mount -t tmpfs -o "size=$2,mode=0755" tmpfs "$1" ||
		skip "cannot mount a tmpfs on $1"
	SW_TMPFS+=("$1")
}

# ---- sanitizers ---------------------------------------------------------

# Print sanitizer reports found in the daemons' logs (*.log, and
# *.log.PID that a sanitizer's log_path writes); 1 if any.
sanitizer_reports() {
	[[ -n "$SW_TMP" && -d "$SW_TMP" ]] || return 0
	"$PYTHON" "$SW_CLUSTER_PY" sanitizer "$SW_TMP"
}

# ---- set-up and tear-down -----------------------------------------------

_cleanup() {
	local rc=$? i
	trap - EXIT INT TERM ERR
	set +eE
	cd / # a working directory in a mount would keep it busy
	if ((rc != 0 && rc != 77)); then
		SW_FAILED=1
	fi
	# Mounts (ours and adopted ones), chunkservers, the master, in that
	# order, gently first so that sanitizer builds report leaks.
	[[ -n "$SW_TMP" && -d "$SW_TMP/.swcluster" ]] && _swc down
	[[ -n "$(type -t sw_scenario_cleanup)" ]] && sw_scenario_cleanup
	for i in "${!SW_TMPFS[@]}"; do
		umount "${SW_TMPFS[$i]}" 2>/dev/null ||
			umount -l "${SW_TMPFS[$i]}" 2>/dev/null
	done
	if ! sanitizer_reports; then
		echo "FAIL [$SW_NAME]: sanitizer reports in the daemon logs" >&2
		SW_FAILED=1
		((rc == 0 || rc == 77)) && rc=1
	fi
	if ((SW_FAILED)) && [[ -n "$SW_TMP" ]]; then
		for i in "$SW_TMP"/*.log; do
			[[ -f "$i" ]] || continue
			echo "==== last lines of $i" >&2
			tail -n 25 "$i" >&2
		done
	fi
	if [[ -n "$SW_TMP" && -d "$SW_TMP" ]]; then
		if grep -q " $SW_TMP" /proc/self/mountinfo; then
			echo "WARNING: mounts left under $SW_TMP; not removing it" >&2
		elif [[ "${SWEEPFS_KEEP_TMP:-0}" == 1 ]]; then
			echo "kept $SW_TMP" >&2
		else
			# A daemon killed only at the end of teardown's wait (a
			# sanitizer build writing its last checkpoint) may still
			# be writing into it: rm -rf then finds a directory not
			# empty. Again, a few times, until nothing writes.
			for i in 1 2 3 4 5; do
				rm -rf --one-file-system "$SW_TMP" 2>/dev/null &&
					break
				sleep 1
			done
			[[ ! -e "$SW_TMP" ]] ||
				echo "WARNING: could not remove $SW_TMP" >&2
		fi
	fi
	exit "$rc"
}

_on_err() {
	local rc=$? line=$1 cmd=$2
	# Only the scenario's own shell: a failure inside $(...) is the
	# caller's to judge.
	[[ "$BASHPID" == "$$" ]] || return 0
	printf 'FAIL [%s]: line %s: command failed (status %s): %s\n' \
		"${SW_NAME:-it}" "$line" "$rc" "$cmd" >&2
	SW_FAILED=1
}

# sw_init NAME [--root]: check the requirements (skip without them), make
# the temporary directory and install the traps.
sw_init() {
	SW_NAME=$1
	[[ -n "${SWEEPFS_BUILD:-}" ]] ||
		{ echo "SWEEPFS_BUILD is not set (meson sets it)" >&2; exit 1; }
	SW_MASTER_BIN=$SWEEPFS_BUILD/master/sweepfs-master
	SW_MOUNT_BIN=$SWEEPFS_BUILD/mount/sweepfs-mount
	SW_HELPER_BIN=$SWEEPFS_BUILD/mount/mount.sweepfs
	SW_CS_BIN=$SWEEPFS_BUILD/chunkserver/sweepfs-chunkserver
	SW_TOOL_BIN=$SWEEPFS_BUILD/tools/sweepfs
	[[ -x "$SW_MASTER_BIN" && -x "$SW_MOUNT_BIN" ]] ||
		{ echo "no binaries in $SWEEPFS_BUILD" >&2; exit 1; }
	[[ -c /dev/fuse ]] || skip "/dev/fuse is missing"
	command -v fusermount3 >/dev/null || skip "fusermount3 is not installed"
	command -v "$PYTHON" >/dev/null || skip "$PYTHON is not installed"
	if [[ "${2:-}" == --root ]] && ((EUID != 0)); then
		skip "needs root"
	fi
	if ((EUID != 0)) && ! [[ -u "$(command -v fusermount3)" ]]; then
		skip "not root and fusermount3 is not setuid"
	fi
	SW_TMP=$(mktemp -d "${TMPDIR:-/tmp}/sweepfs-it.$SW_NAME.XXXXXX")
	# The launcher's watchers stop what it started if we die untidily.
	export SWCLUSTER_OWNER=$$
	# Other users (permission tests) must reach the mount points.
	chmod 755 "$SW_TMP"
	trap _cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap '_on_err "$LINENO" "$BASH_COMMAND"' ERR
	log "temporary directory $SW_TMP"
}

# sw_prog NAME: path of a helper program from tests/integration/progs/,
# built by meson; compiled here when the build dir has no tests.
sw_prog() {
	local exe=$SWEEPFS_BUILD/tests/integration/progs/$1
	if [[ -x "$exe" ]]; then
		echo "$exe"
		return
	fi
	exe=$SW_TMP/$1
	if [[ ! -x "$exe" ]]; then
		${CC:-cc} -std=c11 -O2 -Wall -Wextra -D_GNU_SOURCE -o "$exe" \
			"$SW_SRC/progs/$1.c" >&2 || fail "cannot compile $1.c"
	fi
	echo "$exe"
}

sw_pass() {
	log "PASS"
}

# ---- group scenarios --------------------------------------------------------

SW_DRIVER_PID=
# sw_group_driver SCRIPT.py WHAT: run a group scenario's Python driver
# (scripts/swgroup.py's scenario(): it starts the group on loopback and
# takes it down itself), show its log and result, and pass, skip (77) or
# fail ("the WHAT scenario failed"). Stopped half-way, the driver goes
# first, then whatever mount it left.
sw_group_driver() {
	local script=$1 what=$2 rc=0
	command -v etcd >/dev/null || skip "etcd is not installed (etcd-server)"
	# And the scenario's own, if it has them: sw_group_unblock before the
	# driver's (which may wait on what it undoes), sw_group_cleanup
	# after.
	sw_scenario_cleanup() {
		! declare -F sw_group_unblock >/dev/null || sw_group_unblock
		_sw_driver_cleanup
		! declare -F sw_group_cleanup >/dev/null || sw_group_cleanup
	}
	"$PYTHON" "$SW_HERE/$script" --build "$SWEEPFS_BUILD" --tmp "$SW_TMP" \
		>"$SW_TMP/driver.json" 2>"$SW_TMP/driver.log" &
	SW_DRIVER_PID=$!
	wait "$SW_DRIVER_PID" || rc=$?
	cat "$SW_TMP/driver.log" >&2
	cat "$SW_TMP/driver.json"
	((rc != 77)) || skip "$(tail -n 1 "$SW_TMP/driver.log")"
	((rc == 0)) || fail "the $what scenario failed (status $rc)"
	sw_pass
}

_sw_driver_cleanup() {
	local m
	if [[ -n "$SW_DRIVER_PID" ]] && kill -0 "$SW_DRIVER_PID" 2>/dev/null; then
		kill -TERM "$SW_DRIVER_PID" 2>/dev/null || true
		wait_dead "$SW_DRIVER_PID" 30 ||
			kill -KILL "$SW_DRIVER_PID" 2>/dev/null || true
	fi
	for m in "$SW_TMP"/mnt "$SW_TMP"/mnt-*; do
		[[ -d "$m" ]] && umount -l "$m" 2>/dev/null || true
	done
}
