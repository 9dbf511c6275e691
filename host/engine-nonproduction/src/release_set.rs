//! `dpone.dbt-release-set.nonproduction.v1` (the scoped native release) and its producer wire
//! `dpone.dbt-airflow-self-service.nonproduction.v1`.
//!
//! Scope and qualification descriptors are fields of the release itself, so the release digest
//! covers them (never provenance only). Every workload's route must be one of the qualified
//! routes ([`codes::ROUTE_UNQUALIFIED`]) and lie inside the scope.

use crate::authority::Member;
use crate::codes;
use crate::common::{
    CEILINGS, PROVENANCE_KEYS, PURPOSE, Provenance, Route, Scope, TRUST_TIER, keys, read_exact,
    read_set,
};
use crate::document::{Document, finish};
use crate::error::{NpError, Result};
use crate::fields::{Digest, Ident, Uuid};
use crate::json::{self, Obj};
use serde_json::{Map, Value, json};

/// The schema string of the release set.
pub const RELEASE_SET_SCHEMA: &str = "dpone.dbt-release-set.nonproduction.v1";

/// The schema string of the producer wire.
pub const PRODUCER_WIRE_SCHEMA: &str = "dpone.dbt-airflow-self-service.nonproduction.v1";

/// A workload of a release: member plus route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReleaseWorkload {
    /// Workload and pack.
    pub member: Member,
    /// Its exact route.
    pub route: Route,
}

fn read_workloads(o: &Obj<'_>, scope: &Scope) -> Result<Vec<ReleaseWorkload>> {
    let path = o.path_of("workloads");
    let items = o.array("workloads", 1, CEILINGS.max_workloads as usize)?;
    let workloads = read_set(
        &path,
        items,
        |p, v| {
            let w = Obj::new(p, v, &["pack_digest", "route", "workload_id"])?;
            Ok(ReleaseWorkload {
                member: Member {
                    workload_id: Ident::parse(&w.path_of("workload_id"), w.str("workload_id")?)?,
                    pack_digest: Digest::parse(&w.path_of("pack_digest"), w.str("pack_digest")?)?,
                },
                route: Route::read(&w.path_of("route"), w.value("route")?)?,
            })
        },
        |w| w.member.workload_id.clone(),
    )?;
    for (i, w) in workloads.iter().enumerate() {
        scope.check_route(&format!("{path}[{i}].route"), &w.route)?;
    }
    Ok(workloads)
}

fn write_workloads(workloads: &[ReleaseWorkload]) -> Value {
    Value::Array(
        workloads
            .iter()
            .map(|w| {
                json!({
                    "pack_digest": w.member.pack_digest.as_str(),
                    "route": w.route.write(),
                    "workload_id": w.member.workload_id.as_str(),
                })
            })
            .collect(),
    )
}

/// One qualification descriptor: the route and the digest of its signed route qualification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QualificationRef {
    /// The qualified route.
    pub route: Route,
    /// Digest of its `dpone.route-qualification.v1`.
    pub qualification_digest: Digest,
}

/// The native authority block: hash-covered scope and qualifications.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NativeAuthority {
    /// Policy the release was compiled under.
    pub policy_digest: Digest,
    /// Enrollment it was compiled against.
    pub enrollment_digest: Digest,
    /// The complete scope.
    pub scope: Scope,
    /// The qualified routes (ascending by route).
    pub qualifications: Vec<QualificationRef>,
}

/// `dpone.dbt-release-set.nonproduction.v1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbtReleaseSet {
    /// Release-set identity.
    pub release_set_id: Uuid,
    /// Campaign.
    pub campaign_id: Uuid,
    /// Protected environment.
    pub environment_id: Uuid,
    /// Digest of the producer wire document this release was compiled from.
    pub producer_digest: Digest,
    /// Source, fixture, generator, compilation intent, toolchain.
    pub provenance: Provenance,
    /// The native authority block.
    pub authority: NativeAuthority,
    /// Workloads (ascending by id).
    pub workloads: Vec<ReleaseWorkload>,
}

impl DbtReleaseSet {
    /// The digest of the qualified set: sha256 of the canonical JSON array of the qualification
    /// digests in ascending order. Execution grants name it as `qualified_set_digest`.
    pub fn qualified_set_digest(&self) -> Digest {
        let mut digests: Vec<&str> = self
            .authority
            .qualifications
            .iter()
            .map(|q| q.qualification_digest.as_str())
            .collect();
        digests.sort_unstable();
        Digest::of(&json::canonical_bytes(&json!(digests)))
    }
}

const KEYS: &[&str] = &[
    "authority",
    "campaign_id",
    "environment_id",
    "producer",
    "purpose",
    "release_set_id",
    "schema",
    "trust_tier",
    "workloads",
];

impl Document for DbtReleaseSet {
    const SCHEMA: &'static str = RELEASE_SET_SCHEMA;

    fn from_value(value: &Value) -> Result<Self> {
        let o = Obj::new("$", value, &keys(&[KEYS, PROVENANCE_KEYS]))?;
        read_exact(&o, "purpose", PURPOSE, codes::PURPOSE_INVALID)?;
        read_exact(&o, "trust_tier", TRUST_TIER, codes::TRUST_TIER_INVALID)?;
        let producer = o.obj("producer", &["digest", "wire"])?;
        read_exact(
            &producer,
            "wire",
            PRODUCER_WIRE_SCHEMA,
            codes::PRODUCER_WIRE_INVALID,
        )?;
        let a = o.obj(
            "authority",
            &[
                "enrollment_digest",
                "policy_digest",
                "qualifications",
                "scope",
            ],
        )?;
        let scope = Scope::read(&a, "scope")?;
        let qpath = a.path_of("qualifications");
        let qualifications = read_set(
            &qpath,
            a.array("qualifications", 1, crate::common::MAX_ROUTES)?,
            |p, v| {
                let q = Obj::new(p, v, &["qualification_digest", "route"])?;
                Ok(QualificationRef {
                    route: Route::read(&q.path_of("route"), q.value("route")?)?,
                    qualification_digest: Digest::parse(
                        &q.path_of("qualification_digest"),
                        q.str("qualification_digest")?,
                    )?,
                })
            },
            |q| q.route.clone(),
        )?;
        for (i, q) in qualifications.iter().enumerate() {
            scope.check_route(&format!("{qpath}[{i}].route"), &q.route)?;
        }
        let workloads = read_workloads(&o, &scope)?;
        for (i, w) in workloads.iter().enumerate() {
            if !qualifications.iter().any(|q| q.route == w.route) {
                return Err(NpError::new(
                    codes::ROUTE_UNQUALIFIED,
                    format!("$.workloads[{i}].route: not one of the qualified routes"),
                ));
            }
        }
        let uuid = |k: &str| Uuid::parse(&o.path_of(k), o.str(k)?);
        Ok(Self {
            release_set_id: uuid("release_set_id")?,
            campaign_id: uuid("campaign_id")?,
            environment_id: uuid("environment_id")?,
            producer_digest: Digest::parse(&producer.path_of("digest"), producer.str("digest")?)?,
            provenance: Provenance::read(&o)?,
            authority: NativeAuthority {
                policy_digest: Digest::parse(&a.path_of("policy_digest"), a.str("policy_digest")?)?,
                enrollment_digest: Digest::parse(
                    &a.path_of("enrollment_digest"),
                    a.str("enrollment_digest")?,
                )?,
                scope,
                qualifications,
            },
            workloads,
        })
    }

    fn to_value(&self) -> Value {
        let a = &self.authority;
        let mut m = Map::new();
        m.insert(
            "authority".into(),
            json!({
                "enrollment_digest": a.enrollment_digest.as_str(),
                "policy_digest": a.policy_digest.as_str(),
                "qualifications": a.qualifications.iter().map(|q| json!({
                    "qualification_digest": q.qualification_digest.as_str(),
                    "route": q.route.write(),
                })).collect::<Vec<_>>(),
                "scope": a.scope.write(),
            }),
        );
        m.insert("campaign_id".into(), self.campaign_id.as_str().into());
        m.insert("environment_id".into(), self.environment_id.as_str().into());
        m.insert(
            "producer".into(),
            json!({"digest": self.producer_digest.as_str(), "wire": PRODUCER_WIRE_SCHEMA}),
        );
        m.insert("purpose".into(), PURPOSE.into());
        m.insert("release_set_id".into(), self.release_set_id.as_str().into());
        m.insert("trust_tier".into(), TRUST_TIER.into());
        m.insert("workloads".into(), write_workloads(&self.workloads));
        self.provenance.write_into(&mut m);
        finish(RELEASE_SET_SCHEMA, m)
    }
}

/// The dbt outputs a producer run names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbtOutputs {
    /// dbt project name.
    pub project: Ident,
    /// Digest of `manifest.json`.
    pub manifest_digest: Digest,
    /// Digest of `run_results.json`.
    pub run_results_digest: Digest,
}

/// `dpone.dbt-airflow-self-service.nonproduction.v1`: what the dbt/Airflow self-service
/// producer emits for one scoped compilation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerWire {
    /// Producer run identity.
    pub producer_run_id: Uuid,
    /// Campaign.
    pub campaign_id: Uuid,
    /// Protected environment.
    pub environment_id: Uuid,
    /// Source, fixture, generator, compilation intent, toolchain.
    pub provenance: Provenance,
    /// The dbt outputs.
    pub dbt: DbtOutputs,
    /// The complete scope.
    pub scope: Scope,
    /// Workloads (ascending by id).
    pub workloads: Vec<ReleaseWorkload>,
}

const WIRE_KEYS: &[&str] = &[
    "campaign_id",
    "dbt",
    "environment_id",
    "producer_run_id",
    "purpose",
    "schema",
    "scope",
    "trust_tier",
    "workloads",
];

impl Document for ProducerWire {
    const SCHEMA: &'static str = PRODUCER_WIRE_SCHEMA;

    fn from_value(value: &Value) -> Result<Self> {
        let o = Obj::new("$", value, &keys(&[WIRE_KEYS, PROVENANCE_KEYS]))?;
        read_exact(&o, "purpose", PURPOSE, codes::PURPOSE_INVALID)?;
        read_exact(&o, "trust_tier", TRUST_TIER, codes::TRUST_TIER_INVALID)?;
        let d = o.obj("dbt", &["manifest_digest", "project", "run_results_digest"])?;
        let scope = Scope::read(&o, "scope")?;
        let workloads = read_workloads(&o, &scope)?;
        let uuid = |k: &str| Uuid::parse(&o.path_of(k), o.str(k)?);
        Ok(Self {
            producer_run_id: uuid("producer_run_id")?,
            campaign_id: uuid("campaign_id")?,
            environment_id: uuid("environment_id")?,
            provenance: Provenance::read(&o)?,
            dbt: DbtOutputs {
                project: Ident::parse(&d.path_of("project"), d.str("project")?)?,
                manifest_digest: Digest::parse(
                    &d.path_of("manifest_digest"),
                    d.str("manifest_digest")?,
                )?,
                run_results_digest: Digest::parse(
                    &d.path_of("run_results_digest"),
                    d.str("run_results_digest")?,
                )?,
            },
            scope,
            workloads,
        })
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("campaign_id".into(), self.campaign_id.as_str().into());
        m.insert(
            "dbt".into(),
            json!({
                "manifest_digest": self.dbt.manifest_digest.as_str(),
                "project": self.dbt.project.as_str(),
                "run_results_digest": self.dbt.run_results_digest.as_str(),
            }),
        );
        m.insert("environment_id".into(), self.environment_id.as_str().into());
        m.insert(
            "producer_run_id".into(),
            self.producer_run_id.as_str().into(),
        );
        m.insert("purpose".into(), PURPOSE.into());
        m.insert("scope".into(), self.scope.write());
        m.insert("trust_tier".into(), TRUST_TIER.into());
        m.insert("workloads".into(), write_workloads(&self.workloads));
        self.provenance.write_into(&mut m);
        finish(PRODUCER_WIRE_SCHEMA, m)
    }
}
