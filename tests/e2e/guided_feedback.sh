#!/usr/bin/env bash
# Scenario: the feedback loop on a throttled link (simcuda's copies at 400 MB/s each way, where the
# simulator says every restore of the plan can be hidden). Restores that land after their
# back-access are reported per plan entry; gswapd moves their triggers earlier and republishes,
# and within a bounded number of guided iterations the device no longer waits for restores
# (nearly). A trace dumped meanwhile has measured kernel durations, real kernel names and the
# measured link bandwidth, and the simulator runs on it, and on the plan the library follows.
#
# What "nearly" allows, and why: on a shared 2-core machine simcuda's kernel threads, the swapper
# and the link's memcpys compete for the CPUs, so a copy sometimes takes longer than the link
# allows and a restore lands a little late by chance (a restore late by 1 ns counts as late; 1% to
# 4% of them were). So the bound is on what lateness costs: over the last guided iterations the
# device stood still for restores at most 4% of the time. Alone that noise cost 0.0% to 0.8%; a
# loop that does not converge costs more (at 200 MB/s, where the plan itself cannot hide its
# restores: 5.2% to 7.8%, three restores in four late). Until the library took the order points of
# frees and planned swap-outs where the program makes them (Nov 26), restores that take freed
# memory started late, and a plan that restores the labels with no slack in the simulator (about
# one search in three) was late in nearly every iteration at 1.8% to 2.5%; since, in nine runs,
# 0.0% to 0.7% (one run's plan still late in most iterations, 20 restores of 28). Beside another
# test (the Python wheel's build) the first measured iteration took twice as long as the
# iterations planned for, so CTest runs this scenario alone (RUN_SERIAL).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/guided_lib.sh"
export SIMCUDA_H2D_BPS=400e6 SIMCUDA_D2H_BPS=400e6
MT=(--layers 8 --width 256 --batch 2048 --iters 110)
peak=$(peak_of "$RT/ref.out" "$MINITRAIN" "${MT[@]}")
ref=$(checksum_of "$RT/ref.out")
start_daemon "$RT/daemon.log"
start_prog "$RT/train.out" GSWAP_BUDGET=$((peak / 2)) "$MINITRAIN" "${MT[@]}"
wait_for "the plan to be followed" 40 "status_has $TRAIN_PID 'c[\"mode\"] == \"guided\"'"
# Counters over time: time, guided iterations, late restores, prefetches, device stall. One poller
# for the whole run: a python3 started every quarter second would take CPU from the run it
# watches.
python3 - "$GSWAPCTL" "$TRAIN_PID" "$RT/counters.txt" "$RT/trace.json" "$RT/plan_budget" \
  "$RT/plan.json" <<'PY' ||
import json, os, subprocess, sys, time
ctl, pid, counters, trace, budget_file, plan = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]
dumped = False

def running():
    try:
        return open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

with open(counters, "w") as out:
    while running():
        try:
            status = json.loads(subprocess.run([ctl, "status", "--json"], capture_output=True,
                                               timeout=5).stdout)
        except (ValueError, subprocess.TimeoutExpired):
            status = {"gpus": []}
        for g in status.get("gpus", []):
            for c in g["clients"]:
                if c["pid"] != pid or c["mode"] != "guided":
                    continue
                print(time.monotonic_ns(), c["guided_iterations"], c["late_restores"],
                      c["prefetches"], c["device_stall_ns"], file=out, flush=True)
                if not dumped and c["guided_iterations"] >= 20:
                    r = subprocess.run([ctl, "trace", "dump", "--pid", str(pid), "--out", trace,
                                        "--plan-out", plan],
                                       capture_output=True, text=True, timeout=30)
                    if r.returncode != 0:
                        sys.exit("gswapctl trace dump failed: " + r.stderr.strip())
                    open(budget_file, "w").write(str(c["plan_budget_bytes"]))
                    dumped = True
        time.sleep(0.25)
PY
  fail "polling gswapctl failed (above)"
wait "$TRAIN_PID" || fail "minitrain failed under gswap: $(tail -n 5 "$RT/train.out")"
[[ $(checksum_of "$RT/train.out") == "$ref" ]] || fail "checksum differs from the reference $ref"
[[ -s $RT/plan_budget ]] ||
  fail "the run ended before 20 guided iterations: $(grep summary "$RT/train.out")"
plan_budget=$(cat "$RT/plan_budget")

python3 - "$RT/counters.txt" <<'PY' || fail "the device kept waiting for restores: $(tail -n 3 "$RT/counters.txt")"
import sys
rows = [tuple(map(int, l.split()[:5])) for l in open(sys.argv[1]) if l.strip()]
first_guided = rows[0][1]
# After 40 guided iterations the loop has had time to act; look at what follows.
head = [r for r in rows if r[1] < first_guided + 40]
tail = [r for r in rows if r[1] >= first_guided + 40]
assert len(tail) >= 2 and tail[-1][1] - tail[0][1] >= 20, "too few guided iterations: %s" % rows[-1:]
def delta(rs):
    return [rs[-1][i] - rs[0][i] for i in range(5)]
for name, rs in (("first", head), ("next", tail)):
    ns, its, late, prefetches, stall = delta(rs)
    print("%s %d guided iterations: %d late restores of %d prefetches, the device waited %.2f%% "
          "of %.1f s" % (name, its, late, prefetches, 100 * stall / max(ns, 1), ns / 1e9))
ns, its, late, prefetches, stall = delta(tail)
assert prefetches > 0, "no prefetch in the window"
assert stall <= 0.04 * ns, "the device waited for restores %.1f%% of the time" % (100 * stall / ns)
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
# The plan the library was following, simulated as it is.
"$GSWAPCTL" simulate --trace "$RT/trace.json" --budget "$plan_budget" --plan "$RT/plan.json" \
  --no-recompute --json >"$RT/followed.json" || fail "gswapctl simulate --plan failed on the dumped plan"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p=json.load(open(sys.argv[2])); assert d["step_time_us"] > 0 and d["plan_entries"] == len(p["entries"]) > 0, (d, p)' \
  "$RT/followed.json" "$RT/plan.json" || fail "the followed plan: $(cat "$RT/followed.json")"
echo "$(grep -o 'mode=.*' "$RT/train.out")"
echo "PASS guided_feedback"
