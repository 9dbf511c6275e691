//! Reopen: the pure checks the signature adapter's caller runs **after** signature
//! verification. The adapter verifies the GitHub Artifact Attestation; this module then re-reads
//! the pinned policy, the clock, the revocation epoch and the trust revision against the
//! verified facts, and refuses changed trust, stale roots, a foreign signer or subject,
//! backwards time, expiry and revocation.
//!
//! Authentication consumes nothing: [`reopen`] reads its inputs and returns evidence; one-time
//! consumption, budget reservation and credential issuance are protected operations elsewhere.
//!
//! Checks run in this fixed order; the first failure refuses:
//! 1. the policy's digest is the external pin ([`codes::REOPEN_POLICY_UNPINNED`]);
//! 2. the trust revision did not move during verification
//!    ([`codes::REOPEN_TRUST_REVISION_CHANGED`]);
//! 3. the verification's trusted root, issuer, repository, predicate type and runner are the
//!    policy's (root: [`codes::REOPEN_ROOT_STALE`]; the others their own codes);
//! 4. the verified signer is the policy's composite identity
//!    `https://github.com/{signer_workflow}@{signer_digest}` ([`codes::REOPEN_SIGNER_MISMATCH`]);
//! 5. the verified subject digest is the grant's digest ([`codes::REOPEN_SUBJECT_MISMATCH`]);
//! 6. the grant names this policy, its enrollment and its environment;
//! 7. the clock: `now >= clock_floor` ([`codes::REOPEN_CLOCK_BACKWARDS`]), the policy's own
//!    window, the grant's window and its length against the policy's `max_validity_seconds`;
//! 8. revocation: the current epoch is at least the policy's floor and equals the grant's.

use crate::authority::Authority;
use crate::codes;
use crate::document::Document;
use crate::error::{NpError, Result};
use crate::fields::Digest;
use crate::policy::AuthorityPolicy;
use crate::qualification::RouteQualification;

/// What the signature adapter verified, as plain strings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedSignature {
    /// The composite signer identity `https://github.com/{signer_workflow}@{signer_digest}`.
    pub signer_identity: String,
    /// The in-toto subject digest, `sha256:<hex>`.
    pub subject_digest: String,
    /// The certificate's OIDC issuer.
    pub issuer: String,
    /// The certificate's source repository (lowercase `owner/name`).
    pub repository: String,
    /// The statement's predicate type.
    pub predicate_type: String,
    /// The certificate's runner environment.
    pub runner_environment: String,
    /// `sha256:` of the trusted root bytes verification used.
    pub trusted_root_digest: String,
}

/// The host's state at reopen time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReopenContext<'a> {
    /// The external pin of the policy document.
    pub pinned_policy_digest: &'a Digest,
    /// The host's clock, Unix seconds, read once.
    pub now: u64,
    /// The last time the host has seen (a clock earlier than it went backwards).
    pub clock_floor: u64,
    /// The current revocation epoch.
    pub current_revocation_epoch: u64,
    /// The trust revision read before verification.
    pub trust_revision_at_verification: u64,
    /// The trust revision read now.
    pub current_trust_revision: u64,
}

/// What a successful reopen establishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reopened {
    /// Digest of the pinned policy.
    pub policy_digest: Digest,
    /// Digest of the reopened document (the grant, or the route qualification).
    pub grant_digest: Digest,
    /// The signer identity that was matched.
    pub signer_identity: String,
    /// The trust revision the result holds for.
    pub trust_revision: u64,
}

fn refuse(code: &'static str, detail: &str) -> NpError {
    NpError::new(code, detail.to_owned())
}

/// Steps 1 to 5: the pin, the trust revision, the verification's pins, the signer and the
/// subject (`subject` is the digest of the signed document).
fn check_signature(
    policy: &AuthorityPolicy,
    subject: &Digest,
    verified: &VerifiedSignature,
    ctx: &ReopenContext<'_>,
) -> Result<(Digest, String)> {
    let policy_digest = policy.digest();
    if &policy_digest != ctx.pinned_policy_digest {
        return Err(refuse(
            codes::REOPEN_POLICY_UNPINNED,
            "the policy is not the pinned policy",
        ));
    }
    if ctx.trust_revision_at_verification != ctx.current_trust_revision {
        return Err(refuse(
            codes::REOPEN_TRUST_REVISION_CHANGED,
            "the trust revision changed during verification",
        ));
    }
    let signer = &policy.signer;
    let pinned: [(&str, &str, &'static str, &str); 5] = [
        (
            verified.trusted_root_digest.as_str(),
            signer.trusted_root_digest.as_str(),
            codes::REOPEN_ROOT_STALE,
            "verification used another trusted root than the policy pins",
        ),
        (
            verified.issuer.as_str(),
            signer.issuer.as_str(),
            codes::REOPEN_ISSUER_MISMATCH,
            "the verified issuer is not the policy's",
        ),
        (
            verified.repository.as_str(),
            signer.repository.as_str(),
            codes::REOPEN_REPOSITORY_MISMATCH,
            "the verified repository is not the policy's",
        ),
        (
            verified.predicate_type.as_str(),
            signer.predicate_type.as_str(),
            codes::REOPEN_PREDICATE_MISMATCH,
            "the verified predicate type is not the policy's",
        ),
        (
            verified.runner_environment.as_str(),
            signer.runner_environment.as_str(),
            codes::REOPEN_RUNNER_MISMATCH,
            "the verified runner is not the policy's",
        ),
    ];
    for (got, want, code, detail) in pinned {
        if got != want {
            return Err(refuse(code, detail));
        }
    }
    let identity = signer.identity();
    if verified.signer_identity != identity {
        return Err(refuse(
            codes::REOPEN_SIGNER_MISMATCH,
            "the verified signer is not the policy's composite identity",
        ));
    }
    if verified.subject_digest != subject.as_str() {
        return Err(refuse(
            codes::REOPEN_SUBJECT_MISMATCH,
            "the verified subject is not this document",
        ));
    }
    Ok((policy_digest, identity))
}

/// The clock against the floor and the policy's own window.
fn check_clock(policy: &AuthorityPolicy, ctx: &ReopenContext<'_>) -> Result<()> {
    if ctx.now < ctx.clock_floor {
        return Err(refuse(
            codes::REOPEN_CLOCK_BACKWARDS,
            "the clock is earlier than the last time seen",
        ));
    }
    if ctx.now < policy.validity.not_before || ctx.now >= policy.validity.not_after {
        return Err(refuse(
            codes::REOPEN_POLICY_EXPIRED,
            "the policy is outside its validity",
        ));
    }
    Ok(())
}

/// Reopens a verified route qualification: the signature checks (1 to 5), the policy it names,
/// and the clock against the floor and the policy's window. (Its grant is reopened on its own;
/// [`crate::facts::bind_route_qualification`] binds the two.)
pub fn reopen_route_qualification(
    policy: &AuthorityPolicy,
    qualification: &RouteQualification,
    verified: &VerifiedSignature,
    ctx: &ReopenContext<'_>,
) -> Result<Reopened> {
    let subject = qualification.digest();
    let (policy_digest, signer_identity) = check_signature(policy, &subject, verified, ctx)?;
    if qualification.policy_digest != policy_digest {
        return Err(refuse(
            codes::REOPEN_POLICY_CHANGED,
            "the qualification was signed under another policy",
        ));
    }
    if qualification.environment_id != policy.enrollment.environment_id {
        return Err(refuse(
            codes::REOPEN_ENVIRONMENT_CHANGED,
            "the qualification is for another environment",
        ));
    }
    check_clock(policy, ctx)?;
    Ok(Reopened {
        policy_digest,
        grant_digest: subject,
        signer_identity,
        trust_revision: ctx.current_trust_revision,
    })
}

/// Reopens a verified grant; see the module documentation for the order of checks.
pub fn reopen(
    policy: &AuthorityPolicy,
    grant: &Authority,
    verified: &VerifiedSignature,
    ctx: &ReopenContext<'_>,
) -> Result<Reopened> {
    let grant_digest = grant.digest();
    let (policy_digest, identity) = check_signature(policy, &grant_digest, verified, ctx)?;
    if grant.policy_digest != policy_digest {
        return Err(refuse(
            codes::REOPEN_POLICY_CHANGED,
            "the grant was issued under another policy",
        ));
    }
    if grant.enrollment_digest != policy.enrollment_digest() {
        return Err(refuse(
            codes::REOPEN_ENROLLMENT_CHANGED,
            "the grant was issued against another enrollment",
        ));
    }
    if grant.environment_id != policy.enrollment.environment_id {
        return Err(refuse(
            codes::REOPEN_ENVIRONMENT_CHANGED,
            "the grant is for another environment",
        ));
    }
    check_clock(policy, ctx)?;
    if grant.validity.not_after - grant.validity.not_before > policy.max_validity_seconds {
        return Err(refuse(
            codes::REOPEN_VALIDITY_ABOVE_POLICY,
            "the grant's validity is longer than the policy allows",
        ));
    }
    if ctx.now < grant.validity.not_before {
        return Err(refuse(
            codes::REOPEN_NOT_YET_VALID,
            "the grant is not yet valid",
        ));
    }
    if ctx.now >= grant.validity.not_after {
        return Err(refuse(codes::REOPEN_EXPIRED, "the grant has expired"));
    }
    if ctx.current_revocation_epoch < policy.revocation_epoch {
        return Err(refuse(
            codes::REOPEN_EPOCH_BELOW_POLICY,
            "the current revocation epoch is below the policy's floor",
        ));
    }
    if grant.revocation_epoch < ctx.current_revocation_epoch {
        return Err(refuse(
            codes::REOPEN_REVOKED,
            "the grant's epoch is revoked",
        ));
    }
    if grant.revocation_epoch > ctx.current_revocation_epoch {
        return Err(refuse(
            codes::REOPEN_EPOCH_AHEAD,
            "the grant's epoch is ahead of the current epoch",
        ));
    }
    Ok(Reopened {
        policy_digest,
        grant_digest,
        signer_identity: identity,
        trust_revision: ctx.current_trust_revision,
    })
}
