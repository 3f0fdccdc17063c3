//! A target's published OpenTelemetry process context (OTEP 4719), read from outside: the
//! mapping named `OTEL_CTX` in its memory map, its header, then the payload the header points
//! to, checked against a publication that changes under the read.

use std::{fs::File, os::unix::fs::FileExt as _, time::Duration};

use switchyard_export::process_context::{self, HEADER_BYTES};

/// The names its mapping shows in /proc/PID/maps: a memfd named by prctl, an anonymous
/// mapping named by prctl, a memfd that could not be named.
const NAMES: [&str; 3] = [
    "[anon_shmem:OTEL_CTX]",
    "[anon:OTEL_CTX]",
    "/memfd:OTEL_CTX",
];

/// The published context's `service.*` and `deployment.*` attributes, what the run takes as
/// its resource; `None` when the target publishes none. An error says what was wrong with
/// the one it publishes.
pub fn read(pid: u32) -> Result<Option<Vec<(String, String)>>, String> {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Ok(None);
    };
    let Some(start) = maps.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (range, perms) = (f.next()?, f.next()?);
        let name = f.nth(3)?;
        (NAMES.iter().any(|n| name.starts_with(n)) && !perms.contains('x'))
            .then(|| u64::from_str_radix(range.split('-').next()?, 16).ok())
            .flatten()
    }) else {
        return Ok(None);
    };
    let mem = File::open(format!("/proc/{pid}/mem")).map_err(|e| format!("its memory: {e}"))?;
    let read = |addr: u64, len: usize| -> Result<Vec<u8>, String> {
        let mut b = vec![0; len];
        mem.read_exact_at(&mut b, addr)
            .map_err(|e| format!("reading {len} bytes at {addr:#x}: {e}"))?;
        Ok(b)
    };
    // A publisher sets the time to 0 while it changes the payload, and to a new time after:
    // a read that sees 0, or two different times around the payload, is tried again.
    for _ in 0..3 {
        let h = process_context::header(&read(start, HEADER_BYTES)?)?;
        if h.published_at_ns == 0 {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        let payload = read(h.payload_addr, h.payload_size as usize)?;
        let again = process_context::header(&read(start, HEADER_BYTES)?)?;
        if again.published_at_ns != h.published_at_ns {
            continue;
        }
        let attributes = process_context::resource(&payload)?;
        return Ok(Some(
            attributes
                .into_iter()
                .filter(|(k, _)| k.starts_with("service.") || k.starts_with("deployment."))
                .collect(),
        ));
    }
    Err("it changed under every read".into())
}
