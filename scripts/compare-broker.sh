#!/usr/bin/env bash
# The spin-lock broker story: spin, mutex and abs, REPEATS runs each, at low contention
# (producers = cores) and high contention (producers = 4 x cores), for 2 B and 1 KiB messages.
# Writes every run and report under reports/spinlock-broker/<contention>-<size>B/, comparison
# pages (mutex vs spin, mutex vs abs) beside them, and prints the table of medians.
#
#   just compare-broker            (REPEATS=3 RUN_SECONDS=3 to change)
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${REPEATS:-3}
SECONDS_RUN=${RUN_SECONDS:-3}
cores=$(nproc)
root=reports/spinlock-broker
sy=target/release/switchyard
for contention in low high; do
  producers=$cores
  [ "$contention" = high ] && producers=$((4 * cores))
  for size in 2 1024; do
    dir="$root/$contention-${size}B"
    for ((r = 1; r <= REPEATS; r++)); do
      for build in spin mutex abs; do
        echo "run: $contention contention ($producers producers), $size B, $build #$r" >&2
        bash scripts/run-workload.sh spinlock-broker "$build" "$dir/$build-$r" "$producers" "$size" "$SECONDS_RUN" >/dev/null
      done
    done
    for other in spin abs; do
      a=(); b=()
      for ((r = 1; r <= REPEATS; r++)); do a+=("$dir/mutex-$r/run.json"); b+=("$dir/$other-$r/run.json"); done
      "$sy" compare --a "${a[@]}" --b "${b[@]}" --a-label mutex --b-label "$other" \
        -o "$dir/compare-mutex-vs-$other" >"$dir/compare-mutex-vs-$other.txt"
    done
  done
done
python3 scripts/broker-table.py "$root"
