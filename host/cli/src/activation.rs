//! The activation gate: the only way policies from a bundle reach the host.
//!
//! [`activate_bundle`] runs, in order, and refuses at the first failure with a stable code:
//!
//! 1. `dpone_trust::bundle::verify`: the manifest parses strictly, the signatures meet the
//!    trust policy, every file matches the manifest (codes `DPONE_BUNDLE_*`);
//! 2. the manifest's WIT package is the one the policy runtime implements;
//! 3. every component is loaded by the policy runtime **at the digest from the verified
//!    manifest** with the manifest's fuel and memory budget (codes `DPONE_POLICY_*`: pin,
//!    imports, world, version, budget above the host's ceilings); a declared wasm stack larger
//!    than the host's is refused;
//! 4. every component passes the **host's** conformance tables for its kind and the supported
//!    WIT package ([`dpone_decision_table::conformance`], compiled into the binary): properties
//!    every correct policy has, which the bundle's author neither writes nor chooses; one failing
//!    row refuses the whole bundle (`DPONE_ACTIVATION_CONFORMANCE_FAILED`);
//! 5. every component has at least one decision table in the bundle, every row names the
//!    decision variant it expects (`expect: {}` proves nothing and is refused,
//!    `DPONE_ACTIVATION_TABLE_EXPECTATION_EMPTY`), and every row of every table is run against
//!    the loaded component; one disagreeing row refuses the whole bundle
//!    (`DPONE_ACTIVATION_TABLE_DISAGREES`).
//!
//! The activation evidence lists every host conformance row that ran (table, table version,
//! row id, outcome) beside the bundle's own table results.
//!
//! Only then does the caller get an [`ActivatedBundle`], whose decisions carry the bundle's
//! verification evidence (manifest digest, signers, trust policy digest) beside the runtime's
//! per-decision evidence.
//!
//! Architecture Invariant: this file is composition only. It knows `dpone-trust`,
//! `dpone-policy-runtime` and `dpone-decision-table`, and nothing of engines or adapters.

use dpone_decision_table::DecisionTable;
use dpone_decision_table::conformance::{self, ConformanceOutcome, ConformanceTable};
use dpone_policy_runtime::{
    Budget, LoadReport, LoadedPolicy, PolicyError, PolicyKind, PolicyRuntime,
    SUPPORTED_WIT_PACKAGE, Sha256Digest,
};
use dpone_trust::TrustError;
use dpone_trust::bundle::{self, BundleFiles, VerifiedBundle};
use dpone_trust::freshness;
use dpone_trust::policy::TrustPolicy;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Why a bundle was not activated.
#[derive(Debug, thiserror::Error)]
pub enum ActivationError {
    /// The bundle did not verify.
    #[error(transparent)]
    Trust(#[from] TrustError),
    /// The policy runtime refused a component at load, or a decision failed closed.
    #[error("the {kind} policy failed: {source}")]
    Load {
        /// Policy kind.
        kind: String,
        /// The runtime's refusal.
        #[source]
        source: PolicyError,
    },
    /// The bundle targets another WIT package than the runtime implements.
    #[error("the bundle targets {found}, the policy runtime implements {supported}")]
    WitMismatch {
        /// From the manifest.
        found: String,
        /// The runtime's.
        supported: &'static str,
    },
    /// A component declares more wasm stack than the host provides.
    #[error(
        "the {kind} component declares {declared} bytes of wasm stack, the host provides {available}"
    )]
    StackUnavailable {
        /// Policy kind.
        kind: String,
        /// Declared in the manifest.
        declared: u64,
        /// The runtime's engine-wide limit.
        available: usize,
    },
    /// A component ships without any decision table, so it cannot be checked.
    #[error("the {kind} component ships no decision table; untested components are not activated")]
    Untested {
        /// Policy kind.
        kind: String,
    },
    /// A table file is not a decision table, or has no rows.
    #[error("table `{file}` is unusable: {detail}")]
    TableMalformed {
        /// Bundle-relative file.
        file: String,
        /// Why.
        detail: String,
    },
    /// A table names another kind than the manifest declares for it.
    #[error("table `{file}` is for {found}, the manifest lists it for {declared}")]
    TableKindMismatch {
        /// Bundle-relative file.
        file: String,
        /// In the table.
        found: String,
        /// In the manifest.
        declared: String,
    },
    /// A row of a shipped decision table disagrees with the shipped component.
    #[error("table `{file}` row {row:?} disagrees with the component: {mismatch}")]
    TableDisagrees {
        /// Bundle-relative file.
        file: String,
        /// Row name.
        row: String,
        /// Where and how.
        mismatch: String,
    },
    /// A table row expects nothing a decision could fail (`expect: {}`, or no known variant).
    #[error("table `{file}` is unusable: {detail}")]
    TableExpectationEmpty {
        /// Bundle-relative file.
        file: String,
        /// Which row and why.
        detail: String,
    },
    /// A component fails a row of the host's conformance tables.
    #[error(
        "the {kind} component fails host conformance row {row} (table version {version}): {detail}"
    )]
    ConformanceFailed {
        /// Policy kind.
        kind: String,
        /// Row id.
        row: String,
        /// Version of the host table.
        version: u32,
        /// What was wrong with the decision.
        detail: String,
    },
    /// The host has no usable conformance table for a kind (fails closed).
    #[error("no host conformance table: {0}")]
    ConformanceUnavailable(String),
    /// A decision was asked of a policy kind the bundle does not ship.
    #[error("the bundle ships no {kind} policy")]
    PolicyAbsent {
        /// Policy kind.
        kind: String,
    },
    /// A kind known to the bundle format is unknown to the runtime.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ActivationError {
    /// Stable machine code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Trust(err) => err.code(),
            Self::Load { source, .. } => source.code(),
            Self::WitMismatch { .. } => "DPONE_ACTIVATION_WIT_VERSION_MISMATCH",
            Self::StackUnavailable { .. } => "DPONE_ACTIVATION_STACK_UNAVAILABLE",
            Self::Untested { .. } => "DPONE_ACTIVATION_COMPONENT_UNTESTED",
            Self::TableMalformed { .. } => "DPONE_ACTIVATION_TABLE_MALFORMED",
            Self::TableKindMismatch { .. } => "DPONE_ACTIVATION_TABLE_KIND_MISMATCH",
            Self::TableDisagrees { .. } => "DPONE_ACTIVATION_TABLE_DISAGREES",
            Self::TableExpectationEmpty { .. } => "DPONE_ACTIVATION_TABLE_EXPECTATION_EMPTY",
            Self::ConformanceFailed { .. } => "DPONE_ACTIVATION_CONFORMANCE_FAILED",
            Self::ConformanceUnavailable(_) => "DPONE_ACTIVATION_CONFORMANCE_UNAVAILABLE",
            Self::PolicyAbsent { .. } => "DPONE_ACTIVATION_POLICY_ABSENT",
            Self::Internal(_) => "DPONE_ACTIVATION_INTERNAL",
        }
    }

    /// Whether the bundle was refused (as opposed to an internal error or bad operator input).
    pub fn is_refusal(&self) -> bool {
        match self {
            Self::Trust(err) => err.class() == dpone_trust::ErrorClass::Refused,
            Self::Internal(_) | Self::ConformanceUnavailable(_) => false,
            _ => true,
        }
    }
}

/// Policies loaded from a verified bundle whose decision tables all agreed.
pub struct ActivatedBundle {
    policies: BTreeMap<PolicyKind, LoadedPolicy>,
    bundle_evidence: Value,
    activation_evidence: ActivationEvidence,
}

/// Everything the gate established: the bundle's verification, the engine, every load, every
/// decision table's agreement and every host conformance row.
#[derive(Clone, Debug, Serialize)]
pub struct ActivationEvidence {
    /// The bundle's verification, as [`dpone_trust::bundle::BundleEvidence::to_json`] spells it.
    #[serde(serialize_with = "bundle_evidence_json")]
    pub bundle: dpone_trust::bundle::BundleEvidence,
    /// The engine the components were compiled for.
    pub engine_fingerprint: String,
    /// Every component load, at its verified pin.
    pub loads: Vec<LoadReport>,
    /// Every decision table of the bundle, all rows agreeing.
    pub tables: Vec<TableAgreed>,
    /// The host's conformance tables, every row passing.
    pub host_conformance: HostConformance,
}

fn bundle_evidence_json<S: serde::Serializer>(
    e: &dpone_trust::bundle::BundleEvidence,
    s: S,
) -> Result<S::Ok, S::Error> {
    e.to_json().serialize(s)
}

/// One decision table of the bundle whose every row agreed.
#[derive(Clone, Debug, Serialize)]
pub struct TableAgreed {
    /// The table's file in the bundle.
    pub file: String,
    /// The policy kind.
    pub kind: String,
    /// The function the rows call.
    pub function: String,
    /// Rows in the table.
    pub rows: usize,
    /// Rows that agreed (all of them).
    pub agreed: usize,
    /// Fuel every row used together.
    pub fuel_used: u64,
}

/// The host conformance tables that ran against a bundle's components.
#[derive(Clone, Debug, Serialize)]
pub struct HostConformance {
    /// The WIT package the tables are for.
    pub wit_package: &'static str,
    /// Each table with every row's outcome.
    pub tables: Vec<ConformanceEvidence>,
}

/// The evidence of one host conformance table's run: table, version and every row's result.
#[derive(Clone, Debug, Serialize)]
pub struct ConformanceEvidence {
    /// The table format.
    pub format: String,
    /// The WIT package.
    pub wit_package: String,
    /// The policy kind.
    pub kind: String,
    /// The function.
    pub function: String,
    /// The table's version.
    pub table_version: u32,
    /// Every row's outcome.
    pub rows: Vec<ConformanceOutcome>,
    /// Rows that passed.
    pub passed: usize,
    /// Rows that failed.
    pub failed: usize,
}

impl ActivatedBundle {
    /// The loaded policy of `kind`, if the bundle ships one.
    pub fn policy(&self, kind: PolicyKind) -> Option<&LoadedPolicy> {
        self.policies.get(&kind)
    }

    /// Bundle verification evidence (manifest digest, signers, trust policy digest, pins).
    pub fn bundle_evidence(&self) -> &Value {
        &self.bundle_evidence
    }

    /// Everything the gate established: verification, loads and table results.
    pub fn activation_evidence(&self) -> &ActivationEvidence {
        &self.activation_evidence
    }

    /// Runs one decision and returns it with evidence that includes the bundle's verification.
    pub fn decide_json(
        &self,
        kind: PolicyKind,
        function: &str,
        input: &Value,
    ) -> Result<Value, ActivationError> {
        let policy = self
            .policy(kind)
            .ok_or_else(|| ActivationError::PolicyAbsent {
                kind: kind.as_str().to_owned(),
            })?;
        let decided =
            policy
                .decide_json(function, input)
                .map_err(|source| ActivationError::Load {
                    kind: kind.as_str().to_owned(),
                    source,
                })?;
        let evidence = serde_json::to_value(&decided.evidence)
            .map_err(|err| ActivationError::Internal(err.to_string()))?;
        Ok(json!({
            "decision": decided.decision,
            "evidence": evidence,
            "bundle": self.bundle_evidence(),
        }))
    }
}

/// Verifies `files` against `trust`, loads every component at its verified pin and runs every
/// shipped decision table; refuses the bundle on any failure or disagreement.
#[allow(dead_code)] // the gate without a ledger; the CLI always records (tests use both)
pub fn activate_bundle(
    runtime: &PolicyRuntime,
    files: &BundleFiles,
    trust: &TrustPolicy,
) -> Result<ActivatedBundle, ActivationError> {
    let now = freshness::unix_now();
    let verified = bundle::verify(files, trust)?;
    freshness::check_window(verified.manifest(), now)?;
    activate_verified(runtime, &verified)
}

/// The activation gate with rollback protection, as the CLI runs it: the clock is read once;
/// the bundle verifies and is inside its signed validity window at that reading; then, under the
/// ledger's exclusive lock (one critical section across processes,
/// [`freshness::ActivationLedger::activate_locked`]), it must not be a rollback of its name (nor
/// a reused sequence, nor activated with a clock earlier than the last activation of its name)
/// according to the host's ledger at `ledger`, must pass [`activate_verified`], and only then
/// is the activation recorded.
pub fn activate_bundle_recorded(
    runtime: &PolicyRuntime,
    files: &BundleFiles,
    trust: &TrustPolicy,
    ledger: &std::path::Path,
) -> Result<ActivatedBundle, ActivationError> {
    let now = freshness::unix_now();
    let verified = bundle::verify(files, trust)?;
    let manifest = verified.manifest();
    freshness::check_window(manifest, now)?;
    let manifest_sha256 =
        dpone_trust::Sha256Digest::of(files.get(bundle::MANIFEST_FILE).unwrap_or_default());
    freshness::ActivationLedger::activate_locked(
        ledger,
        trust.sha256(),
        manifest,
        &manifest_sha256,
        now,
        || activate_verified(runtime, &verified),
    )
}

/// The gate after verification, for callers that already hold a [`VerifiedBundle`].
pub fn activate_verified(
    runtime: &PolicyRuntime,
    verified: &VerifiedBundle,
) -> Result<ActivatedBundle, ActivationError> {
    let manifest = verified.manifest();
    if manifest.wit_package != SUPPORTED_WIT_PACKAGE {
        return Err(ActivationError::WitMismatch {
            found: manifest.wit_package.clone(),
            supported: SUPPORTED_WIT_PACKAGE,
        });
    }

    let mut policies = BTreeMap::new();
    let mut loads: Vec<LoadReport> = Vec::new();
    for component in verified.components() {
        let kind: PolicyKind = component
            .kind
            .as_str()
            .parse()
            .map_err(ActivationError::Internal)?;
        let available = runtime.config().max_wasm_stack_bytes;
        if usize::try_from(component.budget.wasm_stack_bytes)
            .map_or(true, |declared| declared > available)
        {
            return Err(ActivationError::StackUnavailable {
                kind: kind.as_str().to_owned(),
                declared: component.budget.wasm_stack_bytes,
                available,
            });
        }
        let budget = Budget {
            fuel: component.budget.fuel,
            memory_bytes: component.budget.memory_bytes,
        };
        let pin = Sha256Digest::from(*component.sha256.as_bytes());
        let loaded = runtime
            .load(kind, component.bytes, pin, budget)
            .map_err(|source| ActivationError::Load {
                kind: kind.as_str().to_owned(),
                source,
            })?;
        loads.push(loaded.report().clone());
        policies.insert(kind, loaded);
    }

    let host_conformance = run_host_conformance(&policies)?;

    for kind in policies.keys() {
        if !verified
            .tables()
            .any(|t| t.entry.kind.as_str() == kind.as_str())
        {
            return Err(ActivationError::Untested {
                kind: kind.as_str().to_owned(),
            });
        }
    }

    let mut table_results = Vec::new();
    for table in verified.tables() {
        let file = table.entry.file.clone();
        let text =
            std::str::from_utf8(table.bytes).map_err(|_| ActivationError::TableMalformed {
                file: file.clone(),
                detail: "not UTF-8".into(),
            })?;
        let parsed =
            DecisionTable::from_json(text).map_err(|err| ActivationError::TableMalformed {
                file: file.clone(),
                detail: err.to_string(),
            })?;
        if parsed.kind != table.entry.kind.as_str() {
            return Err(ActivationError::TableKindMismatch {
                file,
                found: parsed.kind.clone(),
                declared: table.entry.kind.as_str().to_owned(),
            });
        }
        if parsed.rows.is_empty() {
            return Err(ActivationError::TableMalformed {
                file,
                detail: "the table has no rows".into(),
            });
        }
        parsed
            .check_expectations()
            .map_err(|detail| ActivationError::TableExpectationEmpty {
                file: file.clone(),
                detail,
            })?;
        let kind: PolicyKind = parsed.kind.parse().map_err(ActivationError::Internal)?;
        let policy = policies
            .get(&kind)
            .ok_or_else(|| ActivationError::Untested {
                kind: parsed.kind.clone(),
            })?;
        let mut fuel = 0u64;
        let outcomes = parsed.run(|input| {
            policy
                .decide_json(&parsed.function, input)
                .map(|decided| {
                    fuel = fuel.saturating_add(decided.evidence.fuel_used);
                    decided.decision
                })
                .map_err(|err| format!("{}: {err}", err.code()))
        });
        if let Some(failed) = outcomes.iter().find(|o| !o.passed) {
            return Err(ActivationError::TableDisagrees {
                file,
                row: failed.name.clone(),
                mismatch: failed.mismatch.clone().unwrap_or_default(),
            });
        }
        table_results.push(TableAgreed {
            file,
            kind: parsed.kind.clone(),
            function: parsed.function.clone(),
            rows: outcomes.len(),
            agreed: outcomes.len(),
            fuel_used: fuel,
        });
    }

    let bundle_evidence = verified.evidence().to_json();
    let activation_evidence = ActivationEvidence {
        bundle: verified.evidence().clone(),
        engine_fingerprint: runtime.engine_fingerprint().hex(),
        loads,
        tables: table_results,
        host_conformance,
    };
    Ok(ActivatedBundle {
        policies,
        bundle_evidence,
        activation_evidence,
    })
}

/// The host conformance tables of `kind` at the supported WIT package, each run against
/// `policy`: every table with the outcome of every row. Used by the activation gate and by
/// `dpone-host policy test --conformance`.
pub fn host_conformance(
    kind: PolicyKind,
    policy: &LoadedPolicy,
) -> Result<Vec<(ConformanceTable, Vec<ConformanceOutcome>)>, ActivationError> {
    let tables = conformance::host_tables(SUPPORTED_WIT_PACKAGE, kind.as_str())
        .map_err(|err| ActivationError::ConformanceUnavailable(err.to_string()))?;
    Ok(tables
        .into_iter()
        .map(|table| {
            let outcomes = table.run(|input| {
                policy
                    .decide_json(&table.function, input)
                    .map(|decided| decided.decision)
                    .map_err(|err| format!("{}: {err}", err.code()))
            });
            (table, outcomes)
        })
        .collect())
}

/// The evidence of one host conformance table's run.
pub fn conformance_evidence(
    table: &ConformanceTable,
    outcomes: &[ConformanceOutcome],
) -> ConformanceEvidence {
    ConformanceEvidence {
        format: table.format.clone(),
        wit_package: table.wit_package.clone(),
        kind: table.kind.clone(),
        function: table.function.clone(),
        table_version: table.table_version,
        rows: outcomes.to_vec(),
        passed: outcomes.iter().filter(|o| o.passed).count(),
        failed: outcomes.iter().filter(|o| !o.passed).count(),
    }
}

/// Step 4 of the gate: runs the host's conformance tables against every loaded component and
/// refuses at the first failing row; returns the evidence of every row that ran.
fn run_host_conformance(
    policies: &BTreeMap<PolicyKind, LoadedPolicy>,
) -> Result<HostConformance, ActivationError> {
    let mut tables = Vec::new();
    for (kind, policy) in policies {
        for (table, outcomes) in host_conformance(*kind, policy)? {
            if let Some(failed) = outcomes.iter().find(|o| !o.passed) {
                return Err(ActivationError::ConformanceFailed {
                    kind: kind.as_str().to_owned(),
                    row: failed.id.clone(),
                    version: table.table_version,
                    detail: failed.failure.clone().unwrap_or_default(),
                });
            }
            tables.push(conformance_evidence(&table, &outcomes));
        }
    }
    Ok(HostConformance {
        wit_package: SUPPORTED_WIT_PACKAGE,
        tables,
    })
}
