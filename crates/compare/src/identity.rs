//! What a run is a run of, so that `compare` and `gate --baseline` can tell two builds of one
//! workload (a Go and a Rust build of one server: what comparing is for) from runs of unrelated
//! programs (a Go server against a Python script: a table of deltas that mean nothing).
//!
//! The rule, in [`mismatch`]: runs that both name a workload (`record --workload`, or their
//! driver's result) match when the names do, whatever their programs and runtimes; otherwise
//! they match when they run the same program (the executable's file name, and for an
//! interpreter the script it runs). A runtime (Go, Python) is never a reason to refuse, as
//! builds of one workload may differ in it, but a difference is worth saying
//! ([`Identity::runtime`]).

use std::{fmt, path::Path};

use switchyard_model::{FrameKind, Run, term::escape};

/// A language runtime detected in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    /// The Go runtime: its GC was recorded, or its frames are in the stacks.
    Go,
    /// CPython: its frames are in the stacks, or the program is a `python` interpreter.
    Python,
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Runtime::Go => "Go",
            Runtime::Python => "Python",
        })
    }
}

/// What a run records, as far as its file says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The workload it names, if any.
    pub workload: Option<String>,
    /// The program it ran: the executable's file name, and for an interpreter (`python3`,
    /// `node`, `sh`, …) the script it was given. `None` when the run has no command line.
    pub program: Option<String>,
    /// The runtime detected, if any (none: native code, or a runtime switchyard does not
    /// recognise).
    pub runtime: Option<Runtime>,
}

/// Interpreters, by executable name: their program is the script they run.
fn is_interpreter(exe: &str) -> bool {
    let base = exe.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    matches!(
        base,
        "python" | "pypy" | "node" | "nodejs" | "deno" | "bun" | "ruby" | "perl" | "php" | "lua"
    ) || matches!(exe, "sh" | "bash" | "dash" | "zsh" | "ksh" | "busybox")
}

/// The file name of a path (`./bin/server` → `server`); the text as given when it is no path.
fn file_name(s: &str) -> &str {
    Path::new(s)
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|_| !s.ends_with('/'))
        .unwrap_or(s)
}

/// The program a command line runs: `server`, `python3 app.py`, `python3 -m http.server`,
/// `sh -c 'exec ./server'`.
fn program(command: &[String]) -> Option<String> {
    let exe = file_name(command.first()?);
    if !is_interpreter(exe) {
        return Some(exe.to_string());
    }
    let mut args = command[1..].iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            // The code or the module is the program.
            "-c" | "-e" | "-m" | "--eval" => {
                return Some(match args.next() {
                    Some(what) => format!("{exe} {arg} {what}"),
                    None => exe.to_string(),
                });
            }
            "--" => return Some(args.next().map_or(exe.to_string(), |s| script(exe, s))),
            a if a.starts_with('-') => {}
            script_path => return Some(script(exe, script_path)),
        }
    }
    Some(exe.to_string())
}

fn script(exe: &str, path: &str) -> String {
    format!("{exe} {}", file_name(path))
}

fn runtime(run: &Run, program: Option<&str>) -> Option<Runtime> {
    let frames = &run.profiles.frames;
    if run.gc.is_some()
        || frames
            .iter()
            .any(|f| switchyard_runtimes::go::is_thread_root(&f.name))
    {
        return Some(Runtime::Go);
    }
    let python_exe = program.is_some_and(|p| p.starts_with("python"));
    if python_exe || frames.iter().any(|f| f.kind == FrameKind::Python) {
        return Some(Runtime::Python);
    }
    None
}

impl Identity {
    pub fn of(run: &Run) -> Identity {
        let program = program(&run.meta.command);
        Identity {
            workload: run.workload_name().map(str::to_string),
            runtime: runtime(run, program.as_deref()),
            program,
        }
    }

    /// "workload `read-state-cache` (server, Go)", "`python3 app.py` (Python)", made safe
    /// for a terminal.
    pub fn describe(&self) -> String {
        let runtime = self.runtime.map(|r| r.to_string());
        let (head, rest) = match (&self.workload, &self.program) {
            (Some(w), p) => (format!("workload `{}`", escape(w)), p.as_deref()),
            (None, Some(p)) => (format!("`{}`", escape(p)), None),
            (None, None) => ("no workload or command".to_string(), None),
        };
        let detail: Vec<String> = rest
            .map(|p| escape(p).into_owned())
            .into_iter()
            .chain(runtime)
            .collect();
        if detail.is_empty() {
            head
        } else {
            format!("{head} ({})", detail.join(", "))
        }
    }

    /// The runtime, for a sentence: "Go", or "no runtime detected".
    pub fn runtime_name(&self) -> String {
        self.runtime
            .map_or_else(|| "no runtime detected".to_string(), |r| r.to_string())
    }
}

/// Why `a` and `b` are not runs of one workload; `None` when they are, or when their files
/// cannot tell. The sentence names what differs: "different workloads", or "different programs
/// and no workload named by both".
pub fn mismatch(a: &Identity, b: &Identity) -> Option<&'static str> {
    if let (Some(wa), Some(wb)) = (&a.workload, &b.workload) {
        return (wa != wb).then_some("runs of different workloads");
    }
    match (&a.program, &b.program) {
        (Some(pa), Some(pb)) if pa != pb => {
            Some("runs of different programs, and not both named as one workload")
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    fn id(workload: Option<&str>, command: &[&str], runtime: Option<Runtime>) -> Identity {
        Identity {
            workload: workload.map(str::to_string),
            program: program(&argv(command)),
            runtime,
        }
    }

    #[test]
    fn a_program_is_its_executable_or_an_interpreters_script() {
        let p = |words: &[&str]| program(&argv(words));
        assert_eq!(
            p(&["./target/release/server", "--port", "9000"]).unwrap(),
            "server"
        );
        assert_eq!(
            p(&["/usr/bin/python3.12", "-u", "app.py", "-v"]).unwrap(),
            "python3.12 app.py"
        );
        assert_eq!(
            p(&["python3", "-m", "http.server"]).unwrap(),
            "python3 -m http.server"
        );
        assert_eq!(
            p(&["sh", "-c", "exec ./server"]).unwrap(),
            "sh -c exec ./server"
        );
        assert_eq!(
            p(&["node", "--", "dist/index.js"]).unwrap(),
            "node index.js"
        );
        assert_eq!(p(&["python3"]).unwrap(), "python3");
        assert_eq!(p(&[]), None);
    }

    #[test]
    fn builds_of_one_workload_match_and_unrelated_programs_do_not() {
        let go = id(Some("read-state-cache"), &["./rsc-go"], Some(Runtime::Go));
        let rust = id(Some("read-state-cache"), &["./rsc-rust"], None);
        // Two builds of one workload, in two languages: what compare is for.
        assert_eq!(mismatch(&go, &rust), None);
        let relay = id(Some("mmsg-relay"), &["./mmsg-relay"], None);
        assert_eq!(mismatch(&go, &relay), Some("runs of different workloads"));
        // No workload named: the programs decide.
        let script = id(None, &["python3", "app.py"], Some(Runtime::Python));
        let server = id(None, &["./server"], Some(Runtime::Go));
        assert!(
            mismatch(&script, &server)
                .unwrap()
                .contains("different programs")
        );
        assert!(
            mismatch(&go, &script)
                .unwrap()
                .contains("different programs")
        );
        let again = id(None, &["/opt/server", "--threads", "8"], None);
        assert_eq!(mismatch(&server, &again), None);
        let named = id(Some("demo"), &["./server"], None);
        assert_eq!(mismatch(&named, &again), None);
        // A run without a command line cannot be told apart.
        assert_eq!(mismatch(&id(None, &[], None), &server), None);
    }

    #[test]
    fn a_description_names_the_workload_the_program_and_the_runtime() {
        let go = id(Some("read-state-cache"), &["./rsc-go"], Some(Runtime::Go));
        assert_eq!(go.describe(), "workload `read-state-cache` (rsc-go, Go)");
        let script = id(None, &["python3", "app.py"], Some(Runtime::Python));
        assert_eq!(script.describe(), "`python3 app.py` (Python)");
        let forged = id(None, &["./x\x1b[2J"], None);
        assert_eq!(forged.describe(), r"`x\x1b[2J`");
    }
}
