#!/usr/bin/env bash
# Idempotent host set-up for building the kernel side: rust-src for the nightly toolchain and
# bpf-linker built against that nightly's own LLVM. Fast (<1 s) when everything is in place.
#
# Never run `rustup update` / `rustup toolchain install nightly` here: a newer nightly brings
# another LLVM major and bpf-linker must match it exactly.
set -euo pipefail

BPF_LINKER_VERSION=0.13.0

say() { printf 'setup: %s\n' "$*" >&2; }

if ! rustup toolchain list | grep -q '^nightly'; then
  say "error: no nightly toolchain; hint: the base image ships one — reinstall it with rustup"
  exit 2
fi

sysroot=$(rustc +nightly --print sysroot)
if [ ! -d "$sysroot/lib/rustlib/src/rust/library" ]; then
  say "adding rust-src to the nightly toolchain"
  rustup component add rust-src --toolchain nightly >/dev/null
fi

# The asset server's node-gzip build runs on Node.js (Debian's package when it is missing).
if ! command -v node >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    say "warning: Node.js is missing (the asset server's node-gzip build needs it); hint: sudo apt-get install nodejs"
  else
    say "installing Node.js (apt-get install nodejs)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq nodejs >/dev/null 2>&1 || { apt-get update -qq >/dev/null; apt-get install -y -qq nodejs >/dev/null; }
  fi
fi

llvm_major=$(rustc +nightly -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
stamp=${CARGO_HOME:-$HOME/.cargo}/switchyard-bpf-linker.stamp
want="bpf-linker $BPF_LINKER_VERSION llvm-$llvm_major $(rustc +nightly -V)"

if [ -x "$cargo_bin/bpf-linker" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi

# Link against the nightly toolchain's own libLLVM: the real ELF is libLLVM.so.<ver>-rust-…;
# libLLVM-NN-rust-….so next to it is only a linker script. llvm-sys wants a prefix with
# lib/libLLVM.so, so make one of symlinks.
real=$(find "$sysroot/lib" -maxdepth 1 -name 'libLLVM.so.*' -type f | head -n1)
if [ -z "$real" ]; then
  say "error: no libLLVM.so.* in $sysroot/lib; hint: apt-get install llvm-$llvm_major-dev and set LLVM_PREFIX=/usr/lib/llvm-$llvm_major"
  exit 2
fi
prefix=${CARGO_HOME:-$HOME/.cargo}/switchyard-llvm-$llvm_major
mkdir -p "$prefix/lib"
ln -sf "$real" "$prefix/lib/libLLVM.so"
ln -sf "$real" "$prefix/lib/$(basename "$real")"

say "building bpf-linker $BPF_LINKER_VERSION against LLVM $llvm_major (about a minute, once)"
LLVM_PREFIX=${LLVM_PREFIX:-$prefix} cargo install bpf-linker --version "$BPF_LINKER_VERSION" \
  --locked --no-default-features --features "llvm-$llvm_major" --force --quiet
printf '%s\n' "$want" >"$stamp"
say "bpf-linker ready: $("$cargo_bin/bpf-linker" --version 2>/dev/null || echo "installed in $cargo_bin")"
