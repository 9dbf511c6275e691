//! Runs N pooled fresh-sandbox guard decisions on the shipped sample, for instruction counting:
//!
//! ```sh
//! cargo build --release -p dpone-policy-runtime --example decision_loop
//! valgrind --tool=callgrind --toggle-collect='*guard_decide*' \
//!     target/release/examples/decision_loop 2000
//! ```
//!
//! With `--toggle-collect` callgrind counts only the instructions inside `guard_decide`, so the
//! total divided by N (plus the warm-up) is the user-space cost of one decision, repeatable on a
//! busy machine. Run from the workspace root after `cargo xtask policies`.

#![allow(clippy::print_stdout, clippy::print_stderr)] // a measuring tool

use dpone_policy_model::guard::GuardFacts;
use dpone_policy_runtime::{Budget, PolicyKind, PolicyRuntime, SandboxConfig, Sha256Digest};
use std::hint::black_box;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let bytes =
        std::fs::read("target/components/guard.wasm").expect("target/components/guard.wasm");
    let lock: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string("policies/components.lock.json").expect("lock file"),
    )
    .expect("lock parses");
    let pin: Sha256Digest = lock["components"]["guard"]["sha256"]
        .as_str()
        .expect("guard pin")
        .parse()
        .expect("pin parses");
    let facts: GuardFacts = serde_json::from_str(
        &std::fs::read_to_string("fixtures/samples/guard.json").expect("guard sample"),
    )
    .expect("sample parses");
    let pagemap = std::env::var("DPONE_BENCH_PAGEMAP").map_or(true, |v| v != "0");
    let runtime = PolicyRuntime::new(SandboxConfig {
        pagemap_scan: pagemap,
        ..SandboxConfig::default()
    })
    .expect("runtime");
    let guard = runtime
        .load(PolicyKind::Guard, &bytes, pin, Budget::default())
        .expect("guard loads");
    let mut last = None;
    for _ in 0..n {
        last = Some(guard.guard_decide(black_box(&facts)).expect("decides"));
    }
    if let Some(decided) = last {
        println!(
            "{n} decisions; fuel {}; input {}",
            decided.evidence.fuel_used, decided.evidence.input_sha256
        );
    }
}
