#!/usr/bin/env bash
# Scenario: what gswap shows people. minitrain under gswapd at half its peak, with GSWAP_TIMELINE:
# - `top --json` lists the client with the figures `status --json` shows around it, and rates;
# - `trace dump --timeline` writes a valid timeline (kernels per stream, swap-outs and restores,
#   memory counters) holding the swaps the library counted by then; `simulate --timeline` of the
#   dumped trace has the same device tracks and counters; `plot --pid` draws the plan budget and
#   the trace's peak where they belong;
# - an unknown pid and an unwritable output are one clear line and exit status 1, and an output
#   cut short is removed;
# - at exit, the library's own timeline is valid and holds the restores its summary counts (and the
#   swap-outs that completed: one cancelled while its copy ran is counted, not reported);
# - first, with no daemon: a timeline of allocations named with bytes that are not UTF-8, quotes
#   and control characters, and a name its record cuts, is UTF-8 JSON with the names escaped.
source "$(dirname "$0")/lib.sh"
: "${API_PROGRAM:?}" "${PRELOAD_MODULE:?}"
TESTS=$(cd "$(dirname "$0")/.." && pwd)
# A slow link makes the run last long enough (a few seconds) to be looked at while it runs.
export SIMCUDA_GRANULARITY=64KiB SIMCUDA_H2D_BPS=200e6 SIMCUDA_D2H_BPS=200e6

# Names as a program may give them (tests/preload/api.c): the timeline stays UTF-8 JSON.
GSWAP_DAEMON=off GSWAP_BUDGET=8MiB GSWAP_TIMELINE="$RT/names.json" LD_PRELOAD="$LIBGSWAP" \
  "$API_PROGRAM" present "$PRELOAD_MODULE" >"$RT/names.out" 2>&1 ||
  fail "the C API program failed: $(tail -n 5 "$RT/names.out")"
python3 "$TESTS/timeline_check.py" "$RT/names.json" >/dev/null ||
  fail "GSWAP_TIMELINE with odd allocation names is not valid"
python3 - "$RT/names.json" <<'PY' || fail "GSWAP_TIMELINE wrote the allocation names wrong"
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
names = {e["name"].split(" ", 1)[1] for e in doc["traceEvents"] if e.get("cat") in ("swap_out", "restore")}
want = {"weights", 'bad \\xff\\xfe "q" \\ \\x0a end', "x" * 38}  # the cut leaves U+00E9 out whole
assert want <= names, names
PY
TRAIN_ARGS=(--layers 3 --width 256 --batch 2048 --iters 60 --streams 2)
ref=$(reference_checksum)
peak=$(awk '/^peak_bytes:/ {print $2}' "$RT/ref.out")
start_daemon "$RT/daemon.log"
start_train "$RT/train.out" GSWAP_BUDGET=$((peak / 2)) GSWAP_SUMMARY=1 GSWAP_TIMELINE="$RT/lib.json"
wait_for "the plan to be followed" 60 \
  "status_has $TRAIN_PID 'c[\"mode\"] == \"guided\" and c[\"swapped_out_bytes\"] > 0'"

# top --json against status --json taken just before and just after it.
"$GSWAPCTL" status --json >"$RT/s1.json" || fail "status failed"
"$GSWAPCTL" top --json --interval 0.5 >"$RT/top.json" || fail "top --json failed"
"$GSWAPCTL" status --json >"$RT/s2.json" || fail "status failed"
python3 - "$RT/s1.json" "$RT/top.json" "$RT/s2.json" "$TRAIN_PID" <<'PY' || fail "top --json disagrees with status --json"
import json, sys
s1, top, s2 = (json.load(open(f)) for f in sys.argv[1:4])
pid = int(sys.argv[4])
def client(status):
    return next(c for g in status["gpus"] for c in g["clients"] if c["pid"] == pid)
a, b = client(s1), client(s2)
t = next(c for c in top["clients"] if c["pid"] == pid)
assert t["gpu"] == s1["gpus"][0]["gpu"]["uuid"], t["gpu"]
for k in ("exe", "uid", "connected_at", "weight", "budget_bytes", "requested_budget_bytes"):
    assert t[k] == a[k] == b[k], (k, a[k], t[k], b[k])
for k in a:  # every status field is there; counters lie between the two status samples
    assert k in t, k
    if k in ("swapped_out_bytes", "swapped_in_bytes", "launches", "events", "stalls", "evictions",
             "restores", "iterations", "guided_iterations", "late_restores"):
        assert a[k] <= t[k] <= b[k], (k, a[k], t[k], b[k])
r = t["rates"]
assert r["interval_s"] > 0.4, r
for k in ("swap_out_bytes_per_s", "swap_in_bytes_per_s", "iterations_per_s", "stalls_per_s"):
    assert r[k] is not None and r[k] >= 0, (k, r)
PY
"$GSWAPCTL" top --count 2 --interval 0.2 >"$RT/top.txt" || fail "top failed"
grep -q "OUT MB/s" "$RT/top.txt" && grep -q " $TRAIN_PID .*minitrain .*guided" "$RT/top.txt" ||
  fail "top's table lacks the client: $(cat "$RT/top.txt")"

# The measured timeline and the trace, with the library's counters around them.
"$GSWAPCTL" status --json >"$RT/s1.json"
"$GSWAPCTL" trace dump --pid "$TRAIN_PID" --out "$RT/trace.json" --timeline "$RT/measured.json" \
  >"$RT/dump.out" || fail "trace dump --timeline failed: $(cat "$RT/dump.out")"
"$GSWAPCTL" status --json >"$RT/s2.json"
python3 "$TESTS/timeline_check.py" "$RT/measured.json" >"$RT/measured.summary" ||
  fail "the measured timeline is not valid"
python3 - "$RT/measured.summary" "$RT/s1.json" "$RT/s2.json" "$TRAIN_PID" <<'PY' || fail "the measured timeline misses swaps"
import json, sys
tl = json.load(open(sys.argv[1]))
pid = int(sys.argv[4])
a, b = (next(c for g in json.load(open(f))["gpus"] for c in g["clients"] if c["pid"] == pid)
        for f in sys.argv[2:4])
assert tl["producer"] == "gswapd", tl
assert tl["kernels"] > 0 and tl["counter_samples"] > 0, tl
assert any(t.startswith("stream ") for t in tl["device_tracks"]), tl
# Every restore the daemon had heard of by the first status sample is there, but for the few whose
# copies were still running (the window holds far more than this run makes), and none it had not
# heard of by the second. (The byte counters come from the library's status block, which it
# publishes less often than events: they lag the events, so restores are counted by event.)
assert a["restores"] - 16 <= tl["restores"] <= b["restores"], (a["restores"], tl["restores"], b["restores"])
# Swap-outs: the library reports those that completed; one whose region was used or freed again
# while its copy ran is counted as an eviction but not reported.
assert 0 < tl["swap_outs"] <= b["evictions"], (tl["swap_outs"], b["evictions"])
assert tl["planned_copies"] > 0, tl
print("measured timeline:", {k: tl[k] for k in ("kernels", "swap_outs", "restores", "late_restores", "device_waits", "host_waits")})
PY

# The simulated timeline of the same trace at the budget plans are made for: the same tracks.
plan_budget=$(python3 -c 'import json,sys; print(next(c["plan_budget_bytes"] for g in json.load(open(sys.argv[1]))["gpus"] for c in g["clients"] if c["pid"] == int(sys.argv[2])))' "$RT/s2.json" "$TRAIN_PID")
"$GSWAPCTL" simulate --trace "$RT/trace.json" --budget "$plan_budget" --search-ms 50 --json \
  --timeline "$RT/sim.json" >"$RT/sim.out" || fail "simulate --timeline failed: $(cat "$RT/sim.out")"
python3 "$TESTS/timeline_check.py" --same-tracks "$RT/measured.json" "$RT/sim.json" ||
  fail "the measured and simulated timelines have different tracks"

# The plot of the running program: the plan budget and the trace's peak where they belong.
"$GSWAPCTL" plot --pid "$TRAIN_PID" --search-ms 50 --out "$RT/pid.svg" >/dev/null || fail "plot --pid failed"
"$GSWAPCTL" trace dump --pid "$TRAIN_PID" --out "$RT/trace2.json" >/dev/null
"$GSWAPCTL" simulate --trace "$RT/trace2.json" --budget "$plan_budget" --search-ms 0 --json >"$RT/sim2.out" ||
  fail "simulate failed"
trace_peak=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["trace_peak_bytes"])' "$RT/sim2.out")
python3 "$TESTS/plot_check.py" "$RT/pid.svg" "$plan_budget" "$trace_peak" || fail "plot --pid is wrong"

# Bad requests: one line each, exit status 1.
expect_error() {  # EXPECTED-MESSAGE CMD...
  local want=$1 err rc=0
  shift
  err=$("$@" 2>&1 >/dev/null) || rc=$?
  [[ $rc == 1 && $err == "$want" ]] || fail "$*: exit status $rc, '$err' (expected '$want')"
}
expect_error "gswapctl: no client with pid 999999999" \
  "$GSWAPCTL" trace dump --pid 999999999 --timeline "$RT/x.json"
expect_error "gswapctl: no client with pid 999999999" \
  "$GSWAPCTL" plot --pid 999999999 --out "$RT/x.svg"
expect_error "gswapctl: cannot write $RT/none/x.json: No such file or directory" \
  "$GSWAPCTL" trace dump --pid "$TRAIN_PID" --timeline "$RT/none/x.json"
# A dump cut short by a file size limit (EFBIG, SIGXFSZ ignored) is one line, and the file cut
# short is removed, not left looking whole.
expect_error "gswapctl: cannot write $RT/big.json: File too large" \
  bash -c 'trap "" XFSZ; ulimit -f 1; exec "$@"' - "$GSWAPCTL" trace dump --pid "$TRAIN_PID" --out "$RT/big.json"
[[ ! -e $RT/big.json ]] || fail "a trace cut short was left behind: $(stat -c %s "$RT/big.json") bytes"

wait "$TRAIN_PID" || fail "minitrain failed under gswap: $(tail -n 5 "$RT/train.out")"
got=$(checksum_of "$RT/train.out")
[[ -n $ref && $got == "$ref" ]] || fail "checksum $got differs from the reference $ref"

# The library's own timeline holds exactly the swaps its summary counts.
python3 "$TESTS/timeline_check.py" "$RT/lib.json" >"$RT/lib.summary" || fail "GSWAP_TIMELINE wrote an invalid timeline"
field() { grep -o "gswap summary:.*" "$RT/train.out" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k {print $2}'; }
python3 - "$RT/lib.summary" "$(field swapped_out)" "$(field swapped_in)" <<'PY' || fail "GSWAP_TIMELINE and the summary disagree"
import json, sys
tl = json.load(open(sys.argv[1]))
out, inn = int(sys.argv[2]), int(sys.argv[3])
assert tl["producer"] is None or tl["producer"] == "libgswap", tl
# Restores: all of them, but for a rare one whose copy could not be timed (within 1%).
assert 0.99 * inn <= tl["restore_bytes"] <= inn and inn > 0, (tl["restore_bytes"], inn)
assert 0 < tl["swap_out_bytes"] <= out, (tl["swap_out_bytes"], out)  # as above: completed ones
PY
# The library's timeline goes on after gswapd's was taken (the checksum's read-back on stream 0 at
# the end): it has every track gswapd's has.
python3 "$TESTS/timeline_check.py" --covers "$RT/lib.json" "$RT/measured.json" >/dev/null ||
  fail "the library's timeline lacks tracks gswapd's has"
echo "PASS timeline"
