#!/usr/bin/env bash
# Scenario: a program that changes the shape of its iteration while a plan is followed
# (shuffled_train drops its middle layer). The library sees the plan stop matching (divergences,
# in the status and the exit summary) and falls back to on demand; gswapd forgets what it learned,
# measures the new shape and publishes a plan for it, which the library follows again. The result
# is bitwise that of the same run without gswap.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/guided_lib.sh"
DIMS=(--dims 256,256,256,256,256,256,256,256,256 --batch 2048)
SH=("${DIMS[@]}" --iters 400)
peak=$(peak_of "$RT/peak.ref" "$SHUFFLED" "${DIMS[@]}" --iters 2)
start_daemon "$RT/daemon.log"
start_prog "$RT/train.out" GSWAP_BUDGET=$((peak * 60 / 100)) "$SHUFFLED" "${SH[@]}" \
  --reshape-file "$RT/reshape"
wait_for "the first plan to be followed" 40 "status_has $TRAIN_PID 'c[\"mode\"] == \"guided\" and c[\"guided_iterations\"] >= 2'"
len1=$(client_field "$TRAIN_PID" iteration_length)
gen1=$(client_field "$TRAIN_PID" plan_generation)
touch "$RT/reshape"
wait_for "the divergences to be seen" 30 "status_has $TRAIN_PID 'c[\"divergences\"] >= 1'"
wait_for "gswapd to measure again" 30 "grep -q 'no longer follows its plan; measuring again' $RT/daemon.log"
wait_for "a plan for the new shape to be followed" 60 \
  "status_has $TRAIN_PID 'c[\"mode\"] == \"guided\" and c[\"iteration_length\"] not in (0, $len1) and c[\"plan_generation\"] > $gen1'"
g=$(client_field "$TRAIN_PID" guided_iterations)
wait_for "guided iterations of the new shape" 30 "status_has $TRAIN_PID 'c[\"guided_iterations\"] >= $g + 3'"
len2=$(client_field "$TRAIN_PID" iteration_length)
echo "iteration of $len1 launches, then of $len2; $(client_field "$TRAIN_PID" divergences) divergences"
kill -TERM "$TRAIN_PID"  # enough seen; the result is checked on a short run below
wait "$TRAIN_PID" 2>/dev/null || true
at=$(awk '/^reshape: iter/ {print $3}' "$RT/train.out")
[[ -n $at ]] || fail "the program never changed shape"

# Correctness: the same shape change at a fixed iteration, under a plan, ends bitwise like without
# gswap (the plan of the first shape meets the second one here too).
SHORT=("${DIMS[@]}" --iters 30 --reshape-at 15)
"$SHUFFLED" "${SHORT[@]}" >"$RT/short.ref" 2>&1 || fail "reference run failed"
start_prog "$RT/short.out" GSWAP_BUDGET=$((peak * 60 / 100)) "$SHUFFLED" "${SHORT[@]}"
wait "$TRAIN_PID" || fail "shuffled_train failed under gswap: $(tail -n 5 "$RT/short.out")"
[[ $(checksum_of "$RT/short.out") == $(checksum_of "$RT/short.ref") ]] ||
  fail "checksum $(checksum_of "$RT/short.out") differs from $(checksum_of "$RT/short.ref")"
echo "short run: $(grep -o 'mode=.*' "$RT/short.out")"
echo "PASS guided_reshape"
