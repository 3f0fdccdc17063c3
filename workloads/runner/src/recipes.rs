//! What the `just` recipes run: `profile` (a workload build, the demo or a live process, into
//! `reports/<name>-<time>/`), `compare` (repeats of two builds, then the comparison page), the
//! stories (`compare-broker`, `compare-relay`) and `overhead` (what recording costs a workload,
//! `bench-broker`). Paths are relative to the working directory, the repository root under
//! `just`.

use std::{
    fs,
    io::{IsTerminal as _, Write as _},
    path::{Path, PathBuf},
    process::{Command, ExitStatus, Stdio},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use switchyard_model::units::{counted, thousands};

use crate::{
    bench, catalogue,
    fail::Failure,
    interrupt::Interrupts,
    overhead, per_event,
    per_event::spans,
    plan::{Plan, PlanError, Request},
    runner::{self, Tools, code_of},
    servers::{self, Server},
    story::{self, Story},
};

/// What every recipe runs with.
pub struct Context<'a> {
    pub tools: &'a Tools,
    pub interrupts: &'a Interrupts,
    /// `--as-build` (AS_BUILD): the label the drivers record.
    pub as_build: Option<&'a str>,
}

/// Seconds of load `profile` runs when none is given.
pub const PROFILE_SECONDS: u64 = 5;

/// Where reports go.
const REPORTS: &str = "reports";

fn step(text: &str) {
    eprintln!("==> {text}");
}

/// `just profile [WORKLOAD] [BUILD] [SECONDS]`, `just profile demo [KIND] [SECONDS]` or
/// `just profile pid=N [SECONDS]`: records, writes `reports/<name>-<time>/{run.json,index.html}`,
/// points `reports/latest` at it and prints `report: …`. Returns the exit code.
pub fn profile(
    workload: &str,
    build: &str,
    seconds: Option<&str>,
    cx: &Context<'_>,
) -> Result<u8, Failure> {
    let Context {
        tools,
        interrupts,
        as_build,
    } = *cx;
    let stamp = stamp();
    let (dir, status) = if let Some(pid) = workload.strip_prefix("pid=") {
        // A live process has no build, so the second word is the time.
        let seconds = seconds.filter(|s| !s.is_empty()).or(Some(build));
        let seconds = parse_seconds(seconds.filter(|s| !s.is_empty()))?;
        let dir = PathBuf::from(format!("{REPORTS}/pid-{pid}-{stamp}"));
        create_dir(&dir)?;
        let mut record = Command::new(tools.switchyard());
        record.arg("record").arg("--pid").arg(pid);
        match seconds {
            Some(s) => {
                step(&format!(
                    "recording pid {pid} for {s} s (or until it exits)"
                ));
                record.arg("--duration").arg(format!("{s}s"));
            }
            None => step(&format!(
                "recording pid {pid} until Ctrl-C (or until it exits)"
            )),
        }
        record.arg("-o").arg(dir.join("run.json"));
        let status = code_of(run_forwarding(record, interrupts)?);
        if !non_empty(&dir.join("run.json")) {
            let _ = fs::remove_dir_all(&dir);
            return Ok(exit_code(status));
        }
        (dir, status)
    } else if workload == "demo" {
        let kind = if build.is_empty() { "mix" } else { build };
        let seconds = parse_seconds(seconds)?.unwrap_or(PROFILE_SECONDS);
        let dir = PathBuf::from(format!("{REPORTS}/demo-{kind}-{stamp}"));
        create_dir(&dir)?;
        step(&format!("recording the demo target for {seconds} s"));
        let mut record = Command::new(tools.switchyard());
        record
            .arg("record")
            .arg("-o")
            .arg(dir.join("run.json"))
            .arg("--")
            .arg(tools.bin.join("switchyard-demo"))
            .arg(kind)
            .arg("--seconds")
            .arg(seconds.to_string());
        let status = code_of(run_forwarding(record, interrupts)?);
        if !non_empty(&dir.join("run.json")) {
            return Ok(exit_code(status));
        }
        (dir, status)
    } else {
        let seconds = parse_seconds(seconds)?.unwrap_or(PROFILE_SECONDS);
        let plan = default_load(workload, build, seconds, as_build).map_err(|e| match e {
            PlanError::UnknownWorkload(_) => Failure::from(e).hint(format!(
                "one of {}, demo, or pid=N",
                catalogue::workload_names().join(", ")
            )),
            e => Failure::from(e),
        })?;
        let dir = PathBuf::from(format!(
            "{REPORTS}/{}-{}-{stamp}",
            plan.workload.name, plan.build.name
        ));
        step(&format!(
            "recording {} ({}) under load for {seconds} s",
            plan.workload.name, plan.build.name
        ));
        let ticker = Ticker::start(seconds);
        let result = runner::run(&plan, tools, &dir, interrupts);
        drop(ticker);
        let mut status = match result {
            Ok(_) => 0,
            Err(f) => {
                eprint!("{}", f.render());
                i32::from(f.code)
            }
        };
        if !dir.exists() {
            return Ok(exit_code(status));
        }
        print_file(&dir.join("driver.out"), None);
        // switchyard's summary: the last part of its stderr, from its heading.
        print_file(&dir.join("record.err"), Some("switchyard:"));
        if !non_empty(&dir.join("run.json")) {
            return Err(Failure::new(format!(
                "no run was recorded (exit {status}); see {}",
                dir.join("record.err").display()
            ))
            .hint("its last lines say why; `switchyard doctor` shows what this host can record"));
        }
        if interrupts.raised() {
            status = 2;
        }
        (dir, status)
    };
    if !dir.join("index.html").exists() {
        step("writing the report");
        runner::report(tools, &dir)?;
    }
    point_latest(&dir)?;
    println!("report: {}/index.html ({REPORTS}/latest)", dir.display());
    Ok(exit_code(status))
}

/// The plan of a build under its workload's default load, for `seconds`.
fn default_load(
    workload: &str,
    build: &str,
    seconds: u64,
    as_build: Option<&str>,
) -> Result<Plan, PlanError> {
    Plan::new(
        &Request {
            workload,
            build,
            knobs: &[],
            seconds: Some(seconds),
            as_build,
        },
        env,
        cores(),
    )
}

/// `just compare WORKLOAD A B [REPEATS] [SECONDS]`: REPEATS runs of each build, interleaved,
/// then the comparison (medians, noise, differential flame graphs) under
/// `reports/<workload>-<A>-vs-<B>-<time>/`.
pub fn compare(
    workload: &str,
    (a, b): (&str, &str),
    repeats: u32,
    seconds: u64,
    cx: &Context<'_>,
) -> Result<u8, Failure> {
    let Context {
        tools,
        interrupts,
        as_build,
    } = *cx;
    let plan = |build| default_load(workload, build, seconds, as_build);
    let (pa, pb) = (plan(a)?, plan(b)?);
    let dir = PathBuf::from(format!("{REPORTS}/{workload}-{a}-vs-{b}-{}", stamp()));
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    for i in 1..=repeats {
        for (p, runs) in [(&pa, &mut ra), (&pb, &mut rb)] {
            step(&format!(
                "{workload} {}, run {i} of {repeats}",
                p.build.name
            ));
            let out = dir.join(format!("{}-{i}", p.build.name));
            stop_if_interrupted(runner::run(p, tools, &out, interrupts)?, &dir)?;
            runs.push(out.join("run.json"));
        }
    }
    let status = compare_runs(tools, (a, &ra), (b, &rb), &dir, None)?;
    point_latest(&dir)?;
    Ok(exit_code(code_of(status)))
}

/// A story: every configuration, REPEATS runs of each build, the comparison pages (their
/// text beside them), then the table of medians on stdout.
///
/// The runs, table and chart go to a new folder, `reports/<story>-<time>/`, and the committed
/// story is left as it is. With `commit`, they replace the committed ones, but only once the
/// whole story is recorded: it records into `<root>.incoming/` first, and an interrupted or
/// failed story leaves the committed one whole.
pub fn story(
    story: &Story,
    repeats: u32,
    seconds: u64,
    commit: bool,
    cx: &Context<'_>,
) -> Result<u8, Failure> {
    let Context {
        tools, interrupts, ..
    } = *cx;
    let committed = Path::new(story.root);
    let root = if commit {
        PathBuf::from(format!("{}.incoming", story.root))
    } else {
        let name = story.root.strip_prefix("reports/").unwrap_or(story.root);
        PathBuf::from(format!("reports/{}-{}", name.replace('/', "-"), stamp()))
    };
    let root = root.as_path();
    // What the host must have, then every configuration, checked before the first run.
    crate::prerequisites::check(story)?;
    let mut plans = Vec::new();
    for c in &story.configs {
        for build in c.builds.unwrap_or(story.builds) {
            let p = Plan::new(
                &Request {
                    workload: story.workload,
                    build,
                    knobs: &c.knobs,
                    seconds: Some(seconds),
                    as_build: None,
                },
                env,
                cores(),
            )?;
            plans.push((c, p));
        }
    }
    // A story's incoming folder left by one that did not finish holds nothing to keep.
    if commit && root.exists() {
        fs::remove_dir_all(root)
            .map_err(|e| Failure::io(format!("removing {}", root.display()), e))?;
    }
    for c in &story.configs {
        let dir = root.join(&c.dir);
        for r in 1..=repeats {
            for (_, p) in plans.iter().filter(|(pc, _)| pc.dir == c.dir) {
                let name = format!("{}-{r}", p.build.name);
                // Recorded first in odd repeats, untraced first in even ones: neither always
                // runs on a host the other has just warmed.
                let untraced_first = story.untraced && r % 2 == 0;
                let untraced = || -> Result<(), Failure> {
                    eprintln!("run: {}, {} #{r}, untraced", c.title, p.build.name);
                    let out = dir.join(story::UNTRACED).join(&name);
                    story::measure(p, tools, &out, interrupts)?;
                    stop_if_interrupted(
                        runner::Outcome {
                            interrupted: interrupts.raised(),
                        },
                        &dir,
                    )
                };
                if untraced_first {
                    untraced()?;
                }
                eprintln!("run: {}, {} #{r}", c.title, p.build.name);
                let out = dir.join(&name);
                stop_if_interrupted(runner::run(p, tools, &out, interrupts)?, &dir)?;
                // The 1-request/s table's shares are of on-CPU samples: kept for it alone.
                story::slim(&out, story.keeps_oncpu)?;
                if story.untraced && !untraced_first {
                    untraced()?;
                }
            }
        }
        for (base, other) in story.comparisons {
            let runs = |build: &str| -> Vec<PathBuf> {
                (1..=repeats)
                    .map(|r| dir.join(format!("{build}-{r}")).join("run.json"))
                    .collect()
            };
            let name = format!("compare-{base}-vs-{other}");
            let status = compare_runs(
                tools,
                (base, &runs(base)),
                (other, &runs(other)),
                &dir.join(&name),
                Some(&dir.join(format!("{name}.txt"))),
            )?;
            if !status.success() {
                return Err(Failure::new(format!(
                    "switchyard compare failed ({status}) for {}",
                    dir.join(&name).display()
                ))
                .hint(format!(
                    "its error is in {}",
                    dir.join(format!("{name}.txt")).display()
                )));
            }
        }
    }
    let table = render_in(story, root)?;
    if commit {
        install(story, root, committed)?;
        eprintln!(
            "story: its runs, table and chart replace the committed ones under {}",
            committed.display()
        );
    } else {
        eprintln!(
            "story: runs, table and chart in {}; the committed story under {} is unchanged \
             (--commit records over it)",
            root.display(),
            committed.display()
        );
    }
    print!("{table}");
    Ok(0)
}

/// Puts a story recorded whole under `incoming` in place of the committed one under
/// `committed`: each configuration's folder, then the table and chart, each moved aside,
/// replaced and the old one removed. What else the committed folder holds (its README, other
/// stories' folders) stays.
fn install(story: &Story, incoming: &Path, committed: &Path) -> Result<(), Failure> {
    let io = |what: &str, path: &Path, e: std::io::Error| {
        Failure::io(format!("{what} {}", path.display()), e).hint(format!(
            "the new story is whole under {}",
            incoming.display()
        ))
    };
    fs::create_dir_all(committed).map_err(|e| io("creating", committed, e))?;
    let mut names: Vec<String> = story.configs.iter().map(|c| c.dir.clone()).collect();
    names.dedup();
    names.extend(["table.md".to_string(), "chart.svg".to_string()]);
    for name in names {
        let new = incoming.join(&name);
        if !new.exists() {
            continue;
        }
        let old = committed.join(&name);
        let aside = committed.join(format!("{name}.replaced"));
        if old.exists() {
            fs::rename(&old, &aside).map_err(|e| io("moving aside", &old, e))?;
        }
        fs::rename(&new, &old).map_err(|e| io("moving into place", &new, e))?;
        if aside.is_dir() {
            fs::remove_dir_all(&aside).map_err(|e| io("removing", &aside, e))?;
        } else if aside.exists() {
            fs::remove_file(&aside).map_err(|e| io("removing", &aside, e))?;
        }
    }
    let _ = fs::remove_dir_all(incoming);
    Ok(())
}

/// A story's table (and chart, where it has one) from its committed runs under its root,
/// written there as `table.md` (and `chart.svg`); returns the table, and its lead after it
/// where it has one.
pub fn render(story: &Story) -> Result<String, Failure> {
    render_in(story, Path::new(story.root))
}

/// [`render`] from the runs under `root`, written there.
pub fn render_in(story: &Story, root: &Path) -> Result<String, Failure> {
    let groups = story::load(root, story.builds)?;
    let chart = |svg: String| {
        let path = root.join("chart.svg");
        fs::write(&path, svg).map_err(|e| Failure::io(format!("writing {}", path.display()), e))
    };
    if let Some(draw) = story.chart {
        chart(draw(root, &groups)?)?;
    }
    let table = (story.table)(root, &groups)?;
    let written = root.join("table.md");
    fs::write(&written, &table)
        .map_err(|e| Failure::io(format!("writing {}", written.display()), e))?;
    Ok(match story.lead {
        Some(lead) => format!(
            "{table}\nIts lead, from the same runs:\n\n{}",
            lead(&groups)
        ),
        None => table,
    })
}

/// `just bench-broker [REPEATS] [SECONDS] [SWITCHYARD…]`: what recording costs a workload
/// build under its default load (see [`overhead`]). REPEATS runs of each configuration
/// (untraced, and recorded by each switchyard binary: by default the one beside this
/// program), interleaved, then the table on stdout. The runs' files go to a temporary
/// directory, removed at the end and kept when a run fails. Ctrl-C ends it with the table of
/// the repeats that were complete (exit 2).
pub fn overhead(
    workload: &str,
    build: &str,
    (repeats, seconds): (u32, u64),
    switchyards: &[PathBuf],
    cx: &Context<'_>,
) -> Result<u8, Failure> {
    let Context {
        tools,
        interrupts,
        as_build,
    } = *cx;
    let plan = default_load(workload, build, seconds, as_build)?;
    if repeats == 0 {
        return Err(
            Failure::new("--repeats 0: nothing to measure").hint("give --repeats 1 or more")
        );
    }
    bench::warn_of_bpf_stats();
    let switchyards = if switchyards.is_empty() {
        let own = tools.switchyard();
        let cwd = std::env::current_dir().unwrap_or_default();
        vec![
            own.strip_prefix(&cwd)
                .map_or_else(|_| own.clone(), Path::to_path_buf),
        ]
    } else {
        switchyards.to_vec()
    };
    if let Some(missing) = switchyards.iter().find(|s| !s.is_file()) {
        return Err(
            Failure::new(format!("no switchyard binary at {}", missing.display()))
                .hint("build it first (`just build`), or give another with --switchyard PATH"),
        );
    }
    let configs = overhead::configurations(&switchyards);
    let dir = tempfile::Builder::new()
        .prefix("switchyard-overhead-")
        .tempdir()
        .map_err(|e| Failure::io("creating a directory for the runs", e))?;
    step(&format!(
        "{} ({}): {}, {seconds} s each; {}, interleaved",
        plan.workload.name,
        plan.build.name,
        plan.load_line(),
        counted(u64::from(repeats), "repeat")
    ));
    let measured = bench::interleave(&configs, repeats, interrupts, |i, r, config| {
        step(&format!("repeat {} of {repeats}: {}", r + 1, config.label));
        let out = dir.path().join(format!("{}-{i}", r + 1));
        overhead::measure(&plan, tools, config, &out, interrupts)
    });
    let samples = match measured {
        Ok(samples) => samples,
        Err(failure) => {
            eprint!("{}", failure.render());
            eprintln!("the runs' files are kept in {}", dir.keep().display());
            return Ok(failure.code);
        }
    };
    let complete = samples.complete();
    let rows: Vec<(String, Vec<overhead::Sample>)> = configs
        .iter()
        .map(|c| c.label.clone())
        .zip(samples.rows)
        .collect();
    if complete > 0 {
        print!(
            "{} ({}): {}, {seconds} s of load, {}, interleaved\n\n{}\n{}\n",
            plan.workload.name,
            plan.build.name,
            plan.load_line(),
            counted(complete as u64, "repeat"),
            overhead::table(&rows),
            overhead::NOTE
        );
    }
    if samples.interrupted {
        eprintln!("interrupted: {complete} of {repeats} repeats were complete");
        return Ok(2);
    }
    Ok(0)
}

/// `switchyard compare --a … --b … -o DIR`, its table on stdout or into `text`.
fn compare_runs(
    tools: &Tools,
    (a_label, a): (&str, &[PathBuf]),
    (b_label, b): (&str, &[PathBuf]),
    out: &Path,
    text: Option<&Path>,
) -> Result<ExitStatus, Failure> {
    let mut c = Command::new(tools.switchyard());
    c.arg("compare")
        .arg("--a")
        .args(a)
        .arg("--b")
        .args(b)
        .arg("--a-label")
        .arg(a_label)
        .arg("--b-label")
        .arg(b_label)
        .arg("-o")
        .arg(out);
    if let Some(text) = text {
        c.stdout(
            fs::File::create(text)
                .map_err(|e| Failure::io(format!("creating {}", text.display()), e))?,
        );
    }
    c.status()
        .map_err(|e| Failure::io(format!("running {}", tools.switchyard().display()), e))
}

/// After a run that Ctrl-C ended, the next one is not started.
fn stop_if_interrupted(outcome: runner::Outcome, dir: &Path) -> Result<(), Failure> {
    if outcome.interrupted {
        Err(Failure::new(format!(
            "interrupted; the runs so far are in {}",
            dir.display()
        ))
        .hint("start it again for the full set"))
    } else {
        Ok(())
    }
}

/// Runs `command` (switchyard record) in the foreground, forwarding an interrupt to it.
fn run_forwarding(mut command: Command, interrupts: &Interrupts) -> Result<ExitStatus, Failure> {
    let mut child = command.stdin(Stdio::null()).spawn().map_err(|e| {
        Failure::io(
            format!("running {}", command.get_program().to_string_lossy()),
            e,
        )
        .hint("build it first: `just build`")
    })?;
    let forwarding = interrupts.forward_to(child.id());
    let status = child
        .wait()
        .map_err(|e| Failure::io("waiting for switchyard record", e));
    drop(forwarding);
    status
}

/// `reports/latest` → `dir`, replaced atomically (a new link renamed over the old one).
fn point_latest(dir: &Path) -> Result<(), Failure> {
    let name = dir.file_name().unwrap_or(dir.as_os_str());
    let parent = dir.parent().unwrap_or(Path::new(REPORTS));
    let tmp = parent.join(format!(".latest-{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    std::os::unix::fs::symlink(name, &tmp)
        .and_then(|()| fs::rename(&tmp, parent.join("latest")))
        .map_err(|e| Failure::io(format!("pointing {REPORTS}/latest at {}", dir.display()), e))
}

/// Prints `file` on stdout, from its last line starting with `from` when given.
fn print_file(file: &Path, from: Option<&str>) {
    let Ok(text) = fs::read_to_string(file) else {
        return;
    };
    let start = match from {
        Some(prefix) => text
            .lines()
            .scan(0, |at, l| {
                let here = *at;
                *at += l.len() + 1;
                Some((here, l))
            })
            .filter(|(_, l)| l.starts_with(prefix))
            .last()
            .map(|(at, _)| at),
        None => Some(0),
    };
    if let Some(start) = start {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(&text.as_bytes()[start..]);
        let _ = stdout.flush();
    }
}

/// A line counting the seconds on a terminal while a run goes on; cleared when dropped.
struct Ticker {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Ticker {
    fn start(seconds: u64) -> Ticker {
        if !std::io::stderr().is_terminal() {
            return Ticker {
                stop: None,
                thread: None,
            };
        }
        let (tx, rx) = mpsc::channel::<()>();
        let began = Instant::now();
        let thread = thread::spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(Duration::from_secs(1))
            {
                eprint!(
                    "\r    {:3} s elapsed (load runs {seconds} s after start-up)",
                    began.elapsed().as_secs()
                );
            }
            eprint!("\r\x1b[K");
        });
        Ticker {
            stop: Some(tx),
            thread: Some(thread),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn parse_seconds(s: Option<&str>) -> Result<Option<u64>, Failure> {
    match s.filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => s.parse::<u64>().map(Some).map_err(|_| {
            Failure::new(format!("'{s}' is not a number of seconds"))
                .hint("give whole seconds, e.g. `just profile spinlock-broker abs 10`")
        }),
    }
}

fn create_dir(dir: &Path) -> Result<(), Failure> {
    fs::create_dir_all(dir).map_err(|e| Failure::io(format!("creating {}", dir.display()), e))
}

fn non_empty(file: &Path) -> bool {
    fs::metadata(file).is_ok_and(|m| m.len() > 0)
}

fn exit_code(status: i32) -> u8 {
    u8::try_from(status).unwrap_or(2)
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// CPUs this process may run on (as `nproc` counts them).
pub fn cores() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get())
}

/// The local time as `YYYYMMDD-HHMMSS`, for report directory names.
pub fn stamp() -> String {
    jiff::ZonedDateTime::now()
        .strftime("%Y%m%d-%H%M%S")
        .to_string()
}

/// Programs `bench-servers` runs, and the Debian package of each.
const SERVER_PACKAGES: [(&str, &str); 4] = [
    ("redis-server", "redis-server"),
    ("redis-benchmark", "redis-tools"),
    ("nginx", "nginx-light"),
    ("wrk", "wrk"),
];

/// Whether `program` is on PATH (or in /usr/sbin, where Debian puts nginx).
fn on_path(program: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .any(|d| d.join(program).is_file())
}

/// Installs the Debian packages of the programs missing, quietly.
fn install_missing(packages: &[(&str, &str)]) -> Result<(), Failure> {
    let missing: Vec<&str> = packages
        .iter()
        .filter(|(program, _)| !on_path(program))
        .map(|(_, package)| *package)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    step(&format!("installing {} (apt-get)", missing.join(" ")));
    let status = Command::new("apt-get")
        .args(["install", "-y", "-qq"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null())
        .status()
        .map_err(|e| Failure::io("running apt-get", e))?;
    if !status.success() {
        return Err(Failure::new(format!(
            "apt-get install {} failed ({status})",
            missing.join(" ")
        ))
        .hint("install them by hand, or run `apt-get update` first"));
    }
    Ok(())
}

/// `just bench-servers [REPEATS] [SECONDS]`: redis GET and SET, nginx and the spin-lock
/// broker, each untraced and under every condition of [`servers::conditions`], REPEATS
/// interleaved runs of about SECONDS each, then one table per server.
pub fn bench_servers(
    (repeats, seconds): (u32, u64),
    switchyard: Option<&Path>,
    cx: &Context<'_>,
) -> Result<u8, Failure> {
    let Context {
        tools,
        interrupts,
        as_build,
    } = *cx;
    if repeats == 0 || seconds == 0 {
        return Err(
            Failure::new("nothing to measure").hint("give REPEATS and SECONDS of 1 or more")
        );
    }
    bench::warn_of_bpf_stats();
    let switchyard = switchyard.map_or_else(|| tools.switchyard(), Path::to_path_buf);
    if !switchyard.is_file() {
        return Err(
            Failure::new(format!("no switchyard binary at {}", switchyard.display()))
                .hint("build it first (`just build`), or give another with --switchyard PATH"),
        );
    }
    install_missing(&SERVER_PACKAGES)?;
    install_missing(&[("bpftrace", "bpftrace"), ("perf", "linux-perf")])?;
    let broker = default_load("spinlock-broker", "", seconds, as_build)?;
    let dir = tempfile::Builder::new()
        .prefix("switchyard-servers-")
        .tempdir()
        .map_err(|e| Failure::io("creating a directory for the runs", e))?;
    let conditions = servers::conditions(&switchyard, &dir.path().join("perf.data"));
    // redis-benchmark runs a number of requests, not a time: sized from one untraced run.
    let sized = |test: &str| -> Result<u64, Failure> {
        let rps = servers::calibrate_redis(test, 20_000, &dir.path().join(format!("size-{test}")))?;
        Ok(((rps * seconds as f64) as u64).max(10_000))
    };
    let redis_requests = (sized("get")?, sized("set")?);
    let setup = servers::Setup {
        tools,
        broker: &broker,
        seconds,
        redis_requests,
        interrupts,
    };
    println!(
        "recorded by {}; {}, interleaved, each condition once per repeat in a rotated order; \
         redis-benchmark: {} GET and {} SET requests a run (about {seconds} s untraced); wrk and \
         the broker: {seconds} s a run\n",
        switchyard.display(),
        counted(u64::from(repeats), "repeat"),
        thousands(redis_requests.0),
        thousands(redis_requests.1),
    );
    for server in Server::ALL {
        let measured = bench::interleave(&conditions, repeats, interrupts, |i, r, c| {
            step(&format!(
                "{}, repeat {} of {repeats}: {}",
                server.name(),
                r + 1,
                c.label
            ));
            let out = dir.path().join(format!("{}-{}-{i}", server.name(), r + 1));
            servers::measure(server, c, &setup, &out)
        });
        let samples = match measured {
            Ok(samples) => samples,
            Err(failure) => {
                eprint!("{}", failure.render());
                eprintln!("the runs' files are kept in {}", dir.keep().display());
                return Ok(failure.code);
            }
        };
        let rows: Vec<(String, Vec<servers::Sample>)> = conditions
            .iter()
            .map(|c| c.label.clone())
            .zip(samples.rows.clone())
            .collect();
        if samples.complete() > 0 {
            println!(
                "{}\n\n{}",
                server.title(),
                servers::table(server.unit(), &rows)
            );
            if let Some(line) = servers::counted_line(&rows) {
                println!("{line}\n");
            }
        }
        if samples.interrupted {
            eprintln!("interrupted");
            return Ok(2);
        }
    }
    println!("{}", servers::NOTE);
    Ok(0)
}

/// The knobs `bench-overhead` runs with: the binaries checked, and every path absolute, as the
/// loops run under taskset and bpftrace -c.
fn absolute_knobs(knobs: &per_event::Knobs) -> Result<per_event::Knobs, Failure> {
    for (path, what) in [
        (&knobs.switchyard, "switchyard"),
        (&knobs.demo, "switchyard-demo"),
    ] {
        if !path.is_file() {
            return Err(Failure::new(format!("no {what} at {}", path.display()))
                .hint("build first: `just build`"));
        }
    }
    let absolute = |p: &Path| fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    Ok(per_event::Knobs {
        switchyard: absolute(&knobs.switchyard),
        demo: absolute(&knobs.demo),
        py_script: absolute(&knobs.py_script),
        // Built into at each run, so it may not exist yet.
        span_dir: std::path::absolute(&knobs.span_dir).unwrap_or_else(|_| knobs.span_dir.clone()),
        ..knobs.clone()
    })
}

/// The rows of the sections asked for, each marked when this build or host cannot run it;
/// says so when the build has no `switchyard floor`.
fn overhead_rows(knobs: &per_event::Knobs) -> Result<Vec<per_event::Row>, Failure> {
    let help = per_event::record_help(&knobs.switchyard)?;
    let floor = per_event::has_floor(&knobs.switchyard);
    let mut rows = per_event::rows(knobs, &help, floor, on_path("perf"));
    if !knobs.sections.is_empty() {
        rows.retain(|r| knobs.sections.contains(&r.section));
    }
    if !floor {
        println!(
            "note: `{} floor --help` failed (this build has no `switchyard floor`): the floor \
             rows are skipped\n",
            knobs.switchyard.display()
        );
    }
    Ok(rows)
}

/// Builds the span loops when a span row is asked for, and marks the rows of a loop that was
/// not built. The loops whose kernel programs to time: one native loop and the Go one, at
/// each rate, as built.
fn build_span_loops(knobs: &per_event::Knobs, rows: &mut [per_event::Row]) -> Vec<spans::Loop> {
    let mut program_loops = Vec::new();
    if !rows.iter().any(|r| r.section == per_event::Section::Span) {
        return program_loops;
    }
    step(&format!(
        "building the span loops in {}",
        knobs.span_dir.display()
    ));
    let built = spans::build(knobs);
    for (what, why) in [("native", &built.native), ("Go", &built.go)] {
        if let Some(why) = why {
            println!(
                "note: the {what} span loop was not built (needs {why}): its rows are skipped\n"
            );
        }
    }
    spans::mark_unbuilt(rows, &built);
    // The programs are the same whatever the entry instruction: one native loop.
    for (entry, why) in [
        (spans::Entry::Push, &built.native),
        (spans::Entry::Go, &built.go),
    ] {
        if why.is_none() {
            for &rate in &knobs.span_rates {
                program_loops.push(spans::Loop { entry, rate });
            }
        }
    }
    program_loops
}

/// The title of `section`'s table: what its loop does, pinned where, with `n` complete
/// repeats; the host-wide target runs on CPU `tcpu`.
fn section_title(
    section: per_event::Section,
    k: &per_event::Knobs,
    n: usize,
    tcpu: usize,
) -> String {
    match section {
        per_event::Section::Syscall => format!(
            "per syscall (getppid loop pinned to CPU {}, {} calls, median of {n})",
            k.cpu, k.calls
        ),
        per_event::Section::Switch => format!(
            "per context switch (pipe ping-pong pinned to CPU {}, {} round trips = 2 \
             switches each, median of {n})",
            k.cpu, k.rounds
        ),
        per_event::Section::HostWide => format!(
            "host-wide, per syscall of a process no one traces (getppid loop pinned to CPU \
             {}, {} calls, median of {n}) while a tool records another, T (a 100 ms sleep \
             over and over on CPU {tcpu})",
            k.cpu, k.calls
        ),
        per_event::Section::Sample => format!(
            "per on-CPU sample (a loop {} calls deep pinned to CPU {}, sampled at {} Hz, \
             median of {n})",
            k.depth, k.cpu, k.hz
        ),
        per_event::Section::PySwitch => format!(
            "per context switch of a Python target ({} ping-pong, {} round trips pinned to \
             CPU {}, median of {n})",
            k.python.display(),
            k.py_rounds,
            k.cpu
        ),
        per_event::Section::PySample => format!(
            "per on-CPU sample of a Python target ({}, {} iterations {} Python calls deep \
             pinned to CPU {}, sampled at {} Hz, median of {n})",
            k.python.display(),
            k.py_iters,
            k.depth,
            k.cpu,
            k.hz
        ),
        per_event::Section::Span => format!(
            "per span instance (a function called at a set rate by a loop pinned to CPU {}, \
             {} timed calls a run, median of {n})",
            k.cpu, k.span_calls
        ),
        per_event::Section::Start => unreachable!("not in this list"),
    }
}

/// Prints one table per section that has rows (`samples` beside `rows`, `n` complete
/// repeats), then how to read a cell.
fn print_tables(
    rows: &[per_event::Row],
    samples: &[Vec<f64>],
    k: &per_event::Knobs,
    n: usize,
    tcpu: usize,
) {
    for section in [
        per_event::Section::Syscall,
        per_event::Section::Switch,
        per_event::Section::HostWide,
        per_event::Section::Sample,
        per_event::Section::PySwitch,
        per_event::Section::PySample,
        per_event::Section::Span,
    ] {
        let title = section_title(section, k, n, tcpu);
        let pairs: Vec<(&per_event::Row, &[f64])> = rows
            .iter()
            .zip(samples)
            .filter(|(r, _)| r.section == section)
            .map(|(r, s)| (r, s.as_slice()))
            .collect();
        if pairs.is_empty() {
            continue;
        }
        println!(
            "{title}\n\n{}\n{}\n",
            per_event::table(section, k.hz, &pairs),
            per_event::note(section)
        );
    }
    println!(
        "Each cell: the median over the repeats, and for a ratio its min–max in brackets; a \
         ratio is taken within each repeat (added ns over the same repeat's base, over the \
         anchor's added ns in that repeat)."
    );
}

/// Measures and prints the tables that are not per-event rows: how long a short recording
/// takes, start to exit (when its section is asked for), and each span program's own run
/// time in the kernel (for `program_loops`).
fn print_start_and_programs(
    knobs: &per_event::Knobs,
    program_loops: &[spans::Loop],
    dir: &Path,
    interrupts: &Interrupts,
) {
    let start_wanted =
        knobs.sections.is_empty() || knobs.sections.contains(&per_event::Section::Start);
    if start_wanted {
        match per_event::start::run(knobs, on_path("perf"), dir, interrupts, step) {
            Ok(text) => println!(
                "\nhow long a short recording takes, start to exit (median of {})\n\n{text}\n{}",
                knobs.repeats,
                per_event::note(per_event::Section::Start)
            ),
            Err(failure) => eprint!("{}", failure.render()),
        }
    }
    if !program_loops.is_empty() {
        match per_event::programs::run(knobs, program_loops, dir, step) {
            Ok(text) => println!(
                "\nper span instance, in the kernel: each program's own run time (median of \
                 {})\n\n{text}",
                knobs.repeats
            ),
            Err(failure) => eprint!("{}", failure.render()),
        }
    }
}

/// `just bench-overhead`: what switchyard adds per syscall, per context switch, host-wide, per
/// on-CPU sample and per span instance, next to bpftrace, perf trace and the true floor
/// (`switchyard floor`), the runs interleaved, then one table per section.
pub fn bench_overhead(knobs: &per_event::Knobs, cx: &Context<'_>) -> Result<u8, Failure> {
    let interrupts = cx.interrupts;
    if knobs.repeats == 0 {
        return Err(Failure::new("REPEATS 0: nothing to measure").hint("give 1 or more"));
    }
    install_missing(&[("bpftrace", "bpftrace")])?;
    bench::warn_of_bpf_stats();
    let knobs = absolute_knobs(knobs)?;
    let mut rows = overhead_rows(&knobs)?;
    let program_loops = build_span_loops(&knobs, &mut rows);
    let tcpu = per_event::other_cpu(knobs.cpu);
    let target = per_event::Target::start(&knobs, tcpu)?;
    let dir = tempfile::Builder::new()
        .prefix("switchyard-bench-overhead-")
        .tempdir()
        .map_err(|e| Failure::io("creating a directory for the runs", e))?;
    step(&format!(
        "{} configurations, {}, interleaved",
        per_event::runnable(&rows).len(),
        counted(u64::from(knobs.repeats), "repeat")
    ));
    let measured = per_event::run_all(&rows, &knobs, target.pid(), dir.path(), interrupts, step);
    drop(target);
    let (samples, interrupted) = match measured {
        Ok(m) => m,
        Err(failure) => {
            eprint!("{}", failure.render());
            eprintln!("the runs' files are kept in {}", dir.keep().display());
            return Ok(failure.code);
        }
    };
    let complete = samples
        .iter()
        .filter(|s| !s.is_empty())
        .map(Vec::len)
        .min()
        .unwrap_or(0);
    print_tables(&rows, &samples, &knobs, complete, tcpu);
    if interrupted {
        eprintln!(
            "interrupted: {complete} of {} repeats were complete",
            knobs.repeats
        );
        return Ok(2);
    }
    print_start_and_programs(&knobs, &program_loops, dir.path(), interrupts);
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A story recorded whole replaces the committed one's configurations, table and chart,
    /// and nothing else: the README and the folders of other stories beside them stay.
    #[test]
    fn a_committed_story_is_replaced_whole_and_only_its_own_files() {
        let dir = tempfile::tempdir().unwrap();
        let story = story::relay();
        let committed = dir.path().join("relay");
        let incoming = dir.path().join("relay.incoming");
        let write = |path: PathBuf, text: &str| {
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        };
        let first = &story.configs[0].dir;
        write(committed.join("README.md"), "the story");
        write(committed.join("other/table.md"), "another story");
        write(committed.join(first).join("threads-1/run.slim.json"), "old");
        write(
            committed.join(first).join("threads-3/run.slim.json"),
            "old, gone",
        );
        write(committed.join("table.md"), "old table");
        write(committed.join("chart.svg"), "old chart");
        write(incoming.join(first).join("threads-1/run.slim.json"), "new");
        write(incoming.join("table.md"), "new table");
        write(incoming.join("chart.svg"), "new chart");
        install(&story, &incoming, &committed).unwrap();
        let read = |p: &str| fs::read_to_string(committed.join(p)).unwrap();
        assert_eq!(read("README.md"), "the story");
        assert_eq!(read("other/table.md"), "another story");
        assert_eq!(read(&format!("{first}/threads-1/run.slim.json")), "new");
        assert!(!committed.join(first).join("threads-3").exists());
        assert_eq!(read("table.md"), "new table");
        assert_eq!(read("chart.svg"), "new chart");
        assert!(!incoming.exists());
        let left: Vec<_> = fs::read_dir(&committed)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".replaced"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
