#!/usr/bin/env bash
# Scenario: minitrain allocates its parameters before any gswapd runs; the daemon started later
# (and then restarted) must still know those regions, because the library re-announces its live
# regions on every connection. Checked in the `trace dump`: the parameter and gradient regions
# (the only ones of W*W*4 bytes, allocated once before the first iteration) are in it.
source "$(dirname "$0")/lib.sh"
W=256
L=3
# A threshold below the parameters' size makes them regions; many iterations keep the run alive
# while the daemons find an iteration (it is killed once the checks are done).
TRAIN_ARGS=(--layers $L --width $W --batch 2048 --iters 100000 --streams 2)
export GSWAP_SWAP_THRESHOLD=64KiB

# trace_has_parameters LABEL: the trace of the running client holds all 2*L parameter regions.
trace_has_parameters() {
  local label=$1
  wait_for "the iteration to be found ($label)" 60 "status_has $TRAIN_PID 'c[\"iteration_length\"] > 0'"
  "$GSWAPCTL" trace dump --pid "$TRAIN_PID" --out "$RT/trace-$label.json" || fail "trace dump failed ($label)"
  python3 - "$RT/trace-$label.json" $((W * W * 4)) $((2 * L)) <<'PY' || fail "parameters missing from the $label trace"
import json, sys
t = json.load(open(sys.argv[1]))
w_bytes, want = int(sys.argv[2]), int(sys.argv[3])
params = [r for r in t["regions"] if r["bytes"] == w_bytes]
print(f"{len(params)} parameter regions of {len(t['regions'])} in the trace")
assert len(params) == want, [r["bytes"] for r in t["regions"]]
first = min(l["seq"] for l in t["launches"])
assert all(r["alloc_seq"] < first for r in params), "parameters allocated inside the iteration?"
PY
}

# No daemon yet: the library runs passive and retries in the background.
start_train "$RT/train.out" GSWAP_DAEMON=connect
wait_for "the first iteration" 60 "grep -q 'loss: iter 0' $RT/train.out"
start_daemon "$RT/daemon1.log"
wait_for "the client in the late daemon" 30 "status_has $TRAIN_PID"
trace_has_parameters late
# Nothing to move at this budget, so no plan to follow: --plan-out says so and writes nothing.
if "$GSWAPCTL" trace dump --pid "$TRAIN_PID" --out "$RT/noplan-trace.json" \
  --plan-out "$RT/noplan.json" 2>"$RT/noplan.err"; then
  fail "trace dump --plan-out succeeded for a client that follows no plan"
fi
grep -q "follows no plan" "$RT/noplan.err" || fail "trace dump --plan-out: $(cat "$RT/noplan.err")"
[[ ! -e $RT/noplan.json && ! -e $RT/noplan-trace.json ]] || fail "trace dump --plan-out wrote files"

# A restart: the new daemon must learn the regions that stayed alive across it.
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
start_daemon "$RT/daemon2.log"
wait_for "the client in the restarted daemon" 30 "status_has $TRAIN_PID"
trace_has_parameters restarted

kill -0 "$TRAIN_PID" 2>/dev/null || fail "minitrain died: $(tail -n 5 "$RT/train.out")"
echo "PASS late_daemon"
