#!/usr/bin/env bash
# Scenario: a program's first cuMemGetInfo after cuInit under gswapd already reports its share
# (tests/preload/first_meminfo.cpp), not the whole device, and an out-of-memory line names the
# budget as gswapd's share. A daemon that hangs delays cuInit by at most the library's bounded
# wait and the program's exit not at all, and gswapctl says it did not answer.
source "$(dirname "$0")/lib.sh"
: "${FIRST_MEMINFO:?}" "${EDGE:?}" "${PRELOAD_MODULE:?}"
start_daemon "$RT/daemon.log" GSWAP_GPU_BUDGET=64MiB
run() { env GSWAP_DAEMON=connect LD_PRELOAD="$LIBGSWAP" "$FIRST_MEMINFO"; }
for i in $(seq 10); do
  out=$(run) || fail "first_meminfo failed: $out"
  [[ $out == "total 67108864 free 67108864 "* ]] || fail "run $i: $out (the share is 64 MiB)"
done
# A call that needs more than the share: its out-of-memory line says the budget is gswapd's share.
env GSWAP_DAEMON=connect LD_PRELOAD="$LIBGSWAP" "$EDGE" "$PRELOAD_MODULE" oom 40 >"$RT/oom.out" 2>&1 ||
  fail "edge oom failed: $(cat "$RT/oom.out")"
grep -q "needs 120.00 MiB on the device at once, more than the budget 64.00 MiB (gswapd's share)" \
  "$RT/oom.out" || fail "edge oom: $(cat "$RT/oom.out")"
# A daemon that accepts and never answers: the program starts anyway, within the bounded wait
# (250 ms) and scheduling slack, and runs passive with its own budget.
kill -STOP "$DAEMON_PID"
t0=$(date +%s%N)
out=$(env GSWAP_BUDGET=32MiB GSWAP_DAEMON=connect LD_PRELOAD="$LIBGSWAP" "$FIRST_MEMINFO" 2>&1) ||
  fail "first_meminfo failed beside a stopped daemon: $out"
wall_ms=$((($(date +%s%N) - t0) / 1000000))
# Nor does it wait out the handshake's 2 s timeout as it exits (or warn of it): 0.3 s on a quiet
# machine, at least 2 s when it waits; 1.9 s leaves room for a loaded one.
((wall_ms < 1900)) || fail "first_meminfo took $wall_ms ms beside a stopped daemon"
[[ $out != *warn* ]] || fail "beside a stopped daemon: $out"
# gswapctl gives up after its 10 s timeout and says so.
if "$GSWAPCTL" status >"$RT/ctl.out" 2>&1; then fail "gswapctl status answered by a stopped daemon"; fi
kill -CONT "$DAEMON_PID"
grep -q "gswapd did not answer within 10 s" "$RT/ctl.out" || fail "gswapctl status: $(cat "$RT/ctl.out")"
[[ $out == "total 33554432 free 33554432 "* ]] || fail "beside a stopped daemon: $out"
ms=${out##* init_ms }
python3 -c "import sys; sys.exit(0 if float('$ms') < 1500 else 1)" ||
  fail "cuInit took $ms ms beside a stopped daemon"
echo "PASS first_meminfo"
