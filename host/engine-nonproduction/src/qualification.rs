//! `dpone.route-qualification.v1`: the signed actual observations of one route qualification
//! run — the exact six-dimensional route, compilation intent and provenance, the scope, the
//! measured source rows and bytes (each at most its ceiling per route qualification), the actual
//! payload bytes as a separate measurement, and the original raw evidence descriptors.
//!
//! Only a `reconciled` outcome is a qualification; a supplied PASS projection is not input.

use crate::codes;
use crate::common::{
    CEILINGS, PROVENANCE_KEYS, PURPOSE, Provenance, Route, Scope, TRUST_TIER, keys, read_exact,
    read_set,
};
use crate::document::{Document, finish};
use crate::error::{NpError, Result};
use crate::fields::{Digest, Ident, Uuid};
use crate::json::Obj;
use serde_json::{Map, Value, json};

/// The schema string.
pub const ROUTE_QUALIFICATION_SCHEMA: &str = "dpone.route-qualification.v1";

/// The only outcome a route qualification records.
pub const OUTCOME_RECONCILED: &str = "reconciled";

/// Most evidence descriptors.
pub const MAX_EVIDENCE: usize = 64;

/// What was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observations {
    /// Source rows exported (at most 100,000).
    pub source_rows: u64,
    /// Source bytes in the producer's meaning (at most 1 GiB).
    pub source_bytes: u64,
    /// Actual target payload bytes, measured separately at the sender.
    pub payload_bytes: u64,
    /// Attempts made (at most 128).
    pub attempts: u32,
    /// Longest attempt in seconds (at most 3,600).
    pub max_attempt_seconds: u32,
}

/// One original raw evidence descriptor.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Evidence {
    /// Evidence name.
    pub name: Ident,
    /// Digest of the original bytes.
    pub digest: Digest,
    /// Size of the original bytes.
    pub size_bytes: u64,
}

/// `dpone.route-qualification.v1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteQualification {
    /// Qualification identity.
    pub qualification_id: Uuid,
    /// Digest of the qualification grant it ran under.
    pub grant_digest: Digest,
    /// The grant's one-time run.
    pub run_id: Uuid,
    /// Campaign.
    pub campaign_id: Uuid,
    /// Protected environment.
    pub environment_id: Uuid,
    /// Policy digest.
    pub policy_digest: Digest,
    /// Source, fixture, generator, compilation intent, toolchain.
    pub provenance: Provenance,
    /// The exact route.
    pub route: Route,
    /// Its participants and subjects.
    pub scope: Scope,
    /// Measurements.
    pub observations: Observations,
    /// Original raw evidence.
    pub evidence: Vec<Evidence>,
}

const KEYS: &[&str] = &[
    "campaign_id",
    "environment_id",
    "evidence",
    "grant_digest",
    "observations",
    "outcome",
    "policy_digest",
    "purpose",
    "qualification_id",
    "route",
    "run_id",
    "schema",
    "scope",
    "trust_tier",
];

fn read_observations(o: &Obj<'_>) -> Result<Observations> {
    let ob = o.obj(
        "observations",
        &[
            "attempts",
            "max_attempt_seconds",
            "payload_bytes",
            "source_bytes",
            "source_rows",
        ],
    )?;
    let above = |key: &str| {
        NpError::new(
            codes::OBSERVATION_ABOVE_CEILING,
            format!("{}: above its ceiling", ob.path_of(key)),
        )
    };
    let source_rows = ob.u64("source_rows")?;
    let source_bytes = ob.u64("source_bytes")?;
    let attempts = u32::try_from(ob.u64("attempts")?).map_err(|_| above("attempts"))?;
    let max_attempt_seconds =
        u32::try_from(ob.u64("max_attempt_seconds")?).map_err(|_| above("max_attempt_seconds"))?;
    if source_rows > CEILINGS.max_source_rows {
        return Err(above("source_rows"));
    }
    if source_bytes > CEILINGS.max_source_bytes {
        return Err(above("source_bytes"));
    }
    if attempts > CEILINGS.max_attempts {
        return Err(above("attempts"));
    }
    if max_attempt_seconds > CEILINGS.max_attempt_seconds {
        return Err(above("max_attempt_seconds"));
    }
    Ok(Observations {
        source_rows,
        source_bytes,
        payload_bytes: ob.u64("payload_bytes")?,
        attempts,
        max_attempt_seconds,
    })
}

impl Document for RouteQualification {
    const SCHEMA: &'static str = ROUTE_QUALIFICATION_SCHEMA;

    fn from_value(value: &Value) -> Result<Self> {
        let o = Obj::new("$", value, &keys(&[KEYS, PROVENANCE_KEYS]))?;
        read_exact(&o, "purpose", PURPOSE, codes::PURPOSE_INVALID)?;
        read_exact(&o, "trust_tier", TRUST_TIER, codes::TRUST_TIER_INVALID)?;
        read_exact(&o, "outcome", OUTCOME_RECONCILED, codes::OUTCOME_INVALID)?;
        let scope = Scope::read(&o, "scope")?;
        let route = Route::read("$.route", o.value("route")?)?;
        scope.check_route("$.route", &route)?;
        let evidence = read_set(
            "$.evidence",
            o.array("evidence", 1, MAX_EVIDENCE)?,
            |p, v| {
                let e = Obj::new(p, v, &["digest", "name", "size_bytes"])?;
                Ok(Evidence {
                    name: Ident::parse(&e.path_of("name"), e.str("name")?)?,
                    digest: Digest::parse(&e.path_of("digest"), e.str("digest")?)?,
                    size_bytes: e.u64("size_bytes")?,
                })
            },
            |e| e.name.clone(),
        )?;
        let digest = |k: &str| Digest::parse(&o.path_of(k), o.str(k)?);
        let uuid = |k: &str| Uuid::parse(&o.path_of(k), o.str(k)?);
        Ok(Self {
            qualification_id: uuid("qualification_id")?,
            grant_digest: digest("grant_digest")?,
            run_id: uuid("run_id")?,
            campaign_id: uuid("campaign_id")?,
            environment_id: uuid("environment_id")?,
            policy_digest: digest("policy_digest")?,
            provenance: Provenance::read(&o)?,
            route,
            scope,
            observations: read_observations(&o)?,
            evidence,
        })
    }

    fn to_value(&self) -> Value {
        let ob = &self.observations;
        let mut m = Map::new();
        m.insert("campaign_id".into(), self.campaign_id.as_str().into());
        m.insert("environment_id".into(), self.environment_id.as_str().into());
        m.insert(
            "evidence".into(),
            Value::Array(
                self.evidence
                    .iter()
                    .map(|e| {
                        json!({"digest": e.digest.as_str(), "name": e.name.as_str(), "size_bytes": e.size_bytes})
                    })
                    .collect(),
            ),
        );
        m.insert("grant_digest".into(), self.grant_digest.as_str().into());
        m.insert(
            "observations".into(),
            json!({
                "attempts": ob.attempts,
                "max_attempt_seconds": ob.max_attempt_seconds,
                "payload_bytes": ob.payload_bytes,
                "source_bytes": ob.source_bytes,
                "source_rows": ob.source_rows,
            }),
        );
        m.insert("outcome".into(), OUTCOME_RECONCILED.into());
        m.insert("policy_digest".into(), self.policy_digest.as_str().into());
        m.insert("purpose".into(), PURPOSE.into());
        m.insert(
            "qualification_id".into(),
            self.qualification_id.as_str().into(),
        );
        m.insert("route".into(), self.route.write());
        m.insert("run_id".into(), self.run_id.as_str().into());
        m.insert("scope".into(), self.scope.write());
        m.insert("trust_tier".into(), TRUST_TIER.into());
        self.provenance.write_into(&mut m);
        finish(ROUTE_QUALIFICATION_SCHEMA, m)
    }
}
