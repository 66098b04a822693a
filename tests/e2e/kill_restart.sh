#!/usr/bin/env bash
# Scenario: kill -9 of gswapd mid-run. Training carries on in passive mode with the right checksum,
# and the client reappears in a restarted daemon.
source "$(dirname "$0")/lib.sh"
# Enough iterations (about 10 s) that the run outlives the kill, the restart and the library's
# reconnection 500 ms after it on a loaded machine.
E2E_ITERS=${E2E_ITERS:-150}
TRAIN_ARGS=(--layers 3 --width 256 --batch 2048 --iters $E2E_ITERS --streams 2)
ref=$(reference_checksum)
start_daemon "$RT/daemon1.log"
start_train "$RT/train.out"
wait_for "the client in the first daemon" 30 "status_has $TRAIN_PID"
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
"$GSWAPCTL" status >/dev/null 2>&1 && fail "status succeeded with the daemon dead"
kill -0 "$TRAIN_PID" 2>/dev/null || fail "minitrain died with the daemon"
start_daemon "$RT/daemon2.log"
wait_for "the client to reconnect to the restarted daemon" 30 \
  "grep -q 'client pid $TRAIN_PID (.*) connected' $RT/daemon2.log"
wait "$TRAIN_PID" || fail "minitrain failed: $(tail -n 5 "$RT/train.out")"
got=$(checksum_of "$RT/train.out")
[[ -n $ref && $got == "$ref" ]] || fail "checksum $got differs from the reference $ref"
echo "PASS kill_restart"
