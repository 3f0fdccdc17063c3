//! Golden files for tests: an output is compared line by line with the file that holds what
//! it should be, and `SWITCHYARD_BLESS=1` rewrites that file instead.
//!
//! Only the exact value `1` rewrites, so `SWITCHYARD_BLESS=0` (or a variable left over from
//! another shell) cannot accept a changed output by accident.
//!
//! ```no_run
//! let golden = switchyard_golden::Golden::new(
//!     concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/results"),
//!     "cargo test -p switchyard-report --test golden",
//! );
//! golden.check("basic.tables.txt", "# switchyard report\n");
//! ```

use std::{
    fs, io,
    path::{Path, PathBuf},
};

/// The variable that rewrites golden files when it is exactly `1`.
pub const BLESS_VAR: &str = "SWITCHYARD_BLESS";

/// A directory of expected outputs and the test command that regenerates them.
#[derive(Clone, Debug)]
pub struct Golden {
    dir: PathBuf,
    command: String,
}

/// What a check did when it passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The file already held the output.
    Matched,
    /// Blessing: the file was written (created, or its old text replaced).
    Written,
}

impl Golden {
    /// Expected files live in `dir`; `command` is the test command that checks them (`cargo
    /// test -p switchyard-report --test golden`), shown with the bless variable on failures.
    pub fn new(dir: impl Into<PathBuf>, command: impl Into<String>) -> Golden {
        Golden {
            dir: dir.into(),
            command: command.into(),
        }
    }

    /// The file that holds the expected output `name`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Compares `actual` with the file `name`, or rewrites the file when `SWITCHYARD_BLESS=1`.
    ///
    /// # Panics
    ///
    /// On a difference, naming the file, the first differing line and both versions of it, and
    /// the command that accepts the new output; or when the file is missing or unreadable.
    #[track_caller]
    pub fn check(&self, name: &str, actual: &str) {
        let bless = std::env::var(BLESS_VAR).ok();
        if let Err(message) = self.verify(name, actual, bless.as_deref()) {
            panic!("{message}");
        }
    }

    /// [`Golden::check`] with the bless variable's value given, returning the failure message
    /// instead of panicking.
    pub fn verify(&self, name: &str, actual: &str, bless: Option<&str>) -> Result<Outcome, String> {
        let path = self.path(name);
        if bless == Some("1") {
            return write(&path, actual);
        }
        let hint = match bless {
            Some(other) => format!(
                "accept the new output with `{BLESS_VAR}=1 {}` ({BLESS_VAR} is `{other}`; only `1` rewrites)",
                self.command
            ),
            None => format!(
                "accept the new output with `{BLESS_VAR}=1 {}`",
                self.command
            ),
        };
        let expected = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(format!(
                    "{}: golden file missing; create it with `{BLESS_VAR}=1 {}`",
                    path.display(),
                    self.command
                ));
            }
            Err(e) => return Err(format!("reading {}: {e}", path.display())),
        };
        match first_difference(&expected, actual) {
            None => Ok(Outcome::Matched),
            Some(Difference::Line {
                line,
                expected,
                actual,
            }) => Err(format!(
                "{}:{line}: output differs\n  expected: {}\n  actual:   {}\n{hint}",
                path.display(),
                expected.unwrap_or("<end of file>"),
                actual.unwrap_or("<end of output>"),
            )),
            Some(Difference::FinalNewline) => Err(format!(
                "{}: final newline differs (expected {}, actual {})\n{hint}",
                path.display(),
                newline(&expected),
                newline(actual),
            )),
        }
    }
}

fn newline(text: &str) -> &'static str {
    if text.ends_with('\n') { "one" } else { "none" }
}

fn write(path: &Path, actual: &str) -> Result<Outcome, String> {
    if fs::read_to_string(path).is_ok_and(|old| old == actual) {
        return Ok(Outcome::Matched);
    }
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    fs::write(path, actual).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(Outcome::Written)
}

#[derive(Debug, PartialEq, Eq)]
enum Difference<'a> {
    /// The first line (from 1) where the texts differ; `None` past the end of one of them.
    Line {
        line: usize,
        expected: Option<&'a str>,
        actual: Option<&'a str>,
    },
    /// Same lines; one text ends in a newline and the other does not.
    FinalNewline,
}

fn first_difference<'a>(expected: &'a str, actual: &'a str) -> Option<Difference<'a>> {
    let (mut e, mut a) = (expected.lines(), actual.lines());
    for line in 1.. {
        match (e.next(), a.next()) {
            (None, None) => break,
            (x, y) if x == y => {}
            (expected, actual) => {
                return Some(Difference::Line {
                    line,
                    expected,
                    actual,
                });
            }
        }
    }
    (expected.ends_with('\n') != actual.ends_with('\n')).then_some(Difference::FinalNewline)
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMAND: &str = "cargo test -p switchyard-golden";

    #[track_caller]
    fn says(message: &str, needle: &str) {
        assert!(message.contains(needle), "{message}");
    }

    fn golden_with(name: &str, text: &str) -> (tempfile::TempDir, Golden) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        fs::write(dir.path().join(name), text).expect("writable temporary directory");
        let golden = Golden::new(dir.path(), COMMAND);
        (dir, golden)
    }

    #[test]
    fn equal_text_matches() {
        let (_dir, g) = golden_with("a.txt", "one\ntwo\n");
        assert_eq!(g.verify("a.txt", "one\ntwo\n", None), Ok(Outcome::Matched));
    }

    #[test]
    fn mismatch_names_file_line_both_lines_and_the_bless_command() {
        let (_dir, g) = golden_with("a.txt", "one\ntwo\nthree\n");
        let e = g.verify("a.txt", "one\n2\nthree\n", None).unwrap_err();
        let path = g.path("a.txt");
        assert_eq!(
            e,
            format!(
                "{}:2: output differs\n  expected: two\n  actual:   2\n\
                 accept the new output with `SWITCHYARD_BLESS=1 cargo test -p switchyard-golden`",
                path.display()
            )
        );
    }

    #[test]
    fn shorter_output_and_final_newline_are_differences() {
        let (_dir, g) = golden_with("a.txt", "one\ntwo\n");
        let e = g.verify("a.txt", "one\n", None).unwrap_err();
        says(
            &e,
            "a.txt:2: output differs\n  expected: two\n  actual:   <end of output>",
        );
        let e = g.verify("a.txt", "one\ntwo", None).unwrap_err();
        says(&e, "final newline differs (expected one, actual none)");
    }

    #[test]
    fn bless_other_than_1_does_not_write() {
        let (_dir, g) = golden_with("a.txt", "old\n");
        for bless in [Some("0"), Some("true"), Some(""), None] {
            let e = g.verify("a.txt", "new\n", bless).unwrap_err();
            says(&e, "SWITCHYARD_BLESS=1 cargo test");
            assert_eq!(fs::read_to_string(g.path("a.txt")).unwrap(), "old\n");
        }
        let e = g.verify("a.txt", "new\n", Some("0")).unwrap_err();
        says(&e, "SWITCHYARD_BLESS is `0`; only `1` rewrites");
    }

    #[test]
    fn bless_1_writes_and_creates() {
        let (_dir, g) = golden_with("a.txt", "old\n");
        assert_eq!(g.verify("a.txt", "new\n", Some("1")), Ok(Outcome::Written));
        assert_eq!(fs::read_to_string(g.path("a.txt")).unwrap(), "new\n");
        assert_eq!(g.verify("a.txt", "new\n", None), Ok(Outcome::Matched));
        assert_eq!(g.verify("a.txt", "new\n", Some("1")), Ok(Outcome::Matched));
        assert_eq!(
            g.verify("sub/b.txt", "made\n", Some("1")),
            Ok(Outcome::Written)
        );
        assert_eq!(fs::read_to_string(g.path("sub/b.txt")).unwrap(), "made\n");
    }

    #[test]
    fn missing_file_names_the_bless_command() {
        let (_dir, g) = golden_with("a.txt", "");
        let e = g.verify("absent.txt", "x\n", None).unwrap_err();
        assert_eq!(
            e,
            format!(
                "{}: golden file missing; create it with \
                 `SWITCHYARD_BLESS=1 cargo test -p switchyard-golden`",
                g.path("absent.txt").display()
            )
        );
        assert!(!g.path("absent.txt").exists());
    }

    #[test]
    fn check_panics_with_the_message() {
        if std::env::var(BLESS_VAR).as_deref() == Ok("1") {
            eprintln!("skipped: with {BLESS_VAR}=1 set, check rewrites instead of failing");
            return;
        }
        let (_dir, g) = golden_with("a.txt", "old\n");
        let panic = std::panic::catch_unwind(|| g.check("a.txt", "new\n")).unwrap_err();
        let message = panic.downcast_ref::<String>().expect("a formatted message");
        says(message, "a.txt:1: output differs");
        assert_eq!(fs::read_to_string(g.path("a.txt")).unwrap(), "old\n");
    }
}
