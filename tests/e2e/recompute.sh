#!/usr/bin/env bash
# Scenario: recomputation end to end. minitrain --recompute registers its layer outputs with
# gswap; with gswapd up, at half its peak and a slow link (recomputing is cheaper than copying),
# the daemon's plan drops activations and the library recomputes them through minitrain's
# callback: recomputations are counted in status, the trace dump carries the registrations, and
# the checksum matches a run without gswap. The same program without gswap registers nothing and
# gives the same checksum too.
source "$(dirname "$0")/lib.sh"
export SIMCUDA_GRANULARITY=64KiB SIMCUDA_H2D_BPS=20e6 SIMCUDA_D2H_BPS=20e6
TRAIN_ARGS=(--layers 4 --width 256 --batch 1024 --iters ${E2E_ITERS:-70} --streams 2 --recompute)
ref=$(reference_checksum)
grep -q "recompute: gswap not loaded" "$RT/ref.out" || fail "without gswap: $(cat "$RT/ref.out")"
grep -q "recompute_registered: 0" "$RT/ref.out" || fail "registered without gswap"
peak=$(awk '/^peak_bytes:/ {print $2}' "$RT/ref.out")
start_daemon "$RT/daemon.log"
start_train "$RT/train.out" GSWAP_BUDGET=$((peak * 7 / 10)) GSWAP_SUMMARY=1
wait_for "the plan to be followed" 60 "status_has $TRAIN_PID 'c[\"mode\"] == \"guided\"'"
wait_for "recomputations" 60 "status_has $TRAIN_PID 'c[\"recomputes\"] > 0 and c[\"planned_drops\"] > 0'"
echo "recomputing after ${SECONDS}s"
"$GSWAPCTL" policy dump --pid "$TRAIN_PID" >"$RT/policy.txt" || fail "policy dump failed"
grep -q "planned recomputations; [0-9]* recomputations run" "$RT/policy.txt" ||
  fail "policy dump does not count recomputations: $(cat "$RT/policy.txt")"
"$GSWAPCTL" trace dump --pid "$TRAIN_PID" --out "$RT/trace.json" || fail "trace dump failed"
python3 - "$RT/trace.json" <<'PY' || fail "the trace dump lacks the registrations or the copies' timings"
import json, sys
t = json.load(open(sys.argv[1]))
ids = {r["id"] for r in t["regions"]}
rc = [r for r in t["regions"] if r.get("recompute")]
assert rc, "no region carries a recompute field"
for r in rc:
    assert r["recompute"]["cost_us"] > 0, r
    assert r["recompute"]["sources"] and set(r["recompute"]["sources"]) <= ids, r
# The program's own copies are timed like its kernels (each input batch crosses the slow link).
copies = [l for l in t["launches"] if l["kernel"] == "memcpy"]
assert copies and all(l.get("dur_us", 0) > 1000 for l in copies), copies
PY
wait "$TRAIN_PID" || fail "minitrain failed under gswap: $(tail -n 5 "$RT/train.out")"
got=$(checksum_of "$RT/train.out")
[[ -n $ref && $got == "$ref" ]] || fail "checksum $got differs from the reference $ref"
grep -Eq "recompute_calls: [1-9]" "$RT/train.out" || fail "minitrain's callback never ran"
grep -Eq "gswap summary: .* recomputes=[1-9][0-9]* .*recompute_failures=0" "$RT/train.out" ||
  fail "summary: $(grep 'gswap summary' "$RT/train.out")"
echo "PASS recompute"
