//! The synthetic cluster, its artifact source, environment and admission gate.

use std::collections::BTreeMap;
use std::io::{Cursor, Read};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use dpone_policy_model::admission::{RuntimeDecision, RuntimeFacts, StaticDecision, StaticFacts};

use super::faults::{Fault, WriteFault};
use crate::canonical::BucketDigest;
use crate::canonical::rowbinary::{RowReader, row_ends};
use crate::canonical::rowset::RowsetHasher;
use crate::canonical::{ColumnType, column_types};
use crate::contracts::{
    self, AdmissionEvidence, ArtifactIdentity, ClusterStatement, Column, Digest, MemberId, Phase,
    Schema, TargetKey, Uuid,
};
use crate::ports::{
    AdmissionGate, ArtifactSource, AuthorityStore, CandidateSpec, ClusterDdl, DdlCorrelation,
    Environment, Gated, InventoryPort, InventoryRow, LoadTokens, MemberCatalog, MemberProbe,
    PortError, QueueEntry, QueueHostStatus, TableObservation, Versioned,
};

#[derive(Clone, Debug)]
struct Table {
    uuid: Uuid,
    engine: String,
    columns: Vec<Column>,
    data: Vec<u8>,
    rows: u64,
    loads: u32,
}

#[derive(Clone, Debug)]
struct Member {
    shard: u32,
    replica: u32,
    id: MemberId,
    tables: BTreeMap<(String, String), Table>,
    /// `formatRow` is available (the rowset proof).
    rowset_proof_supported: bool,
    /// The Keeper path its authority facade names.
    authority_facade: Option<String>,
}

/// One `system.distributed_ddl_queue` entry. Like the real table it carries no initiator
/// query id: only the entry name, the query's settings (of which `log_comment` correlates it)
/// and a status per host.
#[derive(Clone, Debug)]
struct QEntry {
    entry: String,
    /// `settings['log_comment']` of the initiating query.
    log_comment: String,
    statement: ClusterStatement,
    status: Vec<QueueHostStatus>,
}

/// Counters a test can assert on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClusterMetrics {
    /// Load calls.
    pub loads: u64,
    /// Most loads any single physical table received (1 means no table was ever appended to).
    pub max_loads_per_table: u32,
    /// Publication DDLs (EXCHANGE/RENAME) that reached the cluster.
    pub publication_dispatches: u64,
    /// Cleanup DDLs (DROP) that reached the cluster.
    pub cleanup_dispatches: u64,
    /// Candidate drops by exact UUID.
    pub exact_drops: u64,
    /// Authority writes that applied.
    pub cas_applied: u64,
}

/// A copy of one table for assertions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSnapshot {
    /// Physical UUID.
    pub uuid: Uuid,
    /// `RowBinary` bytes.
    pub data: Vec<u8>,
    /// Rows.
    pub rows: u64,
}

/// The shared replication log of one replicated table (by UUID): every row any replica
/// inserted, in insert order. A replica holds what it has fetched ([`Table::data`]).
#[derive(Clone, Debug, Default)]
struct ReplicationLog {
    data: Vec<u8>,
    rows: u64,
}

struct State {
    members: Vec<Member>,
    /// `internal_replication` every inventory row reports (true: a Replicated cluster).
    internal_replication: bool,
    /// One server without a cluster: DDL runs locally, and only a statement still running is
    /// observable (as in `system.processes`); there is no DDL queue.
    local: bool,
    /// Replication logs of the replicated tables, by UUID.
    replicated: BTreeMap<Uuid, ReplicationLog>,
    authority: BTreeMap<TargetKey, Versioned>,
    queue: Vec<QEntry>,
    /// Armed faults not yet spent, each with its arming index.
    faults: Vec<(usize, Fault)>,
    /// How many faults were armed.
    armed: usize,
    /// Arming indexes of the faults that took effect at least once.
    fired: std::collections::BTreeSet<usize>,
    crash_next_write: bool,
    writes: u32,
    fired_write: Option<(Phase, bool)>,
    metrics: ClusterMetrics,
    next_uuid: u64,
}

/// The in-process cluster. Implements [`AuthorityStore`], [`InventoryPort`],
/// [`MemberCatalog`] and [`ClusterDdl`].
pub struct SyntheticCluster {
    state: Mutex<State>,
    types: Vec<ColumnType>,
    columns: Vec<Column>,
}

const DB_ERR: &str = "DPONE_SYNTHETIC_REJECTED";

impl SyntheticCluster {
    /// A cluster of `members` members (shard 1, replicas 1..=members) with no tables.
    ///
    /// # Panics
    /// Never for schemas inside the canonical profile; tests pass fixed schemas.
    pub fn new(members: u32, schema: &Schema) -> Self {
        let types = column_types(schema).unwrap_or_default();
        Self {
            state: Mutex::new(State {
                members: (1..=members)
                    .map(|r| Member {
                        shard: 1,
                        replica: r,
                        id: contracts::member_id(1, r),
                        tables: BTreeMap::new(),
                        rowset_proof_supported: true,
                        authority_facade: Some(
                            "KeeperMap('/dpone/synthetic/authority') PRIMARY KEY key".into(),
                        ),
                    })
                    .collect(),
                internal_replication: false,
                local: false,
                replicated: BTreeMap::new(),
                authority: BTreeMap::new(),
                queue: Vec::new(),
                faults: Vec::new(),
                armed: 0,
                fired: std::collections::BTreeSet::new(),
                crash_next_write: false,
                writes: 0,
                fired_write: None,
                metrics: ClusterMetrics::default(),
                next_uuid: 1,
            }),
            types,
            columns: schema.columns.clone(),
        }
    }

    /// A Replicated cluster of `members` replicas of one shard (`internal_replication = true`):
    /// tables created with a `Replicated*` engine share a replication log by UUID; a load
    /// through one replica reaches the others when they sync ([`MemberCatalog::sync_replica`]).
    /// Tables [`Self::put_table`] creates are `ReplicatedMergeTree`.
    pub fn new_replicated(members: u32, schema: &Schema) -> Self {
        let c = Self::new(members, schema);
        c.lock().internal_replication = true;
        c
    }

    /// One server (local publication): one member; `dispatch` runs the statement on it at once
    /// (a [`Fault::PartialDdl`] with `executed: 0` leaves it running until [`Self::tick`]), and
    /// `observe_queue` reports only a statement still running, as a server's process list does.
    pub fn new_local(schema: &Schema) -> Self {
        let c = Self::new(1, schema);
        c.lock().local = true;
        c
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What member `idx` offers the run: `formatRow` (the rowset proof) and the definition of
    /// its authority facade (none: no facade). Every member starts with both, and one facade.
    pub fn set_capabilities(&self, idx: usize, rowset_proof: bool, facade: Option<&str>) {
        let mut s = self.lock();
        s.members[idx].rowset_proof_supported = rowset_proof;
        s.members[idx].authority_facade = facade.map(str::to_owned);
    }

    /// Member ids in (shard, replica) order.
    pub fn member_ids(&self) -> Vec<MemberId> {
        self.lock().members.iter().map(|m| m.id).collect()
    }

    /// Creates (or replaces) `database.name` on member `idx` with `RowBinary` `data`.
    pub fn put_table(&self, idx: usize, database: &str, name: &str, data: &[u8]) -> Uuid {
        let rows = row_ends(&self.types, data).map_or(0, |e| e.len() as u64);
        let mut s = self.lock();
        let uuid = synthetic_uuid(&mut s.next_uuid);
        let columns = self.columns.clone();
        let engine = if s.internal_replication {
            "ReplicatedMergeTree"
        } else {
            "MergeTree"
        };
        if let Some(m) = s.members.get_mut(idx) {
            m.tables.insert(
                (database.into(), name.into()),
                Table {
                    uuid,
                    engine: engine.into(),
                    columns,
                    data: data.to_vec(),
                    rows,
                    loads: 0,
                },
            );
        }
        uuid
    }

    /// Arms a one-shot fault.
    pub fn arm(&self, fault: Fault) {
        let mut s = self.lock();
        let id = s.armed;
        s.armed += 1;
        s.faults.push((id, fault));
    }

    /// Faults not yet fired.
    pub fn pending_faults(&self) -> Vec<Fault> {
        self.lock().faults.iter().map(|(_, f)| f.clone()).collect()
    }

    /// How many faults were armed.
    pub fn faults_armed(&self) -> usize {
        self.lock().armed
    }

    /// How many of the armed faults took effect at least once (a multi-shot fault such as a
    /// persistent [`Fault::InventoryDrift`] counts once, from its first effect).
    pub fn faults_fired(&self) -> usize {
        self.lock().fired.len()
    }

    /// Appends a queue entry that this cluster's dispatch did not create (another client's
    /// `ON CLUSTER` query carrying `log_comment`), with `status` for every member; nothing
    /// executes.
    pub fn inject_queue_entry(
        &self,
        log_comment: &str,
        statement: ClusterStatement,
        status: QueueHostStatus,
    ) {
        let mut s = self.lock();
        let n = s.members.len();
        let entry = format!("query-{:010}", s.queue.len());
        s.queue.push(QEntry {
            entry,
            log_comment: log_comment.into(),
            statement,
            status: vec![status; n],
        });
    }

    /// Time passes: every queued DDL host executes.
    pub fn tick(&self) {
        let mut s = self.lock();
        let n = s.members.len();
        for qi in 0..s.queue.len() {
            for mi in 0..n {
                if s.queue[qi].status[mi] == QueueHostStatus::Queued {
                    let stmt = s.queue[qi].statement.clone();
                    let ok = execute(&mut s.members[mi], &stmt);
                    s.queue[qi].status[mi] = if ok {
                        QueueHostStatus::Finished
                    } else {
                        QueueHostStatus::Failed
                    };
                }
            }
        }
    }

    /// A copy of `database.name` on member `idx`.
    pub fn snapshot(&self, idx: usize, database: &str, name: &str) -> Option<TableSnapshot> {
        let s = self.lock();
        let t = s
            .members
            .get(idx)?
            .tables
            .get(&(database.to_string(), name.to_string()))?;
        Some(TableSnapshot {
            uuid: t.uuid,
            data: t.data.clone(),
            rows: t.rows,
        })
    }

    /// Table names on member `idx`.
    pub fn table_names(&self, idx: usize) -> Vec<String> {
        let s = self.lock();
        s.members
            .get(idx)
            .map(|m| m.tables.keys().map(|(_, n)| n.clone()).collect())
            .unwrap_or_default()
    }

    /// Rows that occur more than once within one table, summed over every table on member `idx`.
    pub fn duplicate_rows(&self, idx: usize) -> u64 {
        let s = self.lock();
        let Some(m) = s.members.get(idx) else {
            return 0;
        };
        m.tables
            .values()
            .map(|t| {
                let ends = row_ends(&self.types, &t.data).unwrap_or_default();
                let mut rows: Vec<&[u8]> = Vec::with_capacity(ends.len());
                let mut start = 0;
                for e in ends {
                    rows.push(&t.data[start..e]);
                    start = e;
                }
                let total = rows.len() as u64;
                rows.sort_unstable();
                rows.dedup();
                total - rows.len() as u64
            })
            .sum()
    }

    /// Authority writes that reached the store (stale no-ops excluded).
    pub fn authority_writes(&self) -> u32 {
        self.lock().writes
    }

    /// The phase of the authority write an [`Fault::AuthorityWrite`] fired on, and whether that
    /// write entered the phase.
    pub fn fired_write(&self) -> Option<(Phase, bool)> {
        self.lock().fired_write
    }

    fn member_fault(&self, s: &mut State, i: usize) -> Result<(), PortError> {
        if Self::take_fault(
            s,
            |f| matches!(f, Fault::MemberUnavailableOnce { member } if *member == i),
        )
        .is_some()
        {
            return Err(PortError::unavailable("DPONE_SYNTHETIC_MEMBER_UNREACHABLE"));
        }
        Ok(())
    }

    /// Queue retention: removes the entries that every member has finished (or failed), as
    /// `distributed_ddl_queue` cleanup eventually does; with `all`, every entry (e.g. tasks
    /// past their lifetime). Returns how many were removed.
    pub fn purge_queue(&self, all: bool) -> usize {
        let mut s = self.lock();
        let before = s.queue.len();
        s.queue.retain(|q| {
            !all && q
                .status
                .iter()
                .any(|st| matches!(st, QueueHostStatus::Queued | QueueHostStatus::Active))
        });
        before - s.queue.len()
    }

    /// Counters.
    pub fn metrics(&self) -> ClusterMetrics {
        self.lock().metrics
    }

    /// The raw authority value of `key`.
    pub fn authority_value(&self, key: &TargetKey) -> Option<Versioned> {
        self.lock().authority.get(key).cloned()
    }

    /// Writes an authority value directly (test set-up, e.g. a V1 record).
    pub fn put_authority(&self, key: &TargetKey, value: Versioned) {
        self.lock().authority.insert(*key, value);
    }

    fn member_index(s: &State, id: &MemberId) -> Result<usize, PortError> {
        s.members
            .iter()
            .position(|m| &m.id == id)
            .ok_or(PortError::unavailable("DPONE_SYNTHETIC_UNKNOWN_MEMBER"))
    }

    fn take_fault(s: &mut State, f: impl Fn(&Fault) -> bool) -> Option<Fault> {
        let (id, fault) = Self::take_armed(s, f)?;
        s.fired.insert(id);
        Some(fault)
    }

    /// Removes the first armed fault matching `f` without counting it as fired.
    fn take_armed(s: &mut State, f: impl Fn(&Fault) -> bool) -> Option<(usize, Fault)> {
        let i = s.faults.iter().position(|(_, x)| f(x))?;
        Some(s.faults.remove(i))
    }

    fn write(&self, key: &TargetKey, expected: Option<u64>, value: &str) -> Result<(), PortError> {
        let mut s = self.lock();
        let current = s.authority.get(key).cloned();
        match (expected, &current) {
            (None, Some(_)) => return Err(PortError::rejected("DPONE_SYNTHETIC_KEY_EXISTS")),
            // KeeperMap: a stale version is a silent no-op.
            (Some(v), Some(c)) if c.version != v => return Ok(()),
            (Some(_), None) => return Ok(()),
            _ => {}
        }
        let phase = phase_of(value);
        let old_phase = current.as_ref().and_then(|c| phase_of(&c.value));
        let entering = |p: Phase| phase == Some(p) && old_phase != Some(p);
        if s.crash_next_write {
            s.crash_next_write = false;
            return Err(PortError::interrupted());
        }
        let nth = s.writes;
        s.writes += 1;
        let write_fault = match Self::take_fault(
            &mut s,
            |f| matches!(f, Fault::AuthorityWrite { nth: n, .. } if *n == nth),
        ) {
            Some(Fault::AuthorityWrite { mode, .. }) => {
                s.fired_write = phase.map(|p| (p, old_phase != Some(p)));
                Some(mode)
            }
            _ => None,
        };
        if write_fault == Some(WriteFault::CrashBefore) {
            return Err(PortError::interrupted());
        }
        if Self::take_fault(
            &mut s,
            |f| matches!(f, Fault::CrashBeforePhase(p) if entering(*p)),
        )
        .is_some()
        {
            return Err(PortError::interrupted());
        }
        let version = expected.map_or(0, |v| v + 1);
        s.authority.insert(
            *key,
            Versioned {
                version,
                value: value.into(),
            },
        );
        s.metrics.cas_applied += 1;
        if entering(Phase::Staged)
            && let Some(Fault::TargetReplacedAfterStaging { member }) =
                Self::take_fault(&mut s, |f| {
                    matches!(f, Fault::TargetReplacedAfterStaging { .. })
                })
        {
            let uuid = synthetic_uuid(&mut s.next_uuid);
            let columns = self.columns.clone();
            if let Some(m) = s.members.get_mut(member) {
                // Another generation: one row that no artifact of the fixture holds.
                let mut w = crate::canonical::RowBinaryWriter::new(self.types.clone());
                let _ = w.row(&foreign_row(&self.types));
                let rows = w.rows();
                let target = m
                    .tables
                    .keys()
                    .find(|(_, n)| !n.contains(contracts::identity::CANDIDATE_INFIX))
                    .cloned()
                    .unwrap_or(("db".into(), "target_table".into()));
                m.tables.insert(
                    target,
                    Table {
                        uuid,
                        engine: "MergeTree".into(),
                        columns,
                        data: w.finish(),
                        rows,
                        loads: 1,
                    },
                );
            }
        }
        if write_fault == Some(WriteFault::CrashAfter)
            || Self::take_fault(
                &mut s,
                |f| matches!(f, Fault::CrashAfterPhase(p) if entering(*p)),
            )
            .is_some()
        {
            return Err(PortError::interrupted());
        }
        if write_fault == Some(WriteFault::LostAck) {
            return Err(PortError::ambiguous("DPONE_SYNTHETIC_ACK_LOST"));
        }
        if Self::take_fault(
            &mut s,
            |f| matches!(f, Fault::LostCasAck(p) if entering(*p)),
        )
        .is_some()
        {
            return Err(PortError::ambiguous("DPONE_SYNTHETIC_ACK_LOST"));
        }
        Ok(())
    }
}

fn phase_of(value: &str) -> Option<Phase> {
    contracts::decode_slot(value)
        .ok()
        .map(|slot| slot.record().phase)
}

fn synthetic_uuid(counter: &mut u64) -> Uuid {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&0x5e5e_5e5e_0000_0000u64.to_be_bytes());
    b[8..].copy_from_slice(&counter.to_be_bytes());
    *counter += 1;
    Uuid::from_random(b)
}

/// A row of zero-ish values that the fixture's generators never produce (key `u64::MAX`).
fn foreign_row(types: &[ColumnType]) -> Vec<crate::canonical::Value> {
    use crate::canonical::{Scalar, Value};
    types
        .iter()
        .map(|t| match t.scalar {
            _ if t.nullable => Value::Null,
            Scalar::UInt(_) => Value::UInt(u128::from(u8::MAX)),
            Scalar::Int(_)
            | Scalar::Decimal { .. }
            | Scalar::Date
            | Scalar::Date32
            | Scalar::DateTime
            | Scalar::DateTime64(_)
            | Scalar::Enum8
            | Scalar::Enum16 => Value::Int(1),
            Scalar::Float32 | Scalar::Float64 => Value::Float(-1.0),
            Scalar::Bool => Value::Bool(true),
            Scalar::String | Scalar::FixedString(_) => Value::Bytes(b"foreign".to_vec()),
            Scalar::Uuid | Scalar::Ipv6 => Value::Raw16([0xee; 16]),
            Scalar::Ipv4 => Value::UInt(1),
        })
        .collect()
}

/// Executes one statement on one member; false when it fails there.
fn execute(m: &mut Member, stmt: &ClusterStatement) -> bool {
    match stmt {
        ClusterStatement::Exchange {
            database,
            target,
            candidate,
        } => {
            let tk = (database.clone(), target.clone());
            let ck = (database.clone(), candidate.clone());
            match (m.tables.remove(&tk), m.tables.remove(&ck)) {
                (Some(t), Some(c)) => {
                    m.tables.insert(tk, c);
                    m.tables.insert(ck, t);
                    true
                }
                (t, c) => {
                    if let Some(t) = t {
                        m.tables.insert(tk, t);
                    }
                    if let Some(c) = c {
                        m.tables.insert(ck, c);
                    }
                    false
                }
            }
        }
        ClusterStatement::Rename {
            database,
            candidate,
            target,
        } => {
            let tk = (database.clone(), target.clone());
            let ck = (database.clone(), candidate.clone());
            if m.tables.contains_key(&tk) {
                return false;
            }
            match m.tables.remove(&ck) {
                Some(c) => {
                    m.tables.insert(tk, c);
                    true
                }
                None => false,
            }
        }
        ClusterStatement::Drop { database, name } => {
            m.tables.remove(&(database.clone(), name.clone())).is_some()
        }
    }
}

impl AuthorityStore for SyntheticCluster {
    fn read(&self, key: &TargetKey) -> Result<Option<Versioned>, PortError> {
        Ok(self.lock().authority.get(key).cloned())
    }

    fn insert(&self, key: &TargetKey, value: &str) -> Result<(), PortError> {
        self.write(key, None, value)
    }

    fn update(&self, key: &TargetKey, expected: u64, value: &str) -> Result<(), PortError> {
        self.write(key, Some(expected), value)
    }
}

impl InventoryPort for SyntheticCluster {
    fn observe(&self, _cluster: &str) -> Result<(Vec<InventoryRow>, bool), PortError> {
        let mut s = self.lock();
        if Self::take_fault(&mut s, |f| matches!(f, Fault::InventoryUnavailableOnce)).is_some() {
            return Err(PortError::unavailable(
                "DPONE_SYNTHETIC_COORDINATOR_UNREACHABLE",
            ));
        }
        let drift = Self::take_armed(&mut s, |f| matches!(f, Fault::InventoryDrift { .. }));
        let drifted = match drift {
            Some((
                id,
                Fault::InventoryDrift {
                    member,
                    skip,
                    observations,
                },
            )) => {
                if skip > 0 {
                    s.faults.push((
                        id,
                        Fault::InventoryDrift {
                            member,
                            skip: skip - 1,
                            observations,
                        },
                    ));
                    None
                } else {
                    s.fired.insert(id);
                    if observations > 1 {
                        s.faults.push((
                            id,
                            Fault::InventoryDrift {
                                member,
                                skip: 0,
                                observations: observations - 1,
                            },
                        ));
                    }
                    Some(member)
                }
            }
            _ => None,
        };
        let rows = s
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let endpoint = if drifted == Some(i) {
                    format!("replacement-{}-{}", m.shard, m.replica)
                } else {
                    format!("member-{}-{}", m.shard, m.replica)
                };
                InventoryRow {
                    shard_num: m.shard,
                    replica_num: m.replica,
                    internal_replication: s.internal_replication,
                    endpoint_digest: Digest::of(endpoint.as_bytes()),
                }
            })
            .collect();
        Ok((rows, true))
    }
}

impl MemberCatalog for SyntheticCluster {
    fn probe(
        &self,
        member: &MemberId,
        database: &str,
        target: &str,
    ) -> Result<MemberProbe, PortError> {
        let mut s = self.lock();
        let i = Self::member_index(&s, member)?;
        if Self::take_fault(
            &mut s,
            |f| matches!(f, Fault::MemberUnavailableAtProbe { member } if *member == i),
        )
        .is_some()
        {
            return Err(PortError::unavailable("DPONE_SYNTHETIC_MEMBER_UNREACHABLE"));
        }
        Ok(MemberProbe {
            database_engine: "Atomic".into(),
            keeper_map_available: s.members[i].authority_facade.is_some(),
            rowset_proof_supported: s.members[i].rowset_proof_supported,
            authority_facade: s.members[i].authority_facade.clone(),
            target_engine: s.members[i]
                .tables
                .get(&(database.into(), target.into()))
                .map(|t| t.engine.clone()),
        })
    }

    fn observe_table(
        &self,
        member: &MemberId,
        database: &str,
        name: &str,
    ) -> Result<Option<TableObservation>, PortError> {
        let mut s = self.lock();
        let i = Self::member_index(&s, member)?;
        self.member_fault(&mut s, i)?;
        Ok(s.members[i]
            .tables
            .get(&(database.into(), name.into()))
            .map(|t| TableObservation {
                uuid: t.uuid,
                engine: t.engine.clone(),
                columns: t.columns.clone(),
                row_count: t.rows,
            }))
    }

    fn read_rows<'a>(
        &'a self,
        member: &MemberId,
        database: &str,
        name: &str,
        uuid: Uuid,
        _schema: &Schema,
    ) -> Result<Box<dyn Read + 'a>, PortError> {
        let s = self.lock();
        let i = Self::member_index(&s, member)?;
        match s.members[i].tables.get(&(database.into(), name.into())) {
            Some(t) if t.uuid == uuid => Ok(Box::new(Cursor::new(t.data.clone()))),
            _ => Err(PortError::rejected(DB_ERR)),
        }
    }

    fn rowset_buckets(
        &self,
        member: &MemberId,
        database: &str,
        name: &str,
        uuid: Uuid,
        _schema: &Schema,
    ) -> Result<Vec<BucketDigest>, PortError> {
        let data = {
            let mut s = self.lock();
            let i = Self::member_index(&s, member)?;
            if Self::take_fault(
                &mut s,
                |f| matches!(f, Fault::ProofBudgetExceeded { member } if *member == i),
            )
            .is_some()
            {
                return Err(PortError::rejected(crate::ports::PROOF_BUDGET_EXCEEDED));
            }
            match s.members[i].tables.get(&(database.into(), name.into())) {
                Some(t) if t.uuid == uuid => t.data.clone(),
                _ => return Err(PortError::rejected(DB_ERR)),
            }
        };
        // What a member computes with its `GROUP BY`: every stored row's bytes, hashed.
        let mut hasher = RowsetHasher::new(64 << 20);
        let mut failed = false;
        RowReader::new(&data[..])
            .for_each_raw_row(&self.types, |row| failed |= hasher.push_row(row).is_err())
            .map_err(|_| PortError::rejected(DB_ERR))?;
        let buckets = hasher.finish();
        match buckets {
            Ok(b) if !failed => Ok(b),
            _ => Err(PortError::unavailable("DPONE_SYNTHETIC_SPILL_FAILED")),
        }
    }

    fn create_candidate(
        &self,
        member: &MemberId,
        spec: &CandidateSpec<'_>,
    ) -> Result<(), PortError> {
        let mut s = self.lock();
        let i = Self::member_index(&s, member)?;
        self.member_fault(&mut s, i)?;
        if Self::take_fault(
            &mut s,
            |f| matches!(f, Fault::CreateRejected { member } if *member == i),
        )
        .is_some()
        {
            return Err(PortError::rejected("DPONE_SYNTHETIC_QUERY_INVALID"));
        }
        let key = (spec.database.to_string(), spec.name.to_string());
        if spec.engine.starts_with("Replicated") {
            s.replicated.entry(spec.uuid).or_default();
        }
        let m = &mut s.members[i];
        if m.tables.contains_key(&key) || m.tables.values().any(|t| t.uuid == spec.uuid) {
            return Err(PortError::rejected(DB_ERR));
        }
        m.tables.insert(
            key,
            Table {
                uuid: spec.uuid,
                engine: spec.engine.into(),
                columns: spec.schema.columns.clone(),
                data: Vec::new(),
                rows: 0,
                loads: 0,
            },
        );
        Ok(())
    }

    fn load(
        &self,
        member: &MemberId,
        database: &str,
        name: &str,
        uuid: Uuid,
        artifact: &mut dyn Read,
        _tokens: &LoadTokens,
    ) -> Result<(), PortError> {
        let mut bytes = Vec::new();
        artifact
            .read_to_end(&mut bytes)
            .map_err(|_| PortError::unavailable("DPONE_SYNTHETIC_ARTIFACT_READ"))?;
        let ends = row_ends(&self.types, &bytes).map_err(|_| PortError::rejected(DB_ERR))?;
        let mut s = self.lock();
        let i = Self::member_index(&s, member)?;
        let partial = Self::take_fault(
            &mut s,
            |f| matches!(f, Fault::LoadLostResponsePartial { member, .. } if *member == i),
        );
        let lost = Self::take_fault(
            &mut s,
            |f| matches!(f, Fault::LoadLostResponseComplete { member } if *member == i),
        );
        let crash = Self::take_fault(
            &mut s,
            |f| matches!(f, Fault::CrashAfterLoadBeforeCas { member } if *member == i),
        );
        let rejected = Self::take_fault(
            &mut s,
            |f| matches!(f, Fault::LoadRejected { member, .. } if *member == i),
        );
        let (cut, rows) = match partial.as_ref().or(rejected.as_ref()) {
            Some(
                Fault::LoadLostResponsePartial { rows, .. } | Fault::LoadRejected { rows, .. },
            ) => {
                let k = (*rows as usize).min(ends.len());
                (if k == 0 { 0 } else { ends[k - 1] }, k as u64)
            }
            _ => (bytes.len(), ends.len() as u64),
        };
        let (max, replicated) = {
            let t = s.members[i]
                .tables
                .get_mut(&(database.into(), name.into()))
                .filter(|t| t.uuid == uuid)
                .ok_or(PortError::rejected(DB_ERR))?;
            t.data.extend_from_slice(&bytes[..cut]);
            t.rows += rows;
            t.loads += 1;
            (t.loads, t.engine.starts_with("Replicated"))
        };
        if replicated && let Some(log) = s.replicated.get_mut(&uuid) {
            log.data.extend_from_slice(&bytes[..cut]);
            log.rows += rows;
        }
        s.metrics.loads += 1;
        s.metrics.max_loads_per_table = s.metrics.max_loads_per_table.max(max);
        if crash.is_some() {
            s.crash_next_write = true;
        }
        if rejected.is_some() {
            return Err(PortError::rejected("DPONE_SYNTHETIC_DATA_INVALID"));
        }
        if partial.is_some() || lost.is_some() {
            return Err(PortError::ambiguous("DPONE_SYNTHETIC_RESPONSE_LOST"));
        }
        Ok(())
    }

    fn drop_exact(
        &self,
        member: &MemberId,
        database: &str,
        name: &str,
        uuid: Uuid,
    ) -> Result<(), PortError> {
        let mut s = self.lock();
        let i = Self::member_index(&s, member)?;
        let key = (database.to_string(), name.to_string());
        match s.members[i].tables.get(&key) {
            None => Ok(()),
            Some(t) if t.uuid == uuid => {
                s.members[i].tables.remove(&key);
                s.metrics.exact_drops += 1;
                if !s
                    .members
                    .iter()
                    .any(|m| m.tables.values().any(|t| t.uuid == uuid))
                {
                    s.replicated.remove(&uuid);
                }
                Ok(())
            }
            Some(_) => Err(PortError::rejected(DB_ERR)),
        }
    }

    fn sync_replica(
        &self,
        member: &MemberId,
        database: &str,
        name: &str,
        uuid: Uuid,
        _bound: std::time::Duration,
    ) -> Result<(), PortError> {
        let mut s = self.lock();
        let i = Self::member_index(&s, member)?;
        self.member_fault(&mut s, i)?;
        let key = (database.to_string(), name.to_string());
        match s.members[i].tables.get(&key) {
            Some(t) if t.uuid == uuid && t.engine.starts_with("Replicated") => {}
            _ => return Err(PortError::rejected(DB_ERR)),
        }
        let not_converged = PortError::unavailable(crate::ports::REPLICA_NOT_CONVERGED);
        // A replica that never converges: every sync times out (counted fired once).
        if let Some((id, f)) = Self::take_armed(
            &mut s,
            |f| matches!(f, Fault::ReplicaNeverConverges { member } if *member == i),
        ) {
            s.fired.insert(id);
            s.faults.push((id, f));
            return Err(not_converged);
        }
        if let Some((id, f)) = Self::take_armed(
            &mut s,
            |f| matches!(f, Fault::ReplicaLags { member, .. } if *member == i),
        ) {
            s.fired.insert(id);
            if let Fault::ReplicaLags { member, syncs } = f
                && syncs > 1
            {
                s.faults.push((
                    id,
                    Fault::ReplicaLags {
                        member,
                        syncs: syncs - 1,
                    },
                ));
            }
            return Err(not_converged);
        }
        let divergent = Self::take_fault(
            &mut s,
            |f| matches!(f, Fault::ReplicaDivergent { member } if *member == i),
        )
        .is_some();
        let log = s.replicated.get(&uuid).cloned().unwrap_or_default();
        let (mut data, mut rows) = (log.data, log.rows);
        if divergent {
            // The replica fetched one row no artifact of the fixture holds.
            let mut w = crate::canonical::RowBinaryWriter::new(self.types.clone());
            let _ = w.row(&foreign_row(&self.types));
            rows += w.rows();
            data.extend_from_slice(&w.finish());
        }
        if let Some(t) = s.members[i].tables.get_mut(&key) {
            t.data = data;
            t.rows = rows;
        }
        Ok(())
    }
}

impl ClusterDdl for SyntheticCluster {
    fn dispatch(
        &self,
        _cluster: &str,
        statement: &ClusterStatement,
        correlation: &DdlCorrelation,
    ) -> Result<(), PortError> {
        let mut s = self.lock();
        let is_drop = matches!(statement, ClusterStatement::Drop { .. });
        if !is_drop
            && Self::take_fault(&mut s, |f| {
                matches!(f, Fault::CrashBeforePublicationDispatch)
            })
            .is_some()
        {
            return Err(PortError::interrupted());
        }
        if is_drop && Self::take_fault(&mut s, |f| matches!(f, Fault::CleanupNotSent)).is_some() {
            return Err(PortError::unavailable("DPONE_SYNTHETIC_CONNECT_REFUSED"));
        }
        let n = s.members.len();
        let (executed, fail_member, lost) = if is_drop {
            let lost =
                Self::take_fault(&mut s, |f| matches!(f, Fault::CleanupLostResponse)).is_some();
            (n, None, lost)
        } else if let Some(Fault::PartialDdl { executed }) =
            Self::take_fault(&mut s, |f| matches!(f, Fault::PartialDdl { .. }))
        {
            (executed.min(n), None, true)
        } else if let Some(Fault::DdlFailsOnMember { member }) =
            Self::take_fault(&mut s, |f| matches!(f, Fault::DdlFailsOnMember { .. }))
        {
            (n, Some(member), false)
        } else {
            let lost = Self::take_fault(&mut s, |f| matches!(f, Fault::LostDdlResponse)).is_some();
            (n, None, lost)
        };
        if is_drop {
            s.metrics.cleanup_dispatches += 1;
        } else {
            s.metrics.publication_dispatches += 1;
        }
        let mut status = vec![QueueHostStatus::Queued; n];
        let mut any_failed = false;
        for (mi, st) in status.iter_mut().enumerate().take(executed) {
            let ok = fail_member != Some(mi) && execute(&mut s.members[mi], statement);
            any_failed |= !ok;
            *st = if ok {
                QueueHostStatus::Finished
            } else {
                QueueHostStatus::Failed
            };
        }
        let entry = format!("query-{:010}", s.queue.len());
        // The adapter binds the correlation to both `query_id` and `log_comment`; the queue
        // keeps only the settings, so that is what correlates an entry.
        s.queue.push(QEntry {
            entry,
            log_comment: correlation.query_id.clone(),
            statement: statement.clone(),
            status,
        });
        if lost {
            Err(PortError::ambiguous("DPONE_SYNTHETIC_RESPONSE_LOST"))
        } else if any_failed {
            Err(PortError::rejected("DPONE_SYNTHETIC_DDL_FAILED"))
        } else {
            Ok(())
        }
    }

    /// Entries whose `settings['log_comment']` is `log_comment`, as the adapter's queue query
    /// selects them.
    fn observe_queue(
        &self,
        _cluster: &str,
        log_comment: &str,
    ) -> Result<Vec<QueueEntry>, PortError> {
        let s = self.lock();
        let local = s.local;
        Ok(s.queue
            .iter()
            .filter(|q| q.log_comment == log_comment)
            // One server lists a statement only while it runs.
            .filter(|q| {
                !local
                    || q.status
                        .iter()
                        .any(|st| matches!(st, QueueHostStatus::Queued | QueueHostStatus::Active))
            })
            .map(|q| QueueEntry {
                entry: q.entry.clone(),
                members: s
                    .members
                    .iter()
                    .zip(&q.status)
                    .map(|(m, st)| (m.id, *st))
                    .collect(),
                unmapped_hosts: 0,
            })
            .collect())
    }
}

/// An in-memory replayable artifact source over fixed `RowBinary` bytes.
pub struct SyntheticArtifacts {
    source: Vec<u8>,
    rows: u64,
    sealed: Mutex<Option<(ArtifactIdentity, Vec<u8>)>>,
    /// Opens that serve altered bytes while the stored copy stays intact.
    altered_opens: AtomicU64,
    /// How many times the source was extracted.
    pub extractions: AtomicU64,
}

impl SyntheticArtifacts {
    /// A source of `rows` rows encoded as `bytes`.
    pub fn new(bytes: Vec<u8>, rows: u64) -> Self {
        Self {
            source: bytes,
            rows,
            sealed: Mutex::new(None),
            altered_opens: AtomicU64::new(0),
            extractions: AtomicU64::new(0),
        }
    }

    /// The next `opens` opens serve the sealed bytes with their last byte flipped, while the
    /// stored copy (and so every revalidation) stays intact: bytes altered between the
    /// revalidation and a load.
    pub fn alter_after_revalidation(&self, opens: u64) {
        self.altered_opens.store(opens, Ordering::SeqCst);
    }

    /// Flips one byte of the sealed copy (tamper).
    pub fn tamper(&self) {
        let mut g = self.sealed.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, b)) = g.as_mut()
            && let Some(x) = b.first_mut()
        {
            *x ^= 0xff;
        }
    }
}

impl ArtifactSource for SyntheticArtifacts {
    fn seal(&self, schema: &Schema, max_bytes: u64) -> Result<ArtifactIdentity, PortError> {
        self.extractions.fetch_add(1, Ordering::Relaxed);
        if self.source.len() as u64 > max_bytes {
            return Err(PortError::rejected(crate::ports::ARTIFACT_TOO_LARGE));
        }
        let id = ArtifactIdentity {
            sha256: Digest::of(&self.source),
            byte_size: self.source.len() as u64,
            row_count: self.rows,
            schema_digest: contracts::schema_digest(schema),
        };
        *self.sealed.lock().unwrap_or_else(|p| p.into_inner()) = Some((id, self.source.clone()));
        Ok(id)
    }

    fn seal_observed(
        &self,
        schema: &Schema,
        max_bytes: u64,
        observer: &mut dyn std::io::Write,
    ) -> Result<(ArtifactIdentity, bool), PortError> {
        let id = self.seal(schema, max_bytes)?;
        // In small pieces, as an extraction writes them.
        for piece in self.source.chunks(4096) {
            let _ = observer.write_all(piece);
        }
        Ok((id, true))
    }

    fn revalidate(&self, identity: &ArtifactIdentity) -> Result<(), PortError> {
        let g = self.sealed.lock().unwrap_or_else(|p| p.into_inner());
        match g.as_ref() {
            Some((id, b))
                if id == identity
                    && Digest::of(b) == identity.sha256
                    && b.len() as u64 == identity.byte_size =>
            {
                Ok(())
            }
            Some((id, _)) if id == identity => {
                Err(PortError::rejected(crate::ports::ARTIFACT_TAMPERED))
            }
            // Like the content-addressed store: no artifact with this identity on this worker.
            _ => Err(PortError::unavailable("DPONE_ARTIFACT_NOT_FOUND")),
        }
    }

    fn open<'a>(&'a self, identity: &ArtifactIdentity) -> Result<Box<dyn Read + 'a>, PortError> {
        let g = self.sealed.lock().unwrap_or_else(|p| p.into_inner());
        match g.as_ref() {
            Some((id, b)) if id == identity => {
                let mut b = b.clone();
                let altered = self
                    .altered_opens
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
                if altered && let Some(x) = b.last_mut() {
                    *x ^= 0xff;
                }
                Ok(Box::new(Cursor::new(b)))
            }
            _ => Err(PortError::unavailable("DPONE_ARTIFACT_NOT_FOUND")),
        }
    }

    fn release(&self, _identity: &ArtifactIdentity) -> Result<(), PortError> {
        Ok(())
    }
}

/// A deterministic environment: fixed clock, seeded randomness.
pub struct SyntheticEnv {
    seed: AtomicU64,
    /// Unix seconds returned by `now_unix`.
    pub now: i64,
}

impl SyntheticEnv {
    /// An environment from a seed.
    pub fn new(seed: u64) -> Self {
        Self {
            seed: AtomicU64::new(seed),
            now: 1_800_000_000,
        }
    }
}

impl Environment for SyntheticEnv {
    fn now_unix(&self) -> i64 {
        self.now
    }

    fn random16(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        for chunk in out.chunks_mut(8) {
            // splitmix64
            let mut z = self
                .seed
                .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
                .wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_be_bytes());
        }
        out
    }
}

type StaticFn = dyn Fn(&StaticFacts) -> StaticDecision + Send + Sync;
type RuntimeFn = dyn Fn(&RuntimeFacts) -> RuntimeDecision + Send + Sync;

/// An [`AdmissionGate`] over two plain functions (the native policy core in tests; the
/// composition root wraps the WebAssembly component instead).
pub struct FnGate {
    label: String,
    static_fn: Box<StaticFn>,
    runtime_fn: Box<RuntimeFn>,
}

impl FnGate {
    /// A gate labelled `label` (recorded as the component digest field).
    pub fn new(
        label: &str,
        static_fn: impl Fn(&StaticFacts) -> StaticDecision + Send + Sync + 'static,
        runtime_fn: impl Fn(&RuntimeFacts) -> RuntimeDecision + Send + Sync + 'static,
    ) -> Self {
        Self {
            label: label.into(),
            static_fn: Box::new(static_fn),
            runtime_fn: Box::new(runtime_fn),
        }
    }

    fn evidence<T: serde::Serialize>(&self, input: &T) -> AdmissionEvidence {
        AdmissionEvidence {
            component_sha256: self.label.clone(),
            input_sha256: Digest::of(&serde_json::to_vec(input).unwrap_or_default()).to_hex(),
        }
    }
}

impl AdmissionGate for FnGate {
    fn admit_static(&self, facts: &StaticFacts) -> Result<Gated<StaticDecision>, PortError> {
        Ok(Gated {
            decision: (self.static_fn)(facts),
            evidence: self.evidence(facts),
        })
    }

    fn admit_runtime(&self, facts: &RuntimeFacts) -> Result<Gated<RuntimeDecision>, PortError> {
        Ok(Gated {
            decision: (self.runtime_fn)(facts),
            evidence: self.evidence(facts),
        })
    }
}
