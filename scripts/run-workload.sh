#!/usr/bin/env bash
# One profiled workload run: the server under `switchyard record`, its driver on loopback, and
# the report. Writes OUT/run.json, OUT/result.json (the driver's), OUT/index.html.
#
#   scripts/run-workload.sh spinlock-broker BUILD OUT [producers] [size] [seconds]
#   scripts/run-workload.sh mmsg-relay BUILD OUT [speakers-per-room] [rooms] [seconds]
#   scripts/run-workload.sh read-state-cache BUILD OUT [capacity] [rate] [seconds]
#
# An empty load argument takes its default: one producer per CPU and 2-byte messages;
# 9 speakers in each of 10 rooms; 2,000,000 read states at 20,000 requests/s; 3 seconds.
# The load is printed on stderr once the arguments are accepted.
#
# BUILD is spin, mutex or abs for the broker; threads or mmsg for the relay; go or rust for the
# cache. Binaries come from target/release (just build).
# AS_BUILD=NAME labels the run as another build (to check that budgets catch a regression).
# GC_INTERVAL (default 2s) forces a Go GC cycle that often, so a short run shows collections
# (the runtime itself forces one every 2 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
workload=${1:?usage: run-workload.sh WORKLOAD BUILD OUT [producers] [size] [seconds]}
build=${2:?build}
out=${3:?output directory}
producers=${4:-$(nproc)}
size=${5:-2}
seconds=${6:-3}
bin=target/release
sy=$bin/switchyard

refuse_build() {
  echo "error: $workload has no build '$build'" >&2
  echo "hint: one of: $1" >&2
  exit 2
}

case $workload in
  spinlock-broker)
    case $build in spin | mutex | abs) ;; *) refuse_build "spin, mutex, abs" ;; esac
    load="$producers producers, $size-byte messages"
    # The commit log is scratch: keep it out of the report directory.
    logdir=$(mktemp -d)
    trap 'rm -rf "$logdir"' EXIT
    server=("$bin/spinlock-broker" --lock "$build" --exit-after-idle 300 --dir "$logdir")
    record_flags=(--uprobe-span "acquire=broker_${build}_acquire")
    driver() { "$bin/spinlock-broker-driver" --addr "127.0.0.1:$1" --producers "$producers" \
      --size "$size" --duration "${seconds}s" --build "${AS_BUILD:-$build}" --out "$out/result.json"; }
    ;;
  mmsg-relay)
    case $build in threads | mmsg) ;; *) refuse_build "threads, mmsg" ;; esac
    speakers=${4:-9}
    rooms=${5:-10}
    load="$rooms rooms of $speakers speakers"
    server=("$bin/mmsg-relay" --mode "$build" --exit-after-idle 300)
    record_flags=()
    driver() { "$bin/mmsg-relay-driver" --addr "127.0.0.1:$1" --rooms "$rooms" --speakers "$speakers" \
      --duration "${seconds}s" --build "${AS_BUILD:-$build}" --out "$out/result.json"; }
    ;;
  read-state-cache)
    capacity=${4:-2000000}
    rate=${5:-20000}
    load="$capacity read states (filled before recording), $rate requests/s"
    case $build in
      go)
        gc_interval=${GC_INTERVAL:-2s}
        server=("$bin/read-state-cache-go" --capacity "$capacity" --gc-interval "$gc_interval")
        record_flags=(--go-gc --stack-map-size 65536)
        load+=", a GC forced every $gc_interval"
        ;;
      rust)
        server=("$bin/read-state-cache" --capacity "$capacity")
        record_flags=()
        ;;
      *) refuse_build "go, rust" ;;
    esac
    # Filling the cache (millions of inserts, and the Go heap growing to hold them) is set-up,
    # not the story: the server starts on its own, the cache is filled, and only then does
    # switchyard attach (--pid) for the steady state the driver measures.
    attach=after-prefill
    prefill() { "$bin/read-state-cache-driver" --addr "127.0.0.1:$1" --connections 4 \
      --channels-per-user 4 --prefill-only --capacity "$capacity"; }
    driver() { "$bin/read-state-cache-driver" --addr "127.0.0.1:$1" --rate "$rate" --connections 4 \
      --duration "${seconds}s" --users 1000000 --channels-per-user 4 --zipf 1.1 \
      --capacity "$capacity" --build "${AS_BUILD:-$build}" --out "$out/result.json"; }
    ;;
  *)
    echo "error: unknown workload '$workload'" >&2
    echo "hint: one of: spinlock-broker, mmsg-relay, read-state-cache" >&2
    exit 2
    ;;
esac
printf '    %s (%s): %s, %s s\n' "$workload" "$build" "$load" "$seconds" >&2

mkdir -p "$out"
rm -f "$out/result.json" "$out/run.json"

# Run in the background (`record … &`): exec, so that $! is switchyard itself and a SIGINT sent
# to it reaches it rather than a subshell.
record() {
  exec "$sy" record ${record_flags[@]+"${record_flags[@]}"} --workload-result "$out/result.json" \
    -o "$out/run.json" "$@"
}

# The server announces `ready <port>` on stdout once it listens.
fifo=$(mktemp -u)
mkfifo "$fifo"
if [ "${attach:-spawn}" = spawn ]; then
  # Spawned under switchyard: recorded from exec; it exits once the driver has gone.
  record -- "${server[@]}" >"$fifo" 2>"$out/record.err" &
  rec=$!
  stop() { kill -INT "$rec" 2>/dev/null || true; wait "$rec" 2>/dev/null || true; }
else
  "${server[@]}" >"$fifo" 2>"$out/server.err" &
  server_pid=$!
  rec=
  stop() {
    [ -n "$rec" ] && { kill -INT "$rec" 2>/dev/null || true; wait "$rec" 2>/dev/null || true; }
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  }
fi
exec 3<"$fifo"
rm -f "$fifo"
port=
while IFS= read -r -t 30 line <&3; do
  case $line in ready\ *) port=${line#ready }; break ;; esac
done
if [ -z "$port" ]; then
  echo "error: $workload did not become ready; see $out/record.err or $out/server.err" >&2
  stop
  exit 2
fi
if [ "${attach:-spawn}" = spawn ]; then
  # Keep draining the server's and switchyard's stdout into a file.
  cat <&3 >"$out/record.out" &
else
  cat <&3 >"$out/server.out" &
  if ! prefill "$port" >"$out/prefill.out" 2>&1; then
    echo "error: filling the $workload failed; see $out/prefill.out" >&2
    tail -n 3 "$out/prefill.out" >&2
    stop
    exit 2
  fi
  record --pid "$server_pid" >"$out/record.out" 2>"$out/record.err" &
  rec=$!
  # Attached once switchyard says it is recording (loading the probes takes a second or two).
  for _ in $(seq 600); do
    grep -q '^switchyard: recording pid' "$out/record.err" 2>/dev/null && break
    if ! kill -0 "$rec" 2>/dev/null; then
      echo "error: switchyard record could not attach; see $out/record.err" >&2
      cat "$out/record.err" >&2
      rec=
      stop
      exit 2
    fi
    sleep 0.1
  done
fi
drain=$!
if ! driver "$port" >"$out/driver.out" 2>&1; then
  echo "error: the $workload driver failed; see $out/driver.out" >&2
  tail -n 3 "$out/driver.out" >&2
  stop
  exit 2
fi
status=0
if [ "${attach:-spawn}" = spawn ]; then
  wait "$rec" || status=$?
else
  # The recording of a live process ends on Ctrl-C (exit 0); then the server is stopped.
  kill -INT "$rec" 2>/dev/null || true
  wait "$rec" || status=$?
  rec=
  stop
fi
wait "$drain" || true
if [ "$status" -ne 0 ]; then
  echo "error: switchyard record exited $status; see $out/record.err" >&2
  cat "$out/record.err" >&2
  exit "$status"
fi
"$sy" report "$out/run.json" -o "$out" >/dev/null
echo "$out"
