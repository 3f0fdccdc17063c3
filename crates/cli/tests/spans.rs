//! `--span` harms nothing: a span on Go code (keyed by goroutine, with no return probe, which
//! would crash Go), C, Rust, Python, or a C library a Go program calls back through leaves the
//! program's output and exit code exactly as they are untraced, while counting every call.
//! Needs root, gcc, Go and /usr/bin/python3.11.

mod common;

use std::{
    io::{BufRead as _, BufReader, Read as _},
    path::Path,
    process::{Command, Output, Stdio},
};

use common::*;

/// A function called in a loop, each call on a new goroutine whose stack grows (and is copied)
/// while `work` is in flight: a return probe on `work` makes the runtime die with "unknown
/// caller pc". Prints `start`, then with a number N, N passes and their sum; with `stdin`,
/// `ready` after one pass, passes until stdin closes, then the sum of one.
const GO_PROGRAM: &str = r#"package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
)

// work recurses n deep with a 512-byte frame: n(n+1)/2.
//
//go:noinline
func work(n int) int {
	var pad [64]int
	pad[n%64] = n
	if n == 0 {
		return 0
	}
	return work(n-1) + pad[n%64]
}

// pass calls work(0..199), each on a goroutine of its own, checks and sums the results.
func pass() int {
	sum := 0
	for n := 0; n < 200; n++ {
		done := make(chan int)
		go func() { done <- work(n) }()
		got := <-done
		if got != n*(n+1)/2 {
			fmt.Printf("work(%d) = %d, want %d\n", n, got, n*(n+1)/2)
			os.Exit(1)
		}
		sum += got
	}
	return sum
}

func main() {
	fmt.Println("start")
	if os.Args[1] == "stdin" {
		stop := make(chan struct{})
		go func() { io.Copy(io.Discard, os.Stdin); close(stop) }()
		sum := pass()
		fmt.Println("ready")
		for {
			select {
			case <-stop:
				fmt.Printf("sum %d\n", sum)
				return
			default:
				pass()
			}
		}
	}
	passes, _ := strconv.Atoi(os.Args[1])
	sum := 0
	for i := 0; i < passes; i++ {
		sum += pass()
	}
	fmt.Printf("passes %d sum %d\n", passes, sum)
}
"#;

/// `work` called N times; prints the sum and exits 3, so that the exit code says something.
const C_PROGRAM: &str = r#"#include <stdio.h>
#include <stdlib.h>

__attribute__((noipa)) long work(long i) { return i * i % 1009 + 1; }

int main(int argc, char **argv) {
    long n = atol(argv[1]), sum = 0;
    for (long i = 0; i < n; i++)
        sum += work(i);
    printf("calls %ld sum %ld\n", n, sum);
    return 3;
}
"#;

/// A C library whose `cwork` calls back into Go: the Go side grows its goroutine's stack while
/// `cwork`'s frame, with its return address replaced, waits on the thread's own stack.
const CGO_LIBRARY: &str = r#"extern long GoDeep(long);

__attribute__((noipa)) long cwork(long n) { return GoDeep(n) + 1; }
"#;

const CGO_PROGRAM: &str = r#"package main

/*
#cgo LDFLAGS: -L${SRCDIR}/../lib -lcwork -Wl,-rpath,${SRCDIR}/../lib
long cwork(long n);
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
)

//go:noinline
func deep(n int) int {
	var pad [64]int
	pad[n%64] = n
	if n == 0 {
		return 0
	}
	return deep(n-1) + pad[n%64]
}

//export GoDeep
func GoDeep(n C.long) C.long { return C.long(deep(int(n))) }

func main() {
	calls, _ := strconv.Atoi(os.Args[1])
	sum := 0
	for i := 0; i < calls; i++ {
		done := make(chan int)
		go func() { done <- int(C.cwork(C.long(i % 200))) }()
		sum += <-done
	}
	fmt.Printf("calls %d sum %d\n", calls, sum)
}
"#;

/// The interpreter `nm -D` shows exporting `_PyLong_GCD` and `PyObject_GetAttr`.
const PYTHON: &str = "/usr/bin/python3.11";

/// `math.gcd(a, b)` with a ≠ 1 calls `_PyLong_GCD` once; exits 4.
const PYTHON_SCRIPT: &str = r#"import math
import sys

total = 0
for i in range(2, 2002):
    total += math.gcd(i * 6, 4 * i + 10)
print("gcd sum", total)
sys.exit(4)
"#;

/// `gcc ARGS`, or a skip.
fn gcc(dir: &Path, args: &[&str]) -> bool {
    match Command::new("gcc").args(args).current_dir(dir).output() {
        Ok(o) if o.status.success() => true,
        other => {
            skip(&format!("cannot compile with gcc {args:?}: {other:?}"));
            false
        }
    }
}

/// `command` run as it is, untraced.
fn untraced(command: &[&std::ffi::OsStr]) -> Output {
    Command::new(command[0])
        .args(&command[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {:?}: {e}", command[0]))
}

/// `switchyard record FLAGS -o dir/run.json -- command`: what it printed (the target's stdout
/// is switchyard's), and the run file when one was written.
fn record(
    dir: &Path,
    flags: &[&str],
    command: &[&std::ffi::OsStr],
) -> (Output, Option<serde_json::Value>) {
    let run_path = dir.join("run.json");
    let _ = std::fs::remove_file(&run_path);
    let out = Command::new(switchyard())
        .arg("record")
        .args(flags)
        .arg("-o")
        .arg(&run_path)
        .arg("--")
        .args(command)
        .stdin(Stdio::null())
        .output()
        .expect("running switchyard");
    let run = run_path.exists().then(|| load_run(&run_path));
    (out, run)
}

/// The recording succeeded, the target printed what it prints untraced and exited as it
/// does untraced; returns the run.
#[track_caller]
fn assert_unchanged(
    what: &str,
    untraced: &Output,
    traced: &Output,
    run: Option<serde_json::Value>,
) -> serde_json::Value {
    let (stdout, stderr) = text(traced);
    assert_eq!(
        traced.status.code(),
        Some(0),
        "{what}: switchyard failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let run = run.unwrap_or_else(|| panic!("{what}: no run file\n{stderr}"));
    assert_eq!(
        stdout,
        text(untraced).0,
        "{what}: the target's output changed under the span\n{stderr}"
    );
    let end = &run["meta"]["end"];
    assert_eq!(end["kind"], "target_exited", "{what}: {end}");
    assert_eq!(
        (end["code"].as_i64(), end["signal"].as_i64()),
        (untraced.status.code().map(i64::from), None),
        "{what}: the target's exit changed under the span\n{stderr}"
    );
    run
}

/// The calls counted for the span labelled `label`.
#[track_caller]
fn span_calls(run: &serde_json::Value, label: &str) -> u64 {
    let spans = run["locks"]["spans"].as_array().expect("locks.spans");
    let span = spans
        .iter()
        .find(|s| s["label"] == label)
        .unwrap_or_else(|| panic!("no span {label} in {spans:?}"));
    span["stats"]["count"].as_u64().unwrap()
}

/// A Go function is a span keyed by its goroutine: entered past its stack check, returned
/// from at each RET, never with a return probe. `work` recurses n deep on a goroutine whose
/// stack grows and is copied meanwhile: each outermost call is one instance, the recursion
/// only counted as nested, and the program's output and exit are those it has untraced.
#[test]
fn a_span_on_a_go_function_counts_every_goroutines_call_and_changes_nothing() {
    if !privileged("a_span_on_a_go_function_counts_every_goroutines_call_and_changes_nothing") {
        return;
    }
    let dir = tempdir("spans-go");
    let Some(prog) = go_build(&dir, "spango", GO_PROGRAM) else {
        return;
    };
    let command = [prog.as_os_str(), "5".as_ref()];
    let plain = untraced(&command);
    assert!(plain.status.success(), "{:?}", plain);
    assert_eq!(text(&plain).0, "start\npasses 5 sum 6666500\n");

    let (out, run) = record(&dir, &["--span", "main.work"], &command);
    let run = assert_unchanged("Go", &plain, &out, run);
    // 5 passes of 200 goroutines, each calling work(n) once from outside.
    assert_eq!(span_calls(&run, "main.work"), 1000);
    let span = &run["locks"]["spans"][0];
    let anatomy = &span["anatomy"];
    assert_eq!(anatomy["count"], 1000, "{anatomy}");
    // work(n) recurses n times: Σ n for n < 200, each pass.
    assert_eq!(anatomy["nested"], 5 * 19_900, "{anatomy}");
    assert_eq!(anatomy["open_at_start"], 0, "{anatomy}");
    assert!(
        !anatomy["instances"].as_array().unwrap().is_empty(),
        "no instance kept: {anatomy}"
    );
}

/// A Go program already running, recorded with a span by pid: it goes on untouched, and its
/// answer is the one it gives untraced.
#[test]
fn a_span_on_a_running_go_program_leaves_it_running_and_right() {
    if !privileged("a_span_on_a_running_go_program_leaves_it_running_and_right") {
        return;
    }
    let dir = tempdir("spans-go-pid");
    let Some(prog) = go_build(&dir, "spango", GO_PROGRAM) else {
        return;
    };
    let mut target = Reaped(
        Command::new(&prog)
            .arg("stdin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stdout = BufReader::new(target.stdout.take().unwrap());
    let mut printed = String::new();
    // `ready`: a first pass is done, and the program goes on calling work until stdin closes.
    while !printed.ends_with("ready\n") {
        let before = printed.len();
        stdout.read_line(&mut printed).unwrap();
        assert_ne!(
            printed.len(),
            before,
            "the program ended early: {printed:?}"
        );
    }
    let pid = target.id().to_string();
    let run_path = dir.join("run.json");
    let out = Command::new(switchyard())
        .args(["record", "--span", "main.work", "--duration", "2s"])
        .args(["--pid", &pid, "-o"])
        .arg(&run_path)
        .output()
        .unwrap();
    let (o, e) = text(&out);
    assert!(out.status.success(), "{o}\n{e}");
    let run = load_run(&run_path);
    assert!(
        span_calls(&run, "main.work") > 0,
        "{}",
        run["locks"]["spans"]
    );
    assert!(
        target.try_wait().unwrap().is_none(),
        "the program is gone after the recording: {:?}",
        target.try_wait()
    );
    drop(target.stdin.take());
    stdout.read_to_string(&mut printed).unwrap();
    let status = target.wait().unwrap();
    assert!(status.success(), "{status}: {printed}");
    assert_eq!(printed, "start\nready\nsum 1333300\n");
}

#[test]
fn a_span_on_c_counts_every_call_and_changes_nothing() {
    if !privileged("a_span_on_c_counts_every_call_and_changes_nothing") {
        return;
    }
    let dir = tempdir("spans-c");
    std::fs::write(dir.join("spanc.c"), C_PROGRAM).unwrap();
    if !gcc(&dir, &["-O2", "-o", "spanc", "spanc.c"]) {
        return;
    }
    let prog = dir.join("spanc");
    let n = 20_000u64;
    let count = n.to_string();
    let command = [prog.as_os_str(), count.as_ref()];
    let plain = untraced(&command);
    assert_eq!(plain.status.code(), Some(3), "{plain:?}");
    let (out, run) = record(&dir, &["--uprobe-span", "work"], &command);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let run = assert_unchanged("C", &plain, &out, run);
    assert_eq!(span_calls(&run, "work"), n);
    // What the span's probes cost the target: every call, at the breakpoints' costs timed
    // as the recording started, in the run and in the summary.
    let costs = &run["meta"]["probe_costs"];
    let traps = &costs["traps"];
    for kind in [
        "emulated_ns",
        "stepped_ns",
        "emulated_with_return_ns",
        "stepped_with_return_ns",
    ] {
        assert!(traps[kind].as_f64().unwrap() > 0.0, "{kind}: {traps}");
    }
    assert_eq!(traps["calls"], 1000);
    let probes = costs["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 1, "{costs}");
    let p = &probes[0];
    assert_eq!(
        (p["span"].as_str(), p["symbol"].as_str()),
        (Some("work"), Some("work"))
    );
    assert_eq!(p["calls"].as_u64(), Some(n), "{p}");
    let kind = match (p["shared_return"].as_bool(), p["emulated"].as_bool()) {
        (Some(true), Some(true)) => "emulated_with_return_ns",
        (Some(true), Some(false)) => "stepped_with_return_ns",
        other => panic!("work's probes apart: {other:?}"),
    };
    assert_eq!(p["ns_per_call"], traps[kind], "{costs}");
    assert!(
        stderr.contains("the recorder's probes: a breakpoint here costs")
            && stderr.contains("  work (work, entry and return on one "),
        "{stderr}"
    );
}

#[test]
fn a_span_on_rust_changes_nothing() {
    if !privileged("a_span_on_rust_changes_nothing") {
        return;
    }
    let dir = tempdir("spans-rust");
    let m = 3000u64;
    let calls = m.to_string();
    let args = ["locks", "--futex-waits", "0", "--span-calls", &calls];
    let command = demo_command(&args);
    let command: Vec<&std::ffi::OsStr> = command.iter().map(|a| a.as_os_str()).collect();
    let plain = untraced(&command);
    assert!(plain.status.success(), "{plain:?}");
    let (mut out, run) = record(&dir, &["--uprobe-span", "demo_span_target"], &command);
    // The demo prints its futex word's address, which ASLR moves from run to run.
    let mut plain = plain;
    for o in [&mut plain, &mut out] {
        o.stdout = without_futex_word(&o.stdout);
    }
    let run = assert_unchanged("Rust", &plain, &out, run);
    assert_eq!(span_calls(&run, "demo_span_target"), m);
}

/// The demo's JSON line with the futex word's address left out.
fn without_futex_word(stdout: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(stdout);
    text.lines()
        .map(|l| match serde_json::from_str::<serde_json::Value>(l) {
            Ok(mut v) if v.get("futex_word").is_some() => {
                v["futex_word"] = "<address>".into();
                format!("{v}\n")
            }
            _ => format!("{l}\n"),
        })
        .collect::<String>()
        .into_bytes()
}

#[test]
fn a_span_on_python_changes_nothing() {
    if !privileged("a_span_on_python_changes_nothing") {
        return;
    }
    if !Path::new(PYTHON).exists() {
        skip(&format!("{PYTHON} is not installed"));
        return;
    }
    let dir = tempdir("spans-python");
    let script = dir.join("gcd.py");
    std::fs::write(&script, PYTHON_SCRIPT).unwrap();
    let command = [PYTHON.as_ref(), script.as_os_str()];
    let plain = untraced(&command);
    assert_eq!(plain.status.code(), Some(4), "{plain:?}");
    let gcd = format!("gcd=_PyLong_GCD@{PYTHON}");
    let getattr = format!("getattr=PyObject_GetAttr@{PYTHON}");
    let (out, run) = record(
        &dir,
        &["--uprobe-span", &gcd, "--uprobe-span", &getattr],
        &command,
    );
    let run = assert_unchanged("Python", &plain, &out, run);
    assert_eq!(span_calls(&run, "gcd"), 2000);
    assert!(span_calls(&run, "getattr") > 0, "{}", run["locks"]["spans"]);
}

/// A C library is not Go code, even in a Go program: its frames are on the thread's own stack,
/// which Go neither copies nor walks, so a span on it is allowed and harms nothing, even while
/// it calls back into Go and the goroutine's stack is copied under it.
#[test]
fn a_span_on_a_c_library_of_a_go_program_changes_nothing() {
    if !privileged("a_span_on_a_c_library_of_a_go_program_changes_nothing") {
        return;
    }
    let dir = tempdir("spans-cgo");
    // Out of the Go package's folder, where cgo would compile it into the program.
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(lib.join("cwork.c"), CGO_LIBRARY).unwrap();
    if !gcc(
        &lib,
        &["-O2", "-shared", "-fPIC", "-o", "libcwork.so", "cwork.c"],
    ) {
        return;
    }
    let Some(prog) = go_build(&dir, "cgo", CGO_PROGRAM) else {
        return;
    };
    let library = lib.join("libcwork.so");
    let n = 1000u64;
    let calls = n.to_string();
    let command = [prog.as_os_str(), calls.as_ref()];
    let plain = untraced(&command);
    assert!(plain.status.success(), "{plain:?}");
    let span = format!("cwork@{}", library.display());
    let (out, run) = record(&dir, &["--uprobe-span", &span], &command);
    let run = assert_unchanged("cgo", &plain, &out, run);
    assert_eq!(span_calls(&run, "cwork"), n);
}

/// `through` throws for odd numbers; the exception unwinds through its frame to main's catch.
/// An unwinder cannot cross a frame whose return address a return probe replaced: the C++
/// runtime calls std::terminate.
const CXX_PROGRAM: &str = r#"#include <cstdio>
#include <cstdlib>
#include <stdexcept>

extern "C" __attribute__((noipa)) long through(long i) {
    if (i % 2) throw std::runtime_error("odd");
    return i;
}

int main(int argc, char **argv) {
    long n = atol(argv[1]), caught = 0, sum = 0;
    for (long i = 0; i < n; i++) {
        try { sum += through(i); } catch (const std::exception &) { caught++; }
    }
    printf("caught %ld sum %ld\n", caught, sum);
    return 0;
}
"#;

/// `work` called N times after a pause (so that a recording following it as a child of the
/// target has placed its probes); prints the sum.
const C_LATE_PROGRAM: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((noipa)) long work(long i) { return i * i % 1009 + 1; }

int main(int argc, char **argv) {
    long n = atol(argv[1]), sum = 0;
    usleep(400000);
    for (long i = 0; i < n; i++)
        sum += work(i);
    printf("calls %ld sum %ld\n", n, sum);
    return 0;
}
"#;

#[test]
fn a_span_reaches_no_process_but_the_targets() {
    if !privileged("a_span_reaches_no_process_but_the_targets") {
        return;
    }
    let dir = tempdir("spans-others");
    std::fs::write(dir.join("through.cc"), CXX_PROGRAM).unwrap();
    let built = Command::new("g++")
        .args(["-O2", "-o", "through", "through.cc"])
        .current_dir(&dir)
        .output();
    if !matches!(&built, Ok(o) if o.status.success()) {
        skip(&format!("cannot compile with g++: {built:?}"));
        return;
    }
    let prog = dir.join("through");
    let command = [prog.as_os_str(), "1000".as_ref()];
    let plain = untraced(&command);
    assert_eq!(text(&plain).0, "caught 500 sum 249500\n", "{plain:?}");
    // The recording's target is `sleep`; the same program, run beside it, is not a target.
    let span = format!("through@{}", prog.display());
    let run_path = dir.join("run.json");
    let recording = record_ready(&[
        "--uprobe-span",
        &span,
        "-o",
        run_path.to_str().unwrap(),
        "--",
        "sleep",
        "1",
    ]);
    let beside = untraced(&command);
    let (code, stderr) = wait_output(recording);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        (beside.status.code(), text(&beside).0),
        (Some(0), text(&plain).0),
        "a program nobody records changed while a span was placed on it"
    );
    assert_eq!(span_calls(&load_run(&run_path), "through"), 0);
}

#[test]
fn a_span_follows_a_child_the_target_forks() {
    if !privileged("a_span_follows_a_child_the_target_forks") {
        return;
    }
    let dir = tempdir("spans-child");
    std::fs::write(dir.join("late.c"), C_LATE_PROGRAM).unwrap();
    if !gcc(&dir, &["-O2", "-o", "late", "late.c"]) {
        return;
    }
    let prog = dir.join("late");
    // The shell forks the program (a command list is not exec'd in place).
    let script = format!("{} 3000; true", prog.display());
    let span = format!("work@{}", prog.display());
    let command = ["sh".as_ref(), "-c".as_ref(), script.as_ref()];
    let (out, run) = record(&dir, &["--uprobe-span", &span], &command);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("calls 3000"), "{stdout}");
    let run = run.expect("a run file");
    assert_eq!(span_calls(&run, "work"), 3000, "{stderr}");
}
