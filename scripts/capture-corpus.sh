#!/usr/bin/env bash
# capture-corpus.sh: captures iterations of real programs under gswapd, on the simulated GPU, into
# policy/corpus/ (the captured traces policy_corpus_test holds the planner to).
#
#   scripts/capture-corpus.sh [BUILD_DIR] [OUT_DIR]
#
# Each program runs under a fresh gswapd with libgswap preloaded and the link throttled, at a
# budget below its peak so that gswap swaps while the daemon measures; once gswapd has a measured
# iteration, `gswapctl trace dump` writes it as a gswap-trace file: kernel names, measured
# durations, the measured link, the program's own copies and, with --recompute, what each
# registered region costs to recompute. Timings are the simulated GPU's, so each capture differs
# a little from the last; the files in policy/corpus/ are one such capture.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-${GSWAP_BUILD_DIR:-$ROOT/build}}
OUT=${2:-$ROOT/policy/corpus}
BPS=${BPS:-200e6}

for f in bin/gswapd bin/gswapctl interpose/libgswap.so tests/workloads/minitrain \
  tests/workloads/shuffled_train; do
  [[ -e $BUILD/$f ]] || { echo "capture-corpus: $BUILD/$f is not built (scripts/build.sh)" >&2; exit 1; }
done
mkdir -p "$OUT"
WORK=$(mktemp -d)
DAEMON=
cleanup() {
  [[ -n $DAEMON ]] && kill "$DAEMON" 2>/dev/null && wait "$DAEMON" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

export LD_LIBRARY_PATH=$BUILD/tests/simcuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export SIMCUDA_CAPACITY=4GiB SIMCUDA_H2D_BPS=$BPS SIMCUDA_D2H_BPS=$BPS
unset GSWAP_BUDGET GSWAP_DAEMON GSWAP_CONFIG LD_PRELOAD GSWAP_TIMELINE

# peak NAME CMD...: the program's peak bytes without gswap (its "peak_bytes:" line).
peak() {
  "$@" | awk '/^peak_bytes:/ { print $2 }'
}

# capture NAME FRACTION CMD...: runs CMD under a fresh gswapd at FRACTION of its peak and writes
# its first measured iteration to OUT/NAME.json.
capture() {
  local name=$1 fraction=$2
  shift 2
  local p
  p=$(peak "$@")
  [[ -n $p ]] || { echo "capture-corpus: $1 printed no peak_bytes" >&2; exit 1; }
  local budget
  budget=$(awk -v p="$p" -v f="$fraction" 'BEGIN { printf "%d", p * f }')
  local rt=$WORK/$name
  mkdir -p "$rt"
  GSWAP_RUNTIME_DIR=$rt "$BUILD/bin/gswapd" --foreground --log-file "$rt/gswapd.log" &
  DAEMON=$!
  for _ in $(seq 100); do
    compgen -G "$rt/*.sock" >/dev/null && break
    sleep 0.05
  done
  GSWAP_RUNTIME_DIR=$rt GSWAP_BUDGET=$budget LD_PRELOAD=$BUILD/interpose/libgswap.so \
    "$@" >"$rt/out.txt" 2>&1 &
  local prog=$! got=
  while kill -0 "$prog" 2>/dev/null; do
    if GSWAP_RUNTIME_DIR=$rt "$BUILD/bin/gswapctl" trace dump --pid "$prog" \
      --out "$rt/trace.json" >/dev/null 2>&1; then
      got=1
      break
    fi
    sleep 0.2
  done
  wait "$prog" || { echo "capture-corpus: $name failed:" >&2; tail "$rt/out.txt" >&2; exit 1; }
  kill "$DAEMON"
  wait "$DAEMON" || true
  DAEMON=
  [[ -n $got ]] || { echo "capture-corpus: $name ended before gswapd had an iteration" >&2; exit 1; }
  cp "$rt/trace.json" "$OUT/$name.json"
  echo "capture-corpus: $OUT/$name.json ($(stat -c %s "$OUT/$name.json") bytes, budget $budget of $p)"
}

MT=$BUILD/tests/workloads/minitrain
ST=$BUILD/tests/workloads/shuffled_train
export SIMCUDA_GRANULARITY=64KiB  # activations of these sizes become regions
capture minitrain-6x512 0.5 "$MT" --layers 6 --width 512 --batch 512 --iters 12
capture minitrain-recompute-2streams 0.5 "$MT" --layers 6 --width 512 --batch 512 --iters 12 \
  --recompute --streams 2
capture minitrain-async-alloc 0.6 "$MT" --layers 4 --width 512 --batch 1024 --iters 12 --async-alloc
capture shuffled-train 0.5 "$ST" --dims 512,512,512,512 --batch 512 --iters 12
