#!/usr/bin/env bash
# The demo: set up, build, then train the reference workload (minitrain) on the simulated GPU, first
# without gswap and then under a device-memory budget below its footprint, and compare checksums.
# Where an NVIDIA GPU is present it does the same on the real GPU with the CUDA kernels.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
build=${GSWAP_BUILD_DIR:-$root/build}
minitrain=$build/tests/workloads/minitrain
simcuda_dir=$build/tests/simcuda
libgswap=$build/interpose/libgswap.so
args=(--layers 12 --width 256 --batch 16384 --iters 3 --streams 2)

run_pair() {  # $1: label, rest: environment for the driver
  local label=$1; shift
  echo "== $label: minitrain ${args[*]} without gswap"
  local plain; plain=$(env "$@" "$minitrain" "${args[@]}")
  echo "$plain"
  local peak; peak=$(awk '/^peak_bytes:/ {print $2}' <<<"$plain")
  local want; want=$(awk '/^checksum:/ {print $2}' <<<"$plain")
  if [[ ! -f $libgswap ]]; then
    echo "(libgswap.so is not built; nothing more to show)"
    return
  fi
  local budget=$((peak / 3))
  echo "== $label: the same under gswap, budget $budget bytes (a third of the peak)"
  local swapped; swapped=$(env "$@" GSWAP_BUDGET=$budget GSWAP_LOG=info LD_PRELOAD=$libgswap "$minitrain" "${args[@]}")
  echo "$swapped"
  local got; got=$(awk '/^checksum:/ {print $2}' <<<"$swapped")
  if [[ $got == "$want" ]]; then
    echo "== $label: checksums match ($got)"
  else
    echo "== $label: CHECKSUM MISMATCH: $want without gswap, $got with" >&2
    exit 1
  fi
}

# Simulated GPU: 2 GiB of device memory, PCIe-like link speeds.
run_pair "simulated GPU" LD_LIBRARY_PATH="$simcuda_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  SIMCUDA_CAPACITY=2GiB SIMCUDA_H2D_BPS=25e9 SIMCUDA_D2H_BPS=25e9

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  run_pair "real GPU ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))" GSWAP_DEMO_REAL=1
else
  echo "== no NVIDIA GPU here: the real-GPU run is skipped"
fi
