//! The stateless verification of one nonproduction grant, in process and without I/O: strict
//! parsing of every document, the policy pin, the closed GitHub-attestation signature adapter
//! (`dpone_trust::nonproduction_signature`) with the pins the policy carries, the contracts'
//! `reopen` (policy, clock, expiry, revocation, signer, subject), the mapping to scope facts and
//! one decision per workload by the **pinned scope component**.
//!
//! The command (`campaign_cmd.rs`) reads the files and the clock; the benchmark
//! (`host/cli/benches/campaign_verify.rs`) runs this same file on bytes in memory. Nothing here
//! consumes anything: the pool is read as zero (the protected control store is part 2).

use dpone_engine_nonproduction::facts::{self, Reservation, ScopeTarget};
use dpone_engine_nonproduction::fields::Digest;
use dpone_engine_nonproduction::reopen::{self, ReopenContext, VerifiedSignature};
use dpone_engine_nonproduction::{
    ActivationRequest, Authority, AuthorityPolicy, Composition, DbtReleaseSet, Document, NpError,
    codes,
};
use dpone_policy_model::scope::{Limits, Phase, PoolUsage, ScopeDecision};
use dpone_policy_runtime::{DecisionEvidence, LoadedPolicy, PolicyError, PolicyKind};
use dpone_trust::nonproduction_signature::{self, SignaturePins};
use dpone_trust::{ErrorClass, TrustError};
use serde::Serialize;

/// What a refusal is, which fixes the exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// A document or option cannot be what it claims (exit 3).
    BadInput,
    /// Verification, reopen or the scope decision refused (exit 1).
    Refused,
    /// The policy component was refused at load or failed closed (exit 4).
    PolicyFailed,
    /// Internal error (exit 5).
    Internal,
}

/// A refusal with its stable code.
#[derive(Debug)]
pub struct Refusal {
    /// Stable code.
    pub code: String,
    /// Fixed, safe message (no values from the documents beyond validated identifiers).
    pub message: String,
    /// Its class.
    pub class: Class,
    /// Evidence gathered before the refusal (the scope decision's, when it denied).
    pub evidence: Option<Box<ScopeDenied>>,
}

impl Refusal {
    fn new(code: &str, message: impl Into<String>, class: Class) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            class,
            evidence: None,
        }
    }
}

/// The exit class of a `DPONE_NP_*` code: reopen and scope-binding refusals are refusals, every
/// other code is a document that cannot be read as its schema (bad input).
pub fn np_class(code: &str) -> Class {
    if code.starts_with("DPONE_NP_REOPEN_") || code.starts_with("DPONE_NP_SCOPE_") {
        Class::Refused
    } else {
        Class::BadInput
    }
}

fn np(what: &str, e: &NpError) -> Refusal {
    Refusal::new(
        e.code(),
        format!("{what}: {}", e.detail()),
        np_class(e.code()),
    )
}

fn trust(e: &TrustError) -> Refusal {
    let class = match e.class() {
        ErrorClass::Refused => Class::Refused,
        ErrorClass::BadInput => Class::BadInput,
        ErrorClass::Internal => Class::Internal,
    };
    Refusal::new(e.code(), e.to_string(), class)
}

fn policy_error(e: &PolicyError) -> Refusal {
    let class = match e {
        PolicyError::InputInvalid { .. } | PolicyError::UnknownFunction { .. } => Class::BadInput,
        _ => Class::PolicyFailed,
    };
    Refusal::new(e.code(), e.to_string(), class)
}

/// The bytes and host state of one verification.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    /// `dpone.nonproduction-authority-policy.v1`.
    pub policy: &'a [u8],
    /// The external pin of the policy, `sha256:<hex>` (never read from a file beside it).
    pub policy_digest: &'a str,
    /// The grant, `dpone.nonproduction-authority.v1`.
    pub grant: &'a [u8],
    /// Its GitHub Artifact Attestation (Sigstore bundle).
    pub attestation: &'a [u8],
    /// `trusted_root.json`; its sha256 must be the policy's pin.
    pub trusted_root: &'a [u8],
    /// The composition whose workloads are decided.
    pub composition: &'a [u8],
    /// The activation request: execution when present, qualification otherwise.
    pub request: Option<&'a [u8]>,
    /// The scoped native release set the execution grant names (optional).
    pub release_set: Option<&'a [u8]>,
    /// One workload, or every workload of the request (execution) or composition
    /// (qualification).
    pub workload: Option<&'a str>,
    /// The clock, Unix seconds, read once.
    pub now: u64,
    /// The current revocation epoch; the policy's floor when not given.
    pub revocation_epoch: Option<u64>,
}

fn parse<T: Document>(what: &str, bytes: &[u8]) -> Result<T, Refusal> {
    T::parse(bytes).map_err(|e| np(what, &e))
}

/// One document the verification read: its schema and digest.
#[derive(Clone, Debug, Serialize)]
pub struct DocumentRef {
    /// The document's schema.
    pub schema: &'static str,
    /// Its canonical digest, `sha256:<hex>`.
    pub digest: String,
}

fn document(schema: &'static str, digest: &Digest) -> DocumentRef {
    DocumentRef {
        schema,
        digest: digest.as_str().to_owned(),
    }
}

/// The documents a verification read (the request and release set only when given).
#[derive(Clone, Debug, Serialize)]
pub struct Documents {
    /// The pinned policy.
    pub policy: DocumentRef,
    /// The grant.
    pub grant: DocumentRef,
    /// The composition whose workloads were decided.
    pub composition: DocumentRef,
    /// The activation request (execution).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<DocumentRef>,
    /// The scoped native release set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release_set: Option<DocumentRef>,
}

/// What the closed GitHub-attestation adapter verified.
#[derive(Clone, Debug, Serialize)]
pub struct SignatureEvidence {
    /// The adapter, `github-artifact-attestation`.
    pub adapter: &'static str,
    /// Verified with the policy's pins.
    pub pinned: bool,
    /// The signer identity of the certificate.
    pub signer_identity: String,
    /// The attested subject digest.
    pub subject_digest: String,
    /// The source repository claim.
    pub source_repository: String,
    /// The attestation's predicate type.
    pub predicate_type: String,
    /// The runner environment claim, when present.
    pub runner_environment: Option<String>,
    /// The Sigstore instance.
    pub instance: &'static str,
    /// Every authenticated signing time, Unix seconds.
    pub verified_times: Vec<i64>,
}

/// The contracts' reopen after verification.
#[derive(Clone, Debug, Serialize)]
pub struct ReopenEvidence {
    /// `ok`.
    pub result: &'static str,
    /// The reopened policy's digest.
    pub policy_digest: String,
    /// The clock, Unix seconds.
    pub now: u64,
    /// The latest authenticated signing time.
    pub clock_floor: u64,
    /// The current revocation epoch.
    pub revocation_epoch: u64,
    /// Not tracked by the stateless verification.
    pub trust_revision: &'static str,
}

/// The pinned component that decided.
#[derive(Clone, Debug, Serialize)]
pub struct ComponentRef {
    /// Its kind, `scope`.
    pub kind: &'static str,
    /// Its digest, `sha256:<hex>`.
    pub sha256: String,
    /// Loaded at its embedded pin.
    pub pinned: bool,
}

impl ComponentRef {
    /// The pinned scope component.
    pub fn scope(scope: &LoadedPolicy) -> Self {
        Self {
            kind: "scope",
            sha256: scope.digest().to_string(),
            pinned: true,
        }
    }
}

/// One workload's admission by the scope component.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadDecision {
    /// The workload.
    pub workload_id: String,
    /// `admit`.
    pub decision: &'static str,
    /// The component's reason code.
    pub code: String,
    /// The limits the component applied.
    pub effective_limits: Limits,
    /// The decision's evidence.
    pub evidence: DecisionEvidence,
}

/// Every workload's scope decision and the component that made them.
#[derive(Clone, Debug, Serialize)]
pub struct ScopeEvidence {
    /// The pinned scope component.
    pub component: ComponentRef,
    /// One decision per workload, in order.
    pub decisions: Vec<WorkloadDecision>,
}

/// The pool a stateless verification reads: none.
#[derive(Clone, Debug, Serialize)]
pub struct PoolEvidence {
    /// Where the usage came from.
    pub source: &'static str,
    /// `zero`.
    pub usage: &'static str,
    /// Nothing was reserved.
    pub reserved: bool,
}

/// The evidence of a verified grant (`"result": "verified"`).
#[derive(Clone, Debug, Serialize)]
pub struct Verified {
    /// `verified`.
    pub result: &'static str,
    /// `qualification` or `execution`.
    pub phase: &'static str,
    /// The grant.
    pub grant_id: String,
    /// Its campaign.
    pub campaign_id: String,
    /// Its environment.
    pub environment_id: String,
    /// The documents read.
    pub documents: Documents,
    /// The pinned trusted root, `sha256:<hex>`.
    pub trusted_root_digest: String,
    /// The attestation's verification.
    pub signature: SignatureEvidence,
    /// The reopen.
    pub reopen: ReopenEvidence,
    /// The scope decisions.
    pub scope: ScopeEvidence,
    /// The pool read (none).
    pub pool: PoolEvidence,
    /// Nothing was consumed.
    pub consumed: bool,
}

/// The evidence of a workload the scope component denied (`"result": "refused"`).
#[derive(Clone, Debug, Serialize)]
pub struct ScopeDenied {
    /// `refused`.
    pub result: &'static str,
    /// `qualification` or `execution`.
    pub phase: &'static str,
    /// The denied workload.
    pub workload_id: String,
    /// `deny`.
    pub decision: &'static str,
    /// The component's reason code.
    pub code: String,
    /// The decision's evidence.
    pub evidence: DecisionEvidence,
}

/// Verifies and decides; the evidence on success.
pub fn verify_grant(inputs: &Inputs<'_>, scope: &LoadedPolicy) -> Result<Verified, Refusal> {
    // 1. Strict parsing of everything, before any cryptography.
    let policy: AuthorityPolicy = parse("policy", inputs.policy)?;
    let grant: Authority = parse("document", inputs.grant)?;
    let composition: Composition = parse("composition", inputs.composition)?;
    let request: Option<ActivationRequest> = inputs
        .request
        .map(|b| parse("activation request", b))
        .transpose()?;
    let release_set: Option<DbtReleaseSet> = inputs
        .release_set
        .map(|b| parse("release set", b))
        .transpose()?;
    let pin = Digest::parse("--policy-digest", inputs.policy_digest).map_err(|e| np("pin", &e))?;

    // 2. The policy is the pinned one before its pins are used for anything.
    let policy_digest = policy.digest();
    if policy_digest != pin {
        return Err(Refusal::new(
            codes::REOPEN_POLICY_UNPINNED,
            "policy: the policy is not the pinned policy",
            Class::Refused,
        ));
    }

    // 3. The closed signature adapter with the policy's pins.
    let signer = &policy.signer;
    let pins = SignaturePins {
        issuer: signer.issuer.clone(),
        trusted_root_sha256: signer
            .trusted_root_digest
            .as_str()
            .trim_start_matches("sha256:")
            .to_owned(),
        repository: signer.repository.as_str().to_owned(),
        predicate_type: signer.predicate_type.as_str().to_owned(),
        signer_workflow: signer.signer_workflow.as_str().to_owned(),
        signer_digest: signer.signer_digest.as_str().to_owned(),
        require_github_hosted_runner: signer.runner_environment == "github-hosted",
    };
    let verified = nonproduction_signature::verify(
        &pins,
        inputs.attestation,
        inputs.trusted_root,
        inputs.grant,
    )
    .map_err(|e| trust(&e))?;

    // 4. Reopen after verification. Stateless: the clock floor is the latest authenticated
    //    signing time (a clock before it went backwards); the trust revision is not tracked
    //    until the protected store (part 2), so it is equal on both sides.
    let clock_floor = verified
        .verified_times
        .iter()
        .copied()
        .max()
        .and_then(|t| u64::try_from(t).ok())
        .unwrap_or(0);
    let current_epoch = inputs.revocation_epoch.unwrap_or(policy.revocation_epoch);
    let repository = verified
        .source_repository
        .strip_prefix("https://github.com/")
        .unwrap_or(&verified.source_repository)
        .to_ascii_lowercase();
    let reopened = reopen::reopen(
        &policy,
        &grant,
        &VerifiedSignature {
            signer_identity: verified.signer_identity.clone(),
            subject_digest: verified.subject_digest.clone(),
            issuer: pins.issuer.clone(),
            repository,
            predicate_type: verified.predicate_type.clone(),
            runner_environment: verified.runner_environment.clone().unwrap_or_default(),
            trusted_root_digest: format!("sha256:{}", verified.trusted_root_sha256),
        },
        &ReopenContext {
            pinned_policy_digest: &pin,
            now: inputs.now,
            clock_floor,
            current_revocation_epoch: current_epoch,
            trust_revision_at_verification: 0,
            current_trust_revision: 0,
        },
    )
    .map_err(|e| np("reopen", &e))?;

    // 5. Bindings the facts cannot carry, then one decision per workload.
    if let Some(release) = &release_set {
        facts::bind_release_set(&grant, release).map_err(|e| np("release set", &e))?;
        if composition.native_release_digest != release.digest() {
            return Err(Refusal::new(
                codes::SCOPE_RELEASE_MISMATCH,
                "release set: the composition names another native release",
                Class::Refused,
            ));
        }
    }
    let (phase, target, reservation, workloads): (_, _, _, Vec<String>) = match &request {
        Some(request) => (
            Phase::Execution,
            ScopeTarget::Execution {
                request,
                composition: &composition,
            },
            // Execution registration charges the complete membership at once.
            Reservation {
                workloads: u32::try_from(request.workloads.len()).unwrap_or(u32::MAX),
                attempts: 1,
                source_rows: 0,
                source_bytes: 0,
            },
            request
                .workloads
                .iter()
                .map(|m| m.workload_id.as_str().to_owned())
                .collect(),
        ),
        None => (
            Phase::Qualification,
            ScopeTarget::Qualification(&composition),
            Reservation {
                workloads: 1,
                attempts: 1,
                source_rows: 0,
                source_bytes: 0,
            },
            composition
                .workloads
                .iter()
                .map(|w| w.workload_id.as_str().to_owned())
                .collect(),
        ),
    };
    let workloads = match inputs.workload {
        Some(one) => vec![one.to_owned()],
        None => workloads,
    };
    let pool = PoolUsage {
        environment_id: grant.environment_id.as_str().to_owned(),
        campaign_id: grant.campaign_id.as_str().to_owned(),
        phase,
        workloads: 0,
        attempts: 0,
        source_rows: 0,
        source_bytes: 0,
        reserved_workloads: 0,
        reserved_attempts: 0,
        reserved_source_rows: 0,
        reserved_source_bytes: 0,
    };
    let phase_name = match phase {
        Phase::Qualification => "qualification",
        Phase::Execution => "execution",
    };
    let mut decisions = Vec::with_capacity(workloads.len());
    for workload in &workloads {
        let facts = facts::scope_facts(
            &policy,
            &grant,
            target,
            workload,
            reservation,
            &pool,
            inputs.now,
            current_epoch,
        )
        .map_err(|e| np("scope facts", &e))?;
        let decided =
            crate::telemetry::decide(PolicyKind::Scope, "decide", || scope.scope_decide(&facts))
                .map_err(|e| policy_error(&e))?;
        let evidence = decided.evidence;
        match decided.decision {
            ScopeDecision::Admit(admitted) => decisions.push(WorkloadDecision {
                workload_id: workload.clone(),
                decision: "admit",
                code: admitted.reason.code,
                effective_limits: admitted.effective_limits,
                evidence,
            }),
            ScopeDecision::Deny(reason) => {
                let mut refusal = Refusal::new(
                    &reason.code,
                    format!(
                        "the scope component denied workload {workload}: {}",
                        reason.message
                    ),
                    Class::Refused,
                );
                refusal.evidence = Some(Box::new(ScopeDenied {
                    result: "refused",
                    phase: phase_name,
                    workload_id: workload.clone(),
                    decision: "deny",
                    code: reason.code,
                    evidence,
                }));
                return Err(refusal);
            }
        }
    }

    let documents = Documents {
        policy: document(AuthorityPolicy::SCHEMA, &policy_digest),
        grant: document(Authority::SCHEMA, &reopened.grant_digest),
        composition: document(Composition::SCHEMA, &composition.digest()),
        request: request
            .as_ref()
            .map(|r| document(ActivationRequest::SCHEMA, &r.digest())),
        release_set: release_set
            .as_ref()
            .map(|r| document(DbtReleaseSet::SCHEMA, &r.digest())),
    };
    Ok(Verified {
        result: "verified",
        phase: phase_name,
        grant_id: grant.grant_id.as_str().to_owned(),
        campaign_id: grant.campaign_id.as_str().to_owned(),
        environment_id: grant.environment_id.as_str().to_owned(),
        documents,
        trusted_root_digest: format!("sha256:{}", verified.trusted_root_sha256),
        signature: SignatureEvidence {
            adapter: "github-artifact-attestation",
            pinned: true,
            signer_identity: verified.signer_identity,
            subject_digest: verified.subject_digest,
            source_repository: verified.source_repository,
            predicate_type: verified.predicate_type,
            runner_environment: verified.runner_environment,
            instance: verified.instance,
            verified_times: verified.verified_times,
        },
        reopen: ReopenEvidence {
            result: "ok",
            policy_digest: reopened.policy_digest.as_str().to_owned(),
            now: inputs.now,
            clock_floor,
            revocation_epoch: current_epoch,
            trust_revision: "not tracked: stateless verify (the protected store is part 2)",
        },
        scope: ScopeEvidence {
            component: ComponentRef::scope(scope),
            decisions,
        },
        pool: PoolEvidence {
            source: "none: stateless verify reads no protected store (part 2)",
            usage: "zero",
            reserved: false,
        },
        consumed: false,
    })
}

/// Fixed sample evidence for the reports' tests.
#[cfg(test)]
pub(crate) mod samples {
    use super::*;
    use serde_json::Value;

    /// A scope decision's evidence with `output` and `fuel`.
    pub(crate) fn evidence(output: Value, fuel: u64) -> DecisionEvidence {
        DecisionEvidence {
            kind: PolicyKind::Scope,
            function: "decide",
            component_sha256: [0x11; 32].into(),
            wit_package: "dpone:scope@1.0.0",
            input_sha256: [0x22; 32].into(),
            output,
            fuel_used: fuel,
        }
    }

    fn doc(schema: &'static str, hex: char) -> DocumentRef {
        DocumentRef {
            schema,
            digest: format!("sha256:{}", hex.to_string().repeat(64)),
        }
    }

    /// A verified execution grant with two admitted workloads.
    pub(crate) fn verified() -> Verified {
        let limits = Limits {
            max_workloads: 3,
            max_attempts: 6,
            max_source_rows: 1_000_000,
            max_source_bytes: 50_000_000,
            max_attempt_seconds: 900,
        };
        let decision = |workload: &str, fuel| WorkloadDecision {
            workload_id: workload.to_owned(),
            decision: "admit",
            code: "DPONE_SCOPE_ADMIT".to_owned(),
            effective_limits: limits,
            evidence: evidence(
                serde_json::json!({"admit": {"reason": {"code": "DPONE_SCOPE_ADMIT"}}}),
                fuel,
            ),
        };
        Verified {
            result: "verified",
            phase: "execution",
            grant_id: "6f1c2a9e-3b4d-4e5f-8a6b-7c8d9e0f1a2b".to_owned(),
            campaign_id: "0d9e8f7a-6b5c-4d3e-9f2a-1b0c9d8e7f6a".to_owned(),
            environment_id: "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d".to_owned(),
            documents: Documents {
                policy: doc(AuthorityPolicy::SCHEMA, 'a'),
                grant: doc(Authority::SCHEMA, 'b'),
                composition: doc(Composition::SCHEMA, 'c'),
                request: Some(doc(ActivationRequest::SCHEMA, 'd')),
                release_set: None,
            },
            trusted_root_digest: format!("sha256:{}", "e".repeat(64)),
            signature: SignatureEvidence {
                adapter: "github-artifact-attestation",
                pinned: true,
                signer_identity:
                    "https://github.com/acme/grants/.github/workflows/grant.yml@refs/heads/main"
                        .to_owned(),
                subject_digest: format!("sha256:{}", "b".repeat(64)),
                source_repository: "https://github.com/acme/grants".to_owned(),
                predicate_type: "https://dpone.dev/np-grant/v1".to_owned(),
                runner_environment: Some("github-hosted".to_owned()),
                instance: "github",
                verified_times: vec![1_796_083_000],
            },
            reopen: ReopenEvidence {
                result: "ok",
                policy_digest: format!("sha256:{}", "a".repeat(64)),
                now: 1_796_083_200,
                clock_floor: 1_796_083_000,
                revocation_epoch: 4,
                trust_revision: "not tracked: stateless verify (the protected store is part 2)",
            },
            scope: ScopeEvidence {
                component: ComponentRef {
                    kind: "scope",
                    sha256: format!("sha256:{}", "1".repeat(64)),
                    pinned: true,
                },
                decisions: vec![decision("pg-customers", 4210), decision("pg-orders", 4388)],
            },
            pool: PoolEvidence {
                source: "none: stateless verify reads no protected store (part 2)",
                usage: "zero",
                reserved: false,
            },
            consumed: false,
        }
    }

    /// The scope component's denial of one workload.
    pub(crate) fn denied() -> ScopeDenied {
        ScopeDenied {
            result: "refused",
            phase: "qualification",
            workload_id: "pg-payments".to_owned(),
            decision: "deny",
            code: "DPONE_SCOPE_WORKLOAD_NOT_IN_GRANT".to_owned(),
            evidence: evidence(
                serde_json::json!({"deny": {"code": "DPONE_SCOPE_WORKLOAD_NOT_IN_GRANT"}}),
                2950,
            ),
        }
    }
}
