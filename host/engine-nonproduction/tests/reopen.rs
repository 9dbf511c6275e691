//! Reopen after signature verification: the valid grant reopens; every changed input refuses
//! with its own code; reopening consumes nothing (the same inputs reopen again, identically).

mod support;

use dpone_engine_nonproduction::codes::*;
use dpone_engine_nonproduction::reopen::{ReopenContext, VerifiedSignature, reopen};
use dpone_engine_nonproduction::*;
use serde_json::json;
use support::*;

struct Case {
    policy: AuthorityPolicy,
    grant: Authority,
    verified: VerifiedSignature,
    pin: fields::Digest,
    now: u64,
    floor: u64,
    epoch: u64,
    rev_then: u64,
    rev_now: u64,
}

impl Case {
    fn valid(grant: &str) -> Self {
        let policy: AuthorityPolicy = doc("policy.json");
        let grant: Authority = doc(grant);
        let verified = VerifiedSignature {
            signer_identity: policy.signer.identity(),
            subject_digest: grant.digest().as_str().to_owned(),
            issuer: "https://token.actions.githubusercontent.com".into(),
            repository: "acme/dpone-campaigns".into(),
            predicate_type: "https://dpone.dev/attestation/nonproduction-authority/v1".into(),
            runner_environment: "github-hosted".into(),
            trusted_root_digest: policy.signer.trusted_root_digest.as_str().to_owned(),
        };
        let now = grant.validity.not_before + 3_600;
        Self {
            pin: policy.digest(),
            policy,
            verified,
            now,
            floor: now - 60,
            epoch: grant.revocation_epoch,
            rev_then: 7,
            rev_now: 7,
            grant,
        }
    }

    fn run(&self) -> Result<reopen::Reopened, &'static str> {
        let ctx = ReopenContext {
            pinned_policy_digest: &self.pin,
            now: self.now,
            clock_floor: self.floor,
            current_revocation_epoch: self.epoch,
            trust_revision_at_verification: self.rev_then,
            current_trust_revision: self.rev_now,
        };
        reopen(&self.policy, &self.grant, &self.verified, &ctx).map_err(|e| e.code())
    }
}

fn refused(name: &str, edit: impl Fn(&mut Case), code: &str) {
    for grant in ["authority-qualification.json", "authority-execution.json"] {
        let mut case = Case::valid(grant);
        edit(&mut case);
        assert_eq!(case.run().err(), Some(code), "{name} ({grant})");
    }
}

/// Re-signs an edited grant: the verified subject follows the new bytes.
fn regrant(c: &mut Case, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut v: serde_json::Value =
        serde_json::from_slice(&c.grant.canonical_bytes()).expect("json");
    edit(&mut v);
    c.grant = Authority::parse(&canon(&v)).expect("grant parses");
    c.verified.subject_digest = c.grant.digest().as_str().into();
}

fn policy_edited(edit: impl FnOnce(&mut serde_json::Value)) -> AuthorityPolicy {
    let bytes = edited("policy.json", edit);
    AuthorityPolicy::parse(&bytes).expect("edited policy parses")
}

#[test]
fn valid_grants_reopen_and_reopening_consumes_nothing() {
    for grant in ["authority-qualification.json", "authority-execution.json"] {
        let case = Case::valid(grant);
        let first = case.run().expect("reopens");
        assert_eq!(first.grant_digest, case.grant.digest());
        assert_eq!(first.policy_digest, case.policy.digest());
        assert_eq!(first.trust_revision, 7);
        assert_eq!(case.run(), Ok(first), "a second reopen is identical");
        // Boundaries: exactly not_before, exactly the floor, one second before expiry.
        for now in [
            case.grant.validity.not_before,
            case.grant.validity.not_after - 1,
        ] {
            let mut c = Case::valid(grant);
            c.now = now;
            c.floor = now;
            assert!(c.run().is_ok(), "{grant} at {now}");
        }
    }
}

#[test]
fn changed_trust_refuses() {
    refused(
        "policy not the pin",
        |c| c.pin = fields::Digest::of(b"another policy"),
        REOPEN_POLICY_UNPINNED,
    );
    refused(
        "trust revision moved",
        |c| c.rev_now += 1,
        REOPEN_TRUST_REVISION_CHANGED,
    );
    refused(
        "policy changed and re-pinned",
        |c| {
            c.policy = policy_edited(|v| v["ceilings"]["max_attempts"] = json!(100));
            c.pin = c.policy.digest();
            c.verified.trusted_root_digest =
                c.policy.signer.trusted_root_digest.as_str().to_owned();
        },
        REOPEN_POLICY_CHANGED,
    );
    refused(
        "enrollment changed",
        |c| {
            c.policy = policy_edited(|v| {
                v["enrollment"]["participants"]
                    .as_array_mut()
                    .expect("array")
                    .pop();
            });
            c.pin = c.policy.digest();
        },
        REOPEN_POLICY_CHANGED,
    );
}

#[test]
fn foreign_signatures_refuse() {
    refused(
        "stale root",
        |c| c.verified.trusted_root_digest = fields::Digest::of(b"old root").as_str().into(),
        REOPEN_ROOT_STALE,
    );
    refused(
        "issuer",
        |c| c.verified.issuer = "https://accounts.google.com".into(),
        REOPEN_ISSUER_MISMATCH,
    );
    refused(
        "repository",
        |c| c.verified.repository = "acme/other".into(),
        REOPEN_REPOSITORY_MISMATCH,
    );
    refused(
        "predicate",
        |c| c.verified.predicate_type = "https://slsa.dev/provenance/v1".into(),
        REOPEN_PREDICATE_MISMATCH,
    );
    refused(
        "runner",
        |c| c.verified.runner_environment = "self-hosted".into(),
        REOPEN_RUNNER_MISMATCH,
    );
    refused(
        "signer workflow",
        |c| {
            c.verified.signer_identity = "https://github.com/acme/dpone-signing/.github/workflows/other.yml@a1b2c3d4e5f60718293a4b5c6d7e8f9012345678".into();
        },
        REOPEN_SIGNER_MISMATCH,
    );
    refused(
        "signer digest",
        |c| {
            c.verified.signer_identity = "https://github.com/acme/dpone-signing/.github/workflows/np-authority.yml@0000000000000000000000000000000000000000".into();
        },
        REOPEN_SIGNER_MISMATCH,
    );
    refused(
        "signer by ref",
        |c| {
            c.verified.signer_identity = "https://github.com/acme/dpone-signing/.github/workflows/np-authority.yml@refs/heads/main".into();
        },
        REOPEN_SIGNER_MISMATCH,
    );
    refused(
        "subject",
        |c| c.verified.subject_digest = fields::Digest::of(b"another document").as_str().into(),
        REOPEN_SUBJECT_MISMATCH,
    );
    refused(
        "bare-hex subject",
        |c| {
            c.verified.subject_digest = c
                .grant
                .digest()
                .as_str()
                .trim_start_matches("sha256:")
                .into();
        },
        REOPEN_SUBJECT_MISMATCH,
    );
}

#[test]
fn the_other_grant_is_not_this_grant() {
    // A signature over the execution grant does not reopen the qualification grant.
    let mut case = Case::valid("authority-qualification.json");
    let exec: Authority = doc("authority-execution.json");
    case.verified.subject_digest = exec.digest().as_str().into();
    assert_eq!(case.run().err(), Some(REOPEN_SUBJECT_MISMATCH));
}

#[test]
fn clock_validity_and_revocation() {
    refused(
        "backwards clock",
        |c| c.floor = c.now + 1,
        REOPEN_CLOCK_BACKWARDS,
    );
    refused(
        "not yet valid",
        |c| {
            c.now = c.grant.validity.not_before - 1;
            c.floor = c.now;
        },
        REOPEN_NOT_YET_VALID,
    );
    refused(
        "expired",
        |c| {
            c.now = c.grant.validity.not_after;
            c.floor = c.now;
        },
        REOPEN_EXPIRED,
    );
    refused(
        "policy expired",
        |c| {
            c.now = c.policy.validity.not_after;
            c.floor = c.now;
        },
        REOPEN_POLICY_EXPIRED,
    );
    refused(
        "grant longer than the policy allows",
        |c| {
            c.policy = policy_edited(|v| v["max_validity_seconds"] = json!(3_600));
            c.pin = c.policy.digest();
            // Re-issue the grant under the changed policy so only the window differs.
            let digest = c.policy.digest();
            regrant(c, |v| v["policy_digest"] = json!(digest.as_str()));
        },
        REOPEN_VALIDITY_ABOVE_POLICY,
    );
    refused("revoked", |c| c.epoch += 1, REOPEN_REVOKED);
    refused(
        "epoch ahead",
        |c| regrant(c, |v| v["revocation_epoch"] = json!(4)),
        REOPEN_EPOCH_AHEAD,
    );
    refused(
        "store rolled back below the policy floor",
        |c| c.epoch = 2,
        REOPEN_EPOCH_BELOW_POLICY,
    );
}

#[test]
fn a_grant_for_another_enrollment_or_environment_refuses() {
    refused(
        "enrollment",
        |c| {
            regrant(c, |v| {
                v["enrollment_digest"] = json!(fields::Digest::of(b"x").as_str())
            })
        },
        REOPEN_ENROLLMENT_CHANGED,
    );
    refused(
        "environment",
        |c| {
            regrant(c, |v| {
                v["environment_id"] = json!("0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f")
            })
        },
        REOPEN_ENVIRONMENT_CHANGED,
    );
}

#[test]
fn route_qualifications_reopen_under_the_same_signer_rules() {
    use dpone_engine_nonproduction::reopen::reopen_route_qualification;
    let base = Case::valid("authority-qualification.json");
    let rq: RouteQualification = doc("route-qualification.json");
    let run = |c: &Case, q: &RouteQualification, subject: String| {
        let mut verified = c.verified.clone();
        verified.subject_digest = subject;
        let ctx = ReopenContext {
            pinned_policy_digest: &c.pin,
            now: c.now,
            clock_floor: c.floor,
            current_revocation_epoch: c.epoch,
            trust_revision_at_verification: c.rev_then,
            current_trust_revision: c.rev_now,
        };
        reopen_route_qualification(&c.policy, q, &verified, &ctx).map_err(|e| e.code())
    };
    let ok = run(&base, &rq, rq.digest().as_str().into()).expect("reopens");
    assert_eq!(ok.grant_digest, rq.digest());
    // The grant's signature does not cover the qualification.
    assert_eq!(
        run(&base, &rq, base.grant.digest().as_str().into()).err(),
        Some(REOPEN_SUBJECT_MISMATCH)
    );
    let mut late = Case::valid("authority-qualification.json");
    late.floor = late.now + 1;
    assert_eq!(
        run(&late, &rq, rq.digest().as_str().into()).err(),
        Some(REOPEN_CLOCK_BACKWARDS)
    );
    let other = RouteQualification::parse(&edited("route-qualification.json", |v| {
        v["policy_digest"] = json!(fields::Digest::of(b"old policy").as_str());
    }))
    .expect("parses");
    assert_eq!(
        run(&base, &other, other.digest().as_str().into()).err(),
        Some(REOPEN_POLICY_CHANGED)
    );
}
