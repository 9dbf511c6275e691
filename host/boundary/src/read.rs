//! One bounded reader of regular files.

use sha2::{Digest as _, Sha256};
use std::fs::{File, Metadata};
use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// Pseudo file systems whose "regular" files are generated (unbounded, blocking or with side
/// effects); a path that resolves under one of them is refused.
const REFUSED_ROOTS: &[&str] = &["/proc", "/sys", "/dev"];

/// Why a file was not read. Carries no path and no content.
#[derive(Debug)]
pub enum ReadError {
    /// The path resolves to something that is not a regular file (FIFO, socket, device,
    /// directory) or to a file under `/proc`, `/sys` or `/dev`.
    NotRegular,
    /// The file is larger than the ceiling of its kind.
    TooLarge {
        /// The ceiling in bytes.
        limit: u64,
    },
    /// The operating system refused (missing file, permission, I/O error).
    Io(std::io::Error),
}

impl ReadError {
    /// A stable, path-free description (`not a regular file`, `larger than N bytes`, or the
    /// I/O error kind).
    pub fn describe(&self) -> String {
        match self {
            Self::NotRegular => "not a regular file".to_owned(),
            Self::TooLarge { limit } => format!("larger than {limit} bytes"),
            Self::Io(err) => err.kind().to_string(),
        }
    }

    /// The error as an `std::io::Error`, for crates that report I/O errors by kind.
    pub fn into_io(self) -> std::io::Error {
        match self {
            Self::Io(err) => err,
            other => std::io::Error::new(std::io::ErrorKind::InvalidInput, other.describe()),
        }
    }
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl std::error::Error for ReadError {}

fn refused_root(resolved: &Path) -> bool {
    REFUSED_ROOTS
        .iter()
        .any(|root| resolved.starts_with(Path::new(root)))
}

/// Opens `path` for reading only if it resolves to a regular file, without blocking: the path
/// is resolved (symlinks followed), refused under `/proc`, `/sys` and `/dev`, inspected, then
/// opened with `O_NONBLOCK | O_NOCTTY | O_NOFOLLOW` and the descriptor's inode re-checked.
pub fn open_regular(path: &Path) -> Result<(File, Metadata), ReadError> {
    let resolved: PathBuf = std::fs::canonicalize(path).map_err(ReadError::Io)?;
    if refused_root(&resolved) {
        return Err(ReadError::NotRegular);
    }
    let before = std::fs::metadata(&resolved).map_err(ReadError::Io)?;
    if !before.file_type().is_file() {
        return Err(ReadError::NotRegular);
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW)
        .open(&resolved)
        .map_err(|err| match err.raw_os_error() {
            // O_NOFOLLOW: the last component became a symlink after it was resolved.
            Some(libc::ELOOP) => ReadError::NotRegular,
            _ => ReadError::Io(err),
        })?;
    let after = file.metadata().map_err(ReadError::Io)?;
    if !after.file_type().is_file() || after.dev() != before.dev() || after.ino() != before.ino() {
        return Err(ReadError::NotRegular);
    }
    Ok((file, after))
}

/// Reads a regular file of at most `limit` bytes (see [`open_regular`]). The size is checked
/// before reading and the read itself stops one byte past the ceiling, so a file that grows
/// while it is read is refused as well.
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let (file, meta) = open_regular(path)?;
    if meta.len() > limit {
        return Err(ReadError::TooLarge { limit });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge { limit });
    }
    Ok(bytes)
}

/// Hashes a regular file as a stream (64 KiB at a time, never held whole): its SHA-256 and
/// length.
pub fn hash_regular(path: &Path) -> Result<([u8; 32], u64), ReadError> {
    let (mut file, _) = open_regular(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(ReadError::Io(err)),
        };
        hasher.update(&buf[..n]);
        total += n as u64;
    }
    Ok((hasher.finalize().into(), total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn reads_a_regular_file_and_a_symlink_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.yaml");
        std::fs::write(&file, b"a: 1\n").unwrap();
        let link = dir.path().join("link.yaml");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_regular(&file, 16).unwrap(), b"a: 1\n");
        assert_eq!(read_regular(&link, 16).unwrap(), b"a: 1\n");
    }

    #[test]
    fn refuses_a_file_over_the_ceiling() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("big");
        std::fs::write(&file, vec![b'a'; 17]).unwrap();
        assert!(matches!(
            read_regular(&file, 16),
            Err(ReadError::TooLarge { limit: 16 })
        ));
        assert_eq!(read_regular(&file, 17).unwrap().len(), 17);
    }

    #[test]
    fn refuses_devices_and_symlinks_to_them() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("zero.yaml");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        for path in [Path::new("/dev/zero"), Path::new("/dev/null"), &link] {
            assert!(matches!(
                read_regular(path, 1 << 20),
                Err(ReadError::NotRegular)
            ));
            assert!(matches!(hash_regular(path), Err(ReadError::NotRegular)));
        }
    }

    #[test]
    fn refuses_proc_and_directories() {
        assert!(matches!(
            read_regular(Path::new("/proc/self/status"), 1 << 20),
            Err(ReadError::NotRegular)
        ));
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            read_regular(dir.path(), 1 << 20),
            Err(ReadError::NotRegular)
        ));
    }

    #[test]
    fn refuses_a_fifo_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let started = Instant::now();
        assert!(matches!(
            read_regular(&fifo, 1 << 20),
            Err(ReadError::NotRegular)
        ));
        assert!(matches!(hash_regular(&fifo), Err(ReadError::NotRegular)));
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn hashes_as_a_stream() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("artifact");
        std::fs::write(&file, vec![7u8; 200_000]).unwrap();
        let (digest, len) = hash_regular(&file).unwrap();
        assert_eq!(len, 200_000);
        assert_eq!(digest, <[u8; 32]>::from(Sha256::digest(vec![7u8; 200_000])));
    }

    #[test]
    fn missing_file_is_io() {
        assert!(matches!(
            read_regular(Path::new("/nonexistent/dpone"), 16),
            Err(ReadError::Io(_))
        ));
    }
}
