//! The engine's ports: what the coordinator needs from the world, as traits.
//!
//! Adapters implement them (the `clickhouse` crate over HTTP in `dpone-adapter-clickhouse`, the
//! in-process [`crate::synthetic`] cluster in tests). Every port method is one observable step;
//! none retries, reconnects or replays on its own. A failure is a [`PortError`] whose `class` is
//! a stable, redacted code: adapters never put hostnames, credentials, SQL values or paths into
//! it.

use std::io::Read;

use dpone_policy_model::admission::{RuntimeDecision, RuntimeFacts, StaticDecision, StaticFacts};

use crate::canonical::BucketDigest;

use crate::contracts::{
    AdmissionEvidence, ArtifactIdentity, ClusterStatement, Column, Digest, MemberId, Schema,
    TargetKey, Token, Uuid,
};

/// How a port call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortErrorKind {
    /// The request may or may not have taken effect (lost response, timeout after send).
    Ambiguous,
    /// The request was refused and had no effect.
    Rejected,
    /// The peer could not be reached; the request was not sent.
    Unavailable,
    /// The run was cancelled or the process is stopping: stop at once, do nothing more.
    Interrupted,
}

/// A port failure: a kind and a stable, redacted class code.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind:?} ({class})")]
pub struct PortError {
    /// Kind.
    pub kind: PortErrorKind,
    /// Stable code such as `DPONE_CLICKHOUSE_HTTP_TIMEOUT`; never free text.
    pub class: &'static str,
}

impl PortError {
    /// A port error.
    pub fn new(kind: PortErrorKind, class: &'static str) -> Self {
        Self { kind, class }
    }

    /// An ambiguous outcome.
    pub fn ambiguous(class: &'static str) -> Self {
        Self::new(PortErrorKind::Ambiguous, class)
    }

    /// A rejected request.
    pub fn rejected(class: &'static str) -> Self {
        Self::new(PortErrorKind::Rejected, class)
    }

    /// An unreachable peer.
    pub fn unavailable(class: &'static str) -> Self {
        Self::new(PortErrorKind::Unavailable, class)
    }

    /// The run is interrupted.
    pub fn interrupted() -> Self {
        Self::new(PortErrorKind::Interrupted, "DPONE_INTERRUPTED")
    }
}

/// The class an [`ArtifactSource`] reports when the source exceeds its byte bound.
pub const ARTIFACT_TOO_LARGE: &str = "DPONE_ARTIFACT_TOO_LARGE";

/// The class an [`ArtifactSource`] reports when stored bytes no longer match their identity.
pub const ARTIFACT_TAMPERED: &str = "DPONE_ARTIFACT_TAMPERED";

/// The class a [`MemberCatalog::probe`] reports when the member's connection reaches a server
/// that does not prove itself the configured replica (another replica, several, or none).
pub const MEMBER_IDENTITY_UNPROVEN: &str = "DPONE_CLICKHOUSE_CLUSTER_MEMBER_IDENTITY_UNPROVEN";

/// The class a [`MemberCatalog::sync_replica`] reports when the replica did not process its
/// replication queue within the bound (`SYSTEM SYNC REPLICA` timed out): retryable.
pub const REPLICA_NOT_CONVERGED: &str = "DPONE_CLICKHOUSE_REPLICA_NOT_CONVERGED";

/// The class a content proof ([`MemberCatalog::rowset_buckets`], [`MemberCatalog::read_rows`])
/// reports when the member stopped it at the verification-time budget the adapter enforces.
pub const PROOF_BUDGET_EXCEEDED: &str = "DPONE_CLICKHOUSE_PROOF_BUDGET_EXCEEDED";

/// A versioned authority value as the store holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned {
    /// Keeper version (`_version`): 0 after insert, +1 per applied update.
    pub version: u64,
    /// The encoded record.
    pub value: String,
}

/// The KeeperMap authority store. Semantics the engine relies on (and checks by read-back):
/// `insert` of an existing key fails; `update` with a stale `expected_version` is a **silent
/// no-op** that still returns `Ok`; an applied update sets the version to `expected + 1`.
pub trait AuthorityStore {
    /// The slot's current value.
    fn read(&self, key: &TargetKey) -> Result<Option<Versioned>, PortError>;
    /// Strict insert at version 0.
    fn insert(&self, key: &TargetKey, value: &str) -> Result<(), PortError>;
    /// Version-checked update.
    fn update(&self, key: &TargetKey, expected_version: u64, value: &str) -> Result<(), PortError>;
}

/// One `system.clusters` row for the declared cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InventoryRow {
    /// `shard_num`.
    pub shard_num: u32,
    /// `replica_num`.
    pub replica_num: u32,
    /// `internal_replication`.
    pub internal_replication: bool,
    /// SHA-256 of the endpoint (host and port) as the adapter sees it; never the endpoint.
    pub endpoint_digest: Digest,
}

/// The complete `system.clusters` inventory of one cluster.
pub trait InventoryPort {
    /// Every row for `cluster`, sorted by (shard_num, replica_num). `complete` is false when
    /// the adapter could not read the whole inventory.
    fn observe(&self, cluster: &str) -> Result<(Vec<InventoryRow>, bool), PortError>;
}

/// What a member reports about its database and target before any mutation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberProbe {
    /// Engine of the target database (e.g. `Atomic`).
    pub database_engine: String,
    /// The KeeperMap authority facade answered on this member.
    pub keeper_map_available: bool,
    /// Engine of the existing target; none when absent.
    pub target_engine: Option<String>,
    /// The member has `formatRow`, which the rowset content proof's member query calls.
    pub rowset_proof_supported: bool,
    /// The full definition of the member's KeeperMap authority facade (`engine_full`: the
    /// Keeper path and its arguments), when it has one: every member's must be the same, or
    /// the members do not share one authority.
    pub authority_facade: Option<String>,
}

/// One table observed on one member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableObservation {
    /// Physical UUID.
    pub uuid: Uuid,
    /// Table engine name.
    pub engine: String,
    /// Columns in table order.
    pub columns: Vec<Column>,
    /// `count()`.
    pub row_count: u64,
}

/// Everything needed to create a candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandidateSpec<'a> {
    /// Database (same as the target's).
    pub database: &'a str,
    /// Candidate name.
    pub name: &'a str,
    /// Exact physical UUID to create it with.
    pub uuid: Uuid,
    /// Columns.
    pub schema: &'a Schema,
    /// Table engine (non-replicated `*MergeTree`).
    pub engine: &'a str,
    /// `ORDER BY` columns (empty means `tuple()`).
    pub order_by: &'a [String],
}

/// The deterministic tokens of one load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadTokens {
    /// `query_id`.
    pub query_id: String,
    /// `insert_deduplication_token`.
    pub dedup_token: String,
}

/// A member-local staging catalog over one direct member connection. Mutations are one-shot:
/// generic retry, redirect, reconnect replay and async insert are disabled.
pub trait MemberCatalog {
    /// Database engine, KeeperMap availability and target engine on `member`.
    fn probe(
        &self,
        member: &MemberId,
        database: &str,
        target: &str,
    ) -> Result<MemberProbe, PortError>;
    /// The table `database.name` on `member`, if it exists.
    fn observe_table(
        &self,
        member: &MemberId,
        database: &str,
        name: &str,
    ) -> Result<Option<TableObservation>, PortError>;
    /// Streams `database.name` as `RowBinary` of `schema`'s columns, in declared column order,
    /// refusing when the table's UUID is not `uuid`.
    fn read_rows<'a>(
        &'a self,
        member: &MemberId,
        database: &str,
        name: &str,
        uuid: Uuid,
        schema: &Schema,
    ) -> Result<Box<dyn Read + 'a>, PortError>;
    /// The rowset digest's buckets of `database.name` ([`crate::canonical::rowset`]), computed
    /// by the member over `schema`'s columns in declared order: one entry per non-empty
    /// bucket, ascending. Refuses when the table's UUID is not `uuid`. The member sends 256
    /// small rows instead of the table; the engine checks the reply's shape.
    fn rowset_buckets(
        &self,
        member: &MemberId,
        database: &str,
        name: &str,
        uuid: Uuid,
        schema: &Schema,
    ) -> Result<Vec<BucketDigest>, PortError>;
    /// `CREATE TABLE … UUID` with the exact UUID.
    fn create_candidate(
        &self,
        member: &MemberId,
        spec: &CandidateSpec<'_>,
    ) -> Result<(), PortError>;
    /// One `INSERT … FORMAT RowBinary` of the artifact into the candidate with UUID `uuid`.
    fn load(
        &self,
        member: &MemberId,
        database: &str,
        name: &str,
        uuid: Uuid,
        artifact: &mut dyn Read,
        tokens: &LoadTokens,
    ) -> Result<(), PortError>;
    /// Internal mode: waits, at most `bound`, until the replica `member` of the replicated table
    /// `database.name` with UUID `uuid` has fetched every part the replication log holds
    /// (`SYSTEM SYNC REPLICA`). A replica that is still behind after the bound reports
    /// [`REPLICA_NOT_CONVERGED`]; a table of another UUID, or not replicated, is refused. Never
    /// mutates the table. Default: refused (a catalog without replicated tables).
    fn sync_replica(
        &self,
        _member: &MemberId,
        _database: &str,
        _name: &str,
        _uuid: Uuid,
        _bound: std::time::Duration,
    ) -> Result<(), PortError> {
        Err(PortError::rejected(
            "DPONE_CLICKHOUSE_SYNC_REPLICA_UNSUPPORTED",
        ))
    }
    /// Drops `database.name` only if its UUID is `uuid`.
    fn drop_exact(
        &self,
        member: &MemberId,
        database: &str,
        name: &str,
        uuid: Uuid,
    ) -> Result<(), PortError>;
    /// The physical fingerprint of `database.name` with UUID `uuid`: a digest of the table's
    /// UUID and its complete set of active data parts (each part's name, checksum of all its
    /// files and rows), such that every write that changes what a `SELECT` returns (an insert,
    /// a mutation, a lightweight delete, an attached or replaced part) changes it. `None` when
    /// the adapter cannot give one that strong: the table is absent or another UUID, a
    /// mutation is still unfinished (it may already apply on read), or the engine is not
    /// supported. The engine then proves content by a full read. Default: `None`.
    fn parts_fingerprint(
        &self,
        _member: &MemberId,
        _database: &str,
        _name: &str,
        _uuid: Uuid,
    ) -> Result<Option<Digest>, PortError> {
        Ok(None)
    }
}

/// The correlation bound to one cluster DDL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DdlCorrelation {
    /// Random token.
    pub token: Token,
    /// Deterministic query id, bound as both the query's `query_id` and its `log_comment`
    /// setting; the queue is correlated by `log_comment` (`system.distributed_ddl_queue` has
    /// no initiator query id).
    pub query_id: String,
    /// Normalized query digest.
    pub query_digest: Digest,
}

/// A host's state for one DDL queue entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueHostStatus {
    /// Not yet picked up.
    Queued,
    /// Executing.
    Active,
    /// Finished without exception.
    Finished,
    /// Finished with an exception.
    Failed,
}

/// One DDL queue entry, correlated by `log_comment`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueEntry {
    /// Queue entry name (e.g. `query-0000000042`).
    pub entry: String,
    /// Per-member status, mapped by the adapter from host rows; unmapped hosts count in
    /// `unmapped_hosts`.
    pub members: Vec<(MemberId, QueueHostStatus)>,
    /// Hosts the adapter could not map to an admitted member.
    pub unmapped_hosts: u32,
}

/// Cluster-scoped DDL: dispatch once, observe by correlation.
pub trait ClusterDdl {
    /// Sends exactly one `… ON CLUSTER` statement with `distributed_ddl_output_mode = 'throw'`,
    /// `skip_unavailable_shards = 0` and a bound `log_comment`. Never retried by the adapter.
    fn dispatch(
        &self,
        cluster: &str,
        statement: &ClusterStatement,
        correlation: &DdlCorrelation,
    ) -> Result<(), PortError>;
    /// Queue entries of `cluster` whose `settings['log_comment']` is `log_comment` (the
    /// correlation's query id).
    fn observe_queue(&self, cluster: &str, log_comment: &str)
    -> Result<Vec<QueueEntry>, PortError>;
}

/// The replayable artifact: extracted once, sealed, reopened by identity, revalidated before
/// every member load.
pub trait ArtifactSource {
    /// Extracts the source once into a sealed artifact of `schema` in `RowBinary`, bounded by
    /// `max_bytes`.
    fn seal(&self, schema: &Schema, max_bytes: u64) -> Result<ArtifactIdentity, PortError>;
    /// [`Self::seal`], also writing to `observer`, in order and as they are stored, exactly the
    /// bytes the sealed artifact holds; a failed write to `observer` is ignored. Returns whether
    /// the bytes were observed: the engine then digests them while the source is extracted
    /// instead of reading the stored artifact again. Default: seals without observing.
    fn seal_observed(
        &self,
        schema: &Schema,
        max_bytes: u64,
        _observer: &mut dyn std::io::Write,
    ) -> Result<(ArtifactIdentity, bool), PortError> {
        self.seal(schema, max_bytes).map(|id| (id, false))
    }
    /// Re-hashes the stored artifact and checks it against `identity`.
    fn revalidate(&self, identity: &ArtifactIdentity) -> Result<(), PortError>;
    /// Opens the artifact bytes for reading.
    fn open<'a>(&'a self, identity: &ArtifactIdentity) -> Result<Box<dyn Read + 'a>, PortError>;
    /// Retention may end (after STAGED or ABORTED).
    fn release(&self, identity: &ArtifactIdentity) -> Result<(), PortError>;
}

/// A decision with the evidence of the policy that made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gated<T> {
    /// The decision.
    pub decision: T,
    /// Component and input digests.
    pub evidence: AdmissionEvidence,
}

/// Admission through the admission policy component (filled by the composition root).
pub trait AdmissionGate {
    /// Static admission.
    fn admit_static(&self, facts: &StaticFacts) -> Result<Gated<StaticDecision>, PortError>;
    /// Runtime admission over the complete inventory.
    fn admit_runtime(&self, facts: &RuntimeFacts) -> Result<Gated<RuntimeDecision>, PortError>;
}

/// Time and randomness, supplied by the host.
pub trait Environment {
    /// Unix seconds.
    fn now_unix(&self) -> i64;
    /// 16 random bytes (fence tokens, correlation tokens, candidate UUIDs).
    fn random16(&self) -> [u8; 16];
}

/// Wall clock and operating-system randomness.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemEnvironment;

impl Environment for SystemEnvironment {
    fn now_unix(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0)
    }

    fn random16(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        if getrandom::fill(&mut b).is_err() {
            // No OS randomness: still unique per call and process (time, counter, process id),
            // which is all the protocol relies on; read-back never trusts a token alone.
            static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let d = crate::contracts::IdentityHasher::new("dpone.fallback-random.v1")
                .bytes(&nanos.to_be_bytes())
                .u64(n)
                .u32(std::process::id())
                .finish();
            b.copy_from_slice(&d.0[..16]);
        }
        b
    }
}

/// Per-member progress for a terminal.
pub trait ProgressObserver {
    /// A step on one member (`member` is the opaque id).
    fn member_step(&self, member: &MemberId, step: &'static str);
    /// A phase reached.
    fn phase(&self, phase: crate::contracts::Phase);
}

/// A [`ProgressObserver`] that ignores everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl ProgressObserver for NoProgress {
    fn member_step(&self, _: &MemberId, _: &'static str) {}
    fn phase(&self, _: crate::contracts::Phase) {}
}
