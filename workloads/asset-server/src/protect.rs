//! Content protection: AES-256-GCM over the compressed model, a fresh 96-bit nonce per
//! response. The body is `nonce (12) ‖ ciphertext ‖ tag (16)`; a flipped bit anywhere fails
//! the tag. The key is the workload's own (a real service would fetch it per client).

use std::sync::atomic::{AtomicU64, Ordering};

use aes_gcm::{
    Aes256Gcm, Nonce,
    aead::{Aead as _, KeyInit as _},
};

/// The workload's key, hex in the Node build's source.
pub const KEY: [u8; 32] = *b"switchyard-asset-server-key-0001";
pub const NONCE_LEN: usize = 12;
pub const TAG_LEN: usize = 16;

/// Seals responses: nonces are a per-process prefix and a counter, never reused.
pub struct Sealer {
    cipher: Aes256Gcm,
    prefix: u32,
    counter: AtomicU64,
}

#[derive(Debug, thiserror::Error)]
#[error("the response does not decrypt: its tag does not match (a changed or cut body)")]
pub struct Tampered;

impl Sealer {
    pub fn new() -> Sealer {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        Sealer {
            cipher: Aes256Gcm::new(&KEY.into()),
            prefix: std::process::id() ^ now,
            counter: AtomicU64::new(0),
        }
    }

    /// `data` encrypted and authenticated, the nonce in front.
    pub fn seal(&self, data: &[u8]) -> Vec<u8> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut nonce = [0u8; NONCE_LEN];
        nonce[..4].copy_from_slice(&self.prefix.to_le_bytes());
        nonce[4..].copy_from_slice(&n.to_le_bytes());
        let sealed = self
            .cipher
            .encrypt(Nonce::from_slice(&nonce), data)
            .expect("AES-GCM encrypts any length below 64 GiB");
        let mut out = Vec::with_capacity(NONCE_LEN + sealed.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }
}

impl Default for Sealer {
    fn default() -> Self {
        Sealer::new()
    }
}

/// Opens a body sealed by either build.
pub fn open(body: &[u8]) -> Result<Vec<u8>, Tampered> {
    if body.len() < NONCE_LEN + TAG_LEN {
        return Err(Tampered);
    }
    let cipher = Aes256Gcm::new(&KEY.into());
    cipher
        .decrypt(Nonce::from_slice(&body[..NONCE_LEN]), &body[NONCE_LEN..])
        .map_err(|_| Tampered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_bodies_open_and_a_flipped_byte_does_not() {
        let s = Sealer::new();
        let a = s.seal(b"model bytes");
        let b = s.seal(b"model bytes");
        assert_ne!(a[..NONCE_LEN], b[..NONCE_LEN], "a nonce is never reused");
        assert_eq!(open(&a).unwrap(), b"model bytes");
        let mut bad = a.clone();
        bad[NONCE_LEN + 3] ^= 1;
        assert!(open(&bad).is_err());
        assert!(open(&a[..a.len() - 1]).is_err());
    }
}
