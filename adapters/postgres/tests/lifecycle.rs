//! Lifecycle on a real PostgreSQL server, per delete mode and for hard delete: baseline, strict
//! no-op, change, delete, repeated absence, reactivate, re-delete; and MVCC snapshot semantics
//! with a concurrently open transaction.
//!
//! Every scenario runs on the PostgreSQL target and, with `DPONE_TEST_MSSQL_URL`, unchanged on
//! the SQL Server target (`<scenario>::postgres`, `<scenario>::sql_server`).
//!
//! Tier: real database integration; guard and delete-mode decisions by the native policy cores.

mod support;

use dpone_engine_xmin::RunStatus;
use support::{Dialect, Fixture, Options};

async fn lifecycle(
    on: Dialect,
    prefix: &str,
    delete_policy: Option<&'static str>,
    mode: Option<&'static str>,
) {
    let options = Options {
        delete_policy,
        soft_delete_mode: mode,
        ..Options::default()
    };
    let Some(f) = Fixture::new_on(on, prefix, options).await else {
        return;
    };
    let hard = delete_policy == Some("hard_delete");
    f.src_sql(
        "INSERT INTO public.items SELECT g, 'n' || g, g, g * 1.5 FROM generate_series(1, 5) g",
    )
    .await;

    // Baseline.
    let out = f.run().await.expect("baseline");
    assert_eq!(out.status, RunStatus::Committed);
    let m = out.receipt.metrics;
    assert_eq!((m.inserted, m.updated, m.active, m.total), (5, 0, 5, 5));
    assert_eq!(out.receipt.checkpoint.revision, 1);
    assert_eq!(f.active_rows().await, f.source_rows().await);
    assert_eq!(
        out.guard_reason.as_deref(),
        Some("DPONE_GUARD_ALLOWED_FIRST_BASELINE")
    );

    // Strict no-op: nothing written, lineage and row versions unchanged.
    let before = f.target_fingerprint().await;
    let out = f.run().await.expect("no-op");
    let m = out.receipt.metrics;
    assert_eq!(
        (
            m.inserted,
            m.updated,
            m.reactivated,
            m.soft_deleted,
            m.hard_deleted,
            m.unchanged
        ),
        (0, 0, 0, 0, 0, 5)
    );
    assert_eq!(
        f.target_fingerprint().await,
        before,
        "strict no-op rewrote rows"
    );
    assert_eq!(out.receipt.checkpoint.revision, 2);

    // Change.
    f.src_sql("UPDATE public.items SET name = 'changed' WHERE id = 2")
        .await;
    let m = f.run().await.expect("change").receipt.metrics;
    assert_eq!((m.updated, m.unchanged, m.inserted), (1, 4, 0));
    assert_eq!(f.active_rows().await, f.source_rows().await);

    // Delete.
    f.src_sql("DELETE FROM public.items WHERE id = 3").await;
    let m = f.run().await.expect("delete").receipt.metrics;
    if hard {
        assert_eq!((m.hard_deleted, m.soft_deleted, m.total), (1, 0, 4));
    } else {
        assert_eq!((m.soft_deleted, m.hard_deleted, m.total), (1, 0, 5));
    }
    assert_eq!(m.active, 4);
    assert_eq!(f.active_keys().await, f.source_keys().await);

    // Repeated absence keeps the first detection.
    let before = f.target_fingerprint().await;
    let m = f.run().await.expect("still missing").receipt.metrics;
    assert_eq!((m.soft_deleted, m.hard_deleted, m.updated), (0, 0, 0));
    assert_eq!(
        f.target_fingerprint().await,
        before,
        "repeated absence rewrote rows"
    );
    let first_detection = f.deleted_at(3).await;

    // Reactivate.
    f.src_sql("INSERT INTO public.items VALUES (3, 'back', 3, 4.5)")
        .await;
    let m = f.run().await.expect("reactivate").receipt.metrics;
    if hard {
        assert_eq!((m.inserted, m.reactivated), (1, 0));
    } else {
        assert_eq!((m.reactivated, m.inserted), (1, 0));
        assert_eq!(
            f.deleted_at(3).await,
            None,
            "reappearance clears the detection time"
        );
    }
    assert_eq!(f.active_rows().await, f.source_rows().await);

    // Re-delete: a new detection timestamp.
    f.src_sql("DELETE FROM public.items WHERE id = 3").await;
    let m = f.run().await.expect("re-delete").receipt.metrics;
    assert_eq!(m.soft_deleted + m.hard_deleted, 1);
    assert_eq!(f.active_keys().await, f.source_keys().await);
    if mode != Some("flag_only") && !hard {
        let second = f.deleted_at(3).await;
        assert!(
            second.is_some() && second > first_detection,
            "re-delete sets a new detection time"
        );
    }
    assert_eq!(f.checkpoint().await.map(|c| c.revision), Some(7));
    assert_eq!(f.receipt_count().await, 7);
}

async fn lifecycle_timestamp_only_default(on: Dialect) {
    lifecycle(on, "lc_ts", None, None).await;
}

async fn lifecycle_timestamp_and_flag(on: Dialect) {
    lifecycle(on, "lc_tf", Some("soft_delete"), Some("timestamp_and_flag")).await;
}

async fn lifecycle_flag_only(on: Dialect) {
    lifecycle(on, "lc_fo", Some("soft_delete"), Some("flag_only")).await;
}

async fn lifecycle_hard_delete(on: Dialect) {
    lifecycle(on, "lc_hd", Some("hard_delete"), None).await;
}

/// Rows with XIDs in [U, H) are loaded now and replayed next run; a row of a transaction that was
/// open during the snapshot is loaded by the next run. No loss, no duplicate.
async fn snapshot_replay_window_with_open_transaction(on: Dialect) {
    let Some(f) = Fixture::new_on(on, "snap", Options::default()).await else {
        return;
    };
    f.src_sql("INSERT INTO public.items SELECT g, 'n', g, 1 FROM generate_series(1, 3) g")
        .await;
    f.run().await.expect("baseline");

    // T1: open, with an XID, holding back the snapshot xmin.
    let t1 = f.src.client().await;
    t1.batch_execute("BEGIN; INSERT INTO public.items VALUES (100, 'open', 1, 1)")
        .await
        .expect("t1");
    // T2: committed after T1 started, so its XID is in [U, H).
    f.src_sql("INSERT INTO public.items VALUES (101, 'committed', 1, 1)")
        .await;

    let out = f.run().await.expect("run with open transaction");
    let m = out.receipt.metrics;
    assert_eq!(m.inserted, 1, "the committed row in [U,H) is loaded now");
    assert!(out.receipt.replay_amplification_xids >= 1);
    assert!(
        !f.active_keys().await.contains(&100),
        "the open transaction's row is invisible"
    );

    t1.batch_execute("COMMIT").await.expect("commit t1");
    let m = f.run().await.expect("next run").receipt.metrics;
    assert_eq!(m.inserted, 1, "the formerly open row is loaded: no loss");
    assert_eq!(
        m.updated, 0,
        "the replayed row is a strict no-op: no duplicate"
    );
    assert_eq!(f.active_rows().await, f.source_rows().await);
}

/// A delta far smaller than the target (under one staged row per 20 target rows), as in
/// production: the PostgreSQL target joins it by probing the target's unique index (hash and
/// merge joins off for those statements only). Change, delete, reappearance and a strict no-op
/// give the same results as with any other plan.
async fn small_delta_on_a_large_target(
    on: Dialect,
    prefix: &str,
    delete_policy: Option<&'static str>,
    mode: Option<&'static str>,
) {
    let options = Options {
        delete_policy,
        soft_delete_mode: mode,
        ..Options::default()
    };
    let Some(f) = Fixture::new_on(on, prefix, options).await else {
        return;
    };
    let hard = delete_policy == Some("hard_delete");
    f.src_sql("INSERT INTO public.items SELECT g, 'n' || g, g, 1 FROM generate_series(1, 2000) g")
        .await;
    f.run().await.expect("baseline");

    // 10 changed, 8 deleted, 2 new: 12 staged rows and 8 missing keys against 2000.
    f.src_sql(
        "UPDATE public.items SET qty = qty + 1 WHERE id % 200 = 1;
         DELETE FROM public.items WHERE id % 250 = 2;
         INSERT INTO public.items VALUES (5001, 'new', 1, 1), (5002, 'new', 2, 1);",
    )
    .await;
    let m = f.run().await.expect("small delta").receipt.metrics;
    assert_eq!(
        (
            m.updated,
            m.inserted,
            m.reactivated,
            m.soft_deleted + m.hard_deleted
        ),
        (10, 2, 0, 8)
    );
    assert_eq!(m.active, 1994);
    assert_eq!(f.active_rows().await, f.source_rows().await);

    // Two deleted keys reappear.
    f.src_sql("INSERT INTO public.items VALUES (2, 'back', 1, 1), (252, 'back', 1, 1)")
        .await;
    let m = f.run().await.expect("reappearance").receipt.metrics;
    let expected = if hard { (0, 2, 0) } else { (0, 0, 2) };
    assert_eq!((m.updated, m.inserted, m.reactivated), expected);
    assert_eq!(m.soft_deleted + m.hard_deleted, 0);
    assert_eq!(f.active_rows().await, f.source_rows().await);

    // Nothing changed: a strict no-op.
    let m = f.run().await.expect("no-op").receipt.metrics;
    assert_eq!(
        (
            m.updated,
            m.inserted,
            m.reactivated,
            m.soft_deleted + m.hard_deleted
        ),
        (0, 0, 0, 0)
    );
    assert_eq!(m.unchanged, 1996);
}

async fn small_delta_soft_delete(on: Dialect) {
    small_delta_on_a_large_target(on, "sd_soft", None, None).await;
}

async fn small_delta_flag_only(on: Dialect) {
    small_delta_on_a_large_target(on, "sd_flag", Some("soft_delete"), Some("flag_only")).await;
}

async fn small_delta_hard_delete(on: Dialect) {
    small_delta_on_a_large_target(on, "sd_hard", Some("hard_delete"), None).await;
}

crate::on_every_target!(
    small_delta_soft_delete,
    small_delta_flag_only,
    small_delta_hard_delete,
    lifecycle_timestamp_only_default,
    lifecycle_timestamp_and_flag,
    lifecycle_flag_only,
    lifecycle_hard_delete,
    snapshot_replay_window_with_open_transaction,
);
