//! The recording's bounds, read from /proc: every thread of the targets when the recording
//! began and when it stopped, with its state, its place (wchan and kernel stack) and the
//! scheduler's own clocks (`schedstat`). A wait open at either bound, or a thread that never
//! switched, is then known by what /proc said, not left without a state or a stack.

use std::{collections::BTreeMap, fs};

/// One thread as /proc showed it at a bound.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskAt {
    pub tgid: u32,
    /// `/proc/…/stat`'s state letter (R, S, D, …).
    pub state: char,
    /// Where it sleeps (`/proc/…/wchan`), empty when running.
    pub wchan: String,
    /// Its kernel stack (`/proc/…/stack`), innermost first, as instruction pointers found
    /// from kallsyms (empty when it runs, or where kallsyms does not name a frame).
    pub kernel_ips: Vec<u64>,
    /// `/proc/…/schedstat`: ns on CPU, ns waiting on a run queue, since the thread began.
    pub exec_ns: u64,
    pub runqueue_ns: u64,
}

/// The threads at the start and at the stop, by tid.
#[derive(Clone, Debug, Default)]
pub struct Bounds {
    pub start: BTreeMap<u32, TaskAt>,
    pub end: BTreeMap<u32, TaskAt>,
}

/// `TaskAt` for every thread of `tgids`, with kernel stacks when `stacks`.
pub fn tasks(tgids: &[u32], stacks: bool) -> BTreeMap<u32, TaskAt> {
    let mut out = BTreeMap::new();
    let mut texts = Vec::new();
    for &tgid in tgids {
        let Ok(dir) = fs::read_dir(format!("/proc/{tgid}/task")) else {
            continue;
        };
        for entry in dir.flatten() {
            let Some(tid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let path = entry.path();
            let read = |name: &str| fs::read_to_string(path.join(name)).unwrap_or_default();
            let Some(state) = stat_state(&read("stat")) else {
                continue;
            };
            let (exec_ns, runqueue_ns) = schedstat(&read("schedstat"));
            let stack = if stacks && state != 'R' {
                stack_frames(&read("stack"))
            } else {
                Vec::new()
            };
            texts.push((tid, stack));
            out.insert(
                tid,
                TaskAt {
                    tgid,
                    state,
                    wchan: Some(read("wchan").trim())
                        .filter(|w| *w != "0")
                        .unwrap_or_default()
                        .to_string(),
                    kernel_ips: Vec::new(),
                    exec_ns,
                    runqueue_ns,
                },
            );
        }
    }
    if texts.iter().any(|(_, s)| !s.is_empty()) {
        let names: std::collections::BTreeSet<&str> = texts
            .iter()
            .flat_map(|(_, s)| s.iter().map(|(n, _)| n.as_str()))
            .collect();
        let addrs = kallsyms(
            &fs::read_to_string("/proc/kallsyms").unwrap_or_default(),
            &names,
        );
        for (tid, stack) in &texts {
            if let Some(t) = out.get_mut(tid) {
                t.kernel_ips = stack
                    .iter()
                    .filter_map(|(name, off)| Some(addrs.get(name.as_str())? + off))
                    .collect();
            }
        }
    }
    out
}

/// The state letter of a `/proc/…/stat` line (after the parenthesised name, which may hold
/// spaces and parentheses).
fn stat_state(stat: &str) -> Option<char> {
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// `/proc/…/schedstat`: (ns on CPU, ns waiting on a run queue).
fn schedstat(text: &str) -> (u64, u64) {
    let mut it = text.split_whitespace().map(|v| v.parse().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

/// `/proc/…/stack` lines (`[<0>] do_epoll_wait+0x548/0x5a0`), innermost first: (function,
/// offset).
fn stack_frames(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let f = l.split_once("] ").map_or(l, |(_, f)| f).trim();
            let f = f.split_whitespace().next()?;
            let (name, rest) = f.split_once('+')?;
            let off = rest.split('/').next()?.trim_start_matches("0x");
            Some((name.to_string(), u64::from_str_radix(off, 16).ok()?))
        })
        .collect()
}

/// The address of each of `names` in a kallsyms text (the first text symbol of that name).
fn kallsyms<'a>(text: &str, names: &std::collections::BTreeSet<&'a str>) -> BTreeMap<&'a str, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(addr), Some(kind), Some(name)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if !matches!(kind, "t" | "T") {
            continue;
        }
        if let Some(&n) = names.get(name)
            && !out.contains_key(n)
            && let Ok(a) = u64::from_str_radix(addr, 16)
            && a != 0
        {
            out.insert(n, a);
        }
    }
    out
}

/// A /proc state letter as `sched_switch` reports a switch-out in that state (TASK_REPORT
/// bits; 0: runnable).
pub(crate) fn report_state(state: char) -> u32 {
    match state {
        'R' => 0,
        'D' => 2,
        'T' => 4,
        't' => 8,
        'I' => 0x80,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_texts_parse() {
        assert_eq!(stat_state("12 (a (b) c) S 1 2 3"), Some('S'));
        assert_eq!(
            schedstat("4141521986 798434384 47310\n"),
            (4141521986, 798434384)
        );
        let frames = stack_frames(
            "[<0>] do_epoll_wait+0x548/0x5a0\n[<0>] __x64_sys_epoll_wait+0x5a/0x120\n\
             [<0>] xfs_foo+0x10/0x20 [xfs]\n",
        );
        assert_eq!(
            frames,
            vec![
                ("do_epoll_wait".into(), 0x548),
                ("__x64_sys_epoll_wait".into(), 0x5a),
                ("xfs_foo".into(), 0x10),
            ]
        );
        let names = ["do_epoll_wait", "xfs_foo"].into_iter().collect();
        let addrs = kallsyms(
            "ffffffff81000000 D do_epoll_wait\nffffffff81000100 t do_epoll_wait\n\
             ffffffffc0000000 t xfs_foo\t[xfs]\nffffffff81000200 T do_epoll_wait\n",
            &names,
        );
        assert_eq!(addrs["do_epoll_wait"], 0xffffffff81000100);
        assert_eq!(addrs["xfs_foo"], 0xffffffffc0000000);
    }
}
