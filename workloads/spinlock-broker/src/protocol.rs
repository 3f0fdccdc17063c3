//! The wire protocol between a producer and the broker, over TCP on loopback.
//!
//! A producer sends messages as frames, `[payload length: u32 LE][payload]`, one at a time,
//! and waits for the ack of each: the offset assigned, `u64 LE`, or [`ACK_ERROR`] when the
//! broker could not append it. A producer ends by closing the connection between frames.
//!
//! A message may carry the trace it belongs to, as W3C trace context does over HTTP: a length
//! with its top bit set ([`TRACED`]) is followed by the trace id (16 bytes) and the id of the
//! producer's span that sent it (8 bytes), then the payload of the length's other bits.

use std::io::{self, BufRead, Read, Write};

use crate::commit_log::RECORD_HEADER;

/// The ack of a message the broker could not append.
pub const ACK_ERROR: u64 = u64::MAX;

/// The length's bit that says a trace context comes before the payload.
pub const TRACED: u32 = 1 << 31;

pub use switchyard_harness::otel_ctx::TraceParent;

/// A message read: its record is in the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    pub trace: Option<TraceParent>,
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {len} bytes is larger than the limit of {max} bytes")]
    TooLarge { len: u32, max: u32 },
    #[error("failed to read a frame")]
    Io(#[from] io::Error),
}

/// A payload's length in a frame; 2 GiB and more cannot be written (the top bit is
/// [`TRACED`]'s).
fn frame_len(payload: &[u8]) -> u32 {
    match u32::try_from(payload.len()) {
        Ok(n) if n & TRACED == 0 => n,
        _ => panic!("a payload of {} bytes does not fit a frame", payload.len()),
    }
}

/// A frame for `payload`.
pub fn encode_frame(payload: &[u8]) -> Vec<u8> {
    let len = frame_len(payload);
    let mut frame = Vec::with_capacity(4 + payload.len());
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// Where a traced frame's trace id and parent span id start, and end.
pub const TRACE_AT: std::ops::Range<usize> = 4..4 + TraceParent::LEN;

/// A frame for `payload` sent from span `trace.parent_id` of trace `trace.trace_id` (each
/// message of a traced producer is a trace of its own: [`set_trace`] rewrites the ids in place).
pub fn encode_traced_frame(payload: &[u8], trace: TraceParent) -> Vec<u8> {
    let len = frame_len(payload);
    let mut frame = Vec::with_capacity(TRACE_AT.end + payload.len());
    frame.extend_from_slice(&(len | TRACED).to_le_bytes());
    frame.extend_from_slice(&trace.to_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// Rewrites the trace context of a frame made by [`encode_traced_frame`].
pub fn set_trace(frame: &mut [u8], trace: TraceParent) {
    frame[TRACE_AT].copy_from_slice(&trace.to_bytes());
}

/// Reads one frame into `record` laid out as a commit-log record (`[len][offset, zero for
/// now][payload]`), ready for [`crate::commit_log::CommitLog::append`]. `Ok(None)` when the
/// producer closed the connection between frames.
pub fn read_record(
    reader: &mut impl BufRead,
    record: &mut Vec<u8>,
    max: u32,
) -> Result<Option<Received>, FrameError> {
    if reader.fill_buf()?.is_empty() {
        return Ok(None);
    }
    let mut len = [0u8; 4];
    reader.read_exact(&mut len)?;
    let word = u32::from_le_bytes(len);
    let n = word & !TRACED;
    if n > max {
        return Err(FrameError::TooLarge { len: n, max });
    }
    let trace = if word & TRACED != 0 {
        let mut ids = [0u8; TraceParent::LEN];
        reader.read_exact(&mut ids)?;
        Some(TraceParent::from_bytes(&ids))
    } else {
        None
    };
    record.clear();
    record.resize(RECORD_HEADER + n as usize, 0);
    record[..4].copy_from_slice(&n.to_le_bytes());
    reader.read_exact(&mut record[RECORD_HEADER..])?;
    Ok(Some(Received { trace }))
}

pub fn write_ack(writer: &mut impl Write, offset: u64) -> io::Result<()> {
    writer.write_all(&offset.to_le_bytes())
}

pub fn read_ack(reader: &mut impl Read) -> io::Result<u64> {
    let mut ack = [0u8; 8];
    reader.read_exact(&mut ack)?;
    Ok(u64::from_le_bytes(ack))
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    #[test]
    fn frames_become_records() {
        let mut wire = encode_frame(b"hello");
        wire.extend(encode_frame(b""));
        let mut reader = Cursor::new(wire);
        let mut record = Vec::new();
        assert_eq!(
            read_record(&mut reader, &mut record, 1024).expect("first"),
            Some(Received { trace: None })
        );
        assert_eq!(&record[..4], &5u32.to_le_bytes());
        assert_eq!(&record[4..RECORD_HEADER], &[0; 8]);
        assert_eq!(&record[RECORD_HEADER..], b"hello");
        assert!(
            read_record(&mut reader, &mut record, 1024)
                .expect("empty payload")
                .is_some()
        );
        assert_eq!(record.len(), RECORD_HEADER);
        assert_eq!(
            read_record(&mut reader, &mut record, 1024).expect("clean end"),
            None
        );
    }

    #[test]
    fn a_traced_frame_carries_its_trace_and_a_plain_records_length() {
        let first = TraceParent {
            trace_id: [7; 16],
            parent_id: [9; 8],
        };
        let second = TraceParent {
            trace_id: [1; 16],
            parent_id: [2; 8],
        };
        let mut frame = encode_traced_frame(b"hello", first);
        let mut wire = frame.clone();
        set_trace(&mut frame, second);
        wire.extend(&frame);
        wire.extend(encode_frame(b"plain"));
        let mut reader = Cursor::new(wire);
        let mut record = Vec::new();
        for want in [Some(first), Some(second)] {
            assert_eq!(
                read_record(&mut reader, &mut record, 1024).expect("traced"),
                Some(Received { trace: want })
            );
            // The log's record is the untraced one: its length has no flag.
            assert_eq!(&record[..4], &5u32.to_le_bytes());
            assert_eq!(&record[RECORD_HEADER..], b"hello");
        }
        assert_eq!(
            read_record(&mut reader, &mut record, 1024).expect("plain"),
            Some(Received { trace: None })
        );
        assert_eq!(&record[RECORD_HEADER..], b"plain");
        // The flag does not count toward the size limit, and a cut trace context is an error.
        let mut cut = encode_traced_frame(&[0; 100], first);
        assert!(matches!(
            read_record(&mut Cursor::new(cut.clone()), &mut Vec::new(), 99),
            Err(FrameError::TooLarge { len: 100, max: 99 })
        ));
        cut.truncate(12);
        assert!(matches!(
            read_record(&mut Cursor::new(cut), &mut Vec::new(), 1024),
            Err(FrameError::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof
        ));
    }

    #[test]
    fn oversized_and_truncated_frames_are_errors() {
        let mut reader = Cursor::new(encode_frame(&[0; 100]));
        assert!(matches!(
            read_record(&mut reader, &mut Vec::new(), 99),
            Err(FrameError::TooLarge { len: 100, max: 99 })
        ));
        let mut wire = encode_frame(b"cut short");
        wire.truncate(7);
        let mut reader = Cursor::new(wire);
        assert!(matches!(
            read_record(&mut reader, &mut Vec::new(), 1024),
            Err(FrameError::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof
        ));
    }

    #[test]
    fn acks_round_trip() {
        let mut wire = Vec::new();
        write_ack(&mut wire, 42).expect("ack");
        write_ack(&mut wire, ACK_ERROR).expect("error ack");
        let mut reader = Cursor::new(wire);
        assert_eq!(read_ack(&mut reader).expect("ack"), 42);
        assert_eq!(read_ack(&mut reader).expect("ack"), ACK_ERROR);
    }
}
