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
mnt=$work/mnt
# The cluster launcher the tests and benchmarks use too: it picks free
# ports, waits until each daemon is ready, and stops everything in order;
# should this script die without its trap, its watchers clean up.
cluster() {
	python3 "$top/scripts/swcluster.py" -w "$work" --build "$bin" \
		--log-level default "$@"
}
export SWCLUSTER_OWNER=$$

cleanup() {
	set +e
	cd /
	cluster down
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; eval "$@"; }

out=$(cluster master start)
read -r _ port <<<"$out"
echo "== a master on 127.0.0.1:$port (metadata in $work/meta)"
out=$(cluster chunkserver start)
read -r _ _ cs_port <<<"$out"
echo "== a chunkserver on 127.0.0.1:$cs_port (chunks in $work/cs1)"
cluster wait-registered
echo "== mounting it on $mnt"
cluster mount "$mnt" >/dev/null
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
cluster master kill >/dev/null
cluster master start >/dev/null
step "mkdir $mnt/after-restart && ls -la $mnt"
# The chunkserver reconnects within a second or two; until it has, the
# master holds requests for chunks nobody has reported yet, so this read
# waits for it instead of failing.
step "sha256sum $mnt/src-snap/main.c"
echo
echo "demo done; tearing down"
