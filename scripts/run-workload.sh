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
#
# BUILD is spin, mutex or abs for the broker; threads or mmsg for the relay. Binaries come
# from target/release (just build).
# AS_BUILD=NAME labels the run as another build (to check that budgets catch a regression).
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

mkdir -p "$out"
rm -f "$out/result.json" "$out/run.json"

case $workload in
  spinlock-broker)
    case $build in spin | mutex | abs) ;; *) echo "error: unknown build '$build' (spin, mutex, abs)" >&2; exit 2 ;; esac
    # The commit log is scratch: keep it out of the report directory.
    logdir=$(mktemp -d)
    trap 'rm -rf "$logdir"' EXIT
    server=("$bin/spinlock-broker" --lock "$build" --exit-after-idle 300 --dir "$logdir")
    record_flags=(--uprobe-span "acquire=broker_${build}_acquire")
    driver() { "$bin/spinlock-broker-driver" --addr "127.0.0.1:$1" --producers "$producers" \
      --size "$size" --duration "${seconds}s" --build "${AS_BUILD:-$build}" --out "$out/result.json"; }
    ;;
  mmsg-relay)
    case $build in threads | mmsg) ;; *) echo "error: unknown build '$build' (threads, mmsg)" >&2; exit 2 ;; esac
    speakers=${4:-9}
    rooms=${5:-10}
    server=("$bin/mmsg-relay" --mode "$build" --exit-after-idle 300)
    record_flags=()
    driver() { "$bin/mmsg-relay-driver" --addr "127.0.0.1:$1" --rooms "$rooms" --speakers "$speakers" \
      --duration "${seconds}s" --build "${AS_BUILD:-$build}" --out "$out/result.json"; }
    ;;
  read-state-cache)
    capacity=${4:-2000000}
    rate=${5:-20000}
    case $build in
      go)
        # GC_INTERVAL forces a cycle that often (the runtime itself forces one every 2 min).
        server=("$bin/read-state-cache-go" --capacity "$capacity" --exit-after-idle 300 ${GC_INTERVAL:+--gc-interval "$GC_INTERVAL"})
        record_flags=(--go-gc --stack-map-size 65536)
        ;;
      rust)
        server=("$bin/read-state-cache" --capacity "$capacity" --exit-after-idle 300)
        record_flags=()
        ;;
      *) echo "error: unknown build '$build' (go, rust)" >&2; exit 2 ;;
    esac
    driver() { "$bin/read-state-cache-driver" --addr "127.0.0.1:$1" --rate "$rate" --connections 4 \
      --duration "${seconds}s" --users 1000000 --channels-per-user 4 --zipf 1.1 --prefill \
      --capacity "$capacity" --build "${AS_BUILD:-$build}" --out "$out/result.json"; }
    ;;
  *) echo "error: unknown workload '$workload' (spinlock-broker, mmsg-relay, read-state-cache)" >&2; exit 2 ;;
esac

# The server announces `ready <port>` on stdout once it listens.
fifo=$(mktemp -u)
mkfifo "$fifo"
"$sy" record ${record_flags[@]+"${record_flags[@]}"} --workload-result "$out/result.json" -o "$out/run.json" \
  -- "${server[@]}" >"$fifo" 2>"$out/record.err" &
rec=$!
exec 3<"$fifo"
rm -f "$fifo"
port=
while IFS= read -r -t 30 line <&3; do
  case $line in ready\ *) port=${line#ready }; break ;; esac
done
if [ -z "$port" ]; then
  echo "error: $workload did not become ready; see $out/record.err" >&2
  kill "$rec" 2>/dev/null || true
  exit 2
fi
# Keep draining the server's and switchyard's stdout into a file.
cat <&3 >"$out/record.out" &
drain=$!
if ! driver "$port" >"$out/driver.out" 2>&1; then
  echo "error: the $workload driver failed; see $out/driver.out" >&2
  tail -n 3 "$out/driver.out" >&2
  kill -INT "$rec" 2>/dev/null || true
  wait "$rec" 2>/dev/null || true
  exit 2
fi
status=0
wait "$rec" || status=$?
wait "$drain" || true
if [ "$status" -ne 0 ]; then
  echo "error: switchyard record exited $status; see $out/record.err" >&2
  cat "$out/record.err" >&2
  exit "$status"
fi
"$sy" report "$out/run.json" -o "$out" >/dev/null
echo "$out"
