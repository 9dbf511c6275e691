//! The bundle rollback ledger attacked through the binary: two processes racing activations of
//! sequences 3 and 5, a re-serialized and a rotated trust policy, and a ledger owned by another
//! user. Each bundle is the shipped guard, signed in the test; every activation runs the real
//! gate (signatures, conformance tables in real sandboxes) in a real `dpone-host` process.

use serde_json::Value;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn command(args: &[&str], dir: &Path, state: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dpone-host"));
    c.args(args)
        .current_dir(dir)
        .env("DPONE_STATE_DIR", state)
        .env_remove("DPONE_TRUST_POLICY");
    c
}

fn run(args: &[&str], dir: &Path, state: &Path) -> (i32, String) {
    let out = command(args, dir, state).output().expect("the binary runs");
    summary(&out)
}

fn summary(out: &Output) -> (i32, String) {
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// A directory with signer keys `a.key` and `b.key`, bundles `b3` and `b5` of the bundle named
/// `race` (sequences 3 and 5, the shipped guard, signed by `a`), and `policy.json` trusting `a`.
fn signed_bundles() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let nowhere = d.join("unused-state");
    let guard = workspace().join("policies/components/guard.wasm");
    assert!(guard.exists(), "the committed shipped guard");
    let table = workspace().join("fixtures/decision-tables/guard.json");
    let policy_arg = format!("guard={}", guard.display());
    let table_arg = format!("guard={}", table.display());
    for key in ["a.key", "b.key"] {
        let (rc, out) = run(&["bundle", "keygen", "--out", key], d, &nowhere);
        assert_eq!(rc, 0, "{out}");
    }
    for (name, seq) in [("b3", "3"), ("b5", "5")] {
        let (rc, out) = run(
            &[
                "bundle",
                "create",
                "--sequence",
                seq,
                "--out",
                name,
                "--name",
                "race",
                "--version",
                &format!("{seq}.0.0"),
                "--policy",
                &policy_arg,
                "--table",
                &table_arg,
            ],
            d,
            &nowhere,
        );
        assert_eq!(rc, 0, "{out}");
        let (rc, out) = run(&["bundle", "sign", name, "--key", "a.key"], d, &nowhere);
        assert_eq!(rc, 0, "{out}");
    }
    let out = command(
        &[
            "bundle",
            "trust-policy",
            "--key",
            "a.key.pub",
            "--threshold",
            "1",
        ],
        d,
        &nowhere,
    )
    .output()
    .expect("runs");
    assert!(out.status.success());
    std::fs::write(d.join("policy.json"), &out.stdout).expect("write policy");
    dir
}

fn activate(bundle: &str, policy: &str) -> [String; 5] {
    [
        "bundle".into(),
        "activate".into(),
        bundle.into(),
        "--trust-policy".into(),
        policy.into(),
    ]
}

fn activate_in(bundle: &str, policy: &str, dir: &Path, state: &Path) -> (i32, String) {
    let args = activate(bundle, policy);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&args, dir, state)
}

/// The highest sequence the ledger in `state` holds for the bundle `race`.
fn recorded_sequence(state: &Path) -> u64 {
    let text = std::fs::read_to_string(state.join("bundle-activations.json")).expect("ledger");
    let ledger: Value = serde_json::from_str(&text).expect("ledger json");
    assert_eq!(ledger["schema"], "dpone.bundle-activations.v2", "{text}");
    let entries: Vec<&Value> = ledger["bundles"]
        .as_array()
        .expect("bundles")
        .iter()
        .filter(|b| b["name"] == "race")
        .collect();
    assert_eq!(entries.len(), 1, "one entry per bundle name: {text}");
    entries[0]["sequence"].as_u64().expect("a sequence")
}

/// Without the cross-process lock both processes can read an empty ledger and the later writer
/// wins: sequence 3 recorded after 5, and 3 activates again. Under the lock, whichever order the
/// two activations take, 5 is what is recorded and 3 is a rollback afterwards.
#[test]
fn two_processes_racing_sequences_3_and_5_always_leave_5_recorded() {
    let dir = signed_bundles();
    let d = dir.path();
    for round in 0..6 {
        let state = d.join(format!("state-{round}"));
        let spawn = |bundle: &str| {
            let args = activate(bundle, "policy.json");
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            command(&args, d, &state)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn")
        };
        let (three, five) = if round % 2 == 0 {
            let t = spawn("b3");
            (t, spawn("b5"))
        } else {
            let f = spawn("b5");
            (spawn("b3"), f)
        };
        let (rc5, out5) = summary(&five.wait_with_output().expect("b5 ends"));
        let (rc3, out3) = summary(&three.wait_with_output().expect("b3 ends"));
        assert_eq!(rc5, 0, "round {round}: 5 always activates: {out5}");
        if rc3 != 0 {
            assert!(
                out3.contains("DPONE_BUNDLE_ROLLBACK"),
                "round {round}: 3 lost to 5 as a rollback: {out3}"
            );
        }
        assert_eq!(recorded_sequence(&state), 5, "round {round}");
        let (rc, out) = activate_in("b3", "policy.json", d, &state);
        assert_ne!(rc, 0, "round {round}: 3 after 5 is a rollback: {out}");
        assert!(out.contains("DPONE_BUNDLE_ROLLBACK"), "{out}");
    }
}

/// The ledger is keyed by the bundle name, not by the policy file's bytes: the same policy
/// re-serialized (compact, keys in another order), and a rotated policy that adds a signer,
/// both still refuse the older bundle.
#[test]
fn a_re_serialized_or_rotated_trust_policy_still_refuses_the_older_bundle() {
    let dir = signed_bundles();
    let d = dir.path();
    let state = d.join("state");
    let (rc, out) = activate_in("b5", "policy.json", d, &state);
    assert_eq!(rc, 0, "{out}");

    let original = std::fs::read(d.join("policy.json")).expect("policy");
    let value: Value = serde_json::from_slice(&original).expect("policy json");
    let Value::Object(map) = &value else {
        panic!("the policy is an object")
    };
    let mut reordered = String::from("{");
    for (i, (k, v)) in map.iter().rev().enumerate() {
        if i > 0 {
            reordered.push(',');
        }
        reordered.push_str(&serde_json::to_string(k).expect("key"));
        reordered.push(':');
        reordered.push_str(&serde_json::to_string(v).expect("value"));
    }
    reordered.push_str("}\n");
    assert_ne!(reordered.as_bytes(), original.as_slice(), "other bytes");
    std::fs::write(d.join("reserialized.json"), &reordered).expect("write");
    let (rc, out) = activate_in("b3", "reserialized.json", d, &state);
    assert_ne!(rc, 0, "{out}");
    assert!(out.contains("DPONE_BUNDLE_ROLLBACK"), "{out}");

    let rotated = command(
        &[
            "bundle",
            "trust-policy",
            "--key",
            "a.key.pub",
            "--key",
            "b.key.pub",
            "--threshold",
            "1",
        ],
        d,
        &state,
    )
    .output()
    .expect("runs");
    assert!(rotated.status.success());
    std::fs::write(d.join("rotated.json"), &rotated.stdout).expect("write");
    let (rc, out) = activate_in("b3", "rotated.json", d, &state);
    assert_ne!(rc, 0, "{out}");
    assert!(out.contains("DPONE_BUNDLE_ROLLBACK"), "{out}");
    // The current bundle still activates under both.
    assert_eq!(activate_in("b5", "reserialized.json", d, &state).0, 0);
    assert_eq!(activate_in("b5", "rotated.json", d, &state).0, 0);
}

fn effective_uid() -> u32 {
    std::fs::metadata("/proc/self").expect("/proc/self").uid()
}

/// A ledger (or its directory) owned by another user is refused, not trusted: that user could
/// have lowered the recorded sequence.
#[test]
fn a_ledger_owned_by_another_user_is_refused() {
    let dir = signed_bundles();
    let d = dir.path();
    let state = d.join("state");
    let (rc, out) = activate_in("b5", "policy.json", d, &state);
    assert_eq!(rc, 0, "{out}");
    let ledger = state.join("bundle-activations.json");
    assert!(ledger.exists());
    if effective_uid() == 0 {
        // As root: hand the ledger, then its directory, to another user.
        std::os::unix::fs::chown(&ledger, Some(4242), Some(4242)).expect("chown ledger");
        let (rc, out) = activate_in("b3", "policy.json", d, &state);
        assert_ne!(rc, 0, "{out}");
        assert!(out.contains("DPONE_BUNDLE_STATE_UNUSABLE"), "{out}");
        assert!(!out.contains(&d.display().to_string()), "no path: {out}");
        std::os::unix::fs::chown(&ledger, Some(0), Some(0)).expect("chown back");
        std::os::unix::fs::chown(&state, Some(4242), Some(4242)).expect("chown dir");
        let (rc, out) = activate_in("b5", "policy.json", d, &state);
        assert_ne!(rc, 0, "{out}");
        assert!(out.contains("DPONE_BUNDLE_STATE_UNUSABLE"), "{out}");
    } else {
        // Not root: a directory owned by root stands for another user's.
        let (rc, out) = activate_in("b5", "policy.json", d, Path::new("/"));
        assert_ne!(rc, 0, "{out}");
        assert!(out.contains("DPONE_BUNDLE_STATE_UNUSABLE"), "{out}");
    }
}
