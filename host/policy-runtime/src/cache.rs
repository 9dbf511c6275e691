//! Precompiled-code cache. A cache, never a source of truth, and never a way to run code this host
//! did not compile.
//!
//! - Entries are keyed by (component digest, engine fingerprint). Each entry is an artifact and a
//!   record: the component digest, the engine fingerprint, the artifact's sha256 and size, and an
//!   HMAC-SHA256 over all four under a per-host secret key. The key is 32 random bytes in a file
//!   the host creates on first use (mode 0600, owned by the effective user), kept outside the
//!   cache directory; whoever can write the cache but cannot read the key cannot forge a record.
//! - A lookup reads the artifact into memory once, checks its digest and size against the record,
//!   the record's component and engine against the ones asked for, and the MAC in constant time;
//!   only those verified in-memory bytes are ever deserialized. Anything else is removed and the
//!   component is recompiled from its pinned bytes.
//! - The cache directory is checked the way ssh checks its key files before anything is read:
//!   not a symbolic link, a directory owned by the effective user, not writable by group or
//!   others, and every parent owned by root or the effective user and not writable by others
//!   (unless sticky, as `/tmp` is). The checks run on the opened handle as well as the path.
//!   Refusals are [`PolicyError::CacheDirUnsafe`] / [`PolicyError::CacheKeyUnsafe`]; messages
//!   never name a path.

use crate::digest::Sha256Digest;
use crate::error::PolicyError;
use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};
use sha2::Digest;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Length of the per-host cache key in bytes.
const KEY_LEN: usize = 32;
/// Domain separation of the record MAC.
const MAC_DOMAIN: &[u8] = b"dpone-policy-runtime precompiled cache record v2\0";

/// The per-host secret that authenticates cache records. Its bytes never leave this module.
pub struct CacheKey([u8; KEY_LEN]);

impl std::fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheKey(..)")
    }
}

impl CacheKey {
    /// Reads the key file at `path`, or creates it (32 random bytes, mode 0600) when absent.
    /// The file must be a regular file (not a symbolic link) owned by the effective user and
    /// readable by nobody else, in a directory that passes the same checks as a cache directory.
    pub fn load_or_create(path: &Path) -> Result<Self, PolicyError> {
        Self::load_or_create_outside(path, None)
    }

    /// As [`CacheKey::load_or_create`], refusing a key whose directory lies inside `forbidden`
    /// before anything is read or created.
    fn load_or_create_outside(path: &Path, forbidden: Option<&Path>) -> Result<Self, PolicyError> {
        let unsafe_key = |why: &'static str| PolicyError::CacheKeyUnsafe(why.to_owned());
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        check_directory(parent, true)
            .map_err(|e| PolicyError::CacheKeyUnsafe(format!("key directory: {}", e.reason())))?;
        if let Some(forbidden) = forbidden {
            let key_dir = parent.canonicalize().map_err(|e| io_error(&e))?;
            if key_dir.starts_with(forbidden) {
                return Err(unsafe_key(
                    "the key must be kept outside the cache directory",
                ));
            }
        }
        for _ in 0..3 {
            match open_no_follow(path, false) {
                Ok(mut file) => {
                    let meta = file.metadata().map_err(|e| io_error(&e))?;
                    if !meta.file_type().is_file() {
                        return Err(unsafe_key("the key is not a regular file"));
                    }
                    if meta.uid() != effective_uid() {
                        return Err(unsafe_key("the key file is owned by another user"));
                    }
                    if meta.mode() & 0o077 != 0 {
                        return Err(unsafe_key(
                            "the key file is readable or writable by group or others",
                        ));
                    }
                    let mut bytes = Vec::with_capacity(KEY_LEN);
                    Read::by_ref(&mut file)
                        .take(KEY_LEN as u64 + 1)
                        .read_to_end(&mut bytes)
                        .map_err(|e| io_error(&e))?;
                    let key: [u8; KEY_LEN] = bytes
                        .as_slice()
                        .try_into()
                        .map_err(|_| unsafe_key("the key file is not 32 bytes"))?;
                    return Ok(Self(key));
                }
                Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                    return Err(unsafe_key("the key file is a symbolic link"));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    let mut key = [0u8; KEY_LEN];
                    getrandom::fill(&mut key).map_err(|_| {
                        PolicyError::CacheIo("no randomness for the key".to_owned())
                    })?;
                    match publish_key(parent, path, &key) {
                        Ok(()) => return Ok(Self(key)),
                        // Another process published one first: read theirs.
                        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                        Err(e) => return Err(io_error(&e)),
                    }
                }
                Err(e) => return Err(io_error(&e)),
            }
        }
        Err(unsafe_key("the key file keeps changing"))
    }

    fn mac(&self, record: &RecordFields) -> [u8; 32] {
        let mut message = Vec::with_capacity(MAC_DOMAIN.len() + 3 * 32 + 8);
        message.extend_from_slice(MAC_DOMAIN);
        message.extend_from_slice(record.component.as_bytes());
        message.extend_from_slice(record.engine.as_bytes());
        message.extend_from_slice(record.artifact.as_bytes());
        message.extend_from_slice(&record.size.to_be_bytes());
        hmac_sha256(&self.0, &message)
    }
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key` (shorter than the block size).
fn hmac_sha256(key: &[u8; KEY_LEN], message: &[u8]) -> [u8; 32] {
    let mut inner_pad = [0x36u8; 64];
    let mut outer_pad = [0x5cu8; 64];
    for (i, b) in key.iter().enumerate() {
        inner_pad[i] ^= b;
        outer_pad[i] ^= b;
    }
    let inner = sha2::Sha256::new()
        .chain_update(inner_pad)
        .chain_update(message)
        .finalize();
    sha2::Sha256::new()
        .chain_update(outer_pad)
        .chain_update(inner)
        .finalize()
        .into()
}

/// Equality that takes the same time wherever the first difference is.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A directory of precompiled components, checked and opened with `cap-std`, with the key that
/// authenticates its records.
pub struct PrecompiledCache {
    dir: Dir,
    key: CacheKey,
}

impl std::fmt::Debug for PrecompiledCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PrecompiledCache(..)")
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct RecordFields {
    component: Sha256Digest,
    engine: Sha256Digest,
    artifact: Sha256Digest,
    size: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    component: Sha256Digest,
    engine: Sha256Digest,
    artifact: Sha256Digest,
    size: u64,
    /// HMAC-SHA256 of the fields above under the host's cache key, hex.
    mac: String,
}

/// What a cache lookup found.
pub(crate) enum Lookup {
    /// Verified artifact bytes.
    Hit(Vec<u8>),
    /// No entry.
    Miss,
    /// An entry that failed verification; it has been removed.
    Tampered,
}

/// Why a directory failed the ownership and permission checks.
pub(crate) struct DirRefusal(&'static str);

impl DirRefusal {
    fn reason(&self) -> &'static str {
        self.0
    }
}

fn io_error(e: &std::io::Error) -> PolicyError {
    PolicyError::CacheIo(e.kind().to_string())
}

fn effective_uid() -> u32 {
    dpone_boundary::private_state::effective_uid()
}

/// Publishes a new key at `path` whole: written and synced under a fresh name beside it
/// (`create_new`, mode 0600), then hard-linked to `path`, which fails with `AlreadyExists`
/// instead of replacing anything. A concurrent reader sees no key or the whole key, never a
/// file still being written.
fn publish_key(dir: &Path, path: &Path, key: &[u8; KEY_LEN]) -> std::io::Result<()> {
    let mut nonce = [0u8; 8];
    getrandom::fill(&mut nonce).map_err(|_| std::io::Error::other("no randomness"))?;
    let staged = dir.join(format!(
        ".dpone-key-{}.tmp",
        nonce.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ));
    let written = open_no_follow(&staged, true).and_then(|mut file| {
        file.write_all(key)?;
        file.sync_all()
    });
    let linked = written.and_then(|()| std::fs::hard_link(&staged, path));
    let _ = std::fs::remove_file(&staged);
    linked
}

fn open_no_follow(path: &Path, create: bool) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    if create {
        options.write(true).create_new(true).mode(0o600);
    } else {
        options.read(true);
    }
    options.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    options.open(path)
}

/// Checks `path` as ssh checks the directory of its key files (the host's one check of its
/// state directories, [`dpone_boundary::private_state::check_directory`]), creating it (mode
/// 0700) when absent if `create`, and returns the opened directory.
fn check_directory(path: &Path, create: bool) -> Result<File, DirRefusal> {
    dpone_boundary::private_state::check_directory(path, create).map_err(|e| DirRefusal(e.reason()))
}

impl PrecompiledCache {
    /// Opens (creating with mode 0700 when absent) the cache directory `dir` after the ssh-style
    /// checks, with the host key read from (or created at) `key_file`, which must lie outside
    /// the cache directory.
    pub fn open(dir: &Path, key_file: &Path) -> Result<Self, PolicyError> {
        let handle = check_directory(dir, true)
            .map_err(|e| PolicyError::CacheDirUnsafe(e.reason().to_owned()))?;
        let cache_root = dir.canonicalize().map_err(|e| io_error(&e))?;
        let key = CacheKey::load_or_create_outside(key_file, Some(&cache_root))?;
        Ok(Self {
            dir: Dir::from_std_file(handle),
            key,
        })
    }

    fn names(component: &Sha256Digest, engine: &Sha256Digest) -> (String, String) {
        let stem = format!("{}-{}", component.hex(), &engine.hex()[..16]);
        (format!("{stem}.cwasm"), format!("{stem}.record.json"))
    }

    /// Looks up and verifies an entry.
    pub(crate) fn lookup(&self, component: &Sha256Digest, engine: &Sha256Digest) -> Lookup {
        let (artifact_name, record_name) = Self::names(component, engine);
        let Ok(record_text) = self.dir.read_to_string(&record_name) else {
            return Lookup::Miss;
        };
        let Ok(artifact) = self.dir.read(&artifact_name) else {
            return Lookup::Miss;
        };
        let verified = serde_json::from_str::<Record>(&record_text).is_ok_and(|record| {
            let fields = RecordFields {
                component: record.component,
                engine: record.engine,
                artifact: record.artifact,
                size: record.size,
            };
            let wanted = RecordFields {
                component: *component,
                engine: *engine,
                artifact: Sha256Digest::of(&artifact),
                size: artifact.len() as u64,
            };
            let mac_ok = hex::decode(&record.mac)
                .is_ok_and(|mac| constant_time_eq(&mac, &self.key.mac(&fields)));
            mac_ok && fields == wanted
        });
        if verified {
            Lookup::Hit(artifact)
        } else {
            let _ = self.dir.remove_file(&artifact_name);
            let _ = self.dir.remove_file(&record_name);
            Lookup::Tampered
        }
    }

    /// Writes an artifact and its authenticated record, each through a temporary file and a
    /// rename.
    pub(crate) fn store(
        &self,
        component: &Sha256Digest,
        engine: &Sha256Digest,
        artifact: &[u8],
    ) -> Result<(), PolicyError> {
        let (artifact_name, record_name) = Self::names(component, engine);
        let fields = RecordFields {
            component: *component,
            engine: *engine,
            artifact: Sha256Digest::of(artifact),
            size: artifact.len() as u64,
        };
        let record = Record {
            component: fields.component,
            engine: fields.engine,
            artifact: fields.artifact,
            size: fields.size,
            mac: hex::encode(self.key.mac(&fields)),
        };
        let record_text =
            serde_json::to_vec(&record).map_err(|e| PolicyError::CacheIo(e.to_string()))?;
        self.write_atomically(&artifact_name, artifact)?;
        self.write_atomically(&record_name, &record_text)
    }

    fn write_atomically(&self, name: &str, bytes: &[u8]) -> Result<(), PolicyError> {
        let io = |e: std::io::Error| io_error(&e);
        let mut suffix = [0u8; 8];
        getrandom::fill(&mut suffix)
            .map_err(|_| PolicyError::CacheIo("no randomness".to_owned()))?;
        let temp = format!("{name}.tmp-{}", hex::encode(suffix));
        let mut options = cap_std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        let mut file = self.dir.open_with(&temp, &options).map_err(io)?;
        file.write_all(bytes).map_err(io)?;
        file.sync_all().map_err(io)?;
        drop(file);
        self.dir.rename(&temp, &self.dir, name).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::{CacheKey, hmac_sha256};

    /// Processes that start at once (a scheduler's fan-out) and find no key: exactly one key is
    /// published and every one of them reads it whole. Before keys were published by a hard
    /// link, a reader could open the file between its creation and its write and refuse it as
    /// "not 32 bytes".
    #[test]
    fn concurrent_first_uses_all_get_the_one_published_key() {
        for round in 0..40 {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join(format!("key-{round}"));
            let keys: Vec<_> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..8)
                    .map(|_| s.spawn(|| CacheKey::load_or_create(&path)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("thread").expect("the key loads"))
                    .collect()
            });
            assert!(keys.windows(2).all(|w| w[0].0 == w[1].0), "one key");
            let names: Vec<_> = std::fs::read_dir(dir.path())
                .expect("dir")
                .map(|e| e.expect("entry").file_name())
                .collect();
            assert_eq!(names.len(), 1, "no staged file is left behind: {names:?}");
        }
    }

    #[test]
    fn hmac_matches_an_independent_implementation() {
        // Python: hmac.new(b"\x0b" * 32, b"Hi There", hashlib.sha256).hexdigest()
        let key = [0x0bu8; 32];
        let mac = hmac_sha256(&key, b"Hi There");
        assert_eq!(
            hex::encode(mac),
            "198a607eb44bfbc69903a0f1cf2bbdc5ba0aa3f3d9ae3c1c7a3b1696a0b68cf7"
        );
    }
}
