//! The frozen example of every document: it parses, re-encodes to its exact bytes, has the
//! digest `fixtures/nonproduction/DIGESTS` lists, is refused by every other new reader, and the
//! chain of digests between the documents holds.

mod support;

use dpone_engine_nonproduction::authority::PhaseSubjects;
use dpone_engine_nonproduction::facts::{bind_release_set, bind_route_qualification};
use dpone_engine_nonproduction::*;
use support::*;

#[test]
fn every_fixture_is_canonical_and_has_its_frozen_digest() {
    let digests = String::from_utf8(bytes("DIGESTS")).expect("ASCII");
    let listed: Vec<(&str, &str)> = digests
        .lines()
        .map(|l| l.split_once("  ").expect("digest  name"))
        .collect();
    assert_eq!(listed.len(), FIXTURES.len());
    for (digest, name) in listed {
        assert!(FIXTURES.contains(&name), "{name}");
        let raw = bytes(name);
        assert_eq!(parse_as(name, &raw).as_deref(), Ok(digest), "{name}");
        // The digest is sha256 over the exact file bytes.
        assert_eq!(fields::Digest::of(&raw).as_str(), digest, "{name}");
    }
}

#[test]
fn each_reader_reads_only_its_own_schema() {
    for name in FIXTURES {
        let raw = bytes(name);
        let accepted: Vec<&str> = all_readers(&raw)
            .into_iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(n, _)| n)
            .collect();
        let own = if name.starts_with("authority-") {
            "authority-execution.json"
        } else {
            name
        };
        assert_eq!(accepted, vec![own], "{name}");
        for (reader, result) in all_readers(&raw) {
            if reader != own {
                assert_eq!(result, Err(codes::SCHEMA_UNSUPPORTED), "{name} by {reader}");
            }
        }
    }
}

#[test]
fn the_documents_form_one_chain() {
    let policy: AuthorityPolicy = doc("policy.json");
    let qgrant: Authority = doc("authority-qualification.json");
    let egrant: Authority = doc("authority-execution.json");
    let rq: RouteQualification = doc("route-qualification.json");
    let wire: ProducerWire = doc("producer-wire.json");
    let release: DbtReleaseSet = doc("release-set.json");
    let composition: Composition = doc("composition.json");
    let request: ActivationRequest = doc("activation-request.json");

    for grant in [&qgrant, &egrant] {
        assert_eq!(grant.policy_digest, policy.digest());
        assert_eq!(grant.enrollment_digest, policy.enrollment_digest());
        assert_eq!(grant.environment_id, policy.enrollment.environment_id);
    }
    assert!(matches!(
        qgrant.phase_subjects,
        PhaseSubjects::Qualification(_)
    ));
    assert!(bind_route_qualification(&qgrant, &rq).is_ok());
    assert_eq!(release.producer_digest, wire.digest());
    assert!(
        release
            .authority
            .qualifications
            .iter()
            .any(|q| q.qualification_digest == rq.digest())
    );
    assert_eq!(composition.native_release_digest, release.digest());
    assert!(bind_release_set(&egrant, &release).is_ok());
    let PhaseSubjects::Execution(e) = &egrant.phase_subjects else {
        panic!("execution grant");
    };
    assert_eq!(e.parent_release_digest, composition.digest());
    assert_eq!(e.activation_id, request.activation_id);
    assert_eq!(request.execution_grant_digest, egrant.digest());
    assert_eq!(e.membership, request.workloads);
    // A grant of one phase never binds the other phase's documents.
    assert_eq!(
        bind_release_set(&qgrant, &release).err().map(|e| e.code()),
        Some(codes::SCOPE_INTENT_MISMATCH)
    );
    assert_eq!(
        bind_route_qualification(&egrant, &rq)
            .err()
            .map(|e| e.code()),
        Some(codes::SCOPE_RUN_MISMATCH)
    );
}

#[test]
fn the_signer_identity_is_the_composite_github_identity() {
    let policy: AuthorityPolicy = doc("policy.json");
    assert_eq!(
        policy.signer.identity(),
        "https://github.com/acme/dpone-signing/.github/workflows/np-authority.yml@a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"
    );
}

#[test]
fn every_key_of_every_example_is_a_schema_key() {
    fn walk(v: &serde_json::Value, missing: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, x) in map {
                    if !json::SCHEMA_KEYS.contains(&k.as_str()) {
                        missing.push(k.clone());
                    }
                    walk(x, missing);
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|x| walk(x, missing)),
            _ => {}
        }
    }
    let mut missing = Vec::new();
    for name in FIXTURES {
        walk(&value(name), &mut missing);
    }
    assert!(missing.is_empty(), "not in json::SCHEMA_KEYS: {missing:?}");
}

#[test]
fn any_document_dispatches_on_the_exact_schema() {
    for name in FIXTURES {
        let raw = bytes(name);
        let any = AnyDocument::parse(&raw).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(any.canonical_bytes(), raw, "{name}");
        assert_eq!(Ok(any.digest().as_str().to_owned()), parse_as(name, &raw));
        assert_eq!(value(name)["schema"], any.schema(), "{name}");
    }
    let other = edited("policy.json", |v| {
        v["schema"] = "dpone.policy-bundle.v2".into()
    });
    assert_eq!(
        AnyDocument::parse(&other).err().map(|e| e.code()),
        Some(codes::SCHEMA_UNSUPPORTED)
    );
    assert_eq!(
        AnyDocument::parse(b"[]").err().map(|e| e.code()),
        Some(codes::SCHEMA_MISSING)
    );
    let noncanonical = serde_json::to_vec_pretty(&value("composition.json")).expect("json");
    assert_eq!(
        AnyDocument::parse(&noncanonical).err().map(|e| e.code()),
        Some(codes::NON_CANONICAL)
    );
}
