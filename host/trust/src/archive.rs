//! The single-file form of a bundle: a canonical POSIX ustar archive.
//!
//! The archive holds the same files as the directory form, as regular-file members named by
//! their bundle-relative names (`manifest.json`, `guard.wasm`, `tables/x.json`, ...), in
//! byte-wise name order, with fixed metadata: mode `0644`, uid/gid `0`, empty user and group
//! names, mtime `0`, ustar magic, no directory entries, no extension headers. The archive ends
//! with the two zero blocks of the format and nothing after them. Packing the same files twice
//! gives the same bytes, so an archive has a stable sha256.
//!
//! Reading is strict: the archive must be at most [`MAX_ARCHIVE_BYTES`]; at most
//! [`crate::bundle::MAX_BUNDLE_FILES`] members; each member a regular file (links, directories,
//! devices, GNU/PAX extension headers are refused) with a permitted bundle file name (no
//! absolute paths, no `..`) under its size limit, each name once. Finally the members are
//! packed again and the result must equal the input byte for byte
//! (`DPONE_BUNDLE_ARCHIVE_NON_CANONICAL`), which leaves no room for metadata, ordering,
//! padding or trailing data the verifier did not look at. The files then go through exactly
//! the same [`crate::bundle::verify`] as a directory.

use crate::Result;
use crate::bundle::{BundleFiles, MAX_BUNDLE_BYTES, MAX_BUNDLE_FILES};
use crate::error::{ArchiveFault, TrustError, shown};
use crate::manifest::file_role;
use std::collections::BTreeSet;
use std::io::Read as _;

const BLOCK: usize = 512;

/// Largest accepted archive: the bundle byte limit plus headers and padding for every member.
pub const MAX_ARCHIVE_BYTES: u64 = MAX_BUNDLE_BYTES + ((MAX_BUNDLE_FILES as u64) + 2) * 2 * 512;

fn fault(fault: ArchiveFault, detail: impl Into<String>) -> TrustError {
    TrustError::Archive {
        fault,
        detail: dpone_boundary::text::clean_message(&detail.into()),
    }
}

/// Packs bundle files into the canonical archive.
pub fn pack(files: &BundleFiles) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for (name, bytes) in files.iter() {
        let mut header = tar::Header::new_ustar();
        header
            .set_path(name)
            .map_err(|err| fault(ArchiveFault::MemberPath, format!("{}: {err}", shown(name))))?;
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        header
            .set_username("")
            .and_then(|()| header.set_groupname(""))
            .map_err(|err| fault(ArchiveFault::Malformed, err.to_string()))?;
        header.set_cksum();
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(bytes);
        let padding = (BLOCK - bytes.len() % BLOCK) % BLOCK;
        out.resize(out.len() + padding, 0);
    }
    out.resize(out.len() + 2 * BLOCK, 0);
    Ok(out)
}

/// Unpacks a canonical archive into bundle files (not yet verified).
pub fn unpack(archive: &[u8]) -> Result<BundleFiles> {
    if archive.len() as u64 > MAX_ARCHIVE_BYTES {
        return Err(fault(
            ArchiveFault::TooLarge,
            format!("{} bytes, the limit is {MAX_ARCHIVE_BYTES}", archive.len()),
        ));
    }
    let mut reader = tar::Archive::new(archive);
    let entries = reader
        .entries()
        .map_err(|err| fault(ArchiveFault::Malformed, err.to_string()))?
        .raw(true);
    let mut files = BundleFiles::new();
    let mut seen = BTreeSet::new();
    for (index, entry) in entries.enumerate() {
        if index >= MAX_BUNDLE_FILES {
            return Err(fault(
                ArchiveFault::TooManyMembers,
                format!("more than {MAX_BUNDLE_FILES} members"),
            ));
        }
        let mut entry = entry.map_err(|err| fault(ArchiveFault::Malformed, err.to_string()))?;
        let header = entry.header();
        if header.entry_type() != tar::EntryType::Regular {
            return Err(fault(
                ArchiveFault::MemberType,
                format!("member {index} is not a regular file"),
            ));
        }
        let raw_name = entry.path_bytes().into_owned();
        let name = String::from_utf8(raw_name).map_err(|_| {
            fault(
                ArchiveFault::MemberPath,
                format!("member {index} has a non-UTF-8 name"),
            )
        })?;
        let Some(role) = file_role(&name) else {
            return Err(fault(
                ArchiveFault::MemberPath,
                format!("member name {:?} is not a bundle file name", shown(&name)),
            ));
        };
        let size = entry
            .header()
            .size()
            .map_err(|err| fault(ArchiveFault::Malformed, err.to_string()))?;
        if size > role.limit() {
            return Err(fault(
                ArchiveFault::TooLarge,
                format!(
                    "member `{name}` has {size} bytes, the limit is {}",
                    role.limit()
                ),
            ));
        }
        if !seen.insert(name.clone()) {
            return Err(fault(
                ArchiveFault::DuplicateMember,
                format!("member `{name}` appears twice"),
            ));
        }
        let mut bytes = Vec::new();
        (&mut entry)
            .take(size)
            .read_to_end(&mut bytes)
            .map_err(|err| fault(ArchiveFault::Malformed, err.to_string()))?;
        if bytes.len() as u64 != size {
            return Err(fault(
                ArchiveFault::Malformed,
                format!("member `{name}` is truncated"),
            ));
        }
        files.insert(&name, bytes).map_err(|err| match err {
            TrustError::BundleTooLarge { detail } => fault(ArchiveFault::TooLarge, detail),
            other => other,
        })?;
    }
    let canonical = pack(&files)?;
    if canonical != archive {
        let at = canonical
            .iter()
            .zip(archive)
            .position(|(a, b)| a != b)
            .unwrap_or(canonical.len().min(archive.len()));
        return Err(fault(
            ArchiveFault::NonCanonical,
            format!("the archive differs from the canonical packing of its members at byte {at}"),
        ));
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Result<BundleFiles> {
        let mut files = BundleFiles::new();
        files.insert("manifest.json", b"{}".to_vec())?;
        files.insert("guard.wasm", vec![0, 97, 115, 109])?;
        files.insert("tables/guard-basic.json", b"[]".to_vec())?;
        Ok(files)
    }

    fn code(bytes: &[u8]) -> &'static str {
        match unpack(bytes) {
            Ok(_) => "OK",
            Err(err) => err.code(),
        }
    }

    #[test]
    fn round_trip_is_byte_stable() -> Result<()> {
        let files = sample()?;
        let packed = pack(&files)?;
        assert_eq!(packed.len() % BLOCK, 0);
        assert_eq!(unpack(&packed)?, files);
        assert_eq!(pack(&unpack(&packed)?)?, packed);
        Ok(())
    }

    #[test]
    fn trailing_data_and_metadata_changes_are_not_canonical() -> Result<()> {
        let packed = pack(&sample()?)?;
        let mut trailing = packed.clone();
        trailing.extend_from_slice(&[0; BLOCK]);
        assert_eq!(code(&trailing), "DPONE_BUNDLE_ARCHIVE_NON_CANONICAL");

        // mtime of the first member changed, checksum fixed up: still a valid tar.
        let mut header = tar::Header::new_ustar();
        header.as_mut_bytes().copy_from_slice(&packed[..BLOCK]);
        header.set_mtime(1_700_000_000);
        header.set_cksum();
        let mut changed = packed.clone();
        changed[..BLOCK].copy_from_slice(header.as_bytes());
        assert_eq!(code(&changed), "DPONE_BUNDLE_ARCHIVE_NON_CANONICAL");
        Ok(())
    }

    fn member(name: &[u8], kind: tar::EntryType, data: &[u8]) -> Vec<u8> {
        let mut header = tar::Header::new_ustar();
        let bytes = header.as_mut_bytes();
        bytes[..name.len()].copy_from_slice(name);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_entry_type(kind);
        header.set_cksum();
        let mut out = header.as_bytes().to_vec();
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(BLOCK) * BLOCK, 0);
        out
    }

    #[test]
    fn links_paths_and_duplicates_are_refused() {
        let end = vec![0u8; 2 * BLOCK];
        let with = |parts: &[Vec<u8>]| {
            let mut v: Vec<u8> = parts.concat();
            v.extend_from_slice(&end);
            v
        };
        assert_eq!(
            code(&with(&[member(
                b"guard.wasm",
                tar::EntryType::Symlink,
                b""
            )])),
            "DPONE_BUNDLE_ARCHIVE_MEMBER_TYPE"
        );
        assert_eq!(
            code(&with(&[member(b"tables", tar::EntryType::Directory, b"")])),
            "DPONE_BUNDLE_ARCHIVE_MEMBER_TYPE"
        );
        assert_eq!(
            code(&with(&[member(
                b"../guard.wasm",
                tar::EntryType::Regular,
                b"x"
            )])),
            "DPONE_BUNDLE_ARCHIVE_MEMBER_PATH"
        );
        assert_eq!(
            code(&with(&[member(
                b"/guard.wasm",
                tar::EntryType::Regular,
                b"x"
            )])),
            "DPONE_BUNDLE_ARCHIVE_MEMBER_PATH"
        );
        assert_eq!(
            code(&with(&[
                member(b"guard.wasm", tar::EntryType::Regular, b"x"),
                member(b"guard.wasm", tar::EntryType::Regular, b"y"),
            ])),
            "DPONE_BUNDLE_ARCHIVE_DUPLICATE_MEMBER"
        );
        assert_eq!(
            code(&with(&[member(b"pax", tar::EntryType::XHeader, b"")])),
            "DPONE_BUNDLE_ARCHIVE_MEMBER_TYPE"
        );
    }

    #[test]
    fn oversized_members_are_refused_before_reading() {
        let mut header = tar::Header::new_ustar();
        header.as_mut_bytes()[..13].copy_from_slice(b"manifest.json");
        header.set_size(10 * 1024 * 1024);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_cksum();
        let mut bytes = header.as_bytes().to_vec();
        bytes.extend_from_slice(&[0; 2 * BLOCK]);
        assert_eq!(code(&bytes), "DPONE_BUNDLE_ARCHIVE_TOO_LARGE");
    }
}
