//! Tier: CLI end-to-end, slow (builds four WebAssembly components). The standalone policy
//! author's journey of `docs/policy-authors.md`, run as written: the `dpone-host` lines of the
//! block after the `standalone-journey` marker are executed for each of the four kinds (with
//! `guard` replaced by the kind) in a fresh temporary directory, and each step's result is
//! checked: the scaffold is written, builds offline into a component that imports nothing and
//! serves its kind, passes its own tables and the host's conformance tables. The four builds
//! share one cargo target directory, so compiled dependencies are built once.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const DOC: &str = include_str!("../../../docs/policy-authors.md");

/// The `dpone-host` command lines of the journey block, split into arguments (comments
/// dropped), without the program name.
fn journey() -> Vec<Vec<String>> {
    let marker = DOC
        .find("<!-- standalone-journey")
        .expect("docs/policy-authors.md has the standalone-journey marker");
    let rest = &DOC[marker..];
    let open = rest.find("```sh\n").expect("a sh block follows the marker") + "```sh\n".len();
    let close = rest[open..].find("```").expect("the sh block closes") + open;
    rest[open..close]
        .lines()
        .filter_map(|line| line.trim().strip_prefix("dpone-host "))
        .map(|command| {
            let command = command.split('#').next().unwrap_or_default();
            command.split_whitespace().map(str::to_owned).collect()
        })
        .collect()
}

/// The doc's guard example as the same journey for `kind`.
fn for_kind(command: &[String], kind: &str) -> Vec<String> {
    command
        .iter()
        .map(|arg| match arg.as_str() {
            "guard" => kind.to_owned(),
            "my-guard" => format!("my-{kind}"),
            other => other.to_owned(),
        })
        .collect()
}

fn run(cwd: &Path, target_dir: &Path, args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dpone-host"))
        .current_dir(cwd)
        .env("CARGO_TARGET_DIR", target_dir)
        .args(args)
        .output()
        .expect("dpone-host runs")
}

fn stdout_json(out: &Output, args: &[String]) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "`dpone-host {}` failed: {}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("stdout is JSON ({e})"))
}

#[test]
fn the_documented_standalone_journey_works_for_every_kind() {
    let steps = journey();
    let shapes: Vec<String> = steps
        .iter()
        .map(|s| {
            s.iter()
                .take(2)
                .chain(s.iter().filter(|a| *a == "--conformance"))
                .cloned()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(
        shapes,
        [
            "policy new",
            "policy build",
            "policy test",
            "policy test --conformance",
            "policy inspect"
        ],
        "the documented journey lost or reordered a step"
    );

    let work = tempfile::tempdir().expect("tempdir");
    let target_dir: PathBuf = work.path().join("shared-target");
    for kind in ["guard", "admission", "delete-mode", "scope"] {
        let crate_dir = work.path().join(format!("my-{kind}"));
        for step in &steps {
            let args = for_kind(step, kind);
            let out = run(work.path(), &target_dir, &args);
            let json = stdout_json(&out, &args);
            match (args[1].as_str(), args.iter().any(|a| a == "--conformance")) {
                ("new", _) => {
                    assert_eq!(json["kind"], kind);
                    for file in ["Cargo.toml", "Cargo.lock", "README.md", "src/lib.rs"] {
                        assert!(crate_dir.join(file).is_file(), "{kind}: {file}");
                    }
                    let manifest =
                        std::fs::read_to_string(crate_dir.join("Cargo.toml")).expect("manifest");
                    assert!(manifest.contains("[workspace]"), "{kind}: own workspace");
                    assert!(
                        manifest.contains("[profile.policy]"),
                        "{kind}: policy profile"
                    );
                }
                ("build", _) => {
                    assert_eq!(json["built"], format!("my-{kind}"));
                    assert_eq!(json["surface"]["imports"], serde_json::json!([]));
                    assert!(crate_dir.join("target/policy.wasm").is_file());
                }
                ("test", false) => {
                    assert_eq!(json["failed"], 0, "{kind}: {json}");
                    assert!(json["rows"].as_u64().unwrap_or(0) > 10, "{kind}: {json}");
                    assert!(json["conformance"].is_null());
                }
                ("test", true) => {
                    assert_eq!(json["failed"], 0, "{kind}");
                    assert_eq!(json["conformance_failed"], 0, "{kind}");
                    let tables = json["conformance"]["tables"].as_array().expect("tables");
                    assert!(!tables.is_empty(), "{kind}");
                    for table in tables {
                        assert_eq!(table["kind"], kind);
                        assert!(table["rows"].as_array().is_some_and(|r| !r.is_empty()));
                    }
                }
                ("inspect", _) => {
                    assert_eq!(json["imports"], serde_json::json!([]));
                    assert_eq!(json["serves"], serde_json::json!([kind]));
                }
                (other, _) => panic!("the journey has an unexpected step {other}"),
            }
        }
    }
}

#[test]
fn a_scaffold_refuses_bad_names_non_empty_directories_and_a_missing_model() {
    let work = tempfile::tempdir().expect("tempdir");
    let dpone = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_dpone-host"))
            .current_dir(work.path())
            .args(args)
            .output()
            .expect("dpone-host runs")
    };
    let code = |out: &Output| {
        let text = String::from_utf8_lossy(&out.stderr);
        let report: Value =
            serde_json::from_str(text.lines().last().unwrap_or_default()).expect("JSON report");
        (
            out.status.code(),
            report["error"].as_str().unwrap_or_default().to_owned(),
        )
    };
    let out = dpone(&["policy", "new", "guard", "--name", "Bad_Name", "x"]);
    assert_eq!(
        code(&out),
        (Some(3), "DPONE_CLI_POLICY_NAME_INVALID".into())
    );
    assert!(!work.path().join("x").exists());

    std::fs::create_dir(work.path().join("full")).expect("mkdir");
    std::fs::write(work.path().join("full/keep.txt"), "mine").expect("write");
    let out = dpone(&["policy", "new", "guard", "--name", "g", "full"]);
    assert_eq!(
        code(&out),
        (Some(3), "DPONE_CLI_SCAFFOLD_DIR_NOT_EMPTY".into())
    );
    assert_eq!(
        std::fs::read_to_string(work.path().join("full/keep.txt")).expect("kept"),
        "mine"
    );

    let out = dpone(&[
        "policy",
        "new",
        "guard",
        "--name",
        "g",
        "y",
        "--model-path",
        "no-such-model",
    ]);
    assert_eq!(code(&out), (Some(3), "DPONE_CLI_MODEL_NOT_FOUND".into()));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("no-such-model"));

    let out = dpone(&[
        "policy",
        "new",
        "scope",
        "--name",
        "by-git",
        "git",
        "--model-git",
        "https://example.invalid/dpone-host.git",
        "--model-rev",
        "v0.1.0",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let manifest = std::fs::read_to_string(work.path().join("git/Cargo.toml")).expect("manifest");
    assert!(
        manifest.contains(
            r#"dpone-policy-model = { git = "https://example.invalid/dpone-host.git", rev = "v0.1.0" }"#
        ),
        "{manifest}"
    );
}
