//! The sandbox: engine configuration, per-decision stores and budgets, and the mapping of every
//! way a decision can fail onto a typed, fail-closed [`PolicyError`].
//!
//! Each decision gets a fresh `Store` instantiated from a prepared `InstancePre`, a fuel budget
//! (the deterministic limit), an epoch deadline (the wall-clock backstop), a memory limiter, and
//! the engine-wide wasm stack limit. Nothing survives between decisions.

use crate::digest::Sha256Digest;
use crate::error::PolicyError;
use std::hash::Hasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use wasmparser::WasmFeatures;
use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig,
    ResourceLimiter, Store, Trap,
};

/// The WebAssembly proposals the engine accepts, and nothing else: what the shipped policies use
/// (sign extension, reference types for the `call_indirect` table encoding, bulk memory, the
/// component model) and what Rust's `wasm32-unknown-unknown` output of the author kit may use by
/// default (floats, mutable globals, non-trapping float-to-int, multi-value). Every other
/// proposal — GC and its subtypes, function references, exceptions, tail calls, memory64,
/// threads, multi-memory, SIMD, stack switching, custom page sizes, wide arithmetic, extended
/// constants, every component-model extension — is off in the engine and refused at load
/// (`DPONE_POLICY_WASM_FEATURE_DISABLED`). GC subtypes in particular reach an abort in wasmtime
/// 48.0.8 built without `gc` (RUSTSEC-2026-0570).
pub const WASM_FEATURES: WasmFeatures = WasmFeatures::MUTABLE_GLOBAL
    .union(WasmFeatures::FLOATS)
    .union(WasmFeatures::SATURATING_FLOAT_TO_INT)
    .union(WasmFeatures::SIGN_EXTENSION)
    .union(WasmFeatures::MULTI_VALUE)
    .union(WasmFeatures::BULK_MEMORY)
    .union(WasmFeatures::REFERENCE_TYPES)
    .union(WasmFeatures::COMPONENT_MODEL);

/// The names of [`WASM_FEATURES`], as named in the engine fingerprint.
pub fn wasm_feature_names() -> Vec<&'static str> {
    WASM_FEATURES.iter_names().map(|(name, _)| name).collect()
}

/// Validates the whole component (every nested core module) under [`WASM_FEATURES`] before
/// anything is compiled. A component that is valid only with another proposal is refused with
/// `DPONE_POLICY_WASM_FEATURE_DISABLED`, naming the proposal when one alone explains it; other
/// invalid bytes are `DPONE_POLICY_NOT_A_COMPONENT`. Validation is wasmparser's only: no
/// wasmtime code runs on a refused component.
pub(crate) fn validate_features(bytes: &[u8]) -> Result<(), PolicyError> {
    let valid = |features: WasmFeatures| {
        wasmparser::Validator::new_with_features(features)
            .validate_all(bytes)
            .is_ok()
    };
    let error = match wasmparser::Validator::new_with_features(WASM_FEATURES).validate_all(bytes) {
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    if !valid(WasmFeatures::all()) {
        return Err(PolicyError::NotAComponent(error.message().to_owned()));
    }
    let named: Vec<&str> = WasmFeatures::all()
        .difference(WASM_FEATURES)
        .iter_names()
        .filter(|(_, flag)| valid(WASM_FEATURES.union(*flag)))
        .map(|(name, _)| name)
        .collect();
    Err(PolicyError::WasmFeatureDisabled(if named.is_empty() {
        "more than one disabled proposal".to_owned()
    } else {
        named.join(", ").to_lowercase()
    }))
}

/// Host-wide sandbox settings: ceilings that no declared budget may exceed.
#[derive(Clone, Debug)]
pub struct SandboxConfig {
    /// Largest fuel budget a policy may declare.
    pub max_fuel: u64,
    /// Largest linear memory a policy may declare (also the pool's slot size).
    pub max_memory_bytes: u64,
    /// Engine-wide wasm stack limit.
    pub max_wasm_stack_bytes: usize,
    /// Wall-clock backstop for one decision.
    pub deadline: Duration,
    /// Period of the epoch ticker.
    pub epoch_tick: Duration,
    /// Concurrent sandboxes the pool holds.
    pub pool_instances: u32,
    /// Largest decision output accepted, as canonical JSON bytes.
    pub max_output_bytes: usize,
    /// Use the pooling allocator (the default); `false` allocates each sandbox on demand.
    pub pooling: bool,
    /// Bytes of each pooled linear memory reset in place rather than returned to the kernel.
    pub keep_resident_bytes: usize,
    /// Find dirty pages with the kernel's `PAGEMAP_SCAN` when resetting a pooled memory; the
    /// default depends on the CPU (on for Intel, off otherwise: see `pagemap_scan_by_cpu`).
    pub pagemap_scan: bool,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            max_fuel: 100_000_000,
            max_memory_bytes: 64 << 20,
            max_wasm_stack_bytes: 512 << 10,
            deadline: Duration::from_millis(500),
            epoch_tick: Duration::from_millis(5),
            pool_instances: 32,
            max_output_bytes: 64 << 10,
            pooling: true,
            keep_resident_bytes: 256 << 10,
            // How a pooled memory is reset after a decision depends on the CPU: see
            // `pagemap_scan_by_cpu`.
            pagemap_scan: pagemap_scan_by_cpu(),
        }
    }
}

/// The faster way to reset a pooled memory on this CPU, measured per vendor in the decision
/// benchmark (docs/performance.md, same-run comparisons of both resets):
///
/// - Intel: resetting only the pages a decision dirtied (the kernel's `PAGEMAP_SCAN`; wasmtime
///   falls back to the memset on kernels without it) was 0.7–0.9 µs per decision faster than a
///   memset of the resident 256 KiB;
/// - AMD, and any CPU not measured: the memset was about 1 µs faster than the scan ioctl.
///
/// Both resets give a zeroed memory, so the choice changes time only, never a decision. Read
/// once per process from `/proc/cpuinfo`; `SandboxConfig::pagemap_scan` overrides it.
fn pagemap_scan_by_cpu() -> bool {
    static INTEL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INTEL.get_or_init(|| {
        std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("vendor_id"))
                .is_some_and(|rest| {
                    rest.trim_start_matches([' ', '\t', ':']).trim() == "GenuineIntel"
                })
        })
    })
}

/// What one decision may consume. Declared per policy (bundles carry it in their manifest).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Fuel per decision.
    pub fuel: u64,
    /// Linear memory per decision, in bytes.
    pub memory_bytes: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            fuel: 10_000_000,
            memory_bytes: 16 << 20,
        }
    }
}

impl Budget {
    /// Refuses a budget above the host's ceilings.
    pub fn check(&self, config: &SandboxConfig) -> Result<(), PolicyError> {
        if self.fuel == 0 || self.fuel > config.max_fuel {
            return Err(PolicyError::BudgetTooLarge(format!(
                "fuel {} not in 1..={}",
                self.fuel, config.max_fuel
            )));
        }
        if self.memory_bytes == 0 || self.memory_bytes > config.max_memory_bytes {
            return Err(PolicyError::BudgetTooLarge(format!(
                "memory {} bytes not in 1..={}",
                self.memory_bytes, config.max_memory_bytes
            )));
        }
        Ok(())
    }
}

/// Builds the engine: fuel, epochs, stack limit, pooling allocator, no WASI, no imports.
pub(crate) fn build_engine(config: &SandboxConfig) -> Result<Engine, PolicyError> {
    let n = config.pool_instances.max(1);
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(n)
        .total_core_instances(n.saturating_mul(4))
        .total_memories(n.saturating_mul(2))
        .total_tables(n.saturating_mul(2))
        .max_memory_size(usize::try_from(config.max_memory_bytes).unwrap_or(usize::MAX))
        .linear_memory_keep_resident(config.keep_resident_bytes)
        .table_keep_resident(16 << 10)
        .pagemap_scan(if config.pagemap_scan {
            Enabled::Auto
        } else {
            Enabled::No
        });
    let mut c = Config::new();
    // Exactly `WASM_FEATURES`: every proposal wasmparser knows is switched off first (wasmtime's
    // defaults included, and any a later version adds), then the locked set is switched on.
    c.wasm_features(WasmFeatures::all(), false)
        .wasm_features(WASM_FEATURES, true);
    // The deterministic profile (see `DETERMINISTIC_PROFILE`): every NaN a float operation
    // produces is canonical, relaxed SIMD gives the same result on every CPU, and shared-memory
    // threads are not compiled in (the `threads` feature of wasmtime is off).
    c.cranelift_nan_canonicalization(true)
        .relaxed_simd_deterministic(true);
    c.wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(true)
        .max_wasm_stack(config.max_wasm_stack_bytes)
        .cranelift_opt_level(OptLevel::Speed)
        // Explicit bounds checks instead of guard pages: a policy's memory is small and its
        // code short, and without guard pages a pooled slot is reused without `mprotect` calls
        // (each one a TLB shootdown), which dominated the cost of a fresh sandbox.
        .signals_based_traps(false)
        .memory_guard_size(0)
        .memory_reservation(config.max_memory_bytes);
    if config.pooling {
        c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    Engine::new(&c).map_err(|e| PolicyError::EngineConfig(e.to_string()))
}

/// The deterministic execution profile, named in the engine fingerprint: a decision replays bit
/// for bit on any CPU architecture.
pub(crate) const DETERMINISTIC_PROFILE: &str =
    "nan-canonicalization=on;relaxed-simd=deterministic;threads=off";

/// Fingerprint of everything that makes precompiled code compatible: wasmtime's version, the
/// engine settings that affect compiled code, and the deterministic profile.
pub(crate) fn engine_fingerprint(engine: &Engine) -> Sha256Digest {
    use sha2::Digest;
    use std::hash::Hash;
    struct ShaHasher(sha2::Sha256);
    impl Hasher for ShaHasher {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut h = ShaHasher(sha2::Sha256::new());
    h.write(b"dpone-policy-runtime engine fingerprint v3\0");
    h.write(DETERMINISTIC_PROFILE.as_bytes());
    h.write(b"\0");
    h.write(b"wasm-features=");
    h.write(wasm_feature_names().join(",").as_bytes());
    h.write(b"\0");
    engine.precompile_compatibility_hash().hash(&mut h);
    Sha256Digest::from(<[u8; 32]>::from(h.0.finalize()))
}

/// Increments the engine's epoch on a fixed period until dropped.
pub(crate) struct EpochTicker {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

/// Starts a named thread; the seam through which a test makes starting fail.
pub(crate) type Spawner = fn(Box<dyn FnOnce() + Send + 'static>) -> std::io::Result<JoinHandle<()>>;

/// Spawns a named OS thread.
pub(crate) fn spawn_thread(
    body: Box<dyn FnOnce() + Send + 'static>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("dpone-epoch-ticker".to_owned())
        .spawn(body)
}

impl EpochTicker {
    /// Starts the ticker. Without it no decision would have a wall-clock deadline, so a failure
    /// to start is an error (`DPONE_POLICY_DEADLINE_UNAVAILABLE`), never a silent degradation.
    pub(crate) fn start(
        engine: Engine,
        tick: Duration,
        spawn: Spawner,
    ) -> Result<Self, PolicyError> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = spawn(Box::new(move || {
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(tick);
                engine.increment_epoch();
            }
        }))
        .map_err(|e| PolicyError::DeadlineUnavailable(e.kind().to_string()))?;
        Ok(Self {
            stop,
            handle: Some(handle),
        })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// Store data of one decision.
pub(crate) struct SandboxState {
    limiter: MemoryLimiter,
}

/// The error a limiter returns so that a memory breach is recognisable in the error chain.
#[derive(Debug)]
struct MemoryLimitHit;

impl std::fmt::Display for MemoryLimitHit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("memory limit reached")
    }
}

impl std::error::Error for MemoryLimitHit {}

/// Counts linear memory across every memory of the store: the budget is per decision, so a
/// component with four memories gets the same budget as one with one.
struct MemoryLimiter {
    limit: usize,
    used: usize,
    breached: bool,
}

/// Tables and instances a policy may create; a pure policy needs very few.
const MAX_TABLE_ELEMENTS: usize = 10_000;
const MAX_INSTANCES: usize = 16;
const MAX_TABLES: usize = 16;
const MAX_MEMORIES: usize = 4;

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self
            .used
            .checked_add(desired.saturating_sub(current))
            .filter(|total| *total <= self.limit);
        let Some(total) = total else {
            self.breached = true;
            return Err(wasmtime::Error::new(MemoryLimitHit));
        };
        self.used = total;
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.breached = true;
        Err(wasmtime::Error::new(MemoryLimitHit))
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

/// Which step of a decision failed; instantiation failures classify differently from calls.
#[derive(Clone, Copy)]
pub(crate) enum Step {
    Instantiate,
    Call,
}

/// Runs one decision in a fresh store and returns its result and the fuel it used.
pub(crate) fn run_in_fresh_store<R>(
    engine: &Engine,
    config: &SandboxConfig,
    budget: Budget,
    decide: impl FnOnce(&mut Store<SandboxState>) -> Result<R, (Step, wasmtime::Error)>,
) -> Result<(R, u64), PolicyError> {
    let mut store = Store::new(
        engine,
        SandboxState {
            limiter: MemoryLimiter {
                limit: usize::try_from(budget.memory_bytes).unwrap_or(usize::MAX),
                used: 0,
                breached: false,
            },
        },
    );
    store.limiter(|state| &mut state.limiter);
    // Bounds what the host allocates while lifting the result out of the guest (strings, lists):
    // without it a component could make the host copy ~128 MiB before the output-size check.
    store.set_hostcall_fuel(lift_bound(config));
    store
        .set_fuel(budget.fuel)
        .map_err(|e| PolicyError::EngineConfig(e.to_string()))?;
    let tick_ns = config.epoch_tick.as_nanos().max(1);
    let ticks = config.deadline.as_nanos().div_ceil(tick_ns);
    store.set_epoch_deadline(u64::try_from(ticks).unwrap_or(u64::MAX).max(1));
    store.epoch_deadline_trap();
    let result = decide(&mut store);
    let remaining = store.get_fuel().unwrap_or(0);
    let fuel_used = budget.fuel.saturating_sub(remaining);
    match result {
        Ok(value) => Ok((value, fuel_used)),
        Err((step, error)) => Err(classify(step, &error, store.data(), budget, config)),
    }
}

/// Bytes the host copies out of a guest while lifting one result: four times the largest output
/// accepted (lifted Rust values are larger than their canonical JSON for lists of records).
pub(crate) fn lift_bound(config: &SandboxConfig) -> usize {
    config.max_output_bytes.saturating_mul(4)
}

/// The message of wasmtime's (private) hostcall-fuel error.
const HOSTCALL_FUEL_MESSAGE: &str = "fuel allocated for hostcalls has been exhausted";

fn classify(
    step: Step,
    error: &wasmtime::Error,
    state: &SandboxState,
    budget: Budget,
    config: &SandboxConfig,
) -> PolicyError {
    let memory_hit = error
        .chain()
        .any(|cause| cause.downcast_ref::<MemoryLimitHit>().is_some());
    if state.limiter.breached || memory_hit {
        return PolicyError::MemoryLimitExceeded {
            limit_bytes: budget.memory_bytes,
        };
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => PolicyError::FuelExhausted {
            budget: budget.fuel,
        },
        Some(Trap::Interrupt) => PolicyError::DeadlineExceeded {
            deadline_ms: u64::try_from(config.deadline.as_millis()).unwrap_or(u64::MAX),
        },
        Some(Trap::StackOverflow) => PolicyError::StackOverflow,
        Some(trap) => PolicyError::Trapped(trap.to_string()),
        None if matches!(step, Step::Call)
            && error
                .chain()
                .any(|cause| cause.to_string().contains(HOSTCALL_FUEL_MESSAGE)) =>
        {
            PolicyError::OutputLiftBound {
                limit: lift_bound(config),
            }
        }
        None => match step {
            Step::Instantiate => PolicyError::InstantiateFailed(error.to_string()),
            Step::Call => PolicyError::Trapped(error.to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticker_that_cannot_start_is_an_error_not_a_sandbox_without_deadline() {
        fn refuse(_: Box<dyn FnOnce() + Send + 'static>) -> std::io::Result<JoinHandle<()>> {
            Err(std::io::Error::from(std::io::ErrorKind::OutOfMemory))
        }
        let engine = build_engine(&SandboxConfig::default()).expect("engine");
        let error = EpochTicker::start(engine, Duration::from_millis(5), refuse)
            .map(|_| ())
            .expect_err("refused");
        assert_eq!(error.code(), "DPONE_POLICY_DEADLINE_UNAVAILABLE");
    }

    /// The locked feature set, by name: a dependency update that adds or widens a proposal fails
    /// here (and in the list of every flag wasmparser knows) instead of passing silently.
    #[test]
    fn the_feature_set_is_exactly_the_locked_list() {
        assert_eq!(
            wasm_feature_names(),
            [
                "MUTABLE_GLOBAL",
                "SATURATING_FLOAT_TO_INT",
                "SIGN_EXTENSION",
                "REFERENCE_TYPES",
                "MULTI_VALUE",
                "BULK_MEMORY",
                "FLOATS",
                "COMPONENT_MODEL",
            ]
        );
        for off in [
            WasmFeatures::GC,
            WasmFeatures::GC_TYPES,
            WasmFeatures::FUNCTION_REFERENCES,
            WasmFeatures::EXCEPTIONS,
            WasmFeatures::LEGACY_EXCEPTIONS,
            WasmFeatures::TAIL_CALL,
            WasmFeatures::MEMORY64,
            WasmFeatures::THREADS,
            WasmFeatures::SHARED_EVERYTHING_THREADS,
            WasmFeatures::MULTI_MEMORY,
            WasmFeatures::SIMD,
            WasmFeatures::RELAXED_SIMD,
            WasmFeatures::STACK_SWITCHING,
            WasmFeatures::CUSTOM_PAGE_SIZES,
            WasmFeatures::WIDE_ARITHMETIC,
            WasmFeatures::EXTENDED_CONST,
            WasmFeatures::CM_ASYNC,
            WasmFeatures::CM_GC,
        ] {
            assert!(!WASM_FEATURES.intersects(off), "{off:?} is off");
        }
        // Every flag wasmparser 0.254 knows: a new one needs a decision (it is off in the
        // engine, since `build_engine` switches off `WasmFeatures::all()` first).
        assert_eq!(WasmFeatures::all().iter_names().count(), 40);
    }

    /// The engine itself refuses what the feature set leaves out, independently of the load-time
    /// validation: GC subtypes, multiple memories, tail calls, SIMD.
    #[test]
    fn the_engine_refuses_modules_outside_the_feature_set() {
        let engine = build_engine(&SandboxConfig::default()).expect("engine");
        for (name, wat) in [
            (
                "gc subtype",
                "(module (type $a (sub (func))) (type $b (sub $a (func))))",
            ),
            ("multi-memory", "(module (memory 1) (memory 1))"),
            ("tail call", "(module (func $f return_call $f))"),
            ("simd", "(module (func (drop (v128.const i64x2 0 0))))"),
        ] {
            let bytes = wat_bytes(wat);
            assert!(
                wasmtime::Module::new(&engine, &bytes).is_err(),
                "{name} compiles"
            );
        }
        let plain = wat_bytes("(module (memory 1) (func (drop (i32.extend8_s (i32.const 1)))))");
        wasmtime::Module::new(&engine, &plain).expect("a plain module compiles");
    }

    fn wat_bytes(text: &str) -> Vec<u8> {
        wat::parse_str(text).expect("wat assembles")
    }

    #[test]
    fn validation_names_the_disabled_proposal() {
        let bytes = wat_bytes("(module (type $a (sub (func))) (type $b (sub $a (func))))");
        let error = validate_features(&bytes).expect_err("refused");
        assert_eq!(error.code(), "DPONE_POLICY_WASM_FEATURE_DISABLED");
        assert!(error.to_string().contains("gc"), "{error}");
        let garbage = validate_features(b"\0asm\x01\0\0\0garbage").expect_err("refused");
        assert_eq!(garbage.code(), "DPONE_POLICY_NOT_A_COMPONENT");
    }

    /// Several memories of one store share one budget (a component can hold several core
    /// instances, each with its memory).
    #[test]
    fn the_limiter_counts_every_memory_together() {
        let mut limiter = MemoryLimiter {
            limit: 8 << 20,
            used: 0,
            breached: false,
        };
        for _ in 0..2 {
            assert!(limiter.memory_growing(0, 3 << 20, None).expect("fits"));
        }
        assert!(limiter.memory_growing(0, 3 << 20, None).is_err());
        assert!(limiter.breached);
    }

    #[test]
    fn the_fingerprint_names_the_deterministic_profile() {
        assert!(DETERMINISTIC_PROFILE.contains("nan-canonicalization=on"));
        assert!(DETERMINISTIC_PROFILE.contains("relaxed-simd=deterministic"));
    }
}
