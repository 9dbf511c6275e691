//! `dpone-host demo`: the README's main job at this stage. Loads every shipped policy at its
//! embedded pin (through the checked, authenticated precompiled cache when `--cache-dir` is
//! given; compiled otherwise), evaluates the embedded sample decision of each
//! kind in a fresh sandbox, and prints decisions, evidence and load reports as JSON.

use crate::exit::{Failure, print_report};
use crate::render::{Report, Summary, Verdict, clean, decision_outcome};
use crate::shipped;
use clap::Args;
use dpone_policy_runtime::{DecisionEvidence, LoadReport, PolicyKind, Sha256Digest};
use serde::Serialize;
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
    print_report(&DemoReport {
        engine_fingerprint: runtime.engine_fingerprint(),
        bundle: source.bundle_evidence().cloned(),
        pins_verified: loads,
        decisions,
    })
}

/// The demo's report: what was loaded at which pin, and each sample decision's evidence.
#[derive(Serialize)]
pub struct DemoReport {
    /// Fingerprint of the engine that compiled or loaded the components.
    pub engine_fingerprint: Sha256Digest,
    /// Verification evidence of the signed bundle the components came from; `null` for the
    /// shipped components.
    pub bundle: Option<serde_json::Value>,
    /// Each component's load report.
    pub pins_verified: Vec<LoadReport>,
    /// Each sample decision's evidence.
    pub decisions: Vec<DecisionEvidence>,
}

impl Report for DemoReport {
    const SORTED_KEYS: bool = true;
    /// One line per decision; its outcome is read from the component's output (JSON).
    fn summary(&self) -> Summary {
        let mut s = Summary::new(
            Verdict::Done,
            format!(
                "{} sample decisions by the pinned components",
                self.decisions.len()
            ),
        );
        for d in &self.decisions {
            s.line(
                &format!("{} {}", clean(d.kind), clean(d.function)),
                format!("{} (fuel {})", decision_outcome(&d.output), d.fuel_used),
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::golden::assert_pinned;
    use dpone_policy_runtime::CodeSource;
    use serde_json::json;

    fn evidence(
        kind: PolicyKind,
        function: &'static str,
        output: serde_json::Value,
    ) -> DecisionEvidence {
        DecisionEvidence {
            kind,
            function,
            component_sha256: Sha256Digest::from([1; 32]),
            wit_package: "dpone:policy@0.1.0",
            input_sha256: Sha256Digest::from([2; 32]),
            output,
            fuel_used: 1200,
        }
    }

    fn report(bundle: Option<serde_json::Value>) -> DemoReport {
        DemoReport {
            engine_fingerprint: Sha256Digest::from([3; 32]),
            bundle,
            pins_verified: vec![LoadReport {
                kind: PolicyKind::Guard,
                component_sha256: Sha256Digest::from([1; 32]),
                size: 4096,
                code_source: CodeSource::Compiled,
                load_micros: 5000,
            }],
            decisions: vec![
                evidence(PolicyKind::Guard, "decide", json!({"allow": {}})),
                evidence(
                    PolicyKind::DeleteMode,
                    "plan",
                    json!({"decision": "soft-delete", "reason": "r"}),
                ),
                evidence(PolicyKind::Scope, "decide", json!("admit")),
            ],
        }
    }

    #[test]
    fn the_demo_report_prints_the_bytes_of_the_value_it_replaces() {
        for bundle in [
            None,
            Some(json!({"bundle": {"name": "shipped", "version": "1"}})),
        ] {
            let r = report(bundle.clone());
            assert_eq!(
                crate::render::report_json(&r).expect("json"),
                serde_json::to_string_pretty(&json!({
                    "engine_fingerprint": r.engine_fingerprint,
                    "bundle": bundle,
                    "pins_verified": r.pins_verified,
                    "decisions": r.decisions,
                }))
                .expect("json")
            );
        }
    }

    #[test]
    fn the_demo_report_is_pinned() {
        assert_pinned("demo", &report(None));
    }
}
