//! Scope facts: the mapping from verified documents to the scope component's facts, decided by
//! the shipped scope policy core (the same code the component runs). The host gathers, the
//! component decides; bindings the facts cannot carry are refused by the mapping.

mod support;

use dpone_engine_nonproduction::codes::*;
use dpone_engine_nonproduction::facts::{Reservation, ScopeTarget, scope_facts};
use dpone_engine_nonproduction::*;
use dpone_policy_model::scope::{Phase, PoolUsage, ScopeDecision, ScopeFacts};
use dpone_policy_scope::codes as scope_codes;
use serde_json::{Value, json};
use support::*;

const QG: &str = "authority-qualification.json";
const EG: &str = "authority-execution.json";

struct World {
    policy: AuthorityPolicy,
    qgrant: Authority,
    egrant: Authority,
    composition: Composition,
    request: ActivationRequest,
    epoch: u64,
}

impl World {
    fn new() -> Self {
        Self {
            policy: doc("policy.json"),
            qgrant: doc(QG),
            egrant: doc(EG),
            composition: doc("composition.json"),
            request: doc("activation-request.json"),
            epoch: 3,
        }
    }

    fn pool(&self, phase: Phase) -> PoolUsage {
        PoolUsage {
            environment_id: self.egrant.environment_id.as_str().into(),
            campaign_id: self.egrant.campaign_id.as_str().into(),
            phase,
            workloads: 0,
            attempts: 0,
            source_rows: 0,
            source_bytes: 0,
            reserved_workloads: 0,
            reserved_attempts: 0,
            reserved_source_rows: 0,
            reserved_source_bytes: 0,
        }
    }

    fn reservation() -> Reservation {
        Reservation {
            workloads: 1,
            attempts: 1,
            source_rows: 1_000,
            source_bytes: 1 << 20,
        }
    }

    fn qualification(&self, workload: &str) -> Result<ScopeFacts, &'static str> {
        let now = self.qgrant.validity.not_before + 60;
        scope_facts(
            &self.policy,
            &self.qgrant,
            ScopeTarget::Qualification(&self.composition),
            workload,
            Self::reservation(),
            &self.pool(Phase::Qualification),
            now,
            self.epoch,
        )
        .map_err(|e| e.code())
    }

    fn execution_with(
        &self,
        grant: &Authority,
        workload: &str,
    ) -> Result<ScopeFacts, &'static str> {
        let now = self.egrant.validity.not_before + 60;
        scope_facts(
            &self.policy,
            grant,
            ScopeTarget::Execution {
                request: &self.request,
                composition: &self.composition,
            },
            workload,
            Self::reservation(),
            &self.pool(Phase::Execution),
            now,
            self.epoch,
        )
        .map_err(|e| e.code())
    }

    fn execution(&self, workload: &str) -> Result<ScopeFacts, &'static str> {
        self.execution_with(&self.egrant, workload)
    }
}

fn decision(facts: &ScopeFacts) -> &str {
    match dpone_policy_scope::decide(facts) {
        ScopeDecision::Admit(_) => scope_codes::ADMITTED,
        // Map the owned code back to the constant it names.
        ScopeDecision::Deny(reason) => scope_code(&reason.code),
    }
}

fn scope_code(c: &str) -> &'static str {
    for code in [
        scope_codes::PHASE_MISMATCH,
        scope_codes::PARTICIPANT_OUT_OF_SCOPE,
        scope_codes::SUBJECT_OUT_OF_SCOPE,
        scope_codes::ACTIVATION_MISMATCH,
        scope_codes::EXPIRED,
        scope_codes::GRANT_REVOKED,
        scope_codes::BUDGET_ATTEMPTS_EXHAUSTED,
        scope_codes::WORKLOAD_NOT_MEMBER,
    ] {
        if code == c {
            return code;
        }
    }
    panic!("unexpected scope decision {c}")
}

fn reparse<T: Document>(doc: &T, edit: impl FnOnce(&mut Value)) -> T {
    let mut v: Value = serde_json::from_slice(&doc.canonical_bytes()).expect("json");
    edit(&mut v);
    T::parse(&canon(&v)).unwrap_or_else(|e| panic!("edited document: {e}"))
}

#[test]
fn both_phases_are_admitted_for_their_own_workloads() {
    let w = World::new();
    let facts = w.qualification("export-orders-mart").expect("facts");
    assert_eq!(decision(&facts), scope_codes::ADMITTED);
    assert_eq!(facts.request.phase, Phase::Qualification);
    assert_eq!(facts.request.activation_id, None);
    for workload in ["dbt-orders-mart", "export-orders-mart", "pg-customers"] {
        let facts = w.execution(workload).expect("facts");
        assert_eq!(decision(&facts), scope_codes::ADMITTED, "{workload}");
        assert_eq!(
            facts.request.activation_id.as_deref(),
            Some(w.request.activation_id.as_str())
        );
    }
}

#[test]
fn every_effect_is_a_fact_and_limits_are_the_minimum() {
    let w = World::new();
    let facts = w.execution("pg-customers").expect("facts");
    let workload = w.composition.workload("pg-customers").expect("workload");
    assert_eq!(facts.request.subjects.len(), workload.effects.len());
    let ScopeDecision::Admit(admitted) = dpone_policy_scope::decide(&facts) else {
        panic!("admitted");
    };
    // Workload limits (3, 8, 20000, 16 MiB, 900) against the grant's (3, 24, 100000, 512 MiB,
    // 3600) and the policy's built-in ceilings: the minimum of each.
    assert_eq!(admitted.effective_limits.max_source_rows, 20_000);
    assert_eq!(admitted.effective_limits.max_attempt_seconds, 900);
    assert_eq!(admitted.effective_limits.max_attempts, 8);
    assert_eq!(admitted.effective_limits.max_workloads, 3);
    assert_eq!(admitted.effective_limits.max_source_bytes, 16 << 20);
}

#[test]
fn one_effect_outside_the_grant_is_denied_by_the_component() {
    // The qualification grant covers the export cell only: the dbt workload's effects are not in it.
    let w = World::new();
    let facts = w.qualification("dbt-orders-mart").expect("facts");
    assert_eq!(decision(&facts), scope_codes::PARTICIPANT_OUT_OF_SCOPE);

    // Execution: a composition that adds one effect on a relation the grant does not name,
    // with a request and a grant re-issued for that composition (same grant scope).
    let mut w = World::new();
    w.composition = reparse(&w.composition, |v| {
        let extra =
            json!({"participant_id": "synth-pg-read", "relation": "synth_pg.public.payroll"});
        let subjects = v["scope"]["subjects"].as_array_mut().expect("array");
        subjects.push(extra);
        subjects.sort_by_key(|s| (s["participant_id"].to_string(), s["relation"].to_string()));
        let pg = v["workloads"]
            .as_array_mut()
            .expect("array")
            .iter_mut()
            .find(|w| w["workload_id"] == "pg-customers")
            .expect("pg workload");
        let effects = pg["effects"].as_array_mut().expect("array");
        effects.push(json!({"access": "read", "effect": "read", "participant_id": "synth-pg-read", "relation": "synth_pg.public.payroll"}));
        effects.sort_by_key(|e| {
            (
                e["participant_id"].to_string(),
                e["relation"].to_string(),
                e["effect"].to_string(),
            )
        });
    });
    let parent = w.composition.digest();
    w.egrant = reparse(&w.egrant, |v| {
        v["phase_subjects"]["parent_release_digest"] = json!(parent.as_str())
    });
    let grant_digest = w.egrant.digest();
    w.request = reparse(&w.request, |v| {
        v["parent_release_digest"] = json!(parent.as_str());
        v["execution_grant_digest"] = json!(grant_digest.as_str());
    });
    let facts = w.execution("pg-customers").expect("facts");
    assert_eq!(decision(&facts), scope_codes::SUBJECT_OUT_OF_SCOPE);
    // The other workloads, whose effects are all granted, are still admitted.
    assert_eq!(
        decision(&w.execution("dbt-orders-mart").expect("facts")),
        scope_codes::ADMITTED
    );
}

#[test]
fn phase_swaps_are_denied() {
    let w = World::new();
    // An execution grant offered for qualification: the component denies the phase.
    let facts = scope_facts(
        &w.policy,
        &w.egrant,
        ScopeTarget::Qualification(&w.composition),
        "pg-customers",
        World::reservation(),
        &w.pool(Phase::Qualification),
        w.egrant.validity.not_before + 60,
        3,
    )
    .expect("facts");
    assert_eq!(decision(&facts), scope_codes::PHASE_MISMATCH);
    // A qualification grant offered with the activation request: the request binds another grant.
    assert_eq!(
        w.execution_with(&w.qgrant, "export-orders-mart").err(),
        Some(SCOPE_GRANT_DIGEST_MISMATCH)
    );
    // Even a request forged to name the qualification grant is denied by the component.
    let mut forged = World::new();
    let qdigest = forged.qgrant.digest();
    forged.request = reparse(&forged.request, |v| {
        v["execution_grant_digest"] = json!(qdigest.as_str())
    });
    let now = forged.qgrant.validity.not_before + 60;
    let facts = scope_facts(
        &forged.policy,
        &forged.qgrant,
        ScopeTarget::Execution {
            request: &forged.request,
            composition: &forged.composition,
        },
        "export-orders-mart",
        World::reservation(),
        &forged.pool(Phase::Execution),
        now,
        3,
    )
    .expect("facts");
    assert_eq!(decision(&facts), scope_codes::PHASE_MISMATCH);
}

#[test]
fn grants_for_another_activation_deployment_or_membership() {
    let mut w = World::new();
    w.request = reparse(&w.request, |v| {
        v["activation_id"] = json!("0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f")
    });
    assert_eq!(
        decision(&w.execution("pg-customers").expect("facts")),
        scope_codes::ACTIVATION_MISMATCH
    );

    let mut w = World::new();
    w.request = reparse(&w.request, |v| {
        v["deployment_digest"] = json!(fields::Digest::of(b"other deployment").as_str())
    });
    assert_eq!(
        w.execution("pg-customers").err(),
        Some(SCOPE_RELEASE_MISMATCH)
    );

    let mut w = World::new();
    w.request = reparse(&w.request, |v| {
        v["workloads"].as_array_mut().expect("array").pop();
    });
    assert_eq!(
        w.execution("dbt-orders-mart").err(),
        Some(SCOPE_MEMBERSHIP_MISMATCH)
    );

    let mut w = World::new();
    w.request = reparse(&w.request, |v| {
        v["execution_grant_digest"] = json!(fields::Digest::of(b"other grant").as_str())
    });
    assert_eq!(
        w.execution("pg-customers").err(),
        Some(SCOPE_GRANT_DIGEST_MISMATCH)
    );

    let mut w = World::new();
    w.request = reparse(&w.request, |v| {
        v["parent_release_digest"] = json!(fields::Digest::of(b"other parent").as_str())
    });
    assert_eq!(
        w.execution("pg-customers").err(),
        Some(SCOPE_COMPOSITION_MISMATCH)
    );

    let w = World::new();
    assert_eq!(
        w.execution("not-a-member").err(),
        Some(SCOPE_WORKLOAD_NOT_REQUESTED)
    );
    assert_eq!(
        w.qualification("not-a-member").err(),
        Some(SCOPE_WORKLOAD_UNKNOWN)
    );

    let mut w = World::new();
    w.composition = reparse(&w.composition, |v| {
        v["campaign_id"] = json!("0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f")
    });
    assert_eq!(
        w.qualification("export-orders-mart").err(),
        Some(SCOPE_CAMPAIGN_MISMATCH)
    );
}

#[test]
fn time_revocation_and_budget_reach_the_component() {
    let w = World::new();
    let mut facts = w.execution("pg-customers").expect("facts");
    facts.now = i64::try_from(w.egrant.validity.not_after).expect("time");
    assert_eq!(decision(&facts), scope_codes::EXPIRED);
    let mut w = World::new();
    w.epoch = 4;
    assert_eq!(
        decision(&w.execution("pg-customers").expect("facts")),
        scope_codes::GRANT_REVOKED
    );
    let w = World::new();
    let mut facts = w.execution("pg-customers").expect("facts");
    facts.pool.attempts = 8;
    assert_eq!(decision(&facts), scope_codes::BUDGET_ATTEMPTS_EXHAUSTED);
}

#[test]
fn a_clock_beyond_signed_seconds_is_refused() {
    let w = World::new();
    let facts = scope_facts(
        &w.policy,
        &w.egrant,
        ScopeTarget::Execution {
            request: &w.request,
            composition: &w.composition,
        },
        "pg-customers",
        World::reservation(),
        &w.pool(Phase::Execution),
        u64::MAX,
        3,
    );
    assert_eq!(facts.err().map(|e| e.code()), Some(SCOPE_TIME_INVALID));
}
