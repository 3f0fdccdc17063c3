//! The driver's integrity check: every build's responses pass it byte for byte, and a server
//! that flips one byte of a response makes the run fail (exit 1) with the response named.

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
};

fn bin(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_asset-server")).with_file_name(name)
}

fn models() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("asset-server-test-models-{}", std::process::id()));
    asset_server::models::ensure(&dir, &[1, 2]).unwrap();
    dir
}

/// Starts a server and returns it with its port (from its `ready <port>` line).
fn start(program: &Path, args: &[&str], models: &Path) -> (Child, u16) {
    let mut child = Command::new(program)
        .args(args)
        .arg("--models")
        .arg(models)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().strip_prefix("ready ").unwrap().parse().unwrap();
    (child, port)
}

fn drive(port: u16, models: &Path, out: &Path, ops: &str) -> Output {
    Command::new(bin("asset-server-driver"))
        .arg("--addr")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--models")
        .arg(models)
        .args(["--rate", "20", "--ops", ops, "--connections", "2", "--out"])
        .arg(out)
        .output()
        .unwrap()
}

fn errors(result: &Path) -> u64 {
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(result).unwrap()).unwrap();
    r["errors"].as_u64().unwrap()
}

#[test]
fn every_build_serves_the_exact_model_and_a_flipped_byte_fails_the_run() {
    let models = models();
    let out = models.join("result.json");
    let mut builds = vec![
        (bin("asset-server"), vec!["--codec", "gzip"]),
        (bin("asset-server"), vec!["--codec", "zstd"]),
    ];
    if Command::new("node").arg("--version").output().is_ok() {
        builds.push((bin("asset-server-node"), vec![]));
    } else {
        assert!(
            std::env::var("CI").is_err(),
            "node is missing; CI=true turns a skip into a failure"
        );
        eprintln!("skipping the Node.js build: node is not installed");
    }
    for (program, args) in &builds {
        let (mut server, port) = start(program, args, &models);
        let o = drive(port, &models, &out, "8");
        let _ = server.kill();
        let _ = server.wait();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{} {args:?}: {stderr}",
            program.display()
        );
        assert_eq!(errors(&out), 0);
    }

    // One byte flipped in every third body: responses 3 and 6 of 8 fail, by name.
    let (mut server, port) = start(
        &bin("asset-server"),
        &["--codec", "zstd", "--corrupt-every", "3"],
        &models,
    );
    let o = drive(port, &models, &out, "8");
    let _ = server.kill();
    let _ = server.wait();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert_eq!(errors(&out), 2, "{stderr}");
    assert!(
        stderr.contains("error: 2 of 8 responses failed the integrity check; the first: response ")
            && stderr.contains("does not decrypt"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&models);
}
