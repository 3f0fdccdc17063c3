#!/usr/bin/env bash
# What switchyard adds, side by side in one run with bpftrace (and perf trace) doing comparable
# work: per syscall of the traced process, per context switch, per syscall of a process no one
# traces while another is recorded (syscall tracepoints are host-wide), and per on-CPU sample.
# Each configuration runs REPEATS times, interleaved, and the median is reported, with the
# added cost over the untraced median and that added cost divided by an anchor's, a bpftrace
# row measured in the same run. On a shared, noisy host the absolute figures move from run to
# run; ratios within one run are what to compare.
#
# The stack rows compare the two ways user stacks are walked: frame pointers (the kernel's own
# walker, `--unwind fp`) and call-frame information (`--unwind cfi`, the default), next to
# bpftrace taking the same stacks (frame pointers: the kernel's walker).
#
#   just bench-overhead        knobs, from the environment (defaults shown):
#     CALLS=5000000            getppid calls per run
#     ROUNDS=200000            ping-pong round trips per run
#     REPEATS=5                runs of each configuration, interleaved; the median is reported
#     ITERS=3000000000         iterations of the sampled loop per run
#     DEPTH=24                 how many calls deep the sampled loop runs
#     HZ=2999                  sampling frequency (switchyard --freq, bpftrace profile:hz)
#     CPU=1                    the CPU every measured loop is pinned to
#     SY=target/release/switchyard          the switchyard binary measured
#     DEMO=target/release/switchyard-demo   the measured loops
set -euo pipefail
cd "$(dirname "$0")/.."

CALLS=${CALLS:-5000000}
ROUNDS=${ROUNDS:-200000}
REPEATS=${REPEATS:-5}
CPU=${CPU:-1}
ITERS=${ITERS:-3000000000}
DEPTH=${DEPTH:-24}
HZ=${HZ:-2999}
SY=${SY:-target/release/switchyard}
DEMO=${DEMO:-target/release/switchyard-demo}

if ! command -v bpftrace >/dev/null; then
  echo "bench: installing bpftrace (apt)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bpftrace >/dev/null
fi
[ -x "$SY" ] && [ -x "$DEMO" ] || { echo "error: build first: just build" >&2; exit 2; }
# Absolute, as the demo runs under taskset and bpftrace -c.
SY=$(realpath "$SY")
DEMO=$(realpath "$DEMO")

# Flags of `switchyard record` a build may not have yet: the rows that use them are skipped,
# and say so, rather than failing the whole run.
record_help=$("$SY" record --help) || { echo "error: $SY record --help failed" >&2; exit 2; }
# The first flag (--…) of a mode (`sy FLAGS…`) that this switchyard does not know, if any.
unknown_flag() {
  local a words
  read -ra words <<<"$1"
  for a in "${words[@]}"; do
    if [[ $a == --* ]] && ! grep -qE -- "(^|[[:space:]])$a([[:space:]=]|\$)" <<<"$record_help"; then
      echo "$a"
      return
    fi
  done
}

tmp=$(mktemp -d)
rec=    # the recorder of the host-wide section while one runs
target= # and the process it records
# Leaves nothing running: the recorder stopped as Ctrl-C would, the target killed.
cleanup() {
  [ -z "$rec" ] || stop "$rec"
  [ -z "$target" ] || { kill "$target" 2>/dev/null; wait "$target" 2>/dev/null; } || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The demo measures itself and prints {"…":…,"ns_per_call":X} / "ns_per_round_trip":X.
field() { grep -o "\"$1\":[0-9.]*" | head -n1 | cut -d: -f2; }

BT_COUNT='tracepoint:raw_syscalls:sys_enter /pid == cpid/ { @[args->id] = count(); }'
BT_HIST='tracepoint:raw_syscalls:sys_enter /pid == cpid/ { @s[tid] = nsecs; }
tracepoint:raw_syscalls:sys_exit /@s[tid]/ { @h[args->id] = hist(nsecs - @s[tid]); @c[args->id] = count(); delete(@s[tid]); }'
BT_EMPTY='tracepoint:raw_syscalls:sys_enter /pid == cpid/ { } tracepoint:raw_syscalls:sys_exit /pid == cpid/ { }'
BT_SWITCH='tracepoint:sched:sched_switch /pid == cpid/ { @[tid, args->prev_state] = count(); }'
# The stacks switchyard takes by default: kernel and user stack at switch-out, and the waker's.
BT_STACKS='tracepoint:sched:sched_switch /pid == cpid/ { @out[kstack, ustack] = count(); }
tracepoint:sched:sched_wakeup /pid == cpid/ { @waker[kstack, ustack] = count(); }'
# Declared after the host-wide section's probe (BT_TARGET, below), so attached after it: its
# line says that one is in. A 10 Hz timer on one CPU, which costs the loop nothing measurable.
BT_READY='interval:ms:100 /@ready == 0/ { @ready = 1; printf("ready\n"); }'
BT_SAMPLE="profile:hz:$HZ /pid == cpid/ { @[kstack, ustack] = count(); }"

run_syscalls() { # mode → ns per getppid
  local cmd=("$(command -v taskset)" -c "$CPU" "$DEMO" getppid-loop --count "$CALLS")
  case $1 in
    untraced) "${cmd[@]}" ;;
    switchyard) "$SY" record --no-stacks -o "$tmp/run.json" -- "${cmd[@]}" ;;
    switchyard-stacks) "$SY" record -o "$tmp/run.json" -- "${cmd[@]}" ;;
    bpftrace-count) bpftrace -e "$BT_COUNT" -c "${cmd[*]}" ;;
    bpftrace-hist) bpftrace -e "$BT_HIST" -c "${cmd[*]}" ;;
    bpftrace-empty) bpftrace -e "$BT_EMPTY" -c "${cmd[*]}" ;;
  esac | field ns_per_call
}

# Per context switch: `sy FLAGS…` is switchyard recording with those flags.
SW_MODES=(untraced
  "sy --no-stacks --syscalls none"
  "sy --syscalls none"
  "sy --syscalls none --offcpu-period 0"
  "sy --unwind fp --syscalls none --offcpu-period 0"
  sy
  bpftrace-count bpftrace-stacks)
run_switches() { # mode → ns per round trip (2 switches), both threads pinned to one CPU
  local cmd=("$(command -v taskset)" -c "$CPU" "$DEMO" pingpong --rounds "$ROUNDS") flags
  case $1 in
    untraced) "${cmd[@]}" ;;
    sy*) read -ra flags <<<"${1#sy}"
      "$SY" record "${flags[@]}" -o "$tmp/run.json" -- "${cmd[@]}" ;;
    bpftrace-count) bpftrace -e "$BT_SWITCH" -c "${cmd[*]}" ;;
    bpftrace-stacks) bpftrace -e "$BT_STACKS" -c "${cmd[*]}" ;;
  esac | field ns_per_round_trip
}

# Host-wide: syscall tracepoints are global, so while a tool records one process every task on
# the host takes the kernel's syscall slow path. A target on another CPU is what the tools
# record; the getppid loop is traced by no one. `sy FLAGS…` is switchyard with those flags.
HW_MODES=(base
  "sy --no-stacks"
  "sy --no-stacks --syscalls read,write"
  "sy --no-stacks --syscalls none"
  sy
  bpftrace-both bpftrace perf-trace)
PERF=$(command -v perf || true)
run_hostwide() { # (the recorder is the caller's) → ns per getppid of a loop no one traces
  "$(command -v taskset)" -c "$CPU" "$DEMO" getppid-loop --count "$CALLS" | field ns_per_call
}

# Whether pid $1 runs (an exited child not yet waited for is a zombie: not running).
alive() {
  local stat
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# SIGINT, as Ctrl-C would, then wait for it to write its output and exit (SIGKILL after 20 s).
stop() {
  local i
  kill -INT "$1" 2>/dev/null || true
  for ((i = 0; i < 200; i++)); do
    alive "$1" || break
    sleep 0.1
  done
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

attach_failed() {
  printf 'error: %s did not attach; its last words:\n' "$1" >&2
  tail -n 20 "$tmp/rec.err" >&2
  exit 1
}

# MODE CMD…: polls CMD every 50 ms until it succeeds, while the recorder runs, for up to 60 s.
await() {
  local mode=$1 i
  shift
  for ((i = 0; i < 1200; i++)); do
    "$@" && return 0
    alive "$rec" || break
    sleep 0.05
  done
  attach_failed "$mode"
}

perf_events_open() { [ "$(find "/proc/$rec/fd" -lname 'anon_inode:\[perf_event\]' 2>/dev/null | wc -l)" -ge 2 ]; }

# Starts the recorder MODE on the target, its pid in $rec, and returns once it is attached.
attach() {
  local flags line=
  case $1 in
    sy*) read -ra flags <<<"${1#sy}"
      rm -f "$tmp/ready"
      mkfifo "$tmp/ready"
      "$SY" record --pid "$target" "${flags[@]}" --ready-fd 3 -o "$tmp/host.json" \
        3>"$tmp/ready" >/dev/null 2>"$tmp/rec.err" &
      rec=$!
      # `recording <pid>` once attached; end of file if it never was.
      read -r -t 60 line <"$tmp/ready" || true
      [[ $line == recording* ]] || attach_failed "$1" ;;
    bpftrace|bpftrace-both)
      local probes=$BT_TARGET
      [ "$1" = bpftrace ] || probes=$BT_TARGET_BOTH
      bpftrace -e "$probes $BT_READY" >"$tmp/rec.out" 2>"$tmp/rec.err" &
      rec=$!
      await "$1" grep -q '^ready' "$tmp/rec.out" ;;
    perf-trace) "$PERF" trace -s -p "$target" -o "$tmp/perf.out" >/dev/null 2>"$tmp/rec.err" &
      rec=$!
      # perf says nothing once attached: its two events open, then a second to enable them.
      await "$1" perf_events_open
      sleep 1 ;;
  esac
}

# Why MODE of the host-wide section cannot run here, if it cannot.
hw_missing() {
  case $1 in
    perf-trace) [ -n "$PERF" ] || echo perf ;;
    sy*) unknown_flag "$1 --ready-fd" ;;
    *) unknown_flag "$1" ;;
  esac
}

run_samples() { # mode → elapsed ns of a fixed CPU-bound loop DEPTH calls deep
  local cmd=("$(command -v taskset)" -c "$CPU" "$DEMO" spin --iters "$ITERS" --depth "$DEPTH")
  case $1 in
    untraced) "${cmd[@]}" ;;
    switchyard-fp) "$SY" record --freq "$HZ" --unwind fp -o "$tmp/run.json" -- "${cmd[@]}" ;;
    switchyard-cfi) "$SY" record --freq "$HZ" -o "$tmp/run.json" -- "${cmd[@]}" ;;
    bpftrace-stacks) bpftrace -e "$BT_SAMPLE" -c "${cmd[*]}" ;;
  esac | field elapsed_ns
}

# Runs FN MODE and prints the figure it gives. A configuration that gives none ends the run
# with what the tool said, rather than a median of nothing later.
measure() {
  local v
  v=$("$1" "$2" 2>"$tmp/err")
  if [ -z "$v" ]; then
    printf 'error: %s %s gave no figure; its last words:\n' "$1" "$2" >&2
    tail -n 20 "$tmp/err" >&2
    exit 1
  fi
  echo "$v"
}

median() { python3 -c 'import sys,statistics; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }

# One table row: LABEL, the configuration's median, the untraced median, the anchor's median
# (empty: no ratio), PER to divide the three by (2: a round trip is two switches) and the
# anchor's name. The ratio is added ns over added ns: what the row costs for each ns its
# anchor costs.
row() {
  python3 -c '
import sys
label, per, tag = sys.argv[1], float(sys.argv[5]), sys.argv[6]
v, b = float(sys.argv[2]) / per, float(sys.argv[3]) / per
ratio = ""
if sys.argv[4]:
    a = float(sys.argv[4]) / per - b
    ratio = "%.2f" % ((v - b) / a) if a > 0 else "n/a"
print(("  %-55s %10.1f %10.1f %8.2f %10s  %s" % (label, v, v - b, v / b, ratio, tag)).rstrip())
' "$@"
}
# (printf pads bytes: × and ÷ are two bytes for one column.)
header() { printf '  %-55s %10s %10s %9s %11s\n' configuration "$1" "added ns" "× base" "$2"; }

# The host-wide section's target: a 100 ms nanosleep over and over, on another CPU than the
# loops' when there is one.
TCPU=$(python3 -c 'import os, sys; c = sorted(os.sched_getaffinity(0)); print(next((x for x in c if x != int(sys.argv[1])), c[0]))' "$CPU")
"$(command -v taskset)" -c "$TCPU" "$DEMO" known --getppid 0 --sleeps 1000000000 --sleep-us 100000 \
  --pingpong 0 >/dev/null &
target=$!
# What a process no one traces pays while bpftrace counts the target's syscalls.
BT_TARGET="tracepoint:raw_syscalls:sys_enter /pid == $target/ { @[args->id] = count(); }"
# The same with an exit probe too, as switchyard has (latency needs both): the anchor.
BT_TARGET_BOTH="tracepoint:raw_syscalls:sys_enter /pid == $target/ { @s[tid] = nsecs; }
tracepoint:raw_syscalls:sys_exit /pid == $target/ { @[args->id] = count(); }"

declare -A sc sw hw sa
for ((i = 0; i < REPEATS; i++)); do
  for m in untraced switchyard switchyard-stacks bpftrace-empty bpftrace-count bpftrace-hist; do
    sc[$m]+="$(measure run_syscalls "$m") "
  done
  for m in "${SW_MODES[@]}"; do
    [ -n "$(unknown_flag "$m")" ] || sw[$m]+="$(measure run_switches "$m") "
  done
  for m in "${HW_MODES[@]}"; do
    [ -z "$(hw_missing "$m")" ] || continue
    [ "$m" = base ] || attach "$m"
    hw[$m]+="$(measure run_hostwide "$m") "
    [ "$m" = base ] || { stop "$rec"; rec=; }
  done
  for m in untraced switchyard-fp switchyard-cfi bpftrace-stacks; do
    sa[$m]+="$(measure run_samples "$m") "
  done
done

printf '\nper syscall (getppid loop pinned to CPU %s, %s calls, median of %s)\n' "$CPU" "$CALLS" "$REPEATS"
header "ns/call" "÷ anchor"
base=$(median ${sc[untraced]})
floor=$(median ${sc[bpftrace-empty]})
for m in untraced switchyard switchyard-stacks bpftrace-empty bpftrace-count bpftrace-hist; do
  case $m in
    untraced) label="untraced" ;;
    switchyard) label="switchyard --no-stacks (counts, errnos, latency)" ;;
    switchyard-stacks) label="switchyard (+ stacks: 1 syscall in 16, 99 Hz)" ;;
    bpftrace-empty) label="bpftrace: empty enter+exit probes (floor)" ;;
    bpftrace-count) label="bpftrace: count by syscall" ;;
    bpftrace-hist) label="bpftrace: count + latency histogram" ;;
  esac
  anchor=$floor
  [ "$m" = untraced ] && anchor=
  row "$label" "$(median ${sc[$m]})" "$base" "$anchor" 1 ""
done
echo "  anchor: the floor, bpftrace's empty enter and exit probes: what being called at every"
echo "          syscall costs any tool"

printf '\nper context switch (pipe ping-pong pinned to CPU %s, %s round trips = 2 switches each, median of %s)\n' "$CPU" "$ROUNDS" "$REPEATS"
header "ns/switch" "÷ anchor"
base=$(median ${sw[untraced]})
for m in "${SW_MODES[@]}"; do
  case $m in
    untraced) label="untraced" anchor= ;;
    "sy --no-stacks"*) label="switchyard${m#sy}" anchor=bpftrace-count ;;
    sy) label="switchyard (defaults: + syscalls)" anchor=bpftrace-stacks ;;
    sy*) label="switchyard${m#sy}" anchor=bpftrace-stacks ;;
    bpftrace-count) label="bpftrace: count switches by thread/state" anchor=$m ;;
    bpftrace-stacks) label="bpftrace: the same stacks (switch-out, waker)" anchor=$m ;;
  esac
  flag=$(unknown_flag "$m")
  if [ -n "$flag" ]; then
    printf '  %-55s (needs %s)\n' "$label" "$flag"
    continue
  fi
  [ -z "$anchor" ] || anchor_value=$(median ${sw[$anchor]})
  row "$label" "$(median ${sw[$m]})" "$base" "${anchor:+$anchor_value}" 2 "${anchor#bpftrace-}"
done
cat <<'EOF'
  anchors: count = bpftrace counting switches by thread and state; stacks = bpftrace taking
           the same stacks at every switch (kernel + user, at switch-out and at wakeup, frame
           pointers). --syscalls none attaches no syscall tracepoint, so those rows cost the
           switches alone; the defaults row also counts the ping-pong's readv/writev.
           --offcpu-period 0 takes the stacks at every block, as bpftrace does (the default
           samples them).
EOF

printf '\nhost-wide, per syscall of a process no one traces (getppid loop pinned to CPU %s, %s calls,\n' "$CPU" "$CALLS"
printf 'median of %s) while a tool records another, T (pid %s on CPU %s, a 100 ms sleep over and over)\n' "$REPEATS" "$target" "$TCPU"
header "ns/call" "÷ bpftrace"
base=$(median ${hw[base]})
bt=$(median ${hw[bpftrace-both]})
for m in "${HW_MODES[@]}"; do
  case $m in
    base) label="nothing recording (base)" anchor= ;;
    sy) label="switchyard --pid T (defaults)" anchor=$bt ;;
    sy*) label="switchyard --pid T${m#sy}" anchor=$bt ;;
    bpftrace-both) label="bpftrace: sys_enter + sys_exit /pid == T/" anchor=$bt ;;
    bpftrace) label="bpftrace: sys_enter /pid == T/ only, count" anchor=$bt ;;
    perf-trace) label="perf trace -s -p T" anchor=$bt ;;
  esac
  missing=$(hw_missing "$m")
  if [ -n "$missing" ]; then
    printf '  %-55s (needs %s)\n' "$label" "$missing"
    continue
  fi
  row "$label" "$(median ${hw[$m]})" "$base" "$anchor" 1 ""
done
cat <<'EOF'
  anchor: bpftrace with an enter and an exit probe filtered on T, as switchyard attaches.
          Syscall tracepoints are host-wide: while one is enabled every task takes the kernel's
          slower syscall path, and each attached program runs and turns away the tasks it does
          not record; a list of syscalls filters inside the programs, so it pays the same.
          --syscalls none attaches none. perf trace pays less here because its events are
          per task; a per-task perf event costs the traced task at every context switch.
EOF

printf '\nper on-CPU sample (a loop %s calls deep pinned to CPU %s, sampled at %s Hz, median of %s)\n' "$DEPTH" "$CPU" "$HZ" "$REPEATS"
printf '  %-55s %10s %10s %9s %11s\n' configuration "ms" "ns/sample" "× base" "÷ bpftrace"
base=$(median ${sa[untraced]})
bt=$(median ${sa[bpftrace-stacks]})
for m in untraced switchyard-fp switchyard-cfi bpftrace-stacks; do
  v=$(median ${sa[$m]})
  case $m in
    untraced) label="untraced" ;;
    switchyard-fp) label="switchyard --unwind fp (kernel + user stack)" ;;
    switchyard-cfi) label="switchyard (kernel + user stack, CFI)" ;;
    bpftrace-stacks) label="bpftrace: profile:hz with kstack, ustack" ;;
  esac
  # Added time over the samples taken in it (HZ per second of the traced run); the ratio is
  # that per-sample cost over bpftrace's.
  python3 -c '
import sys
v, b, hz, bt = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[4]), float(sys.argv[5])
per = lambda t: (t - b) / (hz * t / 1e9)
ratio = "" if sys.argv[3] == "untraced" else ("%.2f" % (per(v) / per(bt)) if per(bt) > 0 else "n/a")
print(("  %-55s %10.1f %10.1f %8.3f %10s" % (sys.argv[6], v / 1e6, per(v), v / b, ratio)).rstrip())
' "$v" "$base" "$m" "$HZ" "$bt" "$label"
done
