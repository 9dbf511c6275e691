//! `dpone.nonproduction-authority.v1`: the signed grant, in two closed variants selected by
//! `phase`. Both carry the common claims; `phase_subjects` holds exactly the subjects of the
//! declared phase:
//!
//! - `qualification`: `run_id` (the one-time run), `fixture_plan_digest`,
//!   `qualification_plan_digest`; exactly one route;
//! - `execution`: `qualified_set_digest`, `native_release_digest`, `parent_release_digest`,
//!   `deployment_digest`, `activation_id` and `membership` (the exact workload/pack set, at most
//!   the grant's own `max_workloads`).
//!
//! A document whose `phase_subjects` names any subject of the other phase is refused with
//! [`codes::PHASE_SUBJECTS_FOREIGN`] (phase swap), before the unknown/missing-field check.

use crate::codes;
use crate::common::{
    CEILINGS, Limits, MAX_ROUTES, MAX_VALIDITY_SECONDS, PROVENANCE_KEYS, PURPOSE, Phase,
    Provenance, Route, Scope, TRUST_TIER, Validity, keys, read_exact, read_set, type_err,
};
use crate::document::{Document, finish};
use crate::error::{NpError, Result};
use crate::fields::{Digest, Ident, Uuid};
use crate::json::Obj;
use serde_json::{Map, Value, json};

/// The schema string.
pub const AUTHORITY_SCHEMA: &str = "dpone.nonproduction-authority.v1";

/// The subjects only a qualification grant carries.
pub const QUALIFICATION_SUBJECT_KEYS: &[&str] =
    &["fixture_plan_digest", "qualification_plan_digest", "run_id"];

/// The subjects only an execution grant carries.
pub const EXECUTION_SUBJECT_KEYS: &[&str] = &[
    "activation_id",
    "deployment_digest",
    "membership",
    "native_release_digest",
    "parent_release_digest",
    "qualified_set_digest",
];

/// One workload and its pack.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Member {
    /// Workload id.
    pub workload_id: Ident,
    /// Digest of its execution pack.
    pub pack_digest: Digest,
}

impl Member {
    /// Reads one member.
    pub fn read(path: &str, v: &Value) -> Result<Self> {
        let o = Obj::new(path, v, &["pack_digest", "workload_id"])?;
        Ok(Self {
            workload_id: Ident::parse(&o.path_of("workload_id"), o.str("workload_id")?)?,
            pack_digest: Digest::parse(&o.path_of("pack_digest"), o.str("pack_digest")?)?,
        })
    }

    /// The document value.
    pub fn write(&self) -> Value {
        json!({"pack_digest": self.pack_digest.as_str(), "workload_id": self.workload_id.as_str()})
    }
}

/// Reads a membership set (ascending by workload id, 1..=64).
pub fn read_membership(obj: &Obj<'_>, key: &str) -> Result<Vec<Member>> {
    let max = CEILINGS.max_workloads as usize;
    let items = obj.array(key, 1, max)?;
    read_set(&obj.path_of(key), items, Member::read, |m| {
        m.workload_id.clone()
    })
}

/// Qualification subjects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QualificationSubjects {
    /// The one-time qualification run.
    pub run_id: Uuid,
    /// Fixture plan digest.
    pub fixture_plan_digest: Digest,
    /// Qualification plan digest.
    pub qualification_plan_digest: Digest,
}

/// Execution subjects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecutionSubjects {
    /// Digest of the qualified set ([`crate::release_set::DbtReleaseSet::qualified_set_digest`]).
    pub qualified_set_digest: Digest,
    /// Digest of the scoped native release set.
    pub native_release_digest: Digest,
    /// Digest of the parent release composition.
    pub parent_release_digest: Digest,
    /// Digest of the sealed deployment.
    pub deployment_digest: Digest,
    /// The one activation.
    pub activation_id: Uuid,
    /// The exact workload/pack membership.
    pub membership: Vec<Member>,
}

/// The closed phase variants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PhaseSubjects {
    /// A qualification grant.
    Qualification(QualificationSubjects),
    /// An execution grant.
    Execution(ExecutionSubjects),
}

impl PhaseSubjects {
    /// The phase.
    pub fn phase(&self) -> Phase {
        match self {
            Self::Qualification(_) => Phase::Qualification,
            Self::Execution(_) => Phase::Execution,
        }
    }

    fn read(obj: &Obj<'_>, phase: Phase) -> Result<Self> {
        let path = obj.path_of("phase_subjects");
        let raw = obj.value("phase_subjects")?;
        let (own, foreign) = match phase {
            Phase::Qualification => (QUALIFICATION_SUBJECT_KEYS, EXECUTION_SUBJECT_KEYS),
            Phase::Execution => (EXECUTION_SUBJECT_KEYS, QUALIFICATION_SUBJECT_KEYS),
        };
        let map = raw
            .as_object()
            .ok_or_else(|| type_err(&path, "an object"))?;
        if map.keys().any(|k| foreign.contains(&k.as_str())) {
            return Err(NpError::new(
                codes::PHASE_SUBJECTS_FOREIGN,
                format!(
                    "{path}: names a subject of the other phase; neither phase grants the other's authority"
                ),
            ));
        }
        let o = Obj::new(&path, raw, own)?;
        let digest = |k: &str| Digest::parse(&o.path_of(k), o.str(k)?);
        let uuid = |k: &str| Uuid::parse(&o.path_of(k), o.str(k)?);
        Ok(match phase {
            Phase::Qualification => Self::Qualification(QualificationSubjects {
                run_id: uuid("run_id")?,
                fixture_plan_digest: digest("fixture_plan_digest")?,
                qualification_plan_digest: digest("qualification_plan_digest")?,
            }),
            Phase::Execution => Self::Execution(ExecutionSubjects {
                qualified_set_digest: digest("qualified_set_digest")?,
                native_release_digest: digest("native_release_digest")?,
                parent_release_digest: digest("parent_release_digest")?,
                deployment_digest: digest("deployment_digest")?,
                activation_id: uuid("activation_id")?,
                membership: read_membership(&o, "membership")?,
            }),
        })
    }

    fn write(&self) -> Value {
        match self {
            Self::Qualification(q) => json!({
                "fixture_plan_digest": q.fixture_plan_digest.as_str(),
                "qualification_plan_digest": q.qualification_plan_digest.as_str(),
                "run_id": q.run_id.as_str(),
            }),
            Self::Execution(e) => json!({
                "activation_id": e.activation_id.as_str(),
                "deployment_digest": e.deployment_digest.as_str(),
                "membership": e.membership.iter().map(Member::write).collect::<Vec<_>>(),
                "native_release_digest": e.native_release_digest.as_str(),
                "parent_release_digest": e.parent_release_digest.as_str(),
                "qualified_set_digest": e.qualified_set_digest.as_str(),
            }),
        }
    }
}

/// `dpone.nonproduction-authority.v1`: a signed grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authority {
    /// Grant identity.
    pub grant_id: Uuid,
    /// Campaign.
    pub campaign_id: Uuid,
    /// Protected environment.
    pub environment_id: Uuid,
    /// Digest of the policy the grant was issued under.
    pub policy_digest: Digest,
    /// Digest of the policy's enrollment the grant was issued against.
    pub enrollment_digest: Digest,
    /// Source, fixture, generator, compilation intent, toolchain.
    pub provenance: Provenance,
    /// The exact six-dimensional routes (one for qualification).
    pub routes: Vec<Route>,
    /// Every read and write participant and physical subject.
    pub scope: Scope,
    /// Validity (at most 24 h).
    pub validity: Validity,
    /// Revocation epoch the grant was issued in.
    pub revocation_epoch: u64,
    /// Grant ceilings.
    pub limits: Limits,
    /// The phase and its mandatory subjects.
    pub phase_subjects: PhaseSubjects,
}

const KEYS: &[&str] = &[
    "campaign_id",
    "enrollment_digest",
    "environment_id",
    "grant_id",
    "limits",
    "phase",
    "phase_subjects",
    "policy_digest",
    "purpose",
    "revocation_epoch",
    "routes",
    "schema",
    "scope",
    "trust_tier",
    "validity",
];

impl Authority {
    /// The phase.
    pub fn phase(&self) -> Phase {
        self.phase_subjects.phase()
    }
}

impl Document for Authority {
    const SCHEMA: &'static str = AUTHORITY_SCHEMA;

    fn from_value(value: &Value) -> Result<Self> {
        let o = Obj::new("$", value, &keys(&[KEYS, PROVENANCE_KEYS]))?;
        read_exact(&o, "purpose", PURPOSE, codes::PURPOSE_INVALID)?;
        read_exact(&o, "trust_tier", TRUST_TIER, codes::TRUST_TIER_INVALID)?;
        let phase = Phase::parse("$.phase", o.str("phase")?)?;
        let phase_subjects = PhaseSubjects::read(&o, phase)?;
        let scope = Scope::read(&o, "scope")?;
        let max_routes = if phase == Phase::Qualification {
            1
        } else {
            MAX_ROUTES
        };
        let routes = read_set(
            "$.routes",
            o.array("routes", 1, max_routes)?,
            Route::read,
            Clone::clone,
        )?;
        for (i, r) in routes.iter().enumerate() {
            scope.check_route(&format!("$.routes[{i}]"), r)?;
        }
        let limits = Limits::read(&o, "limits")?;
        if let PhaseSubjects::Execution(e) = &phase_subjects
            && e.membership.len() > limits.max_workloads as usize
        {
            return Err(NpError::new(
                codes::MEMBERSHIP_ABOVE_LIMIT,
                "$.phase_subjects.membership: more workloads than the grant's max_workloads",
            ));
        }
        let digest = |k: &str| Digest::parse(&o.path_of(k), o.str(k)?);
        let uuid = |k: &str| Uuid::parse(&o.path_of(k), o.str(k)?);
        Ok(Self {
            grant_id: uuid("grant_id")?,
            campaign_id: uuid("campaign_id")?,
            environment_id: uuid("environment_id")?,
            policy_digest: digest("policy_digest")?,
            enrollment_digest: digest("enrollment_digest")?,
            provenance: Provenance::read(&o)?,
            routes,
            scope,
            validity: Validity::read(&o, "validity", Some(MAX_VALIDITY_SECONDS))?,
            revocation_epoch: o.u64("revocation_epoch")?,
            limits,
            phase_subjects,
        })
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("campaign_id".into(), self.campaign_id.as_str().into());
        m.insert(
            "enrollment_digest".into(),
            self.enrollment_digest.as_str().into(),
        );
        m.insert("environment_id".into(), self.environment_id.as_str().into());
        m.insert("grant_id".into(), self.grant_id.as_str().into());
        m.insert("limits".into(), self.limits.write());
        m.insert("phase".into(), self.phase().as_str().into());
        m.insert("phase_subjects".into(), self.phase_subjects.write());
        m.insert("policy_digest".into(), self.policy_digest.as_str().into());
        m.insert("purpose".into(), PURPOSE.into());
        m.insert("revocation_epoch".into(), self.revocation_epoch.into());
        m.insert(
            "routes".into(),
            Value::Array(self.routes.iter().map(Route::write).collect()),
        );
        m.insert("scope".into(), self.scope.write());
        m.insert("trust_tier".into(), TRUST_TIER.into());
        m.insert("validity".into(), self.validity.write());
        self.provenance.write_into(&mut m);
        finish(AUTHORITY_SCHEMA, m)
    }
}
