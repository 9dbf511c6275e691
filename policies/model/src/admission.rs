//! ClickHouse cluster full-refresh admission (`dpone:policy/admission`).

use crate::types::Reason;
use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// Cluster replication mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplicationMode {
    /// Replicated*MergeTree with `internal_replication = true` (default).
    Internal,
    /// Independent non-replicated *MergeTree with `internal_replication = false`.
    External,
    /// One server, no cluster block: local publication (`ddl_scope` `local`).
    Local,
}

/// Static facts from the manifest, as parsed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticFacts {
    /// `cluster.name`; empty when absent.
    pub cluster_name: String,
    /// `cluster.ddl_scope`.
    pub ddl_scope: Option<String>,
    /// `cluster.replication_mode`; `None` means `internal`.
    pub replication_mode: Option<String>,
    /// Table engine of the target.
    pub engine: String,
    /// Bound on the source artifact.
    pub max_source_bytes: Option<i64>,
    /// Database of the target table.
    pub target_database: String,
    /// Database where candidates are staged.
    pub staging_database: String,
    /// Engine of a configured access table, if any.
    pub access_table_engine: Option<String>,
}

/// The replication decision printed by `check` and `plan`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicationDecision {
    /// `cluster`, or `local` for one server.
    pub requested: String,
    /// `cluster_internal`, `cluster_external` or `local`.
    pub selected: String,
    /// Selected mode.
    pub replication_mode: ReplicationMode,
    /// Runtime inventory admission must still pass.
    pub runtime_admission_required: bool,
    /// No fallback to local publication.
    pub no_fallback: bool,
}

/// Static admission decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StaticDecision {
    /// The manifest is admissible.
    Admitted(ReplicationDecision),
    /// Every blocker found.
    Blocked(Vec<Reason>),
}

/// One inventory row joined with what the host observed on that member.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberFacts {
    /// Opaque member id derived from (shard_num, replica_num).
    pub member_id: String,
    /// `system.clusters.shard_num`.
    pub shard_num: u32,
    /// `system.clusters.replica_num`.
    pub replica_num: u32,
    /// `system.clusters.internal_replication`.
    pub internal_replication: bool,
    /// Engine of the target database on this member.
    pub database_engine: String,
    /// Engine of the existing target table; `None` when absent.
    pub target_engine: Option<String>,
    /// The KeeperMap authority facade answered on this member.
    pub keeper_map_available: bool,
    /// A direct member-local connection was opened.
    pub direct_connection: bool,
}

/// State of a V1 authority record under the same target key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum V1AuthorityState {
    /// No V1 record.
    Absent,
    /// A completed V1 record.
    Completed,
    /// An unresolved V1 record.
    Unresolved,
}

/// One column of the target schema.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnFacts {
    /// Column name.
    pub name: String,
    /// ClickHouse type name as `system.columns.type` reports it.
    pub type_name: String,
}

/// Facts for runtime admission.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeFacts {
    /// The static facts, re-checked at run time.
    pub static_facts: StaticFacts,
    /// Every inventory row, sorted by (shard_num, replica_num).
    pub members: Vec<MemberFacts>,
    /// False when any member could not be observed.
    pub inventory_complete: bool,
    /// Target schema.
    pub columns: Vec<ColumnFacts>,
    /// V1 authority record state.
    pub v1_authority: V1AuthorityState,
}

/// An admitted member.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdmittedMember {
    /// Opaque member id.
    pub member_id: String,
    /// Shard number.
    pub shard_num: u32,
    /// Replica number.
    pub replica_num: u32,
}

/// A successful runtime admission.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeAdmission {
    /// Selected mode.
    pub replication_mode: ReplicationMode,
    /// Members in stable member-id order.
    pub members: Vec<AdmittedMember>,
}

/// Runtime admission decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeDecision {
    /// The cluster is admitted.
    Admitted(RuntimeAdmission),
    /// Every blocker found.
    Blocked(Vec<Reason>),
}
