//! Tier: CLI end-to-end. Error reports never replay the input (issue 17): a 1 MiB value comes
//! back as a short excerpt, line and paragraph separators, bidi overrides and isolates, zero-width
//! and control characters are escaped, and the report keeps the code, the kind, the field path or
//! line and column. Exit statuses follow the documented table (a manifest parse error is bad
//! input, exit 3).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn dpone(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dpone-host"))
        .current_dir(root())
        .args(args)
        .env_remove("DPONE_TRUST_POLICY")
        .env_remove("DPONE_POLICY_BUNDLE")
        .env_remove("DPONE_CONNECTIONS")
        .output()
        .expect("dpone-host runs")
}

/// A value of about 1 MiB that still fits the 1 MiB ceiling of its file.
fn big(fill: char) -> String {
    std::iter::repeat_n(fill, (1 << 20) - 4096).collect()
}

/// Characters an attacker may use to reorder, hide or break a terminal or log line.
const HOSTILE: &[char] = &[
    '\u{1b}', '\u{7}', '\r', '\u{85}', '\u{2028}', '\u{2029}', '\u{202a}', '\u{202b}', '\u{202c}',
    '\u{202d}', '\u{202e}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}', '\u{200b}', '\u{200e}',
    '\u{200f}', '\u{feff}', '\u{061c}',
];

/// The hostile characters as JSON escapes (for JSON documents) or YAML double-quoted escapes
/// (for YAML documents: the file stays ASCII, the value does not).
fn escaped_hostile() -> String {
    HOSTILE
        .iter()
        .map(|c| format!("x\\u{:04X}", *c as u32))
        .collect()
}

struct Case {
    name: &'static str,
    file: &'static str,
    content: String,
    args: Vec<String>,
    code: &'static str,
    /// Text the report must keep (the field, the expected type, line and column).
    keeps: &'static [&'static str],
}

fn cases(dir: &Path, value: &str, yaml_value: &str) -> Vec<Case> {
    let path = |name: &str| dir.join(name).display().to_string();
    let xmin_manifest =
        std::fs::read_to_string(root().join("fixtures/xmin/manifest.yaml")).expect("fixture");
    let ch_manifest =
        std::fs::read_to_string(root().join("fixtures/clickhouse/manifest.yaml")).expect("fixture");
    let xmin_registry =
        std::fs::read_to_string(root().join("fixtures/xmin/registry.yaml")).expect("fixture");
    let s = |v: &[&str]| v.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    let artifact = "fixtures/xmin/authority.json";
    vec![
        Case {
            name: "XMin manifest",
            file: "xmin.yaml",
            content: xmin_manifest.replace(
                "columns: [id, customer, amount, status]",
                &format!("columns: \"{yaml_value}\""),
            ),
            args: s(&["check", "--manifest", &path("xmin.yaml")]),
            code: "DPONE_XMIN_MANIFEST_INVALID",
            keeps: &["expected a sequence"],
        },
        Case {
            name: "XMin registry",
            file: "registry.yaml",
            content: xmin_registry.replace(
                "environment: prod",
                &format!("environment: [\"{yaml_value}\"]"),
            ),
            args: s(&[
                "check",
                "--connections",
                &path("registry.yaml"),
                "--offline",
            ]),
            code: "DPONE_XMIN_REGISTRY_INVALID",
            keeps: &["expected a string"],
        },
        Case {
            name: "ClickHouse manifest",
            file: "ch.yaml",
            content: ch_manifest
                .replace("table: target_table", &format!("table: [\"{yaml_value}\"]")),
            args: s(&["check", "--manifest", &path("ch.yaml")]),
            code: "DPONE_CLICKHOUSE_MANIFEST_FIELD_TYPE",
            keeps: &["target.table"],
        },
        Case {
            name: "ClickHouse manifest (unknown field)",
            file: "ch2.yaml",
            content: ch_manifest.replace(
                "table: target_table",
                // YAML keys are at most 1024 characters: the key is the value's start.
                &format!(
                    "table: target_table\n  \"{}\": 1",
                    &yaml_value[..yaml_value.len().min(1000)]
                ),
            ),
            args: s(&["check", "--manifest", &path("ch2.yaml")]),
            code: "DPONE_CLICKHOUSE_MANIFEST_UNKNOWN_FIELD",
            keeps: &["unknown field", "target"],
        },
        Case {
            name: "authority document",
            file: "authority.json",
            content: format!(
                "{{\"checkpoint\": \"{}\"}}",
                &value[..value.len().min(60_000)]
            ),
            args: s(&[
                "authority",
                "create",
                "--manifest",
                "fixtures/xmin/manifest.yaml",
                "--connections",
                "fixtures/xmin/registry.yaml",
                "--document",
                &path("authority.json"),
            ]),
            code: "DPONE_XMIN_AUTHORITY_MALFORMED",
            keeps: &["expected struct", "line 1 column"],
        },
        Case {
            name: "decision facts",
            file: "facts.json",
            content: format!("{{\"now\": \"{value}\"}}"),
            args: s(&["policy", "eval", "guard", "--input", &path("facts.json")]),
            code: "DPONE_POLICY_INPUT_INVALID",
            keeps: &["expected i64"],
        },
        Case {
            name: "decision table",
            file: "table.json",
            content: format!(
                "{{\"kind\": \"guard\", \"function\": \"decide\", \"rows\": \"{value}\"}}"
            ),
            args: s(&[
                "policy",
                "test",
                "target/components/guard.wasm",
                &path("table.json"),
            ]),
            code: "DPONE_CLI_TABLE_MALFORMED",
            keeps: &["line 1 column"],
        },
        Case {
            name: "component lock",
            file: "lock.json",
            content: format!("{{\"wit_package\": \"x\", \"components\": \"{value}\"}}"),
            args: s(&[
                "policy",
                "lock",
                "target/components/guard.wasm",
                "--lock",
                &path("lock.json"),
                "--check",
            ]),
            code: "DPONE_BUILD_LOCK_MALFORMED",
            keeps: &["line 1 column"],
        },
        Case {
            name: "Sigstore bundle",
            file: "bundle.sigstore.json",
            content: format!("{{\"mediaType\": [\"{value}\"]}}"),
            args: s(&[
                "verify-bundle",
                "--bundle",
                &path("bundle.sigstore.json"),
                "--certificate-identity",
                "a",
                "--certificate-oidc-issuer",
                "b",
                "--trusted-root",
                &path("bundle.sigstore.json"),
                artifact,
            ]),
            code: "",
            keeps: &[],
        },
        Case {
            name: "nonproduction document",
            file: "grant.json",
            content: std::fs::read_to_string(
                root().join("fixtures/nonproduction/authority-execution.json"),
            )
            .expect("fixture")
            .replace(
                "\"grant_id\":\"f1c8e5a3-7d2b-4e96-8a3f-2b9d4c6e0a17\"",
                &format!("\"grant_id\":\"{value}\""),
            ),
            args: s(&["campaign", "inspect", &path("grant.json")]),
            code: "",
            keeps: &[],
        },
        Case {
            name: "trusted root",
            file: "root.json",
            content: format!("{{\"mediaType\": [\"{value}\"]}}"),
            args: s(&[
                "bundle",
                "trust-policy",
                "--key",
                "fixtures/xmin/authority.json",
                "--threshold",
                "1",
                "--trusted-root",
                &path("root.json"),
            ]),
            code: "",
            keeps: &[],
        },
    ]
}

/// Checks every report of `cases`: short, one line each, nothing hostile, the code and what the
/// user needs kept.
fn check_reports(value: &str, yaml_value: &str, what: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut failures = Vec::new();
    for case in cases(dir.path(), value, yaml_value) {
        std::fs::write(dir.path().join(case.file), &case.content).expect("write");
        let args: Vec<&str> = case.args.iter().map(String::as_str).collect();
        let out = dpone(&args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let name = case.name;
        if out.status.code() != Some(3) {
            failures.push(format!(
                "{name}: exit {:?}, expected 3: {stderr}",
                out.status.code()
            ));
        }
        if stderr.len() > 1024 || stdout.len() > 1024 {
            failures.push(format!(
                "{name}: {} bytes on stderr, {} on stdout",
                stderr.len(),
                stdout.len()
            ));
        }
        let Some(report) = stderr
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str::<Value>(l).ok())
        else {
            failures.push(format!("{name}: no JSON report: {stderr:.300}"));
            continue;
        };
        let code = report["error"].as_str().unwrap_or_default();
        let message = report["message"].as_str().unwrap_or_default();
        if !case.code.is_empty() && code != case.code {
            failures.push(format!(
                "{name}: code {code}, expected {}: {message}",
                case.code
            ));
        }
        for raw in [&stderr, &stdout, &message.to_owned()] {
            if let Some(c) = raw.chars().find(|c| HOSTILE.contains(c)) {
                failures.push(format!("{name}: {:?} passed through: {message}", c));
            }
        }
        if message.contains(&value[..value.len().min(80)]) {
            failures.push(format!("{name}: the value is replayed: {message:.200}"));
        }
        for keep in case.keeps {
            if !message.contains(keep) {
                failures.push(format!("{name}: lost {keep:?}: {message}"));
            }
        }
        if stderr.lines().count() != 1 {
            failures.push(format!(
                "{name}: {} lines on stderr",
                stderr.lines().count()
            ));
        }
    }
    assert!(failures.is_empty(), "{what}:\n{}", failures.join("\n"));
}

#[test]
fn a_1_mib_value_is_not_replayed() {
    let value = big('A');
    check_reports(&value, &value, "1 MiB value");
}

#[test]
fn separators_bidi_and_controls_in_values_are_escaped() {
    // JSON documents carry the characters as \uXXXX escapes, YAML ones as double-quoted \uXXXX
    // escapes (YAML files must be ASCII): either way the parsed value holds them raw.
    let json_value = escaped_hostile();
    let yaml_value = escaped_hostile();
    check_reports(&json_value, &yaml_value, "hostile characters");
}

#[test]
fn an_xmin_manifest_parse_error_is_bad_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = std::fs::read_to_string(root().join("fixtures/xmin/manifest.yaml"))
        .expect("fixture")
        .replace("cadence: every_run", "cadence: yes");
    let path = dir.path().join("m.yaml");
    std::fs::write(&path, manifest).expect("write");
    let out = dpone(&["check", "--manifest", &path.display().to_string()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("DPONE_XMIN_YAML_AMBIGUOUS_SCALAR"),
        "{stderr}"
    );
    assert!(stderr.contains("line 21"), "{stderr}");
}

/// A reader that goes away (`dpone-host demo | head -1`, a closed pipe) is not a failure of the
/// command: the output is cut, the command ends with its own status, and nothing panics.
#[test]
fn a_closed_stdout_pipe_ends_the_output_not_the_command() {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_dpone-host"))
        .current_dir(root())
        .args(["--output", "json", "demo"])
        .env_remove("DPONE_TRUST_POLICY")
        .env_remove("DPONE_POLICY_BUNDLE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dpone-host runs");
    // The read end closes before the demo has decided anything, so every write meets EPIPE.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}
