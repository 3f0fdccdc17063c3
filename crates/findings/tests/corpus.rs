//! Each runtime's corpus: real off-CPU stacks, captured from recordings of real targets
//! attached mid-life and exported as folded stacks (`switchyard report`), each under the
//! reading it must get: `# expect <kind> <site>`. The test reads every stack and prints, per
//! runtime, how many there are and how many read right; one that reads wrong fails it. A stack
//! the classifier is known to misread is kept under `# wrong <kind> <site>`, its true reading:
//! counted as wrong, and failing the test the day it reads right, so that its line turns into
//! an `# expect`.
//!
//! A folded line keeps what the classifier reads: the state label (`[S]`, `[D]`, `[R]`,
//! `[R after wakeup]`), kernel frames (`_[k]`), JIT frames (`_[j]`), inlined frames (`_[i]`) and Python frames by
//! their `function (file:line)` names. It drops the frames' modules, so a stack here is read
//! by names alone.
//!
//! `SWITCHYARD_CORPUS_DRAFT=offcpu.folded cargo test -p switchyard-findings --test corpus --
//! --ignored --nocapture` prints the heaviest stack of each reading a folded file gets, as a
//! draft to check by hand before it joins a corpus.

use std::{collections::BTreeMap, fs, path::PathBuf};

use switchyard_findings::classify::{self, Kind};
use switchyard_model::{Frame, FrameKind, Label};

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// The label and frames (root first) of a folded line, and its value.
fn parse(line: &str) -> Result<(Label, Vec<Frame>, u64), String> {
    let (stack, value) = line
        .rsplit_once(' ')
        .ok_or_else(|| format!("no value: {line}"))?;
    let value = value.parse().map_err(|e| format!("{value}: {e}"))?;
    let mut parts = stack.split(';').skip(1).peekable();
    let label = match parts.peek() {
        Some(&"[R after wakeup]") => Label::Woken,
        Some(p) if p.starts_with('[') && p.ends_with(']') && p.len() <= 4 => {
            Label::from(&p[1..p.len() - 1])
        }
        _ => Label::Empty,
    };
    if label != Label::Empty {
        parts.next();
    }
    let frames = parts.map(frame).collect();
    Ok((label, frames, value))
}

fn frame(text: &str) -> Frame {
    let (name, kind, inlined) = if let Some(n) = text.strip_suffix("_[k]") {
        (n, FrameKind::Kernel, false)
    } else if let Some(n) = text.strip_suffix("_[j]") {
        (n, FrameKind::Jit, false)
    } else if let Some(n) = text.strip_suffix("_[i]") {
        (n, FrameKind::User, true)
    } else {
        (text, FrameKind::User, false)
    };
    // `function (file.py:line)`: a Python frame.
    let python = name
        .strip_suffix(')')
        .and_then(|n| n.rsplit_once(" ("))
        .and_then(|(_, loc)| loc.rsplit_once(':'))
        .filter(|(file, line)| file.ends_with(".py") && line.parse::<u32>().is_ok());
    Frame {
        name: name.to_string(),
        module: if kind == FrameKind::Kernel {
            "kernel".into()
        } else {
            String::new()
        },
        file: python.map(|(file, _)| file.to_string()),
        kind: if python.is_some() {
            FrameKind::Python
        } else {
            kind
        },
        inlined,
        ..Default::default()
    }
}

fn read(line: &str) -> Result<(classify::Reading, u64), String> {
    let (label, frames, value) = parse(line)?;
    let refs: Vec<&Frame> = frames.iter().collect();
    Ok((classify::classify(&label, &refs), value))
}

/// A corpus stack: its true reading, whether the classifier is known to misread it, and the
/// folded line.
struct Case {
    kind: Kind,
    site: String,
    known_wrong: bool,
    line: String,
}

/// Each `# expect <kind> <site>` (or `# wrong <kind> <site>`) and the stack under it.
fn expectations(text: &str) -> Result<Vec<Case>, String> {
    let mut out = Vec::new();
    let mut expect: Option<(Kind, String, bool)> = None;
    for line in text.lines() {
        let (rest, known_wrong) = match (
            line.strip_prefix("# expect "),
            line.strip_prefix("# wrong "),
        ) {
            (Some(rest), _) => (Some(rest), false),
            (_, Some(rest)) => (Some(rest), true),
            _ => (None, false),
        };
        if let Some(rest) = rest {
            let (kind, site) = rest.split_once(' ').unwrap_or((rest, ""));
            let kind = Kind::named(kind).ok_or_else(|| format!("no kind `{kind}`"))?;
            expect = Some((kind, site.to_string(), known_wrong));
        } else if line.starts_with('#') || line.trim().is_empty() {
            continue;
        } else {
            let (kind, site, known_wrong) = expect
                .take()
                .ok_or_else(|| format!("a stack with no `# expect` above it: {line}"))?;
            out.push(Case {
                kind,
                site,
                known_wrong,
                line: line.to_string(),
            });
        }
    }
    Ok(out)
}

#[test]
fn every_runtime_reads_its_corpus_right() {
    let mut files: Vec<PathBuf> = fs::read_dir(corpus_dir())
        .expect("tests/corpus")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "folded"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus in {}", corpus_dir().display());
    let mut wrong = Vec::new();
    for path in &files {
        let text = fs::read_to_string(path).unwrap();
        let cases = expectations(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!cases.is_empty(), "{}: no stacks", path.display());
        let (mut right, mut known) = (0, 0);
        let file = path.file_name().unwrap().to_string_lossy();
        for c in &cases {
            let (got, _) = read(&c.line).unwrap_or_else(|e| panic!("{file}: {e}"));
            let reads_right = got.kind == c.kind && got.site == c.site;
            match (reads_right, c.known_wrong) {
                (true, false) => right += 1,
                (false, true) => known += 1,
                (true, true) => wrong.push(format!(
                    "{file}: reads right now ({} {}): make its `# wrong` an `# expect`\n  {}",
                    c.kind.name(),
                    c.site,
                    c.line
                )),
                (false, false) => wrong.push(format!(
                    "{file}: expected {} {}, read {} {} (because {})\n  {}",
                    c.kind.name(),
                    c.site,
                    got.kind.name(),
                    got.site,
                    got.because,
                    c.line
                )),
            }
        }
        println!(
            "{:<8} {:>3} stacks, {:>3} read right, {} known to read wrong",
            path.file_stem().unwrap().to_string_lossy(),
            cases.len(),
            right,
            known
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_stack_without_an_expectation_is_refused() {
    assert!(expectations("comm;[S];main;futex_wait_[k] 1\n").is_err());
    assert!(expectations("# expect waiting main\ncomm;[S];main 1\n").is_err());
    let cases = expectations("# expect lock main\ncomm;[S];main;futex_wait_[k] 1\n").unwrap();
    let (got, value) = read(&cases[0].line).unwrap();
    assert_eq!(
        (got.kind, got.site.as_str(), value),
        (Kind::Lock, "main", 1)
    );
}

#[test]
#[ignore = "drafts a corpus from SWITCHYARD_CORPUS_DRAFT, a folded file"]
fn draft() {
    let Ok(path) = std::env::var("SWITCHYARD_CORPUS_DRAFT") else {
        return;
    };
    let text = fs::read_to_string(&path).unwrap();
    let mut heaviest: BTreeMap<(Kind, String), (u64, String)> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let (r, value) = read(line).unwrap();
        let e = heaviest.entry((r.kind, r.site)).or_default();
        if value > e.0 {
            *e = (value, line.to_string());
        }
    }
    for ((kind, site), (_, line)) in heaviest {
        println!("# expect {} {site}\n{line}\n", kind.name());
    }
}
