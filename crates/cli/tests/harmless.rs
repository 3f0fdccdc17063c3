//! Run as root, harm nothing: the host's files (devices, links planted in shared folders, a
//! full disk), the recording (a hangup, a closed stderr, Ctrl-C while attaching) and the
//! target. Each case harmed one of them before.

mod common;

use std::{
    ffi::CString,
    fs,
    io::{BufRead as _, BufReader},
    os::unix::fs::{FileTypeExt as _, PermissionsExt as _, symlink},
    path::{Path, PathBuf},
    process::{Child, ChildStderr, Command, Stdio},
};

use common::*;

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_encoded_bytes()).unwrap()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[track_caller]
fn kill(pid: u32, sig: i32) {
    // SAFETY: a signal to a process this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

/// Reads `stderr` line by line until one contains `needle`; returns what was read.
#[track_caller]
fn read_until(stderr: &mut BufReader<ChildStderr>, needle: &str) -> String {
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            panic!("switchyard ended before saying `{needle}`:\n{seen}");
        }
        seen.push_str(&line);
        if line.contains(needle) {
            return seen;
        }
    }
}

/// `switchyard record -v ARGS`, stopped at the line that says the flags were checked (the
/// signal handlers are in place, the probes not yet attached).
fn record_before_attach(args: &[&str]) -> (Child, BufReader<ChildStderr>) {
    let mut child = Command::new(switchyard())
        .args(["record", "-v"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    read_until(&mut stderr, "flags checked");
    (child, stderr)
}

fn rest(mut stderr: BufReader<ChildStderr>) -> String {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut text).unwrap();
    text
}

#[test]
fn a_device_as_output_is_written_through_and_stays_a_device() {
    if !privileged("a_device_as_output_is_written_through_and_stays_a_device") {
        return;
    }
    // A null device of our own (1:3, as /dev/null): were it replaced, the host keeps its own.
    let dir = tempdir("harm-device");
    let null = dir.join("null");
    // SAFETY: a valid path; makedev(1, 3) is the null device.
    let made = unsafe {
        libc::mknod(
            cstr(&null).as_ptr(),
            libc::S_IFCHR | 0o666,
            libc::makedev(1, 3),
        )
    };
    assert_eq!(made, 0, "mknod: {}", std::io::Error::last_os_error());
    let out = Command::new(switchyard())
        .args(["record", "-o"])
        .arg(&null)
        .args(["--", "true"])
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let kind = fs::symlink_metadata(&null).unwrap().file_type();
    assert!(
        kind.is_char_device(),
        "{} is no longer a device",
        null.display()
    );
    assert_eq!(
        entries(&dir),
        ["null"],
        "something was left beside the device"
    );
    assert!(
        fs::symlink_metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device(),
        "/dev/null is not a device"
    );
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn dev_stdout_as_output_receives_the_run() {
    if !privileged("dev_stdout_as_output_receives_the_run") {
        return;
    }
    let out = Command::new(switchyard())
        .args(["record", "-o", "/dev/stdout", "--", "true"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let run: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not the run ({e}):\n{stdout}"));
    assert_eq!(run["format"], "switchyard-run");
    assert!(
        fs::symlink_metadata("/dev/stdout")
            .unwrap()
            .file_type()
            .is_symlink(),
        "/dev/stdout is no longer a link"
    );
}

#[test]
fn a_directory_or_a_block_device_as_output_is_refused_before_recording() {
    let dir = tempdir("harm-refused");
    let out = Command::new(switchyard())
        .args(["record", "-o"])
        .arg(&dir)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_user_error(&out, "it is a directory");
    if privileged("a_directory_or_a_block_device_as_output_is_refused_before_recording") {
        // A block device node of our own (7:0, a loop device), never opened.
        let disk = dir.join("disk");
        // SAFETY: a valid path.
        let made = unsafe {
            libc::mknod(
                cstr(&disk).as_ptr(),
                libc::S_IFBLK | 0o600,
                libc::makedev(7, 0),
            )
        };
        assert_eq!(made, 0, "mknod: {}", std::io::Error::last_os_error());
        let out = Command::new(switchyard())
            .args(["record", "-o"])
            .arg(&disk)
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_user_error(&out, "block device");
        assert!(
            fs::symlink_metadata(&disk)
                .unwrap()
                .file_type()
                .is_block_device()
        );
    }
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn a_hangup_or_a_broken_pipe_ends_the_recording_and_keeps_the_run() {
    if !privileged("a_hangup_or_a_broken_pipe_ends_the_recording_and_keeps_the_run") {
        return;
    }
    let dir = tempdir("harm-hangup");
    for (sig, name) in [(libc::SIGHUP, "SIGHUP"), (libc::SIGPIPE, "SIGPIPE")] {
        let run = dir.join(format!("{name}.json"));
        let child = record_ready(&["-o", run.to_str().unwrap(), "--", "sleep", "30"]);
        kill(child.id(), sig);
        let (code, stderr) = wait_output(child);
        assert_eq!(code, Some(2), "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("interrupted by {name}")),
            "{stderr}"
        );
        let run = load_run(&run);
        assert_eq!(run["meta"]["end"]["kind"], "interrupted", "{name}");
        assert_eq!(run["meta"]["end"]["signal"], sig, "{name}");
    }
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn a_closed_stderr_loses_nothing() {
    if !privileged("a_closed_stderr_loses_nothing") {
        return;
    }
    let dir = tempdir("harm-stderr");
    let run = dir.join("run.json");
    let mut fds = [0; 2];
    // SAFETY: a two-int out array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: the read end, closed at once: every write to the other end breaks.
    unsafe { libc::close(fds[0]) };
    // SAFETY: the write end, owned by the Stdio from here.
    let broken = unsafe { <fs::File as std::os::fd::FromRawFd>::from_raw_fd(fds[1]) };
    let out = Command::new(switchyard())
        .args(["record", "-o"])
        .arg(&run)
        .args(["--", "sleep", "0.2"])
        .stdout(Stdio::null())
        .stderr(Stdio::from(broken))
        .output()
        .unwrap();
    // Not a panic (101), not killed by a signal: the broken pipe ended the recording, as
    // Ctrl-C would, and the run was written.
    assert_eq!(out.status.code(), Some(2), "{:?}", out.status);
    let run = load_run(&run);
    assert_eq!(run["meta"]["end"]["signal"], libc::SIGPIPE);
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn links_planted_beside_outputs_are_never_followed() {
    if !privileged("links_planted_beside_outputs_are_never_followed") {
        return;
    }
    let dir = tempdir("harm-links");
    let victim = dir.join("victim");
    fs::write(&victim, "keep me").unwrap();
    let run = dir.join("run.json");
    // The name the run file's temporary had, and a link where the run file goes.
    symlink(&victim, dir.join("run.json.tmp")).unwrap();
    let out = Command::new(switchyard())
        .args(["record", "-o"])
        .arg(&run)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out).1);
    assert_eq!(fs::read_to_string(&victim).unwrap(), "keep me");
    assert_eq!(load_run(&run)["format"], "switchyard-run");

    // The report's page and the gate's JUnit file: a link where each goes is replaced, and
    // what it pointed at is left as it was.
    let report = dir.join("report");
    fs::create_dir(&report).unwrap();
    symlink(&victim, report.join("index.html")).unwrap();
    let out = Command::new(switchyard())
        .args(["report", "-o"])
        .arg(&report)
        .arg(&run)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out).1);
    assert_eq!(fs::read_to_string(&victim).unwrap(), "keep me");
    assert!(
        fs::read_to_string(report.join("index.html"))
            .unwrap()
            .contains("<html")
    );

    let budgets = dir.join("budgets.toml");
    fs::write(
        &budgets,
        "[[budget]]\nmetric = \"syscalls.total\"\nmax = 1e12\n",
    )
    .unwrap();
    let junit = dir.join("junit.xml");
    symlink(&victim, &junit).unwrap();
    let out = Command::new(switchyard())
        .args(["gate", "--budgets"])
        .arg(&budgets)
        .arg("--junit")
        .arg(&junit)
        .arg(&run)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out).1);
    assert_eq!(fs::read_to_string(&victim).unwrap(), "keep me");
    assert!(fs::read_to_string(&junit).unwrap().contains("<testsuite"));
    let _ = fs::remove_dir_all(dir);
}

/// A tmpfs of `kib` KiB at `at` (unmounted when dropped): a disk that fills up.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(at: &Path, kib: u32) -> SmallDisk {
        fs::create_dir_all(at).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(at)
            .status()
            .unwrap();
        assert!(status.success(), "mount -t tmpfs failed");
        SmallDisk(at.to_path_buf())
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_leaves_no_partial_file_and_saves_the_run_in_a_private_folder() {
    if !privileged("a_full_disk_leaves_no_partial_file_and_saves_the_run_in_a_private_folder") {
        return;
    }
    let dir = tempdir("harm-full");
    let tmp = dir.join("tmp");
    fs::create_dir(&tmp).unwrap();
    let disk = SmallDisk::mount(&dir.join("disk"), 8);
    let out = Command::new(switchyard())
        .args(["record", "-o"])
        .arg(disk.0.join("run.json"))
        .args(["--", "true"])
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    assert_user_error(&out, "the run was saved to");
    assert!(
        entries(&disk.0).is_empty(),
        "left on the full disk: {:?}",
        entries(&disk.0)
    );
    // The fallback: a fresh folder of its own, private, holding the whole run.
    let folders = entries(&tmp);
    assert_eq!(folders.len(), 1, "{folders:?}");
    let saved = tmp.join(&folders[0]);
    assert_eq!(
        fs::metadata(&saved).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(
        load_run(&saved.join("run.json"))["format"],
        "switchyard-run"
    );

    // Windows: none is left half-written on the full disk.
    let windows = disk.0.join("windows");
    let out = Command::new(switchyard())
        .args(["record", "--every", "100ms", "-o"])
        .arg(&windows)
        .args(["--", "sleep", "0.35"])
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    assert_user_error(&out, "could not be written");
    let left: Vec<String> = entries(&windows)
        .into_iter()
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "partial windows left: {left:?}");
    drop(disk);
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn ctrl_c_while_the_probes_attach_stops_at_once() {
    if !privileged("ctrl_c_while_the_probes_attach_stops_at_once") {
        return;
    }
    let dir = tempdir("harm-attach");
    let run = dir.join("run.json");
    let (child, stderr) = record_before_attach(&["-o", run.to_str().unwrap(), "--", "sleep", "30"]);
    kill(child.id(), libc::SIGINT);
    let status = {
        let mut child = child;
        child.wait().unwrap()
    };
    let said = rest(stderr);
    assert_eq!(status.code(), Some(2), "{said}");
    assert!(said.contains("while the probes were attaching"), "{said}");
    assert!(!said.contains("recording pid"), "{said}");
    assert!(
        !run.exists(),
        "a run was written though nothing was recorded"
    );
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn a_pid_that_exits_while_the_probes_attach_is_an_error() {
    if !privileged("a_pid_that_exits_while_the_probes_attach_is_an_error") {
        return;
    }
    let dir = tempdir("harm-gone");
    let run = dir.join("run.json");
    let mut target = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = target.id().to_string();
    let (mut child, stderr) =
        record_before_attach(&["--pid", &pid, "-d", "1s", "-o", run.to_str().unwrap()]);
    target.kill().unwrap();
    target.wait().unwrap();
    let status = child.wait().unwrap();
    let said = rest(stderr);
    assert_eq!(status.code(), Some(2), "{said}");
    assert!(
        said.contains("exited while the probes were attaching"),
        "{said}"
    );
    assert!(!said.contains("(?)"), "{said}");
    let _ = fs::remove_dir_all(dir);
}
