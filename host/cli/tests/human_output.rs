//! Tier: CLI end-to-end output modes. At a terminal (a real pseudo-terminal, through util-linux
//! `script -qec CMD /dev/null`) the commands print a verdict-first human summary, coloured
//! unless `NO_COLOR` is set, and a failure gets a human line after its JSON report; off a
//! terminal, and with `--output json`, stdout is exactly the JSON contract (the pretty JSON of
//! the same value, byte for byte, whatever the flag). No server needed.

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
    let quoted: Vec<String> = std::iter::once(BIN)
        .chain(args.iter().copied())
        .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
        .collect();
    let mut command = Command::new("script");
    command
        .current_dir(root())
        .args(["-qec", &quoted.join(" "), "/dev/null"])
        .env_remove("NO_COLOR");
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
    let out = Command::new(BIN)
        .current_dir(root())
        .args(args)
        .output()
        .expect("dpone-host runs");
    (out.status.code().unwrap_or(-1), out.stdout)
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
