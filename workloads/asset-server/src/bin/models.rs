//! `asset-models --out DIR [--sizes 5,8,12,20,30,40]`: generates the asset server's models
//! (deterministic; kept when DIR's manifest says they are there already), and with
//! `--ratios` prints how well each codec level compresses them.

use std::path::PathBuf;

use anyhow::Context as _;
use asset_server::{Codec, models};
use clap::Parser;

#[derive(Debug, Parser)]
#[command(name = "asset-models", version)]
struct Args {
    /// Where the models and their manifest go.
    #[arg(long, default_value_os_t = asset_server::models::default_dir())]
    out: PathBuf,
    /// Model sizes, MiB.
    #[arg(long, value_delimiter = ',', default_values_t = models::DEFAULT_SIZES_MIB)]
    sizes: Vec<u32>,
    /// Print compressed/original ratios for gzip 1-9 and zstd 1-9 over FILES (default: the
    /// models), with the time each takes.
    #[arg(long)]
    ratios: bool,
    /// Files to measure with --ratios instead of the models.
    files: Vec<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let list = models::ensure(&args.out, &args.sizes)?;
    let total: u64 = list.iter().map(|m| m.bytes).sum();
    println!(
        "{} models, {:.1} MiB, in {}",
        list.len(),
        total as f64 / 1048576.0,
        args.out.display()
    );
    if !args.ratios {
        return Ok(());
    }
    let files: Vec<PathBuf> = if args.files.is_empty() {
        list.iter().map(|m| args.out.join(&m.name)).collect()
    } else {
        args.files.clone()
    };
    let data: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(f).with_context(|| format!("reading {}", f.display())))
        .collect::<Result<_, _>>()?;
    let size: usize = data.iter().map(Vec::len).sum();
    println!(
        "{:>6} {:>5} {:>8} {:>10}",
        "codec", "level", "ratio", "MB/s"
    );
    for (codec, levels) in [(Codec::Gzip, 1..=9), (Codec::Zstd, 1..=9)] {
        for level in levels {
            let start = std::time::Instant::now();
            let mut out = 0;
            for d in &data {
                out += codec.compress(d, Some(level))?.len();
            }
            let secs = start.elapsed().as_secs_f64();
            println!(
                "{:>6} {:>5} {:>8.4} {:>10.1}",
                codec.name(),
                level,
                out as f64 / size as f64,
                size as f64 / 1e6 / secs
            );
        }
    }
    Ok(())
}
