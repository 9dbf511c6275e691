//! Tier: compatibility. Old readers keep refusing the new nonproduction family, and the new
//! readers refuse every existing production/native-v2 document (spec 004, "Old readers continue
//! rejecting the new family"). The existing documents are frozen copies under
//! `fixtures/nonproduction/compat/`; the existing readers still accept them, so each refusal
//! below is a refusal of the family, not of a broken file.

use dpone_engine_nonproduction as np;
use dpone_integration_tests::workspace;
use np::Document;

const NEW: &[&str] = &[
    "policy.json",
    "authority-qualification.json",
    "authority-execution.json",
    "route-qualification.json",
    "producer-wire.json",
    "release-set.json",
    "composition.json",
    "activation-request.json",
];

const OLD: &[&str] = &[
    "bundle-manifest.json",
    "trust-policy.json",
    "xmin-authority.json",
    "clickhouse-authority.json",
    "clickhouse-receipt.json",
];

fn read(rel: &str) -> Vec<u8> {
    let path = workspace().join(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Every existing reader: `Ok(())` when it accepts the bytes.
fn old_readers(bytes: &[u8]) -> Vec<(&'static str, bool)> {
    let text = String::from_utf8_lossy(bytes);
    vec![
        (
            "trust bundle manifest",
            dpone_trust::manifest::Manifest::parse(bytes).is_ok(),
        ),
        (
            "trust policy",
            dpone_trust::policy::TrustPolicy::parse(bytes).is_ok(),
        ),
        (
            "clickhouse authority slot",
            dpone_engine_clickhouse::contracts::decode_slot(&text).is_ok(),
        ),
        (
            "clickhouse receipt",
            dpone_engine_clickhouse::contracts::decode_receipt(&text).is_ok(),
        ),
        (
            "xmin authority document",
            serde_json::from_slice::<dpone_engine_xmin::state::AuthorityDocument>(bytes)
                .is_ok_and(|d| d.check().is_ok()),
        ),
    ]
}

/// Every new reader: the refusal code, or `None` when it accepts the bytes.
fn new_readers(bytes: &[u8]) -> Vec<(&'static str, Option<&'static str>)> {
    fn code<T: Document>(bytes: &[u8]) -> Option<&'static str> {
        T::parse(bytes).err().map(|e| e.code())
    }
    vec![
        ("policy", code::<np::AuthorityPolicy>(bytes)),
        ("authority", code::<np::Authority>(bytes)),
        ("route qualification", code::<np::RouteQualification>(bytes)),
        ("producer wire", code::<np::ProducerWire>(bytes)),
        ("release set", code::<np::DbtReleaseSet>(bytes)),
        ("composition", code::<np::Composition>(bytes)),
        ("activation request", code::<np::ActivationRequest>(bytes)),
    ]
}

#[test]
fn old_readers_refuse_every_new_document() {
    for name in NEW {
        let bytes = read(&format!("fixtures/nonproduction/{name}"));
        let accepted_by_new = new_readers(&bytes)
            .into_iter()
            .filter(|(_, c)| c.is_none())
            .count();
        assert_eq!(accepted_by_new, 1, "{name} is a valid new document");
        for (reader, accepted) in old_readers(&bytes) {
            assert!(!accepted, "{reader} accepts the new document {name}");
        }
    }
}

#[test]
fn new_readers_refuse_every_existing_document() {
    for name in OLD {
        let bytes = read(&format!("fixtures/nonproduction/compat/{name}"));
        let accepted_by_old = old_readers(&bytes).into_iter().filter(|(_, a)| *a).count();
        assert_eq!(accepted_by_old, 1, "{name} is a valid existing document");
        for (reader, refusal) in new_readers(&bytes) {
            let code = refusal.unwrap_or_else(|| panic!("{reader} accepts {name}"));
            assert!(code.starts_with("DPONE_NP_"), "{reader} on {name}: {code}");
        }
    }
}

#[test]
fn existing_fixtures_are_unchanged() {
    // The other frozen copies have no committed original that stays byte-stable (the fuzz seeds
    // are regenerated with fresh keys, the ClickHouse records come from a test run): the copies
    // themselves are the reference, and `new_readers_refuse_every_existing_document` checks
    // that the existing readers still accept them.
    assert_eq!(
        read("fixtures/nonproduction/compat/xmin-authority.json"),
        read("fixtures/xmin/authority.json"),
        "fixtures/xmin/authority.json changed"
    );
}
