//! Developer tasks that cargo alone cannot express.
//!
//! - `cargo xtask policies [--check]`: build the four policy components reproducibly, encode them
//!   as components, and write (or, with `--check`, verify) the pins in `policies/components.lock.json`.
//! - `cargo xtask hostile`: build the hostile fixture components used by the sandbox tests.
//! - `cargo xtask demo`: `policies --check`, then run `dpone-host demo` (the README's main job).
//! - `cargo xtask test`: `policies --check`, `hostile`, then `cargo test --workspace`.

use anyhow::{Context, Result, bail, ensure};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const WASM_TARGET: &str = "wasm32-unknown-unknown";
const WIT_PACKAGE: &str = "dpone:policy@0.1.0";
const LOCK_FILE: &str = "policies/components.lock.json";
/// Where built components land, relative to the workspace root.
const COMPONENT_DIR: &str = "target/components";

/// The shipped policy kinds: (kind, crate, library file stem).
const POLICIES: &[(&str, &str)] = &[
    ("admission", "dpone-policy-admission"),
    ("delete-mode", "dpone-policy-delete-mode"),
    ("guard", "dpone-policy-guard"),
    ("scope", "dpone-policy-scope"),
];

/// Hostile fixture variants: (output name, cargo feature).
const HOSTILE: &[(&str, &str)] = &[
    ("hostile-spin", "spin"),
    ("hostile-grow-memory", "grow-memory"),
    ("hostile-recurse", "recurse"),
    ("hostile-trap", "trap"),
    ("hostile-oversized", "oversized"),
];

#[derive(Serialize, Deserialize, PartialEq, Eq, Debug)]
struct LockFile {
    wit_package: String,
    target: String,
    components: BTreeMap<String, LockedComponent>,
}

#[derive(Serialize, Deserialize, PartialEq, Eq, Debug)]
struct LockedComponent {
    sha256: String,
    size: u64,
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root()?;
    match args.first().map(String::as_str) {
        Some("policies") => {
            let check = args.iter().any(|a| a == "--check");
            policies(&root, check)
        }
        Some("hostile") => hostile(&root),
        Some("demo") => {
            policies(&root, true)?;
            run(Command::new(cargo())
                .current_dir(&root)
                .args(["run", "--quiet", "--release", "-p", "dpone-host", "--", "demo"])
                .args(&args[1..]))
        }
        Some("test") => {
            policies(&root, true)?;
            hostile(&root)?;
            run(Command::new(cargo())
                .current_dir(&root)
                .args(["test", "--workspace"])
                .args(&args[1..]))
        }
        _ => bail!("usage: cargo xtask <policies [--check] | hostile | demo | test>"),
    }
}

fn workspace_root() -> Result<PathBuf> {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    Ok(manifest_dir
        .parent()
        .context("xtask lives one level below the workspace root")?
        .to_path_buf())
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("spawning {cmd:?}"))?;
    ensure!(status.success(), "{cmd:?} failed with {status}");
    Ok(())
}

/// Adds the wasm target when rustup is present and the target is missing.
fn ensure_wasm_target() -> Result<()> {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output();
    match installed {
        Ok(out) if String::from_utf8_lossy(&out.stdout).lines().any(|l| l == WASM_TARGET) => Ok(()),
        Ok(_) => run(Command::new("rustup").args(["target", "add", WASM_TARGET])),
        // Without rustup the toolchain must already provide the target; cargo will say if not.
        Err(_) => Ok(()),
    }
}

/// Builds a core wasm module for each (package, features) pair with flags that make the output
/// independent of the checkout location and cargo home, then encodes each as a component.
fn build_components(
    root: &Path,
    target_subdir: &str,
    builds: &[(&str, &str, Option<&str>)],
) -> Result<BTreeMap<String, Vec<u8>>> {
    ensure_wasm_target()?;
    let target_dir = root.join("target").join(target_subdir);
    let cargo_home = std::env::var("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|_| std::env::var("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .context("locating CARGO_HOME")?;
    let rustflags = [
        format!("--remap-path-prefix={}=/dpone", root.display()),
        format!("--remap-path-prefix={}=/cargo", cargo_home.display()),
        "-Cdebuginfo=0".to_owned(),
    ]
    .join("\u{1f}");
    let mut out = BTreeMap::new();
    for (name, package, feature) in builds {
        let mut cmd = Command::new(cargo());
        cmd.current_dir(root)
            .env_remove("RUSTFLAGS")
            .env("CARGO_ENCODED_RUSTFLAGS", &rustflags)
            .env("CARGO_TARGET_DIR", &target_dir)
            .args(["build", "--quiet", "--locked", "--profile", "policy"])
            .args(["--target", WASM_TARGET, "-p", package]);
        if let Some(feature) = feature {
            cmd.args(["--features", feature]);
        }
        run(&mut cmd)?;
        let file = target_dir
            .join(WASM_TARGET)
            .join("policy")
            .join(format!("{}.wasm", package.replace('-', "_")));
        let module = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
        let component = wit_component::ComponentEncoder::default()
            .module(&module)
            .with_context(|| format!("{name}: module has no component type section"))?
            .validate(true)
            .encode()
            .with_context(|| format!("{name}: encoding the component"))?;
        out.insert((*name).to_owned(), component);
    }
    Ok(out)
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn write_components(root: &Path, components: &BTreeMap<String, Vec<u8>>) -> Result<()> {
    let dir = root.join(COMPONENT_DIR);
    std::fs::create_dir_all(&dir)?;
    for (name, bytes) in components {
        std::fs::write(dir.join(format!("{name}.wasm")), bytes)?;
    }
    Ok(())
}

fn policies(root: &Path, check: bool) -> Result<()> {
    let builds: Vec<_> = POLICIES.iter().map(|(k, p)| (*k, *p, None)).collect();
    let components = build_components(root, "policy-build", &builds)?;
    write_components(root, &components)?;
    let lock = LockFile {
        wit_package: WIT_PACKAGE.to_owned(),
        target: WASM_TARGET.to_owned(),
        components: components
            .iter()
            .map(|(kind, bytes)| {
                (
                    kind.clone(),
                    LockedComponent {
                        sha256: sha256_hex(bytes),
                        size: bytes.len() as u64,
                    },
                )
            })
            .collect(),
    };
    let lock_path = root.join(LOCK_FILE);
    if check {
        let text = std::fs::read_to_string(&lock_path)
            .with_context(|| format!("reading {LOCK_FILE}; run `cargo xtask policies` first"))?;
        let pinned: LockFile = serde_json::from_str(&text).context("parsing the lock file")?;
        if pinned != lock {
            eprintln!("pinned: {}", serde_json::to_string_pretty(&pinned)?);
            eprintln!("built:  {}", serde_json::to_string_pretty(&lock)?);
            bail!("policy components differ from {LOCK_FILE}: the build is not reproducible or the lock is stale");
        }
        eprintln!("policies: {} components match {LOCK_FILE}", lock.components.len());
    } else {
        let mut text = serde_json::to_string_pretty(&lock)?;
        text.push('\n');
        std::fs::write(&lock_path, text)?;
        eprintln!("policies: wrote {LOCK_FILE}");
    }
    for (kind, c) in &lock.components {
        eprintln!("  {kind:<12} sha256:{} {} bytes", c.sha256, c.size);
    }
    Ok(())
}

fn hostile(root: &Path) -> Result<()> {
    let builds: Vec<_> = HOSTILE
        .iter()
        .map(|(name, feature)| (*name, "dpone-hostile-policy", Some(*feature)))
        .collect();
    let components = build_components(root, "hostile-build", &builds)?;
    write_components(root, &components)?;
    eprintln!("hostile: built {} fixture components", components.len());
    Ok(())
}
