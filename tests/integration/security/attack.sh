#!/bin/bash
# The attacks of issue 9, each run for real against a master and a
# chunkserver (tests/integration/progs/attack.c lists each check and its
# expected outcome): a client claiming the chunkserver role, replies it
# never reads, another session's id, another export's trash, locks through
# a read-only open and past their cap, sessions by the thousand, frames
# that never end before a hello, writes without an open for writing, and
# a chain of directories 100,000 deep, whose removal, snapshot and replay
# must cost what the tree costs, not its depth squared.
#
# Needs no mount. ATTACK_SEED repeats the random choices.
. "$(dirname "$0")/../lib.sh"

sw_init attack
ATTACK=$SWEEPFS_BUILD/tests/integration/progs/attack
[[ -x "$ATTACK" ]] || fail "no $ATTACK (build with -Dtests=enabled)"
SEED=${ATTACK_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
DEPTH=${ATTACK_DEPTH:-100000}
PW=admin-$SEED
LOCKS=1000
PER_ADDRESS=1000
log "seed $SEED (ATTACK_SEED=$SEED repeats it)"
# lib.sh's own tools (status polls) use the admin export too.
export SWEEPFS_PASSWORD=$PW

EXPORTS=$SW_TMP/exports.cfg
cat >"$EXPORTS" <<EOT
127.0.0.1 /pub  ro
127.0.0.1 /jail rw,alldirs,maproot=nobody
127.0.0.1 /     rw,alldirs,admin,maproot=0,password=$PW
EOT

SW_CHUNKSERVERS=0
# The idle timeout outlasts the 3,000 sessions of the "sessions" check
# (a few seconds under ASan): none of them may expire while the cap is
# being tested, or its count of refusals falls short.
start_master --set "exports_file=$EXPORTS" --set session_idle_timeout=5s \
	--set "max_sessions_per_address=$PER_ADDRESS" \
	--set "locks_per_session=$LOCKS"
start_chunkservers 1

attack() {
	"$ATTACK" -m "$SW_PORT" -p "$SW_MASTER_PID" \
		-c "${SW_CS_PORTS[1]}" -q "${SW_CS_PIDS[1]}" \
		-K "$SW_META/chunkserver.key" -P "$PW" -s "$SEED" \
		-l "$LOCKS" -a "$PER_ADDRESS" "$@" >"$SW_TMP/attack.out" 2>&1 || {
		cat "$SW_TMP/attack.out" >&2
		fail "attack $*"
	}
	sed 's/^/    /' "$SW_TMP/attack.out" >&2
}

attack setup csrole takeover trash locks writes
attack amplify sessions prehello
for what in 'wrong chunkserver key' 'not a chunkserver_allow address' \
	'without its secret' 'max_sessions_per_address' 'frame too large'; do
	grep -q "$what" "$SW_MASTER_LOG" || [[ $what == 'not a chunkserver_allow address' ]] ||
		fail "no '$what' in the master's log"
done

log "a chain of $DEPTH directories"
attack "depth=$DEPTH"

log "kill -9 and replay the chain's changelog: linear, not quadratic"
restart_master kill
secs=$(grep 'metadata at version' "$SW_MASTER_LOG" | tail -n 1 |
	sed -n 's/.* nodes in \([0-9.]*\) s (.*/\1/p')
[[ -n $secs ]] || fail "no start-up time in the master's log"
log "replayed in $secs s"
awk -v s="$secs" 'BEGIN { exit !(s < 10) }' ||
	fail "replaying a $DEPTH-deep chain took $secs s"

attack "deeptree=$DEPTH"

log "both daemons stop cleanly"
stop_chunkserver 1
stop_master
sw_pass
