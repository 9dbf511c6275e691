//! The reconciliation run: the state machine of spec 003 driven over the ports.
//!
//! `Planned → SnapshotOpen → Staged → TargetTransaction → Committed | RolledBack`, with
//! `Committed → CommitProbe` on acknowledgement loss. Every step before `COMMIT` is on one target
//! transaction, so any failure there leaves target and state untouched; the engine rolls back,
//! records the failed run (best effort) and returns a [`RunFailure`] with a stable code.

use crate::artifact::ArtifactStore;
use crate::envelope::{SnapshotEnvelope, SourceLineage};
use crate::error::{ErrorCode, Result, XminError};
use crate::identity::{load_id, receipt_id};
use crate::ports::{
    ApplyStep, CheckpointCas, ExtractRequest, PolicyPort, RunRecord, SourcePort, Staged,
    TargetPort, TargetSession,
};
use crate::route::Route;
use crate::state::{CommitReceipt, Consumption, Metrics, SourceState};
use crate::validate::validate_envelope;
use dpone_policy_model::delete_mode::Mode;
use dpone_policy_model::guard::{Checkpoint, GuardDecision, GuardFacts, LoadKind};
use serde::Serialize;
use tracing::Instrument;

/// What the caller selects for one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRequest {
    /// Identifies this invocation; a retry of the same invocation replays its receipt.
    pub invocation_id: String,
    /// `--repair-authority-ref` / `DPONE_REPAIR_AUTHORITY_REF`, selected only at run time.
    pub repair_authority_ref: Option<String>,
}

/// How a successful run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Committed now.
    Committed,
    /// Commit acknowledgement was lost; the receipt probe proved the commit.
    CommittedAfterProbe,
    /// The invocation had already committed; its receipt is returned without source I/O.
    Replayed,
}

/// Run evidence (JSON on stdout).
#[derive(Clone, Debug, Serialize)]
pub struct RunOutcome {
    /// How it ended.
    pub status: RunStatus,
    /// The commit receipt.
    pub receipt: CommitReceipt,
    /// Load kind.
    pub load: Option<LoadKind>,
    /// Delete mode.
    pub delete_mode: Mode,
    /// Guard decision evidence.
    pub guard_evidence: Option<serde_json::Value>,
    /// Delete-mode decision evidence.
    pub delete_mode_evidence: serde_json::Value,
    /// Guard reason code of the allow.
    pub guard_reason: Option<String>,
    /// Snapshot token of the extraction.
    pub snapshot_token: Option<String>,
    /// Post-commit cleanup failures (the outcome stays committed).
    pub cleanup_errors: Vec<String>,
}

/// Where a failed run stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Before any source I/O (pins, catalogs, receipts, authority preview).
    Preflight,
    /// On the source snapshot.
    Extraction,
    /// Envelope and artifact validation.
    Validation,
    /// Inside the target transaction, before commit (rolled back).
    TargetTransaction,
    /// Commit sent, outcome unknown.
    Commit,
}

/// A failed run: code, phase, and whether a full repair baseline is required.
#[derive(Debug, thiserror::Error, Serialize)]
#[error("{error} (phase {phase:?})")]
pub struct RunFailure {
    /// The error.
    #[serde(serialize_with = "ser_error")]
    pub error: XminError,
    /// Where it happened.
    pub phase: Phase,
    /// Target and state are untouched (always true unless the commit outcome is unknown).
    pub rolled_back: bool,
    /// Parity or guard drift: the operator needs a repair authority with `full_baseline`.
    pub full_repair_required: bool,
    /// Guard decision evidence, when the guard denied.
    pub guard_evidence: Option<serde_json::Value>,
}

fn ser_error<S: serde::Serializer>(e: &XminError, s: S) -> std::result::Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct;
    let mut st = s.serialize_struct("error", 2)?;
    st.serialize_field("code", e.code().as_str())?;
    st.serialize_field("message", e.message())?;
    st.end()
}

impl RunFailure {
    fn at(phase: Phase, error: XminError) -> Self {
        let full_repair_required = matches!(
            error.code(),
            ErrorCode::ParityDrift
                | ErrorCode::SourceFreezeUncertain
                | ErrorCode::SourceXidEpochChanged
                | ErrorCode::SourceCheckpointRegression
                | ErrorCode::SourceLineageChanged
        );
        Self {
            error,
            phase,
            rolled_back: phase != Phase::Commit,
            full_repair_required,
            guard_evidence: None,
        }
    }

    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        self.error.code()
    }
}

/// `state show` output.
#[derive(Clone, Debug, Serialize)]
pub struct StateReport {
    /// State key.
    pub state_key: String,
    /// The state row, if any.
    pub state: Option<SourceState>,
    /// Latest receipts, newest first.
    pub receipts: Vec<CommitReceipt>,
}

/// Reads the state of a route (`dpone-host state show`).
pub async fn state_show<T: TargetPort>(
    route: &Route,
    target: &mut T,
    receipts: u32,
) -> Result<StateReport> {
    target.preflight().await?;
    let state = target.read_state(&route.identity.state_key).await?;
    let receipts = target.receipts(&route.identity.state_key, receipts).await?;
    Ok(StateReport {
        state_key: route.identity.state_key.clone(),
        state,
        receipts,
    })
}

/// The span of one protocol phase (target `dpone::phase`, named by its `otel.name`): the cli
/// turns these into trace spans and phase-duration metrics when telemetry is configured; with
/// no subscriber interested they cost a disabled callsite check.
fn phase(name: &'static str) -> tracing::Span {
    tracing::info_span!(target: "dpone::phase", "phase", otel.name = name, phase = name)
}

/// The span of one step inside a phase (target `dpone::xmin::step`, debug level): finer timings
/// for benches and profiling (`xmin_bench` prints them); the cli's telemetry does not export
/// them.
fn step(name: &'static str) -> tracing::Span {
    tracing::debug_span!(target: "dpone::xmin::step", "step", phase = name)
}

/// Runs one reconciliation.
pub async fn run<S, T>(
    route: &Route,
    request: &RunRequest,
    source: &mut S,
    target: &mut T,
    store: &dyn ArtifactStore,
    policies: &dyn PolicyPort,
) -> std::result::Result<RunOutcome, RunFailure>
where
    S: SourcePort,
    T: TargetPort,
{
    let id = &route.identity;
    let pre = |e| RunFailure::at(Phase::Preflight, e);

    // Planned: everything before source I/O.
    target
        .preflight()
        .instrument(phase("preflight"))
        .await
        .map_err(pre)?;
    if let Some(receipt) = target
        .receipt_by_invocation(&request.invocation_id, &id.state_key)
        .instrument(step("receipt_probe"))
        .await
        .map_err(pre)?
    {
        // Spec 003: an old invocation cannot replay a receipt under new database authority.
        // The receipt must have been committed under this route's fingerprint (state key,
        // selected source authority digest, target pin digest), the pins preflight has just
        // verified; a rotation since then is refused, source-free and with nothing written.
        if receipt.state_key != id.state_key || receipt.route_fingerprint != id.route_fingerprint {
            return Err(pre(XminError::new(
                ErrorCode::ReceiptAuthorityChanged,
                "this invocation's receipt was committed under another route fingerprint \
                 (the source authority or a target/state pin was rotated since): it is not \
                 replayed under the new authority; start a new invocation",
            )));
        }
        return Ok(RunOutcome {
            status: RunStatus::Replayed,
            receipt,
            load: None,
            delete_mode: route.plan.mode,
            guard_evidence: None,
            delete_mode_evidence: route.plan_evidence.clone(),
            guard_reason: None,
            snapshot_token: None,
            cleanup_errors: Vec::new(),
        });
    }
    let state = target
        .read_state(&id.state_key)
        .instrument(step("state_read"))
        .await
        .map_err(pre)?;
    if state.as_ref().is_some_and(|s| s.superseded) {
        return Err(pre(XminError::new(
            ErrorCode::StateSuperseded,
            "this state key was superseded by a transfer",
        )));
    }
    let previous = state.as_ref().map(|s| s.checkpoint);
    let mut full_baseline = previous.is_none();
    if let Some(aid) = &request.repair_authority_ref {
        let record = target
            .read_authority(aid)
            .await
            .map_err(pre)?
            .ok_or_else(|| {
                pre(XminError::new(
                    ErrorCode::AuthorityNotFound,
                    "selected repair authority does not exist",
                ))
            })?;
        // Preview only: only allow.full_baseline selects a full payload. Admission is repeated
        // under the target lock.
        if let Ok(a) = record.to_policy()
            && a.allow.full_baseline
        {
            full_baseline = true;
        }
    }
    let load = if full_baseline {
        LoadKind::FullBaseline
    } else {
        LoadKind::Incremental
    };
    // The lineage the checkpoint was taken under: recorded by the receipt that wrote it (the
    // run transaction's CAS proves the checkpoint is still this one).
    let recorded_lineage = match previous {
        Some(checkpoint) if !full_baseline => Some(
            recorded_lineage(target, &id.state_key, checkpoint)
                .instrument(step("lineage_read"))
                .await
                .map_err(pre)?,
        ),
        _ => None,
    };

    // SnapshotOpen.
    let key_cols = route.manifest.unique_key.clone();
    let business = route.manifest.business_columns();
    let req = ExtractRequest {
        endpoint: &route.resolved.source,
        authority: &route.resolved.source_authority,
        identity: id,
        unique_key: &key_cols,
        business_columns: &business,
        scope: &route.manifest.scope,
        load,
        previous: if full_baseline { None } else { previous },
        max_replay_amplification_xids: route.manifest.max_replay_amplification_xids,
    };
    let envelope = source
        .extract(&req, store)
        .instrument(phase("read"))
        .await
        .map_err(|e| RunFailure::at(Phase::Extraction, e))?;

    // Staged (validated) before any target mutation.
    let cleanup = |env: &SnapshotEnvelope| cleanup_artifacts(env, store);
    if let Err(e) = phase("seal").in_scope(|| {
        validate_envelope(
            &envelope,
            id,
            key_cols.len(),
            business.len(),
            if full_baseline { None } else { previous },
            route.manifest.max_replay_amplification_xids,
            store,
        )
    }) {
        let _ = cleanup(&envelope);
        return Err(RunFailure::at(Phase::Validation, e));
    }
    if let Some(recorded) = &recorded_lineage
        && !envelope.source_lineage.continues(recorded)
    {
        let _ = cleanup(&envelope);
        return Err(RunFailure::at(
            Phase::Validation,
            XminError::new(
                ErrorCode::SourceLineageChanged,
                "the source's system identifier or timeline differs from (or no longer shows) \
                 the one the checkpoint was taken under: a failover or restore may have reused \
                 XIDs below it; run a repair baseline (allow.full_baseline)",
            ),
        ));
    }
    let envelope_digest = envelope.digest();
    let load_id = load_id(
        &request.invocation_id,
        &id.route_fingerprint,
        previous.map(|c| (c.xmin, c.revision)),
        &envelope_digest,
    );

    // TargetTransaction.
    let mut ctx = TxContext {
        route,
        request,
        envelope: &envelope,
        previous,
        load_id: load_id.clone(),
        envelope_digest,
        guard_evidence: None,
        guard_reason: None,
    };
    let session = match target.begin().instrument(step("begin")).await {
        Ok(s) => s,
        Err(e) => {
            let _ = cleanup(&envelope);
            return Err(RunFailure::at(Phase::TargetTransaction, e));
        }
    };
    let (session, result) = transaction_body(session, &mut ctx, store, policies)
        .instrument(phase("apply"))
        .await;
    let receipt = match result {
        Ok(receipt) => receipt,
        Err(e) => {
            let _ = session.rollback().await;
            let mut failure = RunFailure::at(Phase::TargetTransaction, e);
            failure.guard_evidence = ctx.guard_evidence.clone();
            let _ = target
                .record_failed_run(&RunRecord {
                    run_id: load_id.clone(),
                    invocation_id: request.invocation_id.clone(),
                    state_key: id.state_key.clone(),
                    status: "rolled_back",
                    code: Some(failure.code().as_str().to_owned()),
                    evidence: serde_json::json!({
                        "phase": failure.phase,
                        "full_repair_required": failure.full_repair_required,
                    }),
                })
                .await;
            let _ = cleanup(&envelope);
            return Err(failure);
        }
    };

    // Committed, or CommitProbe on acknowledgement loss.
    let status = match session.commit().instrument(phase("commit")).await {
        Ok(()) => RunStatus::Committed,
        Err(commit_error) => match target.receipt_by_load(&load_id).await {
            Ok(Some(found)) if found.receipt_id == receipt.receipt_id => {
                RunStatus::CommittedAfterProbe
            }
            Ok(Some(_)) => {
                return Err(RunFailure::at(
                    Phase::Commit,
                    XminError::new(
                        ErrorCode::CommitOutcomeUnknown,
                        "receipt probe found a different receipt",
                    ),
                ));
            }
            Ok(None) => {
                let _ = cleanup(&envelope);
                return Err(RunFailure::at(Phase::TargetTransaction, commit_error));
            }
            Err(probe) => {
                return Err(RunFailure::at(
                    Phase::Commit,
                    XminError::new(
                        ErrorCode::CommitOutcomeUnknown,
                        format!(
                            "commit not acknowledged ({}) and the receipt probe failed ({}); probe again before any retry",
                            commit_error.code(),
                            probe.code()
                        ),
                    ),
                ));
            }
        },
    };
    let cleanup_errors = match cleanup(&envelope) {
        Ok(()) => Vec::new(),
        Err(e) => vec![e.code().as_str().to_owned()],
    };
    Ok(RunOutcome {
        status,
        receipt,
        load: Some(envelope.load),
        delete_mode: route.plan.mode,
        guard_evidence: ctx.guard_evidence,
        delete_mode_evidence: route.plan_evidence.clone(),
        guard_reason: ctx.guard_reason,
        snapshot_token: Some(envelope.snapshot_token.clone()),
        cleanup_errors,
    })
}

struct TxContext<'a> {
    route: &'a Route,
    request: &'a RunRequest,
    envelope: &'a SnapshotEnvelope,
    previous: Option<Checkpoint>,
    load_id: String,
    envelope_digest: String,
    guard_evidence: Option<serde_json::Value>,
    guard_reason: Option<String>,
}

async fn transaction_body<X: TargetSession>(
    mut tx: X,
    ctx: &mut TxContext<'_>,
    store: &dyn ArtifactStore,
    policies: &dyn PolicyPort,
) -> (X, Result<CommitReceipt>) {
    let r = body(&mut tx, ctx, store, policies).await;
    (tx, r)
}

/// Stages the payloads and checks the staged counts against the envelope.
async fn stage_checked<X: TargetSession>(
    tx: &mut X,
    env: &SnapshotEnvelope,
    store: &dyn ArtifactStore,
) -> Result<Staged> {
    let staged = tx.stage(env, store).instrument(phase("stage")).await?;
    if staged.rows != env.rows.rows || staged.keys != env.key_count {
        return Err(XminError::new(
            ErrorCode::SnapshotCountMismatch,
            "staged counts differ from the envelope",
        ));
    }
    Ok(staged)
}

fn stale(m: &str) -> XminError {
    XminError::new(ErrorCode::StateCheckpointStale, m.to_owned())
}

async fn body<X: TargetSession>(
    tx: &mut X,
    ctx: &mut TxContext<'_>,
    store: &dyn ArtifactStore,
    policies: &dyn PolicyPort,
) -> Result<CommitReceipt> {
    let id = &ctx.route.identity;
    let env = ctx.envelope;
    // Staged before the target lock where the target allows it (SQL Server: staging is on its
    // own session), so the lock is held for the apply only, never for the bulk load.
    let stage_first = tx.stages_before_lock();
    let mut staged: Option<Staged> = None;
    if stage_first {
        staged = Some(stage_checked(tx, env, store).await?);
    }
    tx.lock_target(&id.target_identity)
        .instrument(step("lock"))
        .await?;
    let at = tx.detection_time().instrument(step("lock")).await?;

    // Re-read state and authority under the lock: closes the preview-to-commit race.
    let view = tx
        .read_state(&id.state_key, &id.target_identity)
        .instrument(step("state_reread"))
        .await?;
    if view.own.as_ref().is_some_and(|s| s.superseded) {
        return Err(XminError::new(
            ErrorCode::StateSuperseded,
            "this state key was superseded by a transfer",
        ));
    }
    let current = view.own.as_ref().map(|s| s.checkpoint);
    if current != ctx.previous {
        return Err(stale(
            "the checkpoint moved since this run's snapshot; retry from the new checkpoint",
        ));
    }
    let authority = match &ctx.request.repair_authority_ref {
        None => None,
        Some(aid) => {
            let record = tx.read_authority(aid).await?.ok_or_else(|| {
                XminError::new(
                    ErrorCode::AuthorityNotFound,
                    "selected repair authority does not exist",
                )
            })?;
            Some((record.to_policy()?, record.recorded_digest.clone()))
        }
    };

    let staged: Staged = match staged {
        Some(s) => s,
        None => stage_checked(tx, env, store).await?,
    };
    let pops = tx.populations().instrument(step("populations")).await?;

    let facts = GuardFacts {
        now: at.div_euclid(1_000_000),
        state_key: id.state_key.clone(),
        scope_hash: id.scope_hash.clone(),
        checkpoint: current,
        target_active_keys: pops.active,
        target_total_rows: pops.total,
        snapshot_keys: env.key_count,
        missing_keys: pops.missing,
        guards: ctx.route.manifest.guards,
        empty_snapshot: ctx.route.manifest.empty_snapshot,
        other_owner: view.other_owner.clone(),
        authority: authority.as_ref().map(|(a, _)| a.clone()),
    };
    let judged = policies.guard(&facts)?;
    ctx.guard_evidence = Some(judged.evidence);
    let allowed = match judged.decision {
        GuardDecision::Allow(a) => a,
        GuardDecision::Deny(reason) => {
            return Err(XminError::new(
                ErrorCode::GuardDenied,
                format!("{}: {}", reason.code, reason.message),
            ));
        }
    };
    ctx.guard_reason = Some(allowed.reason.code.clone());
    if allowed.load == LoadKind::FullBaseline && env.load != LoadKind::FullBaseline {
        return Err(stale(
            "the guard requires a full baseline but the snapshot is incremental; retry",
        ));
    }
    let used = match (&allowed.authority_used, &authority) {
        (None, _) => None,
        (Some(u), Some((a, digest))) if *u == a.authority_id => {
            Some((a.authority_id.clone(), digest.clone()))
        }
        (Some(_), _) => {
            return Err(XminError::new(
                ErrorCode::PolicyFailed,
                "the guard named an authority that was not offered",
            ));
        }
    };
    if let Some(t) = &allowed.transfer_from {
        let n = tx.supersede(t, &id.state_key, at).await?;
        if n != 1 {
            return Err(XminError::new(
                ErrorCode::TransferFailed,
                "the old owner could not be superseded exactly once",
            ));
        }
    }

    // Business DML in the spec's order, exact counts.
    let updated = tx
        .apply(ApplyStep::UpdateChanged, at)
        .instrument(step("update_changed"))
        .await?;
    let reactivated = tx
        .apply(ApplyStep::Reactivate, at)
        .instrument(step("reactivate"))
        .await?;
    let inserted = tx
        .apply(ApplyStep::Insert, at)
        .instrument(step("insert"))
        .await?;
    let deleted = tx
        .apply(ApplyStep::Missing, at)
        .instrument(step("missing"))
        .await?;
    let parity = tx.parity().instrument(step("parity")).await?;

    let hard = ctx.route.plan.mode == Mode::HardDelete;
    let inv = |ok: bool, m: &str| {
        if ok {
            Ok(())
        } else {
            Err(XminError::new(ErrorCode::MetricInvariant, m.to_owned()))
        }
    };
    if parity.delta_outside_snapshot != 0
        || parity.active != env.key_count
        || deleted != pops.missing
    {
        return Err(XminError::new(
            ErrorCode::ParityDrift,
            format!(
                "active target keys differ from the snapshot ({} active for {} snapshot keys, {} delta keys outside the snapshot, {} of {} missing keys applied); full repair required",
                parity.active, env.key_count, parity.delta_outside_snapshot, deleted, pops.missing
            ),
        ));
    }
    inv(
        deleted == pops.missing,
        "deleted rows differ from the guarded missing population",
    )?;
    inv(
        pops.active + inserted + reactivated == parity.active + deleted,
        "active count does not balance",
    )?;
    let expected_total = if hard {
        (pops.total + inserted).checked_sub(deleted)
    } else {
        Some(pops.total + inserted)
    };
    inv(
        expected_total == Some(parity.total),
        "total count does not balance",
    )?;
    let unchanged = env
        .key_count
        .checked_sub(inserted + updated + reactivated)
        .ok_or_else(|| {
            XminError::new(ErrorCode::MetricInvariant, "more writes than snapshot keys")
        })?;
    let metrics = Metrics {
        inserted,
        updated,
        reactivated,
        unchanged,
        soft_deleted: if hard { 0 } else { deleted },
        hard_deleted: if hard { deleted } else { 0 },
        active: parity.active,
        total: parity.total,
        staged_rows: staged.rows,
        staged_keys: staged.keys,
    };

    // Checkpoint CAS, receipt, consumption, run row.
    let new = Checkpoint {
        xmin: env.safe_checkpoint,
        revision: current.map_or(1, |c| c.revision + 1),
    };
    let receipt_id = receipt_id(&ctx.load_id, &id.state_key, new.revision);
    let cas = CheckpointCas {
        state_key: id.state_key.clone(),
        target_identity: id.target_identity,
        scope_hash: id.scope_hash.clone(),
        expected: current,
        new,
        visible_horizon: env.visible_horizon,
        receipt_id: receipt_id.clone(),
    };
    if !tx
        .cas_checkpoint(&cas, at)
        .instrument(step("cas_receipt"))
        .await?
    {
        return Err(stale(
            "checkpoint compare-and-set lost; retry from the new checkpoint",
        ));
    }
    let receipt = CommitReceipt {
        receipt_id: receipt_id.clone(),
        load_id: ctx.load_id.clone(),
        invocation_id: ctx.request.invocation_id.clone(),
        state_key: id.state_key.clone(),
        previous: current,
        checkpoint: new,
        visible_horizon: env.visible_horizon,
        replay_amplification_xids: env.replay_amplification_xids,
        envelope_digest: ctx.envelope_digest.clone(),
        route_fingerprint: id.route_fingerprint.clone(),
        authority_id: used.as_ref().map(|(a, _)| a.clone()),
        authority_digest: used.as_ref().map(|(_, d)| d.clone()),
        metrics,
        detected_at_micros: at,
        source_lineage: env.source_lineage.clone(),
    };
    tx.insert_receipt(&receipt)
        .instrument(step("cas_receipt"))
        .await?;
    if let Some((aid, digest)) = &used {
        tx.consume_authority(
            &Consumption {
                authority_id: aid.clone(),
                authority_digest: digest.clone(),
                state_key: id.state_key.clone(),
                load_id: ctx.load_id.clone(),
                receipt_id: receipt_id.clone(),
            },
            at,
        )
        .await?;
    }
    tx.record_run(&RunRecord {
        run_id: ctx.load_id.clone(),
        invocation_id: ctx.request.invocation_id.clone(),
        state_key: id.state_key.clone(),
        status: "committed",
        code: None,
        evidence: serde_json::json!({
            "receipt_id": receipt_id,
            "load": env.load,
            "guard_reason": ctx.guard_reason,
        }),
    })
    .await?;
    Ok(receipt)
}

/// The source lineage recorded by the receipt that wrote `checkpoint` (empty for receipts
/// written before lineage was recorded).
async fn recorded_lineage<T: TargetPort>(
    target: &mut T,
    state_key: &str,
    checkpoint: Checkpoint,
) -> Result<SourceLineage> {
    let newest = target.receipts(state_key, 1).await?;
    match newest.into_iter().next() {
        Some(r) if r.checkpoint == checkpoint => Ok(r.source_lineage),
        _ => Err(stale(
            "the newest receipt does not match the checkpoint; retry from the new checkpoint",
        )),
    }
}

fn cleanup_artifacts(env: &SnapshotEnvelope, store: &dyn ArtifactStore) -> Result<()> {
    let mut result = Ok(());
    for p in std::iter::once(&env.rows).chain(env.keys.as_ref()) {
        if let Err(e) = store.remove(&p.artifact.sha256) {
            result = Err(crate::artifact::io_error("remove artifact", &e));
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runbook's `full_repair_required` codes (docs/xmin-reconciliation.md): parity drift,
    /// freeze uncertainty, an XID epoch change, a checkpoint regression and a changed source lineage
    /// (restore or failover), in whatever phase they are found; nothing else.
    #[test]
    fn full_repair_is_flagged_for_exactly_the_documented_codes() {
        for code in ErrorCode::ALL {
            let want = matches!(
                code,
                ErrorCode::ParityDrift
                    | ErrorCode::SourceFreezeUncertain
                    | ErrorCode::SourceXidEpochChanged
                    | ErrorCode::SourceCheckpointRegression
                    | ErrorCode::SourceLineageChanged
            );
            for phase in [
                Phase::Extraction,
                Phase::Validation,
                Phase::TargetTransaction,
            ] {
                let f = RunFailure::at(phase, XminError::new(*code, "m"));
                assert_eq!(f.full_repair_required, want, "{code} in {phase:?}");
            }
        }
    }
}
