//! Deterministic, realistic GLB/VRM-like models of a given size: a glTF JSON document with a
//! VRM-style humanoid skeleton, meshes of real geometry (torus-knot tubes with a displaced
//! surface: float positions, normals and UVs, u32 triangle indices), and embedded PNG
//! textures (already deflated, as real ones are). About 55% of a model is textures, as in
//! the avatars the story served.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
};

use anyhow::Context as _;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::{LICENCE_PLACEHOLDER, glb};

/// Bumped whenever the generator's output changes, so a cache of older models is redone.
const GENERATOR: &str = "switchyard-asset-models 2";
/// Sizes of the default set, MiB: the story's 5 to 40 MB.
pub const DEFAULT_SIZES_MIB: [u32; 6] = [5, 8, 12, 20, 30, 40];
const TEXTURE_SIDE: usize = 1024;
const TEXTURE_SHARE: f64 = 0.55;

/// A generated model: its file, size and SHA-256.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelFile {
    pub name: String,
    pub bytes: u64,
    pub sha256: String,
}

#[derive(Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
struct Manifest {
    generator: String,
    sizes_mib: Vec<u32>,
    models: Vec<ModelFile>,
}

/// Where the models go when no directory is given: `target/asset-models` of the build the
/// program runs from (any profile or target directory under `target/`), else beside it.
pub fn default_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let target = exe
        .ancestors()
        .find(|d| d.file_name().is_some_and(|n| n == "target"));
    match target {
        Some(t) => t.join("asset-models"),
        None => exe
            .parent()
            .map_or_else(|| PathBuf::from("asset-models"), |d| d.join("asset-models")),
    }
}

/// The models of `sizes_mib` in `dir`, generated unless a manifest says they are there
/// already (and each file still has its size).
pub fn ensure(dir: &Path, sizes_mib: &[u32]) -> anyhow::Result<Vec<ModelFile>> {
    let manifest_path = dir.join("manifest.json");
    if let Ok(text) = std::fs::read_to_string(&manifest_path)
        && let Ok(m) = serde_json::from_str::<Manifest>(&text)
        && m.generator == GENERATOR
        && m.sizes_mib == sizes_mib
        && m.models
            .iter()
            .all(|f| std::fs::metadata(dir.join(&f.name)).is_ok_and(|md| md.len() == f.bytes))
    {
        return Ok(m.models);
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut models = Vec::new();
    for (i, &mib) in sizes_mib.iter().enumerate() {
        let bytes = generate(i as u64 + 1, mib as usize * 1024 * 1024);
        let name = format!("avatar-{}-{mib}mib.glb", i + 1);
        let path = dir.join(&name);
        std::fs::write(&path, &bytes).with_context(|| format!("writing {}", path.display()))?;
        models.push(ModelFile {
            name,
            bytes: bytes.len() as u64,
            sha256: hex(&Sha256::digest(&bytes)),
        });
    }
    let m = Manifest {
        generator: GENERATOR.into(),
        sizes_mib: sizes_mib.to_vec(),
        models: models.clone(),
    };
    std::fs::write(&manifest_path, serde_json::to_vec_pretty(&m)?)?;
    Ok(models)
}

/// The models listed in `dir`'s manifest, with their paths.
pub fn list(dir: &Path) -> anyhow::Result<Vec<(ModelFile, PathBuf)>> {
    let path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading {} (generate the models with asset-models)",
            path.display()
        )
    })?;
    let m: Manifest = serde_json::from_str(&text)?;
    Ok(m.models
        .into_iter()
        .map(|f| {
            let p = dir.join(&f.name);
            (f, p)
        })
        .collect())
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// splitmix64: a small, fast, deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// One model of about `target` bytes (within a texture's size).
pub fn generate(seed: u64, target: usize) -> Vec<u8> {
    let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D));
    let mut bin: Vec<u8> = Vec::with_capacity(target + 1024 * 1024);
    let mut views: Vec<Value> = Vec::new();
    let mut accessors: Vec<Value> = Vec::new();
    let mut push_view = |bin: &mut Vec<u8>, data: &[u8], target_kind: Option<u32>| -> usize {
        while !bin.len().is_multiple_of(4) {
            bin.push(0);
        }
        let mut v = json!({"buffer": 0, "byteOffset": bin.len(), "byteLength": data.len()});
        if let Some(t) = target_kind {
            v["target"] = json!(t);
        }
        bin.extend_from_slice(data);
        views.push(v);
        views.len() - 1
    };

    // Textures first, up to their share.
    let mut images = Vec::new();
    let mut tex_bytes = 0;
    let mut t = 0;
    while (tex_bytes as f64) < target as f64 * TEXTURE_SHARE {
        let png = texture(&mut rng, TEXTURE_SIDE, t);
        tex_bytes += png.len();
        let view = push_view(&mut bin, &png, None);
        images.push(
            json!({"name": format!("texture_{t}"), "bufferView": view, "mimeType": "image/png"}),
        );
        t += 1;
    }

    // Geometry for the rest: 32 bytes a vertex, 24 of indices a quad.
    let left = target.saturating_sub(bin.len() + 64 * 1024);
    let vertices = left / 56;
    let primitives = 4.max(vertices / 60_000);
    let mut meshes = Vec::new();
    for p in 0..primitives {
        let n = vertices / primitives;
        let nv = 48usize;
        let nu = (n / nv).max(8);
        let (pos, nrm, uv, idx, min, max) = tube(p as u32, nu, nv, &mut rng);
        let base = accessors.len();
        let vp = push_view(&mut bin, &pos, Some(34962));
        accessors.push(json!({"bufferView": vp, "componentType": 5126, "count": nu * nv, "type": "VEC3", "min": min, "max": max}));
        let vn = push_view(&mut bin, &nrm, Some(34962));
        accessors.push(
            json!({"bufferView": vn, "componentType": 5126, "count": nu * nv, "type": "VEC3"}),
        );
        let vu = push_view(&mut bin, &uv, Some(34962));
        accessors.push(
            json!({"bufferView": vu, "componentType": 5126, "count": nu * nv, "type": "VEC2"}),
        );
        let vi = push_view(&mut bin, &idx, Some(34963));
        accessors.push(json!({"bufferView": vi, "componentType": 5125, "count": idx.len() / 4, "type": "SCALAR"}));
        meshes.push(json!({
            "name": format!("Body_{p}"),
            "primitives": [{
                "attributes": {"POSITION": base, "NORMAL": base + 1, "TEXCOORD_0": base + 2},
                "indices": base + 3,
                "material": p % images.len().max(1),
            }]
        }));
    }

    let doc = document(seed, &images, &meshes, &views, &accessors, bin.len());
    glb::build(&serde_json::to_vec(&doc).expect("JSON"), &bin)
}

/// A VRM-like glTF document: a humanoid skeleton of nodes, meshes, materials and textures.
fn document(
    seed: u64,
    images: &[Value],
    meshes: &[Value],
    views: &[Value],
    accessors: &[Value],
    bin_len: usize,
) -> Value {
    const BONES: [&str; 24] = [
        "hips",
        "spine",
        "chest",
        "upperChest",
        "neck",
        "head",
        "leftEye",
        "rightEye",
        "leftShoulder",
        "leftUpperArm",
        "leftLowerArm",
        "leftHand",
        "rightShoulder",
        "rightUpperArm",
        "rightLowerArm",
        "rightHand",
        "leftUpperLeg",
        "leftLowerLeg",
        "leftFoot",
        "leftToes",
        "rightUpperLeg",
        "rightLowerLeg",
        "rightFoot",
        "rightToes",
    ];
    let mut nodes: Vec<Value> = Vec::new();
    let mut human_bones = serde_json::Map::new();
    for (i, b) in BONES.iter().enumerate() {
        let children: Vec<usize> = if i + 1 < BONES.len() && i % 4 != 3 {
            vec![i + 1]
        } else {
            vec![]
        };
        nodes.push(json!({
            "name": format!("J_Bip_C_{b}"),
            "translation": [0.0, 0.1 * (i as f64 % 5.0), 0.01 * i as f64],
            "rotation": [0.0, 0.0, 0.0, 1.0],
            "children": children,
        }));
        human_bones.insert((*b).to_string(), json!({"node": i}));
    }
    // Hair and cloth bones, as spring-bone chains.
    for i in 0..160 {
        nodes.push(json!({
            "name": format!("J_Sec_Hair{}_{:02}", i / 8 + 1, i % 8 + 1),
            "translation": [0.001 * (i % 7) as f64, -0.02, 0.003 * (i % 3) as f64],
            "rotation": [0.0, 0.0, 0.0, 1.0],
        }));
    }
    let mesh_nodes: Vec<usize> = (0..meshes.len())
        .map(|m| {
            nodes.push(json!({"name": format!("Body_{m}"), "mesh": m}));
            nodes.len() - 1
        })
        .collect();
    let materials: Vec<Value> = (0..images.len().max(1))
        .map(|i| {
            json!({
                "name": format!("N00_000_00_Body_{i:02} (Instance)"),
                "pbrMetallicRoughness": {
                    "baseColorTexture": {"index": i},
                    "metallicFactor": 0.0,
                    "roughnessFactor": 0.9
                },
                "alphaMode": "OPAQUE",
                "doubleSided": false,
                "extensions": {"VRMC_materials_mtoon": {
                    "specVersion": "1.0", "shadeColorFactor": [0.8, 0.7, 0.75],
                    "shadingShiftFactor": -0.05, "rimLightingMixFactor": 1.0,
                    "outlineWidthMode": "worldCoordinates", "outlineWidthFactor": 0.0008
                }}
            })
        })
        .collect();
    let textures: Vec<Value> = (0..images.len())
        .map(|i| json!({"sampler": 0, "source": i}))
        .collect();
    let mut root: Vec<usize> = vec![0];
    root.extend(&mesh_nodes);
    json!({
        "asset": {
            "version": "2.0",
            "generator": GENERATOR,
            "extras": {"licence": LICENCE_PLACEHOLDER, "seed": seed}
        },
        "extensionsUsed": ["VRMC_vrm", "VRMC_materials_mtoon", "VRMC_springBone"],
        "extensions": {
            "VRMC_vrm": {
                "specVersion": "1.0",
                "meta": {
                    "name": format!("Avatar {seed}"),
                    "version": "1.0",
                    "authors": ["switchyard"],
                    "licenseUrl": "https://vrm.dev/licenses/1.0/",
                    "avatarPermission": "onlyAuthor",
                    "commercialUsage": "personalNonProfit",
                    "allowRedistribution": false,
                    "modification": "prohibited"
                },
                "humanoid": {"humanBones": human_bones},
                "expressions": {"preset": {
                    "happy": {"isBinary": false}, "angry": {"isBinary": false},
                    "sad": {"isBinary": false}, "relaxed": {"isBinary": false},
                    "aa": {"isBinary": false}, "ih": {"isBinary": false},
                    "ou": {"isBinary": false}, "ee": {"isBinary": false},
                    "oh": {"isBinary": false}, "blink": {"isBinary": false}
                }}
            }
        },
        "scene": 0,
        "scenes": [{"nodes": root}],
        "nodes": nodes,
        "meshes": meshes,
        "materials": materials,
        "textures": textures,
        "samplers": [{"magFilter": 9729, "minFilter": 9987, "wrapS": 10497, "wrapT": 10497}],
        "images": images,
        "accessors": accessors,
        "bufferViews": views,
        "buffers": [{"byteLength": bin_len}],
    })
}

type Tube = (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>, [f32; 3], [f32; 3]);

/// A tube of `nu` × `nv` vertices around a (2,3) torus knot, its surface displaced by a few
/// sine waves (folds of cloth, strands of hair): positions, normals (from the surface's
/// derivatives), UVs and the quads' triangles.
fn tube(k: u32, nu: usize, nv: usize, rng: &mut Rng) -> Tube {
    let (p, q) = (2.0 + (k % 3) as f32, 3.0 + (k % 2) as f32);
    let scale = 0.3 + 0.1 * k as f32;
    let phase = rng.unit() * std::f32::consts::TAU;
    let point = |u: f32, v: f32| -> [f32; 3] {
        let t = u * std::f32::consts::TAU;
        let r = 2.0 + (q * t).cos();
        let c = [r * (p * t).cos(), r * (p * t).sin(), -(q * t).sin()];
        // A frame from the curve's tangent and the up axis.
        let d = 0.001;
        let r2 = 2.0 + (q * (t + d)).cos();
        let c2 = [
            r2 * (p * (t + d)).cos(),
            r2 * (p * (t + d)).sin(),
            -(q * (t + d)).sin(),
        ];
        let tng = norm([c2[0] - c[0], c2[1] - c[1], c2[2] - c[2]]);
        let b = norm(cross(tng, [0.0, 0.0, 1.0]));
        let n = cross(b, tng);
        let a = v * std::f32::consts::TAU;
        let bump = 0.04 * (17.0 * t + phase).sin() * (5.0 * a).cos()
            + 0.015 * (41.0 * t + 3.0 * a + phase).sin()
            + 0.006 * (97.0 * t).sin() * (13.0 * a).sin();
        let rad = 0.45 + bump;
        [
            scale * (c[0] + rad * (a.cos() * n[0] + a.sin() * b[0])),
            scale * (c[1] + rad * (a.cos() * n[1] + a.sin() * b[1])),
            scale * (c[2] + rad * (a.cos() * n[2] + a.sin() * b[2])),
        ]
    };
    let mut pos = Vec::with_capacity(nu * nv * 12);
    let mut nrm = Vec::with_capacity(nu * nv * 12);
    let mut uv = Vec::with_capacity(nu * nv * 8);
    let (mut min, mut max) = ([f32::MAX; 3], [f32::MIN; 3]);
    let (du, dv) = (1.0 / nu as f32, 1.0 / nv as f32);
    for i in 0..nu {
        for j in 0..nv {
            let (u, v) = (i as f32 * du, j as f32 * dv);
            let x = point(u, v);
            let a = point(u + du * 0.5, v);
            let b = point(u, v + dv * 0.5);
            let n = norm(cross(
                [a[0] - x[0], a[1] - x[1], a[2] - x[2]],
                [b[0] - x[0], b[1] - x[1], b[2] - x[2]],
            ));
            for c in 0..3 {
                min[c] = min[c].min(x[c]);
                max[c] = max[c].max(x[c]);
            }
            x.iter()
                .for_each(|f| pos.extend_from_slice(&f.to_le_bytes()));
            n.iter()
                .for_each(|f| nrm.extend_from_slice(&f.to_le_bytes()));
            [u, v]
                .iter()
                .for_each(|f| uv.extend_from_slice(&f.to_le_bytes()));
        }
    }
    let mut idx = Vec::with_capacity(nu * nv * 24);
    for i in 0..nu {
        for j in 0..nv {
            let a = (i * nv + j) as u32;
            let b = (((i + 1) % nu) * nv + j) as u32;
            let c = (((i + 1) % nu) * nv + (j + 1) % nv) as u32;
            let d = (i * nv + (j + 1) % nv) as u32;
            for v in [a, b, c, a, c, d] {
                idx.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    (pos, nrm, uv, idx, min, max)
}

fn cross(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

fn norm(a: [f32; 3]) -> [f32; 3] {
    let l = (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt().max(1e-12);
    [a[0] / l, a[1] / l, a[2] / l]
}

/// A `side` × `side` RGBA PNG: colour regions and gradients (a painted texture), fine detail
/// and a little grain, filtered and deflated as image tools write them.
fn texture(rng: &mut Rng, side: usize, n: usize) -> Vec<u8> {
    let base = [rng.unit(), rng.unit(), rng.unit()];
    let freq = 3.0 + (n % 5) as f32;
    let mut raw = Vec::with_capacity(side * (side * 4 + 1));
    let mut grain = rng.next();
    for y in 0..side {
        raw.push(1); // the Sub filter
        let mut prev = [0u8; 4];
        for x in 0..side {
            let (fx, fy) = (x as f32 / side as f32, y as f32 / side as f32);
            let region = ((fx * freq).floor() + (fy * freq * 0.7).floor()) % 3.0;
            let shade = 0.55
                + 0.25 * (fx * std::f32::consts::TAU * 2.0 + fy * 3.0).sin()
                + 0.1 * (fy * std::f32::consts::TAU * 9.0 + (fx * 40.0).sin()).cos();
            grain ^= grain << 13;
            grain ^= grain >> 7;
            grain ^= grain << 17;
            let noise = ((grain & 0xff) as f32 / 255.0 - 0.5) * 0.16;
            let mut px = [0u8; 4];
            for c in 0..3 {
                let v = (base[c] * 0.6 + 0.15 * region + 0.3 * shade + noise).clamp(0.0, 1.0);
                px[c] = (v * 255.0) as u8;
            }
            px[3] = 255;
            for c in 0..4 {
                raw.push(px[c].wrapping_sub(prev[c]));
            }
            prev = px;
        }
    }
    png(side as u32, &raw)
}

/// A PNG of filtered RGBA8 scanlines.
fn png(side: u32, filtered: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(6));
    z.write_all(filtered).expect("in memory");
    let idat = z.finish().expect("in memory");
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut chunk = |kind: &[u8; 4], data: &[u8]| {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut crc = flate2::Crc::new();
        crc.update(kind);
        crc.update(data);
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        out.extend_from_slice(&crc.sum().to_be_bytes());
    };
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&side.to_be_bytes());
    ihdr.extend_from_slice(&side.to_be_bytes());
    ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
    chunk(b"IHDR", &ihdr);
    chunk(b"IDAT", &idat);
    chunk(b"IEND", &[]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_is_a_valid_glb_of_about_its_size_with_a_licence_field() {
        let m = generate(1, 3 * 1024 * 1024);
        let g = glb::parse(&m).unwrap();
        assert!(m.len() > 2_500_000 && m.len() < 4_500_000, "{}", m.len());
        let doc: Value = serde_json::from_slice(&m[g.json.clone()]).unwrap();
        let declared = doc["buffers"][0]["byteLength"].as_u64().unwrap() as usize;
        let chunk = g.bin.unwrap().len();
        assert!(
            chunk >= declared && chunk - declared < 4,
            "{chunk} vs {declared}"
        );
        assert!(!doc["images"].as_array().unwrap().is_empty());
        assert_eq!(generate(1, 3 * 1024 * 1024), m, "deterministic");
    }
}
