#!/bin/bash
# rm_compare: `sweepfs rm` next to GNU `rm -rf` on identical local trees.
#
# Each phase builds the same tree two or three times (python3, from a fixed
# recipe: a 1,200-deep chain, past PATH_MAX; a 5,000-entry directory; a
# forest for -j; symlinks to directories and files outside the tree, to
# directories inside it, dangling; fifos, sockets, hard links, odd names;
# read-only directories when root), removes one copy with `rm -rf`, the
# others with `sweepfs rm` and `sweepfs rm -j 4`, and checks that
#
#  1. clean trees: all exit 0, nothing remains, the outside targets are
#     intact (their listing and sizes are unchanged);
#  2. a tree with an immutable file (root, chattr): all exit 1, report the
#     same path with the same error, and leave exactly the same entries;
#  3. --one-file-system with a tmpfs inside (root): the same skip message,
#     exit status and leftovers;
#  4. an owner's read-only tree (0555, 0000), removed by its owner (an
#     unprivileged uid, via setpriv, when root): GNU rm fails and leaves the
#     protected directories, sweepfs rm removes everything; the one
#     intended difference (Bazel's deleteTree() behaviour).
#
# It needs no master and no mount: it runs on a local directory (under
# $TMPDIR or /tmp). Phases that need root or a tool that is missing are
# skipped with a message; exit 77 if nothing could run.
#
# Environment: SWEEPFS_BUILD, the meson build root (meson passes it).
set -eEu -o pipefail
export LC_ALL=C
umask 022

NAME=rm_compare
UID_USER=4001
[[ -n "${SWEEPFS_BUILD:-}" ]] ||
	{ echo "SWEEPFS_BUILD is not set (meson sets it)" >&2; exit 1; }
SWEEPFS=$SWEEPFS_BUILD/tools/sweepfs
[[ -x "$SWEEPFS" ]] || { echo "no $SWEEPFS" >&2; exit 1; }
command -v python3 >/dev/null ||
	{ echo "SKIP [$NAME]: python3 is not installed" >&2; exit 77; }

TMP=
MOUNTS=()
IMMUTABLE=()
PHASES=0

log() {
	printf '%s [%s] %s\n' "$(date +%H:%M:%S)" "$NAME" "$*" >&2
}

fail() {
	printf 'FAIL [%s]: %s\n' "$NAME" "$*" >&2
	exit 1
}

cleanup() {
	local rc=$? m f
	trap - EXIT
	set +eE
	cd /
	for m in "${MOUNTS[@]}"; do
		umount -l "$m" 2>/dev/null
	done
	for f in "${IMMUTABLE[@]}"; do
		chattr -i "$f" 2>/dev/null
	done
	if [[ -n "$TMP" && -d "$TMP" ]]; then
		if grep -q " $TMP" /proc/self/mountinfo; then
			echo "WARNING: mounts left under $TMP; not removing it" >&2
		else
			chmod -R u+rwx "$TMP" 2>/dev/null
			rm -rf --one-file-system "$TMP"
		fi
	fi
	exit "$rc"
}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/sweepfs-it.$NAME.XXXXXX")
chmod 755 "$TMP" # the unprivileged phase must get in
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'printf "FAIL [%s]: line %s: %s\n" "$NAME" "$LINENO" "$BASH_COMMAND" >&2' ERR
cd "$TMP"
log "working in $TMP"

# The recipe. mktree.py ROOT OUTSIDE [ro]: ROOT must not exist; OUTSIDE is
# a directory the symlinks point into. "ro" adds read-only directories.
cat >mktree.py <<'EOF'
import os, stat, sys

root, outside = sys.argv[1], os.path.abspath(sys.argv[2])
ro = "ro" in sys.argv[3:]
os.mkdir(root)
j = lambda *p: os.path.join(root, *p)

def touch(path):
    os.mknod(path, stat.S_IFREG | 0o644)

# deep: 1,200 levels of "level", a file in each (7,200 bytes of path)
fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
os.mkdir("deep", dir_fd=fd)
nfd = os.open("deep", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
os.close(fd)
fd = nfd
for i in range(1200):
    os.mknod("f", stat.S_IFREG | 0o644, dir_fd=fd)
    os.mkdir("level", dir_fd=fd)
    nfd = os.open("level", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = nfd
os.close(fd)

# wide: 5,000 entries in one directory
os.mkdir(j("wide"))
for i in range(5000):
    touch(j("wide", "f%05d" % i))

# forest: 8 subtrees of 3 levels, for the workers
for t in range(8):
    for a in range(4):
        for b in range(4):
            d = j("forest", "t%d" % t, "a%d" % a, "b%d" % b)
            os.makedirs(d)
            for f in range(10):
                touch(os.path.join(d, "f%d" % f))

# links: never followed
os.mkdir(j("links"))
os.mkdir(j("links", "inside"))
touch(j("links", "inside", "x"))
os.symlink(outside, j("links", "abs_dir"))
os.symlink(os.path.relpath(outside, j("links")), j("links", "rel_dir"))
os.symlink(os.path.join(outside, "precious"), j("links", "abs_file"))
os.symlink("inside", j("links", "in_dir"))
os.symlink("nowhere", j("links", "dangling"))
os.symlink(outside, j("deep", "level", "level", "out"))

# special files, odd names
os.mkdir(j("special"))
os.mkfifo(j("special", "fifo"))
os.mknod(j("special", "sock"), stat.S_IFSOCK | 0o644)
touch(j("special", "file"))
os.link(j("special", "file"), j("special", "hardlink"))
for n in ("-rf", "with space", "new\nline", "x" * 255):
    touch(j("special", n))

if ro:
    os.makedirs(j("ro", "sub"))
    os.mkdir(j("ro", "empty"))
    for i in range(5):
        touch(j("ro", "f%d" % i))
        touch(j("ro", "sub", "g%d" % i))
    os.chmod(j("ro", "sub"), 0)
    os.chmod(j("ro", "empty"), 0o555)
    os.chmod(j("ro"), 0o555)
EOF

mktree() {
	python3 mktree.py "$@" || fail "mktree.py $*"
}

# What exists below DIR (type and mode per relative path), or "missing".
listing() {
	if [[ -e "$1" || -L "$1" ]]; then
		(cd "$1" && find . -mindepth 1 -printf '%P %y %m\n' | sort)
	else
		echo missing
	fi
}

# The outside targets: names, types, sizes.
outside_sum() {
	(cd outside && find . -printf '%P %y %s\n' | sort | md5sum)
}

# run NAME CMD...: run CMD, its stderr into NAME.err, status into $RC.
run() {
	local name=$1 t0 t1
	shift
	t0=$(date +%s%N)
	RC=0
	"$@" 2>"$name.err" || RC=$?
	t1=$(date +%s%N)
	log "$(printf '%-4s exit %d in %4d ms: %s' "$name" "$RC" \
		$(((t1 - t0) / 1000000)) "$*")"
}

# The error messages of run NAME, with the program and root names made
# equal (t_rm, t_sw, t_j4 -> T), sorted (-j 4 reports in any order).
messages() {
	sed -e 's/^sweepfs rm: /rm: /' -e 's/t_\(rm\|sw\|j4\)/T/g' "$1.err" |
		sort
}

mkdir outside
mkdir outside/sub
echo "keep me" >outside/precious
echo "keep me too" >outside/sub/precious
OUTSIDE_SUM=$(outside_sum)

check_outside() {
	[[ "$(outside_sum)" == "$OUTSIDE_SUM" ]] ||
		fail "$1: the symlinks' targets outside the tree changed"
}

is_root() {
	((EUID == 0))
}

# ---- 1. clean trees ------------------------------------------------------

log "phase 1: clean trees"
ro=
is_root && ro=ro
for t in t_rm t_sw t_j4; do
	mktree "$t" outside $ro
done
[[ "$(listing t_rm)" == "$(listing t_sw)" ]] || fail "the copies differ"
run rm1 rm -rf t_rm
run sw1 "$SWEEPFS" rm t_sw
run j41 "$SWEEPFS" rm -j 4 t_j4
for n in rm1 sw1 j41; do
	[[ ! -s $n.err ]] || { cat "$n.err" >&2; fail "$n printed errors"; }
done
[[ "$RC" == 0 ]] || fail "sweepfs rm -j 4 exited $RC"
for t in t_rm t_sw t_j4; do
	[[ "$(listing $t)" == missing ]] || fail "$t was not removed"
done
check_outside "phase 1"
PHASES=$((PHASES + 1))

# ---- 2. an entry that cannot be removed ----------------------------------

imm_ok=false
if is_root && command -v chattr >/dev/null; then
	touch probe
	if chattr +i probe 2>/dev/null; then
		chattr -i probe
		imm_ok=true
	fi
	rm -f probe
fi
if $imm_ok; then
	log "phase 2: an immutable file"
	for t in t_rm t_sw t_j4; do
		mktree "$t" outside ro
		IMMUTABLE+=("$TMP/$t/forest/t3/a1/b2/f4")
		chattr +i "$t/forest/t3/a1/b2/f4"
	done
	run rm2 rm -rf t_rm
	rc_rm=$RC
	run sw2 "$SWEEPFS" rm t_sw
	rc_sw=$RC
	run j42 "$SWEEPFS" rm -j 4 t_j4
	[[ $rc_rm == 1 && $rc_sw == 1 && $RC == 1 ]] ||
		fail "exit status: rm $rc_rm, sweepfs rm $rc_sw, -j 4 $RC (want 1)"
	left=$(listing t_rm)
	[[ "$left" == "$(listing t_sw)" ]] ||
		fail "rm and sweepfs rm left different trees"
	[[ "$left" == "$(listing t_j4)" ]] ||
		fail "rm and sweepfs rm -j 4 left different trees"
	[[ "$left" == $'forest d 755\nforest/t3 d 755\nforest/t3/a1 d 755\nforest/t3/a1/b2 d 755\nforest/t3/a1/b2/f4 f 644' ]] ||
		fail "unexpected leftovers: $left"
	[[ "$(messages rm2)" == "$(messages sw2)" ]] ||
		{ diff <(messages rm2) <(messages sw2) >&2; fail "messages differ"; }
	[[ "$(messages rm2)" == "$(messages j42)" ]] ||
		{ diff <(messages rm2) <(messages j42) >&2; fail "messages differ (-j 4)"; }
	log "both say: $(messages sw2)"
	for t in t_rm t_sw t_j4; do
		chattr -i "$t/forest/t3/a1/b2/f4"
		rm -rf "$t"
	done
	IMMUTABLE=()
	check_outside "phase 2"
	PHASES=$((PHASES + 1))
else
	log "phase 2 skipped: needs root and chattr +i"
fi

# ---- 3. --one-file-system ------------------------------------------------

mounted=false
if is_root; then
	log "phase 3: --one-file-system and a tmpfs inside"
	mounted=true
	for t in t_rm t_sw; do
		mktree "$t" outside
		if ! mount -t tmpfs -o size=1m none "$t/wide" 2>/dev/null; then
			mounted=false
			break
		fi
		MOUNTS+=("$TMP/$t/wide")
		echo data >"$t/wide/on_tmpfs"
	done
fi
if $mounted; then
	run rm3 rm -rf --one-file-system t_rm
	rc_rm=$RC
	run sw3 "$SWEEPFS" rm --one-file-system t_sw
	[[ $rc_rm == 1 && $RC == 1 ]] ||
		fail "exit status: rm $rc_rm, sweepfs rm $RC (want 1)"
	left=$(listing t_rm)
	[[ "$left" == "$(listing t_sw)" ]] ||
		fail "rm and sweepfs rm left different trees"
	[[ "$left" == $'wide d 1777\nwide/on_tmpfs f 644' ]] ||
		fail "unexpected leftovers: $left"
	[[ "$(messages rm3)" == "$(messages sw3)" ]] ||
		{ diff <(messages rm3) <(messages sw3) >&2; fail "messages differ"; }
	log "both say: $(messages sw3)"
	for m in "${MOUNTS[@]}"; do
		umount "$m"
	done
	MOUNTS=()
	rm -rf t_rm t_sw
	check_outside "phase 3"
	PHASES=$((PHASES + 1))
else
	log "phase 3 skipped: needs root and mount -t tmpfs"
	for m in "${MOUNTS[@]}"; do
		umount "$m"
	done
	MOUNTS=()
	rm -rf t_rm t_sw
fi

# ---- 4. an owner's read-only tree ----------------------------------------

# as_owner CMD...: as UID_USER when root, else as ourselves.
as_owner() {
	if is_root; then
		setpriv --reuid=$UID_USER --regid=$UID_USER --clear-groups -- "$@"
	else
		"$@"
	fi
}

if ! is_root || command -v setpriv >/dev/null; then
	log "phase 4: a read-only tree, removed by its owner"
	mkdir home
	for t in t_rm t_sw; do
		mktree "home/$t" outside ro
	done
	if is_root; then
		chown -R $UID_USER:$UID_USER home
	fi
	run rm4 as_owner rm -rf home/t_rm
	rc_rm=$RC
	run sw4 as_owner "$SWEEPFS" rm home/t_sw
	[[ $rc_rm == 1 ]] || fail "GNU rm -rf exited $rc_rm (want 1)"
	grep -q "Permission denied" rm4.err || fail "GNU rm did not report EACCES"
	[[ $RC == 0 ]] || { cat sw4.err >&2; fail "sweepfs rm exited $RC"; }
	[[ "$(listing home/t_sw)" == missing ]] || fail "sweepfs rm left some"
	# GNU rm cannot unlink in ro (0555) nor read ro/sub (0000).
	left=$(listing home/t_rm | cut -d' ' -f1 | tr '\n' ' ')
	[[ "$left" == "ro ro/empty ro/f0 ro/f1 ro/f2 ro/f3 ro/f4 ro/sub ro/sub/g0 ro/sub/g1 ro/sub/g2 ro/sub/g3 ro/sub/g4 " ]] ||
		fail "GNU rm left something unexpected: $left"
	log "GNU rm left: $left; sweepfs rm removed everything"
	check_outside "phase 4"
	PHASES=$((PHASES + 1))
else
	log "phase 4 skipped: needs setpriv"
fi

if ((PHASES == 0)); then
	echo "SKIP [$NAME]: no phase could run" >&2
	exit 77
fi
log "PASS ($PHASES phases)"
