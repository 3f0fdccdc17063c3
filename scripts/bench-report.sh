#!/usr/bin/env bash
# How long `switchyard report` takes for a long run: records the demo for SECONDS (default 60)
# once, then renders its report REPEATS times and prints each time and the median.
#
#   just bench-report [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_RUN=${1:-60}
REPEATS=${REPEATS:-5}
SY=target/release/switchyard
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "bench: recording the demo for ${SECONDS_RUN} s" >&2
"$SY" record -o "$tmp/run.json" -- target/release/switchyard-demo mix --seconds "$SECONDS_RUN" >/dev/null
size=$(du -h "$tmp/run.json" | cut -f1)
times=()
for ((i = 0; i < REPEATS; i++)); do
  start=$(date +%s%N)
  "$SY" report "$tmp/run.json" -o "$tmp/out" >/dev/null
  end=$(date +%s%N)
  times+=("$(( (end - start) / 1000000 ))")
done
median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (REPEATS + 1) / 2 ))p")
printf 'report of a %s s run (run.json %s, %s): %s ms median of %s (%s)\n' \
  "$SECONDS_RUN" "$size" "$(du -h "$tmp/out/index.html" | cut -f1) of HTML" "$median" "$REPEATS" "${times[*]}"
