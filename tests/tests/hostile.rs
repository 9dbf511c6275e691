//! Tier: hostile components. Each component in the corpus is refused at load or fails closed with
//! its own stable code, and the same runtime keeps serving correct decisions afterwards.

use dpone_integration_tests::{component, guard_sample, load_shipped, pin, workspace};
use dpone_policy_model::guard::GuardFacts;
use dpone_policy_runtime::{Budget, PolicyKind, PolicyRuntime, SandboxConfig, Sha256Digest};

fn sample_facts() -> GuardFacts {
    guard_sample()
}

fn wat(name: &str) -> Vec<u8> {
    wat::parse_file(workspace().join("fixtures/hostile").join(name)).expect("fixture assembles")
}

/// Loads `bytes` as a guard at their own digest and returns the error code of load or decision.
fn failure_code(runtime: &PolicyRuntime, kind: PolicyKind, bytes: &[u8]) -> String {
    let loaded = match runtime.load(kind, bytes, Sha256Digest::of(bytes), Budget::default()) {
        Ok(loaded) => loaded,
        Err(e) => return format!("load:{}", e.code()),
    };
    match loaded.guard_decide(&sample_facts()) {
        Ok(d) => panic!("hostile component produced a decision: {:?}", d.decision),
        Err(e) => {
            assert!(
                e.is_decision_failure(),
                "{} is a decision failure",
                e.code()
            );
            format!("decide:{}", e.code())
        }
    }
}

/// After every hostile case the runtime still answers exactly like the native policy.
fn assert_still_serving(runtime: &PolicyRuntime) {
    let guard = load_shipped(runtime, PolicyKind::Guard);
    let facts = sample_facts();
    let decided = guard.guard_decide(&facts).expect("real guard decides");
    assert_eq!(decided.decision, dpone_policy_guard::decide(&facts));
}

#[test]
fn every_hostile_component_fails_closed_with_its_own_code() {
    let runtime = PolicyRuntime::new(SandboxConfig::default()).expect("runtime");
    let real_guard = component("guard");
    let mut one_bit = real_guard.clone();
    let middle = one_bit.len() / 2;
    one_bit[middle] ^= 0x01;

    let cases: Vec<(&str, String)> = vec![
        (
            "infinite loop",
            failure_code(&runtime, PolicyKind::Guard, &component("hostile-spin")),
        ),
        (
            "memory growth",
            failure_code(
                &runtime,
                PolicyKind::Guard,
                &component("hostile-grow-memory"),
            ),
        ),
        (
            "deep recursion",
            failure_code(&runtime, PolicyKind::Guard, &component("hostile-recurse")),
        ),
        (
            "trap",
            failure_code(&runtime, PolicyKind::Guard, &component("hostile-trap")),
        ),
        (
            "oversized result",
            failure_code(&runtime, PolicyKind::Guard, &component("hostile-oversized")),
        ),
        (
            "imports WASI",
            failure_code(&runtime, PolicyKind::Guard, &wat("imports-wasi.wat")),
        ),
        (
            "wrong version",
            failure_code(&runtime, PolicyKind::Guard, &wat("wrong-version.wat")),
        ),
        (
            "wrong world",
            failure_code(&runtime, PolicyKind::Guard, &wat("wrong-world.wat")),
        ),
        (
            "guard as delete-mode",
            failure_code(&runtime, PolicyKind::DeleteMode, &real_guard),
        ),
        (
            "wrong export types",
            failure_code(&runtime, PolicyKind::Guard, &wat("wrong-types.wat")),
        ),
        (
            "core module",
            failure_code(&runtime, PolicyKind::Guard, &wat("core-module.wat")),
        ),
        (
            "one bit off the pin",
            match runtime.load(
                PolicyKind::Guard,
                &one_bit,
                pin(PolicyKind::Guard),
                Budget::default(),
            ) {
                Ok(_) => panic!("a flipped bit loaded"),
                Err(e) => format!("load:{}", e.code()),
            },
        ),
    ];
    let expected = [
        ("infinite loop", "decide:DPONE_POLICY_FUEL_EXHAUSTED"),
        ("memory growth", "decide:DPONE_POLICY_MEMORY_LIMIT_EXCEEDED"),
        ("deep recursion", "decide:DPONE_POLICY_STACK_OVERFLOW"),
        ("trap", "decide:DPONE_POLICY_TRAPPED"),
        ("oversized result", "decide:DPONE_POLICY_OUTPUT_OVERSIZED"),
        ("imports WASI", "load:DPONE_POLICY_IMPORTS_FORBIDDEN"),
        ("wrong version", "load:DPONE_POLICY_WIT_VERSION_UNSUPPORTED"),
        ("wrong world", "load:DPONE_POLICY_WORLD_MISMATCH"),
        ("guard as delete-mode", "load:DPONE_POLICY_WORLD_MISMATCH"),
        (
            "wrong export types",
            "load:DPONE_POLICY_EXPORT_TYPE_MISMATCH",
        ),
        ("core module", "load:DPONE_POLICY_NOT_A_COMPONENT"),
        ("one bit off the pin", "load:DPONE_POLICY_PIN_MISMATCH"),
    ];
    assert_eq!(cases.len(), expected.len());
    let mut wrong = Vec::new();
    for ((case, got), (name, want)) in cases.iter().zip(expected) {
        assert_eq!(*case, name);
        if got != want {
            wrong.push(format!("{case}: got {got}, want {want}"));
        }
        assert_still_serving(&runtime);
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_wall_clock_deadline_stops_a_loop_that_fuel_alone_would_allow() {
    // A fuel budget this large would run for seconds; the epoch deadline ends it first.
    let config = SandboxConfig {
        deadline: std::time::Duration::from_millis(50),
        max_fuel: u64::MAX,
        ..SandboxConfig::default()
    };
    let runtime = PolicyRuntime::new(config).expect("runtime");
    let bytes = component("hostile-spin");
    let budget = Budget {
        fuel: u64::MAX / 2,
        ..Budget::default()
    };
    let loaded = runtime
        .load(PolicyKind::Guard, &bytes, Sha256Digest::of(&bytes), budget)
        .expect("loads");
    let started = std::time::Instant::now();
    let error = loaded
        .guard_decide(&sample_facts())
        .expect_err("the loop never decides");
    assert_eq!(error.code(), "DPONE_POLICY_DEADLINE_EXCEEDED");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_still_serving(&runtime);
}

#[test]
fn a_budget_above_the_host_ceiling_is_refused() {
    let runtime = PolicyRuntime::new(SandboxConfig::default()).expect("runtime");
    let bytes = component("guard");
    let budget = Budget {
        memory_bytes: 1 << 40,
        ..Budget::default()
    };
    let error = runtime
        .load(PolicyKind::Guard, &bytes, pin(PolicyKind::Guard), budget)
        .err()
        .expect("refused");
    assert_eq!(error.code(), "DPONE_POLICY_BUDGET_TOO_LARGE");
}

/// Wraps a core module of `fixtures/hostile/features/` (one WebAssembly proposal outside the
/// host's feature set each) as a guard component, as the author kit's encoder does; a
/// `NAME.component.wat` fixture is a component already and is only assembled.
fn feature_component(name: &str) -> Vec<u8> {
    let dir = workspace().join("fixtures/hostile/features");
    let whole = dir.join(format!("{name}.component.wat"));
    if whole.exists() {
        // Already a component (see the fixture's comment).
        return wat::parse_file(&whole).unwrap_or_else(|e| panic!("{name} assembles: {e}"));
    }
    let path = dir.join(format!("{name}.wat"));
    let mut module = wat::parse_file(&path).unwrap_or_else(|e| panic!("{name} assembles: {e}"));
    let mut resolve = wit_parser::Resolve::default();
    let (package, _) = resolve
        .push_dir(workspace().join("wit"))
        .expect("wit parses");
    let world = resolve
        .select_world(&[package], Some("guard-policy"))
        .expect("guard world");
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
        false,
    )
    .expect("metadata");
    dpone_policy_build::encode_component(name, &module)
        .unwrap_or_else(|e| panic!("{name} encodes: {e}"))
}

/// Every proposal the host leaves out has a fixture, and each is refused at load, before any
/// wasmtime code runs on it. The GC-subtype `call_indirect` guard aborted the process
/// (RUSTSEC-2026-0570) before the feature set was locked.
#[test]
fn a_component_using_a_disabled_proposal_is_refused_at_load() {
    let runtime = PolicyRuntime::new(SandboxConfig::default()).expect("runtime");
    let mut wrong = Vec::new();
    for (name, proposal) in [
        ("gc-subtype-call-indirect", "gc"),
        ("function-references", "function_references"),
        ("exceptions", "exceptions"),
        ("tail-call", "tail_call"),
        ("threads", "proposal"),
        ("multi-memory", "multi_memory"),
        ("simd", "simd"),
        ("custom-page-sizes", "proposal"),
        ("wide-arithmetic", "wide_arithmetic"),
        ("extended-const", "extended_const"),
        ("memory64", "memory64"),
    ] {
        let bytes = feature_component(name);
        match runtime.load(
            PolicyKind::Guard,
            &bytes,
            Sha256Digest::of(&bytes),
            Budget::default(),
        ) {
            Ok(_) => wrong.push(format!("{name}: loaded")),
            Err(e) if e.code() != "DPONE_POLICY_WASM_FEATURE_DISABLED" => {
                wrong.push(format!("{name}: {} {e}", e.code()))
            }
            Err(e) if !e.to_string().contains(proposal) => {
                wrong.push(format!("{name}: does not name {proposal}: {e}"))
            }
            Err(_) => {}
        }
        assert_still_serving(&runtime);
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
