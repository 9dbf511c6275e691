//! The engine's [`ArtifactSource`] over the content-addressed [`ArtifactStore`].
//!
//! Extraction itself belongs to the source adapter (PostgreSQL for this route): it is supplied
//! as an [`Extract`] that streams `RowBinary` rows into the store's writer and returns the row
//! count. The source is extracted once per seal; the sealed copy is what every member load
//! reads, revalidated (re-hashed) before each load.

use std::io::{Read, Write};

use dpone_artifact_store::{ArtifactReceipt, ArtifactStore, StoreError, write_error};
use dpone_engine_clickhouse::contracts::{ArtifactIdentity, Digest, Schema, schema_digest};
use dpone_engine_clickhouse::ports::{
    ARTIFACT_TAMPERED, ARTIFACT_TOO_LARGE, ArtifactSource, PortError,
};

/// Streams the source, once, as `RowBinary` of `schema` into `out`; returns rows written.
pub trait Extract {
    /// Writes every row; an error aborts the seal and leaves nothing behind.
    fn extract(&self, schema: &Schema, out: &mut dyn Write) -> Result<u64, PortError>;
}

impl<E: Extract + ?Sized> Extract for &E {
    fn extract(&self, schema: &Schema, out: &mut dyn Write) -> Result<u64, PortError> {
        (**self).extract(schema, out)
    }
}

/// [`ArtifactSource`] over an [`ArtifactStore`] and an [`Extract`].
pub struct StoreArtifactSource<'a, E> {
    store: &'a ArtifactStore,
    extract: E,
}

impl<'a, E: Extract> StoreArtifactSource<'a, E> {
    /// A source sealing into `store`.
    pub fn new(store: &'a ArtifactStore, extract: E) -> Self {
        Self { store, extract }
    }
}

fn store_error(e: &StoreError) -> PortError {
    match e {
        StoreError::TooLarge { .. } => PortError::rejected(ARTIFACT_TOO_LARGE),
        StoreError::NotFound => PortError::unavailable("DPONE_ARTIFACT_NOT_FOUND"),
        StoreError::Tampered => PortError::rejected(ARTIFACT_TAMPERED),
        StoreError::ReceiptInvalid => PortError::rejected("DPONE_ARTIFACT_RECEIPT_INVALID"),
        StoreError::ReceiptConflict => PortError::rejected("DPONE_ARTIFACT_RECEIPT_CONFLICT"),
        StoreError::Io(_) => PortError::unavailable("DPONE_ARTIFACT_IO"),
    }
}

fn to_identity(r: &ArtifactReceipt) -> ArtifactIdentity {
    ArtifactIdentity {
        sha256: Digest(r.sha256),
        byte_size: r.byte_size,
        row_count: r.row_count,
        schema_digest: Digest(r.schema_digest),
    }
}

fn to_receipt(i: &ArtifactIdentity) -> ArtifactReceipt {
    ArtifactReceipt {
        sha256: i.sha256.0,
        byte_size: i.byte_size,
        row_count: i.row_count,
        schema_digest: i.schema_digest.0,
    }
}

/// Adapts the store writer to `Write` while remembering a bound breach.
struct Bounded<'w, 's, 'o> {
    inner: &'w mut dpone_artifact_store::ArtifactWriter<'s>,
    breach: Option<StoreError>,
    max: u64,
    /// Receives a copy of exactly the bytes the store accepted; its failures are ignored.
    observer: &'o mut dyn Write,
}

impl Write for Bounded<'_, '_, '_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf).inspect_err(|e| {
            self.breach = Some(write_error(e, self.max));
        })?;
        let _ = self.observer.write_all(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<E: Extract> ArtifactSource for StoreArtifactSource<'_, E> {
    fn seal(&self, schema: &Schema, max_bytes: u64) -> Result<ArtifactIdentity, PortError> {
        self.seal_observed(schema, max_bytes, &mut std::io::sink())
            .map(|(id, _)| id)
    }

    fn seal_observed(
        &self,
        schema: &Schema,
        max_bytes: u64,
        observer: &mut dyn Write,
    ) -> Result<(ArtifactIdentity, bool), PortError> {
        let digest = schema_digest(schema);
        let mut writer = self
            .store
            .writer(digest.0, max_bytes)
            .map_err(|e| store_error(&e))?;
        let rows = {
            let mut out = Bounded {
                inner: &mut writer,
                breach: None,
                max: max_bytes.min(self.store.max_bytes()),
                observer,
            };
            let result = self.extract.extract(schema, &mut out);
            if let Some(b) = out.breach.take() {
                return Err(store_error(&b));
            }
            result?
        };
        writer.add_rows(rows);
        let receipt = writer.seal().map_err(|e| store_error(&e))?;
        Ok((to_identity(&receipt), true))
    }

    fn revalidate(&self, identity: &ArtifactIdentity) -> Result<(), PortError> {
        self.store
            .revalidate(&to_receipt(identity))
            .map_err(|e| store_error(&e))
    }

    fn open<'b>(&'b self, identity: &ArtifactIdentity) -> Result<Box<dyn Read + 'b>, PortError> {
        let f = self
            .store
            .open(&to_receipt(identity))
            .map_err(|e| store_error(&e))?;
        Ok(Box::new(f))
    }

    fn release(&self, _identity: &ArtifactIdentity) -> Result<(), PortError> {
        // Retention may end; removal is left to the store's owner because identical content
        // may be shared by another operation that still needs it.
        Ok(())
    }
}
