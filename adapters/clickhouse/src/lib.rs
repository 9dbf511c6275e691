//! The ClickHouse adapter of the external full-refresh engine: the engine's ports over the
//! `clickhouse` crate (HTTP), plus its artifact source over the content-addressed store.
//!
//! - [`sql`]: every statement, in one module, snapshot-tested.
//! - [`ClickHouseCluster`]: inventory from `system.clusters`, KeeperMap authority CAS, direct
//!   member-local staging catalog, correlated `ON CLUSTER` DDL and `system.distributed_ddl_queue`
//!   observation, `RowBinary` streaming for the canonical content digest.
//! - [`StoreArtifactSource`]: the replayable artifact over `dpone-artifact-store`.
//!
//! Errors reaching the engine are redacted [`dpone_engine_clickhouse::ports::PortError`]s:
//! stable classes only, never server exception text, endpoints or credentials.

mod artifact;
mod cluster;
mod error;
pub mod sql;

pub use artifact::{Extract, StoreArtifactSource};
pub use cluster::{
    BodyObservation, ClickHouseCluster, ClickHouseConfig, ClickHouseEndpoint, Credential,
    MAX_CA_BUNDLE_BYTES, ObservedMember,
};
pub use error::{class, port_error};
