//! Tier: engine on in-process ports. Outages are retryable and resume the same operation;
//! deterministic refusals stop fail-closed with a stable code and never loop.

mod common;

use common::{World, profile};
use dpone_engine_clickhouse::contracts::{
    AuthoritySlot, ClusterStatement, Phase, candidate_name, ddl_query_id, decode_slot,
    operation_id, target_key,
};
use dpone_engine_clickhouse::ports::{
    ClusterDdl, DdlCorrelation, NoProgress, PortError, QueueEntry, QueueHostStatus,
};
use dpone_engine_clickhouse::synthetic::Fault;
use dpone_engine_clickhouse::{
    Coordinator, CoordinatorConfig, EngineError, Ports, RecoveryAction, RunOutcome, codes,
};

fn phase(w: &World) -> Option<Phase> {
    let p = profile();
    let key = target_key(&p.cluster, &p.database, &p.target);
    match decode_slot(&w.cluster.authority_value(&key)?.value).ok()? {
        AuthoritySlot::External(r) => Some(r.phase),
        AuthoritySlot::V1(_) | AuthoritySlot::Local(_) => None,
    }
}

fn candidates(w: &World, members: usize) -> usize {
    (0..members)
        .map(|i| {
            w.cluster
                .table_names(i)
                .iter()
                .filter(|n| n.contains("__dpone_ext_"))
                .count()
        })
        .sum()
}

#[test]
fn a_member_that_does_not_answer_at_admission_is_an_outage_not_a_manifest_blocker() {
    let p = profile();
    for member in [0, 1] {
        let w = World::new(&p, 2, true);
        w.cluster.arm(Fault::MemberUnavailableAtProbe { member });
        let e = w.coordinator().run(&p.request()).expect_err("outage");
        assert_eq!(
            e.code(),
            codes::MEMBER_UNAVAILABLE,
            "not an admission blocker"
        );
        assert!(e.is_retryable(), "exit 75");
        assert_eq!(e.recovery(), RecoveryAction::ResumeSameOperation);
        assert!(matches!(
            &e,
            EngineError::MemberUnavailable { step: "probe", .. }
        ));
        // Before any lock and any source I/O.
        assert_eq!(phase(&w), None);
        assert_eq!(
            w.artifacts
                .extractions
                .load(std::sync::atomic::Ordering::Relaxed),
            0
        );
        // The same invocation resumes once the member answers.
        assert!(matches!(
            w.coordinator().run(&p.request()),
            Ok(RunOutcome::Completed { .. })
        ));
    }
}

#[test]
fn a_member_that_cannot_compute_the_rowset_proof_is_refused_at_admission() {
    let p = profile();
    for member in [0, 1] {
        let w = World::new(&p, 2, true);
        w.cluster.set_capabilities(member, false, Some(FACADE));
        let e = w.coordinator().run(&p.request()).expect_err("refused");
        assert_eq!(e.code(), codes::MEMBER_PROOF_UNSUPPORTED);
        assert!(!e.is_retryable());
        assert_eq!(e.recovery(), RecoveryAction::FixManifest);
        // Before the authority is locked and before any source I/O.
        assert_eq!(phase(&w), None);
        assert_eq!(w.cluster.authority_writes(), 0);
        assert_eq!(
            w.artifacts
                .extractions
                .load(std::sync::atomic::Ordering::Relaxed),
            0
        );
        // The canonical proof does not call formatRow: the same member publishes under it.
        let canonical = w.coordinator_config(CoordinatorConfig {
            content_proof: dpone_engine_clickhouse::contracts::ContentProof::Canonical,
            ..CoordinatorConfig::default()
        });
        assert!(matches!(
            canonical.run(&p.request()),
            Ok(RunOutcome::Completed { .. })
        ));
    }
}

/// The synthetic members' authority facade (`engine_full`).
const FACADE: &str = "KeeperMap('/dpone/synthetic/authority') PRIMARY KEY key";

#[test]
fn members_whose_authority_facades_differ_are_refused_at_admission() {
    let p = profile();
    let w = World::new(&p, 3, true);
    w.cluster.set_capabilities(
        2,
        true,
        Some("KeeperMap('/dpone/elsewhere/authority') PRIMARY KEY key"),
    );
    let e = w.coordinator().run(&p.request()).expect_err("refused");
    assert_eq!(e.code(), codes::AUTHORITY_FACADE_DIVERGENT);
    assert!(!e.is_retryable());
    assert_eq!(phase(&w), None);
    assert_eq!(w.cluster.authority_writes(), 0);
    // Once the facade names the shared path again the same invocation publishes.
    w.cluster.set_capabilities(2, true, Some(FACADE));
    assert!(matches!(
        w.coordinator().run(&p.request()),
        Ok(RunOutcome::Completed { .. })
    ));
}

#[test]
fn an_unanswered_inventory_read_is_an_outage_not_an_incomplete_inventory() {
    let p = profile();
    let w = World::new(&p, 2, false);
    w.cluster.arm(Fault::InventoryUnavailableOnce);
    let e = w.coordinator().run(&p.request()).expect_err("outage");
    assert_eq!(e.code(), codes::INVENTORY_UNAVAILABLE);
    assert!(e.is_retryable());
    assert_eq!(e.recovery(), RecoveryAction::ResumeSameOperation);
    assert_eq!(phase(&w), None);
    assert!(matches!(
        w.coordinator().run(&p.request()),
        Ok(RunOutcome::Completed { .. })
    ));
}

#[test]
fn a_rejected_create_stops_aborts_after_exact_cleanup_and_never_loops() {
    let p = profile();
    let w = World::new(&p, 2, true);
    let before: Vec<_> = (0..2)
        .map(|i| w.cluster.snapshot(i, &p.database, &p.target))
        .collect();
    // The second member refuses the create (e.g. an unknown type): the first one already
    // holds a candidate, which must be removed by exact UUID.
    w.cluster.arm(Fault::CreateRejected { member: 1 });
    let e = w.coordinator().run(&p.request()).expect_err("refused");
    assert_eq!(e.code(), codes::STATEMENT_REJECTED);
    assert!(!e.is_retryable(), "exit 1, never an exit-75 loop");
    assert_eq!(e.recovery(), RecoveryAction::StartNewOperation);
    assert!(e.to_string().contains("create candidate"));
    assert_eq!(phase(&w), Some(Phase::Aborted));
    assert_eq!(candidates(&w, 2), 0, "exact owned candidates removed");
    let after: Vec<_> = (0..2)
        .map(|i| w.cluster.snapshot(i, &p.database, &p.target))
        .collect();
    assert_eq!(before, after, "targets untouched");
    assert_eq!(w.cluster.metrics().publication_dispatches, 0);
    // Same invocation: aborted, no further attempt.
    let e = w.coordinator().run(&p.request()).expect_err("aborted");
    assert_eq!(e.code(), codes::OPERATION_ABORTED);
    let s = w.coordinator().status(&p.request()).expect("status");
    assert_eq!(s.recovery, RecoveryAction::StartNewOperation);
    // Once fixed, a new invocation is not fenced by the aborted one.
    let mut next = p.request();
    next.scheduler_invocation = "after-fix".into();
    assert!(matches!(
        w.coordinator().run(&next),
        Ok(RunOutcome::Completed { .. })
    ));
}

#[test]
fn a_rejected_load_stops_after_one_load_and_aborts_after_exact_cleanup() {
    let p = profile();
    for member in [0, 1] {
        let w = World::new(&p, 2, false);
        // Data that does not parse after 10 rows were inserted.
        w.cluster.arm(Fault::LoadRejected { member, rows: 10 });
        let e = w.coordinator().run(&p.request()).expect_err("refused");
        assert_eq!(e.code(), codes::STATEMENT_REJECTED, "member {member}");
        assert!(!e.is_retryable());
        assert_eq!(e.recovery(), RecoveryAction::StartNewOperation);
        assert!(e.to_string().contains("load"));
        assert_eq!(w.cluster.metrics().max_loads_per_table, 1);
        let loads = w.cluster.metrics().loads;
        assert!(loads <= 2, "no rebuild-and-reload loop: {loads} loads");
        assert_eq!(phase(&w), Some(Phase::Aborted));
        assert_eq!(candidates(&w, 2), 0);
        assert!(w.cluster.snapshot(0, &p.database, &p.target).is_none());
        assert_eq!(w.cluster.duplicate_rows(0) + w.cluster.duplicate_rows(1), 0);
        let e = w.coordinator().run(&p.request()).expect_err("aborted");
        assert_eq!(e.code(), codes::OPERATION_ABORTED);
        assert_eq!(w.cluster.metrics().loads, loads, "nothing retried");
    }
}

/// The cluster's DDL port, except that the queue answers with a response that does not decode.
struct UndecodableQueue<'a>(&'a (dyn ClusterDdl + Sync));

impl ClusterDdl for UndecodableQueue<'_> {
    fn dispatch(
        &self,
        cluster: &str,
        statement: &ClusterStatement,
        correlation: &DdlCorrelation,
    ) -> Result<(), PortError> {
        self.0.dispatch(cluster, statement, correlation)
    }

    fn observe_queue(&self, _: &str, _: &str) -> Result<Vec<QueueEntry>, PortError> {
        Err(PortError::rejected("DPONE_CLICKHOUSE_DECODE"))
    }
}

#[test]
fn a_read_that_does_not_decode_is_a_fail_closed_stop_not_a_retry() {
    let p = profile();
    let w = World::new(&p, 2, true);
    let ddl = UndecodableQueue(&w.cluster);
    let c = Coordinator::new(
        Ports {
            authority: &w.cluster,
            inventory: &w.cluster,
            catalog: &w.cluster,
            ddl: &ddl,
            artifacts: &w.artifacts,
            admission: &w.gate,
            env: &w.env,
            progress: &NoProgress,
        },
        CoordinatorConfig::default(),
    );
    for _ in 0..2 {
        let e = c.run(&p.request()).expect_err("stops");
        assert_eq!(e.code(), codes::STATEMENT_REJECTED);
        assert!(!e.is_retryable(), "a decode defect never loops on exit 75");
        assert_eq!(e.recovery(), RecoveryAction::HoldForOperator);
        assert!(e.to_string().starts_with("coordinator: queue"));
    }
    assert_eq!(phase(&w), Some(Phase::PublicationDispatching));
    assert_eq!(
        w.cluster.metrics().publication_dispatches,
        1,
        "never redispatched"
    );
    // Status agrees: nothing to resume, hold with the refusal named.
    let st = c.status(&p.request()).expect("status");
    assert_eq!(
        (st.recovery, st.reason),
        (
            RecoveryAction::HoldForOperator,
            Some(codes::STATEMENT_REJECTED)
        )
    );
}

#[test]
fn the_queue_is_correlated_by_log_comment_like_the_adapter() {
    // Tier: engine on in-process ports. `system.distributed_ddl_queue` carries the query's
    // settings, not its id: a second entry with the same `log_comment` (another client reusing
    // the correlation) makes the evidence ambiguous, so publication fails closed.
    let p = profile();
    let req = p.request();
    let key = target_key(&p.cluster, &p.database, &p.target);
    let op = operation_id(&req.scheduler_invocation, &key, &req.plan_digest);
    let w = World::new(&p, 2, true);
    w.cluster.arm(Fault::PartialDdl { executed: 1 });
    assert!(matches!(
        w.coordinator().run(&req),
        Ok(RunOutcome::InProgress { .. })
    ));
    let s = w.coordinator().status(&req).expect("status");
    let dpone_engine_clickhouse::SlotStatus::External(slot) = &s.slot else {
        panic!("external slot");
    };
    let binding = slot.publication.clone().expect("bound publication");
    let log_comment = ddl_query_id(binding.kind, &binding.token);
    let statement = ClusterStatement::Drop {
        database: p.database.clone(),
        name: candidate_name(&p.target, &op),
    };
    // An entry under another log_comment is not this operation's evidence.
    w.cluster.inject_queue_entry(
        "dpone-drop-unrelated",
        statement.clone(),
        QueueHostStatus::Finished,
    );
    assert_eq!(
        w.coordinator()
            .status(&req)
            .expect("status")
            .queue_entry
            .as_deref(),
        Some("query-0000000000")
    );
    // One under the same log_comment is, whatever its query id: two entries, no proof.
    w.cluster
        .inject_queue_entry(&log_comment, statement, QueueHostStatus::Finished);
    w.cluster.tick();
    let e = w.coordinator().run(&req).expect_err("ambiguous evidence");
    assert_eq!(e.code(), codes::PUBLICATION_EVIDENCE_MISSING);
}

#[test]
fn an_inventory_past_the_member_count_budget_is_refused_before_anything_is_probed_or_locked() {
    // Tier: engine on in-process ports.
    let p = profile();
    let w = World::new(&p, 3, false);
    let bounded = w.coordinator_config(CoordinatorConfig {
        max_members: 2,
        ..CoordinatorConfig::default()
    });
    let e = bounded.run(&p.request()).expect_err("over the budget");
    assert_eq!(e.code(), codes::MEMBER_BUDGET_EXCEEDED);
    assert_eq!(e.recovery(), RecoveryAction::FixManifest);
    assert!(!e.is_retryable());
    assert_eq!(phase(&w), None);
    assert_eq!(w.cluster.authority_writes(), 0);
    assert_eq!(
        w.artifacts
            .extractions
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    // Within the budget the same request publishes.
    assert!(matches!(
        w.coordinator().run(&p.request()),
        Ok(RunOutcome::Completed { .. })
    ));
}

#[test]
fn a_proof_past_the_verification_budget_stops_the_run_without_deciding_on_it() {
    // Tier: engine on in-process ports. The member stops the candidate's proof at the budget:
    // the run stops with the budget's code, nothing is published, the operation keeps its
    // phase, and with the proof inside the budget the same invocation completes.
    let p = profile();
    // The first proof of a run over a present target is the baseline's (LOCKED, nothing
    // mutated); over an absent one, the loaded candidate's (STAGING).
    for (present, held) in [(true, Phase::Locked), (false, Phase::Staging)] {
        let w = World::new(&p, 2, present);
        w.cluster
            .arm(dpone_engine_clickhouse::synthetic::Fault::ProofBudgetExceeded { member: 1 });
        let e = w.coordinator().run(&p.request()).expect_err("budget");
        assert_eq!(e.code(), codes::VERIFICATION_BUDGET_EXCEEDED);
        assert_eq!(e.recovery(), RecoveryAction::FixManifest);
        assert_eq!(phase(&w), Some(held));
        assert_eq!(w.cluster.metrics().publication_dispatches, 0);
        assert!(matches!(
            w.coordinator().run(&p.request()),
            Ok(RunOutcome::Completed { .. })
        ));
    }
}
