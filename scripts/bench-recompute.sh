#!/usr/bin/env bash
# bench-recompute.sh: swap-only against hybrid (swap + recompute) plans, measured on the simulated
# GPU under gswapd, next to the simulator's prediction for the trace the daemon captured.
#
#   scripts/bench-recompute.sh [BUILD_DIR]
#
# For each budget (FRACTIONS, of minitrain's peak) it runs minitrain three times in one go:
# without gswap (the unconstrained step), under gswapd without registrations (the planner can only
# swap), and with --recompute (the planner may drop activations and the library recomputes them
# through minitrain's callback). Each gswap run gets a fresh gswapd; once the client is guided its
# last iteration is dumped, and after the run that trace is simulated at the budget the daemon
# planned for (capuchin, with --no-recompute for the swap-only run). Prints a Markdown table:
# steady step (median of the second half), its ratio to the unconstrained step, bytes copied per
# iteration (both directions), bytes recomputed per iteration, device stall, and the prediction.
#
# Environment: MT_ARGS (minitrain's shape), ITERS, FRACTIONS, BPS (simcuda's link, bytes/s per
# direction; see docs/benchmarks.md for how it was chosen), SIMCUDA_GRANULARITY.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${GSWAP_BUILD_DIR:-$root/build}}
mt=$build/tests/workloads/minitrain
lib=$build/interpose/libgswap.so
gswapd=$build/bin/gswapd
gswapctl=$build/bin/gswapctl
for f in "$mt" "$lib" "$gswapd" "$gswapctl"; do
  [[ -x $f || -f $f ]] || { echo "bench-recompute: $f is not built (scripts/build.sh)" >&2; exit 1; }
done
MT_ARGS=${MT_ARGS:-"--layers 6 --width 512 --batch 512"}
ITERS=${ITERS:-40}
FRACTIONS=${FRACTIONS:-"0.5 0.33"}
BPS=${BPS:-100e6}
export LD_LIBRARY_PATH=$build/tests/simcuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export SIMCUDA_CAPACITY=${SIMCUDA_CAPACITY:-4GiB} SIMCUDA_GRANULARITY=${SIMCUDA_GRANULARITY:-64KiB}
export SIMCUDA_H2D_BPS=$BPS SIMCUDA_D2H_BPS=$BPS
work=$(mktemp -d /tmp/gswap-bench-recompute-XXXXXX)
daemon=
cleanup() {
  [[ -n $daemon ]] && kill "$daemon" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" "$2" | tail -1; }
value() { awk -v k="$1:" '$1 == k {print $2}' "$2" | tail -1; }

# run_gswap NAME BUDGET EXTRA_ARGS: minitrain under a fresh gswapd; leaves $work/NAME.{out,trace.json,status.json}
run_gswap() {
  local name=$1 budget=$2; shift 2
  export GSWAP_RUNTIME_DIR=$work/run-$name
  "$gswapd" --gpu 0 --foreground --log-file "$work/$name.daemon.log" &
  daemon=$!
  for _ in $(seq 100); do ls "$GSWAP_RUNTIME_DIR"/*.sock >/dev/null 2>&1 && break; sleep 0.05; done
  GSWAP_BUDGET=$budget LD_PRELOAD=$lib "$mt" $MT_ARGS --iters "$ITERS" "$@" >"$work/$name.out" 2>&1 &
  local pid=$!
  local dumped=0
  while kill -0 "$pid" 2>/dev/null; do
    if ((dumped == 0)) && "$gswapctl" status --json >"$work/$name.status.json" 2>/dev/null &&
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if any(c["mode"]=="guided" and c["guided_iterations"]>=3 for g in d["gpus"] for c in g["clients"]) else 1)' "$work/$name.status.json"; then
      "$gswapctl" trace dump --pid "$pid" --out "$work/$name.trace.json" >/dev/null && dumped=1
    fi
    sleep 0.5
  done
  wait "$pid" || { echo "bench-recompute: minitrain failed: $(tail -3 "$work/$name.out")" >&2; exit 1; }
  kill "$daemon"; wait "$daemon" 2>/dev/null || true; daemon=
  ((dumped)) || echo "bench-recompute: $name never reached guided mode" >&2
}

echo "| budget | plans | steady step (s) | vs. no gswap | copied / iter (MiB) | recomputed / iter (MiB) | device stall (ms) | simulated step (s) | measured / simulated | checksum |"
echo "|---|---|---|---|---|---|---|---|---|---|"
"$mt" $MT_ARGS --iters "$ITERS" >"$work/plain.out"
peak=$(value peak_bytes "$work/plain.out")
base=$(value steady_step_seconds "$work/plain.out")
want=$(value checksum "$work/plain.out")
echo "| unconstrained (peak $peak B) | none | $base | 1.00 | 0 | 0 | 0 | | | $want |"
for frac in $FRACTIONS; do
  budget=$(python3 -c "print(int($peak * $frac))")
  for plans in swap-only hybrid; do
    extra=(); sim=(--no-recompute)
    [[ $plans == hybrid ]] && { extra=(--recompute); sim=(); }
    run_gswap "$plans-$frac" "$budget" "${extra[@]}"
    out=$work/$plans-$frac.out
    step=$(value steady_step_seconds "$out")
    copied=$(python3 -c "print(f'{($(field swapped_out "$out") + $(field swapped_in "$out")) / $ITERS / 2**20:.1f}')")
    recomputed=$(python3 -c "print(f'{$(sed -n 's/.*recomputed=\([0-9]*\).*/\1/p' "$out" | tail -1) / $ITERS / 2**20:.1f}')")
    stall=$(field device_stall_ms "$out")
    got=$(value checksum "$out")
    predicted=
    if [[ -f $work/$plans-$frac.trace.json ]]; then
      plan_budget=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print([c["plan_budget_bytes"] for g in d["gpus"] for c in g["clients"]][0])' "$work/$plans-$frac.status.json")
      predicted=$("$gswapctl" simulate --trace "$work/$plans-$frac.trace.json" --budget "$plan_budget" \
        --policy capuchin "${sim[@]}" --json | python3 -c 'import json,sys; print("%.3f" % (json.load(sys.stdin)["step_time_us"] / 1e6))')
    fi
    ratio=$(python3 -c "print(f'{$step / $base:.2f}')")
    vs=$([[ -n $predicted ]] && python3 -c "print(f'{$step / $predicted:.2f}')" || echo "-")
    mark=$([[ $got == "$want" ]] && echo "$got (same)" || echo "$got (DIFFERENT)")
    echo "| ${frac} of peak | $plans | $step | $ratio | $copied | $recomputed | $stall | ${predicted:--} | $vs | $mark |"
  done
done
