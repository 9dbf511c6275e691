//! The shipped policies: pins compiled into the binary from `policies/components.lock.json`, and
//! where their components are looked up.

use crate::exit::Failure;
use dpone_policy_build::ComponentLock;
use dpone_policy_runtime::{
    Budget, LoadedPolicy, PolicyKind, PolicyRuntime, PrecompiledCache, SandboxConfig, Sha256Digest,
};
use std::path::{Path, PathBuf};

/// The lock file as it was when this binary was built.
const EMBEDDED_LOCK: &str = include_str!("../../../policies/components.lock.json");

/// Default directory of built components, relative to the working directory.
pub const DEFAULT_COMPONENT_DIR: &str = "target/components";

/// The pin of a shipped policy kind.
pub fn pin(kind: PolicyKind) -> Result<Sha256Digest, Failure> {
    let lock = ComponentLock::from_json(EMBEDDED_LOCK)
        .map_err(|e| Failure::internal(e.code(), e.to_string()))?;
    let entry = lock.components.get(kind.as_str()).ok_or_else(|| {
        Failure::internal(
            "DPONE_CLI_PIN_MISSING",
            format!("no pin for {kind} in the embedded lock"),
        )
    })?;
    entry
        .sha256
        .parse()
        .map_err(|e: String| Failure::internal("DPONE_CLI_PIN_MALFORMED", e))
}

/// Reads a file the user named, reporting which option it came from but never the path.
pub fn read_input(path: &Path, what: &str) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| {
        Failure::bad_input(
            "DPONE_CLI_INPUT_UNREADABLE",
            format!("cannot read the {what}: {}", e.kind()),
        )
    })
}

/// Builds a runtime, with a precompiled cache when `cache_dir` is given.
pub fn runtime(cache_dir: Option<&Path>) -> Result<PolicyRuntime, Failure> {
    let runtime = PolicyRuntime::new(SandboxConfig::default())?;
    let Some(dir) = cache_dir else {
        return Ok(runtime);
    };
    std::fs::create_dir_all(dir).map_err(|e| {
        Failure::bad_input(
            "DPONE_CLI_CACHE_DIR",
            format!("cannot create the cache directory: {}", e.kind()),
        )
    })?;
    let dir =
        cap_std::fs::Dir::open_ambient_dir(dir, cap_std::ambient_authority()).map_err(|e| {
            Failure::bad_input(
                "DPONE_CLI_CACHE_DIR",
                format!("cannot open the cache directory: {}", e.kind()),
            )
        })?;
    Ok(runtime.with_cache(PrecompiledCache::new(dir)))
}

/// Loads the shipped component of `kind` from `dir` at its embedded pin.
pub fn load(
    runtime: &PolicyRuntime,
    dir: &Path,
    kind: PolicyKind,
) -> Result<LoadedPolicy, Failure> {
    let bytes = read_input(&component_path(dir, kind), &format!("{kind} component"))?;
    Ok(runtime.load(kind, &bytes, pin(kind)?, Budget::default())?)
}

/// Path of the shipped component of `kind` under `dir`.
pub fn component_path(dir: &Path, kind: PolicyKind) -> PathBuf {
    dir.join(format!("{}.wasm", kind.as_str()))
}
