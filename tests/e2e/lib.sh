# lib.sh: shared set-up for the daemon end-to-end scenarios (sourced, not run).
# Needs GSWAPD, GSWAPCTL, LIBGSWAP, SIMCUDA_DIR and MINITRAIN in the environment (CTest sets them).
set -euo pipefail
: "${GSWAPD:?}" "${GSWAPCTL:?}" "${LIBGSWAP:?}" "${SIMCUDA_DIR:?}" "${MINITRAIN:?}"

RT=$(mktemp -d /tmp/gswap-e2e-XXXXXX)
chmod 755 "$RT"
export GSWAP_RUNTIME_DIR=$RT/run
export LD_LIBRARY_PATH=$SIMCUDA_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export SIMCUDA_CAPACITY=${SIMCUDA_CAPACITY:-1GiB}
export GSWAP_SUMMARY=0
unset GSWAP_CONFIG GSWAP_DAEMON XDG_RUNTIME_DIR
DAEMON_PIDS=()
BG_PIDS=()

cleanup() {
  local p
  for p in "${BG_PIDS[@]}" "${DAEMON_PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  # Daemons started indirectly (spawn) record their pid in the lock file.
  for f in "$RT"/run/*.lock "$RT"/*/*.lock; do
    [[ -f $f ]] || continue
    p=$(head -c 20 "$f" | tr -dc 0-9)
    [[ -n $p ]] && kill -9 "$p" 2>/dev/null || true
  done
  if [[ ${KEEP_E2E:-0} == 1 ]]; then echo "kept $RT"; else rm -rf "$RT"; fi
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  for f in "$RT"/*.log "$RT"/run/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -n 30 "$f"; }; done >&2
  exit 1
}

# start_daemon LOGFILE [extra env assignments...]: a foreground gswapd in the background.
start_daemon() {
  local log=$1
  shift
  env "$@" "$GSWAPD" --gpu 0 --foreground --log-file "$log" --log-level info &
  DAEMON_PIDS+=($!)
  DAEMON_PID=$!
  wait_for "gswapd socket" 10 "ls $GSWAP_RUNTIME_DIR/*.sock"
}

# wait_for WHAT SECONDS COMMAND: retries COMMAND until it succeeds.
wait_for() {
  local what=$1 secs=$2 cmd=$3
  local deadline=$((SECONDS + secs))
  while ((SECONDS < deadline)); do
    if eval "$cmd" >/dev/null 2>&1; then return 0; fi
    sleep 0.05
  done
  fail "timed out waiting for $what"
}

# The workload: long enough to be seen by the daemon, small enough for a shared 2-core machine.
TRAIN_ARGS=(--layers 3 --width 256 --batch 2048 --iters ${E2E_ITERS:-20} --streams 2)

checksum_of() { grep -o 'checksum: [0-9a-fx]*' "$1" | awk '{print $2}'; }

reference_checksum() {
  "$MINITRAIN" "${TRAIN_ARGS[@]}" >"$RT/ref.out" 2>&1 || fail "reference run failed"
  checksum_of "$RT/ref.out"
}

# start_train OUT [env assignments...]: minitrain under libgswap.so in the background; sets TRAIN_PID.
start_train() {
  local out=$1
  shift
  env "$@" LD_PRELOAD="$LIBGSWAP" "$MINITRAIN" "${TRAIN_ARGS[@]}" >"$out" 2>&1 &
  TRAIN_PID=$!
  BG_PIDS+=($TRAIN_PID)
}

# status_has PID [PYTHON-CONDITION on client c]: the daemon's status lists PID (and c satisfies it).
status_has() {
  local pid=$1 cond=${2:-True}
  "$GSWAPCTL" status --json >"$RT/status.json" 2>/dev/null || return 1
  python3 - "$RT/status.json" "$pid" "$cond" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
pid, cond = int(sys.argv[2]), sys.argv[3]
ok = any(c["pid"] == pid and eval(cond, {}, {"c": c}) for g in doc["gpus"] for c in g["clients"])
sys.exit(0 if ok else 1)
PY
}
