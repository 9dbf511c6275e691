//! Tier: CLI end-to-end. The input boundary (issue 17): every file option reads through one
//! bounded reader of regular files. A FIFO, `/dev/zero` and a symlink to it are refused with a
//! stable code before anything is read — nothing blocks and nothing is allocated without bound —
//! and the report never names the path.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `dpone-host` with a deadline; a run that outlives it is killed and reported as hung.
fn dpone_with_deadline(args: &[String], deadline: Duration) -> Option<Output> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dpone-host"))
        .current_dir(root())
        .args(args)
        .env_remove("DPONE_TRUST_POLICY")
        .env_remove("DPONE_POLICY_BUNDLE")
        .env_remove("DPONE_CONNECTIONS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dpone-host runs");
    let started = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return Some(child.wait_with_output().expect("output"));
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The stable code of the report (stderr's last JSON line, or the JSON on stdout for the bundle
/// commands, which report there).
fn code_of(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(report) = stderr
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        return report["error"].as_str().unwrap_or_default().to_owned();
    }
    serde_json::from_slice::<Value>(&out.stdout)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

const GOOD_MANIFEST_XMIN: &str = "fixtures/xmin/manifest.yaml";
const GOOD_REGISTRY_XMIN: &str = "fixtures/xmin/registry.yaml";
const GOOD_MANIFEST_CH: &str = "fixtures/clickhouse/manifest.yaml";
const GOOD_FACTS: &str = "fixtures/samples/guard.json";
const GOOD_COMPONENT: &str = "target/components/guard.wasm";
const GOOD_TABLE: &str = "fixtures/decision-tables/guard.json";

/// Every file option, with `@` where the hostile path goes (the other files are valid).
fn cases(scratch: &Path) -> Vec<(&'static str, Vec<String>)> {
    let out = |name: &str| scratch.join(name).display().to_string();
    let pin = format!(
        "sha256:{}",
        "0".repeat(64) // any pin: the component is refused before its digest is compared
    );
    let v = |args: &[&str]| args.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mut cases = vec![
        ("check --manifest", v(&["check", "--manifest", "@"])),
        ("plan --manifest", v(&["plan", "--manifest", "@"])),
        ("run --manifest", v(&["run", "--manifest", "@"])),
        ("status --manifest", v(&["status", "--manifest", "@"])),
        (
            "state show --manifest",
            v(&["state", "show", "--manifest", "@"]),
        ),
        (
            "resolve --manifest",
            v(&[
                "resolve",
                "--manifest",
                "@",
                "--connections",
                GOOD_REGISTRY_XMIN,
                "--invocation",
                "i",
            ]),
        ),
        (
            "check --connections",
            v(&["check", "--connections", "@", "--offline"]),
        ),
        (
            "check --manifest (xmin) --connections",
            v(&[
                "check",
                "--manifest",
                GOOD_MANIFEST_XMIN,
                "--connections",
                "@",
            ]),
        ),
        (
            "check --manifest (clickhouse) --connections",
            v(&[
                "check",
                "--manifest",
                GOOD_MANIFEST_CH,
                "--connections",
                "@",
            ]),
        ),
        (
            "authority create --document",
            v(&[
                "authority",
                "create",
                "--manifest",
                GOOD_MANIFEST_XMIN,
                "--connections",
                GOOD_REGISTRY_XMIN,
                "--document",
                "@",
            ]),
        ),
        (
            "policy eval --input",
            v(&["policy", "eval", "guard", "--input", "@"]),
        ),
        (
            "policy eval --component",
            v(&[
                "policy",
                "eval",
                "guard",
                "--input",
                GOOD_FACTS,
                "--component",
                "@",
                "--pin",
                &pin,
            ]),
        ),
        (
            "policy bench --input",
            v(&[
                "policy",
                "bench",
                "guard",
                "--input",
                "@",
                "--iterations",
                "1",
            ]),
        ),
        ("policy inspect", v(&["policy", "inspect", "@"])),
        (
            "policy test (component)",
            v(&["policy", "test", "@", GOOD_TABLE]),
        ),
        (
            "policy test (table)",
            v(&["policy", "test", GOOD_COMPONENT, "@"]),
        ),
        (
            "policy lock (component)",
            v(&["policy", "lock", "@", "--lock", &out("lock.json")]),
        ),
        (
            "policy lock --lock",
            v(&["policy", "lock", GOOD_COMPONENT, "--lock", "@", "--check"]),
        ),
        (
            "bundle verify (archive)",
            v(&["bundle", "verify", "@", "--trust-policy", "@"]),
        ),
        ("bundle inspect (archive)", v(&["bundle", "inspect", "@"])),
        (
            "bundle unpack",
            v(&["bundle", "unpack", "@", "--out", &out("unpacked")]),
        ),
        (
            "bundle create --policy",
            v(&[
                "bundle",
                "create",
                "--out",
                &out("b1"),
                "--name",
                "n",
                "--version",
                "1",
                "--sequence",
                "1",
                "--policy",
                "guard=@",
            ]),
        ),
        (
            "bundle create --table",
            v(&[
                "bundle",
                "create",
                "--out",
                &out("b2"),
                "--name",
                "n",
                "--version",
                "1",
                "--sequence",
                "1",
                "--policy",
                &format!("guard={GOOD_COMPONENT}"),
                "--table",
                "guard=@",
            ]),
        ),
        (
            "bundle trust-policy --key",
            v(&["bundle", "trust-policy", "--key", "@", "--threshold", "1"]),
        ),
        (
            "--trust-policy",
            v(&["--trust-policy", "@", "--bundle", "@", "demo"]),
        ),
        ("campaign inspect", v(&["campaign", "inspect", "@"])),
    ];
    // `campaign verify` reads every file before parsing any, so one special file per option,
    // with regular files for the others, reaches that option's read.
    let regular = "fixtures/nonproduction/policy.json";
    for (name, option) in [
        ("campaign verify --policy", "--policy"),
        ("campaign verify --document", "--document"),
        ("campaign verify --attestation", "--attestation"),
        ("campaign verify --trusted-root", "--trusted-root"),
        ("campaign verify --composition", "--composition"),
        ("campaign verify --request", "--request"),
        ("campaign verify --release-set", "--release-set"),
    ] {
        let mut args = v(&["campaign", "verify", "--policy-digest", &pin, "--now", "0"]);
        for flag in [
            "--policy",
            "--document",
            "--attestation",
            "--trusted-root",
            "--composition",
            "--request",
            "--release-set",
        ] {
            args.push(flag.to_owned());
            args.push(if flag == option { "@" } else { regular }.to_owned());
        }
        cases.push((name, args));
    }
    cases.extend([(
        "verify-bundle --bundle",
        v(&[
            "verify-bundle",
            "--bundle",
            "@",
            "--key",
            "@",
            "--trusted-root",
            "@",
            "@",
        ]),
    )]);
    cases
}

fn run_all(bad: &Path, what: &str) {
    let scratch = tempfile::tempdir().expect("tempdir");
    let bad_text = bad.display().to_string();
    let mut failures = Vec::new();
    for (name, args) in cases(scratch.path()) {
        let args: Vec<String> = args
            .into_iter()
            .map(|a| {
                if a == "@" {
                    bad_text.clone()
                } else {
                    a.replace("=@", &format!("={bad_text}"))
                }
            })
            .collect();
        let Some(out) = dpone_with_deadline(&args, Duration::from_secs(30)) else {
            failures.push(format!("{name}: blocked on the {what}"));
            continue;
        };
        let code = code_of(&out);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.code() != Some(3) {
            failures.push(format!(
                "{name}: exit {:?} ({code}), expected 3",
                out.status.code()
            ));
        }
        if !matches!(
            code.as_str(),
            "DPONE_CLI_INPUT_NOT_REGULAR_FILE" | "DPONE_TRUST_IO" | "DPONE_KEY_FILE_MALFORMED"
        ) {
            failures.push(format!("{name}: code {code:?}: {all}"));
        }
        if all.contains(&bad_text) || all.contains(&scratch.path().display().to_string()) {
            failures.push(format!("{name}: the report names the path: {all}"));
        }
    }
    assert!(failures.is_empty(), "{what}:\n{}", failures.join("\n"));
}

#[test]
fn a_fifo_is_refused_without_blocking_on_every_file_option() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("input.yaml");
    let status = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(status.success());
    run_all(&fifo, "FIFO");
}

#[test]
fn dev_zero_is_refused_on_every_file_option() {
    run_all(Path::new("/dev/zero"), "/dev/zero");
}

#[test]
fn a_symlink_to_dev_zero_is_refused_on_every_file_option() {
    let dir = tempfile::tempdir().expect("tempdir");
    let link = dir.path().join("manifest.yaml");
    std::os::unix::fs::symlink("/dev/zero", &link).expect("symlink");
    run_all(&link, "symlink to /dev/zero");
}

#[test]
fn a_symlink_to_a_regular_file_is_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let link = dir.path().join("guard.json");
    std::os::unix::fs::symlink(root().join(GOOD_FACTS), &link).expect("symlink");
    let args = ["policy", "eval", "guard", "--input"]
        .iter()
        .map(|s| (*s).to_owned())
        .chain([link.display().to_string()])
        .collect::<Vec<_>>();
    let out = dpone_with_deadline(&args, Duration::from_secs(60)).expect("finishes");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_file_over_its_ceiling_is_refused_before_parsing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = dir.path().join("manifest.yaml");
    // One byte over the strict YAML limit (1 MiB).
    std::fs::write(&big, vec![b'#'; (1 << 20) + 1]).expect("write");
    let args = vec![
        "check".to_owned(),
        "--manifest".to_owned(),
        big.display().to_string(),
    ];
    let out = dpone_with_deadline(&args, Duration::from_secs(30)).expect("finishes");
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(code_of(&out), "DPONE_CLI_INPUT_TOO_LARGE");
}

#[test]
fn a_nonproduction_document_over_its_ceiling_is_refused_before_parsing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = dir.path().join("grant.json");
    // One byte over the nonproduction document limit (256 KiB).
    std::fs::write(&big, vec![b' '; (256 << 10) + 1]).expect("write");
    let args = vec![
        "campaign".to_owned(),
        "inspect".to_owned(),
        big.display().to_string(),
    ];
    let out = dpone_with_deadline(&args, Duration::from_secs(30)).expect("finishes");
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(code_of(&out), "DPONE_CLI_INPUT_TOO_LARGE");
}

#[test]
fn verify_bundle_refuses_a_special_artifact_without_reading_it() {
    // The artifact is the last file read; with a valid-looking rest, a FIFO artifact must still
    // not block (it is opened non-blocking and refused).
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("artifact");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    for artifact in [fifo.display().to_string(), "/dev/zero".to_owned()] {
        let args = vec![
            "verify-bundle".to_owned(),
            "--bundle".to_owned(),
            "/dev/zero".to_owned(),
            "--key".to_owned(),
            "/dev/zero".to_owned(),
            "--trusted-root".to_owned(),
            "/dev/zero".to_owned(),
            artifact,
        ];
        let out = dpone_with_deadline(&args, Duration::from_secs(30)).expect("finishes");
        assert_eq!(out.status.code(), Some(3));
    }
}
