#!/bin/bash
# A "master" that dribbles its hello reply, one byte every half second,
# holds a tool for no longer than the tool's timeout (review L3: the
# timeout of a blocking call, sw_pclient_call(), was per read, so such a
# server held the tool for as long as it cared to dribble). The tool
# (sweepfs status, timeout 30 s for a lone master) must fail within
# 30 s + DRIBBLE_MARGIN_S, saying the master is down, while the fake
# master was still dribbling.
#
# Needs no mount, no master: the fake one is a few lines of Python.
. "$(dirname "$0")/../lib.sh"

sw_init dribble
DRIBBLE_MARGIN_S=8
TOOL_TIMEOUT_S=30
PORT=$(pick_port)
FAKE_PID=

sw_scenario_cleanup() {
	[[ -n "$FAKE_PID" ]] && kill "$FAKE_PID" 2>/dev/null
	[[ -n "$FAKE_PID" ]] && wait "$FAKE_PID" 2>/dev/null
	return 0
}

# The fake master: one connection at a time; reads the hello, sends a
# valid reply header (a 1000-byte HELLO reply, id 1), then its payload a
# byte every 0.5 s: 500 s in all, far past the tool's timeout. Says how
# many bytes it got out before the tool went.
"$PYTHON" - "$PORT" >"$SW_TMP/fake.log" 2>&1 <<'EOT' &
import socket, struct, sys, time
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", int(sys.argv[1])))
ls.listen(4)
print("listening", flush=True)
while True:
    s, _ = ls.accept()
    s.recv(4096)
    sent = 0
    try:
        s.sendall(struct.pack(">IHHQ", 1000, 1, 1, 1))
        for _ in range(1000):
            time.sleep(0.5)
            s.sendall(b"\0")
            sent += 1
    except OSError:
        pass
    print("dribbled %d bytes before the client went" % sent, flush=True)
    s.close()
EOT
FAKE_PID=$!
wait_until 10 "the fake master to listen" grep -q listening "$SW_TMP/fake.log"

log "sweepfs status against a master that dribbles its hello reply"
t0=$(date +%s%3N)
rc=0
timeout $((TOOL_TIMEOUT_S + 60)) "$SWEEPFS_BUILD/tools/sweepfs" \
	-m "127.0.0.1:$PORT" status >"$SW_TMP/tool.out" 2>&1 || rc=$?
took_ms=$(($(date +%s%3N) - t0))
log "the tool ended after $took_ms ms, status $rc:" \
	"$(tr '\n' ' ' <"$SW_TMP/tool.out")"
((rc != 124)) ||
	fail "the tool was still waiting after $((TOOL_TIMEOUT_S + 60)) s"
((rc != 0)) || fail "the tool succeeded against a fake master"
((took_ms < (TOOL_TIMEOUT_S + DRIBBLE_MARGIN_S) * 1000)) ||
	fail "the tool took $took_ms ms (timeout $TOOL_TIMEOUT_S s)"
((took_ms >= (TOOL_TIMEOUT_S - 1) * 1000)) ||
	fail "the tool gave up after $took_ms ms, before its timeout"
grep -qi "timed out" "$SW_TMP/tool.out" ||
	fail "the tool did not say the call timed out"
sw_pass
