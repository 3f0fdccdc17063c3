//! Errors a user sees: one line, and the next step when there is one.

use std::fmt;

use std::io;

use switchyard_loader::Error as LoadError;
use switchyard_model::LoadError as RunLoadError;

/// Writes to stdout, returning the error instead of panicking as `print!` does, so a closed
/// pipe (`switchyard … | head`) ends the program quietly with exit 0 (see `main`).
pub fn out(text: impl AsRef<str>) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_ref().as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// An error that carries its own hint.
#[derive(Debug)]
pub struct Hinted {
    pub message: String,
    pub hint: String,
}

impl fmt::Display for Hinted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Hinted {}

/// `Err(Hinted { … })` as an `anyhow::Error`.
pub fn hinted(message: impl Into<String>, hint: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Hinted {
        message: message.into(),
        hint: hint.into(),
    })
}

pub const PRIVILEGE_HINT: &str = "run as root (sudo), or grant CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN; \
     `switchyard record --degraded` records switches from /proc and perf software counters without them";

/// The hint for an error chain, if any link has one.
pub fn hint_for(err: &anyhow::Error) -> Option<String> {
    for cause in err.chain() {
        if let Some(h) = cause.downcast_ref::<Hinted>() {
            return Some(h.hint.clone());
        }
        if let Some(l) = cause.downcast_ref::<LoadError>() {
            if l.is_permission() {
                return Some(PRIVILEGE_HINT.to_string());
            }
            return Some(match l {
                LoadError::NotBuilt => {
                    "build with `just build` (it runs `just setup` for bpf-linker first)".into()
                }
                LoadError::Uprobe { .. } => {
                    "check the symbol name with `nm -D BINARY` or `nm BINARY` (Rust needs #[no_mangle] for a stable name)".into()
                }
                LoadError::TooManySpans(_) => "time fewer functions per recording".into(),
                LoadError::NotGo(_) => {
                    "--go-gc needs an unstripped Go binary (check with `go version BINARY`)".into()
                }
                LoadError::Tracefs(_) => {
                    "mount it: `mount -t tracefs nodev /sys/kernel/tracing` (as root); `switchyard doctor` checks the rest".into()
                }
                _ => "`switchyard doctor` shows what this host supports".into(),
            });
        }
    }
    None
}

/// The last lines of a verifier log, when the kernel rejected a program.
pub fn verifier_log(err: &anyhow::Error) -> Option<String> {
    err.chain()
        .find_map(|c| c.downcast_ref::<LoadError>())
        .and_then(|l| l.verifier_log_tail(20))
}

/// A run file that cannot be read: one line naming the file (and line and column), and a hint.
pub fn run_file_error(err: RunLoadError) -> anyhow::Error {
    let hint = match &err {
        RunLoadError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound => {
            "check the path; `switchyard record -o FILE -- CMD` writes a run file"
        }
        RunLoadError::Io { .. } => "check that the file is readable by this user",
        RunLoadError::NotText { .. }
        | RunLoadError::Corrupt { .. }
        | RunLoadError::Format { .. } => {
            "the file is damaged or not a switchyard run file; record the run again with `switchyard record`"
        }
        RunLoadError::Version { .. } => {
            "report it with the switchyard version that recorded it, or record the run again"
        }
    };
    hinted(format!("{:#}", anyhow::Error::new(err)), hint)
}
