# switchyard — thin recipes; the logic lives in Rust (crates/) and scripts/.
set shell := ["bash", "-euo", "pipefail", "-c"]

release := "target/release"

# Profile the built-in demo target and write a report under reports/
default: profile

# Toolchain pieces the kernel side needs: rust-src for nightly, bpf-linker (idempotent, ~1 min once)
setup:
    @bash scripts/setup.sh

# Build switchyard and the demo target (release)
build: setup
    cargo build --release --bins

# Record the built-in demo target: just profile [seconds]
profile seconds="5": build
    #!/usr/bin/env bash
    set -euo pipefail
    dir="reports/demo-mix-$(date +%Y%m%d-%H%M%S)"
    mkdir -p "$dir"
    {{release}}/switchyard record -o "$dir/run.json" -- {{release}}/switchyard-demo mix --seconds {{seconds}}
    {{release}}/switchyard report "$dir/run.json" -o "$dir"
    ln -sfn "$(basename "$dir")" reports/latest
    echo "report: $dir/index.html (reports/latest)"

# Record a live process until Ctrl-C: just profile-pid 1234
profile-pid pid: build
    #!/usr/bin/env bash
    set -euo pipefail
    dir="reports/pid-{{pid}}-$(date +%Y%m%d-%H%M%S)"
    mkdir -p "$dir"
    {{release}}/switchyard record --pid {{pid}} -o "$dir/run.json" || status=$?
    test -s "$dir/run.json" && {{release}}/switchyard report "$dir/run.json" -o "$dir"
    ln -sfn "$(basename "$dir")" reports/latest
    exit "${status:-0}"

# What this host can and cannot do
doctor: build
    {{release}}/switchyard doctor

# All tests; privileged ones need root (under CI=true a skip is a failure)
test: setup
    cargo build --bins
    cargo test -- --test-threads=1

# Lints as CI runs them
lint: setup
    cargo fmt --all --check
    cargo clippy --all-targets -- -D warnings
    cd ebpf && rustup run nightly cargo clippy --release --target bpfel-unknown-none -Z build-std=core -- -D warnings

# Added cost per syscall and per context switch: untraced vs switchyard vs bpftrace
bench-overhead: build
    bash scripts/bench-overhead.sh

# The spin-lock broker story: spin vs mutex vs abs, repeats, two contention levels, two sizes
compare-broker: build
    bash scripts/compare-broker.sh

# Time to render the report of a 60-second run (records one first)
bench-report seconds="60": build
    bash scripts/bench-report.sh {{seconds}}

# Open a report in headless Chromium: fail on console errors, save a screenshot
check-html html="reports/latest/index.html" png="reports/screenshot.png":
    bash crates/report/check-html.sh {{html}} {{png}}
