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
    pub label: String,
    pub waker: Option<RawWaker>,
    pub value: u64,
}

#[derive(Clone, Debug, Default)]
pub struct RawWaker {
    pub tgid: u32,
    pub tid: u32,
    pub comm: String,
    pub user_stack: i32,
    pub kernel_stack: i32,
}

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
    pub syscalls: Vec<RawSample>,
    pub futex: Vec<RawSample>,
    pub stats: StackStats,
}
