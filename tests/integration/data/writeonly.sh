#!/bin/bash
# A file its user may write but not read (mode 0602, owned by root), used
# through ordinary programs: the user's write into the middle of it lands
# and nothing of it can be read back, through the default mount and
# through one with the kernel's writeback cache (-o writeback_cache),
# where the kernel reads the page a small write covers in part; the mount
# then writes through for such an open (the master says it is not
# readable, and gives it no token that reads: integration.trust "wronly"
# tries that on the wire). Root reads back exactly what was written, with
# one chunk read, not first one with the writer's location.
. "$(dirname "$0")/../lib.sh"
sw_init writeonly --root
command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"

U=4001
start_metrics_cluster # the chunkserver counts the reads it is sent
start_mount "$SW_TMP/a"
A=$SW_TMP/a
start_mount "$SW_TMP/w" "" writeback_cache
W=$SW_TMP/w
sw_user_python
SIG=$SW_TMP/sig # where the writer says how far it got
install -d -m 1777 "$SIG"

# cs_reads: how many reads the chunkserver was sent, refused ones too.
cs_reads() {
	$PY3 - "$CURL" <<'EOP'
import re, sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
m = re.search(r'^sweepfs_chunkserver_requests_total\{type="read"\} (\S+)$',
              text, re.M)
print(int(float(m.group(1))))
EOP
}

# as_writer PYTHON-CODE: run it as uid/gid $U, no groups.
as_writer() {
	as_user "$U" "$U" "" "$SW_USER_PYTHON" -c "$1"
}

for m in "$A" "$W"; do
	f=$m/wo.$(basename "$m")
	printf '0123456789abcdef' >"$f"
	chmod 0602 "$f"
	log "$(basename "$m"): a write of 1 byte at 5 by a writer who may not read"
	expect_errno EACCES ufsop "$U" "$U" "" open "$f" r
	# The writer keeps its descriptor open until root has read (its
	# write location stays in the mount meanwhile).
	rm -f "$SIG/written" "$SIG/read"
	as_writer "
import os, time
fa = os.open('$f', os.O_WRONLY | os.O_APPEND)
assert os.write(fa, b'!') == 1
os.close(fa)
fd = os.open('$f', os.O_WRONLY)
assert os.pwrite(fd, b'X', 5) == 1
os.fsync(fd)
open('$SIG/written', 'w').close()
for _ in range(600):
    if os.path.exists('$SIG/read'):
        break
    time.sleep(0.05)
os.close(fd)
" &
	writer=$!
	for ((i = 0; i < 600; i++)); do
		[[ ! -e $SIG/written ]] && kill -0 "$writer" 2>/dev/null ||
			break
		sleep 0.05
	done
	[[ -e $SIG/written ]] ||
		fail "$(basename "$m"): the write-only writer's writes failed"
	# Root reads through the same mount, past the kernel's cache: not
	# with the location the writer was given, whose token does not read
	# (one read sent to the chunkserver, not a refused one first).
	reads=$(cs_reads)
	got=$(dd if="$f" iflag=direct bs=64k count=1 status=none) || got=
	reads=$(($(cs_reads) - reads))
	touch "$SIG/read"
	wait "$writer" || fail "$(basename "$m"): the writer failed"
	assert_eq '01234X6789abcdef!' "$got" \
		"$(basename "$m"): root's read through the writer's mount"
	assert_eq 1 "$reads" "$(basename "$m"): chunk reads for root's read"
done

log "root reads back what was written, through a fresh mount"
start_mount "$SW_TMP/c"
for m in a w; do
	assert_eq '01234X6789abcdef!' "$(cat "$SW_TMP/c/wo.$m")" "wo.$m"
done
grep -n 'gave no location for reading' "$SW_TMP"/*.log >&2 &&
	fail "a mount asked to read a file opened for writing only"
stop_mount "$SW_TMP/c"
stop_mount "$W"
stop_mount "$A"
stop_chunkserver 1
stop_master
sw_pass
