#!/usr/bin/env bash
# gswapctl_test.sh: gswapctl's own behaviour, run by CTest.
#
#   gswapctl_test.sh config GSWAPCTL
#       `config check` names a repeated key, calls a directory unreadable with the OS reason,
#       names a missing file once, refuses a device and a pipe past 1 MiB in one line (as `run`
#       does), and refuses a value the library would refuse at cuInit
#   gswapctl_test.sh options GSWAPCTL
#       numeric options out of range (infinite, NaN, absurd) are one line and exit status 1,
#       before any daemon is asked
#   gswapctl_test.sh run GSWAPCTL GSWAPD LIBGSWAP MINITRAIN   (LD_LIBRARY_PATH reaches simcuda)
#       `gswapctl run` refuses a bad --budget (0 included) or library setting before starting
#       anything; it starts gswapd only when none serves the GPU: not when a daemon's socket
#       answers, nor when its lock is held; a program it runs registers with the running daemon;
#       it leaves framework allocator variables the user set untouched
#   gswapctl_test.sh open GSWAPD   (LD_LIBRARY_PATH reaches simcuda)
#       a detached gswapd says why it failed after letting go of the terminal; a config that is a
#       device is refused in one line; so is a GPU selector that could name a path, before any
#       path is made; a log file named with bytes that are not UTF-8 is used as given, and such a
#       log level is refused in one line; a runtime directory that is a file is refused; an existing one keeps its
#       mode, a new one is made 0700
#   gswapctl_test.sh views GSWAPCTL TESTS_DIR
#       `simulate --timeline` writes a valid timeline holding the swaps the simulation counts;
#       `plot` writes an SVG whose budget line and live peak read as the trace's numbers; bad
#       input (a trace that does not parse, a missing file, an unwritable output, times too long
#       to draw, a budget of 0, a trace that is not a regular file) is one line and exit status 1;
#       an output cut short by a file size limit is removed
set -uo pipefail
mode=$1
shift
RT=$(mktemp -d /tmp/gswapctl-test-XXXXXX)
PIDS=()
# Signals ($2, default TERM) the detached gswapd whose lock file is in runtime dir $1 (the lock
# holds its pid).
stop_daemon_of() {
  local f p
  for f in "$1"/*.lock; do
    [[ -f $f ]] || continue
    p=$(head -c 20 "$f" | tr -dc 0-9)
    [[ -n $p ]] && kill "-${2:-TERM}" "$p" 2>/dev/null || true
  done
}
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "$RT/run" "$RT/a/b/run" "$RT/c/run"; do stop_daemon_of "$p" KILL; done
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
    # A device is refused without being read (/dev/zero never ends); so is a pipe past 1 MiB.
    out=$(timeout 20 "$ctl" config check /dev/zero 2>&1) && fail "/dev/zero was accepted"
    [[ $out == "/dev/zero: cannot read the file: it is not a regular file or a pipe" ]] ||
      fail "/dev/zero: got '$out'"
    out=$(timeout 20 "$ctl" config check <(yes) 2>&1) && fail "an endless pipe was accepted"
    [[ $out == *": cannot read the file: it is larger than 1 MiB, the most a config file may hold" ]] ||
      fail "endless pipe: got '$out'"
    out=$(GSWAP_CONFIG=/dev/zero GSWAP_DAEMON=off timeout 20 "$ctl" run -- true 2>&1) &&
      fail "run took /dev/zero"
    [[ $out == "gswapctl: config: /dev/zero: cannot read the file: it is not a regular file or a pipe" ]] ||
      fail "run with GSWAP_CONFIG=/dev/zero: got '$out'"
    printf '{"budget": "50%%"}\n' >"$RT/ok.json"
    out=$("$ctl" config check <(cat "$RT/ok.json") 2>&1) || fail "a config from a pipe was refused: $out"
    # Values the parsers take but the library refuses (every cuInit would fail under run).
    printf '{"staging_bytes": "1KiB"}\n' >"$RT/lib.json"
    out=$("$ctl" config check "$RT/lib.json" 2>&1) && fail "a value the library refuses was accepted"
    [[ $out == "$RT/lib.json: the library would refuse it: GSWAP_STAGING_BYTES=\"1KiB\""* ]] ||
      fail "library refusal: got '$out'"
    # A log file the library cannot open is refused as the library refuses it at cuInit, by
    # config check and by run, before anything starts, and nothing is made for it.
    printf '{"daemon": "off", "log_file": "%s/missing/x.log"}\n' "$RT" >"$RT/log.json"
    out=$("$ctl" config check "$RT/log.json" 2>&1) && fail "an unwritable log file was accepted"
    [[ $out == "$RT/log.json: the library would refuse it: GSWAP_LOG_FILE=\"$RT/missing/x.log\" cannot be written (No such file or directory)" ]] ||
      fail "unwritable log file: got '$out'"
    out=$("$ctl" run --config "$RT/log.json" -- touch "$RT/ran" 2>&1) && fail "run started with an unwritable log file"
    [[ $out == "gswapctl: config: the library would refuse it: GSWAP_LOG_FILE="* ]] ||
      fail "run with an unwritable log file: got '$out'"
    [[ ! -e $RT/ran && ! -e $RT/missing ]] || fail "run started the program, or made the log's directory"
    # So is a link to a log file in a missing directory.
    ln -s "$RT/missing/y.log" "$RT/link.log"
    printf '{"daemon": "off", "log_file": "%s/link.log"}\n' "$RT" >"$RT/log.json"
    out=$("$ctl" config check "$RT/log.json" 2>&1) && fail "a link to an unwritable log file was accepted"
    [[ $out == *"GSWAP_LOG_FILE=\"$RT/link.log\" cannot be written (No such file or directory)" ]] ||
      fail "link to an unwritable log file: got '$out'"
    printf '{"daemon": "off", "log_file": "%s/x.log"}\n' "$RT" >"$RT/log.json"
    "$ctl" config check "$RT/log.json" >/dev/null 2>&1 || fail "a writable log file was refused"
    [[ ! -e $RT/x.log ]] || fail "config check made the log file"
    # A log file that is a FIFO being read is not opened by the check (closing it would end the
    # reader, and the library's open would then fail).
    mkfifo "$RT/log.fifo"
    cat "$RT/log.fifo" >/dev/null &
    reader=$!
    printf '{"daemon": "off", "log_file": "%s/log.fifo"}\n' "$RT" >"$RT/log.json"
    "$ctl" config check "$RT/log.json" >/dev/null 2>&1 || fail "a FIFO log file with a reader was refused"
    sleep 0.2
    kill -0 $reader 2>/dev/null || fail "config check ended the FIFO's reader"
    exec 9>"$RT/log.fifo"; exec 9>&-  # let the reader go
    wait $reader
    echo "PASS config"
    ;;
  options)
    ctl=$1
    # No daemon runs here: a refusal must come from the option, not from finding none.
    export GSWAP_RUNTIME_DIR=$RT/run
    unset GSWAP_CONFIG XDG_RUNTIME_DIR
    for v in inf -inf nan 1e300 3601 0 -1 1e-300 0.001; do
      err=$(timeout 20 "$ctl" top --count 2 --interval "$v" 2>&1 >/dev/null)
      rc=$?
      [[ $rc == 1 ]] || fail "top --interval $v: exit status $rc ($err)"
      [[ $(wc -l <<<"$err") == 1 && $err == "gswapctl: top: --interval must be from 0.01 to 3600 seconds, not "* ]] ||
        fail "top --interval $v: got '$err'"
      err=$(timeout 20 "$ctl" top --json --interval "$v" 2>&1 >/dev/null) &&
        fail "top --json --interval $v was taken"
      [[ $err == "gswapctl: top: --interval must be from 0.01 to 3600 seconds, not "* ]] ||
        fail "top --json --interval $v: got '$err'"
    done
    # In range, the option is taken: the one line says no daemon runs.
    err=$(timeout 20 "$ctl" top --count 1 --interval 3600 2>&1 >/dev/null)
    [[ $err == "gswapctl: no gswapd is running (runtime dir $RT/run)" ]] || fail "top --interval 3600: got '$err'"
    echo "PASS options"
    ;;
  open)
    gswapd=$1
    unset GSWAP_CONFIG XDG_RUNTIME_DIR GSWAP_GPU GSWAP_LOG_FILE
    echo data >"$RT/file"
    chmod 644 "$RT/file"
    # Detached, a failure after it let go of the terminal (a log file it cannot open) still says
    # why, through the pipe its parent waits on.
    out=$(GSWAP_RUNTIME_DIR=$RT/run timeout 20 "$gswapd" --gpu 0 --log-file "$RT/file/x.log" 2>&1) &&
      fail "a detached gswapd started with a log file under a regular file"
    grep -q "Not a directory" <<<"$out" || fail "the detached failure said: '$out'"
    # A log file in a directory that does not exist is refused with the reason (as the library
    # refuses GSWAP_LOG_FILE), and the directory is not made.
    out=$(GSWAP_RUNTIME_DIR=$RT/run timeout 20 "$gswapd" --gpu 0 --foreground \
      --log-file "$RT/missing/dir/d.log" 2>&1) && fail "gswapd started with a log file in a missing directory"
    [[ $out == "gswapd: cannot open the log file $RT/missing/dir/d.log: No such file or directory" ]] ||
      fail "a log file in a missing directory: got '$out'"
    [[ ! -e $RT/missing ]] || fail "gswapd made the log file's missing directories"
    # A log file that is a FIFO: with a reader, gswapd logs into it; with none, it is refused
    # (ENXIO) rather than waited on for ever.
    # The shell holds the FIFO read-write (which does not block) from before the reader opens it
    # until gswapd has gone, so the reader's open returns however late it starts, and it sees the
    # end of the file once the shell lets go: the test cannot wait on it for ever.
    mkfifo "$RT/d.fifo"
    exec 9<>"$RT/d.fifo"
    cat "$RT/d.fifo" >"$RT/d.fifo.out" 9<&- &
    reader=$!
    for ((i = 0; i < 200; i++)); do
      [[ -n $(find /proc/$reader/fd -lname "$RT/d.fifo" ! -name 9 2>/dev/null) ]] && break
      sleep 0.05
    done
    GSWAP_RUNTIME_DIR=$RT/fiforun timeout -s TERM 2 "$gswapd" --gpu 0 --foreground --log-level info \
      --log-file "$RT/d.fifo" >/dev/null 2>&1
    exec 9<&-
    wait $reader
    grep -q "gswapd serving GPU 0" "$RT/d.fifo.out" || fail "gswapd logging into a FIFO wrote: $(cat "$RT/d.fifo.out")"
    out=$(GSWAP_RUNTIME_DIR=$RT/fiforun timeout 20 "$gswapd" --gpu 0 --foreground --log-file "$RT/d.fifo" 2>&1) &&
      fail "gswapd started with a FIFO nobody reads for its log"
    [[ $out == "gswapd: cannot open the log file $RT/d.fifo: No such device or address" ]] ||
      fail "a FIFO log file with no reader: got '$out'"
    # A config that is a device is refused in one line, whichever way it is named.
    out=$(GSWAP_RUNTIME_DIR=$RT/run timeout 20 "$gswapd" --gpu 0 --foreground --config /dev/zero 2>&1) &&
      fail "gswapd took /dev/zero for its config"
    [[ $out == "gswapd: config: /dev/zero: cannot read the file: it is not a regular file or a pipe" ]] ||
      fail "gswapd --config /dev/zero: got '$out'"
    out=$(GSWAP_CONFIG=/dev/zero GSWAP_RUNTIME_DIR=$RT/run timeout 20 "$gswapd" --gpu 0 2>&1) &&
      fail "gswapd took GSWAP_CONFIG=/dev/zero"
    [[ $out == "gswapd: config: /dev/zero: cannot read the file: it is not a regular file or a pipe" ]] ||
      fail "GSWAP_CONFIG=/dev/zero gswapd: got '$out'"
    # A GPU selector that could name a path (the detached daemon's log file is named after it)
    # is refused in one line, from --gpu, GSWAP_GPU or the config, before anything is made.
    printf '{"gpu": "GPU-../../x"}\n' >"$RT/gpu.json"
    for sel in 'GPU-../../x' '../x' '0/..' ''; do
      out=$(GSWAP_RUNTIME_DIR=$RT/gpu timeout 20 "$gswapd" --gpu "$sel" 2>&1) &&
        fail "gswapd took --gpu '$sel'"
      [[ $out == "gswapd: --gpu: '$sel' is neither a GPU ordinal (0, 1, ...) nor a GPU UUID "* ]] ||
        fail "--gpu '$sel': got '$out'"
      out=$(GSWAP_GPU=$sel GSWAP_RUNTIME_DIR=$RT/gpu timeout 20 "$gswapd" 2>&1) &&
        fail "gswapd took GSWAP_GPU='$sel'"
      [[ $out == "gswapd: config: GSWAP_GPU: '$sel' is neither a GPU ordinal"* ]] ||
        fail "GSWAP_GPU='$sel': got '$out'"
    done
    out=$(GSWAP_RUNTIME_DIR=$RT/gpu timeout 20 "$gswapd" --config "$RT/gpu.json" 2>&1) &&
      fail "gswapd took a config's gpu GPU-../../x"
    [[ $out == "gswapd: config: gpu: out of range: 'GPU-../../x' is neither a GPU ordinal"* ]] ||
      fail "config gpu GPU-../../x: got '$out'"
    [[ ! -e $RT/gpu && ! -e $RT/x.log && ! -e $RT/x ]] ||
      fail "a bad GPU selector made paths: $(find "$RT" -newer "$RT/gpu.json")"
    # Command-line values need not be UTF-8: a log file's name is a path, used as given; a bad
    # log level gets the usual one line, its byte escaped.
    log=$RT/log$'\xff'.txt
    GSWAP_RUNTIME_DIR=$RT/run timeout -s TERM 3 "$gswapd" --gpu 0 --foreground --log-file "$log" \
      --log-level info >"$RT/utf8.out" 2>&1
    grep -q "gswapd serving GPU 0" "$log" ||
      fail "no log in a file named with a byte that is not UTF-8: $(cat "$RT/utf8.out"; ls "$RT")"
    out=$(GSWAP_RUNTIME_DIR=$RT/run timeout 20 "$gswapd" --gpu 0 --foreground --log-level $'\xff' 2>&1) &&
      fail "gswapd took --log-level \\xff"
    [[ $out == "gswapd: --log-level: '\xff' is not one of off|error|warn|info|debug|trace" ]] ||
      fail "--log-level \\xff: got '$out'"
    # A runtime directory that is a file is refused, the file left as it was.
    out=$(GSWAP_RUNTIME_DIR=$RT/file timeout 20 "$gswapd" --gpu 0 --foreground 2>&1) &&
      fail "a regular file was taken for the runtime directory"
    [[ $out == *"$RT/file is not a directory"* ]] || fail "runtime dir as a file: got '$out'"
    [[ $(stat -c %a "$RT/file") == 644 ]] || fail "the file's mode changed: $(stat -c %a "$RT/file")"
    # An existing runtime directory keeps its mode (it may be /tmp); a new one is made 0700.
    mkdir "$RT/shared" && chmod 1777 "$RT/shared"
    GSWAP_RUNTIME_DIR=$RT/shared timeout -s TERM 2 "$gswapd" --gpu 0 --foreground \
      --log-file "$RT/open.log" >/dev/null 2>&1
    [[ $(stat -c %a "$RT/shared") == 1777 ]] ||
      fail "gswapd changed an existing runtime directory's mode to $(stat -c %a "$RT/shared")"
    GSWAP_RUNTIME_DIR=$RT/new timeout -s TERM 2 "$gswapd" --gpu 0 --foreground \
      --log-file "$RT/open.log" >/dev/null 2>&1
    [[ $(stat -c %a "$RT/new") == 700 ]] || fail "a new runtime directory is $(stat -c %a "$RT/new")"
    # Detached, with missing parents: the directory is still made 0700 (not by the log file's
    # creation, 0755), and its default log file 0600. With an allow-list it is 0755, so the
    # allowed users' gswapctl can list it.
    (umask 022; GSWAP_RUNTIME_DIR=$RT/a/b/run timeout 20 "$gswapd" --gpu 0 >/dev/null 2>&1) ||
      fail "a detached gswapd did not start"
    [[ $(stat -c %a "$RT/a/b/run") == 700 ]] ||
      fail "a detached gswapd's new runtime directory is $(stat -c %a "$RT/a/b/run")"
    [[ $(stat -c %a "$RT/a/b/run/gswapd-0.log") == 600 ]] ||
      fail "the default log file is $(stat -c %a "$RT/a/b/run/gswapd-0.log")"
    stop_daemon_of "$RT/a/b/run"
    (umask 022; GSWAP_ALLOW_UIDS=65534 GSWAP_RUNTIME_DIR=$RT/c/run timeout 20 "$gswapd" --gpu 0 \
      >/dev/null 2>&1) || fail "a detached gswapd with an allow-list did not start"
    [[ $(stat -c %a "$RT/c/run") == 755 ]] ||
      fail "with an allow-list the new runtime directory is $(stat -c %a "$RT/c/run")"
    stop_daemon_of "$RT/c/run"
    # Out of descriptors (a low limit, six processes holding connections that never say hello):
    # gswapd says so once a second and waits for some to come back, instead of polling the
    # listening socket in a busy loop (it used half a core until the connections timed out).
    mkdir -p "$RT/emfile"
    (ulimit -n 48; export GSWAP_RUNTIME_DIR=$RT/emfile; exec "$gswapd" --gpu 0 --foreground --log-file "$RT/emfile.log") \
      </dev/null >/dev/null 2>&1 &
    dpid=$!
    for ((i = 0; i < 100; i++)); do ls "$RT"/emfile/*.sock >/dev/null 2>&1 && break; sleep 0.05; done
    holders=()
    for i in 1 2 3 4 5 6; do
      timeout 8 python3 -c '
import glob, socket, sys, time
path = glob.glob(sys.argv[1] + "/*.sock")[0]
socks, end = [], time.time() + 7
while time.time() < end:
    while len(socks) < 8:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            s.connect(path)
        except OSError:
            s.close()
            break
        socks.append(s)
    time.sleep(0.05)
' "$RT/emfile" &
      holders+=($!)
    done
    sleep 2
    before=0 after=0
    before=$(awk '{print $14 + $15}' /proc/$dpid/stat)
    sleep 2
    after=$(awk '{print $14 + $15}' /proc/$dpid/stat)
    wait "${holders[@]}" 2>/dev/null
    kill $dpid; wait $dpid 2>/dev/null
    ((after - before < 20)) || fail "out of descriptors, gswapd used $((after - before)) ticks of CPU in 2 s"
    grep -q "cannot accept connections: Too many open files" "$RT/emfile.log" ||
      fail "out of descriptors, the log said: $(tail -3 "$RT/emfile.log")"
    echo "PASS open"
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

    # A bad --budget, or a setting the library refuses, is refused before a daemon starts.
    out=$("$RT/bin/gswapctl" run --budget 12parsecs -- true 2>&1) && fail "a bad --budget ran: $out"
    [[ $out == "gswapctl: --budget: '12parsecs' is not a size"* ]] || fail "--budget 12parsecs: got '$out'"
    # Sizes that round to 0 bytes are refused as GSWAP_BUDGET=0 is, not handed to the library.
    for b in 0 0.5 0B 0GiB; do
      out=$("$RT/bin/gswapctl" run --budget "$b" -- true 2>&1) && fail "--budget $b ran: $out"
      [[ $out == "gswapctl: --budget: '$b' is not a budget: it must be above 0 bytes" ]] ||
        fail "--budget $b: got '$out'"
    done
    # An empty --budget or --config (a script's unset variable) is refused, not taken as not
    # given (the program would run with no budget, or the environment's GSWAP_BUDGET).
    out=$(GSWAP_BUDGET=1GiB "$RT/bin/gswapctl" run --budget '' -- true 2>&1) && fail "--budget '' ran: $out"
    [[ $out == *"--budget"*"expected a budget (6GiB, 75%), got ''"* ]] || fail "--budget '': got '$out'"
    out=$("$RT/bin/gswapctl" run --config '' -- true 2>&1) && fail "--config '' ran: $out"
    [[ $out == *"--config"*"expected a file path, got ''"* ]] || fail "--config '': got '$out'"
    out=$(GSWAP_PINNED_CAP=50% "$RT/bin/gswapctl" run -- true 2>&1) &&
      fail "a setting the library refuses ran: $out"
    out=$(GSWAP_GPU=GPU-../../x "$RT/bin/gswapctl" run -- true 2>&1) && fail "GSWAP_GPU=GPU-../../x ran: $out"
    [[ $out == "gswapctl: config: GSWAP_GPU: 'GPU-../../x' is neither a GPU ordinal"* ]] ||
      fail "run with GSWAP_GPU=GPU-../../x: got '$out'"
    [[ $(starts) == 0 ]] || fail "run started gswapd for a command it refused"

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

    # Allocator variables the user set reach the program as set; the others are set for it.
    out=$(env GSWAP_DAEMON=off PYTORCH_CUDA_ALLOC_CONF=backend:native,max_split_size_mb:64 \
      "$RT/bin/gswapctl" run -- sh -c 'echo "conf=$PYTORCH_CUDA_ALLOC_CONF tf=$TF_GPU_ALLOCATOR"' \
      2>"$RT/run.err") || fail "run with a user setting failed: $(cat "$RT/run.err")"
    [[ $out == "conf=backend:native,max_split_size_mb:64 tf=cuda_malloc_async" ]] ||
      fail "run changed what the user set: $out"
    grep -q "kept as set: PYTORCH_CUDA_ALLOC_CONF" "$RT/run.err" ||
      fail "run did not say it kept the user's setting: $(cat "$RT/run.err")"
    echo "PASS run"
    ;;
  views)
    ctl=$1 tests=$2
    # The simulated timeline: valid, and holding every byte the simulation moved.
    "$ctl" simulate --trace ref:resnet50 --budget 50% --search-ms 20 --json \
      --timeline "$RT/sim.json" >"$RT/sim.out" || fail "simulate --timeline failed: $(cat "$RT/sim.out")"
    python3 "$tests/timeline_check.py" "$RT/sim.json" >"$RT/sim.summary" || fail "invalid timeline"
    python3 - "$RT/sim.out" "$RT/sim.summary" <<'PY' || fail "the timeline and the simulation disagree"
import json, sys
sim, tl = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert tl["producer"] == "simulator", tl
assert tl["kernels"] == sim["launches"], (tl["kernels"], sim["launches"])
assert tl["swap_out_bytes"] == sim["swapped_out_bytes"] > 0, (tl, sim)
assert tl["restore_bytes"] == sim["swapped_in_bytes"], (tl, sim)
for t in ("D2H (swap-outs)", "H2D (restores)", "streams waiting for restores", "recomputations", "stream 0"):
    assert t in tl["device_tracks"], (t, tl["device_tracks"])
assert tl["counters"] == ["memory.budget_bytes", "memory.pinned_host_bytes", "memory.resident_bytes"], tl["counters"]
PY
    # The plot reads as the numbers the simulation gives.
    "$ctl" plot --trace ref:resnet50 --budget 50% --search-ms 20 --out "$RT/plot.svg" ||
      fail "plot failed"
    read -r budget peak < <(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["budget_bytes"], j["trace_peak_bytes"])' "$RT/sim.out")
    python3 "$tests/plot_check.py" "$RT/plot.svg" "$budget" "$peak" || fail "the plot is wrong"
    # Without --budget nothing moves: the budget is the peak.
    "$ctl" plot --trace ref:unet --search-ms 0 --out "$RT/full.svg" >/dev/null || fail "plot at the peak failed"

    # Bad input: one line, exit status 1.
    one_line_error() {  # WHAT EXPECTED-REGEX CMD...
      local what=$1 want=$2
      shift 2
      local err rc
      err=$("$@" 2>&1 >/dev/null)
      rc=$?
      [[ $rc == 1 ]] || fail "$what: exit status $rc, expected 1 ($err)"
      [[ $(wc -l <<<"$err") == 1 && $err =~ $want ]] || fail "$what: got '$err'"
    }
    echo '{"format": "gswap-trace", "version": 1, "launches": [' >"$RT/broken.json"
    one_line_error "a trace that does not parse" "broken.json: .*not valid JSON" \
      "$ctl" plot --trace "$RT/broken.json" --out "$RT/x.svg"
    one_line_error "a missing trace" "cannot open trace file" \
      "$ctl" plot --trace "$RT/none.json" --out "$RT/x.svg"
    one_line_error "an unwritable plot" "cannot write $RT/no/such/dir/x.svg: No such file or directory" \
      "$ctl" plot --trace ref:resnet50 --budget 50% --search-ms 0 --out "$RT/no/such/dir/x.svg"
    one_line_error "an unwritable timeline" "cannot write $RT/no/t.json" \
      "$ctl" simulate --trace ref:resnet50 --budget 50% --search-ms 0 --json --timeline "$RT/no/t.json"
    one_line_error "plot without a source" "give --pid P or --trace" "$ctl" plot --out "$RT/x.svg"
    # A timeline or plot cut short by a file size limit (the write fails with EFBIG, SIGXFSZ
    # ignored) is one line, and the file cut short is removed, not left looking whole.
    ln -s "$RT/big-target.svg" "$RT/big-link.svg"
    for out in "$RT/big.json" "$RT/big.svg" "$RT/big-link.svg"; do
      if [[ $out == *.json ]]; then
        cmd=("$ctl" simulate --trace ref:resnet50 --budget 50% --search-ms 0 --json --timeline "$out")
      else
        cmd=("$ctl" plot --trace ref:resnet50 --budget 50% --search-ms 0 --out "$out")
      fi
      err=$( (trap '' XFSZ; ulimit -f 8; exec "${cmd[@]}") 2>&1 >/dev/null)
      rc=$?
      [[ $rc == 1 && $(wc -l <<<"$err") == 1 && $err == *"cannot write $out: File too large"* ]] ||
        fail "an output cut short ($out): status $rc, '$err'"
      [[ ! -e $out ]] || fail "an output cut short was left behind: $(stat -c %s "$out") bytes of $out"
    done
    [[ -L $RT/big-link.svg ]] || fail "the link to an output cut short was removed, not what it names"
    # The search's time with another policy is refused, as by simulate.
    err=$("$ctl" plot --trace ref:resnet50 --budget 50% --policy lru --search-ms 5 --out "$RT/x.svg" 2>&1) &&
      fail "plot --policy lru --search-ms 5 succeeded"
    [[ $err == *"--search-ms: applies to --policy capuchin only, not lru"* ]] ||
      fail "plot --policy lru --search-ms 5: got '$err'"
    # A path holding a newline is shown escaped: the error stays one line.
    one_line_error "an unwritable timeline named with a newline" 'cannot write .*/no/a\\x0ab\.json' \
      "$ctl" simulate --trace ref:resnet50 --budget 50% --search-ms 0 --json --timeline "$RT/no/a"$'\n'"b.json"
    # A file option given as "" (a script's unset variable) is refused, not taken as not given.
    for opt in --plan --timeline; do
      err=$("$ctl" simulate --trace ref:resnet50 --budget 50% --search-ms 0 $opt "" 2>&1 >/dev/null) &&
        fail "simulate $opt '' succeeded"
      [[ $err == *"$opt: expected a file path, got ''"* ]] || fail "simulate $opt '': got '$err'"
    done
    # Traces whose times could not be drawn are refused by the parser, in time (the plot once
    # looped forever on them); a budget of 0 is a budget, not "draw at the peak".
    trace() {  # DUR_US BYTES_PER_S
      printf '{"format": "gswap-trace", "version": 1, "device": {"capacity_bytes": 17179869184, "h2d_bytes_per_s": %s, "d2h_bytes_per_s": %s}, "regions": [{"id": 1, "bytes": 67108864, "alloc_seq": 0}, {"id": 2, "bytes": 67108864, "alloc_seq": 0}], "launches": [{"seq": 0, "start_us": 0, "dur_us": %s, "stream": 0, "regions": [1], "kernel": "k"}, {"seq": 1, "start_us": 0, "dur_us": %s, "stream": 0, "regions": [2], "kernel": "k"}, {"seq": 2, "start_us": 0, "dur_us": %s, "stream": 0, "regions": [1], "kernel": "k"}]}\n' \
        "$2" "$2" "$1" "$1" "$1"
    }
    trace 1e308 5e10 >"$RT/long.json"
    one_line_error "a duration of 1e308 us" "long.json: launches\[0\].dur_us: 1e\+308 us is longer than" \
      timeout 20 "$ctl" plot --trace "$RT/long.json" --out "$RT/x.svg"
    trace 10 1e-300 >"$RT/slow.json"
    one_line_error "a bandwidth of 1e-300 bytes/s" "slow.json: device.h2d_bytes_per_s: must be at least 1 byte/s" \
      timeout 20 "$ctl" plot --trace "$RT/slow.json" --budget 50% --out "$RT/x.svg"
    trace 10 5e10 >"$RT/ok.json"
    one_line_error "plot --budget 0" "budget of 0 bytes is impossible: launch 0 " \
      "$ctl" plot --trace "$RT/ok.json" --budget 0 --out "$RT/x.svg"
    "$ctl" plot --trace "$RT/ok.json" --out "$RT/ok.svg" >/dev/null || fail "plot at the peak failed"
    one_line_error "a device as the trace" "trace file '/dev/zero' is not a regular file or a pipe" \
      timeout 20 "$ctl" plot --trace /dev/zero --out "$RT/x.svg"
    one_line_error "a directory as the trace" "trace file '$RT' is not a regular file or a pipe" \
      "$ctl" simulate --trace "$RT" --budget 50%
    echo "PASS views"
    ;;
  *)
    echo "unknown mode $mode" >&2
    exit 2
    ;;
esac
