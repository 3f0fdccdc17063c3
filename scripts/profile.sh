#!/usr/bin/env bash
# just profile [workload] [build] [seconds] — or just profile pid=N.
# Records one workload build (server under switchyard, driver on loopback), or a live process
# until Ctrl-C, and writes reports/<name>-<time>/{run.json,index.html}; reports/latest points at
# the newest.
set -euo pipefail
cd "$(dirname "$0")/.."
workload=${1:-spinlock-broker}
build=${2:-}
seconds=${3:-5}
sy=target/release/switchyard
stamp=$(date +%Y%m%d-%H%M%S)
step() { printf '==> %s\n' "$*" >&2; }

case $workload in
  pid=*)
    pid=${workload#pid=}
    dir="reports/pid-$pid-$stamp"
    mkdir -p "$dir"
    step "recording pid $pid until Ctrl-C (or it exits)"
    status=0
    "$sy" record --pid "$pid" -o "$dir/run.json" || status=$?
    [ -s "$dir/run.json" ] || exit "$status"
    ;;
  demo)
    dir="reports/demo-${build:-mix}-$stamp"
    mkdir -p "$dir"
    step "recording the demo target for ${seconds} s"
    "$sy" record -o "$dir/run.json" -- target/release/switchyard-demo "${build:-mix}" --seconds "$seconds"
    status=0
    ;;
  spinlock-broker)
    build=${build:-abs}
    dir="reports/$workload-$build-$stamp"
    step "recording $workload ($build) under load for ${seconds} s"
    bash scripts/run-workload.sh "$workload" "$build" "$dir" "$(nproc)" 2 "$seconds" >/dev/null
    cat "$dir/record.out" | sed -n '/^switchyard:/,$p'
    status=0
    ;;
  *)
    echo "error: unknown workload '$workload'" >&2
    echo "hint: one of spinlock-broker, demo, or pid=N" >&2
    exit 2
    ;;
esac
step "writing the report"
"$sy" report "$dir/run.json" -o "$dir" >/dev/null
ln -sfn "$(basename "$dir")" reports/latest
echo "report: $dir/index.html (reports/latest)"
exit "$status"
