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
//! switchyard-demo waits [--seconds S] [--dir DIR] [--wait-stdin]
//!                                               (a wait of every kind, each of a known amount:
//!                                                a pthread and a Rust mutex held across
//!                                                sleeps, a nice -15 hog starving a worker on
//!                                                CPU 0, fsync in DIR, an idle epoll loop;
//!                                                prints each thread's tid and measured waits)
//! switchyard-demo epoll-server [--work-us W] [--parked P] [--sleepers S]
//!                                               (a one-thread epoll server on 127.0.0.1: each
//!                                                line is answered "ok" after W µs on CPU, and
//!                                                "stats" with its own figures as JSON; P
//!                                                threads parked on a condvar and S asleep for
//!                                                an hour never switch; prints its port and
//!                                                threads' tids as a JSON line)
//! switchyard-demo requests [--seconds S] [--dir DIR] [--report FILE] [--wait-stdin]
//!                                               (a request loop with a known tail: `worker`
//!                                                calls `handle_request`, which waits now and
//!                                                then for a lock a `compactor` sleeps holding,
//!                                                for CPU 0 a `burster` spins on, or for fsync
//!                                                in DIR; prints the tids, then as JSON the
//!                                                slowest 1% and the rest, with the shares of
//!                                                their wall time spent waiting for each)
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

use switchyard_harness::otel_ctx::{self, run_delay_ns};

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
    if let Some(attrs) = args.value("--otel-context") {
        let attrs: Vec<(&str, &str)> = attrs
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .collect();
        // After a while, as a program publishes once it has started.
        thread::sleep(Duration::from_millis(args.num("--publish-after-ms", 0)));
        publish_process_context(&attrs, args.num("--otel-context-version", 2) as u32);
    }
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

/// The mutex of the `waits` pthread pair: a normal glibc mutex, which keeps its owner's tid at
/// offset 8 (`__owner`) while it is held, so a profiler can name the thread a waiter waits for.
#[unsafe(no_mangle)]
pub static mut DEMO_LOCK: libc::pthread_mutex_t = libc::PTHREAD_MUTEX_INITIALIZER;

fn gettid() -> i64 {
    // SAFETY: gettid cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

/// Pins the calling thread to one CPU; warns and goes on when it cannot (too few CPUs).
fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is the empty set, CPU_SET writes inside it, and pid 0 is the
    // calling thread.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        eprintln!(
            "warning: pinning {} to CPU {cpu}: {}",
            thread::current().name().unwrap_or("main"),
            std::io::Error::last_os_error()
        );
    }
}

fn demo_lock_unlock() {
    // SAFETY: DEMO_LOCK is initialised, lives as long as the process, and this thread holds it.
    let r = unsafe { libc::pthread_mutex_unlock(&raw mut DEMO_LOCK) };
    if r != 0 {
        eprintln!(
            "error: pthread_mutex_unlock: {}",
            std::io::Error::from_raw_os_error(r)
        );
        process::exit(1);
    }
}

/// Locks DEMO_LOCK. Not inlined, like the wrappers below: the unwinder skips the direct
/// caller of a libc function, and this is that caller, so `wait_for_lock` stays in the stack.
#[inline(never)]
fn demo_lock_lock() -> i32 {
    // SAFETY: DEMO_LOCK is initialised and lives as long as the process.
    unsafe { libc::pthread_mutex_lock(&raw mut DEMO_LOCK) }
}

/// The pthread waiter blocks here, in `pthread_mutex_lock`, while the holder sleeps with
/// DEMO_LOCK held (up to 2 ms a time).
#[inline(never)]
fn wait_for_lock(b: &mut Blocked) {
    let r = b.time(demo_lock_lock);
    if r != 0 {
        eprintln!(
            "error: pthread_mutex_lock: {}",
            std::io::Error::from_raw_os_error(r)
        );
        process::exit(1);
    }
}

/// The pthread holder sleeps 2 ms with DEMO_LOCK held: the cause of the waiter's waits.
#[inline(never)]
fn sleep_holding_lock(b: &mut Blocked) {
    b.time(|| nanosleep_wrapper(2000));
}

/// Both holders rest `us` (1 ms unless `--rest-us`) between turns, the lock released.
#[inline(never)]
fn rest_outside_lock(us: u64) {
    nanosleep_wrapper(us);
    std::hint::black_box(());
}

/// Both waiters pause 200 µs after each turn, so they come back while the holder holds it.
#[inline(never)]
fn come_back_soon() {
    nanosleep_wrapper(200);
    std::hint::black_box(());
}

/// Locks the Rust mutex (the direct caller of std's contended path, which has no frame
/// pointers).
#[inline(never)]
fn lock_rust_mutex(m: &std::sync::Mutex<u64>) -> std::sync::MutexGuard<'_, u64> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The Rust waiter blocks here, in `Mutex::lock`, while the Rust holder sleeps with it held.
#[inline(never)]
fn wait_for_rust_lock<'a>(
    m: &'a std::sync::Mutex<u64>,
    b: &mut Blocked,
) -> std::sync::MutexGuard<'a, u64> {
    b.time(|| lock_rust_mutex(m))
}

/// The Rust holder sleeps 2 ms with the mutex held, and counts its turn in the guarded value.
#[inline(never)]
fn sleep_holding_rust_lock(turns: &mut u64, b: &mut Blocked) {
    b.time(|| nanosleep_wrapper(2000));
    *turns += 1;
}

/// The hog's busy loop: real arithmetic, the clock read every 10k iterations.
#[inline(never)]
fn hog_spin(end: Instant) -> u64 {
    let mut x = 0x243f_6a88_85a3_08d3u64;
    let mut i = 0u64;
    loop {
        for _ in 0..10_000 {
            x = std::hint::black_box(x.wrapping_mul(0x5851_f42d_4c95_7f2d).wrapping_add(i));
            i += 1;
        }
        if Instant::now() >= end {
            return x;
        }
    }
}

/// The worker sleeps 300 µs between requests; its wall time here is the sleep plus the wait
/// for CPU 0 once the timer has woken it.
#[inline(never)]
fn worker_nap(b: &mut Blocked) {
    b.time(|| nanosleep_wrapper(300));
}

/// About 50 µs of CPU work per request (by the wall clock, so time lost to the hog counts).
#[inline(never)]
fn parse_request(b: &mut Blocked) -> u64 {
    b.time(|| {
        let start = Instant::now();
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        while start.elapsed() < Duration::from_micros(50) {
            for byte in 0..64u64 {
                h = (h ^ byte).wrapping_mul(0x0100_0000_01b3);
            }
            h = std::hint::black_box(h);
        }
        h
    })
}

/// 64 KiB into the file at `offset`.
#[inline(never)]
fn write_block(file: &std::fs::File, buf: &[u8], offset: u64) {
    use std::os::unix::fs::FileExt as _;
    if let Err(e) = file.write_all_at(buf, offset) {
        eprintln!("error: writing the fsync file: {e}");
        process::exit(1);
    }
}

#[inline(never)]
fn fsync_fd(fd: i32) -> i32 {
    // SAFETY: fd is an open file.
    unsafe { libc::fsync(fd) }
}

/// Waits for the disk: `fsync` of the 64 KiB just written.
#[inline(never)]
fn flush_to_disk(fd: i32, b: &mut Blocked) {
    let r = b.time(|| fsync_fd(fd));
    if r != 0 {
        eprintln!("error: fsync: {}", std::io::Error::last_os_error());
        process::exit(1);
    }
}

/// The syncer rests 2 ms between writes.
#[inline(never)]
fn between_flushes() {
    nanosleep_wrapper(2000);
    std::hint::black_box(());
}

/// An idle event loop's wait: `epoll_wait` on an eventfd nobody writes, timing out after
/// 50 ms.
#[inline(never)]
fn idle_wait(epfd: i32, b: &mut Blocked) -> i32 {
    b.time(|| epoll_wait_one(epfd, 50))
}

#[inline(never)]
fn epoll_wait_one(epfd: i32, timeout_ms: i32) -> i32 {
    let mut ev = libc::epoll_event { events: 0, u64: 0 };
    // SAFETY: room for one event.
    unsafe { libc::epoll_wait(epfd, &mut ev, 1, timeout_ms) }
}

/// A wait of every kind, each of a known amount that the threads measure themselves, for
/// S seconds (3), so a profiler's answers to "why did it wait, and who made it wait" can be
/// checked:
/// - `lock-waiter` blocks in `wait_for_lock` (`pthread_mutex_lock` of `DEMO_LOCK`) while
///   `lock-holder` sleeps 2 ms holding it in `sleep_holding_lock`, then rests 1 ms
///   (`rest_outside_lock`; `--rest-us` sets it: a holder that rests longer than it holds
///   spends most of its time away from the lock); the waiter comes back 200 µs after each
///   turn (`come_back_soon`);
/// - `rust-waiter` and `rust-holder` do the same with a `std::sync::Mutex`
///   (`wait_for_rust_lock`, `sleep_holding_rust_lock`);
/// - `hog` (nice -15 when allowed, i.e. as root) spins in `hog_spin` on CPU 0, where `worker`
///   naps 300 µs (`worker_nap`) and works 50 µs (`parse_request`) in turn: each wakeup waits
///   for CPU 0, and the worker reports its run-queue wait from its schedstat;
/// - `syncer` writes 64 KiB to `DIR/switchyard-demo-waits-<pid>.dat` (the same 1 MiB over and
///   over), waits in `flush_to_disk` (`fsync`), rests 2 ms (`between_flushes`); the file is
///   removed at the end;
/// - `event-loop` waits in `idle_wait` (`epoll_wait`, 50 ms timeout) on an eventfd nobody
///   writes.
///
/// `hog` and `worker` run on CPU 0, every other thread (the main one too) on CPU 1. Prints the
/// pid, `DEMO_LOCK`'s address, each thread's tid, and the count and wall ns of each wait as
/// JSON.
fn waits(args: &Args) {
    let secs = args.num("--seconds", 3);
    let rest_us = args.num("--rest-us", 1000);
    let dir = std::path::PathBuf::from(args.value("--dir").unwrap_or("."));
    let path = dir.join(format!("switchyard-demo-waits-{}.dat", process::id()));
    pin_to_cpu(1);
    wait_stdin(args);
    let end = Instant::now() + Duration::from_secs(secs);

    let hog = spawn_named("hog", move || {
        pin_to_cpu(0);
        let tid = gettid();
        set_thread_nice(tid, -15);
        // SAFETY: PRIO_PROCESS with a tid reads that one thread's nice value.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t) };
        (tid, nice, hog_spin(end))
    });
    // The hog is spinning on CPU 0 before the worker arrives.
    thread::sleep(Duration::from_millis(20));
    let worker = spawn_named("worker", move || {
        pin_to_cpu(0);
        let delay_start = run_delay_ns();
        let (mut naps, mut parse, mut acc) = (Blocked::default(), Blocked::default(), 0u64);
        while Instant::now() < end {
            worker_nap(&mut naps);
            acc ^= parse_request(&mut parse);
        }
        let run_delay = run_delay_ns().saturating_sub(delay_start);
        (gettid(), naps, parse, run_delay, acc)
    });

    let lock_holder = spawn_named("lock-holder", move || {
        let mut held = Blocked::default();
        while Instant::now() < end {
            if demo_lock_lock() != 0 {
                process::exit(1);
            }
            sleep_holding_lock(&mut held);
            demo_lock_unlock();
            rest_outside_lock(rest_us);
        }
        (gettid(), held)
    });
    let lock_waiter = spawn_named("lock-waiter", move || {
        let mut wait = Blocked::default();
        while Instant::now() < end {
            wait_for_lock(&mut wait);
            demo_lock_unlock();
            come_back_soon();
        }
        (gettid(), wait)
    });

    let rust_lock = std::sync::Arc::new(std::sync::Mutex::new(0u64));
    let m = rust_lock.clone();
    let rust_holder = spawn_named("rust-holder", move || {
        let mut held = Blocked::default();
        while Instant::now() < end {
            let mut turns = lock_rust_mutex(&m);
            sleep_holding_rust_lock(&mut turns, &mut held);
            drop(turns);
            rest_outside_lock(rest_us);
        }
        (gettid(), held)
    });
    let m = rust_lock;
    let rust_waiter = spawn_named("rust-waiter", move || {
        let mut wait = Blocked::default();
        while Instant::now() < end {
            drop(wait_for_rust_lock(&m, &mut wait));
            come_back_soon();
        }
        (gettid(), wait)
    });

    let syncer = spawn_named("syncer", move || {
        use std::os::fd::AsRawFd as _;
        let file = create_or_exit(&path);
        let block = vec![0x5au8; 64 * 1024];
        let (mut flush, mut i) = (Blocked::default(), 0u64);
        while Instant::now() < end {
            // The same 1 MiB over and over: a long run does not fill the disk.
            write_block(&file, &block, (i % 16) * block.len() as u64);
            flush_to_disk(file.as_raw_fd(), &mut flush);
            between_flushes();
            i += 1;
        }
        drop(file);
        remove_or_warn(&path);
        (gettid(), flush)
    });

    let event_loop = spawn_named("event-loop", move || {
        let (epfd, efd) = idle_epoll();
        let mut idle = Blocked::default();
        while Instant::now() < end {
            if idle_wait(epfd, &mut idle) > 0 {
                eprintln!("error: the idle eventfd was written");
                process::exit(1);
            }
        }
        for fd in [efd, epfd] {
            // SAFETY: descriptors this thread opened.
            unsafe { libc::close(fd) };
        }
        (gettid(), idle)
    });

    WaitThreads {
        hog,
        worker,
        lock_holder,
        lock_waiter,
        rust_holder,
        rust_waiter,
        syncer,
        event_loop,
    }
    .join_and_print(secs);
}

/// A thread's tid and one kind of wait it measured.
type TidWait = (i64, Blocked);

/// The `waits` threads, each returning its tid and what it measured.
struct WaitThreads {
    /// Its tid, its nice value and what it computed.
    hog: thread::JoinHandle<(i64, i32, u64)>,
    /// Its tid, its naps, its parses, its run-queue delay and what it computed.
    worker: thread::JoinHandle<(i64, Blocked, Blocked, u64, u64)>,
    lock_holder: thread::JoinHandle<TidWait>,
    lock_waiter: thread::JoinHandle<TidWait>,
    rust_holder: thread::JoinHandle<TidWait>,
    rust_waiter: thread::JoinHandle<TidWait>,
    syncer: thread::JoinHandle<TidWait>,
    event_loop: thread::JoinHandle<TidWait>,
}

impl WaitThreads {
    /// Waits for every thread, then prints the pid, `DEMO_LOCK`'s address, each thread's tid
    /// and the count and wall ns of each wait as JSON.
    fn join_and_print(self, secs: u64) {
        let (hog_tid, hog_nice, hog_acc) = join_or_exit(self.hog);
        let (worker_tid, naps, parse, run_delay, worker_acc) = join_or_exit(self.worker);
        let (holder_tid, held) = join_or_exit(self.lock_holder);
        let (waiter_tid, wait) = join_or_exit(self.lock_waiter);
        let (rust_holder_tid, rust_held) = join_or_exit(self.rust_holder);
        let (rust_waiter_tid, rust_wait) = join_or_exit(self.rust_waiter);
        let (syncer_tid, flush) = join_or_exit(self.syncer);
        let (event_loop_tid, idle) = join_or_exit(self.event_loop);

        let b = |b: Blocked| format!("{{\"count\":{},\"ns\":{}}}", b.count, b.ns);
        println!(
            "{{\"seconds\":{secs},\"pid\":{},\"lock_addr\":\"{:#x}\",\"hog_nice\":{hog_nice},\
             \"threads\":{{\"lock-holder\":{holder_tid},\"lock-waiter\":{waiter_tid},\"hog\":{hog_tid},\
             \"worker\":{worker_tid},\"syncer\":{syncer_tid},\"event-loop\":{event_loop_tid},\
             \"rust-holder\":{rust_holder_tid},\"rust-waiter\":{rust_waiter_tid}}},\
             \"lock_wait\":{},\"lock_held_sleeping\":{},\
             \"worker\":{{\"naps\":{},\"nap_ns\":{},\"requested_ns\":{},\"run_delay_ns\":{run_delay},\"parse_ns\":{}}},\
             \"fsync\":{},\"idle\":{},\"rust_lock_wait\":{},\"rust_lock_held_sleeping\":{},\"acc\":{}}}",
            process::id(),
            &raw const DEMO_LOCK as usize,
            b(wait),
            b(held),
            naps.count,
            naps.ns,
            naps.count * 300_000,
            parse.ns,
            b(flush),
            b(idle),
            b(rust_wait),
            b(rust_held),
            (hog_acc ^ worker_acc) & 1
        );
    }
}

/// The thread's result; exits the process if it panicked.
fn join_or_exit<T>(h: thread::JoinHandle<T>) -> T {
    h.join().unwrap_or_else(|_| process::exit(1))
}

/// Creates (or empties) the file at `path` for writing; exits the process when it cannot.
fn create_or_exit(path: &std::path::Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .unwrap_or_else(|e| {
            eprintln!("error: creating {}: {e}", path.display());
            process::exit(1)
        })
}

/// Removes the file at `path`; warns and goes on when it cannot.
fn remove_or_warn(path: &std::path::Path) {
    if let Err(e) = std::fs::remove_file(path) {
        eprintln!("warning: removing {}: {e}", path.display());
    }
}

/// An idle event loop's descriptors: an epoll instance watching an eventfd nobody writes, as
/// (epoll, eventfd); exits the process when they cannot be set up.
fn idle_epoll() -> (i32, i32) {
    // SAFETY: calls that only create descriptors.
    let (epfd, efd) = unsafe {
        (
            libc::epoll_create1(libc::EPOLL_CLOEXEC),
            libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK),
        )
    };
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: 0,
    };
    // SAFETY: two descriptors just created and a valid event.
    if epfd < 0
        || efd < 0
        || unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, efd, &mut ev) } != 0
    {
        eprintln!("error: epoll setup: {}", std::io::Error::last_os_error());
        process::exit(1);
    }
    (epfd, efd)
}

/// What the `requests` worker's requests share: the lock the compactor holds now and then, and
/// the file every 150th request persists to.
pub struct Ctx {
    table_lock: std::sync::Mutex<u64>,
    file: std::fs::File,
}

/// What `handle_request` timed itself: its wait for `table_lock` and its `persist_request`
/// (0 when the request persisted nothing), ns. `repr(C)`, so the function keeps a C signature.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct RequestTimes {
    pub lock_ns: u64,
    pub io_ns: u64,
}

/// One request as the worker saw it from outside `handle_request`: its wall time, and the
/// parts of it spent waiting for a CPU (the growth of the worker's run-queue delay across the
/// call), blocked on `table_lock` and blocked in `persist_request`, ns. The three are
/// disjoint: a wait for a CPU after the lock or the disk woke the worker counts as CPU wait
/// only.
#[derive(Clone, Copy)]
struct Request {
    wall_ns: u64,
    lock_ns: u64,
    cpu_wait_ns: u64,
    io_ns: u64,
    /// The thread's CPU time across the request.
    cpu_ns: u64,
    /// When it began, Unix time ns.
    start_unix_ns: u64,
}

/// One request of the `requests` loop, with a stable, unmangled name for a span probe: takes
/// `table_lock` (`lock_table`, timed) for a few µs, computes 200 µs of CPU
/// (`compute_response`), and every 150th request (i % 150 == 149) writes and syncs 4 KiB
/// (`persist_request`, timed). Returns the two waits it timed, each less the run-queue wait
/// inside it (`blocked_ns`), the I/O wait also less the thread's CPU time inside it.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn handle_request(ctx: &Ctx, i: u64) -> RequestTimes {
    let delay = run_delay_ns();
    let t = Instant::now();
    let mut rows = lock_table(&ctx.table_lock);
    let lock_ns = blocked_ns(t, delay);
    // The critical section: a few µs.
    *rows = std::hint::black_box(burn(200) ^ rows.wrapping_add(1));
    drop(rows);
    std::hint::black_box(compute_response(i, 200_000));
    // The I/O wait is the time off CPU in it: the file system's own work on the thread's
    // CPU (copying, checksums) is running.
    let io_ns = if i % 150 == 149 {
        let delay = run_delay_ns();
        let cpu = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
        let t = Instant::now();
        persist_request(&ctx.file, i);
        let ran = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).saturating_sub(cpu);
        blocked_ns(t, delay).saturating_sub(ran)
    } else {
        0
    };
    RequestTimes { lock_ns, io_ns }
}

/// The wall time since `t`, less the time the thread waited for a CPU meanwhile (`delay` was
/// its run-queue delay at `t`): the time it was blocked, once woken not counting its wait on a
/// run queue, which the worker counts as CPU wait. Reads the delay again only after a wait
/// long enough to hold one worth counting.
fn blocked_ns(t: Instant, delay: u64) -> u64 {
    let wall = t.elapsed().as_nanos() as u64;
    if wall < 20_000 {
        return wall;
    }
    wall.saturating_sub(run_delay_ns().saturating_sub(delay))
}

/// Locks `table_lock` (the direct caller of std's contended path, which has no frame
/// pointers): requests wait here while the compactor sleeps holding it.
#[inline(never)]
fn lock_table(m: &std::sync::Mutex<u64>) -> std::sync::MutexGuard<'_, u64> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A request's work: arithmetic until `cpu_ns` of the thread's own CPU time have passed, so
/// time lost to preemption stretches the request instead of shortening the work.
#[inline(never)]
fn compute_response(i: u64, cpu_ns: u64) -> u64 {
    let start = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ i;
    while clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) - start < cpu_ns {
        for byte in 0..64u64 {
            h = (h ^ byte).wrapping_mul(0x0100_0000_01b3);
        }
        h = std::hint::black_box(h);
    }
    h
}

/// Writes 4 KiB (the same 64 KiB over and over) and waits for the disk (`fsync`).
#[inline(never)]
fn persist_request(file: &std::fs::File, i: u64) {
    use std::os::{fd::AsRawFd as _, unix::fs::FileExt as _};
    let block = [(i & 0xff) as u8; 4096];
    if let Err(e) = file.write_all_at(&block, (i / 150 % 16) * 4096) {
        eprintln!("error: writing the requests file: {e}");
        process::exit(1);
    }
    if fsync_fd(file.as_raw_fd()) != 0 {
        eprintln!("error: fsync: {}", std::io::Error::last_os_error());
        process::exit(1);
    }
}

/// The worker sleeps 300 µs between requests, so it is not always on CPU.
#[inline(never)]
fn between_requests() {
    nanosleep_wrapper(300);
    std::hint::black_box(());
}

/// The compactor rests 400 ms between compactions, the lock released.
#[inline(never)]
fn compactor_idle() {
    nanosleep_wrapper(400_000);
    std::hint::black_box(());
}

/// The compactor sleeps 8 ms holding `table_lock`: the cause of the requests' lock waits.
#[inline(never)]
fn compact_table(rows: &mut u64) {
    nanosleep_wrapper(8000);
    *rows = std::hint::black_box(rows.wrapping_add(1));
}

/// The burster sleeps 50 ms between bursts.
#[inline(never)]
fn burster_rest() {
    nanosleep_wrapper(50_000);
    std::hint::black_box(());
}

/// A burst: arithmetic on CPU 0 until `cpu_ns` of the thread's own CPU time have passed; the
/// worker, at a lower priority on the same CPU, waits for it.
#[inline(never)]
fn burst(cpu_ns: u64) -> u64 {
    let start = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    let mut x = 0x243f_6a88_85a3_08d3u64;
    let mut i = 0u64;
    while clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) - start < cpu_ns {
        for _ in 0..1000 {
            x = std::hint::black_box(x.wrapping_mul(0x5851_f42d_4c95_7f2d).wrapping_add(i));
            i += 1;
        }
    }
    x
}

/// Sets the calling thread's nice value; warns and goes on when it cannot.
fn set_own_nice(nice: i32) {
    set_thread_nice(gettid(), nice);
}

/// Sets the nice value of thread `tid`, the calling one; warns (naming the calling thread)
/// and goes on when it cannot.
fn set_thread_nice(tid: i64, nice: i32) {
    // SAFETY: PRIO_PROCESS with a tid sets that one thread's nice value.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) } != 0 {
        let error = std::io::Error::last_os_error();
        eprintln!(
            "warning: {}: setpriority {nice}: {error} (not root?); it runs at nice 0",
            thread::current().name().unwrap_or("main")
        );
    }
}

/// The count, wall time and wait shares of one group of requests, as JSON.
fn request_group(reqs: &[Request]) -> String {
    let sum = |f: fn(&Request) -> u64| reqs.iter().map(f).sum::<u64>();
    let wall = sum(|r| r.wall_ns);
    let share = |ns: u64| {
        if wall == 0 {
            0.0
        } else {
            ns as f64 / wall as f64
        }
    };
    format!(
        "{{\"count\":{},\"wall_s\":{:.6},\"lock_share\":{:.4},\"cpu_share\":{:.4},\"io_share\":{:.4}}}",
        reqs.len(),
        wall as f64 / 1e9,
        share(sum(|r| r.lock_ns)),
        share(sum(|r| r.cpu_wait_ns)),
        share(sum(|r| r.io_ns))
    )
}

/// A request loop with a known tail, for S seconds (4), that times the causes of its own slow
/// requests, as ground truth for a span probe on `handle_request`:
/// - `worker` (CPU 0, nice +5) calls `handle_request` in a loop and sleeps 300 µs between
///   requests (`between_requests`); around each call it reads the clock and its run-queue
///   delay (schedstat), and the request returns its own lock and I/O waits;
/// - `compactor` rests 400 ms (`compactor_idle`), then sleeps 8 ms holding `table_lock`
///   (`compact_table`): the request that comes meanwhile waits in `lock_table`;
/// - `burster` (CPU 0, nice -5 when allowed) rests 50 ms (`burster_rest`), then spins 6 ms of
///   CPU (`burst`): a request it preempts waits for CPU 0 (about one 1.4-ms slice on a 6.x
///   kernel with 2 CPUs);
/// - every 150th request writes and syncs 4 KiB of `DIR/switchyard-demo-requests-<pid>.dat`
///   (`persist_request`; removed at the end).
///
/// `compactor` and the main thread run on CPU 1. Prints the threads' tids as a JSON line once
/// they are started, waits for stdin if asked, runs the load, then prints (and writes to the
/// `--report` file) one JSON line: the p50, p99 and max wall ns of all requests and, for the
/// slowest 1% (at least one) and the rest, their count, wall seconds, and the shares of their
/// wall time spent waiting for the lock, a CPU and I/O (disjoint; see `Request`).
///
/// The periods are tuned so that, on a quiet machine, the slowest 1% spend about half their
/// time blocked on the lock (one request per compaction), a third waiting for a CPU and a
/// tenth in `fsync`; the rest of the requests hardly wait.
fn requests(args: &Args) {
    use std::sync::{
        Arc, Barrier, Mutex,
        atomic::{AtomicBool, Ordering},
        mpsc,
    };
    let secs = args.num("--seconds", 4);
    let dir = args
        .value("--dir")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(env::temp_dir);
    let report = args.value("--report").map(std::path::PathBuf::from);
    let path = dir.join(format!("switchyard-demo-requests-{}.dat", process::id()));
    let file = create_or_exit(&path);
    let ctx = Arc::new(Ctx {
        table_lock: Mutex::new(0),
        file,
    });
    pin_to_cpu(1);
    let stop = Arc::new(AtomicBool::new(false));
    // The three threads and this one: the load starts when all are ready and stdin said so.
    let start = Arc::new(Barrier::new(4));
    let (tids_tx, tids_rx) = mpsc::channel();

    let otel_file = args
        .value("--otel-thread-ctx")
        .map(std::path::PathBuf::from);
    let otel = otel_file.is_some();
    let (c, st, go, tx) = (ctx.clone(), stop.clone(), start.clone(), tids_tx.clone());
    let worker = spawn_named("worker", move || {
        pin_to_cpu(0);
        set_own_nice(5);
        let _ = tx.send(("worker", gettid()));
        // About 1800 requests a second; more only grows the vector between requests.
        let mut reqs = Vec::with_capacity(secs.min(60) as usize * 2000);
        go.wait();
        let mut i = 0u64;
        while !st.load(Ordering::Relaxed) {
            // Each request a span of its own trace, in the thread's OpenTelemetry context
            // (`--otel-thread-ctx`) while it is served. The request's clocks run around the
            // span, as a server's do (`otel_ctx::Spans`): a wait inside the span, however
            // close to its edges, is inside the request's own figures.
            let start_unix_ns = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            let clocks = otel_ctx::Clocks::start();
            if otel {
                otel_ctx::attach(
                    otel_ctx::trace_id(process::id().into(), i),
                    otel_ctx::span_id(i),
                );
            }
            let times = handle_request(&c, i);
            if otel {
                otel_ctx::detach();
            }
            let otel_ctx::Own {
                wall_ns,
                cpu_ns,
                cpu_wait_ns,
            } = clocks.stop();
            reqs.push(Request {
                wall_ns,
                lock_ns: times.lock_ns,
                cpu_wait_ns,
                io_ns: times.io_ns,
                cpu_ns,
                start_unix_ns,
            });
            i += 1;
            between_requests();
        }
        reqs
    });
    let (c, st, go, tx) = (ctx.clone(), stop.clone(), start.clone(), tids_tx.clone());
    let compactor = spawn_named("compactor", move || {
        let _ = tx.send(("compactor", gettid()));
        go.wait();
        loop {
            compactor_idle();
            if st.load(Ordering::Relaxed) {
                break;
            }
            let mut rows = lock_table(&c.table_lock);
            compact_table(&mut rows);
        }
    });
    let (st, go, tx) = (stop.clone(), start.clone(), tids_tx);
    let burster = spawn_named("burster", move || {
        pin_to_cpu(0);
        set_own_nice(-5);
        let _ = tx.send(("burster", gettid()));
        go.wait();
        let mut acc = 0u64;
        loop {
            burster_rest();
            if st.load(Ordering::Relaxed) {
                break acc;
            }
            acc ^= burst(6_000_000);
        }
    });

    let tids = announce_tids(&tids_rx);
    wait_stdin(args);
    start.wait();
    thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);

    let reqs = join_or_exit(worker);
    join_or_exit(compactor);
    std::hint::black_box(join_or_exit(burster));
    drop(ctx);
    remove_or_warn(&path);

    if let Some(f) = otel_file {
        write_own_spans(&f, &reqs);
        if let Some(url) = args.value("--otlp-traces") {
            export_request_spans(url, &reqs);
        }
    }
    print_request_summary(reqs, &tids, report);
}

/// Reads the three `requests` threads' tids from `tids` and prints them as a JSON line, at
/// once; returns them as a JSON object.
fn announce_tids(tids: &std::sync::mpsc::Receiver<(&str, i64)>) -> String {
    let (mut worker_tid, mut compactor_tid, mut burster_tid) = (0, 0, 0);
    for (name, tid) in tids.iter().take(3) {
        match name {
            "worker" => worker_tid = tid,
            "compactor" => compactor_tid = tid,
            _ => burster_tid = tid,
        }
    }
    let tids = format!(
        "{{\"worker\":{worker_tid},\"compactor\":{compactor_tid},\"burster\":{burster_tid}}}"
    );
    println!("{{\"tids\":{tids}}}");
    let _ = std::io::stdout().flush();
    tids
}

/// Writes every request as it measured itself, by its span id, to `file`: what a profiler
/// reading the thread context must find. Exits the process when it cannot.
fn write_own_spans(file: &std::path::Path, reqs: &[Request]) {
    let lines: String = reqs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            format!(
                "{} {} {} {} {} {}\n",
                otel_ctx::hex(&otel_ctx::span_id(i as u64)),
                r.wall_ns,
                r.lock_ns,
                r.cpu_wait_ns,
                r.io_ns,
                r.cpu_ns
            )
        })
        .collect();
    if let Err(e) = std::fs::write(file, lines) {
        eprintln!("error: writing {}: {e}", file.display());
        process::exit(1);
    }
}

/// Prints (and writes to `report`, if given) one JSON line: the p50, p99 and max wall ns of
/// `reqs`, the slowest 1% (at least one) and the rest as [`request_group`]s, and the `tids`.
fn print_request_summary(mut reqs: Vec<Request>, tids: &str, report: Option<std::path::PathBuf>) {
    reqs.sort_by_key(|r| r.wall_ns);
    let n = reqs.len();
    // Nearest rank.
    let pct = |p: usize| {
        reqs.get((n * p).div_ceil(100).max(1) - 1)
            .map_or(0, |r| r.wall_ns)
    };
    let (typical, slow) = reqs.split_at(n - n.div_ceil(100).max(1).min(n));
    let line = format!(
        "{{\"requests\":{n},\"p50_ns\":{},\"p99_ns\":{},\"max_ns\":{},\"slow\":{},\"typical\":{},\"tids\":{tids}}}",
        pct(50),
        pct(99),
        reqs.last().map_or(0, |r| r.wall_ns),
        request_group(slow),
        request_group(typical)
    );
    println!("{line}");
    if let Some(report) = report
        && let Err(e) = std::fs::write(&report, format!("{line}\n"))
    {
        eprintln!("error: writing {}: {e}", report.display());
        process::exit(1);
    }
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
        "waits" => waits(&args),
        "epoll-server" => epoll_server(&args),
        "requests" => requests(&args),
        _ => usage(),
    }
}

/// The requests as OTLP traces (one span each, of its own trace: the ids its thread context
/// carried), posted as OTLP/JSON to a Collector's HTTP endpoint (`http://HOST:PORT`): what an
/// instrumented service exports, for a profile's links to join.
fn export_request_spans(url: &str, reqs: &[Request]) {
    let Some(addr) = url.strip_prefix("http://").map(|a| a.trim_end_matches('/')) else {
        eprintln!("error: --otlp-traces takes http://HOST:PORT");
        process::exit(2);
    };
    let spans: Vec<String> = reqs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            format!(
                "{{\"traceId\":\"{}\",\"spanId\":\"{}\",\"name\":\"handle_request\",\"kind\":2,\"startTimeUnixNano\":\"{}\",\"endTimeUnixNano\":\"{}\"}}",
                otel_ctx::hex(&otel_ctx::trace_id(process::id().into(), i as u64)),
                otel_ctx::hex(&otel_ctx::span_id(i as u64)),
                r.start_unix_ns,
                r.start_unix_ns + r.wall_ns
            )
        })
        .collect();
    let body = format!(
        "{{\"resourceSpans\":[{{\"resource\":{{\"attributes\":[{{\"key\":\"service.name\",\"value\":{{\"stringValue\":\"switchyard-demo\"}}}}]}},\"scopeSpans\":[{{\"scope\":{{\"name\":\"switchyard-demo\"}},\"spans\":[{}]}}]}}]}}",
        spans.join(",")
    );
    let sent = std::net::TcpStream::connect(addr).and_then(|mut s| {
        write!(
            s,
            "POST /v1/traces HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
        let mut answer = String::new();
        s.read_to_string(&mut answer)?;
        Ok(answer)
    });
    match sent {
        Ok(a) if a.starts_with("HTTP/1.1 200") => {}
        Ok(a) => {
            eprintln!(
                "error: the Collector answered {}",
                a.lines().next().unwrap_or("")
            );
            process::exit(1);
        }
        Err(e) => {
            eprintln!("error: exporting the spans to {addr}: {e}");
            process::exit(1);
        }
    }
}

/// Publishes this process's OpenTelemetry context as OTEP 4719 has it, a reference writer: a
/// memfd named `OTEL_CTX` mapped privately (an anonymous mapping where memfd is refused), not
/// inherited by a fork, holding a 32-byte header (`OTEL_CTX`, version 2, the payload's size,
/// the CLOCK_BOOTTIME publication time written last, the payload's address) and, after it,
/// the payload: a `ProcessContext` message whose resource holds `attributes` as strings; then
/// the mapping named by prctl. The protobuf is written by hand: three nested messages.
/// `version` is 2, the format's, unless a test wants one a reader must refuse.
fn publish_process_context(attributes: &[(&str, &str)], version: u32) {
    fn varint(out: &mut Vec<u8>, mut n: usize) {
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }
    // Field `tag` (length-delimited) holding `body`.
    fn field(out: &mut Vec<u8>, tag: u8, body: &[u8]) {
        out.push((tag << 3) | 2);
        varint(out, body.len());
        out.extend_from_slice(body);
    }
    let mut resource = Vec::new();
    for (k, v) in attributes {
        let mut any = Vec::new();
        field(&mut any, 1, v.as_bytes()); // AnyValue.string_value
        let mut kv = Vec::new();
        field(&mut kv, 1, k.as_bytes()); // KeyValue.key
        field(&mut kv, 2, &any); // KeyValue.value
        field(&mut resource, 1, &kv); // Resource.attributes
    }
    let mut payload = Vec::new();
    field(&mut payload, 1, &resource); // ProcessContext.resource
    let size = 4096usize.max(32 + payload.len()).next_multiple_of(4096);
    let name = c"OTEL_CTX";
    // SAFETY: plain system calls on a mapping made here and never unmapped; the header is
    // written in place, its time last, after a fence.
    unsafe {
        const MFD_NOEXEC_SEAL: libc::c_uint = 8;
        let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
        let mut fd = libc::memfd_create(name.as_ptr(), flags | MFD_NOEXEC_SEAL);
        if fd < 0 {
            fd = libc::memfd_create(name.as_ptr(), flags);
        }
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let p = if fd >= 0 && libc::ftruncate(fd, size as libc::off_t) == 0 {
            let p = libc::mmap(std::ptr::null_mut(), size, prot, libc::MAP_PRIVATE, fd, 0);
            libc::close(fd);
            p
        } else {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            eprintln!(
                "error: mapping the process context: {}",
                std::io::Error::last_os_error()
            );
            process::exit(1);
        }
        libc::madvise(p, size, libc::MADV_DONTFORK);
        let base = p as *mut u8;
        std::ptr::copy_nonoverlapping(payload.as_ptr(), base.add(32), payload.len());
        std::ptr::copy_nonoverlapping(b"OTEL_CTX".as_ptr(), base, 8);
        (base.add(8) as *mut u32).write(version);
        (base.add(12) as *mut u32).write(payload.len() as u32);
        (base.add(24) as *mut u64).write(base.add(32) as u64);
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        (base.add(16) as *mut u64).write_volatile(clock_ns(libc::CLOCK_BOOTTIME).max(1));
        // PR_SET_VMA, PR_SET_VMA_ANON_NAME: named where the kernel allows it.
        libc::prctl(
            0x5356_4d41,
            0,
            p as libc::c_ulong,
            size as libc::c_ulong,
            name.as_ptr(),
        );
    }
}

/// CLOCK_MONOTONIC (the recorder's clock) or CLOCK_THREAD_CPUTIME_ID, ns.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A one-thread epoll server, idle in `epoll_wait` (no timeout) until a client writes. It
/// keeps its own figures: the time inside `epoll_wait` (with when the last one returned) and
/// its CPU time, answered to a `stats` line, so a test can tell its idle and busy time over
/// any window. Threads that never switch (parked on a condvar nobody signals, or asleep for
/// an hour) can be added beside it.
fn epoll_server(args: &Args) {
    use std::{
        collections::HashMap,
        net::TcpListener,
        os::fd::AsRawFd,
        sync::{Arc, Condvar, Mutex, mpsc},
    };
    let work = Duration::from_micros(args.num("--work-us", 200));
    let (tx, rx) = mpsc::channel();
    let mut never = Vec::new();
    for i in 0..args.num("--parked", 0) + args.num("--sleepers", 0) {
        let parked = i < args.num("--parked", 0);
        let tx = tx.clone();
        never.push(thread::spawn(move || {
            tx.send((parked, gettid())).unwrap();
            if parked {
                let pair = Arc::new((Mutex::new(()), Condvar::new()));
                let mut g = pair.0.lock().unwrap();
                loop {
                    g = pair.1.wait(g).unwrap();
                }
            } else {
                thread::sleep(Duration::from_secs(3600));
            }
        }));
    }
    drop(tx);
    let (mut parked, mut sleepers) = (Vec::new(), Vec::new());
    // Each sends once, then keeps its sender while it waits.
    for (p, tid) in rx.iter().take(never.len()) {
        if p {
            parked.push(tid)
        } else {
            sleepers.push(tid)
        }
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let lfd = listener.as_raw_fd();
    // SAFETY: plain syscalls on our own descriptors.
    let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    let add = |fd: i32| {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: as above.
        unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) };
    };
    add(lfd);
    println!(
        "{{\"port\":{},\"pid\":{},\"tid\":{},\"parked\":{parked:?},\"sleepers\":{sleepers:?}}}",
        listener.local_addr().unwrap().port(),
        process::id(),
        gettid()
    );
    let _ = std::io::stdout().flush();
    let mut conns: HashMap<i32, (std::net::TcpStream, Vec<u8>)> = HashMap::new();
    let (mut epoll_ns, mut requests) = (0u64, 0u64);
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
    loop {
        let t0 = clock_ns(libc::CLOCK_MONOTONIC);
        // SAFETY: a valid buffer of 64 events.
        let n = unsafe { libc::epoll_wait(epfd, events.as_mut_ptr(), 64, -1) };
        let wake_ns = clock_ns(libc::CLOCK_MONOTONIC);
        epoll_ns += wake_ns - t0;
        for ev in events.iter().take(n.max(0) as usize) {
            let fd = ev.u64 as i32;
            if fd == lfd {
                while let Ok((c, _)) = listener.accept() {
                    c.set_nonblocking(true).unwrap();
                    add(c.as_raw_fd());
                    conns.insert(c.as_raw_fd(), (c, Vec::new()));
                }
                continue;
            }
            let Some((c, buf)) = conns.get_mut(&fd) else {
                continue;
            };
            let mut chunk = [0u8; 4096];
            let closed = loop {
                match c.read(&mut chunk) {
                    Ok(0) => break true,
                    Ok(k) => buf.extend_from_slice(&chunk[..k]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break false,
                    Err(_) => break true,
                }
            };
            while let Some(end) = buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = buf.drain(..=end).collect();
                let reply = if line.starts_with(b"stats") {
                    format!(
                        "{{\"epoll_ns\":{epoll_ns},\"wake_ns\":{wake_ns},\"cpu_ns\":{},\"requests\":{requests}}}\n",
                        clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
                    )
                } else {
                    requests += 1;
                    let t = Instant::now();
                    while t.elapsed() < work {
                        std::hint::spin_loop();
                    }
                    "ok\n".to_string()
                };
                let _ = c.write_all(reply.as_bytes());
            }
            if closed {
                conns.remove(&fd);
            }
        }
    }
}
