//! Tier: deterministic profile and per-decision bounds, with guard components written in WAT and
//! wrapped as components by `wit-component`:
//! - a decision that depends on the bits of a NaN decides the same on every CPU (NaN
//!   canonicalization is on, and named in the engine fingerprint);
//! - the memory budget counts every memory of the store, not each memory alone;
//! - the host stops lifting an oversized result before allocating it.

use dpone_integration_tests::{guard_sample, workspace};
use dpone_policy_model::guard::{GuardDecision, GuardFacts};
use dpone_policy_runtime::{
    Budget, PolicyError, PolicyKind, PolicyRuntime, SandboxConfig, Sha256Digest,
};

/// A guard component whose `decide` denies with a reason computed by `body`, a WAT fragment that
/// leaves (code pointer, code length, message pointer, message length) in locals 1 to 4.
/// `extra_memories` adds unexported memories of `pages` 64 KiB pages each.
fn guard_component(body: &str, memory_pages: u32, extra_memories: u32, pages: u32) -> Vec<u8> {
    let extra: String = (0..extra_memories)
        .map(|i| format!("(memory $extra{i} {pages})\n"))
        .collect();
    let text = format!(
        r#"(module
  (memory (export "memory") {memory_pages})
  {extra}
  (global $heap (mut i32) (i32.const 4096))
  (global $zero (mut f32) (f32.const 0))
  (data (i32.const 64) "NAN_SIGN_CLEARNAN_SIGN_SET")
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $p i32)
    global.get $heap
    local.get 2
    i32.const 1
    i32.sub
    i32.add
    local.get 2
    i32.const 1
    i32.sub
    i32.const -1
    i32.xor
    i32.and
    local.tee $p
    local.get 3
    i32.add
    global.set $heap
    local.get $p)
  (func (export "dpone:policy/guard@0.1.0#decide") (param i32) (result i32)
    (local i32 i32 i32 i32)
    {body}
    ;; guard-decision::deny(reason {{ code, message }}) at 256: discriminant, then the payload at 8.
    i32.const 256
    i32.const 1
    i32.store8
    i32.const 264
    local.get 1
    i32.store
    i32.const 268
    local.get 2
    i32.store
    i32.const 272
    local.get 3
    i32.store
    i32.const 276
    local.get 4
    i32.store
    i32.const 256)
)"#
    );
    let mut module = wat::parse_str(&text).expect("module assembles");
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
    dpone_policy_build::encode_component("wat-guard", &module).expect("component encodes")
}

/// Denies with `NAN_SIGN_SET` when 0.0 / 0.0 (computed at run time) has its sign bit set, else
/// `NAN_SIGN_CLEAR`. x86 produces a negative default NaN, Arm a positive one; the canonical NaN
/// is positive.
const NAN_SIGN: &str = r#"
    global.get $zero
    global.get $zero
    f32.div
    i32.reinterpret_f32
    i32.const 31
    i32.shr_u
    if
      i32.const 78
      local.set 1
      i32.const 12
      local.set 2
    else
      i32.const 64
      local.set 1
      i32.const 14
      local.set 2
    end
    i32.const 0
    local.set 3
    i32.const 0
    local.set 4
"#;

fn decide(
    runtime: &PolicyRuntime,
    bytes: &[u8],
    budget: Budget,
) -> Result<GuardDecision, PolicyError> {
    let loaded = runtime.load(PolicyKind::Guard, bytes, Sha256Digest::of(bytes), budget)?;
    let facts: GuardFacts = guard_sample();
    loaded.guard_decide(&facts).map(|d| d.decision)
}

fn deny_code(decision: &GuardDecision) -> &str {
    match decision {
        GuardDecision::Deny(reason) => &reason.code,
        GuardDecision::Allow(_) => "allow",
    }
}

#[test]
fn a_decision_on_the_bits_of_a_nan_is_the_same_on_every_cpu() {
    let bytes = guard_component(NAN_SIGN, 1, 0, 0);
    for pooling in [true, false] {
        let runtime = PolicyRuntime::new(SandboxConfig {
            pooling,
            ..SandboxConfig::default()
        })
        .expect("runtime");
        let decision = decide(&runtime, &bytes, Budget::default()).expect("decides");
        // The canonical NaN (0x7fc00000) has a clear sign bit, whatever the CPU produced.
        assert_eq!(deny_code(&decision), "NAN_SIGN_CLEAR");
    }
}

#[test]
fn a_module_with_several_memories_is_refused_at_load_in_every_allocator() {
    // Four memories in one core module need the multi-memory proposal, which the sandbox's
    // feature set leaves off: refused before compiling, in both allocators and whatever the
    // budget, so no store ever holds a policy's second memory. (The limiter still adds up every
    // memory of a store against one budget: unit-tested in the runtime's sandbox module.)
    let bytes = guard_component(NAN_SIGN, 48, 3, 48);
    let roomy = Budget {
        memory_bytes: 16 << 20,
        ..Budget::default()
    };
    let on_demand = PolicyRuntime::new(SandboxConfig {
        pooling: false,
        ..SandboxConfig::default()
    })
    .expect("runtime");
    let pooled = PolicyRuntime::new(SandboxConfig::default()).expect("runtime");
    for runtime in [&on_demand, &pooled] {
        let error = decide(runtime, &bytes, roomy).expect_err("refused");
        assert_eq!(
            error.code(),
            "DPONE_POLICY_WASM_FEATURE_DISABLED",
            "{error}"
        );
    }
    // The same guard with its one memory decides under the same budget.
    let single = guard_component(NAN_SIGN, 48, 0, 0);
    assert_eq!(
        deny_code(&decide(&on_demand, &single, roomy).expect("decides")),
        "NAN_SIGN_CLEAR"
    );
}

#[test]
fn an_oversized_result_is_refused_before_the_host_copies_it() {
    // An 8 MiB message (zero bytes are valid UTF-8) in a 9 MiB memory.
    let body = r#"
    i32.const 64
    local.set 1
    i32.const 14
    local.set 2
    i32.const 65536
    local.set 3
    i32.const 8388608
    local.set 4
"#;
    let bytes = guard_component(body, 144, 0, 0);
    let runtime = PolicyRuntime::new(SandboxConfig::default()).expect("runtime");
    let error = decide(&runtime, &bytes, Budget::default()).expect_err("refused");
    assert_eq!(error.code(), "DPONE_POLICY_OUTPUT_OVERSIZED");
    assert!(
        error.to_string().contains("lifting stopped"),
        "stopped while lifting, not after: {error}"
    );
}
