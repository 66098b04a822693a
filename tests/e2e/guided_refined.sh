#!/usr/bin/env bash
# Scenario: gswapd refines the plan a program follows (plan_refine_ms) and publishes a better one
# while the program runs. The library switches to it between iterations: the run stays guided and
# every result is bitwise what it is without gswap. The first plan is the greedy one
# (plan_search_ms 0), which the refinement improves on where copies matter: the link is throttled
# to 200 MB/s each way and regions are small, as scripts/capture-corpus.sh captures minitrain-6x512
# (whose greedy plan the search shortens by 40% in simulation).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/guided_lib.sh"
export SIMCUDA_H2D_BPS=200e6 SIMCUDA_D2H_BPS=200e6 SIMCUDA_GRANULARITY=64KiB
MT=(--layers 6 --width 512 --batch 512 --iters ${E2E_REFINE_ITERS:-40})
peak=$(peak_of "$RT/ref.out" "$MINITRAIN" "${MT[@]}")
ref=$(checksum_of "$RT/ref.out")
start_daemon "$RT/daemon.log" GSWAP_PLAN_SEARCH_MS=0 GSWAP_PLAN_REFINE_MS=1500
start_prog "$RT/train.out" GSWAP_BUDGET=$((peak * 50 / 100)) "$MINITRAIN" "${MT[@]}"
wait "$TRAIN_PID" || fail "minitrain failed under gswap: $(tail -n 5 "$RT/train.out")"
# The checks of expect_guided_run but the mode at exit: this configuration's last launches (the
# final evaluation) leave the plan, and gswapd may have asked to measure again by then.
got=$(checksum_of "$RT/train.out")
[[ -n $ref && $got == "$ref" ]] || fail "checksum $got differs from the reference $ref"
guided=$(summary_field "$RT/train.out" guided_iterations)
((guided >= 10)) || fail "$guided guided iterations, expected 10 or more: $(grep summary "$RT/train.out")"
# The refined plan was published while the program ran (the library takes a new plan where an
# iteration starts), and the program did not leave it before its last launches.
refined=$(grep -n "entries, .*refined (" "$RT/daemon.log" | head -n 1 | cut -d: -f1)
[[ -n $refined ]] || fail "no refined plan was published: $(grep entries, "$RT/daemon.log")"
left=$(grep -n "disconnected" "$RT/daemon.log" | head -n 1 | cut -d: -f1)
((refined < left)) || fail "the refined plan came after the program left"
divergences=$(summary_field "$RT/train.out" divergences)
((divergences <= 1)) || fail "the program left its plans $divergences times: $(grep summary "$RT/train.out")"
echo "$(grep -o 'entries, .*refined.*' "$RT/daemon.log" | tail -n 1)"
echo "$(grep -o 'mode=.*' "$RT/train.out")"
echo "PASS guided_refined"
