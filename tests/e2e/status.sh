#!/usr/bin/env bash
# Scenario: gswapd up, minitrain under libgswap.so; `gswapctl status --json` lists the client with
# its counters, and the run's checksum matches a run without gswap.
source "$(dirname "$0")/lib.sh"
ref=$(reference_checksum)
start_daemon "$RT/daemon.log"
start_train "$RT/train.out"
wait_for "the client in gswapctl status" 30 \
  "status_has $TRAIN_PID 'c[\"events\"] > 0 and c[\"budget_bytes\"] > 0 and c[\"peak_bytes\"] > 0'"
"$GSWAPCTL" status | tee "$RT/status.txt"
grep -q "$TRAIN_PID" "$RT/status.txt" || fail "human status lacks the client"
"$GSWAPCTL" policy dump --pid "$TRAIN_PID" >/dev/null || fail "policy dump failed"
wait "$TRAIN_PID" || fail "minitrain failed under gswap: $(tail -n 5 "$RT/train.out")"
got=$(checksum_of "$RT/train.out")
[[ -n $ref && $got == "$ref" ]] || fail "checksum $got differs from the reference $ref"
# The client is reaped when it exits.
wait_for "the client to be reaped" 10 "! status_has $TRAIN_PID"
grep -q "client pid $TRAIN_PID .*disconnected" "$RT/daemon.log" || fail "no disconnect line in the log"
echo "PASS status"
