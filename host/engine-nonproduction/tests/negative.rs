//! The negative corpus: each hostile variant of a valid example is refused with its own code,
//! and the unmodified examples are accepted (`fixtures.rs`).

mod support;

use dpone_engine_nonproduction::codes::*;
use serde_json::{Value, json};
use support::*;

const QG: &str = "authority-qualification.json";
const EG: &str = "authority-execution.json";

fn set(path: &[&str], to: Value) -> impl FnOnce(&mut Value) {
    let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
    move |v: &mut Value| {
        let mut at = v;
        for key in &path {
            at = match key.parse::<usize>() {
                Ok(i) => &mut at[i],
                Err(_) => &mut at[key.as_str()],
            };
        }
        *at = to;
    }
}

fn remove(path: &[&str], key: &'static str) -> impl FnOnce(&mut Value) {
    let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
    move |v: &mut Value| {
        let mut at = v;
        for k in &path {
            at = match k.parse::<usize>() {
                Ok(i) => &mut at[i],
                Err(_) => &mut at[k.as_str()],
            };
        }
        at.as_object_mut().expect("object").remove(key);
    }
}

fn rename(path: &[&str], from: &'static str, to: &'static str) -> impl FnOnce(&mut Value) {
    let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
    move |v: &mut Value| {
        let mut at = v;
        for k in &path {
            at = match k.parse::<usize>() {
                Ok(i) => &mut at[i],
                Err(_) => &mut at[k.as_str()],
            };
        }
        let obj = at.as_object_mut().expect("object");
        let moved = obj.remove(from).expect("field");
        obj.insert(to.to_owned(), moved);
    }
}

fn case(name: &str, fixture: &str, bytes: Vec<u8>, code: &str) {
    assert_eq!(
        parse_as(fixture, &bytes),
        Err(code),
        "{name}: {fixture} must be refused with {code}"
    );
}

fn edit(name: &str, fixture: &str, f: impl FnOnce(&mut Value), code: &str) {
    let bytes = edited(fixture, f);
    assert_ne!(
        bytes,
        support::bytes(fixture),
        "{name}: the edit changes nothing"
    );
    case(name, fixture, bytes, code);
}

#[test]
fn strict_json_layer() {
    for fixture in FIXTURES {
        let raw = bytes(fixture);
        let text = String::from_utf8(raw.clone()).expect("ASCII");
        // Duplicated key: the first key of the object repeated with the same value.
        let dup = text.replacen("{\"", "{\"schema\":\"x\",\"", 1);
        case("duplicate key", fixture, dup.into_bytes(), DUPLICATE_KEY);
        // Non-canonical: trailing newline, whitespace, reordered keys, escaped ASCII.
        let mut nl = raw.clone();
        nl.push(b'\n');
        case("trailing newline", fixture, nl, NON_CANONICAL);
        let pretty = serde_json::to_vec_pretty(&value(fixture)).expect("json");
        case("pretty", fixture, pretty, NON_CANONICAL);
        let escaped = text.replacen("\"schema\":\"dpone", "\"schema\":\"\\u0064pone", 1);
        case(
            "escaped ASCII",
            fixture,
            escaped.into_bytes(),
            NON_CANONICAL,
        );
        // Extra and missing fields at the top level; a retagged schema.
        edit(
            "extra field",
            fixture,
            set(&["zz_extra"], json!(1)),
            UNKNOWN_FIELD,
        );
        edit(
            "renamed field",
            fixture,
            rename(&[], "purpose", "purpose_v2"),
            UNKNOWN_FIELD,
        );
        edit(
            "missing field",
            fixture,
            remove(&[], "trust_tier"),
            MISSING_FIELD,
        );
        edit(
            "retagged schema",
            fixture,
            set(&["schema"], json!("dpone.policy-bundle.v2")),
            SCHEMA_UNSUPPORTED,
        );
        edit("no schema", fixture, remove(&[], "schema"), SCHEMA_MISSING);
        // Wrong purpose and tier (production escalation).
        edit(
            "purpose",
            fixture,
            set(&["purpose"], json!("production_release")),
            PURPOSE_INVALID,
        );
        edit(
            "tier",
            fixture,
            set(&["trust_tier"], json!("production")),
            TRUST_TIER_INVALID,
        );
        // Numbers.
        let neg = text.replacen("\"trust_tier\":", "\"a\":-1,\"trust_tier\":", 1);
        case("negative number", fixture, neg.into_bytes(), NUMBER_INVALID);
        let float = text.replacen("\"trust_tier\":", "\"a\":1.5,\"trust_tier\":", 1);
        case("float", fixture, float.into_bytes(), NUMBER_INVALID);
        // Malformed, too deep, too large.
        case(
            "truncated",
            fixture,
            raw[..raw.len() - 1].to_vec(),
            MALFORMED,
        );
        let deep = text.replacen(
            "\"trust_tier\":",
            "\"a\":[[[[[[[[]]]]]]]],\"trust_tier\":",
            1,
        );
        case("too deep", fixture, deep.into_bytes(), TOO_DEEP);
        let mut large = raw.clone();
        large.resize(256 * 1024 + 1, b' ');
        case("too large", fixture, large, TOO_LARGE);
        // Not an object.
        case("array", fixture, b"[]".to_vec(), SCHEMA_MISSING);
    }
}

#[test]
fn scope_fields_are_never_optional_or_retagged() {
    edit("scope missing", EG, remove(&[], "scope"), MISSING_FIELD);
    edit(
        "subjects missing",
        EG,
        remove(&["scope"], "subjects"),
        MISSING_FIELD,
    );
    edit(
        "subjects retagged",
        EG,
        rename(&["scope"], "subjects", "relation_scopes"),
        UNKNOWN_FIELD,
    );
    edit(
        "participants retagged",
        "composition.json",
        rename(&["scope"], "participants", "readers"),
        UNKNOWN_FIELD,
    );
    edit(
        "subjects empty",
        EG,
        set(&["scope", "subjects"], json!([])),
        LIST_EMPTY,
    );
    edit("scope null", EG, set(&["scope"], Value::Null), TYPE_INVALID);
    edit(
        "extra subject field",
        EG,
        set(&["scope", "subjects", "0", "access"], json!("read")),
        UNKNOWN_FIELD,
    );
    edit(
        "participant tier",
        EG,
        set(
            &["scope", "participants", "0", "trust_tier"],
            json!("production"),
        ),
        TRUST_TIER_INVALID,
    );
    edit(
        "release scope missing",
        "release-set.json",
        remove(&["authority"], "scope"),
        MISSING_FIELD,
    );
    edit(
        "release qualifications missing",
        "release-set.json",
        remove(&["authority"], "qualifications"),
        MISSING_FIELD,
    );
}

#[test]
fn phase_swaps_are_refused() {
    let exec_subjects = value(EG)["phase_subjects"].clone();
    let qual_subjects = value(QG)["phase_subjects"].clone();
    edit(
        "qualification with execution subjects",
        QG,
        set(&["phase_subjects"], exec_subjects.clone()),
        PHASE_SUBJECTS_FOREIGN,
    );
    edit(
        "execution with qualification subjects",
        EG,
        set(&["phase_subjects"], qual_subjects.clone()),
        PHASE_SUBJECTS_FOREIGN,
    );
    edit(
        "qualification relabelled execution",
        QG,
        set(&["phase"], json!("execution")),
        PHASE_SUBJECTS_FOREIGN,
    );
    edit(
        "execution relabelled qualification",
        EG,
        set(&["phase"], json!("qualification")),
        PHASE_SUBJECTS_FOREIGN,
    );
    edit(
        "one foreign subject",
        QG,
        set(
            &["phase_subjects", "activation_id"],
            exec_subjects["activation_id"].clone(),
        ),
        PHASE_SUBJECTS_FOREIGN,
    );
    edit(
        "unknown phase",
        QG,
        set(&["phase"], json!("production")),
        PHASE_INVALID,
    );
    edit(
        "qualification run missing",
        QG,
        remove(&["phase_subjects"], "run_id"),
        MISSING_FIELD,
    );
    edit(
        "execution membership missing",
        EG,
        remove(&["phase_subjects"], "membership"),
        MISSING_FIELD,
    );
    edit(
        "qualification with two routes",
        QG,
        |v| {
            let exec_routes = value(EG)["routes"].clone();
            v["routes"] = exec_routes;
        },
        LIST_TOO_LONG,
    );
}

#[test]
fn ceilings_and_windows() {
    for (key, above) in [
        ("max_workloads", 65u64),
        ("max_attempts", 129),
        ("max_source_rows", 100_001),
        ("max_source_bytes", (1 << 30) + 1),
        ("max_attempt_seconds", 3_601),
    ] {
        edit(
            key,
            EG,
            set(&["limits", key], json!(above)),
            LIMIT_ABOVE_CEILING,
        );
        edit(
            key,
            "policy.json",
            set(&["ceilings", key], json!(above)),
            LIMIT_ABOVE_CEILING,
        );
        edit(
            key,
            "composition.json",
            set(&["workloads", "0", "limits", key], json!(above)),
            LIMIT_ABOVE_CEILING,
        );
        edit(key, EG, set(&["limits", key], json!(0)), LIMIT_ZERO);
    }
    edit(
        "u32 overflow",
        EG,
        set(&["limits", "max_attempts"], json!(1u64 << 40)),
        LIMIT_ABOVE_CEILING,
    );
    edit(
        "policy validity ceiling",
        "policy.json",
        set(&["max_validity_seconds"], json!(86_401)),
        LIMIT_ABOVE_CEILING,
    );
    edit(
        "membership above grant",
        EG,
        set(&["limits", "max_workloads"], json!(2)),
        MEMBERSHIP_ABOVE_LIMIT,
    );
    let nb = value(EG)["validity"]["not_before"].as_u64().expect("time");
    edit(
        "validity 24h+1",
        EG,
        set(&["validity", "not_after"], json!(nb + 86_401)),
        VALIDITY_TOO_LONG,
    );
    edit(
        "validity inverted",
        EG,
        set(&["validity", "not_after"], json!(nb)),
        VALIDITY_WINDOW_INVALID,
    );
    for (key, above) in [
        ("source_rows", 100_001u64),
        ("source_bytes", (1 << 30) + 1),
        ("attempts", 129),
        ("max_attempt_seconds", 3_601),
    ] {
        edit(
            key,
            "route-qualification.json",
            set(&["observations", key], json!(above)),
            OBSERVATION_ABOVE_CEILING,
        );
    }
    edit(
        "outcome",
        "route-qualification.json",
        set(&["outcome"], json!("pass")),
        OUTCOME_INVALID,
    );
    edit(
        "65 workloads",
        "activation-request.json",
        |v| {
            let one = v["workloads"][0].clone();
            v["workloads"] = Value::Array(
                (0..65)
                    .map(|i| {
                        let mut m = one.clone();
                        m["workload_id"] = json!(format!("w{i:03}"));
                        m
                    })
                    .collect(),
            );
        },
        LIST_TOO_LONG,
    );
}

#[test]
fn typed_fields() {
    edit(
        "uuid",
        EG,
        set(&["grant_id"], json!("not-a-uuid")),
        UUID_INVALID,
    );
    edit(
        "uuid upper",
        EG,
        set(
            &["campaign_id"],
            json!("5C2E9D41-7A3B-4F86-B0C1-2D8E4F6A9B73"),
        ),
        UUID_INVALID,
    );
    edit(
        "nil uuid",
        "activation-request.json",
        set(
            &["activation_id"],
            json!("00000000-0000-0000-0000-000000000000"),
        ),
        UUID_INVALID,
    );
    edit(
        "commit short",
        EG,
        set(&["source", "commit"], json!("4f9d2c7")),
        COMMIT_INVALID,
    );
    edit(
        "commit upper",
        QG,
        set(
            &["source", "commit"],
            json!("4F9D2C7E1B3A5D8F0E6C9B2A4D7F1E3C5B8A0D2F"),
        ),
        COMMIT_INVALID,
    );
    edit(
        "digest bare",
        EG,
        set(
            &["policy_digest"],
            json!("f52f2b04eda07e19a2bd01255229c4d47f75c52c587cdb5344d02cf56147077c"),
        ),
        DIGEST_INVALID,
    );
    edit(
        "digest short",
        "activation-request.json",
        set(&["execution_grant_digest"], json!("sha256:abc")),
        DIGEST_INVALID,
    );
    edit(
        "repository",
        EG,
        set(&["source", "repository"], json!("Acme/Campaigns")),
        REPOSITORY_INVALID,
    );
    edit(
        "image unpinned",
        EG,
        set(&["toolchain", "image"], json!("ghcr.io/acme/dbt:latest")),
        IMAGE_INVALID,
    );
    edit(
        "identifier",
        EG,
        set(&["fixture", "id"], json!("Orders Fixture")),
        TEXT_INVALID,
    );
    edit(
        "identifier case",
        EG,
        set(&["generator", "id"], json!("Gen")),
        IDENTIFIER_INVALID,
    );
    edit(
        "relation",
        "composition.json",
        set(&["scope", "subjects", "0", "relation"], json!("orders")),
        RELATION_INVALID,
    );
    edit(
        "engine",
        EG,
        set(&["routes", "0", "source_engine"], json!("oracle")),
        ENGINE_INVALID,
    );
    edit(
        "mode",
        EG,
        set(&["routes", "0", "mode"], json!("cdc")),
        MODE_INVALID,
    );
    edit(
        "kind",
        EG,
        set(&["routes", "0", "workload_kind"], json!("anything")),
        WORKLOAD_KIND_INVALID,
    );
    edit(
        "access",
        EG,
        set(&["scope", "participants", "0", "access"], json!("admin")),
        ACCESS_INVALID,
    );
    edit(
        "effect",
        "composition.json",
        set(&["workloads", "0", "effects", "0", "effect"], json!("drop")),
        EFFECT_INVALID,
    );
    edit(
        "origin",
        "composition.json",
        set(&["workloads", "0", "origin"], json!("production")),
        ORIGIN_INVALID,
    );
    edit(
        "string type",
        EG,
        set(&["revocation_epoch"], json!("3")),
        TYPE_INVALID,
    );
    edit(
        "number type",
        EG,
        set(&["grant_id"], json!(3)),
        TYPE_INVALID,
    );
}

#[test]
fn signer_pins_of_the_policy() {
    let p = "policy.json";
    edit(
        "issuer",
        p,
        set(&["signer", "issuer"], json!("https://accounts.google.com")),
        ISSUER_INVALID,
    );
    edit(
        "runner",
        p,
        set(&["signer", "runner_environment"], json!("self-hosted")),
        RUNNER_INVALID,
    );
    edit(
        "workflow",
        p,
        set(
            &["signer", "signer_workflow"],
            json!("acme/dpone-signing/np.yml"),
        ),
        SIGNER_WORKFLOW_INVALID,
    );
    edit(
        "signer digest",
        p,
        set(&["signer", "signer_digest"], json!("")),
        TEXT_INVALID,
    );
    edit(
        "signer digest short",
        p,
        set(&["signer", "signer_digest"], json!("a1b2c3d")),
        COMMIT_INVALID,
    );
    edit(
        "any repository",
        p,
        set(&["signer", "repository"], json!("*")),
        REPOSITORY_INVALID,
    );
    edit(
        "predicate",
        p,
        set(&["signer", "predicate_type"], json!("http://x/y")),
        PREDICATE_TYPE_INVALID,
    );
    edit(
        "trust production",
        p,
        set(&["signer", "trust_policy", "trust"], json!("production")),
        TRUST_POLICY_PIN_INVALID,
    );
    edit(
        "attestations optional",
        p,
        set(
            &["signer", "trust_policy", "attestations"],
            json!("optional"),
        ),
        TRUST_POLICY_PIN_INVALID,
    );
    edit(
        "trust policy v1",
        p,
        set(
            &["signer", "trust_policy", "schema"],
            json!("dpone.trust-policy.v1"),
        ),
        TRUST_POLICY_PIN_INVALID,
    );
    edit(
        "cosign key",
        p,
        set(
            &["signer", "public_key"],
            json!("-----BEGIN PUBLIC KEY-----"),
        ),
        UNKNOWN_FIELD,
    );
}

#[test]
fn sets_participants_routes_and_effects() {
    let c = "composition.json";
    edit(
        "unordered",
        c,
        |v| {
            let s = v["scope"]["subjects"].as_array_mut().expect("array");
            s.swap(0, 1);
        },
        SET_UNORDERED,
    );
    edit(
        "duplicate",
        c,
        |v| {
            let s = v["scope"]["subjects"].as_array_mut().expect("array");
            let first = s[0].clone();
            s.insert(0, first);
        },
        DUPLICATE_ENTRY,
    );
    edit(
        "one id two accesses",
        EG,
        |v| {
            let ps = v["scope"]["participants"].as_array_mut().expect("array");
            let mut again = ps[1].clone();
            again["access"] = json!("write");
            ps.insert(2, again);
        },
        PARTICIPANT_ACCESS_CONFLICT,
    );
    edit(
        "subject of no participant",
        EG,
        set(
            &["scope", "subjects", "0", "participant_id"],
            json!("synth-a-other"),
        ),
        PARTICIPANT_UNBOUND,
    );
    edit(
        "route source writes",
        EG,
        set(
            &["routes", "0", "source_participant"],
            json!("synth-ch-write"),
        ),
        ROUTE_PARTICIPANT_MISMATCH,
    );
    edit(
        "route engine",
        EG,
        set(&["routes", "0", "source_engine"], json!("clickhouse")),
        ROUTE_PARTICIPANT_MISMATCH,
    );
    edit(
        "route unlisted",
        EG,
        set(&["routes", "0", "target_participant"], json!("prod-ch")),
        PARTICIPANT_UNBOUND,
    );
    // Composition effects: the scope is exactly the effects.
    edit(
        "effect outside scope",
        c,
        set(
            &["workloads", "0", "effects", "0", "relation"],
            json!("synth_mssql.dbo.payroll"),
        ),
        EFFECT_SUBJECT_UNLISTED,
    );
    edit(
        "effect access differs",
        c,
        set(
            &["workloads", "0", "effects", "0", "access"],
            json!("write"),
        ),
        EFFECT_PARTICIPANT_ACCESS,
    );
    edit(
        "effect participant unlisted",
        c,
        set(
            &["workloads", "0", "effects", "0", "participant_id"],
            json!("prod-mssql"),
        ),
        PARTICIPANT_UNBOUND,
    );
    edit(
        "read by a writer",
        c,
        |v| {
            // dbt-orders-mart writes orders_mart through synth-mssql-write: call it a read.
            let effects = v["workloads"][0]["effects"].as_array_mut().expect("array");
            let i = effects
                .iter()
                .position(|e| e["effect"] == "write")
                .expect("write effect");
            effects[i]["effect"] = json!("read");
        },
        EFFECT_ACCESS_INVALID,
    );
    edit(
        "subject unused",
        c,
        |v| {
            let s = v["scope"]["subjects"].as_array_mut().expect("array");
            s.push(
                json!({"participant_id": "synth-pg-read", "relation": "synth_pg.public.zz_unused"}),
            );
        },
        SUBJECT_UNUSED,
    );
    edit(
        "no effects",
        c,
        set(&["workloads", "0", "effects"], json!([])),
        LIST_EMPTY,
    );
    // Release sets: every workload route is qualified; the producer wire is the one wire.
    edit(
        "unqualified route",
        "release-set.json",
        |v| {
            let qs = v["authority"]["qualifications"]
                .as_array_mut()
                .expect("array");
            qs.remove(0);
        },
        ROUTE_UNQUALIFIED,
    );
    edit(
        "producer wire",
        "release-set.json",
        set(
            &["producer", "wire"],
            json!("dpone.dbt-airflow-self-service.v2"),
        ),
        PRODUCER_WIRE_INVALID,
    );
}

/// Values exactly at a ceiling parse.
#[test]
fn the_boundary_cases_are_accepted() {
    let nb = value(EG)["validity"]["not_before"].as_u64().expect("time");
    let bytes = edited(EG, set(&["validity", "not_after"], json!(nb + 86_400)));
    assert!(parse_as(EG, &bytes).is_ok());
    let bytes = edited(EG, set(&["limits", "max_attempts"], json!(128)));
    assert!(parse_as(EG, &bytes).is_ok());
}
