#!/usr/bin/env bash
# Scenario: with gswapd planning, the library follows the plan (mode guided) and every result is
# bitwise what it is without gswap: minitrain with three streams, minitrain with stream-ordered
# allocation (--async-alloc), and shuffled_train, whose iterations allocate their activations in
# a new order every time (so a plan that matched regions by allocation order would move the wrong
# ones, and a plan that counted positions wrongly would diverge).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/guided_lib.sh"
start_daemon "$RT/daemon.log"

run_guided() {  # NAME FRACTION PROGRAM ARGS...
  local name=$1 frac=$2
  shift 2
  local peak ref
  peak=$(peak_of "$RT/$name.ref" "$@")
  ref=$(checksum_of "$RT/$name.ref")
  start_prog "$RT/$name.out" GSWAP_BUDGET=$((peak * frac / 100)) "$@"
  wait "$TRAIN_PID" || fail "$name failed under gswap: $(tail -n 5 "$RT/$name.out")"
  expect_guided_run "$RT/$name.out" "$ref" 5
  echo "$name: $(grep -o 'mode=.*' "$RT/$name.out")"
}

MT=(--layers 6 --width 256 --batch 2048 --iters 30)
run_guided streams 60 "$MINITRAIN" "${MT[@]}" --streams 3
run_guided async 60 "$MINITRAIN" "${MT[@]}" --async-alloc

SH=(--dims 256,256,256,256,256,256,256,256,256 --batch 2048 --iters 30)
"$SHUFFLED" "${SH[@]}" --order fixed >"$RT/fixed.ref" 2>&1 || fail "shuffled_train --order fixed failed"
GSWAP_LOG=info run_guided shuffled 60 "$SHUFFLED" "${SH[@]}" --order shuffled
[[ $(checksum_of "$RT/fixed.ref") == $(checksum_of "$RT/shuffled.ref") ]] ||
  fail "shuffled_train's result depends on its allocation order"
# Allocations are numbered like accesses: a new order moves no planned position.
[[ $(summary_field "$RT/shuffled.out" divergences) == 0 ]] ||
  fail "the plan diverged on a program that only allocates in another order: $(grep -E 'summary|left plan' "$RT/shuffled.out")"
echo "PASS guided_checksums"
