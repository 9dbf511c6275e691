//! State records: source state (checkpoint), commit receipts, run metrics, repair authorities
//! and their consumption. The PostgreSQL DDL that stores them is reviewed SQL shipped in
//! `fixtures/xmin/state-ddl.sql`; the runtime never creates state objects.

use crate::envelope::SourceLineage;
use crate::error::{ErrorCode, Result, XminError};
use crate::identity::sha256_hex;
use dpone_policy_model::guard::{AuthorityAllow, Checkpoint, RepairAuthority, TransferBinding};
use dpone_policy_model::types::UnixSeconds;
use serde::{Deserialize, Serialize};

/// Schema version of a repair-authority document.
pub const AUTHORITY_SCHEMA: &str = "dpone.xmin.repair-authority.v1";

/// The stored state of one state key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceState {
    /// State key.
    pub state_key: String,
    /// Hex of the binary target identity.
    pub target_identity: String,
    /// Scope hash.
    pub scope_hash: String,
    /// Committed checkpoint.
    pub checkpoint: Checkpoint,
    /// `H` of the snapshot that produced it.
    pub visible_horizon: u64,
    /// Receipt of the commit that produced it.
    pub last_receipt_id: String,
    /// The state was superseded by a transfer to another state key.
    pub superseded: bool,
}

/// Exact, disjoint action counts of one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metrics {
    /// Keys new in the source, inserted.
    pub inserted: u64,
    /// Active keys whose business columns changed, rewritten.
    pub updated: u64,
    /// Deleted keys that reappeared, rewritten and marked active.
    pub reactivated: u64,
    /// Snapshot keys left untouched (strict no-op).
    pub unchanged: u64,
    /// Active keys missing from the snapshot, marked deleted.
    pub soft_deleted: u64,
    /// Active keys missing from the snapshot, deleted physically.
    pub hard_deleted: u64,
    /// Active target keys after the run.
    pub active: u64,
    /// Target rows after the run, deleted ones included.
    pub total: u64,
    /// Rows staged from the row payload.
    pub staged_rows: u64,
    /// Keys staged from the key payload.
    pub staged_keys: u64,
}

/// The receipt written in the same transaction as the target DML and the checkpoint CAS.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitReceipt {
    /// Receipt id.
    pub receipt_id: String,
    /// Load id.
    pub load_id: String,
    /// Invocation id.
    pub invocation_id: String,
    /// State key.
    pub state_key: String,
    /// Checkpoint before the run.
    pub previous: Option<Checkpoint>,
    /// Checkpoint after the run.
    pub checkpoint: Checkpoint,
    /// `H` of the snapshot.
    pub visible_horizon: u64,
    /// `H - U`.
    pub replay_amplification_xids: u64,
    /// Envelope digest.
    pub envelope_digest: String,
    /// Route fingerprint.
    pub route_fingerprint: String,
    /// Repair authority consumed, if any.
    pub authority_id: Option<String>,
    /// Its recorded digest.
    pub authority_digest: Option<String>,
    /// Action counts.
    pub metrics: Metrics,
    /// Detection time of the run, microseconds since the Unix epoch (UTC).
    pub detected_at_micros: i64,
    /// The source lineage the run's snapshot observed; absent in receipts written before it
    /// was recorded, and where the profile reads none.
    #[serde(default, skip_serializing_if = "SourceLineage::is_empty")]
    pub source_lineage: SourceLineage,
}

/// A repair authority as the environment owner writes it. Stored as the exact JSON text; its
/// sha256 is recorded at creation and recomputed on every read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthorityDocument {
    /// Always [`AUTHORITY_SCHEMA`].
    pub schema: String,
    /// Id selected with `--repair-authority-ref`.
    pub authority_id: String,
    /// Bound state key.
    pub state_key: String,
    /// Bound scope hash.
    pub scope_hash: String,
    /// Bound checkpoint; none binds to an absent checkpoint.
    pub checkpoint: Option<Checkpoint>,
    /// Valid from (inclusive), Unix seconds.
    pub not_before: UnixSeconds,
    /// Valid until (exclusive), Unix seconds.
    pub expires_at: UnixSeconds,
    /// What it allows.
    pub allow: AuthorityAllow,
    /// Optional all-or-none transfer from the old owner.
    pub transfer: Option<TransferBinding>,
    /// Who approved it (free text, no secrets).
    pub approved_by: String,
    /// Why (ticket or reason, no secrets).
    pub reason: String,
}

impl AuthorityDocument {
    /// The exact bytes stored and hashed.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Checks the document's own shape (the guard policy judges it against a run).
    pub fn check(&self) -> Result<()> {
        let bad = |m: &str| XminError::new(ErrorCode::AuthorityInvalid, m.to_owned());
        if self.schema != AUTHORITY_SCHEMA {
            return Err(bad(
                "authority schema must be dpone.xmin.repair-authority.v1",
            ));
        }
        let id_ok = !self.authority_id.is_empty()
            && self.authority_id.len() <= 128
            && self
                .authority_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        if !id_ok {
            return Err(bad(
                "authority_id must be 1-128 ASCII letters, digits, '_', '-' or '.'",
            ));
        }
        if self.not_before >= self.expires_at {
            return Err(bad("not_before must be before expires_at"));
        }
        Ok(())
    }
}

/// A repair authority row as read from the state database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorityRecord {
    /// Row id.
    pub authority_id: String,
    /// Digest recorded at creation.
    pub recorded_digest: String,
    /// Exact stored document text.
    pub document: String,
    /// A consumption row exists.
    pub consumed: bool,
}

impl AuthorityRecord {
    /// The policy's view of this authority: observed digest recomputed from the stored bytes.
    pub fn to_policy(&self) -> Result<RepairAuthority> {
        let doc: AuthorityDocument = serde_json::from_str(&self.document).map_err(|_| {
            XminError::new(
                ErrorCode::AuthorityInvalid,
                "stored authority document does not parse",
            )
        })?;
        if doc.authority_id != self.authority_id {
            return Err(XminError::new(
                ErrorCode::AuthorityInvalid,
                "stored authority document names another authority id",
            ));
        }
        Ok(RepairAuthority {
            authority_id: doc.authority_id,
            recorded_digest: self.recorded_digest.clone(),
            observed_digest: sha256_hex(self.document.as_bytes()),
            state_key: doc.state_key,
            scope_hash: doc.scope_hash,
            checkpoint: doc.checkpoint,
            not_before: doc.not_before,
            expires_at: doc.expires_at,
            consumed: self.consumed,
            allow: doc.allow,
            transfer: doc.transfer,
        })
    }
}

/// A listing entry for the environment owner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuthoritySummary {
    /// Id.
    pub authority_id: String,
    /// Recorded digest.
    pub recorded_digest: String,
    /// The stored bytes still hash to the recorded digest.
    pub digest_ok: bool,
    /// Consumed (one-shot used).
    pub consumed: bool,
    /// Parsed document, when it parses.
    pub document: Option<AuthorityDocument>,
}

/// Consumption evidence written with the receipt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Consumption {
    /// Authority id.
    pub authority_id: String,
    /// Its recorded digest.
    pub authority_digest: String,
    /// State key it was consumed for.
    pub state_key: String,
    /// Load id.
    pub load_id: String,
    /// Receipt id.
    pub receipt_id: String,
}
