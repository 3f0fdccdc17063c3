//! CPython frames in every profile kind: a script with known stacks
//! (`workloads/demo/python/threads.py`) run by Debian's `/usr/bin/python3.11`, and by a
//! pyenv-built 3.12 when the host has one. Needs root and the interpreter (under CI=true its
//! absence is a failure).

mod common;

use std::path::{Path, PathBuf};

use common::*;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../workloads/demo/python/threads.py")
}

/// One stack's frames, root first: (name, kind).
fn frames_of(run: &serde_json::Value, ids: &serde_json::Value) -> Vec<(String, String)> {
    let frames = run["profiles"]["frames"].as_array().unwrap();
    ids.as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let f = &frames[i.as_u64().unwrap() as usize];
            (
                f["name"].as_str().unwrap().to_string(),
                f["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The Python frames of a stack, root first, with the standard library's line numbers cut
/// off (they differ between versions): `Thread.run (threading.py)`, `nap (threads.py:24)`.
fn python_chain(frames: &[(String, String)]) -> Vec<String> {
    frames
        .iter()
        .filter(|(_, kind)| kind == "python")
        .map(|(name, _)| match name.find("(threading.py") {
            Some(at) => format!("{}(threading.py)", &name[..at]),
            None => name.clone(),
        })
        .collect()
}

/// The value of `profile`'s stacks whose Python chain is exactly `chain`, and the total.
fn weight_of_chain(run: &serde_json::Value, profile: &str, chain: &[&str]) -> (u64, u64) {
    let mut hit = 0;
    let mut total = 0;
    for s in run["profiles"][profile]["stacks"].as_array().unwrap() {
        let value = s["value"].as_u64().unwrap();
        total += value;
        if python_chain(&frames_of(run, &s["frames"])) == chain {
            hit += value;
        }
    }
    (hit, total)
}

const THREAD: [&str; 3] = [
    "Thread._bootstrap (threading.py)",
    "Thread._bootstrap_inner (threading.py)",
    "Thread.run (threading.py)",
];

fn chain(tail: &[&'static str]) -> Vec<&'static str> {
    THREAD.iter().copied().chain(tail.iter().copied()).collect()
}

fn check_interpreter(python: &Path) {
    let dir = tempdir(&format!(
        "python-{}",
        python.file_name().unwrap().to_string_lossy()
    ));
    let script = script();
    let command = [python.as_os_str(), script.as_os_str(), "2".as_ref()];
    let (run, stderr) = record_spawned(&dir, &[], &command);
    let show = |profile: &str| {
        let mut out = String::new();
        for s in run["profiles"][profile]["stacks"].as_array().unwrap() {
            let names: Vec<String> = frames_of(&run, &s["frames"])
                .into_iter()
                .map(|(n, _)| n)
                .collect();
            out += &format!("{} {}\n", s["value"], names.join(";"));
        }
        format!("{profile} of {}:\n{out}\n{stderr}", python.display())
    };

    // On CPU: the cruncher, in crunch's loop (lines 35-36), called from cruncher_loop.
    let mut on = 0;
    let mut total = 0;
    for line in ["35", "36"] {
        let crunch = format!("crunch (threads.py:{line})");
        let want = chain(&["cruncher_loop (threads.py:42)", crunch.leak()]);
        let (hit, all) = weight_of_chain(&run, "oncpu", &want);
        on += hit;
        total = all;
    }
    // The cruncher runs pure Python for most of the 2 s: half the samples or more, the rest
    // in the interpreter's own C helpers below crunch (also counted: deeper chains differ).
    let deeper = run["profiles"]["oncpu"]["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            let c = python_chain(&frames_of(&run, &s["frames"]));
            c.len() == 5 && c[3] == "cruncher_loop (threads.py:42)" && c[4].starts_with("crunch (")
        })
        .map(|s| s["value"].as_u64().unwrap())
        .sum::<u64>();
    assert!(
        on > 0 && deeper * 2 >= total,
        "crunch leads {deeper} of {total} on-CPU samples ({on} exact):\n{}",
        show("oncpu")
    );

    // Off CPU: the sleeper in time.sleep (nap's line 24), called from sleeper_loop's line 29,
    // with clock_nanosleep below it; and the main thread in ping_loop's sleep.
    let nap = chain(&["sleeper_loop (threads.py:29)", "nap (threads.py:24)"]);
    let offcpu = run["profiles"]["offcpu"]["stacks"].as_array().unwrap();
    let napped = |below: &[&str]| -> u64 {
        offcpu
            .iter()
            .filter(|s| {
                let f = frames_of(&run, &s["frames"]);
                python_chain(&f) == nap
                    && f.iter()
                        .skip_while(|(n, _)| n != "nap (threads.py:24)")
                        .any(|(n, _)| below.iter().any(|b| n.contains(b)))
            })
            .map(|s| s["value"].as_u64().unwrap())
            .sum()
    };
    // nap sleeps 5 ms at a time for 2 s, then waits for the GIL the cruncher holds: the
    // sleeper's time off CPU is nearly all under nap, in the sleep and in taking the GIL back.
    // Taking the GIL back: PyEval_RestoreThread (3.11, 3.12), _PyThreadState_Attach (3.13).
    let (sleeping, regaining) = (
        napped(&["clock_nanosleep"]),
        napped(&["PyEval_RestoreThread", "_PyThreadState_Attach", "take_gil"]),
    );
    assert!(
        sleeping > 100_000_000 && sleeping + regaining >= 1_200_000_000,
        "nap slept {sleeping} ns and waited {regaining} ns for the GIL:\n{}",
        show("offcpu")
    );
    let main_chain = ["main (threads.py:76)", "ping_loop (threads.py:63)"];
    assert!(
        offcpu.iter().any(|s| {
            python_chain(&frames_of(&run, &s["frames"])).ends_with(&main_chain.map(String::from))
        }),
        "no main thread in ping_loop:\n{}",
        show("offcpu")
    );

    // Wakeups: the waiter, woken in Event.wait, by the main thread's ping -> Event.set.
    let waiter = chain(&[
        "waiter_loop (threads.py:53)",
        "wait_for_ping (threads.py:47)",
    ]);
    let waker_tail = [
        "main (threads.py:76)",
        "ping_loop (threads.py:64)",
        "ping (threads.py:58)",
        "Event.set (threading.py)",
    ];
    let woke = run["profiles"]["wakeup"]["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| {
            let own = python_chain(&frames_of(&run, &s["frames"]));
            let waker = python_chain(&frames_of(&run, &s["waker_frames"]));
            own.starts_with(&waiter.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                && waker
                    .windows(waker_tail.len())
                    .any(|w| w == waker_tail.map(String::from))
        });
    assert!(
        woke,
        "no wakeup of wait_for_ping by ping:\n{}",
        show("wakeup")
    );

    // Futex waits and sampled syscalls carry Python frames too.
    for profile in ["futex", "syscalls"] {
        let any = run["profiles"][profile]["stacks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| {
                python_chain(&frames_of(&run, &s["frames"]))
                    .iter()
                    .any(|n| n.ends_with("(threads.py:47)") || n.ends_with("(threads.py:24)"))
            });
        assert!(any, "no script frame in {profile}:\n{}", show(profile));
    }
    check_gil_is_a_cause(&dir.join("run.json"));
}

/// `switchyard explain` of the same run: the sleeper's wait to take the GIL back is a lock
/// wait on the GIL, released by the thread that held it, the cruncher, named by its script
/// frame.
fn check_gil_is_a_cause(run_path: &Path) {
    let out = std::process::Command::new(switchyard())
        .args(["explain", "--json"])
        .arg(run_path)
        .output()
        .expect("running switchyard explain");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let ex: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let found = ex["findings"].as_array().unwrap().iter().find(|f| {
        f["kind"] == "lock"
            && f["site"] == "nap (threads.py:24)"
            && f["summary"]
                .as_str()
                .is_some_and(|s| s.contains("waited for the GIL"))
    });
    let Some(f) = found else {
        panic!("no GIL wait at nap:\n{stdout}");
    };
    let doing = f["culprit"]["doing"].as_str().unwrap_or_default();
    assert!(
        doing.contains("in crunch (threads.py:3"),
        "the GIL's holder is not the cruncher: {f}"
    );
}

/// Debian's `/usr/bin/python3.11`, or `None` with the skip said (under CI=true, a failure).
fn debian_python() -> Option<&'static Path> {
    let python = Path::new("/usr/bin/python3.11");
    if python.exists() {
        return Some(python);
    }
    let reason = "skipping: /usr/bin/python3.11 is not installed";
    assert!(
        std::env::var("CI").is_err(),
        "{reason}; CI=true turns a skip into a failure"
    );
    eprintln!("{reason}");
    None
}

/// pyenv's `python3.MINOR` (`minor` "3.12"), when the host has one.
fn pyenv_python(minor: &str) -> Option<PathBuf> {
    let root = std::env::var("PYENV_ROOT").unwrap_or_else(|_| "/root/.pyenv".into());
    std::fs::read_dir(Path::new(&root).join("versions"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join(format!("bin/python{minor}")))
        .find(|p| p.exists())
}

#[test]
fn debian_python_3_11_frames_in_every_profile() {
    if !privileged("debian_python_3_11_frames_in_every_profile") {
        return;
    }
    if let Some(python) = debian_python() {
        check_interpreter(python);
    }
}

/// pyenv's 3.12 and 3.13 (a shared libpython, position-independent; 3.13's layout read from
/// its `_Py_DebugOffsets`), when the host has them.
#[test]
fn pyenv_python_3_12_and_3_13_frames_in_every_profile() {
    if !privileged("pyenv_python_3_12_and_3_13_frames_in_every_profile") {
        return;
    }
    for minor in ["3.12", "3.13"] {
        match pyenv_python(minor) {
            Some(python) => check_interpreter(&python),
            None => eprintln!("no pyenv {minor} on this host: not checked"),
        }
    }
}

/// Two threads fighting for the GIL on Debian's stripped `/usr/bin/python3.11`
/// (`workloads/demo/python/gil.py`): the first finding is the GIL, found by the futex words
/// the threads waited on (the stripped binary names no `take_gil`), over both threads, held
/// by one of them, and its share is the part of their time they neither ran nor waited for a
/// CPU another process held (each thread's CPU time as the script measured it; its run-queue
/// time and who held the CPU from the run's thread rows and runqueue_holders).
#[test]
fn debian_python_3_11_gil_fight_is_the_first_finding() {
    if !privileged("debian_python_3_11_gil_fight_is_the_first_finding") {
        return;
    }
    let Some(python) = debian_python() else {
        return;
    };
    let dir = tempdir("python-gil");
    let script = script().with_file_name("gil.py");
    let run_path = dir.join("run.json");
    let out = std::process::Command::new(switchyard())
        .args(["record", "-o"])
        .arg(&run_path)
        .arg("--")
        .arg(python)
        .arg(&script)
        .arg("3")
        .output()
        .expect("running switchyard record");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no result line from gil.py:\n{stdout}\n{stderr}"));
    let fighters: serde_json::Value = serde_json::from_str(line).unwrap();
    let run = load_run(&run_path);
    let mut tids: Vec<u64> = Vec::new();
    let (mut cpu, mut wall, mut runq) = (0.0, 0.0, 0.0);
    for (tid, r) in fighters.as_object().unwrap() {
        let tid: u64 = tid.parse().unwrap();
        tids.push(tid);
        cpu += r["cpu"].as_f64().unwrap();
        wall += r["wall"].as_f64().unwrap();
        let row = run["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["tid"] == tid)
            .unwrap_or_else(|| panic!("no thread row for {tid}"));
        // The part of its run-queue time another process held the CPU for (behind the other
        // fighter, it waited for the GIL).
        let (mut other, mut all) = (0.0, 0.0);
        for h in run["runqueue_holders"].as_array().unwrap() {
            if h["tid"] == tid {
                all += h["ns"].as_f64().unwrap();
                if h["holder_tgid"] != run["meta"]["pid"] {
                    other += h["ns"].as_f64().unwrap();
                }
            }
        }
        if all > 0.0 {
            runq += row["runqueue_ns"].as_f64().unwrap() / 1e9 * other / all;
        }
    }
    // Each fighter waits for the GIL whenever it neither runs nor waits for a CPU another
    // process holds: about half of its time on an otherwise idle two-CPU host.
    let expected = 1.0 - (cpu + runq) / wall;

    let out = std::process::Command::new(switchyard())
        .args(["explain", "--json"])
        .arg(&run_path)
        .output()
        .expect("running switchyard explain");
    let (json, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let ex: serde_json::Value = serde_json::from_str(&json).unwrap();
    // The first of the program's own findings: a wait for a CPU another process held is the
    // host's other load, not the program's (these tests share their host).
    let first = ex["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| !(f["kind"] == "runqueue" && f["culprit"]["same_process"] == false))
        .unwrap_or_else(|| panic!("no finding:\n{json}"));
    let summary = first["summary"].as_str().unwrap_or_default();
    assert!(
        first["kind"] == "lock" && summary.contains("waited for the GIL"),
        "the first finding is not the GIL:\n{json}"
    );
    let found: Vec<u64> = first["tids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap())
        .collect();
    assert!(
        tids.iter().all(|t| found.contains(t)),
        "the GIL finding is not over both fighters {tids:?}: {first}"
    );
    // The culprit: the other fighter, which held it.
    let holder = first["culprit"]["tid"].as_u64().unwrap_or_default();
    assert!(
        tids.contains(&holder),
        "the GIL's holder is not a fighter: {first}"
    );
    assert!(
        first["symbol"]
            .as_str()
            .is_some_and(|s| s.starts_with("_PyRuntime.ceval.gil+")),
        "the GIL's futex word is not named: {first}"
    );
    let share = first["share"].as_f64().unwrap();
    assert!(
        (share - expected).abs() <= 0.10,
        "GIL share {share:.3}, expected {expected:.3} (cpu {cpu:.2} s, run queue {runq:.2} s, wall {wall:.2} s): {first}"
    );
}

/// A code object freed and another put at its address (`workloads/demo/python/reuse.py`):
/// each one's naps are named after it. Named by address alone, the second function's naps
/// took the first one's name.
#[test]
fn a_code_objects_address_reused_names_each_one() {
    if !privileged("a_code_objects_address_reused_names_each_one") {
        return;
    }
    let Some(debian) = debian_python() else {
        return;
    };
    let mut pythons = vec![debian.to_path_buf()];
    pythons.extend(["3.12", "3.13"].iter().filter_map(|m| pyenv_python(m)));
    let script = script().with_file_name("reuse.py");
    for python in pythons {
        let dir = tempdir(&format!(
            "python-reuse-{}",
            python.file_name().unwrap().to_string_lossy()
        ));
        let command = [python.as_os_str(), script.as_os_str()];
        let (run, stderr) = record_spawned(&dir, &[], &command);
        assert!(stderr.contains("both code objects at"), "{stderr}");
        // main's line 24 runs the first function, its line 34 the second: the innermost
        // Python frame of each off-CPU stack under them, with its weight.
        let mut under = std::collections::BTreeMap::<(String, String), u64>::new();
        for s in run["profiles"]["offcpu"]["stacks"].as_array().unwrap() {
            let chain = python_chain(&frames_of(&run, &s["frames"]));
            let Some(at) = chain.iter().position(|f| f.starts_with("main (reuse.py:")) else {
                continue;
            };
            let leaf = chain.last().unwrap().clone();
            *under.entry((chain[at].clone(), leaf)).or_default() += s["value"].as_u64().unwrap();
        }
        let first = ("main (reuse.py:24)", "first_napper (first_napper.py:3)");
        let second = ("main (reuse.py:34)", "second_napper (second_napper.py:3)");
        let show = format!("{}: {under:#?}\n{stderr}", python.display());
        for (call, leaf) in [first, second] {
            // 50 naps of 10 ms: most of half a second.
            let ns = under
                .get(&(call.to_string(), leaf.to_string()))
                .copied()
                .unwrap_or(0);
            assert!(ns > 250_000_000, "{leaf} under {call}: {ns} ns\n{show}");
        }
        // Neither call's stacks name the other function.
        for ((call, leaf), ns) in &under {
            let other = match call.as_str() {
                c if c == first.0 => "second_napper",
                c if c == second.0 => "first_napper",
                _ => continue,
            };
            assert!(
                !leaf.contains(other),
                "{leaf} under {call} ({ns} ns)\n{show}"
            );
        }
    }
}
