//! Errors a user sees: one `error:` line, the `hint:` for the next step, and where it helps
//! the last lines of the output that says why (a driver's, switchyard's).

use std::{fmt, fs, path::Path};

use crate::plan::PlanError;

/// Why a run (or a comparison, or a table) failed, with the exit code to end with: 2, or
/// `switchyard record`'s own code when it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub message: String,
    pub hint: Option<String>,
    /// Lines quoted after the hint.
    pub excerpt: Vec<String>,
    pub code: u8,
}

impl Failure {
    pub fn new(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            hint: None,
            excerpt: Vec::new(),
            code: 2,
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Failure {
        self.hint = Some(hint.into());
        self
    }

    /// Quotes the last `lines` lines of `file` (all of them for `usize::MAX`).
    pub fn tail(mut self, file: &Path, lines: usize) -> Failure {
        if let Ok(text) = fs::read_to_string(file) {
            let all: Vec<&str> = text.lines().collect();
            let from = all.len().saturating_sub(lines);
            self.excerpt = all[from..].iter().map(|l| l.to_string()).collect();
        }
        self
    }

    pub fn code(mut self, code: u8) -> Failure {
        self.code = code;
        self
    }

    /// An I/O step that failed: `message: cause`.
    pub fn io(message: impl fmt::Display, cause: impl fmt::Display) -> Failure {
        Failure::new(format!("{message}: {cause}"))
    }

    /// What is printed on stderr.
    pub fn render(&self) -> String {
        let mut s = format!("error: {}\n", self.message);
        if let Some(h) = &self.hint {
            s.push_str(&format!("hint: {h}\n"));
        }
        for line in &self.excerpt {
            s.push_str(&format!("  {line}\n"));
        }
        s
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

impl From<PlanError> for Failure {
    fn from(e: PlanError) -> Failure {
        Failure::new(e.to_string()).hint(e.hint())
    }
}

/// `message: cause: cause…`
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(c) = source {
        s.push_str(&format!(": {c}"));
        source = c.source();
    }
    s
}
