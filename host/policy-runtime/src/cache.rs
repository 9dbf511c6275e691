//! Precompiled-code cache. A cache, never a source of truth: entries are keyed by (component
//! digest, engine fingerprint), each artifact's sha256 is recorded when this host writes it, and
//! bytes whose digest does not match that record are discarded and recompiled from the pinned
//! component — they are never deserialized.
//!
//! The record sits beside the artifact, so the cache detects corruption and tampering of the
//! artifact; the directory must still be writable only by the host's own user (see
//! `docs/architecture.md`).

use crate::digest::Sha256Digest;
use crate::error::PolicyError;
use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};
use std::io::Write;

/// A directory of precompiled components, opened with `cap-std`.
pub struct PrecompiledCache {
    dir: Dir,
}

#[derive(Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct Record {
    component: Sha256Digest,
    engine: Sha256Digest,
    artifact: Sha256Digest,
    size: u64,
}

/// What a cache lookup found.
pub(crate) enum Lookup {
    /// Verified artifact bytes.
    Hit(Vec<u8>),
    /// No entry.
    Miss,
    /// An entry whose bytes do not match the record; it has been removed.
    Tampered,
}

impl PrecompiledCache {
    /// Uses `dir` as the cache.
    pub fn new(dir: Dir) -> Self {
        Self { dir }
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
            record.component == *component
                && record.engine == *engine
                && record.size == artifact.len() as u64
                && record.artifact == Sha256Digest::of(&artifact)
        });
        if verified {
            Lookup::Hit(artifact)
        } else {
            let _ = self.dir.remove_file(&artifact_name);
            let _ = self.dir.remove_file(&record_name);
            Lookup::Tampered
        }
    }

    /// Writes an artifact and its record, each through a temporary file and a rename.
    pub(crate) fn store(
        &self,
        component: &Sha256Digest,
        engine: &Sha256Digest,
        artifact: &[u8],
    ) -> Result<(), PolicyError> {
        let (artifact_name, record_name) = Self::names(component, engine);
        let record = Record {
            component: *component,
            engine: *engine,
            artifact: Sha256Digest::of(artifact),
            size: artifact.len() as u64,
        };
        let record_text =
            serde_json::to_vec(&record).map_err(|e| PolicyError::CacheIo(e.to_string()))?;
        self.write_atomically(&artifact_name, artifact)?;
        self.write_atomically(&record_name, &record_text)
    }

    fn write_atomically(&self, name: &str, bytes: &[u8]) -> Result<(), PolicyError> {
        let io = |e: std::io::Error| PolicyError::CacheIo(e.kind().to_string());
        let temp = format!("{name}.tmp-{}", std::process::id());
        let mut file = self.dir.create(&temp).map_err(io)?;
        file.write_all(bytes).map_err(io)?;
        file.sync_all().map_err(io)?;
        drop(file);
        self.dir.rename(&temp, &self.dir, name).map_err(io)
    }
}
