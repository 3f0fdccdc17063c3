//! A small target with known behaviour, for tests, benchmarks and `just profile`.
//!
//! ```text
//! switchyard-demo known   [--getppid N] [--sleeps M] [--sleep-us U] [--pingpong K] [--wait-stdin]
//! switchyard-demo threads [--threads T] [--getppid N] [--fork-child | --children C] [--wait-stdin]
//!                         [--then-exec M]   (then execs itself: one thread making M calls)
//! switchyard-demo storm [--seconds S] [--threads T] [--pairs P]
//!                                               (T threads calling getppid and P ping-pong
//!                                                pairs, for S seconds: a syscall and switch
//!                                                storm; prints the counts)
//! switchyard-demo getppid-loop --count N [--stamps FILE --gap-us G]  (prints ns per call;
//!                                               each return's CLOCK_MONOTONIC to FILE)
//! switchyard-demo pingpong --rounds K           (prints ns per round trip)
//! switchyard-demo spin --iters N --depth D      (burns N iterations D calls deep; prints the
//!                                                elapsed ns, for the per-sample cost)
//! switchyard-demo mix [--seconds S]             (a bit of everything, for the default profile)
//! switchyard-demo stacks [--seconds S]          (one hot function, one blocking, one waker)
//! switchyard-demo locks [--futex-waits N] [--span-calls M]
//!                                               (N futex waits that time out on one word,
//!                                                M calls of `demo_span_target`)
//! switchyard-demo blockers [--seconds S] [--burst B] [--pause-us U] [--wait-stdin]
//!                                               (threads blocking in known functions for
//!                                                known times, short and long; prints the
//!                                                count and blocked ns of each function)
//! ```
//!
//! Syscalls are issued directly (`syscall(2)`) so their counts are exactly what was asked:
//! N `getppid`, M `nanosleep`, and K round trips of `writev`/`readv` over two pipes between two
//! threads (2K of each). `known` ends by printing, as JSON, each thread's own voluntary and
//! involuntary switch counts from `/proc/thread-self/status`, read just before it ends, so a
//! test can compare what a tracer saw with what the kernel counted.

use std::{
    env,
    io::{Read, Write},
    process, thread,
    time::{Duration, Instant},
};

fn usage() -> ! {
    eprintln!(
        "usage: switchyard-demo SUBCOMMAND [options] (subcommands and options: see the source header)"
    );
    process::exit(2);
}

struct Args(Vec<String>);

impl Args {
    fn num(&self, flag: &str, default: u64) -> u64 {
        match self.0.iter().position(|a| a == flag) {
            Some(i) => self
                .0
                .get(i + 1)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| {
                    eprintln!("error: {flag} needs a number");
                    process::exit(2)
                }),
            None => default,
        }
    }
    fn value(&self, flag: &str) -> Option<&str> {
        let i = self.0.iter().position(|a| a == flag)?;
        Some(self.0.get(i + 1).map(String::as_str).unwrap_or_else(|| {
            eprintln!("error: {flag} needs a value");
            process::exit(2)
        }))
    }
    fn flag(&self, flag: &str) -> bool {
        self.0.iter().any(|a| a == flag)
    }
}

fn getppid() {
    // SAFETY: getppid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_getppid) };
}

fn nanosleep(us: u64) {
    let ts = libc::timespec {
        tv_sec: (us / 1_000_000) as libc::time_t,
        tv_nsec: ((us % 1_000_000) * 1000) as libc::c_long,
    };
    // SAFETY: a valid timespec; a null remainder pointer is allowed.
    unsafe {
        libc::syscall(
            libc::SYS_nanosleep,
            &ts,
            std::ptr::null_mut::<libc::timespec>(),
        )
    };
}

fn pipe() -> (i32, i32) {
    let mut fds = [0i32; 2];
    // SAFETY: fds has room for two descriptors.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        eprintln!("error: pipe: {}", std::io::Error::last_os_error());
        process::exit(1);
    }
    (fds[0], fds[1])
}

fn xfer(fd: i32, write: bool) {
    let mut byte = [0u8; 1];
    let iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let nr = if write {
        libc::SYS_writev
    } else {
        libc::SYS_readv
    };
    // SAFETY: one valid iovec of one byte.
    let n = unsafe { libc::syscall(nr, fd, &iov as *const libc::iovec, 1) };
    if n != 1 {
        eprintln!("error: pipe transfer: {}", std::io::Error::last_os_error());
        process::exit(1);
    }
}

/// Runs `rounds` round trips: this thread writes, the peer reads and answers.
fn pingpong(rounds: u64) -> ThreadSwitches {
    let (a_r, a_w) = pipe();
    let (b_r, b_w) = pipe();
    let peer = thread::spawn(move || {
        for _ in 0..rounds {
            xfer(a_r, false);
            xfer(b_w, true);
        }
        own_switches()
    });
    for _ in 0..rounds {
        xfer(a_w, true);
        xfer(b_r, false);
    }
    let s = peer.join().unwrap_or_else(|_| process::exit(1));
    for fd in [a_r, a_w, b_r, b_w] {
        // SAFETY: descriptors this function opened.
        unsafe { libc::close(fd) };
    }
    s
}

struct ThreadSwitches {
    tid: i64,
    voluntary: u64,
    involuntary: u64,
}

/// This thread's own switch counts, as the kernel keeps them.
fn own_switches() -> ThreadSwitches {
    // SAFETY: gettid cannot fail.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    ThreadSwitches {
        tid,
        voluntary: field("voluntary_ctxt_switches:"),
        involuntary: field("nonvoluntary_ctxt_switches:"),
    }
}

fn wait_stdin(args: &Args) {
    if args.flag("--wait-stdin") {
        println!("ready {}", process::id());
        let _ = std::io::stdout().flush();
        let mut b = [0u8; 1];
        let _ = std::io::stdin().read(&mut b);
    }
}

fn known(args: &Args) {
    let n = args.num("--getppid", 1000);
    let m = args.num("--sleeps", 100);
    let us = args.num("--sleep-us", 100);
    let k = args.num("--pingpong", 1000);
    wait_stdin(args);
    for _ in 0..n {
        getppid();
    }
    for _ in 0..m {
        nanosleep(us);
    }
    let peer = pingpong(k);
    let me = own_switches();
    println!(
        "{{\"getppid\":{n},\"nanosleep\":{m},\"pingpong\":{k},\"threads\":[{{\"tid\":{},\"voluntary\":{},\"involuntary\":{}}},{{\"tid\":{},\"voluntary\":{},\"involuntary\":{}}}]}}",
        me.tid, me.voluntary, me.involuntary, peer.tid, peer.voluntary, peer.involuntary
    );
}

fn threads(args: &Args) {
    let t = args.num("--threads", 8);
    let n = args.num("--getppid", 1000);
    wait_stdin(args);
    // Child processes, each making N getppid calls and exiting.
    let c = args.num("--children", u64::from(args.flag("--fork-child")));
    let children: Vec<libc::pid_t> = (0..c)
        .map(|_| {
            // SAFETY: the child only makes raw syscalls and exits.
            match unsafe { libc::fork() } {
                0 => {
                    for _ in 0..n {
                        getppid();
                    }
                    // SAFETY: leave without running the parent's atexit handlers.
                    unsafe { libc::_exit(0) };
                }
                -1 => {
                    eprintln!("error: fork: {}", std::io::Error::last_os_error());
                    process::exit(1);
                }
                pid => pid,
            }
        })
        .collect();
    let workers: Vec<_> = (0..t)
        .map(|_| {
            thread::spawn(move || {
                for _ in 0..n {
                    getppid();
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
    for pid in &children {
        let mut status = 0;
        // SAFETY: our own child.
        unsafe { libc::waitpid(*pid, &mut status, 0) };
    }
    println!(
        "{{\"threads\":{t},\"getppid_per_thread\":{n},\"children\":{}}}",
        children.len()
    );
    // The same process becomes a new program: a tracer must follow it across the exec.
    let then = args.num("--then-exec", 0);
    if then > 0 {
        use std::os::unix::process::CommandExt as _;
        let _ = std::io::stdout().flush();
        let err = process::Command::new("/proc/self/exe")
            .args(["threads", "--threads", "1", "--getppid", &then.to_string()])
            .exec();
        eprintln!("error: exec: {err}");
        process::exit(1);
    }
}

/// A syscall and switch storm for S seconds: T threads calling getppid as fast as they can,
/// and P pairs of threads ping-ponging over pipes (two switches a round trip).
fn storm(args: &Args) {
    let seconds = args.num("--seconds", 10);
    let t = args.num("--threads", 1);
    let pairs = args.num("--pairs", 1);
    let end = Instant::now() + Duration::from_secs(seconds);
    let callers: Vec<_> = (0..t)
        .map(|_| {
            thread::spawn(move || {
                let mut calls = 0u64;
                while Instant::now() < end {
                    for _ in 0..1000 {
                        getppid();
                    }
                    calls += 1000;
                }
                calls
            })
        })
        .collect();
    let players: Vec<_> = (0..pairs)
        .map(|_| {
            thread::spawn(move || {
                let mut rounds = 0u64;
                while Instant::now() < end {
                    pingpong(1000);
                    rounds += 1000;
                }
                rounds
            })
        })
        .collect();
    let calls: u64 = callers.into_iter().map(|c| c.join().unwrap_or(0)).sum();
    let rounds: u64 = players.into_iter().map(|p| p.join().unwrap_or(0)).sum();
    println!("{{\"getppid\":{calls},\"pingpong_rounds\":{rounds}}}");
}

fn getppid_loop(args: &Args) {
    let n = args.num("--count", 5_000_000);
    // `--stamps FILE --gap-us G`: a call every G µs, each return's CLOCK_MONOTONIC written to
    // FILE (u64 little-endian), so a recording's count can be checked against its window.
    let stamps = args.value("--stamps");
    let gap = args.num("--gap-us", 0) * 1000;
    let mut log = Vec::with_capacity(if stamps.is_some() { n as usize } else { 0 });
    let start = Instant::now();
    for _ in 0..n {
        getppid();
        if stamps.is_some() {
            // The clock of a run's bounds (vDSO: no syscall).
            let now = switchyard_harness::monotonic_ns();
            log.push(now);
            while switchyard_harness::monotonic_ns() < now + gap {
                std::hint::spin_loop();
            }
        }
    }
    if let Some(path) = stamps {
        let bytes: Vec<u8> = log.iter().flat_map(|t| t.to_le_bytes()).collect();
        std::fs::write(path, bytes).expect("writing --stamps");
    }
    let ns = start.elapsed().as_nanos() as f64 / n as f64;
    println!("{{\"calls\":{n},\"ns_per_call\":{ns:.1}}}");
}

fn pingpong_bench(args: &Args) {
    let k = args.num("--rounds", 200_000);
    let start = Instant::now();
    pingpong(k);
    let ns = start.elapsed().as_nanos() as f64 / k as f64;
    println!("{{\"rounds\":{k},\"ns_per_round_trip\":{ns:.1}}}");
}

/// CPU work at a known stack depth: on-CPU samples then walk `depth` frames of this program
/// (plus its start), as a server's do.
fn spin(args: &Args) {
    let iters = args.num("--iters", 2_000_000_000);
    let depth = args.num("--depth", 24);
    let start = Instant::now();
    let x = std::hint::black_box(deep(depth, iters));
    let ns = start.elapsed().as_nanos();
    println!("{{\"iters\":{iters},\"depth\":{depth},\"elapsed_ns\":{ns},\"x\":{x}}}");
}

#[inline(never)]
fn deep(depth: u64, iters: u64) -> u64 {
    if depth == 0 {
        burn(iters)
    } else {
        // Not a tail call: the frame stays on the stack.
        std::hint::black_box(deep(depth - 1, iters)).wrapping_add(1)
    }
}

#[inline(never)]
fn burn(iters: u64) -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..iters {
        x = x.rotate_left(5) ^ i.wrapping_mul(0x2545_f491_4f6c_dd1d);
    }
    x
}

/// A little of everything for a sample report: CPU work, sleeps, a syscall that fails, and a
/// pipe ping-pong with a long-lived peer thread.
fn mix(args: &Args) {
    let secs = args.num("--seconds", 5);
    let end = Instant::now() + Duration::from_secs(secs);
    let worker = thread::spawn(move || {
        let mut acc = 0u64;
        while Instant::now() < end {
            acc ^= burn(200_000);
            thread::yield_now();
        }
        acc
    });
    let (a_r, a_w) = pipe();
    let (b_r, b_w) = pipe();
    // The peer echoes until the write end closes.
    let peer = thread::spawn(move || {
        let mut byte = [0u8; 1];
        // SAFETY: reading one byte into a valid buffer.
        while unsafe { libc::read(a_r, byte.as_mut_ptr().cast(), 1) } == 1 {
            xfer(b_w, true);
        }
    });
    let mut failed = 0u64;
    while Instant::now() < end {
        for _ in 0..200 {
            xfer(a_w, true);
            xfer(b_r, false);
        }
        for _ in 0..200 {
            getppid();
        }
        // A syscall that fails on purpose (ENOENT), so the error table has content.
        if std::fs::metadata("/nonexistent/switchyard-demo").is_err() {
            failed += 1;
        }
        nanosleep(2000);
    }
    // SAFETY: closing our own write end stops the peer.
    unsafe { libc::close(a_w) };
    let _ = peer.join();
    let acc = worker.join().unwrap_or(0);
    println!(
        "{{\"seconds\":{secs},\"failed_stats\":{failed},\"acc\":{}}}",
        acc & 1
    );
}

/// Spins for `dur` in a function of its own, so it is the hot frame of an on-CPU profile.
#[inline(never)]
fn hot_spin(dur: Duration) -> u64 {
    let start = Instant::now();
    let mut acc = 0;
    while start.elapsed() < dur {
        acc ^= burn(2_000);
    }
    acc
}

/// A little work before each wakeup (a small on-CPU share).
#[inline(never)]
fn prepare_wakeup(dur: Duration) -> u64 {
    hot_spin_small(dur)
}

#[inline(never)]
fn hot_spin_small(dur: Duration) -> u64 {
    let start = Instant::now();
    let mut acc = 0;
    while start.elapsed() < dur {
        acc ^= burn(500);
    }
    acc
}

/// One byte through libc: glibc has no frame pointers, so the unwinder skips the direct
/// caller of a libc function; this wrapper is that caller, and the named function above it
/// stays in the stack.
#[inline(never)]
fn io_byte(fd: i32, write: bool) -> bool {
    let mut byte = [0u8; 1];
    // SAFETY: one byte into or out of a valid buffer.
    let n = unsafe {
        if write {
            libc::write(fd, byte.as_ptr().cast(), 1)
        } else {
            libc::read(fd, byte.as_mut_ptr().cast(), 1)
        }
    };
    n == 1
}

/// Blocks until the waker writes: the blocking frame of an off-CPU profile.
#[inline(never)]
fn block_on_pipe(fd: i32) -> bool {
    // Through black_box: a call in tail position compiles to a jump in release builds, and
    // this frame would vanish from the stacks it is known to lead.
    std::hint::black_box(io_byte(fd, false))
}

/// Wakes a sleeper: the waker frame of a wakeup profile.
#[inline(never)]
fn wake_sleeper(fd: i32) {
    std::hint::black_box(io_byte(fd, true));
}

#[inline(never)]
fn nap(us: u64) {
    nanosleep_wrapper(us);
    std::hint::black_box(());
}

#[inline(never)]
fn nanosleep_wrapper(us: u64) {
    nanosleep(us);
    std::hint::black_box(());
}

/// A hot thread, two sleepers blocked on pipes and a waker that works a little, wakes one
/// sleeper, and naps: known leaders for the on-CPU, off-CPU and wakeup flame graphs.
fn stacks(args: &Args) {
    let secs = args.num("--seconds", 2);
    let end = Instant::now() + Duration::from_secs(secs);
    let hot = thread::Builder::new()
        .name("hot".into())
        .spawn(move || {
            let mut acc = 0;
            while Instant::now() < end {
                acc ^= hot_spin(Duration::from_millis(5));
            }
            acc
        })
        .unwrap_or_else(|e| {
            eprintln!("error: spawning a thread: {e}");
            process::exit(1)
        });
    let mut writers = Vec::new();
    let mut sleepers = Vec::new();
    for i in 0..2 {
        let (r, w) = pipe();
        writers.push(w);
        sleepers.push(
            thread::Builder::new()
                .name(format!("sleeper-{i}"))
                .spawn(move || {
                    let mut n = 0u64;
                    while block_on_pipe(r) {
                        n += 1;
                    }
                    n
                })
                .unwrap_or_else(|e| {
                    eprintln!("error: spawning a thread: {e}");
                    process::exit(1)
                }),
        );
    }
    let waker = thread::Builder::new()
        .name("waker".into())
        .spawn(move || {
            let mut i = 0;
            while Instant::now() < end {
                prepare_wakeup(Duration::from_micros(300));
                wake_sleeper(writers[i % 2]);
                nap(1500);
                i += 1;
            }
            for w in writers {
                // SAFETY: closing our write ends ends the sleepers.
                unsafe { libc::close(w) };
            }
            i
        })
        .unwrap_or_else(|e| {
            eprintln!("error: spawning a thread: {e}");
            process::exit(1)
        });
    let wakeups = waker.join().unwrap_or(0);
    let woken: u64 = sleepers.into_iter().map(|s| s.join().unwrap_or(0)).sum();
    let acc = hot.join().unwrap_or(0);
    println!(
        "{{\"seconds\":{secs},\"wakeups\":{wakeups},\"woken\":{woken},\"acc\":{}}}",
        acc & 1
    );
}

/// A function with a stable, unmangled name for `--uprobe-span demo_span_target`.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn demo_span_target(iters: u64) -> u64 {
    burn(iters)
}

/// One FUTEX_WAIT_PRIVATE while the word is 0; true when it timed out. Not inlined: the
/// unwinder skips the direct caller of libc's `syscall`, and this is that caller.
#[inline(never)]
fn futex_wait(word: &std::sync::atomic::AtomicU32, ts: &libc::timespec) -> bool {
    // SAFETY: a valid futex word and timeout.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            0u32,
            ts as *const libc::timespec,
        )
    };
    r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ETIMEDOUT)
}

/// N futex waits on one word that never changes, each timing out after 20 µs, and M calls of
/// the span target; prints the word's address.
fn locks(args: &Args) {
    let n = args.num("--futex-waits", 500);
    let m = args.num("--span-calls", 1000);
    let word = std::sync::atomic::AtomicU32::new(0);
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 20_000,
    };
    let mut timed_out = 0;
    for _ in 0..n {
        if futex_wait(&word, &ts) {
            timed_out += 1;
        }
    }
    let mut acc = 0;
    for i in 0..m {
        acc ^= demo_span_target(100 + (i & 7));
    }
    println!(
        "{{\"futex_word\":\"{:#x}\",\"futex_waits\":{n},\"timed_out\":{timed_out},\"span_calls\":{m},\"acc\":{}}}",
        word.as_ptr() as usize,
        acc & 1
    );
}

/// Times and counts the calls of one blocking function, as the function saw them (wall time
/// around the block: the block plus the few µs of the syscall on CPU).
#[derive(Clone, Copy, Default)]
struct Blocked {
    count: u64,
    ns: u64,
}

impl Blocked {
    /// Always inlined: the blocking function that calls it keeps its own frame, and the call
    /// inside is not its last act, so it is never turned into a tail call that would leave the
    /// stack without it.
    #[inline(always)]
    fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let r = f();
        self.count += 1;
        self.ns += start.elapsed().as_nanos() as u64;
        r
    }
}

/// The ping-pong's bytes: a ball to return, a pause, the end.
const BALL: u8 = b'b';
const PAUSE: u8 = b'p';
const STOP: u8 = b's';

/// One byte into a pipe.
#[inline(never)]
fn send_byte(fd: i32, b: u8) {
    // SAFETY: one byte out of a valid buffer.
    if unsafe { libc::write(fd, (&b as *const u8).cast(), 1) } != 1 {
        eprintln!("error: pipe write: {}", std::io::Error::last_os_error());
        process::exit(1);
    }
}

/// One byte out of a pipe (`None` at end of file). Not inlined: the blocking functions below
/// call it, so each keeps a frame of its own.
#[inline(never)]
fn recv_byte(fd: i32) -> Option<u8> {
    let mut b = 0u8;
    // SAFETY: one byte into a valid buffer.
    (unsafe { libc::read(fd, (&mut b as *mut u8).cast(), 1) } == 1).then_some(b)
}

// The blocking functions. Each is a distinct function with a body of its own (identical
// bodies could be merged into one symbol) and blocks in a call that is not its last act.

/// The ping side waits for the ball to come back: a few µs, thousands of times a second.
#[inline(never)]
fn await_return(fd: i32, b: &mut Blocked) -> bool {
    b.time(|| recv_byte(fd)) == Some(BALL)
}

/// The pong side waits for the next ball: a few µs within a burst; after a pause, until the
/// ping's pause ends too (the two pauses run side by side).
#[inline(never)]
fn await_serve(fd: i32, b: &mut Blocked) -> Option<u8> {
    b.time(|| recv_byte(fd))
}

/// Both ping-pong threads rest between bursts.
#[inline(never)]
fn pace(us: u64, b: &mut Blocked) {
    b.time(|| nanosleep_wrapper(us));
}

#[inline(never)]
fn sleep_1ms(b: &mut Blocked) {
    b.time(|| nanosleep_wrapper(1000));
}

#[inline(never)]
fn sleep_5ms(b: &mut Blocked) {
    b.time(|| nanosleep_wrapper(5000));
}

/// The `i`th of 50, 100, 150, 200, 50, … µs: around the default sampling period, on both
/// sides of it.
#[inline(never)]
fn sleep_short(i: u64, b: &mut Blocked) {
    b.time(|| nanosleep_wrapper(50 * (1 + i % 4)));
}

/// The `i`th futex wait on a word that never changes, timing out after 20 µs nine times in
/// ten and 1 ms the tenth: one site with both kinds of block. True for a long one.
#[inline(never)]
fn block_mixed(word: &std::sync::atomic::AtomicU32, i: u64, b: &mut Blocked) -> bool {
    let long = i % 10 == 9;
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: if long { 1_000_000 } else { 20_000 },
    };
    b.time(|| futex_wait(word, &ts));
    long
}

/// Sleeps as long as asked: the default timer slack (50 µs) would stretch a 50-µs sleep to
/// about 100.
fn exact_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes a value in ns and affects only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}

fn spawn_named<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> thread::JoinHandle<T> {
    thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            exact_timers();
            f()
        })
        .unwrap_or_else(|e| {
            eprintln!("error: spawning a thread: {e}");
            process::exit(1)
        })
}

/// Threads that block in known functions for known times, for S seconds (4), started by the
/// main thread (which then only waits for them):
/// - `ping` and `pong` pass a byte over two pipes, B round trips at a time (50), then both
///   `pace` for U µs (1000; 0: no pauses): each handoff blocks the waiting side a few µs
///   (`await_return`, `await_serve`), thousands of times a second;
/// - `sleeper` alternates `sleep_1ms` and `sleep_5ms`: 5 times as much time in the second;
/// - `short` cycles `sleep_short` through 50, 100, 150 and 200 µs;
/// - `mixed` waits on a futex in `block_mixed`, 20 µs nine times in ten and 1 ms the tenth.
///
/// Every worker sleeps with a timer slack of 1 ns. Prints each function's calls and blocked
/// ns (wall time around the calls) as JSON.
fn blockers(args: &Args) {
    let secs = args.num("--seconds", 4);
    let burst = args.num("--burst", 50).max(1);
    let pause_us = args.num("--pause-us", 1000);
    wait_stdin(args);
    let end = Instant::now() + Duration::from_secs(secs);

    let (a_r, a_w) = pipe();
    let (b_r, b_w) = pipe();
    let ping = spawn_named("ping", move || {
        let (mut ret, mut rest, mut rounds) = (Blocked::default(), Blocked::default(), 0u64);
        while Instant::now() < end {
            for _ in 0..burst {
                send_byte(a_w, BALL);
                if !await_return(b_r, &mut ret) {
                    process::exit(1);
                }
            }
            rounds += burst;
            if pause_us > 0 {
                send_byte(a_w, PAUSE);
                pace(pause_us, &mut rest);
            }
        }
        send_byte(a_w, STOP);
        (ret, rest, rounds)
    });
    let pong = spawn_named("pong", move || {
        let (mut serve, mut rest) = (Blocked::default(), Blocked::default());
        loop {
            match await_serve(a_r, &mut serve) {
                Some(BALL) => send_byte(b_w, BALL),
                Some(PAUSE) => pace(pause_us, &mut rest),
                _ => break,
            }
        }
        (serve, rest)
    });
    let sleeper = spawn_named("sleeper", move || {
        let (mut one, mut five) = (Blocked::default(), Blocked::default());
        while Instant::now() < end {
            sleep_1ms(&mut one);
            sleep_5ms(&mut five);
        }
        (one, five)
    });
    let short = spawn_named("short", move || {
        let mut short = Blocked::default();
        let mut i = 0u64;
        while Instant::now() < end {
            sleep_short(i, &mut short);
            i += 1;
        }
        short
    });
    let mixed = spawn_named("mixed", move || {
        let word = std::sync::atomic::AtomicU32::new(0);
        let (mut mixed, mut long) = (Blocked::default(), 0u64);
        let mut i = 0u64;
        while Instant::now() < end {
            long += u64::from(block_mixed(&word, i, &mut mixed));
            i += 1;
        }
        (mixed, long)
    });

    fn join<T>(h: thread::JoinHandle<T>) -> T {
        h.join().unwrap_or_else(|_| process::exit(1))
    }
    let (ret, ping_rest, rounds) = join(ping);
    let (serve, pong_rest) = join(pong);
    let (one, five) = join(sleeper);
    let short = join(short);
    let (mixed, mixed_long) = join(mixed);
    for fd in [a_r, a_w, b_r, b_w] {
        // SAFETY: descriptors this function opened.
        unsafe { libc::close(fd) };
    }
    let pace = Blocked {
        count: ping_rest.count + pong_rest.count,
        ns: ping_rest.ns + pong_rest.ns,
    };
    let functions = [
        ("await_return", ret),
        ("await_serve", serve),
        ("pace", pace),
        ("sleep_1ms", one),
        ("sleep_5ms", five),
        ("sleep_short", short),
        ("block_mixed", mixed),
    ]
    .iter()
    .map(|(name, b)| {
        format!(
            "\"{name}\":{{\"count\":{},\"blocked_ns\":{}}}",
            b.count, b.ns
        )
    })
    .collect::<Vec<_>>()
    .join(",");
    println!(
        "{{\"seconds\":{secs},\"round_trips\":{rounds},\"mixed_long\":{mixed_long},\"functions\":{{{functions}}}}}"
    );
}

fn main() {
    let argv: Vec<String> = env::args().skip(1).collect();
    let Some(cmd) = argv.first().cloned() else {
        usage()
    };
    let args = Args(argv);
    match cmd.as_str() {
        "known" => known(&args),
        "threads" => threads(&args),
        "storm" => storm(&args),
        "getppid-loop" => getppid_loop(&args),
        "pingpong" => pingpong_bench(&args),
        "spin" => spin(&args),
        "mix" => mix(&args),
        "stacks" => stacks(&args),
        "locks" => locks(&args),
        "blockers" => blockers(&args),
        _ => usage(),
    }
}
