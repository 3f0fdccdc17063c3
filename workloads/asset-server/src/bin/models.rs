//! `asset-models --out DIR [--sizes 5,8,12,20,30,40]`: generates the asset server's models
//! (deterministic; kept when DIR's manifest says they are there already), and with
//! `--ratios` prints how well each codec level compresses them.

use std::path::PathBuf;

use anyhow::Context as _;
use asset_server::{Codec, glb, models};
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
    /// Print each file's parts (a GLB's JSON, embedded textures and geometry; a .png, .jpg,
    /// .bin or .gltf file whole as one) with their shares and gzip 6 and zstd 3 ratios.
    #[arg(long, conflicts_with = "ratios")]
    parts: bool,
    /// Files to measure with --ratios or --parts instead of the models.
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
    if args.parts {
        let files: Vec<PathBuf> = if args.files.is_empty() {
            list.iter().map(|m| args.out.join(&m.name)).collect()
        } else {
            args.files.clone()
        };
        return print_parts(&files);
    }
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

/// The parts of one file, each as (name, bytes): a GLB's JSON chunk, its embedded images and
/// the rest of its binary buffer (geometry, animation); any other file whole, named by its
/// extension.
fn parts_of(path: &std::path::Path, b: &[u8]) -> anyhow::Result<Vec<(&'static str, Vec<u8>)>> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase();
    Ok(match ext.as_str() {
        "glb" => {
            let (json, bin) = glb::chunks(b).with_context(|| format!("{}", path.display()))?;
            let doc: serde_json::Value = serde_json::from_slice(&b[json.clone()])
                .with_context(|| format!("{}: its JSON chunk", path.display()))?;
            let bin = bin.map(|r| &b[r]).unwrap_or_default();
            let images = glb::image_ranges(&doc, bin.len());
            let mut textures = Vec::new();
            let mut geometry = Vec::new();
            let mut at = 0;
            for r in &images {
                geometry.extend_from_slice(&bin[at.min(r.start)..r.start]);
                textures.extend_from_slice(&bin[r.start.max(at)..r.end]);
                at = at.max(r.end);
            }
            geometry.extend_from_slice(&bin[at..]);
            vec![
                ("JSON", b[json].to_vec()),
                ("textures", textures),
                ("geometry", geometry),
            ]
        }
        "png" | "jpg" | "jpeg" | "ktx2" => vec![("textures", b.to_vec())],
        "bin" => vec![("geometry", b.to_vec())],
        "gltf" | "json" => vec![("JSON", b.to_vec())],
        _ => anyhow::bail!(
            "{}: not a .glb, .png, .jpg, .bin or .gltf file; --parts names a file's parts by its type",
            path.display()
        ),
    })
}

/// `--parts`: each file's parts, their share of the file and how gzip 6 (the Node build's
/// level) and zstd 3 (the zstd build's) compress them, and the whole file's.
fn print_parts(files: &[PathBuf]) -> anyhow::Result<()> {
    println!(
        "{:<28} {:<9} {:>11} {:>6} {:>7} {:>7}",
        "file", "part", "bytes", "share", "gzip 6", "zstd 3"
    );
    let ratio = |codec: Codec, level: i32, d: &[u8]| -> anyhow::Result<String> {
        if d.is_empty() {
            return Ok("-".into());
        }
        Ok(format!(
            "{:.3}",
            codec.compress(d, Some(level))?.len() as f64 / d.len() as f64
        ))
    };
    for f in files {
        let b = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        let name = f.file_name().unwrap_or_default().to_string_lossy();
        let mut parts = parts_of(f, &b)?;
        if parts.len() > 1 {
            parts.push(("whole", b.clone()));
        }
        for (part, d) in &parts {
            println!(
                "{:<28} {:<9} {:>11} {:>5.1}% {:>7} {:>7}",
                name,
                part,
                d.len(),
                100.0 * d.len() as f64 / b.len().max(1) as f64,
                ratio(Codec::Gzip, 6, d)?,
                ratio(Codec::Zstd, 3, d)?
            );
        }
    }
    Ok(())
}
