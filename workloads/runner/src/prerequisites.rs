//! What a story needs of this host, checked before its first run so that a missing piece
//! costs one line and exit code 2, not a half-recorded story: root, for switchyard's BPF
//! programs, and the toolchains its builds run on (Go for the cache's Go build, Node for the
//! asset server's Node build), each at the version the story was recorded with or later.

use std::process::Command;

use crate::{fail::Failure, story::Story};

/// The oldest Go the cache's Go build compiles with (`go.mod`'s `go 1.24`).
pub const GO: (u32, u32) = (1, 24);
/// The oldest Node the asset server's Node build was recorded with.
pub const NODE: u32 = 20;

/// Checks that `story` can run here: root, then each toolchain its builds need.
pub fn check(story: &Story) -> Result<(), Failure> {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if uid != 0 {
        return Err(Failure::new(format!(
            "the story records with switchyard, whose BPF programs need root; this is uid {uid}"
        ))
        .hint(
            "run it as root: `sudo -E just …` (`switchyard doctor` says what else this host lacks)",
        ));
    }
    let builds: Vec<&str> = story
        .configs
        .iter()
        .flat_map(|c| c.builds.unwrap_or(story.builds).iter().copied())
        .collect();
    if builds.contains(&"go") {
        let found = version_of("go", "version").and_then(|v| go_version(&v));
        if found.is_none_or(|v| v < GO) {
            let (major, minor) = GO;
            return Err(Failure::new(format!(
                "the cache's Go build needs Go {major}.{minor} or later, and {}",
                match found {
                    Some((a, b)) => format!("`go` on PATH is {a}.{b}"),
                    None => "no `go` is on PATH".to_string(),
                }
            ))
            .hint(
                "Debian 12's golang is 1.19: install a newer Go from https://go.dev/dl into \
                 /usr/local/go, put /usr/local/go/bin on PATH, then `just build`",
            ));
        }
    }
    if builds.contains(&"node-gzip") {
        let found = version_of("node", "--version").and_then(|v| node_version(&v));
        if found.is_none_or(|v| v < NODE) {
            return Err(Failure::new(format!(
                "the asset server's Node build needs Node {NODE} or later, and {}",
                match found {
                    Some(v) => format!("`node` on PATH is {v}"),
                    None => "no `node` is on PATH".to_string(),
                }
            ))
            .hint(
                "Debian 12's nodejs is 18: install Node 20 (nodesource's packages, or \
                 `npm install -g n && n 20`) and put it on PATH",
            ));
        }
    }
    Ok(())
}

/// What `tool arg` prints, when `tool` is on PATH and runs.
fn version_of(tool: &str, arg: &str) -> Option<String> {
    let out = Command::new(tool).arg(arg).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// (1, 26) from `go version go1.26.8 linux/amd64`.
fn go_version(text: &str) -> Option<(u32, u32)> {
    let v = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("go1."))?;
    let minor = v
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    Some((1, minor))
}

/// 20 from `v20.20.2`.
fn node_version(text: &str) -> Option<u32> {
    text.trim()
        .strip_prefix('v')?
        .split('.')
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_as_the_tools_print_them() {
        assert_eq!(
            go_version("go version go1.26.8 linux/amd64\n"),
            Some((1, 26))
        );
        assert_eq!(go_version("go version go1.19.8 linux/amd64"), Some((1, 19)));
        assert_eq!(
            go_version("go version go1.24rc1 linux/amd64"),
            Some((1, 24))
        );
        assert_eq!(go_version("nonsense"), None);
        assert!(go_version("go version go1.19.8 linux/amd64").unwrap() < GO);
        assert_eq!(node_version("v20.20.2\n"), Some(20));
        assert_eq!(node_version("v18.19.0"), Some(18));
        assert_eq!(node_version("18.19.0"), None);
    }
}
