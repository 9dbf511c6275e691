//! Delete guards and one-shot repair authorities on a real PostgreSQL server.
//!
//! Every scenario runs on the PostgreSQL target and, with `DPONE_TEST_MSSQL_URL`, unchanged on
//! the SQL Server target.
//!
//! Tier: real database integration; guard decisions by the native guard core.

mod support;

use dpone_engine_xmin::ErrorCode;
use dpone_engine_xmin::engine::RunFailure;
use dpone_engine_xmin::identity::sha256_hex;
use dpone_engine_xmin::ports::TargetPort;
use dpone_policy_model::guard::AuthorityAllow;
use support::{Dialect, Fixture, Options};

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn denied(r: Result<dpone_engine_xmin::RunOutcome, RunFailure>, policy_code: &str) {
    let e = r.expect_err("run must be refused");
    assert_eq!(e.code(), ErrorCode::GuardDenied, "{e}");
    assert!(e.error.message().starts_with(policy_code), "{e}");
    assert!(e.rolled_back);
}

fn deletes_only(rows: Option<u64>) -> AuthorityAllow {
    AuthorityAllow {
        full_baseline: false,
        max_delete_rows: rows,
        max_delete_ratio: None,
    }
}

async fn delete_guards_and_one_shot_authority(on: Dialect) {
    let options = Options {
        reconciliation_extra: "  guards: {max_delete_rows: 1, max_delete_ratio: 0.5}\n".into(),
        ..Options::default()
    };
    let Some(f) = Fixture::new_on(on, "guard", options).await else {
        return;
    };
    f.src_sql("INSERT INTO public.items SELECT g, 'n', g, 1 FROM generate_series(1, 10) g")
        .await;
    f.run().await.expect("baseline");
    let cp = f.checkpoint().await;

    // Beyond max_delete_rows: refused with no mutation.
    f.src_sql("DELETE FROM public.items WHERE id IN (1, 2, 3)")
        .await;
    let before = f.target_fingerprint().await;
    denied(f.run().await, "DPONE_GUARD_MAX_DELETE_ROWS_EXCEEDED");
    assert_eq!(f.target_fingerprint().await, before);
    assert_eq!(f.checkpoint().await, cp);

    let window = (now() - 60, now() + 3600);
    // Expired, binding drift, digest drift: refused.
    f.create_authority(
        "expired",
        cp,
        deletes_only(Some(5)),
        (now() - 7200, now() - 3600),
        None,
    )
    .await;
    denied(
        f.run_with(Some("expired")).await,
        "DPONE_GUARD_AUTHORITY_EXPIRED",
    );
    let stale = cp.map(|mut c| {
        c.revision += 1;
        c
    });
    f.create_authority("drifted", stale, deletes_only(Some(5)), window, None)
        .await;
    denied(
        f.run_with(Some("drifted")).await,
        "DPONE_GUARD_AUTHORITY_CHECKPOINT_DRIFT",
    );
    f.create_authority("tampered", cp, deletes_only(Some(5)), window, None)
        .await;
    f.tamper_authority(
        "tampered",
        "\"max_delete_rows\":5",
        "\"max_delete_rows\":50",
    )
    .await;
    denied(
        f.run_with(Some("tampered")).await,
        "DPONE_GUARD_AUTHORITY_DIGEST_DRIFT",
    );
    let missing = f
        .run_with(Some("no-such-authority"))
        .await
        .expect_err("unknown authority");
    assert_eq!(missing.code(), ErrorCode::AuthorityNotFound);
    // Too tight an authority bound replaces the manifest bound and still refuses.
    f.create_authority("tight", cp, deletes_only(Some(2)), window, None)
        .await;
    denied(
        f.run_with(Some("tight")).await,
        "DPONE_GUARD_AUTHORITY_MAX_DELETE_ROWS_EXCEEDED",
    );
    assert_eq!(f.target_fingerprint().await, before);

    // A covering one-shot authority: succeeds and is consumed with the receipt.
    let digest = f
        .create_authority("cover", cp, deletes_only(Some(5)), window, None)
        .await;
    let out = f.run_with(Some("cover")).await.expect("authorized run");
    assert_eq!(out.receipt.metrics.soft_deleted, 3);
    assert_eq!(out.receipt.authority_id.as_deref(), Some("cover"));
    assert_eq!(
        out.receipt.authority_digest.as_deref(),
        Some(digest.as_str())
    );
    assert_eq!(
        out.guard_reason.as_deref(),
        Some("DPONE_GUARD_ALLOWED_AUTHORIZED_DELETES")
    );
    let consumed = f
        .consumption_count("cover", Some(&out.receipt.receipt_id))
        .await;
    assert_eq!(consumed, 1);
    assert_eq!(f.active_keys().await, f.source_keys().await);

    // Reuse is refused.
    f.src_sql("DELETE FROM public.items WHERE id IN (4, 5)")
        .await;
    denied(
        f.run_with(Some("cover")).await,
        "DPONE_GUARD_AUTHORITY_ALREADY_CONSUMED",
    );

    // An authority the run does not need is refused and not consumed.
    f.src_sql("INSERT INTO public.items VALUES (4, 'n', 4, 1), (5, 'n', 5, 1)")
        .await;
    let cp = f.checkpoint().await;
    f.create_authority("unneeded", cp, deletes_only(Some(5)), window, None)
        .await;
    denied(
        f.run_with(Some("unneeded")).await,
        "DPONE_GUARD_AUTHORITY_UNUSED",
    );
    let out = f.run().await.expect("ordinary run");
    assert_eq!(out.receipt.authority_id, None);

    // The stored authorities show their digests and consumption.
    let mut t = f.target();
    let mut seen = Vec::new();
    for id in ["cover", "tampered", "unneeded"] {
        let a = t
            .read_authority(id)
            .await
            .expect("read authority")
            .expect("stored");
        let digest_ok = sha256_hex(a.document.as_bytes()) == a.recorded_digest;
        seen.push((id, a.consumed, digest_ok));
    }
    assert_eq!(
        seen,
        [
            ("cover", true, true),
            ("tampered", false, false),
            ("unneeded", false, true)
        ]
    );
}

async fn delete_ratio_guard(on: Dialect) {
    let options = Options {
        reconciliation_extra: "  guards: {max_delete_ratio: 0.05}\n".into(),
        ..Options::default()
    };
    let Some(f) = Fixture::new_on(on, "ratio", options).await else {
        return;
    };
    f.src_sql("INSERT INTO public.items SELECT g, 'n', g, 1 FROM generate_series(1, 100) g")
        .await;
    f.run().await.expect("baseline");
    f.src_sql("DELETE FROM public.items WHERE id <= 5").await;
    let out = f.run().await.expect("5 % is within the guard");
    assert_eq!(out.receipt.metrics.soft_deleted, 5);
    f.src_sql("DELETE FROM public.items WHERE id <= 10").await;
    // 5 of 95 active = 5.26 %: refused.
    denied(f.run().await, "DPONE_GUARD_MAX_DELETE_RATIO_EXCEEDED");
}

async fn empty_snapshot_fails_by_default_and_all_delete_needs_exact_authority(on: Dialect) {
    let Some(f) = Fixture::new_on(on, "empty", Options::default()).await else {
        return;
    };
    // Even a complete empty baseline into an empty target is refused without an authority.
    denied(f.run().await, "DPONE_GUARD_EMPTY_SNAPSHOT_REFUSED");
    assert_eq!(f.checkpoint().await, None);

    f.src_sql("INSERT INTO public.items SELECT g, 'n', g, 1 FROM generate_series(1, 4) g")
        .await;
    f.run().await.expect("baseline");
    let cp = f.checkpoint().await;
    f.src_sql("DELETE FROM public.items").await;
    let before = f.target_fingerprint().await;
    denied(f.run().await, "DPONE_GUARD_EMPTY_SNAPSHOT_REFUSED");
    assert_eq!(f.target_fingerprint().await, before);

    let window = (now() - 60, now() + 3600);
    f.create_authority("rows-only", cp, deletes_only(Some(4)), window, None)
        .await;
    denied(
        f.run_with(Some("rows-only")).await,
        "DPONE_GUARD_AUTHORITY_EMPTY_SNAPSHOT_NOT_COVERED",
    );
    let all = AuthorityAllow {
        full_baseline: false,
        max_delete_rows: Some(4),
        max_delete_ratio: Some(1_000_000),
    };
    f.create_authority("all-delete", cp, all, window, None)
        .await;
    let out = f
        .run_with(Some("all-delete"))
        .await
        .expect("authorized all-delete");
    assert_eq!(
        (out.receipt.metrics.soft_deleted, out.receipt.metrics.active),
        (4, 0)
    );
}

async fn lost_state_needs_full_baseline_authority(on: Dialect) {
    let Some(f) = Fixture::new_on(on, "lost", Options::default()).await else {
        return;
    };
    f.src_sql("INSERT INTO public.items SELECT g, 'n', g, 1 FROM generate_series(1, 4) g")
        .await;
    f.run().await.expect("baseline");
    // State lost (state schema re-provisioned empty): the non-empty target has no checkpoint.
    f.reset_state().await;
    denied(f.run().await, "DPONE_GUARD_BASELINE_REQUIRES_AUTHORITY");
    let window = (now() - 60, now() + 3600);
    let allow = AuthorityAllow {
        full_baseline: true,
        max_delete_rows: None,
        max_delete_ratio: None,
    };
    f.create_authority("rebaseline", None, allow, window, None)
        .await;
    let out = f
        .run_with(Some("rebaseline"))
        .await
        .expect("repair baseline");
    assert_eq!(
        out.load,
        Some(dpone_policy_model::guard::LoadKind::FullBaseline)
    );
    assert_eq!(out.receipt.metrics.unchanged, 4);
    assert_eq!(f.active_rows().await, f.source_rows().await);
}

crate::on_every_target!(
    delete_guards_and_one_shot_authority,
    delete_ratio_guard,
    empty_snapshot_fails_by_default_and_all_delete_needs_exact_authority,
    lost_state_needs_full_baseline_authority,
);
