#!/usr/bin/env bash
# just profile [workload] [build] [seconds] — or just profile pid=N [seconds].
#   spinlock-broker [spin|mutex|abs]   (default abs), one producer per CPU
#   mmsg-relay [threads|mmsg]          (default mmsg), 10 rooms of 9 speakers
#   read-state-cache [go|rust]         (default go), CAPACITY=2000000 RATE=20000 GC_INTERVAL=2s
#                                      (scripts/run-workload.sh holds the loads' defaults)
#   demo [mix|known|...]               the small demo target
# Records one workload build (server under switchyard, driver on loopback), or a live process
# until Ctrl-C, and writes reports/<name>-<time>/{run.json,index.html}; reports/latest points at
# the newest.
set -euo pipefail
cd "$(dirname "$0")/.."
workload=${1:-spinlock-broker}
build=${2:-}
seconds=${3:-}
# `just profile pid=N SECONDS`: a live process has no build, so the second word is the time.
case $workload in
  pid=*) [ -z "$seconds" ] && seconds=$build && build= ;;
  *) seconds=${seconds:-5} ;;
esac
sy=target/release/switchyard
stamp=$(date +%Y%m%d-%H%M%S)
step() { printf '==> %s\n' "$*" >&2; }

case $workload in
  pid=*)
    pid=${workload#pid=}
    dir="reports/pid-$pid-$stamp"
    mkdir -p "$dir"
    if [ -n "$seconds" ]; then
      step "recording pid $pid for $seconds s (or until it exits)"
      duration=(--duration "${seconds}s")
    else
      step "recording pid $pid until Ctrl-C (or until it exits)"
      duration=()
    fi
    status=0
    "$sy" record --pid "$pid" ${duration[@]+"${duration[@]}"} -o "$dir/run.json" || status=$?
    if [ ! -s "$dir/run.json" ]; then
      rm -rf "$dir"
      exit "$status"
    fi
    ;;
  demo)
    dir="reports/demo-${build:-mix}-$stamp"
    mkdir -p "$dir"
    step "recording the demo target for ${seconds} s"
    "$sy" record -o "$dir/run.json" -- target/release/switchyard-demo "${build:-mix}" --seconds "$seconds"
    status=0
    ;;
  spinlock-broker | mmsg-relay | read-state-cache)
    case $workload in
      spinlock-broker) build=${build:-abs} ;;
      mmsg-relay) build=${build:-mmsg} ;;
      read-state-cache) build=${build:-go} ;;
    esac
    dir="reports/$workload-$build-$stamp"
    step "recording $workload ($build) under load for ${seconds} s"
    # Empty load arguments take run-workload's defaults; it prints the load it runs.
    load=("" "")
    [ "$workload" = read-state-cache ] && load=("${CAPACITY:-}" "${RATE:-}")
    bash scripts/run-workload.sh "$workload" "$build" "$dir" "${load[@]}" "$seconds" >/dev/null &
    run=$!
    # Ctrl-C reaches the server, switchyard and the driver; the run's own script keeps what
    # was collected and the report is still written below.
    trap 'interrupted=1' INT
    interrupted=
    if [ -t 2 ]; then
      began=$SECONDS
      # (a second first: run-workload prints its load line at once)
      while sleep 1 && kill -0 "$run" 2>/dev/null; do
        printf '\r    %3d s elapsed (load runs %s s after start-up)' $((SECONDS - began)) "$seconds" >&2
      done
      printf '\r\033[K' >&2
    fi
    status=0
    wait "$run" || status=$?
    trap - INT
    # Refused before anything ran (an unknown build): run-workload has said why.
    [ -d "$dir" ] || exit "$status"
    [ -s "$dir/driver.out" ] && cat "$dir/driver.out"
    [ -s "$dir/record.out" ] && sed -n '/^switchyard:/,$p' "$dir/record.out"
    if [ ! -s "$dir/run.json" ]; then
      echo "error: no run was recorded (exit $status); see $dir/record.err" >&2
      exit 2
    fi
    [ -n "$interrupted" ] && status=2
    ;;
  *)
    echo "error: unknown workload '$workload'" >&2
    echo "hint: one of spinlock-broker, mmsg-relay, read-state-cache, demo, or pid=N" >&2
    exit 2
    ;;
esac
if [ ! -s "$dir/index.html" ]; then
  step "writing the report"
  "$sy" report "$dir/run.json" -o "$dir" >/dev/null
fi
ln -sfn "$(basename "$dir")" reports/latest
echo "report: $dir/index.html (reports/latest)"
exit "$status"
