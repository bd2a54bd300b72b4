#!/bin/bash
# units: the systemd side of the daemons.
#
#  1. Readiness and watchdog, from the real daemons: a master and a
#     chunkserver started as their units start them (-f, $NOTIFY_SOCKET,
#     $WATCHDOG_USEC) send READY=1 once they listen, WATCHDOG=1 while their
#     loop turns, STOPPING=1 on SIGTERM, and exit 0. A socket stands in for
#     systemd; no systemd is needed.
#  2. `systemd-analyze verify` accepts the installed units (the master, a
#     chunkserver instance, the mount unit example) with their programs
#     and man pages where `meson install` put them; their exposure
#     (`systemd-analyze security`) is logged. Skipped (77) without
#     systemd-analyze.
#
# Environment: SWEEPFS_BUILD.
set -eu -o pipefail
export LC_ALL=C

B=${SWEEPFS_BUILD:?SWEEPFS_BUILD is not set (meson sets it)}
T=$(mktemp -d "${TMPDIR:-/tmp}/sweepfs-it.units.XXXXXX")
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
	done
	rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL [units]: $*" >&2; exit 1; }
log() { echo "[units] $*" >&2; }
port() { python3 "$(dirname "$0")/../../../scripts/swcluster.py" port; }

# ---- 1. sd_notify from the daemons -----------------------------------------

# listen NAME: a datagram socket $T/NAME.sock; what arrives goes to
# $T/NAME.msgs, one message per line (newlines inside shown as '|').
listen() {
	python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
open(sys.argv[1] + ".ready", "w").close()
with open(sys.argv[2], "a", buffering=1) as f:
    while True:
        f.write(s.recv(4096).decode().replace("\n", "|") + "\n")' \
		"$T/$1.sock" "$T/$1.msgs" &
	PIDS+=($!)
	for _ in $(seq 100); do
		[[ -e "$T/$1.sock.ready" ]] && return 0
		sleep 0.05
	done
	fail "no socket for $1"
}

# wait_msg NAME PATTERN SECONDS: until a message matching PATTERN came.
wait_msg() {
	local i
	for ((i = 0; i < $3 * 20; i++)); do
		grep -qE "$2" "$T/$1.msgs" 2>/dev/null && return 0
		sleep 0.05
	done
	fail "$1: no '$2' within $3 s; got: $(cat "$T/$1.msgs" 2>/dev/null)"
}

# notify_run NAME ARGS...: run daemon ARGS in the foreground as its unit
# would, check its messages, stop it with SIGTERM.
notify_run() {
	local name=$1 pid st=0 n
	shift
	listen "$name"
	NOTIFY_SOCKET=$T/$name.sock WATCHDOG_USEC=200000 "$@" \
		>"$T/$name.log" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	wait_msg "$name" '^READY=1\|STATUS=listening$' 20
	grep -q 'listening on' "$T/$name.log" ||
		fail "$name said READY before it listened"
	sleep 1
	n=$(grep -c '^WATCHDOG=1$' "$T/$name.msgs" || true)
	# Every 100 ms: about 10 in the second; a busy machine may lose some.
	((n >= 4)) || fail "$name: $n watchdog pings in 1 s (WatchdogSec=200ms)"
	kill -TERM "$pid"
	wait "$pid" || st=$?
	((st == 0)) || fail "$name exited with $st after SIGTERM: $(tail -n 5 "$T/$name.log")"
	wait_msg "$name" '^STOPPING=1$' 5
	log "$name: READY=1, $n watchdog pings in a second, STOPPING=1, exit 0"
}

mport=$(port)
notify_run master "$B/master/sweepfs-master" -f -c /dev/null -d "$T/meta" \
	-l "127.0.0.1:$mport"
notify_run chunkserver "$B/chunkserver/sweepfs-chunkserver" -f -c /dev/null \
	-d "$T/chunks" -l "127.0.0.1:$(port)" -m "127.0.0.1:$mport" \
	--set "master_key_file=$T/meta/chunkserver.key"

# ---- 2. systemd-analyze verify ---------------------------------------------

command -v systemd-analyze >/dev/null || {
	echo "SKIP [units]: systemd-analyze is not installed (part 1 passed)" >&2
	exit 77
}
DEST=$T/dest
meson install -C "$B" --destdir "$DEST" --no-rebuild >"$T/install.log" 2>&1 ||
	fail "meson install: $(tail -n 5 "$T/install.log")"
opt() {
	meson introspect --buildoptions "$B" | python3 -c 'import json, sys
print({o["name"]: o["value"] for o in json.load(sys.stdin)}[sys.argv[1]])' "$1"
}
prefix=$(opt prefix)
units=$(opt systemdsystemunitdir)
case ${units:=lib/systemd/system} in /*) ;; *) units=$prefix/$units ;; esac
case $(opt mandir) in /*) man=$DEST$(opt mandir) ;; *) man=$DEST$prefix/$(opt mandir) ;; esac
case $(opt datadir) in /*) data=$DEST$(opt datadir) ;; *) data=$DEST$prefix/$(opt datadir) ;; esac
# The units name the installed paths; point them into DESTDIR, where the
# programs are, so that verify checks that they exist.
mkdir "$T/units"
for u in sweepfs-master.service sweepfs-chunkserver@.service; do
	sed "s|$prefix/|$DEST$prefix/|g" "$DEST$units/$u" >"$T/units/$u"
done
mv "$T/units/sweepfs-chunkserver@.service" "$T/units/sweepfs-chunkserver@disk1.service"
cp "$data/doc/sweepfs/examples/mnt-sweepfs.mount" "$T/units/"
(cd "$T/units" && MANPATH=$man: systemd-analyze verify \
	sweepfs-master.service sweepfs-chunkserver@disk1.service \
	mnt-sweepfs.mount) >"$T/verify.out" 2>&1 ||
	fail "systemd-analyze verify: $(cat "$T/verify.out")"
[[ ! -s "$T/verify.out" ]] || fail "systemd-analyze verify warns: $(cat "$T/verify.out")"
for u in sweepfs-master.service sweepfs-chunkserver@disk1.service; do
	grep -q '^Type=notify$' "$T/units/$u" || fail "$u is not Type=notify"
done
# The master's memory is the metadata: the OOM killer picks others first.
grep -q '^OOMScoreAdjust=-[1-9]' "$T/units/sweepfs-master.service" ||
	fail "sweepfs-master.service does not protect the master from the OOM killer"
for u in sweepfs-master.service sweepfs-chunkserver@disk1.service; do
	score=$(cd "$T/units" && systemd-analyze security --offline=true "./$u" 2>/dev/null |
		sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p') || true
	log "$u: verified; exposure ${score:-?} (systemd-analyze security)"
	if [[ -n "$score" ]] && python3 -c 'import sys; sys.exit(float(sys.argv[1]) > 3)' "$score"; then
		:
	elif [[ -n "$score" ]]; then
		fail "$u: exposure $score, more than 3 (hardening directives lost?)"
	fi
done
log "PASS"
