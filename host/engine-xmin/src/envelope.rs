//! The incremental snapshot envelope: what one source snapshot produced, with its receipts.
//!
//! The source adapter fills it on the extraction boundary; the engine validates it (and re-reads
//! every artifact) before any target mutation. Artifact tuples hold the unique-key columns first,
//! in key order, then the business columns; the key artifact holds only the key columns.

use crate::artifact::ArtifactReceipt;
use crate::identity::sha256_canonical;
use dpone_policy_model::guard::LoadKind;
use serde::{Deserialize, Serialize};

/// Schema version of [`SnapshotEnvelope`].
pub const ENVELOPE_SCHEMA: &str = "dpone.xmin.snapshot-envelope.v1";
/// Format of every artifact.
pub const ARTIFACT_FORMAT: &str = "postgres-copy-binary";

/// One column as the source declared it under the snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceColumn {
    /// Exact column name.
    pub name: String,
    /// `format_type(atttypid, atttypmod)`.
    pub type_sql: String,
    /// `atttypid` (built-in types only).
    pub type_oid: u32,
}

/// The source cluster's lineage as the snapshot observed it: what a failover or a restore
/// changes. Each field is present only where the source authority's profile reads it
/// (version 1: both; version 2 with a `timeline` pin: the timeline; version 2 otherwise:
/// neither). The commit receipt records it, and the next incremental run compares it
/// ([`SourceLineage::continues`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceLineage {
    /// `pg_control_system().system_identifier`, decimal.
    pub system_identifier: Option<String>,
    /// The current timeline.
    pub timeline: Option<u32>,
}

impl SourceLineage {
    /// Whether a checkpoint recorded under `recorded` may be continued by a snapshot that
    /// observed `self`: every field recorded must be observed again, equal. A field recorded
    /// but no longer observed (the profile changed) does not continue: the change it would
    /// reveal can no longer be seen.
    pub fn continues(&self, recorded: &SourceLineage) -> bool {
        let same = |r: &Option<String>, o: &Option<String>| r.is_none() || r == o;
        same(&recorded.system_identifier, &self.system_identifier)
            && (recorded.timeline.is_none() || recorded.timeline == self.timeline)
    }

    /// Nothing observed.
    pub fn is_empty(&self) -> bool {
        self.system_identifier.is_none() && self.timeline.is_none()
    }
}

/// One binary COPY artifact and what extraction counted in it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PayloadReceipt {
    /// Content address and size.
    pub artifact: ArtifactReceipt,
    /// Format, always [`ARTIFACT_FORMAT`].
    pub format: String,
    /// Tuples counted while streaming.
    pub rows: u64,
    /// Fields per tuple.
    pub fields: u16,
    /// The stream ended with its trailer and the server's end of COPY.
    pub complete: bool,
}

/// Everything one snapshot produced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotEnvelope {
    /// Always [`ENVELOPE_SCHEMA`].
    pub schema: String,
    /// State key of the route.
    pub state_key: String,
    /// Scope hash the extraction applied.
    pub scope_hash: String,
    /// Digest of the verified source authority.
    pub source_authority_digest: String,
    /// sha256 of the verified database identity and the snapshot (`pg_current_snapshot()`).
    pub snapshot_token: String,
    /// Full rows (baseline) or delta rows since the previous checkpoint.
    pub load: LoadKind,
    /// Checkpoint the delta starts from; none for a baseline.
    pub previous_xmin: Option<u64>,
    /// `U`: `pg_snapshot_xmin` — the checkpoint this run persists.
    pub safe_checkpoint: u64,
    /// `H`: `pg_snapshot_xmax` — rows below it were visible and are loaded now.
    pub visible_horizon: u64,
    /// `H - U`: cluster-wide XIDs that the next run may replay.
    pub replay_amplification_xids: u64,
    /// Artifact columns: keys first (in key order), then business columns.
    pub columns: Vec<SourceColumn>,
    /// Number of leading key columns.
    pub key_columns: u16,
    /// Delta rows (incremental) or all rows (baseline).
    pub rows: PayloadReceipt,
    /// The complete key set (incremental only; a baseline's keys are its rows' keys).
    pub keys: Option<PayloadReceipt>,
    /// Keys in the complete snapshot.
    pub key_count: u64,
    /// Both payloads are complete.
    pub complete: bool,
    /// The source's lineage under this snapshot (empty where the profile reads none).
    #[serde(default)]
    pub source_lineage: SourceLineage,
}

impl SnapshotEnvelope {
    /// sha256 of the envelope's canonical JSON. The source lineage is bound only when
    /// observed, so an envelope of a profile that reads none keeps the digest (and with it the
    /// run's load id) it had before lineage was recorded.
    pub fn digest(&self) -> String {
        let base = (
            ENVELOPE_SCHEMA,
            &self.state_key,
            &self.scope_hash,
            &self.snapshot_token,
            self.previous_xmin.map(|x| x.to_string()),
            self.safe_checkpoint.to_string(),
            self.visible_horizon.to_string(),
            &self.rows.artifact.sha256,
            self.keys.as_ref().map(|k| &k.artifact.sha256),
            self.key_count.to_string(),
        );
        if self.source_lineage.is_empty() {
            sha256_canonical(&base)
        } else {
            sha256_canonical(&(base, &self.source_lineage))
        }
    }

    /// The payload that holds the complete key set.
    pub fn key_payload(&self) -> &PayloadReceipt {
        self.keys.as_ref().unwrap_or(&self.rows)
    }
}
