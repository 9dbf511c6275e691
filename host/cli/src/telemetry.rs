//! OpenTelemetry: traces and metrics of every command, exported over OTLP/HTTP (protobuf) when
//! the standard OTel environment names an endpoint, nothing otherwise.
//!
//! Enabled iff one of `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` is set and non-empty and `OTEL_SDK_DISABLED` is not
//! `true`; `OTEL_TRACES_EXPORTER=none` / `OTEL_METRICS_EXPORTER=none` turn one signal off. The
//! exporters (`opentelemetry-otlp`) read the rest of the standard variables themselves
//! (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, headers, timeouts). Both providers are shut
//! down, which flushes them, before the process exits ([`Telemetry::shutdown`]).
//!
//! Spans come from `tracing`: the command span (target `dpone::command`), the engines' phase
//! spans (`dpone::phase`) and one span per policy decision (`dpone::decide`); only targets
//! under `dpone::` are exported, without source locations. Attributes are identifiers and
//! codes only (kinds, functions, outcomes, digests, phases, error codes, counts), never row
//! values, endpoints, credentials or paths.
//!
//! Transport: the exporter's requests go through [`OtlpHttp`], a blocking HTTP/1.1 POST over a
//! plain `http://` connection or over rustls for `https://` (no reqwest or tonic), one client
//! per signal ([`transport`]). An `https://` endpoint is verified against the system's roots, or
//! against exactly the CA file that `OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE` /
//! `OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE` (else `OTEL_EXPORTER_OTLP_CERTIFICATE`) names.
//! Headers are never sent in clear to a non-loopback host. A signal whose transport cannot be
//! set up is not exported, with one warning line on stderr naming the code
//! ([`http::TransportError`]), never the endpoint, a header or a path.

use dpone_policy_runtime::{Decided, PolicyError, PolicyKind};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, MeterProvider as _};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::sync::OnceLock;
use std::time::Instant;
use tracing::Subscriber;
use tracing::field::Empty;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::FilterExt as _;
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;

mod http;
pub use http::OtlpHttp;

/// The metric instruments; set only when metrics are exported.
struct Instruments {
    decisions: Counter<u64>,
    decision_fuel: Histogram<u64>,
    phase_duration: Histogram<f64>,
    rows_read: Counter<u64>,
    bytes_read: Counter<u64>,
    rows_applied: Counter<u64>,
    failures: Counter<u64>,
    retries: Counter<u64>,
}

static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();

/// The configured providers; [`Telemetry::shutdown`] flushes them.
#[must_use]
pub struct Telemetry {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
}

fn var_set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty())
}

fn var_is(name: &str, value: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v.trim().eq_ignore_ascii_case(value))
}

/// Which signals the environment asks for: (traces, metrics).
fn configured() -> (bool, bool) {
    if var_is("OTEL_SDK_DISABLED", "true") {
        return (false, false);
    }
    let base = var_set("OTEL_EXPORTER_OTLP_ENDPOINT");
    let traces = (base || var_set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        && !var_is("OTEL_TRACES_EXPORTER", "none");
    let metrics = (base || var_set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"))
        && !var_is("OTEL_METRICS_EXPORTER", "none");
    (traces, metrics)
}

/// The variables of one signal's exporter.
struct Signal {
    endpoint: &'static str,
    headers: &'static str,
    certificate: &'static str,
}

const TRACES: Signal = Signal {
    endpoint: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    headers: "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    certificate: "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
};

const METRICS: Signal = Signal {
    endpoint: "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    headers: "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
    certificate: "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE",
};

/// A variable's value when it is set and not empty.
fn var_value(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The transport of one signal, from the variables the exporter reads the same way: the
/// signal's endpoint, else the base endpoint (only its scheme and host matter here), else the
/// SDK's default; the signal's headers variable when set (even empty), else the base one; the
/// signal's certificate, else the base one.
fn transport(signal: &Signal) -> Result<OtlpHttp, http::TransportError> {
    let endpoint = var_value(signal.endpoint)
        .or_else(|| var_value("OTEL_EXPORTER_OTLP_ENDPOINT"))
        .unwrap_or_else(|| "http://localhost:4318".to_owned());
    let headers = std::env::var(signal.headers)
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_HEADERS"))
        .is_ok_and(|h| !h.trim().is_empty());
    let certificate =
        var_value(signal.certificate).or_else(|| var_value("OTEL_EXPORTER_OTLP_CERTIFICATE"));
    OtlpHttp::for_signal(&endpoint, headers, certificate.as_deref())
}

fn resource() -> Resource {
    let builder = Resource::builder();
    if var_set("OTEL_SERVICE_NAME") {
        builder.build()
    } else {
        builder.with_service_name("dpone-host").build()
    }
}

/// Installs the stderr log subscriber (`DPONE_LOG`, default `warn`) and, when the OTel
/// environment asks for them, the trace and metric exporters.
pub fn init() -> Telemetry {
    let (traces, metrics) = configured();
    let mut warnings = Vec::new();
    let tracer = if traces {
        match transport(&TRACES).map(|client| {
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_http_client(client)
                .build()
        }) {
            Ok(Ok(exporter)) => Some(
                SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_resource(resource())
                    .build(),
            ),
            Ok(Err(e)) => {
                warnings.push(format!("traces not exported: {}", kind_of(&e.to_string())));
                None
            }
            Err(e) => {
                warnings.push(format!("traces not exported: {e}"));
                None
            }
        }
    } else {
        None
    };
    let meter = if metrics {
        match transport(&METRICS).map(|client| {
            opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_http_client(client)
                .build()
        }) {
            Ok(Ok(exporter)) => Some(
                SdkMeterProvider::builder()
                    .with_periodic_exporter(exporter)
                    .with_resource(resource())
                    .build(),
            ),
            Ok(Err(e)) => {
                warnings.push(format!("metrics not exported: {}", kind_of(&e.to_string())));
                None
            }
            Err(e) => {
                warnings.push(format!("metrics not exported: {e}"));
                None
            }
        }
    } else {
        None
    };
    if let Some(provider) = &meter {
        let m = provider.meter("dpone-host");
        let _ = INSTRUMENTS.set(Instruments {
            decisions: m
                .u64_counter("dpone.decisions")
                .with_description("policy decisions by kind, function and outcome")
                .build(),
            decision_fuel: m
                .u64_histogram("dpone.decision.fuel")
                .with_description("fuel a policy decision used")
                .build(),
            phase_duration: m
                .f64_histogram("dpone.phase.duration")
                .with_unit("s")
                .with_description("duration of a protocol phase")
                .build(),
            rows_read: m
                .u64_counter("dpone.rows.read")
                .with_description("rows the source read")
                .build(),
            bytes_read: m
                .u64_counter("dpone.bytes.read")
                .with_unit("By")
                .with_description("payload bytes the source read")
                .build(),
            rows_applied: m
                .u64_counter("dpone.rows.applied")
                .with_description("rows applied to the target: written by the transaction (xmin), published (clickhouse, once per publication)")
                .build(),
            failures: m
                .u64_counter("dpone.failures")
                .with_description("commands that ended with a stable error code, by code and exit")
                .build(),
            retries: m
                .u64_counter("dpone.retries")
                .with_description("commands that ended not finished, to be retried (exit 75)")
                .build(),
        });
    }

    // One filter, the conjunction of both: its level hint is the lower of the two, so the
    // `log` records of dependencies below it (cranelift's and the drivers' debug and trace
    // logging) are disabled at their source rather than built and then dropped.
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(log_filter(
            tracing_subscriber::EnvFilter::try_from_env("DPONE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        ));
    // Static target filters (not a filter function): callsites outside `dpone::` are never
    // interesting, and the level hint keeps the `log` records of dependencies (cranelift's
    // trace logging) disabled at their source.
    let exported =
        || tracing_subscriber::filter::Targets::new().with_target("dpone::", tracing::Level::INFO);
    let otel = tracer.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("dpone-host"))
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_filter(exported())
    });
    let phases = meter.as_ref().map(|_| {
        PhaseDurations.with_filter(
            tracing_subscriber::filter::Targets::new()
                .with_target("dpone::phase", tracing::Level::INFO),
        )
    });
    tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .with(phases)
        .init();
    for w in warnings {
        tracing::warn!("{w}");
    }
    Telemetry { tracer, meter }
}

/// What reaches the log: what `DPONE_LOG` asks for, under [`drivers_capped`].
fn log_filter<S>(
    asked: tracing_subscriber::EnvFilter,
) -> impl tracing_subscriber::layer::Filter<S> + Send + Sync + 'static
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    asked.and(drivers_capped())
}

/// The ceiling under `DPONE_LOG`, whatever it asks for: the host's own targets (`dpone::…` and
/// the `dpone_*` crates) at any level, every other target — the database drivers, TLS, HTTP and
/// the compiler, whose `log` records reach `tracing` — at `warn` at most. tokio-postgres logs
/// every statement with its parameters at debug (grant bytes, authority documents, values
/// spliced into COPY), tiberius and the HTTP clients their requests: none of it is a log line.
fn drivers_capped() -> tracing_subscriber::filter::Targets {
    tracing_subscriber::filter::Targets::new()
        .with_target("dpone", tracing::Level::TRACE)
        .with_default(tracing::Level::WARN)
}

/// The first word of an exporter error (its kind), never the endpoint it may quote.
fn kind_of(message: &str) -> String {
    message
        .split([':', ' '])
        .next()
        .unwrap_or("error")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(40)
        .collect()
}

impl Telemetry {
    /// Flushes and shuts both providers down (bounded by the exporters' timeouts).
    pub fn shutdown(self) {
        if let Some(t) = self.tracer {
            let _ = t.shutdown();
        }
        if let Some(m) = self.meter {
            let _ = m.shutdown();
        }
    }
}

/// The span of one command, the root of its trace.
pub fn command_span(name: &'static str) -> tracing::Span {
    tracing::info_span!(target: "dpone::command", "command", otel.name = name, command = name, error.code = Empty)
}

/// A decision's outcome as a short identifier read from its output: the `decision`, `verdict`
/// or `outcome` field, the single key of a tagged value, or the string itself.
fn outcome(output: &serde_json::Value) -> String {
    let word = match output {
        serde_json::Value::String(s) => Some(s.as_str()),
        serde_json::Value::Object(map) => ["decision", "verdict", "outcome", "mode"]
            .iter()
            .find_map(|k| map.get(*k).and_then(|v| v.as_str()))
            .or_else(|| (map.len() == 1).then(|| map.keys().next().map(String::as_str))?),
        _ => None,
    };
    let clean: String = word
        .unwrap_or("decided")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        .take(32)
        .collect();
    if clean.is_empty() {
        "decided".to_owned()
    } else {
        clean.to_ascii_lowercase()
    }
}

/// Runs one policy decision inside its span (`decide`: kind, function, outcome, fuel used,
/// component digest; the error code on failure) and counts it.
pub fn decide<T>(
    kind: PolicyKind,
    function: &str,
    f: impl FnOnce() -> Result<Decided<T>, PolicyError>,
) -> Result<Decided<T>, PolicyError> {
    let span = tracing::info_span!(
        target: "dpone::decide",
        "decide",
        otel.name = "decide",
        policy.kind = kind.as_str(),
        policy.function = function,
        policy.outcome = Empty,
        policy.fuel_used = Empty,
        policy.component_sha256 = Empty,
        error.code = Empty,
    );
    let result = span.in_scope(f);
    let instruments = INSTRUMENTS.get();
    if span.is_disabled() && instruments.is_none() {
        return result;
    }
    let (outcome, fuel) = match &result {
        Ok(d) => {
            let outcome = outcome(&d.evidence.output);
            span.record("policy.outcome", outcome.as_str());
            // As an OTel integer (the tracing bridge would export a u64 as text).
            span.record(
                "policy.fuel_used",
                i64::try_from(d.evidence.fuel_used).unwrap_or(i64::MAX),
            );
            span.record(
                "policy.component_sha256",
                d.evidence.component_sha256.to_string().as_str(),
            );
            (outcome, Some(d.evidence.fuel_used))
        }
        Err(e) => {
            span.record("policy.outcome", "failed");
            span.record("error.code", e.code());
            ("failed".to_owned(), None)
        }
    };
    if let Some(i) = instruments {
        let attrs = [
            KeyValue::new("policy.kind", kind.as_str()),
            KeyValue::new("policy.function", function.to_owned()),
            KeyValue::new("policy.outcome", outcome),
        ];
        i.decisions.add(1, &attrs);
        if let Some(fuel) = fuel {
            i.decision_fuel.record(fuel, &attrs);
        }
    }
    result
}

/// Counts what a run read and applied (`route`: the route's kind, an identifier).
/// `rows_applied`: XMin, the rows the target transaction wrote; ClickHouse, the published
/// artifact's rows, once per publication (by the run that completed it).
pub fn record_io(route: &'static str, rows_read: u64, bytes_read: u64, rows_applied: Option<u64>) {
    if let Some(i) = INSTRUMENTS.get() {
        let attrs = [KeyValue::new("route", route)];
        i.rows_read.add(rows_read, &attrs);
        i.bytes_read.add(bytes_read, &attrs);
        if let Some(n) = rows_applied {
            i.rows_applied.add(n, &attrs);
        }
    }
}

/// Counts a command's failure by its stable code and exit status (exit 75: also a retry), and
/// records the code on the command span.
pub fn record_failure(span: &tracing::Span, code: &str, exit: u8) {
    span.record("error.code", code);
    if let Some(i) = INSTRUMENTS.get() {
        i.failures.add(
            1,
            &[
                KeyValue::new("error.code", code.to_owned()),
                KeyValue::new("exit", i64::from(exit)),
            ],
        );
        if exit == crate::exit::RETRY {
            i.retries
                .add(1, &[KeyValue::new("error.code", code.to_owned())]);
        }
    }
}

/// Records the duration of every `dpone::phase` span into `dpone.phase.duration`.
struct PhaseDurations;

struct Started(Instant, String);

/// Reads the `phase` field of a phase span.
struct PhaseField(String);

impl tracing::field::Visit for PhaseField {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "phase" {
            value.clone_into(&mut self.0);
        }
    }

    fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for PhaseDurations {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: Context<'_, S>,
    ) {
        let mut phase = PhaseField(String::new());
        attrs.record(&mut phase);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut()
                .insert(Started(Instant::now(), phase.0));
        }
    }

    fn on_close(&self, id: tracing::span::Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let extensions = span.extensions();
        let Some(Started(at, phase)) = extensions.get::<Started>() else {
            return;
        };
        if let Some(i) = INSTRUMENTS.get() {
            i.phase_duration.record(
                at.elapsed().as_secs_f64(),
                &[KeyValue::new("phase", phase.clone())],
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::level_filters::LevelFilter;
    use tracing_subscriber::layer::Filter;

    fn hint(asked: &str) -> Option<LevelFilter> {
        let filter =
            log_filter::<tracing_subscriber::Registry>(tracing_subscriber::EnvFilter::new(asked));
        Filter::<tracing_subscriber::Registry>::max_level_hint(&filter)
    }

    /// The level hint is what keeps dependencies' `log` records (cranelift traces every
    /// function it compiles) from being built at all: by default it is `warn`, whatever the
    /// host's own ceiling allows, and a wider `DPONE_LOG` raises it only as far as it asks.
    #[test]
    fn the_log_filter_hints_no_more_than_dpone_log_asks() {
        assert_eq!(hint("warn"), Some(LevelFilter::WARN));
        assert_eq!(hint("dpone=debug"), Some(LevelFilter::DEBUG));
        assert_eq!(hint("trace"), Some(LevelFilter::TRACE));
    }
}
