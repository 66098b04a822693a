#!/usr/bin/env bash
# The demo: set up, build, then train the reference workload (minitrain) on the simulated GPU three
# times: without gswap, under gswap in passive mode (a budget of half its peak, no daemon: every
# restore on demand), and under gswap with the loop closed (GSWAP_DAEMON=spawn starts gswapd, which
# measures the first iterations, plans, and the library follows the plan: guided mode). It prints
# what the daemon does as it happens, the step times side by side and the three checksums, which
# must be equal. Where an NVIDIA GPU is present it also trains on the real GPU with the CUDA kernels,
# without gswap and under a third of the peak, and compares checksums.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
build=${GSWAP_BUILD_DIR:-$root/build}
minitrain=$build/tests/workloads/minitrain
simcuda_dir=$build/tests/simcuda
libgswap=$build/interpose/libgswap.so
gswapctl=$build/bin/gswapctl
work=$(mktemp -d /tmp/gswap-demo-XXXXXX)
cleanup() {
  # The daemon the library spawned records its pid in its lock file: stop it and wait until it is
  # gone, so that the demo leaves nothing running.
  local f d
  for f in "$work"/run/*.lock; do
    [[ -f $f ]] || continue
    d=$(head -c 20 "$f" | tr -dc 0-9)
    [[ -n $d ]] || continue
    kill "$d" 2>/dev/null || continue
    for _ in $(seq 50); do kill -0 "$d" 2>/dev/null || break; sleep 0.1; done
  done
  rm -rf "$work"
}
trap cleanup EXIT

value() { awk -v k="$1:" '$1 == k {print $2}' "$2" | tail -1; }
field() {  # a field of the gswap summary line, or - where there is none
  local v; v=$(grep -o "gswap summary:.*" "$2" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k {print $2}' || true)
  echo "${v:--}"
}

# --- simulated GPU ---------------------------------------------------------------------------------
# A 200 MB/s link each way makes copies matter next to simcuda's CPU kernels (the benchmark,
# docs/benchmarks.md, derives an H100-like ratio; this is the issue's demo configuration).
export LD_LIBRARY_PATH=$simcuda_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export SIMCUDA_CAPACITY=2GiB SIMCUDA_H2D_BPS=200e6 SIMCUDA_D2H_BPS=200e6
args=(--layers 12 --width 256 --batch 4096 --iters 12 --streams 2)

echo "== simulated GPU: minitrain ${args[*]} without gswap"
"$minitrain" "${args[@]}" >"$work/none.out"
grep -E '^(steady_step_seconds|peak_bytes|checksum):' "$work/none.out"
peak=$(value peak_bytes "$work/none.out")
budget=$((peak / 2))

if [[ ! -f $libgswap ]]; then
  echo "(libgswap.so is not built; nothing more to show)"
  exit 0
fi

echo
echo "== passive gswap: budget $budget bytes (half the peak), no daemon: every restore on demand"
GSWAP_DAEMON=off GSWAP_BUDGET=$budget LD_PRELOAD=$libgswap "$minitrain" "${args[@]}" >"$work/passive.out" 2>&1
grep -E '^(steady_step_seconds|checksum):|gswap summary' "$work/passive.out"

echo
echo "== guided gswap: the same budget; GSWAP_DAEMON=spawn starts gswapd, which measures, plans,"
echo "   and the library follows the plan"
export GSWAP_RUNTIME_DIR=$work/run
GSWAP_DAEMON=spawn GSWAP_BUDGET=$budget LD_PRELOAD=$libgswap "$minitrain" "${args[@]}" >"$work/guided.out" 2>&1 &
pid=$!
last=
while kill -0 "$pid" 2>/dev/null; do
  now=$("$gswapctl" status --json 2>/dev/null | python3 -c '
import json, sys
for g in json.load(sys.stdin)["gpus"]:
    for c in g["clients"]:
        if c["pid"] == int(sys.argv[1]):
            what = {"passive": "passive (no iteration known yet)",
                    "measured": "measured: kernels timed, iterations being found",
                    "guided": "guided: following plan generation %d (%s)" % (c["plan_generation"], c["planner"])}
            print(what.get(c["mode"], c["mode"]))
' "$pid" 2>/dev/null || true)
  if [[ -n $now && $now != "$last" ]]; then
    echo "   after $(grep -c '^step_seconds:' "$work/guided.out") iterations: $now"
    last=$now
  fi
  sleep 0.2
done
if ! wait "$pid"; then
  echo "== guided run failed:" >&2
  tail -5 "$work/guided.out" >&2
  exit 1
fi
grep -E '^(steady_step_seconds|checksum):|gswap summary' "$work/guided.out"

echo
echo "== side by side (steady step: median of the second half; the rest: whole run)"
base=$(value steady_step_seconds "$work/none.out")
printf '   %-9s %12s %9s %11s %13s %15s   %s\n' "" "steady step" "vs none" "whole run" "host stall" \
  "device stall" "checksum"
for m in none passive guided; do
  step=$(value steady_step_seconds "$work/$m.out")
  printf '   %-9s %11ss %8sx %10ss %10s ms %12s ms   %s\n' "$m" "$step" \
    "$(awk -v a="$step" -v b="$base" 'BEGIN {printf "%.2f", a / b}')" \
    "$(value train_seconds "$work/$m.out")" "$(field stall_ms "$work/$m.out")" \
    "$(field device_stall_ms "$work/$m.out")" "$(value checksum "$work/$m.out")"
done
want=$(value checksum "$work/none.out")
for m in passive guided; do
  if [[ $(value checksum "$work/$m.out") != "$want" ]]; then
    echo "== simulated GPU: CHECKSUM MISMATCH in the $m run" >&2
    exit 1
  fi
done
echo "== simulated GPU: checksums match ($want)"

# --- real GPU --------------------------------------------------------------------------------------
run_real() {  # $1: label, rest: environment for the driver
  local label=$1; shift
  local real_args=(--layers 12 --width 256 --batch 16384 --iters 3 --streams 2)
  echo "== $label: minitrain ${real_args[*]} without gswap"
  local plain; plain=$(env "$@" "$minitrain" "${real_args[@]}")
  echo "$plain"
  local peak; peak=$(awk '/^peak_bytes:/ {print $2}' <<<"$plain")
  local want; want=$(awk '/^checksum:/ {print $2}' <<<"$plain")
  local budget=$((peak / 3))
  echo "== $label: the same under gswap, budget $budget bytes (a third of the peak)"
  local swapped; swapped=$(env "$@" GSWAP_BUDGET=$budget GSWAP_LOG=info LD_PRELOAD=$libgswap "$minitrain" "${real_args[@]}")
  echo "$swapped"
  local got; got=$(awk '/^checksum:/ {print $2}' <<<"$swapped")
  if [[ $got == "$want" ]]; then
    echo "== $label: checksums match ($got)"
  else
    echo "== $label: CHECKSUM MISMATCH: $want without gswap, $got with" >&2
    exit 1
  fi
}

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  unset GSWAP_RUNTIME_DIR SIMCUDA_CAPACITY SIMCUDA_H2D_BPS SIMCUDA_D2H_BPS
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH#"$simcuda_dir"}
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH#:}
  run_real "real GPU ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))" GSWAP_DEMO_REAL=1
else
  echo "== no NVIDIA GPU here: the real-GPU run is skipped"
fi
