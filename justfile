# switchyard — thin recipes; the logic lives in Rust: crates/, and workloads/runner for the workload
# catalogue and runs (`target/release/switchyard-workload --help`).
set shell := ["bash", "-euo", "pipefail", "-c"]

release := "target/release"
runner := release / "switchyard-workload"

# Profile the default workload and write a report under reports/
default: profile

# Toolchain pieces the kernel side needs: rust-src for nightly, bpf-linker (idempotent, ~1 min once)
setup:
    @bash scripts/setup.sh

# Build switchyard, the workloads and the demo targets (release; the Go cache server too)
build: setup
    cargo build --release --bins
    GOTOOLCHAIN=local go build -C workloads/read-state-cache/go -o "$PWD/target/release/read-state-cache-go" .

# Profile a workload build under load (default: the spin-lock broker, abs, 5 s), or `just profile pid=N [seconds]`
profile workload="spinlock-broker" build="" seconds="": build
    {{runner}} profile {{workload}} "{{build}}" {{seconds}}

# Compare two builds of a workload, 5 runs each (what a tail verdict needs): just compare spinlock-broker mutex abs [repeats] [seconds]
compare workload a b repeats="5" seconds="3": build
    {{runner}} compare {{workload}} {{a}} {{b}} {{repeats}} {{seconds}}

# Gate runs on the workload budgets (default: the latest profile): just gate reports/*/run.json
gate *runs: build
    target/release/switchyard gate --budgets workloads/budgets.toml {{ if runs == "" { "reports/latest/run.json" } else { runs } }}

# What this host can and cannot do
doctor: build
    {{release}}/switchyard doctor

# All tests; privileged ones need root (under CI=true a skip is a failure)
test: setup
    cargo build --bins
    cargo test -- --test-threads=1

# The fault-and-load suite at length: a storm of SECONDS (switchyard's RSS over it) and 50
# pid-mode recordings under load (the worst on-CPU / wall ratio); `just test` runs it short
soak seconds="60": setup
    cargo build --bins
    SWITCHYARD_SOAK_SECONDS={{seconds}} cargo test -p switchyard --test faults -- --test-threads=1 --nocapture

# Lints as CI runs them
lint: setup
    cargo fmt --all --check
    cargo clippy --all-targets -- -D warnings
    cd ebpf && rustup run nightly cargo clippy --release --target bpfel-unknown-none -Z build-std=core -- -D warnings

# Knobs from the environment (CALLS, ROUNDS, REPEATS, ITERS, DEPTH, HZ, CPU, SY, DEMO, SECTIONS; see
# `target/release/switchyard-workload bench-overhead --help`); the floor rows need `switchyard floor`
# Added cost per syscall, per context switch, host-wide and per sample: untraced vs switchyard vs bpftrace vs the floor
bench-overhead: build
    {{runner}} bench-overhead

# `just bench-thread-state [REPEATS] [ROUNDS]`: the switch program's way of finding a thread's
# entry (an array by tid) against task storage, each as a program on sched_switch timed by the
# kernel's run-time statistics on a pinned ping-pong, next to the empty program
bench-thread-state repeats="5" rounds="200000": build
    bash scripts/bench-thread-state.sh {{repeats}} {{rounds}}

# `just bench-broker [REPEATS] [SECONDS] [SWITCHYARD…]`: REPEATS runs of SECONDS, untraced and
# recorded (default settings) by each binary named (default: target/release/switchyard),
# interleaved; name two for a before/after:
# `just bench-broker 5 5 /tmp/switchyard-before target/release/switchyard`
# What recording costs the spin-lock broker (abs): its throughput recorded, as a share of untraced
[positional-arguments]
bench-broker repeats="5" seconds="5" *switchyards: build
    shift 2; {{runner}} overhead spinlock-broker --repeats {{repeats}} --seconds {{seconds}} "${@/#/--switchyard=}"

# redis GET and SET (redis-benchmark -c 50), nginx serving 4 KiB over keep-alive (wrk -t2 -c50)
# and the spin-lock broker, each untraced, under switchyard (defaults, --no-stacks, --syscalls
# none), perf record -g and bpftrace counting, REPEATS interleaved runs of about SECONDS each;
# installs redis-server, redis-tools, nginx-light and wrk with apt-get when missing
# How much slower real servers get while recorded: throughput as a share of untraced
bench-servers repeats="3" seconds="5": build
    {{runner}} bench-servers {{repeats}} {{seconds}}

# The stories write to a new folder, reports/<story>-<time>/; `--commit` (just compare-broker
# --commit) records over the committed runs, once the whole story is recorded.
# The spin-lock broker story: spin vs mutex vs abs, repeats, two contention levels, two sizes
compare-broker *flags: build
    {{runner}} compare-broker {{flags}}

# The broker's fixed spin count (k = 10 … 10⁴) next to mutex and abs, synchronous flush,
# 4 × cores producers: table and chart under reports/spinlock-broker/sweep (`--redraw`: no runs)
story-broker-sweep *flags: build
    {{runner}} story-broker-sweep {{flags}}

# abs falling back to the mutex and returning: synchronous flush, 8 producers, then 1 every 50 ms
story-broker-fallback *flags: build
    {{runner}} story-broker-fallback {{flags}}

# The read-state cache's GOGC experiment: Go at GOGC 50, 100 and 400, a GC forced every 4 s
story-gogc *flags: build
    {{runner}} story-gogc {{flags}}

# The read-state cache with Go's defaults for 130 s: the runtime's own 2-minute forced GC
story-forced-gc *flags: build
    {{runner}} story-forced-gc {{flags}}

# The read-state cache's sizes: both builds at 2,000,000, 500,000 and 100,000 entries, a miss answered after 1 ms
story-cache-size *flags: build
    {{runner}} story-cache-size {{flags}}

# The read-state cache, Go against Rust: 2,000,000 entries, a GC forced every 4 s, 3 runs each
story-go-rust *flags: build
    {{runner}} story-go-rust {{flags}}

# Each story with committed runs: its table and chart recomputed, against the committed ones
check-stories:
    cargo test -p switchyard-workloads --test stories

# The mmsg relay story: threads vs mmsg vs lite at 4 and 9 speakers per room, 10 and 20 rooms
compare-relay *flags: build
    {{runner}} compare-relay {{flags}}

# Time to render the report of a 60-second run (records one first)
bench-report seconds="60": build
    bash scripts/bench-report.sh {{seconds}}

# Open a report in headless Chromium: fail on console errors, save a screenshot
check-html html="reports/latest/index.html" png="reports/screenshot.png":
    bash crates/report/check-html.sh {{html}} {{png}}

# The asset server story: node-gzip, rust-gzip and rust-zstd, REPEATS runs each, the comparison
# pages and the table; `HEAP=1 just compare-assets` adds the Rust builds' allocations (dhat)
compare-assets *flags: build
    {{runner}} compare-assets {{flags}}

# The asset story's compression figures as files: each gzip and zstd level's ratio and speed
# over the models (reports/asset-server/ratios.txt), and the models' parts against the real
# glTF samples of Debian's assimp-testmodels (samples.txt)
asset-ratios: build
    bash scripts/asset-ratios.sh

# The asset server under concurrent downloads: each build with 2, 4 and 8 always in flight
# (closed loop), 150 requests a run, REPEATS runs each recorded and as many untraced (5; about
# an hour); table, lead and chart under reports/asset-server/concurrency
story-assets-concurrency *flags: build
    {{runner}} story-assets-concurrency {{flags}}

# The OpenTelemetry Collector the export tests run (OTLP receiver, file exporter), built from
# Go modules once and cached; prints its path
otelcol:
    @bash scripts/otelcol.sh

# A continuous recording of the broker (abs) under load, exported over OTLP to a Collector:
# switchyard's CPU and RSS every 10 s over SECONDS, bytes per window, windows lost;
# `just soak-export 600 10s 300 30` also kills the Collector for 30 s at the fifth minute
soak-export seconds="600" every="10s" outage_at="0" outage="30": build
    bash scripts/soak-export.sh {{seconds}} {{every}} {{outage_at}} {{outage}}

# A fleet on one host: three relays standing in for hosts, each recorded with --every into one
# Collector over TLS with a bearer token (configured by OTEL_* variables alone); prints what the
# fleet's operator sees there
fleet seconds="30" every="5s": build
    bash scripts/fleet.sh {{seconds}} {{every}}
