//! What a span's breakpoints cost on this host, measured as the recording starts.
//!
//! A uprobe on an instruction the kernel cannot emulate is single-stepped out of line: on
//! these VMs about ten times the probe itself. Two builds whose probed functions start with
//! different instructions then pay differently for being recorded, and a comparison of them
//! measures the recorder too. So each recording with spans times its own breakpoints: the
//! span programs are attached, in this process only, to two functions of switchyard's own,
//! one starting with `push %rbp` (emulated) and one with a 5-byte `nop` (single-stepped),
//! each alone and with the return probe on the same breakpoint, and a third that is a lone
//! `ret` (where a Go span's plain exit probes sit), and called [`CALLS`] times
//! each, in batches of which the fastest counts, less the same calls unprobed. The programs
//! return at once here (this process is no target), so the figures are the traps, which is
//! where two builds differ.

use std::{hint::black_box, path::Path, time::Instant};

use aya::{
    Ebpf,
    programs::{
        UProbe,
        uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeScope},
    },
};
use switchyard_common::programs;
use switchyard_model::TrapCosts;

use crate::{
    Error,
    error::{loaded, program},
};

/// Calls timed for each kind of breakpoint, in [`BATCHES`] batches.
pub const CALLS: u32 = 1000;
pub const BATCHES: u32 = 10;

std::arch::global_asm!(
    ".globl switchyard_trap_emulated",
    ".type switchyard_trap_emulated,@function",
    "switchyard_trap_emulated:",
    "push rbp",
    "pop rbp",
    "ret",
    ".size switchyard_trap_emulated, .-switchyard_trap_emulated",
    ".globl switchyard_trap_stepped",
    ".type switchyard_trap_stepped,@function",
    "switchyard_trap_stepped:",
    "nop dword ptr [rax + rax + 0]",
    "ret",
    ".size switchyard_trap_stepped, .-switchyard_trap_stepped",
    ".globl switchyard_trap_ret",
    ".type switchyard_trap_ret,@function",
    "switchyard_trap_ret:",
    "ret",
    ".size switchyard_trap_ret, .-switchyard_trap_ret",
);

unsafe extern "C" {
    fn switchyard_trap_emulated();
    fn switchyard_trap_stepped();
    fn switchyard_trap_ret();
}

/// The breakpoints' costs, with the span programs already loaded in `ebpf`.
pub fn measure(ebpf: &mut Ebpf) -> Result<TrapCosts, Error> {
    let exe =
        std::fs::read_link("/proc/self/exe").map_err(|e| Error::Calibration(e.to_string()))?;
    let emulated = file_offset(switchyard_trap_emulated as *const () as usize, &exe)?;
    let stepped = file_offset(switchyard_trap_stepped as *const () as usize, &exe)?;
    let ret = file_offset(switchyard_trap_ret as *const () as usize, &exe)?;
    // The fastest of [`BATCHES`] batches, a call's share of it: on a busy host a batch
    // that was preempted, or interrupted, is slower, never faster.
    let calls = |f: unsafe extern "C" fn()| -> f64 {
        let f = black_box(f);
        // A warm-up call: the first one maps the probed page in.
        unsafe { f() };
        let per_batch = CALLS / BATCHES;
        (0..BATCHES)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..per_batch {
                    // SAFETY: functions of our own that touch no memory.
                    unsafe { black_box(f)() };
                }
                t.elapsed().as_nanos() as f64 / f64::from(per_batch)
            })
            .fold(f64::INFINITY, f64::min)
    };
    let base = calls(switchyard_trap_emulated)
        .min(calls(switchyard_trap_stepped))
        .min(calls(switchyard_trap_ret));
    let mut probed = |offset: u64, with_return: bool, f: unsafe extern "C" fn()| {
        let names: &[&'static str] = if with_return {
            &[programs::SPAN_EXIT, programs::SPAN_ENTER]
        } else {
            &[programs::SPAN_ENTER]
        };
        let mut links = Vec::new();
        let mut attached = Ok(());
        for &name in names {
            let link = program::<UProbe>(ebpf, name).and_then(|p| {
                // Loaded already when the run has a native span; a run of Go spans only
                // loads them here, to time the traps.
                loaded(name, p.load())?;
                p.attach(
                    UProbeAttachPoint {
                        location: UProbeAttachLocation::AbsoluteOffset(offset),
                        cookie: Some(u64::MAX),
                    },
                    &exe,
                    UProbeScope::CallingProcess,
                )
                .map_err(|e| Error::Calibration(e.to_string()))
            });
            match link {
                Ok(link) => links.push((name, link)),
                Err(e) => {
                    attached = Err(e);
                    break;
                }
            }
        }
        let ns = attached.map(|()| calls(f));
        // Whatever attached is detached, timed or not.
        for (name, link) in links {
            if let Ok(p) = program::<UProbe>(ebpf, name) {
                let _ = p.detach(link);
            }
        }
        Ok::<f64, Error>((ns? - base).max(0.0))
    };
    Ok(TrapCosts {
        emulated_ns: probed(emulated, false, switchyard_trap_emulated)?,
        stepped_ns: probed(stepped, false, switchyard_trap_stepped)?,
        emulated_with_return_ns: probed(emulated, true, switchyard_trap_emulated)?,
        stepped_with_return_ns: probed(stepped, true, switchyard_trap_stepped)?,
        // A Go span's way out: a plain probe on a RET (the entry program stands in for the
        // Go one; both return at once in this process).
        // Its failure costs only this figure.
        ret_ns: probed(ret, false, switchyard_trap_ret).ok(),
        calls: CALLS,
    })
}

/// The offset in `exe` of this process's code at `addr`, from its mapping.
fn file_offset(addr: usize, exe: &Path) -> Result<u64, Error> {
    let maps = std::fs::read_to_string("/proc/self/maps")
        .map_err(|e| Error::Calibration(e.to_string()))?;
    let addr = addr as u64;
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(_perms), Some(offset), Some(_dev), Some(_inode), Some(path)) =
            (f.next(), f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        if Path::new(path) != exe {
            continue;
        }
        let Some((lo, hi)) = range.split_once('-') else {
            continue;
        };
        let parse = |s: &str| u64::from_str_radix(s, 16).ok();
        if let (Some(lo), Some(hi), Some(off)) = (parse(lo), parse(hi), parse(offset))
            && (lo..hi).contains(&addr)
        {
            return Ok(addr - lo + off);
        }
    }
    Err(Error::Calibration(format!(
        "no mapping of {} holds {addr:#x}",
        exe.display()
    )))
}
