//! Deterministic identities, exactly as spec 000 ("Deterministic identity and pre-source
//! fencing") derives them, over the canonical encoding of [`super::hash`].
//!
//! | identity | derivation (domain; fields) |
//! |---|---|
//! | `target_key` | `dpone.clickhouse.target-key.v1; cluster, database, target` |
//! | `operation_id` | `dpone.clickhouse.operation-id.v1; protocol_version, scheduler_invocation, target_key, normalized_plan_digest` |
//! | `member_id` | `dpone.clickhouse.member-id.v1; u32 shard_num, u32 replica_num` |
//! | `schema_digest` | `dpone.clickhouse.schema.v1; u64 column_count, (name, type)…` |
//! | `generation_id` | `dpone.clickhouse.generation-id.v1; operation_id, artifact_sha256, schema_digest, u64 row_count` |
//! | `inventory_digest` | `dpone.clickhouse.inventory.v1; u64 n, (u32 shard, u32 replica, u8 internal_replication, endpoint_digest)…` sorted by (shard, replica) |
//! | `query_digest` | `dpone.clickhouse.ddl.v1; kind, cluster, database, names…, token` |
//!
//! Worker try numbers, host ordering, endpoint text and random values never enter
//! `target_key`, `operation_id`, `member_id` or `generation_id`. The candidate name is
//! `bounded(target + "__dpone_ext_" + operation_id[..16])`, at most
//! [`CANDIDATE_NAME_MAX_BYTES`] bytes: the target is cut at a character boundary so the suffix
//! always survives whole.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::hash::{Digest, IdentityHasher, Token};
use super::schema::Schema;

/// The protocol version bound into every operation id (the external authority schema).
pub const PROTOCOL_VERSION: &str = super::record::EXTERNAL_AUTHORITY_SCHEMA;

/// Longest candidate name, in bytes.
pub const CANDIDATE_NAME_MAX_BYTES: usize = 128;

/// The candidate-name infix.
pub const CANDIDATE_INFIX: &str = "__dpone_ext_";

/// Hex characters of the operation id in a candidate name.
pub const CANDIDATE_OPERATION_PREFIX: usize = 16;

/// Longest accepted table, database or cluster name, in bytes.
pub const NAME_MAX_BYTES: usize = 200;

macro_rules! digest_id {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Digest);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0.hex_prefix(16))
            }
        }
    };
}

digest_id!(
    /// `H(cluster, database, target)`: the authority slot key shared with V1 records.
    TargetKey
);
digest_id!(
    /// `H(protocol_version, scheduler_invocation, target_key, normalized_plan_digest)`.
    OperationId
);
digest_id!(
    /// `H(shard_num, replica_num)`: the opaque member id used in all evidence.
    MemberId
);
digest_id!(
    /// `H(operation_id, artifact_sha256, schema_digest, row_count)`: one logical generation.
    GenerationId
);

/// Checks a cluster, database or table name: 1..=[`NAME_MAX_BYTES`] bytes, no control
/// characters. (Adapters quote identifiers; this only bounds what reaches them.)
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= NAME_MAX_BYTES && !name.chars().any(char::is_control)
}

/// `target_key = H(cluster, database, target)`.
pub fn target_key(cluster: &str, database: &str, target: &str) -> TargetKey {
    TargetKey(
        IdentityHasher::new("dpone.clickhouse.target-key.v1")
            .str(cluster)
            .str(database)
            .str(target)
            .finish(),
    )
}

/// `operation_id = H(protocol_version, scheduler_invocation, target_key, normalized_plan_digest)`.
pub fn operation_id(
    scheduler_invocation: &str,
    target_key: &TargetKey,
    plan_digest: &Digest,
) -> OperationId {
    OperationId(
        IdentityHasher::new("dpone.clickhouse.operation-id.v1")
            .str(PROTOCOL_VERSION)
            .str(scheduler_invocation)
            .digest(&target_key.0)
            .digest(plan_digest)
            .finish(),
    )
}

/// `member_id = H(shard_num, replica_num)`.
pub fn member_id(shard_num: u32, replica_num: u32) -> MemberId {
    MemberId(
        IdentityHasher::new("dpone.clickhouse.member-id.v1")
            .u32(shard_num)
            .u32(replica_num)
            .finish(),
    )
}

/// `candidate_name = bounded(target + "__dpone_ext_" + operation_id_prefix)`.
pub fn candidate_name(target: &str, operation: &OperationId) -> String {
    let suffix = format!(
        "{CANDIDATE_INFIX}{}",
        operation.0.hex_prefix(CANDIDATE_OPERATION_PREFIX)
    );
    let room = CANDIDATE_NAME_MAX_BYTES - suffix.len();
    let mut cut = target.len().min(room);
    while !target.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &target[..cut])
}

/// `schema_digest`: column names and exact type names, in declared order.
pub fn schema_digest(schema: &Schema) -> Digest {
    let mut h = IdentityHasher::new("dpone.clickhouse.schema.v1").u64(schema.columns.len() as u64);
    for c in &schema.columns {
        h = h.str(&c.name).str(&c.type_name);
    }
    h.finish()
}

/// `generation_id = H(operation_id, artifact_sha256, schema_digest, row_count)`.
pub fn generation_id(
    operation: &OperationId,
    artifact_sha256: &Digest,
    schema_digest: &Digest,
    row_count: u64,
) -> GenerationId {
    GenerationId(
        IdentityHasher::new("dpone.clickhouse.generation-id.v1")
            .digest(&operation.0)
            .digest(artifact_sha256)
            .digest(schema_digest)
            .u64(row_count)
            .finish(),
    )
}

/// One inventory row as it enters the inventory digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InventoryEntry {
    /// `system.clusters.shard_num`.
    pub shard_num: u32,
    /// `system.clusters.replica_num`.
    pub replica_num: u32,
    /// `system.clusters.internal_replication`.
    pub internal_replication: bool,
    /// SHA-256 of the member's endpoint as the adapter sees it (never the endpoint itself).
    pub endpoint_digest: Digest,
}

/// `inventory_digest` over rows sorted by (shard_num, replica_num).
pub fn inventory_digest(entries: &[InventoryEntry]) -> Digest {
    let mut sorted: Vec<&InventoryEntry> = entries.iter().collect();
    sorted.sort_by_key(|e| (e.shard_num, e.replica_num, e.endpoint_digest));
    let mut h = IdentityHasher::new("dpone.clickhouse.inventory.v1").u64(sorted.len() as u64);
    for e in sorted {
        h = h
            .u32(e.shard_num)
            .u32(e.replica_num)
            .bytes(&[u8::from(e.internal_replication)])
            .digest(&e.endpoint_digest);
    }
    h.finish()
}

/// One cluster DDL statement, structured (adapters render the SQL).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterStatement {
    /// `EXCHANGE TABLES db.target AND db.candidate ON CLUSTER c`.
    Exchange {
        /// Database.
        database: String,
        /// Target table.
        target: String,
        /// Candidate table.
        candidate: String,
    },
    /// `RENAME TABLE db.candidate TO db.target ON CLUSTER c`.
    Rename {
        /// Database.
        database: String,
        /// Candidate table (renamed from).
        candidate: String,
        /// Target table (renamed to).
        target: String,
    },
    /// `DROP TABLE db.name ON CLUSTER c SYNC`.
    Drop {
        /// Database.
        database: String,
        /// Table to drop.
        name: String,
    },
}

impl ClusterStatement {
    /// `exchange`, `rename` or `drop`.
    pub fn kind(&self) -> DdlKind {
        match self {
            Self::Exchange { .. } => DdlKind::Exchange,
            Self::Rename { .. } => DdlKind::Rename,
            Self::Drop { .. } => DdlKind::Drop,
        }
    }
}

/// The kind of a bound cluster DDL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DdlKind {
    /// `EXCHANGE TABLES` (existing target).
    Exchange,
    /// `RENAME TABLE` (absent target).
    Rename,
    /// `DROP TABLE` (cleanup).
    Drop,
}

/// The normalized query digest of a statement bound to one correlation token.
pub fn query_digest(cluster: &str, statement: &ClusterStatement, token: &Token) -> Digest {
    let h = IdentityHasher::new("dpone.clickhouse.ddl.v1");
    let h = match statement {
        ClusterStatement::Exchange {
            database,
            target,
            candidate,
        } => h
            .str("exchange")
            .str(cluster)
            .str(database)
            .str(target)
            .str(candidate),
        ClusterStatement::Rename {
            database,
            candidate,
            target,
        } => h
            .str("rename")
            .str(cluster)
            .str(database)
            .str(candidate)
            .str(target),
        ClusterStatement::Drop { database, name } => {
            h.str("drop").str(cluster).str(database).str(name)
        }
    };
    h.bytes(&token.0).finish()
}

/// The deterministic query id of a correlated cluster DDL (`dpone-<kind>-<token>`), which the
/// DDL queue keeps as `initial_query_id`.
pub fn ddl_query_id(kind: DdlKind, token: &Token) -> String {
    let k = match kind {
        DdlKind::Exchange => "exchange",
        DdlKind::Rename => "rename",
        DdlKind::Drop => "drop",
    };
    format!("dpone-{k}-{token}")
}

/// The deterministic `query_id` and `insert_deduplication_token` of one member load.
pub fn load_tokens(generation: &GenerationId, member: &MemberId, rebuild: u32) -> (String, String) {
    let g = generation.0.hex_prefix(32);
    let m = member.0.hex_prefix(16);
    (
        format!("dpone-load-{g}-{m}-{rebuild}"),
        format!("dpone-{g}-{m}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_deterministic_and_distinct() {
        // Unit: same inputs, same ids; any field change, another id.
        let k = target_key("c", "db", "t");
        assert_eq!(k, target_key("c", "db", "t"));
        assert_ne!(k, target_key("c", "db", "t2"));
        assert_ne!(k, target_key("cd", "b", "t"));
        let p = Digest::of(b"plan");
        let op = operation_id("run-1", &k, &p);
        assert_eq!(op, operation_id("run-1", &k, &p));
        assert_ne!(op, operation_id("run-2", &k, &p));
        assert_ne!(op, operation_id("run-1", &k, &Digest::of(b"plan2")));
        assert_ne!(member_id(1, 2), member_id(2, 1));
        let g = generation_id(&op, &Digest::of(b"a"), &Digest::of(b"s"), 3);
        assert_ne!(
            g,
            generation_id(&op, &Digest::of(b"a"), &Digest::of(b"s"), 4)
        );
    }

    #[test]
    fn identities_match_pinned_values() {
        // Unit: pinned values computed independently from the documented encoding, so an
        // accidental change of the encoding is caught.
        assert_eq!(
            member_id(1, 1).to_string(),
            "8fc7f440d8a2c6c5211ae33430174e47ef6e8c00f82aa5806a0b8cc4e9faf29d"
        );
        assert_eq!(
            target_key("analytics_cluster", "db", "target_table").to_string(),
            "b73c2e2bd67e380082199d2c49694ccffb522495118a8e8bcab6b5370fe7978f"
        );
    }

    #[test]
    fn candidate_name_is_bounded() {
        let op = operation_id("x", &target_key("c", "d", "t"), &Digest::of(b""));
        let short = candidate_name("orders", &op);
        assert!(short.starts_with("orders__dpone_ext_"));
        assert_eq!(short.len(), "orders".len() + CANDIDATE_INFIX.len() + 16);
        let long = candidate_name(&"é".repeat(150), &op);
        assert!(long.len() <= CANDIDATE_NAME_MAX_BYTES);
        assert!(long.ends_with(&op.0.hex_prefix(16)));
    }

    #[test]
    fn inventory_digest_ignores_row_order() {
        let e = |s, r| InventoryEntry {
            shard_num: s,
            replica_num: r,
            internal_replication: false,
            endpoint_digest: Digest::of(&[s as u8, r as u8]),
        };
        assert_eq!(
            inventory_digest(&[e(1, 1), e(1, 2)]),
            inventory_digest(&[e(1, 2), e(1, 1)])
        );
        assert_ne!(
            inventory_digest(&[e(1, 1), e(1, 2)]),
            inventory_digest(&[e(1, 1)])
        );
    }
}
