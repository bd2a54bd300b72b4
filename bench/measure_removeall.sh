#!/bin/bash
# Delete a flat directory of N empty files with `sweepfs rm`, GNU `rm -rf`
# and Go's os.RemoveAll (tools/compare_delete/go-removeall/main.go), on a
# local filesystem: wall time of each method (twice, interleaved; the
# machines are noisy), then system calls per file from one more run of
# each under `strace -c -f` (sweepfs rm's own counters as well, to
# cross-check).
#
#   bench/measure_removeall.sh SWEEPFS_BINARY DIR N...
#   e.g. bench/measure_removeall.sh build/tools/sweepfs /var/tmp 100000 1000000
#
# Builds main.go into a temporary directory (go build, no network: it has
# no dependencies). Prints one block per N; nothing is kept.
set -eu -o pipefail
export LC_ALL=C

[[ $# -ge 3 ]] || { echo "usage: $0 SWEEPFS DIR N..." >&2; exit 2; }
SWEEPFS=$(realpath "$1")
BASE=$2
shift 2
GO_SRC=$(cd "$(dirname "$0")/../tools/compare_delete/go-removeall" && pwd)
WORK=$(mktemp -d "$BASE/sweepfs-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
(cd "$GO_SRC" && go build -o "$WORK/removeall" .)

# mkflat DIR N: N empty files f0000000... in a new DIR, then sync.
mkflat() {
	python3 - "$1" "$2" <<'EOF'
import os, stat, sys
d, n = sys.argv[1], int(sys.argv[2])
os.mkdir(d)
fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
for i in range(n):
    os.mknod("f%07d" % i, stat.S_IFREG | 0o644, dir_fd=fd)
os.close(fd)
EOF
	sync
}

method_cmd() {
	case $1 in
	sweepfs) echo "$SWEEPFS rm" ;;
	rm) echo "rm -rf" ;;
	go) echo "$WORK/removeall" ;;
	esac
}

for n in "$@"; do
	echo "== $n empty files in one directory on $(df --output=fstype "$BASE" | tail -1) ($BASE), $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
	for rep in 1 2; do
		for m in rm sweepfs go; do
			mkflat "$WORK/d" "$n"
			t0=$(date +%s%N)
			$(method_cmd $m) "$WORK/d"
			t1=$(date +%s%N)
			[[ ! -e "$WORK/d" ]] || { echo "$m left $WORK/d" >&2; exit 1; }
			printf 'time   %-8s run %d: %8.3f s\n' "$m" "$rep" \
				"$(python3 -c "print(($t1 - $t0) / 1e9)")"
		done
	done
	for m in rm sweepfs go; do
		mkflat "$WORK/d" "$n"
		args=($(method_cmd $m) "$WORK/d")
		[[ $m != sweepfs ]] || args+=(--stats-json)
		: >"$WORK/out.$m"
		strace -c -f -o "$WORK/strace.$m" "${args[@]}" >"$WORK/out.$m"
		# strace -c: % time, seconds, usecs/call, calls, [errors], syscall
		total=$(awk '$NF == "total" { print $4 }' "$WORK/strace.$m")
		printf 'strace %-8s %9d syscalls, %.4f per file:' "$m" "$total" \
			"$(python3 -c "print($total / $n)")"
		awk 'NR > 2 && $0 !~ /^-/ && $NF != "total" {
			printf " %s %s", $NF, $4 }' "$WORK/strace.$m"
		echo
		if [[ $m == sweepfs ]]; then
			printf 'own    sweepfs  '
			cat "$WORK/out.$m"
		fi
	done
done
