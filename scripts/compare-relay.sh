#!/usr/bin/env bash
# The mmsg relay story: threads vs mmsg, REPEATS runs each, at 4 and 9 speakers per room, for
# 10 and 20 rooms. Writes every run under reports/mmsg-relay/<rooms>r-<speakers>s/, comparison
# pages (threads vs mmsg) beside them, and prints the table of medians.
#
#   just compare-relay            (REPEATS=2 RUN_SECONDS=3 to change)
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${REPEATS:-2}
SECONDS_RUN=${RUN_SECONDS:-3}
root=reports/mmsg-relay
sy=target/release/switchyard
for rooms in 10 20; do
  for speakers in 4 9; do
    dir="$root/${rooms}r-${speakers}s"
    for ((r = 1; r <= REPEATS; r++)); do
      for build in threads mmsg; do
        echo "run: $rooms rooms x $speakers speakers, $build #$r" >&2
        bash scripts/run-workload.sh mmsg-relay "$build" "$dir/$build-$r" "$speakers" "$rooms" "$SECONDS_RUN" >/dev/null
      done
    done
    a=(); b=()
    for ((r = 1; r <= REPEATS; r++)); do a+=("$dir/threads-$r/run.json"); b+=("$dir/mmsg-$r/run.json"); done
    "$sy" compare --a "${a[@]}" --b "${b[@]}" --a-label threads --b-label mmsg \
      -o "$dir/compare-threads-vs-mmsg" >"$dir/compare-threads-vs-mmsg.txt"
  done
done
python3 scripts/relay-table.py "$root"
