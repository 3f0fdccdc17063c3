use std::env;

/// The eBPF objects are linked by bpf-linker, an undeclared build tool: rebuild when it changes.
fn main() {
    let path = env::var_os("PATH").unwrap_or_default();
    for dir in env::split_paths(&path) {
        let candidate = dir.join("bpf-linker");
        if candidate.exists() {
            println!("cargo:rerun-if-changed={}", candidate.display());
            break;
        }
    }
}
