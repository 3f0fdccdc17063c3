#!/usr/bin/env bash
# just compare WORKLOAD A B [repeats] [seconds]: REPEATS profiled runs of builds A and B, then
# the comparison report (medians, noise, differential flame graphs) under reports/.
set -euo pipefail
cd "$(dirname "$0")/.."
workload=${1:?usage: just compare WORKLOAD A B [repeats] [seconds]}
a=${2:?build A}
b=${3:?build B}
repeats=${4:-3}
seconds=${5:-3}
dir="reports/$workload-$a-vs-$b-$(date +%Y%m%d-%H%M%S)"
ra=(); rb=()
for ((i = 1; i <= repeats; i++)); do
  for build in "$a" "$b"; do
    printf '==> %s %s, run %d of %d\n' "$workload" "$build" "$i" "$repeats" >&2
    bash scripts/run-workload.sh "$workload" "$build" "$dir/$build-$i" "" "" "$seconds" >/dev/null
  done
  ra+=("$dir/$a-$i/run.json"); rb+=("$dir/$b-$i/run.json")
done
target/release/switchyard compare --a "${ra[@]}" --b "${rb[@]}" --a-label "$a" --b-label "$b" -o "$dir"
ln -sfn "$(basename "$dir")" reports/latest
