//! The two servers under test, and a blocking client for the wire protocol.
//!
//! The Go server is built once per test binary with `go build` into `CARGO_TARGET_TMPDIR`.
//! Without `go` on PATH the Go half of each test is skipped with a printed reason, except
//! under `CI=true`, where that is a failure: a silent skip must never pass.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of this module"
)]

use std::{
    io::{Read as _, Write as _},
    net::TcpStream,
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
    time::Duration,
};

use read_state_cache::protocol::{Key, RESPONSE_LEN, ReadState, Request, Response, STATUS_OK};
use switchyard_harness::{ServerExit, ServerProcess};

pub const RUST_SERVER: &str = env!("CARGO_BIN_EXE_read-state-cache");

/// One server build.
#[derive(Clone, Debug)]
pub struct Server {
    /// `rust` or `go`, as the driver's `--build` and the summary's `server`.
    pub build: &'static str,
    pub program: PathBuf,
}

impl Server {
    pub fn command(&self) -> Command {
        Command::new(&self.program)
    }

    /// Starts the server with `args` and waits for its ready line.
    #[track_caller]
    pub fn start(&self, args: &[&str]) -> ServerProcess {
        let mut command = self.command();
        command.args(args);
        ServerProcess::spawn(command, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{}: {e}", self.build))
    }

    /// Starts the server on `data_dir` with `args`.
    #[track_caller]
    pub fn start_in(&self, data_dir: &Path, args: &[&str]) -> ServerProcess {
        let dir = data_dir.to_str().expect("UTF-8 temp path");
        let mut all = vec!["--data-dir", dir];
        all.extend_from_slice(args);
        self.start(&all)
    }
}

fn build_go() -> Result<PathBuf, String> {
    match Command::new("go").arg("version").output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => return Err(format!("`go version` failed: {}", out.status)),
        Err(e) => return Err(format!("`go` is not on PATH ({e})")),
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("go");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("read-state-cache-go");
    let built = Command::new("go")
        .current_dir(&source)
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        // Never fetch another toolchain: build with the one installed.
        .env("GOTOOLCHAIN", "local")
        .output()
        .map_err(|e| format!("failed to run `go build`: {e}"))?;
    // A build failure is a failure, not a skip.
    assert!(
        built.status.success(),
        "`go build` in {} failed: {}\n{}",
        source.display(),
        built.status,
        String::from_utf8_lossy(&built.stderr)
    );
    Ok(out)
}

/// The Go server, built once; `None` (with the reason printed) when `go` is missing.
pub fn go_server() -> Option<Server> {
    static GO: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match GO.get_or_init(build_go) {
        Ok(program) => Some(Server {
            build: "go",
            program: program.clone(),
        }),
        Err(reason) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "the Go server cannot be built under CI=true: {reason}"
            );
            eprintln!("skipping the Go server: {reason}");
            None
        }
    }
}

pub fn rust_server() -> Server {
    Server {
        build: "rust",
        program: PathBuf::from(RUST_SERVER),
    }
}

/// Both servers (only the Rust one when Go is skipped).
pub fn servers() -> Vec<Server> {
    let mut all = vec![rust_server()];
    all.extend(go_server());
    all
}

/// A blocking client for one connection.
pub struct Client {
    pub stream: TcpStream,
}

impl Client {
    #[track_caller]
    pub fn connect(server: &ServerProcess) -> Self {
        let stream = TcpStream::connect(server.addr()).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("read timeout");
        Self { stream }
    }

    #[track_caller]
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    #[track_caller]
    pub fn response(&mut self) -> Response {
        Response::read(&mut self.stream).expect("response")
    }

    /// The raw bytes of one response.
    #[track_caller]
    pub fn raw_response(&mut self) -> [u8; RESPONSE_LEN] {
        let mut b = [0u8; RESPONSE_LEN];
        self.stream.read_exact(&mut b).expect("response");
        b
    }

    #[track_caller]
    pub fn call(&mut self, req: Request) -> Response {
        let mut wire = Vec::new();
        req.encode(&mut wire);
        self.send_raw(&wire);
        self.response()
    }

    /// A request that must succeed; its read state.
    #[track_caller]
    pub fn ok(&mut self, req: Request) -> ReadState {
        let resp = self.call(req);
        assert_eq!(resp.status, STATUS_OK, "{req:?} answered {resp:?}");
        resp.state
    }

    #[track_caller]
    pub fn ack(&mut self, user: u64, channel: u64, message_id: u64) -> ReadState {
        self.ok(Request::Ack {
            key: Key::new(user, channel),
            message_id,
        })
    }

    #[track_caller]
    pub fn mention(&mut self, user: u64, channel: u64) -> ReadState {
        self.ok(Request::Mention {
            key: Key::new(user, channel),
        })
    }

    #[track_caller]
    pub fn get(&mut self, user: u64, channel: u64) -> ReadState {
        self.ok(Request::Get {
            key: Key::new(user, channel),
        })
    }
}

pub const fn rs(last_read: u64, mentions: u32) -> ReadState {
    ReadState {
        last_read,
        mentions,
    }
}

/// SIGTERM, then the summary line, parsed.
#[track_caller]
pub fn stop(server: ServerProcess) -> serde_json::Value {
    server.terminate().expect("SIGTERM");
    summary(server.wait(Duration::from_secs(30)).expect("server exits"))
}

#[track_caller]
pub fn summary(exit: ServerExit) -> serde_json::Value {
    assert!(exit.status.success(), "server failed: {}", exit.status);
    let line = exit.stdout_lines.last().expect("a summary line");
    let summary: serde_json::Value = serde_json::from_str(line).expect("summary JSON");
    assert_eq!(summary["format"], "read-state-cache-summary", "{summary}");
    summary
}

/// The summary's fields that both servers must agree on for the same requests (everything
/// but times, process usage and the Go `gc` object).
pub fn counts(summary: &serde_json::Value) -> serde_json::Value {
    let mut c = summary.clone();
    let map = c.as_object_mut().expect("summary object");
    for key in ["server", "uptime_ns", "process", "gc"] {
        map.remove(key);
    }
    c
}
