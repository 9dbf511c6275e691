//! Physical enrollment (spec 004: "actual nonproduction enrollment"): what a participant *is*,
//! beside the id, engine, access and tier the policy's `enrollment` gives it.
//!
//! - [`PhysicalIdentity`]: a PostgreSQL participant's system identifier, database name and
//!   database OID as observed live; its digest is `sha256:` of the canonical JSON record
//!   `dpone.np-physical-identity.v1` (versioned; its only keys are those fields, `engine` and
//!   `schema`). A recreated database of the same name has a new OID, another cluster another
//!   system identifier: either is another identity.
//! - [`ClickhouseIdentity`]: a ClickHouse participant's database and, for every member of its
//!   cluster, the replica the route proves the member is (`shard_num`, `replica_num`, from the
//!   member's own `system.clusters`), the server's `serverUUID()` and the database's UUID
//!   (`system.databases.uuid`, new for every created Atomic database); its digest is `sha256:`
//!   of the canonical record `dpone.np-physical-identity.clickhouse.v1`, which the store keeps
//!   byte for byte ([`ClickhouseIdentity::from_record`] accepts only that exact encoding). A
//!   recreated database has a new UUID on every member, another server another UUID; a member
//!   added, removed or swapped changes the member list: each is another identity.
//! - [`SqlserverIdentity`]: a SQL Server participant's database name, `database_id`, create
//!   token (`create_date`) and `database_guid`, the fields the XMin route pins a SQL Server
//!   database by; record `dpone.np-physical-identity.sqlserver.v1`, kept byte for byte like the
//!   ClickHouse record. A restored or recreated database has another GUID and create token.
//! - [`bind_run`]: the pure check of a run under a reservation, before any read or write. Each
//!   connection the manifest uses is bound **by its role** to the participant the workload's
//!   signed route names: the source to `source_participant`, the target and the state to
//!   `target_participant` (the binding lives in the signed workload, no new field). Each must
//!   be of the route's engine, enrolled under the grant's `enrollment_digest`, and observed with
//!   exactly the enrolled identity; every relation the run reads or writes must be one of the
//!   workload's effects of that participant, exactly (`<database>.<schema>.<table>`, the
//!   database the enrolled one; byte-equal, so a case variant is another relation).

use crate::common::{EffectKind, Engine};
use crate::composition::CompositionWorkload;
use crate::control_store::Sha256Digest;
use serde_json::json;

/// The schema of the identity record a digest covers.
pub const IDENTITY_SCHEMA: &str = "dpone.np-physical-identity.v1";

/// A PostgreSQL participant's physical identity, as observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhysicalIdentity {
    /// `pg_control_system().system_identifier`, decimal.
    pub system_identifier: String,
    /// `current_database()`.
    pub database_name: String,
    /// `pg_database.oid` of the current database.
    pub database_oid: u32,
}

impl PhysicalIdentity {
    /// The canonical `dpone.np-physical-identity.v1` record (RFC 8785 bytes).
    pub fn record(&self) -> Vec<u8> {
        let v = json!({
            "database_name": self.database_name,
            "database_oid": self.database_oid,
            "engine": "postgresql",
            "schema": IDENTITY_SCHEMA,
            "system_identifier": self.system_identifier,
        });
        crate::json::canonical_bytes(&v)
    }

    /// `sha256:` of [`PhysicalIdentity::record`].
    pub fn digest(&self) -> Sha256Digest {
        Sha256Digest::of(&self.record())
    }
}

/// The schema of a ClickHouse participant's identity record.
pub const CLICKHOUSE_IDENTITY_SCHEMA: &str = "dpone.np-physical-identity.clickhouse.v1";

/// The largest identity record the store keeps (a cluster of at most 1,024 members fits).
pub const MAX_IDENTITY_RECORD_BYTES: usize = 256 * 1024;

/// One member of a ClickHouse participant's cluster, as observed on the member itself.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClickhouseMember {
    /// The shard the member's own `system.clusters` marks local.
    pub shard_num: u32,
    /// The replica the member's own `system.clusters` marks local.
    pub replica_num: u32,
    /// `serverUUID()`, lowercase hyphenated (all zeros on an engine without a server id).
    pub server_uuid: String,
    /// The participant database's `system.databases.uuid` on this member, lowercase
    /// hyphenated, never all zeros.
    pub database_uuid: String,
}

/// A ClickHouse participant's physical identity: its database and every member of its cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClickhouseIdentity {
    /// The participant's database (the one database the route uses on it).
    pub database_name: String,
    /// Every member of the cluster, ordered by `(shard_num, replica_num)`, each once.
    pub members: Vec<ClickhouseMember>,
}

/// The stored record's exact shape.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ClickhouseRecord {
    database_name: String,
    engine: String,
    members: Vec<ClickhouseMember>,
    schema: String,
}

/// Why an identity is not made, or a stored identity record is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordInvalid;

fn uuid_text(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(c),
        })
}

const NIL_UUID: &str = "00000000-0000-0000-0000-000000000000";

/// A stored identity record's fields: at most [`MAX_IDENTITY_RECORD_BYTES`], strict JSON
/// (this crate's reader), exactly the record's keys.
fn stored_record<R: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<R, RecordInvalid> {
    if bytes.len() > MAX_IDENTITY_RECORD_BYTES {
        return Err(RecordInvalid);
    }
    let value = crate::json::parse_strict(bytes).map_err(|_| RecordInvalid)?;
    serde_json::from_value(value).map_err(|_| RecordInvalid)
}

/// `id` read from `bytes`, if its schema and engine were the record's (`named`), it is valid and
/// `bytes` are exactly its canonical record.
fn exactly<T>(
    id: T,
    named: bool,
    bytes: &[u8],
    valid: impl Fn(&T) -> bool,
    record: impl Fn(&T) -> Vec<u8>,
) -> Result<T, RecordInvalid> {
    if named && valid(&id) && record(&id) == bytes {
        Ok(id)
    } else {
        Err(RecordInvalid)
    }
}

impl ClickhouseIdentity {
    /// The identity, checked: a database name of 1..=255 bytes without control characters, at
    /// least one member, members ordered by `(shard_num, replica_num)` with none twice, every
    /// UUID lowercase hyphenated and every database UUID not nil.
    pub fn new(
        database_name: String,
        mut members: Vec<ClickhouseMember>,
    ) -> Result<Self, RecordInvalid> {
        members.sort();
        let id = Self {
            database_name,
            members,
        };
        id.valid().then_some(id).ok_or(RecordInvalid)
    }

    fn valid(&self) -> bool {
        let name_ok = (1..=255).contains(&self.database_name.len())
            && !self.database_name.chars().any(char::is_control);
        let members_ok = !self.members.is_empty()
            && self.members.len() <= 1024
            && self
                .members
                .windows(2)
                .all(|w| (w[0].shard_num, w[0].replica_num) < (w[1].shard_num, w[1].replica_num))
            && self.members.iter().all(|m| {
                uuid_text(&m.server_uuid)
                    && uuid_text(&m.database_uuid)
                    && m.database_uuid != NIL_UUID
            });
        name_ok && members_ok
    }

    /// The canonical record `dpone.np-physical-identity.clickhouse.v1` (RFC 8785 bytes).
    pub fn record(&self) -> Vec<u8> {
        let v = json!({
            "database_name": self.database_name,
            "engine": "clickhouse",
            "members": self.members,
            "schema": CLICKHOUSE_IDENTITY_SCHEMA,
        });
        crate::json::canonical_bytes(&v)
    }

    /// `sha256:` of [`ClickhouseIdentity::record`].
    pub fn digest(&self) -> Sha256Digest {
        Sha256Digest::of(&self.record())
    }

    /// Reads a stored record: exactly the canonical bytes of a valid identity (strict JSON,
    /// exactly the record's keys, this schema and engine), nothing else.
    pub fn from_record(bytes: &[u8]) -> Result<Self, RecordInvalid> {
        let r: ClickhouseRecord = stored_record(bytes)?;
        let id = Self {
            database_name: r.database_name,
            members: r.members,
        };
        let ok =
            (r.schema.as_str(), r.engine.as_str()) == (CLICKHOUSE_IDENTITY_SCHEMA, "clickhouse");
        exactly(id, ok, bytes, Self::valid, Self::record)
    }
}

/// The schema of a SQL Server participant's identity record.
pub const SQLSERVER_IDENTITY_SCHEMA: &str = "dpone.np-physical-identity.sqlserver.v1";

/// A SQL Server participant's physical identity: its database as the server's catalog reports
/// it (`sys.databases`, `sys.database_recovery_status`), the same fields the XMin route pins a
/// SQL Server database by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlserverIdentity {
    /// `sys.databases.create_date` as `datetime2(7)` ISO 8601 (`2026-08-16T09:14:22.1233333`).
    pub create_token: String,
    /// `sys.database_recovery_status.database_guid`, lowercase hyphenated, never nil (a
    /// restore or a recreation gives another).
    pub database_guid: String,
    /// `sys.databases.database_id`.
    pub database_id: i32,
    /// The database's exact name.
    pub database_name: String,
}

/// The stored SQL Server record's exact shape.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SqlserverRecord {
    create_token: String,
    database_guid: String,
    database_id: i32,
    database_name: String,
    engine: String,
    schema: String,
}

impl SqlserverIdentity {
    /// The identity, checked: a database name of 1..=128 characters without control
    /// characters, a positive database id, a create token of the pinned form and a lowercase,
    /// non-nil GUID.
    pub fn new(
        database_name: String,
        database_id: i32,
        create_token: String,
        database_guid: &str,
    ) -> Result<Self, RecordInvalid> {
        let id = Self {
            create_token,
            database_guid: database_guid.to_ascii_lowercase(),
            database_id,
            database_name,
        };
        id.valid().then_some(id).ok_or(RecordInvalid)
    }

    fn valid(&self) -> bool {
        let t = self.create_token.as_bytes();
        let token_ok = t.len() == 27
            && t.iter().enumerate().all(|(i, c)| match i {
                4 | 7 => *c == b'-',
                10 => *c == b'T',
                13 | 16 => *c == b':',
                19 => *c == b'.',
                _ => c.is_ascii_digit(),
            });
        (1..=128).contains(&self.database_name.chars().count())
            && !self.database_name.chars().any(char::is_control)
            && self.database_id > 0
            && token_ok
            && uuid_text(&self.database_guid)
            && self.database_guid != NIL_UUID
    }

    /// The canonical record `dpone.np-physical-identity.sqlserver.v1` (RFC 8785 bytes).
    pub fn record(&self) -> Vec<u8> {
        let v = json!({
            "create_token": self.create_token,
            "database_guid": self.database_guid,
            "database_id": self.database_id,
            "database_name": self.database_name,
            "engine": "sqlserver",
            "schema": SQLSERVER_IDENTITY_SCHEMA,
        });
        crate::json::canonical_bytes(&v)
    }

    /// `sha256:` of [`SqlserverIdentity::record`].
    pub fn digest(&self) -> Sha256Digest {
        Sha256Digest::of(&self.record())
    }

    /// Reads a stored record: exactly the canonical bytes of a valid identity, nothing else.
    pub fn from_record(bytes: &[u8]) -> Result<Self, RecordInvalid> {
        let r: SqlserverRecord = stored_record(bytes)?;
        let id = Self {
            create_token: r.create_token,
            database_guid: r.database_guid,
            database_id: r.database_id,
            database_name: r.database_name,
        };
        let ok = (r.schema.as_str(), r.engine.as_str()) == (SQLSERVER_IDENTITY_SCHEMA, "sqlserver");
        exactly(id, ok, bytes, Self::valid, Self::record)
    }
}

/// What a participant physically is, by engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParticipantIdentity {
    /// A PostgreSQL database.
    Postgresql(PhysicalIdentity),
    /// A ClickHouse database on every member of its cluster.
    Clickhouse(ClickhouseIdentity),
    /// A SQL Server database.
    Sqlserver(SqlserverIdentity),
}

impl ParticipantIdentity {
    /// The engine's canonical identity record.
    pub fn record(&self) -> Vec<u8> {
        match self {
            Self::Postgresql(i) => i.record(),
            Self::Clickhouse(i) => i.record(),
            Self::Sqlserver(i) => i.record(),
        }
    }

    /// `sha256:` of [`ParticipantIdentity::record`].
    pub fn digest(&self) -> Sha256Digest {
        Sha256Digest::of(&self.record())
    }

    /// The engine the identity is of.
    pub fn engine(&self) -> Engine {
        match self {
            Self::Postgresql(_) => Engine::Postgresql,
            Self::Clickhouse(_) => Engine::Clickhouse,
            Self::Sqlserver(_) => Engine::Sqlserver,
        }
    }

    /// The database a relation of this participant is qualified with.
    pub fn database_name(&self) -> &str {
        match self {
            Self::Postgresql(i) => &i.database_name,
            Self::Clickhouse(i) => &i.database_name,
            Self::Sqlserver(i) => &i.database_name,
        }
    }

    /// The record's schema.
    pub fn schema(&self) -> &'static str {
        match self {
            Self::Postgresql(_) => IDENTITY_SCHEMA,
            Self::Clickhouse(_) => CLICKHOUSE_IDENTITY_SCHEMA,
            Self::Sqlserver(_) => SQLSERVER_IDENTITY_SCHEMA,
        }
    }
}

impl From<PhysicalIdentity> for ParticipantIdentity {
    fn from(i: PhysicalIdentity) -> Self {
        Self::Postgresql(i)
    }
}

impl From<ClickhouseIdentity> for ParticipantIdentity {
    fn from(i: ClickhouseIdentity) -> Self {
        Self::Clickhouse(i)
    }
}

impl From<SqlserverIdentity> for ParticipantIdentity {
    fn from(i: SqlserverIdentity) -> Self {
        Self::Sqlserver(i)
    }
}

/// One enrolled participant, as the store holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enrollment {
    /// The participant id (of the policy's enrollment).
    pub participant_id: String,
    /// Its observed identity at enrollment.
    pub identity: ParticipantIdentity,
    /// The identity's digest.
    pub identity_digest: Sha256Digest,
}

/// The role of a manifest connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConnectionRole {
    /// The source read.
    Source,
    /// The target written.
    Target,
    /// The run's state (checkpoint, receipts).
    State,
}

impl ConnectionRole {
    /// The stable text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Source => "source",
            Self::Target => "target",
            Self::State => "state",
        }
    }
}

/// One manifest connection as the run observed it, before any read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedConnection {
    /// Its role.
    pub role: ConnectionRole,
    /// Its engine, from the manifest and registry (`postgresql`, `sqlserver`, …).
    pub engine: Engine,
    /// Its observed identity; `None` when this engine's identity is not observed (refused).
    pub identity: Option<ParticipantIdentity>,
    /// The relations the run uses on it (PostgreSQL and SQL Server `schema.table`, ClickHouse
    /// `table`, as the run will name them in the participant's database).
    pub relations: Vec<String>,
}

/// The participant a run was bound to for one role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunParticipant {
    /// The connection role.
    pub role: ConnectionRole,
    /// The enrolled participant.
    pub participant_id: String,
    /// Its enrolled identity's digest.
    pub identity_digest: Sha256Digest,
}

/// Why a run is refused by its physical binding (each a stable `DPONE_CLI_NP_*` code).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BindRefusal {
    /// A connection's engine is not the route's engine for its role.
    RouteEngineMismatch(ConnectionRole),
    /// The route's participant for a role has no enrollment under the grant's enrollment.
    NotEnrolled(ConnectionRole),
    /// The engine's identity is not observed by this host (fail closed).
    Unobservable(ConnectionRole),
    /// The observed identity is not the enrolled one (another database, server, or a recreated
    /// database).
    IdentityMismatch(ConnectionRole),
    /// A relation is not one of the workload's effects of the participant.
    RelationOutOfScope(ConnectionRole),
}

impl BindRefusal {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::RouteEngineMismatch(_) => "DPONE_CLI_NP_ROUTE_ENGINE_MISMATCH",
            Self::NotEnrolled(_) => "DPONE_CLI_NP_PARTICIPANT_NOT_ENROLLED",
            Self::Unobservable(_) => "DPONE_CLI_NP_PARTICIPANT_UNOBSERVABLE",
            Self::IdentityMismatch(_) => "DPONE_CLI_NP_PARTICIPANT_IDENTITY_MISMATCH",
            Self::RelationOutOfScope(_) => "DPONE_CLI_NP_RELATION_OUT_OF_SCOPE",
        }
    }

    /// The role it concerns.
    pub fn role(&self) -> ConnectionRole {
        match self {
            Self::RouteEngineMismatch(r)
            | Self::NotEnrolled(r)
            | Self::Unobservable(r)
            | Self::IdentityMismatch(r)
            | Self::RelationOutOfScope(r) => *r,
        }
    }
}

/// Which effect kinds a relation of `role` may be.
fn kinds(role: ConnectionRole) -> &'static [EffectKind] {
    match role {
        ConnectionRole::Source => &[EffectKind::Read, EffectKind::Helper],
        ConnectionRole::Target => &[EffectKind::Write, EffectKind::Staging],
        ConnectionRole::State => &[EffectKind::State],
    }
}

/// Binds every observed connection of a run to the workload's route and the enrollment
/// (`enrolled`: the records of the grant's enrollment digest). Checked in role order, for each
/// connection: engine, enrollment, observation, identity, relations. Returns the participants
/// the run is bound to.
pub fn bind_run(
    workload: &CompositionWorkload,
    observed: &[ObservedConnection],
    enrolled: &[Enrollment],
) -> Result<Vec<RunParticipant>, BindRefusal> {
    let mut ordered: Vec<&ObservedConnection> = observed.iter().collect();
    ordered.sort_by_key(|o| o.role);
    let mut out = Vec::with_capacity(ordered.len());
    for o in ordered {
        let (engine, participant) = match o.role {
            ConnectionRole::Source => (
                workload.route.source_engine,
                workload.route.source_participant.as_str(),
            ),
            ConnectionRole::Target | ConnectionRole::State => (
                workload.route.target_engine,
                workload.route.target_participant.as_str(),
            ),
        };
        if o.engine != engine {
            return Err(BindRefusal::RouteEngineMismatch(o.role));
        }
        let Some(e) = enrolled.iter().find(|e| e.participant_id == participant) else {
            return Err(BindRefusal::NotEnrolled(o.role));
        };
        let Some(identity) = &o.identity else {
            return Err(BindRefusal::Unobservable(o.role));
        };
        if *identity != e.identity
            || identity.engine() != engine
            || identity.digest() != e.identity_digest
        {
            return Err(BindRefusal::IdentityMismatch(o.role));
        }
        for rel in &o.relations {
            let scoped = format!("{}.{rel}", e.identity.database_name());
            let listed = workload.effects.iter().any(|f| {
                f.participant_id.as_str() == participant
                    && f.relation.as_str() == scoped
                    && kinds(o.role).contains(&f.effect)
            });
            if !listed {
                return Err(BindRefusal::RelationOutOfScope(o.role));
            }
        }
        out.push(RunParticipant {
            role: o.role,
            participant_id: participant.to_owned(),
            identity_digest: e.identity_digest.clone(),
        });
    }
    Ok(out)
}

/// The one statement that observes a PostgreSQL participant's [`PhysicalIdentity`] on a live
/// session: `pg_control_system().system_identifier`, `current_database()` and that database's
/// `pg_database.oid` (one row; every column non-null on a server that answers).
pub const OBSERVE_SQL: &str = "SELECT (SELECT system_identifier::text FROM \
     pg_catalog.pg_control_system()), pg_catalog.current_database()::text, \
     (SELECT oid::bigint FROM pg_catalog.pg_database WHERE datname = \
     pg_catalog.current_database())";

/// Why a reservation's workload (its route and effects) cannot be established for a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadRefusal {
    /// The composition given is not the one the execution grant binds
    /// (`parent_release_digest`).
    CompositionMismatch,
    /// The workload is not in the composition, or (qualification) its route or one of its
    /// subjects is not among the grant's signed routes and scope.
    WorkloadUnbound,
}

impl WorkloadRefusal {
    /// The stable code.
    pub fn code(self) -> &'static str {
        match self {
            Self::CompositionMismatch => "DPONE_CLI_NP_COMPOSITION_MISMATCH",
            Self::WorkloadUnbound => "DPONE_CLI_NP_WORKLOAD_UNBOUND",
        }
    }
}

/// The workload `workload_id` a run under a reservation of `grant` binds its connections to:
/// the composition's entry, where the composition is the one the grant binds. An execution
/// grant binds it by digest (`parent_release_digest`); a qualification grant names no
/// composition, so the workload's route must be one of the grant's signed `routes` and each of
/// its effects one of the grant's signed scope `subjects`.
pub fn reserved_workload(
    grant: &crate::Authority,
    composition: &crate::Composition,
    workload_id: &str,
) -> Result<CompositionWorkload, WorkloadRefusal> {
    use crate::Document as _;
    use crate::authority::PhaseSubjects;
    let w = composition
        .workloads
        .iter()
        .find(|w| w.workload_id.as_str() == workload_id)
        .ok_or(WorkloadRefusal::WorkloadUnbound)?;
    match &grant.phase_subjects {
        PhaseSubjects::Execution(e) => {
            if composition.digest() != e.parent_release_digest {
                return Err(WorkloadRefusal::CompositionMismatch);
            }
        }
        PhaseSubjects::Qualification(_) => {
            let routed = grant.routes.contains(&w.route);
            let scoped = w.effects.iter().all(|f| {
                grant
                    .scope
                    .subjects
                    .iter()
                    .any(|s| s.participant_id == f.participant_id && s.relation == f.relation)
            });
            if !(routed && scoped) {
                return Err(WorkloadRefusal::WorkloadUnbound);
            }
        }
    }
    Ok(w.clone())
}
