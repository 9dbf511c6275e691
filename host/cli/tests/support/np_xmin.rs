//! The XMin route of the nonproduction campaign as the reservation-run tests use it: the
//! campaign documents with a truthful PostgreSQL-to-PostgreSQL route for the workload, and the
//! `campaign enroll` command line of its participants.

#![allow(dead_code)]

use super::campaign as c;
use super::np_store::{Run, live_docs};
use serde_json::Value;
use std::path::Path;

/// The workload of the execution grant's membership the XMin manifest runs as.
pub const WORKLOAD: &str = "pg-customers";

/// The enrolled participant the XMin route reads (the fixture's source database).
pub const PG_READ: &str = "synth-pg-read";
/// The enrolled participant the XMin route writes (the fixture's target and state database),
/// enrolled by the policy beside the fixtures' participants.
pub const PG_WRITE: &str = "synth-pg-write";

/// The enrolled participant the ClickHouse route publishes to (the tier's database), one of the
/// fixture policy's participants.
pub const CH_WRITE: &str = "synth-ch-write";

/// A campaign whose workload `WORKLOAD` is the XMin manifest whose digest is `pack`, routed
/// truthfully: PostgreSQL `synth-pg-read` (the source database `src_db`) to PostgreSQL
/// `synth-pg-write` (the target and state database `tgt_db`), with exactly the relations the run reads
/// (`read`, in the source database) and writes as its effects.
pub fn xmin_docs(pack: &str, src_db: &str, tgt_db: &str, read: &str) -> c::Docs {
    let (src, tgt) = (src_db, tgt_db);
    let mut effects = vec![
        (PG_READ, format!("{src}.{read}"), "read", "read"),
        (PG_WRITE, format!("{tgt}.dwh.items"), "write", "write"),
    ];
    for t in [
        "dpone_source_state",
        "dpone_run_state",
        "dpone_commit_receipt",
        "dpone_repair_authority",
        "dpone_repair_authority_consumption",
    ] {
        effects.push((PG_WRITE, format!("{tgt}.dpone_state.{t}"), "write", "state"));
    }
    routed_docs(pack, "postgresql", PG_WRITE, effects, true)
}

/// A campaign whose workload `WORKLOAD` is the ClickHouse manifest whose digest is `pack`,
/// routed truthfully: PostgreSQL `synth-pg-read` (its relation `read` in the source database
/// `src_db`) to ClickHouse `synth-ch-write`, publishing `target` in database `ch_db` with the
/// authority facade `authority` (a table of the same database) as its state.
pub fn clickhouse_docs(
    pack: &str,
    src_db: &str,
    read: &str,
    ch_db: &str,
    target: &str,
    authority: &str,
) -> c::Docs {
    let effects = vec![
        (PG_READ, format!("{src_db}.{read}"), "read", "read"),
        (CH_WRITE, format!("{ch_db}.{target}"), "write", "write"),
        (CH_WRITE, format!("{ch_db}.{authority}"), "write", "state"),
    ];
    routed_docs(pack, "clickhouse", CH_WRITE, effects, false)
}

/// The live campaign with workload `WORKLOAD` routed from `synth-pg-read` to `target` (of
/// `target_engine`) with exactly `effects` (participant, relation, access, effect);
/// `enroll_pg_write`: the policy also enrolls `synth-pg-write`.
fn routed_docs(
    pack: &str,
    target_engine: &str,
    target: &str,
    mut effects: Vec<(&str, String, &str, &str)>,
    enroll_pg_write: bool,
) -> c::Docs {
    use serde_json::json;
    let mut docs = live_docs();
    if enroll_pg_write {
        let participants = docs.policy["enrollment"]["participants"]
            .as_array_mut()
            .expect("participants");
        participants.push(json!({
            "access": "write", "engine": "postgresql", "participant_id": PG_WRITE,
            "trust_tier": "non_production",
        }));
        participants.sort_by(|a, b| {
            a["participant_id"]
                .as_str()
                .cmp(&b["participant_id"].as_str())
        });
    }
    let route = json!({
        "mode": "full_refresh", "source_engine": "postgresql", "source_participant": PG_READ,
        "target_engine": target_engine, "target_participant": target,
        "workload_kind": "ordinary_transfer",
    });
    effects.sort();
    let effects: Vec<Value> = effects
        .into_iter()
        .map(|(p, r, a, e)| json!({"access": a, "effect": e, "participant_id": p, "relation": r}))
        .collect();
    let old = docs.composition["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .find(|w| w["workload_id"] == WORKLOAD)
        .expect("the workload")["route"]
        .clone();
    for w in docs.composition["workloads"]
        .as_array_mut()
        .expect("workloads")
    {
        if w["workload_id"] == WORKLOAD {
            w["route"] = route.clone();
            w["effects"] = Value::Array(effects.clone());
        }
    }
    docs.composition["scope"] = c::scope_of_effects(&docs.policy, &docs.composition);
    let key = |r: &Value| {
        [
            "source_engine",
            "source_participant",
            "target_engine",
            "target_participant",
            "mode",
            "workload_kind",
        ]
        .map(|k| r[k].as_str().unwrap_or_default().to_owned())
    };
    let routes = docs.egrant["routes"].as_array_mut().expect("routes");
    routes.retain(|r| *r != old);
    routes.push(route);
    routes.sort_by_key(key);
    docs.egrant["scope"] = docs.composition["scope"].clone();
    docs.seal();
    docs.set_pack(WORKLOAD, pack);
    docs
}

/// `campaign enroll` of `participant` through the registry connection `connection`.
pub fn enroll_args(
    run: &Run<'_>,
    docs: &c::Docs,
    participant: &str,
    registry: &Path,
    connection: &str,
) -> Vec<String> {
    vec![
        "enroll".to_owned(),
        "--policy".to_owned(),
        run.file("policy.json", &c::canon(&docs.policy)),
        "--policy-digest".to_owned(),
        docs.policy_digest(),
        "--participant".to_owned(),
        participant.to_owned(),
        "--connections".to_owned(),
        registry.display().to_string(),
        "--connection".to_owned(),
        connection.to_owned(),
    ]
}
