//! GLB, the binary glTF 2.0 container: a 12-byte header (`glTF`, version 2, total length),
//! then chunks of (length, type, data): the JSON chunk first, then the binary buffer.

use std::ops::Range;

use crate::LICENCE_PLACEHOLDER;

pub const MAGIC: &[u8; 4] = b"glTF";
pub const CHUNK_JSON: u32 = 0x4E4F_534A;
pub const CHUNK_BIN: u32 = 0x004E_4942;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GlbError {
    #[error("not a GLB file (no glTF magic)")]
    Magic,
    #[error("GLB version {0}, not 2")]
    Version(u32),
    #[error("the header says {header} bytes, the file has {actual}")]
    Length { header: usize, actual: usize },
    #[error("a chunk runs past the end of the file")]
    Chunk,
    #[error("the first chunk is not JSON")]
    NoJson,
    #[error("the JSON chunk is not valid JSON: {0}")]
    Json(String),
    #[error("asset.extras.licence is missing or is not the placeholder")]
    NoLicence,
}

/// Where a GLB's parts are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glb {
    /// The JSON chunk's bytes, as a range of the file.
    pub json: std::ops::Range<usize>,
    /// The binary chunk's, when there is one.
    pub bin: Option<std::ops::Range<usize>>,
    /// Where the licence placeholder's characters are in the file.
    pub licence: std::ops::Range<usize>,
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, GlbError> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or(GlbError::Chunk)
}

/// A GLB's header and chunk table: where its JSON chunk is, and its binary chunk when there
/// is one.
pub fn chunks(b: &[u8]) -> Result<(Range<usize>, Option<Range<usize>>), GlbError> {
    if b.get(0..4) != Some(MAGIC.as_slice()) {
        return Err(GlbError::Magic);
    }
    let version = u32_at(b, 4)?;
    if version != 2 {
        return Err(GlbError::Version(version));
    }
    let length = u32_at(b, 8)? as usize;
    if length != b.len() {
        return Err(GlbError::Length {
            header: length,
            actual: b.len(),
        });
    }
    let mut at = 12;
    let mut chunks = Vec::new();
    while at < b.len() {
        let len = u32_at(b, at)? as usize;
        let kind = u32_at(b, at + 4)?;
        let start = at + 8;
        let end = start.checked_add(len).ok_or(GlbError::Chunk)?;
        if end > b.len() {
            return Err(GlbError::Chunk);
        }
        chunks.push((kind, start..end));
        at = end;
    }
    let json = match chunks.first() {
        Some((CHUNK_JSON, r)) => r.clone(),
        _ => return Err(GlbError::NoJson),
    };
    let bin = chunks
        .iter()
        .find(|(k, _)| *k == CHUNK_BIN)
        .map(|(_, r)| r.clone());
    Ok((json, bin))
}

/// Parses a GLB: its header and chunk table, and its JSON (fully, as a server must to know
/// the document is sound), and finds the licence field.
pub fn parse(b: &[u8]) -> Result<Glb, GlbError> {
    let (json, bin) = chunks(b)?;
    let doc: serde_json::Value =
        serde_json::from_slice(&b[json.clone()]).map_err(|e| GlbError::Json(e.to_string()))?;
    if doc["asset"]["extras"]["licence"] != LICENCE_PLACEHOLDER {
        return Err(GlbError::NoLicence);
    }
    // The placeholder appears once: as the field's value.
    let needle = format!("\"{LICENCE_PLACEHOLDER}\"");
    let pos = b[json.clone()]
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .ok_or(GlbError::NoLicence)?;
    let start = json.start + pos + 1;
    Ok(Glb {
        json,
        bin,
        licence: start..start + LICENCE_PLACEHOLDER.len(),
    })
}

/// The byte ranges of a glTF document's embedded images within its binary buffer: the buffer
/// views its `images` point at (buffer 0, the GLB's own), each clipped to `bin_len`.
pub fn image_ranges(doc: &serde_json::Value, bin_len: usize) -> Vec<Range<usize>> {
    let views = doc["bufferViews"].as_array().cloned().unwrap_or_default();
    let mut out: Vec<Range<usize>> = doc["images"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|img| views.get(img["bufferView"].as_u64()? as usize))
        .filter(|v| v["buffer"].as_u64().unwrap_or(0) == 0)
        .filter_map(|v| {
            let start = v["byteOffset"].as_u64().unwrap_or(0) as usize;
            let end = start.checked_add(v["byteLength"].as_u64()? as usize)?;
            (start < bin_len).then(|| start..end.min(bin_len))
        })
        .collect();
    out.sort_by_key(|r| r.start);
    out.dedup();
    out
}

/// The model as served to a client: a copy with its licence field set.
pub fn with_licence(model: &[u8], glb: &Glb, licence: &[u8]) -> Vec<u8> {
    let mut out = model.to_vec();
    out[glb.licence.clone()].copy_from_slice(&licence[..glb.licence.len()]);
    out
}

/// A GLB from its JSON document and binary buffer (each padded to 4 bytes: JSON with spaces,
/// the buffer with zeros, as the specification asks).
pub fn build(json: &[u8], bin: &[u8]) -> Vec<u8> {
    let pad = |n: usize| (4 - n % 4) % 4;
    let (jp, bp) = (pad(json.len()), pad(bin.len()));
    let total = 12 + 8 + json.len() + jp + 8 + bin.len() + bp;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&2u32.to_le_bytes());
    out.extend_from_slice(&(total as u32).to_le_bytes());
    out.extend_from_slice(&((json.len() + jp) as u32).to_le_bytes());
    out.extend_from_slice(&CHUNK_JSON.to_le_bytes());
    out.extend_from_slice(json);
    out.extend(std::iter::repeat_n(b' ', jp));
    out.extend_from_slice(&((bin.len() + bp) as u32).to_le_bytes());
    out.extend_from_slice(&CHUNK_BIN.to_le_bytes());
    out.extend_from_slice(bin);
    out.extend(std::iter::repeat_n(0u8, bp));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let json = format!(
            r#"{{"asset":{{"version":"2.0","extras":{{"licence":"{LICENCE_PLACEHOLDER}"}}}}}}"#
        );
        build(json.as_bytes(), &[1, 2, 3, 4, 5])
    }

    #[test]
    fn builds_parses_and_rewrites_the_licence() {
        let b = sample();
        assert_eq!(b.len() % 4, 0);
        let g = parse(&b).unwrap();
        assert_eq!(&b[g.bin.clone().unwrap()], &[1, 2, 3, 4, 5, 0, 0, 0]);
        let out = with_licence(&b, &g, &crate::licence_bytes("client-7"));
        let doc: serde_json::Value = serde_json::from_slice(&out[g.json.clone()]).unwrap();
        let licence = doc["asset"]["extras"]["licence"].as_str().unwrap();
        assert!(licence.starts_with("client-7---"), "{licence}");
        assert_eq!(licence.len(), LICENCE_PLACEHOLDER.len());
    }

    #[test]
    fn damaged_files_are_refused_by_what_is_wrong() {
        let b = sample();
        let mut magic = b.clone();
        magic[0] = b'x';
        assert_eq!(parse(&magic), Err(GlbError::Magic));
        assert!(matches!(
            parse(&b[..b.len() - 4]),
            Err(GlbError::Length { .. })
        ));
        let mut json = b.clone();
        json[21] = b'!';
        assert!(matches!(parse(&json), Err(GlbError::Json(_))));
    }
}
