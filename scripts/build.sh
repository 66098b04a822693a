#!/usr/bin/env bash
# Configures and builds gswap into build/ (or $GSWAP_BUILD_DIR). Runs setup first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
build=${GSWAP_BUILD_DIR:-$root/build}
jobs=${GSWAP_JOBS:-$(nproc)}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=${GSWAP_BUILD_TYPE:-RelWithDebInfo} >/dev/null
cmake --build "$build" -j "$jobs"
