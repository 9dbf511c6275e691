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
    kind: &'static str,
}

static MODE: OnceLock<Mode> = OnceLock::new();

/// Fixes the output mode and the command kind for this process.
pub fn configure(flag: OutputFlag, kind: &'static str) {
    let terminal = std::io::stdout().is_terminal();
    let text = match flag {
        OutputFlag::Auto => terminal,
        OutputFlag::Json => false,
        OutputFlag::Text => true,
    };
    let color = text && terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let _ = MODE.set(Mode { text, color, kind });
}

/// True when stdout gets the human summary rather than the JSON.
pub fn text_mode() -> bool {
    MODE.get().is_some_and(|m| m.text)
}

/// The human summary of `value` for this process's command.
pub fn summary(value: &Value) -> String {
    match MODE.get() {
        Some(m) => render(m.kind, value, m.color),
        None => render("", value, false),
    }
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

    /// The summary of a plain report: `verdict: headline`, then the report's top-level scalar
    /// fields and the length of each of its lists (at most twelve lines, in the order of the
    /// report's JSON). For reports whose every field is a fact worth showing as it is.
    pub fn listing(verdict: Verdict, headline: impl Into<String>, report: &impl Serialize) -> Self {
        let mut s = Self::new(verdict, headline);
        let value = serde_json::to_value(report).unwrap_or(Value::Null);
        s.list_fields(&value);
        s
    }

    fn list_fields(&mut self, value: &Value) {
        if let Value::Object(map) = value {
            for (k, value) in map.iter().filter(|(_, x)| !x.is_object() && !x.is_array()) {
                if self.facts.len() < 12 {
                    self.json_fact(&k.replace('_', " "), value);
                }
            }
            for (k, value) in map.iter().filter(|(_, x)| x.is_array()) {
                if self.facts.len() < 12 {
                    self.line(
                        &k.replace('_', " "),
                        format!("{} items", value.as_array().map_or(0, Vec::len)),
                    );
                }
            }
        }
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

/// Renders `value` (the JSON of a command of `kind`) as a verdict-first summary.
pub fn render(kind: &str, value: &Value, color: bool) -> String {
    let summary = match kind {
        "run" | "check" | "plan" | "status" | "state show"
            if value["route"] == "clickhouse_cluster_publication" =>
        {
            clickhouse(value)
        }
        "run" => run(value),
        "check" | "plan" if value.get("identity").is_some() => xmin_check(kind, value),
        "status" | "state show" => status(value),
        "resolve" => resolve(value),
        "campaign admit" => admit(value),
        "campaign status" => campaign_status(value),
        "campaign verify" => campaign_verify(value),
        "bundle verify" | "bundle activate" | "verify-bundle" => bundle(kind, value),
        // `"verified": false` here is "no trust decision was made", not a refusal.
        "bundle inspect" => {
            let mut s = generic(value);
            s.verdict = Verdict::Done;
            s.headline = "inspected (no trust decision)".to_owned();
            s
        }
        "policy test" => policy_test(value),
        "policy eval" => policy_eval(value),
        "demo" => demo(value),
        _ => generic(value),
    };
    summary.finish(color)
}

fn run(v: &Value) -> Summary {
    let mut s = if let Some(outcome) = v.get("outcome").filter(|o| o.is_object()) {
        let mut s = Summary::new(Verdict::Done, clean_json(&outcome["status"]));
        let m = &outcome["receipt"]["metrics"];
        s.json_fact("invocation", &v["invocation_id"]);
        s.json_fact("load", &outcome["load"]);
        s.json_fact("delete mode", &outcome["delete_mode"]);
        for key in [
            "inserted",
            "updated",
            "reactivated",
            "soft_deleted",
            "hard_deleted",
            "unchanged",
            "active",
        ] {
            if m[key].as_u64().is_some_and(|n| n > 0) || key == "active" {
                s.json_fact(&key.replace('_', " "), &m[key]);
            }
        }
        if let Some(e) = outcome.get("guard_evidence").filter(|e| e.is_object()) {
            s.line(
                "guard",
                format!(
                    "{} ({}, fuel {})",
                    decision_outcome(&e["output"]),
                    clean_json(&outcome["guard_reason"]),
                    clean_json(&e["fuel_used"])
                ),
            );
        }
        s.json_fact("receipt", &outcome["receipt"]["receipt_id"]);
        s
    } else if let Some(f) = v.get("failure").filter(|f| f.is_object()) {
        let code = f["error"]["code"]
            .as_str()
            .or(f["code"].as_str())
            .unwrap_or("?");
        let unknown = f["phase"] == "commit" || f["rolled_back"] == false;
        let mut s = if unknown {
            Summary::new(Verdict::NotFinished, clean(code))
        } else {
            Summary::new(Verdict::Refused, clean(code))
        };
        s.json_fact("invocation", &v["invocation_id"]);
        s.json_fact("phase", &f["phase"]);
        s.json_fact("reason", f["error"].get("message").unwrap_or(&f["message"]));
        s.line(
            "next",
            if unknown {
                "retry the same invocation (--invocation); the commit outcome is probed first"
            } else if f["full_repair_required"] == true {
                "nothing was changed; a full-baseline repair authority is required"
            } else {
                "nothing was changed; fix the cause and run again"
            },
        );
        s
    } else {
        return generic(v);
    };
    if let Some(m) = v.get("source_measurement").filter(|m| m.is_object()) {
        s.line(
            "read",
            format!(
                "{} rows, {} bytes{}",
                clean_json(&m["rows"]),
                clean_json(&m["source_bytes"]),
                if m["complete"] == false {
                    " (incomplete)"
                } else {
                    ""
                }
            ),
        );
    }
    if let Some(r) = v.get("np_reservation").filter(|r| r.is_object()) {
        s.json_fact("reservation", &r["reservation_id"]);
        s.json_fact("settled", &r["outcome"]);
    }
    s
}

/// The ClickHouse publication route's reports (`check`, `plan`, `run`, `status`).
fn clickhouse(v: &Value) -> Summary {
    let blockers = v["blockers"].as_array().map_or(0, Vec::len);
    let code = v["error"].as_str().map(clean);
    let mut s = match v["outcome"].as_str() {
        Some("completed") => Summary::new(Verdict::Done, "published"),
        Some("in_progress") => Summary::new(
            Verdict::NotFinished,
            format!("members still executing ({})", clean_json(&v["phase"])),
        ),
        Some(other) => Summary::new(
            Verdict::Refused,
            code.clone().unwrap_or_else(|| clean(other)),
        ),
        None if v["admitted"] == false || blockers > 0 => {
            Summary::new(Verdict::Refused, format!("{blockers} blocker(s)"))
        }
        None => Summary::new(Verdict::Done, clean_json(&v["command"])),
    };
    s.json_fact("workload", &v["workload"]);
    s.json_fact("operation", &v["operation_id"]);
    if let Some(r) = v.get("receipt").filter(|r| r.is_object()) {
        s.json_fact("publication", &r["publication"]["kind"]);
        s.line(
            "artifact",
            format!(
                "{} rows, {} bytes",
                clean_json(&r["artifact"]["row_count"]),
                clean_json(&r["artifact"]["byte_size"])
            ),
        );
    }
    if let Some(m) = v.get("measurements").filter(|m| m.is_object()) {
        s.line(
            "read",
            format!(
                "{} rows, {} bytes",
                clean_json(&m["source"]["rows"]),
                clean_json(&m["source"]["source_bytes"])
            ),
        );
        if let Some(loads) = m["http_body"].as_array() {
            s.line("members loaded", loads.len().to_string());
        }
    }
    if let Some(w) = v["waiting"].as_array() {
        s.line("waiting on", format!("{} member(s)", w.len()));
    }
    if blockers > 0 {
        for b in v["blockers"].as_array().into_iter().flatten().take(5) {
            s.json_fact("blocker", b.get("code").unwrap_or(b));
        }
    }
    s.json_fact("recovery", &v["recovery"]);
    if v["outcome"] == "in_progress" {
        s.line("next", "run again with the same --invocation");
    }
    if let Some(r) = v.get("np_reservation").filter(|r| r.is_object()) {
        s.json_fact("reservation", &r["reservation_id"]);
    }
    s
}

fn status(v: &Value) -> Summary {
    if v.get("state_key").is_none() {
        return generic(v);
    }
    let state = &v["state"];
    let mut s = if state.is_null() {
        Summary::new(
            Verdict::Done,
            "no state yet (the first run is a full baseline)",
        )
    } else if state["superseded"] == true {
        Summary::new(Verdict::Refused, "state superseded by a transfer")
    } else {
        Summary::new(Verdict::Done, "state ok")
    };
    s.json_fact("state key", &v["state_key"]);
    if state.is_object() {
        s.line(
            "checkpoint",
            format!(
                "xmin {} revision {}",
                clean_json(&state["checkpoint"]["xmin"]),
                clean_json(&state["checkpoint"]["revision"])
            ),
        );
    }
    let receipts = v["receipts"].as_array().map_or(&[][..], Vec::as_slice);
    s.line("receipts", receipts.len().to_string());
    if let Some(latest) = receipts.first() {
        s.json_fact("latest receipt", &latest["receipt_id"]);
        s.json_fact("latest invocation", &latest["invocation_id"]);
    }
    s
}

fn admit(v: &Value) -> Summary {
    if v["result"] == "admitted" {
        let r = &v["reservation"];
        let mut s = Summary::new(Verdict::Done, "admitted");
        s.json_fact("reservation", &r["reservation_id"]);
        s.json_fact("workload", &r["workload_id"]);
        s.json_fact("attempt", &r["attempt_id"]);
        s.json_fact("phase", &r["phase"]);
        s.line(
            "reserved",
            format!(
                "{} rows, {} bytes, {} s",
                clean_json(&r["source_rows"]),
                clean_json(&r["source_bytes"]),
                clean_json(&r["attempt_seconds"])
            ),
        );
        s.json_fact("scope decision", &v["evidence"]["scope"]["decision"]);
        s
    } else if v["result"] == "refused" {
        let mut s = Summary::new(Verdict::Refused, clean_json(&v["code"]));
        s.json_fact("workload", &v["workload_id"]);
        s.json_fact("scope decision", &v["decision"]);
        s.line("next", "nothing was reserved");
        s
    } else {
        generic(v)
    }
}

fn policy_test(v: &Value) -> Summary {
    let failed = v["failed"].as_u64().unwrap_or(0) + v["conformance_failed"].as_u64().unwrap_or(0);
    let mut s = if failed == 0 {
        Summary::new(
            Verdict::Done,
            format!(
                "{} of {} rows passed",
                clean_json(&v["passed"]),
                clean_json(&v["rows"])
            ),
        )
    } else {
        Summary::new(
            Verdict::Refused,
            format!("{failed} of {} rows failed", clean_json(&v["rows"])),
        )
    };
    s.json_fact("policy", &v["kind"]);
    s.json_fact("function", &v["function"]);
    s.json_fact("component", &v["component_sha256"]);
    for t in v["tables"].as_array().into_iter().flatten() {
        s.line(
            &format!("table {}", clean_json(&t["table"])),
            format!(
                "{} rows, {} failed",
                clean_json(&t["rows"]),
                clean_json(&t["failed"])
            ),
        );
    }
    s
}

fn policy_eval(v: &Value) -> Summary {
    let e = &v["evidence"];
    let mut s = Summary::new(Verdict::Done, decision_outcome(&v["decision"]));
    s.json_fact("policy", &e["kind"]);
    s.json_fact("function", &e["function"]);
    s.json_fact("fuel used", &e["fuel_used"]);
    s.json_fact("component", &e["component_sha256"]);
    s
}

fn demo(v: &Value) -> Summary {
    let decisions = v["decisions"].as_array().map_or(&[][..], Vec::as_slice);
    let mut s = Summary::new(
        Verdict::Done,
        format!(
            "{} sample decisions by the pinned components",
            decisions.len()
        ),
    );
    for d in decisions {
        s.line(
            &format!("{} {}", clean_json(&d["kind"]), clean_json(&d["function"])),
            format!(
                "{} (fuel {})",
                decision_outcome(&d["output"]),
                clean_json(&d["fuel_used"])
            ),
        );
    }
    s
}

/// XMin `check` and `plan` (no server contacted): the route, what it moves where, the delete
/// plan and, for `plan`, the guards and the number of run steps.
fn xmin_check(kind: &str, v: &Value) -> Summary {
    let conflict = !v["state_schema_conflict"].is_null();
    let mut s = if v["status"] == "ok" && !conflict {
        Summary::new(
            Verdict::Done,
            if kind == "plan" {
                "plan ready"
            } else {
                "route checked"
            },
        )
    } else if conflict {
        Summary::new(Verdict::Refused, "state schema conflict")
    } else {
        Summary::new(Verdict::Refused, clean_json(&v["status"]))
    };
    s.json_fact("workload", &v["workload"]);
    s.json_fact("route", &v["route"]);
    s.line(
        "moves",
        format!(
            "{} -> {}",
            clean_json(&v["source_relation"]),
            clean_json(&v["target"])
        ),
    );
    if let Some(key) = v["unique_key"].as_array() {
        s.line(
            "unique key",
            key.iter().map(clean).collect::<Vec<_>>().join(", "),
        );
    }
    s.json_fact("delete mode", &v["delete_mode"]);
    s.json_fact("state key", &v["identity"]["state_key"]);
    if let Some(e) = v.get("delete_plan_evidence").filter(|e| e.is_object()) {
        s.line(
            "delete plan",
            format!(
                "{} rules (delete-mode {}, fuel {})",
                v["delete_plan"]["rules"].as_array().map_or(0, Vec::len),
                decision_outcome(&e["output"]),
                clean_json(&e["fuel_used"])
            ),
        );
    }
    if let Some(g) = v.get("guards").filter(|g| g.is_object()) {
        // The ratio is kept in millionths (the manifest's six-digit decimal).
        let ratio = g["max_delete_ratio"]
            .as_u64()
            .map_or_else(|| "-".to_owned(), |m| format!("{}", m as f64 / 1e6));
        s.line(
            "guards",
            format!(
                "at most {} deletes, delete ratio at most {ratio}",
                clean_json(&g["max_delete_rows"])
            ),
        );
    }
    if let Some(steps) = v["steps"].as_array() {
        s.line("run steps", steps.len().to_string());
    }
    let not_checked = v["not_checked"].as_array().map_or(0, Vec::len);
    if not_checked > 0 {
        s.line(
            "not verified",
            format!("{not_checked} item(s): no server was contacted"),
        );
    }
    for d in v["deprecations"].as_array().into_iter().flatten().take(3) {
        s.json_fact("deprecated", d);
    }
    s.line(
        "next",
        if conflict {
            "nothing was changed; resolve the state schema conflict first"
        } else {
            "check --connections verifies the pins; run verifies the rest before any source I/O"
        },
    );
    s
}

/// ClickHouse `resolve`: the proposed or recorded transition out of a hold, or the refusal.
fn resolve(v: &Value) -> Summary {
    let r = &v["resolve"];
    let transition = format!(
        "{} {} -> {}",
        clean_json(&r["resolution"]),
        clean_json(&r["from"]),
        clean_json(&r["to"])
    );
    let mut s = match r["outcome"].as_str() {
        Some("proposed") => Summary::new(Verdict::Done, format!("proposed {transition}")),
        Some("recorded") => Summary::new(Verdict::Done, format!("recorded {transition}")),
        _ if r["retryable"] == true => Summary::new(Verdict::NotFinished, clean_json(&r["code"])),
        _ => Summary::new(Verdict::Refused, clean_json(&r["code"])),
    };
    s.json_fact("workload", &v["workload"]);
    s.json_fact("operation", &r["operation_id"]);
    s.json_fact("phase", &r["phase"]);
    s.json_fact("keeper version", &r["keeper_version"]);
    let members = r["members"].as_array().map_or(&[][..], Vec::as_slice);
    if !members.is_empty() {
        let reachable = members.iter().filter(|m| m["reachable"] == true).count();
        s.line(
            "members",
            format!("{reachable} of {} reachable", members.len()),
        );
    }
    s.json_fact("reason", &r["reason"]);
    s.json_fact("proof", &r["proof"]);
    if let Some(drops) = r["drops"].as_array().filter(|d| !d.is_empty()) {
        s.line("candidates dropped", drops.len().to_string());
    }
    s.json_fact("recorded at", &r["recorded_version"]);
    s.line(
        "next",
        match r["outcome"].as_str() {
            Some("proposed") => "nothing was changed; run again with --apply to record it".into(),
            _ if r["retryable"] == true => {
                format!("resolve again later ({})", clean_json(&r["recovery"]))
            }
            _ => clean_json(&r["recovery"]),
        },
    );
    s
}

/// `campaign status`: whether the grant admits new work, then its pool's charges.
fn campaign_status(v: &Value) -> Summary {
    if v["result"] != "history" {
        return generic(v);
    }
    let a = &v["current_authority"];
    let mut s = if a["admits_new_work"] == true {
        Summary::new(Verdict::Done, "admits new work")
    } else if a["revoked"] == true {
        Summary::new(Verdict::Refused, "revoked: admits no new work")
    } else {
        Summary::new(Verdict::Refused, "expired: admits no new work")
    };
    let r = &v["registration"];
    s.json_fact("grant", &r["grant_id"]);
    s.json_fact("phase", &r["phase"]);
    s.line(
        "trust revision",
        format!(
            "{} registered, {} current",
            clean_json(&r["original_trust"]["revision"]),
            clean_json(&v["current_trust"]["revision"])
        ),
    );
    let p = &v["pool"];
    s.line(
        "attempts",
        format!(
            "{} ({} unresolved)",
            clean_json(&p["attempts"]),
            clean_json(&p["unresolved"])
        ),
    );
    s.line(
        "reserved",
        format!(
            "{} rows, {} bytes",
            clean_json(&p["reserved_source_rows"]),
            clean_json(&p["reserved_source_bytes"])
        ),
    );
    s.line(
        "measured",
        format!(
            "{} rows, {} bytes, {} http bytes",
            clean_json(&p["measured_source_rows"]),
            clean_json(&p["measured_source_bytes"]),
            clean_json(&p["measured_http_bytes"])
        ),
    );
    s.line(
        "reservations",
        v["reservations"].as_array().map_or(0, Vec::len).to_string(),
    );
    for probed in v["probed"].as_array().into_iter().flatten().take(5) {
        s.line(
            "probed",
            format!(
                "{} {}",
                clean_json(&probed["reservation_id"]),
                if probed["found"] == false {
                    "not found"
                } else {
                    "found"
                }
            ),
        );
    }
    if p["unresolved"].as_u64().is_some_and(|n| n > 0) {
        s.line(
            "next",
            "an unresolved reservation blocks its workload's next attempt: settle it (campaign settle)",
        );
    }
    s
}

/// `campaign verify` (stateless): verified with every workload's scope decision, or the
/// scope component's denial.
fn campaign_verify(v: &Value) -> Summary {
    match v["result"].as_str() {
        Some("verified") => {
            let decisions = v["scope"]["decisions"]
                .as_array()
                .map_or(&[][..], Vec::as_slice);
            let mut s = Summary::new(
                Verdict::Done,
                format!("verified, {} workload(s) in scope", decisions.len()),
            );
            s.json_fact("phase", &v["phase"]);
            s.json_fact("grant", &v["grant_id"]);
            s.json_fact("campaign", &v["campaign_id"]);
            s.json_fact("environment", &v["environment_id"]);
            s.json_fact("signer", &v["signature"]["signer_identity"]);
            s.json_fact("revocation epoch", &v["reopen"]["revocation_epoch"]);
            for d in decisions.iter().take(8) {
                s.line(
                    &format!("workload {}", clean_json(&d["workload_id"])),
                    format!(
                        "{} ({}, fuel {})",
                        clean_json(&d["decision"]),
                        clean_json(&d["code"]),
                        clean_json(&d["evidence"]["fuel_used"])
                    ),
                );
            }
            s
        }
        Some("refused") => {
            let mut s = Summary::new(Verdict::Refused, clean_json(&v["code"]));
            s.json_fact("phase", &v["phase"]);
            s.json_fact("workload", &v["workload_id"]);
            s.json_fact("scope decision", &v["decision"]);
            s.json_fact("fuel used", &v["evidence"]["fuel_used"]);
            s.line(
                "next",
                "nothing was admitted; the grant does not cover this workload",
            );
            s
        }
        _ => generic(v),
    }
}

/// `bundle verify`, `bundle activate` and `verify-bundle`.
fn bundle(kind: &str, v: &Value) -> Summary {
    if v["verified"] == false {
        let mut s = Summary::new(Verdict::Refused, clean_json(&v["error"]));
        s.line("next", "nothing was trusted or activated");
        return s;
    }
    if kind == "verify-bundle" {
        let mut s = Summary::new(Verdict::Done, "verified");
        if let Value::Object(map) = &v["outcome"] {
            for (k, value) in map.iter().filter(|(_, x)| !x.is_object() && !x.is_array()) {
                s.json_fact(&k.replace('_', " "), value);
            }
        }
        return s;
    }
    let activated = v["activated"] == true;
    let e = if activated {
        &v["evidence"]["bundle"]
    } else {
        &v["evidence"]
    };
    let mut s = Summary::new(
        Verdict::Done,
        if activated { "activated" } else { "verified" },
    );
    s.line(
        "bundle",
        format!(
            "{} {}",
            clean_json(&e["bundle"]["name"]),
            clean_json(&e["bundle"]["version"])
        ),
    );
    s.json_fact("manifest", &e["manifest_sha256"]);
    s.line(
        "signatures",
        format!(
            "{} of threshold {}",
            e["signers"].as_array().map_or(0, Vec::len),
            clean_json(&e["threshold"])
        ),
    );
    for c in e["components"].as_array().into_iter().flatten() {
        s.json_fact(
            &format!("component {}", clean_json(&c["kind"])),
            &c["sha256"],
        );
    }
    if activated {
        let ev = &v["evidence"];
        for t in ev["tables"].as_array().into_iter().flatten() {
            s.line(
                &format!("table {}", clean_json(&t["kind"])),
                format!(
                    "{} of {} rows agreed",
                    clean_json(&t["agreed"]),
                    clean_json(&t["rows"])
                ),
            );
        }
        for t in ev["host_conformance"]["tables"]
            .as_array()
            .into_iter()
            .flatten()
        {
            s.line(
                &format!("conformance {}", clean_json(&t["kind"])),
                format!(
                    "{} passed, {} failed",
                    clean_json(&t["passed"]),
                    clean_json(&t["failed"])
                ),
            );
        }
        if let Some(d) = v.get("decision").filter(|d| !d.is_null()) {
            s.line("decision", decision_outcome(&d["decision"]));
        }
    }
    s
}

/// Any other command: a verdict from its usual fields, then its top-level scalar facts.
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
    use serde_json::json;

    #[test]
    fn a_committed_run_leads_with_done_and_its_counts() {
        let v = json!({
            "invocation_id": "run-1",
            "outcome": {
                "status": "committed", "load": "full_baseline", "delete_mode": "soft_delete",
                "guard_reason": "GUARD_OK",
                "guard_evidence": {"output": {"allow": {}}, "fuel_used": 3307},
                "receipt": {"receipt_id": "r-1", "metrics": {"inserted": 120, "updated": 0, "active": 120}},
            },
            "source_measurement": {"rows": 120, "source_bytes": 5000, "complete": true},
        });
        let text = render("run", &v, false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "done: committed");
        assert!(text.contains("  inserted     120\n"), "{text}");
        assert!(
            text.contains("guard        allow (GUARD_OK, fuel 3307)"),
            "{text}"
        );
        assert!(
            text.contains("read         120 rows, 5000 bytes\n"),
            "{text}"
        );
        assert!(
            !text.contains("updated"),
            "zero counts are left out: {text}"
        );
    }

    #[test]
    fn a_refused_run_leads_with_its_code_and_the_next_action() {
        let v = json!({
            "invocation_id": "run-2",
            "failure": {"error": {"code": "DPONE_XMIN_GUARD_DENIED", "message": "too many deletes"},
                        "phase": "target_transaction", "rolled_back": true, "full_repair_required": false},
        });
        let text = render("run", &v, false);
        assert!(
            text.starts_with("refused: DPONE_XMIN_GUARD_DENIED\n"),
            "{text}"
        );
        assert!(text.contains("nothing was changed"), "{text}");
        let v = json!({"failure": {"error": {"code": "DPONE_XMIN_COMMIT_OUTCOME_UNKNOWN", "message": "m"},
                                   "phase": "commit", "rolled_back": false}});
        assert!(
            render("run", &v, false)
                .starts_with("not finished: DPONE_XMIN_COMMIT_OUTCOME_UNKNOWN\n")
        );
    }

    #[test]
    fn clickhouse_reports_lead_with_their_verdict() {
        let v = json!({"route": "clickhouse_cluster_publication", "command": "run", "workload": "w",
            "outcome": "completed",
            "receipt": {"publication": {"kind": "rename"}, "artifact": {"row_count": 1000, "byte_size": 40000}},
            "measurements": {"source": {"rows": 1000, "source_bytes": 52000}, "http_body": [{}, {}]}});
        let text = render("run", &v, false);
        assert!(text.starts_with("done: published\n"), "{text}");
        assert!(
            text.contains("artifact        1000 rows, 40000 bytes\n"),
            "{text}"
        );
        assert!(text.contains("members loaded  2\n"), "{text}");
        let v = json!({"route": "clickhouse_cluster_publication", "outcome": "in_progress",
            "phase": "publication_dispatching", "waiting": ["m1"], "recovery": "wait_then_resume"});
        let text = render("run", &v, false);
        assert!(
            text.starts_with("not finished: members still executing (publication_dispatching)\n"),
            "{text}"
        );
        assert!(
            text.contains("run again with the same --invocation"),
            "{text}"
        );
        let v = json!({"route": "clickhouse_cluster_publication", "command": "check", "admitted": false,
            "blockers": [{"code": "DPONE_CLICKHOUSE_X"}]});
        let text = render("check", &v, false);
        assert!(
            text.starts_with("refused: 1 blocker(s)\n") && text.contains("DPONE_CLICKHOUSE_X"),
            "{text}"
        );
        let v = json!({"route": "clickhouse_cluster_publication", "command": "plan", "admitted": true, "blockers": []});
        assert!(render("plan", &v, false).starts_with("done: plan\n"));
    }

    #[test]
    fn admission_status_and_policy_test_summaries() {
        let v = json!({"result": "admitted", "reservation": {"reservation_id": "res-1", "workload_id": "w", "attempt_id": "a", "phase": "execution", "source_rows": 10, "source_bytes": 20, "attempt_seconds": 30}, "evidence": {"scope": {"decision": "admit"}}});
        let text = render("campaign admit", &v, false);
        assert!(text.starts_with("done: admitted\n"), "{text}");
        assert!(text.contains("10 rows, 20 bytes, 30 s"), "{text}");
        let v = json!({"result": "refused", "code": "DPONE_NP_SCOPE_X", "workload_id": "w", "decision": "deny"});
        assert!(render("campaign admit", &v, false).starts_with("refused: DPONE_NP_SCOPE_X\n"));
        let v = json!({"state_key": "k", "state": {"checkpoint": {"xmin": 5, "revision": 2}, "superseded": false}, "receipts": [{"receipt_id": "r", "invocation_id": "i"}]});
        let text = render("status", &v, false);
        assert!(
            text.starts_with("done: state ok\n") && text.contains("xmin 5 revision 2"),
            "{text}"
        );
        let v =
            json!({"passed": 3, "rows": 4, "failed": 1, "conformance_failed": 0, "kind": "guard"});
        assert!(render("policy test", &v, false).starts_with("refused: 1 of 4 rows failed\n"));
    }

    #[test]
    fn resolve_campaign_and_bundle_summaries_lead_with_their_verdict() {
        let v = json!({"route": "clickhouse_cluster_publication", "command": "resolve", "workload": "w",
            "resolve": {"outcome": "proposed", "resolution": "abort", "from": "STAGING", "to": "ABORTED",
                        "members": [{"reachable": true}, {"reachable": false}], "recovery": "resolve_apply"}});
        let text = render("resolve", &v, false);
        assert!(
            text.starts_with("done: proposed abort STAGING -> ABORTED\n"),
            "{text}"
        );
        assert!(text.contains("  members   1 of 2 reachable\n"), "{text}");
        assert!(text.contains("run again with --apply"), "{text}");
        let v = json!({"resolve": {"outcome": "refused", "code": "DPONE_X", "retryable": true, "recovery": "wait"}});
        assert!(render("resolve", &v, false).starts_with("not finished: DPONE_X\n"));

        let v = json!({"result": "history", "registration": {"grant_id": "g", "phase": "execution",
                "original_trust": {"revision": 1}}, "current_trust": {"revision": 2},
            "current_authority": {"admits_new_work": false, "revoked": true, "expired": false},
            "pool": {"attempts": 2, "unresolved": 1, "reserved_source_rows": 10, "reserved_source_bytes": 20,
                     "measured_source_rows": 5, "measured_source_bytes": 6, "measured_http_bytes": 7},
            "reservations": [{}, {}], "probed": []});
        let text = render("campaign status", &v, false);
        assert!(
            text.starts_with("refused: revoked: admits no new work\n"),
            "{text}"
        );
        assert!(
            text.contains("attempts        2 (1 unresolved)\n"),
            "{text}"
        );
        assert!(text.contains("campaign settle"), "{text}");

        let v = json!({"verified": false, "manifest": {}});
        assert!(
            render("bundle inspect", &v, false)
                .starts_with("done: inspected (no trust decision)\n")
        );
        let v = json!({"verified": false, "error": "DPONE_BUNDLE_X"});
        assert!(render("bundle verify", &v, false).starts_with("refused: DPONE_BUNDLE_X\n"));
        let v = json!({"verified": true, "outcome": {"kind": "certificate"}});
        assert!(render("verify-bundle", &v, false).starts_with("done: verified\n"));
        let v = json!({"result": "refused", "code": "DPONE_SCOPE_Y", "decision": "deny"});
        assert!(render("campaign verify", &v, false).starts_with("refused: DPONE_SCOPE_Y\n"));
    }

    #[test]
    fn values_cannot_drive_the_terminal_and_colour_is_only_on_request() {
        let v = json!({"status": "ok\u{1b}[2J", "note": "a\nb"});
        let text = render("other", &v, false);
        assert!(
            !text.contains('\u{1b}') && text.contains("ok?[2J"),
            "{text}"
        );
        assert!(render("other", &v, true).starts_with("\x1b[1;32mdone\x1b[0m"));
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
        let expected = std::fs::read_to_string(&file).unwrap_or_else(|_| {
            panic!("no pin {name}.{ext}: run with DPONE_BLESS_REPORTS=1 and review it")
        });
        assert_eq!(actual, expected, "{name}.{ext} differs from its pin");
    }

    /// Asserts the report's JSON (as printed, with its trailing newline) and its summary
    /// against their pins.
    pub fn assert_pinned<R: Report>(name: &str, report: &R) {
        let json = report_json(report).expect("report serializes");
        pin(name, "json", &format!("{json}\n"));
        pin(name, "txt", &report.summary().finish(false));
    }
}
