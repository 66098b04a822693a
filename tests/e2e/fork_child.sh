#!/usr/bin/env bash
# Scenario: a program under gswapd forks a child that never uses CUDA (tests/preload/edge.cpp,
# fork). The child is no client of gswapd: only the parent registers, its share stays whole, and
# the parent's data is intact.
source "$(dirname "$0")/lib.sh"
: "${EDGE:?}" "${PRELOAD_MODULE:?}"
start_daemon "$RT/daemon.log" GSWAP_GPU_BUDGET=64MiB
env GSWAP_DAEMON=connect GSWAP_LOG=info LD_PRELOAD="$LIBGSWAP" "$EDGE" "$PRELOAD_MODULE" fork 6 \
  >"$RT/fork.out" 2>&1 || fail "edge fork failed: $(cat "$RT/fork.out")"
grep -q "parent data verified" "$RT/fork.out" || fail "edge fork: $(cat "$RT/fork.out")"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
clients=$(grep -c "client pid [0-9]* (edge[^)]*) connected" "$RT/daemon.log" || true)
[[ $clients == 1 ]] || fail "$clients clients registered, not the parent alone: $(grep 'client pid' "$RT/daemon.log")"
if grep -q "new budget 32.00 MiB" "$RT/fork.out"; then fail "the parent's share was halved"; fi
echo "PASS fork_child"
