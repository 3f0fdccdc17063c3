#!/usr/bin/env bash
# Builds the test OpenTelemetry Collector from crates/export/otelcol (OTLP receiver + file and debug
# exporters) and prints the binary's path on stdout. Idempotent: the binary is cached under a
# key made from go.mod, go.sum, main.go and the build flags, so a second call only hashes
# three files (~10 ms).
# A cold build takes a few minutes on 2 cores and needs the Go module proxy once.
#
#   bin=$(bash scripts/otelcol.sh)
#   "$bin" --config crates/export/otelcol/config.yaml --feature-gates=+service.profilesSupport
#
# Exit 0: path printed. Exit 2: one "error: ...; hint: ..." line on stderr.
# Env: SWITCHYARD_OTELCOL_CACHE overrides the cache root, GO the go binary.
set -euo pipefail

say() { printf 'otelcol: %s\n' "$*" >&2; }
fail() { say "error: $1; hint: $2"; exit 2; }

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../crates/export/otelcol" && pwd)
for f in go.mod go.sum main.go; do
  [ -f "$src/$f" ] || fail "missing $src/$f" "restore crates/export/otelcol from git"
done

# How the binary is built; part of the cache key so a change here rebuilds. CGO off gives a
# static binary that needs no C toolchain; -buildvcs=false keeps the git commit out of it, so
# the same sources give the same bytes.
recipe="GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly -buildvcs=false go build -trimpath"
key=$(cd "$src" && { cat go.mod go.sum main.go; printf '%s\n' "$recipe"; } | sha256sum | cut -c1-16)
root=${SWITCHYARD_OTELCOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/switchyard}
dir=$root/otelcol-$key
bin=$dir/otelcol

# Fast path: already built for exactly these sources.
if [ -x "$bin" ]; then
  printf '%s\n' "$bin"
  exit 0
fi

go=${GO:-}
if [ -z "$go" ]; then
  go=$(command -v go || true)
  [ -n "$go" ] || { [ -x /usr/local/go/bin/go ] && go=/usr/local/go/bin/go; }
fi
[ -n "$go" ] || fail "no go toolchain found" "install Go >= 1.26 (go.mod needs go 1.26.0) or set GO=/path/to/go"

mkdir -p "$dir" || fail "cannot create $dir" "set SWITCHYARD_OTELCOL_CACHE to a writable directory"

# One builder at a time per key; a waiter finds the finished binary and returns it.
exec 9>"$dir/.lock"
flock 9
if [ -x "$bin" ]; then
  printf '%s\n' "$bin"
  exit 0
fi

log=$dir/build.log
tmp=$dir/otelcol.tmp.$$
say "building the Collector into $dir (first time takes a few minutes)"
start=$SECONDS
rc=0
(cd "$src" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" \
  "$go" build -trimpath -o "$tmp" .) >"$log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ] || [ ! -x "$tmp" ]; then
  rm -f "$tmp"
  why=$(grep -m1 -v -e '^#' -e '^[[:space:]]*$' "$log" | cut -c1-160 || true)
  fail "go build of crates/export/otelcol failed (${why:-$go exited with status $rc})" \
    "see $log; the first build downloads modules from the Go module proxy"
fi
mv -f "$tmp" "$bin"
say "built in $((SECONDS - start)) s"
printf '%s\n' "$bin"
