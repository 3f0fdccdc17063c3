//! Folded stacks, as Brendan Gregg's FlameGraph and inferno read them: one line per stack,
//! `comm;frame;frame;… value`, root first.
//!
//! - on-CPU: `comm;user…;kernel… samples`
//! - off-CPU: `comm;[S];user…;kernel… ns` (the label is the thread state: S, D, R; the wait for
//!   a CPU after a wakeup, label W, is `[R after wakeup]` under the stack the thread slept in)
//! - wakeup: `comm;[S];sleeper…;--;waker frames leaf to root;waker comm ns`, like bcc's
//!   offwaketime: the sleeper grows up from the bottom, the waker hangs upside down above it
//! - syscalls: `comm;[syscall];user… calls`
//!
//! Kernel frames end in `_[k]`, JIT frames in `_[j]` and inlined frames in `_[i]` (FlameGraph's
//! annotations; inferno colours them and shows the name without the suffix). A non-empty label
//! is always shown as `[label]` after the thread name.

use std::{collections::BTreeMap, fmt::Write as _};

use switchyard_model::{Frame, FrameKind, Label, Run, Stack};

use crate::{Error, ProfileKind};

/// The separator frame between the sleeper's and the waker's stack (inferno greys it).
pub const WAKER_SEPARATOR: &str = "--";

/// The state frame of the off-CPU stacks' label `Woken` ("W"): runnable again after the wakeup that ended
/// a sleep, waiting for a CPU (scheduler delay). `[R]` is a preempted thread's wait.
pub const AFTER_WAKEUP_FRAME: &str = "[R after wakeup]";

/// How a flame graph's roots, the threads, are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threads {
    /// One root per thread name.
    Each,
    /// Threads of one role merged: a name's trailing number goes (`producer-0` … `producer-7`
    /// become `producer-*`), so a pool is one tower, not eight slivers, while threads of
    /// different roles stay apart.
    ByRole,
}

/// A thread name's role: the name without its trailing number, marked with `*`.
pub fn role(comm: &str) -> String {
    let stem = comm.trim_end_matches(|c: char| c.is_ascii_digit());
    if stem.len() == comm.len() || stem.is_empty() {
        return comm.to_string();
    }
    format!("{stem}*")
}

/// The folded stacks of one profile: identical stacks merged, lines sorted, each ending in
/// `\n`. Empty when the profile has no samples.
pub fn folded(run: &Run, kind: ProfileKind) -> Result<String, Error> {
    folded_threads(run, kind, Threads::Each)
}

/// [`folded`], with the threads drawn as `threads` says.
pub fn folded_threads(run: &Run, kind: ProfileKind, threads: Threads) -> Result<String, Error> {
    let mut out = String::new();
    for (stack, value) in merged(run, kind, threads)? {
        let _ = writeln!(out, "{stack} {value}");
    }
    Ok(out)
}

/// Folded stack → summed value, sorted by stack. Stacks of value 0 are left out.
pub(crate) fn merged(
    run: &Run,
    kind: ProfileKind,
    threads: Threads,
) -> Result<BTreeMap<String, u64>, Error> {
    merged_where(run, kind, threads, &|_| true)
}

/// [`merged`], of the stacks `keep` accepts only.
pub(crate) fn merged_where(
    run: &Run,
    kind: ProfileKind,
    threads: Threads,
    keep: &dyn Fn(&Stack) -> bool,
) -> Result<BTreeMap<String, u64>, Error> {
    let frames = &run.profiles.frames;
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    for (i, stack) in kind.of(&run.profiles).stacks.iter().enumerate() {
        if stack.value == 0 || !keep(stack) {
            continue;
        }
        let line = fold(frames, kind, i, stack, threads)?;
        *lines.entry(line).or_default() += stack.value;
    }
    Ok(lines)
}

fn fold(
    frames: &[Frame],
    kind: ProfileKind,
    i: usize,
    stack: &Stack,
    threads: Threads,
) -> Result<String, Error> {
    let thread = |comm: &str| match threads {
        Threads::Each => sanitize_frame(comm),
        Threads::ByRole => sanitize_frame(&role(comm)),
    };
    let lookup = |index: u32| {
        frames.get(index as usize).ok_or(Error::FrameOutOfRange {
            profile: kind.name(),
            stack: i,
            index,
            frames: frames.len(),
        })
    };
    let mut parts: Vec<String> = vec![thread(&stack.comm)];
    if !stack.label.is_empty() {
        parts.push(label_frame(kind, &stack.label));
    }
    for &index in &stack.frames {
        parts.push(frame_name(lookup(index)?));
    }
    if kind == ProfileKind::Wakeup {
        parts.push(WAKER_SEPARATOR.to_string());
        for &index in stack.waker_frames.iter().rev() {
            parts.push(frame_name(lookup(index)?));
        }
        parts.push(thread(&stack.waker_comm));
    }
    Ok(parts.join(";"))
}

/// The frame a stack's label becomes, above the thread name: `[label]`, and a readable name for
/// the off-CPU state `Woken`.
pub(crate) fn label_frame(kind: ProfileKind, label: &Label) -> String {
    match (kind, label) {
        (ProfileKind::OffCpu | ProfileKind::Wakeup, Label::Woken) => AFTER_WAKEUP_FRAME.to_string(),
        _ => format!("[{}]", sanitize_frame(label.as_str())),
    }
}

/// A frame's folded name: sanitised, with `_[k]` for kernel, `_[j]` for JIT and `_[i]` for
/// inlined frames.
pub(crate) fn frame_name(frame: &Frame) -> String {
    let name = sanitize_frame(&frame.name);
    match frame.kind {
        FrameKind::Kernel => name + "_[k]",
        FrameKind::Jit => name + "_[j]",
        FrameKind::User if frame.inlined => name + "_[i]",
        _ => name,
    }
}

/// Makes a name safe as one frame of a folded line:
/// - `;` (the frame separator, as in Rust's `[u8; 8]`) becomes `:`;
/// - line breaks, tabs and other control or non-space whitespace become a space;
/// - leading and trailing spaces go; an empty name becomes `[unknown]`;
/// - a trailing ` 123` or ` 1.5` would be read as a sample count: its space becomes `_`;
/// - a leading `# ` (a comment line) becomes `#_`;
/// - `-` and `--`, inferno's separator frames, become `[-]` and `[--]`.
pub fn sanitize_frame(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| match c {
            ';' => ':',
            c if c.is_control() || (c.is_whitespace() && c != ' ') => ' ',
            c => c,
        })
        .collect();
    let mut s = cleaned.trim_matches(' ').to_string();
    if s.is_empty() {
        return "[unknown]".into();
    }
    if let Some(space) = s.rfind(' ') {
        let tail = &s[space + 1..];
        if !tail.is_empty() && tail.chars().all(|c| c.is_ascii_digit() || c == '.') {
            s.replace_range(space..space + 1, "_");
        }
    }
    if s.starts_with("# ") {
        s.replace_range(1..2, "_");
    }
    if s == "-" || s == "--" {
        s = format!("[{s}]");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_labels_become_state_frames() {
        assert_eq!(label_frame(ProfileKind::OffCpu, &"S".into()), "[S]");
        assert_eq!(label_frame(ProfileKind::OffCpu, &"R".into()), "[R]");
        assert_eq!(
            label_frame(ProfileKind::OffCpu, &"W".into()),
            "[R after wakeup]"
        );
        // Only a state is renamed: a syscall label stays as it is.
        assert_eq!(label_frame(ProfileKind::Syscalls, &"W".into()), "[W]");
        assert_eq!(label_frame(ProfileKind::Syscalls, &"a;b".into()), "[a:b]");
    }

    #[test]
    fn sanitises_frame_names() {
        assert_eq!(
            sanitize_frame("core::ptr::drop<[u8; 8]>"),
            "core::ptr::drop<[u8: 8]>"
        );
        assert_eq!(sanitize_frame("a\nb\r\tc"), "a b  c");
        assert_eq!(sanitize_frame("  padded  "), "padded");
        assert_eq!(sanitize_frame(""), "[unknown]");
        assert_eq!(sanitize_frame(" \n "), "[unknown]");
        assert_eq!(sanitize_frame("frame 12"), "frame_12");
        assert_eq!(sanitize_frame("frame 1.5"), "frame_1.5");
        assert_eq!(
            sanitize_frame("operator new(unsigned long)"),
            "operator new(unsigned long)"
        );
        assert_eq!(sanitize_frame("# note"), "#_note");
        assert_eq!(sanitize_frame("--"), "[--]");
        assert_eq!(sanitize_frame("<script>"), "<script>");
    }
}
