#!/usr/bin/env bash
# `just fleet [SECONDS] [EVERY]`: a fleet on one host. Three mmsg relays on their own ports
# stand in for three hosts (relay-a and relay-b run the threads build, relay-c mmsg), each with
# its own speakers and its own `switchyard record --every EVERY`, all into one OpenTelemetry
# Collector on 127.0.0.1 set up as a hosted backend is: OTLP/gRPC over TLS (a CA made here)
# with a bearer token. Each recorder is pointed at it as any OpenTelemetry SDK would be, by
# OTEL_* variables alone. At the end it prints what a fleet operator sees in the Collector's
# output: per instance and build, the windows, on-CPU samples, off-CPU time, the bytes per
# window, and the hottest functions.
#
# Everything lands in reports/fleet/: received.jsonl (what the Collector wrote), and per
# instance its windows (relay-X/run-<n>.json) and switchyard's lines (relay-X.err).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-30}
every=${2:-5s}
bin=target/release
out=reports/fleet
rm -rf "$out"
mkdir -p "$out"

say() { printf 'fleet: %s\n' "$*" >&2; }
source scripts/otelcol-lib.sh
start_tls_collector "$out/received.jsonl"
say "Collector on :$grpc (gRPC) and :$http (HTTP), TLS with the CA $ca, a bearer token required"

recorders=()
for host in relay-a:threads relay-b:threads relay-c:mmsg; do
  name=${host%%:*}
  build=${host##*:}
  OTEL_EXPORTER_OTLP_ENDPOINT="https://localhost:$grpc" OTEL_EXPORTER_OTLP_PROTOCOL=grpc \
    OTEL_EXPORTER_OTLP_CERTIFICATE="$ca" OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer%20$token" \
    OTEL_EXPORTER_OTLP_COMPRESSION=gzip OTEL_SERVICE_NAME=mmsg-relay \
    OTEL_RESOURCE_ATTRIBUTES="service.instance.id=$name,deployment.environment.name=fleet-demo" \
    "$bin/switchyard" record --every "$every" --build "$build" --workload mmsg-relay \
    -o "$out/$name" -- "$bin/mmsg-relay" --mode "$build" --exit-after-idle 300 \
    >"$out/$name.out" 2>"$out/$name.err" &
  recorders+=("$!")
  pids+=("$!")
  port=$(ready_port "$out/$name.out") || { say "$name did not start; see $out/$name.err"; exit 2; }
  "$bin/mmsg-relay-driver" --addr "127.0.0.1:$port" --rooms 10 --speakers 9 \
    --duration "${seconds}s" --build "$build" --out "$out/$name.result.json" \
    >"$out/$name.driver" 2>&1 &
  pids+=("$!")
  say "$name ($build) on :$port, recorded into the Collector"
done
# Each relay exits once its speakers have gone, and its recording with it.
for r in "${recorders[@]}"; do
  wait "$r" || say "a recording exited $?"
done
sleep 1

python3 - "$out" <<'EOF'
import collections, json, sys
out = sys.argv[1]
fleet = collections.defaultdict(lambda: {"windows": set(), "requests": 0, "samples": 0,
                                          "off_cpu_ns": 0, "hot": collections.Counter(), "build": ""})
size = collections.defaultdict(int)
for line in open(f"{out}/received.jsonl"):
    req = json.loads(line)
    d = req["dictionary"]
    strings, attrs = d["stringTable"], d["attributeTable"]
    stacks, locs, funcs = d.get("stackTable", []), d.get("locationTable", []), d.get("functionTable", [])
    def value(v):
        if "stringValue" in v: return v["stringValue"]
        if "stringValueStrindex" in v: return strings[v["stringValueStrindex"]]
        if "intValue" in v: return v["intValue"]
        return ""
    def kv(a):
        return (a["key"] if "key" in a else strings[a.get("keyStrindex", 0)], value(a.get("value", {})))
    for rp in req["resourceProfiles"]:
        res = dict(kv(a) for a in rp["resource"]["attributes"])
        inst = fleet[res.get("service.instance.id", "?")]
        inst["requests"] += 1
        size[res.get("service.instance.id", "?")] += len(line)
        for sp in rp["scopeProfiles"]:
            for p in sp["profiles"]:
                pattrs = dict(kv(attrs[i]) for i in p.get("attributeIndices", []))
                inst["windows"].add(int(pattrs.get("switchyard.window", 0)))
                inst["build"] = pattrs.get("switchyard.build", "")
                kind = strings[p["sampleType"].get("typeStrindex", 0)]
                for s in p.get("samples", []):
                    v = int(s.get("values", ["0"])[0])
                    if kind == "samples":
                        inst["samples"] += v
                        st = stacks[s.get("stackIndex", 0)].get("locationIndices", [])
                        # The leaf's outermost user-space function: the first non-kernel frame.
                        for li in st:
                            loc = locs[li]
                            name = strings[funcs[loc["lines"][0].get("functionIndex", 0)].get("nameStrindex", 0)] if loc.get("lines") else "?"
                            kernel = any(strings[attrs[i].get("keyStrindex", 0)] == "profile.frame.type"
                                         and value(attrs[i]["value"]) == "kernel"
                                         for i in loc.get("attributeIndices", []))
                            if not kernel:
                                inst["hot"][name] += v
                                break
                    else:
                        inst["off_cpu_ns"] += v
print("\nWhat the Collector received, by instance (service mmsg-relay):")
print(f"{'instance':<9} {'build':<8} {'windows':>7} {'on-CPU samples':>15} {'off-CPU s':>10} {'JSON bytes/window':>18}  hottest user functions (on-CPU)")
for name in sorted(fleet):
    i = fleet[name]
    hot = ", ".join(f"{f.split('::')[-1]} {100 * n / max(i['samples'], 1):.0f}%" for f, n in i["hot"].most_common(3))
    print(f"{name:<9} {i['build']:<8} {len(i['windows']):>7} {i['samples']:>15} {i['off_cpu_ns'] / 1e9:>10.1f} {size[name] // max(i['requests'], 1):>18}  {hot}")
EOF
for name in relay-a relay-b relay-c; do
  grep -h '^export:' "$out/$name.err" | sed "s/^/$name /"
done
