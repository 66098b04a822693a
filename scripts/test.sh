#!/usr/bin/env bash
# The test command: set up, build, then run every test this machine can run.
# GPU-labelled tests run only where an NVIDIA GPU answers nvidia-smi.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup-python.sh"  # the Python tests' environment (tests/python)
"$root/scripts/build.sh"
build=${GSWAP_BUILD_DIR:-$root/build}
exclude=(-LE gpu)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  exclude=()
  echo "test: NVIDIA GPU found, running gpu-labelled tests too"
fi
cd "$build"
ctest --output-on-failure -j "${GSWAP_TEST_JOBS:-2}" "${exclude[@]}" "$@"
