#!/usr/bin/env bash
# Scenario: gswapd up, minitrain under libgswap.so; `gswapctl status --json` lists the client with
# its counters, the daemon finds its iteration, `trace dump` writes it as a policy trace and
# `policy dump` shows the plan; the run's checksum matches a run without gswap.
source "$(dirname "$0")/lib.sh"
TRAIN_ARGS=(--layers 3 --width 256 --batch 2048 --iters 60 --streams 2)
ref=$(reference_checksum)
start_daemon "$RT/daemon.log"
start_train "$RT/train.out"
wait_for "the client in gswapctl status" 30 \
  "status_has $TRAIN_PID 'c[\"events\"] > 0 and c[\"budget_bytes\"] > 0 and c[\"peak_bytes\"] > 0'"
"$GSWAPCTL" status | tee "$RT/status.txt"
grep -q "$TRAIN_PID" "$RT/status.txt" || fail "human status lacks the client"
wait_for "the iteration to be found" 30 "status_has $TRAIN_PID 'c[\"mode\"] == \"measured\"'"
"$GSWAPCTL" trace dump --pid "$TRAIN_PID" --out "$RT/trace.json" || fail "trace dump failed"
python3 - "$RT/trace.json" <<'PY' || fail "trace dump wrote no usable trace"
import json, sys
t = json.load(open(sys.argv[1]))
assert t["format"] == "gswap-trace", t.get("format")
assert len(t["launches"]) > 0 and len(t["regions"]) > 0, "empty trace"
PY
"$GSWAPCTL" policy dump --pid "$TRAIN_PID" --json >"$RT/policy.json" || fail "policy dump failed"
python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["clients"][0]; assert c["iteration_length"] > 0 and c["planner"].startswith("capuchin"), c' \
  "$RT/policy.json" || fail "no plan: $(cat "$RT/policy.json")"
wait "$TRAIN_PID" || fail "minitrain failed under gswap: $(tail -n 5 "$RT/train.out")"
got=$(checksum_of "$RT/train.out")
[[ -n $ref && $got == "$ref" ]] || fail "checksum $got differs from the reference $ref"
# The client is reaped when it exits.
wait_for "the client to be reaped" 10 "! status_has $TRAIN_PID"
grep -q "client pid $TRAIN_PID .*disconnected" "$RT/daemon.log" || fail "no disconnect line in the log"
echo "PASS status"
