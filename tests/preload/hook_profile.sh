#!/usr/bin/env bash
# GSWAP_HOOK_PROFILE=1 on minitrain: at exit the library lists the driver calls made through it
# with their counts and times, the most time first; the counts follow the program (each iteration
# adds the same number of launches); the results are those of a run without it; without the
# variable nothing is listed, and a bad value is refused at cuInit.
# Usage: hook_profile.sh MINITRAIN LIBGSWAP (simcuda in LD_LIBRARY_PATH).
set -uo pipefail
minitrain=$1 lib=$2
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail() {
  echo "hook_profile: $*" >&2
  exit 1
}
args=(--layers 4 --width 512 --batch 256)

run() {  # ITERS OUT ENV...: minitrain under gswap at half the device
  local iters=$1 out=$2
  shift 2
  env GSWAP_BUDGET=50% "$@" LD_PRELOAD="$lib" "$minitrain" "${args[@]}" --iters "$iters" \
    >"$out" 2>&1 || fail "minitrain failed: $(tail -n 5 "$out")"
}
launches() { awk '$1 == "cuLaunchKernel" {print $2}' "$1"; }

for i in 1 2 3; do run "$i" "$t/p$i.out" GSWAP_HOOK_PROFILE=1; done
grep -q "^gswap hook profile: [0-9]* driver calls through libgswap since cuInit" "$t/p3.out" ||
  fail "no profile: $(tail -n 20 "$t/p3.out")"
n1=$(launches "$t/p1.out") n2=$(launches "$t/p2.out") n3=$(launches "$t/p3.out")
[[ -n $n1 && -n $n2 && -n $n3 ]] || fail "no cuLaunchKernel row: $(grep -A20 'hook profile' "$t/p3.out")"
((n2 - n1 > 0 && n3 - n2 == n2 - n1)) ||
  fail "cuLaunchKernel counts $n1, $n2, $n3 over 1, 2 and 3 iterations do not grow by one iteration's launches"
python3 - "$t/p3.out" <<'PY' || fail "the profile does not add up: $(grep -A20 'hook profile' "$t/p3.out")"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
i = next(k for k, l in enumerate(lines) if l.startswith("gswap hook profile:"))
total = int(re.search(r"profile: (\d+) driver calls", lines[i]).group(1))
rows = []
for l in lines[i + 1:]:
    m = re.match(r"  (\S+) +(\d+) calls +([\d.]+) ms +(\d+) ns each$", l)
    if not m:
        break
    rows.append((m.group(1), int(m.group(2)), float(m.group(3))))
assert 0 < len(rows) <= 16, rows
assert len({r[0] for r in rows}) == len(rows), "a call listed twice"
times = [r[2] for r in rows]
assert times == sorted(times, reverse=True), "not by time"
assert sum(r[1] for r in rows) <= total
if len(rows) < 16:
    assert sum(r[1] for r in rows) == total, (total, rows)
PY

run 3 "$t/plain.out"
! grep -q "hook profile" "$t/plain.out" || fail "a profile without GSWAP_HOOK_PROFILE"
[[ $(grep '^checksum:' "$t/plain.out") == $(grep '^checksum:' "$t/p3.out") ]] ||
  fail "checksums differ with the profile: $(grep '^checksum:' "$t/plain.out" "$t/p3.out")"

env GSWAP_HOOK_PROFILE=sometimes LD_PRELOAD="$lib" "$minitrain" "${args[@]}" --iters 1 >"$t/bad.out" 2>&1 &&
  fail "a bad GSWAP_HOOK_PROFILE was not refused"
grep -q 'GSWAP_HOOK_PROFILE="sometimes" is not valid: expected 1 or 0' "$t/bad.out" ||
  fail "$(cat "$t/bad.out")"
echo "PASS hook_profile: cuLaunchKernel $n1, $n2, $n3 calls over 1, 2, 3 iterations"
