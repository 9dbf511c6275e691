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
    /// State location.
    pub state_location: String,
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

/// The fixed order of a run.
pub const RUN_STEPS: &[&str] = &[
    "preflight target/state pins and catalogs",
    "probe receipt of this invocation (replay is source-free)",
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
                    "{}.{} (target_atomic, same SQL Server instance and principal as the target)",
                    p.pin(MssqlRole::State).name,
                    self.resolved.state_schema
                ),
            },
            state_schema_conflict: self.resolved.state_schema_conflict.clone(),
            deprecations: self.manifest.deprecations.clone(),
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
            steps: RUN_STEPS.to_vec(),
        }
    }
}
