//! The ready handshake: once listening, a server prints `ready <port>` on stdout (one line,
//! flushed), so whoever started it learns the port; servers bind port 0 by default.

use std::io::{self, BufRead, Write as _};

/// What a ready line starts with.
pub const READY_PREFIX: &str = "ready ";

/// Why no port was read.
#[derive(Debug, thiserror::Error)]
pub enum ReadyError {
    #[error("server output ended before its `ready <port>` line")]
    Eof,
    #[error("failed to read the server's output")]
    Io(#[source] io::Error),
}

/// Prints `ready <port>` on stdout and flushes it. Call it once the listener is bound.
pub fn announce_ready(port: u16) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{READY_PREFIX}{port}")?;
    out.flush()
}

/// The port of a ready line, `None` for any other line.
pub fn parse_ready_line(line: &str) -> Option<u16> {
    line.trim_end()
        .strip_prefix(READY_PREFIX)
        .and_then(|port| port.trim().parse().ok())
}

/// Reads lines until the ready line and returns its port; the lines before it (if any) are
/// handed to `other`.
pub fn read_ready(
    reader: &mut impl BufRead,
    mut other: impl FnMut(&str),
) -> Result<u16, ReadyError> {
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).map_err(ReadyError::Io)? == 0 {
            return Err(ReadyError::Eof);
        }
        match parse_ready_line(&line) {
            Some(port) => return Ok(port),
            None => other(line.trim_end()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ready_lines() {
        assert_eq!(parse_ready_line("ready 40123\n"), Some(40123));
        assert_eq!(parse_ready_line("ready 0"), Some(0));
        assert_eq!(parse_ready_line("ready"), None);
        assert_eq!(parse_ready_line("ready port"), None);
        assert_eq!(parse_ready_line("ready 70000"), None);
        assert_eq!(parse_ready_line("not ready 1"), None);
    }

    #[test]
    fn reads_past_other_lines() {
        let mut input = io::Cursor::new("starting\nlistening…\nready 5555\n{\"after\":1}\n");
        let mut seen = Vec::new();
        let port = read_ready(&mut input, |l| seen.push(l.to_owned())).expect("port");
        assert_eq!(port, 5555);
        assert_eq!(seen, ["starting", "listening…"]);
        let mut rest = String::new();
        input.read_line(&mut rest).expect("rest");
        assert_eq!(rest, "{\"after\":1}\n");
    }

    #[test]
    fn eof_before_ready_is_an_error() {
        let mut input = io::Cursor::new("error: address in use\n");
        assert!(matches!(
            read_ready(&mut input, |_| {}),
            Err(ReadyError::Eof)
        ));
    }
}
