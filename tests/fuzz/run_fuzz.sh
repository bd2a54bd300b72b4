#!/usr/bin/env bash
# run_fuzz.sh TARGET CORPUS DICT ARTIFACTS: one bounded libFuzzer run, as
# the 'fuzz' test suite runs it (tests/fuzz/meson.build).
#
# Every input in CORPUS (the committed seeds and regression inputs) runs
# first; then the fuzzer mutates for SWEEPFS_FUZZ_TIME seconds (default
# 60; 0 runs the corpus only). New inputs it finds go to a scratch
# directory that is removed afterwards (SWEEPFS_FUZZ_KEEP=DIR keeps them
# in DIR, for a merge into CORPUS); a crash, leak, hang or sanitizer report
# fails the test and leaves its input in ARTIFACTS. SWEEPFS_FUZZ_SEED
# repeats a run's random choices (the seed is printed either way);
# SWEEPFS_FUZZ_ARGS adds libFuzzer options.
set -euo pipefail

target=$1 corpus=$2 dict=$3 artifacts=$4
name=$(basename "$target")
time=${SWEEPFS_FUZZ_TIME:-60}
seed=${SWEEPFS_FUZZ_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}

mkdir -p "$artifacts"
if [[ -n "${SWEEPFS_FUZZ_KEEP:-}" ]]; then
	scratch=$SWEEPFS_FUZZ_KEEP
	mkdir -p "$scratch"
else
	scratch=$(mktemp -d "${TMPDIR:-/tmp}/sweepfs-$name.XXXXXX")
	trap 'rm -rf "$scratch"' EXIT
fi

if ((time == 0)); then
	limit=(-runs=0)
else
	limit=(-max_total_time="$time")
fi

echo "$name: ${time}s, seed $seed (SWEEPFS_FUZZ_SEED=$seed repeats it)"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:${UBSAN_OPTIONS:-}"
status=0
# The scratch directory comes first: libFuzzer writes new inputs to the
# first corpus directory only, and the committed one stays as it is.
# An input gets 30 s (-timeout) before it counts as a hang; 64 KiB
# inputs hold a few thousand frames.
timeout --kill-after=30 $((time + 600)) \
	"$target" "${limit[@]}" -seed="$seed" -timeout=30 -rss_limit_mb=2560 \
	-max_len=65536 -dict="$dict" -artifact_prefix="$artifacts/" \
	-print_final_stats=1 ${SWEEPFS_FUZZ_ARGS:-} \
	"$scratch" "$corpus" || status=$?
# libFuzzer exits 77 on a crash (its -error_exitcode), which meson takes
# for a skipped test: a finding must fail.
if ((status == 77)); then
	status=1
fi
if ((status != 0)); then
	echo "$name: FAILED (status $status); the input is in $artifacts/:" >&2
	ls -t "$artifacts" | head -n 5 >&2 || true
	echo "reproduce with: $target $artifacts/<file>" >&2
	echo "keep it as a regression input: cp $artifacts/<file> \\" >&2
	echo "    $corpus/regress-<what-it-was>" >&2
fi
exit $status
