#!/bin/bash
# What a client says that the master must not believe (issue 28, part A),
# each tried for real on the wire (tests/integration/progs/trust.c lists
# every check and its expected outcome): open files claimed at a hello,
# SET_VIA_FD on a file not open for writing, a request "sent again" under
# another request's id, group 0 under root squashing, other sessions'
# names in INFO, and after a restart inode numbers handed out to another
# session, and an open for writing only used to read (through a
# chunkserver). Then the master must still be up, its log must name each
# refusal, and a restart must load what it journaled.
#
# Needs no mount. TRUST_SEED repeats the random choices.
. "$(dirname "$0")/../lib.sh"

sw_init trust
TRUST=$SWEEPFS_BUILD/tests/integration/progs/trust
[[ -x "$TRUST" ]] || fail "no $TRUST (build with -Dtests=enabled)"
SEED=${TRUST_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
PW=admin-$SEED
log "seed $SEED (TRUST_SEED=$SEED repeats it)"
# lib.sh's own tools (status polls) use the admin export too.
export SWEEPFS_PASSWORD=$PW

EXPORTS=$SW_TMP/exports.cfg
cat >"$EXPORTS" <<EOT
127.0.0.1 /pub    ro
127.0.0.1 /jail   rw,alldirs,maproot=nobody
127.0.0.1 /shared rw,alldirs,mapall=nobody
127.0.0.1 /team   rw,alldirs,maproot=0
127.0.0.2 /       ro
127.0.0.3 /team   rw,alldirs,maproot=0
127.0.0.1 /       rw,alldirs,admin,maproot=0,password=$PW
EOT

SW_CHUNKSERVERS=0
start_master --set "exports_file=$EXPORTS"
start_chunkservers 1

trust() {
	"$TRUST" -m "$SW_PORT" -p "$SW_MASTER_PID" -k "$SW_META/session.key" \
		-P "$PW" -c "${SW_CS_PORTS[1]}" -s "$SEED" "$@" \
		>"$SW_TMP/trust.out" 2>&1 || {
		cat "$SW_TMP/trust.out" >&2
		fail "trust $*"
	}
	sed 's/^/    /' "$SW_TMP/trust.out" >&2
}

trust setup byno reclaim viafd again gid0 info rootonly recall recursive \
	times inos resume wronly
read -r _ _ INO_FIRST INO_COUNT < <(grep '^inos: range ' "$SW_TMP/trust.out") ||
	fail "trust inos printed no range"
# Sanitizers make the master several times slower: its pings too.
PING_MAX=100
[[ $SWEEPFS_BUILD != *asan* ]] || PING_MAX=400
trust -t "$PING_MAX" grants=100000
for what in "without its session's secret; not reclaimed" \
	'Permission denied; not reclaimed' \
	'Read-only file system; not reclaimed' \
	'is not the request made under that id'; do
	grep -qF "$what" "$SW_MASTER_LOG" ||
		fail "no '$what' in the master's log"
done

log "the requests' digests come back from the changelog and a checkpoint"
log "and the inode ranges handed out are claimed again only with their proofs"
restart_master kill
trust again-made "inos-after=$INO_FIRST:$INO_COUNT"
restart_master term
trust again-made
stop_chunkserver 1
stop_master
sw_pass
