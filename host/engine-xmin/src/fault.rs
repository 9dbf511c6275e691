//! Fault injection over the target port: fail at any boundary of the run transaction, before or
//! after the wrapped call, or lose the commit acknowledgement after a real commit.
//!
//! Used by the fault-matrix tests against a real database; it lives here (not behind `cfg(test)`)
//! so adapter crates can wrap their own ports with it.

use crate::artifact::ArtifactStore;
use crate::envelope::SnapshotEnvelope;
use crate::error::{ErrorCode, Result, XminError};
use crate::ports::{
    ApplyStep, CheckpointCas, Parity, Populations, RunRecord, Staged, StateView, TargetPort,
    TargetSession,
};
use crate::state::{AuthorityRecord, CommitReceipt, Consumption, SourceState};
use dpone_policy_model::guard::TransferBinding;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// When the injected failure happens relative to the wrapped call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// The call is not made.
    Before,
    /// The call is made and its result discarded.
    After,
}

/// Which failure to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// No failure; only count boundaries.
    None,
    /// Fail at the n-th session boundary (1-based).
    At(u32, When),
    /// Commit for real, then report an error (acknowledgement loss).
    LoseCommitAck,
}

/// Shared plan and log of one faulty target.
#[derive(Debug)]
pub struct FaultPlan {
    fault: Fault,
    seen: AtomicU32,
    log: Mutex<Vec<&'static str>>,
}

impl FaultPlan {
    /// A plan injecting `fault`.
    pub fn new(fault: Fault) -> Arc<Self> {
        Arc::new(Self {
            fault,
            seen: AtomicU32::new(0),
            log: Mutex::new(Vec::new()),
        })
    }

    /// Boundaries passed so far.
    pub fn boundaries(&self) -> u32 {
        self.seen.load(Ordering::SeqCst)
    }

    /// Names of the boundaries passed, in order.
    pub fn log(&self) -> Vec<&'static str> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    fn enter(&self, name: &'static str) -> u32 {
        if let Ok(mut l) = self.log.lock() {
            l.push(name);
        }
        self.seen.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn injected(name: &str) -> XminError {
        XminError::new(
            ErrorCode::InjectedFault,
            format!("injected fault at {name}"),
        )
    }
}

/// A target port whose sessions fail as planned.
pub struct FaultyTarget<T> {
    inner: T,
    plan: Arc<FaultPlan>,
}

impl<T> FaultyTarget<T> {
    /// Wraps a port.
    pub fn new(inner: T, plan: Arc<FaultPlan>) -> Self {
        Self { inner, plan }
    }
    /// The wrapped port.
    pub fn inner_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

/// A session that fails as planned.
pub struct FaultySession<S> {
    inner: S,
    plan: Arc<FaultPlan>,
}

macro_rules! boundary {
    ($self:ident, $name:literal, $call:expr) => {{
        let n = $self.plan.enter($name);
        match $self.plan.fault {
            Fault::At(k, When::Before) if k == n => Err(FaultPlan::injected($name)),
            Fault::At(k, When::After) if k == n => {
                let _ = $call.await;
                Err(FaultPlan::injected($name))
            }
            _ => $call.await,
        }
    }};
}

impl<T: TargetPort> TargetPort for FaultyTarget<T> {
    type Session = FaultySession<T::Session>;

    async fn preflight(&mut self) -> Result<()> {
        self.inner.preflight().await
    }
    async fn read_state(&mut self, state_key: &str) -> Result<Option<SourceState>> {
        self.inner.read_state(state_key).await
    }
    async fn receipt_by_invocation(&mut self, i: &str, k: &str) -> Result<Option<CommitReceipt>> {
        self.inner.receipt_by_invocation(i, k).await
    }
    async fn receipt_by_load(&mut self, load_id: &str) -> Result<Option<CommitReceipt>> {
        self.inner.receipt_by_load(load_id).await
    }
    async fn receipts(&mut self, state_key: &str, limit: u32) -> Result<Vec<CommitReceipt>> {
        self.inner.receipts(state_key, limit).await
    }
    async fn read_authority(&mut self, id: &str) -> Result<Option<AuthorityRecord>> {
        self.inner.read_authority(id).await
    }
    async fn record_failed_run(&mut self, run: &RunRecord) -> Result<()> {
        self.inner.record_failed_run(run).await
    }
    async fn begin(&mut self) -> Result<Self::Session> {
        Ok(FaultySession {
            inner: self.inner.begin().await?,
            plan: self.plan.clone(),
        })
    }
}

impl<S: TargetSession> TargetSession for FaultySession<S> {
    fn stages_before_lock(&self) -> bool {
        self.inner.stages_before_lock()
    }
    async fn lock_target(&mut self, target_identity: &[u8; 32]) -> Result<()> {
        boundary!(self, "lock_target", self.inner.lock_target(target_identity))
    }
    async fn detection_time(&mut self) -> Result<i64> {
        boundary!(self, "detection_time", self.inner.detection_time())
    }
    async fn read_state(&mut self, k: &str, t: &[u8; 32]) -> Result<StateView> {
        boundary!(self, "read_state", self.inner.read_state(k, t))
    }
    async fn read_authority(&mut self, id: &str) -> Result<Option<AuthorityRecord>> {
        boundary!(self, "read_authority", self.inner.read_authority(id))
    }
    async fn stage(&mut self, e: &SnapshotEnvelope, s: &dyn ArtifactStore) -> Result<Staged> {
        boundary!(self, "stage", self.inner.stage(e, s))
    }
    async fn populations(&mut self) -> Result<Populations> {
        boundary!(self, "populations", self.inner.populations())
    }
    async fn supersede(&mut self, t: &TransferBinding, k: &str, at: i64) -> Result<u64> {
        boundary!(self, "supersede", self.inner.supersede(t, k, at))
    }
    async fn apply(&mut self, step: ApplyStep, at: i64) -> Result<u64> {
        let name = match step {
            ApplyStep::UpdateChanged => "apply_update_changed",
            ApplyStep::Reactivate => "apply_reactivate",
            ApplyStep::Insert => "apply_insert",
            ApplyStep::Missing => "apply_missing",
        };
        let n = self.plan.enter(name);
        match self.plan.fault {
            Fault::At(k, When::Before) if k == n => Err(FaultPlan::injected(name)),
            Fault::At(k, When::After) if k == n => {
                let _ = self.inner.apply(step, at).await;
                Err(FaultPlan::injected(name))
            }
            _ => self.inner.apply(step, at).await,
        }
    }
    async fn parity(&mut self) -> Result<Parity> {
        boundary!(self, "parity", self.inner.parity())
    }
    async fn cas_checkpoint(&mut self, cas: &CheckpointCas, at: i64) -> Result<bool> {
        boundary!(self, "cas_checkpoint", self.inner.cas_checkpoint(cas, at))
    }
    async fn insert_receipt(&mut self, r: &CommitReceipt) -> Result<()> {
        boundary!(self, "insert_receipt", self.inner.insert_receipt(r))
    }
    async fn consume_authority(&mut self, c: &Consumption, at: i64) -> Result<()> {
        boundary!(
            self,
            "consume_authority",
            self.inner.consume_authority(c, at)
        )
    }
    async fn record_run(&mut self, run: &RunRecord) -> Result<()> {
        boundary!(self, "record_run", self.inner.record_run(run))
    }
    async fn commit(self) -> Result<()> {
        let n = self.plan.enter("commit");
        match self.plan.fault {
            Fault::At(k, When::Before) if k == n => {
                let _ = self.inner.rollback().await;
                Err(FaultPlan::injected("commit"))
            }
            Fault::At(k, When::After) if k == n => {
                self.inner.commit().await?;
                Err(FaultPlan::injected("commit acknowledgement"))
            }
            Fault::LoseCommitAck => {
                self.inner.commit().await?;
                Err(FaultPlan::injected("commit acknowledgement"))
            }
            _ => self.inner.commit().await,
        }
    }
    async fn rollback(self) -> Result<()> {
        self.inner.rollback().await
    }
}
