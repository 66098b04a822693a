#!/usr/bin/env bash
# Scenario: GSWAP_DAEMON=spawn starts gswapd (found beside libgswap.so or via GSWAP_DAEMON_PATH)
# when none runs; the client then registers with it. `gswapctl run` does the same by itself.
source "$(dirname "$0")/lib.sh"
# The daemon's log says the client registered: the run lasts about a second, which a poll of
# `gswapctl status` can miss on a loaded machine.
start_train "$RT/train.out" GSWAP_DAEMON=spawn GSWAP_DAEMON_PATH="$GSWAPD" GSWAP_LOG=info
wait "$TRAIN_PID" || fail "minitrain failed: $(tail -n 5 "$RT/train.out")"
ls "$GSWAP_RUNTIME_DIR"/*.lock >/dev/null || fail "no lock file"
spawned=$(head -c 20 "$GSWAP_RUNTIME_DIR"/*.lock | tr -dc 0-9)
wait_for "the spawned daemon to log the client" 10 \
  "grep -q 'client pid $TRAIN_PID (.*) connected' $GSWAP_RUNTIME_DIR/gswapd-*.log"
wait_for "the spawned daemon to log the client's exit" 10 \
  "grep -q 'client pid $TRAIN_PID .*disconnected' $GSWAP_RUNTIME_DIR/gswapd-*.log"

# gswapctl run: starts the daemon itself (in a fresh runtime dir), preloads the library, passes the
# budget on, and returns the command's exit code and output.
kill -9 "$spawned"
export GSWAP_RUNTIME_DIR=$RT/run2
ref=$(reference_checksum)
"$GSWAPCTL" run --budget 512MiB -- "$MINITRAIN" "${TRAIN_ARGS[@]}" >"$RT/run.out" 2>&1 ||
  fail "gswapctl run failed: $(tail -n 5 "$RT/run.out")"
[[ $(checksum_of "$RT/run.out") == "$ref" ]] || fail "gswapctl run changed the checksum"
ls "$GSWAP_RUNTIME_DIR"/*.sock >/dev/null || fail "gswapctl run did not start gswapd"
"$GSWAPCTL" run -- sh -c 'exit 7' && fail "exit code not passed through"
[[ $? == 7 ]] || fail "exit code not 7"
"$GSWAPCTL" run -- sh -c 'echo "$LD_PRELOAD"' | grep -q libgswap.so || fail "LD_PRELOAD not set"
# A spawned daemon must not hold the application's pipes: capturing the output of a program that
# spawned gswapd returns when the program exits.
export GSWAP_RUNTIME_DIR=$RT/run3
out=$(timeout 60 env GSWAP_DAEMON=spawn GSWAP_DAEMON_PATH="$GSWAPD" LD_PRELOAD="$LIBGSWAP" \
  "$MINITRAIN" "${TRAIN_ARGS[@]}" 2>&1) || fail "captured run failed or hung: $out"
[[ $(grep -o 'checksum: [0-9a-fx]*' <<<"$out" | awk '{print $2}') == "$ref" ]] ||
  fail "captured run changed the checksum"
ls "$GSWAP_RUNTIME_DIR"/*.sock >/dev/null || fail "the captured run did not spawn gswapd"
echo "PASS spawn"
