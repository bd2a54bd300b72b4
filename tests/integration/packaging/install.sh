#!/bin/bash
# install: what `meson install` puts in place, from a DESTDIR.
#
#  1. The files: the programs (daemons and the mount helper in sbin), the
#     commented example configurations, the systemd units, the man pages,
#     the bash completion, compare-delete's Go program.
#  2. The example configurations are what the daemons' --dump-config says
#     (dist/gen_config.py --check, source and installed copies), and the
#     daemons load them.
#  3. Every subcommand of `sweepfs --help` has a man page, and every page
#     renders with man -l and groff without a warning.
#  4. The bash completion loads, completes subcommands, options and paths,
#     and knows every subcommand.
#
# Needs no FUSE and starts no daemon. Environment: SWEEPFS_BUILD.
set -eu -o pipefail
export LC_ALL=C

SRC=$(cd "$(dirname "$0")/../../.." && pwd)
B=${SWEEPFS_BUILD:?SWEEPFS_BUILD is not set (meson sets it)}
T=$(mktemp -d "${TMPDIR:-/tmp}/sweepfs-it.install.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL [install]: $*" >&2; exit 1; }
log() { echo "[install] $*" >&2; }

# ---- 1. the files ---------------------------------------------------------------

DEST=$T/dest
meson install -C "$B" --destdir "$DEST" --no-rebuild >"$T/install.log" 2>&1 ||
	{ tail -n 20 "$T/install.log" >&2; fail "meson install"; }
opt() {
	meson introspect --buildoptions "$B" | python3 -c 'import json, sys
print({o["name"]: o["value"] for o in json.load(sys.stdin)}[sys.argv[1]])' "$1"
}
prefix=$(opt prefix)
P=$DEST$prefix
abs() { case $1 in /*) echo "$DEST$1" ;; *) echo "$P/$1" ;; esac; }
SBIN=$(abs "$(opt sbindir)") BIN=$(abs "$(opt bindir)")
ETC=$(abs "$(opt sysconfdir)")/sweepfs
MAN=$(abs "$(opt mandir)") DATA=$(abs "$(opt datadir)")
UNITS=$(opt systemdsystemunitdir)
UNITS=$(abs "${UNITS:-lib/systemd/system}")
for f in "$SBIN/sweepfs-master" "$SBIN/sweepfs-chunkserver" \
	"$SBIN/mount.sweepfs" "$BIN/sweepfs" "$BIN/sweepfs-mount"; do
	[[ -x "$f" ]] || fail "not installed: $f"
done
for f in "$ETC/master.cfg" "$ETC/chunkserver.cfg" "$ETC/exports.cfg" \
	"$UNITS/sweepfs-master.service" "$UNITS/sweepfs-chunkserver@.service" \
	"$DATA/doc/sweepfs/examples/mnt-sweepfs.mount" \
	"$DATA/bash-completion/completions/sweepfs" \
	"$DATA/sweepfs/go-removeall/main.go" "$P/lib/sysusers.d/sweepfs.conf"; do
	[[ -f "$f" ]] || fail "not installed: $f"
done
grep -q "^ExecStart=$prefix/$(opt sbindir)/sweepfs-master -f" \
	"$UNITS/sweepfs-master.service" || fail "the master's unit runs something else"
log "$(find "$DEST" -type f | wc -l) files installed under $prefix"

# ---- 2. the configurations ----------------------------------------------------

for d in master chunkserver; do
	prog=$B/$d/sweepfs-$d
	python3 "$SRC/dist/gen_config.py" --check "$prog" "$SRC/dist/config/$d.cfg" ||
		fail "dist/config/$d.cfg is not what --dump-config says"
	cmp -s "$SRC/dist/config/$d.cfg" "$ETC/$d.cfg" || fail "installed $d.cfg differs"
	# Every key is there, commented out, with its default: loading the
	# file changes nothing.
	"$prog" -c "$ETC/$d.cfg" --dump-config >"$T/$d.loaded" ||
		fail "sweepfs-$d does not load its example configuration"
	"$prog" -c /dev/null --dump-config >"$T/$d.defaults"
	cmp -s "$T/$d.loaded" "$T/$d.defaults" || fail "$d.cfg changes a default"
	n=$(grep -c '^#[a-z_]* =' "$ETC/$d.cfg")
	keys=$(wc -l <"$T/$d.defaults")
	[[ "$n" == "$keys" ]] || fail "$d.cfg lists $n keys, --dump-config $keys"
	# Uncommenting a line is how one changes it.
	sed 's/^#log_level = .*/log_level = debug/' "$ETC/$d.cfg" >"$T/$d.changed"
	# (Into a file: grep -q would stop reading, and pipefail would take
	# the writer's SIGPIPE for a failure.)
	"$prog" -c "$T/$d.changed" --dump-config >"$T/$d.changed.out" &&
		grep -q '^log_level = debug' "$T/$d.changed.out" ||
		fail "an uncommented line of $d.cfg is not read"
done
log "master.cfg and chunkserver.cfg match --dump-config ($n chunkserver keys)"

# ---- 3. man pages ---------------------------------------------------------------

subcommands=$("$B/tools/sweepfs" --help | awk '/^commands:/ { on = 1; next } on && NF { print $1 }')
[[ -n "$subcommands" ]] || fail "no subcommands in sweepfs --help"
for c in $subcommands; do
	[[ -f "$MAN/man1/sweepfs-$c.1" ]] || fail "no man page for sweepfs $c"
done
pages=0
for f in "$MAN"/man*/*; do
	MANWIDTH=80 man --warnings -l "$f" >"$T/page" 2>"$T/man.err" ||
		fail "man -l $f failed: $(cat "$T/man.err")"
	[[ ! -s "$T/man.err" ]] || fail "man -l $f warns: $(cat "$T/man.err")"
	groff -man -Tutf8 -ww -z "$f" 2>"$T/groff.err" || fail "groff $f failed"
	[[ ! -s "$T/groff.err" ]] || fail "groff warns on $f: $(cat "$T/groff.err")"
	grep -q NAME "$T/page" && grep -q DESCRIPTION "$T/page" ||
		fail "$f has no NAME or DESCRIPTION"
	pages=$((pages + 1))
done
MANWIDTH=80 man -l "$MAN/man1/sweepfs.1" | grep -q 'A wrong master address' ||
	fail "sweepfs(1) does not list the exit statuses"
log "$pages man pages render without a warning"

# ---- 4. bash completion --------------------------------------------------------

mkdir -p "$T/cwd/subdir" && touch "$T/cwd/subfile"
comp() {
	(cd "$T/cwd" && bash --norc --noprofile -c '
		. "$1"
		shift
		COMP_WORDS=("$@")
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		_sweepfs
		printf "%s\n" "${COMPREPLY[@]}"' comp \
		"$DATA/bash-completion/completions/sweepfs" "$@")
}
[[ "$(comp sweepfs sn)" == snapshot ]] || fail "completion of 'sweepfs sn': $(comp sweepfs sn)"
[[ "$(comp sweepfs -m host:9521 rmr --w)" == --wait ]] ||
	fail "completion of 'rmr --w': $(comp sweepfs -m host:9521 rmr --w)"
[[ "$(comp sweepfs trash p)" == purge ]] || fail "completion of 'trash p'"
[[ "$(comp sweepfs rmr sub | sort | tr '\n' ' ')" == "subdir subfile " ]] ||
	fail "path completion: $(comp sweepfs rmr sub)"
all=$(comp sweepfs "" | sort | tr '\n' ' ')
for c in $subcommands; do
	[[ " $all" == *" $c "* ]] || fail "the completion does not know sweepfs $c"
done
complete_fn=$(bash --norc -c '. "$1"; complete -p sweepfs' x \
	"$DATA/bash-completion/completions/sweepfs")
[[ "$complete_fn" == "complete -F _sweepfs sweepfs" ]] ||
	fail "the completion is not registered: $complete_fn"
log "the completion completes subcommands, options and paths"
log "PASS"
