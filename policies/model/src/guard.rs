//! Delete guards, baseline rules and one-shot repair authority (`dpone:policy/guard`).

use crate::types::{Ppm, Reason, UnixSeconds};
use alloc::string::String;
use serde::{Deserialize, Serialize};

/// A committed source checkpoint: safe XMin and its monotonic state revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// Safe XMin (`U`) of the snapshot that produced the checkpoint.
    pub xmin: u64,
    /// Monotonic state revision.
    pub revision: u64,
}

/// `reconciliation.empty_snapshot.policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum EmptySnapshotPolicy {
    /// Default: an empty key snapshot is refused unless an authority covers it exactly.
    #[default]
    Fail,
    /// An empty snapshot is judged by the ordinary guards like any other run.
    ApplyGuards,
}

/// `reconciliation.guards`; `None` means no limit of that kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct DeleteGuards {
    /// Most rows one run may delete.
    pub max_delete_rows: Option<u64>,
    /// Largest share of active keys one run may delete.
    pub max_delete_ratio: Option<Ppm>,
}

/// What an authority allows, each bound independent of the manifest's guards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthorityAllow {
    /// A full baseline load is allowed.
    pub full_baseline: bool,
    /// Most rows the authorized run may delete.
    pub max_delete_rows: Option<u64>,
    /// Largest share of active keys the authorized run may delete.
    pub max_delete_ratio: Option<Ppm>,
}

/// All-or-none transfer from the old active owner of the same physical target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransferBinding {
    /// State key of the old active owner.
    pub old_state_key: String,
    /// The old owner's exact checkpoint.
    pub old_checkpoint: Checkpoint,
}

/// The repair authority selected at run time, with what the host observed about it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepairAuthority {
    /// Authority id selected with `--repair-authority-ref`.
    pub authority_id: String,
    /// Digest recorded when the environment owner created the authority.
    pub recorded_digest: String,
    /// Digest of the authority's canonical bytes as the host read them now.
    pub observed_digest: String,
    /// Bound state key.
    pub state_key: String,
    /// Bound scope hash.
    pub scope_hash: String,
    /// Bound checkpoint; `None` binds the authority to an absent checkpoint.
    pub checkpoint: Option<Checkpoint>,
    /// Not valid before this instant.
    pub not_before: UnixSeconds,
    /// Not valid at or after this instant.
    pub expires_at: UnixSeconds,
    /// A consumption row already exists for this authority.
    pub consumed: bool,
    /// What the authority allows.
    pub allow: AuthorityAllow,
    /// Optional transfer from the old owner.
    pub transfer: Option<TransferBinding>,
}

/// Another state key that actively owns the same physical target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActiveOwner {
    /// The owner's state key.
    pub state_key: String,
    /// The owner's checkpoint.
    pub checkpoint: Checkpoint,
}

/// Facts for one guard decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardFacts {
    /// The host's clock, passed in as data.
    pub now: UnixSeconds,
    /// State identity of this route.
    pub state_key: String,
    /// Scope hash of this route.
    pub scope_hash: String,
    /// Current checkpoint of this state key; `None` when missing or new.
    pub checkpoint: Option<Checkpoint>,
    /// Active keys in the target before the run.
    pub target_active_keys: u64,
    /// All rows in the target before the run, deleted ones included.
    pub target_total_rows: u64,
    /// Keys in the complete source key snapshot.
    pub snapshot_keys: u64,
    /// Active target keys absent from the snapshot.
    pub missing_keys: u64,
    /// Guards from the manifest.
    #[serde(default)]
    pub guards: DeleteGuards,
    /// Empty snapshot policy from the manifest.
    #[serde(default)]
    pub empty_snapshot: EmptySnapshotPolicy,
    /// Another active owner of this physical target, if any.
    pub other_owner: Option<ActiveOwner>,
    /// The selected repair authority, if any.
    pub authority: Option<RepairAuthority>,
}

/// Kind of load a run performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadKind {
    /// Delta plus key snapshot from the current checkpoint.
    Incremental,
    /// Full rows and keys in one pass.
    FullBaseline,
}

/// A run may proceed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Allowed {
    /// Kind of load.
    pub load: LoadKind,
    /// Authority this run consumes, if one was needed.
    pub authority_used: Option<String>,
    /// Transfer the run performs from the old owner.
    pub transfer_from: Option<TransferBinding>,
    /// Why the run may proceed.
    pub reason: Reason,
}

/// The guard's decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardDecision {
    /// The run may proceed.
    Allow(Allowed),
    /// The run must not mutate anything.
    Deny(Reason),
}
