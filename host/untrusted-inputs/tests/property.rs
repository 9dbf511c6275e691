//! Tier: unit (property). The bounded, deterministic run of the fuzz targets on stable: for
//! every input kind, its seeds, then mutations of them and arbitrary bytes, through the same
//! entry points as `host/fuzz`. A panic, or an error that replays the input or passes a
//! control, separator or bidi character through, fails the test with the failing input's
//! target, case number and generator seed.
//!
//! `DPONE_PROPERTY_CASES` (default 1000; a tenth for targets that compile WebAssembly) sets
//! the number of generated cases per target.

use dpone_untrusted_inputs::{TARGETS, Target, XorShift, mutate, seeds};
use std::panic::{AssertUnwindSafe, catch_unwind};

fn cases(target: &Target) -> usize {
    let base = std::env::var("DPONE_PROPERTY_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000usize);
    if target.expensive {
        (base / 10).max(1)
    } else {
        base
    }
}

/// The seed of a target's generator: fixed, so that a failure reproduces.
fn generator_seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn drive(target: &Target) {
    let seeds = seeds(target);
    for (i, seed) in seeds.iter().enumerate() {
        let outcome = catch_unwind(AssertUnwindSafe(|| (target.run)(seed)));
        assert!(outcome.is_ok(), "{}: seed {i} panicked", target.name);
    }
    let mut rng = XorShift::new(generator_seed(target.name));
    for case in 0..cases(target) {
        let base: &[u8] = if seeds.is_empty() || rng.below(8) == 0 {
            &[]
        } else {
            &seeds[rng.below(seeds.len())]
        };
        let input = mutate(&mut rng, base);
        let outcome = catch_unwind(AssertUnwindSafe(|| (target.run)(&input)));
        assert!(
            outcome.is_ok(),
            "{}: case {case} (generator seed {:#x}) panicked on {} bytes: {:?}",
            target.name,
            generator_seed(target.name),
            input.len(),
            String::from_utf8_lossy(&input[..input.len().min(200)])
        );
    }
}

macro_rules! property {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                let target = dpone_untrusted_inputs::target(stringify!($name))
                    .expect("a target of that name");
                drive(target);
            }
        )*

        /// Every target has a test here.
        #[test]
        fn every_target_is_driven() {
            let driven = [$(stringify!($name)),*];
            for target in TARGETS {
                assert!(driven.contains(&target.name), "{} is not driven", target.name);
            }
        }
    };
}

property!(
    strict_yaml,
    xmin_manifest,
    xmin_registry,
    clickhouse_manifest,
    clickhouse_registry,
    clickhouse_rowset_reply,
    clickhouse_authority_record,
    xmin_authority_document,
    decision_facts,
    decision_table,
    component_lock,
    bundle_archive,
    bundle_manifest,
    bundle_signatures,
    trust_policy,
    public_key,
    secret_key,
    sigstore_bundle,
    attestation_statement,
    trusted_root,
    component_inspect,
    component_load,
    np_policy,
    np_authority,
    np_route_qualification,
    np_release_set,
    np_producer_wire,
    np_composition,
    np_activation_request,
    np_any_document,
    np_identity_record,
    np_queue_record,
);

/// A 1 MiB value, separators and bidi characters reach every text parser and come back short
/// and escaped.
#[test]
fn hostile_values_are_not_replayed_by_any_parser() {
    let big = "A".repeat(1 << 20);
    let hostile = "x\u{2028}y\u{2029}z\u{202e}w\u{2066}v\u{1b}[31m\u{200b}";
    for value in [big.as_str(), hostile] {
        let json = serde_json::to_string(value).expect("a JSON string");
        let yaml_key = format!("\"{}\": 1\n", value.escape_default());
        for target in TARGETS.iter().filter(|t| !t.expensive) {
            for input in [
                format!("{{\"schema\": {json}, \"version\": {json}, {json}: [{json}]}}"),
                format!("[{json}]"),
                format!("version: {json}\nname: [{json}]\n"),
                yaml_key.clone(),
            ] {
                let outcome = catch_unwind(AssertUnwindSafe(|| (target.run)(input.as_bytes())));
                assert!(
                    outcome.is_ok(),
                    "{}: a hostile value is replayed or passes through",
                    target.name
                );
            }
        }
    }
}
