//! A content-addressed, immutable, byte-receipted artifact store on disk.
//!
//! An artifact is written once through a streaming [`ArtifactWriter`] into a private temporary
//! file, hashed (SHA-256) and counted as it streams, bounded by a maximum size, then sealed:
//! flushed to disk, made read-only and atomically renamed to its content address
//! (`objects/<sha256>`), with a sealed receipt `{sha256, byte size, row count, schema digest}`
//! written the same way beside it (`receipts/<sha256>.json`). A fresh process reopens an
//! artifact from its identity alone ([`ArtifactStore::reopen`]) and revalidates it before use
//! ([`ArtifactStore::revalidate`] re-hashes the bytes), so a truncated, replaced or modified
//! object is refused.
//!
//! All file access goes through a [`cap_std::fs::Dir`] capability for the store's root, so the
//! store cannot reach outside it. Receipts and errors carry digests, sizes and counts only;
//! never a path. The format of the bytes is the caller's (the ClickHouse route stores
//! `RowBinary`; other routes store what their sink loads).

use std::io::{self, Read, Write};

use cap_std::fs::{Dir, File, OpenOptions};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// Schema version of a sealed receipt.
pub const RECEIPT_SCHEMA: &str = "dpone.artifact-receipt.v1";

const OBJECTS: &str = "objects";
const RECEIPTS: &str = "receipts";
const TMP: &str = "tmp";
const RECEIPT_MAX_BYTES: u64 = 4096;

/// A sealed receipt: the artifact's identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactReceipt {
    /// SHA-256 of the bytes.
    #[serde(with = "hex32")]
    pub sha256: [u8; 32],
    /// Size in bytes.
    pub byte_size: u64,
    /// Rows (as counted by the writer's caller).
    pub row_count: u64,
    /// Digest of the wire schema the bytes are encoded in.
    #[serde(with = "hex32")]
    pub schema_digest: [u8; 32],
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReceiptFile {
    schema_version: String,
    #[serde(flatten)]
    receipt: ArtifactReceipt,
}

mod hex32 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 32], D::Error> {
        let s = String::deserialize(d)?;
        let mut out = [0u8; 32];
        if s.len() != 64 || s.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(serde::de::Error::custom("expected 64 lowercase hex digits"));
        }
        hex::decode_to_slice(&s, &mut out)
            .map_err(|_| serde::de::Error::custom("expected 64 lowercase hex digits"))?;
        Ok(out)
    }
}

/// Store failures. Messages carry no paths.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The artifact grew past the store's bound.
    #[error("artifact exceeds the bound of {max} bytes")]
    TooLarge {
        /// Bound in bytes.
        max: u64,
    },
    /// No artifact (or receipt) with this identity.
    #[error("no artifact with this identity")]
    NotFound,
    /// The stored bytes or receipt no longer match the identity.
    #[error("the stored artifact does not match its identity")]
    Tampered,
    /// A receipt file does not decode.
    #[error("the stored receipt is invalid")]
    ReceiptInvalid,
    /// An existing object at this address has another receipt (same bytes, other rows/schema).
    #[error("an artifact with the same bytes was sealed with another receipt")]
    ReceiptConflict,
    /// Filesystem failure (kind only).
    #[error("artifact store I/O failed ({0:?})")]
    Io(io::ErrorKind),
}

impl StoreError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "DPONE_ARTIFACT_TOO_LARGE",
            Self::NotFound => "DPONE_ARTIFACT_NOT_FOUND",
            Self::Tampered => "DPONE_ARTIFACT_TAMPERED",
            Self::ReceiptInvalid => "DPONE_ARTIFACT_RECEIPT_INVALID",
            Self::ReceiptConflict => "DPONE_ARTIFACT_RECEIPT_CONFLICT",
            Self::Io(_) => "DPONE_ARTIFACT_IO",
        }
    }
}

impl From<io::Error> for StoreError {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::NotFound {
            Self::NotFound
        } else {
            Self::Io(e.kind())
        }
    }
}

/// The store over one directory capability.
pub struct ArtifactStore {
    objects: Dir,
    receipts: Dir,
    tmp: Dir,
    max_bytes: u64,
}

/// Makes a rename durable: fsync of the directory (opened read-only; directory handles from
/// `open_dir` may not support it directly).
fn sync_dir(d: &Dir) -> io::Result<()> {
    let mut opts = OpenOptions::new();
    opts.read(true);
    d.open_with(".", &opts)?.sync_all()
}

impl ArtifactStore {
    /// A store rooted at `root` (created layout: `objects/`, `receipts/`, `tmp/`), refusing any
    /// artifact larger than `max_bytes`.
    pub fn new(root: Dir, max_bytes: u64) -> Result<Self, StoreError> {
        for d in [OBJECTS, RECEIPTS, TMP] {
            root.create_dir_all(d)?;
        }
        Ok(Self {
            objects: root.open_dir(OBJECTS)?,
            receipts: root.open_dir(RECEIPTS)?,
            tmp: root.open_dir(TMP)?,
            max_bytes,
        })
    }

    /// A store rooted at a path from the composition root (the only ambient-authority entry).
    pub fn open_path(root: &std::path::Path, max_bytes: u64) -> Result<Self, StoreError> {
        let ambient = cap_std::ambient_authority();
        Dir::create_ambient_dir_all(root, ambient)?;
        Self::new(Dir::open_ambient_dir(root, ambient)?, max_bytes)
    }

    /// The size bound.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Starts a streaming write of one artifact encoded under `schema_digest`, bounded by
    /// `min(max_bytes, store bound)`.
    pub fn writer(
        &self,
        schema_digest: [u8; 32],
        max_bytes: u64,
    ) -> Result<ArtifactWriter<'_>, StoreError> {
        let mut rnd = [0u8; 16];
        getrandom::fill(&mut rnd).map_err(|_| StoreError::Io(io::ErrorKind::Other))?;
        let name = format!("{}.partial", hex::encode(rnd));
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true);
        let file = self.tmp.open_with(&name, &opts)?;
        Ok(ArtifactWriter {
            store: self,
            file: Some(file),
            name,
            hasher: Sha256::new(),
            bytes: 0,
            rows: 0,
            schema_digest,
            max_bytes: max_bytes.min(self.max_bytes),
        })
    }

    fn object_name(sha: &[u8; 32]) -> String {
        hex::encode(sha)
    }

    fn receipt_name(sha: &[u8; 32]) -> String {
        format!("{}.json", hex::encode(sha))
    }

    /// Reopens an artifact from its SHA-256 alone (e.g. in a fresh process), returning its
    /// sealed receipt. Checks the receipt and the object's size; [`Self::revalidate`] re-hashes.
    pub fn reopen(&self, sha256: &[u8; 32]) -> Result<ArtifactReceipt, StoreError> {
        let f = self.receipts.open(Self::receipt_name(sha256))?;
        let mut text = String::new();
        f.take(RECEIPT_MAX_BYTES).read_to_string(&mut text)?;
        let file: ReceiptFile =
            serde_json::from_str(&text).map_err(|_| StoreError::ReceiptInvalid)?;
        if file.schema_version != RECEIPT_SCHEMA || &file.receipt.sha256 != sha256 {
            return Err(StoreError::ReceiptInvalid);
        }
        let meta = self.objects.metadata(Self::object_name(sha256))?;
        if meta.len() != file.receipt.byte_size {
            return Err(StoreError::Tampered);
        }
        Ok(file.receipt)
    }

    /// Re-hashes the stored bytes and requires the stored receipt to equal `expected`.
    pub fn revalidate(&self, expected: &ArtifactReceipt) -> Result<(), StoreError> {
        let stored = self.reopen(&expected.sha256)?;
        if &stored != expected {
            return Err(StoreError::Tampered);
        }
        let mut f = self.objects.open(Self::object_name(&expected.sha256))?;
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 256 * 1024];
        let mut n = 0u64;
        loop {
            let k = f.read(&mut buf)?;
            if k == 0 {
                break;
            }
            n += k as u64;
            h.update(&buf[..k]);
        }
        let sha: [u8; 32] = h.finalize().into();
        if sha != expected.sha256 || n != expected.byte_size {
            return Err(StoreError::Tampered);
        }
        Ok(())
    }

    /// Opens the bytes for reading (callers revalidate first).
    pub fn open(&self, receipt: &ArtifactReceipt) -> Result<File, StoreError> {
        let f = self.objects.open(Self::object_name(&receipt.sha256))?;
        if f.metadata()?.len() != receipt.byte_size {
            return Err(StoreError::Tampered);
        }
        Ok(f)
    }

    /// Removes an artifact whose retention ended. Idempotent.
    pub fn remove(&self, sha256: &[u8; 32]) -> Result<(), StoreError> {
        for (dir, name) in [
            (&self.receipts, Self::receipt_name(sha256)),
            (&self.objects, Self::object_name(sha256)),
        ] {
            match dir.remove_file(&name) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    fn write_receipt(&self, r: &ArtifactReceipt) -> Result<(), StoreError> {
        let text = serde_json::to_string(&ReceiptFile {
            schema_version: RECEIPT_SCHEMA.into(),
            receipt: *r,
        })
        .map_err(|_| StoreError::ReceiptInvalid)?;
        let name = Self::receipt_name(&r.sha256);
        match self.reopen(&r.sha256) {
            Ok(existing) if &existing == r => return Ok(()),
            Ok(_) => return Err(StoreError::ReceiptConflict),
            Err(StoreError::NotFound) => {}
            Err(e) => return Err(e),
        }
        let tmp_name = format!("{name}.partial");
        let mut f = self.tmp.create(&tmp_name)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        drop(f);
        self.tmp.rename(&tmp_name, &self.receipts, &name)?;
        sync_dir(&self.receipts)?;
        Ok(())
    }
}

/// A streaming write of one artifact. Dropping it unsealed removes the temporary file.
pub struct ArtifactWriter<'a> {
    store: &'a ArtifactStore,
    file: Option<File>,
    name: String,
    hasher: Sha256,
    bytes: u64,
    rows: u64,
    schema_digest: [u8; 32],
    max_bytes: u64,
}

impl ArtifactWriter<'_> {
    /// Counts rows written (the caller knows its row boundaries).
    pub fn add_rows(&mut self, n: u64) {
        self.rows += n;
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Flushes, makes the bytes read-only and atomically moves them to their content address,
    /// then writes the sealed receipt. Sealing the same bytes twice yields the same receipt.
    pub fn seal(mut self) -> Result<ArtifactReceipt, StoreError> {
        let file = self
            .file
            .take()
            .ok_or(StoreError::Io(io::ErrorKind::Other))?;
        file.sync_all()?;
        drop(file);
        let sha256: [u8; 32] = std::mem::take(&mut self.hasher).finalize().into();
        let receipt = ArtifactReceipt {
            sha256,
            byte_size: self.bytes,
            row_count: self.rows,
            schema_digest: self.schema_digest,
        };
        let object = ArtifactStore::object_name(&sha256);
        let s = self.store;
        if s.objects.exists(&object) {
            // Content-addressed: identical bytes are already stored; keep the sealed copy.
            s.tmp.remove_file(&self.name)?;
        } else {
            let mut perms = s.tmp.metadata(&self.name)?.permissions();
            perms.set_readonly(true);
            s.tmp.set_permissions(&self.name, perms)?;
            s.tmp.rename(&self.name, &s.objects, &object)?;
            sync_dir(&s.objects)?;
        }
        self.name.clear();
        s.write_receipt(&receipt)?;
        s.revalidate(&receipt)?;
        Ok(receipt)
    }
}

impl Write for ArtifactWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.bytes + buf.len() as u64 > self.max_bytes {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                "artifact exceeds its byte bound",
            ));
        }
        let f = self
            .file
            .as_mut()
            .ok_or_else(|| io::Error::other("artifact already sealed"))?;
        let n = f.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.as_mut().map_or(Ok(()), |f| f.flush())
    }
}

impl Drop for ArtifactWriter<'_> {
    fn drop(&mut self) {
        if !self.name.is_empty() {
            self.file.take();
            let _ = self.store.tmp.remove_file(&self.name);
        }
    }
}

/// Maps a write error to the store's error (a bound breach is [`StoreError::TooLarge`]).
pub fn write_error(e: &io::Error, max: u64) -> StoreError {
    if e.kind() == io::ErrorKind::FileTooLarge {
        StoreError::TooLarge { max }
    } else {
        StoreError::Io(e.kind())
    }
}
