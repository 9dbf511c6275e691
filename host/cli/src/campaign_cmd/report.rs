//! The reports of `campaign verify` and `campaign inspect`: their JSON contracts and their
//! terminal summaries. The verification's evidence is the pipeline's own
//! ([`crate::campaign::pipeline::Verified`], [`crate::campaign::pipeline::ScopeDenied`]).

use crate::campaign::pipeline::{ScopeDenied, Verified};
use crate::render::{Report, Summary, Verdict, clean};
use serde::Serialize;
use serde_json::Value;

/// `campaign verify`: verified, with every workload's scope decision.
impl Report for Verified {
    const SORTED_KEYS: bool = true;

    fn summary(&self) -> Summary {
        let decisions = &self.scope.decisions;
        let mut s = Summary::new(
            Verdict::Done,
            format!("verified, {} workload(s) in scope", decisions.len()),
        );
        s.fact("phase", self.phase)
            .fact("grant", &self.grant_id)
            .fact("campaign", &self.campaign_id)
            .fact("environment", &self.environment_id)
            .fact("signer", &self.signature.signer_identity)
            .fact("revocation epoch", self.reopen.revocation_epoch);
        for d in decisions.iter().take(8) {
            s.line(
                &format!("workload {}", clean(&d.workload_id)),
                format!(
                    "{} ({}, fuel {})",
                    clean(d.decision),
                    clean(&d.code),
                    clean(d.evidence.fuel_used)
                ),
            );
        }
        s
    }
}

/// `campaign verify`: the scope component denied a workload.
impl Report for ScopeDenied {
    const SORTED_KEYS: bool = true;

    fn summary(&self) -> Summary {
        let mut s = Summary::new(Verdict::Refused, clean(&self.code));
        s.fact("phase", self.phase)
            .fact("workload", &self.workload_id)
            .fact("scope decision", self.decision)
            .fact("fuel used", self.evidence.fuel_used)
            .line(
                "next",
                "nothing was admitted; the grant does not cover this workload",
            );
        s
    }
}

/// `campaign inspect`: one document's canonical summary and digest, no trust decision.
#[derive(Debug, Serialize)]
pub(super) struct Inspected {
    /// The document's schema.
    pub(super) schema: &'static str,
    /// Its canonical digest.
    pub(super) digest: String,
    /// The size of its canonical bytes.
    pub(super) size_bytes: usize,
    /// The bytes shown are canonical.
    pub(super) canonical: bool,
    /// Which attestation the document needs.
    pub(super) attestation: &'static str,
    /// `none`.
    pub(super) trust_decision: &'static str,
    /// The document's top-level facts; the document's shape, not the host's.
    pub(super) summary: Value,
}

impl Report for Inspected {
    const SORTED_KEYS: bool = true;

    fn summary(&self) -> Summary {
        Summary::of_fields(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::pipeline::samples;
    use crate::render::golden::{assert_pinned, assert_prints_as};
    use serde_json::json;

    /// The evidence as the pipeline built it before it was typed.
    fn old_verified(v: &Verified) -> Value {
        let doc = |d: &crate::campaign::pipeline::DocumentRef| json!({"schema": d.schema, "digest": d.digest});
        let mut documents = json!({
            "policy": doc(&v.documents.policy),
            "grant": doc(&v.documents.grant),
            "composition": doc(&v.documents.composition),
        });
        if let Some(r) = &v.documents.request {
            documents["request"] = doc(r);
        }
        if let Some(r) = &v.documents.release_set {
            documents["release_set"] = doc(r);
        }
        let decisions: Vec<Value> = v
            .scope
            .decisions
            .iter()
            .map(|d| {
                let l = &d.effective_limits;
                json!({
                    "workload_id": d.workload_id,
                    "decision": "admit",
                    "code": d.code,
                    "effective_limits": {
                        "max_workloads": l.max_workloads,
                        "max_attempts": l.max_attempts,
                        "max_source_rows": l.max_source_rows,
                        "max_source_bytes": l.max_source_bytes,
                        "max_attempt_seconds": l.max_attempt_seconds,
                    },
                    "evidence": serde_json::to_value(&d.evidence).expect("evidence"),
                })
            })
            .collect();
        let sig = &v.signature;
        let r = &v.reopen;
        json!({
            "result": "verified",
            "phase": v.phase,
            "grant_id": v.grant_id,
            "campaign_id": v.campaign_id,
            "environment_id": v.environment_id,
            "documents": documents,
            "trusted_root_digest": v.trusted_root_digest,
            "signature": {
                "adapter": "github-artifact-attestation",
                "pinned": true,
                "signer_identity": sig.signer_identity,
                "subject_digest": sig.subject_digest,
                "source_repository": sig.source_repository,
                "predicate_type": sig.predicate_type,
                "runner_environment": sig.runner_environment,
                "instance": sig.instance,
                "verified_times": sig.verified_times,
            },
            "reopen": {
                "result": "ok",
                "policy_digest": r.policy_digest,
                "now": r.now,
                "clock_floor": r.clock_floor,
                "revocation_epoch": r.revocation_epoch,
                "trust_revision": "not tracked: stateless verify (the protected store is part 2)",
            },
            "scope": {
                "component": {
                    "kind": "scope",
                    "sha256": v.scope.component.sha256,
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
        })
    }

    #[test]
    fn verified_evidence_keeps_its_json_and_summary() {
        let v = samples::verified();
        assert_prints_as(&v, &old_verified(&v));
        let mut one = samples::verified();
        one.phase = "qualification";
        one.documents.request = None;
        one.documents.release_set = Some(one.documents.composition.clone());
        one.signature.runner_environment = None;
        one.scope.decisions.truncate(1);
        assert_prints_as(&one, &old_verified(&one));
        assert_pinned("campaign_verify_verified", &v);
    }

    #[test]
    fn a_scope_denial_keeps_its_json_and_summary() {
        let d = samples::denied();
        let old = json!({
            "result": "refused",
            "phase": d.phase,
            "workload_id": d.workload_id,
            "decision": "deny",
            "code": d.code,
            "evidence": serde_json::to_value(&d.evidence).expect("evidence"),
        });
        assert_prints_as(&d, &old);
        assert_pinned("campaign_verify_refused", &d);
    }

    #[test]
    fn an_inspected_document_keeps_its_json_and_summary() {
        let summary = super::super::summary(&json!({
            "schema": "dpone.nonproduction-composition.v1",
            "composition_id": "c-1",
            "workloads": [{}, {}, {}],
            "limits": {"max_workloads": 3},
            "native": {"releases": [{}]},
            "note": null,
        }));
        let r = Inspected {
            schema: "dpone.nonproduction-composition.v1",
            digest: format!("sha256:{}", "c".repeat(64)),
            size_bytes: 812,
            canonical: true,
            attestation: "none: bound by digest through the grant and checked by the scope component",
            trust_decision: "none",
            summary: summary.clone(),
        };
        let old = json!({
            "schema": r.schema,
            "digest": r.digest,
            "size_bytes": r.size_bytes,
            "canonical": true,
            "attestation": r.attestation,
            "trust_decision": "none",
            "summary": summary,
        });
        assert_prints_as(&r, &old);
        assert_pinned("campaign_inspect", &r);
    }
}
