//! `dpone-host resolve`: the operator's way out of a fail-closed hold of the ClickHouse route.
//!
//! Wiring only: the decision is the engine's ([`dpone_engine_clickhouse::resolve::decide`]).
//! It reads the authority record of `--invocation`'s operation, re-observes every member, the
//! bound queue entry, the inventory and this worker's artifact store, and prints the proof and
//! the proposed transition. Nothing changes without `--apply`; with it, the engine drops only
//! exact owned objects by UUID and records the outcome by a version-checked CAS with evidence
//! in the record. No admission, no source read, no DDL dispatch, no authority-row deletion.

use std::fmt::Write as _;

use crate::input::InputKind;
use clap::Args;
use dpone_adapter_clickhouse::{Extract, StoreArtifactSource};
use dpone_artifact_store::ArtifactStore;
use dpone_engine_clickhouse::contracts::{ArtifactIdentity, Schema};
use dpone_engine_clickhouse::ports::{ArtifactSource, NoProgress, PortError, SystemEnvironment};
use dpone_engine_clickhouse::resolve::{
    ObservedTable, ResolveOptions, ResolveOutcome, ResolveReport,
};
use dpone_engine_clickhouse::{Coordinator, Ports};
use serde::Serialize;

use super::wiring::{self, NoAdmission};
use super::{
    ROUTE, cluster, coordinator_config, read_manifest, request, require_invocation,
    require_registry,
};
use crate::exit::{Failure, REFUSED, RETRY, print_report};
use crate::render::{Report, Summary, Verdict, clean_or_dash, shown};
use crate::route::{self, Route, RouteArgs};
use crate::shipped;

/// Code of `resolve` given a manifest of another route.
const ROUTE_UNSUPPORTED: &str = "DPONE_CLI_RESOLVE_ROUTE_UNSUPPORTED";

/// Options of `resolve`.
#[derive(Args, Clone, Debug)]
pub struct ResolveArgs {
    /// Route options (`--manifest`, `--connections`, `--invocation`, `--artifact-dir`).
    #[command(flatten)]
    pub route: RouteArgs,
    /// Record the proven resolution. Without it, resolve is a dry run and changes nothing.
    #[arg(long)]
    pub apply: bool,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Seconds the authority record must have been unchanged before a return to STAGED or an
    /// abort (a worker of the same operation may still be running).
    #[arg(long, default_value_t = 300)]
    pub quiet_seconds: u64,
}

/// Resolve never extracts: sealing refuses.
struct NoExtract;

impl Extract for NoExtract {
    fn extract(&self, _: &Schema, _: &mut dyn std::io::Write) -> Result<u64, PortError> {
        Err(PortError::rejected("DPONE_CLI_RESOLVE_READ_ONLY"))
    }
}

/// This worker's artifact store, read only; a store directory that does not exist holds no
/// artifact (and is not created).
enum LocalArtifacts<'a> {
    Store(StoreArtifactSource<'a, NoExtract>),
    Absent,
}

const NOT_FOUND: &str = "DPONE_ARTIFACT_NOT_FOUND";

impl ArtifactSource for LocalArtifacts<'_> {
    fn seal(&self, _: &Schema, _: u64) -> Result<ArtifactIdentity, PortError> {
        Err(PortError::rejected("DPONE_CLI_RESOLVE_READ_ONLY"))
    }

    fn revalidate(&self, id: &ArtifactIdentity) -> Result<(), PortError> {
        match self {
            Self::Store(s) => s.revalidate(id),
            Self::Absent => Err(PortError::unavailable(NOT_FOUND)),
        }
    }

    fn open<'b>(&'b self, id: &ArtifactIdentity) -> Result<Box<dyn std::io::Read + 'b>, PortError> {
        match self {
            Self::Store(s) => s.open(id),
            Self::Absent => Err(PortError::unavailable(NOT_FOUND)),
        }
    }

    fn release(&self, _: &ArtifactIdentity) -> Result<(), PortError> {
        Ok(())
    }
}

/// The JSON of `resolve`.
#[derive(Serialize)]
struct ResolveOutput<'a> {
    route: &'static str,
    command: &'static str,
    workload: &'a str,
    resolve: &'a ResolveReport,
}

impl Report for ResolveOutput<'_> {
    /// The proposed or recorded transition out of a hold, or the refusal.
    fn summary(&self) -> Summary {
        let r = self.resolve;
        let transition = format!(
            "{} {} -> {}",
            clean_or_dash(r.resolution.map(|k| shown(&k))),
            clean_or_dash(r.from.map(|p| shown(&p))),
            clean_or_dash(r.to.map(|p| shown(&p)))
        );
        let code = || clean_or_dash(r.code);
        let mut s = match r.outcome {
            ResolveOutcome::Proposed => {
                Summary::new(Verdict::Done, format!("proposed {transition}"))
            }
            ResolveOutcome::Recorded => {
                Summary::new(Verdict::Done, format!("recorded {transition}"))
            }
            ResolveOutcome::Refused if r.retryable => Summary::new(Verdict::NotFinished, code()),
            ResolveOutcome::Refused => Summary::new(Verdict::Refused, code()),
        };
        s.fact("workload", self.workload);
        s.fact("operation", shown(&r.operation_id));
        s.fact_if("phase", r.phase.map(|p| shown(&p)));
        s.fact_if("keeper version", r.keeper_version);
        if !r.members.is_empty() {
            let reachable = r.members.iter().filter(|m| m.reachable).count();
            s.line(
                "members",
                format!("{reachable} of {} reachable", r.members.len()),
            );
        }
        s.fact_if("reason", r.reason);
        s.fact_if("proof", r.proof);
        if !r.drops.is_empty() {
            s.line("candidates dropped", r.drops.len().to_string());
        }
        s.fact_if("recorded at", r.recorded_version);
        let recovery = shown(&r.recovery);
        s.line(
            "next",
            match r.outcome {
                ResolveOutcome::Proposed => {
                    "nothing was changed; run again with --apply to record it".into()
                }
                ResolveOutcome::Refused if r.retryable => {
                    format!("resolve again later ({recovery})")
                }
                _ => recovery,
            },
        );
        s
    }
}

fn short<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".into(),
    }
}

fn table(t: Option<&ObservedTable>) -> String {
    match t {
        None => "absent".into(),
        Some(t) => match &t.content_digest {
            Some(d) => format!("{} (content {})", short(&t.uuid), d.hex_prefix(16)),
            None => short(&t.uuid),
        },
    }
}

/// The text report: what was observed, the proof and the transition (or the refusal).
fn text(workload: &str, r: &ResolveReport) -> String {
    let mut s = String::new();
    let phase = r.phase.map_or("-", |p| p.as_str());
    let _ = writeln!(
        s,
        "resolve: workload {workload}, operation {}, phase {phase}, keeper version {}",
        short(&r.operation_id),
        r.keeper_version.map_or("-".into(), |v| v.to_string()),
    );
    if let (Some(i), Some(q), Some(a)) = (&r.inventory, &r.queue, &r.artifact) {
        let _ = writeln!(
            s,
            "observed: inventory {}, queue {} ({} entries), artifact {}",
            short(i),
            q.state,
            q.entries,
            short(a)
        );
    }
    for m in &r.members {
        let _ = writeln!(
            s,
            "member {}: {}target {}, candidate {}",
            short(&m.member_id),
            if m.reachable { "" } else { "UNREACHABLE, " },
            table(m.target.as_ref()),
            table(m.candidate.as_ref()),
        );
    }
    match r.outcome {
        ResolveOutcome::Refused => {
            let _ = writeln!(
                s,
                "refused: {} — {}{}",
                r.code.unwrap_or("-"),
                r.reason.unwrap_or("-"),
                r.member
                    .as_ref()
                    .map_or(String::new(), |m| format!(" (member {})", short(m))),
            );
        }
        ResolveOutcome::Proposed | ResolveOutcome::Recorded => {
            let _ = writeln!(
                s,
                "resolution: {} {} -> {}",
                r.resolution.map_or("-", |k| k.as_str()),
                r.from.map_or("-", |p| p.as_str()),
                r.to.map_or("-", |p| p.as_str()),
            );
            let _ = writeln!(s, "proof: {}", r.proof.unwrap_or("-"));
            for d in &r.drops {
                let _ = writeln!(
                    s,
                    "drop: member {} candidate {}{}",
                    short(&d.member_id),
                    short(&d.uuid),
                    if d.dropped {
                        " (dropped, absence proven)"
                    } else {
                        ""
                    }
                );
            }
            if r.outcome == ResolveOutcome::Proposed {
                let _ = writeln!(
                    s,
                    "dry run: nothing was changed; run again with --apply to record it"
                );
            } else {
                let _ = writeln!(
                    s,
                    "recorded at keeper version {}",
                    r.recorded_version.map_or("-".into(), |v| v.to_string())
                );
            }
        }
    }
    let _ = writeln!(s, "next: {}", short(&r.recovery));
    s
}

/// `resolve`.
pub fn resolve(args: &ResolveArgs) -> Result<(), Failure> {
    let route_args = &args.route;
    let raw = shipped::read_input(route_args.manifest_path()?, InputKind::Manifest)?;
    if route::detect(&String::from_utf8_lossy(&raw))? != Route::ClickhousePublication {
        return Err(Failure::bad_input(
            ROUTE_UNSUPPORTED,
            "resolve applies to the ClickHouse publication route (a physical_design manifest) only",
        ));
    }
    let m = read_manifest(route_args)?;
    let invocation = require_invocation(route_args)?;
    let registry = require_registry(route_args)?;
    let cluster = cluster(&m, &registry)?;
    let max = m.clickhouse.max_source_bytes.unwrap_or(0).max(1) as u64;
    let store = if route_args.artifact_dir.is_dir() {
        Some(
            ArtifactStore::open_path(&route_args.artifact_dir, max).map_err(|e| {
                Failure::bad_input(e.code(), format!("cannot open the artifact directory: {e}"))
            })?,
        )
    } else {
        None
    };
    let artifacts = match &store {
        Some(s) => LocalArtifacts::Store(StoreArtifactSource::new(s, NoExtract)),
        None => LocalArtifacts::Absent,
    };
    let coordinator = Coordinator::new(
        Ports {
            authority: &cluster,
            inventory: &cluster,
            catalog: &cluster,
            ddl: &cluster,
            artifacts: &artifacts,
            admission: &NoAdmission,
            env: &SystemEnvironment,
            progress: &NoProgress,
        },
        coordinator_config(&m),
    );
    let report = coordinator
        .resolve(
            &request(&m, invocation),
            ResolveOptions {
                apply: args.apply,
                quiet_seconds: args.quiet_seconds,
            },
        )
        .map_err(|e| wiring::engine_failure(&e))?;
    let output = ResolveOutput {
        route: ROUTE,
        command: "resolve",
        workload: &m.name,
        resolve: &report,
    };
    if args.json {
        print_report(&output)?;
    } else {
        // The verdict-first summary (as for every command), then what was observed member by
        // member.
        crate::exit::write_stdout(&format!(
            "{}\n{}",
            crate::render::report_text(&output),
            text(&m.name, &report)
        ))?;
    }
    failure(&report).map_or(Ok(()), Err)
}

/// The exit of a report: 0 when a resolution is proven (dry run) or recorded; a refusal exits
/// 75 when resolving again later may succeed (a member or the queue did not answer, the quiet
/// period, inventory drift, an unconfirmed write) and 1 otherwise.
fn failure(report: &ResolveReport) -> Option<Failure> {
    match report.outcome {
        ResolveOutcome::Proposed | ResolveOutcome::Recorded => None,
        ResolveOutcome::Refused => Some(Failure {
            code: report
                .code
                .unwrap_or(dpone_engine_clickhouse::codes::AUTHORITY_MISMATCH)
                .to_owned(),
            message: format!(
                "{}; nothing was recorded; recovery: {}",
                report.reason.unwrap_or("refused"),
                short(&report.recovery)
            ),
            exit: if report.retryable { RETRY } else { REFUSED },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpone_engine_clickhouse::RecoveryAction;
    use dpone_engine_clickhouse::contracts::{
        Digest, Phase, ResolutionKind, Uuid, member_id, operation_id, target_key,
    };
    use dpone_engine_clickhouse::resolve::{CandidateDrop, ObservedMember, codes};

    fn report(outcome: ResolveOutcome) -> ResolveReport {
        let key = target_key("analytics_cluster", "analytics", "target_table");
        let m = member_id(1, 2);
        let uuid = Uuid::from_random([7; 16]);
        ResolveReport {
            target_key: key,
            operation_id: operation_id("nightly", &key, &Digest::of(b"plan")),
            apply: outcome == ResolveOutcome::Recorded,
            keeper_version: Some(4),
            phase: Some(Phase::Staging),
            inventory: None,
            queue: None,
            artifact: None,
            members: vec![ObservedMember {
                member_id: m,
                reachable: true,
                target: None,
                candidate: Some(ObservedTable {
                    uuid,
                    row_count: 3,
                    schema_matches: true,
                    content_digest: None,
                    content_rows: None,
                }),
            }],
            outcome,
            resolution: Some(ResolutionKind::Abort),
            from: Some(Phase::Staging),
            to: Some(Phase::Aborted),
            proof: Some("the proof"),
            drops: vec![CandidateDrop {
                member_id: m,
                uuid,
                dropped: outcome == ResolveOutcome::Recorded,
            }],
            code: None,
            reason: None,
            member: None,
            retryable: false,
            recovery: RecoveryAction::StartNewOperation,
            recorded_version: (outcome == ResolveOutcome::Recorded).then_some(5),
        }
    }

    #[test]
    fn resolve_reports_lead_with_the_transition_or_the_refusal() {
        let proposed = report(ResolveOutcome::Proposed);
        let output = ResolveOutput {
            route: ROUTE,
            command: "resolve",
            workload: "w",
            resolve: &proposed,
        };
        crate::render::golden::assert_pinned("clickhouse_resolve_proposed", &output);
        let text = output.summary().finish(false);
        assert!(
            text.starts_with("done: proposed abort STAGING -> ABORTED\n"),
            "{text}"
        );
        assert!(
            text.contains("  members             1 of 1 reachable\n"),
            "{text}"
        );
        assert!(text.contains("run again with --apply"), "{text}");
        let mut refused = report(ResolveOutcome::Refused);
        refused.code = Some("DPONE_CLICKHOUSE_Y");
        refused.retryable = true;
        let output = ResolveOutput {
            resolve: &refused,
            ..output
        };
        crate::render::golden::assert_pinned("clickhouse_resolve_refused", &output);
        assert!(
            output
                .summary()
                .finish(false)
                .starts_with("not finished: DPONE_CLICKHOUSE_Y\n")
        );
    }

    #[test]
    fn a_proven_resolution_exits_0_and_says_whether_it_was_recorded() {
        let dry = report(ResolveOutcome::Proposed);
        assert!(failure(&dry).is_none());
        let t = text("w", &dry);
        assert!(t.contains("resolution: abort STAGING -> ABORTED"), "{t}");
        assert!(t.contains("dry run: nothing was changed"), "{t}");
        assert!(t.contains("next: start_new_operation"), "{t}");
        let done = report(ResolveOutcome::Recorded);
        assert!(failure(&done).is_none());
        let t = text("w", &done);
        assert!(t.contains("recorded at keeper version 5"), "{t}");
        assert!(t.contains("(dropped, absence proven)"), "{t}");
    }

    #[test]
    fn a_refusal_exits_1_or_75_with_its_code() {
        let mut r = report(ResolveOutcome::Refused);
        r.code = Some(codes::MIXED);
        r.reason = Some("members stand on different sides");
        r.recovery = RecoveryAction::HoldForOperator;
        let f = failure(&r).expect("refused");
        assert_eq!((f.code.as_str(), f.exit), (codes::MIXED, REFUSED));
        assert!(f.message.contains("hold_for_operator"));
        assert!(text("w", &r).contains("refused: DPONE_CLICKHOUSE_CLUSTER_RESOLVE_MIXED"));
        r.code = Some(codes::QUIET_PERIOD);
        r.retryable = true;
        assert_eq!(failure(&r).map(|f| f.exit), Some(RETRY));
    }
}
