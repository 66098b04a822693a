#!/usr/bin/env bash
# Scenario: connections that never say hello cannot lock other peers out of gswapd. One process
# holding 300 of them, then 40 processes holding 7 each (under the per-process cap, over the total
# one): while they wait, `gswapctl status` still answers at once, gswapd logs that it made room,
# and it is alive afterwards.
source "$(dirname "$0")/lib.sh"
start_daemon "$RT/daemon.log"
sock=$(ls "$GSWAP_RUNTIME_DIR"/*.sock)

# flood PROCESSES CONNECTIONS SECONDS: each process opens CONNECTIONS and holds them silently.
flood() {
  python3 - "$sock" "$@" <<'PY' &
import os, socket, sys, time
path, procs, conns, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
kids = []
for _ in range(procs - 1):
    pid = os.fork()
    if pid == 0:
        kids = None
        break
    kids.append(pid)
held = []
for _ in range(conns):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
    except OSError:
        break
    held.append(s)
time.sleep(secs)
if kids is None:
    os._exit(0)
for k in kids:
    os.waitpid(k, 0)
PY
  FLOOD_PID=$!
  BG_PIDS+=($FLOOD_PID)
}

check_status_answers() {
  local what=$1 i
  for i in 1 2 3; do
    timeout 3 "$GSWAPCTL" status --json >"$RT/status.json" 2>"$RT/status.err" ||
      fail "$what: gswapctl status did not answer: $(cat "$RT/status.err")"
    python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["gpus"]' "$RT/status.json" ||
      fail "$what: status --json is not the daemon's answer"
    sleep 0.3
  done
}

flood 1 300 4
sleep 1
check_status_answers "one process holding 300 connections"
wait "$FLOOD_PID" || true

flood 40 7 4
sleep 1.5
check_status_answers "40 processes holding 7 connections each"
wait "$FLOOD_PID" || true

kill -0 "$DAEMON_PID" || fail "gswapd died"
grep -q "that had not said hello, to make room" "$RT/daemon.log" || fail "no line about the room made"
echo "PASS pending_flood"
