//! The reports of `bundle …` and `verify-bundle`: each command's JSON contract and its
//! terminal summary. All of them were first printed as untyped JSON values, so every report
//! keeps its keys sorted at every depth ([`Report::SORTED_KEYS`]).

use crate::activation::ActivationEvidence;
use crate::render::{Report, Summary, Verdict, clean, decision_outcome};
use dpone_trust::bundle::BundleEvidence;
use dpone_trust::sigstore::SigstoreOutcome;
use serde::{Serialize, Serializer};
use serde_json::Value;

/// Reports whose summary is the plain listing of their fields ([`Summary::of_fields`]).
macro_rules! listed_reports {
    ($($report:ty),* $(,)?) => {$(
        impl Report for $report {
            const SORTED_KEYS: bool = true;
            fn summary(&self) -> Summary {
                Summary::of_fields(self)
            }
        }
    )*};
}

listed_reports!(Keygen, Created, Signed, Packed, TrustPolicyDocument);

/// `bundle keygen`: the new key's id and public key.
#[derive(Serialize)]
pub struct Keygen {
    /// `sha256:<hex>` of the public key.
    pub key_id: String,
    /// The public key, hex.
    pub public_key: String,
    /// Always `ed25519`.
    pub algorithm: &'static str,
}

/// `bundle create`: the new bundle directory.
#[derive(Serialize)]
pub struct Created {
    /// Always true.
    pub created: bool,
    /// SHA-256 of the canonical manifest, hex.
    pub manifest_sha256: String,
    /// Every file written.
    pub files: Vec<CreatedFile>,
}

/// One file of a created bundle.
#[derive(Serialize)]
pub struct CreatedFile {
    /// Bundle-relative name.
    pub file: String,
    /// Size in bytes.
    pub size: usize,
}

/// `bundle sign`.
#[derive(Serialize)]
pub struct Signed {
    /// Always true.
    pub signed: bool,
    /// The signing key's id.
    pub key_id: String,
    /// SHA-256 of the signed manifest, hex.
    pub manifest_sha256: String,
    /// Signatures now in `signatures.json`.
    pub signatures: usize,
}

/// `bundle verify`: the bundle verified against the trust policy.
#[derive(Serialize)]
pub struct Verified {
    /// Always true.
    pub verified: bool,
    /// What verification established, as [`BundleEvidence::to_json`] spells it.
    #[serde(serialize_with = "bundle_evidence_json")]
    pub evidence: BundleEvidence,
}

fn bundle_evidence_json<S: Serializer>(e: &BundleEvidence, s: S) -> Result<S::Ok, S::Error> {
    e.to_json().serialize(s)
}

impl Report for Verified {
    const SORTED_KEYS: bool = true;
    fn summary(&self) -> Summary {
        let mut s = Summary::new(Verdict::Done, "verified");
        bundle_facts(&mut s, &self.evidence);
        s
    }
}

/// What a verified bundle is: name and version, manifest, signatures, component pins.
fn bundle_facts(s: &mut Summary, e: &BundleEvidence) {
    s.line(
        "bundle",
        format!("{} {}", clean(&e.name), clean(&e.version)),
    );
    s.fact("manifest", e.manifest_sha256.to_hex());
    s.line(
        "signatures",
        format!("{} of threshold {}", e.signers.len(), e.threshold),
    );
    for (kind, digest) in &e.components {
        s.fact(
            &format!("component {}", clean(kind.as_str())),
            digest.to_hex(),
        );
    }
}

/// `bundle activate`: the activation gate passed, and the optional `--eval` decision.
#[derive(Serialize)]
pub struct Activated {
    /// Always true.
    pub activated: bool,
    /// Everything the gate established.
    pub evidence: ActivationEvidence,
    /// The `--eval` decision with its evidence ([`crate::activation::ActivatedBundle::decide_json`]);
    /// the key is absent without `--eval`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<Value>,
}

impl Report for Activated {
    const SORTED_KEYS: bool = true;
    /// The `--eval` decision's output is the component's (a JSON value): its one-word outcome is
    /// read from it.
    fn summary(&self) -> Summary {
        let ev = &self.evidence;
        let mut s = Summary::new(Verdict::Done, "activated");
        bundle_facts(&mut s, &ev.bundle);
        for t in &ev.tables {
            s.line(
                &format!("table {}", clean(&t.kind)),
                format!("{} of {} rows agreed", t.agreed, t.rows),
            );
        }
        for t in &ev.host_conformance.tables {
            s.line(
                &format!("conformance {}", clean(&t.kind)),
                format!("{} passed, {} failed", t.passed, t.failed),
            );
        }
        if let Some(d) = self.decision.as_ref().filter(|d| !d.is_null()) {
            s.line("decision", decision_outcome(&d["decision"]));
        }
        s
    }
}

/// `bundle inspect`: the manifest and the claimed signers, without any trust decision.
#[derive(Serialize)]
pub struct Inspected {
    /// Always false: inspecting decides nothing.
    pub verified: bool,
    /// Says so.
    pub note: &'static str,
    /// Name and version from the manifest.
    pub bundle: BundleName,
    /// WIT package from the manifest.
    pub wit_package: String,
    /// SHA-256 of the manifest bytes, hex.
    pub manifest_sha256: String,
    /// The manifest's components.
    pub policies: Vec<InspectedPolicy>,
    /// The manifest's decision tables.
    pub tables: Vec<InspectedTable>,
    /// Key ids that claim to have signed (not checked).
    pub claimed_signers: Vec<String>,
    /// `match`, or the refusal code of the first file that does not match.
    pub contents: String,
}

/// A bundle's name and version.
#[derive(Serialize)]
pub struct BundleName {
    /// Name.
    pub name: String,
    /// Version.
    pub version: String,
}

/// A component entry of an inspected manifest.
#[derive(Serialize)]
pub struct InspectedPolicy {
    /// Policy kind.
    pub kind: &'static str,
    /// Bundle-relative file.
    pub file: String,
    /// Declared digest, hex.
    pub sha256: String,
    /// Declared size in bytes.
    pub size: u64,
    /// Declared budget.
    pub budget: InspectedBudget,
}

/// A component's declared budget.
#[derive(Serialize)]
pub struct InspectedBudget {
    /// Fuel.
    pub fuel: u64,
    /// Memory in bytes.
    pub memory_bytes: u64,
    /// Wasm stack in bytes.
    pub wasm_stack_bytes: u64,
}

/// A decision table entry of an inspected manifest.
#[derive(Serialize)]
pub struct InspectedTable {
    /// Policy kind.
    pub kind: &'static str,
    /// Bundle-relative file.
    pub file: String,
    /// Declared digest, hex.
    pub sha256: String,
    /// Declared size in bytes.
    pub size: u64,
}

impl Report for Inspected {
    const SORTED_KEYS: bool = true;
    /// Its fields; `"verified": false` here is "no trust decision was made", not a refusal.
    fn summary(&self) -> Summary {
        Summary::of_fields(self).verdict(Verdict::Done, "inspected (no trust decision)")
    }
}

/// `bundle pack`.
#[derive(Serialize)]
pub struct Packed {
    /// Always true.
    pub packed: bool,
    /// SHA-256 of the archive, hex.
    pub archive_sha256: String,
    /// Archive size in bytes.
    pub size: usize,
    /// Files in the archive.
    pub members: usize,
}

/// `bundle unpack`: the result still needs `bundle verify`.
#[derive(Serialize)]
pub struct Unpacked {
    /// Always true.
    pub unpacked: bool,
    /// Files written.
    pub members: usize,
    /// Always false: unpacking decides nothing.
    pub verified: bool,
}

impl Report for Unpacked {
    const SORTED_KEYS: bool = true;

    /// Unpacking is done, not a refusal: its `"verified": false` says no trust decision was
    /// made yet.
    fn summary(&self) -> Summary {
        Summary::of_fields(self).verdict(
            Verdict::Done,
            "unpacked (no trust decision: run bundle verify)",
        )
    }
}

/// `bundle trust-policy`: the trust policy document itself, in the trust crate's canonical
/// form (a JSON value whose shape is that crate's, listed by key).
#[derive(Serialize)]
#[serde(transparent)]
pub struct TrustPolicyDocument(pub Value);

/// `verify-bundle`: the Sigstore verification outcome.
#[derive(Serialize)]
pub struct SigstoreVerified {
    /// Always true.
    pub verified: bool,
    /// What verification established, as [`SigstoreOutcome::to_json`] spells it.
    #[serde(serialize_with = "sigstore_outcome_json")]
    pub outcome: SigstoreOutcome,
}

fn sigstore_outcome_json<S: Serializer>(o: &SigstoreOutcome, s: S) -> Result<S::Ok, S::Error> {
    o.to_json().serialize(s)
}

impl Report for SigstoreVerified {
    const SORTED_KEYS: bool = true;
    /// Every scalar of the outcome, in the order of its JSON keys.
    fn summary(&self) -> Summary {
        let o = &self.outcome;
        let mut s = Summary::new(Verdict::Done, "verified");
        s.fact("certificate verified", o.certificate_verified)
            .fact("content", o.content)
            .fact_if("identity", o.identity.as_ref())
            .fact_if("issuer", o.issuer.as_ref())
            .fact("managed key", o.managed_key)
            .fact("media type", &o.media_type)
            .fact("rfc3161 timestamps", o.rfc3161_timestamps)
            .fact("sct verified", o.sct_verified)
            .fact("tlog entries", o.tlog_entries)
            .fact("tlog verified", o.tlog_verified)
            .fact("trusted root pinned", o.trusted_root_pinned)
            .fact("trusted root sha256", o.trusted_root_sha256.to_hex());
        s
    }
}

/// A refused `bundle verify`, `bundle activate` or `verify-bundle`, printed on stdout too so
/// that scripts reading only stdout see the refusal.
#[derive(Serialize)]
pub struct Refusal {
    /// Always false.
    pub verified: bool,
    /// The failure's code.
    pub error: String,
}

impl Refusal {
    /// The refusal of `code`.
    pub fn new(code: &str) -> Self {
        Self {
            verified: false,
            error: code.to_owned(),
        }
    }
}

impl Report for Refusal {
    const SORTED_KEYS: bool = true;
    fn summary(&self) -> Summary {
        let mut s = Summary::new(Verdict::Refused, clean(&self.error));
        s.line("next", "nothing was trusted or activated");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::golden::{assert_pinned, assert_prints_as};
    use dpone_trust::Sha256Digest;
    use dpone_trust::keys::KeyId;
    use dpone_trust::manifest::PolicyKind;
    use serde_json::json;

    fn hex(byte: u8) -> String {
        Sha256Digest::from_bytes([byte; 32]).to_hex()
    }

    fn key_id(byte: u8) -> KeyId {
        KeyId::parse(&format!("sha256:{}", hex(byte))).expect("key id")
    }

    fn evidence() -> BundleEvidence {
        BundleEvidence {
            name: "shipped".into(),
            version: "1.2.0".into(),
            wit_package: "dpone:policy@0.1.0".into(),
            manifest_sha256: Sha256Digest::from_bytes([1; 32]),
            trust_policy_sha256: Sha256Digest::from_bytes([2; 32]),
            threshold: 1,
            signers: vec![key_id(3)],
            ignored_signers: vec![key_id(4)],
            attested_by: Vec::new(),
            ignored_attestations: vec!["attestations/x.json".into()],
            components: vec![
                (PolicyKind::Guard, Sha256Digest::from_bytes([5; 32])),
                (PolicyKind::Scope, Sha256Digest::from_bytes([6; 32])),
            ],
        }
    }

    fn outcome(identity: bool) -> SigstoreOutcome {
        SigstoreOutcome {
            media_type: "application/vnd.dev.sigstore.bundle.v0.3+json".into(),
            content: "message_signature",
            identity: identity.then(|| "https://github.com/o/r/.github/workflows/w.yml".into()),
            issuer: identity.then(|| "https://token.actions.githubusercontent.com".into()),
            managed_key: !identity,
            certificate_verified: identity,
            sct_verified: identity,
            tlog_verified: true,
            tlog_entries: 1,
            rfc3161_timestamps: 0,
            verified_times: vec![1_700_000_000],
            trusted_root_sha256: Sha256Digest::from_bytes([7; 32]),
            trusted_root_pinned: true,
        }
    }

    fn activation_evidence() -> ActivationEvidence {
        use crate::activation::{ConformanceEvidence, HostConformance, TableAgreed};
        use dpone_decision_table::conformance::ConformanceOutcome;
        use dpone_policy_runtime::{CodeSource, LoadReport, PolicyKind as Kind};
        ActivationEvidence {
            bundle: evidence(),
            engine_fingerprint: hex(8),
            loads: vec![LoadReport {
                kind: Kind::Guard,
                component_sha256: dpone_policy_runtime::Sha256Digest::of(b"guard"),
                size: 100,
                code_source: CodeSource::Compiled,
                load_micros: 1500,
            }],
            tables: vec![TableAgreed {
                file: "tables/guard.json".into(),
                kind: "guard".into(),
                function: "decide".into(),
                rows: 4,
                agreed: 4,
                fuel_used: 900,
            }],
            host_conformance: HostConformance {
                wit_package: "dpone:policy@0.1.0",
                tables: vec![ConformanceEvidence {
                    format: "dpone.conformance-table.v1".into(),
                    wit_package: "dpone:policy@0.1.0".into(),
                    kind: "guard".into(),
                    function: "decide".into(),
                    table_version: 2,
                    rows: vec![ConformanceOutcome {
                        id: "deny-above-ratio".into(),
                        passed: true,
                        outcome: "deny".into(),
                        failure: None,
                    }],
                    passed: 1,
                    failed: 0,
                }],
            },
        }
    }

    fn inspected() -> Inspected {
        Inspected {
            verified: false,
            note: "inspect makes no trust decision; use `bundle verify` with a trust policy",
            bundle: BundleName {
                name: "shipped".into(),
                version: "1.2.0".into(),
            },
            wit_package: "dpone:policy@0.1.0".into(),
            manifest_sha256: hex(1),
            policies: vec![InspectedPolicy {
                kind: "guard",
                file: "policies/guard.wasm".into(),
                sha256: hex(5),
                size: 4096,
                budget: InspectedBudget {
                    fuel: 10_000_000,
                    memory_bytes: 16 << 20,
                    wasm_stack_bytes: 512 << 10,
                },
            }],
            tables: vec![InspectedTable {
                kind: "guard",
                file: "tables/guard.json".into(),
                sha256: hex(9),
                size: 300,
            }],
            claimed_signers: vec![key_id(3).as_str().to_owned()],
            contents: "match".into(),
        }
    }

    #[test]
    fn bundle_reports_print_the_bytes_of_the_values_they_replace() {
        let keygen = Keygen {
            key_id: key_id(3).as_str().to_owned(),
            public_key: "ab".repeat(32),
            algorithm: "ed25519",
        };
        assert_prints_as(
            &keygen,
            &json!({"key_id": keygen.key_id, "public_key": keygen.public_key, "algorithm": "ed25519"}),
        );

        let created = Created {
            created: true,
            manifest_sha256: hex(1),
            files: vec![
                CreatedFile {
                    file: "manifest.json".into(),
                    size: 700,
                },
                CreatedFile {
                    file: "policies/guard.wasm".into(),
                    size: 4096,
                },
            ],
        };
        assert_prints_as(
            &created,
            &json!({
                "created": true,
                "manifest_sha256": hex(1),
                "files": created.files.iter().map(|f| json!({"file": f.file, "size": f.size})).collect::<Vec<_>>(),
            }),
        );

        let signed = Signed {
            signed: true,
            key_id: key_id(3).as_str().to_owned(),
            manifest_sha256: hex(1),
            signatures: 2,
        };
        assert_prints_as(
            &signed,
            &json!({"signed": true, "key_id": signed.key_id, "manifest_sha256": hex(1), "signatures": 2}),
        );

        let verified = Verified {
            verified: true,
            evidence: evidence(),
        };
        assert_prints_as(
            &verified,
            &json!({"verified": true, "evidence": evidence().to_json()}),
        );

        let activated = Activated {
            activated: true,
            evidence: activation_evidence(),
            decision: None,
        };
        assert_prints_as(
            &activated,
            &json!({"activated": true, "evidence": activation_evidence()}),
        );
        let decision = json!({"decision": {"allow": {}}, "evidence": {"fuel_used": 300},
                              "bundle": evidence().to_json()});
        let decided = Activated {
            activated: true,
            evidence: activation_evidence(),
            decision: Some(decision.clone()),
        };
        assert_prints_as(
            &decided,
            &json!({"activated": true, "evidence": activation_evidence(), "decision": decision}),
        );

        let inspected = inspected();
        assert_prints_as(
            &inspected,
            &json!({
                "verified": false,
                "note": inspected.note,
                "bundle": {"name": "shipped", "version": "1.2.0"},
                "wit_package": "dpone:policy@0.1.0",
                "manifest_sha256": hex(1),
                "policies": [{"kind": "guard", "file": "policies/guard.wasm", "sha256": hex(5),
                    "size": 4096, "budget": {"fuel": 10_000_000, "memory_bytes": 16 << 20,
                    "wasm_stack_bytes": 512 << 10}}],
                "tables": [{"kind": "guard", "file": "tables/guard.json", "sha256": hex(9), "size": 300}],
                "claimed_signers": [key_id(3).as_str()],
                "contents": "match",
            }),
        );

        let packed = Packed {
            packed: true,
            archive_sha256: hex(10),
            size: 9000,
            members: 5,
        };
        assert_prints_as(
            &packed,
            &json!({"packed": true, "archive_sha256": hex(10), "size": 9000, "members": 5}),
        );

        let unpacked = Unpacked {
            unpacked: true,
            members: 5,
            verified: false,
        };
        assert_prints_as(
            &unpacked,
            &json!({"unpacked": true, "members": 5, "verified": false}),
        );

        let document = json!({"schema": "dpone.trust-policy/v1",
            "bundle_signers": {"threshold": 1, "keys": [{"id": key_id(3).as_str()}]},
            "sigstore_trusted_roots": []});
        assert_prints_as(&TrustPolicyDocument(document.clone()), &document);

        for identity in [true, false] {
            let verified = SigstoreVerified {
                verified: true,
                outcome: outcome(identity),
            };
            assert_prints_as(
                &verified,
                &json!({"verified": true, "outcome": outcome(identity).to_json()}),
            );
        }

        assert_prints_as(
            &Refusal::new("DPONE_BUNDLE_THRESHOLD_NOT_MET"),
            &json!({"verified": false, "error": "DPONE_BUNDLE_THRESHOLD_NOT_MET"}),
        );
    }

    #[test]
    fn bundle_reports_are_pinned() {
        assert_pinned(
            "bundle_keygen",
            &Keygen {
                key_id: key_id(3).as_str().to_owned(),
                public_key: "ab".repeat(32),
                algorithm: "ed25519",
            },
        );
        assert_pinned(
            "bundle_create",
            &Created {
                created: true,
                manifest_sha256: hex(1),
                files: vec![CreatedFile {
                    file: "manifest.json".into(),
                    size: 700,
                }],
            },
        );
        assert_pinned(
            "bundle_sign",
            &Signed {
                signed: true,
                key_id: key_id(3).as_str().to_owned(),
                manifest_sha256: hex(1),
                signatures: 2,
            },
        );
        assert_pinned(
            "bundle_verify",
            &Verified {
                verified: true,
                evidence: evidence(),
            },
        );
        assert_pinned(
            "bundle_verify_refused",
            &Refusal::new("DPONE_BUNDLE_THRESHOLD_NOT_MET"),
        );
        assert_pinned(
            "bundle_activate",
            &Activated {
                activated: true,
                evidence: activation_evidence(),
                decision: Some(json!({"decision": {"allow": {}}, "evidence": {"fuel_used": 300}})),
            },
        );
        assert_pinned("bundle_inspect", &inspected());
        assert_pinned(
            "bundle_pack",
            &Packed {
                packed: true,
                archive_sha256: hex(10),
                size: 9000,
                members: 5,
            },
        );
        assert_pinned(
            "bundle_unpack",
            &Unpacked {
                unpacked: true,
                members: 5,
                verified: false,
            },
        );
        assert_pinned(
            "bundle_trust_policy",
            &TrustPolicyDocument(json!({"schema": "dpone.trust-policy/v1",
                "bundle_signers": {"threshold": 1, "keys": []}, "sigstore_trusted_roots": []})),
        );
        assert_pinned(
            "verify_bundle_identity",
            &SigstoreVerified {
                verified: true,
                outcome: outcome(true),
            },
        );
        assert_pinned(
            "verify_bundle_key",
            &SigstoreVerified {
                verified: true,
                outcome: outcome(false),
            },
        );
        assert_pinned(
            "verify_bundle_refused",
            &Refusal::new("DPONE_SIGSTORE_SIGNATURE_INVALID"),
        );
    }
}
