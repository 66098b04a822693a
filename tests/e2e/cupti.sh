#!/usr/bin/env bash
# Scenario: GSWAP_TIMING=cupti on simcuda, with a stand-in libcupti (tests/cupti_fake, which turns
# each measured access bracketed by gswap into CUPTI's records, in shuffled order and across
# flushes). The measured iterations are timed from CUPTI's records alone (no event is recorded),
# gswapd plans from them, the library follows the plan, and results are bitwise those without
# gswap; a trace dumped meanwhile has the durations. The stand-in, as CUPTI does, writes external
# correlation records only beside driver API records: the library enables those. Where CUPTI cannot be used (no libcupti, a
# CUPTI of another CUDA major version, its callbacks refused) or stops delivering (a profiler took
# the callbacks), one warning says so and events time the accesses: the run still gets a plan.
# Where its default flush returns nothing, forced flushes take over first.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/guided_lib.sh"
: "${FAKE_CUPTI:?}"
export GSWAP_TIMING=cupti GSWAP_CUPTI_PATH=$FAKE_CUPTI

MT=(--layers 6 --width 256 --batch 2048 --iters 30)
peak=$(peak_of "$RT/ref.out" "$MINITRAIN" "${MT[@]}")
ref=$(checksum_of "$RT/ref.out")
budget=$((peak * 60 / 100))

# Where CUPTI cannot be used, without a daemon: one warning, and the run is unchanged.
refused() {  # NAME EXPECTED-WARNING ENV...
  local name=$1 warning=$2
  shift 2
  env GSWAP_DAEMON=off GSWAP_BUDGET=$budget GSWAP_SUMMARY=1 "$@" LD_PRELOAD="$LIBGSWAP" \
    "$MINITRAIN" --layers 6 --width 256 --batch 2048 --iters 3 >"$RT/$name.out" 2>&1 ||
    fail "$name: minitrain failed: $(tail -n 5 "$RT/$name.out")"
  grep -q -- "$warning" "$RT/$name.out" || fail "$name: no warning '$warning': $(cat "$RT/$name.out")"
  (($(grep -c "GSWAP_TIMING=cupti" "$RT/$name.out") == 1)) ||
    fail "$name: not one warning: $(grep GSWAP_TIMING "$RT/$name.out")"
  [[ $(summary_field "$RT/$name.out" timing) == events ]] || fail "$name: $(grep summary "$RT/$name.out")"
  echo "$name: $(grep -o 'GSWAP_TIMING=cupti.*' "$RT/$name.out")"
}
refused missing "libcupti cannot be loaded ($RT/none/libcupti.so)" GSWAP_CUPTI_PATH="$RT/none/libcupti.so"
refused version "has CUPTI API version 24, gswap reads version" FAKE_CUPTI_VERSION=24
refused callbacks "cuptiActivityRegisterCallbacks -> 39" FAKE_CUPTI_REGISTER_RESULT=39

start_daemon "$RT/daemon.log"

# CUPTI times the measured iterations; the plan follows.
# One record in 40 comes without its timestamps (work still running): skipped and counted, never
# sent as a time.
start_prog "$RT/cupti.out" GSWAP_BUDGET=$budget GSWAP_LOG=info FAKE_CUPTI_REPORT="$RT/cupti.report" \
  FAKE_CUPTI_INCOMPLETE_EVERY=40 "$MINITRAIN" "${MT[@]}"
wait_for "the plan to be followed" 60 "status_has $TRAIN_PID 'c[\"mode\"] == \"guided\"'"
[[ $(client_field "$TRAIN_PID" timing) == cupti ]] ||
  fail "gswapctl status says timing '$(client_field "$TRAIN_PID" timing)', not cupti"
"$GSWAPCTL" trace dump --pid "$TRAIN_PID" --out "$RT/trace.json" ||
  fail "gswapctl trace dump failed"
wait "$TRAIN_PID" || fail "minitrain failed under gswap: $(tail -n 5 "$RT/cupti.out")"
expect_guided_run "$RT/cupti.out" "$ref" 5
grep -q "timed with CUPTI" "$RT/cupti.out" || fail "CUPTI was not used: $(grep -i cupti "$RT/cupti.out")"
[[ $(summary_field "$RT/cupti.out" timing) == cupti ]] ||
  fail "CUPTI was given up: $(grep -iE 'cupti|summary' "$RT/cupti.out")"
# Every measured access went through CUPTI, none through events: the library logs any fallback.
! grep -q "timed with events" "$RT/cupti.out" || fail "$(grep 'timed with events' "$RT/cupti.out")"
read -r calls delivered < <(sed -E 's/calls=([0-9]+) delivered=([0-9]+).*/\1 \2/' "$RT/cupti.report")
((calls > 100 && delivered > 100)) || fail "the stand-in CUPTI saw $(cat "$RT/cupti.report")"
(($(summary_field "$RT/cupti.out" timing_skips) >= calls / 40)) ||
  fail "records without timestamps were not skipped: $(grep summary "$RT/cupti.out")"
python3 - "$RT/trace.json" <<'PY' || fail "the dumped trace lacks CUPTI's durations"
import json, sys
t = json.load(open(sys.argv[1]))
kernels = [l for l in t["launches"] if l["kernel"].startswith("mt_")]
assert kernels and all(l["dur_us"] > 0 for l in kernels), "kernels without a duration"
PY
grep -q "api_kind=1 " "$RT/cupti.report" ||
  fail "driver API records not enabled: $(cat "$RT/cupti.report")"
echo "cupti: $(cat "$RT/cupti.report"), $(grep -o 'mode=.*' "$RT/cupti.out")"

# Every kernel event of a timeline whose duration CUPTI gave is the one the stand-in gave its own
# access (FAKE_CUPTI_DUR_FROM_ID: seq % 1000 + 1 us): no access got another's time. Prints the
# number of such events.
own_times() {  # TIMELINE
  python3 - "$1" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"] if isinstance(t, dict) else t
ks = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel" and e.get("dur", 0) > 0]
bad = [(e["args"]["seq"], e["dur"]) for e in ks if abs(e["dur"] - (e["args"]["seq"] % 1000 + 1)) > 0.01]
assert not bad, "accesses timed with another's duration: %s" % bad[:5]
print(len(ks))
PY
}

# Accesses made inside CUDA runtime calls, as PyTorch's are (cudaLaunchKernel calling the driver):
# CUPTI writes no external correlation record for them, and the kernel record carries the runtime
# call's correlation id. The library pairs each with the runtime call it was made in, from the
# runtime domain's API callbacks: CUPTI alone times the measured iterations, each access with its
# own time, none skipped, and a plan follows. The runtime subscription is held while CUPTI times.
start_prog "$RT/runtime.out" GSWAP_BUDGET=$budget GSWAP_LOG=info FAKE_CUPTI_RUNTIME=1 \
  FAKE_CUPTI_DUR_FROM_ID=1 GSWAP_TIMELINE="$RT/runtime.json" \
  FAKE_CUPTI_REPORT="$RT/runtime.report" "$MINITRAIN" "${MT[@]}"
wait "$TRAIN_PID" || fail "minitrain failed under gswap: $(tail -n 5 "$RT/runtime.out")"
expect_guided_run "$RT/runtime.out" "$ref" 5
[[ $(summary_field "$RT/runtime.out" timing) == cupti ]] ||
  fail "CUPTI was given up: $(grep -iE 'cupti|summary' "$RT/runtime.out")"
! grep -qE "timed with events|GSWAP_TIMING=cupti:" "$RT/runtime.out" ||
  fail "$(grep -E 'timed with events|GSWAP_TIMING=cupti:' "$RT/runtime.out")"
grep -q "runtime_exits=[1-9][0-9]* subscribed=1" "$RT/runtime.report" ||
  fail "no runtime callbacks: $(cat "$RT/runtime.report")"
(($(summary_field "$RT/runtime.out" timing_skips) == 0)) ||
  fail "accesses in runtime calls skipped: $(grep summary "$RT/runtime.out")"
timed=$(own_times "$RT/runtime.json" 2>&1) || fail "runtime: $timed"
((timed > 100)) || fail "runtime: only $timed kernels timed"
echo "runtime: $(cat "$RT/runtime.report"), $timed kernels with their own times, $(grep -o 'mode=.*' "$RT/runtime.out")"

# Two accesses in one runtime call, whose kernel records share the call's correlation id: neither
# can be told from the other, so neither is timed (both counted in timing_skips), never one with
# the other's time.
GSWAP_DAEMON=off GSWAP_BUDGET=$budget GSWAP_SUMMARY=1 GSWAP_TIMELINE="$RT/runtime2.json" \
  FAKE_CUPTI_RUNTIME=2 FAKE_CUPTI_DUR_FROM_ID=1 LD_PRELOAD="$LIBGSWAP" \
  "$MINITRAIN" --layers 6 --width 256 --batch 2048 --iters 3 >"$RT/runtime2.out" 2>&1 ||
  fail "minitrain failed under gswap: $(tail -n 5 "$RT/runtime2.out")"
timed2=$(own_times "$RT/runtime2.json" 2>&1) || fail "runtime2: $timed2"
skips2=$(summary_field "$RT/runtime2.out" timing_skips)
((timed2 == 0 && skips2 > 100)) ||
  fail "runtime2: $timed2 timed, $skips2 skipped: $(grep summary "$RT/runtime2.out")"
echo "runtime2: timing_skips=$skips2, none timed"

# CUPTI's default flush returns nothing (as on a busy H200): after 3 s the library flushes with
# CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, CUPTI goes on timing the measured iterations, a plan follows.
LONG=(--layers 6 --width 256 --batch 2048 --iters 60)
"$MINITRAIN" "${LONG[@]}" >"$RT/long.ref" 2>&1 || fail "reference run failed"
start_prog "$RT/forced.out" GSWAP_BUDGET=$budget GSWAP_LOG=info FAKE_CUPTI_FORCED_ONLY=1 \
  FAKE_CUPTI_REPORT="$RT/forced.report" "$MINITRAIN" "${LONG[@]}"
wait "$TRAIN_PID" || fail "minitrain failed under gswap: $(tail -n 5 "$RT/forced.out")"
grep -q "flushing with CUPTI_ACTIVITY_FLAG_FLUSH_FORCED from now on" "$RT/forced.out" ||
  fail "no forced flushes: $(grep -iE 'cupti|summary' "$RT/forced.out")"
grep -q "(0 buffers so far: 0 kernel" "$RT/forced.out" ||
  fail "the log does not say what CUPTI delivered: $(grep -i 'CUPTI delivered' "$RT/forced.out")"
expect_guided_run "$RT/forced.out" "$(checksum_of "$RT/long.ref")" 5
[[ $(summary_field "$RT/forced.out" timing) == cupti ]] ||
  fail "CUPTI was given up: $(grep -iE 'cupti|summary' "$RT/forced.out")"
grep -q "forced=[1-9]" "$RT/forced.report" || fail "the stand-in CUPTI saw $(cat "$RT/forced.report")"
echo "forced: $(cat "$RT/forced.report"), $(grep -o 'mode=.*' "$RT/forced.out")"

# CUPTI delivers nothing (another client took the callbacks): after 3 s of default flushes and
# 1 s of forced ones, events take over, a plan follows.
start_prog "$RT/silent.out" GSWAP_BUDGET=$budget FAKE_CUPTI_STOP_AFTER=0 \
  FAKE_CUPTI_REPORT="$RT/silent.report" "$MINITRAIN" "${LONG[@]}"
wait "$TRAIN_PID" || fail "minitrain failed under gswap: $(tail -n 5 "$RT/silent.out")"
grep -q "forced flushes included" "$RT/silent.out" ||
  fail "no fallback: $(grep -iE 'cupti|summary' "$RT/silent.out")"
expect_guided_run "$RT/silent.out" "$(checksum_of "$RT/long.ref")" 5
[[ $(summary_field "$RT/silent.out" timing) == events ]] || fail "$(grep summary "$RT/silent.out")"
# CUPTI has one callback subscriber: given up with the rest, for a profiler to take.
grep -q "subscribed=0" "$RT/silent.report" || fail "still subscribed: $(cat "$RT/silent.report")"
echo "silent: $(grep -o 'CUPTI delivered.*s ' "$RT/silent.out")$(grep -o 'mode=.*' "$RT/silent.out")"

# Accesses inside runtime calls while another client holds CUPTI's callbacks: one warning says
# they cannot be paired, the log says what CUPTI delivered, events take over, a plan follows.
start_prog "$RT/nosub.out" GSWAP_BUDGET=$budget FAKE_CUPTI_RUNTIME=1 FAKE_CUPTI_SUBSCRIBE_RESULT=39 \
  "$MINITRAIN" "${LONG[@]}"
wait "$TRAIN_PID" || fail "minitrain failed under gswap: $(tail -n 5 "$RT/nosub.out")"
grep -q "cuptiSubscribe or cuptiEnableDomain -> 39 .*through the CUDA runtime are not timed" \
  "$RT/nosub.out" || fail "no warning: $(grep -iE 'cupti|summary' "$RT/nosub.out")"
grep -q "0 external correlation records, 0 accesses made in runtime calls, 0 accesses timed" \
  "$RT/nosub.out" || fail "$(grep -i 'CUPTI delivered' "$RT/nosub.out")"
expect_guided_run "$RT/nosub.out" "$(checksum_of "$RT/long.ref")" 5
[[ $(summary_field "$RT/nosub.out" timing) == events ]] || fail "$(grep summary "$RT/nosub.out")"
echo "nosub: $(grep -o 'GSWAP_TIMING=cupti:.*' "$RT/nosub.out")"
echo "PASS cupti"
