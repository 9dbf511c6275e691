//! The protected control store of the nonproduction composition authority on PostgreSQL
//! (issue 12, §1 and §2, database side).
//!
//! The store keeps what the spec's "Shared protected ownership" and "Scope, phases and limits"
//! sections require to be protected, in reviewed, append-only tables
//! (`fixtures/nonproduction/control-store.sql`) that it verifies at run time and never creates
//! ([`catalog`]):
//!
//! - monotonic **trust revisions** per environment (policy bytes digest, root digest,
//!   revocation epoch, ceilings); restoring old policy bytes appends a new revision;
//! - **immutable original registration bytes** per grant/phase key; an identical registration
//!   reopens as history (no second membership charge, no executor permit), changed bytes
//!   refuse;
//! - **one-time qualification consumption** per run, never rebound to another grant;
//! - **pools** per environment/campaign/phase for distinct membership and attempts, rows and
//!   bytes per exact route (qualification) or per campaign (execution); no grant, policy,
//!   deployment or activation column is part of a pool key, so replacement grants never reset
//!   consumption;
//! - **reservations** (each attempt's complete finite bound, charged forever) and separately
//!   recorded **measured usage** that never frees a reservation;
//! - the **activation coordinator**: one exact request per activation;
//! - **physical enrollment**: each participant's observed identity per enrollment digest,
//!   never replaced, and the enrolled participants each claimed run was bound to.
//!
//! Protected operations run in one SERIALIZABLE transaction that re-checks the trust revision of
//! an [`port::Authenticated`] bracket, the exact original bytes, the database clock, revocation
//! and ownership ([`store`]). Serialization failures retry with a bound; a lost commit
//! acknowledgement is probed by the deterministic reservation id after the original backend has
//! ended, never assumed.
//!
//! The database itself is the backstop for a client that is compromised or bypassed: the
//! reviewed DDL's `np_backstop` `BEFORE INSERT` triggers re-check, for any writer and under the
//! same environment lock, the admission rules (registration, current trust revision, ownership,
//! registered workload, one unresolved attempt, the pool's effective ceilings) and settlements,
//! and `control-store-roles.sql` gives each runtime role (platform, scheduler, worker) INSERT on
//! only the tables its commands write ([`store::backstop_code`] maps the triggers' SQLSTATEs).
//!
//! The typed keys and values and the [`port::ControlStorePort`] trait are the nonproduction
//! engine's (`dpone_engine_nonproduction::control_store`, re-exported here as [`port`]): the
//! engine's protected admission drives the store without knowing PostgreSQL.
//!
//! Tier: the catalog contract and the typed values are unit-tested; everything else runs
//! against a real PostgreSQL server (`tests/`, `cfg(dpone_live_pg)`; the backstop and the roles
//! in `tests/backstop.rs`).

pub mod catalog;
pub mod queue;
/// The engine's port this adapter implements.
pub mod port {
    pub use dpone_engine_nonproduction::control_store::*;
}
pub mod store;

pub use port::*;
pub use store::{CommitAck, CommitBoundary, Enrolled, HonestCommit, PgControlStore, StoreEndpoint};
