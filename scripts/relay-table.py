"""Table of medians for the mmsg relay comparison (scripts/compare-relay.sh)."""
import json
import statistics
import sys
from pathlib import Path

SOCKET = ("recvfrom", "sendto", "recvmsg", "sendmsg", "recvmmsg", "sendmmsg")
root = Path(sys.argv[1])
head = ("rooms", "speakers", "build", "runs", "packets/s", "syscalls/pkt", "socket syscalls/pkt",
        "switches/pkt", "CPU µs/pkt", "P50 µs", "P99 µs", "lost")
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for cfg in sorted(root.iterdir(), key=lambda p: p.name):
    if not cfg.is_dir():
        continue
    for build in ("threads", "mmsg"):
        runs = [json.loads(p.read_text()) for p in sorted(cfg.glob(f"{build}-*/run.json"))]
        if not runs:
            continue

        def med(f):
            return statistics.median(f(r) for r in runs)

        def per(r, v):
            return v / max(r["operations"] or 1, 1)

        def count(r, names=None):
            return sum(s["count"] for s in r["syscalls"] if names is None or s["name"] in names)

        def cpu(r):
            return next(c["value"] for c in r["counters"] if c["name"] == "task-clock") or 0

        def switches(r):
            return sum(t["voluntary"] + t["involuntary"] for t in r["threads"])

        p = runs[0]["workload"]["parameters"]
        lost = sum(int(r["workload"]["parameters"].get("forwards_lost", "0")) for r in runs)
        print("| {} | {} | {} | {} | {:,.0f} | {:.2f} | {:.3f} | {:.3f} | {:.1f} | {:,.0f} | {:,.0f} | {} |".format(
            p.get("rooms"), p.get("speakers_per_room"), build, len(runs),
            med(lambda r: r["workload"]["throughput_per_s"]),
            med(lambda r: per(r, count(r))),
            med(lambda r: per(r, count(r, SOCKET))),
            med(lambda r: per(r, switches(r))),
            med(lambda r: per(r, cpu(r)) / 1e3),
            med(lambda r: r["workload"]["p50_ns"] / 1e3),
            med(lambda r: r["workload"]["p99_ns"] / 1e3),
            lost,
        ))
