//! Tier: engine fault matrix on in-process ports, in both replication modes.
//!
//! External mode runs on independent synthetic members; internal mode (a manifest without
//! `replication_mode`) runs on a synthetic Replicated cluster, whose replicas share one
//! replication log and converge when synced, with its own faults (a replica that lags, one that
//! never converges, a divergent replica) beside the shared ones.
//!
//! Every scenario runs the same operation against the synthetic cluster, injects one fault,
//! retries the same operation until it completes or fails closed, and checks: zero duplicate
//! rows on every member, zero false successes, no table ever loaded twice, at most one
//! publication dispatch, and convergence to one generation where the scenario allows it. The
//! machine-readable scenario receipt (`local_synthetic`, bound to the commit and fixture
//! configuration digests) is written under the test's temporary directory and checked. A naive
//! baseline in the same harness (retry the same insert on every member) shows the duplicates
//! the protocol prevents.

mod common;

use common::{Profile, World, profile, profile_digest};
use dpone_engine_clickhouse::contracts::{
    AuthoritySlot, ClusterStatement, ContentProof, Digest, MemberId, Phase, PublicationMode,
    decode_slot, load_tokens, member_id, target_key,
};
use dpone_engine_clickhouse::ports::{
    ArtifactSource, CandidateSpec, ClusterDdl, DdlCorrelation, LoadTokens, MemberCatalog,
};
use dpone_engine_clickhouse::synthetic::{Fault, WriteFault};
use dpone_engine_clickhouse::{CoordinatorConfig, EngineError, RunOutcome, codes};
use serde_json::{Value as Json, json};

#[derive(Clone, Debug)]
enum Expect {
    Converge,
    /// Converge, except when a crash right after the write that authorised publication stops
    /// the process before the DDL is sent: then there is no queue evidence and the protocol
    /// fails closed without redispatching.
    ConvergeUnlessCrashAfterDispatchCas,
    /// Fail closed with one of these codes; `one_generation` says whether every member must
    /// still hold one generation (the baseline) afterwards.
    FailClosed {
        codes: &'static [&'static str],
        one_generation: bool,
    },
}

struct Scenario {
    name: String,
    faults: Vec<Fault>,
    expect: Expect,
    /// Set-up applied before the first run.
    setup: Setup,
}

#[derive(Clone, Copy)]
enum Setup {
    None,
    ForeignCandidate,
    MemberOnAnotherGeneration,
}

fn phases() -> [Phase; 7] {
    [
        Phase::Locked,
        Phase::Staging,
        Phase::Staged,
        Phase::PublicationDispatching,
        Phase::Committed,
        Phase::CleanupDispatching,
        Phase::Completed,
    ]
}

fn scenarios(p: &Profile, mode: PublicationMode, members: u32) -> Vec<Scenario> {
    let conv = |name: String, faults: Vec<Fault>| Scenario {
        name,
        faults,
        expect: Expect::Converge,
        setup: Setup::None,
    };
    let mut out = vec![conv("no_fault".into(), vec![])];
    let last = (members - 1) as usize;
    // Internal mode loads through the first replica in member-id order only: load faults hit
    // it, replica faults another replica.
    let ids: Vec<MemberId> = (1..=members).map(|r| member_id(1, r)).collect();
    let loader = (0..ids.len()).min_by_key(|&i| ids[i]).unwrap_or(0);
    let replica = (0..ids.len()).rev().find(|&i| i != loader).unwrap_or(last);
    let both = [0, last];
    let loaders: &[usize] = match mode {
        PublicationMode::External | PublicationMode::Local => &both[..members.min(2) as usize],
        PublicationMode::Internal => std::slice::from_ref(&loader),
    };
    let last = match mode {
        PublicationMode::External | PublicationMode::Local => last,
        PublicationMode::Internal => replica,
    };
    if mode == PublicationMode::Local {
        // One server lists a statement only while it runs: publication still running is
        // waited for, then proven by the published pair alone.
        out.push(conv(
            "publication_still_running".into(),
            vec![Fault::PartialDdl { executed: 0 }],
        ));
    }
    if mode == PublicationMode::Internal {
        out.push(conv(
            format!("replica_lags_m{last}"),
            vec![Fault::ReplicaLags {
                member: last,
                syncs: 2,
            }],
        ));
        out.push(Scenario {
            name: format!("replica_never_converges_m{last}"),
            faults: vec![Fault::ReplicaNeverConverges { member: last }],
            expect: Expect::FailClosed {
                codes: &[codes::REPLICA_NOT_CONVERGED],
                one_generation: true,
            },
            setup: Setup::None,
        });
        out.push(Scenario {
            name: format!("replica_divergent_m{last}"),
            faults: vec![Fault::ReplicaDivergent { member: last }],
            expect: Expect::FailClosed {
                codes: &[codes::CANDIDATE_DIVERGENT],
                one_generation: true,
            },
            setup: Setup::None,
        });
    }
    for &m in loaders {
        out.push(conv(
            format!("load_lost_response_after_complete_load_m{m}"),
            vec![Fault::LoadLostResponseComplete { member: m }],
        ));
        out.push(conv(
            format!("load_lost_response_after_partial_load_m{m}"),
            vec![Fault::LoadLostResponsePartial {
                member: m,
                rows: p.partial_rows,
            }],
        ));
        out.push(conv(
            format!("load_lost_response_after_empty_load_m{m}"),
            vec![Fault::LoadLostResponsePartial { member: m, rows: 0 }],
        ));
        out.push(conv(
            format!("crash_after_load_before_cas_m{m}"),
            vec![Fault::CrashAfterLoadBeforeCas { member: m }],
        ));
    }
    for ph in phases() {
        let n = ph.as_str().to_lowercase();
        out.push(conv(
            format!("crash_before_{n}"),
            vec![Fault::CrashBeforePhase(ph)],
        ));
        out.push(conv(
            format!("lost_cas_ack_{n}"),
            vec![Fault::LostCasAck(ph)],
        ));
        if ph == Phase::PublicationDispatching {
            // The process stopped after the dispatch CAS landed but before the DDL was sent:
            // there is no queue evidence, so the protocol never redispatches (fail closed,
            // every member stays on the baseline generation).
            out.push(Scenario {
                name: format!("crash_after_{n}_before_dispatch"),
                faults: vec![Fault::CrashAfterPhase(ph)],
                expect: Expect::FailClosed {
                    codes: &[codes::PUBLICATION_EVIDENCE_MISSING],
                    one_generation: true,
                },
                setup: Setup::None,
            });
        } else {
            out.push(conv(
                format!("crash_after_{n}"),
                vec![Fault::CrashAfterPhase(ph)],
            ));
        }
    }
    for &m in &both[..members.min(2) as usize] {
        out.push(conv(
            format!("member_unreachable_once_m{m}"),
            vec![Fault::MemberUnavailableOnce { member: m }],
        ));
        // An outage at admission is retried, never reported as a manifest blocker.
        out.push(conv(
            format!("member_unreachable_at_probe_m{m}"),
            vec![Fault::MemberUnavailableAtProbe { member: m }],
        ));
        // A deterministic refusal stops at once (no rebuild loop) and aborts after exact
        // cleanup, every target untouched.
        out.push(Scenario {
            name: format!("create_rejected_m{m}"),
            faults: vec![Fault::CreateRejected { member: m }],
            expect: Expect::FailClosed {
                codes: &[codes::STATEMENT_REJECTED],
                one_generation: true,
            },
            setup: Setup::None,
        });
    }
    for &m in loaders {
        out.push(Scenario {
            name: format!("load_rejected_after_partial_load_m{m}"),
            faults: vec![Fault::LoadRejected {
                member: m,
                rows: p.partial_rows,
            }],
            expect: Expect::FailClosed {
                codes: &[codes::STATEMENT_REJECTED],
                one_generation: true,
            },
            setup: Setup::None,
        });
    }
    out.push(conv(
        "inventory_unavailable_once".into(),
        vec![Fault::InventoryUnavailableOnce],
    ));
    out.push(conv(
        "partial_ddl".into(),
        vec![Fault::PartialDdl { executed: 1 }],
    ));
    out.push(conv(
        "lost_ddl_response".into(),
        vec![Fault::LostDdlResponse],
    ));
    out.push(Scenario {
        name: "crash_before_publication_dispatch".into(),
        faults: vec![Fault::CrashBeforePublicationDispatch],
        expect: Expect::FailClosed {
            codes: &[codes::PUBLICATION_EVIDENCE_MISSING],
            one_generation: true,
        },
        setup: Setup::None,
    });
    out.push(Scenario {
        name: "ddl_fails_on_one_member_terminal_mixed".into(),
        faults: vec![Fault::DdlFailsOnMember { member: last }],
        // One server: the failed statement left the pair unchanged and is not running, so
        // nothing proves what happened (no queue records a failure): held, untouched.
        expect: match mode {
            PublicationMode::Local => Expect::FailClosed {
                codes: &[codes::PUBLICATION_EVIDENCE_MISSING],
                one_generation: true,
            },
            _ => Expect::FailClosed {
                codes: &[codes::PUBLICATION_TERMINAL_MIXED],
                one_generation: false,
            },
        },
        setup: Setup::None,
    });
    out.push(conv(
        "cleanup_lost_response".into(),
        vec![Fault::CleanupLostResponse],
    ));
    out.push(conv("cleanup_not_sent".into(), vec![Fault::CleanupNotSent]));
    out.push(conv(
        "inventory_drift_at_staging_barrier".into(),
        vec![Fault::InventoryDrift {
            member: last,
            skip: 1,
            observations: 1,
        }],
    ));
    out.push(conv(
        "inventory_drift_before_publication".into(),
        vec![Fault::InventoryDrift {
            member: 0,
            skip: 2,
            observations: 1,
        }],
    ));
    out.push(Scenario {
        name: "inventory_drift_persistent".into(),
        faults: vec![Fault::InventoryDrift {
            member: 0,
            skip: 1,
            observations: 1_000,
        }],
        expect: Expect::FailClosed {
            codes: &[codes::INVENTORY_DRIFT],
            one_generation: true,
        },
        setup: Setup::None,
    });
    out.push(Scenario {
        name: "foreign_candidate".into(),
        faults: vec![],
        expect: Expect::FailClosed {
            codes: &[codes::CANDIDATE_FOREIGN],
            one_generation: true,
        },
        setup: Setup::ForeignCandidate,
    });
    // (One server has no other member to diverge from.)
    out.extend((members > 1).then(|| Scenario {
        name: "member_on_another_generation_at_baseline".into(),
        faults: vec![],
        expect: Expect::FailClosed {
            codes: &[
                codes::TARGET_DIVERGENT,
                codes::TARGET_PRESENCE_MIXED,
                codes::ADMISSION_BLOCKED,
            ],
            one_generation: false,
        },
        setup: Setup::MemberOnAnotherGeneration,
    }));
    out.push(Scenario {
        name: "member_on_another_generation_before_publication".into(),
        faults: vec![Fault::TargetReplacedAfterStaging { member: last }],
        expect: Expect::FailClosed {
            codes: &[codes::TARGET_DRIFT],
            one_generation: false,
        },
        setup: Setup::None,
    });
    out
}

#[derive(Debug)]
struct Result1 {
    name: String,
    mode: PublicationMode,
    members: u32,
    target_present: bool,
    runs: u32,
    outcome: &'static str,
    code: Option<&'static str>,
    duplicate_rows: u64,
    false_successes: u32,
    max_loads_per_table: u32,
    publication_dispatches: u64,
    generations: usize,
    leftover_candidates: usize,
    faults_fired: bool,
    passed: bool,
    failure: Option<String>,
}

/// Per-member target digest (None when absent).
fn target_digests(p: &Profile, w: &World, members: u32) -> Vec<Option<Digest>> {
    (0..members as usize)
        .map(|i| {
            w.cluster
                .snapshot(i, &p.database, &p.target)
                .map(|t| p.digest_of(&t.data))
        })
        .collect()
}

fn run_scenario(
    p: &Profile,
    s: &Scenario,
    mode: PublicationMode,
    members: u32,
    target_present: bool,
) -> Result1 {
    let w = World::of(mode, p, members, target_present);
    let req = p.request_of(mode);
    let cand = p.candidate_of(mode);
    let baseline_digest = target_present.then(|| p.digest_of(&p.rows(10_000, p.baseline_rows)));
    match s.setup {
        Setup::None => {}
        Setup::ForeignCandidate => {
            let m = (members as usize - 1).min(1);
            w.cluster.put_table(m, &p.database, &cand, &p.rows(1, 3));
        }
        Setup::MemberOnAnotherGeneration => {
            w.cluster
                .put_table(1, &p.database, &p.target, &p.rows(50_000, p.baseline_rows));
        }
    }
    for f in &s.faults {
        w.cluster.arm(f.clone());
    }
    let desired = p.digest_of(&p.rows(1, p.artifact_rows));

    let mut false_successes = 0;
    let mut runs = 0;
    let mut last: Result<RunOutcome, EngineError> = Err(EngineError::Interrupted { step: "none" });
    for _ in 0..p.max_runs {
        runs += 1;
        last = w.coordinator().run(&req);
        match &last {
            Ok(RunOutcome::Completed { receipt }) => {
                let digests = target_digests(p, &w, members);
                let all_desired = digests.iter().all(|d| *d == Some(desired))
                    && receipt.schema_version == mode.receipt_schema()
                    && receipt.content_digest
                        == p.digest_by(receipt.content_proof, &p.rows(1, p.artifact_rows))
                    && receipt.members.len() == members as usize;
                if !all_desired {
                    false_successes += 1;
                }
                break;
            }
            Ok(RunOutcome::InProgress { .. }) => w.cluster.tick(),
            Err(e) if e.is_retryable() => w.cluster.tick(),
            Err(_) => break,
        }
    }
    let digests = target_digests(p, &w, members);
    let mut distinct: Vec<Option<Digest>> = digests.clone();
    distinct.sort();
    distinct.dedup();
    let duplicate_rows: u64 = (0..members as usize)
        .map(|i| w.cluster.duplicate_rows(i))
        .sum();
    let metrics = w.cluster.metrics();
    let leftover_candidates = (0..members as usize)
        .map(|i| {
            w.cluster
                .table_names(i)
                .iter()
                .filter(|n| n.contains("__dpone_ext_"))
                .count()
        })
        .sum();
    let faults_fired =
        w.cluster.faults_armed() == s.faults.len() && w.cluster.faults_fired() == s.faults.len();

    let mut failure = None;
    let mut check = |ok: bool, why: &str| {
        if !ok && failure.is_none() {
            failure = Some(why.to_string());
        }
    };
    check(faults_fired, "an injected fault never fired");
    // The slot holds this mode's record (V1 for internal mode), whatever the outcome.
    let key = target_key(&req.static_facts.cluster_name, &p.database, &p.target);
    let slot_mode = w
        .cluster
        .authority_value(&key)
        .and_then(|v| decode_slot(&v.value).ok())
        .map(|slot| slot.mode());
    check(
        slot_mode.is_none_or(|m| m == mode),
        "the slot holds a record of the other mode",
    );
    if mode == PublicationMode::Internal
        && let Some(AuthoritySlot::V1(r)) = w
            .cluster
            .authority_value(&key)
            .and_then(|v| decode_slot(&v.value).ok())
    {
        let uuids: std::collections::BTreeSet<_> =
            r.members.iter().filter_map(|m| m.candidate_uuid).collect();
        check(
            uuids.len() <= 1,
            "internal replicas bound to different candidates",
        );
    }
    check(duplicate_rows == 0, "duplicate rows");
    check(false_successes == 0, "false success");
    check(metrics.max_loads_per_table <= 1, "a table was loaded twice");
    check(
        metrics.publication_dispatches <= 1,
        "publication redispatched",
    );
    let (outcome, code) = match &last {
        Ok(RunOutcome::Completed { .. }) => ("converged", None),
        Ok(RunOutcome::InProgress { .. }) => ("in_progress", None),
        Err(e) => ("fail_closed", Some(e.code())),
    };
    let expect = match &s.expect {
        Expect::ConvergeUnlessCrashAfterDispatchCas
            if s.faults.iter().any(|f| {
                matches!(
                    f,
                    Fault::AuthorityWrite {
                        mode: WriteFault::CrashAfter,
                        ..
                    }
                )
            }) && w.cluster.fired_write() == Some((Phase::PublicationDispatching, true)) =>
        {
            Expect::FailClosed {
                codes: &[codes::PUBLICATION_EVIDENCE_MISSING],
                one_generation: true,
            }
        }
        Expect::ConvergeUnlessCrashAfterDispatchCas => Expect::Converge,
        other => other.clone(),
    };
    match &expect {
        Expect::ConvergeUnlessCrashAfterDispatchCas => unreachable!("resolved above"),
        Expect::Converge => {
            check(outcome == "converged", "did not converge");
            check(
                digests.iter().all(|d| *d == Some(desired)),
                "a member is not on the desired generation",
            );
            check(leftover_candidates == 0, "candidates left after completion");
        }
        Expect::FailClosed {
            codes,
            one_generation,
        } => {
            check(outcome == "fail_closed", "did not fail closed");
            check(code.is_some_and(|c| codes.contains(&c)), "unexpected code");
            if code == Some(codes::STATEMENT_REJECTED) {
                check(runs == 1, "a deterministic refusal was retried");
                check(
                    leftover_candidates == 0,
                    "owned candidates left after the abort",
                );
            }
            if *one_generation {
                check(distinct.len() == 1, "members on different generations");
                check(
                    digests.iter().all(|d| *d == baseline_digest),
                    "a target changed although the operation failed closed",
                );
            }
        }
    }
    // Every injected fault must have fired (scenarios whose fault cannot fire in a topology,
    // such as cleanup faults without a predecessor, are not generated for it).
    Result1 {
        name: s.name.clone(),
        mode,
        members,
        target_present,
        runs,
        outcome,
        code,
        duplicate_rows,
        false_successes,
        max_loads_per_table: metrics.max_loads_per_table,
        publication_dispatches: metrics.publication_dispatches,
        generations: distinct.len(),
        leftover_candidates,
        faults_fired,
        passed: failure.is_none(),
        failure,
    }
}

/// The naive baseline: stage by inserting into every member and retrying the same insert after
/// an error, then publish. Returns (duplicate rows, false successes).
fn naive_baseline(p: &Profile) -> (u64, u32) {
    let w = World::new(p, 2, false);
    let schema = p.schema();
    let id = w
        .artifacts
        .seal(&schema, 1 << 30)
        .expect("synthetic artifact seals");
    w.cluster.arm(Fault::LoadLostResponseComplete { member: 0 });
    let members: Vec<MemberId> = w.cluster.member_ids();
    let name = "target_table__naive";
    for (i, m) in members.iter().enumerate() {
        let spec = CandidateSpec {
            database: &p.database,
            name,
            uuid: dpone_engine_clickhouse::contracts::Uuid::from_random([i as u8 + 1; 16]),
            schema: &schema,
            engine: "MergeTree",
            order_by: &[],
        };
        w.cluster.create_candidate(m, &spec).expect("create");
        let tokens = LoadTokens {
            query_id: "naive".into(),
            dedup_token: "naive".into(),
        };
        // Retry the same insert until it reports success.
        for _ in 0..3 {
            let mut r = w.artifacts.open(&id).expect("open");
            if w.cluster
                .load(m, &p.database, name, spec.uuid, &mut r, &tokens)
                .is_ok()
            {
                break;
            }
        }
    }
    let stmt = ClusterStatement::Rename {
        database: p.database.clone(),
        candidate: name.into(),
        target: p.target.clone(),
    };
    let reported_success = w
        .cluster
        .dispatch(
            &p.cluster,
            &stmt,
            &DdlCorrelation {
                token: dpone_engine_clickhouse::contracts::Token([1; 16]),
                query_id: "naive".into(),
                query_digest: Digest::of(b"naive"),
            },
        )
        .is_ok();
    let desired = p.digest_of(&p.rows(1, p.artifact_rows));
    let all_desired = target_digests(p, &w, 2).iter().all(|d| *d == Some(desired));
    let dups = (0..2).map(|i| w.cluster.duplicate_rows(i)).sum();
    (dups, u32::from(reported_success && !all_desired))
}

fn commit() -> String {
    if let Ok(c) = std::env::var("DPONE_COMMIT") {
        return c;
    }
    std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "UNVERIFIED".into())
}

#[test]
fn fault_matrix_converges_without_duplicates_or_false_success() {
    let p = profile();
    assert_eq!(p.schema_version, "dpone.clickhouse.synthetic-profile.v1");
    let mut results = Vec::new();
    for mode in PublicationMode::ALL {
        let counts: &[u32] = match mode {
            PublicationMode::Local => &[1],
            _ => &p.member_counts,
        };
        for &members in counts {
            for target_present in [false, true] {
                for s in scenarios(&p, mode, members) {
                    // Without a predecessor there is no cleanup DDL for a cleanup fault to hit.
                    if !target_present && s.name.contains("cleanup") {
                        continue;
                    }
                    results.push(run_scenario(&p, &s, mode, members, target_present));
                }
                // A crash before, a crash after, and a lost acknowledgement at every single
                // authority write of a clean run.
                let clean = World::of(mode, &p, members, target_present);
                assert!(matches!(
                    clean.coordinator().run(&p.request_of(mode)),
                    Ok(RunOutcome::Completed { .. })
                ));
                let writes = clean.cluster.authority_writes();
                // External mode binds every member's candidate intent with the artifact, every
                // member's candidate as CREATED in one write, and every member READY with
                // STAGED in one write; internal mode moves every replica in one write per stage.
                let least = match mode {
                    PublicationMode::External | PublicationMode::Local => 7,
                    PublicationMode::Internal => 9,
                };
                assert!(writes >= least, "{mode:?}: {writes} writes");
                for nth in 0..writes {
                    for (wmode, label) in [
                        (WriteFault::CrashBefore, "crash_before"),
                        (WriteFault::CrashAfter, "crash_after"),
                        (WriteFault::LostAck, "lost_ack"),
                    ] {
                        let s = Scenario {
                            name: format!("authority_write_{nth}_{label}"),
                            faults: vec![Fault::AuthorityWrite { nth, mode: wmode }],
                            expect: Expect::ConvergeUnlessCrashAfterDispatchCas,
                            setup: Setup::None,
                        };
                        results.push(run_scenario(&p, &s, mode, members, target_present));
                    }
                }
            }
        }
    }
    let (naive_dups, naive_false) = naive_baseline(&p);

    let failed: Vec<String> = results
        .iter()
        .filter(|r| !r.passed)
        .map(|r| {
            format!(
                "{} ({}, members {}, target {}): {} [{:?} {:?}]",
                r.name,
                r.mode.as_str(),
                r.members,
                r.target_present,
                r.failure.as_deref().unwrap_or(""),
                r.outcome,
                r.code
            )
        })
        .collect();

    let scenarios_json: Vec<Json> = results
        .iter()
        .map(|r| {
            json!({
                "name": r.name,
                "replication_mode": r.mode.as_str(),
                "members": r.members,
                "target_present": r.target_present,
                "runs": r.runs,
                "outcome": r.outcome,
                "code": r.code,
                "fault_fired": r.faults_fired,
                "duplicate_rows": r.duplicate_rows,
                "false_successes": r.false_successes,
                "max_loads_per_table": r.max_loads_per_table,
                "publication_dispatches": r.publication_dispatches,
                "member_generations": r.generations,
                "leftover_candidates": r.leftover_candidates,
                "passed": r.passed,
            })
        })
        .collect();
    let converged = results.iter().filter(|r| r.outcome == "converged").count();
    let fail_closed = results
        .iter()
        .filter(|r| r.outcome == "fail_closed")
        .count();
    let receipt = json!({
        "schema_version": "dpone.clickhouse.external-publication.scenario-receipt.v1",
        "scope": "local_synthetic",
        "commit": commit(),
        "fixture_config_digest": profile_digest().to_hex(),
        "engine": {
            "crate": "dpone-engine-clickhouse",
            "version": env!("CARGO_PKG_VERSION"),
        },
        "scenarios": scenarios_json,
        "totals": {
            "scenarios": results.len(),
            "passed": results.iter().filter(|r| r.passed).count(),
            "converged": converged,
            "fail_closed": fail_closed,
            "faults_fired": results.iter().filter(|r| r.faults_fired).count(),
            "duplicate_rows": results.iter().map(|r| r.duplicate_rows).sum::<u64>(),
            "false_successes": results.iter().map(|r| r.false_successes).sum::<u32>(),
        },
        "naive_baseline": {
            "name": "retry_same_insert_on_every_member",
            "fault": "load_lost_response_after_complete_load_m0",
            "duplicate_rows": naive_dups,
            "false_successes": naive_false,
        },
        "limitations": "local synthetic proof; does not certify external networks, grants, queue retention, server patches or production performance",
    });

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir
        .path()
        .join("test_artifacts/clickhouse-external-publication/synthetic-receipt.json");
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    let text = serde_json::to_string_pretty(&receipt).expect("receipt encodes");
    std::fs::write(&path, &text).expect("write receipt");
    if let Ok(out) = std::env::var("DPONE_SCENARIO_RECEIPT_OUT") {
        let _ = std::fs::write(out, &text);
    }

    assert!(
        failed.is_empty(),
        "failed scenarios:\n{}",
        failed.join("\n")
    );
    // The receipt on disk says what the harness saw.
    let back: Json =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("parse");
    assert_eq!(back["scope"], "local_synthetic");
    assert_eq!(back["fixture_config_digest"], profile_digest().to_hex());
    assert!(back["commit"].as_str().map(str::len).unwrap_or(0) > 0);
    assert_eq!(back["totals"]["scenarios"], results.len());
    assert_eq!(back["totals"]["faults_fired"], results.len());
    assert_eq!(back["totals"]["duplicate_rows"], 0);
    assert_eq!(back["totals"]["false_successes"], 0);
    assert!(
        back["naive_baseline"]["duplicate_rows"]
            .as_u64()
            .unwrap_or(0)
            > 0
    );
    assert_eq!(back["naive_baseline"]["false_successes"], 1);
    assert!(
        back.to_string().find("member-1-").is_none(),
        "no endpoints in the receipt"
    );

    eprintln!(
        "fault matrix: {} scenarios ({} converged, {} failed closed as specified, {} with every injected fault fired); naive baseline: {} duplicate rows, {} false success",
        results.len(),
        converged,
        fail_closed,
        results.iter().filter(|r| r.faults_fired).count(),
        naive_dups,
        naive_false
    );
    assert!(results.len() >= 300);
}

#[test]
fn load_tokens_are_deterministic_per_generation_member_and_rebuild() {
    // Tier: unit.
    let g = dpone_engine_clickhouse::contracts::GenerationId(Digest::of(b"g"));
    let m = member_id(1, 2);
    assert_eq!(load_tokens(&g, &m, 0), load_tokens(&g, &m, 0));
    assert_ne!(load_tokens(&g, &m, 0).0, load_tokens(&g, &m, 1).0);
    assert_eq!(load_tokens(&g, &m, 0).1, load_tokens(&g, &m, 1).1);
}

#[test]
fn bytes_altered_after_the_revalidation_never_complete_a_load_and_abort_after_exact_cleanup() {
    // Tier: engine fault matrix on in-process ports. The artifact is revalidated once per
    // staging run and every load verifies the bytes it streams: bytes that change between the
    // revalidation and a load fail that load at its end.
    let p = profile();
    for parallelism in [1, 4] {
        let w = World::new(&p, 2, true);
        let c = w.coordinator_with(parallelism);
        let req = p.request();
        // Seal and bind (the process stops once STAGING is written), then every later open
        // serves altered bytes while the stored copy stays intact.
        w.cluster.arm(Fault::CrashAfterPhase(Phase::Staging));
        assert!(c.run(&req).is_err());
        w.artifacts.alter_after_revalidation(u64::MAX);
        let e = c.run(&req).expect_err("altered bytes refused");
        assert_eq!(
            e.code(),
            codes::ARTIFACT_INVALID,
            "parallelism {parallelism}"
        );
        assert_eq!(
            w.cluster.metrics().loads,
            0,
            "no load completed from altered bytes"
        );
        let cand = p.candidate();
        for i in 0..2 {
            assert!(
                w.cluster.snapshot(i, &p.database, &cand).is_none(),
                "owned candidate dropped"
            );
            assert!(
                w.cluster.snapshot(i, &p.database, &p.target).is_some(),
                "target untouched"
            );
        }
        let e = c.run(&req).expect_err("aborted");
        assert_eq!(e.code(), codes::OPERATION_ABORTED);
        assert_eq!(w.cluster.metrics().publication_dispatches, 0);
    }
}

#[test]
fn a_tampered_artifact_is_never_loaded_and_aborts_after_exact_cleanup() {
    // Tier: engine fault matrix on in-process ports.
    let p = profile();
    let w = World::new(&p, 2, true);
    // The first member (in member-id order) loads in full; the second's load applies one row
    // and its response is lost, so the run drops that candidate and stops at its next
    // authority write (members served one after another): the second member is still to
    // load when the artifact is tampered with.
    let ids = w.cluster.member_ids();
    let first = (0..ids.len()).min_by_key(|i| ids[*i]).expect("members");
    let second = (0..ids.len()).max_by_key(|i| ids[*i]).expect("members");
    w.cluster
        .arm(Fault::CrashAfterLoadBeforeCas { member: first });
    w.cluster.arm(Fault::LoadLostResponsePartial {
        member: second,
        rows: 1,
    });
    assert!(w.coordinator_with(1).run(&p.request()).is_err());
    let loads = w.cluster.metrics().loads;
    assert_eq!(loads, 2, "both members loaded once");
    assert!(
        w.cluster
            .snapshot(second, &p.database, &p.candidate())
            .is_none(),
        "the partial candidate was dropped"
    );
    w.artifacts.tamper();
    let e = w
        .coordinator()
        .run(&p.request())
        .expect_err("revalidation fails");
    assert_eq!(e.code(), codes::ARTIFACT_INVALID);
    assert_eq!(
        w.cluster.metrics().loads,
        loads,
        "no load from unverified bytes"
    );
    let cand = p.candidate();
    for i in 0..2 {
        assert!(
            w.cluster.snapshot(i, &p.database, &cand).is_none(),
            "owned candidate dropped"
        );
        assert!(
            w.cluster.snapshot(i, &p.database, &p.target).is_some(),
            "target untouched"
        );
    }
    let e = w.coordinator().run(&p.request()).expect_err("aborted");
    assert_eq!(e.code(), codes::OPERATION_ABORTED);
    assert_eq!(w.cluster.metrics().publication_dispatches, 0);
    // ABORTED is reusable by a new operation, which re-extracts and converges.
    let mut next = p.request();
    next.scheduler_invocation = "after-abort".into();
    assert!(matches!(
        w.coordinator().run(&next),
        Ok(RunOutcome::Completed { .. })
    ));
}

#[test]
fn a_source_above_max_source_bytes_aborts_before_any_mutation() {
    // Tier: engine fault matrix on in-process ports.
    let p = profile();
    let w = World::new(&p, 2, true);
    let mut req = p.request();
    req.static_facts.max_source_bytes = Some(64);
    let e = w.coordinator().run(&req).expect_err("too large");
    assert_eq!(e.code(), codes::ARTIFACT_TOO_LARGE);
    assert_eq!(
        e.recovery(),
        dpone_engine_clickhouse::RecoveryAction::FixManifest
    );
    assert_eq!(w.cluster.metrics().loads, 0);
    assert!(
        w.cluster
            .table_names(0)
            .iter()
            .all(|n| !n.contains("__dpone_ext_"))
    );
}

#[test]
fn an_operation_recorded_under_the_canonical_proof_finishes_under_it() {
    // Tier: engine on in-process ports. Records written before proofs were versioned name no
    // proof and are canonical; a host that now defaults to the rowset proof resumes them under
    // the proof their record names, and its receipt says which.
    let p = profile();
    let want_canonical = p.digest_of(&p.rows(1, p.artifact_rows));
    let want_rowset = p.digest_by(ContentProof::Rowset, &p.rows(1, p.artifact_rows));
    assert_ne!(want_canonical, want_rowset);
    for (first, expected) in [
        (ContentProof::Canonical, want_canonical),
        (ContentProof::Rowset, want_rowset),
    ] {
        let w = World::new(&p, 2, true);
        let req = p.request();
        w.cluster.arm(Fault::CrashAfterPhase(Phase::Staged));
        let old = CoordinatorConfig {
            content_proof: first,
            ..CoordinatorConfig::default()
        };
        assert!(w.coordinator_config(old).run(&req).is_err());
        let mut receipt = None;
        for _ in 0..p.max_runs {
            match w.coordinator().run(&req) {
                Ok(RunOutcome::Completed { receipt: r }) => {
                    receipt = Some(r);
                    break;
                }
                Ok(RunOutcome::InProgress { .. }) => w.cluster.tick(),
                Err(e) if e.is_retryable() => w.cluster.tick(),
                Err(e) => panic!("{first:?}: {}", e.code()),
            }
        }
        let receipt = receipt.expect("completed");
        assert_eq!(receipt.content_proof, first);
        assert_eq!(receipt.content_digest, expected, "{first:?}");
        for m in &receipt.members {
            assert_eq!(m.content_digest, expected, "{first:?}");
        }
        for i in 0..2 {
            let t = w
                .cluster
                .snapshot(i, &p.database, &p.target)
                .expect("target");
            assert_eq!(p.digest_of(&t.data), want_canonical);
        }
        // A canonical receipt encodes exactly as before proofs were versioned: no field.
        let text = serde_json::to_string(&*receipt).expect("receipt encodes");
        assert_eq!(
            text.contains("\"content_proof\""),
            first == ContentProof::Rowset,
            "{text}"
        );
    }
}

#[test]
fn a_malformed_artifact_aborts_before_any_member_is_touched_under_either_proof() {
    // Tier: engine on in-process ports. Under the rowset proof the artifact is digested while it
    // is sealed (the synthetic source shows its bytes as it stores them); under the canonical
    // proof it is read back. Either way a stream that does not decode is refused before any
    // candidate exists, and the operation aborts.
    let p = profile();
    for proof in [ContentProof::Rowset, ContentProof::Canonical] {
        let mut w = World::new(&p, 2, false);
        let mut bytes = p.rows(1, p.artifact_rows);
        bytes.pop();
        w.artifacts =
            dpone_engine_clickhouse::synthetic::SyntheticArtifacts::new(bytes, p.artifact_rows);
        let config = CoordinatorConfig {
            content_proof: proof,
            ..CoordinatorConfig::default()
        };
        let e = w
            .coordinator_config(config)
            .run(&p.request())
            .expect_err("malformed artifact");
        assert_eq!(e.code(), codes::CONTENT_DECODE, "{proof:?}");
        assert_eq!(w.cluster.metrics().loads, 0, "{proof:?}");
        let cand = p.candidate();
        for i in 0..2 {
            assert!(w.cluster.snapshot(i, &p.database, &cand).is_none());
        }
        let again = w.coordinator_config(config).run(&p.request());
        assert_eq!(
            again.expect_err("aborted").code(),
            codes::OPERATION_ABORTED,
            "{proof:?}"
        );
    }
}
