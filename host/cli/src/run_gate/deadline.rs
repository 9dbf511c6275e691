//! The attempt's deadline at each route's safe stopping points (see `np_run`, step 4).
//!
//! - [`DeadlineTarget`] wraps the XMin route's target port: every boundary of the run (the
//!   pre-read checks and each step of the run transaction) checks the deadline before it is
//!   called, and `commit` is never sent after it: the session is rolled back and the run fails
//!   with [`ErrorCode::AttemptDeadlineExceeded`]. The commit probe (`receipt_by_load`) and the
//!   record of a failed run stay available, since they follow a decided outcome. A statement
//!   already running is not cancelled: cancelling could drop a `COMMIT` in flight and leave the
//!   outcome unknown.
//! - [`DeadlineAuthority`] wraps the ClickHouse route's authority store: once the deadline
//!   passed, an insert or update (each phase transition) is refused before it is sent, with
//!   port kind `Interrupted`; the coordinator stops at that phase boundary and the operation
//!   stays resumable. Reads stay available.

use dpone_engine_clickhouse::contracts::TargetKey;
use dpone_engine_clickhouse::ports::{AuthorityStore, PortError, PortErrorKind, Versioned};
use dpone_engine_xmin::artifact::ArtifactStore;
use dpone_engine_xmin::envelope::SnapshotEnvelope;
use dpone_engine_xmin::ports::{
    ApplyStep, CheckpointCas, Parity, Populations, RunRecord, Staged, StateView, TargetPort,
    TargetSession,
};
use dpone_engine_xmin::state::{AuthorityRecord, CommitReceipt, Consumption, SourceState};
use dpone_engine_xmin::{ErrorCode, XminError};
use dpone_policy_model::guard::TransferBinding;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// The class of the ClickHouse authority write refused at the deadline.
pub const AUTHORITY_DEADLINE: &str = "DPONE_CLI_NP_ATTEMPT_DEADLINE_EXCEEDED";

fn check(deadline: Instant, boundary: &str) -> Result<(), XminError> {
    if Instant::now() >= deadline {
        return Err(XminError::new(
            ErrorCode::AttemptDeadlineExceeded,
            format!(
                "the attempt's deadline passed before {boundary}; the run transaction was not \
                 committed"
            ),
        ));
    }
    Ok(())
}

/// The XMin target port under the attempt's deadline.
pub struct DeadlineTarget<T> {
    inner: T,
    deadline: Instant,
}

impl<T> DeadlineTarget<T> {
    /// Wraps `inner`.
    pub fn new(inner: T, deadline: Instant) -> Self {
        Self { inner, deadline }
    }
}

/// The run transaction under the attempt's deadline.
pub struct DeadlineSession<S> {
    inner: S,
    deadline: Instant,
}

macro_rules! boundary {
    ($self:ident, $name:literal, $call:expr) => {{
        check($self.deadline, $name)?;
        $call.await
    }};
}

impl<T: TargetPort> TargetPort for DeadlineTarget<T> {
    type Session = DeadlineSession<T::Session>;

    async fn preflight(&mut self) -> dpone_engine_xmin::Result<()> {
        boundary!(self, "preflight", self.inner.preflight())
    }
    async fn read_state(&mut self, k: &str) -> dpone_engine_xmin::Result<Option<SourceState>> {
        boundary!(self, "read_state", self.inner.read_state(k))
    }
    async fn receipt_by_invocation(
        &mut self,
        i: &str,
        k: &str,
    ) -> dpone_engine_xmin::Result<Option<CommitReceipt>> {
        boundary!(
            self,
            "receipt_by_invocation",
            self.inner.receipt_by_invocation(i, k)
        )
    }
    async fn receipt_by_load(
        &mut self,
        load_id: &str,
    ) -> dpone_engine_xmin::Result<Option<CommitReceipt>> {
        // The commit probe: it decides an outcome that is already fixed.
        self.inner.receipt_by_load(load_id).await
    }
    async fn receipts(
        &mut self,
        k: &str,
        limit: u32,
    ) -> dpone_engine_xmin::Result<Vec<CommitReceipt>> {
        boundary!(self, "receipts", self.inner.receipts(k, limit))
    }
    async fn read_authority(
        &mut self,
        id: &str,
    ) -> dpone_engine_xmin::Result<Option<AuthorityRecord>> {
        boundary!(self, "read_authority", self.inner.read_authority(id))
    }
    async fn record_failed_run(&mut self, run: &RunRecord) -> dpone_engine_xmin::Result<()> {
        // Evidence of a run that did not commit (best effort, own transaction).
        self.inner.record_failed_run(run).await
    }
    async fn begin(&mut self) -> dpone_engine_xmin::Result<Self::Session> {
        check(self.deadline, "begin")?;
        Ok(DeadlineSession {
            inner: self.inner.begin().await?,
            deadline: self.deadline,
        })
    }
}

impl<S: TargetSession> TargetSession for DeadlineSession<S> {
    fn stages_before_lock(&self) -> bool {
        self.inner.stages_before_lock()
    }
    async fn lock_target(&mut self, t: &[u8; 32]) -> dpone_engine_xmin::Result<()> {
        boundary!(self, "lock_target", self.inner.lock_target(t))
    }
    async fn detection_time(&mut self) -> dpone_engine_xmin::Result<i64> {
        boundary!(self, "detection_time", self.inner.detection_time())
    }
    async fn read_state(&mut self, k: &str, t: &[u8; 32]) -> dpone_engine_xmin::Result<StateView> {
        boundary!(self, "read_state", self.inner.read_state(k, t))
    }
    async fn read_authority(
        &mut self,
        id: &str,
    ) -> dpone_engine_xmin::Result<Option<AuthorityRecord>> {
        boundary!(self, "read_authority", self.inner.read_authority(id))
    }
    async fn stage(
        &mut self,
        e: &SnapshotEnvelope,
        s: &dyn ArtifactStore,
    ) -> dpone_engine_xmin::Result<Staged> {
        boundary!(self, "stage", self.inner.stage(e, s))
    }
    async fn populations(&mut self) -> dpone_engine_xmin::Result<Populations> {
        boundary!(self, "populations", self.inner.populations())
    }
    async fn supersede(
        &mut self,
        t: &TransferBinding,
        k: &str,
        at: i64,
    ) -> dpone_engine_xmin::Result<u64> {
        boundary!(self, "supersede", self.inner.supersede(t, k, at))
    }
    async fn apply(&mut self, step: ApplyStep, at: i64) -> dpone_engine_xmin::Result<u64> {
        boundary!(self, "apply", self.inner.apply(step, at))
    }
    async fn parity(&mut self) -> dpone_engine_xmin::Result<Parity> {
        boundary!(self, "parity", self.inner.parity())
    }
    async fn cas_checkpoint(
        &mut self,
        cas: &CheckpointCas,
        at: i64,
    ) -> dpone_engine_xmin::Result<bool> {
        boundary!(self, "cas_checkpoint", self.inner.cas_checkpoint(cas, at))
    }
    async fn insert_receipt(&mut self, r: &CommitReceipt) -> dpone_engine_xmin::Result<()> {
        boundary!(self, "insert_receipt", self.inner.insert_receipt(r))
    }
    async fn consume_authority(
        &mut self,
        c: &Consumption,
        at: i64,
    ) -> dpone_engine_xmin::Result<()> {
        boundary!(
            self,
            "consume_authority",
            self.inner.consume_authority(c, at)
        )
    }
    async fn record_run(&mut self, run: &RunRecord) -> dpone_engine_xmin::Result<()> {
        boundary!(self, "record_run", self.inner.record_run(run))
    }
    async fn commit(self) -> dpone_engine_xmin::Result<()> {
        // The last point at which not publishing is safe: after the deadline the transaction
        // is rolled back, never committed.
        if let Err(e) = check(self.deadline, "commit") {
            let _ = self.inner.rollback().await;
            return Err(e);
        }
        self.inner.commit().await
    }
    async fn rollback(self) -> dpone_engine_xmin::Result<()> {
        self.inner.rollback().await
    }
}

/// The ClickHouse authority store under the attempt's deadline.
pub struct DeadlineAuthority<'a> {
    inner: &'a (dyn AuthorityStore + Sync),
    deadline: Instant,
    refused: AtomicBool,
}

impl<'a> DeadlineAuthority<'a> {
    /// Wraps `inner`.
    pub fn new(inner: &'a (dyn AuthorityStore + Sync), deadline: Instant) -> Self {
        Self {
            inner,
            deadline,
            refused: AtomicBool::new(false),
        }
    }

    /// Whether a write was refused at the deadline.
    pub fn refused(&self) -> bool {
        self.refused.load(Ordering::SeqCst)
    }

    fn gate(&self) -> Result<(), PortError> {
        if Instant::now() >= self.deadline {
            self.refused.store(true, Ordering::SeqCst);
            return Err(PortError::new(
                PortErrorKind::Interrupted,
                AUTHORITY_DEADLINE,
            ));
        }
        Ok(())
    }
}

impl AuthorityStore for DeadlineAuthority<'_> {
    fn read(&self, key: &TargetKey) -> Result<Option<Versioned>, PortError> {
        self.inner.read(key)
    }
    fn insert(&self, key: &TargetKey, value: &str) -> Result<(), PortError> {
        self.gate()?;
        self.inner.insert(key, value)
    }
    fn update(&self, key: &TargetKey, expected_version: u64, value: &str) -> Result<(), PortError> {
        self.gate()?;
        self.inner.update(key, expected_version, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;
    use std::time::Duration;

    struct Counting(AtomicU32);

    impl AuthorityStore for Counting {
        fn read(&self, _: &TargetKey) -> Result<Option<Versioned>, PortError> {
            Ok(None)
        }
        fn insert(&self, _: &TargetKey, _: &str) -> Result<(), PortError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn update(&self, _: &TargetKey, _: u64, _: &str) -> Result<(), PortError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    #[test]
    fn no_authority_write_is_sent_after_the_deadline() {
        // Tier: unit (pure wrapper over an in-memory port).
        let key = dpone_engine_clickhouse::contracts::target_key("c", "d", "t");
        let inner = Counting(AtomicU32::new(0));
        let open = DeadlineAuthority::new(&inner, Instant::now() + Duration::from_secs(60));
        open.insert(&key, "v").expect("before the deadline");
        open.update(&key, 1, "v").expect("before the deadline");
        assert!(!open.refused());
        assert_eq!(inner.0.load(Ordering::SeqCst), 2);
        let passed = DeadlineAuthority::new(&inner, Instant::now());
        let e = passed.update(&key, 2, "v").expect_err("after the deadline");
        assert_eq!(e.kind, PortErrorKind::Interrupted);
        assert_eq!(e.class, AUTHORITY_DEADLINE);
        assert!(passed.insert(&key, "v").is_err());
        assert!(passed.refused());
        assert_eq!(inner.0.load(Ordering::SeqCst), 2, "nothing was sent");
        assert_eq!(passed.read(&key).expect("reads stay available"), None);
    }
}
