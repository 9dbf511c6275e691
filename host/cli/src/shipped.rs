//! Where decisions come from. Without a trust policy: the shipped components, embedded in the
//! binary (or read from `--components-dir` when given), at pins compiled into the binary from
//! `policies/components.lock.json` and checked at every load. With a trust policy configured
//! (`--trust-policy` / `DPONE_TRUST_POLICY`): only a signed bundle (`--bundle` /
//! `DPONE_POLICY_BUNDLE`) that passes the activation gate; the shipped pins are then not used.

use crate::activation::{ActivatedBundle, ActivationError, activate_bundle_recorded};
use crate::exit::{self, Failure};
use crate::input::InputKind;
use clap::Args;
use dpone_policy_build::ComponentLock;
use dpone_policy_runtime::{
    Budget, LoadedPolicy, PolicyError, PolicyKind, PolicyRuntime, PrecompiledCache, SandboxConfig,
    Sha256Digest,
};
use dpone_trust::archive;
use dpone_trust::bundle::BundleFiles;
use dpone_trust::policy::TrustPolicy;
use std::path::{Path, PathBuf};

/// The lock file as it was when this binary was built.
const EMBEDDED_LOCK: &str = include_str!("../../../policies/components.lock.json");

include!(concat!(env!("OUT_DIR"), "/embedded_components.rs"));

/// The exit status of an activation refusal, by its cause. Here rather than in `activation`,
/// which knows nothing of the cli (the bundle-activation tests compile it alone).
impl From<ActivationError> for Failure {
    fn from(e: ActivationError) -> Self {
        let exit = match &e {
            ActivationError::Trust(trust) => exit::exit_for_class(trust.class()),
            ActivationError::Load {
                source: PolicyError::InputInvalid { .. } | PolicyError::UnknownFunction { .. },
                ..
            } => exit::BAD_INPUT,
            ActivationError::Load { .. } => exit::POLICY_FAILED,
            other if other.is_refusal() => exit::REFUSED,
            _ => exit::INTERNAL,
        };
        Self {
            code: e.code().to_owned(),
            message: e.to_string(),
            exit,
        }
    }
}

/// The embedded bytes of the shipped component of `kind`.
pub fn embedded(kind: PolicyKind) -> Result<&'static [u8], Failure> {
    EMBEDDED_COMPONENTS
        .iter()
        .find(|(name, _)| *name == kind.as_str())
        .map(|(_, bytes)| *bytes)
        .ok_or_else(|| {
            Failure::internal(
                "DPONE_CLI_COMPONENT_NOT_EMBEDDED",
                format!("no {kind} component is embedded in this binary"),
            )
        })
}

/// The bytes of the shipped component of `kind`: from `dir` when given (an override), else the
/// copy embedded in the binary. Either way the caller checks them against the pin.
pub fn component_bytes(dir: Option<&Path>, kind: PolicyKind) -> Result<Vec<u8>, Failure> {
    match dir {
        Some(dir) => read_input(&component_path(dir, kind), InputKind::Component),
        None => Ok(embedded(kind)?.to_vec()),
    }
}

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

/// Reads and parses a trust policy file.
pub(crate) fn read_trust_policy(path: &Path) -> Result<TrustPolicy, Failure> {
    Ok(TrustPolicy::parse(&read_input(
        path,
        InputKind::TrustPolicy,
    )?)?)
}

/// A bundle directory, or an archive file.
pub(crate) fn load_bundle(path: &Path) -> Result<BundleFiles, Failure> {
    let meta = std::fs::metadata(path).map_err(|err| {
        Failure::bad_input(
            "DPONE_CLI_INPUT_UNREADABLE",
            format!("cannot read the bundle: {}", err.kind()),
        )
    })?;
    if meta.is_dir() {
        Ok(BundleFiles::read_dir(path)?)
    } else {
        let bytes = read_input(path, InputKind::BundleArchive)?;
        Ok(archive::unpack(&bytes)?)
    }
}

/// Where the per-host key that authenticates precompiled-cache records lives: `DPONE_CACHE_KEY`
/// when set, else `$XDG_STATE_HOME/dpone-host/precompiled-cache.key`, else
/// `$HOME/.local/state/dpone-host/precompiled-cache.key`. Never inside a cache directory.
pub fn cache_key_path() -> Result<PathBuf, Failure> {
    let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(path) = non_empty("DPONE_CACHE_KEY") {
        return Ok(PathBuf::from(path));
    }
    let state = non_empty("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| non_empty("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .ok_or_else(|| {
            Failure::bad_input(
                "DPONE_CLI_CACHE_KEY_UNSET",
                "no place for the precompiled-cache key: set DPONE_CACHE_KEY, XDG_STATE_HOME or HOME",
            )
        })?;
    Ok(state.join("dpone-host").join("precompiled-cache.key"))
}

/// The host's bundle activation ledger (highest activated sequence per bundle name; its lock
/// file beside it): `$DPONE_STATE_DIR/bundle-activations.json`, else under
/// `$XDG_STATE_HOME/dpone-host/`, else `$HOME/.local/state/dpone-host/`.
pub fn activation_ledger_path() -> Result<PathBuf, Failure> {
    let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let dir = non_empty("DPONE_STATE_DIR")
        .map(PathBuf::from)
        .or_else(|| non_empty("XDG_STATE_HOME").map(|d| PathBuf::from(d).join("dpone-host")))
        .or_else(|| {
            non_empty("HOME").map(|h| PathBuf::from(h).join(".local/state/dpone-host"))
        })
        .ok_or_else(|| {
            Failure::bad_input(
                "DPONE_CLI_STATE_DIR_UNSET",
                "no place for the bundle activation state: set DPONE_STATE_DIR, XDG_STATE_HOME or HOME",
            )
        })?;
    Ok(dir.join("bundle-activations.json"))
}

/// Builds a runtime, with a precompiled cache when `cache_dir` is given. The cache directory is
/// checked (owner, mode, symbolic links, swappable parents) and its records are authenticated
/// with the key at [`cache_key_path`].
pub fn runtime(cache_dir: Option<&Path>) -> Result<PolicyRuntime, Failure> {
    let runtime = PolicyRuntime::new(sandbox_config()?)?;
    let Some(dir) = cache_dir else {
        return Ok(runtime);
    };
    runtime_with_cache(runtime, dir, &cache_key_path()?)
}

/// The variable that sets each decision's wall-clock deadline in milliseconds.
pub const DEADLINE_ENV: &str = "DPONE_POLICY_DEADLINE_MS";

/// The sandbox limits: the defaults, with the wall-clock deadline from [`DEADLINE_ENV`] when
/// set (50 to 60,000 ms). Fuel stays the deterministic limit; the deadline is the backstop, and
/// a scheduler that packs many processes on few cores may need a longer one.
pub fn sandbox_config() -> Result<SandboxConfig, Failure> {
    let mut config = SandboxConfig::default();
    if let Some(v) = std::env::var_os(DEADLINE_ENV) {
        let ms = v
            .to_str()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|ms| (50..=60_000).contains(ms))
            .ok_or_else(|| {
                Failure::bad_input(
                    "DPONE_CLI_POLICY_DEADLINE_INVALID",
                    "DPONE_POLICY_DEADLINE_MS is not a whole number of milliseconds from 50 to 60000",
                )
            })?;
        config.deadline = std::time::Duration::from_millis(ms);
    }
    Ok(config)
}

/// Adds the checked precompiled cache in `dir`, authenticated by the key at `key`.
pub fn runtime_with_cache(
    runtime: PolicyRuntime,
    dir: &Path,
    key: &Path,
) -> Result<PolicyRuntime, Failure> {
    Ok(runtime.with_cache(PrecompiledCache::open(dir, key)?))
}

/// Loads the shipped component of `kind` (from `dir` when given, else embedded) at its
/// embedded pin.
pub fn load(
    runtime: &PolicyRuntime,
    dir: Option<&Path>,
    kind: PolicyKind,
) -> Result<LoadedPolicy, Failure> {
    let bytes = component_bytes(dir, kind)?;
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
    /// Shipped components (embedded, or in `dir`), loaded at the embedded pins.
    Shipped {
        /// The runtime to load into.
        runtime: &'r PolicyRuntime,
        /// Directory overriding the embedded components.
        dir: Option<PathBuf>,
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
        dir: Option<&Path>,
        args: &PolicySourceArgs,
    ) -> Result<Self, Failure> {
        match (&args.trust_policy, &args.bundle) {
            (None, None) => Ok(Self::Shipped {
                runtime,
                dir: dir.map(Path::to_path_buf),
            }),
            (Some(trust), Some(bundle)) => {
                let trust = read_trust_policy(trust)?;
                let files = load_bundle(bundle)?;
                Ok(Self::Bundle(Box::new(activate_bundle_recorded(
                    runtime,
                    &files,
                    &trust,
                    &activation_ledger_path()?,
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
            Self::Shipped { runtime, dir } => Ok(Policy::Owned(Box::new(load(
                runtime,
                dir.as_deref(),
                kind,
            )?))),
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
