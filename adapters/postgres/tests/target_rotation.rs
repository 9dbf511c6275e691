//! A target database rotated under a run (dropped and recreated under the same name, so its
//! OID differs from the pin) is refused as pin drift on the first reconnection, before any
//! extraction, never read from or written to by a connection that did not verify the pin.
//!
//! Tier: real PostgreSQL integration (native policies).

mod support;

use dpone_adapter_postgres::ddl::{default_state_tables, render_state_ddl, render_target_ddl};
use dpone_adapter_postgres::source::PgSource;
use dpone_adapter_postgres::target::{PgSession, PgTarget};
use dpone_engine_xmin::artifact::ArtifactStore;
use dpone_engine_xmin::engine::Phase;
use dpone_engine_xmin::envelope::SnapshotEnvelope;
use dpone_engine_xmin::ports::{ExtractRequest, RunRecord, SourcePort, TargetPort};
use dpone_engine_xmin::state::{AuthorityRecord, CommitReceipt, SourceState};
use dpone_engine_xmin::{ErrorCode, Result, Route, RunRequest};
use support::{Fixture, Options, TestDb};
use tokio_postgres::NoTls;

/// Drops the database (ending its sessions) and creates it again under the same name, with the
/// same target table and state catalog: everything matches but the OID.
async fn recreate(db: &TestDb, route: &Route) {
    let mut admin = db.cfg.clone();
    admin.dbname("postgres");
    let (client, conn) = admin.connect(NoTls).await.expect("admin");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
        .batch_execute(&format!("DROP DATABASE \"{}\" WITH (FORCE)", db.name))
        .await
        .expect("drop target database");
    client
        .batch_execute(&format!("CREATE DATABASE \"{}\"", db.name))
        .await
        .expect("create target database");
    let tc = db.client().await;
    let cols = [
        ("id", "bigint"),
        ("name", "text"),
        ("qty", "integer"),
        ("price", "numeric(10,2)"),
    ];
    tc.batch_execute(&render_target_ddl("dwh", "items", &cols, 1, &route.plan))
        .await
        .expect("target ddl");
    tc.batch_execute(&render_state_ddl("dpone_state", &default_state_tables()))
        .await
        .expect("state ddl");
    // The old control session was terminated by the drop; let its client notice.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
}

/// A PostgreSQL target whose database is recreated right after its preflight passed.
struct RotatedAfterPreflight<'a> {
    inner: PgTarget,
    db: &'a TestDb,
    route: &'a Route,
}

impl TargetPort for RotatedAfterPreflight<'_> {
    type Session = PgSession;

    async fn preflight(&mut self) -> Result<()> {
        self.inner.preflight().await?;
        recreate(self.db, self.route).await;
        Ok(())
    }
    async fn read_state(&mut self, state_key: &str) -> Result<Option<SourceState>> {
        self.inner.read_state(state_key).await
    }
    async fn receipt_by_invocation(
        &mut self,
        invocation_id: &str,
        state_key: &str,
    ) -> Result<Option<CommitReceipt>> {
        self.inner
            .receipt_by_invocation(invocation_id, state_key)
            .await
    }
    async fn receipt_by_load(&mut self, load_id: &str) -> Result<Option<CommitReceipt>> {
        self.inner.receipt_by_load(load_id).await
    }
    async fn receipts(&mut self, state_key: &str, limit: u32) -> Result<Vec<CommitReceipt>> {
        self.inner.receipts(state_key, limit).await
    }
    async fn read_authority(&mut self, authority_id: &str) -> Result<Option<AuthorityRecord>> {
        self.inner.read_authority(authority_id).await
    }
    async fn record_failed_run(&mut self, run: &RunRecord) -> Result<()> {
        self.inner.record_failed_run(run).await
    }
    async fn begin(&mut self) -> Result<PgSession> {
        self.inner.begin().await
    }
}

/// The PostgreSQL source, counting extractions.
struct CountingSource {
    inner: PgSource,
    extractions: u32,
}

impl SourcePort for CountingSource {
    async fn extract(
        &mut self,
        request: &ExtractRequest<'_>,
        store: &dyn ArtifactStore,
    ) -> Result<SnapshotEnvelope> {
        self.extractions += 1;
        self.inner.extract(request, store).await
    }
}

/// Fails before the fix (the control connection reconnected without verifying the pin: the
/// run read the recreated database's empty state, extracted a full baseline and was refused
/// only by the run transaction's own pin check, in phase `target_transaction`): the run is
/// refused in preflight with `DPONE_XMIN_TARGET_DATABASE_PIN_MISMATCH`, the source is never
/// read and no artifact is written; a fresh port's first connection (the acknowledgement
/// probe's, the authority listing's) is refused the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_target_recreated_after_preflight_is_refused_as_pin_drift_before_extraction() {
    let f = Fixture::new("rotate", Options::default())
        .await
        .expect("fixture");
    f.src_sql("INSERT INTO public.items VALUES (1, 'a', 1, 1), (2, 'b', 2, 2)")
        .await;
    f.run().await.expect("baseline on the pinned target");

    let db = f.pg_target_db();
    let mut target = RotatedAfterPreflight {
        inner: PgTarget::for_route(&f.route).expect("target"),
        db,
        route: &f.route,
    };
    let mut source = CountingSource {
        inner: PgSource::new(),
        extractions: 0,
    };
    let req = RunRequest {
        invocation_id: support::new_invocation(),
        repair_authority_ref: None,
    };
    let err = Box::pin(dpone_engine_xmin::run(
        &f.route,
        &req,
        &mut source,
        &mut target,
        &f.store,
        &support::NativePolicies,
    ))
    .await
    .expect_err("a recreated target must be refused");
    assert_eq!(err.code(), ErrorCode::TargetDatabasePinMismatch, "{err}");
    assert_eq!(err.phase, Phase::Preflight, "{err}");
    assert_eq!(source.extractions, 0, "the source must not be read");
    let artifacts = std::fs::read_dir(f.artifacts_dir.path())
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(artifacts, 0, "no payload may be extracted");

    // Nothing was written to the recreated database (no failed-run row either).
    let tc = db.client().await;
    let runs: i64 = tc
        .query_one("SELECT count(*) FROM dpone_state.dpone_run_state", &[])
        .await
        .expect("run table")
        .get(0);
    assert_eq!(runs, 0, "nothing written through an unverified connection");

    // Every first connection of a port verifies the pin, not only preflight and begin.
    let mut fresh = PgTarget::for_route(&f.route).expect("target");
    let e = fresh
        .receipt_by_load("any")
        .await
        .expect_err("the probe's fresh connection verifies the pin");
    assert_eq!(e.code(), ErrorCode::TargetDatabasePinMismatch, "{e}");
    let mut fresh = PgTarget::for_route(&f.route).expect("target");
    let e = fresh
        .list_authorities()
        .await
        .expect_err("the authority listing's connection verifies the pin");
    assert_eq!(e.code(), ErrorCode::TargetDatabasePinMismatch, "{e}");
}
