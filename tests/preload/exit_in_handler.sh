#!/usr/bin/env bash
# exit_in_handler.sh LIBGSWAP EDGE MODULE: `edge exit_in_handler` under libgswap at 30 signal
# delays. Its SIGTERM handler calls exit(), often while the main thread is inside a call under
# gswap that holds the library's state: every run must exit 0 within 10 s.
set -uo pipefail
lib=$1 edge=$2 module=$3
for i in $(seq 30); do
  out=$(EDGE_SIGNAL_MS=$((40 + 7 * i)) timeout 10 env LD_PRELOAD="$lib" GSWAP_BUDGET=6MiB \
    "$edge" "$module" exit_in_handler 2 2>&1)
  rc=$?
  ((rc == 124)) && { echo "FAIL: run $i hung at exit"; echo "$out" | tail -5; exit 1; }
  ((rc == 0)) || { echo "FAIL: run $i exited $rc"; echo "$out" | tail -5; exit 1; }
done
echo "PASS: 30 runs exited"
