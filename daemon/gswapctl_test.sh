#!/usr/bin/env bash
# gswapctl_test.sh: gswapctl's own behaviour, run by CTest.
#
#   gswapctl_test.sh config GSWAPCTL
#       `config check` names a repeated key, calls a directory unreadable with the OS reason, and
#       names a missing file once
#   gswapctl_test.sh run GSWAPCTL GSWAPD LIBGSWAP MINITRAIN   (LD_LIBRARY_PATH reaches simcuda)
#       `gswapctl run` starts gswapd only when none serves the GPU: not when a daemon's socket
#       answers, nor when its lock is held; a program it runs registers with the running daemon
set -uo pipefail
mode=$1
shift
RT=$(mktemp -d /tmp/gswapctl-test-XXXXXX)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for f in "$RT"/run/*.lock; do
    [[ -f $f ]] || continue
    p=$(head -c 20 "$f" | tr -dc 0-9)
    [[ -n $p ]] && kill -9 "$p" 2>/dev/null || true
  done
  rm -rf "$RT"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

case $mode in
  config)
    ctl=$1
    printf '{"budget": "1GiB", "log_level": "info", "budget": "2GiB"}\n' >"$RT/dup.json"
    out=$("$ctl" config check "$RT/dup.json" 2>&1) && fail "a repeated key was accepted: $out"
    [[ $out == "$RT/dup.json: budget: duplicate key (given more than once)" ]] ||
      fail "repeated key: got '$out'"
    out=$("$ctl" config check "$RT" 2>&1) && fail "a directory was accepted: $out"
    [[ $out == "$RT: cannot read the file: Is a directory" ]] || fail "directory: got '$out'"
    out=$("$ctl" config check "$RT/none.json" 2>&1) && fail "a missing file was accepted"
    [[ $out == "$RT/none.json: cannot read the file: No such file or directory" ]] ||
      fail "missing file: got '$out'"
    echo "PASS config"
    ;;
  run)
    ctl=$1 gswapd=$2 lib=$3 minitrain=$4
    export GSWAP_RUNTIME_DIR=$RT/run SIMCUDA_CAPACITY=${SIMCUDA_CAPACITY:-1GiB} GSWAP_SUMMARY=0
    unset GSWAP_CONFIG GSWAP_DAEMON XDG_RUNTIME_DIR GSWAP_GPU
    # gswapctl finds gswapd and libgswap.so beside itself: a copy of it sits next to a gswapd that
    # records every start before becoming the real one.
    mkdir -p "$RT/bin"
    cp "$ctl" "$RT/bin/gswapctl"
    ln -s "$lib" "$RT/bin/libgswap.so"
    printf '#!/bin/sh\necho "$$" >>"%s/started"\nexec "%s" "$@"\n' "$RT" "$gswapd" >"$RT/bin/gswapd"
    chmod +x "$RT/bin/gswapd"
    starts() { [[ -f $RT/started ]] && wc -l <"$RT/started" || echo 0; }
    wait_for() {
      local i
      for ((i = 0; i < 200; i++)); do eval "$1" >/dev/null 2>&1 && return 0; sleep 0.05; done
      fail "timed out waiting for: $1"
    }

    # No daemon: run starts one.
    out=$("$RT/bin/gswapctl" run -- true 2>&1) || fail "run failed: $out"
    [[ $(starts) == 1 ]] || fail "run did not start gswapd when none ran"
    wait_for "ls $GSWAP_RUNTIME_DIR/*.sock"
    lock=$(ls "$GSWAP_RUNTIME_DIR"/*.lock)
    kill "$(head -c 20 "$lock" | tr -dc 0-9)"
    wait_for "! ls $GSWAP_RUNTIME_DIR/*.sock"

    # A daemon serves the GPU (its socket answers): run uses it, and its program registers there.
    rm -f "$RT/started"
    "$gswapd" --gpu 0 --foreground --log-file "$RT/gswapd.log" --log-level info &
    PIDS+=($!)
    daemon=$!
    wait_for "ls $GSWAP_RUNTIME_DIR/*.sock"
    out=$("$RT/bin/gswapctl" run --budget 64MiB -- "$minitrain" --layers 2 --width 64 --batch 64 \
      --iters 2 2>&1) || fail "run failed with a daemon running: $out"
    [[ $(starts) == 0 ]] || fail "run started a second gswapd while one served the GPU: $out"
    grep -q "already serves" <<<"$out" && fail "run tried to start a second gswapd: $out"
    grep -q "client pid .* connected" "$RT/gswapd.log" ||
      fail "the program did not register with the running daemon"
    kill "$daemon"
    wait "$daemon" 2>/dev/null

    # The lock is held but nothing answers yet (a daemon starting up): run does not start another.
    [[ -f $lock ]] || fail "no lock file $lock"
    # The subshell becomes the sleep, holding the lock on fd 9 until it is killed.
    (exec 9>"$lock" && flock -x 9 && exec sleep 60) >/dev/null 2>&1 &
    PIDS+=($!)
    wait_for "grep -q FLOCK /proc/locks && ! flock -n -s $lock true"
    out=$("$RT/bin/gswapctl" run -- true 2>&1) || fail "run failed with the lock held: $out"
    [[ $(starts) == 0 ]] || fail "run started gswapd while the GPU's lock was held: $out"
    echo "PASS run"
    ;;
  *)
    echo "unknown mode $mode" >&2
    exit 2
    ;;
esac
