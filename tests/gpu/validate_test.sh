#!/usr/bin/env bash
# validate_test.sh: scripts/gpu/validate.sh without a GPU, against stand-ins for nvidia-smi, the
# build and python. The max-batch check split over two calls: --maxbatch-part bare runs only the
# search without gswap and records its result; --maxbatch-part gswap --maxbatch-bare N runs only
# the search under gswap and compares; both (the default) runs the two; bad values are refused.
# A search stopped by --maxbatch-seconds: a gswap lower bound 3x the bare result meets the target,
# one below it fails and says so, and a bare result cut off is not used.
# torch-overhead with --hook-profile: the library is asked for its profile, and the row names the
# costliest calls; without it, neither.
set -uo pipefail
validate=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail() {
  echo "validate_test: $*" >&2
  exit 1
}

mkdir -p "$t/bin" "$t/build/interpose" "$t/build/tests/gpu"
touch "$t/build/interpose/libgswap.so" "$t/build/tests/gpu/hook_paths_test" "$t/build/tests/gpu/gpu_micro"
cat >"$t/bin/nvidia-smi" <<'SH'
#!/bin/bash
case "$*" in *name*) echo "Stand-in GPU" ;; *driver*) echo "580.0" ;; esac
SH
# python: the training script's searches answer 32 without gswap and 96 with (complete, or as
# BARE_SEARCH / GSWAP_SEARCH say: "BEST COMPLETE FAILS_AT"); its training runs
# take 100 ms a step, 101 ms under gswap, which adds the library's profile when asked; torch's
# checks pass; everything else (validate.sh's JSON reading) goes to the real python3.
cat >"$t/bin/py" <<SH
#!/bin/bash
case "\$1" in
  *pytorch_train.py)
    echo "\$* GSWAP_HOOK_PROFILE=\${GSWAP_HOOK_PROFILE:-}" >>"$t/calls"
    if [[ " \$* " == *" --compare "* ]]; then exit 0; fi
    if [[ " \$* " == *" --max-batch-search "* ]]; then
      if [[ " \$* " == *" --gswap-lib "* ]]; then r=\${GSWAP_SEARCH:-96 true 97}; else r=\${BARE_SEARCH:-32 true 33}; fi
      read -r b c f <<<"\$r"
      echo "{\"event\": \"max_batch\", \"model\": \"resnet50\", \"max_batch\": \$b, \"complete\": \$c, \"fails_at\": \$f}"
      exit 0
    fi
    ms=100
    [[ -n \${LD_PRELOAD:-} ]] && ms=101
    echo "{\"event\": \"summary\", \"status\": \"ok\", \"step_ms_median\": \$ms, \"max_memory_allocated\": 1000000}"
    if [[ \${GSWAP_HOOK_PROFILE:-0} = 1 ]]; then
      echo "gswap hook profile: 30 driver calls through libgswap since cuInit, 2.000 ms in them (gswap's work and the driver's); by time:" >&2
      echo "  cuMemAllocAsync                      10 calls        1.500 ms     150000 ns each" >&2
      echo "  cuLaunchKernel                       20 calls        0.500 ms      25000 ns each" >&2
    fi ;;
  -c) [[ \$2 == *"import torch"* ]] && { echo "2.0 13.0"; exit 0; }; exec python3 "\$@" ;;
  *) exec python3 "\$@" ;;
esac
SH
chmod +x "$t/bin/nvidia-smi" "$t/bin/py"

run() {  # NAME ARGS...: validate.sh into $t/NAME; its exit status
  local name=$1
  shift
  rm -f "$t/calls"
  PATH=$t/bin:$PATH "$validate" --build-dir "$t/build" --python "$t/bin/py" --out "$t/$name" \
    --models resnet50 "$@" >"$t/$name.log" 2>&1
}
count() { [[ -e $t/calls ]] && grep -c -- "$1" "$t/calls" || echo 0; }
searches() { count --max-batch-search | tail -n 1; }
gswap_searches() { count --gswap-lib | tail -n 1; }

run bare --only torch-maxbatch --maxbatch-part bare || fail "bare part: $(cat "$t/bare.log")"
[[ $(searches) = 1 && $(gswap_searches) = 0 ]] || fail "bare part ran: $(cat "$t/calls")"
grep -q "without gswap: 32 (then --maxbatch-part gswap --maxbatch-bare 32)" "$t/bare.log" ||
  fail "bare part's row: $(cat "$t/bare.log")"

run gswap --only torch-maxbatch --maxbatch-part gswap --maxbatch-bare 32 || fail "gswap part: $(cat "$t/gswap.log")"
[[ $(searches) = 1 && $(gswap_searches) = 1 ]] || fail "gswap part ran: $(cat "$t/calls")"
grep -q "32 without gswap, 96 with: 3" "$t/gswap.log" || fail "gswap part's row: $(cat "$t/gswap.log")"

run both --only torch-maxbatch || fail "both: $(cat "$t/both.log")"
[[ $(searches) = 2 && $(gswap_searches) = 1 ]] || fail "both ran: $(cat "$t/calls")"
grep -q "32 without gswap, 96 with: 3" "$t/both.log" || fail "both's row: $(cat "$t/both.log")"

grep -q -- "--search-seconds 480" "$t/calls" || fail "no search time limit: $(cat "$t/calls")"

# Searches stopped by their time limit.
GSWAP_SEARCH="768 false 896" run cut --only torch-maxbatch --maxbatch-part gswap --maxbatch-bare 88 \
  --maxbatch-seconds 300 || fail "cut: $(cat "$t/cut.log")"
grep -q -- "--search-seconds 300" "$t/calls" || fail "--maxbatch-seconds not passed: $(cat "$t/calls")"
grep -q "88 without gswap, at least 768 with (search stopped after 300 s: fits at 768, fails at 896): at least 8.7.*x (target >= 3x) (target met)" \
  "$t/cut.log" || fail "cut's row: $(cat "$t/cut.log")"
GSWAP_SEARCH="128 false null" run short --only torch-maxbatch --maxbatch-part gswap --maxbatch-bare 88
grep -q "FAIL .*search stopped after 480 s below the target: 88 without gswap, fits at 128 with, fails at -" \
  "$t/short.log" || fail "short's row: $(cat "$t/short.log")"
BARE_SEARCH="64 false 128" run barecut --only torch-maxbatch --maxbatch-part bare
grep -q "FAIL .*search incomplete (fits at '64', fails at '128')" "$t/barecut.log" ||
  fail "barecut's row: $(cat "$t/barecut.log")"
BARE_SEARCH="64 false 128" run bothcut --only torch-maxbatch
grep -q "FAIL .*search incomplete (bare '', gswap '96')" "$t/bothcut.log" ||
  fail "bothcut's row: $(cat "$t/bothcut.log")"

for bad in "--maxbatch-part half" "--maxbatch-part gswap" "--maxbatch-part gswap --maxbatch-bare 0x10" \
  "--maxbatch-seconds 0" "--maxbatch-seconds 600" "--maxbatch-seconds 1.5"; do
  # shellcheck disable=SC2086
  run refused --only torch-maxbatch $bad
  rc=$?
  [[ $rc = 2 ]] || fail "'$bad' exited $rc, not 2: $(cat "$t/refused.log")"
  [[ ! -e $t/calls ]] || fail "'$bad' ran a search"
done
run plain --only torch-overhead || fail "torch-overhead: $(cat "$t/plain.log")"
grep -q "GSWAP_HOOK_PROFILE=1" "$t/calls" && fail "a profile asked for: $(cat "$t/calls")"
grep -q "torch_resnet50_overhead .*1% (target <= 1%) (target met)$" "$t/plain.log" ||
  fail "torch-overhead's row: $(cat "$t/plain.log")"
run profiled --only torch-overhead --hook-profile || fail "--hook-profile: $(cat "$t/profiled.log")"
grep -q "costliest calls: cuMemAllocAsync 10 calls 150000 ns each; cuLaunchKernel 20 calls 25000 ns each" \
  "$t/profiled.log" || fail "--hook-profile's row: $(cat "$t/profiled.log")"
echo "PASS validate"
