#!/usr/bin/env bash
# sweepfs in one command: install what is missing, build, start a master,
# a chunkserver and a FUSE mount on temporary directories, create, list,
# snapshot and remove a small tree through the mount with ordinary
# programs, remove a bigger one instantly, kill -9 the master under the
# mount, and tear everything down (also on Ctrl-C or failure).
#
#   sudo ./demo.sh
set -euo pipefail

top=$(cd "$(dirname "$0")" && pwd)
"$top/scripts/setup.sh" "$top/build"
bin=$top/build

work=$(mktemp -d /tmp/sweepfs-demo.XXXXXX)
meta=$work/meta mnt=$work/mnt chunks=$work/chunks
mkdir -p "$meta" "$mnt" "$chunks"
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
port=$(free_port) cs_port=$(free_port)
master_pid= cs_pid=

cleanup() {
	set +e
	mountpoint -q "$mnt" && fusermount3 -u -z "$mnt"
	[[ -n $cs_pid ]] && kill "$cs_pid" 2>/dev/null && wait "$cs_pid"
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
echo "== starting a chunkserver on 127.0.0.1:$cs_port (chunks in $chunks)"
"$bin/chunkserver/sweepfs-chunkserver" -f -d "$chunks" \
	-l "127.0.0.1:$cs_port" -m "127.0.0.1:$port" >"$work/cs.log" 2>&1 &
cs_pid=$!
for _ in $(seq 100); do
	"$bin/tools/sweepfs" -m "127.0.0.1:$port" status --json 2>/dev/null |
		grep -q '"connected":true' && break
	sleep 0.1
done
echo "== mounting it on $mnt"
"$bin/mount/sweepfs-mount" "127.0.0.1:$port" "$mnt"
sweepfs() { "$bin/tools/sweepfs" "$@"; }

cd "$mnt"
step "mkdir -p src/lib/util docs && seq 1 200000 > src/main.c && touch src/lib/a.c src/lib/util/b.c docs/README"
step "ln -s ../src/main.c docs/main-link && ln src/main.c src/main-hardlink.c"
step "truncate -s 1M docs/README && mv docs/README docs/GUIDE"
step "ls -lR && sha256sum src/main.c"
step "sweepfs snapshot src src-snap && echo 'one more line' >> src/main.c"
step "sha256sum src/main.c src-snap/main.c   # the snapshot kept the old data"
step "find . | sort"
step "rm -rf src docs && ls -la"
echo
echo "== a tree of 100,000 files (snapshots of a 1,000-file directory), removed in one request"
step "mkdir one && (cd one && seq -f 'f%g' 1000 | xargs touch) && mkdir big && for i in \$(seq 100); do sweepfs snapshot one big/s\$i; done"
step "find big | wc -l && sweepfs rmr -v --wait big"
step "sweepfs status && sweepfs fsck"
cd /
echo
echo "== kill -9 the master, restart it: the mount reconnects by itself"
kill -9 "$master_pid"; wait "$master_pid" 2>/dev/null || true
mkdir -p "$meta"
"$bin/master/sweepfs-master" -f -d "$meta" -l "127.0.0.1:$port" \
	>>"$work/master.log" 2>&1 &
master_pid=$!
step "mkdir $mnt/after-restart && ls -la $mnt"
# The chunkserver reconnects within a second or two; until it has, the
# master holds requests for chunks nobody has reported yet, so this read
# waits for it instead of failing.
step "sha256sum $mnt/src-snap/main.c"
echo
echo "demo done; tearing down"
