//! One closed dispatch over the six document types (seven schemas), for tools that are handed
//! a document without being told its kind (`campaign inspect`). The `schema` selects exactly one
//! reader; any other schema is refused ([`codes::SCHEMA_UNSUPPORTED`]). This is not a registry:
//! the set is closed at compile time and nothing falls back.

use crate::activation::{ACTIVATION_REQUEST_SCHEMA, ActivationRequest};
use crate::authority::{AUTHORITY_SCHEMA, Authority};
use crate::codes;
use crate::composition::{COMPOSITION_SCHEMA, Composition};
use crate::document::Document;
use crate::error::{NpError, Result};
use crate::fields::Digest;
use crate::json;
use crate::policy::{AuthorityPolicy, POLICY_SCHEMA};
use crate::qualification::{ROUTE_QUALIFICATION_SCHEMA, RouteQualification};
use crate::release_set::{DbtReleaseSet, PRODUCER_WIRE_SCHEMA, ProducerWire, RELEASE_SET_SCHEMA};

/// Every schema this crate reads.
pub const SCHEMAS: &[&str] = &[
    POLICY_SCHEMA,
    AUTHORITY_SCHEMA,
    ROUTE_QUALIFICATION_SCHEMA,
    RELEASE_SET_SCHEMA,
    PRODUCER_WIRE_SCHEMA,
    COMPOSITION_SCHEMA,
    ACTIVATION_REQUEST_SCHEMA,
];

/// Any one document of the family.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnyDocument {
    /// `dpone.nonproduction-authority-policy.v1`.
    Policy(Box<AuthorityPolicy>),
    /// `dpone.nonproduction-authority.v1`.
    Authority(Box<Authority>),
    /// `dpone.route-qualification.v1`.
    RouteQualification(Box<RouteQualification>),
    /// `dpone.dbt-release-set.nonproduction.v1`.
    ReleaseSet(Box<DbtReleaseSet>),
    /// `dpone.dbt-airflow-self-service.nonproduction.v1`.
    ProducerWire(Box<ProducerWire>),
    /// `dpone.release-composition.nonproduction.v1`.
    Composition(Box<Composition>),
    /// `dpone.composition-activation-request.nonproduction.v1`.
    ActivationRequest(Box<ActivationRequest>),
}

impl AnyDocument {
    /// Parses `bytes` with the one reader its `schema` names.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let value = json::parse_strict(bytes)?;
        let schema = value
            .as_object()
            .and_then(|m| m.get("schema"))
            .and_then(|s| s.as_str())
            .ok_or_else(|| {
                NpError::new(
                    codes::SCHEMA_MISSING,
                    "$: expected an object with a string \"schema\"",
                )
            })?;
        Ok(match schema {
            POLICY_SCHEMA => Self::Policy(Box::new(AuthorityPolicy::parse(bytes)?)),
            AUTHORITY_SCHEMA => Self::Authority(Box::new(Authority::parse(bytes)?)),
            ROUTE_QUALIFICATION_SCHEMA => {
                Self::RouteQualification(Box::new(RouteQualification::parse(bytes)?))
            }
            RELEASE_SET_SCHEMA => Self::ReleaseSet(Box::new(DbtReleaseSet::parse(bytes)?)),
            PRODUCER_WIRE_SCHEMA => Self::ProducerWire(Box::new(ProducerWire::parse(bytes)?)),
            COMPOSITION_SCHEMA => Self::Composition(Box::new(Composition::parse(bytes)?)),
            ACTIVATION_REQUEST_SCHEMA => {
                Self::ActivationRequest(Box::new(ActivationRequest::parse(bytes)?))
            }
            _ => {
                return Err(NpError::new(
                    codes::SCHEMA_UNSUPPORTED,
                    "$.schema: not a document of the nonproduction family",
                ));
            }
        })
    }

    /// The document's schema string.
    pub fn schema(&self) -> &'static str {
        match self {
            Self::Policy(_) => POLICY_SCHEMA,
            Self::Authority(_) => AUTHORITY_SCHEMA,
            Self::RouteQualification(_) => ROUTE_QUALIFICATION_SCHEMA,
            Self::ReleaseSet(_) => RELEASE_SET_SCHEMA,
            Self::ProducerWire(_) => PRODUCER_WIRE_SCHEMA,
            Self::Composition(_) => COMPOSITION_SCHEMA,
            Self::ActivationRequest(_) => ACTIVATION_REQUEST_SCHEMA,
        }
    }

    /// The canonical bytes.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        match self {
            Self::Policy(d) => d.canonical_bytes(),
            Self::Authority(d) => d.canonical_bytes(),
            Self::RouteQualification(d) => d.canonical_bytes(),
            Self::ReleaseSet(d) => d.canonical_bytes(),
            Self::ProducerWire(d) => d.canonical_bytes(),
            Self::Composition(d) => d.canonical_bytes(),
            Self::ActivationRequest(d) => d.canonical_bytes(),
        }
    }

    /// `sha256:` of the canonical bytes.
    pub fn digest(&self) -> Digest {
        Digest::of(&self.canonical_bytes())
    }
}
