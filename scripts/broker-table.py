"""Table of medians for the spin-lock broker comparison (scripts/compare-broker.sh)."""
import json
import statistics
import sys
from pathlib import Path

root = Path(sys.argv[1])
rows = []
for cfg in sorted(root.iterdir()):
    if not cfg.is_dir():
        continue
    for build in ("spin", "mutex", "abs"):
        runs = [json.loads(p.read_text()) for p in sorted(cfg.glob(f"{build}-*/run.json"))]
        if not runs:
            continue

        def med(f):
            return statistics.median(f(r) for r in runs)

        def per_op(r, v):
            return v / max(r["operations"] or 1, 1)

        def task_clock(r):
            return next(c["value"] for c in r["counters"] if c["name"] == "task-clock") or 0

        def switches(r):
            return sum(t["voluntary"] + t["involuntary"] for t in r["threads"])

        def span(r):
            s = r["locks"]["spans"]
            return s[0]["stats"]["total_ns"] if s else 0

        producers = runs[0]["workload"]["parameters"].get("producers", "?")
        size = runs[0]["workload"]["parameters"].get("size", "?")
        rows.append((
            cfg.name.split("-")[0], producers, size, build, len(runs),
            med(lambda r: r["workload"]["throughput_per_s"]),
            med(lambda r: per_op(r, task_clock(r)) / 1e3),
            med(lambda r: per_op(r, switches(r))),
            med(lambda r: per_op(r, r["locks"]["futex"]["count"])),
            med(lambda r: per_op(r, span(r)) / 1e3),
            med(lambda r: r["workload"]["p99_99_ns"] / 1e3),
        ))

head = ("contention", "producers", "size B", "build", "runs", "msgs/s", "CPU µs/msg",
        "switches/msg", "futex waits/msg", "acquire µs/msg", "P99.99 µs")
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for r in rows:
    print("| {} | {} | {} | {} | {} | {:,.0f} | {:.2f} | {:.3f} | {:.4f} | {:.3f} | {:,.0f} |".format(*r))
