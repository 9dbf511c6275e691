//! An in-process synthetic cluster of N ≥ 2 independent members behind the engine's ports, with
//! one-shot fault injection at every protocol step (the spec's "mocked integration" layer).
//!
//! Each member holds tables as `RowBinary` bytes with a UUID; loads append rows, `EXCHANGE`,
//! `RENAME` and `DROP` act on names; the DDL queue keeps one entry per dispatch with a status per
//! member; the KeeperMap store has real CAS semantics, including the silent no-op on a stale
//! version. A fault fires once, at the step it names, and is then spent. Nothing here performs
//! I/O; it is deterministic given its seed.

mod cluster;
mod faults;

pub use cluster::{
    ClusterMetrics, FnGate, SyntheticArtifacts, SyntheticCluster, SyntheticEnv, TableSnapshot,
};
pub use faults::{Fault, WriteFault};
