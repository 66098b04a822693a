#!/usr/bin/env bash
# Scenario: the feedback loop on a throttled link (simcuda's copies at 400 MB/s each way, where the
# simulator says every restore of the plan can be hidden). Restores that land after their
# back-access are reported per plan entry; gswapd moves their triggers earlier and republishes,
# and within a bounded number of guided iterations late restores fall to (nearly) none. A trace
# dumped meanwhile has measured kernel durations, real kernel names and the measured link
# bandwidth, and the simulator runs on it.
#
# What "nearly" allows, and why: on a shared 2-core machine simcuda's kernel threads, the swapper
# and the link's sleeps compete for the CPUs, so a restore is occasionally late by chance; the
# bound below (late restores at most 1 + 5% of the prefetches over the last guided iterations)
# fails a loop that does not converge (at 200 MB/s, where the plan itself cannot hide its
# restores, a quarter to a half of them stay late) and tolerates that noise.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/guided_lib.sh"
export SIMCUDA_H2D_BPS=400e6 SIMCUDA_D2H_BPS=400e6
MT=(--layers 8 --width 256 --batch 2048 --iters 110)
peak=$(peak_of "$RT/ref.out" "$MINITRAIN" "${MT[@]}")
ref=$(checksum_of "$RT/ref.out")
start_daemon "$RT/daemon.log"
start_prog "$RT/train.out" GSWAP_BUDGET=$((peak / 2)) "$MINITRAIN" "${MT[@]}"
wait_for "the plan to be followed" 40 "status_has $TRAIN_PID 'c[\"mode\"] == \"guided\"'"
# Counters over time: guided iterations, late restores, prefetches.
dumped=0
while kill -0 "$TRAIN_PID" 2>/dev/null; do
  row=$("$GSWAPCTL" status --json 2>/dev/null | python3 -c '
import json, sys
for g in json.load(sys.stdin)["gpus"]:
    for c in g["clients"]:
        if c["pid"] == int(sys.argv[1]) and c["mode"] == "guided":
            print(c["guided_iterations"], c["late_restores"], c["prefetches"], c["plan_budget_bytes"])
' "$TRAIN_PID" 2>/dev/null) || true
  [[ -n $row ]] && echo "$row" >>"$RT/counters.txt"
  if ((dumped == 0)) && [[ -n $row ]] && (($(cut -d' ' -f1 <<<"$row") >= 20)); then
    "$GSWAPCTL" trace dump --pid "$TRAIN_PID" --out "$RT/trace.json" >/dev/null || fail "trace dump failed"
    plan_budget=$(cut -d' ' -f4 <<<"$row")
    dumped=1
  fi
  sleep 0.25
done
wait "$TRAIN_PID" || fail "minitrain failed under gswap: $(tail -n 5 "$RT/train.out")"
[[ $(checksum_of "$RT/train.out") == "$ref" ]] || fail "checksum differs from the reference $ref"
((dumped)) || fail "the run ended before 20 guided iterations: $(grep summary "$RT/train.out")"

python3 - "$RT/counters.txt" <<'PY' || fail "late restores did not fall: $(tail -n 3 "$RT/counters.txt")"
import sys
rows = [tuple(map(int, l.split()[:3])) for l in open(sys.argv[1]) if l.strip()]
first_guided = rows[0][0]
# After 40 guided iterations the loop has had time to act; look at what follows.
tail = [r for r in rows if r[0] >= first_guided + 40]
assert len(tail) >= 2 and tail[-1][0] - tail[0][0] >= 20, "too few guided iterations: %s" % rows[-1:]
its, late, prefetches = (tail[-1][i] - tail[0][i] for i in range(3))
head = [r for r in rows if r[0] < first_guided + 40]
print("first %d guided iterations: %d late restores of %d prefetches; next %d: %d of %d"
      % (head[-1][0] - rows[0][0], head[-1][1] - rows[0][1], head[-1][2] - rows[0][2],
         its, late, prefetches))
assert prefetches > 0, "no prefetch in the window"
assert late <= 1 + prefetches // 20, "%d late restores of %d prefetches" % (late, prefetches)
PY

# The trace: measured durations, kernel names, the link as throttled, and a simulation of it.
python3 - "$RT/trace.json" <<'PY' || fail "the dumped trace lacks measurements"
import json, sys
t = json.load(open(sys.argv[1]))
kernels = [l for l in t["launches"] if l["kernel"].startswith("mt_")]
assert kernels and all(l["dur_us"] > 0 for l in kernels), "kernels without a duration"
assert {"mt_linear_fwd", "mt_grad_weight", "mt_sgd"} <= {l["kernel"] for l in kernels}
# Measured, not the planner's default (25 GB/s): simcuda's copies also take CPU time, and beside
# other tests on 2 cores they were seen as slow as 0.57x the throttle.
for k in ("h2d_bytes_per_s", "d2h_bytes_per_s"):
    bw = t["device"][k]
    assert 0.4 * 400e6 <= bw <= 1.1 * 400e6, "%s = %g, the link runs at 400e6" % (k, bw)
PY
"$GSWAPCTL" simulate --trace "$RT/trace.json" --budget "$plan_budget" --policy capuchin \
  --no-recompute --json >"$RT/sim.json" || fail "gswapctl simulate failed on the dumped trace"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["step_time_us"] > 0 and d["plan_fits"], d' \
  "$RT/sim.json" || fail "the simulation of the dumped trace: $(cat "$RT/sim.json")"
echo "$(grep -o 'mode=.*' "$RT/train.out")"
echo "PASS guided_feedback"
