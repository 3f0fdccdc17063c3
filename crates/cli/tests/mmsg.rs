//! The mmsg relay under switchyard: batching with recvmmsg/sendmmsg cuts socket syscalls per
//! packet by a large factor against one recv and one send per packet and destination. Needs
//! root.

mod common;

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Command, Stdio},
};

use common::*;

/// Socket syscalls per voice packet of one relay build, profiled under load.
fn socket_syscalls_per_packet(mode: &str, dir: &Path) -> f64 {
    let server = workspace_bin("mmsg-relay", "mmsg-relay");
    let driver = workspace_bin("mmsg-relay", "mmsg-relay-driver");
    let (run_path, result) = (
        dir.join(format!("{mode}.json")),
        dir.join(format!("{mode}-result.json")),
    );
    let mut rec = Command::new(switchyard())
        .args(["record", "--no-stacks", "--workload-result"])
        .arg(&result)
        .arg("-o")
        .arg(&run_path)
        .arg("--")
        .arg(&server)
        .args(["--mode", mode, "--exit-after-idle", "300"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting switchyard");
    let mut lines = BufReader::new(rec.stdout.take().unwrap()).lines();
    let port = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("ready ").map(str::to_string))
        .expect("the relay's ready line");
    let status = Command::new(&driver)
        .args([
            "--addr",
            &format!("127.0.0.1:{port}"),
            "--rooms",
            "10",
            "--speakers",
            "9",
        ])
        .args(["--duration", "2s", "--build", mode, "--out"])
        .arg(&result)
        .status()
        .expect("running the driver");
    assert!(status.success(), "{mode} driver failed");
    for _ in lines.by_ref() {}
    assert!(rec.wait().unwrap().success(), "{mode} recording failed");

    let run = load_run(&run_path);
    let packets = run["operations"]
        .as_u64()
        .expect("operations from the driver");
    assert!(packets > 0);
    let socket: u64 = [
        "recvfrom", "sendto", "recvmsg", "sendmsg", "recvmmsg", "sendmmsg",
    ]
    .iter()
    .map(|n| syscall_count(&run, n))
    .sum();
    socket as f64 / packets as f64
}

#[test]
fn mmsg_needs_far_fewer_socket_syscalls_per_packet() {
    if !privileged("mmsg_needs_far_fewer_socket_syscalls_per_packet") {
        return;
    }
    let dir = tempdir("mmsg");
    let threads = socket_syscalls_per_packet("threads", &dir);
    let mmsg = socket_syscalls_per_packet("mmsg", &dir);
    // threads: one recvfrom per packet and one sendto per destination (the ack and 8 forwards).
    assert!(
        (9.5..=10.5).contains(&threads),
        "threads: {threads} socket syscalls per packet"
    );
    assert!(
        threads >= 5.0 * mmsg,
        "threads {threads} vs mmsg {mmsg} socket syscalls per packet"
    );
}
