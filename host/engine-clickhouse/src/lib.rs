//! ClickHouse external-replication full-refresh publication (spec 000).
//!
//! One-shard clusters whose members hold independent, non-replicated `*MergeTree` tables
//! (`internal_replication = false`) get one immutable artifact staged directly to every member
//! exactly once, then one fenced, correlated `ON CLUSTER` publication that succeeds only when
//! every member holds the desired generation.
//!
//! - [`contracts`]: deterministic identities, the external authority record and receipt, the
//!   minimal V1 record, strict codecs. Pure data.
//! - [`canonical`]: the canonical typed-row encoding and content digest.
//! - [`admission`]: the host's static rules (engine allow-list, type profile, sort keys) that
//!   `check`, `plan` and `run` apply beside the admission component's static decision.
//! - [`ports`]: the traits the coordinator drives (authority store, inventory, member catalog,
//!   cluster DDL, artifact source, admission gate, environment).
//! - [`Coordinator`]: the phase machine LOCKED → STAGING → STAGED → PUBLICATION_DISPATCHING →
//!   COMMITTED → CLEANUP_DISPATCHING → COMPLETED (and ABORTED), plus read-only [`Coordinator::status`].
//! - [`synthetic`]: an in-process N-member cluster behind the same ports, with fault injection.
//!
//! Architecture invariant: this crate knows nothing of wasmtime, database drivers or the
//! network. Admission reaches the policy component only through [`ports::AdmissionGate`].

pub mod admission;
pub mod canonical;
pub mod contracts;
mod coordinator;
mod error;
pub mod ports;
pub mod synthetic;

pub use coordinator::resolve;
pub use coordinator::{
    Coordinator, CoordinatorConfig, MemberObservation, MemberTimings, OperationRequest, Ports,
    RecordSlot, RecoveryAction, RunOutcome, RunTimings, SlotStatus, StatusReport,
};
pub use error::{EngineError, codes};
