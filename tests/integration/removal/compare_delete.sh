#!/bin/bash
# compare_delete: `sweepfs compare-delete` end to end, on a real master and
# mount and on a local directory (--also), with a small flat tree.
#
#  1. A full run: every method is in the JSON for both filesystems (rmr and
#     snapshot "n/a" on the local one, go-removeall "n/a" without Go), each
#     applicable one succeeded, so its copy is gone, and the work
#     directories, the probe's mount and the temporary directory are gone
#     afterwards. The numbers are sane: on sweepfs each method's session
#     sent the master one unlink per file (one rmr; one eattr and one
#     rmsnapshot) and wire bytes > 0; the in-process methods counted their
#     system calls (removeall: os.Remove's two, one failed unlinkat per
#     directory, one per file, one rmdir per directory); strace counted
#     rm's when strace is there; the stat probe took samples on both; the
#     removeall/rm-rf ratios (wall on both, wire bytes on sweepfs) are
#     computed.
#  2. With Go: the C removeall and Go's os.RemoveAll (go-removeall/,
#     under strace) issue the same system calls per entry on the same
#     trees: the same unlinkat counts, getdents64 counts within one per
#     directory on the local disk (a hashed directory may end a listing
#     call short), and openat, close and fcntl within what Go's runtime
#     adds at start-up (runtime-only calls, futex, mmap, rt_sigaction,
#     ..., are not compared).
#  3. Robustness: a method that fails (an `rm` that exits 1 first on
#     $PATH) is reported in the table and the JSON, the others still run,
#     and the exit status is 1; a PATH that is not on sweepfs is refused
#     with a clear message; SIGINT during a run stops it with status 130
#     and everything is cleaned up.
#  4. No source path in the binary: a copy of `sweepfs` laid out as an
#     installed tree (PREFIX/bin, PREFIX/share/sweepfs/go-removeall) finds
#     its own Go program there (with Go), $SWEEPFS_GO_REMOVEALL overrides
#     it, and a wrong one gives go-removeall "n/a" with the reason.
#
# Environment: SWEEPFS_BUILD, the meson build root (meson passes it).

. "$(dirname "$0")/../lib.sh"
sw_init compare_delete --root

SWEEPFS=$SWEEPFS_BUILD/tools/sweepfs
[[ -x "$SWEEPFS" ]] || fail "no $SWEEPFS"
N=3000

start_master --set changelog_sync=interval
start_mount
mkdir "$SW_MNT/bench" "$SW_TMP/local" "$SW_TMP/tool-tmp"
# The tool's own temporary directory (probe mount, strace output): here,
# so that we can check that it is gone.
export TMPDIR=$SW_TMP/tool-tmp

# no_leftovers: the tool removed what it made.
no_leftovers() {
	local left
	left=$(ls -A "$SW_MNT/bench" "$SW_TMP/local" "$TMPDIR" | grep -v ':$' |
		grep -v '^$' || true)
	[[ -z "$left" ]] || fail "left behind: $left"
	if grep -q " $TMPDIR" /proc/self/mountinfo; then
		fail "a probe mount is left under $TMPDIR"
	fi
}

# ---- 1. a full run --------------------------------------------------------

log "compare-delete -n $N on sweepfs and on a local directory"
rc=0
"$SWEEPFS" compare-delete -n $N --timeout 300 --json "$SW_TMP/run.json" \
	"$SW_MNT/bench" --also "$SW_TMP/local" \
	>"$SW_TMP/run.out" 2>"$SW_TMP/run.err" || rc=$?
cat "$SW_TMP/run.out" >&2
((rc == 0)) || { tail -n 20 "$SW_TMP/run.err" >&2; fail "exit status $rc"; }
no_leftovers
grep -q '^rm-rf  *sweepfs' "$SW_TMP/run.out" || fail "no table"
grep -q '(removeall / rm-rf)' "$SW_TMP/run.out" || fail "no ratio line"

HAVE_GO=0
command -v go >/dev/null || [[ -x /usr/local/go/bin/go ]] && HAVE_GO=1
HAVE_STRACE=0
command -v strace >/dev/null && HAVE_STRACE=1

"$PYTHON" - "$SW_TMP/run.json" "$N" "$HAVE_GO" "$HAVE_STRACE" <<'EOF' ||
import json, sys

doc = json.load(open(sys.argv[1]))
n, have_go, have_strace = int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1"
errors = []

def check(cond, what):
    if not cond:
        errors.append(what)

fss = [f["label"] for f in doc["filesystems"]]
check(len(fss) == 2 and fss[0] == "sweepfs", "filesystems %r" % fss)
check(doc["filesystems"][0]["session_found"], "the mount's session not found")
for key in ("commit", "version", "buildtype"):
    check(doc["tool"].get(key), "tool." + key)
for key in ("kernel", "cpu_model", "cpus", "mem_bytes"):
    check(doc["machine"].get(key), "machine." + key)
check(doc["run"]["shape"] == "flat" and doc["run"]["sizes"] == [n], "run")

methods = ["rm-rf", "removeall", "go-removeall", "sweepfs-rm", "rmr",
           "snapshot"]
res = {(r["fs"], r["method"]): r for r in doc["results"]}
for fs in fss:
    for m in methods:
        r = res.get((fs, m))
        check(r is not None, "no result for %s on %s" % (m, fs))
        if r is None:
            continue
        if m in ("rmr", "snapshot") and fs != "sweepfs":
            want = "n/a"
        elif m == "go-removeall" and not have_go:
            want = "n/a"
        else:
            want = "ok"
        check(r["status"] == want, "%s on %s: %s (%s), not %s" % (
            m, fs, r["status"], r["note"], want))
        if r["status"] != "ok":
            continue
        check(r["files"] == n and r["dirs"] == 2, "%s on %s: tree" % (m, fs))
        check(r["wall_s"] > 0 and r["files_per_s"] > 0,
              "%s on %s: times" % (m, fs))
        probe = r.get("stat_probe", {})
        check(probe.get("samples", 0) > 0 and probe["p50_ms"] > 0 and
              probe["max_ms"] >= probe["p99_ms"] >= probe["p50_ms"],
              "%s on %s: stat probe %r" % (m, fs, probe))
        if fs == "sweepfs":
            wire = r.get("wire", {})
            check(r.get("wire_source") == "session",
                  "%s: wire from %s" % (m, r.get("wire_source")))
            check(wire.get("bytes_in", 0) > 0 and wire.get("bytes_out", 0) > 0,
                  "%s: wire bytes %r" % (m, wire))
            check(r.get("master_cpu_s", -1) >= 0, "%s: master cpu" % m)
            reqs = wire.get("requests", {})
            if m == "rmr":
                check(reqs.get("rmr") == 1, "rmr: requests %r" % reqs)
                check(r.get("purged_s", 0) >= r["wall_s"], "rmr: purged_s")
            elif m == "snapshot":
                check(reqs.get("eattr") == 1 and reqs.get("rmsnapshot") == 1,
                      "snapshot: requests %r" % reqs)
            else:
                # One unlink per file and an rmdir per directory: as
                # requests, or as operations in batches (deleg.h).
                ops = wire.get("batch_ops", 0)
                unl, rmd = reqs.get("unlink", 0), reqs.get("rmdir", 0)
                check(unl <= n and unl + ops >= n and
                      unl + rmd + ops >= n + 3,
                      "%s: requests %r, batched %d" % (m, reqs, ops))
        else:
            check("wire" not in r, "%s on %s: wire on a local fs" % (m, fs))
        sc = r.get("syscalls")
        if m in ("removeall", "sweepfs-rm"):
            check(sc and sc["source"] == "counted", "%s: syscalls" % m)
        if m == "removeall" and sc:
            by = sc["by_type"]
            # os.Remove: 2; the EISDIR probes of the root and d0, d1: 3;
            # one per file; the rmdirs of d0, d1 and the root: 3.
            check(by.get("unlinkat") == n + 8, "removeall unlinkat %r" % by)
            check(by.get("fcntl") == 4, "removeall fcntl %r" % by)
            check(r["directory_passes"] == 3 + 2 * (n // 2 // 1024),
                  "removeall passes %r" % r["directory_passes"])
        if m == "sweepfs-rm" and sc:
            check(sc["by_type"].get("unlinkat") == n + 3,
                  "sweepfs-rm unlinkat %r" % sc["by_type"])
        if m in ("rm-rf", "go-removeall") and have_strace:
            check(sc and sc["source"] == "strace" and
                  sc["by_type"].get("unlinkat", 0) >= n + 3,
                  "%s on %s: strace counts %r" % (m, fs, sc))

ratios = {(x["fs"], x["ratio"]): x for x in doc["ratios"]}
for fs in fss:
    x = ratios.get((fs, "removeall/rm-rf"))
    check(x and x["wall"] > 0, "removeall/rm-rf wall ratio on %s" % fs)
check(ratios.get(("sweepfs", "removeall/rm-rf"), {}).get("wire_bytes", 0) > 0,
      "removeall/rm-rf wire ratio on sweepfs")

# 2. The C removeall against Go's, system call by system call.
RUNTIME = {"futex", "nanosleep", "sched_yield", "mmap", "munmap", "madvise",
           "mprotect", "brk", "rt_sigaction", "rt_sigprocmask",
           "rt_sigreturn", "sigaltstack", "clone", "clone3", "gettid",
           "getpid", "tgkill", "sched_getaffinity", "arch_prctl",
           "set_tid_address", "set_robust_list", "rseq", "prlimit64",
           "getrandom", "execve", "epoll_create1", "epoll_ctl",
           "epoll_pwait", "epoll_pwait2", "eventfd2", "pipe2", "read",
           "pread64", "write", "uname"}
# What Go's runtime opens and closes, and the fcntl calls on stdin,
# stdout and stderr, before main() runs.
STARTUP = {"openat": 8, "close": 8, "fcntl": 8}
if have_go and have_strace:
    for fs in fss:
        c, g = res[(fs, "removeall")], res[(fs, "go-removeall")]
        if c["status"] != "ok" or g["status"] != "ok":
            continue
        cs, gs = c["syscalls"]["by_type"], g["syscalls"]["by_type"]
        # On the FUSE mount, how many names one getdents64 returns may
        # vary with the client's caches: compare the unlinks there.
        check(cs.get("unlinkat") == gs.get("unlinkat"),
              "%s: unlinkat: C removeall %r, Go %r" % (
                  fs, cs.get("unlinkat"), gs.get("unlinkat")))
        if fs == "sweepfs":
            continue
        for name in sorted((set(cs) | set(gs)) - RUNTIME):
            a, b = cs.get(name, 0), gs.get(name, 0)
            slack = STARTUP.get(name, 0)
            if name == "getdents64":
                # Each method deletes its own copy of the tree, and a
                # hashed (ext4 htree) directory may end a getdents64
                # short at a hash boundary: the same names can take one
                # call more or less per directory (the flat tree has 3).
                check(abs(a - b) <= 3,
                      "%s: getdents64: C removeall %d, Go %d" % (fs, a, b))
                continue
            check(a <= b <= a + slack,
                  "%s: %s: C removeall %d, Go %d" % (fs, name, a, b))
        per_c = sum(v for k, v in cs.items() if k not in RUNTIME) / n
        per_g = sum(v for k, v in gs.items() if k not in RUNTIME) / n
        check(abs(per_c - per_g) < 0.01,
              "%s: per file: C %.4f, Go %.4f" % (fs, per_c, per_g))

for e in errors:
    print("FAIL:", e)
sys.exit(1 if errors else 0)
EOF
	fail "the JSON of the full run"

# ---- 3. robustness ----------------------------------------------------------

log "a failing method is reported and the run goes on"
mkdir "$SW_TMP/fakebin"
printf '#!/bin/sh\necho "rm: refusing, for the test" >&2\nexit 1\n' \
	>"$SW_TMP/fakebin/rm"
chmod 755 "$SW_TMP/fakebin/rm"
rc=0
PATH="$SW_TMP/fakebin:$PATH" "$SWEEPFS" compare-delete -n 500 \
	--methods rm-rf,removeall --json "$SW_TMP/fail.json" "$SW_MNT/bench" \
	>"$SW_TMP/fail.out" 2>"$SW_TMP/fail.err" || rc=$?
assert_eq 1 "$rc" "exit status with a failing method"
grep -q 'FAILED: rm-rf exited with status 1: rm: refusing' \
	"$SW_TMP/fail.out" || fail "the failure is not in the table"
"$PYTHON" - "$SW_TMP/fail.json" <<'EOF' || fail "the JSON of the failing run"
import json, sys
res = {r["method"]: r for r in json.load(open(sys.argv[1]))["results"]}
assert res["rm-rf"]["status"] == "failed", res["rm-rf"]
assert res["rm-rf"]["exit_status"] == 1, res["rm-rf"]
assert res["removeall"]["status"] == "ok", res["removeall"]
EOF
no_leftovers

log "a path that is not on sweepfs is refused"
rc=0
"$SWEEPFS" compare-delete -n 10 --json "$SW_TMP/no.json" "$SW_TMP/local" \
	>/dev/null 2>"$SW_TMP/no.err" || rc=$?
assert_eq 5 "$rc" "exit status for a local PATH (not on sweepfs)"
grep -q 'is not on a sweepfs mount' "$SW_TMP/no.err" ||
	fail "unclear error: $(cat "$SW_TMP/no.err")"
assert_missing "$SW_TMP/no.json"
no_leftovers

log "SIGINT stops the run and cleans up"
# A background job of a script starts with SIGINT ignored: give it back.
"$PYTHON" -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$SWEEPFS" compare-delete -n 20000 --methods rm-rf,removeall,sweepfs-rm \
	--json "$SW_TMP/int.json" "$SW_MNT/bench" --also "$SW_TMP/local" \
	>"$SW_TMP/int.out" 2>"$SW_TMP/int.err" &
pid=$!
# Once the probe's mount is up, the set-up is done and trees are built.
wait_until 60 "the probe's mount" grep -q " $TMPDIR/" /proc/self/mountinfo
sleep 1
kill -INT "$pid"
wait_dead "$pid" 120 || fail "compare-delete did not stop within 120 s"
assert_eq 130 "$SW_EXIT_STATUS" "exit status after SIGINT"
grep -q 'stopping; cleaning up' "$SW_TMP/int.err" || fail "no stop message"
no_leftovers

# ---- 4. the Go program, found without the source tree -----------------------

log "an installed layout finds its own go-removeall"
INST=$SW_TMP/inst
mkdir -p "$INST/bin" "$INST/share/sweepfs"
cp "$SWEEPFS" "$INST/bin/sweepfs"
cp -r "$SWEEPFS_BUILD/tools/compare_delete/go-removeall" "$INST/share/sweepfs/"
# go_field JSON KEY: KEY of the run's "programs" ("" when not set).
go_field() {
	"$PYTHON" -c 'import json, sys
print(json.load(open(sys.argv[1]))["programs"].get(sys.argv[2]) or "")' "$1" "$2"
}
if ((HAVE_GO)); then
	rc=0
	"$INST/bin/sweepfs" compare-delete -n 50 --methods go-removeall \
		--strace off --json "$SW_TMP/inst.json" "$SW_MNT/bench" \
		>"$SW_TMP/inst.out" 2>"$SW_TMP/inst.err" || rc=$?
	((rc == 0)) || { cat "$SW_TMP/inst.err" >&2; fail "installed run: $rc"; }
	grep -q "building $INST/bin/../share/sweepfs/go-removeall (found in the installed tree)" \
		"$SW_TMP/inst.err" || fail "not the installed copy: $(cat "$SW_TMP/inst.err")"
	assert_ne "" "$(go_field "$SW_TMP/inst.json" go)" "Go version recorded"
	no_leftovers
fi
rc=0
SWEEPFS_GO_REMOVEALL=$SW_TMP/nowhere "$INST/bin/sweepfs" compare-delete -n 50 \
	--methods go-removeall --strace off --json "$SW_TMP/env.json" \
	"$SW_MNT/bench" >"$SW_TMP/env.out" 2>"$SW_TMP/env.err" || rc=$?
assert_eq 0 "$rc" "exit status when go-removeall does not apply"
case $(go_field "$SW_TMP/env.json" go_note) in
*SWEEPFS_GO_REMOVEALL=$SW_TMP/nowhere*) ;;
*) fail "no reason for the missing Go program: $(go_field "$SW_TMP/env.json" go_note)" ;;
esac
no_leftovers

sw_pass
