#!/bin/bash
# top: `sweepfs top` in a terminal (tmux) shows a purge progressing: the
# nodes left go down from one screen to the next, with a rate and the
# time left; requests by type and by client show the work of a mount;
# 'q' quits. The screens are captured into the test log. In batch mode
# (-b, or not on a terminal) it prints -n frames with no escape codes.

. "$(dirname "$0")/../lib.sh"
sw_init top --root
command -v tmux >/dev/null || skip "tmux is not installed"

# A slow purge: 1% of the master's time, short slices.
start_master --set purge_duty=1 --set purge_duty_busy=1 --set purge_slice=50
start_mount
M=$SW_MNT
SWEEPFS=$SW_TOOL_BIN
export SWEEPFS_MASTER=$SW_MASTER_HOST:$SW_PORT
TMUX_SOCK=sweepfs-top-$$
sw_scenario_cleanup() { tmux -L "$TMUX_SOCK" kill-server 2>/dev/null; }

log "a tree of 200,000 files, removed with rmr: the purge runs slowly"
mkdir -p "$M/one" "$M/big"
(cd "$M/one" && seq -f 'f%g' 1000 | xargs touch)
for i in $(seq 1 200); do
	"$SWEEPFS" snapshot "$M/one" "$M/big/s$i"
done
"$SWEEPFS" rmr "$M/big"

# In a shell in tmux, so that ^Z and fg can be tried too.
tmux -L "$TMUX_SOCK" new-session -d -s top -x 120 -y 40 \
	"env -i PATH=$PATH TERM=screen PS1='prompt> ' bash --norc --noprofile"
tmux -L "$TMUX_SOCK" send-keys -t top \
	"SWEEPFS_MASTER=$SWEEPFS_MASTER $SWEEPFS top -d 0.5" Enter
# left SCREEN: the nodes left to purge on a captured screen.
left() { grep -o 'purge  *[0-9,]* nodes left' "$1" | tr -dc '0-9'; }
capture() { tmux -L "$TMUX_SOCK" capture-pane -p -t top >"$SW_TMP/$1"; }
wait_until 10 "top to draw the purge" \
	bash -c "tmux -L $TMUX_SOCK capture-pane -p -t top | grep -q 'nodes left'"
# work from the mount meanwhile, so that it shows by type and client
(cd "$M/one" && for i in $(seq 1 3); do ls -l >/dev/null; done)
capture screen1
sleep 2
(cd "$M/one" && for i in $(seq 1 3); do stat f1 f2 f3 >/dev/null; done)
capture screen2
log "first screen:"
cat "$SW_TMP/screen1"
log "two seconds later:"
cat "$SW_TMP/screen2"
a=$(left "$SW_TMP/screen1")
b=$(left "$SW_TMP/screen2")
[[ -n "$a" && -n "$b" ]] || fail "no purge line on the screens"
((b < a)) || fail "the nodes left did not go down: $a then $b"
grep -qE 'purge +[0-9,]+ nodes left in 1 trees, [0-9.,]+/s, done in [0-9]+[hms]' \
	"$SW_TMP/screen2" || fail "no rate and time left on the purge line"
grep -q 'REQUESTS/S BY TYPE' "$SW_TMP/screen2" || fail "no requests by type"
grep -q '^sweepfs top - master ' "$SW_TMP/screen2" || fail "no header"
grep -q 'SLOWEST REQUESTS' "$SW_TMP/screen2" || fail "no slowest requests"

# pane_shows PATTERN: the visible screen of the pane matches (grep -E).
pane_shows() { tmux -L "$TMUX_SOCK" capture-pane -p -t top | grep -qE -- "$1"; }

log "^Z gives the terminal back, fg brings top back"
tmux -L "$TMUX_SOCK" send-keys -t top C-z
wait_until 10 "the shell after ^Z" pane_shows 'Stopped'
! pane_shows '^sweepfs top - master' || fail "top's screen is still up after ^Z"
tmux -L "$TMUX_SOCK" send-keys -t top "fg" Enter
wait_until 10 "top back after fg" pane_shows '^sweepfs top - master'

log "q quits, and the terminal is the shell's again"
tmux -L "$TMUX_SOCK" send-keys -t top q
wait_until 10 "top to quit on q" pane_shows '^prompt> ?$'
capture after-q
! grep -q '^sweepfs top - master' "$SW_TMP/after-q" || fail "top's screen left behind after q"
# canonical mode and echo: both on again (2 of the two words)
tmux -L "$TMUX_SOCK" send-keys -t top \
	"stty -a | tr ' ;' '\\n\\n' | grep -xc 'icanon\\|echo'" Enter
wait_until 10 "the terminal's modes to be back (icanon, echo)" pane_shows '^2$'

log "batch mode: -n frames, plain text"
"$SWEEPFS" top -b -n 2 -d 0.2 >"$SW_TMP/batch" || fail "top -b failed"
assert_eq 2 "$(grep -c '^sweepfs top - master' "$SW_TMP/batch")" "frames printed"
! grep -q $'\033' "$SW_TMP/batch" || fail "escape codes in batch mode"
"$SWEEPFS" top -n 1 -d 0.2 | cat >"$SW_TMP/pipe"
assert_eq 1 "$(grep -c '^sweepfs top - master' "$SW_TMP/pipe")" "frames into a pipe"
st=0
"$SWEEPFS" top -d 0 >/dev/null 2>&1 || st=$?
assert_eq 2 "$st" "exit status of a bad -d"
st=0
SWEEPFS_MASTER=127.0.0.1:1 "$SWEEPFS" top -n 1 >/dev/null 2>&1 || st=$?
assert_eq 4 "$st" "exit status with the master down"
sw_pass
