//! Where decisions come from. Without a trust policy: the shipped components, at pins compiled
//! into the binary from `policies/components.lock.json`. With a trust policy configured
//! (`--trust-policy` / `DPONE_TRUST_POLICY`): only a signed bundle (`--bundle` /
//! `DPONE_POLICY_BUNDLE`) that passes the activation gate; the shipped pins are then not used.

use crate::activation::{ActivatedBundle, activate_bundle};
use crate::exit::Failure;
use crate::input::InputKind;
use crate::trust_cmd::{load_bundle, read_trust_policy};
use clap::Args;
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

/// Reads a file the user named through the one bounded reader (regular files only, the
/// ceiling of its kind), reporting which kind it is but never the path.
pub fn read_input(path: &Path, kind: InputKind) -> Result<Vec<u8>, Failure> {
    crate::input::read(path, kind)
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
    let bytes = read_input(&component_path(dir, kind), InputKind::Component)?;
    Ok(runtime.load(kind, &bytes, pin(kind)?, Budget::default())?)
}

/// Path of the shipped component of `kind` under `dir`.
pub fn component_path(dir: &Path, kind: PolicyKind) -> PathBuf {
    dir.join(format!("{}.wasm", kind.as_str()))
}

/// Options that choose where policies come from.
#[derive(Args, Clone, Debug, Default)]
pub struct PolicySourceArgs {
    /// Trust policy: when set, policies load only from a bundle that verifies against it.
    #[arg(long, env = "DPONE_TRUST_POLICY", global = true)]
    pub trust_policy: Option<PathBuf>,
    /// Signed policy bundle (directory or archive); requires a trust policy.
    #[arg(long, env = "DPONE_POLICY_BUNDLE", global = true)]
    pub bundle: Option<PathBuf>,
}

/// The policies a command decides with.
pub enum PolicySource<'r> {
    /// Shipped components in `dir`, loaded at the embedded pins.
    Shipped {
        /// The runtime to load into.
        runtime: &'r PolicyRuntime,
        /// Directory of the components.
        dir: PathBuf,
    },
    /// A bundle that passed the activation gate.
    Bundle(Box<ActivatedBundle>),
}

/// A loaded policy, owned (shipped) or borrowed from an activated bundle.
pub enum Policy<'a> {
    /// Loaded for this call.
    Owned(Box<LoadedPolicy>),
    /// Held by the activated bundle.
    Borrowed(&'a LoadedPolicy),
}

impl std::ops::Deref for Policy<'_> {
    type Target = LoadedPolicy;

    fn deref(&self) -> &LoadedPolicy {
        match self {
            Policy::Owned(p) => p,
            Policy::Borrowed(p) => p,
        }
    }
}

impl<'r> PolicySource<'r> {
    /// Resolves the source: a configured trust policy requires a bundle, and a bundle is never
    /// used without a trust policy.
    pub fn resolve(
        runtime: &'r PolicyRuntime,
        dir: &Path,
        args: &PolicySourceArgs,
    ) -> Result<Self, Failure> {
        match (&args.trust_policy, &args.bundle) {
            (None, None) => Ok(Self::Shipped {
                runtime,
                dir: dir.to_path_buf(),
            }),
            (Some(trust), Some(bundle)) => {
                let trust = read_trust_policy(trust)?;
                let files = load_bundle(bundle)?;
                Ok(Self::Bundle(Box::new(activate_bundle(
                    runtime, &files, &trust,
                )?)))
            }
            (Some(_), None) => Err(Failure::refused(
                "DPONE_TRUST_BUNDLE_REQUIRED",
                "a trust policy is configured: policies load only from a signed bundle (--bundle)",
            )),
            (None, Some(_)) => Err(Failure::bad_input(
                "DPONE_TRUST_POLICY_REQUIRED",
                "a bundle is loaded only after verification against a trust policy (--trust-policy)",
            )),
        }
    }

    /// The policy of `kind`.
    pub fn policy(&self, kind: PolicyKind) -> Result<Policy<'_>, Failure> {
        match self {
            Self::Shipped { runtime, dir } => {
                Ok(Policy::Owned(Box::new(load(runtime, dir, kind)?)))
            }
            Self::Bundle(bundle) => bundle.policy(kind).map(Policy::Borrowed).ok_or_else(|| {
                Failure::refused(
                    "DPONE_ACTIVATION_POLICY_ABSENT",
                    format!("the verified bundle ships no {kind} policy"),
                )
            }),
        }
    }

    /// Verification evidence of the bundle, when decisions come from one.
    pub fn bundle_evidence(&self) -> Option<&serde_json::Value> {
        match self {
            Self::Shipped { .. } => None,
            Self::Bundle(bundle) => Some(bundle.bundle_evidence()),
        }
    }
}
