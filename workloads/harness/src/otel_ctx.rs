//! OpenTelemetry thread context (OTEP 4947), a reference writer: the TLS variable
//! `otel_thread_ctx_v1` (an 8-byte ELF TLS symbol, exported in `.dynsym` by the binaries that
//! link this, through `-Wl,--export-dynamic-symbol`), pointing to this thread's record while a
//! request is served. A profiler outside the process reads it when the thread is stopped.
//!
//! The record is the OTEP's, byte-packed: trace id (16), span id (8), `valid` (1), trace flags
//! (1), attributes' size (2), attributes. Each thread has one record and updates it in place
//! (the OTEP's "fixed record" mode): `valid` goes to 0, the fields change, then `valid` goes
//! to 1; detaching sets it to 0. Only the thread itself writes it, and a reader sees it only
//! while the thread is stopped, so compiler fences suffice.
//!
//! Stable Rust cannot name a TLS symbol, so it is defined in assembly (x86-64: local-exec,
//! since the symbol is the executable's own).

use std::{
    cell::Cell,
    io::{self, Write as _},
    path::Path,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering, compiler_fence},
    },
};

/// One thread's record; 640 bytes in all, as the OTEP recommends at most.
#[repr(C, packed)]
pub struct Record {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub valid: u8,
    pub trace_flags: u8,
    pub attrs_size: u16,
    pub attrs: [u8; 612],
}

#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".section .tbss,\"awT\",@nobits",
    ".globl otel_thread_ctx_v1",
    ".type otel_thread_ctx_v1, @tls_object",
    ".size otel_thread_ctx_v1, 8",
    ".p2align 3",
    "otel_thread_ctx_v1:",
    ".zero 8",
    ".text",
);

/// This thread's `otel_thread_ctx_v1`.
#[cfg(target_arch = "x86_64")]
fn slot() -> *mut *mut Record {
    let p: *mut *mut Record;
    // SAFETY: the thread pointer plus the variable's local-exec offset is this thread's copy.
    unsafe {
        std::arch::asm!(
            "mov {p}, qword ptr fs:[0]",
            "lea {p}, [{p} + otel_thread_ctx_v1@tpoff]",
            p = out(reg) p,
            options(nostack, readonly, preserves_flags),
        );
    }
    p
}

thread_local! {
    static RECORD: Cell<*mut Record> = const { Cell::new(std::ptr::null_mut()) };
}

/// This thread's record, made and published on first use (never freed: the thread may be
/// read until it exits).
#[cfg(target_arch = "x86_64")]
fn record() -> *mut Record {
    RECORD.with(|r| {
        if r.get().is_null() {
            let fresh = Box::into_raw(Box::new(Record {
                trace_id: [0; 16],
                span_id: [0; 8],
                valid: 0,
                trace_flags: 0,
                attrs_size: 0,
                attrs: [0; 612],
            }));
            r.set(fresh);
            // SAFETY: this thread's own slot.
            unsafe { slot().write_volatile(fresh) };
        }
        r.get()
    })
}

/// From now on this thread serves span `span_id` of trace `trace_id` (sampled).
#[cfg(target_arch = "x86_64")]
pub fn attach(trace_id: [u8; 16], span_id: [u8; 8]) {
    let r = record();
    // SAFETY: this thread's record; only it writes it.
    unsafe {
        std::ptr::addr_of_mut!((*r).valid).write_volatile(0);
        compiler_fence(Ordering::SeqCst);
        std::ptr::addr_of_mut!((*r).trace_id).write_volatile(trace_id);
        std::ptr::addr_of_mut!((*r).span_id).write_volatile(span_id);
        std::ptr::addr_of_mut!((*r).trace_flags).write_volatile(1);
        compiler_fence(Ordering::SeqCst);
        std::ptr::addr_of_mut!((*r).valid).write_volatile(1);
    }
}

/// This thread serves no span any more.
#[cfg(target_arch = "x86_64")]
pub fn detach() {
    let r = record();
    // SAFETY: as in `attach`.
    unsafe { std::ptr::addr_of_mut!((*r).valid).write_volatile(0) };
    compiler_fence(Ordering::SeqCst);
}

/// The calling thread's time on CPU, ns (CLOCK_THREAD_CPUTIME_ID).
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's time spent waiting on a run queue, ns: the second field of its
/// `/proc/thread-self/schedstat`.
pub fn run_delay_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// What a request measured of itself, ns: what a profiler reading its span must find.
#[derive(Clone, Copy, Debug, Default)]
pub struct Own {
    pub wall_ns: u64,
    /// This thread on CPU: the rest of the wall time it was off CPU.
    pub cpu_ns: u64,
    /// Off CPU while runnable, waiting for a CPU (schedstat's run delay).
    pub cpu_wait_ns: u64,
}

/// A request's own clocks, started: wall time, the thread's time on CPU and its wait for one.
pub struct Clocks {
    wall: std::time::Instant,
    cpu: u64,
    delay: u64,
}

impl Clocks {
    pub fn start() -> Clocks {
        let delay = run_delay_ns();
        let cpu = thread_cpu_ns();
        Clocks {
            wall: std::time::Instant::now(),
            cpu,
            delay,
        }
    }

    /// What the thread did since `start`, read in the reverse order.
    pub fn stop(&self) -> Own {
        let wall_ns = self.wall.elapsed().as_nanos() as u64;
        let cpu_ns = thread_cpu_ns().saturating_sub(self.cpu);
        Own {
            wall_ns,
            cpu_ns,
            cpu_wait_ns: run_delay_ns().saturating_sub(self.delay),
        }
    }
}

/// The trace context a client sent with a request, as W3C trace context carries it: its trace,
/// and the client's span that sent it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub parent_id: [u8; 8],
}

impl TraceParent {
    /// On the wire: trace id, then parent span id.
    pub const LEN: usize = 24;

    /// Message `n` of a client seeded `seed`, as a trace of its own.
    pub fn nth(seed: u64, n: u64) -> TraceParent {
        TraceParent {
            trace_id: trace_id(seed, n),
            parent_id: span_id(n),
        }
    }

    pub fn to_bytes(self) -> [u8; Self::LEN] {
        let mut b = [0; Self::LEN];
        b[..16].copy_from_slice(&self.trace_id);
        b[16..].copy_from_slice(&self.parent_id);
        b
    }

    pub fn from_bytes(b: &[u8; Self::LEN]) -> TraceParent {
        let (trace_id, parent_id) = b.split_at(16);
        TraceParent {
            trace_id: trace_id.try_into().expect("16 bytes"),
            parent_id: parent_id.try_into().expect("8 bytes"),
        }
    }

    /// The W3C `traceparent` header's value, sampled: `00-<trace id>-<parent id>-01`.
    pub fn to_w3c(self) -> String {
        format!("00-{}-{}-01", hex(&self.trace_id), hex(&self.parent_id))
    }

    /// A W3C `traceparent` value of version 00; `None` for anything else, or for an all-zero
    /// id (invalid by the W3C text).
    pub fn from_w3c(value: &str) -> Option<TraceParent> {
        let mut parts = value.trim().split('-');
        let (version, trace, parent, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version != "00" || parts.next().is_some() {
            return None;
        }
        unhex::<1>(flags)?;
        let t = TraceParent {
            trace_id: unhex(trace)?,
            parent_id: unhex(parent)?,
        };
        (t.trace_id != [0; 16] && t.parent_id != [0; 8]).then_some(t)
    }
}

/// `N` bytes from exactly `2N` lower-case hex digits.
fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N || !s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0; N];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// A server's spans: each traced request it serves is a child span of the client's,
/// published in the serving thread's context while it is served. With `keep`, each span's own
/// timings are kept, to be written at exit ([`Self::write`]).
pub struct Spans {
    last: AtomicU64,
    kept: Option<Mutex<Vec<(Serving, Own)>>>,
}

/// The spans' own timings could not be written.
#[derive(Debug, thiserror::Error)]
#[error("failed to write the spans' own timings to `{}`", path.display())]
pub struct WriteError {
    pub path: std::path::PathBuf,
    #[source]
    pub source: io::Error,
}

/// A span being served.
pub struct Serving {
    pub span_id: [u8; 8],
    pub trace_id: [u8; 16],
    clocks: Option<Clocks>,
}

impl Spans {
    pub fn new(keep: bool) -> Spans {
        Spans {
            last: AtomicU64::new(0),
            kept: keep.then(|| Mutex::new(Vec::new())),
        }
    }

    /// This thread serves a new span of `trace` from now on. Its id is never a client's
    /// ([`TraceParent::nth`]'s): the server's ids have their second-highest bit set.
    pub fn begin(&self, trace: TraceParent) -> Serving {
        let span_id = span_id((self.last.fetch_add(1, Ordering::Relaxed) + 1) | 1 << 62);
        let clocks = self.kept.as_ref().map(|_| Clocks::start());
        attach(trace.trace_id, span_id);
        Serving {
            span_id,
            trace_id: trace.trace_id,
            clocks,
        }
    }

    /// The span is served: this thread serves none.
    pub fn end(&self, mut serving: Serving) {
        detach();
        if let (Some(clocks), Some(kept)) = (serving.clocks.take(), &self.kept) {
            let own = clocks.stop();
            kept.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((serving, own));
        }
    }

    /// Each kept span, a line each: `span_id trace_id wall_ns cpu_ns cpu_wait_ns` (hex ids,
    /// ns), to `path` when there is one.
    pub fn write_to(&self, path: Option<&Path>) -> Result<(), WriteError> {
        let Some(path) = path else {
            return Ok(());
        };
        self.write(path).map_err(|source| WriteError {
            path: path.to_owned(),
            source,
        })
    }

    fn write(&self, path: &Path) -> io::Result<()> {
        let mut out = io::BufWriter::new(std::fs::File::create(path)?);
        let kept = self
            .kept
            .as_ref()
            .map(|k| k.lock().unwrap_or_else(|p| p.into_inner()));
        for (s, own) in kept.iter().flat_map(|k| k.iter()) {
            writeln!(
                out,
                "{} {} {} {} {}",
                hex(&s.span_id),
                hex(&s.trace_id),
                own.wall_ns,
                own.cpu_ns,
                own.cpu_wait_ns
            )?;
        }
        out.flush()
    }
}

/// A span id from a counter, never zero (zero is none).
pub fn span_id(n: u64) -> [u8; 8] {
    (n | 1 << 63).to_be_bytes()
}

/// A trace id from a seed and a counter, never zero.
pub fn trace_id(seed: u64, n: u64) -> [u8; 16] {
    let mut t = [0; 16];
    t[..8].copy_from_slice(&(seed | 1).to_be_bytes());
    t[8..].copy_from_slice(&n.to_be_bytes());
    t
}

/// Lower-case hex, as W3C ids are written.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_refuses_what_w3c_refuses() {
        let t = TraceParent::nth(0x1234, 5);
        let w3c = t.to_w3c();
        assert_eq!(
            w3c,
            "00-00000000000012350000000000000005-8000000000000005-01"
        );
        assert_eq!(TraceParent::from_w3c(&w3c), Some(t));
        for bad in [
            "",
            "01-00000000000012350000000000000005-8000000000000005-01",
            "00-00000000000000000000000000000000-8000000000000005-01",
            "00-00000000000012350000000000000005-0000000000000000-01",
            "00-0000000000001235000000000000000-8000000000000005-01",
            "00-00000000000012350000000000000005-8000000000000005-1",
            "00-00000000000012350000000000000005-8000000000000005-01-extra",
            "00-00000000000012350000000000000005-8000000000000005-0A",
            "00-00000000000012350000000000000005-8000000000000005-+1",
            "00-0000000000001235000000000000000X-8000000000000005-01",
            "00-00000000000012350000000000000005-800000000000000A-01",
        ] {
            assert_eq!(TraceParent::from_w3c(bad), None, "{bad:?}");
        }
    }
}
