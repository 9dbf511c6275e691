//! `dpone-host demo`: the README's main job at this stage. Loads every shipped policy at its
//! embedded pin (through the checked, authenticated precompiled cache when `--cache-dir` is
//! given; compiled otherwise), evaluates the embedded sample decision of each
//! kind in a fresh sandbox, and prints decisions, evidence and load reports as JSON.

use crate::exit::{Failure, print_json};
use crate::shipped;
use clap::Args;
use dpone_policy_runtime::PolicyKind;
use std::path::PathBuf;

/// `demo` options.
#[derive(Args)]
pub struct DemoArgs {
    /// Directory of the shipped components, overriding the copies embedded in the binary
    /// (still checked against the embedded pins).
    #[arg(long)]
    components_dir: Option<PathBuf>,
    /// Precompiled-code cache directory (checked like ssh key directories; records are
    /// authenticated with the key at `DPONE_CACHE_KEY`). Without it, every component is compiled.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
}

/// The embedded sample facts: (kind, function, JSON).
const SAMPLES: &[(PolicyKind, &str, &str)] = &[
    (
        PolicyKind::Admission,
        "admit-static",
        include_str!("../../../fixtures/samples/admission-static.json"),
    ),
    (
        PolicyKind::Admission,
        "admit-runtime",
        include_str!("../../../fixtures/samples/admission-runtime.json"),
    ),
    (
        PolicyKind::DeleteMode,
        "plan",
        include_str!("../../../fixtures/samples/delete-mode.json"),
    ),
    (
        PolicyKind::Guard,
        "decide",
        include_str!("../../../fixtures/samples/guard.json"),
    ),
    (
        PolicyKind::Scope,
        "decide",
        include_str!("../../../fixtures/samples/scope.json"),
    ),
];

/// The embedded sample input of a kind's function.
pub fn sample_input(kind: PolicyKind, function: &str) -> Result<serde_json::Value, Failure> {
    let (_, _, text) = SAMPLES
        .iter()
        .find(|(k, f, _)| *k == kind && *f == function)
        .ok_or_else(|| {
            Failure::bad_input(
                "DPONE_CLI_NO_SAMPLE",
                format!("no sample for {kind} {function}"),
            )
        })?;
    serde_json::from_str(text)
        .map_err(|e| Failure::internal("DPONE_CLI_SAMPLE_MALFORMED", e.to_string()))
}

/// Runs the demo.
pub fn run(args: DemoArgs, source: &shipped::PolicySourceArgs) -> Result<(), Failure> {
    let runtime = shipped::runtime(args.cache_dir.as_deref())?;
    let source = shipped::PolicySource::resolve(&runtime, args.components_dir.as_deref(), source)?;
    let mut loads = Vec::new();
    let mut decisions = Vec::new();
    for kind in PolicyKind::ALL {
        let loaded = source.policy(kind)?;
        loads.push(loaded.report().clone());
        for (_, function, _) in SAMPLES.iter().filter(|(k, _, _)| *k == kind) {
            let input = sample_input(kind, function)?;
            let decided =
                crate::telemetry::decide(kind, function, || loaded.decide_json(function, &input))?;
            decisions.push(decided.evidence);
        }
    }
    print_json(&serde_json::json!({
        "engine_fingerprint": runtime.engine_fingerprint(),
        "bundle": source.bundle_evidence(),
        "pins_verified": loads,
        "decisions": decisions,
    }))
}
