#!/usr/bin/env bash
# sequence_test.sh: scripts/gpu/sequence.sh without a GPU: steps run in order with their own
# environment and folder, a step past the deadline is not started, a failing step makes the exit
# status 1, and everything comes back packed in results.tgz.
set -uo pipefail
seq_sh=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() {
  echo "sequence_test: $*" >&2
  exit 1
}

# "help" succeeds; "bad" is a usage error of validate.sh (exit 2), with an environment override.
OUT=$out "$seq_sh" 100 "help:--help" "bad:GSWAP_TEST_MARK=1 --only no-such-check" >"$out/log" 2>&1
rc=$?
[[ $rc = 1 ]] || fail "exit $rc, expected 1 (a step failed)"
grep -q "help ended with 0" "$out/log" || fail "help step: $(cat "$out/log")"
grep -q "bad at .*GSWAP_TEST_MARK=1 validate.sh --only no-such-check" "$out/log" ||
  fail "bad step's environment: $(cat "$out/log")"
grep -q "bad ended with 2" "$out/log" || fail "bad step: $(cat "$out/log")"
[[ -f $out/results.tgz ]] || fail "no results.tgz"
listing=$(tar tzf "$out/results.tgz")
for f in help.stdout bad.stdout bad/; do
  grep -qx "$f" <<<"$listing" || fail "results.tgz lacks $f: $listing"
done
[[ ! -e $out/bad && ! -e $out/help.stdout ]] || fail "packed files were left beside the archive"

# A deadline already passed: nothing starts.
rm -rf "${out:?}"/*
OUT=$out "$seq_sh" -1 "help:--help" >"$out/log" 2>&1 || fail "exit $? with nothing run"
grep -q "help not started" "$out/log" || fail "deadline: $(cat "$out/log")"
[[ ! -e $out/results.tgz ]] || fail "an archive of nothing"

# No step: usage.
"$seq_sh" 100 >/dev/null 2>&1
[[ $? = 2 ]] || fail "no step: expected exit 2"
echo "sequence_test: ok"
