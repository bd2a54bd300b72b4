#!/usr/bin/env bash
# sweepfs in one command: install what is missing, build, start a master
# and a FUSE mount on temporary directories, create, list and remove a
# small tree through the mount with ordinary programs, show the master's
# status, and tear everything down (also on Ctrl-C or failure).
#
#   sudo ./demo.sh
set -euo pipefail

top=$(cd "$(dirname "$0")" && pwd)
"$top/scripts/setup.sh" "$top/build"
bin=$top/build

work=$(mktemp -d /tmp/sweepfs-demo.XXXXXX)
meta=$work/meta mnt=$work/mnt
mkdir -p "$meta" "$mnt"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
master_pid=

cleanup() {
	set +e
	mountpoint -q "$mnt" && fusermount3 -u -z "$mnt"
	[[ -n $master_pid ]] && kill "$master_pid" 2>/dev/null && wait "$master_pid"
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; eval "$@"; }

echo "== starting a master on 127.0.0.1:$port (metadata in $meta)"
"$bin/master/sweepfs-master" -f -d "$meta" -l "127.0.0.1:$port" \
	>"$work/master.log" 2>&1 &
master_pid=$!
for _ in $(seq 50); do
	"$bin/tools/sweepfs" -m "127.0.0.1:$port" status >/dev/null 2>&1 && break
	sleep 0.1
done
echo "== mounting it on $mnt"
"$bin/mount/sweepfs-mount" "127.0.0.1:$port" "$mnt"

cd "$mnt"
step "mkdir -p src/lib/util docs && touch src/main.c src/lib/a.c src/lib/util/b.c docs/README"
step "ln -s ../src/main.c docs/main-link && ln src/main.c src/main-hardlink.c"
step "truncate -s 1M docs/README && mv docs/README docs/GUIDE"
step "ls -lR"
step "find . | sort"
step "$bin/tools/sweepfs -m 127.0.0.1:$port status"
step "rm -rf src docs && ls -la"
cd /
echo
echo "== kill -9 the master, restart it: the mount reconnects by itself"
kill -9 "$master_pid"; wait "$master_pid" 2>/dev/null || true
mkdir -p "$meta"
"$bin/master/sweepfs-master" -f -d "$meta" -l "127.0.0.1:$port" \
	>>"$work/master.log" 2>&1 &
master_pid=$!
step "mkdir $mnt/after-restart && ls -la $mnt"
echo
echo "demo done; tearing down"
