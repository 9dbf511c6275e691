//! Building policy components and pinning them.
//!
//! A policy crate is compiled for `wasm32-unknown-unknown` (std without WASI: the module imports
//! nothing), with path prefixes remapped so the bytes do not depend on where the checkout or the
//! cargo home lives, then encoded as a component with `wit-component`. The lock file
//! (`policies/components.lock.json`) pins each component's sha256 and size.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The only compilation target policies are built for.
pub const WASM_TARGET: &str = "wasm32-unknown-unknown";

/// Shadow-stack size linked into policy modules (bytes).
pub const GUEST_STACK_BYTES: u32 = 32 * 1024;

/// Cargo profile used for policy builds (defined in the workspace `Cargo.toml`).
pub const PROFILE: &str = "policy";

/// Why a build or a lock operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A command could not be run or failed.
    #[error("{command} failed: {detail}")]
    Command {
        /// The command.
        command: String,
        /// What went wrong.
        detail: String,
    },
    /// The module could not be encoded as a component.
    #[error("encoding {name} as a component failed: {detail}")]
    Encode {
        /// Component name.
        name: String,
        /// Encoder message.
        detail: String,
    },
    /// File I/O failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The lock file is malformed.
    #[error("lock file is malformed: {0}")]
    LockMalformed(String),
}

impl BuildError {
    /// Stable machine code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Command { .. } => "DPONE_BUILD_COMMAND_FAILED",
            Self::Encode { .. } => "DPONE_BUILD_ENCODE_FAILED",
            Self::Io { .. } => "DPONE_BUILD_IO",
            Self::LockMalformed(_) => "DPONE_BUILD_LOCK_MALFORMED",
        }
    }
}

/// One component to build: its name, the cargo package, and an optional feature.
#[derive(Clone, Debug)]
pub struct BuildSpec {
    /// Output name (e.g. the policy kind).
    pub name: String,
    /// Cargo package to build.
    pub package: String,
    /// A cargo feature to enable, if any.
    pub feature: Option<String>,
}

/// Where and how to build.
#[derive(Clone, Debug)]
pub struct BuildEnv {
    /// The workspace (or crate) directory cargo runs in; remapped to `/dpone`.
    pub workspace: PathBuf,
    /// Cargo's target directory for these builds.
    pub target_dir: PathBuf,
    /// The cargo home, remapped to `/cargo`.
    pub cargo_home: PathBuf,
    /// Pass `--locked` to cargo.
    pub locked: bool,
}

impl BuildEnv {
    /// The usual environment: cargo home from `CARGO_HOME` or `~/.cargo`.
    pub fn new(workspace: &Path, target_dir: &Path) -> Self {
        let cargo_home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
            .unwrap_or_else(|| PathBuf::from("/nonexistent-cargo-home"));
        Self {
            workspace: workspace.to_path_buf(),
            target_dir: target_dir.to_path_buf(),
            cargo_home,
            locked: true,
        }
    }
}

fn run(cmd: &mut Command) -> Result<std::process::Output, BuildError> {
    let command = format!("{:?}", cmd.get_program());
    let output = cmd.output().map_err(|e| BuildError::Command {
        command: command.clone(),
        detail: e.to_string(),
    })?;
    if !output.status.success() {
        return Err(BuildError::Command {
            command,
            detail: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(output)
}

/// Adds the wasm target through rustup when it is missing. Without rustup the toolchain must
/// already provide the target; cargo then says so if it does not.
pub fn ensure_wasm_target() -> Result<(), BuildError> {
    let Ok(out) = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
    else {
        return Ok(());
    };
    if String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.trim() == WASM_TARGET)
    {
        return Ok(());
    }
    run(Command::new("rustup").args(["target", "add", WASM_TARGET])).map(|_| ())
}

/// Builds each spec and returns the encoded components by name.
pub fn build_components(
    env: &BuildEnv,
    specs: &[BuildSpec],
) -> Result<BTreeMap<String, Vec<u8>>, BuildError> {
    ensure_wasm_target()?;
    let rustflags = [
        format!("--remap-path-prefix={}=/dpone", env.workspace.display()),
        format!("--remap-path-prefix={}=/cargo", env.cargo_home.display()),
        "-Cdebuginfo=0".to_owned(),
        // A decision needs little stack; a small shadow stack keeps the instance's memory
        // footprint, and so the work of resetting a sandbox, small.
        format!("-Clink-arg=-zstack-size={GUEST_STACK_BYTES}"),
    ]
    .join("\u{1f}");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut out = BTreeMap::new();
    for spec in specs {
        let mut cmd = Command::new(&cargo);
        cmd.current_dir(&env.workspace)
            .env_remove("RUSTFLAGS")
            .env("CARGO_ENCODED_RUSTFLAGS", &rustflags)
            .env("CARGO_TARGET_DIR", &env.target_dir)
            .args([
                "build",
                "--quiet",
                "--profile",
                PROFILE,
                "--target",
                WASM_TARGET,
            ])
            .args(["-p", &spec.package]);
        if env.locked {
            cmd.arg("--locked");
        }
        if let Some(feature) = &spec.feature {
            cmd.args(["--features", feature]);
        }
        run(&mut cmd)?;
        let file = env
            .target_dir
            .join(WASM_TARGET)
            .join(PROFILE)
            .join(format!("{}.wasm", spec.package.replace('-', "_")));
        let module = std::fs::read(&file).map_err(|source| BuildError::Io {
            what: format!("reading the core module of {}", spec.name),
            source,
        })?;
        out.insert(spec.name.clone(), encode_component(&spec.name, &module)?);
    }
    Ok(out)
}

/// Encodes a core module that carries wit-bindgen's component-type section as a component.
pub fn encode_component(name: &str, module: &[u8]) -> Result<Vec<u8>, BuildError> {
    let encode_error = |detail: String| BuildError::Encode {
        name: name.to_owned(),
        detail,
    };
    wit_component::ComponentEncoder::default()
        .module(module)
        .map_err(|e| encode_error(format!("{e:#}")))?
        .validate(true)
        .encode()
        .map_err(|e| encode_error(format!("{e:#}")))
}

/// sha256 of `bytes` as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The lock file: pins of the shipped components.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentLock {
    /// WIT package the components implement.
    pub wit_package: String,
    /// Compilation target of the core modules.
    pub target: String,
    /// Pins by component name.
    pub components: BTreeMap<String, LockedComponent>,
}

/// One pinned component.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedComponent {
    /// sha256 as `sha256:<hex>`.
    pub sha256: String,
    /// Size in bytes.
    pub size: u64,
}

impl ComponentLock {
    /// Pins the given components.
    pub fn pin(wit_package: &str, components: &BTreeMap<String, Vec<u8>>) -> Self {
        Self {
            wit_package: wit_package.to_owned(),
            target: WASM_TARGET.to_owned(),
            components: components
                .iter()
                .map(|(name, bytes)| {
                    (
                        name.clone(),
                        LockedComponent {
                            sha256: format!("sha256:{}", sha256_hex(bytes)),
                            size: bytes.len() as u64,
                        },
                    )
                })
                .collect(),
        }
    }

    /// Parses a lock file.
    pub fn from_json(text: &str) -> Result<Self, BuildError> {
        serde_json::from_str(text).map_err(|e| {
            BuildError::LockMalformed(dpone_boundary::text::clean_message(&e.to_string()))
        })
    }

    /// Renders the lock file (pretty JSON, sorted, trailing newline).
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_round_trips_and_rejects_unknown_fields() {
        let mut components = BTreeMap::new();
        components.insert("guard".to_owned(), b"abc".to_vec());
        let lock = ComponentLock::pin("dpone:policy@0.1.0", &components);
        assert_eq!(ComponentLock::from_json(&lock.to_json()).unwrap(), lock);
        assert_eq!(
            lock.components["guard"].sha256,
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let extra = lock.to_json().replacen('{', "{\"extra\": 1,", 1);
        assert!(ComponentLock::from_json(&extra).is_err());
    }
}
