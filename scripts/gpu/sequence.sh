#!/usr/bin/env bash
# sequence.sh: runs several validate.sh calls back to back in one device call, most valuable first,
# each into its own results folder, and stops starting new ones once a deadline has passed, so a
# command limit cuts off only the least valuable part. Prints every summary table at the end.
#
# Usage: scripts/gpu/sequence.sh DEADLINE_S STEP [STEP...]
#   DEADLINE_S  seconds from the start after which no further step is begun
#   STEP        NAME:ARGS, where ARGS are validate.sh's arguments (words split on spaces), for
#               example "guided:--only torch-guided --models resnet50 --dump-every 3"
# Environment: BUILD_DIR (default build-carry), OUT (default ./gpu-results); a step's results go to
# $OUT/NAME, and at the end every step's folder and output are packed into $OUT/results.tgz (the
# device machine returns a limited number of files). Each step runs with its own environment overrides when ARGS begins with VAR=value words
# (for example "dbg:GSWAPD_LOG_LEVEL=debug --only torch-guided").
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[[ $# -ge 2 ]] || {
  sed -n '2,12p' "$0" >&2
  exit 2
}
deadline=$1
shift
out=${OUT:-./gpu-results}
build=${BUILD_DIR:-build-carry}
mkdir -p "$out" || exit 2
start=$SECONDS
status=0
ran=()
for step in "$@"; do
  name=${step%%:*}
  read -r -a words <<<"${step#*:}"
  envs=()
  while [[ ${#words[@]} -gt 0 && ${words[0]} =~ ^[A-Z_][A-Z0-9_]*= ]]; do
    envs+=("${words[0]}")
    words=("${words[@]:1}")
  done
  if ((SECONDS - start > deadline)); then
    echo "sequence.sh: $name not started: ${deadline} s have passed"
    continue
  fi
  echo "sequence.sh: $name at $((SECONDS - start)) s: ${envs[*]} validate.sh ${words[*]}"
  env "${envs[@]}" "$root/scripts/gpu/validate.sh" --build-dir "$build" --out "$out/$name" \
    "${words[@]}" >"$out/$name.stdout" 2>&1
  rc=$?
  echo "sequence.sh: $name ended with $rc at $((SECONDS - start)) s"
  [[ $rc -ne 0 ]] && status=1
  ran+=("$name")
done
for name in "${ran[@]}"; do
  echo "=== $name"
  if [[ -f $out/$name/results.tsv ]]; then
    cut -f1-3 "$out/$name/results.tsv" | cut -c1-400
  else
    tail -n 5 "$out/$name.stdout"
  fi
done
# The device machine returns only so many files: everything goes back as one archive.
packed=()
for name in "${ran[@]}"; do
  for f in "$name" "$name.stdout"; do [[ -e $out/$f ]] && packed+=("$f"); done
done
if [[ ${#packed[@]} -gt 0 ]] && tar czf "$out/results.tgz" -C "$out" "${packed[@]}"; then
  (cd "$out" && rm -rf "${packed[@]}")
fi
exit $status
