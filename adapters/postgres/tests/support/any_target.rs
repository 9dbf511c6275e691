//! One target port over either dialect, so a suite drives PostgreSQL and SQL Server through the
//! same engine calls (and the same fault harness) without knowing which one it has.

use dpone_adapter_mssql::target::{MssqlSession, MssqlTarget};
use dpone_adapter_postgres::target::{PgSession, PgTarget};
use dpone_engine_xmin::Result;
use dpone_engine_xmin::artifact::ArtifactStore;
use dpone_engine_xmin::envelope::SnapshotEnvelope;
use dpone_engine_xmin::ports::{
    ApplyStep, CheckpointCas, Parity, Populations, RunRecord, Staged, StateView, TargetPort,
    TargetSession,
};
use dpone_engine_xmin::state::{AuthorityRecord, CommitReceipt, Consumption, SourceState};
use dpone_policy_model::guard::TransferBinding;

/// A target port of either dialect (a handful per test: size is no concern).
#[allow(clippy::large_enum_variant)]
pub enum AnyTarget {
    /// PostgreSQL.
    Postgres(PgTarget),
    /// SQL Server.
    SqlServer(MssqlTarget),
}

/// The run transaction of either dialect.
#[allow(clippy::large_enum_variant)]
pub enum AnySession {
    /// PostgreSQL.
    Postgres(PgSession),
    /// SQL Server.
    SqlServer(MssqlSession),
}

macro_rules! each {
    ($self:expr, $t:ident => $body:expr) => {
        match $self {
            AnyTarget::Postgres($t) => $body,
            AnyTarget::SqlServer($t) => $body,
        }
    };
}

macro_rules! each_session {
    ($self:expr, $t:ident => $body:expr) => {
        match $self {
            AnySession::Postgres($t) => $body,
            AnySession::SqlServer($t) => $body,
        }
    };
}

impl TargetPort for AnyTarget {
    type Session = AnySession;

    async fn preflight(&mut self) -> Result<()> {
        each!(self, t => t.preflight().await)
    }
    async fn read_state(&mut self, state_key: &str) -> Result<Option<SourceState>> {
        each!(self, t => t.read_state(state_key).await)
    }
    async fn receipt_by_invocation(
        &mut self,
        invocation_id: &str,
        state_key: &str,
    ) -> Result<Option<CommitReceipt>> {
        each!(self, t => t.receipt_by_invocation(invocation_id, state_key).await)
    }
    async fn receipt_by_load(&mut self, load_id: &str) -> Result<Option<CommitReceipt>> {
        each!(self, t => t.receipt_by_load(load_id).await)
    }
    async fn receipts(&mut self, state_key: &str, limit: u32) -> Result<Vec<CommitReceipt>> {
        each!(self, t => t.receipts(state_key, limit).await)
    }
    async fn read_authority(&mut self, authority_id: &str) -> Result<Option<AuthorityRecord>> {
        each!(self, t => t.read_authority(authority_id).await)
    }
    async fn record_failed_run(&mut self, run: &RunRecord) -> Result<()> {
        each!(self, t => t.record_failed_run(run).await)
    }
    async fn begin(&mut self) -> Result<AnySession> {
        Ok(match self {
            AnyTarget::Postgres(t) => AnySession::Postgres(t.begin().await?),
            AnyTarget::SqlServer(t) => AnySession::SqlServer(t.begin().await?),
        })
    }
}

impl TargetSession for AnySession {
    fn stages_before_lock(&self) -> bool {
        each_session!(self, t => t.stages_before_lock())
    }
    async fn lock_target(&mut self, target_identity: &[u8; 32]) -> Result<()> {
        each_session!(self, s => s.lock_target(target_identity).await)
    }
    async fn detection_time(&mut self) -> Result<i64> {
        each_session!(self, s => s.detection_time().await)
    }
    async fn read_state(
        &mut self,
        state_key: &str,
        target_identity: &[u8; 32],
    ) -> Result<StateView> {
        each_session!(self, s => s.read_state(state_key, target_identity).await)
    }
    async fn read_authority(&mut self, authority_id: &str) -> Result<Option<AuthorityRecord>> {
        each_session!(self, s => s.read_authority(authority_id).await)
    }
    async fn stage(
        &mut self,
        envelope: &SnapshotEnvelope,
        store: &dyn ArtifactStore,
    ) -> Result<Staged> {
        each_session!(self, s => s.stage(envelope, store).await)
    }
    async fn populations(&mut self) -> Result<Populations> {
        each_session!(self, s => s.populations().await)
    }
    async fn supersede(
        &mut self,
        transfer: &TransferBinding,
        new_state_key: &str,
        at_micros: i64,
    ) -> Result<u64> {
        each_session!(self, s => s.supersede(transfer, new_state_key, at_micros).await)
    }
    async fn apply(&mut self, step: ApplyStep, at_micros: i64) -> Result<u64> {
        each_session!(self, s => s.apply(step, at_micros).await)
    }
    async fn parity(&mut self) -> Result<Parity> {
        each_session!(self, s => s.parity().await)
    }
    async fn cas_checkpoint(&mut self, cas: &CheckpointCas, at_micros: i64) -> Result<bool> {
        each_session!(self, s => s.cas_checkpoint(cas, at_micros).await)
    }
    async fn insert_receipt(&mut self, receipt: &CommitReceipt) -> Result<()> {
        each_session!(self, s => s.insert_receipt(receipt).await)
    }
    async fn consume_authority(&mut self, consumption: &Consumption, at_micros: i64) -> Result<()> {
        each_session!(self, s => s.consume_authority(consumption, at_micros).await)
    }
    async fn record_run(&mut self, run: &RunRecord) -> Result<()> {
        each_session!(self, s => s.record_run(run).await)
    }
    async fn commit(self) -> Result<()> {
        each_session!(self, s => s.commit().await)
    }
    async fn rollback(self) -> Result<()> {
        each_session!(self, s => s.rollback().await)
    }
}
