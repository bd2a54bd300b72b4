#!/usr/bin/env bash
# Every test in one command: install what is missing, build twice (a
# normal build, and one with AddressSanitizer and UndefinedBehaviorSanitizer),
# run the unit and integration suites in both.
#
#   sudo ./test.sh            # integration tests need root and /dev/fuse
set -euo pipefail

top=$(cd "$(dirname "$0")" && pwd)
"$top/scripts/setup.sh" "$top/build" -Dtests=enabled
"$top/scripts/setup.sh" "$top/build-asan" -Dtests=enabled \
	-Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug

status=0
for b in build build-asan; do
	echo "== meson test ($b)"
	meson test -C "$top/$b" --print-errorlogs --num-processes 2 ||
		status=1
done
exit $status
