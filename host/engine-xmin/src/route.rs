//! `check` and `plan`: everything decided before any I/O.
//!
//! [`Route::prepare`] reads nothing but its arguments: it resolves the manifest against the
//! registry, computes the identities and asks the delete-mode policy for its plan. A blocker is
//! an [`XminError`] with a stable code, so `dpone-host check` can exit non-zero with it.

use crate::error::{ErrorCode, Result, XminError};
use crate::identity::RouteIdentity;
use crate::manifest::{Manifest, TargetKind};
use crate::ports::PolicyPort;
use crate::registry::{Environment, MssqlRole, Registry, ResolvedRoute, TargetPins};
use dpone_policy_model::delete_mode::{DeleteModeFacts, DeletePlan, PlanDecision};
use serde::Serialize;

/// A route ready to run: manifest, resolved registry entries, identities and delete plan.
#[derive(Clone, Debug)]
pub struct Route {
    /// The checked manifest.
    pub manifest: Manifest,
    /// Registry entries for it (with credentials).
    pub resolved: ResolvedRoute,
    /// Identities.
    pub identity: RouteIdentity,
    /// The delete-mode policy's plan.
    pub plan: DeletePlan,
    /// Evidence of the delete-mode decision.
    pub plan_evidence: serde_json::Value,
}

/// What `check` reports (JSON; no endpoints or credentials).
#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    /// Always `ok` (blockers are errors).
    pub status: &'static str,
    /// Workload name.
    pub workload: String,
    /// Route: source dialect to target dialect.
    pub route: &'static str,
    /// Identities.
    pub identity: RouteIdentity,
    /// Canonical source relation.
    pub source_relation: String,
    /// Source authority version and profile.
    pub source_authority: String,
    /// Unique key.
    pub unique_key: Vec<String>,
    /// Delete plan mode.
    pub delete_mode: dpone_policy_model::delete_mode::Mode,
    /// Target coordinates (schema.table in the pinned database).
    pub target: String,
    /// State location, and (SQL Server) what a run requires of it.
    pub state_location: String,
    /// What this check established: it reads the manifest and the registry only.
    pub checked: Vec<&'static str>,
    /// What this check did NOT verify (no server is contacted): verified by `run` before any
    /// source I/O, and for the pins by `check --connections`.
    pub not_checked: Vec<&'static str>,
    /// State schema conflict evidence, if any.
    pub state_schema_conflict: Option<String>,
    /// Deprecations.
    pub deprecations: Vec<String>,
}

/// What `plan` reports: the check plus the full delete plan and its evidence.
#[derive(Clone, Debug, Serialize)]
pub struct PlanReport {
    /// The check.
    #[serde(flatten)]
    pub check: CheckReport,
    /// Business columns, in order.
    pub business_columns: Vec<String>,
    /// The delete plan.
    pub delete_plan: DeletePlan,
    /// Evidence of the delete-mode decision.
    pub delete_plan_evidence: serde_json::Value,
    /// Guards (ratios in ppm).
    pub guards: dpone_policy_model::guard::DeleteGuards,
    /// Empty snapshot policy.
    pub empty_snapshot: dpone_policy_model::guard::EmptySnapshotPolicy,
    /// Steps of a run, in order.
    pub steps: Vec<&'static str>,
}

/// The fixed order of a run on a PostgreSQL target.
pub const POSTGRES_RUN_STEPS: &[&str] = &[
    "preflight target/state pins and catalogs",
    "probe receipt of this invocation (replayed only under the route fingerprint it was committed under; source-free)",
    "read state and preview the repair authority",
    "source: REPEATABLE READ READ ONLY, lock relation ACCESS SHARE, verify authority and OIDs, U/H",
    "source: stream delta [previous, H) and complete keys with binary COPY to artifacts",
    "validate envelope and artifacts (checksum, completeness, null keys, counts, scope)",
    "target: BEGIN SERIALIZABLE, advisory lock, detection timestamp",
    "target: re-read state and authority under the lock, stage payloads, duplicate-key check",
    "target: missing-key population, guard decision",
    "target: update changed, reactivate, insert, missing-key action (exact RETURNING counts)",
    "target: bidirectional active-key parity and metric invariants",
    "target: checkpoint CAS, commit receipt, authority consumption, run row, COMMIT",
    "on acknowledgement loss: probe the receipt before any retry",
];

/// The fixed order of a run on a SQL Server target (`adapters/mssql`; staging comes before the
/// run transaction and its lock, docs/mssql-target.md).
pub const MSSQL_RUN_STEPS: &[&str] = &[
    "server check on every session: SQL Server 2016+ or Managed Instance, not Babelfish (SERVERPROPERTY, @@VERSION, edition); then the session options",
    "preflight: VIEW ANY DATABASE, target/staging/state database pins, state on the target's instance under the same principal, target columns and bulk-load types, key index, state catalog",
    "probe receipt of this invocation (replayed only under the route fingerprint it was committed under; source-free)",
    "read state and preview the repair authority",
    "source: REPEATABLE READ READ ONLY, lock relation ACCESS SHARE, verify authority and OIDs, U/H",
    "source: stream delta [previous, H) and complete keys with binary COPY to artifacts",
    "validate envelope and artifacts (checksum, completeness, null keys, counts, scope)",
    "target: run connection re-checks the server, pins and columns; staging lease on the pinned staging database",
    "staging (before the lock): key checks, bulk load into per-run staging tables between lease checks, duplicate and null keys, staged counts",
    "target: BEGIN TRANSACTION (SERIALIZABLE), sp_getapplock on the target identity owned by the transaction, detection timestamp",
    "target: re-read state and authority under the lock (UPDLOCK, HOLDLOCK), missing-key population, guard decision",
    "target: update changed, reactivate, insert, missing-key action (exact OUTPUT ... INTO counts, no MERGE)",
    "target: bidirectional active-key parity and metric invariants",
    "target: checkpoint CAS, commit receipt, authority consumption, run row (three-part state names), COMMIT",
    "staging lease drops the run's staging tables",
    "on acknowledgement loss: probe the receipt before any retry",
];

/// What `check` establishes without I/O, on either target.
const CHECKED: &[&str] = &[
    "manifest and registry parse strictly and resolve (every database role has its pin)",
    "identities and the route fingerprint computed from the pins",
    "delete plan decided by the delete-mode policy component",
];

const POSTGRES_NOT_CHECKED: &[&str] = &[
    "no server was contacted: the source authority, the target database pin, the state catalog and the target's columns are verified by run before any source I/O; check --connections verifies the pins",
];

const MSSQL_NOT_CHECKED: &[&str] = &[
    "no server was contacted: the server's kind (SQL Server 2016+, not Babelfish), VIEW ANY DATABASE and the target, staging and state database pins are verified by run before any source I/O, and the pins by check --connections",
    "that the state database is on the target's SQL Server instance under the same principal is verified by run's preflight, not here",
    "the target's column types against the bulk-load limits, its key index and the state catalog are verified by run's preflight, not here",
];
impl Route {
    /// Resolves and checks a route. Pure: reads only the process environment through `env`.
    pub fn prepare(
        manifest: Manifest,
        registry: &Registry,
        env: &dyn Environment,
        policies: &dyn PolicyPort,
    ) -> Result<Self> {
        let resolved = registry.resolve(&manifest, env)?;
        let identity = RouteIdentity::compute(&manifest, &resolved);
        let facts = DeleteModeFacts {
            delete_policy: manifest.delete_policy.clone(),
            soft_delete_mode: manifest.soft_delete_mode.clone(),
            business_columns: manifest.business_columns(),
        };
        let judged = policies.delete_mode(&facts)?;
        let plan = match judged.decision {
            PlanDecision::Plan(plan) => plan,
            PlanDecision::Reject(reason) => {
                return Err(XminError::new(
                    ErrorCode::DeleteModeRejected,
                    format!("{}: {}", reason.code, reason.message),
                ));
            }
        };
        Ok(Self {
            manifest,
            resolved,
            identity,
            plan,
            plan_evidence: judged.evidence,
        })
    }

    /// The `check` report.
    pub fn check_report(&self) -> CheckReport {
        let sa = &self.resolved.source_authority;
        CheckReport {
            status: "ok",
            workload: self.manifest.name.clone(),
            route: match self.manifest.target_kind {
                TargetKind::Postgres => "postgres_xmin_to_postgres_key_snapshot",
                TargetKind::Mssql => "postgres_xmin_to_mssql_key_snapshot",
            },
            identity: self.identity.clone(),
            source_relation: format!("{}.{}", sa.schema, sa.relation),
            source_authority: format!("v{} {:?}", sa.version, sa.profile),
            unique_key: self.manifest.unique_key.clone(),
            delete_mode: self.plan.mode,
            target: format!(
                "{}.{}",
                self.manifest.target_schema, self.manifest.target_table
            ),
            state_location: match &self.resolved.target_pins {
                TargetPins::Postgres(_) => format!(
                    "{} (target_atomic, same database as the target)",
                    self.resolved.state_schema
                ),
                TargetPins::SqlServer(p) => format!(
                    "{}.{} (target_atomic: required on the target's SQL Server instance under \
                     the same principal; not verified by check, verified by run's preflight)",
                    p.pin(MssqlRole::State).name,
                    self.resolved.state_schema
                ),
            },
            // The SQL Server adapter's own checks without I/O are added by the caller that ran
            // them (the CLI, `MssqlTargetSpec::PLAN_CHECKS`).
            checked: CHECKED.to_vec(),
            not_checked: match self.manifest.target_kind {
                TargetKind::Postgres => POSTGRES_NOT_CHECKED.to_vec(),
                TargetKind::Mssql => MSSQL_NOT_CHECKED.to_vec(),
            },
            state_schema_conflict: self.resolved.state_schema_conflict.clone(),
            deprecations: self.manifest.deprecations.clone(),
        }
    }

    /// The steps of a run of this route, in order (the target dialect's own).
    pub fn run_steps(&self) -> &'static [&'static str] {
        match self.manifest.target_kind {
            TargetKind::Postgres => POSTGRES_RUN_STEPS,
            TargetKind::Mssql => MSSQL_RUN_STEPS,
        }
    }

    /// The `plan` report.
    pub fn plan_report(&self) -> PlanReport {
        PlanReport {
            check: self.check_report(),
            business_columns: self.manifest.business_columns(),
            delete_plan: self.plan.clone(),
            delete_plan_evidence: self.plan_evidence.clone(),
            guards: self.manifest.guards,
            empty_snapshot: self.manifest.empty_snapshot,
            steps: self.run_steps().to_vec(),
        }
    }
}
