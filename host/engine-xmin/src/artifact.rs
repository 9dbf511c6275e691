//! The artifact port: content-addressed, immutable files for extraction output.
//!
//! Extraction streams each binary COPY payload into an [`ArtifactWriter`], which hashes the bytes
//! as they pass and, on [`ArtifactWriter::finish`], publishes them under their sha256. Artifacts
//! are never modified; readers re-hash what they read and compare with the receipt. The
//! PostgreSQL adapter ships a cap-std implementation (`dpone_adapter_postgres::artifacts`).

use crate::error::{ErrorCode, XminError};
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};

/// What publishing an artifact produced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactReceipt {
    /// Lower-case hex sha256 of the bytes; also the artifact's name.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
}

/// A writer that publishes its bytes under their digest when finished. Dropping it without
/// finishing discards the partial file.
pub trait ArtifactWriter: Write + Send {
    /// Flushes, publishes read-only under the sha256 and returns the receipt.
    fn finish(self: Box<Self>) -> io::Result<ArtifactReceipt>;
}

/// Content-addressed artifact storage.
pub trait ArtifactStore: Send + Sync {
    /// Starts a new artifact.
    fn create(&self) -> io::Result<Box<dyn ArtifactWriter>>;
    /// Opens a published artifact by digest.
    fn open(&self, sha256: &str) -> io::Result<Box<dyn Read + Send>>;
    /// Removes a published artifact (cleanup after commit or abandonment).
    fn remove(&self, sha256: &str) -> io::Result<()>;
}

/// Maps an I/O error to [`ErrorCode::ArtifactIo`] without paths (only the error kind).
pub fn io_error(what: &str, e: &io::Error) -> XminError {
    XminError::new(ErrorCode::ArtifactIo, format!("{what}: {:?}", e.kind()))
}
