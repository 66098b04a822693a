#!/usr/bin/env bash
# Scenario: gswapd up, minitrain under libgswap.so at three quarters of its peak; `gswapctl status --json` lists
# the client with its counters, the daemon measures an iteration and the library follows the plan
# made from it (mode guided); `trace dump` writes that iteration with measured durations, kernel
# names and the measured link bandwidth; `policy dump` shows the plan; the run's checksum matches
# a run without gswap.
source "$(dirname "$0")/lib.sh"
TRAIN_ARGS=(--layers 3 --width 256 --batch 2048 --iters 200 --streams 2)
ref=$(reference_checksum)
peak=$(awk '/^peak_bytes:/ {print $2}' "$RT/ref.out")
start_daemon "$RT/daemon.log"
start_train "$RT/train.out" GSWAP_BUDGET=$((peak * 3 / 4))
wait_for "the client in gswapctl status" 30 \
  "status_has $TRAIN_PID 'c[\"events\"] > 0 and c[\"budget_bytes\"] > 0 and c[\"peak_bytes\"] > 0'"
"$GSWAPCTL" status | tee "$RT/status.txt"
grep -q "$TRAIN_PID" "$RT/status.txt" || fail "human status lacks the client"
wait_for "the plan to be followed" 60 "status_has $TRAIN_PID 'c[\"mode\"] == \"guided\"'"
"$GSWAPCTL" trace dump --pid "$TRAIN_PID" --out "$RT/trace.json" || fail "trace dump failed"
python3 - "$RT/trace.json" <<'PY' || fail "trace dump wrote no usable trace"
import json, sys
t = json.load(open(sys.argv[1]))
assert t["format"] == "gswap-trace", t.get("format")
assert len(t["launches"]) > 0 and len(t["regions"]) > 0, "empty trace"
kernels = [l for l in t["launches"] if l["kernel"].startswith("mt_")]
assert kernels, "no kernel names: %s" % {l["kernel"] for l in t["launches"]}
assert all(l["dur_us"] > 0 for l in kernels), "kernels without a measured duration"
assert t["device"]["h2d_bytes_per_s"] != 25e9 and t["device"]["d2h_bytes_per_s"] != 25e9, t["device"]
PY
"$GSWAPCTL" policy dump --pid "$TRAIN_PID" --json >"$RT/policy.json" || fail "policy dump failed"
python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["clients"][0]; assert c["iteration_length"] > 0 and c["mode"] == "guided" and c["entries"], c' \
  "$RT/policy.json" || fail "no plan: $(cat "$RT/policy.json")"
wait "$TRAIN_PID" || fail "minitrain failed under gswap: $(tail -n 5 "$RT/train.out")"
got=$(checksum_of "$RT/train.out")
[[ -n $ref && $got == "$ref" ]] || fail "checksum $got differs from the reference $ref"
# The client is reaped when it exits.
wait_for "the client to be reaped" 10 "! status_has $TRAIN_PID"
grep -q "client pid $TRAIN_PID .*disconnected" "$RT/daemon.log" || fail "no disconnect line in the log"
echo "PASS status"
