//! Runs read back: a folder of a continuous recording's `run-<n>.json` windows, in order, for
//! `compare`, `gate` and `report`, and for `record` to refuse a folder that already holds some.

use std::{
    io,
    path::{Path, PathBuf},
};

use anyhow::Result;

use crate::fail::hinted;

/// The `run-<n>.json` files of a folder, in window order.
pub fn run_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let n = path.file_name().and_then(|n| n.to_str()).and_then(|n| {
            n.strip_prefix("run-")?
                .strip_suffix(".json")?
                .parse::<u64>()
                .ok()
        });
        if let Some(n) = n {
            found.push((n, path));
        }
    }
    found.sort();
    Ok(found.into_iter().map(|(_, p)| p).collect())
}

/// Run files as given, with each folder replaced by its windows, in order.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for path in paths {
        if !path.is_dir() {
            out.push(path.clone());
            continue;
        }
        let files = run_files(path).map_err(|e| {
            hinted(
                format!("cannot read the folder {}: {e}", path.display()),
                "check the path and its permissions",
            )
        })?;
        if files.is_empty() {
            return Err(hinted(
                format!("{} holds no run-<n>.json windows", path.display()),
                "give a run file, or the folder `switchyard record --every … -o FOLDER` wrote",
            ));
        }
        out.extend(files);
    }
    Ok(out)
}
