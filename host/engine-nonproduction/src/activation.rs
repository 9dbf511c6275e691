//! `dpone.composition-activation-request.nonproduction.v1`: the scoped activation request. It
//! carries the full request data of an activation — the activation, campaign and environment,
//! the parent composition, native release and sealed deployment it activates, the existing
//! `runtime_context_sha256` (which keeps its meaning and does not cover the grant), and the exact
//! workload/pack set — plus the mandatory `execution_grant_digest`, which binds the one execution
//! grant the request was admitted under.

use crate::authority::{Member, read_membership};
use crate::codes;
use crate::common::{PURPOSE, TRUST_TIER, keys, read_exact};
use crate::document::{Document, finish};
use crate::error::Result;
use crate::fields::{Digest, Uuid};
use crate::json::Obj;
use serde_json::{Map, Value};

/// The schema string.
pub const ACTIVATION_REQUEST_SCHEMA: &str = "dpone.composition-activation-request.nonproduction.v1";

/// `dpone.composition-activation-request.nonproduction.v1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActivationRequest {
    /// The activation.
    pub activation_id: Uuid,
    /// Campaign.
    pub campaign_id: Uuid,
    /// Protected environment.
    pub environment_id: Uuid,
    /// Digest of the parent composition.
    pub parent_release_digest: Digest,
    /// Digest of the scoped native release set.
    pub native_release_digest: Digest,
    /// Digest of the sealed deployment.
    pub deployment_digest: Digest,
    /// The existing runtime context digest (unchanged meaning).
    pub runtime_context_sha256: Digest,
    /// The exact workload/pack set (ascending by workload id).
    pub workloads: Vec<Member>,
    /// Digest of the execution grant (`dpone.nonproduction-authority.v1`, phase execution).
    pub execution_grant_digest: Digest,
}

const KEYS: &[&str] = &[
    "activation_id",
    "campaign_id",
    "deployment_digest",
    "environment_id",
    "execution_grant_digest",
    "native_release_digest",
    "parent_release_digest",
    "purpose",
    "runtime_context_sha256",
    "schema",
    "trust_tier",
    "workloads",
];

impl Document for ActivationRequest {
    const SCHEMA: &'static str = ACTIVATION_REQUEST_SCHEMA;

    fn from_value(value: &Value) -> Result<Self> {
        let o = Obj::new("$", value, &keys(&[KEYS]))?;
        read_exact(&o, "purpose", PURPOSE, codes::PURPOSE_INVALID)?;
        read_exact(&o, "trust_tier", TRUST_TIER, codes::TRUST_TIER_INVALID)?;
        let digest = |k: &str| Digest::parse(&o.path_of(k), o.str(k)?);
        let uuid = |k: &str| Uuid::parse(&o.path_of(k), o.str(k)?);
        Ok(Self {
            activation_id: uuid("activation_id")?,
            campaign_id: uuid("campaign_id")?,
            environment_id: uuid("environment_id")?,
            parent_release_digest: digest("parent_release_digest")?,
            native_release_digest: digest("native_release_digest")?,
            deployment_digest: digest("deployment_digest")?,
            runtime_context_sha256: digest("runtime_context_sha256")?,
            workloads: read_membership(&o, "workloads")?,
            execution_grant_digest: digest("execution_grant_digest")?,
        })
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("activation_id".into(), self.activation_id.as_str().into());
        m.insert("campaign_id".into(), self.campaign_id.as_str().into());
        m.insert(
            "deployment_digest".into(),
            self.deployment_digest.as_str().into(),
        );
        m.insert("environment_id".into(), self.environment_id.as_str().into());
        m.insert(
            "execution_grant_digest".into(),
            self.execution_grant_digest.as_str().into(),
        );
        m.insert(
            "native_release_digest".into(),
            self.native_release_digest.as_str().into(),
        );
        m.insert(
            "parent_release_digest".into(),
            self.parent_release_digest.as_str().into(),
        );
        m.insert("purpose".into(), PURPOSE.into());
        m.insert(
            "runtime_context_sha256".into(),
            self.runtime_context_sha256.as_str().into(),
        );
        m.insert("trust_tier".into(), TRUST_TIER.into());
        m.insert(
            "workloads".into(),
            Value::Array(self.workloads.iter().map(Member::write).collect()),
        );
        finish(ACTIVATION_REQUEST_SCHEMA, m)
    }
}
