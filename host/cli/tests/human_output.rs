//! Tier: CLI end-to-end output modes. At a terminal (a real pseudo-terminal, through util-linux
//! `script -qec CMD /dev/null`) the commands print a verdict-first human summary, coloured
//! unless `NO_COLOR` is set, and a failure gets a human line after its JSON report; off a
//! terminal, and with `--output json`, stdout is exactly the JSON contract (the pretty JSON of
//! the same value, byte for byte, whatever the flag). Covered here: `policy test|eval`, `demo`,
//! XMin `check` and `plan` on the sample route, `verify-bundle` (the Sigstore conformance
//! happy path, and a wrong identity), `bundle verify|activate` (a bundle signed by the
//! binary itself, then tampered). No server needed.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const BIN: &str = env!("CARGO_BIN_EXE_dpone-host");

/// Runs `dpone-host args` on a pseudo-terminal; returns its exit status and what the terminal
/// showed (stdout and stderr together, `\r\n` made `\n`).
fn at_terminal(args: &[&str], no_color: bool) -> (i32, String) {
    at_terminal_in(args, no_color, &root(), &[])
}

/// [`at_terminal`] in `dir` with `env` set.
fn at_terminal_in(
    args: &[&str],
    no_color: bool,
    dir: &std::path::Path,
    env: &[(&str, &str)],
) -> (i32, String) {
    let quoted: Vec<String> = std::iter::once(BIN)
        .chain(args.iter().copied())
        .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
        .collect();
    let mut command = Command::new("script");
    command
        .current_dir(dir)
        .args(["-qec", &quoted.join(" "), "/dev/null"])
        .env_remove("NO_COLOR")
        .envs(env.iter().copied());
    for (key, _) in std::env::vars() {
        if key.starts_with("OTEL_") {
            command.env_remove(key);
        }
    }
    if no_color {
        command.env("NO_COLOR", "1");
    }
    let out = command
        .output()
        .expect("util-linux `script` runs (it gives the command a pseudo-terminal)");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n"),
    )
}

/// Runs `dpone-host args` with stdout a pipe.
fn piped(args: &[&str]) -> (i32, Vec<u8>) {
    piped_in(args, &root(), &[])
}

/// [`piped`] in `dir` with `env` set.
fn piped_in(args: &[&str], dir: &std::path::Path, env: &[(&str, &str)]) -> (i32, Vec<u8>) {
    let out = Command::new(BIN)
        .current_dir(dir)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("dpone-host runs");
    (out.status.code().unwrap_or(-1), out.stdout)
}

/// Off a terminal, `--output auto` and `--output json` print the same bytes: the pretty JSON
/// of one value with one trailing newline (what `print_json` has always printed). Returns it.
fn json_unchanged(args: &[&str], dir: &std::path::Path, env: &[(&str, &str)]) -> (i32, Value) {
    let (rc, auto) = piped_in(args, dir, env);
    let mut explicit = vec!["--output", "json"];
    explicit.extend_from_slice(args);
    let (rc_json, json) = piped_in(&explicit, dir, env);
    assert_eq!(rc, rc_json, "{args:?}");
    // Byte for byte, but for the measured component load times (`load_micros`).
    let timed = |bytes: &[u8]| {
        String::from_utf8_lossy(bytes)
            .lines()
            .filter(|l| !l.trim_start().starts_with("\"load_micros\": "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        timed(&auto),
        timed(&json),
        "{args:?}: auto off a terminal is the JSON"
    );
    let text = String::from_utf8(auto).expect("UTF-8");
    let value: Value = serde_json::from_str(&text).expect("JSON");
    assert!(
        text.starts_with("{\n  \"") && text.ends_with("}\n") && !text.ends_with("}\n\n"),
        "{args:?}: pretty JSON, one trailing newline: {text}"
    );
    (rc, value)
}

/// The XMin sample route (no server is contacted by `check` and `plan`; the registry's
/// password variables only have to be set).
const XMIN_ENV: &[(&str, &str)] = &[
    ("DPONE_PG_SOURCE_PASSWORD", "unused-secret-source"),
    ("DPONE_PG_TARGET_PASSWORD", "unused-secret-target"),
];

#[test]
fn xmin_check_and_plan_print_a_verdict_first_summary_and_the_same_json_off_a_terminal() {
    let route = [
        "--manifest",
        "fixtures/xmin/manifest.yaml",
        "--connections",
        "fixtures/xmin/registry.yaml",
    ];
    for (command, headline) in [
        ("check", "done: route checked"),
        ("plan", "done: plan ready"),
    ] {
        let mut args = vec![command];
        args.extend_from_slice(&route);
        let (rc, shown) = at_terminal_in(&args, true, &root(), XMIN_ENV);
        assert_eq!(rc, 0, "{shown}");
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines[0], headline, "{shown}");
        assert!(
            shown.contains("\n  workload      orders_to_dwh\n"),
            "{shown}"
        );
        assert!(
            shown.contains("  moves         public.orders -> dwh.orders\n"),
            "{shown}"
        );
        assert!(
            shown.contains("  delete mode   timestamp_only\n"),
            "{shown}"
        );
        assert!(!shown.contains('{') && !shown.contains('\u{1b}'), "{shown}");
        assert!(!shown.contains("unused-secret"), "{shown}");
        if command == "plan" {
            assert!(
                shown.contains("  delete plan   6 rules (delete-mode plan, fuel "),
                "{shown}"
            );
            assert!(
                shown.contains(
                    "  guards        at most 100000 deletes, delete ratio at most 0.05\n"
                ),
                "{shown}"
            );
        }
        // Colour at a terminal without NO_COLOR.
        let (_, coloured) = at_terminal_in(&args, false, &root(), XMIN_ENV);
        assert!(
            coloured.starts_with("\u{1b}[1;32mdone\u{1b}[0m: "),
            "{coloured:?}"
        );
        let (rc, json) = json_unchanged(&args, &root(), XMIN_ENV);
        assert_eq!(rc, 0);
        assert_eq!(json["status"], "ok");
        assert_eq!(json["workload"], "orders_to_dwh");
        assert_eq!(json.get("delete_plan").is_some(), command == "plan");
    }
}

/// A signed bundle of the shipped guard and its decision table, made with the binary's own
/// `bundle` commands in a fresh directory, and its trust policy.
fn signed_bundle() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let guard = root().join("policies/components/guard.wasm");
    let table = root().join("fixtures/decision-tables/guard.json");
    let policy = format!("guard={}", guard.display());
    let table = format!("guard={}", table.display());
    for args in [
        &["bundle", "keygen", "--out", "signer.key"][..],
        &[
            "bundle",
            "create",
            "--sequence",
            "1",
            "--out",
            "b",
            "--name",
            "e2e",
            "--version",
            "1.0.0",
            "--policy",
            &policy,
            "--table",
            &table,
        ][..],
        &["bundle", "sign", "b", "--key", "signer.key"][..],
    ] {
        let (rc, _) = piped_in(args, dir.path(), &[]);
        assert_eq!(rc, 0, "{args:?}");
    }
    let (rc, policy) = piped_in(
        &[
            "bundle",
            "trust-policy",
            "--key",
            "signer.key.pub",
            "--threshold",
            "1",
        ],
        dir.path(),
        &[],
    );
    assert_eq!(rc, 0);
    std::fs::write(dir.path().join("policy.json"), policy).expect("write");
    dir
}

#[test]
fn bundle_verify_and_activate_print_a_verdict_first_summary_and_the_same_json_off_a_terminal() {
    let dir = signed_bundle();
    let d = dir.path();
    // The activation ledger lives in the test's directory, never the user's state directory.
    let state = d.join("state");
    let state = state.to_str().expect("utf-8 temp path");
    let env: &[(&str, &str)] = &[("DPONE_STATE_DIR", state)];
    let verify = ["bundle", "verify", "b", "--trust-policy", "policy.json"];
    let (rc, shown) = at_terminal_in(&verify, true, d, env);
    assert_eq!(rc, 0, "{shown}");
    assert!(shown.starts_with("done: verified\n"), "{shown}");
    assert!(
        shown.contains("\n  bundle           e2e 1.0.0\n"),
        "{shown}"
    );
    assert!(
        shown.contains("\n  signatures       1 of threshold 1\n"),
        "{shown}"
    );
    assert!(shown.contains("\n  component guard  "), "{shown}");
    assert!(!shown.contains('{'), "{shown}");
    let (rc, json) = json_unchanged(&verify, d, env);
    assert_eq!(rc, 0);
    assert_eq!(json["verified"], true);

    let activate = ["bundle", "activate", "b", "--trust-policy", "policy.json"];
    let (rc, shown) = at_terminal_in(&activate, true, d, env);
    assert_eq!(rc, 0, "{shown}");
    assert!(shown.starts_with("done: activated\n"), "{shown}");
    let agreed = shown
        .lines()
        .find(|l| l.starts_with("  table guard "))
        .unwrap_or_else(|| panic!("the table line: {shown}"));
    assert!(agreed.ends_with(" rows agreed"), "{shown}");
    assert!(
        shown.contains("\n  conformance guard  ") && shown.contains(" passed, 0 failed\n"),
        "{shown}"
    );
    let (rc, json) = json_unchanged(&activate, d, env);
    assert_eq!(rc, 0);
    assert_eq!(json["activated"], true);

    // Tampered: the component's bytes changed after signing. Refused with its code, nothing
    // activated; the JSON refusal line on stdout stays for scripts.
    let component = std::fs::read_dir(d.join("b"))
        .expect("the bundle's policies")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "wasm"))
        .expect("a component in the bundle");
    let mut bytes = std::fs::read(&component).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&component, bytes).expect("tamper");
    let (rc, shown) = at_terminal_in(&activate, true, d, env);
    assert_ne!(rc, 0, "{shown}");
    let first = shown.lines().next().unwrap_or_default();
    assert!(first.starts_with("refused: DPONE_"), "{shown}");
    assert!(
        shown.contains("  next  nothing was trusted or activated\n"),
        "{shown}"
    );
    let (rc_piped, json) = json_unchanged(&activate, d, env);
    assert_eq!(rc_piped, rc);
    assert_eq!(json["verified"], false);
    assert_eq!(
        Some(first.trim_start_matches("refused: ")),
        json["error"].as_str()
    );
}

const POLICY_TEST: &[&str] = &[
    "policy",
    "test",
    "target/components/scope.wasm",
    "fixtures/decision-tables/scope.json",
];
const EVAL: &[&str] = &[
    "policy",
    "eval",
    "guard",
    "--input",
    "fixtures/samples/guard.json",
];

#[test]
fn at_a_terminal_policy_test_eval_and_demo_print_a_verdict_first_summary() {
    let (rc, shown) = at_terminal(POLICY_TEST, true);
    assert_eq!(rc, 0, "{shown}");
    let first = shown.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("done: ") && first.ends_with(" rows passed"),
        "{shown}"
    );
    assert!(shown.contains("  policy "), "{shown}");
    assert!(!shown.contains('{') && !shown.contains('\u{1b}'), "{shown}");

    let (rc, shown) = at_terminal(EVAL, true);
    assert_eq!(rc, 0, "{shown}");
    assert!(shown.starts_with("done: allow\n"), "{shown}");
    assert!(shown.contains("fuel used"), "{shown}");

    let (rc, shown) = at_terminal(&["demo"], true);
    assert_eq!(rc, 0, "{shown}");
    assert!(shown.starts_with("done: 5 sample decisions"), "{shown}");
    assert!(shown.contains("guard decide"), "{shown}");

    // Colour at a terminal unless NO_COLOR.
    let (_, shown) = at_terminal(EVAL, false);
    assert!(
        shown.starts_with("\u{1b}[1;32mdone\u{1b}[0m: allow"),
        "{shown:?}"
    );
}

#[test]
fn at_a_terminal_a_failure_keeps_its_json_line_and_adds_a_human_one() {
    let (rc, shown) = at_terminal(
        &["plan", "--manifest", "fixtures/no-such-manifest.yaml"],
        true,
    );
    assert_eq!(rc, 3, "{shown}");
    let json_line = shown
        .lines()
        .find(|l| l.starts_with('{'))
        .expect("the JSON error line");
    let report: Value = serde_json::from_str(json_line).expect("JSON");
    assert_eq!(report["error"], "DPONE_CLI_INPUT_UNREADABLE");
    assert!(
        shown.contains("refused (bad input): DPONE_CLI_INPUT_UNREADABLE: "),
        "{shown}"
    );
    // Off a terminal, stderr is the JSON line only.
    let out = Command::new(BIN)
        .current_dir(root())
        .args(["plan", "--manifest", "fixtures/no-such-manifest.yaml"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("{\"error\":\"DPONE_CLI_INPUT_UNREADABLE\""),
        "{stderr}"
    );
}

#[test]
fn off_a_terminal_stdout_is_exactly_the_json_contract() {
    for args in [POLICY_TEST, EVAL, &["demo"]] {
        let (rc, auto) = piped(args);
        assert_eq!(rc, 0);
        let mut explicit = vec!["--output", "json"];
        explicit.extend_from_slice(args);
        let (_, json) = piped(&explicit);
        let (auto_text, json_text) = (
            String::from_utf8_lossy(&auto).into_owned(),
            String::from_utf8_lossy(&json).into_owned(),
        );
        if args != ["demo"] {
            assert_eq!(
                auto_text, json_text,
                "{args:?}: auto off a terminal is the JSON"
            );
        } else {
            // The demo reports load times; everything but the numbers is identical.
            let shape = |t: &str| t.replace(|c: char| c.is_ascii_digit(), "");
            assert_eq!(
                shape(&auto_text),
                shape(&json_text),
                "demo: auto off a terminal is the JSON"
            );
        }
        let value: Value = serde_json::from_slice(&auto).expect("JSON");
        let text = String::from_utf8(auto).expect("UTF-8");
        // Pretty JSON, one trailing newline: what `print_json` has always printed.
        assert!(
            text.starts_with("{\n  \"") && text.ends_with("}\n"),
            "{text}"
        );
        assert_eq!(
            serde_json::from_str::<Value>(&text).expect("JSON"),
            value,
            "{args:?}"
        );
        // `--output text` forces the summary even into a pipe, without colour.
        let mut forced = vec!["--output", "text"];
        forced.extend_from_slice(args);
        let (_, text) = piped(&forced);
        let text = String::from_utf8(text).expect("UTF-8");
        assert!(
            text.starts_with("done: ") && !text.contains('\u{1b}'),
            "{text}"
        );
    }
    // And with a terminal, `--output json` is still the JSON.
    let mut explicit = vec!["--output", "json"];
    explicit.extend_from_slice(EVAL);
    let (_, shown) = at_terminal(&explicit, true);
    let value: Value = serde_json::from_str(&shown).expect("JSON at a terminal with --output json");
    assert_eq!(value["evidence"]["kind"], "guard");
}

#[test]
fn verify_bundle_prints_a_verdict_first_summary_and_the_same_json_off_a_terminal() {
    let cases = "fixtures/conformance/sigstore";
    let bundle = format!("{cases}/cases/happy-path-v0.3/bundle.sigstore.json");
    let root_file = format!("{cases}/production_trusted_root.json");
    let artifact = format!("{cases}/cases/a.txt");
    let args = |identity: &str| -> Vec<String> {
        [
            "verify-bundle",
            "--bundle",
            &bundle,
            "--certificate-identity",
            identity,
            "--certificate-oidc-issuer",
            "https://token.actions.githubusercontent.com",
            "--trusted-root",
            &root_file,
            &artifact,
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let good = args(
        "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main",
    );
    let good: Vec<&str> = good.iter().map(String::as_str).collect();
    let (rc, shown) = at_terminal(&good, true);
    assert_eq!(rc, 0, "{shown}");
    assert!(shown.starts_with("done: verified\n"), "{shown}");
    assert!(
        shown.contains("\n  tlog verified         true\n"),
        "{shown}"
    );
    assert!(
        shown.contains("\n  issuer                https://token.actions.githubusercontent.com\n"),
        "{shown}"
    );
    let (rc, json) = json_unchanged(&good, &root(), &[]);
    assert_eq!(rc, 0);
    assert_eq!(json["verified"], true);

    let wrong = args("https://github.com/someone/else");
    let wrong: Vec<&str> = wrong.iter().map(String::as_str).collect();
    let (rc, shown) = at_terminal(&wrong, true);
    assert_eq!(rc, 1, "{shown}");
    let first = shown.lines().next().unwrap_or_default();
    assert!(first.starts_with("refused: DPONE_"), "{shown}");
    let (rc_piped, json) = json_unchanged(&wrong, &root(), &[]);
    assert_eq!(rc_piped, 1);
    assert_eq!(json["verified"], false);
    assert_eq!(
        Some(first.trim_start_matches("refused: ")),
        json["error"].as_str()
    );
}
