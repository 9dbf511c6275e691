//! Tier: unit. Codecs (V1 and external round trips, strict decoding), identities and redaction.

mod common;

use common::{World, profile};
use dpone_engine_clickhouse::contracts::{
    self, AuthoritySlot, Digest, EXTERNAL_AUTHORITY_SCHEMA, Receipt, V1_AUTHORITY_SCHEMA,
    V1_RECEIPT_SCHEMA, V1AuthorityRecord, V1Phase, V1Receipt, decode_receipt, decode_slot,
    encode_external, encode_receipt, encode_v1, target_key,
};
use dpone_engine_clickhouse::ports::Versioned;
use dpone_engine_clickhouse::{RunOutcome, codes};

fn completed_world() -> (World, contracts::ExternalAuthorityRecord, String) {
    let p = profile();
    let w = World::new(&p, 2, true);
    let out = w
        .coordinator()
        .run(&p.request())
        .expect("synthetic run completes");
    assert!(matches!(out, RunOutcome::Completed { .. }));
    let key = target_key(&p.cluster, &p.database, &p.target);
    let raw = w.cluster.authority_value(&key).expect("slot").value;
    let AuthoritySlot::External(r) = decode_slot(&raw).expect("decodes") else {
        panic!("external record expected");
    };
    (w, *r, raw)
}

#[test]
fn external_record_and_receipt_round_trip() {
    let (_w, record, raw) = completed_world();
    assert_eq!(record.schema_version, EXTERNAL_AUTHORITY_SCHEMA);
    assert_eq!(encode_external(&record), raw, "encoding is deterministic");
    let receipt = record
        .receipt
        .clone()
        .expect("completed record holds its receipt");
    let text = encode_receipt(&receipt);
    assert_eq!(
        decode_receipt(&text).expect("receipt decodes"),
        Receipt::External(Box::new(receipt))
    );
}

#[test]
fn unknown_fields_are_rejected() {
    let (_w, _record, raw) = completed_world();
    let mut v: serde_json::Value = serde_json::from_str(&raw).expect("json");
    v["surprise"] = serde_json::json!(1);
    let err = decode_slot(&v.to_string()).expect_err("unknown field refused");
    assert_eq!(err.code(), codes::AUTHORITY_CORRUPT);
    let mut v: serde_json::Value = serde_json::from_str(&raw).expect("json");
    v["members"][0]["hostname"] = serde_json::json!("db-1.internal");
    let err = decode_slot(&v.to_string()).expect_err("unknown nested field refused");
    // The error never echoes input values.
    assert!(!err.to_string().contains("db-1.internal"));
}

#[test]
fn record_invariants_are_checked() {
    let (_w, record, _raw) = completed_world();
    let mut r = record.clone();
    r.members.swap(0, 1);
    assert!(decode_slot(&encode_external(&r)).is_err(), "member order");
    let mut r = record.clone();
    r.error_class = Some("connection to 10.0.0.1 refused".into());
    assert!(
        decode_slot(&encode_external(&r)).is_err(),
        "free-text error class"
    );
    let mut r = record.clone();
    r.receipt = None;
    assert!(
        decode_slot(&encode_external(&r)).is_err(),
        "completed without receipt"
    );
    let mut r = record;
    r.members[0].shard_num = 9;
    assert!(
        decode_slot(&encode_external(&r)).is_err(),
        "member id binds shard/replica"
    );
}

#[test]
fn v1_records_and_receipts_coexist() {
    let key = target_key("c", "db", "t");
    let v1 = V1AuthorityRecord {
        schema_version: V1_AUTHORITY_SCHEMA.into(),
        target_key: key,
        operation_id: Digest::of(b"v1 op"),
        phase: V1Phase::Committed,
        keeper_version: 3,
        updated_at: 1,
    };
    let text = encode_v1(&v1);
    assert_eq!(
        decode_slot(&text).expect("v1 decodes"),
        AuthoritySlot::V1(v1)
    );
    let r = V1Receipt {
        schema_version: V1_RECEIPT_SCHEMA.into(),
        target_key: key,
        operation_id: Digest::of(b"v1 op"),
        generation_id: Digest::of(b"g"),
        committed_at: 2,
    };
    let text = serde_json::to_string(&r).expect("encode");
    assert_eq!(decode_receipt(&text).expect("v1 receipt"), Receipt::V1(r));
    let err = decode_slot(r#"{"schema_version":"dpone.other.v9"}"#).expect_err("unknown");
    assert_eq!(
        err.code(),
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_VERSION_UNKNOWN"
    );
    assert!(decode_slot("not json").is_err());
    assert!(decode_slot(&"x".repeat(5 * 1024 * 1024)).is_err());
}

#[test]
fn unresolved_v1_blocks_external_and_completed_v1_migrates_by_cas() {
    // Tier: engine on in-process ports.
    let p = profile();
    let key = target_key(&p.cluster, &p.database, &p.target);
    for (phase, blocked) in [(V1Phase::Staged, true), (V1Phase::Completed, false)] {
        let w = World::new(&p, 2, false);
        let v1 = V1AuthorityRecord {
            schema_version: V1_AUTHORITY_SCHEMA.into(),
            target_key: key,
            operation_id: Digest::of(b"v1 op"),
            phase,
            keeper_version: 4,
            updated_at: 1,
        };
        w.cluster.put_authority(
            &key,
            Versioned {
                version: 4,
                value: encode_v1(&v1),
            },
        );
        let out = w.coordinator().run(&p.request());
        if blocked {
            let e = out.expect_err("unresolved V1 blocks");
            assert_eq!(e.code(), codes::ADMISSION_BLOCKED);
            let dpone_engine_clickhouse::EngineError::AdmissionBlocked(reasons) = e else {
                unreachable!()
            };
            assert!(
                reasons
                    .iter()
                    .any(|r| r.code == codes::V1_AUTHORITY_UNRESOLVED)
            );
            assert_eq!(w.cluster.metrics().loads, 0, "nothing staged");
        } else {
            assert!(matches!(out, Ok(RunOutcome::Completed { .. })));
            let raw = w.cluster.authority_value(&key).expect("slot");
            let AuthoritySlot::External(r) = decode_slot(&raw.value).expect("decodes") else {
                panic!("migrated to external");
            };
            let prev = r.previous.expect("migration records the V1 record");
            assert_eq!(prev.schema_version, V1_AUTHORITY_SCHEMA);
            assert_eq!(prev.keeper_version, 4);
        }
    }
}

#[test]
fn different_unresolved_operation_is_fenced_and_completed_one_is_succeeded() {
    // Tier: engine on in-process ports.
    let p = profile();
    let w = World::new(&p, 2, true);
    w.cluster
        .arm(dpone_engine_clickhouse::synthetic::Fault::CrashAfterPhase(
            contracts::Phase::Staging,
        ));
    let req = p.request();
    assert!(w.coordinator().run(&req).is_err());
    let mut other = p.request();
    other.scheduler_invocation = "another-invocation".into();
    let e = w.coordinator().run(&other).expect_err("fenced");
    assert_eq!(e.code(), codes::OPERATION_FENCED);
    // The first operation completes; then the other one may take the slot.
    assert!(matches!(
        w.coordinator().run(&req),
        Ok(RunOutcome::Completed { .. })
    ));
    assert!(
        matches!(w.coordinator().run(&req), Ok(RunOutcome::Completed { .. })),
        "a completed operation is idempotent"
    );
    assert!(matches!(
        w.coordinator().run(&other),
        Ok(RunOutcome::Completed { .. })
    ));
}

#[test]
fn evidence_carries_no_endpoints_or_values() {
    // Tier: unit (redaction).
    let (w, record, raw) = completed_world();
    for forbidden in [
        "member-1-",
        "row-1",
        "target_table",
        "analytics_cluster",
        "/tmp",
        "db.",
    ] {
        assert!(
            !raw.contains(forbidden),
            "authority record leaks {forbidden}"
        );
    }
    let p = profile();
    let report = w.coordinator().status(&p.request()).expect("status");
    let text = serde_json::to_string(&report).expect("status encodes");
    for forbidden in ["member-1-", "row-1", "target_table", "analytics_cluster"] {
        assert!(!text.contains(forbidden), "status leaks {forbidden}");
    }
    assert_eq!(record.members.len(), 2);
}

#[test]
fn a_proof_is_written_by_the_same_name_in_records_and_manifests() {
    // The name a manifest writes (and the plan digest hashes) is the one records and receipts
    // encode: one spelling per proof.
    for proof in contracts::ContentProof::ALL {
        assert_eq!(
            serde_json::to_value(proof).expect("encodes"),
            serde_json::Value::String(proof.as_str().to_owned())
        );
    }
}
