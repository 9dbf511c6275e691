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

/// A campaign whose workload `WORKLOAD` is the XMin manifest whose digest is `pack`, routed
/// truthfully: PostgreSQL `synth-pg-read` (the source database `src_db`) to PostgreSQL
/// `synth-pg-write` (the target and state database `tgt_db`), with exactly the relations the run reads
/// (`read`, in the source database) and writes as its effects.
pub fn xmin_docs(pack: &str, src_db: &str, tgt_db: &str, read: &str) -> c::Docs {
    use serde_json::json;
    let mut docs = live_docs();
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
    let route = json!({
        "mode": "full_refresh", "source_engine": "postgresql", "source_participant": PG_READ,
        "target_engine": "postgresql", "target_participant": PG_WRITE,
        "workload_kind": "ordinary_transfer",
    });
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
