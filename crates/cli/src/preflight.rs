//! Pre-flight checks of `switchyard record`'s flags against the host, before a command is
//! forked or a probe attached: the target exists, the run file or the windows' folder can be
//! written, the `--ready-fd` descriptor is open, the sinks' URLs parse.

use std::{
    fs::File,
    os::fd::FromRawFd as _,
    path::{Path, PathBuf},
};

use anyhow::Result;
use switchyard_model::outfile;

use crate::{
    args::{OtlpProtocolArg, RecordArgs},
    fail::hinted,
    procfs,
    runs::run_files,
};

/// The run file must be writable where it is asked for: found out before the recording, not
/// after it. A device or a stream (`/dev/null`, `/dev/stdout`, a FIFO) is written through; a
/// directory, a block device or another user's link to a device is refused
/// ([`switchyard_model::outfile`]).
pub fn check_output(path: &Path) -> Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let refuse = |why: String| {
        hinted(
            format!("cannot write the run file {}: {why}", path.display()),
            "give -o a path in an existing, writable directory",
        )
    };
    match outfile::check(path).map_err(|e| refuse(e.to_string()))? {
        outfile::Kind::Stream => return Ok(()),
        outfile::Kind::Absent | outfile::Kind::Regular => {}
    }
    if !parent.is_dir() {
        return Err(refuse(format!("{} is not a directory", parent.display())));
    }
    nix::unistd::access(parent, nix::unistd::AccessFlags::W_OK)
        .map_err(|e| refuse(format!("{} is not writable ({e})", parent.display())))
}

/// The folder of a continuous recording's windows: made if it does not exist, and refused
/// when it already holds windows (an earlier recording's would mix with this one's).
pub fn check_windows_dir(dir: PathBuf) -> Result<PathBuf> {
    let refuse = |why: String| {
        hinted(
            format!("cannot write windows to {}: {why}", dir.display()),
            "give -o a new or empty folder for the run-<n>.json files",
        )
    };
    if dir.exists() && !dir.is_dir() {
        return Err(refuse("it is a file, not a folder".into()));
    }
    std::fs::create_dir_all(&dir).map_err(|e| refuse(e.to_string()))?;
    nix::unistd::access(&dir, nix::unistd::AccessFlags::W_OK)
        .map_err(|e| refuse(format!("it is not writable ({e})")))?;
    if !run_files(&dir)
        .map_err(|e| refuse(e.to_string()))?
        .is_empty()
    {
        return Err(refuse("it already holds run-<n>.json windows".into()));
    }
    Ok(dir)
}

/// The sinks, checked before anything is recorded: URLs that parse, a queue that holds one,
/// and the `OTEL_EXPORTER_OTLP_*` variables an OTLP sink is configured by (a flag over them).
pub fn export_config(args: &RecordArgs) -> Result<Option<switchyard_export::Config>> {
    export_config_in(args, &switchyard_export::settings::process_env)
}

/// [`export_config`] in a given environment.
pub fn export_config_in(
    args: &RecordArgs,
    env: switchyard_export::settings::Env,
) -> Result<Option<switchyard_export::Config>> {
    let flags = switchyard_export::settings::Flags {
        endpoint: args.otlp.clone(),
        protocol: args.otlp_protocol.map(|p| match p {
            OtlpProtocolArg::Http => switchyard_export::Protocol::Http,
            OtlpProtocolArg::Grpc => switchyard_export::Protocol::Grpc,
        }),
        headers: args.otlp_header.clone(),
    };
    let otlp = switchyard_export::settings::otlp(&flags, env).map_err(|r| {
        let hint = if r.setting == "--otlp" {
            format!(
                "{}; e.g. http://127.0.0.1:4318 (HTTP) or http://127.0.0.1:4317 (gRPC)",
                r.hint
            )
        } else {
            r.hint.clone()
        };
        hinted(
            match &args.otlp {
                Some(url) if r.setting == "--otlp" => format!("--otlp {url}: {}", r.problem),
                _ => r.to_string(),
            },
            hint,
        )
    })?;
    if otlp.is_none() && args.pyroscope.is_none() {
        if args.export_only {
            return Err(hinted(
                "--export-only leaves the run nowhere: no --otlp or --pyroscope",
                "add --otlp http://HOST:4318 or --pyroscope URL (or set OTEL_EXPORTER_OTLP_ENDPOINT), or drop --export-only",
            ));
        }
        return Ok(None);
    }
    if args.export_queue == 0 {
        return Err(hinted(
            "--export-queue 0 holds no window",
            "give a queue of at least 1 (default 64)",
        ));
    }
    let pyroscope = args
        .pyroscope
        .as_deref()
        .map(|url| {
            switchyard_export::Pyroscope::parse(url).map_err(|e| {
                hinted(
                    format!("--pyroscope {url}: {e}"),
                    "give the Pyroscope server's URL, e.g. http://127.0.0.1:4040",
                )
            })
        })
        .transpose()?;
    Ok(Some(switchyard_export::Config {
        otlp,
        pyroscope,
        queue: args.export_queue,
    }))
}

/// A live process to record: a thread id names its process; kernel threads and switchyard
/// itself are refused.
pub fn check_pid(pid: u32) -> Result<u32> {
    if pid == 0 || !procfs::exists(pid) {
        return Err(hinted(
            format!("no process with pid {pid}"),
            format!("check it with `ps -p {pid}`; the process may have exited"),
        ));
    }
    // A thread id names its thread's process: record the whole process, and say so.
    if let Some(tgid) = procfs::tgid(pid).filter(|&t| t != pid) {
        say!(
            "note: {pid} is a thread of process {tgid} ({}); recording the process",
            switchyard_model::term::escape(&procfs::comm(tgid).unwrap_or_default())
        );
        return check_pid(tgid);
    }
    if procfs::is_zombie(pid) {
        return Err(hinted(
            format!(
                "pid {pid} ({}) has exited: it is a zombie its parent has not reaped, with nothing left to record",
                switchyard_model::term::escape(&procfs::comm(pid).unwrap_or_default())
            ),
            format!(
                "give the pid of a running process (`ps -o pid,stat,comm -p {pid}` shows Z for a zombie)"
            ),
        ));
    }
    if procfs::is_kernel_thread(pid) {
        return Err(hinted(
            format!(
                "pid {pid} ({}) is a kernel thread",
                switchyard_model::term::escape(&procfs::comm(pid).unwrap_or_default())
            ),
            "switchyard records user-space processes; pick the pid of a program",
        ));
    }
    if pid == std::process::id() {
        return Err(hinted(
            "switchyard cannot record itself",
            "give the pid of another process",
        ));
    }
    Ok(pid)
}

/// Where the kernel keeps the most samples a second a perf event may ask for.
const MAX_SAMPLE_RATE: &str = "/proc/sys/kernel/perf_event_max_sample_rate";

/// `--freq` against the host's limit, which perf_event_open enforces (EINVAL) once the probes
/// are loading: refused here instead, naming the limit. The kernel lowers the limit by itself
/// when sampling interrupts take too long, so it is read now, not assumed. A host that does not
/// say is left to the kernel.
pub fn check_freq(hz: u64) -> Result<()> {
    let Some(max) = std::fs::read_to_string(MAX_SAMPLE_RATE)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    else {
        return Ok(());
    };
    freq_within(hz, max)
}

fn freq_within(hz: u64, max: u64) -> Result<()> {
    if hz <= max {
        return Ok(());
    }
    Err(hinted(
        format!(
            "--freq {hz} is above this host's limit of {max} samples a second (kernel.perf_event_max_sample_rate)"
        ),
        format!(
            "give --freq {max} or less, or raise the limit as root: `sysctl -w kernel.perf_event_max_sample_rate={hz}` (the kernel lowers it again when sampling costs too much)"
        ),
    ))
}

/// Takes ownership of the `--ready-fd` descriptor, refusing one that is not open.
pub fn take_ready_fd(fd: i32) -> Result<File> {
    // SAFETY: F_GETFD only reads the descriptor's flags.
    if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(hinted(
            format!("--ready-fd {fd} is not an open file descriptor"),
            "pass the write end of a pipe the caller keeps open, e.g. `3>pipe` with --ready-fd 3",
        ));
    }
    // Not inherited by a spawned command: the handshake is switchyard's, not the target's.
    // SAFETY: F_SETFD on a descriptor just checked to be open.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    // SAFETY: an open descriptor handed to this process for its sole use.
    Ok(unsafe { File::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frequency_above_the_hosts_limit_is_refused_naming_it() {
        assert!(freq_within(99, 100_000).is_ok());
        assert!(freq_within(100_000, 100_000).is_ok());
        let e = freq_within(1_000_000, 100_000).unwrap_err();
        assert!(
            e.to_string().contains("limit of 100000")
                && e.to_string().contains("perf_event_max_sample_rate"),
            "{e}"
        );
        let hint = crate::fail::hint_for(&e).unwrap_or_default();
        assert!(hint.contains("sysctl"), "{hint}");
    }
}
