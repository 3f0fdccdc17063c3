//! The loader's error, and the small constructors that turn aya's errors into it.

use crate::tracefs;
use switchyard_common::MAX_SPANS;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the probes were not built into this binary (AYA_BUILD_SKIP was set)")]
    NotBuilt,
    #[error(transparent)]
    Tracefs(#[from] tracefs::Error),
    #[error("loading the probes")]
    Load(#[source] Box<aya::EbpfError>),
    #[error("program `{0}` is missing from the object")]
    MissingProgram(&'static str),
    #[error("map `{0}` is missing from the object")]
    MissingMap(&'static str),
    #[error("mapping `{name}` into memory")]
    Mmap {
        name: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("the kernel verifier rejected program `{name}` ({errno})")]
    Verifier {
        name: &'static str,
        errno: std::io::Error,
        log: String,
    },
    #[error("loading program `{name}`")]
    Program {
        name: &'static str,
        #[source]
        source: Box<aya::programs::ProgramError>,
    },
    #[error("{0} has none of the Go runtime's GC functions (not a Go binary, or stripped)")]
    NotGo(String),
    #[error("at most {MAX_SPANS} --uprobe-span functions, got {0}")]
    TooManySpans(usize),
    #[error("timing the span probes' breakpoints: {0}")]
    Calibration(String),
    #[error("attaching a uprobe to `{symbol}` in {binary}")]
    Uprobe {
        symbol: String,
        binary: String,
        #[source]
        source: Box<aya::programs::ProgramError>,
    },
    #[error("`{symbol}` in {binary}: its code has no RET instruction to probe its returns at")]
    NoReturns { symbol: String, binary: String },
    #[error(
        "{binary} has no `{symbol}`: a Go span follows its goroutine through the Go scheduler, and this Go version's differs"
    )]
    GoScheduler { symbol: String, binary: String },
    #[error("listing online CPUs")]
    Cpus(#[source] std::io::Error),
    #[error("kernel BTF: {0}")]
    Btf(String),
    #[error("turning the BPF programs' run-time statistics on")]
    Stats(#[source] aya::sys::SyscallError),
    #[error("reading map `{name}`")]
    Map {
        name: &'static str,
        #[source]
        source: aya::maps::MapError,
    },
}

impl Error {
    /// The last `lines` lines of the verifier log, when the kernel rejected a program.
    pub fn verifier_log_tail(&self, lines: usize) -> Option<String> {
        let Error::Verifier { name, log, .. } = self else {
            return None;
        };
        let all: Vec<&str> = log.lines().collect();
        let tail = &all[all.len().saturating_sub(lines)..];
        Some(format!(
            "verifier log of `{name}` (last {} lines):\n{}",
            tail.len(),
            tail.join("\n")
        ))
    }

    /// True when the underlying cause is a missing privilege (EPERM/EACCES).
    pub fn is_permission(&self) -> bool {
        // The verifier also answers EACCES; that is a rejected program, not a privilege.
        if matches!(self, Error::Verifier { .. }) {
            return false;
        }
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = cur {
            if let Some(io) = e.downcast_ref::<std::io::Error>()
                && matches!(io.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES))
            {
                return true;
            }
            let text = e.to_string();
            if text.contains("Operation not permitted") || text.contains("Permission denied") {
                return true;
            }
            cur = e.source();
        }
        false
    }
}

/// The error of map `name`, for `map_err`.
pub(crate) fn map_err(name: &'static str) -> impl Fn(aya::maps::MapError) -> Error + Copy {
    move |source| Error::Map { name, source }
}

pub(crate) fn program_error(
    name: &'static str,
) -> impl FnOnce(aya::programs::ProgramError) -> Error {
    move |source| Error::Program {
        name,
        source: Box::new(source),
    }
}

/// The program `name` of the object as its kind `P` (not loaded yet).
pub(crate) fn program<'a, P>(
    ebpf: &'a mut aya::Ebpf,
    name: &'static str,
) -> Result<&'a mut P, Error>
where
    &'a mut P: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    ebpf.program_mut(name)
        .ok_or(Error::MissingProgram(name))?
        .try_into()
        .map_err(program_error(name))
}

/// A program's load, where one verified beforehand (`attach::verify`) is loaded too.
pub(crate) fn loaded(
    name: &'static str,
    result: Result<(), aya::programs::ProgramError>,
) -> Result<(), Error> {
    match result {
        Ok(()) | Err(aya::programs::ProgramError::AlreadyLoaded) => Ok(()),
        Err(e) => Err(load_error(name, e)),
    }
}

/// A load failure with a verifier log becomes `Verifier`, so its log is shown once, apart.
pub(crate) fn load_error(name: &'static str, source: aya::programs::ProgramError) -> Error {
    match source {
        aya::programs::ProgramError::LoadError {
            io_error,
            verifier_log,
        } if !verifier_log.to_string().trim().is_empty() => Error::Verifier {
            name,
            errno: io_error,
            log: verifier_log.to_string(),
        },
        source => Error::Program {
            name,
            source: Box::new(source),
        },
    }
}
