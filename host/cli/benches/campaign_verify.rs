//! Cost of `campaign verify` end to end, in process: one execution grant attested offline by the
//! test signer, then strict parsing of policy, grant, composition, request and release set, the
//! policy pin, the closed GitHub-attestation adapter (trusted root pinned and parsed, bundle,
//! certificate chain, RFC 3161 timestamp, DSSE signature, identity claims), reopen, and the scope
//! decisions of the request's three workloads through the **pinned scope component** (a fresh
//! sandbox each). This is the command's own code (`src/campaign_cmd/pipeline.rs`), without file
//! reading and process start-up. Prints p50 and p90 of a plain timing loop after criterion's
//! report.
//!
//! `cargo xtask policies` first (the scope component), then
//! `cargo bench -p dpone-host --bench campaign_verify`

#[path = "../tests/support/campaign.rs"]
mod campaign;
#[allow(dead_code)]
#[path = "../src/campaign_cmd/pipeline.rs"]
mod pipeline;
// The pipeline decides through the instrumented wrapper; never initialised here, so telemetry
// is off, as in a command run without the OTel environment.
// The binary's own module (`src/telemetry.rs` and its `telemetry/http.rs`).
// Built as a test target: its unit tests are compiled but not run (harness = false).
#[allow(dead_code, unused_imports)]
#[path = "../src"]
mod src {
    pub mod telemetry;
}
use src::telemetry;

/// The exit statuses [`telemetry`] refers to.
mod exit {
    /// Not finished: retry the same invocation.
    pub const RETRY: u8 = 75;
}

use criterion::Criterion;
use dpone_policy_build::ComponentLock;
use dpone_policy_runtime::{Budget, PolicyKind, PolicyRuntime, SandboxConfig};
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let root_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let lock = ComponentLock::from_json(
        &std::fs::read_to_string(root_dir.join("policies/components.lock.json")).expect("lock"),
    )
    .expect("lock parses");
    let pin = lock.components["scope"].sha256.parse().expect("pin");
    let component = std::fs::read(root_dir.join("target/components/scope.wasm"))
        .expect("target/components/scope.wasm: run `cargo xtask policies` first");
    let runtime = PolicyRuntime::new(SandboxConfig::default()).expect("runtime");
    let scope = runtime
        .load(PolicyKind::Scope, &component, pin, Budget::default())
        .expect("the scope component loads at its pin");

    let docs = campaign::Docs::new();
    let policy = campaign::canon(&docs.policy);
    let policy_digest = docs.policy_digest();
    let grant = campaign::canon(&docs.egrant);
    let attestation = campaign::attest(&grant, &campaign::identity());
    let trusted_root = campaign::trusted_root();
    let composition = campaign::canon(&docs.composition);
    let request = campaign::canon(&docs.request);
    let release = campaign::canon(&docs.release);
    let inputs = pipeline::Inputs {
        policy: &policy,
        policy_digest: &policy_digest,
        grant: &grant,
        attestation: &attestation,
        trusted_root: &trusted_root,
        composition: &composition,
        request: Some(&request),
        release_set: Some(&release),
        workload: None,
        now: campaign::E_NOW,
        revocation_epoch: None,
    };
    let evidence = pipeline::verify_grant(&inputs, &scope).expect("the benchmarked grant verifies");
    assert_eq!(evidence.scope.decisions.len(), 3);

    let mut one = inputs;
    one.workload = Some("pg-customers");
    let mut c = Criterion::default().configure_from_args();
    c.bench_function("campaign_verify/execution_grant_3_workloads", |b| {
        b.iter(|| pipeline::verify_grant(black_box(&inputs), &scope))
    });
    c.bench_function("campaign_verify/execution_grant_1_workload", |b| {
        b.iter(|| pipeline::verify_grant(black_box(&one), &scope))
    });
    c.final_summary();

    for (name, inputs) in [("3 workloads", &inputs), ("1 workload", &one)] {
        let mut samples: Vec<f64> = (0..500)
            .map(|_| {
                let start = Instant::now();
                let result = pipeline::verify_grant(inputs, &scope);
                let elapsed = start.elapsed().as_secs_f64() * 1e6;
                assert!(result.is_ok());
                elapsed
            })
            .collect();
        samples.sort_by(f64::total_cmp);
        eprintln!(
            "campaign_verify ({name}): p50 {:.0} us, p90 {:.0} us over {} runs",
            samples[samples.len() / 2],
            samples[samples.len() * 9 / 10],
            samples.len()
        );
    }
}
