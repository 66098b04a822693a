#!/usr/bin/env bash
# Scenario: two clients on one GPU share the daemon's budget; each is shown with, and applies,
# its half.
source "$(dirname "$0")/lib.sh"
start_daemon "$RT/daemon.log" GSWAP_GPU_BUDGET=512MiB
# b runs well past a, so the test can watch b's share grow when a leaves.
TRAIN_ARGS=(--layers 3 --width 256 --batch 2048 --iters 15 --streams 2)
start_train "$RT/a.out"
a=$TRAIN_PID
TRAIN_ARGS=(--layers 3 --width 256 --batch 2048 --iters 60 --streams 2)
start_train "$RT/b.out"
b=$TRAIN_PID
half=$((256 << 20))
for p in $a $b; do
  wait_for "pid $p with half the budget" 30 \
    "status_has $p 'c[\"budget_bytes\"] == $half and c[\"applied_budget_bytes\"] == $half'"
done
"$GSWAPCTL" status
wait "$a" || fail "client a failed"
# With a gone, b holds the whole budget.
wait_for "b to get the whole budget" 20 "status_has $b 'c[\"budget_bytes\"] == 2 * $half'"
wait "$b" || fail "client b failed"
[[ -n $(checksum_of "$RT/a.out") && -n $(checksum_of "$RT/b.out") ]] || fail "a run printed no checksum"
echo "PASS shared_budget"
