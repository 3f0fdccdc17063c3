//! The wire protocol of both servers (PROTOCOL.md is the full description).
//!
//! A request is `[body length: u32 LE][op: u8][fields, LE]`:
//!
//! | op | name      | fields                                  | body length |
//! |----|-----------|-----------------------------------------|-------------|
//! | 1  | `ack`     | user u64, channel u64, message id u64   | 25          |
//! | 2  | `mention` | user u64, channel u64                   | 17          |
//! | 3  | `get`     | user u64, channel u64                   | 17          |
//!
//! A request may carry its trace context ([`TRACED`] in the op byte): the trace id and the
//! client's span id come first in the fields, and the body is 24 bytes longer.
//!
//! Every request gets exactly one response, in order, always 17 bytes:
//! `[13: u32 LE][status: u8][last read: u64 LE][mentions: u32 LE]`, the read state after the
//! request (zeros with an error status).

use std::io::{self, Read};

pub use switchyard_harness::otel_ctx::TraceParent;

/// `ack(user, channel, message_id)`: last read := message id, mentions := 0.
pub const OP_ACK: u8 = 1;
/// `mention(user, channel)`: mentions += 1 (saturating).
pub const OP_MENTION: u8 = 2;
/// `get(user, channel)`: the read state, unchanged.
pub const OP_GET: u8 = 3;

/// Set in the op byte of a request that carries its trace context: the trace id (16 bytes)
/// and the sending span's id (8) come before the op's fields.
pub const TRACED: u8 = 0x80;

pub const STATUS_OK: u8 = 0;
/// The op byte is none of the known ops; the connection stays open.
pub const STATUS_UNKNOWN_OP: u8 = 1;
/// The body length does not fit the op (or is 0, or above [`MAX_BODY`]).
pub const STATUS_BAD_LENGTH: u8 = 2;
/// The store could not be read or written; the cache is unchanged.
pub const STATUS_STORE_ERROR: u8 = 3;

/// Bodies longer than this are refused with [`STATUS_BAD_LENGTH`] and the connection is
/// closed (the server does not read them).
pub const MAX_BODY: u32 = 1024;
pub const ACK_BODY: usize = 25;
pub const KEY_BODY: usize = 17;
/// A response on the wire: length prefix, status, last read, mentions.
pub const RESPONSE_LEN: usize = 4 + RESPONSE_BODY;
pub const RESPONSE_BODY: usize = 1 + 8 + 4;

/// One read state's identity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub user: u64,
    pub channel: u64,
}

impl Key {
    pub const fn new(user: u64, channel: u64) -> Self {
        Self { user, channel }
    }
}

/// The counters of one (user, channel).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadState {
    pub last_read: u64,
    pub mentions: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    Ack { key: Key, message_id: u64 },
    Mention { key: Key },
    Get { key: Key },
}

impl Request {
    pub fn key(&self) -> Key {
        match *self {
            Self::Ack { key, .. } | Self::Mention { key } | Self::Get { key } => key,
        }
    }

    /// Appends the request's frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_traced(None, out);
    }

    /// Appends the request's frame to `out`, with its trace context if it has one.
    pub fn encode_traced(&self, trace: Option<TraceParent>, out: &mut Vec<u8>) {
        let (op, key, message_id) = match *self {
            Self::Ack { key, message_id } => (OP_ACK, key, Some(message_id)),
            Self::Mention { key } => (OP_MENTION, key, None),
            Self::Get { key } => (OP_GET, key, None),
        };
        let len = if message_id.is_some() {
            ACK_BODY
        } else {
            KEY_BODY
        };
        let (len, op) = match trace {
            Some(_) => (len + TraceParent::LEN, op | TRACED),
            None => (len, op),
        };
        out.extend_from_slice(&(len as u32).to_le_bytes());
        out.push(op);
        if let Some(t) = trace {
            out.extend_from_slice(&t.to_bytes());
        }
        out.extend_from_slice(&key.user.to_le_bytes());
        out.extend_from_slice(&key.channel.to_le_bytes());
        if let Some(id) = message_id {
            out.extend_from_slice(&id.to_le_bytes());
        }
    }

    /// The request in a body (what follows the length prefix), or the error status to answer.
    pub fn decode(body: &[u8]) -> Result<Self, u8> {
        Self::decode_traced(body).map(|(req, _)| req)
    }

    /// The request in a body and the trace context it carries, or the error status to answer.
    pub fn decode_traced(body: &[u8]) -> Result<(Self, Option<TraceParent>), u8> {
        let Some((&op, fields)) = body.split_first() else {
            return Err(STATUS_BAD_LENGTH);
        };
        let traced = op & TRACED != 0;
        let op = op & !TRACED;
        let expected = match op {
            OP_ACK => ACK_BODY,
            OP_MENTION | OP_GET => KEY_BODY,
            _ => return Err(STATUS_UNKNOWN_OP),
        };
        let context = if traced { TraceParent::LEN } else { 0 };
        if body.len() != expected + context {
            return Err(STATUS_BAD_LENGTH);
        }
        let (trace, fields) = fields.split_at(context);
        let trace = trace
            .try_into()
            .ok()
            .map(|ids: &[u8; TraceParent::LEN]| TraceParent::from_bytes(ids));
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&fields[i..i + 8]);
            u64::from_le_bytes(b)
        };
        let key = Key::new(u64_at(0), u64_at(8));
        let req = match op {
            OP_ACK => Self::Ack {
                key,
                message_id: u64_at(16),
            },
            OP_MENTION => Self::Mention { key },
            _ => Self::Get { key },
        };
        Ok((req, trace))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u8,
    pub state: ReadState,
}

impl Response {
    pub const fn ok(state: ReadState) -> Self {
        Self {
            status: STATUS_OK,
            state,
        }
    }

    pub const fn error(status: u8) -> Self {
        Self {
            status,
            state: ReadState {
                last_read: 0,
                mentions: 0,
            },
        }
    }

    pub fn encode(&self) -> [u8; RESPONSE_LEN] {
        let mut out = [0u8; RESPONSE_LEN];
        out[..4].copy_from_slice(&(RESPONSE_BODY as u32).to_le_bytes());
        out[4] = self.status;
        out[5..13].copy_from_slice(&self.state.last_read.to_le_bytes());
        out[13..17].copy_from_slice(&self.state.mentions.to_le_bytes());
        out
    }

    /// Reads one response; a length prefix other than 13 is `InvalidData`.
    pub fn read(reader: &mut impl Read) -> io::Result<Self> {
        let mut b = [0u8; RESPONSE_LEN];
        reader.read_exact(&mut b)?;
        Self::decode(&b)
    }

    pub fn decode(b: &[u8; RESPONSE_LEN]) -> io::Result<Self> {
        let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if len as usize != RESPONSE_BODY {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("response body of {len} bytes, expected {RESPONSE_BODY}"),
            ));
        }
        let mut last_read = [0u8; 8];
        last_read.copy_from_slice(&b[5..13]);
        Ok(Self {
            status: b[4],
            state: ReadState {
                last_read: u64::from_le_bytes(last_read),
                mentions: u32::from_le_bytes([b[13], b[14], b[15], b[16]]),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        let key = Key::new(u64::MAX, 7);
        for req in [
            Request::Ack {
                key,
                message_id: 1 << 60,
            },
            Request::Mention { key },
            Request::Get { key },
        ] {
            let mut wire = Vec::new();
            req.encode(&mut wire);
            let len = u32::from_le_bytes([wire[0], wire[1], wire[2], wire[3]]) as usize;
            assert_eq!(len, wire.len() - 4);
            assert_eq!(Request::decode(&wire[4..]), Ok(req));
            // With its trace context: 24 bytes longer, the same request.
            let trace = TraceParent::nth(7, 9);
            let mut traced = Vec::new();
            req.encode_traced(Some(trace), &mut traced);
            let len = u32::from_le_bytes([traced[0], traced[1], traced[2], traced[3]]) as usize;
            assert_eq!(len, wire.len() - 4 + TraceParent::LEN);
            assert_eq!(traced[4], wire[4] | TRACED);
            assert_eq!(Request::decode_traced(&traced[4..]), Ok((req, Some(trace))));
            assert_eq!(Request::decode_traced(&wire[4..]), Ok((req, None)));
        }
    }

    #[test]
    fn bad_bodies_get_an_error_status() {
        assert_eq!(Request::decode(&[]), Err(STATUS_BAD_LENGTH));
        assert_eq!(Request::decode(&[9; 17]), Err(STATUS_UNKNOWN_OP));
        assert_eq!(Request::decode(&[OP_GET; 9]), Err(STATUS_BAD_LENGTH));
        assert_eq!(Request::decode(&[OP_ACK; 17]), Err(STATUS_BAD_LENGTH));
        assert_eq!(Request::decode(&[OP_MENTION; 25]), Err(STATUS_BAD_LENGTH));
        // A traced op needs its 24 bytes of context; an unknown one is unknown, traced or not.
        let mut get = vec![OP_GET | TRACED];
        get.extend([0; 16]);
        assert_eq!(Request::decode(&get), Err(STATUS_BAD_LENGTH));
        get.extend([0; 24]);
        assert!(Request::decode(&get).is_ok());
        assert_eq!(Request::decode(&[9 | TRACED; 41]), Err(STATUS_UNKNOWN_OP));
    }

    #[test]
    fn responses_round_trip() {
        let r = Response::ok(ReadState {
            last_read: 42,
            mentions: 3,
        });
        let wire = r.encode();
        assert_eq!(&wire[..4], &13u32.to_le_bytes());
        assert_eq!(Response::read(&mut &wire[..]).expect("response"), r);
        let mut bad = wire;
        bad[0] = 12;
        assert!(Response::decode(&bad).is_err());
    }
}
