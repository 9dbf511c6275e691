//! Tier: OpenTelemetry export received for real. A tiny OTLP/HTTP receiver on 127.0.0.1 (POST
//! `/v1/traces` and `/v1/metrics`) takes what `dpone-host` exports and decodes it with the
//! official OTLP protobuf definitions (`opentelemetry-proto`'s prost messages); the tests assert
//! the spans, their parent links, the metrics and their values as received, that nothing is
//! exported without the OTel environment, and that no row value, credential, endpoint or path
//! is in what was sent. No OpenTelemetry Collector binary is used (none can be had here: see
//! docs/observability.md). The XMin run needs a PostgreSQL server (`cfg(dpone_live_pg)`,
//! ignored with its SKIP reason otherwise); the decision tests need none.

#[path = "../../../adapters/postgres/tests/support/mod.rs"]
mod support;

#[path = "support/otlp.rs"]
mod otlp;

#[path = "support/mod.rs"]
mod cli;

use opentelemetry_proto::tonic::trace::v1::Span;
use otlp::{Receiver, histogram, int_attr, otel_env, str_attr, sum};
use serde_json::Value;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `dpone-host` with every inherited OTel variable removed, then `env` set.
fn host(env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dpone-host"));
    command.current_dir(root());
    for (key, _) in std::env::vars() {
        if key.starts_with("OTEL_") {
            command.env_remove(key);
        }
    }
    command.envs(env.iter().copied());
    command
}

fn pin(kind: &str) -> String {
    let lock: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("policies/components.lock.json")).expect("lock"),
    )
    .expect("lock parses");
    lock["components"][kind]["sha256"]
        .as_str()
        .expect("pin")
        .to_owned()
}

#[test]
fn a_policy_decision_is_exported_as_a_span_under_its_command_and_counted() {
    let receiver = Receiver::start();
    let env = otel_env(&receiver);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = host(&env)
        .args([
            "policy",
            "eval",
            "guard",
            "--input",
            "fixtures/samples/guard.json",
        ])
        .output()
        .expect("dpone-host runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let fuel = json["evidence"]["fuel_used"].as_u64().expect("fuel");

    let (spans, resource) = receiver.spans();
    assert_eq!(str_attr(&resource, "service.name"), Some("dpone-otlp-test"));
    assert_eq!(
        str_attr(&resource, "deployment.environment"),
        Some("otlp-test")
    );
    let command = spans
        .iter()
        .find(|s| s.name == "policy eval")
        .expect("command span");
    assert!(
        command.parent_span_id.is_empty(),
        "the command span is the root"
    );
    let decide = spans
        .iter()
        .find(|s| s.name == "decide")
        .expect("decide span");
    assert_eq!(decide.parent_span_id, command.span_id);
    assert_eq!(decide.trace_id, command.trace_id);
    assert_eq!(str_attr(&decide.attributes, "policy.kind"), Some("guard"));
    assert_eq!(
        str_attr(&decide.attributes, "policy.function"),
        Some("decide")
    );
    assert_eq!(
        int_attr(&decide.attributes, "policy.fuel_used"),
        i64::try_from(fuel).ok()
    );
    assert_eq!(
        str_attr(&decide.attributes, "policy.component_sha256"),
        Some(pin("guard").as_str())
    );
    let outcome = str_attr(&decide.attributes, "policy.outcome").expect("outcome");
    let output = &json["decision"];
    assert!(
        output.get(outcome).is_some() || output.get("decision").is_some(),
        "outcome {outcome} names the decision {output}"
    );
    // No source locations or thread names (paths) on exported spans.
    for s in &spans {
        for kv in &s.attributes {
            assert!(
                !kv.key.starts_with("code.") && !kv.key.starts_with("thread."),
                "{kv:?}"
            );
        }
    }

    let metrics = receiver.metrics();
    assert_eq!(
        sum(
            &metrics,
            "dpone.decisions",
            &[("policy.kind", "guard"), ("policy.outcome", outcome)]
        ),
        1
    );
    let (count, total) = histogram(&metrics, "dpone.decision.fuel", &[("policy.kind", "guard")]);
    assert_eq!((count, total), (1, fuel as f64));
}

#[test]
fn a_refused_command_is_counted_by_its_code() {
    let receiver = Receiver::start();
    let env = otel_env(&receiver);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = host(&env)
        .args(["plan", "--manifest", "fixtures/does-not-exist.yaml"])
        .output()
        .expect("dpone-host runs");
    let rc = out.status.code().expect("exit");
    assert_ne!(rc, 0);
    let report: Value = serde_json::from_slice(
        out.stderr
            .split(|b| *b == b'\n')
            .rfind(|l| l.starts_with(b"{"))
            .expect("error report"),
    )
    .expect("JSON error report");
    let code = report["error"].as_str().expect("code");
    let (spans, _) = receiver.spans();
    let command = spans
        .iter()
        .find(|s| s.name == "plan")
        .expect("command span");
    assert_eq!(str_attr(&command.attributes, "error.code"), Some(code));
    let metrics = receiver.metrics();
    assert_eq!(sum(&metrics, "dpone.failures", &[("error.code", code)]), 1);
    // The manifest's path is not in what was exported.
    assert!(!String::from_utf8_lossy(&receiver.raw()).contains("does-not-exist"));
}

#[test]
fn without_the_otel_environment_nothing_is_exported() {
    // The SDK's default OTLP/HTTP endpoint: were an exporter built without an endpoint
    // variable, this is where it would send.
    let listener = match TcpListener::bind("127.0.0.1:4318") {
        Ok(l) => l,
        Err(e) => panic!("cannot listen on the default OTLP port 4318 to watch it: {e}"),
    };
    let receiver = Receiver::on(listener);
    let out = host(&[
        ("OTEL_SERVICE_NAME", "dpone-otlp-test"),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment=otlp-test",
        ),
    ])
    .args([
        "policy",
        "eval",
        "guard",
        "--input",
        "fixtures/samples/guard.json",
    ])
    .output()
    .expect("dpone-host runs");
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(receiver.received.lock().expect("lock").is_empty());
    // And with an endpoint but the SDK disabled, nothing either.
    let env = otel_env(&receiver);
    let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.push(("OTEL_SDK_DISABLED", "true"));
    let out = host(&env)
        .args([
            "policy",
            "eval",
            "guard",
            "--input",
            "fixtures/samples/guard.json",
        ])
        .output()
        .expect("dpone-host runs");
    assert!(out.status.success());
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(receiver.received.lock().expect("lock").is_empty());
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn an_xmin_run_exports_its_phases_decisions_and_counts_and_no_secrets() {
    let Some(f) = support::Fixture::new("otlp", support::Options::default()).await else {
        panic!("the configured PostgreSQL server is not usable");
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = write(dir.path(), "manifest.yaml", &f.manifest_yaml);
    let registry = write(dir.path(), "registry.yaml", &f.registry_yaml);
    f.src_sql("INSERT INTO public.items SELECT g, 'secret-row-' || g, g % 7, g * 1.25 FROM generate_series(1, 120) g").await;

    let receiver = Receiver::start();
    let otel = otel_env(&receiver);
    let mut env: Vec<(&str, &str)> = otel.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.extend(f.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let out = host(&env)
        .arg("run")
        .arg("--manifest")
        .arg(&manifest)
        .arg("--connections")
        .arg(&registry)
        .arg("--artifact-dir")
        .arg(dir.path().join("artifacts"))
        .args(["--invocation", "otlp-run-1"])
        .output()
        .expect("dpone-host runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let source_bytes = run["source_measurement"]["source_bytes"]
        .as_u64()
        .expect("bytes");

    let (spans, resource) = receiver.spans();
    assert_eq!(str_attr(&resource, "service.name"), Some("dpone-otlp-test"));
    let named = |name: &str| -> Vec<&Span> { spans.iter().filter(|s| s.name == name).collect() };
    let one = |name: &str| -> &Span {
        let found = named(name);
        assert_eq!(
            found.len(),
            1,
            "one {name} span: {:?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        found[0]
    };
    let command = one("run");
    assert!(command.parent_span_id.is_empty());
    for s in &spans {
        assert_eq!(
            s.trace_id, command.trace_id,
            "{} in the run's trace",
            s.name
        );
    }
    for phase in ["preflight", "read", "seal", "apply", "commit"] {
        let s = one(phase);
        assert_eq!(
            s.parent_span_id, command.span_id,
            "{phase} under the command"
        );
        assert_eq!(str_attr(&s.attributes, "phase"), Some(phase));
        assert!(s.end_time_unix_nano >= s.start_time_unix_nano);
    }
    let apply = one("apply");
    let stage = one("stage");
    assert_eq!(
        stage.parent_span_id, apply.span_id,
        "staging inside the target transaction"
    );
    // Phases in protocol order.
    assert!(one("read").end_time_unix_nano <= one("seal").start_time_unix_nano);
    assert!(one("seal").end_time_unix_nano <= apply.start_time_unix_nano);
    assert!(apply.end_time_unix_nano <= one("commit").start_time_unix_nano);

    let decisions = named("decide");
    let by_kind = |kind: &str| {
        decisions
            .iter()
            .find(|s| str_attr(&s.attributes, "policy.kind") == Some(kind))
            .unwrap_or_else(|| panic!("a {kind} decision span"))
    };
    let guard = by_kind("guard");
    assert_eq!(
        guard.parent_span_id, apply.span_id,
        "the guard decides inside the transaction"
    );
    assert_eq!(
        str_attr(&guard.attributes, "policy.component_sha256"),
        Some(pin("guard").as_str())
    );
    assert_eq!(
        int_attr(&guard.attributes, "policy.fuel_used"),
        run["outcome"]["guard_evidence"]["fuel_used"].as_i64()
    );
    assert_eq!(str_attr(&guard.attributes, "policy.outcome"), Some("allow"));
    let delete_mode = by_kind("delete-mode");
    assert_eq!(
        delete_mode.parent_span_id, command.span_id,
        "the plan is decided before the run"
    );
    assert_eq!(
        str_attr(&delete_mode.attributes, "policy.function"),
        Some("plan")
    );

    let metrics = receiver.metrics();
    assert_eq!(sum(&metrics, "dpone.rows.read", &[("route", "xmin")]), 120);
    assert_eq!(
        sum(&metrics, "dpone.bytes.read", &[("route", "xmin")]),
        source_bytes
    );
    assert_eq!(
        sum(&metrics, "dpone.rows.applied", &[("route", "xmin")]),
        120
    );
    assert_eq!(
        sum(
            &metrics,
            "dpone.decisions",
            &[("policy.kind", "guard"), ("policy.outcome", "allow")]
        ),
        1
    );
    assert_eq!(
        sum(
            &metrics,
            "dpone.decisions",
            &[("policy.kind", "delete-mode")]
        ),
        1
    );
    for phase in ["preflight", "read", "seal", "stage", "apply", "commit"] {
        let (count, seconds) = histogram(&metrics, "dpone.phase.duration", &[("phase", phase)]);
        assert_eq!(count, 1, "{phase}");
        assert!(seconds > 0.0, "{phase}");
    }
    assert!(
        !metrics.contains_key("dpone.failures"),
        "a successful run counts no failure"
    );

    // The same run's human summary (`--output text`), on a second run: a strict no-op.
    f.src_sql("UPDATE public.items SET qty = qty + 1 WHERE id <= 4")
        .await;
    let env_plain: Vec<(&str, &str)> = f
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let text = |command: &str, extra: &[&str]| {
        let out = host(&env_plain)
            .args(["--output", "text", command, "--manifest"])
            .arg(&manifest)
            .arg("--connections")
            .arg(&registry)
            .arg("--artifact-dir")
            .arg(dir.path().join("artifacts"))
            .args(extra)
            .output()
            .expect("dpone-host runs");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8")
    };
    let summary = text("run", &["--invocation", "otlp-run-2"]);
    eprintln!("{summary}");
    assert!(summary.starts_with("done: committed\n"), "{summary}");
    assert!(summary.contains("  updated "), "{summary}");
    assert!(
        summary.contains("  guard ") && summary.contains("allow ("),
        "{summary}"
    );
    let status = text("status", &[]);
    eprintln!("{status}");
    assert!(status.starts_with("done: state ok\n"), "{status}");
    assert!(status.contains("  receipts           2\n"), "{status}");

    // `status` at a real terminal (a pseudo-terminal through util-linux `script`), default
    // `--output auto`: the summary, not the JSON.
    let command = format!(
        "'{}' status --manifest '{}' --connections '{}'",
        env!("CARGO_BIN_EXE_dpone-host"),
        manifest.display(),
        registry.display()
    );
    let pty = Command::new("script")
        .current_dir(root())
        .envs(env_plain.iter().copied())
        .env("NO_COLOR", "1")
        .args(["-qec", &command, "/dev/null"])
        .output()
        .expect("util-linux `script` runs");
    let shown = String::from_utf8_lossy(&pty.stdout).replace("\r\n", "\n");
    assert_eq!(pty.status.code(), Some(0), "{shown}");
    assert!(shown.starts_with("done: state ok\n"), "{shown}");

    // Identifiers and codes only: no row value, credential, endpoint or path was sent.
    let raw = String::from_utf8_lossy(&receiver.raw()).into_owned();
    assert!(!raw.contains("secret-row-"), "a row value was exported");
    for (key, value) in &f.env {
        assert!(
            !raw.contains(value.as_str()),
            "the value of {key} was exported"
        );
    }
    let dir_text = dir.path().to_string_lossy();
    assert!(
        !raw.contains(dir_text.as_ref()),
        "a local path was exported"
    );
    let root_text = root().canonicalize().expect("root");
    assert!(
        !raw.contains(root_text.to_string_lossy().as_ref()),
        "a source or checkout path was exported"
    );
    for endpoint in [
        receiver.endpoint.as_str(),
        "127.0.0.1",
        "localhost",
        "postgres://",
        "host=",
    ] {
        assert!(
            !raw.contains(endpoint),
            "an endpoint ({endpoint}) was exported"
        );
    }
}

/// Every bytes `receivers` got, as text.
fn received(receivers: &[&Receiver]) -> String {
    receivers
        .iter()
        .map(|r| String::from_utf8_lossy(&r.raw()).into_owned())
        .collect()
}

/// The one span named `name`.
fn only<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let found: Vec<&Span> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(
        found.len(),
        1,
        "one {name} span: {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn the_nonproduction_authority_exports_admit_decide_and_settle_and_no_secrets() {
    use cli::campaign as c;
    use cli::np_store::{Run, Store, id, ok, refused};

    const WORKLOAD: &str = "pg-customers";
    let store = Store::new().await;
    let Some(f) = support::Fixture::new("otlp_np", support::Options::default()).await else {
        panic!("the configured PostgreSQL server is not usable");
    };
    f.src_sql("INSERT INTO public.items SELECT g, 'secret-row-' || g, g % 7, g * 1.25 FROM generate_series(1, 120) g").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = write(
        dir.path(),
        "pg-customers.yaml",
        &f.manifest_yaml
            .replace("name: items_to_dwh", &format!("name: {WORKLOAD}")),
    );
    let registry = write(dir.path(), "registry.yaml", &f.registry_yaml);
    let pack = dpone_engine_nonproduction::fields::Digest::of(
        &std::fs::read(&manifest).expect("the manifest"),
    )
    .as_str()
    .to_owned();
    let run = Run::new(&store);
    // The workload routed truthfully (PostgreSQL to PostgreSQL), its participants enrolled, so
    // the reservation run binds to them.
    let docs = cli::np_xmin::xmin_docs(&pack, &f.src.name, &f.pg_target_db().name, "public.items");
    let grant = c::canon(&docs.egrant);
    ok(&run.policy_register(&docs, None));
    ok(&run.grant_register(&docs, true, &grant));
    for (participant, connection) in [
        (cli::np_xmin::PG_READ, "pg_source"),
        (cli::np_xmin::PG_WRITE, "pg_target"),
    ] {
        let args = cli::np_xmin::enroll_args(&run, &docs, participant, &registry, connection);
        let enrolled = ok(&run.command(&args).envs(&f.env).output().expect("runs"));
        assert_eq!(enrolled["result"], "enrolled", "{enrolled}");
    }
    let composition = dir.path().join("composition.json");
    std::fs::write(&composition, c::canon(&docs.composition)).expect("write the composition");
    let scope_pin = pin("scope");

    // `campaign admit`: the `admit` phase under the command, every scope decision under it.
    let admitted = Receiver::start();
    let otel = otel_env(&admitted);
    let out = run
        .command(&run.admit_args(&docs, true, &grant, WORKLOAD, "a1", 1000, 1_000_000))
        .envs(otel.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("dpone-host runs");
    let a = ok(&out);
    assert_eq!(a["result"], "admitted");
    let committed = &a["evidence"]["scope"]["evidence"];
    let (spans, _) = admitted.spans();
    let command = only(&spans, "campaign admit");
    assert!(command.parent_span_id.is_empty(), "the command is the root");
    let admit = only(&spans, "admit");
    assert_eq!(
        admit.parent_span_id, command.span_id,
        "admit under the command"
    );
    assert_eq!(admit.trace_id, command.trace_id);
    assert_eq!(str_attr(&admit.attributes, "phase"), Some("admit"));
    let mut decisions: Vec<&Span> = spans.iter().filter(|s| s.name == "decide").collect();
    decisions.sort_by_key(|s| s.start_time_unix_nano);
    // The verification's stateless scope decision (in the revision bracket) and the decision
    // inside the admission transaction, on the pool it read: no contention, one try.
    assert_eq!(decisions.len(), 2, "{decisions:?}");
    let mut fuel_total = 0;
    for d in &decisions {
        assert_eq!(d.parent_span_id, admit.span_id, "a decision inside admit");
        assert_eq!(d.trace_id, command.trace_id);
        assert_eq!(str_attr(&d.attributes, "policy.kind"), Some("scope"));
        assert_eq!(str_attr(&d.attributes, "policy.function"), Some("decide"));
        assert_eq!(str_attr(&d.attributes, "policy.outcome"), Some("admit"));
        assert_eq!(
            str_attr(&d.attributes, "policy.component_sha256"),
            Some(scope_pin.as_str())
        );
        assert!(d.start_time_unix_nano >= admit.start_time_unix_nano);
        assert!(d.end_time_unix_nano <= admit.end_time_unix_nano);
        fuel_total += int_attr(&d.attributes, "policy.fuel_used").expect("fuel");
    }
    // The last decision is the one committed with the reservation: its fuel is the evidence's.
    assert_eq!(
        int_attr(&decisions[1].attributes, "policy.fuel_used"),
        committed["fuel_used"].as_i64(),
        "{committed}"
    );
    let metrics = admitted.metrics();
    assert_eq!(
        sum(
            &metrics,
            "dpone.decisions",
            &[
                ("policy.kind", "scope"),
                ("policy.function", "decide"),
                ("policy.outcome", "admit")
            ]
        ),
        2
    );
    let (count, fuel) = histogram(&metrics, "dpone.decision.fuel", &[("policy.kind", "scope")]);
    assert_eq!((count, fuel), (2, fuel_total as f64));
    let (count, seconds) = histogram(&metrics, "dpone.phase.duration", &[("phase", "admit")]);
    assert_eq!(count, 1);
    assert!(seconds > 0.0);
    assert!(!metrics.contains_key("dpone.failures"));

    // A refused admission: the scope component denies inside the transaction; the refusal is
    // counted by its code.
    let denied = Receiver::start();
    let otel = otel_env(&denied);
    let out = run
        .command(&run.admit_args(&docs, true, &grant, "export-orders-mart", "b1", 50_001, 10))
        .envs(otel.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("dpone-host runs");
    let code = refused(&out, &store, 1);
    assert_eq!(code, "DPONE_SCOPE_RESERVATION_EXCEEDS_LIMIT");
    let (spans, _) = denied.spans();
    let command = only(&spans, "campaign admit");
    assert_eq!(
        str_attr(&command.attributes, "error.code"),
        Some(code.as_str())
    );
    let admit = only(&spans, "admit");
    assert_eq!(admit.parent_span_id, command.span_id);
    let mut decisions: Vec<&Span> = spans.iter().filter(|s| s.name == "decide").collect();
    decisions.sort_by_key(|s| s.start_time_unix_nano);
    let last = decisions.last().expect("a decision");
    assert_eq!(last.parent_span_id, admit.span_id);
    assert_eq!(str_attr(&last.attributes, "policy.outcome"), Some("deny"));
    assert!(int_attr(&last.attributes, "policy.fuel_used").is_some_and(|f| f > 0));
    let metrics = denied.metrics();
    assert_eq!(
        sum(
            &metrics,
            "dpone.decisions",
            &[("policy.kind", "scope"), ("policy.outcome", "deny")]
        ),
        1
    );
    assert_eq!(
        sum(&metrics, "dpone.failures", &[("error.code", code.as_str())]),
        1
    );

    // `run --np-reservation`: the run's phases, then `settle` under the command.
    let rid = id(&a["reservation"]["reservation_id"]);
    let ran = Receiver::start();
    let otel = otel_env(&ran);
    let out = host(
        &otel
            .iter()
            .map(|(k, v)| (*k, v.as_str()))
            .collect::<Vec<_>>(),
    )
    .envs(&f.env)
    .env("DPONE_NP_STORE_URL", &store.url)
    .arg("run")
    .arg("--manifest")
    .arg(&manifest)
    .arg("--connections")
    .arg(&registry)
    .arg("--artifact-dir")
    .arg(dir.path().join("artifacts"))
    .args(["--invocation", "otlp-np-1", "--np-reservation", &rid])
    .arg("--np-composition")
    .arg(&composition)
    .args(store.args())
    .output()
    .expect("dpone-host runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        v["np_reservation"]["settlement"]["result"], "recorded",
        "{v}"
    );
    let (spans, _) = ran.spans();
    let command = only(&spans, "run");
    let settle = only(&spans, "settle");
    assert_eq!(
        settle.parent_span_id, command.span_id,
        "settle under the run"
    );
    assert_eq!(str_attr(&settle.attributes, "phase"), Some("settle"));
    assert!(
        only(&spans, "commit").end_time_unix_nano <= settle.start_time_unix_nano,
        "settled after the commit"
    );
    let metrics = ran.metrics();
    assert_eq!(sum(&metrics, "dpone.rows.read", &[("route", "xmin")]), 120);
    assert_eq!(
        histogram(&metrics, "dpone.phase.duration", &[("phase", "settle")]).0,
        1
    );

    // `campaign settle` of a second attempt: its own `settle` span.
    let b = ok(&run.admit(&docs, true, &grant, WORKLOAD, "a2", 10, 10));
    let rid2 = id(&b["reservation"]["reservation_id"]);
    let settled = Receiver::start();
    let otel = otel_env(&settled);
    let out = run
        .command(&[
            "settle".to_owned(),
            "--reservation".to_owned(),
            rid2,
            "--source-rows".to_owned(),
            "5".to_owned(),
            "--source-bytes".to_owned(),
            "5".to_owned(),
            "--http-bytes".to_owned(),
            "0".to_owned(),
            "--outcome".to_owned(),
            "succeeded".to_owned(),
        ])
        .envs(otel.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("dpone-host runs");
    assert_eq!(ok(&out)["result"], "recorded");
    let (spans, _) = settled.spans();
    let command = only(&spans, "campaign settle");
    let settle = only(&spans, "settle");
    assert_eq!(settle.parent_span_id, command.span_id);
    assert_eq!(
        histogram(
            &settled.metrics(),
            "dpone.phase.duration",
            &[("phase", "settle")]
        )
        .0,
        1
    );

    // Identifiers and codes only: no connection string, endpoint, path, credential or row
    // value in anything the four commands exported.
    let raw = received(&[&admitted, &denied, &ran, &settled]);
    assert!(!raw.is_empty());
    assert!(!raw.contains("secret-row-"), "a row value was exported");
    assert!(!raw.contains(&store.url), "the store's URL was exported");
    assert!(
        !raw.contains(&store.schema),
        "the store's schema was exported"
    );
    for (key, value) in &f.env {
        assert!(
            !raw.contains(value.as_str()),
            "the value of {key} was exported"
        );
    }
    for path in [
        dir.path().to_path_buf(),
        run.dir.path().to_path_buf(),
        root().canonicalize().expect("root"),
    ] {
        assert!(
            !raw.contains(path.to_string_lossy().as_ref()),
            "a local path was exported"
        );
    }
    for endpoint in [
        admitted.endpoint.as_str(),
        "127.0.0.1",
        "localhost",
        "postgres://",
        "postgresql://",
        "host=",
        "password",
    ] {
        assert!(
            !raw.contains(endpoint),
            "an endpoint or credential ({endpoint}) was exported"
        );
    }
    store.drop_schema().await;
}
