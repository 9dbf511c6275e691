//! The coordinator: admission, fencing, staging, publication, cleanup and status (spec 000,
//! "Detailed algorithm" sections 1–6).
//!
//! [`Coordinator::run`] is re-entrant: every call reads the authority record and resumes the
//! phase it finds, so "retry" is simply calling `run` again with the same request. Each run
//! builds its state from authority and observation only; nothing in memory survives a run.

mod authority;
mod publish;
pub mod resolve;
mod stage;
mod status;
mod tee;
mod timing;

use dpone_policy_model::admission::{
    ColumnFacts, MemberFacts, ReplicationDecision, ReplicationMode, RuntimeDecision, RuntimeFacts,
    StaticDecision, StaticFacts, V1AuthorityState,
};
use serde::Serialize;

use crate::contracts::{
    self, AdmissionEvidence, AuthoritySlot, Digest, InventoryEntry, MemberId, OperationId, Phase,
    PublicationReceipt, Schema, TargetKey,
};
use crate::error::EngineError;
use crate::ports::{
    AdmissionGate, ArtifactSource, AuthorityStore, ClusterDdl, Environment, Gated, InventoryPort,
    MemberCatalog, PortErrorKind, ProgressObserver,
};

pub use status::{MemberObservation, RecordSlot, SlotStatus, StatusReport};
pub use timing::{MemberTimings, RunTimings};

/// The ports a coordinator drives; the composition root fills them. Every port is `Sync`:
/// members are served concurrently ([`CoordinatorConfig::member_parallelism`]).
#[derive(Clone, Copy)]
pub struct Ports<'a> {
    /// KeeperMap authority.
    pub authority: &'a (dyn AuthorityStore + Sync),
    /// `system.clusters` inventory.
    pub inventory: &'a (dyn InventoryPort + Sync),
    /// Member-local staging catalog.
    pub catalog: &'a (dyn MemberCatalog + Sync),
    /// Cluster DDL and queue observation.
    pub ddl: &'a (dyn ClusterDdl + Sync),
    /// Replayable artifact.
    pub artifacts: &'a (dyn ArtifactSource + Sync),
    /// Admission policy.
    pub admission: &'a (dyn AdmissionGate + Sync),
    /// Clock and randomness.
    pub env: &'a (dyn Environment + Sync),
    /// Per-member progress.
    pub progress: &'a (dyn ProgressObserver + Sync),
}

/// Budgets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoordinatorConfig {
    /// Memory bound of one canonical sort, in bytes (canonical proofs only).
    pub digest_sort_budget: u64,
    /// Row hashes the host keeps in memory while computing a rowset digest over the artifact,
    /// in bytes; beyond it they spill to an anonymous temporary file.
    pub rowset_memory_budget: u64,
    /// The proof a new operation records and uses; an existing operation keeps the proof its
    /// record names (a record without one is canonical).
    pub content_proof: crate::contracts::ContentProof,
    /// Observe/act iterations per member per run before giving up (retryable).
    pub member_step_limit: u32,
    /// Members served at once (loads, content proofs, observations); 1 serves them one after
    /// another in member-id order.
    pub member_parallelism: usize,
    /// Internal mode: how long one run waits for one replica to converge on the staged
    /// candidate (`SYSTEM SYNC REPLICA`) before it stops, retryable, in STAGING.
    pub replica_sync_bound: std::time::Duration,
    /// The member-count budget: an inventory of more members is refused at admission, before
    /// any member is probed, anything locked or the source read (`MEMBER_BUDGET_EXCEEDED`).
    pub max_members: usize,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        Self {
            digest_sort_budget: 1 << 30,
            rowset_memory_budget: 64 << 20,
            content_proof: crate::contracts::ContentProof::Rowset,
            member_step_limit: 12,
            member_parallelism: 4,
            replica_sync_bound: std::time::Duration::from_secs(120),
            max_members: 64,
        }
    }
}

/// One full-refresh operation as the CLI describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationRequest {
    /// Manifest facts for admission (cluster, database, engine, `max_source_bytes`, …).
    pub static_facts: StaticFacts,
    /// Target table name.
    pub target_table: String,
    /// Scheduler-stable invocation id (not a worker try number).
    pub scheduler_invocation: String,
    /// Digest of the normalized plan.
    pub plan_digest: Digest,
    /// Target schema in declared order.
    pub schema: Schema,
    /// `ORDER BY` columns for a candidate (empty means `tuple()`).
    pub order_by: Vec<String>,
}

/// What a run achieved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunOutcome {
    /// Every member holds the desired generation and cleanup is proven.
    Completed {
        /// The commit receipt.
        receipt: Box<PublicationReceipt>,
    },
    /// The cluster is still executing the bound DDL; call `run` again later.
    InProgress {
        /// Phase held.
        phase: Phase,
        /// Members not yet at the desired state.
        waiting: Vec<MemberId>,
    },
}

/// The exact safe recovery action that status evidence names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryAction {
    /// Nothing to do: this operation completed.
    None,
    /// The slot is free: `run` starts this operation.
    Run,
    /// Call `run` again with the same request; it resumes the phase.
    ResumeSameOperation,
    /// The bound DDL is still executing; wait, then call `run` again.
    WaitThenResume,
    /// Another unresolved operation holds the target; let it finish.
    WaitForOwningOperation,
    /// The inventory drifted; restore the admitted topology, then resume.
    RestoreInventoryThenResume,
    /// Resolve the V1 (internal) operation first.
    ResolveV1First,
    /// Fail-closed evidence: retain every object and escalate; no automatic action is safe.
    HoldForOperator,
    /// The manifest or source needs a change.
    FixManifest,
    /// This operation was aborted; start a new scheduler invocation.
    StartNewOperation,
}

/// Drives one external full-refresh operation through its ports.
pub struct Coordinator<'a> {
    ports: Ports<'a>,
    config: CoordinatorConfig,
    clock: timing::Clock,
    /// This run's content proofs by exact table (member, UUID), each with the table's physical
    /// fingerprint, identical before and after the proof's read ([`Coordinator::reprove`]).
    /// Never survives a run.
    proven: std::sync::Mutex<
        std::collections::BTreeMap<
            (MemberId, contracts::Uuid),
            (Digest, crate::canonical::ContentSummary),
        >,
    >,
}

/// The admitted, derived context of one run.
pub(crate) struct Op<'r> {
    pub req: &'r OperationRequest,
    /// The replication mode admission selected (the mode router's choice).
    pub mode: crate::contracts::PublicationMode,
    pub cluster: &'r str,
    pub database: &'r str,
    pub target: &'r str,
    pub engine: &'r str,
    pub max_bytes: u64,
    pub target_key: TargetKey,
    pub operation_id: OperationId,
    pub candidate: String,
    pub schema_digest: Digest,
    /// (member id, shard, replica) in member-id order.
    pub members: Vec<(MemberId, u32, u32)>,
    pub inventory_digest: Digest,
    pub admission: AdmissionEvidence,
}

pub(crate) fn interrupted_or<F>(kind: PortErrorKind, step: &'static str, f: F) -> EngineError
where
    F: FnOnce() -> EngineError,
{
    if kind == PortErrorKind::Interrupted {
        EngineError::Interrupted { step }
    } else {
        f()
    }
}

/// The scope of a statement sent to the coordinator endpoint (inventory, authority, queue).
pub(crate) const COORDINATOR_SCOPE: &str = "coordinator";

/// A port failure at `step`: an interruption stops the run, a rejection is a deterministic
/// refusal that no retry resolves ([`EngineError::StatementRejected`]), and anything else
/// (unavailable, ambiguous) becomes `transport(e)`, which the caller makes retryable.
pub(crate) fn port_failure(
    e: crate::ports::PortError,
    step: &'static str,
    scope: impl FnOnce() -> String,
    transport: impl FnOnce(crate::ports::PortError) -> EngineError,
) -> EngineError {
    match e.kind {
        PortErrorKind::Interrupted => EngineError::Interrupted { step },
        PortErrorKind::Rejected => EngineError::StatementRejected {
            scope: scope(),
            step,
            aborted: false,
            source: e,
        },
        PortErrorKind::Unavailable | PortErrorKind::Ambiguous => transport(e),
    }
}

impl<'a> Coordinator<'a> {
    /// A coordinator over `ports`.
    pub fn new(ports: Ports<'a>, config: CoordinatorConfig) -> Self {
        Self {
            ports,
            config,
            clock: timing::Clock::default(),
            proven: std::sync::Mutex::default(),
        }
    }

    /// The wall-clock phase timings of the last [`Self::run`] (zeros before any run).
    pub fn timings(&self) -> RunTimings {
        self.clock.snapshot()
    }

    /// Static admission (`check` / `plan`): the replication decision, never a fallback.
    pub fn check(&self, facts: &StaticFacts) -> Result<Gated<ReplicationDecision>, EngineError> {
        let gated = self
            .ports
            .admission
            .admit_static(facts)
            .map_err(EngineError::AdmissionUnavailable)?;
        match gated.decision {
            StaticDecision::Blocked(reasons) => Err(EngineError::AdmissionBlocked(reasons)),
            StaticDecision::Admitted(d) => {
                if !d.no_fallback || !d.runtime_admission_required {
                    return Err(EngineError::AdmissionInconsistent);
                }
                Ok(Gated {
                    decision: d,
                    evidence: gated.evidence,
                })
            }
        }
    }

    /// Runs (or resumes) the operation until it completes, waits on the cluster, or stops.
    pub fn run(&self, req: &OperationRequest) -> Result<RunOutcome, EngineError> {
        self.clock.reset();
        self.proven
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
        let started = std::time::Instant::now();
        let out = self.run_phases(req);
        self.clock.add_total(started.elapsed());
        out
    }

    fn run_phases(&self, req: &OperationRequest) -> Result<RunOutcome, EngineError> {
        let op = phase_span("admit").in_scope(|| self.admit(req))?;
        let mut held = phase_span("lock").in_scope(|| self.lock(&op))?;
        let mut cleanup_reauthorized = false;
        loop {
            self.ports.progress.phase(held.record.phase);
            let span = phase_span(match held.record.phase {
                Phase::Locked => "seal",
                Phase::Staging => "stage",
                Phase::Staged => "authorize",
                Phase::PublicationDispatching => "publish",
                Phase::Committed | Phase::CleanupDispatching => "cleanup",
                Phase::Completed | Phase::Aborted => "settle",
            });
            let _entered = span.enter();
            use timing::RunPhase;
            held = match held.record.phase {
                Phase::Locked => self.bind_stage(&op, held)?,
                Phase::Staging => self
                    .clock
                    .phase(RunPhase::Stage, || self.stage_all(&op, held))?,
                Phase::Staged => self.clock.phase(RunPhase::Authorize, || {
                    self.authorize_publication(&op, held)
                })?,
                Phase::PublicationDispatching => match self
                    .clock
                    .phase(RunPhase::Publish, || self.reconcile_publication(&op, held))?
                {
                    Ok(next) => next,
                    Err(wait) => return Ok(wait),
                },
                Phase::Committed => self
                    .clock
                    .phase(RunPhase::Cleanup, || self.start_cleanup(&op, held))?,
                Phase::CleanupDispatching => {
                    let may = !cleanup_reauthorized;
                    cleanup_reauthorized = true;
                    match self
                        .clock
                        .phase(RunPhase::Cleanup, || self.reconcile_cleanup(&op, held, may))?
                    {
                        Ok(next) => next,
                        Err(wait) => return Ok(wait),
                    }
                }
                Phase::Completed => {
                    let receipt = held
                        .record
                        .receipt
                        .clone()
                        .ok_or(EngineError::AuthorityMismatch("completed without receipt"))?;
                    return Ok(RunOutcome::Completed {
                        receipt: Box::new(receipt),
                    });
                }
                Phase::Aborted => return Err(EngineError::OperationAborted),
            };
        }
    }

    fn validate_request(req: &OperationRequest) -> Result<(), EngineError> {
        let f = &req.static_facts;
        let local = static_mode(f) == crate::contracts::PublicationMode::Local;
        if !(contracts::valid_name(&f.cluster_name) || local)
            || !contracts::valid_name(&f.target_database)
            || !contracts::valid_name(&req.target_table)
        {
            return Err(EngineError::RequestInvalid(
                "cluster, database or table name",
            ));
        }
        if req.scheduler_invocation.is_empty() || req.scheduler_invocation.len() > 512 {
            return Err(EngineError::RequestInvalid("scheduler invocation"));
        }
        if req.schema.columns.is_empty()
            || req
                .schema
                .columns
                .iter()
                .any(|c| !contracts::valid_name(&c.name))
        {
            return Err(EngineError::RequestInvalid("schema"));
        }
        if req.order_by.iter().any(|c| !contracts::valid_name(c)) {
            return Err(EngineError::RequestInvalid("order_by"));
        }
        crate::canonical::column_types(&req.schema).map_err(|e| match e {
            crate::canonical::DigestError::UnsupportedType { column } => {
                EngineError::UnsupportedColumnType { column }
            }
            _ => EngineError::RequestInvalid("schema"),
        })?;
        Ok(())
    }

    /// Static and runtime admission over the complete inventory; before any source I/O.
    fn admit<'r>(&self, req: &'r OperationRequest) -> Result<Op<'r>, EngineError> {
        self.check(&req.static_facts)?;
        Self::validate_request(req)?;
        crate::admission::require_content_exact_engine(&req.static_facts.engine)?;
        let f = &req.static_facts;
        let max_bytes = match f.max_source_bytes {
            Some(n) if n > 0 => n as u64,
            _ => return Err(EngineError::RequestInvalid("max_source_bytes")),
        };
        let target_key =
            contracts::target_key(&f.cluster_name, &f.target_database, &req.target_table);
        let (entries, complete) = self.observe_inventory(&f.cluster_name)?;
        if entries.len() > self.config.max_members {
            return Err(EngineError::MemberBudgetExceeded {
                members: entries.len(),
                max: self.config.max_members,
            });
        }

        // Every member is probed at once (reads only, none depending on another); the answers
        // are judged in inventory order, exactly as one after another, so the first failure in
        // that order is the one reported. The authority is read only once every member answered.
        let probes = self.for_members(&entries, |e| {
            let id = contracts::member_id(e.shard_num, e.replica_num);
            self.ports
                .catalog
                .probe(&id, &f.target_database, &req.target_table)
        });
        let mut facts_members = Vec::new();
        let mut capabilities = Vec::new();
        for (e, probe) in entries.iter().zip(probes) {
            let id = contracts::member_id(e.shard_num, e.replica_num);
            let probe = match probe {
                Ok(p) => Some(p),
                // A member the registry does not configure cannot be probed: the inventory is
                // incomplete and runtime admission blocks on that, so report its facts empty.
                Err(_) if !complete => None,
                // The connection reaches another server than the configured replica: the
                // registry is wrong; nothing may be decided on that member's facts.
                Err(e) if e.class == crate::ports::MEMBER_IDENTITY_UNPROVEN => {
                    return Err(EngineError::MemberIdentityUnproven {
                        member: id.0.hex_prefix(16),
                    });
                }
                // A configured member that does not answer is an outage, not a set of facts:
                // reporting it empty would make admission blame the manifest (database engine,
                // KeeperMap, target presence). Resume the same operation later.
                Err(e) => {
                    return Err(port_failure(
                        e,
                        "probe",
                        || format!("member {}", id.0.hex_prefix(16)),
                        |source| EngineError::MemberUnavailable {
                            member: id.0.hex_prefix(16),
                            step: "probe",
                            source,
                        },
                    ));
                }
            };
            if let Some(p) = &probe {
                capabilities.push((id, p.rowset_proof_supported, p.authority_facade.clone()));
            }
            facts_members.push(MemberFacts {
                member_id: id.to_string(),
                shard_num: e.shard_num,
                replica_num: e.replica_num,
                internal_replication: e.internal_replication,
                database_engine: probe
                    .as_ref()
                    .map(|p| p.database_engine.clone())
                    .unwrap_or_default(),
                target_engine: probe.as_ref().and_then(|p| p.target_engine.clone()),
                keeper_map_available: probe.as_ref().is_some_and(|p| p.keeper_map_available),
                direct_connection: probe.is_some(),
            });
        }
        let v1 = match self.read_slot(&target_key)? {
            Some((_, AuthoritySlot::V1(r))) if r.phase.is_resolved() => V1AuthorityState::Completed,
            Some((_, AuthoritySlot::V1(_))) => V1AuthorityState::Unresolved,
            _ => V1AuthorityState::Absent,
        };
        let facts = RuntimeFacts {
            static_facts: f.clone(),
            members: facts_members,
            inventory_complete: complete,
            columns: req
                .schema
                .columns
                .iter()
                .map(|c| ColumnFacts {
                    name: c.name.clone(),
                    type_name: c.type_name.clone(),
                })
                .collect(),
            v1_authority: v1,
        };
        let gated = self
            .ports
            .admission
            .admit_runtime(&facts)
            .map_err(EngineError::AdmissionUnavailable)?;
        let admitted = match gated.decision {
            RuntimeDecision::Blocked(reasons) => {
                return Err(EngineError::AdmissionBlocked(reasons));
            }
            RuntimeDecision::Admitted(a) => a,
        };
        let mode = publication_mode(admitted.replication_mode);
        // The mode router: the mode is the one the static decision selected for this
        // manifest, and the runtime decision must agree with it.
        if mode != static_mode(&req.static_facts) {
            return Err(EngineError::AdmissionInconsistent);
        }
        // The policy's answer must be exactly the inventory, in member-id order.
        let mut expected: Vec<(MemberId, u32, u32)> = entries
            .iter()
            .map(|e| {
                (
                    contracts::member_id(e.shard_num, e.replica_num),
                    e.shard_num,
                    e.replica_num,
                )
            })
            .collect();
        expected.sort();
        let got: Vec<(String, u32, u32)> = admitted
            .members
            .iter()
            .map(|m| (m.member_id.clone(), m.shard_num, m.replica_num))
            .collect();
        let want: Vec<(String, u32, u32)> = expected
            .iter()
            .map(|(id, s, r)| (id.to_string(), *s, *r))
            .collect();
        if got != want
            || expected.len() < mode.min_members()
            || (mode == crate::contracts::PublicationMode::Local && expected.len() != 1)
        {
            return Err(EngineError::AdmissionInconsistent);
        }
        self.require_capabilities(&capabilities)?;
        let operation_id =
            contracts::operation_id(&req.scheduler_invocation, &target_key, &req.plan_digest);
        Ok(Op {
            req,
            mode,
            cluster: &f.cluster_name,
            database: &f.target_database,
            target: &req.target_table,
            engine: &f.engine,
            max_bytes,
            target_key,
            candidate: contracts::candidate_name(&req.target_table, &operation_id),
            operation_id,
            schema_digest: contracts::schema_digest(&req.schema),
            members: expected,
            inventory_digest: contracts::inventory_digest(&entries),
            admission: gated.evidence,
        })
    }

    /// What the run will need of every member, checked before the authority is locked: the
    /// functions of the content proof a new operation records, and one shared authority (every
    /// member's KeeperMap facade has the same definition, so the same Keeper path).
    fn require_capabilities(
        &self,
        members: &[(MemberId, bool, Option<String>)],
    ) -> Result<(), EngineError> {
        if self.config.content_proof == crate::contracts::ContentProof::Rowset
            && let Some((id, _, _)) = members.iter().find(|(_, rowset, _)| !rowset)
        {
            return Err(EngineError::MemberProofUnsupported {
                member: id.0.hex_prefix(16),
                proof: "rowset",
                function: "formatRow",
            });
        }
        let mut paths = members
            .iter()
            .filter_map(|(id, _, p)| p.as_ref().map(|p| (id, p)));
        if let Some((_, first)) = paths.next()
            && let Some((id, _)) = paths.find(|(_, p)| *p != first)
        {
            return Err(EngineError::AuthorityFacadeDivergent {
                member: id.0.hex_prefix(16),
            });
        }
        Ok(())
    }

    /// The inventory as digest entries; an incomplete inventory is reported as such, a failing
    /// read as [`EngineError::InventoryUnavailable`] (or a rejection).
    fn observe_inventory(&self, cluster: &str) -> Result<(Vec<InventoryEntry>, bool), EngineError> {
        match self.ports.inventory.observe(cluster) {
            Ok((rows, complete)) => Ok((
                rows.into_iter()
                    .map(|r| InventoryEntry {
                        shard_num: r.shard_num,
                        replica_num: r.replica_num,
                        internal_replication: r.internal_replication,
                        endpoint_digest: r.endpoint_digest,
                    })
                    .collect(),
                complete,
            )),
            // A coordinator that does not answer is an outage, never an empty inventory (which
            // admission would misreport as a topology blocker).
            Err(e) => Err(port_failure(
                e,
                "inventory",
                || COORDINATOR_SCOPE.into(),
                EngineError::InventoryUnavailable,
            )),
        }
    }

    /// Runs `f` for every item, at most [`CoordinatorConfig::member_parallelism`] at once, and
    /// returns the results in item order (a caller that stops at the first error still reports
    /// the first in member-id order). With a bound of 1, or one item, it runs inline.
    pub(crate) fn for_members<T, R, F>(&self, items: &[T], f: F) -> Vec<R>
    where
        T: Sync,
        R: Send,
        F: Fn(&T) -> R + Sync,
    {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::{Mutex, PoisonError};
        let workers = self.config.member_parallelism.max(1).min(items.len());
        if workers <= 1 {
            return items.iter().map(f).collect();
        }
        let next = AtomicUsize::new(0);
        let slots: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
        let span = tracing::Span::current();
        std::thread::scope(|s| {
            for _ in 0..workers {
                let span = span.clone();
                let (next, slots, f) = (&next, &slots, &f);
                s.spawn(move || {
                    let _entered = span.enter();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        let r = f(item);
                        *slots[i].lock().unwrap_or_else(PoisonError::into_inner) = Some(r);
                    }
                });
            }
        });
        // A worker that panicked re-raised its panic when the scope ended, so every slot is
        // filled here.
        slots
            .into_iter()
            .filter_map(|m| m.into_inner().unwrap_or_else(PoisonError::into_inner))
            .collect()
    }

    /// Runs `first` on a thread of its own (in the current span) while `second` runs here, and
    /// returns both results; a panic in `first` is raised again here. For independent steps
    /// whose results are judged in a fixed order by the caller.
    pub(crate) fn beside<A, B>(
        first: impl FnOnce() -> A + Send,
        second: impl FnOnce() -> B,
    ) -> (A, B)
    where
        A: Send,
    {
        let span = tracing::Span::current();
        std::thread::scope(|s| {
            let first = s.spawn(move || {
                let _entered = span.enter();
                first()
            });
            let second = second();
            let first = first
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (first, second)
        })
    }

    /// Re-observes the inventory and requires the bound digest (drift fences the operation).
    pub(crate) fn require_inventory(&self, op: &Op<'_>) -> Result<(), EngineError> {
        let (entries, complete) = self.observe_inventory(op.cluster)?;
        if !complete || contracts::inventory_digest(&entries) != op.inventory_digest {
            return Err(EngineError::InventoryDrift);
        }
        Ok(())
    }
}

/// The engine's mode for the policy's.
fn publication_mode(mode: ReplicationMode) -> crate::contracts::PublicationMode {
    match mode {
        ReplicationMode::Internal => crate::contracts::PublicationMode::Internal,
        ReplicationMode::External => crate::contracts::PublicationMode::External,
        ReplicationMode::Local => crate::contracts::PublicationMode::Local,
    }
}

/// The mode a manifest declares: one server when it has no cluster block (an empty cluster
/// name and the `local` scope); otherwise `replication_mode`, absent meaning internal (spec
/// 000).
pub(crate) fn static_mode(facts: &StaticFacts) -> crate::contracts::PublicationMode {
    if facts.cluster_name.is_empty() && facts.ddl_scope.as_deref() == Some("local") {
        return crate::contracts::PublicationMode::Local;
    }
    match facts.replication_mode.as_deref() {
        Some("external") => crate::contracts::PublicationMode::External,
        _ => crate::contracts::PublicationMode::Internal,
    }
}

/// The span of one protocol step (target `dpone::phase`, named by its `otel.name`): the cli
/// turns these into trace spans and phase-duration metrics when telemetry is configured; with
/// no subscriber interested they cost a disabled callsite check.
fn phase_span(name: &'static str) -> tracing::Span {
    tracing::info_span!(target: "dpone::phase", "phase", otel.name = name, phase = name)
}
