//! `dpone-host policy new`: scaffolds a standalone policy crate, so a policy author never works
//! inside (or forks) this repository.
//!
//! The crate is its own cargo workspace with the `policy` profile, depends on this checkout's
//! model crate (`dpone-policy-model`) by absolute path (or by git, `--model-git`), carries a copy
//! of the WIT, the shipped policy of its kind as a starting point (plain Rust core plus the
//! wit-bindgen export), the shipped decision tables of the kind and a README. The files are
//! compiled into the binary, so the scaffold matches the contract this host implements; the
//! workspace's `Cargo.lock` comes along, so the crate resolves offline with the dependency
//! versions the shipped policies are built with.

use crate::exit::Failure;
use dpone_policy_runtime::PolicyKind;
use std::path::{Path, PathBuf};

/// This checkout's model crate, the default `dpone-policy-model` of a scaffold.
const MODEL_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies/model");

/// The WIT package, file by file.
const WIT: &[(&str, &str)] = &[
    ("admission.wit", include_str!("../../../wit/admission.wit")),
    (
        "delete-mode.wit",
        include_str!("../../../wit/delete-mode.wit"),
    ),
    ("guard.wit", include_str!("../../../wit/guard.wit")),
    ("scope.wit", include_str!("../../../wit/scope.wit")),
    ("types.wit", include_str!("../../../wit/types.wit")),
    ("worlds.wit", include_str!("../../../wit/worlds.wit")),
];

/// The lock of this workspace: the versions the shipped policies are built with.
const LOCK: &str = include_str!("../../../Cargo.lock");

/// What a scaffold of one kind starts from.
struct Template {
    lib: &'static str,
    component: &'static str,
    /// (file name under `tables/`, JSON).
    tables: &'static [(&'static str, &'static str)],
}

fn template(kind: PolicyKind) -> Template {
    match kind {
        PolicyKind::Admission => Template {
            lib: include_str!("../../../policies/admission/src/lib.rs"),
            component: include_str!("../../../policies/admission/src/component.rs"),
            tables: &[
                (
                    "admit-runtime.json",
                    include_str!("../../../fixtures/decision-tables/admission-runtime.json"),
                ),
                (
                    "admit-static.json",
                    include_str!("../../../fixtures/decision-tables/admission-static.json"),
                ),
            ],
        },
        PolicyKind::Guard => Template {
            lib: include_str!("../../../policies/guard/src/lib.rs"),
            component: include_str!("../../../policies/guard/src/component.rs"),
            tables: &[(
                "decide.json",
                include_str!("../../../fixtures/decision-tables/guard.json"),
            )],
        },
        PolicyKind::DeleteMode => Template {
            lib: include_str!("../../../policies/delete-mode/src/lib.rs"),
            component: include_str!("../../../policies/delete-mode/src/component.rs"),
            tables: &[(
                "plan.json",
                include_str!("../../../fixtures/decision-tables/delete-mode.json"),
            )],
        },
        PolicyKind::Scope => Template {
            lib: include_str!("../../../policies/scope/src/lib.rs"),
            component: include_str!("../../../policies/scope/src/component.rs"),
            tables: &[(
                "decide.json",
                include_str!("../../../fixtures/decision-tables/scope.json"),
            )],
        },
    }
}

/// Where the scaffold's `dpone-policy-model` comes from.
pub enum ModelSource {
    /// This checkout's `policies/model` (the default).
    Default,
    /// Another checkout's model crate directory.
    Path(PathBuf),
    /// A git repository holding the model crate, at a revision.
    Git {
        /// Repository URL.
        url: String,
        /// Commit, tag or branch; none means the default branch.
        rev: Option<String>,
    },
}

/// A cargo package name we accept: `[a-z][a-z0-9-]{0,63}`, not ending in `-`.
fn valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=64).contains(&bytes.len())
        && bytes[0].is_ascii_lowercase()
        && !name.ends_with('-')
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn model_dependency(model: &ModelSource) -> Result<String, Failure> {
    let path = match model {
        ModelSource::Git { url, rev } => {
            if url.is_empty() || url.chars().any(char::is_control) {
                return Err(Failure::bad_input(
                    "DPONE_CLI_ARGUMENT",
                    "--model-git needs a repository URL",
                ));
            }
            let rev = rev
                .as_deref()
                .map(|r| format!(", rev = {}", toml_string(r)))
                .unwrap_or_default();
            return Ok(format!("{{ git = {}{rev} }}", toml_string(url)));
        }
        ModelSource::Default => Path::new(MODEL_DIR),
        ModelSource::Path(path) => path.as_path(),
    };
    let option = match model {
        ModelSource::Default => "this checkout's policies/model",
        _ => "--model-path",
    };
    let not_found = || {
        Failure::bad_input(
            "DPONE_CLI_MODEL_NOT_FOUND",
            format!(
                "{option} is not the dpone-policy-model crate; pass --model-path DIR or --model-git URL"
            ),
        )
    };
    let dir = std::fs::canonicalize(path).map_err(|_| not_found())?;
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).map_err(|_| not_found())?;
    if !manifest.contains("name = \"dpone-policy-model\"") {
        return Err(not_found());
    }
    let dir = dir.to_str().ok_or_else(not_found)?;
    Ok(format!("{{ path = {} }}", toml_string(dir)))
}

fn cargo_toml(name: &str, model: &str) -> String {
    format!(
        r#"# A standalone dpone policy crate, scaffolded by `dpone-host policy new`.
[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib", "rlib"]

[dependencies]
dpone-policy-model = {model}

[target.'cfg(target_arch = "wasm32")'.dependencies]
wit-bindgen = {{ version = "0.63.0", default-features = false, features = ["macros", "realloc"] }}

# Its own workspace: nothing here depends on the dpone-host repository's workspace.
[workspace]

# `dpone-host policy build` compiles with this profile for wasm32-unknown-unknown.
[profile.policy]
inherits = "release"
codegen-units = 1
lto = true
opt-level = "s"
strip = true
debug = false
panic = "abort"
incremental = false
"#
    )
}

fn readme(kind: PolicyKind, name: &str, functions: &[&str], tables: &[&str]) -> String {
    let world = format!("{}-policy", kind.as_str());
    let tables = tables
        .iter()
        .map(|t| format!("`tables/{t}`"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"# {name}

A `{kind}` policy for `dpone-host`: a WebAssembly component exporting the `{world}` world of
`dpone:policy@0.1.0` (in `wit/`), function(s) {functions}.

It starts as a copy of the shipped {kind} policy: `src/lib.rs` is the whole policy as plain
Rust over the `dpone-policy-model` types, `src/component.rs` exports it with wit-bindgen. Change
the core, keep it pure and total (no panics on any facts), and keep the tables in `tables/` in
step with what it decides ({tables}; every row must name the decision variant it expects).

    dpone-host policy build --dir .                  # -> target/policy.wasm
    dpone-host policy test --dir .                   # this crate's tables
    dpone-host policy test --dir . --conformance     # and the host's conformance tables
    dpone-host policy inspect --dir .                # digest, imports (must be []), exports

The host's conformance tables are the properties every {kind} policy must have; the activation
gate runs them on every bundle, whatever tables the bundle ships. The component must import
nothing: build for `wasm32-unknown-unknown` only (a WASI target adds imports and is refused).
See `docs/policy-authors.md` of dpone-host.
"#,
        kind = kind.as_str(),
        functions = functions
            .iter()
            .map(|f| format!("`{f}`"))
            .collect::<Vec<_>>()
            .join(", "),
    )
}

fn write(dir: &Path, relative: &str, text: &str) -> Result<(), Failure> {
    let path = dir.join(relative);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| unwritable(&e))?;
    }
    std::fs::write(&path, text).map_err(|e| unwritable(&e))
}

fn unwritable(e: &std::io::Error) -> Failure {
    Failure::bad_input(
        "DPONE_CLI_OUTPUT_UNWRITABLE",
        format!("cannot write the scaffold: {}", e.kind()),
    )
}

/// Scaffolds a crate of `kind` named `name` into `dir` (absent or empty) and returns the files
/// written, relative to `dir`.
pub fn scaffold(
    kind: PolicyKind,
    name: &str,
    dir: &Path,
    model: &ModelSource,
) -> Result<Vec<String>, Failure> {
    if !valid_name(name) {
        return Err(Failure::bad_input(
            "DPONE_CLI_POLICY_NAME_INVALID",
            "--name must be a cargo package name: 1-64 of a-z, 0-9 and '-', starting with a letter",
        ));
    }
    if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(Failure::bad_input(
            "DPONE_CLI_SCAFFOLD_DIR_NOT_EMPTY",
            "the directory for the new policy exists and is not empty",
        ));
    }
    let model = model_dependency(model)?;
    let template = template(kind);
    let header = format!(
        "// Scaffolded by `dpone-host policy new {}` from the shipped {} policy; make it yours.\n",
        kind.as_str(),
        kind.as_str()
    );
    let mut files: Vec<(String, String)> = vec![
        ("Cargo.toml".into(), cargo_toml(name, &model)),
        ("Cargo.lock".into(), LOCK.to_owned()),
        (".gitignore".into(), "/target\n".into()),
        ("src/lib.rs".into(), format!("{header}{}", template.lib)),
        (
            "src/component.rs".into(),
            format!(
                "{header}{}",
                template
                    .component
                    .replace(r#"path: "../../wit""#, r#"path: "wit""#)
            ),
        ),
        (
            "README.md".into(),
            readme(
                kind,
                name,
                kind.functions(),
                &template.tables.iter().map(|(f, _)| *f).collect::<Vec<_>>(),
            ),
        ),
    ];
    for (file, text) in WIT {
        files.push((format!("wit/{file}"), (*text).to_owned()));
    }
    for (file, text) in template.tables {
        files.push((format!("tables/{file}"), (*text).to_owned()));
    }
    std::fs::create_dir_all(dir).map_err(|e| unwritable(&e))?;
    for (relative, text) in &files {
        write(dir, relative, text)?;
    }
    Ok(files.into_iter().map(|(relative, _)| relative).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cargo_package_names() {
        for good in ["my-guard", "g", "scope2"] {
            assert!(valid_name(good), "{good}");
        }
        for bad in [
            "",
            "My",
            "-x",
            "x-",
            "a b",
            "a_b",
            "a/../b",
            &"a".repeat(65),
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn toml_strings_escape_quotes_backslashes_and_controls() {
        assert_eq!(toml_string(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(toml_string("a\nb"), r#""a\u000Ab""#);
    }

    #[test]
    fn every_template_points_its_bindings_at_the_scaffolds_wit() {
        for kind in PolicyKind::ALL {
            let t = template(kind);
            assert!(
                t.component.contains(r#"path: "../../wit""#),
                "{kind}: the shipped component no longer names ../../wit"
            );
            assert!(!t.tables.is_empty());
        }
    }
}
