#!/usr/bin/env bash
# What a switch program's parts cost a context switch: one exact clock read kept per CPU
# (`switchyard floor switch-clock`; the switch program reads one at every switch), and finding a
# thread's entry two ways, in an array by tid (what the switch program does) or in task storage
# (BPF_MAP_TYPE_TASK_STORAGE): programs on sched_switch that find the entries of both threads of
# the switch and count the switch in them (`switch-array`, `switch-task-storage`). Each is next
# to the empty program (`switchyard floor switch`). The kernel's run-time statistics time each run
# (`--program-time`) while a pipe ping-pong pinned to CPU 1 switches ROUNDS round trips.
# REPEATS repeats, each kind once a repeat, in rotated order.
#   bash scripts/bench-thread-state.sh [REPEATS] [ROUNDS]
set -euo pipefail
repeats=${1:-5}
rounds=${2:-200000}
switchyard=${SWITCHYARD:-target/release/switchyard}
demo=${DEMO:-target/release/switchyard-demo}
kinds=(switch switch-clock switch-array switch-task-storage)

if [[ $(id -u) != 0 ]]; then
    echo "error: the floor's programs need root; hint: sudo just bench-thread-state" >&2
    exit 2
fi
for bin in "$switchyard" "$demo"; do
    if [[ ! -x $bin ]]; then
        echo "error: $bin is not built; hint: cargo build --release --bins" >&2
        exit 2
    fi
done
if ! command -v taskset > /dev/null; then
    echo "error: no taskset; hint: apt-get install util-linux" >&2
    exit 2
fi

work=$(mktemp -d)
floor_pid=
cleanup() {
    [[ -n $floor_pid ]] && kill -INT "$floor_pid" 2> /dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# One kind, once: the floor attached, the ping-pong run, the floor detached; prints
# "NS_A_RUN RUNS NS_A_ROUND_TRIP".
measure() {
    local kind=$1
    mkfifo "$work/ready"
    "$switchyard" floor "$kind" --program-time --ready-fd 3 3> "$work/ready" \
        > "$work/out" 2> "$work/err" &
    floor_pid=$!
    local line=
    read -r -t 60 line < "$work/ready" || true
    rm -f "$work/ready"
    if [[ $line != "floor $kind" ]]; then
        echo "error: switchyard floor $kind did not attach: $(cat "$work/err")" >&2
        exit 1
    fi
    local trip
    trip=$(taskset -c 1 "$demo" pingpong --rounds "$rounds" | sed -E 's/.*"ns_per_round_trip":([0-9.]+).*/\1/')
    kill -INT "$floor_pid"
    wait "$floor_pid"
    floor_pid=
    # "program NAME: RUNS runs, NS ns a run": each of these floors attaches one program.
    awk -v t="$trip" \
        'index($0, "program ") == 1 { print $(NF-3), $3, t; found++ } END { exit found != 1 }' "$work/out" || {
        echo "error: not one program's run time from switchyard floor $kind: $(cat "$work/out")" >&2
        exit 1
    }
}

for ((r = 0; r < repeats; r++)); do
    for ((i = 0; i < ${#kinds[@]}; i++)); do
        kind=${kinds[$(((i + r) % ${#kinds[@]}))]}
        echo "repeat $((r + 1)): $kind" >&2
        read -r ns runs trip < <(measure "$kind")
        echo "$r $kind $ns $runs $trip" >> "$work/results"
    done
done

# median [min–max] of the numbers on stdin, with DECIMALS (1) decimals
spread() {
    sort -g | awk -v d="${1:-1}" '{ v[NR] = $1 } END {
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        f = "%." d "f"
        printf f " [" f "–" f "]", m, v[1], v[NR] }'
}

echo
echo "what a sched_switch program costs a switch, by the kernel's run-time statistics (ns a run), on a pipe ping-pong pinned to CPU 1, $rounds round trips, median [min–max] of $repeats repeats; built at $(git rev-parse --short HEAD 2> /dev/null || echo unknown)"
echo
echo "| program | ns a run | added to the empty program, ns (each repeat's own) | runs | ping-pong ns a round trip |"
echo "|---|---|---|---|---|"
for kind in "${kinds[@]}"; do
    added=$(awk -v k="$kind" '$2 == "switch" { base[$1] = $3 } $2 == k { mine[$1] = $3 }
        END { for (r in mine) print mine[r] - base[r] }' "$work/results" | spread)
    [[ $kind == switch ]] && added="–"
    echo "| floor $kind | $(awk -v k="$kind" '$2 == k { print $3 }' "$work/results" | spread) | $added | $(awk -v k="$kind" '$2 == k { print $4 }' "$work/results" | spread 0) | $(awk -v k="$kind" '$2 == k { print $5 }' "$work/results" | spread 0) |"
done
echo
echo "The statistics add two clock reads to every run of every program, the same for each row; the differences are the clock read's and the lookups'."
