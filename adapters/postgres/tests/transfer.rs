//! Schema drift creates a new state key for the same physical target; it conflicts with the old
//! active owner until an exact one-shot transfer authority is used, which supersedes the old
//! state in the same transaction as the baseline.
//!
//! Runs on the PostgreSQL target and, with `DPONE_TEST_MSSQL_URL`, unchanged on SQL Server.
//!
//! Tier: real database integration; native guard core.

mod support;

use dpone_adapter_postgres::source::PgSource;
use dpone_engine_xmin::engine::Phase;
use dpone_engine_xmin::state::{AUTHORITY_SCHEMA, AuthorityDocument};
use dpone_engine_xmin::{ErrorCode, Route, RunRequest};
use dpone_policy_model::guard::{AuthorityAllow, TransferBinding};
use support::{Dialect, Fixture, NativePolicies, Options, new_invocation, prepare};

async fn run(
    f: &Fixture,
    route: &Route,
    authority: Option<&str>,
) -> Result<dpone_engine_xmin::RunOutcome, dpone_engine_xmin::RunFailure> {
    let req = RunRequest {
        invocation_id: new_invocation(),
        repair_authority_ref: authority.map(str::to_owned),
    };
    let mut target = f.target_for(route);
    dpone_engine_xmin::run(
        route,
        &req,
        &mut PgSource::new(),
        &mut target,
        &f.store,
        &NativePolicies,
    )
    .await
}

async fn schema_drift_needs_exact_transfer(on: Dialect) {
    let Some(f) = Fixture::new_on(on, "xfer", Options::default()).await else {
        return;
    };
    f.src_sql("INSERT INTO public.items SELECT g, 'n', g, 1 FROM generate_series(1, 6) g")
        .await;
    f.run().await.expect("baseline A");
    let old_cp = f.checkpoint().await.expect("checkpoint A");

    // Route B selects fewer columns: a new state key for the same target.
    let manifest_b = f.manifest_yaml.replace(
        "columns: [id, name, qty, price]",
        "columns: [id, name, qty]",
    );
    let b = prepare(&manifest_b, &f.registry_yaml, &f.env).expect("route B");
    assert_ne!(b.identity.state_key, f.route.identity.state_key);
    assert_eq!(b.identity.target_identity, f.route.identity.target_identity);

    let e = run(&f, &b, None)
        .await
        .expect_err("conflicts with the active owner");
    assert_eq!(e.code(), ErrorCode::GuardDenied);
    assert!(
        e.error
            .message()
            .starts_with("DPONE_GUARD_TARGET_OWNED_BY_OTHER_STATE"),
        "{e}"
    );

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let doc = |id: &str, revision: u64| AuthorityDocument {
        schema: AUTHORITY_SCHEMA.into(),
        authority_id: id.into(),
        state_key: b.identity.state_key.clone(),
        scope_hash: b.identity.scope_hash.clone(),
        checkpoint: None,
        not_before: now - 60,
        expires_at: now + 3600,
        allow: AuthorityAllow {
            full_baseline: true,
            max_delete_rows: None,
            max_delete_ratio: None,
        },
        transfer: Some(TransferBinding {
            old_state_key: f.route.identity.state_key.clone(),
            old_checkpoint: dpone_policy_model::guard::Checkpoint {
                xmin: old_cp.xmin,
                revision,
            },
        }),
        approved_by: "owner".into(),
        reason: "schema change".into(),
    };
    f.insert_authority(&doc("wrong-revision", old_cp.revision + 1))
        .await;
    let e = run(&f, &b, Some("wrong-revision"))
        .await
        .expect_err("inexact transfer");
    assert!(
        e.error
            .message()
            .starts_with("DPONE_GUARD_TRANSFER_MISMATCH"),
        "{e}"
    );

    f.insert_authority(&doc("transfer", old_cp.revision)).await;
    let out = run(&f, &b, Some("transfer"))
        .await
        .expect("transfer baseline");
    assert_eq!(
        out.guard_reason.as_deref(),
        Some("DPONE_GUARD_ALLOWED_AUTHORIZED_TRANSFER")
    );
    assert_eq!(out.receipt.checkpoint.revision, 1);
    assert_eq!(out.receipt.authority_id.as_deref(), Some("transfer"));

    // The old key is superseded (history kept) and can no longer run.
    let superseded = f.superseded(&f.route.identity.state_key).await;
    assert!(superseded);
    let e = f.run().await.expect_err("old key is superseded");
    assert_eq!(
        (e.code(), e.phase),
        (ErrorCode::StateSuperseded, Phase::Preflight)
    );

    // Route B continues incrementally.
    f.src_sql("DELETE FROM public.items WHERE id = 6").await;
    let out = run(&f, &b, None).await.expect("incremental B");
    assert_eq!(out.receipt.metrics.soft_deleted, 1);
    assert_eq!(f.active_keys().await, f.source_keys().await);
}

crate::on_every_target!(schema_drift_needs_exact_transfer,);
