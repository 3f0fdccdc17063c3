//! The names of a Go binary's wait reasons (`runtime.waitReasonStrings`): the number a
//! goroutine parks with (`runtime.gopark`'s third argument) is an index into it, and the
//! list differs between Go versions.

use std::path::Path;

use object::{Object, ObjectSection, ObjectSymbol};

/// The wait reasons' names, by number; empty when the binary has no such table.
pub fn wait_reasons(binary: &Path) -> Vec<String> {
    let Ok(data) = std::fs::read(binary) else {
        return Vec::new();
    };
    let Ok(file) = object::File::parse(&*data) else {
        return Vec::new();
    };
    let Some(table) = file
        .symbols()
        .find(|s| s.name() == Ok("runtime.waitReasonStrings"))
    else {
        return Vec::new();
    };
    let little = file.is_little_endian();
    let word = |b: &[u8]| -> u64 {
        let b: [u8; 8] = b.try_into().unwrap_or_default();
        if little {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        }
    };
    let Some(entries) = bytes_at(&file, table.address(), table.size()) else {
        return Vec::new();
    };
    // Each is a Go string: a pointer and a length.
    entries
        .chunks_exact(16)
        .map(|e| {
            let (ptr, len) = (word(&e[..8]), word(&e[8..]));
            bytes_at(&file, ptr, len.min(256))
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default()
        })
        .collect()
}

/// `len` bytes of the file's image at virtual address `at`.
fn bytes_at<'d>(file: &object::File<'d>, at: u64, len: u64) -> Option<&'d [u8]> {
    let section = file
        .sections()
        .find(|s| s.address() <= at && at + len <= s.address() + s.size())?;
    let data = section.data().ok()?;
    let from = usize::try_from(at - section.address()).ok()?;
    data.get(from..from + usize::try_from(len).ok()?)
}

/// The name of reason `reason` (as the kernel keeps it: the number plus one).
pub fn name(reasons: &[String], reason: u32) -> String {
    if reason == switchyard_common::go_sched::PREEMPTED + 1 {
        return "preempted (stack scan)".into();
    }
    reason
        .checked_sub(1)
        .and_then(|r| reasons.get(r as usize))
        .filter(|n| !n.is_empty())
        .cloned()
        .unwrap_or_else(|| format!("wait reason {}", reason.saturating_sub(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_named_by_its_number_plus_one() {
        let reasons: Vec<String> = ["", "GC assist marking", "IO wait"]
            .map(String::from)
            .into();
        assert_eq!(name(&reasons, 3), "IO wait");
        assert_eq!(name(&reasons, 1), "wait reason 0");
        assert_eq!(name(&reasons, 9), "wait reason 8");
        assert_eq!(
            name(&reasons, switchyard_common::go_sched::PREEMPTED + 1),
            "preempted (stack scan)"
        );
    }

    #[test]
    fn a_file_that_is_not_go_has_no_reasons() {
        assert!(wait_reasons(Path::new("/bin/true")).is_empty());
        assert!(wait_reasons(Path::new("/nonexistent")).is_empty());
    }
}
