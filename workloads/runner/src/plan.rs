//! One workload run, validated before anything starts: the workload and build from the
//! catalogue, every knob of its load resolved (given, else its environment variable, else the
//! default), the label the driver records and the seconds of load.

use std::collections::BTreeMap;

use crate::catalogue::{self, Build, DEFAULT_SECONDS, KnobDefault, KnobKind, RUN_VALUES, Workload};

/// Why a run was refused before it started.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("unknown workload '{0}'")]
    UnknownWorkload(String),
    #[error("{workload} has no build '{build}'")]
    UnknownBuild {
        workload: &'static str,
        build: String,
    },
    #[error("{workload} has no load '{name}'")]
    UnknownKnob {
        workload: &'static str,
        name: String,
    },
    #[error("load '{0}' is not NAME=VALUE")]
    NotAKnob(String),
    #[error("{name}={value}: not a whole number")]
    NotACount { name: &'static str, value: String },
    #[error("{name}={value}: not a duration")]
    NotADuration { name: &'static str, value: String },
    #[error("{name}={value}: not a flush policy")]
    NotAFlush { name: &'static str, value: String },
    #[error("--seconds 0: the load must run for at least a second")]
    NoSeconds,
}

impl PlanError {
    /// The next step for the user.
    pub fn hint(&self) -> String {
        match self {
            PlanError::UnknownWorkload(_) => {
                format!("one of: {}", catalogue::workload_names().join(", "))
            }
            PlanError::UnknownBuild { workload, .. } => {
                let w = catalogue::workload(workload);
                format!(
                    "one of: {}",
                    w.map(|w| w.build_names().join(", ")).unwrap_or_default()
                )
            }
            PlanError::UnknownKnob { workload, .. } => match catalogue::workload(workload) {
                Some(w) => format!("{} takes {}", w.name, knob_usage(w)),
                None => String::new(),
            },
            PlanError::NotAKnob(_) => "give each load as NAME=VALUE, e.g. producers=8".into(),
            PlanError::NotACount { .. } => "give a whole number, e.g. 8".into(),
            PlanError::NotADuration { .. } => "give a duration such as 2s or 500ms".into(),
            PlanError::NotAFlush { .. } => {
                "give never, every:N (N ≥ 1, e.g. every:1) or interval:MS (e.g. interval:10)".into()
            }
            PlanError::NoSeconds => "give --seconds 1 or more".into(),
        }
    }
}

/// `producers=N (producer connections; default: one per CPU), …`
pub fn knob_usage(w: &Workload) -> String {
    w.knobs
        .iter()
        .map(|k| {
            let default = match k.default {
                KnobDefault::Fixed(v) => v.to_string(),
                KnobDefault::Cores => "one per CPU".into(),
            };
            let env = k.env.map(|e| format!(", or {e}=")).unwrap_or_default();
            let value = match k.kind {
                KnobKind::Count => "N",
                KnobKind::Duration => "DURATION",
                KnobKind::Flush => "never|every:N|interval:MS",
            };
            format!("{}={value} ({}; default {default}{env})", k.name, k.about)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A run, ready to start.
#[derive(Debug, Clone)]
pub struct Plan {
    pub workload: &'static Workload,
    pub build: &'static Build,
    /// The build name the driver records (`--as-build`, to check that budgets catch a
    /// regression), else the build's own.
    pub label: String,
    pub seconds: u64,
    /// Every knob of the workload, resolved.
    pub knobs: BTreeMap<&'static str, String>,
}

/// What a run is asked for, before validation.
#[derive(Debug, Default, Clone)]
pub struct Request<'a> {
    pub workload: &'a str,
    /// Empty: the workload's default build.
    pub build: &'a str,
    /// `NAME=VALUE`; an empty value takes the default.
    pub knobs: &'a [String],
    pub seconds: Option<u64>,
    pub as_build: Option<&'a str>,
}

impl Plan {
    /// Validates `req`; `env` reads an environment variable and `cores` is the CPU count
    /// (both given, so tests do not depend on the host).
    pub fn new(
        req: &Request<'_>,
        env: impl Fn(&str) -> Option<String>,
        cores: usize,
    ) -> Result<Plan, PlanError> {
        let workload = catalogue::workload(req.workload)
            .ok_or_else(|| PlanError::UnknownWorkload(req.workload.to_string()))?;
        let build_name = if req.build.is_empty() {
            workload.default_build
        } else {
            req.build
        };
        let build = workload
            .build(build_name)
            .ok_or_else(|| PlanError::UnknownBuild {
                workload: workload.name,
                build: build_name.to_string(),
            })?;
        let mut given = BTreeMap::new();
        for k in req.knobs {
            let (name, value) = k
                .split_once('=')
                .ok_or_else(|| PlanError::NotAKnob(k.clone()))?;
            let knob = workload.knob(name).ok_or_else(|| PlanError::UnknownKnob {
                workload: workload.name,
                name: name.to_string(),
            })?;
            if !value.is_empty() {
                given.insert(knob.name, value.to_string());
            }
        }
        let mut knobs = BTreeMap::new();
        for k in workload.knobs {
            let value = given
                .remove(k.name)
                .or_else(|| k.env.and_then(&env).filter(|v| !v.is_empty()))
                .unwrap_or_else(|| match k.default {
                    KnobDefault::Fixed(v) => v.to_string(),
                    KnobDefault::Cores => cores.max(1).to_string(),
                });
            let ok = match k.kind {
                KnobKind::Count => value.parse::<u64>().is_ok(),
                KnobKind::Duration => switchyard_harness::parse_duration(&value).is_ok(),
                KnobKind::Flush => is_flush_policy(&value),
            };
            if !ok {
                return Err(match k.kind {
                    KnobKind::Flush => PlanError::NotAFlush {
                        name: k.name,
                        value,
                    },
                    KnobKind::Count => PlanError::NotACount {
                        name: k.name,
                        value,
                    },
                    KnobKind::Duration => PlanError::NotADuration {
                        name: k.name,
                        value,
                    },
                });
            }
            knobs.insert(k.name, value);
        }
        let seconds = req.seconds.unwrap_or(DEFAULT_SECONDS);
        if seconds == 0 {
            return Err(PlanError::NoSeconds);
        }
        Ok(Plan {
            workload,
            build,
            label: req
                .as_build
                .filter(|b| !b.is_empty())
                .unwrap_or(build.name)
                .to_string(),
            seconds,
            knobs,
        })
    }

    /// The values templates are filled from: the knobs, and the run's own (`addr`, `result`
    /// and `scratch` as given).
    pub fn values(
        &self,
        addr: &str,
        result: &str,
        scratch: &str,
    ) -> BTreeMap<&'static str, String> {
        let mut v = self.knobs.clone();
        for (name, value) in RUN_VALUES.iter().zip([
            self.build.name.to_string(),
            self.label.clone(),
            addr.to_string(),
            self.seconds.to_string(),
            result.to_string(),
            scratch.to_string(),
        ]) {
            v.insert(name, value);
        }
        v
    }

    /// The load, in words (`8 producers, 2-byte messages`).
    pub fn load_line(&self) -> String {
        let v = self.values("", "", "");
        let mut line = fill(self.workload.load, &v);
        line.push_str(&fill(self.build.load_note, &v));
        line
    }
}

/// Whether `value` is a flush policy the broker takes (its `--flush`): `never`, `every:N` with
/// N ≥ 1, or `interval:` milliseconds or a duration, not zero.
fn is_flush_policy(value: &str) -> bool {
    if let Some(n) = value.strip_prefix("every:") {
        return n.parse::<u64>().is_ok_and(|n| n >= 1);
    }
    if let Some(t) = value.strip_prefix("interval:") {
        return t.parse::<u64>().is_ok_and(|ms| ms > 0)
            || switchyard_harness::parse_duration(t).is_ok_and(|d| !d.is_zero());
    }
    value == "never"
}

/// `template` with each `{name}` replaced by its value; unknown names are left as they are
/// (a test checks that every catalogue template fills completely).
pub fn fill(template: &str, values: &BTreeMap<&'static str, String>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if values.contains_key(&after[..close]) => {
                out.push_str(&values[&after[..close]]);
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A command template filled word by word.
pub fn fill_words(words: &[&str], values: &BTreeMap<&'static str, String>) -> Vec<String> {
    words.iter().map(|w| fill(w, values)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(req: Request<'_>) -> Result<Plan, PlanError> {
        Plan::new(&req, |_| None, 2)
    }

    fn req<'a>(workload: &'a str, build: &'a str, knobs: &'a [String]) -> Request<'a> {
        Request {
            workload,
            build,
            knobs,
            ..Request::default()
        }
    }

    #[test]
    fn unknown_workload_names_the_catalogue() {
        let e = plan(req("spinlock", "abs", &[])).unwrap_err();
        assert_eq!(e.to_string(), "unknown workload 'spinlock'");
        assert_eq!(
            e.hint(),
            "one of: spinlock-broker, mmsg-relay, read-state-cache, asset-server"
        );
    }

    #[test]
    fn unknown_build_names_the_workloads_builds() {
        let e = plan(req("mmsg-relay", "epoll", &[])).unwrap_err();
        assert_eq!(e.to_string(), "mmsg-relay has no build 'epoll'");
        assert_eq!(e.hint(), "one of: threads, mmsg, lite");
        let e = plan(req("read-state-cache", "java", &[])).unwrap_err();
        assert_eq!(e.hint(), "one of: go, rust");
    }

    #[test]
    fn knobs_are_checked_by_name_and_value() {
        let e = plan(req("spinlock-broker", "spin", &["rate=5".into()])).unwrap_err();
        assert_eq!(e.to_string(), "spinlock-broker has no load 'rate'");
        assert!(
            e.hint().starts_with("spinlock-broker takes producers=N"),
            "{}",
            e.hint()
        );
        let e = plan(req("spinlock-broker", "spin", &["producers".into()])).unwrap_err();
        assert_eq!(e, PlanError::NotAKnob("producers".into()));
        let e = plan(req("spinlock-broker", "spin", &["size=big".into()])).unwrap_err();
        assert_eq!(e.to_string(), "size=big: not a whole number");
        let e = plan(req("read-state-cache", "go", &["gc-interval=often".into()])).unwrap_err();
        assert_eq!(e.to_string(), "gc-interval=often: not a duration");
        for bad in [
            "sync",
            "every:0",
            "every:",
            "interval:0",
            "interval:soon",
            "",
        ] {
            let knobs = [format!("flush={bad}")];
            let e = plan(req("spinlock-broker", "abs", &knobs));
            if bad.is_empty() {
                assert!(e.is_ok(), "an empty value takes the default");
            } else {
                assert_eq!(
                    e.unwrap_err().to_string(),
                    format!("flush={bad}: not a flush policy")
                );
            }
        }
        for good in ["never", "every:1", "every:64", "interval:10", "interval:2s"] {
            let knobs = [format!("flush={good}")];
            let p = plan(req("spinlock-broker", "abs", &knobs)).unwrap();
            assert_eq!(p.knobs["flush"], good);
        }
        let e = plan(Request {
            seconds: Some(0),
            ..req("mmsg-relay", "mmsg", &[])
        })
        .unwrap_err();
        assert_eq!(e, PlanError::NoSeconds);
    }

    #[test]
    fn defaults_env_and_given_values() {
        // The script's defaults: one producer per CPU, 2-byte messages, 3 s.
        let p = plan(req("spinlock-broker", "", &[])).unwrap();
        assert_eq!(p.build.name, "abs");
        assert_eq!(p.knobs["producers"], "2");
        assert_eq!(p.knobs["size"], "2");
        assert_eq!(p.seconds, 3);
        assert_eq!(p.load_line(), "2 producers, 2-byte messages");
        // An empty value takes the default; a given one wins over the environment.
        let knobs = ["capacity=500000".to_string(), "rate=".to_string()];
        let p = Plan::new(
            &req("read-state-cache", "go", &knobs),
            |name| match name {
                "GC_INTERVAL" => Some("1s".into()),
                "CAPACITY" => Some("7".into()),
                _ => None,
            },
            2,
        )
        .unwrap();
        assert_eq!(
            p.load_line(),
            "500000 read states (filled before recording), 20000 requests/s, miss latency 0s, a GC forced every 1s, GOGC 100"
        );
        let rust = plan(req("read-state-cache", "rust", &[])).unwrap();
        assert_eq!(
            rust.load_line(),
            "2000000 read states (filled before recording), 20000 requests/s, miss latency 0s"
        );
    }

    #[test]
    fn commands_are_filled_from_the_plan() {
        let p = plan(Request {
            as_build: Some("abs"),
            seconds: Some(2),
            ..req("spinlock-broker", "spin", &["producers=8".into()])
        })
        .unwrap();
        let v = p.values("127.0.0.1:4000", "out/result.json", "/tmp/log");
        assert_eq!(
            fill_words(p.build.server, &v).join(" "),
            "spinlock-broker --lock spin --flush never --exit-after-idle 300 --dir /tmp/log"
        );
        assert_eq!(
            fill_words(p.workload.driver, &v).join(" "),
            "spinlock-broker-driver --addr 127.0.0.1:4000 --producers 8 --size 2 --duration 2s --drop-at 0s --drop-to 1 --drop-think 0s --build abs --out out/result.json"
        );
        assert_eq!(p.build.spans[0].arg(), "acquire=broker_spin_acquire");
        let knobs = ["k=100".to_string(), "flush=every:1".to_string()];
        let fixed = plan(req("spinlock-broker", "fixed", &knobs)).unwrap();
        let v = fixed.values("127.0.0.1:4000", "out/result.json", "/tmp/log");
        assert_eq!(
            fill_words(fixed.build.server, &v).join(" "),
            "spinlock-broker --lock fixed --spin-k 100 --flush every:1 --exit-after-idle 300 --dir /tmp/log"
        );
        assert_eq!(fixed.load_line(), "2 producers, 2-byte messages, k = 100");
        assert_eq!(fixed.build.spans[0].arg(), "acquire=broker_fixed_acquire");
    }

    #[test]
    fn fill_leaves_unknown_names() {
        let v = BTreeMap::from([("a", "1".to_string())]);
        assert_eq!(fill("{a}-{b}-{a}", &v), "1-{b}-1");
        assert_eq!(fill("{", &v), "{");
    }
}
