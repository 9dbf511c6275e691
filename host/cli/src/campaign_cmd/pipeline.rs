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
use dpone_policy_model::scope::{Phase, PoolUsage, ScopeDecision};
use dpone_policy_runtime::{LoadedPolicy, PolicyError, PolicyKind};
use dpone_trust::nonproduction_signature::{self, SignaturePins};
use dpone_trust::{ErrorClass, TrustError};
use serde_json::{Value, json};

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
    pub evidence: Option<Value>,
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

fn document(schema: &str, digest: &Digest) -> Value {
    json!({"schema": schema, "digest": digest.as_str()})
}

fn limits_json(l: &dpone_policy_model::scope::Limits) -> Value {
    json!({
        "max_workloads": l.max_workloads,
        "max_attempts": l.max_attempts,
        "max_source_rows": l.max_source_rows,
        "max_source_bytes": l.max_source_bytes,
        "max_attempt_seconds": l.max_attempt_seconds,
    })
}

/// Verifies and decides; the JSON evidence on success.
pub fn verify(inputs: &Inputs<'_>, scope: &LoadedPolicy) -> Result<Value, Refusal> {
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
        let evidence = serde_json::to_value(&decided.evidence)
            .map_err(|e| Refusal::new("DPONE_CLI_OUTPUT", e.to_string(), Class::Internal))?;
        match decided.decision {
            ScopeDecision::Admit(admitted) => decisions.push(json!({
                "workload_id": workload,
                "decision": "admit",
                "code": admitted.reason.code,
                "effective_limits": limits_json(&admitted.effective_limits),
                "evidence": evidence,
            })),
            ScopeDecision::Deny(reason) => {
                let mut refusal = Refusal::new(
                    &reason.code,
                    format!(
                        "the scope component denied workload {workload}: {}",
                        reason.message
                    ),
                    Class::Refused,
                );
                refusal.evidence = Some(json!({
                    "result": "refused",
                    "phase": phase_name,
                    "workload_id": workload,
                    "decision": "deny",
                    "code": reason.code,
                    "evidence": evidence,
                }));
                return Err(refusal);
            }
        }
    }

    let mut documents = json!({
        "policy": document(AuthorityPolicy::SCHEMA, &policy_digest),
        "grant": document(Authority::SCHEMA, &reopened.grant_digest),
        "composition": document(Composition::SCHEMA, &composition.digest()),
    });
    if let Some(request) = &request {
        documents["request"] = document(ActivationRequest::SCHEMA, &request.digest());
    }
    if let Some(release) = &release_set {
        documents["release_set"] = document(DbtReleaseSet::SCHEMA, &release.digest());
    }
    Ok(json!({
        "result": "verified",
        "phase": phase_name,
        "grant_id": grant.grant_id.as_str(),
        "campaign_id": grant.campaign_id.as_str(),
        "environment_id": grant.environment_id.as_str(),
        "documents": documents,
        "trusted_root_digest": format!("sha256:{}", verified.trusted_root_sha256),
        "signature": {
            "adapter": "github-artifact-attestation",
            "pinned": true,
            "signer_identity": verified.signer_identity,
            "subject_digest": verified.subject_digest,
            "source_repository": verified.source_repository,
            "predicate_type": verified.predicate_type,
            "runner_environment": verified.runner_environment,
            "instance": verified.instance,
            "verified_times": verified.verified_times,
        },
        "reopen": {
            "result": "ok",
            "policy_digest": reopened.policy_digest.as_str(),
            "now": inputs.now,
            "clock_floor": clock_floor,
            "revocation_epoch": current_epoch,
            "trust_revision": "not tracked: stateless verify (the protected store is part 2)",
        },
        "scope": {
            "component": {
                "kind": "scope",
                "sha256": scope.digest().to_string(),
                "pinned": true,
            },
            "decisions": decisions,
        },
        "pool": {
            "source": "none: stateless verify reads no protected store (part 2)",
            "usage": "zero",
            "reserved": false,
        },
        "consumed": false,
    }))
}
