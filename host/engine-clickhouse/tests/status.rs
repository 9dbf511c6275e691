//! Tier: engine on in-process ports. Read-only status names the exact safe recovery action.

mod common;

use common::{World, profile};
use dpone_engine_clickhouse::contracts::{Phase, candidate_name, operation_id, target_key};
use dpone_engine_clickhouse::synthetic::Fault;
use dpone_engine_clickhouse::synthetic::TableSnapshot;
use dpone_engine_clickhouse::{RecoveryAction, RunOutcome, SlotStatus, codes};

#[test]
fn status_names_the_safe_action_in_each_situation() {
    let p = profile();
    let req = p.request();

    // Nothing yet: run.
    let w = World::new(&p, 2, true);
    assert_eq!(
        w.coordinator().status(&req).expect("status").recovery,
        RecoveryAction::Run
    );

    // Interrupted while staging: resume the same operation.
    w.cluster.arm(Fault::CrashAfterPhase(Phase::Staging));
    assert!(w.coordinator().run(&req).is_err());
    let s = w.coordinator().status(&req).expect("status");
    assert_eq!(s.recovery, RecoveryAction::ResumeSameOperation);
    let SlotStatus::External(slot) = &s.slot else {
        panic!("external slot expected");
    };
    assert_eq!((slot.phase, slot.same_operation), (Phase::Staging, true));

    // Another operation: wait for the owner.
    let mut other = p.request();
    other.scheduler_invocation = "other".into();
    let s = w.coordinator().status(&other).expect("status");
    assert_eq!(s.recovery, RecoveryAction::WaitForOwningOperation);

    // Partial DDL in flight: wait, then resume.
    w.cluster.arm(Fault::PartialDdl { executed: 1 });
    assert!(matches!(
        w.coordinator().run(&req),
        Ok(RunOutcome::InProgress {
            phase: Phase::PublicationDispatching,
            ..
        })
    ));
    let s = w.coordinator().status(&req).expect("status");
    assert_eq!(s.recovery, RecoveryAction::WaitThenResume);
    assert!(s.queue_entry.is_some());
    assert!(s.members.iter().any(|m| m.pair == "published"));
    assert!(s.members.iter().any(|m| m.pair == "unchanged"));
    w.cluster.tick();
    assert!(matches!(
        w.coordinator().run(&req),
        Ok(RunOutcome::Completed { .. })
    ));
    assert_eq!(
        w.coordinator().status(&req).expect("status").recovery,
        RecoveryAction::None
    );

    // A foreign candidate: hold; the retry keeps stopping on it and never touches it.
    let w = World::new(&p, 2, true);
    let key = target_key(&p.cluster, &p.database, &p.target);
    let op = operation_id(&req.scheduler_invocation, &key, &req.plan_digest);
    let foreign = w.cluster.put_table(
        0,
        &p.database,
        &candidate_name(&p.target, &op),
        &p.rows(1, 2),
    );
    let e = w
        .coordinator()
        .run(&req)
        .expect_err("foreign candidate stops");
    assert_eq!(e.code(), codes::CANDIDATE_FOREIGN);
    let s = w.coordinator().status(&req).expect("status");
    assert_eq!(s.recovery, RecoveryAction::HoldForOperator);
    assert_eq!(s.reason, Some(codes::CANDIDATE_FOREIGN));
    assert_eq!(
        w.cluster
            .snapshot(0, &p.database, &candidate_name(&p.target, &op))
            .map(|t| t.uuid),
        Some(foreign)
    );

    // Persistent inventory drift: restore the admitted topology, then resume.
    let w = World::new(&p, 2, true);
    w.cluster.arm(Fault::InventoryDrift {
        member: 1,
        skip: 1,
        observations: 2,
    });
    let e = w
        .coordinator()
        .run(&req)
        .expect_err("drift fences the operation");
    assert_eq!(e.code(), codes::INVENTORY_DRIFT);
    let s = w.coordinator().status(&req).expect("status");
    assert_eq!(s.recovery, RecoveryAction::RestoreInventoryThenResume);
    assert!(matches!(
        w.coordinator().run(&req),
        Ok(RunOutcome::Completed { .. })
    ));

    // Missing publication evidence: hold, retain everything.
    let w = World::new(&p, 2, true);
    w.cluster.arm(Fault::CrashBeforePublicationDispatch);
    assert!(w.coordinator().run(&req).is_err());
    let s = w.coordinator().status(&req).expect("status");
    assert_eq!(s.recovery, RecoveryAction::HoldForOperator);
    assert_eq!(s.reason, Some(codes::PUBLICATION_EVIDENCE_MISSING));
    assert!(s.members.iter().all(|m| m.pair == "unchanged"));
    // Retrying does not redispatch.
    let e = w.coordinator().run(&req).expect_err("fail closed");
    assert_eq!(e.code(), codes::PUBLICATION_EVIDENCE_MISSING);
    assert_eq!(w.cluster.metrics().publication_dispatches, 0);
}

#[test]
fn a_completed_operation_reports_consistent_member_facts() {
    // Tier: engine on in-process ports. After a completed, cleaned-up EXCHANGE every member's
    // target is the committed UUID and the candidate name is empty: `cleaned`, with recovery
    // `none` and no reason; after a completed RENAME (no predecessor): `published`.
    let p = profile();
    let req = p.request();
    for (target_present, want) in [(true, "cleaned"), (false, "published")] {
        let w = World::new(&p, 3, target_present);
        let receipt = match w.coordinator().run(&req) {
            Ok(RunOutcome::Completed { receipt }) => receipt,
            other => panic!("not completed: {other:?}"),
        };
        let s = w.coordinator().status(&req).expect("status");
        assert_eq!((s.recovery, s.reason), (RecoveryAction::None, None));
        assert_eq!(s.members.len(), 3);
        for m in &s.members {
            assert_eq!(m.pair, want, "target present: {target_present}");
            assert!(m.reachable);
            assert_eq!(m.candidate_uuid, None, "candidate name empty");
            let r = receipt
                .members
                .iter()
                .find(|r| r.member_id == m.member_id)
                .expect("in the receipt");
            assert_eq!(
                m.target_uuid,
                Some(r.target_uuid),
                "target = committed UUID"
            );
        }
        // A writer outside dpone replaces one target afterwards: the evidence says so.
        let snap: TableSnapshot = w
            .cluster
            .snapshot(0, &p.database, &p.target)
            .expect("target");
        w.cluster.put_table(0, &p.database, &p.target, &snap.data);
        let s = w.coordinator().status(&req).expect("status");
        assert_eq!(
            (s.recovery, s.reason),
            (RecoveryAction::None, Some(codes::TARGET_DRIFT))
        );
        assert_eq!(s.members.iter().filter(|m| m.pair == "foreign").count(), 1);
    }
}
