//! Receipt replay under rotated authority (spec 003: "an old invocation cannot replay a receipt
//! under new database authority"): a retry whose receipt was committed under another route
//! fingerprint is refused before any source I/O and writes nothing; the same route replays.
//!
//! Tier: in-process ports. The engine runs against an in-memory target port (it holds one
//! committed receipt and logs every call), a source port that only counts extractions and a
//! stub policy port; no database, no async runtime (the fakes never return `Pending`).

use dpone_engine_xmin::artifact::{ArtifactStore, ArtifactWriter};
use dpone_engine_xmin::envelope::{SnapshotEnvelope, SourceLineage};
use dpone_engine_xmin::ports::{
    ApplyStep, CheckpointCas, ExtractRequest, Judged, Parity, PolicyPort, Populations, RunRecord,
    SourcePort, Staged, StateView, TargetPort, TargetSession,
};
use dpone_engine_xmin::state::{AuthorityRecord, CommitReceipt, Consumption, Metrics, SourceState};
use dpone_engine_xmin::{
    ErrorCode, Manifest, Registry, Route, RunRequest, RunStatus, XminError, engine::Phase,
};
use dpone_policy_model::delete_mode::{
    ActivePredicate, Classification, DeleteModeFacts, DeletePlan, FlagEffect, KeyState, Mode,
    PlanDecision, RowAction, TimestampEffect,
};
use dpone_policy_model::guard::{Checkpoint, GuardDecision, GuardFacts, TransferBinding};
use dpone_policy_model::types::Reason;
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

const MANIFEST: &str = include_str!("../../../fixtures/xmin/manifest.yaml");
const REGISTRY: &str = include_str!("../../../fixtures/xmin/registry.yaml");

/// Drives a future whose ports never wait (every fake here answers immediately).
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..1_000_000 {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
    panic!("the in-process ports never wait; the run did not finish");
}

/// Plans timestamp-only soft deletes; the guard is never reached by these runs.
struct Stub;

impl PolicyPort for Stub {
    fn guard(&self, _: &GuardFacts) -> dpone_engine_xmin::Result<Judged<GuardDecision>> {
        Ok(Judged {
            decision: GuardDecision::Deny(Reason::new("STUB", "stub")),
            evidence: serde_json::Value::Null,
        })
    }
    fn delete_mode(&self, _: &DeleteModeFacts) -> dpone_engine_xmin::Result<Judged<PlanDecision>> {
        Ok(Judged {
            decision: PlanDecision::Plan(DeletePlan {
                mode: Mode::TimestampOnly,
                columns: vec![],
                active_predicate: ActivePredicate::DeletedAtIsNull,
                rules: KeyState::ALL
                    .iter()
                    .map(|&state| Classification {
                        state,
                        action: RowAction::Unchanged,
                        write_business_columns: false,
                        deleted_at: TimestampEffect::None,
                        deleted_flag: FlagEffect::None,
                    })
                    .collect(),
            }),
            evidence: serde_json::Value::Null,
        })
    }
}

fn route(registry: &str) -> Route {
    let env = BTreeMap::from([
        ("DPONE_PG_SOURCE_PASSWORD".to_owned(), "s".to_owned()),
        ("DPONE_PG_TARGET_PASSWORD".to_owned(), "t".to_owned()),
    ]);
    let r = Registry::from_yaml(registry).expect("registry");
    Route::prepare(
        Manifest::from_yaml(MANIFEST).expect("manifest"),
        &r,
        &env,
        &Stub,
    )
    .expect("route")
}

/// The receipt a run of `route` committed for `invocation`.
fn receipt_of(route: &Route, invocation: &str) -> CommitReceipt {
    CommitReceipt {
        receipt_id: "r1".into(),
        load_id: "l1".into(),
        invocation_id: invocation.into(),
        state_key: route.identity.state_key.clone(),
        previous: None,
        checkpoint: Checkpoint {
            xmin: 1000,
            revision: 1,
        },
        visible_horizon: 1001,
        replay_amplification_xids: 1,
        envelope_digest: "e".into(),
        route_fingerprint: route.identity.route_fingerprint.clone(),
        authority_id: None,
        authority_digest: None,
        metrics: Metrics::default(),
        detected_at_micros: 1,
        source_lineage: SourceLineage::default(),
    }
}

/// An in-memory target holding committed receipts; logs every call by name.
struct MemTarget {
    receipts: Vec<CommitReceipt>,
    log: Arc<Mutex<Vec<&'static str>>>,
}

impl MemTarget {
    fn note(&self, name: &'static str) {
        self.log.lock().expect("log").push(name);
    }
}

fn unused() -> XminError {
    XminError::new(ErrorCode::InjectedFault, "not part of these runs")
}

impl TargetPort for MemTarget {
    type Session = NoSession;

    async fn preflight(&mut self) -> dpone_engine_xmin::Result<()> {
        self.note("preflight");
        Ok(())
    }
    async fn read_state(&mut self, _: &str) -> dpone_engine_xmin::Result<Option<SourceState>> {
        self.note("read_state");
        Ok(None)
    }
    async fn receipt_by_invocation(
        &mut self,
        invocation_id: &str,
        state_key: &str,
    ) -> dpone_engine_xmin::Result<Option<CommitReceipt>> {
        self.note("receipt_by_invocation");
        Ok(self
            .receipts
            .iter()
            .find(|r| r.invocation_id == invocation_id && r.state_key == state_key)
            .cloned())
    }
    async fn receipt_by_load(
        &mut self,
        _: &str,
    ) -> dpone_engine_xmin::Result<Option<CommitReceipt>> {
        self.note("receipt_by_load");
        Err(unused())
    }
    async fn receipts(&mut self, _: &str, _: u32) -> dpone_engine_xmin::Result<Vec<CommitReceipt>> {
        self.note("receipts");
        Ok(self.receipts.clone())
    }
    async fn read_authority(
        &mut self,
        _: &str,
    ) -> dpone_engine_xmin::Result<Option<AuthorityRecord>> {
        self.note("read_authority");
        Ok(None)
    }
    async fn record_failed_run(&mut self, _: &RunRecord) -> dpone_engine_xmin::Result<()> {
        self.note("record_failed_run");
        Ok(())
    }
    async fn begin(&mut self) -> dpone_engine_xmin::Result<NoSession> {
        self.note("begin");
        Err(unused())
    }
}

/// Never opened: `begin` fails, so no run here reaches a transaction.
struct NoSession;

impl TargetSession for NoSession {
    async fn lock_target(&mut self, _: &[u8; 32]) -> dpone_engine_xmin::Result<()> {
        Err(unused())
    }
    async fn detection_time(&mut self) -> dpone_engine_xmin::Result<i64> {
        Err(unused())
    }
    async fn read_state(&mut self, _: &str, _: &[u8; 32]) -> dpone_engine_xmin::Result<StateView> {
        Err(unused())
    }
    async fn read_authority(
        &mut self,
        _: &str,
    ) -> dpone_engine_xmin::Result<Option<AuthorityRecord>> {
        Err(unused())
    }
    async fn stage(
        &mut self,
        _: &SnapshotEnvelope,
        _: &dyn ArtifactStore,
    ) -> dpone_engine_xmin::Result<Staged> {
        Err(unused())
    }
    async fn populations(&mut self) -> dpone_engine_xmin::Result<Populations> {
        Err(unused())
    }
    async fn supersede(
        &mut self,
        _: &TransferBinding,
        _: &str,
        _: i64,
    ) -> dpone_engine_xmin::Result<u64> {
        Err(unused())
    }
    async fn apply(&mut self, _: ApplyStep, _: i64) -> dpone_engine_xmin::Result<u64> {
        Err(unused())
    }
    async fn parity(&mut self) -> dpone_engine_xmin::Result<Parity> {
        Err(unused())
    }
    async fn cas_checkpoint(
        &mut self,
        _: &CheckpointCas,
        _: i64,
    ) -> dpone_engine_xmin::Result<bool> {
        Err(unused())
    }
    async fn insert_receipt(&mut self, _: &CommitReceipt) -> dpone_engine_xmin::Result<()> {
        Err(unused())
    }
    async fn consume_authority(
        &mut self,
        _: &Consumption,
        _: i64,
    ) -> dpone_engine_xmin::Result<()> {
        Err(unused())
    }
    async fn record_run(&mut self, _: &RunRecord) -> dpone_engine_xmin::Result<()> {
        Err(unused())
    }
    async fn commit(self) -> dpone_engine_xmin::Result<()> {
        Err(unused())
    }
    async fn rollback(self) -> dpone_engine_xmin::Result<()> {
        Ok(())
    }
}

/// Counts extractions and refuses them (a replay or a refusal never reaches the source).
#[derive(Default)]
struct CountingSource {
    extractions: u32,
}

impl SourcePort for CountingSource {
    async fn extract(
        &mut self,
        _: &ExtractRequest<'_>,
        _: &dyn ArtifactStore,
    ) -> dpone_engine_xmin::Result<SnapshotEnvelope> {
        self.extractions += 1;
        Err(XminError::new(
            ErrorCode::SourceExtractionFailed,
            "the source must not be read",
        ))
    }
}

/// An artifact store nothing may use.
struct NoStore;

impl ArtifactStore for NoStore {
    fn create(&self) -> io::Result<Box<dyn ArtifactWriter>> {
        Err(io::Error::other("no artifact may be written"))
    }
    fn open(&self, _: &str) -> io::Result<Box<dyn io::Read + Send>> {
        Err(io::Error::other("no artifact may be read"))
    }
    fn remove(&self, _: &str) -> io::Result<()> {
        Err(io::Error::other("no artifact may be removed"))
    }
}

struct Retry {
    result: Result<RunStatus, (ErrorCode, Phase)>,
    calls: Vec<&'static str>,
    extractions: u32,
}

/// Retries `invocation` on `route` against a target holding `committed`.
fn retry(route: &Route, invocation: &str, committed: CommitReceipt) -> Retry {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut target = MemTarget {
        receipts: vec![committed],
        log: Arc::clone(&log),
    };
    let mut source = CountingSource::default();
    let request = RunRequest {
        invocation_id: invocation.into(),
        repair_authority_ref: None,
    };
    let result = block_on(dpone_engine_xmin::run(
        route,
        &request,
        &mut source,
        &mut target,
        &NoStore,
        &Stub,
    ))
    .map(|o| o.status)
    .map_err(|f| (f.code(), f.phase));
    let calls = log.lock().expect("log").clone();
    Retry {
        result,
        calls,
        extractions: source.extractions,
    }
}

/// The control: the same invocation on the same route replays its receipt, source-free.
#[test]
fn a_receipt_replays_under_the_route_it_was_committed_under() {
    let base = route(REGISTRY);
    let r = retry(&base, "inv-1", receipt_of(&base, "inv-1"));
    assert_eq!(r.result, Ok(RunStatus::Replayed));
    assert_eq!(r.extractions, 0);
    assert_eq!(r.calls, ["preflight", "receipt_by_invocation"]);
}

/// Fails before the fix (the engine replayed any receipt found for the invocation): after the
/// selected source relation pin or a source principal pin was rotated (same state key, new
/// route fingerprint), the old invocation's receipt is not replayed; the
/// run is refused in preflight with `DPONE_XMIN_RECEIPT_AUTHORITY_CHANGED`, reads no state, no
/// source and no artifact, and writes nothing (not even a failed-run row).
#[test]
fn a_receipt_is_not_replayed_under_rotated_authority() {
    let old = route(REGISTRY);
    let committed = receipt_of(&old, "inv-1");
    let relation_rotated = route(&REGISTRY.replace("relation_oid: 16390", "relation_oid: 16391"));
    let principal_rotated = route(&REGISTRY.replace(
        "effective_principal: {name: dpone_reader, oid: 16385}",
        "effective_principal: {name: dpone_reader, oid: 16386}",
    ));
    for rotated in [&relation_rotated, &principal_rotated] {
        assert_eq!(rotated.identity.state_key, old.identity.state_key);
        assert_ne!(
            rotated.identity.route_fingerprint,
            old.identity.route_fingerprint
        );
        let r = retry(rotated, "inv-1", committed.clone());
        assert_eq!(
            r.result,
            Err((ErrorCode::ReceiptAuthorityChanged, Phase::Preflight))
        );
        assert_eq!(r.extractions, 0, "no source I/O");
        assert_eq!(
            r.calls,
            ["preflight", "receipt_by_invocation"],
            "nothing read after the receipt, nothing written"
        );
    }
    // A receipt whose fingerprint was tampered with is refused the same way.
    let mut forged = committed;
    forged.route_fingerprint = "0".repeat(64);
    let r = retry(&old, "inv-1", forged);
    assert_eq!(
        r.result,
        Err((ErrorCode::ReceiptAuthorityChanged, Phase::Preflight))
    );
}

/// A new invocation on the rotated route is not a replay: it proceeds to the source.
#[test]
fn a_new_invocation_on_the_rotated_route_proceeds_to_extraction() {
    let old = route(REGISTRY);
    let rotated = route(&REGISTRY.replace("relation_oid: 16390", "relation_oid: 16391"));
    let r = retry(&rotated, "inv-2", receipt_of(&old, "inv-1"));
    assert_eq!(
        r.result,
        Err((ErrorCode::SourceExtractionFailed, Phase::Extraction))
    );
    assert_eq!(r.extractions, 1);
}
