#!/usr/bin/env bash
# Scenario: a chain of recomputations in guided mode. recompute_chain (tests/preload) registers six
# activations of 256 KiB, each recomputable from the one before; at a budget of four of them, on
# a slow link, gswapd's plan drops them and the backward pass recomputes a chain at its first
# launch. A region whose drop was still in flight there used to be given memory at once and hold
# it while its sources were recomputed, and the deepest source found no room: the launch failed
# with CUDA_ERROR_OUT_OF_MEMORY. It must run, recompute, and give the checksum of a run without
# gswap.
#
# Then three activations at a budget of three (768 KiB), beside the 8-byte loss, a small
# allocation: a launch and the recomputation of its dropped activation need all three at once,
# which leaves the loss no room. The library used to report that allocation at its next
# once-a-second tick, after gswapd's first plan, made for the whole budget, had dropped an
# activation: the backward's launch then failed with CUDA_ERROR_OUT_OF_MEMORY where a run with no
# plan passes. The plan must leave the loss its room, as the library reports it at once.
source "$(dirname "$0")/lib.sh"
: "${CHAIN_PROGRAM:?}" "${CHAIN_MODULE:?}"
export SIMCUDA_GRANULARITY=64KiB SIMCUDA_H2D_BPS=50e6 SIMCUDA_D2H_BPS=50e6
ARGS=("$CHAIN_MODULE" 6 256 ${E2E_ITERS:-20})
"$CHAIN_PROGRAM" "${ARGS[@]}" >"$RT/ref.out" 2>&1 || fail "without gswap: $(cat "$RT/ref.out")"
ref=$(checksum_of "$RT/ref.out")
grep -q "registered: 0" "$RT/ref.out" || fail "registered without gswap"
start_daemon "$RT/daemon.log"
env LD_PRELOAD="$LIBGSWAP" GSWAP_BUDGET=1MiB GSWAP_SUMMARY=1 "$CHAIN_PROGRAM" "${ARGS[@]}" \
  >"$RT/chain.out" 2>&1 || fail "recompute_chain failed under gswap: $(tail -n 5 "$RT/chain.out")"
got=$(checksum_of "$RT/chain.out")
[[ -n $ref && $got == "$ref" ]] || fail "checksum $got differs from the reference $ref"
grep -q "registered: 6" "$RT/chain.out" || fail "registrations: $(grep registered "$RT/chain.out")"
grep -Eq "gswap summary: .* oom=0 .*mode=guided .*recomputes=[1-9][0-9]* .*recompute_failures=0" \
  "$RT/chain.out" || fail "summary: $(grep 'gswap summary' "$RT/chain.out")"

ARGS=("$CHAIN_MODULE" 3 256 ${E2E_ITERS:-20})
"$CHAIN_PROGRAM" "${ARGS[@]}" >"$RT/ref3.out" 2>&1 || fail "without gswap: $(cat "$RT/ref3.out")"
ref=$(checksum_of "$RT/ref3.out")
env LD_PRELOAD="$LIBGSWAP" GSWAP_BUDGET=768KiB GSWAP_SUMMARY=1 "$CHAIN_PROGRAM" "${ARGS[@]}" \
  >"$RT/tight.out" 2>&1 || fail "3 layers at 768 KiB failed under gswap: $(tail -n 5 "$RT/tight.out")"
got=$(checksum_of "$RT/tight.out")
[[ -n $ref && $got == "$ref" ]] || fail "at 768 KiB: checksum $got differs from the reference $ref"
grep -Eq "gswap summary: .* oom=0 .*mode=guided .*guided_iterations=[1-9]" "$RT/tight.out" ||
  fail "at 768 KiB: summary: $(grep 'gswap summary' "$RT/tight.out")"
echo "PASS recompute_chain"
