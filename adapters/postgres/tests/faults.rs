//! Fault matrix, acknowledgement loss, concurrency and a randomized property run: on the
//! PostgreSQL target and, with `DPONE_TEST_MSSQL_URL`, unchanged on the SQL Server target (the
//! source is the real PostgreSQL server in both).
//!
//! Tier: real database integration with faults injected at every boundary of the target
//! transaction by `dpone_engine_xmin::fault`; native guard and delete-mode cores.

mod support;

use dpone_engine_xmin::fault::{Fault, FaultPlan, FaultyTarget, When};
use dpone_engine_xmin::{ErrorCode, RunStatus};
use support::{Dialect, Fixture, Options, new_invocation};

/// Target and checkpoint agree: active target rows equal the source as of the checkpoint's run.
async fn consistent(f: &Fixture) -> bool {
    f.active_rows().await == f.source_rows().await
}

/// Every boundary of the run transaction, before and after the call, plus acknowledgement loss
/// after commit. After each fault: no divergence (target and checkpoint unchanged together),
/// then a retry converges to the source.
async fn fault_matrix_every_boundary(on: Dialect) {
    let Some(f) = Fixture::new_on(on, "faults", Options::default()).await else {
        return;
    };
    f.src_sql("INSERT INTO public.items SELECT g, 'n' || g, g, 1 FROM generate_series(1, 20) g")
        .await;
    f.run().await.expect("baseline");

    // Count the boundaries of a run with changes of every kind.
    let probe = FaultPlan::new(Fault::None);
    mutate(&f, 0).await;
    let mut t = FaultyTarget::new(f.target(), probe.clone());
    f.run_on(&mut t, &new_invocation(), None)
        .await
        .expect("probe run");
    let boundaries = probe.boundaries();
    let names = probe.log();
    assert_eq!(names.last(), Some(&"commit"));
    assert!(boundaries >= 14, "{names:?}");
    // A target that stages outside its run transaction (SQL Server) is staged before the
    // target lock, so the lock spans the apply only; one that stages inside its serializable
    // snapshot (PostgreSQL) after it, as the snapshot must start after the lock.
    let stages_first = {
        use dpone_engine_xmin::ports::{TargetPort, TargetSession};
        let mut t = f.target();
        let s = t.begin().await.expect("begin");
        let first = s.stages_before_lock();
        s.rollback().await.expect("rollback");
        first
    };
    let at = |n: &str| names.iter().position(|x| *x == n).expect(n);
    assert_eq!(at("stage") < at("lock_target"), stages_first, "{names:?}");

    let mut covered = 0u32;
    let mut divergent = 0;
    for (i, when) in (1..=boundaries).flat_map(|b| [(b, When::Before), (b, When::After)]) {
        mutate(&f, covered + 1).await;
        let before_cp = f.checkpoint().await;
        let before_rows = f.target_fingerprint().await;
        let plan = FaultPlan::new(Fault::At(i, when));
        let mut t = FaultyTarget::new(f.target(), plan.clone());
        let result = f.run_on(&mut t, &new_invocation(), None).await;
        if i == boundaries && when == When::After {
            // After COMMIT: the acknowledgement is lost; the receipt probe proves the commit.
            let out = result.expect("probe proves the commit");
            assert_eq!(out.status, RunStatus::CommittedAfterProbe);
            assert!(consistent(&f).await);
            covered += 1;
            continue;
        }
        let err = result.expect_err("fault must fail the run");
        assert!(
            matches!(err.code(), ErrorCode::InjectedFault),
            "boundary {i} {when:?} ({}): {err}",
            names[(i - 1) as usize]
        );
        assert!(err.rolled_back);
        // Zero divergent states: both target and checkpoint unchanged.
        if f.checkpoint().await != before_cp || f.target_fingerprint().await != before_rows {
            divergent += 1;
        }
        // Retry converges.
        let out = f.run().await.expect("retry");
        assert_eq!(out.status, RunStatus::Committed);
        assert!(
            consistent(&f).await,
            "boundary {i} {when:?}: retry did not converge"
        );
        covered += 1;
    }
    assert_eq!(divergent, 0);
    eprintln!(
        "fault matrix: {boundaries} boundaries x 2 = {covered} injected faults, 0 divergent states: {names:?}"
    );
}

/// The same matrix over a run that consumes a repair authority: the authority is consumed
/// exactly when the run commits, never by a failed attempt.
async fn fault_matrix_with_authority_consumption(on: Dialect) {
    use dpone_policy_model::guard::AuthorityAllow;
    let options = Options {
        reconciliation_extra: "  guards: {max_delete_rows: 0}\n".into(),
        ..Options::default()
    };
    let Some(f) = Fixture::new_on(on, "faultsauth", options).await else {
        return;
    };
    f.src_sql("INSERT INTO public.items SELECT g, 'n', g, 1 FROM generate_series(1, 200) g")
        .await;
    f.run().await.expect("baseline");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let allow = AuthorityAllow {
        full_baseline: false,
        max_delete_rows: Some(1),
        max_delete_ratio: None,
    };
    let consumed = async |id: &str| -> i64 { f.consumption_count(id, None).await };
    // Count the boundaries of an authorized run.
    let mut covered = 0u32;
    let probe = FaultPlan::new(Fault::None);
    f.src_sql("DELETE FROM public.items WHERE id = 200").await;
    f.create_authority(
        "count",
        f.checkpoint().await,
        allow,
        (now - 60, now + 3600),
        None,
    )
    .await;
    let mut t = FaultyTarget::new(f.target(), probe.clone());
    f.run_on(&mut t, &new_invocation(), Some("count"))
        .await
        .expect("dry run");
    let boundaries = probe.boundaries();
    let names = probe.log();
    assert!(
        names.contains(&"read_authority") && names.contains(&"consume_authority"),
        "{names:?}"
    );
    for (i, when) in (1..=boundaries).flat_map(|b| [(b, When::Before), (b, When::After)]) {
        f.src_sql(&format!(
            "DELETE FROM public.items WHERE id = {}",
            covered + 1
        ))
        .await;
        let id = format!("auth-{covered}");
        f.create_authority(
            &id,
            f.checkpoint().await,
            allow,
            (now - 60, now + 3600),
            None,
        )
        .await;
        let before_cp = f.checkpoint().await;
        let before_rows = f.target_fingerprint().await;
        let mut t = FaultyTarget::new(f.target(), FaultPlan::new(Fault::At(i, when)));
        let result = f.run_on(&mut t, &new_invocation(), Some(&id)).await;
        if i == boundaries && when == When::After {
            let out = result.expect("probe proves the commit");
            assert_eq!(out.status, RunStatus::CommittedAfterProbe);
            assert_eq!(consumed(&id).await, 1);
        } else {
            let err = result.expect_err("fault must fail the run");
            let at = names[(i - 1) as usize];
            assert_eq!(err.code(), ErrorCode::InjectedFault, "{at} {when:?}: {err}");
            assert_eq!(
                consumed(&id).await,
                0,
                "{at} {when:?}: consumed without a commit"
            );
            assert_eq!(f.checkpoint().await, before_cp, "{at} {when:?}");
            assert_eq!(f.target_fingerprint().await, before_rows, "{at} {when:?}");
            let out = f
                .run_with(Some(&id))
                .await
                .expect("retry with the same authority");
            assert_eq!(out.receipt.authority_id.as_deref(), Some(id.as_str()));
            assert_eq!(consumed(&id).await, 1);
        }
        assert!(consistent(&f).await);
        covered += 1;
    }
    eprintln!("authority fault matrix: {boundaries} boundaries x 2 = {covered} injected faults");
}

/// Commit applied but its acknowledgement lost: the receipt probe proves the commit, nothing is
/// applied twice, and a retry of the same invocation replays the receipt without source I/O.
async fn acknowledgement_loss_is_probed_and_never_applied_twice(on: Dialect) {
    let Some(f) = Fixture::new_on(on, "ackloss", Options::default()).await else {
        return;
    };
    f.src_sql("INSERT INTO public.items SELECT g, 'n', g, 1 FROM generate_series(1, 5) g")
        .await;
    f.run().await.expect("baseline");
    f.src_sql(
        "UPDATE public.items SET qty = qty + 1 WHERE id = 1; DELETE FROM public.items WHERE id = 2",
    )
    .await;

    let invocation = new_invocation();
    let plan = FaultPlan::new(Fault::LoseCommitAck);
    let mut t = FaultyTarget::new(f.target(), plan);
    let out = f
        .run_on(&mut t, &invocation, None)
        .await
        .expect("probe proves the commit");
    assert_eq!(out.status, RunStatus::CommittedAfterProbe);
    assert_eq!(
        (
            out.receipt.metrics.updated,
            out.receipt.metrics.soft_deleted
        ),
        (1, 1)
    );
    let receipts = f.receipt_count().await;
    let cp = f.checkpoint().await;

    // Retrying the same invocation replays the receipt: no source I/O, no second apply.
    let again = f
        .run_on(&mut f.target(), &invocation, None)
        .await
        .expect("replay");
    assert_eq!(again.status, RunStatus::Replayed);
    assert_eq!(again.receipt, out.receipt);
    assert_eq!(f.receipt_count().await, receipts);
    assert_eq!(f.checkpoint().await, cp);
    assert!(consistent(&f).await);
}

/// Two runs on the same target serialize on the advisory lock; the loser's CAS is stale and
/// neither regresses nor skips the checkpoint; a retry converges.
async fn concurrent_runs_serialize_and_stale_cas_is_refused(on: Dialect) {
    let Some(f) = Fixture::new_on(on, "conc", Options::default()).await else {
        return;
    };
    f.src_sql("INSERT INTO public.items SELECT g, 'n', g, 1 FROM generate_series(1, 50) g")
        .await;
    f.run().await.expect("baseline");
    let start = f.checkpoint().await.expect("checkpoint");
    f.src_sql("UPDATE public.items SET qty = qty + 1 WHERE id <= 10")
        .await;

    let (a, b) = tokio::join!(f.run(), f.run());
    let results = [a, b];
    let ok: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    let failed: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(!ok.is_empty(), "at least one run commits");
    for e in &failed {
        // The loser waited on the target lock, then saw the moved checkpoint: a clean stale
        // refusal before any business DML.
        assert_eq!(e.code(), ErrorCode::StateCheckpointStale, "{e}");
        assert!(e.rolled_back);
    }
    let after = f.checkpoint().await.expect("checkpoint");
    assert_eq!(
        after.revision,
        start.revision + ok.len() as u64,
        "no skipped revision"
    );
    assert!(after.xmin >= start.xmin, "no regression");
    let revisions: Vec<u64> = ok.iter().map(|o| o.receipt.checkpoint.revision).collect();
    assert!(revisions.iter().all(|r| *r > start.revision));
    f.run().await.expect("retry converges");
    assert!(consistent(&f).await);
}

/// The CAS itself refuses a stale expectation, including an equal safe XMin with another
/// revision, and accepts only the exact current `(xmin, revision)`.
async fn stale_cas_is_refused_at_the_port(on: Dialect) {
    use dpone_engine_xmin::ports::{CheckpointCas, TargetPort, TargetSession};
    use dpone_policy_model::guard::Checkpoint;
    let Some(f) = Fixture::new_on(on, "cas", Options::default()).await else {
        return;
    };
    f.src_sql("INSERT INTO public.items VALUES (1, 'a', 1, 1)")
        .await;
    f.run().await.expect("baseline");
    f.run().await.expect("second run");
    let cp = f.checkpoint().await.expect("checkpoint");
    let id = &f.route.identity;
    let cas = |expected: Option<Checkpoint>| CheckpointCas {
        state_key: id.state_key.clone(),
        target_identity: id.target_identity,
        scope_hash: id.scope_hash.clone(),
        expected,
        new: Checkpoint {
            xmin: cp.xmin,
            revision: cp.revision + 1,
        },
        visible_horizon: cp.xmin,
        receipt_id: "r".into(),
    };
    let mut target = f.target();
    for (expected, wins) in [
        (
            Some(Checkpoint {
                xmin: cp.xmin,
                revision: cp.revision - 1,
            }),
            false,
        ),
        (
            Some(Checkpoint {
                xmin: cp.xmin.saturating_sub(1),
                revision: cp.revision,
            }),
            false,
        ),
        (None, false),
        (Some(cp), true),
    ] {
        let mut s = target.begin().await.expect("begin");
        s.lock_target(&id.target_identity).await.expect("lock");
        let at = s.detection_time().await.expect("time");
        assert_eq!(
            s.cas_checkpoint(&cas(expected), at).await.expect("cas"),
            wins,
            "{expected:?}"
        );
        s.rollback().await.expect("rollback");
    }
    assert_eq!(f.checkpoint().await, Some(cp), "rolled back: nothing moved");
}

/// Source mutations interleaved with runs and injected faults: after every successful run the
/// target's active keys (and rows) equal the source's.
async fn property_random_mutations_runs_and_faults(on: Dialect) {
    let Some(f) = Fixture::new_on(on, "prop", Options::default()).await else {
        return;
    };
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    f.src_sql("INSERT INTO public.items SELECT g, 'n', g, 1 FROM generate_series(1, 30) g")
        .await;
    f.run().await.expect("baseline");
    let mut successes = 0;
    for step in 0..24 {
        for _ in 0..(next() % 4) {
            let id = (next() % 40) as i64 + 1;
            let sql = match next() % 3 {
                0 => format!("DELETE FROM public.items WHERE id = {id}"),
                1 => format!(
                    "INSERT INTO public.items VALUES ({id}, 'r{step}', {step}, 2) ON CONFLICT (id) DO UPDATE SET name = 'u{step}'"
                ),
                _ => format!("UPDATE public.items SET qty = qty + 1 WHERE id = {id}"),
            };
            f.src_sql(&sql).await;
        }
        let fault = match next() % 4 {
            0 => Fault::At(
                (next() % 14) as u32 + 1,
                if next() % 2 == 0 {
                    When::Before
                } else {
                    When::After
                },
            ),
            1 => Fault::LoseCommitAck,
            _ => Fault::None,
        };
        let mut t = FaultyTarget::new(f.target(), FaultPlan::new(fault));
        match f.run_on(&mut t, &new_invocation(), None).await {
            Ok(_) => {
                successes += 1;
                assert_eq!(f.active_keys().await, f.source_keys().await, "step {step}");
                assert!(consistent(&f).await, "step {step}");
            }
            Err(e) => assert_eq!(e.code(), ErrorCode::InjectedFault, "step {step}: {e}"),
        }
    }
    f.run().await.expect("final run");
    assert!(consistent(&f).await);
    assert!(successes > 0);
}

/// A change of every kind so each DML step has work to do.
async fn mutate(f: &Fixture, i: u32) {
    let i = i64::from(i);
    f.src_sql(&format!(
        "UPDATE public.items SET qty = qty + 1 WHERE id = 1; \
         DELETE FROM public.items WHERE id = 2; \
         INSERT INTO public.items VALUES (2, 'again', {i}, 1) ON CONFLICT DO NOTHING; \
         INSERT INTO public.items VALUES ({}, 'new', 1, 1);",
        1000 + i
    ))
    .await;
    // Alternate: id 2 deleted on odd steps, back on even steps (reactivation).
    if i % 2 == 1 {
        f.src_sql("DELETE FROM public.items WHERE id = 2").await;
    }
}

crate::on_every_target!(
    fault_matrix_every_boundary,
    fault_matrix_with_authority_consumption,
    acknowledgement_loss_is_probed_and_never_applied_twice,
    concurrent_runs_serialize_and_stale_cas_is_refused,
    stale_cas_is_refused_at_the_port,
    property_random_mutations_runs_and_faults,
);
