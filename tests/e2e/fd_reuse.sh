#!/usr/bin/env bash
# Scenario: the program closes gswap's socket to gswapd and opens a file that takes its number
# (tests/preload/fd_reuse.cpp). gswap leaves the file alone (what the program writes lands in it)
# and connects again on a socket of its own; gswapd sees no protocol error.
source "$(dirname "$0")/lib.sh"
: "${FD_REUSE:?}"
start_daemon "$RT/daemon.log"
env GSWAP_DAEMON=connect GSWAP_LOG=info LD_PRELOAD="$LIBGSWAP" "$FD_REUSE" "$RT/own.txt" \
  >"$RT/fd_reuse.out" 2>&1 || fail "fd_reuse failed: $(cat "$RT/fd_reuse.out")"
grep -q '^PASS$' "$RT/fd_reuse.out" || fail "fd_reuse: $(cat "$RT/fd_reuse.out")"
grep -q "the program closed its socket" "$RT/fd_reuse.out" ||
  fail "no line says why the connection ended: $(cat "$RT/fd_reuse.out")"
if grep -q "protocol error" "$RT/daemon.log"; then fail "gswapd saw a protocol error"; fi
echo "PASS fd_reuse"
