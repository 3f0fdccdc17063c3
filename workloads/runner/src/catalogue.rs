//! The workload catalogue: every workload, its builds, its load and how switchyard records it.
//!
//! Commands are templates: each word is literal text with `{name}` placeholders, filled from
//! the load's knobs and the run's own values (see [`RUN_VALUES`]). Programs are file names in
//! the directory of built binaries (`target/release`).

/// How switchyard reaches the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attach {
    /// `switchyard record -- SERVER`: recorded from exec; the server exits once the driver
    /// has gone, and the recording ends with it.
    Spawn,
    /// The server starts on its own, the prefill command fills it, and only then does
    /// `switchyard record --pid` attach, for the steady state the driver measures; the
    /// recording is ended with SIGINT once the driver is done, then the server with SIGTERM.
    AfterPrefill,
}

/// A function timed from entry to return (`record --uprobe-span LABEL=SYMBOL`); the symbol is
/// a `#[no_mangle]` function of the server binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub label: &'static str,
    pub symbol: &'static str,
}

/// One build of a workload: the server it runs and what switchyard records of it.
#[derive(Debug)]
pub struct Build {
    pub name: &'static str,
    /// Program and arguments.
    pub server: &'static [&'static str],
    /// The cargo package that builds the server (`None`: built by `go build`, see the justfile).
    pub package: Option<&'static str>,
    pub spans: &'static [Span],
    /// Further `switchyard record` flags.
    pub record_flags: &'static [&'static str],
    /// Appended to the workload's load line.
    pub load_note: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KnobKind {
    /// A whole number.
    Count,
    /// A duration such as `2s` or `500ms`.
    Duration,
    /// The broker's flush policy: `never`, `every:N` or `interval:MS` (or `interval:2s`).
    Flush,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KnobDefault {
    Fixed(&'static str),
    /// One per CPU.
    Cores,
}

/// A load parameter: `name=value` on the command line, else the environment variable, else
/// the default.
#[derive(Debug)]
pub struct Knob {
    pub name: &'static str,
    pub kind: KnobKind,
    pub default: KnobDefault,
    pub env: Option<&'static str>,
    pub about: &'static str,
}

#[derive(Debug)]
pub struct Workload {
    pub name: &'static str,
    pub about: &'static str,
    pub builds: &'static [Build],
    /// The build `profile` takes when none is named.
    pub default_build: &'static str,
    pub knobs: &'static [Knob],
    /// What the load is, printed as a run starts.
    pub load: &'static str,
    pub attach: Attach,
    /// Program and arguments run before switchyard attaches ([`Attach::AfterPrefill`]).
    pub prefill: Option<&'static [&'static str]>,
    /// Program and arguments run before the server starts, unrecorded (e.g. generating the
    /// files it serves).
    pub setup: Option<&'static [&'static str]>,
    pub driver: &'static [&'static str],
}

/// Placeholders every run fills besides the knobs: the build name, the label the driver
/// records (`--as-build`, else the build), the server's address, the load's seconds, the
/// driver result file and a scratch directory removed after the run.
pub const RUN_VALUES: &[&str] = &["build", "label", "addr", "seconds", "result", "scratch"];

/// Seconds of load when none is given.
pub const DEFAULT_SECONDS: u64 = 3;

const GC_INTERVAL: Knob = Knob {
    name: "gc-interval",
    kind: KnobKind::Duration,
    default: KnobDefault::Fixed("2s"),
    env: Some("GC_INTERVAL"),
    about: "a Go GC cycle forced this often, so a short run shows collections; the runtime forces one every 2 minutes",
};

pub const WORKLOADS: &[Workload] = &[
    Workload {
        name: "spinlock-broker",
        about: "a broker appending to a commit log under one lock: spin lock, futex mutex, adaptive backoff spin lock",
        builds: &[
            broker_build(
                "spin",
                &[Span {
                    label: "acquire",
                    symbol: "broker_spin_acquire",
                }],
            ),
            broker_build(
                "mutex",
                &[Span {
                    label: "acquire",
                    symbol: "broker_mutex_acquire",
                }],
            ),
            broker_build(
                "abs",
                &[Span {
                    label: "acquire",
                    symbol: "broker_abs_acquire",
                }],
            ),
            Build {
                name: "fixed",
                server: &[
                    "spinlock-broker",
                    "--lock",
                    "fixed",
                    "--spin-k",
                    "{k}",
                    "--flush",
                    "{flush}",
                    "--exit-after-idle",
                    "300",
                    "--dir",
                    "{scratch}",
                ],
                package: Some("spinlock-broker"),
                spans: &[Span {
                    label: "acquire",
                    symbol: "broker_fixed_acquire",
                }],
                record_flags: &[],
                load_note: ", k = {k}",
            },
        ],
        default_build: "abs",
        knobs: &[
            Knob {
                name: "producers",
                kind: KnobKind::Count,
                default: KnobDefault::Cores,
                env: None,
                about: "producer connections",
            },
            Knob {
                name: "size",
                kind: KnobKind::Count,
                default: KnobDefault::Fixed("2"),
                env: None,
                about: "message payload, bytes",
            },
            Knob {
                name: "k",
                kind: KnobKind::Count,
                default: KnobDefault::Fixed("1000"),
                env: None,
                about: "attempts per spin round of the fixed build, a yield after each failed round",
            },
            Knob {
                name: "flush",
                kind: KnobKind::Flush,
                default: KnobDefault::Fixed("never"),
                env: None,
                about: "when the commit log is forced to disk: never, every:N messages or interval:MS",
            },
            Knob {
                name: "drop-at",
                kind: KnobKind::Duration,
                default: KnobDefault::Fixed("0s"),
                env: None,
                about: "how far into the run the producers beyond drop-to stop (0s: never)",
            },
            Knob {
                name: "drop-to",
                kind: KnobKind::Count,
                default: KnobDefault::Fixed("1"),
                env: None,
                about: "producers that keep sending after drop-at",
            },
            Knob {
                name: "drop-think",
                kind: KnobKind::Duration,
                default: KnobDefault::Fixed("0s"),
                env: None,
                about: "how long the producers left after drop-at wait after each ack (0s: not at all)",
            },
        ],
        load: "{producers} producers, {size}-byte messages",
        attach: Attach::Spawn,
        prefill: None,
        setup: None,
        driver: &[
            "spinlock-broker-driver",
            "--addr",
            "{addr}",
            "--producers",
            "{producers}",
            "--size",
            "{size}",
            "--duration",
            "{seconds}s",
            "--drop-at",
            "{drop-at}",
            "--drop-to",
            "{drop-to}",
            "--drop-think",
            "{drop-think}",
            "--build",
            "{label}",
            "--out",
            "{result}",
        ],
    },
    Workload {
        name: "mmsg-relay",
        about: "a voice relay on UDP: a recv and a send per packet on threads, recvmmsg/sendmmsg batching, or small batches sent as one bundle per destination",
        builds: &[
            relay_build("threads"),
            relay_build("mmsg"),
            relay_build("lite"),
        ],
        default_build: "mmsg",
        knobs: &[
            Knob {
                name: "speakers",
                kind: KnobKind::Count,
                default: KnobDefault::Fixed("9"),
                env: None,
                about: "speakers per room",
            },
            Knob {
                name: "rooms",
                kind: KnobKind::Count,
                default: KnobDefault::Fixed("10"),
                env: None,
                about: "rooms",
            },
        ],
        load: "{rooms} rooms of {speakers} speakers",
        attach: Attach::Spawn,
        prefill: None,
        setup: None,
        driver: &[
            "mmsg-relay-driver",
            "--addr",
            "{addr}",
            "--rooms",
            "{rooms}",
            "--speakers",
            "{speakers}",
            "--duration",
            "{seconds}s",
            "--build",
            "{label}",
            "--out",
            "{result}",
        ],
    },
    Workload {
        name: "read-state-cache",
        about: "an LRU of read states written behind to a store: Go with its GC, or Rust",
        builds: &[
            Build {
                name: "go",
                server: &[
                    "read-state-cache-go",
                    "--capacity",
                    "{capacity}",
                    "--gc-interval",
                    "{gc-interval}",
                    "--gogc",
                    "{gogc}",
                    "--miss-latency",
                    "{miss-latency}",
                ],
                package: None,
                // One request's work: decode, the cache (its shard's lock), encode.
                spans: &[Span {
                    label: "respond",
                    symbol: "main.(*server).respond",
                }],
                record_flags: &["--go-gc", "--stack-map-size", "65536"],
                load_note: ", a GC forced every {gc-interval}, GOGC {gogc}",
            },
            Build {
                name: "rust",
                server: &[
                    "read-state-cache",
                    "--capacity",
                    "{capacity}",
                    "--miss-latency",
                    "{miss-latency}",
                ],
                package: Some("read-state-cache"),
                spans: &[Span {
                    label: "respond",
                    symbol: "read_state_cache::server::Shared::respond",
                }],
                record_flags: &[],
                load_note: "",
            },
        ],
        default_build: "go",
        knobs: &[
            Knob {
                name: "capacity",
                kind: KnobKind::Count,
                default: KnobDefault::Fixed("2000000"),
                env: Some("CAPACITY"),
                about: "read states cached, filled before recording",
            },
            Knob {
                name: "rate",
                kind: KnobKind::Count,
                default: KnobDefault::Fixed("20000"),
                env: Some("RATE"),
                about: "requests per second",
            },
            GC_INTERVAL,
            Knob {
                name: "gogc",
                kind: KnobKind::Count,
                default: KnobDefault::Fixed("100"),
                env: Some("GOGC"),
                about: "the Go build's GC percentage (GOGC); the Rust build has no collector",
            },
            Knob {
                name: "miss-latency",
                kind: KnobKind::Duration,
                default: KnobDefault::Fixed("0s"),
                env: Some("MISS_LATENCY"),
                about: "how long the answer to a cache miss waits, as a database read would; 0s: at once",
            },
        ],
        load: "{capacity} read states (filled before recording), {rate} requests/s, miss latency {miss-latency}",
        // Filling the cache (millions of inserts, and the Go heap growing to hold them) is
        // set-up, not the story.
        attach: Attach::AfterPrefill,
        prefill: Some(&[
            "read-state-cache-driver",
            "--addr",
            "{addr}",
            "--connections",
            "4",
            "--channels-per-user",
            "4",
            "--prefill-only",
            "--capacity",
            "{capacity}",
        ]),
        setup: None,
        driver: &[
            "read-state-cache-driver",
            "--addr",
            "{addr}",
            "--rate",
            "{rate}",
            "--connections",
            "4",
            "--duration",
            "{seconds}s",
            "--users",
            "1000000",
            "--channels-per-user",
            "4",
            "--zipf",
            "1.1",
            "--capacity",
            "{capacity}",
            "--build",
            "{label}",
            "--out",
            "{result}",
        ],
    },
    Workload {
        name: "asset-server",
        about: "a 3D-model asset server: parse, relicense, compress, encrypt and stream 5-40 MiB GLBs; Node.js + gzip, Rust + gzip, Rust + zstd",
        builds: &[
            asset_build(
                "node-gzip",
                &["asset-server-node", "--exit-after-idle", "300"],
                None,
            ),
            asset_build(
                "rust-gzip",
                &[
                    "asset-server",
                    "--codec",
                    "gzip",
                    "--exit-after-idle",
                    "300",
                ],
                Some("asset-server"),
            ),
            asset_build(
                "rust-zstd",
                &[
                    "asset-server",
                    "--codec",
                    "zstd",
                    "--exit-after-idle",
                    "300",
                ],
                Some("asset-server"),
            ),
        ],
        default_build: "rust-zstd",
        knobs: &[
            Knob {
                name: "rate",
                kind: KnobKind::Count,
                default: KnobDefault::Fixed("2"),
                env: None,
                about: "requests per second (open loop), the six models in turn",
            },
            Knob {
                name: "connections",
                kind: KnobKind::Count,
                default: KnobDefault::Fixed("4"),
                env: None,
                about: "keep-alive connections of the open loop",
            },
            Knob {
                name: "concurrency",
                kind: KnobKind::Count,
                default: KnobDefault::Fixed("0"),
                env: None,
                about: "downloads always in flight, each on its own connection (closed loop, rate and connections unused); 0: the open loop at rate",
            },
            Knob {
                name: "requests",
                kind: KnobKind::Count,
                default: KnobDefault::Fixed("0"),
                env: None,
                about: "requests in all, whatever the seconds; 0: as many as the seconds take",
            },
        ],
        load: "5-40 MiB models: {rate} requests/s over {connections} connections, or {concurrency} in flight when above 0; {requests} requests (0: for the seconds)",
        attach: Attach::Spawn,
        prefill: None,
        // The models, generated once into target/asset-models (about 10 s), never while
        // recording.
        setup: Some(&["asset-models"]),
        driver: &[
            "asset-server-driver",
            "--addr",
            "{addr}",
            "--rate",
            "{rate}",
            "--connections",
            "{connections}",
            "--concurrency",
            "{concurrency}",
            "--requests",
            "{requests}",
            "--duration",
            "{seconds}s",
            "--build",
            "{label}",
            "--out",
            "{result}",
        ],
    },
];

/// An asset-server build served by `program` (`asset-server` or `asset-server-node`).
const fn asset_build(
    name: &'static str,
    server: &'static [&'static str],
    package: Option<&'static str>,
) -> Build {
    Build {
        name,
        server,
        package,
        spans: &[],
        record_flags: &[],
        load_note: "",
    }
}

/// A broker build; `spans` times the lock's acquire function (entry to return).
const fn broker_build(name: &'static str, spans: &'static [Span]) -> Build {
    Build {
        name,
        server: &[
            "spinlock-broker",
            "--lock",
            "{build}",
            "--flush",
            "{flush}",
            "--exit-after-idle",
            "300",
            // The commit log is scratch: kept out of the report directory.
            "--dir",
            "{scratch}",
        ],
        package: Some("spinlock-broker"),
        spans,
        record_flags: &[],
        load_note: "",
    }
}

const fn relay_build(name: &'static str) -> Build {
    Build {
        name,
        server: &[
            "mmsg-relay",
            "--mode",
            "{build}",
            "--exit-after-idle",
            "300",
        ],
        package: Some("mmsg-relay"),
        spans: &[],
        record_flags: &[],
        load_note: "",
    }
}

/// The workload called `name`.
pub fn workload(name: &str) -> Option<&'static Workload> {
    WORKLOADS.iter().find(|w| w.name == name)
}

/// The workload names, for hints.
pub fn workload_names() -> Vec<&'static str> {
    WORKLOADS.iter().map(|w| w.name).collect()
}

impl Workload {
    pub fn build(&self, name: &str) -> Option<&Build> {
        self.builds.iter().find(|b| b.name == name)
    }

    pub fn build_names(&self) -> Vec<&'static str> {
        self.builds.iter().map(|b| b.name).collect()
    }

    pub fn knob(&self, name: &str) -> Option<&Knob> {
        self.knobs.iter().find(|k| k.name == name)
    }
}

impl Span {
    /// The `--uprobe-span` argument.
    pub fn arg(&self) -> String {
        format!("{}={}", self.label, self.symbol)
    }
}
