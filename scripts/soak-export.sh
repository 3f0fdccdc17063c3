#!/usr/bin/env bash
# `just soak-export [SECONDS] [EVERY] [OUTAGE_AT] [OUTAGE]`: a continuous recording of the
# spin-lock broker (abs) under load, exported over OTLP to a Collector on 127.0.0.1, for
# SECONDS (default 600). Every 10 s it samples switchyard's CPU time and RSS from /proc; at the
# end it prints them as a table, with the bytes per window exported and the windows lost.
# With OUTAGE_AT > 0 the Collector is killed OUTAGE_AT seconds in and restarted OUTAGE seconds
# (default 30) later.
#
# Everything lands in reports/soak-export/: samples.csv, record.err (switchyard's window lines
# and summary), the windows (windows/run-<n>.json) and what the Collector received.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-600}
every=${2:-10s}
outage_at=${3:-0}
outage=${4:-30}
bin=target/release
out=reports/soak-export
rm -rf "$out"
mkdir -p "$out"

say() { printf 'soak: %s\n' "$*" >&2; }
source scripts/otelcol-lib.sh
start_collector "$out/received-1.jsonl"

# The broker, spawned under switchyard: its `ready <port>` line comes through on stdout.
scratch=$(mktemp -d)
"$bin/switchyard" record --every "$every" --otlp "http://127.0.0.1:$http" \
  --service spinlock-broker --workload spinlock-broker --build abs --instance soak \
  --uprobe-span acquire=broker_abs_acquire -o "$out/windows" -- \
  "$bin/spinlock-broker" --lock abs --exit-after-idle 300 --dir "$scratch" \
  >"$out/broker.out" 2>"$out/record.err" &
recorder=$!
pids+=("$recorder")
port=$(ready_port "$out/broker.out") || { say "the broker did not start; see $out/record.err"; exit 2; }
"$bin/spinlock-broker-driver" --addr "127.0.0.1:$port" --producers "$(nproc)" \
  --duration "${seconds}s" --build abs --out "$out/result.json" >"$out/driver.out" 2>&1 &
driver=$!
pids+=("$driver")
say "recording the broker for $seconds s, windows of $every, into the Collector on :$http"

# switchyard's own figures: CPU seconds (utime + stime) and RSS, every 10 s.
tick=$(getconf CLK_TCK)
echo "t_s,cpu_s,rss_kib" >"$out/samples.csv"
start=$SECONDS
restarted=0
while kill -0 "$driver" 2>/dev/null; do
  t=$((SECONDS - start))
  if [ -r "/proc/$recorder/stat" ]; then
    read -r -a stat <"/proc/$recorder/stat"
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$recorder/status")
    awk -v t="$t" -v u="${stat[13]}" -v s="${stat[14]}" -v hz="$tick" -v r="$rss" \
      'BEGIN { printf "%d,%.2f,%d\n", t, (u + s) / hz, r }' >>"$out/samples.csv"
  fi
  if [ "$outage_at" -gt 0 ] && [ "$t" -ge "$outage_at" ] && [ "$restarted" -eq 0 ]; then
    say "killing the Collector at $t s for $outage s"
    kill -9 "$collector"
    wait "$collector" 2>/dev/null || true
    sleep "$outage"
    start_collector "$out/received-2.jsonl"
    say "Collector back at $((SECONDS - start)) s"
    restarted=1
    continue
  fi
  sleep 10
done
# The broker exits once the driver has gone, and the recording with it.
wait "$recorder" || say "switchyard exited $?"
rm -rf "$scratch"
sleep 1

python3 - "$out" <<'EOF'
import csv, json, os, re, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/samples.csv")))
err = open(f"{out}/record.err").read()
print(f"\nswitchyard over the recording ({len(rows)} samples, every 10 s):")
print(f"{'t (s)':>6} {'CPU (s)':>8} {'CPU % since last':>17} {'RSS (MiB)':>10}")
prev = None
for r in rows:
    t, cpu, rss = int(r["t_s"]), float(r["cpu_s"]), int(r["rss_kib"])
    pct = "" if prev is None or t == prev[0] else f"{100 * (cpu - prev[1]) / (t - prev[0]):.1f}"
    if len(rows) <= 20 or t % 60 < 10 or r is rows[-1]:
        print(f"{t:>6} {cpu:>8.2f} {pct:>17} {rss / 1024:>10.1f}")
    prev = (t, cpu)
if len(rows) > 2:
    rss = [int(r["rss_kib"]) for r in rows]
    half = len(rss) // 2
    print(f"RSS: first {rss[0]/1024:.1f} MiB, median of the first half {sorted(rss[:half])[half//2]/1024:.1f}, "
          f"of the second half {sorted(rss[half:])[len(rss[half:])//2]/1024:.1f}, max {max(rss)/1024:.1f}")
    span = int(rows[-1]["t_s"]) - int(rows[1]["t_s"])
    cpu = float(rows[-1]["cpu_s"]) - float(rows[1]["cpu_s"])
    if span > 0:
        print(f"CPU: {cpu:.1f} s over {span} s = {100 * cpu / span:.2f}% of one core")
windows = len([f for f in os.listdir(f"{out}/windows") if f.startswith("run-")])
received = set()
for name in sorted(os.listdir(out)):
    if name.startswith("received-"):
        for line in open(f"{out}/{name}"):
            req = json.loads(line)
            strings = req["dictionary"]["stringTable"]
            attrs = req["dictionary"]["attributeTable"]
            for rp in req["resourceProfiles"]:
                for sp in rp["scopeProfiles"]:
                    for p in sp["profiles"]:
                        for i in p.get("attributeIndices", []):
                            a = attrs[i]
                            if strings[a.get("keyStrindex", 0)] == "switchyard.window":
                                received.add(int(a["value"]["intValue"]))
print(f"windows: {windows} written, {len(received)} distinct received by the Collector")
for line in err.splitlines():
    if line.startswith("export:") or line.startswith("warning:") or "windows over" in line or line.startswith("maps kept"):
        print(line)
EOF
