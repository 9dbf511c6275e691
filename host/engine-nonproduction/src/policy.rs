//! `dpone.nonproduction-authority-policy.v1`: the externally pinned policy. It names the one
//! GitHub Artifact Attestation signer, the enrolled environment and participants, the purpose,
//! its own validity and revocation floor, and the resource ceilings.
//!
//! The policy is pinned by its digest outside the document (the pin never comes from a file
//! beside it); [`AuthorityPolicy::enrollment_digest`] is the digest a grant names for the
//! enrollment it was issued against.

use crate::codes;
use crate::common::{
    Limits, PURPOSE, Participant, TRUST_TIER, Validity, keys, read_exact, read_participants,
};
use crate::document::{Document, finish};
use crate::error::{NpError, Result};
use crate::fields::{Commit, Digest, PredicateType, Repository, SignerWorkflow, Uuid, exact};
use crate::json::{self, Obj};
use serde_json::{Map, Value, json};

/// The schema string.
pub const POLICY_SCHEMA: &str = "dpone.nonproduction-authority-policy.v1";

/// The only issuer: GitHub Actions OIDC.
pub const GITHUB_ACTIONS_ISSUER: &str = "https://token.actions.githubusercontent.com";

/// The only runner environment: GitHub-hosted runners.
pub const HOSTED_RUNNER: &str = "github-hosted";

/// The runtime-artifact trust policy the signer section pins.
pub const TRUST_POLICY_PIN_SCHEMA: &str = "dpone.runtime-artifact-trust-policy.v2";

/// Longest validity of the policy itself: 366 days.
pub const MAX_POLICY_VALIDITY_SECONDS: u64 = 366 * 86_400;

/// The pinned signer: GitHub Artifact Attestations only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signer {
    /// Always [`GITHUB_ACTIONS_ISSUER`].
    pub issuer: String,
    /// The repository whose workflow run signs (never "any repository").
    pub repository: Repository,
    /// The reusable signing workflow.
    pub signer_workflow: SignerWorkflow,
    /// The signing workflow's commit.
    pub signer_digest: Commit,
    /// The attestation predicate type.
    pub predicate_type: PredicateType,
    /// Always [`HOSTED_RUNNER`].
    pub runner_environment: String,
    /// Digest of the trusted root bytes verification must use.
    pub trusted_root_digest: Digest,
    /// Digest of the pinned `dpone.runtime-artifact-trust-policy.v2` (non_production trust,
    /// mandatory attestations).
    pub trust_policy_digest: Digest,
}

impl Signer {
    /// The composite signer identity `https://github.com/{signer_workflow}@{signer_digest}`.
    pub fn identity(&self) -> String {
        format!(
            "https://github.com/{}@{}",
            self.signer_workflow, self.signer_digest
        )
    }

    fn read(obj: &Obj<'_>) -> Result<Self> {
        let o = obj.obj(
            "signer",
            &[
                "issuer",
                "predicate_type",
                "repository",
                "runner_environment",
                "signer_digest",
                "signer_workflow",
                "trust_policy",
                "trusted_root_digest",
            ],
        )?;
        read_exact(&o, "issuer", GITHUB_ACTIONS_ISSUER, codes::ISSUER_INVALID)?;
        read_exact(
            &o,
            "runner_environment",
            HOSTED_RUNNER,
            codes::RUNNER_INVALID,
        )?;
        let tp = o.obj(
            "trust_policy",
            &["attestations", "digest", "schema", "trust"],
        )?;
        for (key, expected) in [
            ("schema", TRUST_POLICY_PIN_SCHEMA),
            ("trust", TRUST_TIER),
            ("attestations", "mandatory"),
        ] {
            exact(
                &tp.path_of(key),
                tp.str(key)?,
                expected,
                codes::TRUST_POLICY_PIN_INVALID,
            )?;
        }
        Ok(Self {
            issuer: GITHUB_ACTIONS_ISSUER.to_owned(),
            repository: Repository::parse(&o.path_of("repository"), o.str("repository")?)?,
            signer_workflow: SignerWorkflow::parse(
                &o.path_of("signer_workflow"),
                o.str("signer_workflow")?,
            )?,
            signer_digest: Commit::parse(&o.path_of("signer_digest"), o.str("signer_digest")?)?,
            predicate_type: PredicateType::parse(
                &o.path_of("predicate_type"),
                o.str("predicate_type")?,
            )?,
            runner_environment: HOSTED_RUNNER.to_owned(),
            trusted_root_digest: Digest::parse(
                &o.path_of("trusted_root_digest"),
                o.str("trusted_root_digest")?,
            )?,
            trust_policy_digest: Digest::parse(&tp.path_of("digest"), tp.str("digest")?)?,
        })
    }

    fn write(&self) -> Value {
        json!({
            "issuer": GITHUB_ACTIONS_ISSUER,
            "predicate_type": self.predicate_type.as_str(),
            "repository": self.repository.as_str(),
            "runner_environment": HOSTED_RUNNER,
            "signer_digest": self.signer_digest.as_str(),
            "signer_workflow": self.signer_workflow.as_str(),
            "trust_policy": {
                "attestations": "mandatory",
                "digest": self.trust_policy_digest.as_str(),
                "schema": TRUST_POLICY_PIN_SCHEMA,
                "trust": TRUST_TIER,
            },
            "trusted_root_digest": self.trusted_root_digest.as_str(),
        })
    }
}

/// The enrolled environment and its independently enrolled synthetic participants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enrollment {
    /// Protected environment.
    pub environment_id: Uuid,
    /// Enrolled participants, each with its one access.
    pub participants: Vec<Participant>,
}

impl Enrollment {
    fn read(obj: &Obj<'_>) -> Result<Self> {
        let o = obj.obj("enrollment", &["environment_id", "participants"])?;
        Ok(Self {
            environment_id: Uuid::parse(&o.path_of("environment_id"), o.str("environment_id")?)?,
            participants: read_participants(&o, "participants")?,
        })
    }

    fn write(&self) -> Value {
        json!({
            "environment_id": self.environment_id.as_str(),
            "participants": self.participants.iter().map(Participant::write).collect::<Vec<_>>(),
        })
    }
}

/// `dpone.nonproduction-authority-policy.v1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorityPolicy {
    /// Policy identity.
    pub policy_id: Uuid,
    /// The pinned signer.
    pub signer: Signer,
    /// The enrolled environment.
    pub enrollment: Enrollment,
    /// Policy ceilings (each at most the built-in ceiling).
    pub ceilings: Limits,
    /// Longest grant validity the policy allows (at most 24 h).
    pub max_validity_seconds: u64,
    /// Lowest revocation epoch: a current epoch below it is a rolled-back store.
    pub revocation_epoch: u64,
    /// The policy's own validity.
    pub validity: Validity,
}

impl AuthorityPolicy {
    /// Digest of the canonical enrollment object (what grants name as `enrollment_digest`).
    pub fn enrollment_digest(&self) -> Digest {
        Digest::of(&json::canonical_bytes(&self.enrollment.write()))
    }
}

const KEYS: &[&str] = &[
    "ceilings",
    "enrollment",
    "max_validity_seconds",
    "policy_id",
    "purpose",
    "revocation_epoch",
    "schema",
    "signer",
    "trust_tier",
    "validity",
];

impl Document for AuthorityPolicy {
    const SCHEMA: &'static str = POLICY_SCHEMA;

    fn from_value(value: &Value) -> Result<Self> {
        let o = Obj::new("$", value, &keys(&[KEYS]))?;
        read_exact(&o, "purpose", PURPOSE, codes::PURPOSE_INVALID)?;
        read_exact(&o, "trust_tier", TRUST_TIER, codes::TRUST_TIER_INVALID)?;
        let max_validity_seconds = o.u64("max_validity_seconds")?;
        if max_validity_seconds == 0 {
            return Err(NpError::new(
                codes::LIMIT_ZERO,
                "$.max_validity_seconds: a limit is at least 1",
            ));
        }
        if max_validity_seconds > crate::common::MAX_VALIDITY_SECONDS {
            return Err(NpError::new(
                codes::LIMIT_ABOVE_CEILING,
                "$.max_validity_seconds: above the built-in ceiling 86400",
            ));
        }
        Ok(Self {
            policy_id: Uuid::parse("$.policy_id", o.str("policy_id")?)?,
            signer: Signer::read(&o)?,
            enrollment: Enrollment::read(&o)?,
            ceilings: Limits::read(&o, "ceilings")?,
            max_validity_seconds,
            revocation_epoch: o.u64("revocation_epoch")?,
            validity: Validity::read(&o, "validity", Some(MAX_POLICY_VALIDITY_SECONDS))?,
        })
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("ceilings".into(), self.ceilings.write());
        m.insert("enrollment".into(), self.enrollment.write());
        m.insert(
            "max_validity_seconds".into(),
            self.max_validity_seconds.into(),
        );
        m.insert("policy_id".into(), self.policy_id.as_str().into());
        m.insert("purpose".into(), PURPOSE.into());
        m.insert("revocation_epoch".into(), self.revocation_epoch.into());
        m.insert("signer".into(), self.signer.write());
        m.insert("trust_tier".into(), TRUST_TIER.into());
        m.insert("validity".into(), self.validity.write());
        finish(POLICY_SCHEMA, m)
    }
}
