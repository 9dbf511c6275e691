//! Tier: engine on in-process ports. Operator resolution (`dpone-host resolve`) of the holds the
//! protocol cannot leave on its own: every proven case records exactly one CAS with evidence and
//! `run` then converges with 0 duplicate rows and one publication dispatch; every unproven case
//! is refused with a stable code and changes nothing.

mod common;

use common::{Profile, World, profile};
use dpone_engine_clickhouse::contracts::{
    ArtifactFact, AuthoritySlot, Phase, PublicationRecord, QueueEvidence, ResolutionKind,
    TargetKey, candidate_name, decode_slot, encode_record, operation_id, target_key,
    validate_record,
};
use dpone_engine_clickhouse::ports::{
    AuthorityStore, LoadTokens, MemberCatalog, NoProgress, PortError, QueueEntry, QueueHostStatus,
    Versioned,
};
use dpone_engine_clickhouse::resolve::{
    Decision, InventoryFact, QueueFact, ResolveFacts, ResolveOptions, ResolveOutcome,
    ResolveReport, codes, decide,
};
use dpone_engine_clickhouse::synthetic::{Fault, SyntheticArtifacts, SyntheticEnv};
use dpone_engine_clickhouse::{
    Coordinator, CoordinatorConfig, EngineError, OperationRequest, Ports, RecoveryAction,
    RunOutcome, codes as engine,
};

const QUIET: u64 = 300;
const DRY: ResolveOptions = ResolveOptions {
    apply: false,
    quiet_seconds: QUIET,
};
const APPLY: ResolveOptions = ResolveOptions {
    apply: true,
    quiet_seconds: QUIET,
};

/// An operator's process: its own clock and artifact store, the world's cluster.
struct Operator<'w> {
    w: &'w World,
    env: SyntheticEnv,
    artifacts: Option<SyntheticArtifacts>,
    authority: Option<&'w (dyn AuthorityStore + Sync)>,
}

impl<'w> Operator<'w> {
    /// `later` seconds after the world's clock, on the world's worker (its artifact store).
    fn new(w: &'w World, later: i64) -> Self {
        let mut env = SyntheticEnv::new(7);
        env.now = w.env.now + later;
        Self {
            w,
            env,
            artifacts: None,
            authority: None,
        }
    }

    /// On another worker: an artifact store that never sealed this operation's artifact.
    fn elsewhere(mut self, p: &Profile) -> Self {
        self.artifacts = Some(SyntheticArtifacts::new(
            p.rows(1, p.artifact_rows),
            p.artifact_rows,
        ));
        self
    }

    fn coordinator(&self) -> Coordinator<'_> {
        Coordinator::new(
            Ports {
                authority: self.authority.unwrap_or(&self.w.cluster),
                inventory: &self.w.cluster,
                catalog: &self.w.cluster,
                ddl: &self.w.cluster,
                artifacts: self.artifacts.as_ref().unwrap_or(&self.w.artifacts),
                admission: &self.w.gate,
                env: &self.env,
                progress: &NoProgress,
            },
            CoordinatorConfig::default(),
        )
    }

    fn resolve(&self, req: &OperationRequest, opts: ResolveOptions) -> ResolveReport {
        self.coordinator().resolve(req, opts).expect("resolve")
    }
}

fn key(p: &Profile) -> TargetKey {
    target_key(&p.cluster, &p.database, &p.target)
}

fn record(w: &World, p: &Profile) -> (u64, PublicationRecord) {
    let v = w.cluster.authority_value(&key(p)).expect("slot");
    match decode_slot(&v.value).expect("decodes") {
        AuthoritySlot::External(r) => (v.version, *r),
        AuthoritySlot::V1(_) | AuthoritySlot::Local(_) => panic!("external record expected"),
    }
}

fn candidate(p: &Profile, req: &OperationRequest) -> String {
    let op = operation_id(&req.scheduler_invocation, &key(p), &req.plan_digest);
    candidate_name(&p.target, &op)
}

fn refused(r: &ResolveReport, code: &str) {
    assert_eq!(
        (r.outcome, r.code),
        (ResolveOutcome::Refused, Some(code)),
        "{r:#?}"
    );
}

/// Every member's target holds exactly the artifact's rows, and nothing was loaded twice.
fn converged(w: &World, p: &Profile, members: usize) {
    let want = p.digest_of(&p.rows(1, p.artifact_rows));
    for i in 0..members {
        let t = w
            .cluster
            .snapshot(i, &p.database, &p.target)
            .expect("target");
        assert_eq!(p.digest_of(&t.data), want, "member {i}");
        assert_eq!(w.cluster.duplicate_rows(i), 0, "member {i}");
    }
    assert!(w.cluster.metrics().max_loads_per_table <= 1);
}

/// Drives `req` into PUBLICATION_DISPATCHING with no queue entry (the process stopped between
/// the dispatch CAS and the send) and checks that `run` holds it.
fn dispatch_never_sent(w: &World, req: &OperationRequest, fault: Fault) {
    w.cluster.arm(fault);
    assert!(matches!(
        w.coordinator().run(req),
        Err(EngineError::Interrupted { .. })
    ));
    let e = w.coordinator().run(req).expect_err("held");
    assert_eq!(e.code(), engine::PUBLICATION_EVIDENCE_MISSING);
    assert_eq!(e.recovery(), RecoveryAction::HoldForOperator);
    assert_eq!(w.cluster.metrics().publication_dispatches, 0);
}

#[test]
fn a_dispatch_that_was_never_sent_returns_to_staged_and_run_publishes_once() {
    let p = profile();
    let req = p.request();
    for (present, fault) in [
        (true, Fault::CrashBeforePublicationDispatch),
        (false, Fault::CrashAfterPhase(Phase::PublicationDispatching)),
    ] {
        let w = World::new(&p, 2, present);
        dispatch_never_sent(&w, &req, fault);
        let before = w.cluster.authority_value(&key(&p));

        // Too early: a worker of this operation may still be dispatching.
        let early = Operator::new(&w, 10).resolve(&req, APPLY);
        refused(&early, codes::QUIET_PERIOD);
        assert!(early.retryable);
        assert_eq!(w.cluster.authority_value(&key(&p)), before);

        // Dry run: the proof and the proposed transition, nothing recorded.
        let op = Operator::new(&w, 3_600);
        let dry = op.resolve(&req, DRY);
        assert_eq!(dry.outcome, ResolveOutcome::Proposed, "{dry:#?}");
        assert_eq!(dry.resolution, Some(ResolutionKind::ReturnToStaged));
        assert_eq!(
            (dry.from, dry.to),
            (Some(Phase::PublicationDispatching), Some(Phase::Staged))
        );
        assert_eq!(dry.queue.as_ref().map(|q| q.state), Some("absent"));
        assert!(dry.members.iter().all(|m| m.candidate.is_some()));
        assert_eq!(w.cluster.authority_value(&key(&p)), before);

        let done = op.resolve(&req, APPLY);
        assert_eq!(done.outcome, ResolveOutcome::Recorded, "{done:#?}");
        assert_eq!(done.recovery, RecoveryAction::ResumeSameOperation);
        let (v, r) = record(&w, &p);
        assert_eq!(Some(v), done.recorded_version);
        assert_eq!((r.phase, r.publication.is_none()), (Phase::Staged, true));
        let [ev] = r.resolutions.as_slice() else {
            panic!("one resolution recorded");
        };
        assert_eq!(ev.kind, ResolutionKind::ReturnToStaged);
        assert_eq!(ev.queue, QueueEvidence::Absent);
        assert_eq!(ev.dispatch_epoch, 1);
        assert!(ev.closed_binding.as_ref().is_some_and(|b| b.epoch == 1));
        assert!(ev.members.iter().zip(&r.members).all(|(e, m)| {
            e.candidate_uuid == m.candidate_uuid
                && e.candidate_content_digest == r.artifact_content_digest
                && e.target_uuid == m.predecessor.map(|x| x.uuid)
        }));

        // A normal run dispatches once, under a new epoch, and converges.
        let Ok(RunOutcome::Completed { receipt }) = w.coordinator().run(&req) else {
            panic!("run completes after the resolution");
        };
        assert_eq!(receipt.publication.epoch, 2);
        assert_eq!(w.cluster.metrics().publication_dispatches, 1);
        converged(&w, &p, 2);
        let (_, done) = record(&w, &p);
        assert_eq!(done.resolutions.len(), 1, "evidence is kept to completion");
    }
}

#[test]
fn a_publication_whose_queue_entry_was_purged_commits_with_its_receipt() {
    let p = profile();
    let req = p.request();
    for present in [true, false] {
        let w = World::new(&p, 2, present);
        w.cluster.arm(Fault::LostDdlResponse);
        w.cluster.arm(Fault::CrashBeforePhase(Phase::Committed));
        assert!(w.coordinator().run(&req).is_err());
        assert_eq!(
            w.cluster.purge_queue(false),
            1,
            "retention removed the entry"
        );
        let e = w.coordinator().run(&req).expect_err("held");
        assert_eq!(e.code(), engine::PUBLICATION_EVIDENCE_MISSING);

        // Committing needs no quiet period: every member already holds the generation.
        let done = Operator::new(&w, 1).resolve(&req, APPLY);
        assert_eq!(done.outcome, ResolveOutcome::Recorded, "{done:#?}");
        assert_eq!(done.resolution, Some(ResolutionKind::Commit));
        let (_, r) = record(&w, &p);
        assert_eq!(r.phase, Phase::Committed);
        let receipt = r.receipt.clone().expect("commit receipt");
        assert_eq!(
            receipt.content_digest,
            p.digest_by(receipt.content_proof, &p.rows(1, p.artifact_rows))
        );
        assert!(
            receipt
                .members
                .iter()
                .zip(&r.members)
                .all(|(x, m)| Some(x.target_uuid) == m.candidate_uuid)
        );
        assert_eq!(receipt.publication.queue_entry, None);
        assert_eq!(r.resolutions[0].queue, QueueEvidence::Absent);

        let Ok(RunOutcome::Completed { receipt: last }) = w.coordinator().run(&req) else {
            panic!("run cleans up and completes");
        };
        assert_eq!(*last, receipt);
        assert_eq!(w.cluster.metrics().publication_dispatches, 1);
        converged(&w, &p, 2);
        for i in 0..2 {
            assert!(!w.cluster.table_names(i).contains(&candidate(&p, &req)));
        }
    }
}

#[test]
fn cleanup_without_queue_evidence_completes_after_exact_drops() {
    let p = profile();
    let req = p.request();
    // The DROP ran everywhere, the entry was purged, the process stopped before COMPLETED.
    let w = World::new(&p, 2, true);
    w.cluster.arm(Fault::CrashBeforePhase(Phase::Completed));
    assert!(w.coordinator().run(&req).is_err());
    w.cluster.purge_queue(true);
    let done = Operator::new(&w, 1).resolve(&req, APPLY);
    assert_eq!(done.resolution, Some(ResolutionKind::Complete), "{done:#?}");
    assert_eq!(done.outcome, ResolveOutcome::Recorded);
    assert!(done.drops.is_empty());
    assert_eq!(record(&w, &p).1.phase, Phase::Completed);

    // The DROP reached one member only and its entry is gone: `run` holds, resolve drops the
    // remaining exact predecessor by UUID and completes.
    let w = World::new(&p, 2, true);
    w.cluster
        .arm(Fault::CrashAfterPhase(Phase::CleanupDispatching));
    assert!(w.coordinator().run(&req).is_err());
    let (_, r) = record(&w, &p);
    let pred0 = r.members[0].predecessor.expect("predecessor").uuid;
    w.cluster
        .drop_exact(
            &r.members[0].member_id,
            &p.database,
            &candidate(&p, &req),
            pred0,
        )
        .expect("partial drop");
    let e = w.coordinator().run(&req).expect_err("held");
    assert_eq!(e.code(), engine::CLEANUP_UNRESOLVED);
    let dry = Operator::new(&w, 1).resolve(&req, DRY);
    assert_eq!(dry.drops.len(), 1, "{dry:#?}");
    assert_eq!(dry.drops[0].member_id, r.members[1].member_id);
    let done = Operator::new(&w, 1).resolve(&req, APPLY);
    assert_eq!(done.outcome, ResolveOutcome::Recorded, "{done:#?}");
    assert!(done.drops.iter().all(|d| d.dropped));
    let (_, r) = record(&w, &p);
    assert_eq!(r.phase, Phase::Completed);
    assert_eq!(
        r.resolutions[0].members[1].dropped_uuid,
        r.members[1].predecessor.map(|x| x.uuid)
    );
    for i in 0..2 {
        assert!(!w.cluster.table_names(i).contains(&candidate(&p, &req)));
    }
    converged(&w, &p, 2);
}

#[test]
fn a_missing_artifact_on_this_worker_aborts_after_dropping_exact_owned_candidates() {
    let p = profile();
    let req = p.request();
    let w = World::new(&p, 2, true);
    // Worker A loads the first member (in member-id order, members one after another); the
    // second member's load applies one row and its response is lost, so A drops that candidate
    // and stops at its next authority write; worker B, without A's artifact store, cannot
    // replay the artifact into the second.
    let ids = w.cluster.member_ids();
    let first = (0..ids.len()).min_by_key(|i| ids[*i]).expect("members");
    let second = (0..ids.len()).max_by_key(|i| ids[*i]).expect("members");
    w.cluster
        .arm(Fault::CrashAfterLoadBeforeCas { member: first });
    w.cluster.arm(Fault::LoadLostResponsePartial {
        member: second,
        rows: 1,
    });
    assert!(w.coordinator_with(1).run(&req).is_err());
    let b = Operator::new(&w, 0).elsewhere(&p);
    let e = b.coordinator().run(&req).expect_err("no artifact here");
    assert_eq!(e.code(), engine::ARTIFACT_UNAVAILABLE);
    assert_eq!(record(&w, &p).1.phase, Phase::Staging);

    // On worker A the artifact is present: run resumes, nothing to resolve.
    let a = Operator::new(&w, 3_600).resolve(&req, DRY);
    refused(&a, codes::NOT_NEEDED);
    assert_eq!(a.recovery, RecoveryAction::ResumeSameOperation);

    let b = Operator::new(&w, 3_600).elsewhere(&p);
    let dry = b.resolve(&req, DRY);
    assert_eq!(dry.resolution, Some(ResolutionKind::Abort), "{dry:#?}");
    assert_eq!(dry.artifact, Some(ArtifactFact::Missing));
    assert_eq!(dry.drops.len(), 2, "both owned candidates exist");
    let done = b.resolve(&req, APPLY);
    assert_eq!(done.outcome, ResolveOutcome::Recorded, "{done:#?}");
    assert_eq!(done.recovery, RecoveryAction::StartNewOperation);
    let (_, r) = record(&w, &p);
    assert_eq!(r.phase, Phase::Aborted);
    assert_eq!(r.error_class.as_deref(), Some(codes::ABORTED_BY_OPERATOR));
    assert_eq!(r.resolutions[0].artifact, ArtifactFact::Missing);
    assert!(
        r.resolutions[0]
            .members
            .iter()
            .zip(&r.members)
            .all(|(e, m)| e.dropped_uuid == m.candidate_uuid && e.dropped_uuid.is_some())
    );
    for i in 0..2 {
        assert!(!w.cluster.table_names(i).contains(&candidate(&p, &req)));
        let t = w
            .cluster
            .snapshot(i, &p.database, &p.target)
            .expect("target");
        assert_eq!(t.rows, p.baseline_rows, "targets untouched");
    }
    // ABORTED is never success; a new invocation may take the slot.
    let again = w.coordinator().run(&req).expect_err("aborted");
    assert_eq!(again.code(), engine::OPERATION_ABORTED);
    let mut next = p.request();
    next.scheduler_invocation = "after-resolve".into();
    assert!(matches!(
        w.coordinator().run(&next),
        Ok(RunOutcome::Completed { .. })
    ));
    converged(&w, &p, 2);
}

#[test]
fn a_locked_operation_aborts_only_when_no_candidate_exists() {
    let p = profile();
    let req = p.request();
    let w = World::new(&p, 2, true);
    w.cluster.arm(Fault::CrashAfterPhase(Phase::Locked));
    assert!(w.coordinator().run(&req).is_err());
    // A candidate name this operation never reserved: refused, nothing dropped.
    let name = candidate(&p, &req);
    let foreign = w.cluster.put_table(1, &p.database, &name, &p.rows(1, 2));
    let r = Operator::new(&w, 3_600).resolve(&req, APPLY);
    refused(&r, engine::CANDIDATE_FOREIGN);
    assert!(w.cluster.table_names(1).contains(&name));
    assert_eq!(record(&w, &p).1.phase, Phase::Locked);

    // Without it, nothing was mutated: the fence is released as ABORTED, dropping nothing.
    let id = w.cluster.member_ids()[1];
    w.cluster
        .drop_exact(&id, &p.database, &name, foreign)
        .expect("the operator's own clean-up");
    let r = Operator::new(&w, 3_600).resolve(&req, APPLY);
    assert_eq!(r.resolution, Some(ResolutionKind::Abort), "{r:#?}");
    assert_eq!(r.outcome, ResolveOutcome::Recorded);
    assert!(r.drops.is_empty());
    assert_eq!(r.artifact, Some(ArtifactFact::NotBound));
    assert_eq!(record(&w, &p).1.phase, Phase::Aborted);
}

#[test]
fn unproven_states_are_refused_with_a_stable_code_and_nothing_changes() {
    let p = profile();
    let req = p.request();
    let name = candidate(&p, &req);
    let op = |w: &World| Operator::new(w, 3_600).resolve(&req, APPLY);

    // No record; another operation's record.
    let w = World::new(&p, 2, true);
    refused(&op(&w), codes::NO_RECORD);
    let mut other = p.request();
    other.scheduler_invocation = "other".into();
    w.cluster.arm(Fault::CrashAfterPhase(Phase::Locked));
    assert!(w.coordinator().run(&other).is_err());
    refused(&op(&w), codes::NO_RECORD);

    // A completed operation needs nothing.
    let w = World::new(&p, 2, true);
    assert!(w.coordinator().run(&req).is_ok());
    refused(&op(&w), codes::NOT_NEEDED);

    let held = || {
        let w = World::new(&p, 2, true);
        dispatch_never_sent(&w, &req, Fault::CrashBeforePublicationDispatch);
        w
    };
    let unchanged = |w: &World, before: &Option<Versioned>| {
        assert_eq!(&w.cluster.authority_value(&key(&p)), before);
        assert_eq!(w.cluster.metrics().publication_dispatches, 0);
    };

    // An unreachable member.
    let w = held();
    let before = w.cluster.authority_value(&key(&p));
    w.cluster.arm(Fault::MemberUnavailableOnce { member: 1 });
    let r = op(&w);
    refused(&r, engine::MEMBER_UNAVAILABLE);
    assert!(r.retryable);
    assert_eq!(r.member, Some(w.cluster.member_ids()[1]));
    unchanged(&w, &before);

    // Inventory drift.
    w.cluster.arm(Fault::InventoryDrift {
        member: 0,
        skip: 0,
        observations: 1,
    });
    refused(&op(&w), engine::INVENTORY_DRIFT);
    unchanged(&w, &before);

    // A foreign UUID under the candidate name.
    let w = held();
    let before = w.cluster.authority_value(&key(&p));
    w.cluster
        .put_table(1, &p.database, &name, &p.rows(1, p.artifact_rows));
    refused(&op(&w), engine::PUBLICATION_FOREIGN_UUID);
    unchanged(&w, &before);

    // The owned candidate UUID with divergent content (rows appended outside the protocol).
    let w = held();
    let before = w.cluster.authority_value(&key(&p));
    let (_, rec) = record(&w, &p);
    let m = &rec.members[0];
    let extra = p.rows(90_000, 1);
    w.cluster
        .load(
            &m.member_id,
            &p.database,
            &name,
            m.candidate_uuid.expect("owned"),
            &mut extra.as_slice(),
            &LoadTokens {
                query_id: "outside".into(),
                dedup_token: "outside".into(),
            },
        )
        .expect("append");
    let r = op(&w);
    refused(&r, codes::CONTENT_MISMATCH);
    assert_eq!(r.member, Some(m.member_id));
    unchanged(&w, &before);

    // Members on different sides and no queue entry.
    let w = World::new(&p, 2, true);
    w.cluster.arm(Fault::PartialDdl { executed: 1 });
    assert!(matches!(
        w.coordinator().run(&req),
        Ok(RunOutcome::InProgress { .. })
    ));
    let r = op(&w);
    refused(&r, codes::NOT_NEEDED);
    assert_eq!(r.recovery, RecoveryAction::WaitThenResume);
    w.cluster.purge_queue(true);
    let before = w.cluster.authority_value(&key(&p));
    refused(&op(&w), codes::MIXED);
    assert_eq!(w.cluster.authority_value(&key(&p)), before);

    // A terminal mixed publication keeps its hold.
    let w = World::new(&p, 2, true);
    w.cluster.arm(Fault::DdlFailsOnMember { member: 1 });
    assert!(w.coordinator().run(&req).is_err());
    refused(&op(&w), engine::PUBLICATION_TERMINAL_MIXED);
}

#[test]
fn the_pure_decision_reads_queue_evidence_and_the_quiet_period_exactly() {
    let p = profile();
    let req = p.request();
    let w = World::new(&p, 2, true);
    dispatch_never_sent(&w, &req, Fault::CrashBeforePublicationDispatch);
    let (_, rec) = record(&w, &p);
    let observed = Operator::new(&w, 3_600).resolve(&req, DRY).members;
    let ids: Vec<_> = rec.members.iter().map(|m| m.member_id).collect();
    let entry = |statuses: &[QueueHostStatus], unmapped: u32| QueueEntry {
        entry: "query-0000000007".into(),
        members: ids.iter().copied().zip(statuses.iter().copied()).collect(),
        unmapped_hosts: unmapped,
    };
    let facts = |queue: QueueFact, later: i64| ResolveFacts {
        record: &rec,
        now: rec.updated_at + later,
        quiet_seconds: QUIET,
        inventory: InventoryFact::Bound,
        queue,
        artifact: ArtifactFact::NotBound,
        members: observed.clone(),
    };
    let code = |d: Decision| match d {
        Decision::Refuse(r) => r.code,
        Decision::Resolve(p) => p.kind.as_str(),
    };
    use QueueHostStatus::{Active, Failed, Finished};

    // The one bound entry failed on every member and nothing changed: safe to dispatch anew.
    let d = decide(&facts(
        QueueFact::Entries(vec![entry(&[Failed, Failed], 0)]),
        300,
    ));
    let Decision::Resolve(proposal) = d else {
        panic!("proven: {d:?}");
    };
    assert_eq!(proposal.kind, ResolutionKind::ReturnToStaged);
    assert_eq!(proposal.queue, QueueEvidence::TerminalFailed);
    // A host that finished the exchange although nothing changed contradicts the pair.
    assert_eq!(
        code(decide(&facts(
            QueueFact::Entries(vec![entry(&[Failed, Finished], 0)]),
            300
        ))),
        engine::PUBLICATION_TERMINAL_MIXED
    );
    assert_eq!(
        code(decide(&facts(
            QueueFact::Entries(vec![entry(&[Failed, Active], 0)]),
            300
        ))),
        codes::NOT_NEEDED
    );
    for ambiguous in [
        vec![entry(&[Failed, Failed], 1)],
        vec![entry(&[Failed, Failed], 0), entry(&[Failed, Failed], 0)],
        vec![entry(&[Failed], 0)],
    ] {
        assert_eq!(
            code(decide(&facts(QueueFact::Entries(ambiguous), 300))),
            codes::QUEUE_AMBIGUOUS
        );
    }
    let Decision::Refuse(r) = decide(&facts(QueueFact::Unavailable, 300)) else {
        panic!("refused");
    };
    assert_eq!((r.code, r.retryable), (engine::DDL_UNAVAILABLE, true));
    // The quiet period is exact.
    assert_eq!(
        code(decide(&facts(QueueFact::Entries(vec![]), 300))),
        "return_to_staged"
    );
    assert_eq!(
        code(decide(&facts(QueueFact::Entries(vec![]), 299))),
        codes::QUIET_PERIOD
    );
    // An unreachable member or a drifted inventory is never concluded from.
    let mut f = facts(QueueFact::Entries(vec![]), 300);
    f.members[1].reachable = false;
    assert_eq!(code(decide(&f)), engine::MEMBER_UNAVAILABLE);
    let mut f = facts(QueueFact::Entries(vec![]), 300);
    f.inventory = InventoryFact::Drifted;
    assert_eq!(code(decide(&f)), engine::INVENTORY_DRIFT);
    // Content is compared by digest, not by row count.
    let mut f = facts(QueueFact::Entries(vec![]), 300);
    if let Some(c) = f.members[0].candidate.as_mut() {
        c.content_digest = Some(p.digest_of(&p.rows(500, p.artifact_rows)));
    }
    assert_eq!(code(decide(&f)), codes::CONTENT_MISMATCH);
}

/// An authority store that lets another writer land at a chosen point: on the `nth` read
/// (1-based), or else just before resolve's own update.
struct Racing<'a> {
    inner: &'a (dyn AuthorityStore + Sync),
    on_read: Option<u32>,
    reads: std::sync::atomic::AtomicU32,
    raced: std::sync::atomic::AtomicBool,
}

impl<'a> Racing<'a> {
    fn new(inner: &'a (dyn AuthorityStore + Sync), on_read: Option<u32>) -> Self {
        Self {
            inner,
            on_read,
            reads: std::sync::atomic::AtomicU32::new(0),
            raced: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Another writer: same content, next version.
    fn race(&self, key: &TargetKey) -> Result<(), PortError> {
        if !self.raced.swap(true, std::sync::atomic::Ordering::SeqCst)
            && let Some(current) = self.inner.read(key)?
        {
            self.inner.update(key, current.version, &current.value)?;
        }
        Ok(())
    }
}

impl AuthorityStore for Racing<'_> {
    fn read(&self, key: &TargetKey) -> Result<Option<Versioned>, PortError> {
        let n = self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if self.on_read == Some(n) {
            self.race(key)?;
        }
        self.inner.read(key)
    }

    fn insert(&self, key: &TargetKey, value: &str) -> Result<(), PortError> {
        self.inner.insert(key, value)
    }

    fn update(&self, key: &TargetKey, expected: u64, value: &str) -> Result<(), PortError> {
        if self.on_read.is_none() {
            self.race(key)?;
        }
        self.inner.update(key, expected, value)
    }
}

#[test]
fn an_authority_change_between_observation_and_record_is_refused() {
    let p = profile();
    let req = p.request();
    let w = World::new(&p, 2, true);
    dispatch_never_sent(&w, &req, Fault::CrashBeforePublicationDispatch);
    let (v, _) = record(&w, &p);
    let racing = Racing::new(&w.cluster, None);
    let mut op = Operator::new(&w, 3_600);
    op.authority = Some(&racing);
    let r = op.resolve(&req, APPLY);
    refused(&r, engine::AUTHORITY_CONFLICT);
    assert_eq!(r.recorded_version, None);
    let (v2, rec) = record(&w, &p);
    assert_eq!(v2, v + 1, "only the other writer landed");
    assert_eq!(rec.phase, Phase::PublicationDispatching);
    assert!(rec.resolutions.is_empty());
    assert_eq!(w.cluster.metrics().publication_dispatches, 0);

    // Resolving again observes the new version and records.
    let again = Operator::new(&w, 3_600).resolve(&req, APPLY);
    assert_eq!(again.outcome, ResolveOutcome::Recorded, "{again:#?}");
    assert_eq!(again.keeper_version, Some(v + 1));
}

#[test]
fn an_authority_change_before_the_drops_drops_nothing() {
    let p = profile();
    let req = p.request();
    let w = World::new(&p, 2, true);
    let ids = w.cluster.member_ids();
    let first = (0..ids.len()).min_by_key(|i| ids[*i]).expect("members");
    // Members one after another: the run stops with only the first loaded.
    w.cluster
        .arm(Fault::CrashAfterLoadBeforeCas { member: first });
    assert!(w.coordinator_with(1).run(&req).is_err());
    let drops = w.cluster.metrics().exact_drops;
    // Read 1 observes the record; the other writer lands before read 2, the pre-drop check.
    let racing = Racing::new(&w.cluster, Some(2));
    let mut op = Operator::new(&w, 3_600).elsewhere(&p);
    op.authority = Some(&racing);
    let r = op.resolve(&req, APPLY);
    refused(&r, engine::AUTHORITY_CONFLICT);
    assert!(r.drops.iter().all(|d| !d.dropped), "{r:#?}");
    assert_eq!(w.cluster.metrics().exact_drops, drops);
    assert!(w.cluster.table_names(first).contains(&candidate(&p, &req)));
    assert_eq!(record(&w, &p).1.phase, Phase::Staging);
}

#[test]
fn the_report_and_the_evidence_carry_no_row_values() {
    let p = profile();
    let req = p.request();
    let w = World::new(&p, 2, true);
    dispatch_never_sent(&w, &req, Fault::CrashBeforePublicationDispatch);
    let r = Operator::new(&w, 3_600).resolve(&req, APPLY);
    let json = serde_json::to_string(&r).expect("report serialises");
    let stored = w.cluster.authority_value(&key(&p)).expect("slot").value;
    for text in [json, stored] {
        assert!(!text.contains("row-"), "no row values");
        assert!(!text.contains("member-1-"), "no endpoints");
    }
}

#[test]
fn recorded_evidence_round_trips_and_is_bounded() {
    let p = profile();
    let req = p.request();
    let w = World::new(&p, 2, true);
    dispatch_never_sent(&w, &req, Fault::CrashBeforePublicationDispatch);
    let before = record(&w, &p).1;
    assert!(
        !encode_record(&before).contains("resolutions"),
        "a record without resolutions encodes as before"
    );
    assert!(
        Operator::new(&w, 3_600)
            .resolve(&req, APPLY)
            .recorded_version
            .is_some()
    );
    let (_, r) = record(&w, &p);
    let text = encode_record(&r);
    assert!(matches!(decode_slot(&text), Ok(AuthoritySlot::External(x)) if *x == r));

    let mut too_many = r.clone();
    too_many.resolutions = vec![r.resolutions[0].clone(); 17];
    assert!(validate_record(&too_many).is_err());
    let mut wrong = r.clone();
    wrong.resolutions[0].members.reverse();
    assert!(validate_record(&wrong).is_err());
}
