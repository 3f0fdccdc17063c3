//! Builds the kernel-side crate (`ebpf/`) with the nightly toolchain and bpf-linker, and puts
//! its objects (the recording's and the floor's) in OUT_DIR for `include_bytes_aligned!`.
//! `AYA_BUILD_SKIP=1` skips it (for `cargo check`/clippy on hosts without bpf-linker); the
//! objects are then empty and the loader reports that the probes were not built instead of
//! failing to compile.
//!
//! The nested build runs as aya-build's `build_ebpf` runs it (same flags, same target
//! directory), but its output goes to `OUT_DIR/ebpf-build.log` instead of being replayed as
//! `cargo:warning` lines on every build: a failure prints the log's tail and its path.
use std::{
    env,
    ffi::OsString,
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context as _, anyhow, bail};

/// The kernel-side package and its binaries (the objects' names): the recording's, and the
/// floor's (`switchyard floor`), which a recording never loads.
const PACKAGE: &str = "switchyard-ebpf";
const BINARIES: [&str; 2] = ["switchyard-probes", "switchyard-floor"];
/// Lines of the nested build's log shown when it fails.
const TAIL: usize = 60;

fn main() {
    // Not `main() -> Result`: that would print a backtrace under RUST_BACKTRACE, burying the
    // compiler's error above it.
    if let Err(e) = build() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn build() -> anyhow::Result<()> {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").ok_or_else(|| anyhow!("OUT_DIR not set"))?);
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?);
    let ebpf_dir = manifest_dir.join("../../ebpf").canonicalize()?;
    let common_dir = manifest_dir.join("../common").canonicalize()?;
    println!("cargo:rerun-if-changed={}", ebpf_dir.display());
    println!("cargo:rerun-if-changed={}", common_dir.display());
    println!("cargo:rerun-if-env-changed=AYA_BUILD_SKIP");

    if env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true")) {
        println!("cargo:warning=AYA_BUILD_SKIP is set: the probes are not built into this binary");
        for binary in BINARIES {
            let object = out_dir.join(binary);
            fs::write(&object, []).with_context(|| format!("creating {}", object.display()))?;
        }
        return Ok(());
    }

    let target = match env::var("CARGO_CFG_TARGET_ENDIAN")?.as_str() {
        "little" => "bpfel-unknown-none",
        "big" => "bpfeb-unknown-none",
        other => bail!("unsupported endianness {other}"),
    };
    let arch = env::var("CARGO_CFG_TARGET_ARCH")?;
    let arch = if arch.starts_with("riscv64") {
        "riscv64"
    } else {
        &arch
    };
    // Kept where aya-build kept it, so a tree built before reuses its artifacts.
    let target_dir = out_dir.join("aya-build").join("target").join(PACKAGE);
    let log_path = out_dir.join("ebpf-build.log");
    let log =
        fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;

    let mut rustflags = OsString::new();
    for (i, flag) in [
        format!("--cfg=bpf_target_arch=\"{arch}\""),
        "-Cdebuginfo=2".to_string(),
        "-Clink-arg=--btf".to_string(),
    ]
    .iter()
    .enumerate()
    {
        if i > 0 {
            rustflags.push("\x1f");
        }
        rustflags.push(flag);
    }
    let mut cmd = Command::new("rustup");
    cmd.args(["run", "nightly", "cargo", "build"])
        .args(["--package", PACKAGE, "--bins", "--release"])
        .args([
            "--target",
            target,
            "-Z",
            "build-std=core",
            "--color",
            "never",
        ])
        .arg("--target-dir")
        .arg(&target_dir)
        .current_dir(&ebpf_dir)
        .env("CARGO_ENCODED_RUSTFLAGS", rustflags)
        // The outer build's compiler is not the nightly one the kernel side needs.
        .env_remove("RUSTC")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    let status = cmd
        .status()
        .with_context(|| format!("running {cmd:?} (is rustup installed?)"))?;
    if !status.success() {
        print_tail(&log_path);
        bail!(
            "building the kernel side ({PACKAGE}) failed: {status}; full log: {}",
            log_path.display()
        );
    }

    for binary in BINARIES {
        let built = target_dir.join(target).join("release").join(binary);
        let object = out_dir.join(binary);
        fs::copy(&built, &object)
            .with_context(|| format!("copying {} to {}", built.display(), object.display()))?;
    }
    Ok(())
}

/// The end of the nested build's log, on stderr (cargo shows a failed build script's).
fn print_tail(log: &Path) {
    let text = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = &lines[lines.len().saturating_sub(TAIL)..];
    eprintln!("--- last {} lines of {} ---", tail.len(), log.display());
    for line in tail {
        eprintln!("{line}");
    }
}
