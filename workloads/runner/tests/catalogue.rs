//! The catalogue against what it names: every uprobe-span symbol is a function of the server
//! binary it is recorded from, and every command template fills completely.

use std::{collections::BTreeMap, path::PathBuf, process::Command};

use object::{Object as _, ObjectSymbol as _};
use switchyard_workloads::{
    catalogue::{self, RUN_VALUES, WORKLOADS},
    plan::{fill, fill_words},
};

/// Builds `bin` of `package` (nothing to do when it is fresh) and returns its path, as cargo
/// reports it.
#[track_caller]
fn built(package: &str, bin: &str) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(cargo)
        .current_dir(&root)
        .args(["build", "--quiet", "-p", package, "--bin", bin])
        .arg("--message-format=json")
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo build -p {package} --bin {bin} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == bin)
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo reported no executable for {bin}"))
}

/// Builds the Go server `bin` of `workload` (its `go/` folder) as the justfile does, into the
/// target directory's `catalogue-go/`.
#[track_caller]
fn built_go(workload: &str, bin: &str) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out_dir = root.join("target/catalogue-go");
    let out = out_dir.join(bin);
    let go = ["go", "/usr/local/go/bin/go"]
        .into_iter()
        .find(|g| {
            Command::new(g)
                .arg("version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("a Go toolchain (go on PATH, or /usr/local/go/bin/go), as `just build` needs");
    let status = Command::new(go)
        .current_dir(root.join("workloads").join(workload).join("go"))
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .env("GOTOOLCHAIN", "local")
        .status()
        .expect("go runs");
    assert!(status.success(), "go build of {workload}/go failed");
    out
}

#[test]
fn every_span_symbol_is_in_its_server_binary() {
    let mut checked = 0;
    for w in WORKLOADS {
        for b in w.builds {
            if b.spans.is_empty() {
                continue;
            }
            let path = match b.package {
                Some(package) => built(package, b.server[0]),
                None => built_go(w.name, b.server[0]),
            };
            let data = std::fs::read(&path).expect("binary readable");
            let file = object::File::parse(&*data).expect("an object file");
            // Rust's by their paths (demangled, without the hash), the others as they are.
            let names: std::collections::BTreeSet<String> = file
                .symbols()
                .chain(file.dynamic_symbols())
                .filter(|s| s.is_definition())
                .filter_map(|s| s.name().ok())
                .flat_map(|n| [n.to_string(), format!("{:#}", rustc_demangle::demangle(n))])
                .collect();
            for span in b.spans {
                assert!(
                    names.contains(span.symbol),
                    "{}/{}: `{}` is not a function of {} (renamed, or inlined away?)",
                    w.name,
                    b.name,
                    span.symbol,
                    path.display()
                );
                checked += 1;
            }
        }
    }
    assert!(
        checked >= 5,
        "the broker's three acquire spans and the cache's two respond spans are checked"
    );
}

#[test]
fn every_template_fills_completely() {
    for w in WORKLOADS {
        let mut values: BTreeMap<&'static str, String> =
            RUN_VALUES.iter().map(|n| (*n, format!("<{n}>"))).collect();
        for k in w.knobs {
            values.insert(k.name, format!("<{}>", k.name));
        }
        let mut templates: Vec<String> = vec![w.load.to_string()];
        templates.extend(fill_words(w.driver, &values));
        if let Some(p) = w.prefill {
            templates.extend(fill_words(p, &values));
        }
        for b in w.builds {
            templates.extend(fill_words(b.server, &values));
            templates.push(fill(b.load_note, &values));
        }
        for t in templates {
            let t = fill(&t, &values);
            assert!(
                !t.contains('{') && !t.contains('}'),
                "{}: `{t}` names an unknown value",
                w.name
            );
        }
        // Every knob reaches a command or the load line.
        for k in w.knobs {
            let used = w
                .driver
                .iter()
                .chain(w.prefill.unwrap_or(&[]))
                .chain(w.builds.iter().flat_map(|b| b.server.iter()))
                .any(|word| word.contains(&format!("{{{}}}", k.name)));
            assert!(used, "{}: knob {} is never used", w.name, k.name);
        }
    }
}

#[test]
fn default_builds_exist_and_names_are_unique() {
    let mut names = std::collections::BTreeSet::new();
    for w in WORKLOADS {
        assert!(names.insert(w.name), "{} listed twice", w.name);
        assert!(
            w.build(w.default_build).is_some(),
            "{}: default build",
            w.name
        );
        assert_eq!(catalogue::workload(w.name).map(|x| x.name), Some(w.name));
        let mut builds = std::collections::BTreeSet::new();
        for b in w.builds {
            assert!(builds.insert(b.name), "{}/{} listed twice", w.name, b.name);
        }
        assert_eq!(
            w.prefill.is_some(),
            w.attach == catalogue::Attach::AfterPrefill,
            "{}: a prefill goes with attaching after it",
            w.name
        );
    }
}
