//! Physical enrollment (spec 004: "actual nonproduction enrollment"): what a participant *is*,
//! beside the id, engine, access and tier the policy's `enrollment` gives it.
//!
//! - [`PhysicalIdentity`]: a PostgreSQL participant's system identifier, database name and
//!   database OID as observed live; its digest is `sha256:` of the canonical JSON record
//!   `dpone.np-physical-identity.v1` (versioned; its only keys are those fields, `engine` and
//!   `schema`). A recreated database of the same name has a new OID, another cluster another
//!   system identifier: either is another identity.
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
    /// `sha256:` of the canonical `dpone.np-physical-identity.v1` record.
    pub fn digest(&self) -> Sha256Digest {
        let v = json!({
            "database_name": self.database_name,
            "database_oid": self.database_oid,
            "engine": "postgresql",
            "schema": IDENTITY_SCHEMA,
            "system_identifier": self.system_identifier,
        });
        Sha256Digest::of(&crate::json::canonical_bytes(&v))
    }
}

/// One enrolled participant, as the store holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enrollment {
    /// The participant id (of the policy's enrollment).
    pub participant_id: String,
    /// Its observed identity at enrollment.
    pub identity: PhysicalIdentity,
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
    pub identity: Option<PhysicalIdentity>,
    /// The relations the run uses on it (`schema.table`, as the run will name them).
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
        if *identity != e.identity || identity.digest() != e.identity_digest {
            return Err(BindRefusal::IdentityMismatch(o.role));
        }
        for rel in &o.relations {
            let scoped = format!("{}.{rel}", e.identity.database_name);
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
