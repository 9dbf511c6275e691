//! `dpone.release-composition.nonproduction.v1`: the parent release, the union of the scoped
//! native release and the genuine ordinary releases. Every workload lists *every* effect it has
//! (read, write, helper, staging, state) as participant + relation + access, so the scope
//! component can decide coverage: one effect outside the grant is one subject or participant
//! outside the grant.
//!
//! Rules checked here (each its own code):
//! - an effect's participant is listed in the scope ([`codes::PARTICIPANT_UNBOUND`]) and the
//!   effect's access is that participant's one access ([`codes::EFFECT_PARTICIPANT_ACCESS`]);
//! - the access fits the kind: `read` reads; `write`, `staging` and `state` write; `helper`
//!   either ([`codes::EFFECT_ACCESS_INVALID`]);
//! - an effect's relation is a scope subject ([`codes::EFFECT_SUBJECT_UNLISTED`]) and every
//!   scope subject is some effect's ([`codes::SUBJECT_UNUSED`]): the scope is exactly the
//!   effects, and every listed participant is some effect's ([`codes::PARTICIPANT_UNUSED`]);
//! - each workload's route lies inside the scope; its limits are within the ceilings.

use crate::codes;
use crate::common::{
    Access, CEILINGS, EffectKind, Limits, MAX_EFFECTS, Origin, PURPOSE, Route, Scope, Subject,
    TRUST_TIER, keys, read_digest_set, read_exact, read_set,
};
use crate::document::{Document, finish};
use crate::error::{NpError, Result};
use crate::fields::{Digest, Ident, Relation, Uuid};
use crate::json::Obj;
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// The schema string.
pub const COMPOSITION_SCHEMA: &str = "dpone.release-composition.nonproduction.v1";

/// Most ordinary releases of one composition.
pub const MAX_ORDINARY_RELEASES: usize = 16;

/// One effect of a workload.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Effect {
    /// Participant holding the relation.
    pub participant_id: Ident,
    /// The relation.
    pub relation: Relation,
    /// What the workload does to it.
    pub effect: EffectKind,
    /// The participant's one access.
    pub access: Access,
}

/// One workload of the composition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompositionWorkload {
    /// Workload id.
    pub workload_id: Ident,
    /// Digest of its execution pack.
    pub pack_digest: Digest,
    /// Native or ordinary.
    pub origin: Origin,
    /// Its exact route.
    pub route: Route,
    /// Its own (lower) signed ceilings.
    pub limits: Limits,
    /// Every effect (ascending by participant, relation, kind).
    pub effects: Vec<Effect>,
}

impl CompositionWorkload {
    /// The subjects its effects touch (distinct, ascending).
    pub fn subjects(&self) -> Vec<Subject> {
        self.effects
            .iter()
            .map(|e| Subject {
                participant_id: e.participant_id.clone(),
                relation: e.relation.clone(),
            })
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }
}

/// `dpone.release-composition.nonproduction.v1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Composition {
    /// Composition identity.
    pub composition_id: Uuid,
    /// Campaign.
    pub campaign_id: Uuid,
    /// Protected environment.
    pub environment_id: Uuid,
    /// Policy it was composed under.
    pub policy_digest: Digest,
    /// Digest of the scoped native release set.
    pub native_release_digest: Digest,
    /// Digests of the genuine ordinary releases (ascending).
    pub ordinary_release_digests: Vec<Digest>,
    /// The complete scope (exactly the union of the effects).
    pub scope: Scope,
    /// Workloads (ascending by id).
    pub workloads: Vec<CompositionWorkload>,
}

impl Composition {
    /// The workload `id`.
    pub fn workload(&self, id: &str) -> Option<&CompositionWorkload> {
        self.workloads.iter().find(|w| w.workload_id.as_str() == id)
    }
}

const KEYS: &[&str] = &[
    "campaign_id",
    "composition_id",
    "environment_id",
    "native_release_digest",
    "ordinary_release_digests",
    "policy_digest",
    "purpose",
    "schema",
    "scope",
    "trust_tier",
    "workloads",
];

fn read_effect(path: &str, v: &Value) -> Result<Effect> {
    let e = Obj::new(path, v, &["access", "effect", "participant_id", "relation"])?;
    Ok(Effect {
        participant_id: Ident::parse(&e.path_of("participant_id"), e.str("participant_id")?)?,
        relation: Relation::parse(&e.path_of("relation"), e.str("relation")?)?,
        effect: EffectKind::parse(&e.path_of("effect"), e.str("effect")?)?,
        access: Access::parse(&e.path_of("access"), e.str("access")?)?,
    })
}

fn check_effect(path: &str, scope: &Scope, e: &Effect) -> Result<()> {
    let Some(p) = scope.participant(&e.participant_id) else {
        return Err(NpError::new(
            codes::PARTICIPANT_UNBOUND,
            format!("{path}: the effect's participant is not listed"),
        ));
    };
    if p.access != e.access {
        return Err(NpError::new(
            codes::EFFECT_PARTICIPANT_ACCESS,
            format!("{path}: the access is not the participant's one access"),
        ));
    }
    let fits = match e.effect {
        EffectKind::Read => e.access == Access::Read,
        EffectKind::Write | EffectKind::Staging | EffectKind::State => e.access == Access::Write,
        EffectKind::Helper => true,
    };
    if !fits {
        return Err(NpError::new(
            codes::EFFECT_ACCESS_INVALID,
            format!("{path}: the access does not fit the effect kind"),
        ));
    }
    let subject = Subject {
        participant_id: e.participant_id.clone(),
        relation: e.relation.clone(),
    };
    if !scope.subjects.contains(&subject) {
        return Err(NpError::new(
            codes::EFFECT_SUBJECT_UNLISTED,
            format!("{path}: the effect's relation is not a scope subject"),
        ));
    }
    Ok(())
}

fn read_workload(path: &str, v: &Value, scope: &Scope) -> Result<CompositionWorkload> {
    let w = Obj::new(
        path,
        v,
        &[
            "effects",
            "limits",
            "origin",
            "pack_digest",
            "route",
            "workload_id",
        ],
    )?;
    let route = Route::read(&w.path_of("route"), w.value("route")?)?;
    scope.check_route(&w.path_of("route"), &route)?;
    let epath = w.path_of("effects");
    let effects = read_set(
        &epath,
        w.array("effects", 1, MAX_EFFECTS)?,
        read_effect,
        |e| (e.participant_id.clone(), e.relation.clone(), e.effect),
    )?;
    for (i, e) in effects.iter().enumerate() {
        check_effect(&format!("{epath}[{i}]"), scope, e)?;
    }
    Ok(CompositionWorkload {
        workload_id: Ident::parse(&w.path_of("workload_id"), w.str("workload_id")?)?,
        pack_digest: Digest::parse(&w.path_of("pack_digest"), w.str("pack_digest")?)?,
        origin: Origin::parse(&w.path_of("origin"), w.str("origin")?)?,
        route,
        limits: Limits::read(&w, "limits")?,
        effects,
    })
}

impl Document for Composition {
    const SCHEMA: &'static str = COMPOSITION_SCHEMA;

    fn from_value(value: &Value) -> Result<Self> {
        let o = Obj::new("$", value, &keys(&[KEYS]))?;
        read_exact(&o, "purpose", PURPOSE, codes::PURPOSE_INVALID)?;
        read_exact(&o, "trust_tier", TRUST_TIER, codes::TRUST_TIER_INVALID)?;
        let scope = Scope::read(&o, "scope")?;
        let workloads = read_set(
            "$.workloads",
            o.array("workloads", 1, CEILINGS.max_workloads as usize)?,
            |p, v| read_workload(p, v, &scope),
            |w| w.workload_id.clone(),
        )?;
        let used: BTreeSet<Subject> = workloads.iter().flat_map(|w| w.subjects()).collect();
        if let Some(i) = scope.subjects.iter().position(|s| !used.contains(s)) {
            return Err(NpError::new(
                codes::SUBJECT_UNUSED,
                format!("$.scope.subjects[{i}]: no effect touches the subject"),
            ));
        }
        if let Some(i) = scope
            .participants
            .iter()
            .position(|p| !used.iter().any(|s| s.participant_id == p.participant_id))
        {
            return Err(NpError::new(
                codes::PARTICIPANT_UNUSED,
                format!("$.scope.participants[{i}]: no effect uses the participant"),
            ));
        }
        let digest = |k: &str| Digest::parse(&o.path_of(k), o.str(k)?);
        let uuid = |k: &str| Uuid::parse(&o.path_of(k), o.str(k)?);
        Ok(Self {
            composition_id: uuid("composition_id")?,
            campaign_id: uuid("campaign_id")?,
            environment_id: uuid("environment_id")?,
            policy_digest: digest("policy_digest")?,
            native_release_digest: digest("native_release_digest")?,
            ordinary_release_digests: read_digest_set(
                &o,
                "ordinary_release_digests",
                1,
                MAX_ORDINARY_RELEASES,
            )?,
            scope,
            workloads,
        })
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("campaign_id".into(), self.campaign_id.as_str().into());
        m.insert("composition_id".into(), self.composition_id.as_str().into());
        m.insert("environment_id".into(), self.environment_id.as_str().into());
        m.insert(
            "native_release_digest".into(),
            self.native_release_digest.as_str().into(),
        );
        m.insert(
            "ordinary_release_digests".into(),
            json!(
                self.ordinary_release_digests
                    .iter()
                    .map(Digest::as_str)
                    .collect::<Vec<_>>()
            ),
        );
        m.insert("policy_digest".into(), self.policy_digest.as_str().into());
        m.insert("purpose".into(), PURPOSE.into());
        m.insert("scope".into(), self.scope.write());
        m.insert("trust_tier".into(), TRUST_TIER.into());
        m.insert(
            "workloads".into(),
            Value::Array(
                self.workloads
                    .iter()
                    .map(|w| {
                        json!({
                            "effects": w.effects.iter().map(|e| json!({
                                "access": e.access.as_str(),
                                "effect": e.effect.as_str(),
                                "participant_id": e.participant_id.as_str(),
                                "relation": e.relation.as_str(),
                            })).collect::<Vec<_>>(),
                            "limits": w.limits.write(),
                            "origin": w.origin.as_str(),
                            "pack_digest": w.pack_digest.as_str(),
                            "route": w.route.write(),
                            "workload_id": w.workload_id.as_str(),
                        })
                    })
                    .collect(),
            ),
        );
        finish(COMPOSITION_SCHEMA, m)
    }
}
