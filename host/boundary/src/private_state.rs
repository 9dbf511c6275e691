//! The host's own state on disk (the precompiled cache and its key, the bundle activation
//! ledger): the one ownership and permission check its directories and files pass before
//! anything in them is read or written, as ssh checks the directory of its key files.
//!
//! - [`check_directory`]: not a symbolic link, a directory owned by the effective user and not
//!   writable by group or others, every parent owned by root or the effective user and not
//!   writable by others (unless sticky, as `/tmp` is); the checks are repeated on the opened
//!   handle.
//! - [`check_file`]: an opened file is a regular file owned by the effective user without the
//!   given mode bits; [`no_follow`] opens it without following a symbolic link.
//!
//! Refusals are a fixed [`Refusal`] reason that never names a path; each caller maps it to its
//! own code.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why a directory or file failed the ownership and permission checks (never a path).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal(&'static str);

impl Refusal {
    /// The reason, a fixed phrase.
    pub fn reason(&self) -> &'static str {
        self.0
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// The effective user id of this process.
pub fn effective_uid() -> u32 {
    // SAFETY: `geteuid` takes no arguments, touches no memory and cannot fail.
    #[allow(unsafe_code)]
    unsafe {
        libc::geteuid()
    }
}

/// Checks `path` as ssh checks the directory of its key files, creating it (mode 0700) when
/// absent if `create`, and returns the opened directory. The final component must not be a
/// symbolic link; the checks are repeated on the opened handle.
pub fn check_directory(path: &Path, create: bool) -> Result<File, Refusal> {
    let euid = effective_uid();
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(Refusal("the directory is a symbolic link"));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .map_err(|_| Refusal("the directory cannot be created"))?;
        }
        Err(_) => return Err(Refusal("the directory cannot be read")),
    }
    let canonical: PathBuf = path
        .canonicalize()
        .map_err(|_| Refusal("the directory cannot be resolved"))?;
    for parent in canonical.ancestors().skip(1) {
        let meta =
            std::fs::metadata(parent).map_err(|_| Refusal("a parent directory cannot be read"))?;
        if meta.uid() != 0 && meta.uid() != euid {
            return Err(Refusal("a parent directory is owned by another user"));
        }
        let sticky = meta.mode() & 0o1000 != 0;
        if meta.mode() & 0o022 != 0 && !sticky {
            return Err(Refusal("a parent directory is writable by group or others"));
        }
    }
    let handle = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&canonical)
        .map_err(|_| Refusal("the directory cannot be opened"))?;
    let meta = handle
        .metadata()
        .map_err(|_| Refusal("the directory cannot be read"))?;
    if !meta.is_dir() {
        return Err(Refusal("not a directory"));
    }
    if meta.uid() != euid {
        return Err(Refusal("the directory is owned by another user"));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(Refusal("the directory is writable by group or others"));
    }
    Ok(handle)
}

/// Adds `O_NOFOLLOW | O_CLOEXEC` to `options`: a symbolic link as the final component fails the
/// open (see [`is_symlink_refusal`]) instead of being followed.
pub fn no_follow(options: &mut OpenOptions) -> &mut OpenOptions {
    options.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
}

/// Whether an open with [`no_follow`] failed because the final component is a symbolic link.
pub fn is_symlink_refusal(error: &std::io::Error) -> bool {
    error.raw_os_error() == Some(libc::ELOOP)
}

/// Checks an opened state file: a regular file, owned by the effective user, with none of the
/// permission bits in `forbidden_mode` (`0o022`: writable by group or others; `0o077`: any
/// access by them).
pub fn check_file(file: &File, forbidden_mode: u32) -> Result<(), Refusal> {
    let meta = file
        .metadata()
        .map_err(|_| Refusal("the file cannot be read"))?;
    if !meta.file_type().is_file() {
        return Err(Refusal("the file is not a regular file"));
    }
    if meta.uid() != effective_uid() {
        return Err(Refusal("the file is owned by another user"));
    }
    if meta.mode() & forbidden_mode & 0o777 != 0 {
        return Err(Refusal(if forbidden_mode & 0o044 != 0 {
            "the file is readable or writable by group or others"
        } else {
            "the file is writable by group or others"
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_private_directory_and_file_pass_and_loose_modes_are_refused() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("state");
        check_directory(&dir, true).expect("created and checked");
        let mode = std::fs::metadata(&dir).expect("dir").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).expect("chmod");
        assert_eq!(
            check_directory(&dir, false).map(|_| ()),
            Err(Refusal("the directory is writable by group or others"))
        );
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let path = dir.join("f");
        std::fs::write(&path, b"x").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let file = File::open(&path).expect("open");
        check_file(&file, 0o022).expect("private file");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o622)).expect("chmod");
        assert_eq!(
            check_file(&file, 0o022),
            Err(Refusal("the file is writable by group or others"))
        );
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).expect("symlink");
        assert_eq!(
            check_directory(&link, false).map(|_| ()),
            Err(Refusal("the directory is a symbolic link"))
        );
    }
}
