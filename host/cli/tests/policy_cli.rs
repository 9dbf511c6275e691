//! Tier: CLI end-to-end. Runs the `dpone-host` binary from the workspace root (where
//! `cargo xtask policies` leaves the components) and checks JSON on stdout, error reports on
//! stderr and the documented exit codes.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn dpone(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dpone-host"))
        .current_dir(root())
        .args(args)
        .output()
        .expect("dpone-host runs")
}

fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn stderr_code(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stderr);
    let line = text.lines().last().unwrap_or_default();
    let report: Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("stderr ends with a JSON report ({e}): {text}"));
    report["error"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn inspect_shows_a_pure_guard_component() {
    let out = dpone(&["policy", "inspect", "target/components/guard.wasm"]);
    assert_eq!(out.status.code(), Some(0));
    let json = stdout_json(&out);
    assert_eq!(json["imports"], serde_json::json!([]));
    assert_eq!(json["serves"], serde_json::json!(["guard"]));
    assert!(
        json["sha256"]
            .as_str()
            .unwrap_or_default()
            .starts_with("sha256:")
    );
}

#[test]
fn eval_prints_the_decision_and_its_evidence() {
    let out = dpone(&[
        "policy",
        "eval",
        "guard",
        "--input",
        "fixtures/samples/guard.json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = stdout_json(&out);
    assert_eq!(json["evidence"]["kind"], "guard");
    assert_eq!(json["evidence"]["wit_package"], "dpone:policy@0.1.0");
    assert_eq!(json["evidence"]["output"], json["decision"]);
    assert!(json["evidence"]["fuel_used"].as_u64().unwrap_or(0) > 0);
}

#[test]
fn admission_needs_a_function() {
    let out = dpone(&[
        "policy",
        "eval",
        "admission",
        "--input",
        "fixtures/samples/admission-static.json",
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stderr_code(&out), "DPONE_CLI_FUNCTION_REQUIRED");
}

#[test]
fn facts_of_the_wrong_shape_are_bad_input() {
    let out = dpone(&[
        "policy",
        "eval",
        "guard",
        "--input",
        "fixtures/samples/scope.json",
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stderr_code(&out), "DPONE_POLICY_INPUT_INVALID");
}

#[test]
fn a_component_off_its_pin_is_refused_with_exit_4() {
    let wrong_pin = format!("sha256:{}", "0".repeat(64));
    let out = dpone(&[
        "policy",
        "eval",
        "guard",
        "--input",
        "fixtures/samples/guard.json",
        "--component",
        "target/components/guard.wasm",
        "--pin",
        &wrong_pin,
    ]);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(stderr_code(&out), "DPONE_POLICY_PIN_MISMATCH");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("target/components"),
        "no local paths in errors: {stderr}"
    );
}

#[test]
fn the_shipped_table_passes_and_a_wrong_expectation_fails_with_exit_1() {
    let out = dpone(&[
        "policy",
        "test",
        "target/components/delete-mode.wasm",
        "fixtures/decision-tables/delete-mode.json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let json = stdout_json(&out);
    assert_eq!(json["failed"], 0);
    assert!(json["passed"].as_u64().unwrap_or(0) > 0);

    let table = serde_json::json!({
        "kind": "delete-mode",
        "function": "plan",
        "rows": [{
            "name": "hard delete is not timestamp_only",
            "input": {"delete_policy": "hard_delete", "business_columns": ["a"]},
            "expect": {"plan": {"mode": "timestamp_only"}}
        }]
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("table.json");
    std::fs::write(&path, table.to_string()).expect("write table");
    let out = dpone(&[
        "policy",
        "test",
        "target/components/delete-mode.wasm",
        path.to_str().expect("utf-8"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout_json(&out)["failed"], 1);
    assert_eq!(stderr_code(&out), "DPONE_POLICY_TABLE_FAILED");
}

#[test]
fn a_table_run_against_the_wrong_kind_is_refused() {
    let out = dpone(&[
        "policy",
        "test",
        "target/components/guard.wasm",
        "fixtures/decision-tables/scope.json",
    ]);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(stderr_code(&out), "DPONE_POLICY_WORLD_MISMATCH");
}

#[test]
fn demo_verifies_every_pin_and_decides_one_sample_per_function() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let cache = scratch.path().join("cache");
    let key = scratch.path().join("cache.key");
    let demo = || {
        Command::new(env!("CARGO_BIN_EXE_dpone-host"))
            .current_dir(root())
            .env("DPONE_CACHE_KEY", &key)
            .args(["demo", "--cache-dir", cache.to_str().expect("utf-8")])
            .output()
            .expect("dpone-host runs")
    };
    let out = demo();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = stdout_json(&out);
    assert_eq!(json["pins_verified"].as_array().map(Vec::len), Some(4));
    let decisions = json["decisions"].as_array().expect("decisions");
    assert_eq!(decisions.len(), 5);
    for evidence in decisions {
        assert!(
            evidence["input_sha256"]
                .as_str()
                .unwrap_or_default()
                .starts_with("sha256:")
        );
    }
    // A second run takes the code from the verified cache.
    let again = stdout_json(&demo());
    assert!(
        again["pins_verified"]
            .as_array()
            .expect("loads")
            .iter()
            .all(|l| l["code_source"] == "cache")
    );
}

#[test]
fn demo_refuses_a_cache_directory_others_can_write() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = tempfile::tempdir().expect("tempdir");
    let cache = scratch.path().join("cache");
    std::fs::create_dir(&cache).expect("mkdir");
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let out = Command::new(env!("CARGO_BIN_EXE_dpone-host"))
        .current_dir(root())
        .env("DPONE_CACHE_KEY", scratch.path().join("cache.key"))
        .args(["demo", "--cache-dir", cache.to_str().expect("utf-8")])
        .output()
        .expect("dpone-host runs");
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(stderr_code(&out), "DPONE_POLICY_CACHE_DIR_UNSAFE");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains(scratch.path().to_str().expect("utf-8")),
        "no path in the report"
    );
}

#[test]
fn demo_without_a_cache_directory_writes_no_cache_in_the_working_directory() {
    let work = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_dpone-host"))
        .current_dir(work.path())
        .args([
            "demo",
            "--components-dir",
            root().join("target/components").to_str().expect("utf-8"),
        ])
        .output()
        .expect("dpone-host runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_dir(work.path()).expect("dir").count(),
        0,
        "nothing written to the working directory"
    );
    assert!(
        stdout_json(&out)["pins_verified"]
            .as_array()
            .expect("loads")
            .iter()
            .all(|l| l["code_source"] == "compiled")
    );
}

#[test]
fn policy_build_reproduces_the_locked_digest_of_a_shipped_policy() {
    let out_dir = tempfile::tempdir().expect("tempdir");
    let out = out_dir.path().join("guard.wasm");
    let built = dpone(&[
        "policy",
        "build",
        "--package",
        "dpone-policy-guard",
        "--dir",
        ".",
        "--out",
        out.to_str().expect("utf-8"),
    ]);
    assert_eq!(
        built.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let json = stdout_json(&built);
    assert_eq!(json["surface"]["imports"], serde_json::json!([]));
    let lock: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("policies/components.lock.json")).expect("lock"),
    )
    .expect("lock parses");
    assert_eq!(json["sha256"], lock["components"]["guard"]["sha256"]);
}

/// Runs a copy of the binary (as `cargo install` would leave it) from an empty working directory
/// outside the repository.
fn installed(bin_dir: &std::path::Path, work: &std::path::Path, args: &[&str]) -> Output {
    Command::new(bin_dir.join("dpone-host"))
        .current_dir(work)
        .env_remove("DPONE_TRUST_POLICY")
        .env_remove("DPONE_POLICY_BUNDLE")
        .args(args)
        .output()
        .expect("dpone-host runs")
}

#[test]
fn the_binary_runs_every_shipped_policy_command_from_any_directory() {
    let bin = tempfile::tempdir().expect("bin dir");
    std::fs::copy(
        env!("CARGO_BIN_EXE_dpone-host"),
        bin.path().join("dpone-host"),
    )
    .expect("copy");
    let work = tempfile::tempdir().expect("work dir");
    let sample = root().join("fixtures/samples/guard.json");
    let sample = sample.to_str().expect("utf-8");
    let ok = |out: &Output| {
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };

    let demo = installed(bin.path(), work.path(), &["demo"]);
    ok(&demo);
    assert_eq!(
        stdout_json(&demo)["pins_verified"].as_array().map(Vec::len),
        Some(4)
    );
    for kind in ["guard", "scope", "delete-mode", "admission"] {
        let input = match kind {
            "guard" => sample.to_owned(),
            "scope" => root()
                .join("fixtures/samples/scope.json")
                .display()
                .to_string(),
            "delete-mode" => root()
                .join("fixtures/samples/delete-mode.json")
                .display()
                .to_string(),
            _ => root()
                .join("fixtures/samples/admission-static.json")
                .display()
                .to_string(),
        };
        let mut args = vec!["policy", "eval", kind, "--input", &input];
        if kind == "admission" {
            args.extend(["--function", "admit-static"]);
        }
        let eval = installed(bin.path(), work.path(), &args);
        ok(&eval);
        assert_eq!(stdout_json(&eval)["evidence"]["kind"], kind);
    }
    let bench = installed(
        bin.path(),
        work.path(),
        &["policy", "bench", "guard", "--iterations", "20"],
    );
    ok(&bench);
    assert_eq!(
        std::fs::read_dir(work.path()).expect("dir").count(),
        0,
        "nothing written to the working directory"
    );
}

#[test]
fn components_dir_overrides_the_embedded_components_and_is_still_pinned() {
    let dir = tempfile::tempdir().expect("components");
    for kind in ["admission", "delete-mode", "scope"] {
        std::fs::copy(
            root().join(format!("target/components/{kind}.wasm")),
            dir.path().join(format!("{kind}.wasm")),
        )
        .expect("copy");
    }
    // The scope component offered as the guard: the override is read, and refused at the pin.
    std::fs::copy(
        root().join("target/components/scope.wasm"),
        dir.path().join("guard.wasm"),
    )
    .expect("copy");
    let out = dpone(&[
        "demo",
        "--components-dir",
        dir.path().to_str().expect("utf-8"),
    ]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stderr_code(&out), "DPONE_POLICY_PIN_MISMATCH");
}

#[test]
fn an_xmin_invocation_id_that_is_not_one_path_component_is_refused_before_any_path() {
    let work = tempfile::tempdir().expect("tempdir");
    let artifacts = work.path().join("artifacts");
    for bad in ["../../escape", "/abs", "a/b", ".."] {
        let out = dpone(&[
            "run",
            "--manifest",
            "fixtures/xmin/manifest.yaml",
            "--connections",
            "fixtures/xmin/registry.yaml",
            "--artifact-dir",
            artifacts.to_str().expect("utf-8"),
            "--invocation",
            bad,
        ]);
        assert_eq!(stderr_code(&out), "DPONE_CLI_INVOCATION_INVALID", "{bad}");
        assert!(!artifacts.exists(), "no directory was created for {bad}");
        assert!(!work.path().join("escape").exists());
    }
}

#[test]
fn the_decision_deadline_is_set_by_its_variable_and_a_bad_value_is_refused_before_any_decision() {
    let eval = |deadline: &str| {
        Command::new(env!("CARGO_BIN_EXE_dpone-host"))
            .current_dir(root())
            .env("DPONE_POLICY_DEADLINE_MS", deadline)
            .args([
                "policy",
                "eval",
                "guard",
                "--input",
                "fixtures/samples/guard.json",
            ])
            .output()
            .expect("dpone-host runs")
    };
    for bad in ["0", "49", "60001", "ten", "", "500ms"] {
        let out = eval(bad);
        assert_eq!(out.status.code(), Some(3), "{bad:?}");
        assert_eq!(stderr_code(&out), "DPONE_CLI_POLICY_DEADLINE_INVALID");
        assert!(out.stdout.is_empty(), "no decision for {bad:?}");
    }
    for good in ["50", "10000", "60000"] {
        let out = eval(good);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{good}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(stdout_json(&out)["evidence"]["kind"], "guard");
    }
}

/// The precompiled cache and its key are shared by every process of a host: eight `demo`
/// processes started together on a fresh cache directory and no key all succeed (one key is
/// published whole, none reads it half-written), and a later run takes every component from
/// the cache their records filled, authenticated with that one key.
#[test]
fn concurrent_first_runs_share_one_cache_key() {
    use std::process::Stdio;
    let scratch = tempfile::tempdir().expect("tempdir");
    let cache = scratch.path().join("cache");
    let key = scratch.path().join("cache.key");
    let demo = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dpone-host"));
        cmd.current_dir(root()).env("DPONE_CACHE_KEY", &key).args([
            "demo",
            "--cache-dir",
            cache.to_str().expect("utf-8"),
        ]);
        cmd
    };
    let children: Vec<_> = (0..8)
        .map(|_| {
            demo()
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("dpone-host runs")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("wait");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(std::fs::read(&key).expect("the key").len(), 32);
    let leftovers = std::fs::read_dir(scratch.path())
        .expect("dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        })
        .count();
    assert_eq!(leftovers, 0, "no staged key file is left behind");
    let again = stdout_json(&demo().output().expect("dpone-host runs"));
    assert!(
        again["pins_verified"]
            .as_array()
            .expect("loads")
            .iter()
            .all(|l| l["code_source"] == "cache"),
        "{again}"
    );
}

/// The GC-subtype guard of the hostile corpus (RUSTSEC-2026-0570: a non-final function type, a
/// subtype of it, a `call_indirect` expecting the supertype) aborted `policy eval` with exit 134
/// inside wasmtime 48.0.8. Through the binary it is now a clean refusal with the stable code and
/// the documented exit code of a policy failure, and nothing aborts.
#[test]
fn a_gc_subtype_guard_is_refused_by_policy_eval_and_the_host_does_not_abort() {
    let name = "gc-subtype-call-indirect";
    let mut module = wat::parse_file(root().join(format!("fixtures/hostile/features/{name}.wat")))
        .expect("the fixture assembles");
    let mut resolve = wit_parser::Resolve::default();
    let (package, _) = resolve.push_dir(root().join("wit")).expect("wit parses");
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
    let component = dpone_policy_build::encode_component(name, &module).expect("encodes");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gc-subtype.wasm");
    std::fs::write(&path, &component).expect("written");
    let pin = format!(
        "sha256:{}",
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&component))
    );

    let out = dpone(&[
        "policy",
        "eval",
        "guard",
        "--input",
        "fixtures/samples/guard.json",
        "--component",
        path.to_str().expect("utf-8 path"),
        "--pin",
        &pin,
    ]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "a policy failure's exit code, not a signal: {out:?}"
    );
    assert_eq!(stderr_code(&out), "DPONE_POLICY_WASM_FEATURE_DISABLED");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("gc"), "names the proposal: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
