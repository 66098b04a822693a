# guided_lib.sh: helpers of the guided-execution scenarios (sourced after lib.sh, not run).
# Needs SHUFFLED (the shuffled_train workload) besides lib.sh's variables.
: "${SHUFFLED:?}"

# summary_field FILE KEY: a field of the library's exit summary line ("gswap summary: ... KEY=V").
summary_field() {
  grep -o "gswap summary:.*" "$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k {print $2}'
}

# client_field PID KEY: a field of PID's client in `gswapctl status --json` (empty if absent).
client_field() {
  "$GSWAPCTL" status --json 2>/dev/null | python3 -c '
import json, sys
pid, key = int(sys.argv[1]), sys.argv[2]
for g in json.load(sys.stdin)["gpus"]:
    for c in g["clients"]:
        if c["pid"] == pid:
            print(c.get(key, ""))
' "$1" "$2"
}

# peak_of OUT PROGRAM ARGS...: runs PROGRAM without gswap, keeps its output in OUT, prints its peak.
peak_of() {
  local out=$1
  shift
  "$@" >"$out" 2>&1 || fail "reference run failed: $* ($(tail -n 3 "$out"))"
  awk '/^peak_bytes:/ {print $2}' "$out"
}

# start_prog OUT PROGRAM ARGS...: PROGRAM under libgswap.so in the background (sets TRAIN_PID);
# the environment comes from the caller (GSWAP_BUDGET and friends, exported or inline).
start_prog() {
  local out=$1
  shift
  env GSWAP_SUMMARY=1 LD_PRELOAD="$LIBGSWAP" "$@" >"$out" 2>&1 &
  TRAIN_PID=$!
  BG_PIDS+=($TRAIN_PID)
}

# expect_guided_run OUT REF_CHECKSUM MIN_GUIDED: a finished run under a daemon followed a plan
# (at least MIN_GUIDED iterations to their end, planned swap-outs and prefetches) and ended with
# the reference checksum.
expect_guided_run() {
  local out=$1 ref=$2 min=$3
  local got
  got=$(checksum_of "$out")
  [[ -n $ref && $got == "$ref" ]] || fail "$out: checksum $got differs from the reference $ref"
  local mode guided evictions prefetches
  mode=$(summary_field "$out" mode)
  guided=$(summary_field "$out" guided_iterations)
  evictions=$(summary_field "$out" planned_evictions)
  prefetches=$(summary_field "$out" prefetches)
  [[ $mode == guided ]] || fail "$out: ended in mode '$mode', not guided: $(grep summary "$out")"
  ((guided >= min)) || fail "$out: $guided guided iterations, expected $min or more"
  ((evictions > 0 && prefetches > 0)) ||
    fail "$out: the plan moved nothing (planned_evictions=$evictions prefetches=$prefetches)"
}
