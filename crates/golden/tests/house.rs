//! The shape of the house: which crate may use which, drawn from `cargo metadata` into
//! docs/design.md, and no circle of imports between the modules of any crate.
//!
//! `SWITCHYARD_BLESS=1 cargo test -p switchyard-golden --test house` redraws the picture in
//! docs/design.md after a crate or an arrow is added; a crate that uses one of its own layer or
//! a higher one fails here whatever the picture says.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
    process::Command,
};

/// The layers, bottom first. A crate may use crates of lower layers only; a new crate must be
/// placed here before it passes.
const LAYERS: &[(&str, &[&str])] = &[
    ("what the kernel side shares", &["switchyard-common"]),
    ("what runtimes mean", &["switchyard-runtimes"]),
    ("shared types", &["switchyard-model", "switchyard-golden"]),
    (
        "collect",
        &[
            "switchyard-ebpf",
            "switchyard-unwind",
            "switchyard-counters",
            "switchyard-symbolize",
            "switchyard-harness",
        ],
    ),
    ("read the kernel", &["switchyard-loader"]),
    ("understand", &["switchyard-findings"]),
    ("present", &["switchyard-report", "switchyard-gate"]),
    ("present more", &["switchyard-compare", "switchyard-export"]),
    (
        "commands and workloads",
        &[
            "switchyard",
            "switchyard-workloads",
            "switchyard-demo",
            "spinlock-broker",
            "mmsg-relay",
            "read-state-cache",
            "asset-server",
        ],
    ),
];

fn root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

struct Package {
    name: String,
    src: PathBuf,
    /// Workspace crates it uses (normal and build dependencies; tests may use anything).
    uses: BTreeSet<String>,
}

fn workspace() -> Vec<Package> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("running cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let names: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    packages
        .iter()
        .map(|p| {
            let manifest = PathBuf::from(p["manifest_path"].as_str().unwrap());
            let uses = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .filter_map(|d| d["name"].as_str())
                .filter(|n| names.contains(*n))
                .map(str::to_string)
                .collect();
            Package {
                name: p["name"].as_str().unwrap().to_string(),
                src: manifest.parent().unwrap().join("src"),
                uses,
            }
        })
        .collect()
}

fn layer_of(name: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, crates)| crates.contains(&name))
}

#[test]
fn nothing_runs_back_up() {
    let mut wrong = Vec::new();
    for p in workspace() {
        let Some(own) = layer_of(&p.name) else {
            wrong.push(format!(
                "{} is in no layer: place it in LAYERS in {}",
                p.name,
                file!()
            ));
            continue;
        };
        for dep in &p.uses {
            let theirs = layer_of(dep).unwrap_or(usize::MAX);
            if theirs >= own {
                wrong.push(format!(
                    "{} ({}) uses {dep} ({}): a crate may use only lower layers",
                    p.name,
                    LAYERS[own].0,
                    LAYERS.get(theirs).map_or("no layer", |l| l.0)
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The mermaid drawing of the crates, layer by layer, with an arrow for each use.
fn drawing(packages: &[Package]) -> String {
    let id = |n: &str| n.replace('-', "_");
    let mut s = String::from("```mermaid\nflowchart BT\n");
    for (i, (title, crates)) in LAYERS.iter().enumerate() {
        s += &format!("  subgraph L{i}[\"{title}\"]\n");
        for c in *crates {
            s += &format!("    {}[\"{c}\"]\n", id(c));
        }
        s += "  end\n";
    }
    let mut arrows: Vec<String> = packages
        .iter()
        .flat_map(|p| {
            p.uses
                .iter()
                .map(move |d| format!("  {} --> {}\n", id(&p.name), id(d)))
        })
        .collect();
    arrows.sort();
    s += &arrows.concat();
    s + "```\n"
}

#[test]
fn the_design_page_draws_the_crates_as_they_are() {
    const BEGIN: &str = "<!-- crates: drawn by crates/golden/tests/house.rs -->\n";
    const END: &str = "<!-- end of crates -->";
    let path = root().join("docs/design.md");
    let page = fs::read_to_string(&path).expect("reading docs/design.md");
    let (head, rest) = page
        .split_once(BEGIN)
        .expect("docs/design.md has the crates marker");
    let (old, tail) = rest
        .split_once(END)
        .expect("docs/design.md has the end marker");
    let new = drawing(&workspace());
    if old == new {
        return;
    }
    if std::env::var(switchyard_golden::BLESS_VAR).as_deref() == Ok("1") {
        fs::write(&path, format!("{head}{BEGIN}{new}{END}{tail}")).expect("writing design.md");
        return;
    }
    panic!(
        "docs/design.md draws the crates otherwise than cargo metadata says; redraw with \
         SWITCHYARD_BLESS=1 cargo test -p switchyard-golden --test house\n--- drawn\n{old}\n--- \
         now\n{new}"
    );
}

/// The top-level modules of `src` (a file `x.rs` or a folder `x/`), with the files of each.
fn modules(src: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut out: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    let Ok(entries) = fs::read_dir(src) else {
        return out;
    };
    for e in entries.flatten() {
        let path = e.path();
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            if stem == "bin" {
                continue;
            }
            let mut files = Vec::new();
            collect_rs(&path, &mut files);
            out.entry(stem).or_default().extend(files);
        } else if path.extension().is_some_and(|x| x == "rs")
            && !matches!(stem.as_str(), "lib" | "main")
        {
            out.entry(stem).or_default().push(path);
        }
    }
    out
}

fn collect_rs(dir: &Path, files: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_rs(&p, files);
        } else if p.extension().is_some_and(|x| x == "rs") {
            files.push(p);
        }
    }
}

/// The first path segment of every `crate::…` in `text`, through `use crate::{a, b::c}`
/// groups too; comment lines (doc links among them) are not uses.
fn crate_paths(text: &str) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group: split on commas at depth 0.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(first_segment(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            out.insert(first_segment(&item));
        } else {
            out.insert(first_segment(rest));
        }
    }
    out.remove("");
    out
}

fn first_segment(s: &str) -> String {
    s.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Circles in a graph, each as the modules on it.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Tarjan's strongly connected components; any component of two or more is a circle.
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        if let Some(ws) = s.edges.get(v) {
            for w in ws {
                let w = w.as_str();
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let lw = s.low[w];
                    let lv = s.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if s.on.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_module_imports_itself_through_another() {
    let mut found = Vec::new();
    for p in workspace() {
        let mods = modules(&p.src);
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (name, files) in &mods {
            let used = edges.entry(name.clone()).or_default();
            for f in files {
                let text = fs::read_to_string(f).unwrap_or_default();
                for m in crate_paths(&text) {
                    if m != *name && mods.contains_key(&m) {
                        used.insert(m);
                    }
                }
            }
        }
        for c in circles(&edges) {
            found.push(format!("{}: {}", p.name, c.join(" ↔ ")));
        }
    }
    assert!(
        found.is_empty(),
        "modules that import each other (directly or through others):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_import_reader_reads_groups_and_finds_circles() {
    let got = crate_paths(
        "use crate::{a::{x, y}, b, c::d};\n/// [`crate::z`]\nfn f() { crate::e::g(); $crate::h }",
    );
    let want: BTreeSet<String> = ["a", "b", "c", "e"].iter().map(|s| s.to_string()).collect();
    assert_eq!(got, want);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.entry("a".into()).or_default().insert("b".into());
    edges.entry("b".into()).or_default().insert("c".into());
    edges.entry("c".into()).or_default().insert("a".into());
    edges.entry("d".into()).or_default().insert("a".into());
    assert_eq!(circles(&edges), vec![vec!["a", "b", "c"]]);
}

/// The Rust files of package `p`'s sources, its tests (`tests.rs`, `tests/`) aside.
fn product_files(p: &Package) -> Vec<PathBuf> {
    let mut files = Vec::new();
    collect_rs(&p.src, &mut files);
    files.retain(|file| {
        file.file_name().is_none_or(|n| n != "tests.rs")
            && !file.components().any(|c| c.as_os_str() == "tests")
    });
    files
}

/// The string literals of `text` before its tests (`#[cfg(test)]`), each with its line.
fn literals(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        if line.trim_start().starts_with("//") || line.ends_with("// not a frame name") {
            continue;
        }
        let mut rest = line;
        while let Some(open) = rest.find('"') {
            let body = &rest[open + 1..];
            let mut end = None;
            let mut escaped = false;
            for (j, c) in body.char_indices() {
                match (c, escaped) {
                    ('\\', false) => escaped = true,
                    ('"', false) => {
                        end = Some(j);
                        break;
                    }
                    _ => escaped = false,
                }
            }
            let Some(end) = end else { break };
            out.push((i + 1, body[..end].to_string()));
            rest = &body[end + 1..];
        }
    }
    out
}

/// What a runtime's frames mean is said once, in its module of `switchyard-runtimes`: no
/// product code elsewhere spells a frame name or prefix its rules hold. The names of syscalls
/// and their libc wrappers are everyone's, and are not checked; nor is the kernel side
/// (`switchyard-ebpf` and the types it shares, `switchyard-common`), whose walkers and probe
/// points stay there. A literal that only looks like one ends its line in
/// `// not a frame name`.
#[test]
fn frame_names_are_spelled_only_in_the_runtime_modules() {
    use switchyard_runtimes::RUNTIMES;
    let everyones: BTreeSet<&str> = RUNTIMES
        .iter()
        .flat_map(|r| {
            let f = r.frames();
            let syscalls = f.syscall_waits.iter().map(|(n, _)| *n);
            f.library_names
                .iter()
                .chain(f.wrapping)
                .copied()
                .chain(syscalls)
        })
        .collect();
    let names: BTreeSet<&str> = RUNTIMES
        .iter()
        .flat_map(|r| r.frames().names())
        .filter(|n| !everyones.contains(n))
        .collect();
    let mut wrong = Vec::new();
    for p in workspace() {
        if matches!(
            p.name.as_str(),
            "switchyard-runtimes" | "switchyard-ebpf" | "switchyard-common"
        ) {
            continue;
        }
        for file in product_files(&p) {
            let text = fs::read_to_string(&file).unwrap_or_default();
            for (line, literal) in literals(&text) {
                if names.contains(literal.as_str()) {
                    wrong.push(format!(
                        "{}:{line}: \"{literal}\" is a runtime's frame rule: ask \
                         switchyard_runtimes, or move the rule into its module",
                        file.strip_prefix(root()).unwrap_or(&file).display()
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_literal_reader_skips_comments_escapes_and_tests() {
    let text = "let a = \"x\\\"y\"; f(\"z\");\n// \"not\"\nf(\"no\"); // not a frame name\n#[cfg(test)]\n\"after\"";
    let got: Vec<String> = literals(text).into_iter().map(|(_, l)| l).collect();
    assert_eq!(got, ["x\\\"y", "z"]);
}

/// Names retired so that each concept has one (docs/design.md, "Glossary"): where each may not
/// appear again, and what replaced it.
const RETIRED: &[(&str, &str, &str)] = &[
    (
        "crates/loader/src",
        "Windows",
        "`LastCut`, the maps' values at the last cut; `Windows` is the cutting of a continuous recording (crates/cli)",
    ),
    (
        "crates",
        "switchyard_report::units",
        "`switchyard_report::sentences`; `units` is how numbers read (switchyard_model::units)",
    ),
    ("crates/report/src", "crate::units", "`crate::sentences`"),
    // Waiting for a CPU is one family, `runqueue`, from the kernel's maps to the page; "cpu"
    // alone means running.
    (
        "crates",
        "woken_wait_ns",
        "`runqueue_after_wakeup_ns`, the figure `runqueue.after_wakeup`'s field",
    ),
    (
        "ebpf/src",
        "woken_wait_ns",
        "`runqueue_after_wakeup_ns`, the figure `runqueue.after_wakeup`'s field",
    ),
    (
        "crates",
        "sched_delay",
        "`runqueue_waits`, each wait for a CPU's histogram",
    ),
    ("crates", "cpu_holders", "`runqueue_holders`"),
    ("crates", "CPU_HOLDERS", "`RUNQUEUE_HOLDERS`"),
    ("ebpf/src", "CPU_HOLDERS", "`RUNQUEUE_HOLDERS`"),
    ("crates", "CpuHolder", "`RunqueueHolder`"),
    (
        "crates",
        "Kind::Cpu",
        "`Kind::Runqueue`, written `runqueue`",
    ),
    ("crates", "then_cpu_s", "`then_runqueue_s`"),
];

/// The runner's commands of one story each, now one command over the stories' registry
/// (`story::all`, workloads/runner/src/story/mod.rs).
const RETIRED_STORY_COMMANDS: [&str; 10] = [
    "CompareBroker",
    "CompareRelay",
    "CompareAssets",
    "StoryBrokerSweep",
    "StoryBrokerFallback",
    "StoryGogc",
    "StoryForcedGc",
    "StoryCacheSize",
    "StoryGoRust",
    "StoryAssetsConcurrency",
];

/// Whether `name` occurs in `text` as a whole word.
fn has_word(text: &str, name: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(name).any(|(i, _)| {
        !word(text[..i].chars().next_back()) && !word(text[i + name.len()..].chars().next())
    })
}

#[test]
fn retired_names_stay_retired() {
    let mut wrong = Vec::new();
    let stories = RETIRED_STORY_COMMANDS.map(|n| {
        (
            "workloads/runner/src",
            n,
            "a story's name is its command, over `story::all`",
        )
    });
    for (under, name, instead) in RETIRED.iter().chain(&stories) {
        let mut files = Vec::new();
        collect_rs(&root().join(under), &mut files);
        assert!(!files.is_empty(), "{under} has no Rust files");
        for file in files {
            if file.ends_with(file!().rsplit('/').next().unwrap_or_default())
                && file.parent().is_some_and(|d| d.ends_with("tests"))
            {
                continue;
            }
            // The test that run files written under the old names still read.
            if file.ends_with("crates/model/tests/names.rs") {
                continue;
            }
            let text = fs::read_to_string(&file).unwrap_or_default();
            for (i, line) in text.lines().enumerate() {
                // A serde alias reads the files written under the old name.
                if has_word(line, name) && !line.contains(&format!("alias = \"{name}\"")) {
                    wrong.push(format!(
                        "{}:{}: `{name}` is retired: {instead}",
                        file.strip_prefix(root()).unwrap_or(&file).display(),
                        i + 1
                    ));
                }
            }
        }
    }
    assert!(
        !root().join("crates/report/src/units.rs").exists(),
        "crates/report/src/units.rs is retired: its sentences live in sentences.rs"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_retired_name_is_found_as_a_word_only() {
    assert!(has_word("use window::Windows;", "Windows"));
    assert!(!has_word("struct WindowsCut", "Windows") && !has_word("MyWindows", "Windows"));
}

/// The longest a function outside tests may run, in lines.
const LONGEST_FUNCTION: usize = 150;

/// The functions still longer than [`LONGEST_FUNCTION`], each to be split by what its parts do.
/// The list may only shrink: a function that grows past the limit fails, and so does one
/// listed here that no longer does (take it off the list).
const LONG_FUNCTIONS: &[&str] = &[];

/// Each function of `text` before its tests (`#[cfg(test)]`): its name, first line and
/// length in lines, braces in strings, characters and comments aside.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .iter()
        .position(|l| l.trim_start().starts_with("#[cfg(test)]"))
        .unwrap_or(lines.len());
    let mut out = Vec::new();
    for (i, line) in lines[..end].iter().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        let Some(at) = code
            .find("fn ")
            .filter(|&at| at == 0 || code[..at].ends_with(' ') || code[..at].ends_with('('))
        else {
            continue;
        };
        let name: String = code[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        // From the signature to its body's closing brace (a declaration without a body ends
        // at its `;`).
        let mut depth = 0usize;
        let mut opened = false;
        let mut last = None;
        'lines: for (j, l) in lines[i..end].iter().enumerate() {
            let mut chars = l.chars().peekable();
            let mut in_str = false;
            while let Some(c) = chars.next() {
                match (c, in_str) {
                    ('\\', true) => {
                        chars.next();
                    }
                    ('"', _) => in_str = !in_str,
                    (_, true) => {}
                    ('/', false) if chars.peek() == Some(&'/') => break,
                    ('\'', false) => {
                        // A character literal ('{', '\''), not a lifetime.
                        let rest: String = chars.clone().take(3).collect();
                        if rest.starts_with('\\') {
                            chars.next();
                            chars.next();
                            chars.next();
                        } else if rest.chars().nth(1) == Some('\'') {
                            chars.next();
                            chars.next();
                        }
                    }
                    ('{', false) => {
                        depth += 1;
                        opened = true;
                    }
                    ('}', false) => {
                        depth = depth.saturating_sub(1);
                        if opened && depth == 0 {
                            last = Some(j);
                            break 'lines;
                        }
                    }
                    (';', false) if !opened => break 'lines,
                    _ => {}
                }
            }
        }
        if let Some(j) = last {
            out.push((name, i + 1, j + 1));
        }
    }
    out
}

#[test]
fn no_function_runs_over_150_lines() {
    let mut wrong = Vec::new();
    let mut long = BTreeSet::new();
    for p in workspace() {
        for file in product_files(&p) {
            let text = fs::read_to_string(&file).unwrap_or_default();
            let path = file
                .strip_prefix(root())
                .unwrap_or(&file)
                .display()
                .to_string();
            for (name, line, lines) in functions(&text) {
                if lines <= LONGEST_FUNCTION {
                    continue;
                }
                let key = format!("{path}::{name}");
                if !LONG_FUNCTIONS.contains(&key.as_str()) {
                    wrong.push(format!(
                        "{path}:{line}: {name} runs {lines} lines, over {LONGEST_FUNCTION}: split it by what its parts do"
                    ));
                }
                long.insert(key);
            }
        }
    }
    for listed in LONG_FUNCTIONS {
        if !long.contains(*listed) {
            wrong.push(format!(
                "{listed} is within {LONGEST_FUNCTION} lines now (or gone): take it off LONG_FUNCTIONS"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_function_reader_measures_bodies_not_strings() {
    let text = "fn a() {\n    let s = \"}\";\n    let c = '{';\n}\nfn b(x: u8) -> u8;\npub fn c<'a>(s: &'a str) {\n    // }\n    if true {\n    }\n}\n";
    let got = functions(text);
    assert_eq!(got, [("a".to_string(), 1, 4), ("c".to_string(), 6, 5)]);
}
