//! Human output at a terminal. Every command builds one typed report (a [`Report`]): its
//! `Serialize` form is the JSON contract, and [`Report::summary`] — written beside the report,
//! against its typed fields — is the terminal summary. `exit::print_report` prints the JSON
//! unless the output mode is text (`--output text`, or `--output auto` — the default — with
//! stdout a terminal), and then the summary: `done`, `refused: CODE` or `not finished` with the
//! safe next action, then the few facts that matter, aligned. Colour only on a terminal and
//! never with `NO_COLOR` set. Every value shown is cleaned of control characters and capped, so
//! a value cannot drive the terminal.

use serde::Serialize;
use serde_json::Value;
use std::fmt::Display;
use std::io::IsTerminal;
use std::sync::OnceLock;

/// A command's report: the value its JSON contract serializes, and the terminal summary of
/// that same value.
pub trait Report: Serialize {
    /// True when the report's JSON lists every object's keys in sorted order, at every depth:
    /// the contract of the reports that were first printed as untyped JSON values, kept byte
    /// for byte.
    const SORTED_KEYS: bool = false;

    /// The verdict-first summary shown at a terminal.
    fn summary(&self) -> Summary;
}

/// A report's JSON contract: pretty-printed, in the report's field order or, for a report with
/// [`Report::SORTED_KEYS`], with every object's keys sorted.
pub fn report_json<R: Report>(report: &R) -> serde_json::Result<String> {
    if R::SORTED_KEYS {
        serde_json::to_string_pretty(&serde_json::to_value(report)?)
    } else {
        serde_json::to_string_pretty(report)
    }
}

/// The `--output` flag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFlag {
    /// Text when stdout is a terminal, JSON otherwise.
    #[default]
    Auto,
    /// Always the JSON contract.
    Json,
    /// Always the human summary.
    Text,
}

struct Mode {
    text: bool,
    color: bool,
}

static MODE: OnceLock<Mode> = OnceLock::new();

/// Fixes the output mode for this process.
pub fn configure(flag: OutputFlag) {
    let terminal = std::io::stdout().is_terminal();
    let text = match flag {
        OutputFlag::Auto => terminal,
        OutputFlag::Json => false,
        OutputFlag::Text => true,
    };
    let color = text && terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let _ = MODE.set(Mode { text, color });
}

/// True when stdout gets the human summary rather than the JSON.
pub fn text_mode() -> bool {
    MODE.get().is_some_and(|m| m.text)
}

/// True when failures get a human line on stderr too.
pub fn human_errors() -> (bool, bool) {
    match MODE.get() {
        Some(m) if m.text => (true, m.color && std::io::stderr().is_terminal()),
        _ => (false, false),
    }
}

/// A verdict: what happened, in one word or three.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Verdict {
    /// It happened.
    Done,
    /// It was refused; nothing was changed unless the facts say otherwise.
    Refused,
    /// Not finished: retry the same operation.
    NotFinished,
}

fn paint(verdict: Verdict, text: &str, color: bool) -> String {
    if !color {
        return text.to_owned();
    }
    let code = match verdict {
        Verdict::Done => "32",
        Verdict::Refused => "31",
        Verdict::NotFinished => "33",
    };
    format!("\x1b[1;{code}m{text}\x1b[0m")
}

/// A JSON value as one safe line: a string unquoted, `null` as `-`, anything else as JSON;
/// then as [`clean`].
pub fn clean_json(value: &Value) -> String {
    match value {
        Value::String(s) => clean(s),
        Value::Null => "-".to_owned(),
        other => clean(other),
    }
}

/// A value shown by its JSON form ([`clean_json`]): an enumeration by its serialized name.
pub fn shown(value: &impl Serialize) -> String {
    clean_json(&serde_json::to_value(value).unwrap_or(Value::Null))
}

/// A value as one safe line: control characters replaced, at most 100 characters.
pub fn clean(value: impl Display) -> String {
    let raw = value.to_string();
    let mut out: String = raw
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .take(100)
        .collect();
    if raw.chars().count() > 100 {
        out.push('…');
    }
    out
}

/// An optional value as one safe line, `-` when absent.
pub fn clean_or_dash<T: Display>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), clean)
}

/// A summary under construction: a verdict, a headline, then `key  value` facts.
pub struct Summary {
    verdict: Verdict,
    headline: String,
    facts: Vec<(String, String)>,
}

impl Summary {
    /// A summary with its verdict and headline (cleaned by the caller where it holds values).
    pub fn new(verdict: Verdict, headline: impl Into<String>) -> Self {
        Self {
            verdict,
            headline: headline.into(),
            facts: Vec::new(),
        }
    }

    /// A fact shown as one safe line ([`clean`]).
    pub fn fact(&mut self, key: &str, value: impl Display) -> &mut Self {
        self.facts.push((key.to_owned(), clean(value)));
        self
    }

    /// A fact shown only when present.
    pub fn fact_if<T: Display>(&mut self, key: &str, value: Option<T>) -> &mut Self {
        if let Some(value) = value {
            self.fact(key, value);
        }
        self
    }

    /// A JSON-valued fact ([`clean_json`]), left out when `null`: for values whose shape is
    /// not the host's (a policy component's output).
    pub fn json_fact(&mut self, key: &str, value: &Value) -> &mut Self {
        if !value.is_null() {
            self.facts.push((key.to_owned(), clean_json(value)));
        }
        self
    }

    /// A fact shown as its value's JSON form ([`shown`]), left out when that is `null`: for
    /// enumerations shown by their serialized names, and optional values.
    pub fn value_fact(&mut self, key: &str, value: &impl Serialize) -> &mut Self {
        self.json_fact(key, &serde_json::to_value(value).unwrap_or(Value::Null))
    }

    /// A line assembled by the caller from cleaned parts and fixed text.
    pub fn line(&mut self, key: &str, value: impl Into<String>) -> &mut Self {
        self.facts.push((key.to_owned(), value.into()));
        self
    }

    /// The same summary with another verdict and headline.
    pub fn verdict(mut self, verdict: Verdict, headline: impl Into<String>) -> Self {
        self.verdict = verdict;
        self.headline = headline.into();
        self
    }

    /// The summary of a report whose every top-level fact is worth showing as it is: a verdict
    /// from its `result`, `status`, `outcome` or `verdict` word (refused when that word is
    /// `refused`, `denied` or `failed`, when it carries a `failure`, or says `"verified": false`),
    /// then its top-level scalar fields and the length of each of its lists (at most twelve
    /// lines, in the order of the report's JSON).
    pub fn of_fields(report: &impl Serialize) -> Self {
        generic(&serde_json::to_value(report).unwrap_or(Value::Null))
    }

    /// The summary as text, colour only when asked.
    pub fn finish(&self, color: bool) -> String {
        let word = match self.verdict {
            Verdict::Done => "done",
            Verdict::Refused => "refused",
            Verdict::NotFinished => "not finished",
        };
        let mut out = paint(self.verdict, word, color);
        if !self.headline.is_empty() {
            out.push_str(": ");
            out.push_str(&self.headline);
        }
        out.push('\n');
        let width = self.facts.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (k, v) in &self.facts {
            out.push_str(&format!("  {k:<width$}  {v}\n"));
        }
        out
    }
}

/// The summary of `report` as this process shows it (colour per [`configure`]).
pub fn report_text(report: &impl Report) -> String {
    let color = MODE.get().is_some_and(|m| m.color);
    report.summary().finish(color)
}

/// What a policy decision output says in one word: the variant of a one-key object, an
/// object's `decision`, or the value itself.
pub fn decision_outcome(output: &Value) -> String {
    match output {
        Value::Object(map) if map.len() == 1 => map.keys().next().cloned().unwrap_or_default(),
        Value::Object(map) => map
            .get("decision")
            .map_or_else(|| "decided".to_owned(), clean_json),
        other => clean_json(other),
    }
}

/// [`Summary::of_fields`] of a report's JSON value.
fn generic(v: &Value) -> Summary {
    let word = ["result", "status", "outcome", "verdict"]
        .iter()
        .find_map(|k| v.get(*k).and_then(Value::as_str));
    let refused = matches!(word, Some("refused" | "denied" | "failed"))
        || v.get("failure").is_some_and(|f| !f.is_null())
        || v.get("verified") == Some(&Value::Bool(false));
    let mut s = Summary::new(
        if refused {
            Verdict::Refused
        } else {
            Verdict::Done
        },
        word.map(clean).unwrap_or_default(),
    );
    if let Value::Object(map) = v {
        for (k, value) in map.iter().filter(|(_, x)| !x.is_object() && !x.is_array()) {
            if s.facts.len() < 12 {
                s.json_fact(&k.replace('_', " "), value);
            }
        }
        for (k, value) in map.iter().filter(|(_, x)| x.is_array()) {
            if s.facts.len() < 12 {
                s.line(
                    &k.replace('_', " "),
                    format!("{} items", value.as_array().map_or(0, Vec::len)),
                );
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Listed {
        status: &'static str,
        note: &'static str,
        items: Vec<u8>,
    }

    impl Report for Listed {
        fn summary(&self) -> Summary {
            Summary::of_fields(self)
        }
    }

    #[test]
    fn a_listed_report_leads_with_its_word_then_its_facts() {
        let text = report_text(&Listed {
            status: "refused",
            note: "n",
            items: vec![1, 2],
        });
        assert_eq!(
            text,
            "refused: refused\n  note    n\n  status  refused\n  items   2 items\n"
        );
    }

    #[test]
    fn values_cannot_drive_the_terminal_and_colour_is_only_on_request() {
        let report = Listed {
            status: "ok\u{1b}[2J",
            note: "a\nb",
            items: Vec::new(),
        };
        let text = report.summary().finish(false);
        assert!(
            !text.contains('\u{1b}') && text.contains("ok?[2J") && text.contains("a?b"),
            "{text}"
        );
        assert!(
            report
                .summary()
                .finish(true)
                .starts_with("\x1b[1;32mdone\x1b[0m")
        );
        assert_eq!(clean("x".repeat(120)).chars().count(), 101);
    }

    #[test]
    fn a_sorted_report_prints_its_keys_in_order_at_every_depth() {
        #[derive(Serialize)]
        struct Inner {
            z: u8,
            a: u8,
        }
        #[derive(Serialize)]
        struct Sorted {
            b: Inner,
            a: u8,
        }
        impl Report for Sorted {
            const SORTED_KEYS: bool = true;
            fn summary(&self) -> Summary {
                Summary::new(Verdict::Done, "")
            }
        }
        let json = report_json(&Sorted {
            b: Inner { z: 1, a: 2 },
            a: 3,
        })
        .expect("json");
        assert_eq!(
            json,
            "{\n  \"a\": 3,\n  \"b\": {\n    \"a\": 2,\n    \"z\": 1\n  }\n}"
        );
    }
}

/// Pins of the reports' JSON contracts and terminal summaries: `host/cli/tests/golden/reports/
/// NAME.json` holds the exact bytes the command prints, `NAME.txt` the summary without colour.
/// `DPONE_BLESS_REPORTS=1` rewrites them (a change to review, never a way to pass).
#[cfg(test)]
pub mod golden {
    use super::{Report, report_json};
    use std::path::PathBuf;

    fn path(name: &str, ext: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden/reports")
            .join(format!("{name}.{ext}"))
    }

    fn pin(name: &str, ext: &str, actual: &str) {
        let file = path(name, ext);
        if std::env::var_os("DPONE_BLESS_REPORTS").is_some() {
            std::fs::create_dir_all(file.parent().expect("parent")).expect("golden dir");
            std::fs::write(&file, actual).expect("write golden");
            return;
        }
        let expected = dpone_boundary::read::read_regular(&file, 1 << 20)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .unwrap_or_else(|| {
                panic!("no pin {name}.{ext}: run with DPONE_BLESS_REPORTS=1 and review it")
            });
        assert_eq!(actual, expected, "{name}.{ext} differs from its pin");
    }

    /// Asserts the report's JSON is byte for byte the pretty JSON of `before`: the value the
    /// command printed before its report was typed.
    pub fn assert_prints_as<R: Report>(report: &R, before: &impl serde::Serialize) {
        assert_eq!(
            report_json(report).expect("report serializes"),
            serde_json::to_string_pretty(before).expect("value serializes")
        );
    }

    /// Asserts the report's JSON (as printed, with its trailing newline) and its summary
    /// against their pins.
    pub fn assert_pinned<R: Report>(name: &str, report: &R) {
        let json = report_json(report).expect("report serializes");
        pin(name, "json", &format!("{json}\n"));
        pin(name, "txt", &report.summary().finish(false));
    }
}
