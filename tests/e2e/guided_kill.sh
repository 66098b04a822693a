#!/usr/bin/env bash
# Scenario: kill -9 of gswapd while the library follows its plan. The plan goes with the daemon:
# the library goes back to passive mode (on demand, its own GSWAP_BUDGET) at once, keeps training,
# and ends bitwise like a run without gswap.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/guided_lib.sh"
MT=(--layers 6 --width 256 --batch 2048 --iters 60 --streams 2)
peak=$(peak_of "$RT/ref.out" "$MINITRAIN" "${MT[@]}")
ref=$(checksum_of "$RT/ref.out")
start_daemon "$RT/daemon.log"
start_prog "$RT/train.out" GSWAP_BUDGET=$((peak * 60 / 100)) "$MINITRAIN" "${MT[@]}"
wait_for "the plan to be followed" 40 \
  "status_has $TRAIN_PID 'c[\"mode\"] == \"guided\" and c[\"guided_iterations\"] >= 2 and c[\"prefetches\"] > 0'"
steps_before=$(grep -c '^step_seconds:' "$RT/train.out")
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
kill -0 "$TRAIN_PID" 2>/dev/null || fail "minitrain died with the daemon"
wait "$TRAIN_PID" || fail "minitrain failed after the daemon died: $(tail -n 5 "$RT/train.out")"
steps=$(grep -c '^step_seconds:' "$RT/train.out")
((steps > steps_before)) || fail "no iteration ran after the daemon died ($steps_before, then $steps)"
got=$(checksum_of "$RT/train.out")
[[ -n $ref && $got == "$ref" ]] || fail "checksum $got differs from the reference $ref"
mode=$(summary_field "$RT/train.out" mode)
[[ $mode == passive ]] || fail "the library still says '$mode' with no daemon: $(grep summary "$RT/train.out")"
(($(summary_field "$RT/train.out" guided_iterations) > 0)) || fail "no guided iteration before the kill"
echo "$((steps - steps_before)) iterations after the kill; $(grep -o 'mode=.*' "$RT/train.out")"
echo "PASS guided_kill"
