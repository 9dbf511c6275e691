//! `dpone-host campaign verify | inspect` end to end, with grants attested offline by the test
//! signer (`dpone-test-attest-signer`, a dev-dependency only): the happy path of a qualification
//! and an execution grant through the pinned scope component, and the negative matrix of issue
//! 11, each row refused with its own stable code and exit status, and nothing else accepted.

mod support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::campaign::{self as c, Docs, E_NOW, Q_NOW, SIGNED_AT};

const SCOPE_PIN_LOCK: &str = include_str!("../../../policies/components.lock.json");

/// One invocation of `campaign verify`, built from a sealed campaign and a few overrides.
#[derive(Clone)]
struct Scenario {
    execution: bool,
    docs: Docs,
    /// The grant bytes (default: the canonical bytes of the phase's grant).
    grant: Option<Vec<u8>>,
    /// The attestation (default: the test signer over the grant bytes, pinned identity).
    bundle: Option<Vec<u8>>,
    /// Whether `--attestation` is passed.
    attested: bool,
    root: Option<Vec<u8>>,
    pin: Option<String>,
    now: u64,
    release_set: bool,
    extra: Vec<String>,
    /// `--now` as text instead of `now`.
    now_text: Option<String>,
}

fn qualification() -> Scenario {
    Scenario {
        execution: false,
        docs: Docs::new(),
        grant: None,
        bundle: None,
        attested: true,
        root: None,
        pin: None,
        now: Q_NOW,
        release_set: false,
        extra: Vec::new(),
        now_text: None,
    }
}

fn execution() -> Scenario {
    Scenario {
        execution: true,
        now: E_NOW,
        release_set: true,
        ..qualification()
    }
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write");
    path
}

impl Scenario {
    fn edit(mut self, f: impl FnOnce(&mut Docs)) -> Self {
        f(&mut self.docs);
        self.docs.seal();
        self
    }

    /// An edit after sealing: the digests no longer chain where it touched them.
    fn unsealed(mut self, f: impl FnOnce(&mut Docs)) -> Self {
        f(&mut self.docs);
        self
    }

    fn grant_value(&self) -> &Value {
        if self.execution {
            &self.docs.egrant
        } else {
            &self.docs.qgrant
        }
    }

    fn grant_bytes(&self) -> Vec<u8> {
        self.grant
            .clone()
            .unwrap_or_else(|| c::canon(self.grant_value()))
    }

    fn signed_by(
        mut self,
        change: impl FnOnce(&mut dpone_test_attest_signer::WorkloadIdentity),
    ) -> Self {
        let mut id = c::identity();
        change(&mut id);
        self.bundle = Some(c::attest(&self.grant_bytes(), &id));
        self
    }

    fn run(&self) -> (Output, tempfile::TempDir) {
        let (mut command, dir) = self.command();
        (command.output().expect("run dpone-host"), dir)
    }

    /// The `campaign verify` command of this scenario (its files in the returned directory).
    fn command(&self) -> (Command, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let grant = self.grant_bytes();
        let bundle = self
            .bundle
            .clone()
            .unwrap_or_else(|| c::attest(&grant, &c::identity()));
        let root = self.root.clone().unwrap_or_else(c::trusted_root);
        let mut args: Vec<String> = vec!["campaign".into(), "verify".into()];
        let mut file = |flag: &str, name: &str, bytes: &[u8]| {
            args.push(flag.into());
            args.push(write(d, name, bytes).display().to_string());
        };
        file("--policy", "policy.json", &c::canon(&self.docs.policy));
        file("--document", "grant.json", &grant);
        if self.attested {
            file("--attestation", "grant.sigstore.json", &bundle);
        }
        file("--trusted-root", "trusted_root.json", &root);
        file(
            "--composition",
            "composition.json",
            &c::canon(&self.docs.composition),
        );
        if self.execution {
            file("--request", "request.json", &c::canon(&self.docs.request));
        }
        if self.release_set {
            file(
                "--release-set",
                "release-set.json",
                &c::canon(&self.docs.release),
            );
        }
        args.push("--policy-digest".into());
        args.push(
            self.pin
                .clone()
                .unwrap_or_else(|| self.docs.policy_digest()),
        );
        args.push("--now".into());
        args.push(
            self.now_text
                .clone()
                .unwrap_or_else(|| self.now.to_string()),
        );
        args.extend(self.extra.iter().cloned());
        let (cache, key) = cache();
        args.push("--cache-dir".into());
        args.push(cache.display().to_string());
        let mut command = Command::new(env!("CARGO_BIN_EXE_dpone-host"));
        command.env("DPONE_CACHE_KEY", key).args(&args);
        (command, dir)
    }
}

/// One precompiled cache per test process (a fresh private directory), so each run does not
/// recompile the scope component; its key lives beside it, never inside.
fn cache() -> (PathBuf, PathBuf) {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| tempfile::tempdir().expect("tempdir"));
    let cache = dir.path().join("cache");
    std::fs::create_dir_all(&cache).expect("cache dir");
    (cache, dir.path().join("cache.key"))
}

fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn stderr_code(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stderr);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str::<Value>(line)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("<no code: {text}>"))
}

fn scope_pin() -> String {
    let lock: Value = serde_json::from_str(SCOPE_PIN_LOCK).expect("lock");
    let pin = lock["components"]["scope"]["sha256"]
        .as_str()
        .expect("scope pin")
        .to_owned();
    if pin.starts_with("sha256:") {
        pin
    } else {
        format!("sha256:{pin}")
    }
}

fn assert_verified(out: &Output, phase: &str, workloads: &[&str]) -> Value {
    assert!(
        out.status.success(),
        "refused: {} {}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let v = stdout_json(out);
    assert_eq!(v["result"], "verified");
    assert_eq!(v["phase"], phase);
    assert_eq!(v["signature"]["pinned"], true);
    assert_eq!(
        v["signature"]["signer_identity"],
        c::identity().signer_identity()
    );
    assert_eq!(
        v["trusted_root_digest"],
        dpone_engine_nonproduction::fields::Digest::of(&c::trusted_root()).as_str()
    );
    assert_eq!(
        v["signature"]["subject_digest"],
        v["documents"]["grant"]["digest"]
    );
    assert_eq!(v["reopen"]["result"], "ok");
    assert_eq!(v["reopen"]["clock_floor"], SIGNED_AT);
    assert_eq!(v["scope"]["component"]["pinned"], true);
    assert_eq!(v["scope"]["component"]["sha256"], scope_pin());
    let decisions = v["scope"]["decisions"].as_array().expect("decisions");
    let ids: Vec<&str> = decisions
        .iter()
        .map(|d| d["workload_id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, workloads);
    for d in decisions {
        assert_eq!(d["decision"], "admit");
        assert_eq!(d["code"], "DPONE_SCOPE_ADMITTED");
        assert_eq!(d["evidence"]["kind"], "scope");
        assert_eq!(d["evidence"]["component_sha256"], scope_pin());
    }
    assert_eq!(v["pool"]["usage"], "zero");
    assert_eq!(v["consumed"], false);
    v
}

#[test]
fn a_qualification_grant_verifies_and_its_workload_is_admitted() {
    let s = qualification().edit(|d| {
        // The qualification plan's workloads: the export cell only.
        let export: Vec<Value> = d.composition["workloads"]
            .as_array()
            .expect("workloads")
            .iter()
            .filter(|w| w["workload_id"] == "export-orders-mart")
            .cloned()
            .collect();
        d.composition["workloads"] = Value::Array(export);
        rescope(&mut d.composition, &[]);
    });
    let (out, _) = s.run();
    let v = assert_verified(&out, "qualification", &["export-orders-mart"]);
    assert_eq!(v["documents"]["grant"]["digest"], c::digest(&s.docs.qgrant));
    assert_eq!(v["documents"]["policy"]["digest"], s.docs.policy_digest());
    // Effective limits: the minimum of policy (128 attempts), grant (4) and workload (8).
    let limits = &v["scope"]["decisions"][0]["effective_limits"];
    assert_eq!(limits["max_attempts"], 4);
    assert_eq!(limits["max_source_rows"], 50_000);
    // Stateless: a second verification of the same documents answers the same; the one-time
    // consumption of the run id is the protected store's (part 2).
    let (again, _) = s.run();
    assert_eq!(stdout_json(&again)["documents"], v["documents"]);
}

#[test]
fn an_execution_grant_verifies_and_every_member_is_admitted() {
    let s = execution();
    let (out, _) = s.run();
    let v = assert_verified(
        &out,
        "execution",
        &["dbt-orders-mart", "export-orders-mart", "pg-customers"],
    );
    assert_eq!(
        v["documents"]["request"]["digest"],
        c::digest(&s.docs.request)
    );
    assert_eq!(
        v["documents"]["release_set"]["digest"],
        c::digest(&s.docs.release)
    );
    let pg = &v["scope"]["decisions"][2]["effective_limits"];
    assert_eq!(pg["max_attempt_seconds"], 900);
    assert_eq!(pg["max_source_rows"], 20_000);
    assert_eq!(pg["max_workloads"], 3);

    // One workload only, and RFC 3339 time (E_NOW).
    let mut one = execution();
    one.extra = vec!["--workload".into(), "pg-customers".into()];
    one.now_text = Some("2026-12-02T00:01:00Z".into());
    let (out, _) = one.run();
    assert_verified(&out, "execution", &["pg-customers"]);
}

/// Recomputes a composition's scope from its workloads' effects; `extra` are participants not
/// in the policy's enrollment.
fn rescope(composition: &mut Value, extra: &[Value]) {
    let mut table: Vec<Value> = c::Docs::new().policy["enrollment"]["participants"]
        .as_array()
        .expect("participants")
        .clone();
    table.extend(extra.iter().cloned());
    let mut subjects = std::collections::BTreeSet::new();
    for w in composition["workloads"].as_array_mut().expect("workloads") {
        let effects = w["effects"].as_array_mut().expect("effects");
        effects.sort_by_key(|e| {
            (
                e["participant_id"].as_str().unwrap_or_default().to_owned(),
                e["relation"].as_str().unwrap_or_default().to_owned(),
                e["effect"].as_str().unwrap_or_default().to_owned(),
            )
        });
        for e in effects.iter() {
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
    composition["scope"] = json!({
        "participants": participants,
        "subjects": subjects
            .iter()
            .map(|(p, r)| json!({"participant_id": p, "relation": r}))
            .collect::<Vec<_>>(),
    });
}

fn workload<'a>(composition: &'a mut Value, id: &str) -> &'a mut Value {
    composition["workloads"]
        .as_array_mut()
        .expect("workloads")
        .iter_mut()
        .find(|w| w["workload_id"] == id)
        .expect("workload")
}

fn prod_participant(id: &str, engine: &str, access: &str) -> Value {
    json!({"access": access, "engine": engine, "participant_id": id, "trust_tier": "non_production"})
}

fn other_root() -> Vec<u8> {
    dpone_test_attest_signer::TestAuthority::new()
        .expect("authority")
        .trusted_root_json()
}

fn tamper_text(s: &Scenario, f: impl FnOnce(String) -> String) -> Vec<u8> {
    f(String::from_utf8(s.grant_bytes()).expect("utf8")).into_bytes()
}

#[test]
fn the_negative_matrix_refuses_each_row_with_its_own_code() {
    let g = |s: Scenario, f: fn(&mut Value)| {
        let execution = s.execution;
        s.edit(move |d| {
            f(if execution {
                &mut d.egrant
            } else {
                &mut d.qgrant
            })
        })
    };
    let mut rows: Vec<(&str, Scenario, &str, i32)> = Vec::new();

    // Phase swaps: a qualification grant offered for execution (the request names it), and an
    // execution grant offered for qualification (no request).
    let mut q_for_e = execution().unsealed(|d| {
        d.request["execution_grant_digest"] = c::digest(&d.qgrant).into();
    });
    q_for_e.grant = Some(c::canon(&q_for_e.docs.qgrant));
    q_for_e.now = Q_NOW;
    q_for_e.release_set = false;
    rows.push((
        "phase swap: qualification grant for execution",
        q_for_e,
        "DPONE_SCOPE_PHASE_MISMATCH",
        1,
    ));
    let mut e_for_q = qualification();
    e_for_q.grant = Some(c::canon(&e_for_q.docs.egrant));
    e_for_q.now = E_NOW;
    rows.push((
        "phase swap: execution grant for qualification",
        e_for_q,
        "DPONE_SCOPE_PHASE_MISMATCH",
        1,
    ));

    // Grants for another intent, deployment or activation.
    rows.push((
        "another intent",
        g(execution(), |v| {
            v["compilation_intent"]["id"] = "another-intent".into()
        }),
        "DPONE_NP_SCOPE_INTENT_MISMATCH",
        1,
    ));
    rows.push((
        "another deployment",
        execution().edit(|d| {
            d.egrant["phase_subjects"]["deployment_digest"] =
                format!("sha256:{}", "d".repeat(64)).into();
        }),
        "DPONE_NP_SCOPE_RELEASE_MISMATCH",
        1,
    ));
    rows.push((
        "another activation",
        execution().edit(|d| {
            d.egrant["phase_subjects"]["activation_id"] =
                "00000000-0000-4000-8000-000000000001".into();
        }),
        "DPONE_SCOPE_ACTIVATION_MISMATCH",
        1,
    ));
    rows.push((
        "another composition (request unbound)",
        execution().unsealed(|d| {
            d.request["execution_grant_digest"] = format!("sha256:{}", "e".repeat(64)).into();
        }),
        "DPONE_NP_SCOPE_GRANT_DIGEST_MISMATCH",
        1,
    ));

    // Production escalation.
    rows.push((
        "production tier",
        g(execution(), |v| v["trust_tier"] = "production".into()),
        "DPONE_NP_TRUST_TIER_INVALID",
        3,
    ));
    rows.push((
        "production purpose",
        g(execution(), |v| v["purpose"] = "production_release".into()),
        "DPONE_NP_PURPOSE_INVALID",
        3,
    ));
    rows.push((
        "production participant written by the composition",
        execution().edit(|d| {
            let w = workload(&mut d.composition, "pg-customers");
            w["effects"].as_array_mut().expect("effects").push(json!({
                "access": "write", "effect": "write",
                "participant_id": "prod-mssql-write", "relation": "prod_mssql.dbo.customers"}));
            rescope(
                &mut d.composition,
                &[prod_participant("prod-mssql-write", "sqlserver", "write")],
            );
        }),
        "DPONE_SCOPE_PARTICIPANT_OUT_OF_SCOPE",
        1,
    ));
    rows.push((
        "production participant named by the grant and the composition",
        execution().edit(|d| {
            let w = workload(&mut d.composition, "pg-customers");
            w["effects"].as_array_mut().expect("effects").push(json!({
                "access": "write", "effect": "write",
                "participant_id": "prod-mssql-write", "relation": "prod_mssql.dbo.customers"}));
            rescope(
                &mut d.composition,
                &[prod_participant("prod-mssql-write", "sqlserver", "write")],
            );
            d.egrant["scope"] = d.composition["scope"].clone();
        }),
        "DPONE_SCOPE_PARTICIPANT_NOT_ENROLLED",
        1,
    ));
    rows.push((
        "production route (source participant)",
        execution().edit(|d| {
            let w = workload(&mut d.composition, "pg-customers");
            w["route"]["source_participant"] = "prod-pg-read".into();
            for e in w["effects"].as_array_mut().expect("effects") {
                if e["participant_id"] == "synth-pg-read" {
                    e["participant_id"] = "prod-pg-read".into();
                }
            }
            rescope(
                &mut d.composition,
                &[prod_participant("prod-pg-read", "postgresql", "read")],
            );
        }),
        "DPONE_SCOPE_PARTICIPANT_OUT_OF_SCOPE",
        1,
    ));

    // Wrong signer, each pin on its own.
    rows.push((
        "signer workflow",
        execution().signed_by(|id| {
            id.signer_workflow = "acme/dpone-signing/.github/workflows/other.yml".into();
        }),
        "DPONE_ATTESTATION_SIGNER_MISMATCH",
        1,
    ));
    rows.push((
        "signer digest",
        execution().signed_by(|id| id.signer_digest = "f".repeat(40)),
        "DPONE_ATTESTATION_SIGNER_DIGEST_MISMATCH",
        1,
    ));
    rows.push((
        "issuer",
        execution().signed_by(|id| id.issuer = "https://issuer.example.com".into()),
        "DPONE_ATTESTATION_ISSUER_MISMATCH",
        1,
    ));
    rows.push((
        "repository",
        execution().signed_by(|id| id.repository = "acme/other-repository".into()),
        "DPONE_ATTESTATION_REPOSITORY_MISMATCH",
        1,
    ));
    rows.push((
        "runner",
        execution().signed_by(|id| id.runner_environment = "self-hosted".into()),
        "DPONE_ATTESTATION_RUNNER_ENVIRONMENT_MISMATCH",
        1,
    ));
    let mut predicate = execution();
    {
        let grant = predicate.grant_bytes();
        let mut statement = dpone_test_attest_signer::provenance_statement(
            &[dpone_test_attest_signer::Subject::of("grant.json", &grant)],
            &c::identity(),
        );
        statement["predicateType"] = "https://example.com/other-predicate/v1".into();
        predicate.bundle = Some(
            c::authority()
                .attest_payload(
                    &serde_json::to_vec(&statement).expect("statement"),
                    &c::identity(),
                    &dpone_test_attest_signer::AttestOptions {
                        signed_at: Some(SIGNED_AT),
                        ..Default::default()
                    },
                )
                .expect("attest"),
        );
    }
    rows.push((
        "predicate",
        predicate,
        "DPONE_ATTESTATION_PREDICATE_TYPE_MISMATCH",
        1,
    ));
    let mut unpinned_root = execution();
    unpinned_root.root = Some(other_root());
    rows.push((
        "trusted root not pinned",
        unpinned_root,
        "DPONE_TRUST_ROOT_DIGEST_MISMATCH",
        1,
    ));
    let mut cosign = execution();
    {
        let grant = cosign.grant_bytes();
        let statement = dpone_test_attest_signer::provenance_statement(
            &[dpone_test_attest_signer::Subject::of("grant.json", &grant)],
            &c::identity(),
        );
        cosign.bundle = Some(
            c::authority()
                .public_key_bundle(
                    &serde_json::to_vec(&statement).expect("statement"),
                    &dpone_test_attest_signer::AttestOptions {
                        signed_at: Some(SIGNED_AT),
                        ..Default::default()
                    },
                )
                .expect("key bundle"),
        );
    }
    rows.push((
        "cosign key bundle",
        cosign,
        "DPONE_NP_SIGNATURE_PUBLIC_KEY_BUNDLE",
        1,
    ));
    let mut other_subject = execution();
    other_subject.bundle = Some(c::attest(
        &c::canon(&other_subject.docs.qgrant),
        &c::identity(),
    ));
    rows.push((
        "attestation of another document",
        other_subject,
        "DPONE_ATTESTATION_SUBJECT_DIGEST_MISMATCH",
        1,
    ));
    let mut not_a_grant = execution();
    not_a_grant.grant = Some(c::canon(&not_a_grant.docs.composition));
    rows.push((
        "an attested document that is not a grant",
        not_a_grant,
        "DPONE_NP_SCHEMA_UNSUPPORTED",
        3,
    ));
    let mut unsigned = execution();
    unsigned.attested = false;
    rows.push((
        "no attestation",
        unsigned,
        "DPONE_CLI_CAMPAIGN_ATTESTATION_REQUIRED",
        1,
    ));

    // Clock, validity, revocation, trust.
    let at = |mut s: Scenario, now: u64| {
        s.now = now;
        s
    };
    let e_start = c::T0 + 86_400;
    rows.push((
        "expired",
        at(execution(), e_start + 86_400),
        "DPONE_NP_REOPEN_EXPIRED",
        1,
    ));
    rows.push((
        "not yet valid",
        at(execution(), e_start - 60),
        "DPONE_NP_REOPEN_NOT_YET_VALID",
        1,
    ));
    rows.push((
        "backwards clock (before the authenticated signing time)",
        at(execution(), SIGNED_AT - 60),
        "DPONE_NP_REOPEN_CLOCK_BACKWARDS",
        1,
    ));
    let mut revoked = execution();
    revoked.extra = vec!["--revocation-epoch".into(), "4".into()];
    rows.push(("revoked epoch", revoked, "DPONE_NP_REOPEN_REVOKED", 1));
    rows.push((
        "grant of a revoked epoch (below the policy floor)",
        g(execution(), |v| v["revocation_epoch"] = 2.into()),
        "DPONE_NP_REOPEN_REVOKED",
        1,
    ));
    let mut changed_policy = execution();
    changed_policy.pin = Some(changed_policy.docs.policy_digest());
    changed_policy.docs.policy["revocation_epoch"] = 2.into();
    rows.push((
        "changed trust: the policy is not the pinned one",
        changed_policy,
        "DPONE_NP_REOPEN_POLICY_UNPINNED",
        1,
    ));
    rows.push((
        "changed trust: the grant names another policy",
        execution().unsealed(|d| {
            d.egrant["policy_digest"] = format!("sha256:{}", "a".repeat(64)).into();
        }),
        "DPONE_NP_REOPEN_POLICY_CHANGED",
        1,
    ));

    // Strict documents.
    let mut extra_field = execution();
    extra_field.grant = Some(tamper_text(&extra_field, |t| {
        t.replacen("{\"campaign_id\"", "{\"aaa\":1,\"campaign_id\"", 1)
    }));
    rows.push(("extra field", extra_field, "DPONE_NP_UNKNOWN_FIELD", 3));
    let mut duplicate = execution();
    duplicate.grant = Some(tamper_text(&duplicate, |t| {
        let first = t
            .split_once(',')
            .expect("fields")
            .0
            .trim_start_matches('{')
            .to_owned();
        t.replacen('{', &format!("{{{first},"), 1)
    }));
    rows.push(("duplicated key", duplicate, "DPONE_NP_DUPLICATE_KEY", 3));
    let mut pretty = execution();
    pretty.grant = Some(serde_json::to_vec_pretty(&pretty.docs.egrant).expect("pretty"));
    rows.push(("non-canonical bytes", pretty, "DPONE_NP_NON_CANONICAL", 3));
    rows.push((
        "missing scope field",
        g(execution(), |v| {
            v.as_object_mut().expect("object").remove("scope");
        }),
        "DPONE_NP_MISSING_FIELD",
        3,
    ));
    rows.push((
        "retagged phase (execution subjects under phase qualification)",
        g(execution(), |v| v["phase"] = "qualification".into()),
        "DPONE_NP_PHASE_SUBJECTS_FOREIGN",
        3,
    ));
    rows.push((
        "retagged scope participant (write retagged read)",
        g(execution(), |v| {
            for p in v["scope"]["participants"]
                .as_array_mut()
                .expect("participants")
            {
                if p["participant_id"] == "synth-ch-write" {
                    p["access"] = "read".into();
                }
            }
        }),
        "DPONE_NP_ROUTE_PARTICIPANT_MISMATCH",
        3,
    ));
    rows.push((
        "composition with one effect outside scope",
        execution().edit(|d| {
            let w = workload(&mut d.composition, "pg-customers");
            w["effects"].as_array_mut().expect("effects").push(json!({
                "access": "write", "effect": "write",
                "participant_id": "synth-mssql-write", "relation": "synth_mssql.dbo.audit"}));
            rescope(&mut d.composition, &[]);
        }),
        "DPONE_SCOPE_SUBJECT_OUT_OF_SCOPE",
        1,
    ));
    rows.push((
        "grant limit above a ceiling",
        g(execution(), |v| v["limits"]["max_attempts"] = 129.into()),
        "DPONE_NP_LIMIT_ABOVE_CEILING",
        3,
    ));
    rows.push((
        "workload limit above a ceiling",
        execution().edit(|d| {
            workload(&mut d.composition, "pg-customers")["limits"]["max_source_rows"] =
                100_001.into();
        }),
        "DPONE_NP_LIMIT_ABOVE_CEILING",
        3,
    ));

    let mut failures = Vec::new();
    for (name, scenario, code, exit) in &rows {
        let (out, dir) = scenario.run();
        let got = stderr_code(&out);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let accepted = String::from_utf8_lossy(&out.stdout).contains("\"verified\"");
        if got != *code || out.status.code() != Some(*exit) || accepted {
            failures.push(format!(
                "{name}: expected {code} exit {exit}, got {got} exit {:?} accepted {accepted}: {stderr}",
                out.status.code()
            ));
        }
        assert!(
            !stderr.contains(&dir.path().display().to_string()),
            "{name}: the report names a local path"
        );
        // A denial of the scope component carries its decision evidence on stdout.
        if code.starts_with("DPONE_SCOPE_") && got == *code {
            let v = stdout_json(&out);
            assert_eq!(v["result"], "refused", "{name}");
            assert_eq!(v["decision"], "deny", "{name}");
            assert_eq!(v["code"], *code, "{name}");
            assert_eq!(v["evidence"]["component_sha256"], scope_pin(), "{name}");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn usage_errors_have_their_own_codes() {
    let mut s = execution();
    s.now_text = Some("yesterday".into());
    let (out, _) = s.run();
    assert_eq!(stderr_code(&out), "DPONE_CLI_CAMPAIGN_NOW_INVALID");
    assert_eq!(out.status.code(), Some(3));

    let mut s = execution();
    s.pin = Some("sha256:xyz".into());
    let (out, _) = s.run();
    assert_eq!(stderr_code(&out), "DPONE_NP_DIGEST_INVALID");
    assert_eq!(out.status.code(), Some(3));

    let out = Command::new(env!("CARGO_BIN_EXE_dpone-host"))
        .args([
            "campaign",
            "verify",
            "--policy",
            "/nonexistent-p",
            "--policy-digest",
        ])
        .arg(format!("sha256:{}", "0".repeat(64)))
        .args([
            "--document",
            "/nonexistent-d",
            "--attestation",
            "/nonexistent-a",
        ])
        .args(["--trusted-root", "/nonexistent-r"])
        .output()
        .expect("run");
    assert_eq!(stderr_code(&out), "DPONE_CLI_CAMPAIGN_COMPOSITION_REQUIRED");
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn inspect_prints_the_canonical_summary_without_a_trust_decision() {
    let digests = std::fs::read_to_string(c::fixtures().join("DIGESTS")).expect("DIGESTS");
    for line in digests.lines() {
        let (digest, name) = line.split_once("  ").expect("digest line");
        let out = Command::new(env!("CARGO_BIN_EXE_dpone-host"))
            .args(["campaign", "inspect"])
            .arg(c::fixtures().join(name))
            .output()
            .expect("run");
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v = stdout_json(&out);
        assert_eq!(v["digest"], digest, "{name}");
        assert_eq!(v["trust_decision"], "none", "{name}");
        assert!(v["schema"].as_str().expect("schema").starts_with("dpone."));
    }
    let out = Command::new(env!("CARGO_BIN_EXE_dpone-host"))
        .args(["campaign", "inspect"])
        .arg(c::fixtures().join("authority-execution.json"))
        .output()
        .expect("run");
    let v = stdout_json(&out);
    assert_eq!(v["summary"]["phase"], "execution");
    assert_eq!(
        v["attestation"],
        "required: a GitHub Artifact Attestation whose subject is this digest"
    );

    // Refusals: another family, non-canonical bytes.
    let dir = tempfile::tempdir().expect("tempdir");
    for (bytes, code) in [
        (
            c::canon(&json!({"schema": "dpone.runtime-artifact-trust-policy.v2"})),
            "DPONE_NP_SCHEMA_UNSUPPORTED",
        ),
        (
            serde_json::to_vec_pretty(&Docs::new().policy).expect("pretty"),
            "DPONE_NP_NON_CANONICAL",
        ),
    ] {
        let path = write(dir.path(), "doc.json", &bytes);
        let out = Command::new(env!("CARGO_BIN_EXE_dpone-host"))
            .args(["campaign", "inspect"])
            .arg(&path)
            .output()
            .expect("run");
        assert_eq!(stderr_code(&out), code);
        assert_eq!(out.status.code(), Some(3));
        assert!(out.stdout.is_empty());
    }
}

/// Runs `command` on a pseudo-terminal (util-linux `script`) with `NO_COLOR`, `--output auto`:
/// its exit status and what the terminal showed (`\r\n` made `\n`).
fn at_terminal(command: &Command) -> (i32, String) {
    let quoted: Vec<String> = std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| format!("'{}'", a.to_string_lossy().replace('\'', "'\\''")))
        .collect();
    let mut pty = Command::new("script");
    pty.args(["-qec", &quoted.join(" "), "/dev/null"])
        .env("NO_COLOR", "1");
    for (key, value) in command.get_envs() {
        if let Some(v) = value {
            pty.env(key, v);
        }
    }
    let out = pty.output().expect("util-linux `script` runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n"),
    )
}

/// The value of the summary's fact `key` (a line `  KEY  VALUE`, aligned).
fn fact(shown: &str, key: &str) -> Option<String> {
    shown.lines().find_map(|l| {
        let rest = l.strip_prefix("  ")?.strip_prefix(key)?;
        rest.starts_with("  ").then(|| rest.trim().to_owned())
    })
}

#[test]
fn at_a_terminal_verify_leads_with_its_verdict_and_off_one_prints_the_same_json() {
    let s = execution();
    let (command, _dir) = s.command();
    let (rc, shown) = at_terminal(&command);
    eprintln!("{shown}");
    assert_eq!(rc, 0, "{shown}");
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(
        lines[0], "done: verified, 3 workload(s) in scope",
        "{shown}"
    );
    assert_eq!(
        fact(&shown, "phase").as_deref(),
        Some("execution"),
        "{shown}"
    );
    // Values are capped at 100 characters on a terminal.
    let shown_signer = fact(&shown, "signer").expect("signer");
    assert!(
        c::identity()
            .signer_identity()
            .starts_with(shown_signer.trim_end_matches('…')),
        "{shown}"
    );
    for w in ["dbt-orders-mart", "export-orders-mart", "pg-customers"] {
        let line = lines
            .iter()
            .find(|l| l.starts_with(&format!("  workload {w} ")))
            .unwrap_or_else(|| panic!("{w}: {shown}"));
        assert!(
            line.contains("admit (DPONE_SCOPE_ADMITTED, fuel "),
            "{line}"
        );
    }
    assert!(!shown.contains('{') && !shown.contains('\u{1b}'), "{shown}");
    // Off a terminal: the JSON, the same bytes as with --output json.
    let (out, _) = s.run();
    let mut json = s.clone();
    json.extra = vec!["--output".into(), "json".into()];
    let (explicit, _) = json.run();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&explicit.stdout)
    );
    assert_verified(
        &out,
        "execution",
        &["dbt-orders-mart", "export-orders-mart", "pg-customers"],
    );

    // A scope denial: refused with the component's code, its evidence still JSON off a terminal.
    let mut swapped = execution().unsealed(|d| {
        d.request["execution_grant_digest"] = c::digest(&d.qgrant).into();
    });
    swapped.grant = Some(c::canon(&swapped.docs.qgrant));
    swapped.now = Q_NOW;
    swapped.release_set = false;
    let (command, _dir) = swapped.command();
    let (rc, shown) = at_terminal(&command);
    eprintln!("{shown}");
    assert_eq!(rc, 1, "{shown}");
    assert!(
        shown.starts_with("refused: DPONE_SCOPE_PHASE_MISMATCH\n"),
        "{shown}"
    );
    assert_eq!(
        fact(&shown, "scope decision").as_deref(),
        Some("deny"),
        "{shown}"
    );
    assert!(
        fact(&shown, "next").is_some_and(|n| n.starts_with("nothing was admitted")),
        "{shown}"
    );
    let (out, _) = swapped.run();
    assert_eq!(stdout_json(&out)["decision"], "deny");
}
