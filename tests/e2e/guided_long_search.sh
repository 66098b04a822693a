#!/usr/bin/env bash
# Scenario: the planner searches for longer than an iteration takes (plan_search_ms 1500 against
# iterations of tens of milliseconds, as on a real GPU against the 200 ms default). Each new
# measured iteration like the one being planned must leave that search alone, or no plan would
# ever finish and the program would stay in measured mode to its end.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/guided_lib.sh"
MT=(--layers 4 --width 256 --batch 2048 --iters 60)
peak=$(peak_of "$RT/ref.out" "$MINITRAIN" "${MT[@]}")
ref=$(checksum_of "$RT/ref.out")
start_daemon "$RT/daemon.log" GSWAP_PLAN_SEARCH_MS=1500
start_prog "$RT/train.out" GSWAP_BUDGET=$((peak * 60 / 100)) "$MINITRAIN" "${MT[@]}"
wait "$TRAIN_PID" || fail "minitrain failed under gswap: $(tail -n 5 "$RT/train.out")"
expect_guided_run "$RT/train.out" "$ref" 10
echo "$(grep -o 'mode=.*' "$RT/train.out")"
echo "PASS guided_long_search"
