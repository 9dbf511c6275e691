//! A coherent, signable nonproduction campaign for the `campaign` CLI tests and the verify
//! benchmark: the frozen fixtures of `fixtures/nonproduction`, re-pinned to an offline test
//! signer (`dpone-test-attest-signer`) and re-chained by digest after every edit ([`Docs::seal`]),
//! so that a test changes exactly one thing.
#![allow(dead_code)]

use dpone_engine_nonproduction::fields::Digest;
use dpone_engine_nonproduction::json::canonical_bytes;
use dpone_test_attest_signer::{
    AttestOptions, SLSA_PROVENANCE_V1, Subject, TestAuthority, WorkloadIdentity,
};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::OnceLock;

/// 2026-12-01T00:00:00Z: the fixtures' reference time.
pub const T0: u64 = 1_796_083_200;
/// When the test signer signs the grants: an hour before the qualification grant starts.
pub const SIGNED_AT: u64 = T0 - 3600;
/// Inside the qualification grant's window.
pub const Q_NOW: u64 = T0 + 60;
/// Inside the execution grant's window.
pub const E_NOW: u64 = T0 + 86_400 + 60;

/// The fixture directory.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/nonproduction")
}

fn fixture(name: &str) -> Value {
    let bytes = std::fs::read(fixtures().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_json::from_slice(&bytes).expect("fixture JSON")
}

/// RFC 8785 bytes.
pub fn canon(v: &Value) -> Vec<u8> {
    canonical_bytes(v)
}

/// `sha256:<hex>` of the canonical bytes of `v`.
pub fn digest(v: &Value) -> String {
    Digest::of(&canon(v)).as_str().to_owned()
}

/// The one test authority of this process (Fulcio-like CA + TSA).
pub fn authority() -> &'static TestAuthority {
    static CA: OnceLock<TestAuthority> = OnceLock::new();
    CA.get_or_init(|| TestAuthority::new().expect("test authority"))
}

/// The trusted root naming the test authority.
pub fn trusted_root() -> Vec<u8> {
    authority().trusted_root_json()
}

/// The signing workflow the policy pins.
pub fn identity() -> WorkloadIdentity {
    WorkloadIdentity {
        signer_workflow: "acme/dpone-signing/.github/workflows/np-authority.yml".into(),
        signer_ref: "refs/heads/main".into(),
        signer_digest: "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678".into(),
        repository: "acme/dpone-campaigns".into(),
        run_invocation_uri: "https://github.com/acme/dpone-campaigns/actions/runs/7/attempts/1"
            .into(),
        ..WorkloadIdentity::default()
    }
}

/// An attestation of `document` by `identity`, signed at [`SIGNED_AT`].
pub fn attest(document: &[u8], identity: &WorkloadIdentity) -> Vec<u8> {
    authority()
        .attest(
            &[Subject::of("grant.json", document)],
            identity,
            &AttestOptions {
                signed_at: Some(SIGNED_AT),
                ..AttestOptions::default()
            },
        )
        .expect("attest")
}

/// The documents of one campaign, as JSON values.
#[derive(Clone, Debug)]
pub struct Docs {
    /// `dpone.nonproduction-authority-policy.v1`.
    pub policy: Value,
    /// Qualification grant.
    pub qgrant: Value,
    /// Execution grant.
    pub egrant: Value,
    /// Scoped native release set.
    pub release: Value,
    /// Parent composition.
    pub composition: Value,
    /// Scoped activation request.
    pub request: Value,
}

impl Docs {
    /// The fixtures, pinned to the test signer's root and SLSA provenance (what
    /// `actions/attest-build-provenance` writes), with every workload allowed the complete
    /// membership of three, then sealed.
    pub fn new() -> Self {
        let mut docs = Self {
            policy: fixture("policy.json"),
            qgrant: fixture("authority-qualification.json"),
            egrant: fixture("authority-execution.json"),
            release: fixture("release-set.json"),
            composition: fixture("composition.json"),
            request: fixture("activation-request.json"),
        };
        let root = Digest::of(&trusted_root()).as_str().to_owned();
        docs.policy["signer"]["trusted_root_digest"] = root.into();
        docs.policy["signer"]["predicate_type"] = SLSA_PROVENANCE_V1.into();
        let n = docs.egrant["phase_subjects"]["membership"]
            .as_array()
            .map_or(0, Vec::len);
        for w in docs.composition["workloads"]
            .as_array_mut()
            .expect("workloads")
        {
            w["limits"]["max_workloads"] = n.into();
        }
        docs.seal();
        docs
    }

    /// Re-chains every digest after an edit: grants and release set name the policy and its
    /// enrollment; the composition names the policy and the release set; the execution grant
    /// names release set and composition; the request names all three.
    pub fn seal(&mut self) {
        let policy = digest(&self.policy);
        let enrollment = digest(&self.policy["enrollment"]);
        for grant in [&mut self.qgrant, &mut self.egrant] {
            grant["policy_digest"] = policy.clone().into();
            grant["enrollment_digest"] = enrollment.clone().into();
        }
        self.release["authority"]["policy_digest"] = policy.clone().into();
        self.release["authority"]["enrollment_digest"] = enrollment.into();
        let release = digest(&self.release);
        self.composition["policy_digest"] = policy.into();
        self.composition["native_release_digest"] = release.clone().into();
        let composition = digest(&self.composition);
        self.egrant["phase_subjects"]["native_release_digest"] = release.clone().into();
        self.egrant["phase_subjects"]["parent_release_digest"] = composition.clone().into();
        self.request["native_release_digest"] = release.into();
        self.request["parent_release_digest"] = composition.into();
        self.request["execution_grant_digest"] = digest(&self.egrant).into();
    }

    /// Pins `workload`'s pack digest to `pack` (`sha256:<hex>`) wherever the campaign names it
    /// (the composition, the execution grant's membership, the activation request), then
    /// re-seals. A run under a reservation of the workload executes a manifest of exactly the
    /// bytes whose digest this is.
    pub fn set_pack(&mut self, workload: &str, pack: &str) {
        let mut found = 0;
        for list in [
            &mut self.composition["workloads"],
            &mut self.egrant["phase_subjects"]["membership"],
            &mut self.request["workloads"],
        ] {
            for w in list.as_array_mut().expect("a list of workloads") {
                if w["workload_id"] == workload {
                    w["pack_digest"] = pack.into();
                    found += 1;
                }
            }
        }
        assert_eq!(
            found, 3,
            "{workload} is in the composition, grant and request"
        );
        self.seal();
    }

    /// The policy's digest (the external pin).
    pub fn policy_digest(&self) -> String {
        digest(&self.policy)
    }
}

impl Default for Docs {
    fn default() -> Self {
        Self::new()
    }
}

/// The composition's scope recomputed from its workloads' effects: the enrolled participants
/// they touch and every (participant, relation) subject, as the strict contract requires.
pub fn scope_of_effects(policy: &Value, composition: &Value) -> Value {
    let table = policy["enrollment"]["participants"]
        .as_array()
        .expect("participants")
        .clone();
    let mut subjects = std::collections::BTreeSet::new();
    for w in composition["workloads"].as_array().expect("workloads") {
        for e in w["effects"].as_array().expect("effects") {
            subjects.insert((
                e["participant_id"].as_str().unwrap_or_default().to_owned(),
                e["relation"].as_str().unwrap_or_default().to_owned(),
            ));
        }
    }
    let ids: std::collections::BTreeSet<&String> = subjects.iter().map(|(p, _)| p).collect();
    let participants: Vec<Value> = ids
        .iter()
        .map(|id| {
            table
                .iter()
                .find(|p| p["participant_id"] == id.as_str())
                .cloned()
                .unwrap_or_else(|| panic!("participant {id}"))
        })
        .collect();
    serde_json::json!({
        "participants": participants,
        "subjects": subjects
            .iter()
            .map(|(p, r)| serde_json::json!({"participant_id": p, "relation": r}))
            .collect::<Vec<_>>(),
    })
}
