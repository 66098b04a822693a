#!/usr/bin/env bash
# run_checked.sh: runs one preload scenario and asserts its outcome. Used by CTest (label preload).
#
#   run_checked.sh minitrain MINITRAIN LIBGSWAP [extra minitrain args...] [-- ENV=VALUE...]
#       runs minitrain without gswap (peak and checksum), then under gswap with a budget of a
#       third of the peak; the checksum must match and the summary must show bytes swapped out
#   run_checked.sh expect-ok LIBGSWAP PROGRAM ARGS...      (env from the caller)
#       runs PROGRAM under gswap: must exit 0 and the summary must show bytes swapped out
#   run_checked.sh expect-segv LIBGSWAP PROGRAM ARGS...
#       must die of SIGSEGV (the residency-bug check)
#   run_checked.sh expect-refused LIBGSWAP PROGRAM ARGS...
#       must fail, naming GSWAP_BUDGET on stderr
#   run_checked.sh expect-fail-log TEXT LIBGSWAP PROGRAM ARGS...
#       must fail, with exactly one line containing TEXT in its output
#   run_checked.sh expect-log TEXT LIBGSWAP PROGRAM ARGS...
#       as expect-ok, and exactly one line of the output contains TEXT
#   run_checked.sh expect-no-log TEXT LIBGSWAP PROGRAM ARGS...
#       as expect-ok, and no line of the output contains TEXT
set -uo pipefail
mode=$1; shift

swapped_out() { sed -n 's/.*gswap summary:.* swapped_out=\([0-9]*\).*/\1/p' <<<"$1" | tail -1; }

case $mode in
  minitrain)
    minitrain=$1 lib=$2; shift 2
    args=() envs=()
    while (($#)); do
      if [[ $1 == -- ]]; then shift; envs=("$@"); break; fi
      args+=("$1"); shift
    done
    plain=$("$minitrain" "${args[@]}" 2>&1) || { echo "minitrain failed without gswap:"; echo "$plain"; exit 1; }
    peak=$(awk '/^peak_bytes:/ {print $2}' <<<"$plain")
    want=$(awk '/^checksum:/ {print $2}' <<<"$plain")
    [[ -n $peak && -n $want ]] || { echo "no peak/checksum in: $plain"; exit 1; }
    budget=$((peak / 3))
    echo "without gswap: peak $peak checksum $want; budget $budget"
    out=$(env "${envs[@]}" GSWAP_BUDGET=$budget LD_PRELOAD="$lib" "$minitrain" "${args[@]}" 2>&1)
    rc=$?
    echo "$out" | tail -5
    ((rc == 0)) || { echo "FAIL: minitrain under gswap exited $rc"; exit 1; }
    got=$(awk '/^checksum:/ {print $2}' <<<"$out")
    [[ $got == "$want" ]] || { echo "FAIL: checksum $got under gswap, $want without"; exit 1; }
    so=$(swapped_out "$out")
    [[ -n $so && $so -gt 0 ]] || { echo "FAIL: nothing was swapped out (summary: $so)"; exit 1; }
    echo "PASS: checksum $got, $so bytes swapped out"
    ;;
  expect-ok)
    lib=$1; shift
    out=$(LD_PRELOAD="$lib" "$@" 2>&1); rc=$?
    echo "$out" | tail -8
    ((rc == 0)) || { echo "FAIL: exit $rc"; exit 1; }
    so=$(swapped_out "$out")
    [[ -n $so && $so -gt 0 ]] || { echo "FAIL: nothing was swapped out"; exit 1; }
    echo "PASS"
    ;;
  expect-segv)
    lib=$1; shift
    LD_PRELOAD="$lib" "$@" >/dev/null 2>&1; rc=$?
    ((rc == 139)) || { echo "FAIL: expected death by SIGSEGV (139), got exit $rc"; exit 1; }
    echo "PASS: the skipped restore crashed the simulated GPU (exit $rc)"
    ;;
  expect-refused)
    lib=$1; shift
    out=$(LD_PRELOAD="$lib" "$@" 2>&1); rc=$?
    echo "$out" | tail -4
    ((rc != 0)) || { echo "FAIL: a bad configuration was accepted"; exit 1; }
    grep -q "GSWAP_BUDGET" <<<"$out" || { echo "FAIL: the refusal does not name GSWAP_BUDGET"; exit 1; }
    echo "PASS: refused"
    ;;
  expect-fail-log)
    text=$1 lib=$2; shift 2
    out=$(LD_PRELOAD="$lib" "$@" 2>&1); rc=$?
    echo "$out" | tail -4
    ((rc != 0)) || { echo "FAIL: the program ran; it should have been refused"; exit 1; }
    lines=$(grep -cF -- "$text" <<<"$out")
    ((lines == 1)) || { echo "FAIL: expected one line with \"$text\", found $lines"; exit 1; }
    echo "PASS: refused with one line"
    ;;
  expect-log | expect-no-log)
    text=$1 lib=$2; shift 2
    out=$(LD_PRELOAD="$lib" "$@" 2>&1); rc=$?
    echo "$out" | tail -8
    ((rc == 0)) || { echo "FAIL: exit $rc"; exit 1; }
    so=$(swapped_out "$out")
    [[ -n $so && $so -gt 0 ]] || { echo "FAIL: nothing was swapped out"; exit 1; }
    lines=$(grep -cF -- "$text" <<<"$out")
    want=1; [[ $mode == expect-no-log ]] && want=0
    ((lines == want)) || { echo "FAIL: expected $want line(s) with \"$text\", found $lines"; exit 1; }
    echo "PASS"
    ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
