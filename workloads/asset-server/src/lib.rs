//! The asset server: what a 3D-model delivery service does to each request, in Rust, and what
//! its load driver checks. Every request for a model:
//! 1. parses the GLB (header, chunk table, JSON chunk);
//! 2. rewrites the licence field of `asset.extras` for the client (a watermark);
//! 3. compresses it (gzip or zstd);
//! 4. encrypts it (AES-256-GCM, a fresh nonce per response: content protection);
//! 5. streams it.
//!
//! The Node.js build (`node/server.js`) does the same, byte for byte: the driver checks every
//! response of every build against the same expected bytes.

pub mod glb;
pub mod models;
pub mod protect;

/// The workload's name, in driver results and the catalogue.
pub const WORKLOAD: &str = "asset-server";

/// What the licence field holds in a stored model: replaced per request by the client's
/// licence, padded to the same length, so the model's size never changes.
pub const LICENCE_PLACEHOLDER: &str = "unlicensed-00000000000000000000000000000000";

/// gzip's level in every gzip build: zlib's default, what Node's `zlib.gzip` uses.
pub const GZIP_LEVEL: u32 = 6;
/// zstd's level: its own default, at a ratio comparable to gzip 6's on the generated models
/// (see reports/asset-server/README.md for every level's).
pub const ZSTD_LEVEL: i32 = 3;

/// How a response body is compressed before it is encrypted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Codec {
    Gzip,
    Zstd,
}

impl Codec {
    pub fn name(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip",
            Codec::Zstd => "zstd",
        }
    }

    pub fn from_name(s: &str) -> Option<Codec> {
        match s {
            "gzip" => Some(Codec::Gzip),
            "zstd" => Some(Codec::Zstd),
            _ => None,
        }
    }

    /// `data` compressed at the build's level (`level` overrides it).
    pub fn compress(self, data: &[u8], level: Option<i32>) -> std::io::Result<Vec<u8>> {
        use std::io::Write as _;
        match self {
            Codec::Gzip => {
                let level = level.map_or(GZIP_LEVEL, |l| l.clamp(0, 9) as u32);
                let mut e = flate2::write::GzEncoder::new(
                    Vec::with_capacity(data.len() / 2),
                    flate2::Compression::new(level),
                );
                e.write_all(data)?;
                e.finish()
            }
            Codec::Zstd => zstd::bulk::compress(data, level.unwrap_or(ZSTD_LEVEL)),
        }
    }

    /// `data` decompressed; `size_hint` is the expected size.
    pub fn decompress(self, data: &[u8], size_hint: usize) -> std::io::Result<Vec<u8>> {
        use std::io::Read as _;
        match self {
            Codec::Gzip => {
                let mut out = Vec::with_capacity(size_hint);
                flate2::read::GzDecoder::new(data).read_to_end(&mut out)?;
                Ok(out)
            }
            Codec::Zstd => zstd::bulk::decompress(data, size_hint.max(1) * 2),
        }
    }
}

/// A request's licence, as the servers write it: the client's text, padded with `-` (or cut)
/// to the placeholder's length.
pub fn licence_bytes(licence: &str) -> Vec<u8> {
    let n = LICENCE_PLACEHOLDER.len();
    let mut b: Vec<u8> = licence
        .bytes()
        .filter(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'.')
        .take(n)
        .collect();
    b.resize(n, b'-');
    b
}
