//! tracefs: where it is, mounting it when it is not, and checking that the tracepoint record
//! layouts the kernel side reads with constant offsets are the ones this kernel has.

use std::{
    ffi::CString,
    fs, io,
    path::{Path, PathBuf},
};

use switchyard_common::tp;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("tracefs is not mounted and mounting it at /sys/kernel/tracing failed")]
    Mount(#[source] io::Error),
    #[error("tracefs is mounted at {path}, but this user cannot read it")]
    Unreadable {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot read tracepoint format `{path}`")]
    Format {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "tracepoint {category}:{event} field `{field}` is at offset {found_offset} size {found_size} on this kernel, this build reads offset {offset} size {size}"
    )]
    Layout {
        category: &'static str,
        event: &'static str,
        field: &'static str,
        offset: usize,
        size: usize,
        found_offset: usize,
        found_size: usize,
    },
    #[error("tracepoint {category}:{event} has no field `{field}` on this kernel")]
    MissingField {
        category: &'static str,
        event: &'static str,
        field: &'static str,
    },
}

const CANDIDATES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The tracefs root, if one is mounted.
pub fn find() -> Option<PathBuf> {
    CANDIDATES
        .iter()
        .map(Path::new)
        .find(|p| p.join("events").is_dir())
        .map(Path::to_path_buf)
}

/// Where tracefs is mounted, from /proc/self/mountinfo (readable by anyone), whether or not
/// this user may read it; the usual places first.
pub fn mount_point() -> Option<PathBuf> {
    let text = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut points: Vec<PathBuf> = text
        .lines()
        .filter_map(|l| {
            // "36 35 0:12 / /sys/kernel/tracing rw,… shared:14 - tracefs tracefs rw"
            let (fields, fs) = l.split_once(" - ")?;
            let point = fields.split_whitespace().nth(4)?;
            (fs.split_whitespace().next()? == "tracefs").then(|| PathBuf::from(point))
        })
        .collect();
    points.sort_by_key(|p| !CANDIDATES.iter().any(|c| p == Path::new(c)));
    points.into_iter().next()
}

/// The tracefs root, mounting it at /sys/kernel/tracing when nothing is mounted (as perf and
/// bpftrace need it too, this is what `mount -t tracefs nodev /sys/kernel/tracing` does).
pub fn ensure() -> Result<PathBuf, Error> {
    if let Some(p) = find() {
        return Ok(p);
    }
    // Mounted where this user cannot look (tracefs is root-only, 0700, by default).
    if let Some(p) = mount_point() {
        let source = fs::read_dir(p.join("events"))
            .err()
            .unwrap_or_else(|| io::Error::from(io::ErrorKind::PermissionDenied));
        return Err(Error::Unreadable {
            path: p.display().to_string(),
            source,
        });
    }
    let target = CString::new(CANDIDATES[0]).map_err(|e| Error::Mount(io::Error::other(e)))?;
    let fstype = CString::new("tracefs").map_err(|e| Error::Mount(io::Error::other(e)))?;
    let source = CString::new("nodev").map_err(|e| Error::Mount(io::Error::other(e)))?;
    // SAFETY: valid NUL-terminated strings; no data argument.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(Error::Mount(io::Error::last_os_error()));
    }
    Ok(PathBuf::from(CANDIDATES[0]))
}

/// A field of a tracepoint record: (offset, size).
pub fn field(format: &str, name: &str) -> Option<(usize, usize)> {
    for line in format.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("field:") else {
            continue;
        };
        let mut parts = rest.split(';').map(str::trim);
        let decl = parts.next()?;
        // "char prev_comm[16]" or "pid_t prev_pid": the name is the last word, minus any array.
        let fname = decl.rsplit(' ').next()?.split('[').next()?;
        if fname != name {
            continue;
        }
        let mut offset = None;
        let mut size = None;
        for p in parts {
            if let Some(v) = p.strip_prefix("offset:") {
                offset = v.parse().ok();
            } else if let Some(v) = p.strip_prefix("size:") {
                size = v.parse().ok();
            }
        }
        return Some((offset?, size?));
    }
    None
}

/// Checks every field the kernel side reads against this kernel's tracefs formats.
pub fn check_layout() -> Result<(), Error> {
    let root = ensure()?;
    for (category, event, name, offset, size) in tp::LAYOUT {
        let path = root
            .join("events")
            .join(category)
            .join(event)
            .join("format");
        let text = fs::read_to_string(&path).map_err(|source| Error::Format {
            path: path.display().to_string(),
            source,
        })?;
        match field(&text, name) {
            Some((o, s)) if o == offset && s == size => {}
            Some((found_offset, found_size)) => {
                return Err(Error::Layout {
                    category,
                    event,
                    field: name,
                    offset,
                    size,
                    found_offset,
                    found_size,
                });
            }
            None => {
                return Err(Error::MissingField {
                    category,
                    event,
                    field: name,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH: &str = "name: sched_switch
ID: 372
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
";

    #[test]
    fn parses_fields() {
        assert_eq!(field(SWITCH, "prev_comm"), Some((8, 16)));
        assert_eq!(field(SWITCH, "prev_pid"), Some((24, 4)));
        assert_eq!(field(SWITCH, "prev_state"), Some((32, 8)));
        assert_eq!(field(SWITCH, "next_pid"), None);
    }
}
