//! XMin key reconciliation on the command line: `check`, `plan`, `run` and `status` for a
//! manifest with a `reconciliation` block, and the environment owner's repair-authority
//! commands. This module only composes: the engine (`dpone-engine-xmin`) decides the flow, the
//! PostgreSQL adapter does the I/O, and the guard and delete-mode decisions come from the policy
//! components (shipped, or from a verified bundle when a trust policy is configured).

mod report;

use crate::exit::{Failure, print_report};
use crate::input::{InputKind, read_text};
use crate::route::RouteArgs;
use crate::run_gate::RunGate;
use crate::run_gate::deadline::DeadlineTarget;
use crate::shipped::{self, Policy, PolicySource};
use clap::Subcommand;
use dpone_adapter_mssql::target::{MssqlTarget, MssqlTargetSpec};
use dpone_adapter_postgres::artifacts::DirArtifactStore;
use dpone_adapter_postgres::source::{PgSource, SourceBound};
use dpone_adapter_postgres::target::PgTarget;
use dpone_engine_nonproduction::reservation_run::{Read, RunEnd};
use dpone_engine_xmin::manifest::TargetKind;
use dpone_engine_xmin::ports::{Judged, PolicyPort, TargetPort};
use dpone_engine_xmin::state::AuthorityDocument;
use dpone_engine_xmin::{
    ErrorCode, Manifest, ProcessEnvironment, Registry, Route, RunRequest, XminError,
};
use dpone_policy_model::delete_mode::{DeleteModeFacts, PlanDecision};
use dpone_policy_model::guard::{GuardDecision, GuardFacts};
use dpone_policy_runtime::{Decided, PolicyError, PolicyKind, PolicyRuntime};
use report::{AuthorityCreated, AuthorityList, RunFailed, RunReport, SourceMeasurement};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

/// The guard and delete-mode policy components behind the engine's policy port.
struct ComponentPolicies<'a> {
    guard: Policy<'a>,
    delete_mode: Policy<'a>,
}

fn judged<T: serde::Serialize>(
    decided: Result<Decided<T>, PolicyError>,
) -> dpone_engine_xmin::Result<Judged<T>> {
    let decided = decided
        .map_err(|e| XminError::new(ErrorCode::PolicyFailed, format!("{}: {e}", e.code())))?;
    let evidence = serde_json::to_value(&decided.evidence)
        .map_err(|e| XminError::new(ErrorCode::PolicyFailed, e.to_string()))?;
    Ok(Judged {
        decision: decided.decision,
        evidence,
    })
}

impl PolicyPort for ComponentPolicies<'_> {
    fn guard(&self, facts: &GuardFacts) -> dpone_engine_xmin::Result<Judged<GuardDecision>> {
        judged(crate::telemetry::decide(
            PolicyKind::Guard,
            "decide",
            || self.guard.guard_decide(facts),
        ))
    }

    fn delete_mode(
        &self,
        facts: &DeleteModeFacts,
    ) -> dpone_engine_xmin::Result<Judged<PlanDecision>> {
        judged(crate::telemetry::decide(
            PolicyKind::DeleteMode,
            "plan",
            || self.delete_mode.delete_mode_plan(facts),
        ))
    }
}

impl From<XminError> for Failure {
    fn from(e: XminError) -> Self {
        Failure::xmin(e.code(), e.message())
    }
}

/// Parses the manifest (`manifest`: its text already read, for a reservation run that digested
/// those bytes; otherwise read from `--manifest`) and registry and resolves the route (no I/O
/// beyond reading the files).
fn prepare(
    args: &RouteArgs,
    manifest: Option<&str>,
    policies: &ComponentPolicies<'_>,
) -> Result<Route, Failure> {
    let manifest = match manifest {
        Some(text) => Manifest::from_yaml(text)?,
        None => Manifest::from_yaml(&read_text(args.manifest_path()?, InputKind::Manifest)?)?,
    };
    let registry_path = args.connections.as_ref().ok_or_else(|| {
        Failure::bad_input(
            "DPONE_CLI_CONNECTIONS_REQUIRED",
            "the XMin route needs the connection registry (--connections or DPONE_CONNECTIONS)",
        )
    })?;
    let registry = Registry::from_yaml(&read_text(registry_path, InputKind::ConnectionRegistry)?)?;
    let route = Route::prepare(manifest, &registry, &ProcessEnvironment, policies)?;
    if route.manifest.target_kind == TargetKind::Mssql {
        // The bulk-load limits the coordinates alone reveal (staged column names), refused at
        // check and plan, before any I/O.
        MssqlTargetSpec::from_route(&route)?.check_plan()?;
    }
    Ok(route)
}

/// Loads the policies and runs `f` with the prepared route.
fn with_route<T>(
    args: &RouteArgs,
    f: impl FnOnce(&Route, &ComponentPolicies<'_>) -> Result<T, Failure>,
) -> Result<T, Failure> {
    with_route_text(args, None, f)
}

/// [`with_route`] over a manifest text already read (`None`: read `--manifest`).
fn with_route_text<T>(
    args: &RouteArgs,
    manifest: Option<&str>,
    f: impl FnOnce(&Route, &ComponentPolicies<'_>) -> Result<T, Failure>,
) -> Result<T, Failure> {
    let runtime: PolicyRuntime = shipped::runtime(None)?;
    let source = PolicySource::resolve(&runtime, args.components_dir.as_deref(), &args.source)?;
    let policies = ComponentPolicies {
        guard: source.policy(PolicyKind::Guard)?,
        delete_mode: source.policy(PolicyKind::DeleteMode)?,
    };
    let route = prepare(args, manifest, &policies)?;
    f(&route, &policies)
}

fn block_on<F: std::future::Future>(future: F) -> Result<F::Output, Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::internal("DPONE_CLI_RUNTIME", e.kind().to_string()))?;
    Ok(runtime.block_on(future))
}

/// What [`prepare`] checked beyond the engine's own report: the SQL Server adapter's checks
/// without I/O.
fn adapter_checks(route: &Route) -> &'static [&'static str] {
    match route.manifest.target_kind {
        TargetKind::Postgres => &[],
        TargetKind::Mssql => MssqlTargetSpec::PLAN_CHECKS,
    }
}

/// `check`: route support, unique key, state location, delete mode, legacy conflicts, and what
/// was and was not verified (nothing is contacted).
pub fn check(args: &RouteArgs) -> Result<(), Failure> {
    with_route(args, |route, _| {
        let mut report = route.check_report();
        report.checked.extend(adapter_checks(route));
        print_report(&report)
    })
}

/// `plan`: the check plus the delete plan, guards, identities and the route's own run steps,
/// as JSON.
pub fn plan(args: &RouteArgs) -> Result<(), Failure> {
    with_route(args, |route, _| {
        let mut report = route.plan_report();
        report.check.checked.extend(adapter_checks(route));
        print_report(&report)
    })
}

fn extract_progress(bytes: u64) {
    eprint!("\rextracting: {} KiB   ", bytes / 1024);
}

fn stage_progress(bytes: u64) {
    eprint!("\rstaging:    {} KiB   ", bytes / 1024);
}

/// The scheduler's invocation id, validated before it names the run's artifact directory (one
/// path component: 1 to 128 of `[A-Za-z0-9._:-]`, not starting with a dot); a fresh id when the
/// scheduler gave none, printed in the evidence so a retry can name it.
fn invocation_id(args: &RouteArgs) -> Result<String, Failure> {
    match &args.invocation {
        Some(id) if valid_invocation(id) => Ok(id.clone()),
        Some(_) => Err(Failure::bad_input(
            "DPONE_CLI_INVOCATION_INVALID",
            "--invocation must be 1 to 128 characters of [A-Za-z0-9._:-], not starting with a dot",
        )),
        None => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            Ok(format!("cli-{nanos:x}-{:x}", std::process::id()))
        }
    }
}

/// True for an id that is safe as one path component.
fn valid_invocation(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// `run`: one reconciliation run; prints the evidence.
pub fn run(args: &RouteArgs) -> Result<(), Failure> {
    run_gated(args, None)
}

/// `run`, optionally under a reservation's [`RunGate`]: the gate's manifest bytes are the ones
/// parsed, the gate is asked before any I/O, its bound and deadline bind the source and the
/// target ([`crate::np_run::deadline`]), and its settlement is printed as `np_reservation` in
/// the run's JSON.
pub fn run_gated(args: &RouteArgs, mut gate: Option<&mut dyn RunGate>) -> Result<(), Failure> {
    let invocation_id = invocation_id(args)?;
    let text = match gate.as_deref() {
        Some(g) => Some(String::from_utf8(g.manifest().to_vec()).map_err(|_| {
            Failure::bad_input(
                "DPONE_CLI_INPUT_MALFORMED",
                format!("the {} is not UTF-8", InputKind::Manifest.label()),
            )
        })?),
        None => None,
    };
    with_route_text(args, text.as_deref(), |route, policies| {
        let admitted = match gate.as_deref_mut() {
            Some(g) => Some(g.admit_xmin(route)?),
            None => None,
        };
        let request = RunRequest {
            invocation_id: invocation_id.clone(),
            repair_authority_ref: args.repair_authority_ref.clone(),
        };
        let terminal = std::io::stderr().is_terminal();
        let mut source = PgSource::new();
        if terminal {
            source = source.with_progress(extract_progress);
        }
        if let Some(a) = admitted {
            source = source
                .with_bound(SourceBound {
                    max_rows: a.max_rows,
                    max_bytes: a.max_bytes,
                })
                .with_deadline(a.deadline);
        }
        let deadline = admitted.map(|a| a.deadline);
        let executed = execute(
            args,
            route,
            policies,
            &request,
            &mut source,
            terminal,
            deadline,
        );
        if terminal {
            eprintln!();
        }
        // Rows and binary COPY payload bytes the source read (the envelope's payload counts;
        // also for a failed read, `complete: false`); absent when the source was not read (a
        // replay or a failure before extraction).
        let read = source.last_measurement();
        let measured = read.map(|m| SourceMeasurement {
            complete: m.complete,
            rows: m.rows,
            source_bytes: m.source_bytes,
        });
        let read = read.map(|m| Read {
            rows: m.rows,
            bytes: m.source_bytes,
            complete: m.complete,
        });
        let outcome = match executed {
            Ok(outcome) => outcome,
            Err(setup) => {
                // Nothing ran (artifact directory, target wiring): a gated run still settles
                // its reservation, as failed without a read.
                if let Some(g) = gate {
                    let (settlement, unrecorded) = g.settle(RunEnd::Failed, read, 0);
                    print_report(&RunReport {
                        failure: Some(RunFailed::Setup {
                            code: &setup.code,
                            message: &setup.message,
                        }),
                        invocation_id: &request.invocation_id,
                        np_reservation: Some(settlement),
                        outcome: None,
                        source_measurement: None,
                    })?;
                    if let Some(f) = unrecorded {
                        return Err(f);
                    }
                }
                return Err(setup);
            }
        };
        crate::telemetry::record_io(
            "xmin",
            read.map_or(0, |r| r.rows),
            read.map_or(0, |r| r.bytes),
            Some(match &outcome {
                Ok(done) => dpone_engine_xmin::ports::written(&done.receipt.metrics),
                Err(_) => 0,
            }),
        );
        let stopped = outcome
            .as_ref()
            .is_err_and(|f| f.code() == ErrorCode::AttemptDeadlineExceeded);
        let end = match &outcome {
            Ok(_) => RunEnd::Completed,
            Err(_) if stopped => RunEnd::Unfinished,
            Err(_) => RunEnd::Failed,
        };
        let settled = gate.map(|g| g.settle(end, read, 0));
        let (settlement, unrecorded) = match settled {
            Some((s, f)) => (Some(s), f),
            None => (None, None),
        };
        print_report(&RunReport {
            failure: outcome.as_ref().err().map(RunFailed::Run),
            invocation_id: &request.invocation_id,
            np_reservation: settlement,
            outcome: outcome.as_ref().ok(),
            source_measurement: measured,
        })?;
        match outcome {
            Ok(_) => unrecorded.map_or(Ok(()), Err),
            Err(_) if stopped => Err(crate::run_gate::deadline_exceeded()),
            Err(failure) => Err(Failure::xmin(failure.error.code(), failure.error.message())),
        }
    })
}

/// The artifact store and the target, then the engine's run; an `Err` means nothing ran.
fn execute(
    args: &RouteArgs,
    route: &Route,
    policies: &ComponentPolicies<'_>,
    request: &RunRequest,
    source: &mut PgSource,
    terminal: bool,
    deadline: Option<Instant>,
) -> Result<Result<dpone_engine_xmin::RunOutcome, dpone_engine_xmin::RunFailure>, Failure> {
    let artifact_dir: PathBuf = args.artifact_dir.join(&request.invocation_id);
    std::fs::create_dir_all(&artifact_dir).map_err(|e| {
        Failure::bad_input(
            "DPONE_CLI_ARTIFACT_DIR",
            format!("cannot create the artifact directory: {}", e.kind()),
        )
    })?;
    let store = DirArtifactStore::open(&artifact_dir).map_err(|e| {
        Failure::bad_input(
            "DPONE_CLI_ARTIFACT_DIR",
            format!("cannot open the artifact directory: {}", e.kind()),
        )
    })?;
    match route.manifest.target_kind {
        TargetKind::Postgres => {
            let mut target = PgTarget::for_route(route)?;
            if terminal {
                target = target.with_progress(stage_progress);
            }
            run_on(route, request, source, target, &store, policies, deadline)
        }
        TargetKind::Mssql => {
            let target = MssqlTarget::for_route(route)?;
            run_on(route, request, source, target, &store, policies, deadline)
        }
    }
}

/// The engine's run on `target`, under the attempt's deadline when there is one.
fn run_on<T: TargetPort>(
    route: &Route,
    request: &RunRequest,
    source: &mut PgSource,
    target: T,
    store: &DirArtifactStore,
    policies: &ComponentPolicies<'_>,
    deadline: Option<Instant>,
) -> Result<Result<dpone_engine_xmin::RunOutcome, dpone_engine_xmin::RunFailure>, Failure> {
    // The run's future is boxed: it holds both the source's and the target's futures, which
    // (debug builds above all) would otherwise sit on the calling thread's stack.
    match deadline {
        None => {
            let mut target = target;
            block_on(Box::pin(dpone_engine_xmin::run(
                route,
                request,
                source,
                &mut target,
                store,
                policies,
            )))
        }
        Some(d) => {
            let mut target = DeadlineTarget::new(target, d);
            block_on(Box::pin(dpone_engine_xmin::run(
                route,
                request,
                source,
                &mut target,
                store,
                policies,
            )))
        }
    }
}

/// `status`: the state row and the latest receipts of the route (`state show`).
pub fn status(args: &RouteArgs) -> Result<(), Failure> {
    with_route(args, |route, _| {
        let report = match route.manifest.target_kind {
            TargetKind::Postgres => {
                let mut target = PgTarget::for_route(route)?;
                block_on(dpone_engine_xmin::state_show(route, &mut target, 10))??
            }
            TargetKind::Mssql => {
                let mut target = MssqlTarget::for_route(route)?;
                block_on(dpone_engine_xmin::state_show(route, &mut target, 10))??
            }
        };
        print_report(&report)
    })
}

/// Commands the SQL Server target does not offer: on SQL Server the environment owner writes
/// authorities with the reviewed tooling of `fixtures/mssql/` (see docs/mssql-target.md).
fn postgres_only(route: &Route, command: &str) -> Result<(), Failure> {
    match route.manifest.target_kind {
        TargetKind::Postgres => Ok(()),
        TargetKind::Mssql => Err(Failure::bad_input(
            "DPONE_CLI_TARGET_UNSUPPORTED",
            format!("{command} is available for PostgreSQL targets only"),
        )),
    }
}

/// The environment owner's repair-authority commands.
#[derive(Subcommand)]
pub enum AuthorityCommand {
    /// Insert an immutable, expiring, one-shot repair authority (JSON document) into the
    /// route's state database.
    Create {
        #[command(flatten)]
        route: RouteArgs,
        /// The authority document (`dpone.xmin.repair-authority.v1`).
        #[arg(long)]
        document: PathBuf,
    },
    /// List the repair authorities of the route's state database.
    List {
        #[command(flatten)]
        route: RouteArgs,
    },
}

/// Runs an authority command.
pub fn authority(
    command: AuthorityCommand,
    source: &shipped::PolicySourceArgs,
) -> Result<(), Failure> {
    match command {
        AuthorityCommand::Create {
            mut route,
            document,
        } => {
            route.source = source.clone();
            let text = read_text(&document, InputKind::AuthorityDocument)?;
            let doc: AuthorityDocument = serde_json::from_str(&text)
                .map_err(|e| Failure::bad_input("DPONE_XMIN_AUTHORITY_MALFORMED", e.to_string()))?;
            with_route(&route, |route, _| {
                postgres_only(route, "authority create")?;
                let mut target = PgTarget::for_route(route)?;
                let digest = block_on(target.create_authority(&doc))??;
                print_report(&AuthorityCreated {
                    created: doc.authority_id.clone(),
                    digest,
                })
            })
        }
        AuthorityCommand::List { mut route } => {
            route.source = source.clone();
            with_route(&route, |route, _| {
                postgres_only(route, "authority list")?;
                let mut target = PgTarget::for_route(route)?;
                let list = block_on(target.list_authorities())??;
                print_report(&AuthorityList(list))
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::valid_invocation;

    #[test]
    fn an_invocation_id_is_one_safe_path_component() {
        for ok in ["run-1", "2026-12-01T06:00:00Z", "a.b_c:d-e", "X"] {
            assert!(valid_invocation(ok), "{ok}");
        }
        let long = "a".repeat(129);
        for bad in [
            "", "..", ".", "../x", "a/b", "/abs", ".hidden", "a\\b", "a b", "a\nb", &long,
        ] {
            assert!(!valid_invocation(bad), "{bad:?}");
        }
    }
}
