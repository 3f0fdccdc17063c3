//! `asset-server-node ARGS…`: the Node.js build (node-gzip). Writes the server's source
//! (`node/server.js`, compiled in) beside the system's temporary files and replaces itself
//! with `node --perf-basic-prof --interpreted-frames-native-stack server.js ARGS…` (V8's
//! code-event log sent to /dev/null), so the process a profiler follows is Node itself, with a
//! perf map of its JIT code.

use std::{os::unix::process::CommandExt as _, process::ExitCode};

const SOURCE: &str = include_str!("../../node/server.js");

fn main() -> ExitCode {
    let dir = std::env::temp_dir().join(format!("asset-server-node-{}", env!("CARGO_PKG_VERSION")));
    let script = dir.join("server.js");
    let fresh = std::fs::read_to_string(&script).is_ok_and(|s| s == SOURCE);
    if !fresh {
        // Written under a temporary name and renamed: runs started at once never see half.
        let tmp = dir.join(format!("server.js.{}", std::process::id()));
        if let Err(e) = std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&tmp, SOURCE))
            .and_then(|()| std::fs::rename(&tmp, &script))
        {
            eprintln!(
                "asset-server-node: error: writing {}: {e}",
                script.display()
            );
            return ExitCode::from(2);
        }
    }
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let mut node = std::process::Command::new("node");
    // --perf-basic-prof also turns on V8's code-event log (an isolate-*.log in the working
    // directory per run): only the perf map is wanted.
    node.arg("--perf-basic-prof")
        .arg("--logfile=/dev/null")
        .arg("--interpreted-frames-native-stack")
        .arg(&script)
        .args(&args);
    if !args.iter().any(|a| a == "--models") {
        node.arg("--models")
            .arg(asset_server::models::default_dir());
    }
    let err = node.exec();
    eprintln!(
        "asset-server-node: error: cannot run node: {err}\nhint: install Node.js (`just setup` does: apt-get install nodejs)"
    );
    ExitCode::from(2)
}
