//! The relay's datagrams: a fixed 32-byte header, then the payload.
//!
//! ```text
//! offset  size  field
//!      0     2  magic, the bytes `V` `R`
//!      2     1  version, 1
//!      3     1  kind: 1 join, 2 voice, 3 ack
//!      4     4  room id (u32 LE)
//!      8     4  speaker id (u32 LE)
//!     12     8  sequence number (u64 LE)
//!     20     8  send timestamp, ns of the driver's CLOCK_MONOTONIC (u64 LE)
//!     28     2  payload length (u16 LE); must equal the bytes after the header
//!     30     2  reserved, zero
//!     32     …  payload (voice only; join and ack carry none)
//! ```
//!
//! - **join** (speaker → relay): "this address speaks in room R". Sequence 0. The relay adds
//!   the datagram's source address to the room and answers with an ack of sequence 0.
//! - **voice** (speaker → relay → room): sequence numbers start at 1 and grow by one per
//!   packet of a speaker. The relay acks it to the sender and forwards the datagram, unchanged,
//!   to every other member of the room.
//! - **ack** (relay → speaker): the header of the acked message (room, speaker, sequence,
//!   timestamp) with kind ack and no payload, so the speaker can match it and time it.
//!
//! A datagram is at most [`MAX_DATAGRAM`] bytes (an Ethernet MTU minus the IPv4 and UDP
//! headers). Anything that does not decode is refused with a [`DecodeError`].
//!
//! # Bundles (version 2)
//!
//! The `lite` relay merges the frames bound for one destination into one datagram, a
//! *bundle*: a 4-byte header, then the frames back to back, each a complete version-1 datagram
//! (header and payload, its length field delimiting it).
//!
//! ```text
//! offset  size  field
//!      0     2  magic, the bytes `V` `R`
//!      2     1  version, 2
//!      3     1  frame count, 1 to 255; must equal the frames that follow
//!      4     …  the frames
//! ```
//!
//! Only the relay sends bundles, and only with two frames or more (a lone frame goes out as a
//! plain version-1 datagram). A receiver reads any datagram with [`frames`], which takes both
//! versions; [`decode`] takes version 1 only, which is all a relay accepts.

/// The first two bytes of every datagram.
pub const MAGIC: [u8; 2] = *b"VR";
/// The version of a single frame (the only one speakers send).
pub const VERSION: u8 = 1;
/// The version of a bundle of frames for one destination.
pub const BUNDLE_VERSION: u8 = 2;
/// Bytes before a bundle's first frame.
pub const BUNDLE_HEADER_LEN: usize = 4;
/// The most frames a bundle carries (its count is one byte).
pub const MAX_FRAMES: usize = 255;
/// Bytes before the payload.
pub const HEADER_LEN: usize = 32;
/// The largest datagram: 1500 (MTU) − 20 (IPv4) − 8 (UDP).
pub const MAX_DATAGRAM: usize = 1472;
/// The largest voice payload.
pub const MAX_PAYLOAD: usize = MAX_DATAGRAM - HEADER_LEN;

/// What a datagram is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Join,
    Voice,
    Ack,
}

impl Kind {
    fn to_byte(self) -> u8 {
        match self {
            Kind::Join => 1,
            Kind::Voice => 2,
            Kind::Ack => 3,
        }
    }

    fn from_byte(b: u8) -> Option<Self> {
        match b {
            1 => Some(Kind::Join),
            2 => Some(Kind::Voice),
            3 => Some(Kind::Ack),
            _ => None,
        }
    }
}

/// The fields of a header other than the payload length (which comes from the payload).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub room: u32,
    pub speaker: u32,
    pub seq: u64,
    /// CLOCK_MONOTONIC of the sender, in ns.
    pub sent_ns: u64,
}

impl Header {
    /// The ack of this message: the same fields, kind ack.
    pub fn ack(&self) -> Header {
        Header {
            kind: Kind::Ack,
            ..*self
        }
    }

    /// The header of a datagram carrying `payload_len` bytes of payload. The length is not
    /// checked here; [`encode`] does.
    pub fn to_bytes(&self, payload_len: u16) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..2].copy_from_slice(&MAGIC);
        b[2] = VERSION;
        b[3] = self.kind.to_byte();
        b[4..8].copy_from_slice(&self.room.to_le_bytes());
        b[8..12].copy_from_slice(&self.speaker.to_le_bytes());
        b[12..20].copy_from_slice(&self.seq.to_le_bytes());
        b[20..28].copy_from_slice(&self.sent_ns.to_le_bytes());
        b[28..30].copy_from_slice(&payload_len.to_le_bytes());
        b
    }
}

/// A decoded datagram, borrowing its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    pub header: Header,
    pub payload: &'a [u8],
}

/// Why a datagram was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("datagram of {len} bytes is shorter than the {HEADER_LEN}-byte header")]
    Truncated { len: usize },
    #[error("datagram of {len} bytes is longer than the limit of {MAX_DATAGRAM} bytes")]
    TooLong { len: usize },
    #[error("datagram does not start with the magic bytes `VR` (found {found:02x?})")]
    BadMagic { found: [u8; 2] },
    #[error(
        "datagram has version {0}; this build reads {VERSION} (a frame) and {BUNDLE_VERSION} (a bundle)"
    )]
    Version(u8),
    #[error("bundle declares {declared} frames but carries {actual}")]
    FrameCount { declared: usize, actual: usize },
    #[error("frame {index} of a bundle does not decode")]
    Frame {
        index: usize,
        #[source]
        source: Box<DecodeError>,
    },
    #[error("datagram has unknown kind {0}")]
    UnknownKind(u8),
    #[error("datagram header has non-zero reserved bytes")]
    Reserved,
    #[error("datagram declares {declared} payload bytes but carries {actual}")]
    Length { declared: usize, actual: usize },
    #[error("{kind:?} datagram carries {len} payload bytes; only voice has a payload")]
    UnexpectedPayload { kind: Kind, len: usize },
}

/// Why a datagram could not be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EncodeError {
    #[error("payload of {len} bytes is larger than the limit of {MAX_PAYLOAD} bytes")]
    PayloadTooLarge { len: usize },
    #[error("{kind:?} datagram cannot carry a payload ({len} bytes given)")]
    UnexpectedPayload { kind: Kind, len: usize },
    #[error("a bundle takes 1 to {MAX_FRAMES} frames ({count} given)")]
    FrameCount { count: usize },
    #[error("a bundle of {len} bytes is larger than the limit of {MAX_DATAGRAM} bytes")]
    BundleTooLarge { len: usize },
}

/// Writes the datagram for `header` and `payload` into `out` (cleared first).
pub fn encode(header: &Header, payload: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let len = payload.len();
    if len > MAX_PAYLOAD {
        return Err(EncodeError::PayloadTooLarge { len });
    }
    if header.kind != Kind::Voice && len > 0 {
        return Err(EncodeError::UnexpectedPayload {
            kind: header.kind,
            len,
        });
    }
    out.clear();
    // MAX_PAYLOAD fits in a u16.
    out.extend_from_slice(&header.to_bytes(len as u16));
    out.extend_from_slice(payload);
    Ok(())
}

/// The header of a bundle of `frames` frames (1 to [`MAX_FRAMES`]; not checked here, as
/// [`encode_bundle`] does). A sender that gathers the frames itself (`sendmmsg` with one
/// iovec per frame) puts this before them.
pub fn bundle_header(frames: u8) -> [u8; BUNDLE_HEADER_LEN] {
    [MAGIC[0], MAGIC[1], BUNDLE_VERSION, frames]
}

/// Writes a bundle of `frames` (each an encoded version-1 datagram, as [`encode`] writes it)
/// into `out` (cleared first). The frames are not decoded again here.
pub fn encode_bundle(frames: &[&[u8]], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let count = frames.len();
    if !(1..=MAX_FRAMES).contains(&count) {
        return Err(EncodeError::FrameCount { count });
    }
    let len = BUNDLE_HEADER_LEN + frames.iter().map(|f| f.len()).sum::<usize>();
    if len > MAX_DATAGRAM {
        return Err(EncodeError::BundleTooLarge { len });
    }
    out.clear();
    // count ≤ MAX_FRAMES fits in a byte.
    out.extend_from_slice(&bundle_header(count as u8));
    for f in frames {
        out.extend_from_slice(f);
    }
    Ok(())
}

/// The frames of a datagram of either version, each checked as [`decode`] checks a
/// datagram: one for a version-1 datagram, the count of a bundle's for a bundle. The whole
/// datagram is checked before the first frame is given, so a malformed bundle yields none.
pub fn frames(datagram: &[u8]) -> Result<Frames<'_>, DecodeError> {
    let len = datagram.len();
    if len > MAX_DATAGRAM {
        return Err(DecodeError::TooLong { len });
    }
    if len >= 3 && datagram[0..2] == MAGIC && datagram[2] == BUNDLE_VERSION {
        if len < BUNDLE_HEADER_LEN {
            return Err(DecodeError::Truncated { len });
        }
        let declared = usize::from(datagram[3]);
        let body = &datagram[BUNDLE_HEADER_LEN..];
        let mut rest = body;
        let mut actual = 0;
        while !rest.is_empty() {
            let (frame, after) = split_frame(rest);
            decode(frame).map_err(|source| DecodeError::Frame {
                index: actual,
                source: Box::new(source),
            })?;
            actual += 1;
            rest = after;
        }
        if actual != declared || declared == 0 {
            return Err(DecodeError::FrameCount { declared, actual });
        }
        return Ok(Frames { rest: body });
    }
    decode(datagram)?;
    Ok(Frames { rest: datagram })
}

/// The first frame of `bytes` by its header's length field (all of `bytes` when shorter than
/// a header or than the length says, so [`decode`] reports it), and what follows it.
fn split_frame(bytes: &[u8]) -> (&[u8], &[u8]) {
    if bytes.len() < HEADER_LEN {
        return (bytes, &[]);
    }
    let declared = usize::from(u16::from_le_bytes([bytes[28], bytes[29]]));
    bytes.split_at((HEADER_LEN + declared).min(bytes.len()))
}

/// The frames of a checked datagram, in order (see [`frames`]).
#[derive(Clone, Debug)]
pub struct Frames<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Frames<'a> {
    type Item = Packet<'a>;

    fn next(&mut self) -> Option<Packet<'a>> {
        if self.rest.is_empty() {
            return None;
        }
        let (frame, after) = split_frame(self.rest);
        self.rest = after;
        // Every frame was decoded once by `frames`.
        decode(frame).ok()
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// Decodes one datagram; every field is checked, nothing panics on any input.
pub fn decode(datagram: &[u8]) -> Result<Packet<'_>, DecodeError> {
    let len = datagram.len();
    if len < HEADER_LEN {
        return Err(DecodeError::Truncated { len });
    }
    if len > MAX_DATAGRAM {
        return Err(DecodeError::TooLong { len });
    }
    let (head, payload) = datagram.split_at(HEADER_LEN);
    if head[0..2] != MAGIC {
        return Err(DecodeError::BadMagic {
            found: [head[0], head[1]],
        });
    }
    if head[2] != VERSION {
        return Err(DecodeError::Version(head[2]));
    }
    let kind = Kind::from_byte(head[3]).ok_or(DecodeError::UnknownKind(head[3]))?;
    if head[30..32] != [0, 0] {
        return Err(DecodeError::Reserved);
    }
    let declared = usize::from(u16::from_le_bytes([head[28], head[29]]));
    if declared != payload.len() {
        return Err(DecodeError::Length {
            declared,
            actual: payload.len(),
        });
    }
    if kind != Kind::Voice && !payload.is_empty() {
        return Err(DecodeError::UnexpectedPayload {
            kind,
            len: payload.len(),
        });
    }
    Ok(Packet {
        header: Header {
            kind,
            room: u32_at(head, 4),
            speaker: u32_at(head, 8),
            seq: u64_at(head, 12),
            sent_ns: u64_at(head, 20),
        },
        payload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voice() -> Header {
        Header {
            kind: Kind::Voice,
            room: 7,
            speaker: 0x0102_0304,
            seq: 0x1122_3344_5566_7788,
            sent_ns: 123_456_789_012,
        }
    }

    #[test]
    fn round_trip_every_kind() {
        let payload: Vec<u8> = (0..180).map(|i| i as u8).collect();
        let mut wire = Vec::new();
        encode(&voice(), &payload, &mut wire).expect("voice");
        assert_eq!(wire.len(), HEADER_LEN + 180);
        let p = decode(&wire).expect("decode voice");
        assert_eq!(p.header, voice());
        assert_eq!(p.payload, &payload[..]);

        for kind in [Kind::Join, Kind::Ack] {
            let h = Header { kind, ..voice() };
            encode(&h, &[], &mut wire).expect("encode");
            assert_eq!(wire.len(), HEADER_LEN);
            let p = decode(&wire).expect("decode");
            assert_eq!(p.header, h);
            assert!(p.payload.is_empty());
        }
    }

    #[test]
    fn layout_is_fixed() {
        let mut wire = Vec::new();
        encode(&voice(), b"xy", &mut wire).expect("encode");
        assert_eq!(&wire[0..4], b"VR\x01\x02");
        assert_eq!(&wire[4..8], &7u32.to_le_bytes());
        assert_eq!(&wire[8..12], &[4, 3, 2, 1]);
        assert_eq!(&wire[28..32], &[2, 0, 0, 0]);
        assert_eq!(&wire[32..], b"xy");
    }

    #[test]
    fn ack_keeps_the_fields() {
        let a = voice().ack();
        assert_eq!(a.kind, Kind::Ack);
        assert_eq!(
            (a.room, a.speaker, a.seq, a.sent_ns),
            (7, 0x0102_0304, voice().seq, voice().sent_ns)
        );
        let wire = a.to_bytes(0);
        let p = decode(&wire).expect("ack");
        assert_eq!(p.header, a);
    }

    #[test]
    fn largest_payload_fits_and_one_more_does_not() {
        let mut wire = Vec::new();
        encode(&voice(), &[0; MAX_PAYLOAD], &mut wire).expect("largest");
        assert_eq!(wire.len(), MAX_DATAGRAM);
        assert!(decode(&wire).is_ok());
        assert_eq!(
            encode(&voice(), &[0; MAX_PAYLOAD + 1], &mut wire),
            Err(EncodeError::PayloadTooLarge {
                len: MAX_PAYLOAD + 1
            })
        );
        let join = Header {
            kind: Kind::Join,
            ..voice()
        };
        assert!(matches!(
            encode(&join, b"x", &mut wire),
            Err(EncodeError::UnexpectedPayload {
                kind: Kind::Join,
                len: 1
            })
        ));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let mut wire = Vec::new();
        encode(&voice(), &[9; 40], &mut wire).expect("encode");
        for cut in 0..wire.len() {
            let err = decode(&wire[..cut]).expect_err("truncated");
            if cut < HEADER_LEN {
                assert_eq!(err, DecodeError::Truncated { len: cut });
            } else {
                assert_eq!(
                    err,
                    DecodeError::Length {
                        declared: 40,
                        actual: cut - HEADER_LEN
                    }
                );
            }
        }
    }

    #[test]
    fn corrupt_headers_are_errors() {
        let mut good = Vec::new();
        encode(&voice(), &[1; 10], &mut good).expect("encode");
        let corrupt = |at: usize, value: u8| {
            let mut w = good.clone();
            w[at] = value;
            decode(&w).expect_err("corrupt")
        };
        assert_eq!(corrupt(0, b'X'), DecodeError::BadMagic { found: *b"XR" });
        assert_eq!(corrupt(2, 2), DecodeError::Version(2));
        assert_eq!(corrupt(3, 0), DecodeError::UnknownKind(0));
        assert_eq!(corrupt(3, 9), DecodeError::UnknownKind(9));
        assert_eq!(corrupt(31, 1), DecodeError::Reserved);
        assert_eq!(
            corrupt(28, 11),
            DecodeError::Length {
                declared: 11,
                actual: 10
            }
        );
        // A voice header relabelled as an ack still carries a payload.
        assert_eq!(
            corrupt(3, 3),
            DecodeError::UnexpectedPayload {
                kind: Kind::Ack,
                len: 10
            }
        );
        let mut long = good.clone();
        long.extend_from_slice(&[0; 1]);
        assert_eq!(
            decode(&long),
            Err(DecodeError::Length {
                declared: 10,
                actual: 11
            })
        );
        assert_eq!(
            decode(&vec![0; MAX_DATAGRAM + 1]),
            Err(DecodeError::TooLong {
                len: MAX_DATAGRAM + 1
            })
        );
    }

    fn frame(h: &Header, payload: &[u8]) -> Vec<u8> {
        let mut wire = Vec::new();
        encode(h, payload, &mut wire).expect("frame");
        wire
    }

    #[test]
    fn a_bundle_carries_its_frames_in_order() {
        let ack = voice().ack();
        let other = Header {
            speaker: 9,
            seq: 2,
            sent_ns: 5,
            ..voice()
        };
        let (a, b, c) = (
            frame(&ack, &[]),
            frame(&voice(), b"xyz"),
            frame(&other, &[7; 180]),
        );
        let mut wire = Vec::new();
        encode_bundle(&[&a, &b, &c], &mut wire).expect("bundle");
        assert_eq!(&wire[..4], b"VR\x02\x03");
        assert_eq!(wire.len(), 4 + 32 + 35 + 212);
        assert_eq!(&wire[4..36], &a[..]);
        let got: Vec<Packet> = frames(&wire).expect("frames").collect();
        assert_eq!(
            got,
            [
                Packet {
                    header: ack,
                    payload: &[]
                },
                Packet {
                    header: voice(),
                    payload: b"xyz"
                },
                Packet {
                    header: other,
                    payload: &[7; 180]
                },
            ]
        );
        // A plain datagram is one frame.
        let one: Vec<Packet> = frames(&b).expect("frame").collect();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].header, voice());
        // A relay reads frames only.
        assert_eq!(decode(&wire), Err(DecodeError::Version(2)));
    }

    #[test]
    fn bundle_limits() {
        let a = frame(&voice().ack(), &[]);
        let mut wire = Vec::new();
        assert_eq!(
            encode_bundle(&[], &mut wire),
            Err(EncodeError::FrameCount { count: 0 })
        );
        let many = vec![&a[..]; MAX_FRAMES + 1];
        assert_eq!(
            encode_bundle(&many, &mut wire),
            Err(EncodeError::FrameCount {
                count: MAX_FRAMES + 1
            })
        );
        // 45 acks: 4 + 45 × 32 = 1444 bytes fit; 46 do not.
        encode_bundle(&many[..45], &mut wire).expect("45 acks");
        assert_eq!(frames(&wire).expect("45").count(), 45);
        assert_eq!(
            encode_bundle(&many[..46], &mut wire),
            Err(EncodeError::BundleTooLarge { len: 4 + 46 * 32 })
        );
    }

    #[test]
    fn malformed_bundles_are_errors() {
        let (a, b) = (frame(&voice().ack(), &[]), frame(&voice(), &[1; 10]));
        let mut good = Vec::new();
        encode_bundle(&[&a, &b], &mut good).expect("bundle");
        let mut w = good.clone();
        w[3] = 3;
        assert_eq!(
            frames(&w).map(|_| ()),
            Err(DecodeError::FrameCount {
                declared: 3,
                actual: 2
            })
        );
        w[3] = 0;
        assert!(matches!(
            frames(&w),
            Err(DecodeError::FrameCount { declared: 0, .. })
        ));
        assert_eq!(
            frames(&good[..4]).map(|_| ()),
            Err(DecodeError::FrameCount {
                declared: 2,
                actual: 0
            })
        );
        assert_eq!(
            frames(&good[..3]).map(|_| ()),
            Err(DecodeError::Truncated { len: 3 })
        );
        // The second frame cut short, then with a corrupt magic.
        let cut = good.len() - 1;
        assert_eq!(
            frames(&good[..cut]).map(|_| ()),
            Err(DecodeError::Frame {
                index: 1,
                source: Box::new(DecodeError::Length {
                    declared: 10,
                    actual: 9
                })
            })
        );
        let mut w = good.clone();
        w[4 + 32] = b'X';
        assert!(matches!(
            frames(&w),
            Err(DecodeError::Frame { index: 1, ref source })
                if **source == DecodeError::BadMagic { found: *b"XR" }
        ));
        // A bundle inside a bundle is not a frame.
        let mut nested = Vec::new();
        encode_bundle(&[&good], &mut nested).expect("nested");
        assert!(matches!(
            frames(&nested),
            Err(DecodeError::Frame { index: 0, ref source }) if **source == DecodeError::Version(2)
        ));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A cheap deterministic generator: every length up to a little past the header, with
        // bytes that sometimes form a valid prefix.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for len in 0..(HEADER_LEN + 64) {
            for _ in 0..200 {
                let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                if len >= 4 && next() % 2 == 0 {
                    b[0..3].copy_from_slice(b"VR\x01");
                }
                if len >= 4 && next() % 3 == 0 {
                    b[0..3].copy_from_slice(b"VR\x02");
                }
                let _ = decode(&b);
                if let Ok(f) = frames(&b) {
                    let _ = f.count();
                }
            }
        }
    }
}
