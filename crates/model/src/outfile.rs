//! Writing a file where the user asked, as root, without harming what is there.
//!
//! switchyard runs as root on production hosts, where an output path can name a device
//! (`-o /dev/null`), a stream (`-o /dev/stdout`, a FIFO), or a symbolic link planted by someone
//! else in a shared folder. The rules:
//!
//! - an absent path or a regular file is written whole or not at all: a temporary file under a
//!   random name, created exclusively (`O_CREAT | O_EXCL`, which never follows a link) in the
//!   same folder, then renamed over the path. The temporary file is removed on every error.
//! - a character device, a FIFO or a socket is written through, as a shell's `>` would: it is
//!   never replaced by a regular file.
//! - a symbolic link to one of those is written through when root or the caller owns the link
//!   (`/dev/stdout` is root's); one owned by anyone else is refused, as the kernel's
//!   `fs.protected_symlinks` would refuse it in a shared folder.
//! - any other symbolic link is replaced by the file, never written through: what it points at
//!   is left as it was.
//! - a directory or a block device is refused.
//!
//! [`check`] tells before a recording whether its output can be written; [`write`] writes.

use std::{
    fs::{self, OpenOptions, Permissions},
    io::{self, Write as _},
    os::unix::fs::{FileTypeExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
};

/// What an output path names, and so how it is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Nothing yet: created.
    Absent,
    /// A regular file, or a link to one (or a dangling link): replaced whole.
    Regular,
    /// A character device, a FIFO or a socket (possibly behind a trusted link): written
    /// through.
    Stream,
}

/// Why an output path cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("it is a directory")]
    Directory,
    #[error("it is a block device; a run is never written over a disk")]
    BlockDevice,
    #[error("it is a symbolic link owned by uid {owner}, not by root or by this user")]
    ForeignLink { owner: u32 },
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl From<Refused> for io::Error {
    fn from(r: Refused) -> io::Error {
        match r {
            Refused::Io(e) => e,
            other => io::Error::new(io::ErrorKind::InvalidInput, other.to_string()),
        }
    }
}

/// What `path` names, or why it cannot be written; reads only metadata.
pub fn check(path: &Path) -> Result<Kind, Refused> {
    let link = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Kind::Absent),
        Err(e) => return Err(e.into()),
    };
    let ft = link.file_type();
    if ft.is_symlink() {
        let target = match fs::metadata(path) {
            Ok(m) => m,
            // Dangling: the link is replaced, nothing is created where it points.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Kind::Regular),
            Err(e) => return Err(e.into()),
        };
        let tt = target.file_type();
        if tt.is_dir() {
            return Err(Refused::Directory);
        }
        if is_stream(tt) {
            // SAFETY: geteuid has no preconditions and cannot fail.
            let me = unsafe { libc::geteuid() };
            if link.uid() != 0 && link.uid() != me {
                return Err(Refused::ForeignLink { owner: link.uid() });
            }
            return Ok(Kind::Stream);
        }
        // A block device behind a link is refused as one named directly; anything else the
        // link points at is left alone, as the link itself is what gets replaced.
        if tt.is_block_device() {
            return Err(Refused::BlockDevice);
        }
        return Ok(Kind::Regular);
    }
    if ft.is_dir() {
        Err(Refused::Directory)
    } else if ft.is_block_device() {
        Err(Refused::BlockDevice)
    } else if is_stream(ft) {
        Ok(Kind::Stream)
    } else {
        Ok(Kind::Regular)
    }
}

fn is_stream(ft: fs::FileType) -> bool {
    ft.is_char_device() || ft.is_fifo() || ft.is_socket()
}

/// Writes `bytes` to `path` by the rules above.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    match check(path)? {
        Kind::Stream => write_through(path, bytes),
        Kind::Absent | Kind::Regular => replace(path, bytes),
    }
}

/// A device or a stream: opened for writing as it is, never created or replaced.
fn write_through(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(path)?;
    file.write_all(bytes)?;
    file.flush()
}

/// A temporary file beside `path`, written and synced, then renamed over it; removed on any
/// error (a full disk keeps no partial file).
fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        // Masked by the umask, as a file made by `>` would be.
        .permissions(Permissions::from_mode(0o666))
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// A fresh private folder (mode 0700, a random name, never one that existed) under the
/// system's temporary folder, kept after the process ends: where data goes that could not be
/// written where it was asked.
pub fn private_dir(prefix: &str) -> io::Result<PathBuf> {
    Ok(tempfile::Builder::new()
        .prefix(prefix)
        .permissions(Permissions::from_mode(0o700))
        .tempdir()?
        .keep())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn scratch() -> tempfile::TempDir {
        tempfile::tempdir().expect("a temporary folder")
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_new_file_is_written_and_no_temporary_is_left() {
        let d = scratch();
        let p = d.path().join("run.json");
        write(&p, b"one").unwrap();
        write(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(entries(d.path()), ["run.json"]);
    }

    #[test]
    fn a_planted_temporary_link_is_not_followed() {
        let d = scratch();
        let victim = d.path().join("victim");
        fs::write(&victim, "keep me").unwrap();
        symlink(&victim, d.path().join("run.json.tmp")).unwrap();
        let p = d.path().join("run.json");
        write(&p, b"run").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep me");
        assert_eq!(fs::read(&p).unwrap(), b"run");
    }

    #[test]
    fn a_link_to_a_regular_file_is_replaced_not_followed() {
        let d = scratch();
        let victim = d.path().join("victim");
        fs::write(&victim, "keep me").unwrap();
        let p = d.path().join("index.html");
        symlink(&victim, &p).unwrap();
        write(&p, b"page").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep me");
        assert!(!fs::symlink_metadata(&p).unwrap().file_type().is_symlink());
        assert_eq!(fs::read(&p).unwrap(), b"page");
    }

    #[test]
    fn dev_null_is_written_through_and_stays_a_device() {
        let p = Path::new("/dev/null");
        assert_eq!(check(p).unwrap(), Kind::Stream);
        write(p, b"nothing").unwrap();
        assert!(
            fs::symlink_metadata(p)
                .unwrap()
                .file_type()
                .is_char_device()
        );
    }

    #[test]
    fn a_fifo_is_written_through() {
        let d = scratch();
        let p = d.path().join("fifo");
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let p = p.clone();
            std::thread::spawn(move || fs::read(p).unwrap())
        };
        write(&p, b"through").unwrap();
        assert_eq!(reader.join().unwrap(), b"through");
        assert!(fs::symlink_metadata(&p).unwrap().file_type().is_fifo());
        assert_eq!(entries(d.path()), ["fifo"]);
    }

    #[test]
    fn a_directory_is_refused() {
        let d = scratch();
        assert!(matches!(check(d.path()), Err(Refused::Directory)));
        assert!(write(d.path(), b"x").is_err());
    }

    #[test]
    fn a_missing_folder_leaves_nothing_behind() {
        let d = scratch();
        assert!(write(&d.path().join("no/such/run.json"), b"x").is_err());
        assert!(entries(d.path()).is_empty());
    }

    #[test]
    fn private_folders_are_fresh_and_private() {
        let a = private_dir("switchyard-test-").unwrap();
        let b = private_dir("switchyard-test-").unwrap();
        assert_ne!(a, b);
        let mode = fs::metadata(&a).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        fs::remove_dir(a).unwrap();
        fs::remove_dir(b).unwrap();
    }
}
