//! `switchyard-workload`: profiles the catalogue's workloads under load, compares builds and
//! prints the story tables. The `just` recipes call it; see `switchyard-workload --help`.

use std::{
    io::{self, Write as _},
    path::PathBuf,
    process::ExitCode,
};

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use switchyard_workloads::{
    Failure, Interrupts, Plan, Request, Tools,
    catalogue::{self, Attach},
    per_event,
    plan::knob_usage,
    recipes::{self, Context},
    runner, story,
};

#[derive(Debug, Parser)]
#[command(name = "switchyard-workload", version, about)]
struct Cli {
    /// Where the built binaries are [default: this program's directory].
    #[arg(long, global = true, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    /// Record the drivers' results under this build name instead (to check that budgets catch
    /// a regression: a spin lock labelled as abs must fail the abs budgets).
    #[arg(long, global = true, env = "AS_BUILD", value_name = "BUILD")]
    as_build: Option<String>,
    /// Serve the Rust builds from their `dhat` feature's binaries (built under target/dhat)
    /// and attach each server's heap profile to its run: allocations and bytes per operation,
    /// peak heap, allocation sites. Allocation-heavy servers run slower under it.
    #[arg(long, global = true, env = "HEAP", value_parser = clap::builder::FalseyValueParser::new())]
    heap: bool,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// The catalogue: workloads, builds, loads and how each is recorded.
    List,
    /// One profiled run into OUT: run.json, result.json, the report, and every process's output.
    Run {
        workload: String,
        build: String,
        out: PathBuf,
        /// The load, as NAME=VALUE (`list` shows each workload's; an empty value takes the
        /// default).
        #[arg(value_name = "NAME=VALUE")]
        load: Vec<String>,
        /// Seconds of load.
        #[arg(long, default_value_t = catalogue::DEFAULT_SECONDS)]
        seconds: u64,
    },
    /// `just profile`: a workload build under load (default: spinlock-broker, abs, 5 s), the demo
    /// (`demo [KIND] [SECONDS]`) or a live process (`pid=N [SECONDS]`), into reports/.
    Profile {
        #[arg(default_value = "spinlock-broker")]
        workload: String,
        /// Empty: the workload's default build.
        #[arg(default_value = "")]
        build: String,
        seconds: Option<String>,
    },
    /// `just compare`: REPEATS runs of builds A and B (5: what a tail figure's verdict
    /// needs), then the comparison page.
    Compare {
        workload: String,
        a: String,
        b: String,
        #[arg(default_value_t = 5)]
        repeats: u32,
        #[arg(default_value_t = catalogue::DEFAULT_SECONDS)]
        seconds: u64,
    },
    /// `just bench-broker`: what recording costs a workload build (default: spinlock-broker,
    /// abs, default load): its throughput untraced and while each switchyard binary records it
    /// with default settings, REPEATS interleaved runs each, then a table of medians.
    Overhead {
        #[arg(default_value = "spinlock-broker")]
        workload: String,
        /// Empty: the workload's default build.
        #[arg(default_value = "")]
        build: String,
        #[arg(long, default_value_t = 5)]
        repeats: u32,
        /// Seconds of load in each run.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        /// A switchyard binary to record with; repeat it for a before and an after
        /// [default: the one in the bin directory].
        #[arg(long = "switchyard", value_name = "PATH")]
        switchyards: Vec<PathBuf>,
    },
    /// `just bench-servers`: how much slower redis (GET, SET), nginx and the spin-lock broker
    /// get while switchyard (three ways), perf record or bpftrace follows them: REPEATS
    /// interleaved runs of each condition, one table per server.
    BenchServers {
        #[arg(default_value_t = 3)]
        repeats: u32,
        /// Seconds of load in each run.
        #[arg(default_value_t = 5)]
        seconds: u64,
        /// The switchyard binary to record with [default: the one in the bin directory].
        #[arg(long, value_name = "PATH")]
        switchyard: Option<PathBuf>,
    },
    /// `just bench-overhead`: what switchyard adds per syscall, per context switch, host-wide,
    /// per on-CPU sample and per span instance, next to bpftrace, perf trace and the true floor
    /// (`switchyard floor`), REPEATS interleaved runs of each row, then a table per section.
    BenchOverhead(per_event::Knobs),
    /// A story (`switchyard-workload <STORY> [--repeats N] [--seconds S] [--redraw]
    /// [--commit]`): its runs, comparisons, table and chart; the stories are listed below.
    #[command(external_subcommand)]
    Story(Vec<String>),
    /// The asset server story's table of medians from its runs.
    AssetTable {
        #[arg(default_value = "reports/asset-server")]
        root: PathBuf,
    },
    /// The broker story's table of medians from its runs.
    BrokerTable {
        #[arg(default_value = "reports/spinlock-broker")]
        root: PathBuf,
    },
    /// The relay story's table of medians from its runs.
    RelayTable {
        #[arg(default_value = "reports/mmsg-relay")]
        root: PathBuf,
    },
}

fn main() -> ExitCode {
    let matches = Cli::command().after_help(stories_help()).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            // A closed stdout (`… | head`) has already ended the output; nothing to add.
            eprint!("{}", f.render());
            ExitCode::from(f.code)
        }
    }
}

fn run(cli: Cli) -> Result<u8, Failure> {
    let mut tools = cli
        .bin_dir
        .map(Tools::new)
        .unwrap_or_else(Tools::beside_current_exe);
    tools.heap = cli.heap;
    let as_build = cli.as_build.as_deref().filter(|b| !b.is_empty());
    let needs_signals = !matches!(
        cli.command,
        Cmd::List | Cmd::BrokerTable { .. } | Cmd::RelayTable { .. } | Cmd::AssetTable { .. }
    );
    let interrupts = if needs_signals {
        Interrupts::install().map_err(|e| Failure::io("installing the SIGINT handler", e))?
    } else {
        Interrupts::none()
    };
    let cx = Context {
        tools: &tools,
        interrupts: &interrupts,
        as_build,
    };
    match cli.command {
        Cmd::List => out(&list()),
        Cmd::Run {
            workload,
            build,
            out: dir,
            load,
            seconds,
        } => {
            let plan = Plan::new(
                &Request {
                    workload: &workload,
                    build: &build,
                    knobs: &load,
                    seconds: Some(seconds),
                    as_build,
                },
                |name| std::env::var(name).ok(),
                recipes::cores(),
            )?;
            let outcome = runner::run(&plan, &tools, &dir, &interrupts)?;
            out(&format!("{}\n", dir.display()))?;
            Ok(if outcome.interrupted { 2 } else { 0 })
        }
        Cmd::Profile {
            workload,
            build,
            seconds,
        } => recipes::profile(&workload, &build, seconds.as_deref(), &cx),
        Cmd::Compare {
            workload,
            a,
            b,
            repeats,
            seconds,
        } => recipes::compare(&workload, (&a, &b), repeats, seconds, &cx),
        Cmd::Overhead {
            workload,
            build,
            repeats,
            seconds,
            switchyards,
        } => recipes::overhead(&workload, &build, (repeats, seconds), &switchyards, &cx),
        Cmd::BenchServers {
            repeats,
            seconds,
            switchyard,
        } => recipes::bench_servers((repeats, seconds), switchyard.as_deref(), &cx),
        Cmd::BenchOverhead(knobs) => recipes::bench_overhead(&knobs, &cx),
        Cmd::Story(args) => story_command(&args, &cx),
        Cmd::AssetTable { root } => {
            let groups = story::load(&root, story::assets().builds)?;
            out(&story::asset_table(&groups))
        }
        Cmd::BrokerTable { root } => {
            let groups = story::load(&root, story::broker(1).builds)?;
            out(&story::broker_table(&groups))
        }
        Cmd::RelayTable { root } => {
            let groups = story::load(&root, story::relay().builds)?;
            out(&story::relay_table(&groups))
        }
    }
}

/// A story's flags; its defaults are the story's own.
#[derive(Debug, Parser)]
struct StoryArgs {
    /// Runs of each build in each configuration [default: the story's].
    #[arg(long, env = "REPEATS")]
    repeats: Option<u32>,
    /// Seconds of load in each run [default: the story's].
    #[arg(long, env = "RUN_SECONDS")]
    seconds: Option<u64>,
    /// Record nothing: redraw the table and chart from the runs already there (the committed
    /// `run.slim.json` files).
    #[arg(long)]
    redraw: bool,
    /// Record over the committed story, once the whole story is recorded; without it the runs,
    /// table and chart go to a new folder, reports/<story>-<time>/.
    #[arg(long)]
    commit: bool,
}

/// `switchyard-workload <STORY> …`: records the story named (or redraws it) with its defaults
/// unless flags say otherwise.
fn story_command(args: &[String], cx: &Context<'_>) -> Result<u8, Failure> {
    let name = args.first().map(String::as_str).unwrap_or_default();
    let Some(story) = story::named(name, recipes::cores()) else {
        return Err(
            Failure::new(format!("no command or story `{name}`")).hint(format!(
                "the stories: {}; `switchyard-workload --help` lists the commands",
                story::all(1)
                    .iter()
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        );
    };
    let flags = StoryArgs::command()
        .name(story.name)
        .about(story.about)
        .try_get_matches_from(args)
        .and_then(|m| StoryArgs::from_arg_matches(&m))
        .unwrap_or_else(|e| e.exit());
    if flags.redraw {
        return out(&recipes::render(&story)?);
    }
    recipes::story(
        &story,
        flags.repeats.unwrap_or(story.repeats),
        flags.seconds.unwrap_or(story.seconds),
        flags.commit,
        cx,
    )
}

/// The stories, for the end of `--help`: each one's command, defaults and what it shows.
fn stories_help() -> String {
    let mut out = String::from(
        "Stories (`just <STORY>` runs the same; each takes --repeats, --seconds, --redraw, --commit):\n",
    );
    for s in story::all(recipes::cores()) {
        out.push_str(&format!(
            "  {:<26} {} ({} run{} a build, {} s each)\n",
            s.name,
            s.about,
            s.repeats,
            if s.repeats == 1 { "" } else { "s" },
            s.seconds
        ));
    }
    out
}

/// The catalogue in words.
fn list() -> String {
    let mut s = String::new();
    for w in catalogue::WORKLOADS {
        s.push_str(&format!("{}: {}\n", w.name, w.about));
        let builds: Vec<String> = w
            .builds
            .iter()
            .map(|b| {
                if b.name == w.default_build {
                    format!("{} (default)", b.name)
                } else {
                    b.name.to_string()
                }
            })
            .collect();
        s.push_str(&format!("  builds: {}\n", builds.join(", ")));
        s.push_str(&format!("  load:   {}\n", knob_usage(w)));
        s.push_str(&format!(
            "  record: {}\n",
            match w.attach {
                Attach::Spawn => "spawned under switchyard",
                Attach::AfterPrefill => "attached (--pid) once the prefill has filled the server",
            }
        ));
        for b in w.builds {
            let mut flags: Vec<String> = b.record_flags.iter().map(|f| f.to_string()).collect();
            flags.extend(
                b.spans
                    .iter()
                    .map(|sp| format!("--uprobe-span {}", sp.arg())),
            );
            if !flags.is_empty() {
                s.push_str(&format!("    {}: {}\n", b.name, flags.join(" ")));
            }
        }
    }
    s
}

/// Writes to stdout; a closed pipe ends quietly with exit 0.
fn out(text: &str) -> Result<u8, Failure> {
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(0),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(Failure::io("writing to stdout", e)),
    }
}
