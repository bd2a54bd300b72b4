#!/usr/bin/env bash
# Every test in one command: install what is missing, build twice (a
# normal build, and one with AddressSanitizer and UndefinedBehaviorSanitizer),
# run the unit and integration suites in both; then build the libFuzzer
# targets with clang and run the fuzz suite (tests/fuzz: each target's
# corpus, then SWEEPFS_FUZZ_TIME seconds of fuzzing, default 60;
# SWEEPFS_FUZZ_TIME=0 runs the corpora only, SWEEPFS_FUZZ=0 skips it).
#
#   sudo ./test.sh            # integration tests need root and /dev/fuse
set -euo pipefail

top=$(cd "$(dirname "$0")" && pwd)
"$top/scripts/setup.sh" "$top/build" -Dtests=enabled
"$top/scripts/setup.sh" "$top/build-asan" -Dtests=enabled \
	-Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug
fuzz=${SWEEPFS_FUZZ:-1}
if [[ $fuzz != 0 ]]; then
	CC=clang "$top/scripts/setup.sh" "$top/build-fuzz" -Dfuzz=enabled \
		-Dtests=disabled
fi

status=0
for b in build build-asan; do
	echo "== meson test ($b)"
	meson test -C "$top/$b" --print-errorlogs --num-processes 2 ||
		status=1
done
if [[ $fuzz != 0 ]]; then
	echo "== meson test --suite fuzz (build-fuzz)"
	meson test -C "$top/build-fuzz" --suite fuzz --print-errorlogs ||
		status=1
fi
exit $status
