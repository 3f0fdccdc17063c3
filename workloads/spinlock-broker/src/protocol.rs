//! The wire protocol between a producer and the broker, over TCP on loopback.
//!
//! A producer sends messages as frames, `[payload length: u32 LE][payload]`, one at a time,
//! and waits for the ack of each: the offset assigned, `u64 LE`, or [`ACK_ERROR`] when the
//! broker could not append it. A producer ends by closing the connection between frames.

use std::io::{self, BufRead, Read, Write};

use crate::commit_log::RECORD_HEADER;

/// The ack of a message the broker could not append.
pub const ACK_ERROR: u64 = u64::MAX;

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {len} bytes is larger than the limit of {max} bytes")]
    TooLarge { len: u32, max: u32 },
    #[error("failed to read a frame")]
    Io(#[from] io::Error),
}

/// A frame for `payload`.
pub fn encode_frame(payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let mut frame = Vec::with_capacity(4 + payload.len());
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// Reads one frame into `record` laid out as a commit-log record (`[len][offset, zero for
/// now][payload]`), ready for [`crate::commit_log::CommitLog::append`]. `Ok(false)` when the
/// producer closed the connection between frames.
pub fn read_record(
    reader: &mut impl BufRead,
    record: &mut Vec<u8>,
    max: u32,
) -> Result<bool, FrameError> {
    if reader.fill_buf()?.is_empty() {
        return Ok(false);
    }
    let mut len = [0u8; 4];
    reader.read_exact(&mut len)?;
    let n = u32::from_le_bytes(len);
    if n > max {
        return Err(FrameError::TooLarge { len: n, max });
    }
    record.clear();
    record.resize(RECORD_HEADER + n as usize, 0);
    record[..4].copy_from_slice(&len);
    reader.read_exact(&mut record[RECORD_HEADER..])?;
    Ok(true)
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
        assert!(read_record(&mut reader, &mut record, 1024).expect("first"));
        assert_eq!(&record[..4], &5u32.to_le_bytes());
        assert_eq!(&record[4..RECORD_HEADER], &[0; 8]);
        assert_eq!(&record[RECORD_HEADER..], b"hello");
        assert!(read_record(&mut reader, &mut record, 1024).expect("empty payload"));
        assert_eq!(record.len(), RECORD_HEADER);
        assert!(!read_record(&mut reader, &mut record, 1024).expect("clean end"));
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
