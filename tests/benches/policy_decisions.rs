//! Benchmark of policy decisions, all in one run on the same machine:
//! native decision (the plain Rust core), fresh-sandbox decision p50/p99 with the pooling
//! allocator and, as the baseline, with on-demand allocation; warm load from the precompiled
//! cache; cold compile. Prints one JSON document, with the CPU model and the load average at the
//! start and end of the run (timings on a busy machine are noise; see docs/performance.md for
//! instruction counts, which are not).
//!
//! `cargo bench -p dpone-integration-tests --bench policy_decisions` (needs `cargo xtask policies`).

#![allow(clippy::print_stdout)] // the report is this binary's output

use dpone_integration_tests::{component, guard_sample, pin};
use dpone_policy_model::guard::GuardFacts;
use dpone_policy_runtime::{Budget, PolicyKind, PolicyRuntime, PrecompiledCache, SandboxConfig};
use std::hint::black_box;
use std::time::{Duration, Instant};

fn percentile(sorted: &[Duration], p: usize) -> f64 {
    let last = sorted.len().saturating_sub(1);
    sorted
        .get(last * p / 100)
        .map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

fn summary(mut samples: Vec<Duration>) -> serde_json::Value {
    samples.sort_unstable();
    serde_json::json!({
        "p50_us": percentile(&samples, 50),
        "p99_us": percentile(&samples, 99),
        "min_us": percentile(&samples, 0),
        "samples": samples.len(),
    })
}

fn sandboxed_decisions(
    config: SandboxConfig,
    facts: &GuardFacts,
    n: usize,
) -> (serde_json::Value, u64) {
    let runtime = PolicyRuntime::new(config).expect("runtime");
    let guard = runtime
        .load(
            PolicyKind::Guard,
            &component("guard"),
            pin(PolicyKind::Guard),
            Budget::default(),
        )
        .expect("guard loads");
    for _ in 0..2_000 {
        black_box(guard.guard_decide(facts).expect("decides"));
    }
    let mut fuel = 0;
    let samples = (0..n)
        .map(|_| {
            let t = Instant::now();
            let decided = guard.guard_decide(black_box(facts)).expect("decides");
            let elapsed = t.elapsed();
            fuel = decided.evidence.fuel_used;
            elapsed
        })
        .collect();
    (summary(samples), fuel)
}

/// The 1-, 5- and 15-minute load averages.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

fn main() {
    let load_at_start = load_average();
    let n: usize = std::env::var("DPONE_BENCH_SAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000);
    let facts: GuardFacts = guard_sample();

    if std::env::var("DPONE_BENCH_ONLY").is_ok_and(|v| v == "pooled") {
        // Profiling aid: only the pooled sandbox loop.
        let keep = std::env::var("DPONE_BENCH_KEEP")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1 << 20);
        let pagemap = std::env::var("DPONE_BENCH_PAGEMAP").map_or(true, |v| v != "0");
        let config = SandboxConfig {
            keep_resident_bytes: keep,
            pagemap_scan: pagemap,
            ..SandboxConfig::default()
        };
        let (pooled, _) = sandboxed_decisions(config, &facts, n);
        println!("{pooled}");
        return;
    }

    // Native: batches of 1,000 calls, per-call time per batch.
    let batches = (0..(n / 100).max(10))
        .map(|_| {
            let t = Instant::now();
            for _ in 0..1_000 {
                black_box(dpone_policy_guard::decide(black_box(&facts)));
            }
            t.elapsed() / 1_000
        })
        .collect();
    let native = summary(batches);

    // Evidence work alone: canonical JSON and sha256 of the input, as every decision does.
    let evidence_only = (0..n / 10)
        .map(|_| {
            let t = Instant::now();
            let bytes = dpone_policy_runtime::canonical_json(black_box(&facts)).expect("json");
            black_box(dpone_policy_runtime::Sha256Digest::of(&bytes));
            t.elapsed()
        })
        .collect();
    let evidence_only = summary(evidence_only);

    let (pooled, fuel) = sandboxed_decisions(SandboxConfig::default(), &facts, n);
    let on_demand_config = SandboxConfig {
        pooling: false,
        ..SandboxConfig::default()
    };
    let (on_demand, _) = sandboxed_decisions(on_demand_config, &facts, n / 5);
    // Both pooled-memory resets, whichever is this CPU's default: resetting the resident part of
    // each memory in place (memset) and finding the dirty pages with the kernel's PAGEMAP_SCAN.
    // The default is chosen per CPU vendor (see `SandboxConfig::pagemap_scan` and
    // docs/performance.md); these two runs show the choice was right on this machine.
    let reset_variant = |pagemap_scan| {
        sandboxed_decisions(
            SandboxConfig {
                pagemap_scan,
                ..SandboxConfig::default()
            },
            &facts,
            n,
        )
        .0
    };
    let pooled_reset_in_place = reset_variant(false);
    let pooled_pagemap_scan = reset_variant(true);
    let pagemap_scan_default = SandboxConfig::default().pagemap_scan;
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_default();

    // Cold compile: a new runtime without cache each time.
    let bytes = component("guard");
    let cold = (0..10)
        .map(|_| {
            let runtime = PolicyRuntime::new(SandboxConfig::default()).expect("runtime");
            let t = Instant::now();
            black_box(
                runtime
                    .load(
                        PolicyKind::Guard,
                        &bytes,
                        pin(PolicyKind::Guard),
                        Budget::default(),
                    )
                    .expect("load"),
            );
            t.elapsed()
        })
        .collect();

    // Warm load: verified precompiled code from the cache.
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = PrecompiledCache::open(&dir.path().join("cache"), &dir.path().join("cache.key"))
        .expect("cache opens");
    let runtime = PolicyRuntime::new(SandboxConfig::default())
        .expect("runtime")
        .with_cache(cache);
    runtime
        .load(
            PolicyKind::Guard,
            &bytes,
            pin(PolicyKind::Guard),
            Budget::default(),
        )
        .expect("first load fills the cache");
    let warm = (0..200)
        .map(|_| {
            let t = Instant::now();
            black_box(
                runtime
                    .load(
                        PolicyKind::Guard,
                        &bytes,
                        pin(PolicyKind::Guard),
                        Budget::default(),
                    )
                    .expect("load"),
            );
            t.elapsed()
        })
        .collect();

    let report = serde_json::json!({
        "cpu": cpu,
        "load_average": {"start": load_at_start, "end": load_average()},
        "policy": "guard",
        "fuel_per_decision": fuel,
        "native_decision": native,
        "input_digest_only": evidence_only,
        "fresh_sandbox_decision_pooling": pooled,
        "fresh_sandbox_decision_on_demand_baseline": on_demand,
        "pagemap_scan_default": pagemap_scan_default,
        "fresh_sandbox_decision_pooling_reset_in_place": pooled_reset_in_place,
        "fresh_sandbox_decision_pooling_pagemap_scan": pooled_pagemap_scan,
        "warm_load_from_cache": summary(warm),
        "cold_compile": summary(cold),
        "targets": {"decision_p50_us": 6, "decision_p99_us": 25, "warm_load_us": 1000},
    });
    println!("{}", serde_json::to_string_pretty(&report).expect("json"));
}
