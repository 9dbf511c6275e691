//! Ports: what the engine needs from the world, as traits the composition root fills.
//!
//! - [`SourcePort`]: one snapshot boundary on the source, producing a [`SnapshotEnvelope`] whose
//!   payloads are in an [`ArtifactStore`].
//! - [`TargetPort`] and [`TargetSession`]: pin preflight, state reads and receipt probes, and the
//!   single target transaction, one method per boundary, so a harness can inject a failure at
//!   every boundary ([`crate::fault`]).
//! - [`PolicyPort`]: the guard and delete-mode decisions (in production the sandboxed policy
//!   components; in tests the same cores natively).
//!
//! Futures are `Send` so runs can be spawned on a multi-threaded runtime; the engine itself
//! needs no runtime.

use crate::artifact::ArtifactStore;
use crate::envelope::SnapshotEnvelope;
use crate::error::Result;
use crate::identity::RouteIdentity;
use crate::manifest::Scope;
use crate::registry::{Endpoint, SelectedSourceAuthority};
use crate::state::{AuthorityRecord, CommitReceipt, Consumption, Metrics, SourceState};
use dpone_policy_model::delete_mode::{DeleteModeFacts, PlanDecision};
use dpone_policy_model::guard::{
    ActiveOwner, Checkpoint, GuardDecision, GuardFacts, LoadKind, TransferBinding,
};
use serde::Serialize;
use std::future::Future;

/// What the source boundary must extract.
#[derive(Clone, Debug)]
pub struct ExtractRequest<'a> {
    /// Source endpoint with credential.
    pub endpoint: &'a Endpoint,
    /// Pins to verify on the snapshot.
    pub authority: &'a SelectedSourceAuthority,
    /// Identities (state key, scope hash, authority digest).
    pub identity: &'a RouteIdentity,
    /// Unique key columns, in key order.
    pub unique_key: &'a [String],
    /// Business columns, in manifest order.
    pub business_columns: &'a [String],
    /// Row scope.
    pub scope: &'a Scope,
    /// Baseline (all rows) or incremental (delta since `previous`).
    pub load: LoadKind,
    /// Checkpoint the delta starts from (ignored for a baseline).
    pub previous: Option<Checkpoint>,
    /// Ceiling on `H - U`, if the workload set one.
    pub max_replay_amplification_xids: Option<u64>,
}

/// The source boundary.
pub trait SourcePort: Send {
    /// Opens one REPEATABLE READ READ ONLY snapshot, verifies the authority, locks and re-checks
    /// the relation, and streams the payloads into `store`.
    fn extract(
        &mut self,
        request: &ExtractRequest<'_>,
        store: &dyn ArtifactStore,
    ) -> impl Future<Output = Result<SnapshotEnvelope>> + Send;
}

/// A business DML step of the plan, executed set-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApplyStep {
    /// Rewrite active rows whose business columns changed.
    UpdateChanged,
    /// Rewrite deleted rows that reappeared and mark them active.
    Reactivate,
    /// Insert keys absent from the target.
    Insert,
    /// Apply the missing-key action (soft or hard delete) to the missing population, computed by
    /// anti-join before business DML.
    Missing,
}

/// Counts the guard needs, read under the lock before business DML.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Populations {
    /// Active target rows.
    pub active: u64,
    /// All target rows.
    pub total: u64,
    /// Active target keys absent from the snapshot.
    pub missing: u64,
}

/// What proves active-key parity after apply.
///
/// Let `S` be the snapshot keys, `A` the active target keys before the run and `M = A \ S` the
/// missing population computed under the lock. After apply the active keys are
/// `(A \ M) ∪ R ∪ I` (reactivated and inserted keys, both from the delta). Then:
/// `A \ M ⊆ S` by construction of `M`; `R ∪ I ⊆ delta ⊆ S` when `delta_outside_snapshot = 0`;
/// so the active keys are a subset of `S`, and `active = |S|` makes them equal. The engine also
/// requires the missing-key action to have touched exactly `|M|` rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Parity {
    /// Active target rows after apply.
    pub active: u64,
    /// All target rows after apply.
    pub total: u64,
    /// Delta keys absent from the key snapshot (must be 0).
    pub delta_outside_snapshot: u64,
}

/// Rows staged in the transaction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Staged {
    /// From the row payload.
    pub rows: u64,
    /// From the key payload (equal to `rows` for a baseline).
    pub keys: u64,
}

/// State as seen under the lock.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StateView {
    /// This state key's row, if any.
    pub own: Option<SourceState>,
    /// Another state key that actively owns the same target.
    pub other_owner: Option<ActiveOwner>,
}

/// The checkpoint compare-and-set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointCas {
    /// State key.
    pub state_key: String,
    /// Binary target identity.
    pub target_identity: [u8; 32],
    /// Scope hash.
    pub scope_hash: String,
    /// Expected current checkpoint; none = the row must not exist.
    pub expected: Option<Checkpoint>,
    /// New checkpoint (`revision = expected.revision + 1`, or 1).
    pub new: Checkpoint,
    /// `H` of the snapshot.
    pub visible_horizon: u64,
    /// Receipt id written with it.
    pub receipt_id: String,
}

/// A run row for the run table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunRecord {
    /// Load id (or, for failures before a load id exists, the invocation id).
    pub run_id: String,
    /// Invocation id.
    pub invocation_id: String,
    /// State key.
    pub state_key: String,
    /// `committed` or `rolled_back`.
    pub status: &'static str,
    /// Failure code, if any.
    pub code: Option<String>,
    /// Evidence JSON (no row values, endpoints or credentials).
    pub evidence: serde_json::Value,
}

/// The target and state database, outside the run transaction.
///
/// The contract is the same on every target:
///
/// - [`TargetPort::preflight`] proves everything that can be proved before source I/O; the
///   engine calls it first so a misconfigured route fails before extraction.
/// - [`TargetPort::begin`] does not depend on `preflight` having run (nor on its session): it
///   re-verifies the pins on the run's own connection before the transaction starts (and
///   whatever else the transaction depends on: on SQL Server also the server class and the
///   target's columns, from which it freezes the finalizer), so a pooled or redirected endpoint
///   cannot swap the database between preflight and the transaction, and a harness may call
///   `begin` directly.
/// - The read methods open their own session when none is open.
pub trait TargetPort: Send {
    /// The transaction type.
    type Session: TargetSession;

    /// Verifies database name/OID and system identifier against the pin, the target table
    /// shape and the state catalog. Runs before any source I/O.
    fn preflight(&mut self) -> impl Future<Output = Result<()>> + Send;
    /// Reads the state row of a key (read-only).
    fn read_state(
        &mut self,
        state_key: &str,
    ) -> impl Future<Output = Result<Option<SourceState>>> + Send;
    /// The receipt committed for an invocation of this state key, if any.
    fn receipt_by_invocation(
        &mut self,
        invocation_id: &str,
        state_key: &str,
    ) -> impl Future<Output = Result<Option<CommitReceipt>>> + Send;
    /// The receipt committed for a load, if any (the acknowledgement-loss probe).
    fn receipt_by_load(
        &mut self,
        load_id: &str,
    ) -> impl Future<Output = Result<Option<CommitReceipt>>> + Send;
    /// Receipts of a state key, newest first.
    fn receipts(
        &mut self,
        state_key: &str,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<CommitReceipt>>> + Send;
    /// Reads an authority row (read-only preview).
    fn read_authority(
        &mut self,
        authority_id: &str,
    ) -> impl Future<Output = Result<Option<AuthorityRecord>>> + Send;
    /// Records a run that did not commit (best effort, own transaction).
    fn record_failed_run(&mut self, run: &RunRecord) -> impl Future<Output = Result<()>> + Send;
    /// Opens a connection, re-verifies the pins on it, and begins the
    /// SERIALIZABLE run transaction. Never requires a prior [`TargetPort::preflight`].
    fn begin(&mut self) -> impl Future<Output = Result<Self::Session>> + Send;
}

/// The run transaction on one connection. Every method is one boundary.
pub trait TargetSession: Send {
    /// Whether the engine calls [`TargetSession::stage`] before [`TargetSession::lock_target`]
    /// (spec 003: stage, then the serializable transaction with the application lock, so the
    /// lock is held for the apply only). SQL Server stages on a separate session and begins
    /// its lock-based transaction at `lock_target`: `true`. PostgreSQL stages into
    /// transaction-local tables, and its serializable snapshot is taken by the first statement,
    /// which must come after the lock: `false` (the default).
    fn stages_before_lock(&self) -> bool {
        false
    }

    /// A transaction-owned exclusive lock on the 32-byte target identity (PostgreSQL: an
    /// advisory lock keyed by its first 8 bytes; SQL Server: `sp_getapplock` on its hex).
    fn lock_target(
        &mut self,
        target_identity: &[u8; 32],
    ) -> impl Future<Output = Result<()>> + Send;
    /// The run's single detection timestamp, microseconds since the Unix epoch.
    fn detection_time(&mut self) -> impl Future<Output = Result<i64>> + Send;
    /// State of this key and any other active owner of the target.
    fn read_state(
        &mut self,
        state_key: &str,
        target_identity: &[u8; 32],
    ) -> impl Future<Output = Result<StateView>> + Send;
    /// The selected authority, re-read under the lock.
    fn read_authority(
        &mut self,
        authority_id: &str,
    ) -> impl Future<Output = Result<Option<AuthorityRecord>>> + Send;
    /// Streams the payloads into staging (PostgreSQL: transaction-local tables; SQL Server: the
    /// staging lease's per-run tables), verifying their digests, then checks staged keys for
    /// nulls and duplicates. Called before or after [`TargetSession::lock_target`] as
    /// [`TargetSession::stages_before_lock`] says.
    fn stage(
        &mut self,
        envelope: &SnapshotEnvelope,
        store: &dyn ArtifactStore,
    ) -> impl Future<Output = Result<Staged>> + Send;
    /// Target counts before business DML; also fixes the missing population `M` that the
    /// missing-key action will apply to.
    fn populations(&mut self) -> impl Future<Output = Result<Populations>> + Send;
    /// Marks the old owner superseded by `new_state_key`; returns rows affected (must be 1).
    fn supersede(
        &mut self,
        transfer: &TransferBinding,
        new_state_key: &str,
        at_micros: i64,
    ) -> impl Future<Output = Result<u64>> + Send;
    /// Executes one DML step; returns the exact count from `RETURNING`.
    fn apply(
        &mut self,
        step: ApplyStep,
        at_micros: i64,
    ) -> impl Future<Output = Result<u64>> + Send;
    /// Active-key parity after apply.
    fn parity(&mut self) -> impl Future<Output = Result<Parity>> + Send;
    /// Checkpoint CAS; false when the expected checkpoint no longer holds.
    fn cas_checkpoint(
        &mut self,
        cas: &CheckpointCas,
        at_micros: i64,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// Inserts the commit receipt.
    fn insert_receipt(
        &mut self,
        receipt: &CommitReceipt,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Inserts the authority consumption row.
    fn consume_authority(
        &mut self,
        consumption: &Consumption,
        at_micros: i64,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Inserts the run row.
    fn record_run(&mut self, run: &RunRecord) -> impl Future<Output = Result<()>> + Send;
    /// Commits once.
    fn commit(self) -> impl Future<Output = Result<()>> + Send;
    /// Rolls back.
    fn rollback(self) -> impl Future<Output = Result<()>> + Send;
}

/// A policy decision and its evidence (opaque JSON from the policy runtime).
#[derive(Clone, Debug)]
pub struct Judged<T> {
    /// The decision.
    pub decision: T,
    /// Evidence: component digest, input digest, output, fuel.
    pub evidence: serde_json::Value,
}

/// Guard and delete-mode decisions.
pub trait PolicyPort: Send + Sync {
    /// The guard decision. An `Err` is a policy failure and fails closed.
    fn guard(&self, facts: &GuardFacts) -> Result<Judged<GuardDecision>>;
    /// The delete-mode plan. An `Err` is a policy failure and fails closed.
    fn delete_mode(&self, facts: &DeleteModeFacts) -> Result<Judged<PlanDecision>>;
}

/// Convenience: total of the disjoint action counts.
pub fn written(m: &Metrics) -> u64 {
    m.inserted + m.updated + m.reactivated + m.soft_deleted + m.hard_deleted
}
