//! The kernel side's stacks as the loader collects them, before symbolisation: stack ids and
//! the instruction pointers behind them. The loader produces them; `symbolize` turns them into
//! [`crate::Profiles`].

use std::collections::{HashMap, HashSet};

use crate::StackStats;

/// One aggregated stack sample as the kernel side keeps it.
#[derive(Clone, Debug, Default)]
pub struct RawSample {
    pub tgid: u32,
    pub tid: u32,
    /// Stack ids (negative: not recorded).
    pub user_stack: i32,
    pub kernel_stack: i32,
    pub label: crate::Label,
    pub waker: Option<RawWaker>,
    pub value: u64,
    /// The OpenTelemetry trace and span the thread served, W3C hex (empty: none).
    pub trace_id: String,
    pub span_id: String,
}

#[derive(Clone, Debug, Default)]
pub struct RawWaker {
    pub tgid: u32,
    pub tid: u32,
    pub comm: String,
    pub user_stack: i32,
    pub kernel_stack: i32,
}

/// The user stack id of a wait still open at the stop inside a syscall: its user stack is
/// walked where the syscall returns, and it had not returned.
pub const USER_STACK_OPEN_AT_STOP: i32 = -2;

/// The frame such a stack shows in its user stack's place.
pub const OPEN_AT_STOP_FRAME: &str = "[wait open at the stop: user stack lost]";

/// Everything the kernel side kept about stacks.
#[derive(Clone, Debug, Default)]
pub struct Raw {
    /// Kernel stack id → instruction pointers, leaf first.
    pub stacks: HashMap<i32, Vec<u64>>,
    /// User stack id → instruction pointers, leaf first (its own id space).
    pub user_stacks: HashMap<i32, Vec<u64>>,
    /// User stacks the walk followed to their outermost frame.
    pub complete_user_stacks: HashSet<i32>,
    pub oncpu: Vec<RawSample>,
    pub offcpu: Vec<RawSample>,
    pub wakeup: Vec<RawSample>,
    /// What the targets' wakers did while the threads they woke waited: the woken thread,
    /// and in the waker's place the waker's interval (label: its state, or `running`).
    pub held: Vec<RawSample>,
    pub syscalls: Vec<RawSample>,
    pub futex: Vec<RawSample>,
    /// The distinct stacks of timeline events (`--timeline`), symbolised in this order into
    /// `Profiles::timeline_stacks`; values unused.
    pub timeline: Vec<RawSample>,
    /// The distinct stacks of span instances, symbolised in this order into
    /// `Profiles::span_stacks`; values unused.
    pub span_stacks: Vec<RawSample>,
    /// CPython code objects that Python frames in `user_stacks` refer to, by (tgid, address).
    pub python_codes: HashMap<(u32, u64), PythonCode>,
    pub stats: StackStats,
}

/// A CPython code object as the kernel side copied it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PythonCode {
    /// The qualified name (`Class.method`); `None` when it was not ASCII and was not read.
    pub name: Option<String>,
    pub file: Option<String>,
    pub firstlineno: u32,
    /// `co_linetable`, or its first bytes (what was copied).
    pub linetable: Vec<u8>,
}

impl Raw {
    /// Every sample of every profile, and the timeline's and span instances' stacks.
    pub fn samples(&self) -> impl Iterator<Item = &RawSample> {
        self.oncpu
            .iter()
            .chain(&self.offcpu)
            .chain(&self.wakeup)
            .chain(&self.held)
            .chain(&self.syscalls)
            .chain(&self.futex)
            .chain(&self.timeline)
            .chain(&self.span_stacks)
    }

    /// The stack ids the samples refer to: (user ids, kernel ids).
    pub fn referenced(&self) -> (HashSet<i32>, HashSet<i32>) {
        let mut user = HashSet::new();
        let mut kernel = HashSet::new();
        for s in self.samples() {
            user.insert(s.user_stack);
            kernel.insert(s.kernel_stack);
            if let Some(w) = &s.waker {
                user.insert(w.user_stack);
                kernel.insert(w.kernel_stack);
            }
        }
        (user, kernel)
    }
}

/// One line of `/proc/<pid>/maps`.
pub struct MapsLine<'a> {
    pub start: u64,
    pub end: u64,
    pub perms: &'a str,
    /// File offset of `start`.
    pub offset: u64,
    pub dev: &'a str,
    pub inode: u64,
    /// The path, a `[vdso]`-style name, or empty (anonymous).
    pub path: &'a str,
}

impl<'a> MapsLine<'a> {
    pub fn parse(line: &'a str) -> Option<MapsLine<'a>> {
        let mut f = line.splitn(6, ' ');
        let range = f.next()?;
        let perms = f.next()?;
        let offset = u64::from_str_radix(f.next()?, 16).ok()?;
        let dev = f.next()?;
        let inode = f.next()?.parse().ok()?;
        let path = f.next().unwrap_or("").trim_start();
        let (a, b) = range.split_once('-')?;
        Some(MapsLine {
            start: u64::from_str_radix(a, 16).ok()?,
            end: u64::from_str_radix(b, 16).ok()?,
            perms,
            offset,
            dev,
            inode,
            path,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_parse() {
        let l = MapsLine::parse(
            "7f0c1a428000-7f0c1a57d000 r-xp 00026000 fe:01 1835291                    /usr/lib/x86_64-linux-gnu/libc.so.6",
        )
        .unwrap();
        assert_eq!(
            (l.start, l.end, l.perms, l.offset, l.dev, l.inode, l.path),
            (
                0x7f0c1a428000,
                0x7f0c1a57d000,
                "r-xp",
                0x26000,
                "fe:01",
                1835291,
                "/usr/lib/x86_64-linux-gnu/libc.so.6"
            )
        );
        let anon = MapsLine::parse("7ffd5a3f0000-7ffd5a3f2000 r-xp 00000000 00:00 0 ").unwrap();
        assert_eq!(anon.path, "");
    }
}
