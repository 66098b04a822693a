#!/usr/bin/env bash
# Scenario: a client of another uid is refused. As root: the daemon runs as uid 65534 with its own
# runtime directory, root connects, SO_PEERCRED shows uid 0 and the daemon refuses; the client
# still trains (passive mode) and both sides log the refusal.
source "$(dirname "$0")/lib.sh"
if [[ $(id -u) != 0 ]]; then
  echo "SKIP: needs root to run the daemon under another uid"
  exit 0
fi
command -v setpriv >/dev/null || { echo "SKIP: setpriv not installed"; exit 0; }
# uid 65534 must reach the binaries and the simulated driver.
for f in "$GSWAPD" "$GSWAPCTL" "$SIMCUDA_DIR/libcuda.so.1"; do
  setpriv --reuid 65534 --regid 65534 --clear-groups test -r "$f" ||
    { echo "SKIP: uid 65534 cannot read $f"; exit 0; }
done
mkdir -p "$RT/nobody"
chown 65534:65534 "$RT/nobody"
export GSWAP_RUNTIME_DIR=$RT/nobody/run
setpriv --reuid 65534 --regid 65534 --clear-groups env GSWAP_RUNTIME_DIR="$GSWAP_RUNTIME_DIR" \
  LD_LIBRARY_PATH="$LD_LIBRARY_PATH" "$GSWAPD" --gpu 0 --foreground --log-file "$RT/nobody/daemon.log" \
  --log-level info &
DAEMON_PIDS+=($!)
wait_for "the uid-65534 daemon" 10 "ls $GSWAP_RUNTIME_DIR/*.sock"
ref=$(reference_checksum)
start_train "$RT/train.out" GSWAP_LOG=warn
wait "$TRAIN_PID" || fail "minitrain failed: $(tail -n 5 "$RT/train.out")"
grep -q "refused" "$RT/train.out" || fail "the library did not log the refusal"
grep -q "refused pid .*uid 0" "$RT/nobody/daemon.log" || fail "the daemon did not log the refusal"
[[ $(checksum_of "$RT/train.out") == "$ref" ]] || fail "checksum changed"
# The control plane is refused the same way.
out=$("$GSWAPCTL" status 2>&1) && fail "status as root was accepted: $out"
echo "$out" | grep -q "refused" || fail "gswapctl did not say it was refused: $out"
# The other way round: root's gswapd allow-lists uid 65534, whose gswapctl finds its socket (it
# lists the runtime directory, made 0755 for that) and is answered.
chmod 755 "$RT"
allowing=$RT/allowing/run
GSWAP_RUNTIME_DIR=$allowing GSWAP_ALLOW_UIDS=65534 "$GSWAPD" --gpu 0 --foreground \
  --log-file "$RT/allowing.log" &
DAEMON_PIDS+=($!)
wait_for "the allow-listing daemon" 10 "ls $allowing/*.sock"
[[ $(stat -c %a "$allowing") == 755 ]] || fail "the allow-listing runtime dir is $(stat -c %a "$allowing")"
out=$(setpriv --reuid 65534 --regid 65534 --clear-groups env GSWAP_RUNTIME_DIR="$allowing" \
  "$GSWAPCTL" status 2>&1) || fail "an allowed uid's gswapctl status failed: $out"
echo "PASS other_uid"
