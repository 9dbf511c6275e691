//! Benchmarks of the XMin route on a real PostgreSQL server (a bench binary, not a timed test).
//!
//! ```text
//! cargo bench -p dpone-adapter-postgres --bench xmin_bench -- [--rows N] [--skip-apply]
//! ```
//!
//! 1. **Extraction**: the engine's source boundary (authority checks, lock, binary COPY streamed
//!    to a content-addressed artifact with sha256 and framing checks) vs a raw
//!    `COPY (SELECT …) TO STDOUT (FORMAT binary)` on a fresh connection whose bytes are only
//!    counted. Same rows, best of three alternating rounds.
//! 2. **Apply**: a full run on an N-row target after 1 % updates, 0.5 % deletes and 0.5 %
//!    inserts, vs a hand-written single-transaction SQL baseline on an identical copy of the
//!    target (COPY the delta and the keys into temp tables, UPDATE changed, INSERT new,
//!    soft-delete missing by anti-join, COMMIT). A second copy runs the same SQL with hash and
//!    merge joins off for the delta's UPDATE and INSERT (`hand_written_probing_secs`), the join
//!    plans the engine uses for a small delta: a reference for the engine's own overhead.
//! 3. **Peak RSS** of this process (`VmHWM`), which holds the whole host side of both.
//!
//! Each incremental engine run also reports where its time went: the engine's phase spans
//! (`dpone::phase`) and the steps inside them (`dpone::xmin::step`), in seconds.
//!
//! Prints one JSON object. Without a usable server it fails with the reason (it measures nothing).
#![allow(clippy::print_stdout, missing_docs)]

#[path = "../tests/support/mod.rs"]
mod support;

use dpone_adapter_postgres::source::PgSource;
use dpone_engine_xmin::ports::{ExtractRequest, SourcePort};
use dpone_policy_model::guard::LoadKind;
use futures_util::StreamExt;
use std::time::Instant;
use support::{Fixture, Options};

/// Collects the wall time of every engine phase and step span, by name.
mod spans {
    use std::sync::Mutex;
    use std::time::Instant;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id};
    use tracing_subscriber::layer::{Context, Layer};
    use tracing_subscriber::registry::LookupSpan;

    static CLOSED: Mutex<Vec<(String, f64)>> = Mutex::new(Vec::new());

    struct Opened(Instant, String);

    struct Name(Option<String>);

    impl Visit for Name {
        fn record_str(&mut self, field: &Field, value: &str) {
            if field.name() == "phase" {
                self.0 = Some(value.to_owned());
            }
        }
        fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
    }

    pub struct Timer;

    impl<S> Layer<S> for Timer
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    {
        fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
            let mut name = Name(None);
            attrs.record(&mut name);
            if let (Some(name), Some(span)) = (name.0, ctx.span(id)) {
                span.extensions_mut().insert(Opened(Instant::now(), name));
            }
        }

        fn on_close(&self, id: Id, ctx: Context<'_, S>) {
            if let Some(span) = ctx.span(&id)
                && let Some(o) = span.extensions().get::<Opened>()
            {
                let took = o.0.elapsed().as_secs_f64();
                if let Ok(mut c) = CLOSED.lock() {
                    c.push((o.1.clone(), took));
                }
            }
        }
    }

    pub fn install() {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        let filter = tracing_subscriber::filter::Targets::new()
            .with_target("dpone::phase", tracing::Level::INFO)
            .with_target("dpone::xmin::step", tracing::Level::DEBUG);
        let _ = tracing_subscriber::registry()
            .with(Timer.with_filter(filter))
            .try_init();
    }

    /// The spans closed since the last call, summed by name, in order of first close.
    pub fn take() -> serde_json::Value {
        let closed = CLOSED.lock().map(|mut c| std::mem::take(&mut *c));
        let mut sums: Vec<(String, f64)> = Vec::new();
        for (name, secs) in closed.unwrap_or_default() {
            match sums.iter_mut().find(|(n, _)| *n == name) {
                Some((_, s)) => *s += secs,
                None => sums.push((name, secs)),
            }
        }
        let mut out = serde_json::Map::new();
        for (name, secs) in sums {
            out.insert(name, ((secs * 1e4).round() / 1e4).into());
        }
        serde_json::Value::Object(out)
    }
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

async fn raw_copy(f: &Fixture, sql: &str) -> (u64, f64) {
    let t = Instant::now();
    // A fresh connection, as the engine opens one per snapshot.
    let client = f.src.client().await;
    let stream = client.copy_out(sql).await.expect("copy out");
    let mut stream = std::pin::pin!(stream);
    let mut bytes = 0u64;
    while let Some(chunk) = stream.next().await {
        bytes += chunk.expect("chunk").len() as u64;
    }
    (bytes, t.elapsed().as_secs_f64())
}

async fn engine_extract(f: &Fixture) -> (u64, f64) {
    let id = &f.route.identity;
    let keys = f.route.manifest.unique_key.clone();
    let business = f.route.manifest.business_columns();
    let req = ExtractRequest {
        endpoint: &f.route.resolved.source,
        authority: &f.route.resolved.source_authority,
        identity: id,
        unique_key: &keys,
        business_columns: &business,
        scope: &f.route.manifest.scope,
        load: LoadKind::FullBaseline,
        previous: None,
        max_replay_amplification_xids: None,
    };
    let t = Instant::now();
    let env = PgSource::new()
        .extract(&req, &f.store)
        .await
        .expect("extract");
    let secs = t.elapsed().as_secs_f64();
    let _ = dpone_engine_xmin::artifact::ArtifactStore::remove(&f.store, &env.rows.artifact.sha256);
    (env.rows.artifact.bytes, secs)
}

const HAND_WRITTEN: &str = "
BEGIN ISOLATION LEVEL SERIALIZABLE;
CREATE TEMP TABLE d (id bigint NOT NULL, name text, qty integer, price numeric(10,2)) ON COMMIT DROP;
CREATE TEMP TABLE k (id bigint NOT NULL) ON COMMIT DROP;
";

/// The hand-written baseline on `table`; `probing` turns hash and merge joins off for its UPDATE
/// and INSERT of the delta, as the engine does for a small delta (a reference for the engine's
/// own overhead at the same join plans; the target ratio is against the plain baseline).
async fn hand_written_apply(f: &Fixture, previous_xmin: i64, table: &str, probing: bool) -> f64 {
    let t = Instant::now();
    // Same source work as the engine: one snapshot, delta and keys, piped straight into the
    // target's COPY (nothing on disk, nothing held whole in memory).
    let src = f.src.client().await;
    src.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .await
        .expect("begin");
    let tc = f.pg_target_db().client().await;
    tc.batch_execute(HAND_WRITTEN).await.expect("begin target");
    let delta_sql = format!(
        "COPY (SELECT id, name, qty, price FROM public.items WHERE xmin::text::bigint >= {}) TO STDOUT (FORMAT binary)",
        previous_xmin & 0xffff_ffff
    );
    pipe(&src, &delta_sql, &tc, "COPY d FROM STDIN (FORMAT binary)").await;
    pipe(
        &src,
        "COPY (SELECT id FROM public.items) TO STDOUT (FORMAT binary)",
        &tc,
        "COPY k FROM STDIN (FORMAT binary)",
    )
    .await;
    src.batch_execute("COMMIT").await.expect("commit source");
    let (probe, unprobe) = if probing {
        (
            "SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off;",
            "SET LOCAL enable_hashjoin TO DEFAULT; SET LOCAL enable_mergejoin TO DEFAULT;",
        )
    } else {
        ("", "")
    };
    tc.batch_execute(&format!(
        "CREATE UNIQUE INDEX ON k (id); ANALYZE d; ANALYZE k; {probe}
         UPDATE {table} t SET name = d.name, qty = d.qty, price = d.price, __dpone__updated_at = now()
           FROM d WHERE t.id = d.id AND (t.name, t.qty, t.price) IS DISTINCT FROM (d.name, d.qty, d.price);
         INSERT INTO {table} (id, name, qty, price, __dpone__updated_at)
           SELECT id, name, qty, price, now() FROM d WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE t.id = d.id);
         {unprobe}
         UPDATE {table} t SET __dpone__deleted_at = now(), __dpone__updated_at = now()
           WHERE t.__dpone__deleted_at IS NULL AND NOT EXISTS (SELECT 1 FROM k WHERE k.id = t.id);
         COMMIT;",
    ))
    .await
    .expect("hand-written apply");
    t.elapsed().as_secs_f64()
}

/// Streams a COPY OUT into a COPY IN in 1 MiB blocks, as any competent loader would.
async fn pipe(
    src: &tokio_postgres::Client,
    out_sql: &str,
    dst: &tokio_postgres::Client,
    in_sql: &str,
) {
    use futures_util::SinkExt;
    let stream = src.copy_out(out_sql).await.expect("copy out");
    let mut stream = std::pin::pin!(stream);
    let sink = dst
        .copy_in::<_, bytes::Bytes>(in_sql)
        .await
        .expect("copy in");
    let mut sink = std::pin::pin!(sink);
    let mut block = Vec::with_capacity(1 << 20);
    while let Some(chunk) = stream.next().await {
        block.extend_from_slice(&chunk.expect("chunk"));
        if block.len() >= 1 << 20 {
            let full = std::mem::replace(&mut block, Vec::with_capacity(1 << 20));
            sink.send(bytes::Bytes::from(full)).await.expect("send");
        }
    }
    sink.send(bytes::Bytes::from(block)).await.expect("send");
    sink.as_mut().finish().await.expect("finish");
}

async fn bench(rows: u64, skip_apply: bool) -> serde_json::Value {
    let Some(f) = Fixture::new("bench", Options::default()).await else {
        return serde_json::json!({"status": "skipped"});
    };
    let t = Instant::now();
    f.src_sql(&format!(
        "INSERT INTO public.items SELECT g, 'name-' || g, (g % 1000)::int, (g % 10000) / 100.0 FROM generate_series(1, {rows}) g"
    ))
    .await;
    f.src_sql("VACUUM ANALYZE public.items").await;
    let load_secs = t.elapsed().as_secs_f64();

    // Extraction: alternate raw and engine, three rounds, best of each.
    let raw_sql = "COPY (SELECT id, name, qty, price FROM public.items) TO STDOUT (FORMAT binary)";
    let (mut raw_best, mut eng_best, mut bytes) = (f64::MAX, f64::MAX, 0);
    for _ in 0..3 {
        let (b, s) = raw_copy(&f, raw_sql).await;
        raw_best = raw_best.min(s);
        let (b2, s2) = engine_extract(&f).await;
        assert_eq!(b, b2, "same bytes");
        bytes = b;
        eng_best = eng_best.min(s2);
    }
    let mut out = serde_json::json!({
        "rows": rows,
        "source_load_secs": load_secs,
        "extraction": {
            "bytes": bytes,
            "raw_copy_secs": raw_best,
            "engine_secs": eng_best,
            "raw_rows_per_sec": rows as f64 / raw_best,
            "engine_rows_per_sec": rows as f64 / eng_best,
            "throughput_ratio": raw_best / eng_best,
            "target_ratio_at_least": 0.9,
        },
    });
    if skip_apply {
        out["peak_rss_mib"] = peak_rss_mib().into();
        return out;
    }

    // Baseline load through the engine.
    let t = Instant::now();
    let base = f.run().await.expect("baseline run");
    let baseline_secs = t.elapsed().as_secs_f64();
    assert_eq!(base.receipt.metrics.inserted, rows);
    f.pg_target()
        .batch_execute(
            "CREATE TABLE dwh.items_b (LIKE dwh.items INCLUDING ALL); INSERT INTO dwh.items_b SELECT * FROM dwh.items;
             CREATE TABLE dwh.items_c (LIKE dwh.items INCLUDING ALL); INSERT INTO dwh.items_c SELECT * FROM dwh.items;",
        )
        .await
        .expect("clone target");
    for t in ["dwh.items", "dwh.items_b", "dwh.items_c"] {
        f.pg_target()
            .batch_execute(&format!("VACUUM ANALYZE {t}"))
            .await
            .expect("vacuum");
    }
    let mut previous_xmin = base.receipt.checkpoint.xmin as i64;

    // Two rounds of 1 % updates, 0.5 % deletes, 0.5 % inserts; the order of the engine and the
    // hand-written baseline alternates; the best time of each counts.
    let (mut hand_best, mut engine_best, mut probing_best) = (f64::MAX, f64::MAX, f64::MAX);
    let mut metrics = Vec::new();
    for round in 0..2u64 {
        let first_new = rows + 1 + round * rows / 200;
        f.src_sql(&format!(
            "UPDATE public.items SET qty = qty + 1 WHERE id % 100 = {u};
             DELETE FROM public.items WHERE id % 200 = {d};
             INSERT INTO public.items SELECT g, 'new-' || g, 1, 1.0 FROM generate_series({first_new}, {last}) g;",
            u = 1 + round * 2,
            d = 2 + round * 2,
            last = first_new + rows / 200 - 1,
        ))
        .await;
        let engine_run = async || {
            let _ = spans::take();
            let t = Instant::now();
            let run = f.run().await.expect("incremental run");
            (t.elapsed().as_secs_f64(), (run, spans::take()))
        };
        let (hand, probing, (engine, (run, phases))) = if round == 0 {
            let h = hand_written_apply(&f, previous_xmin, "dwh.items_b", false).await;
            let p = hand_written_apply(&f, previous_xmin, "dwh.items_c", true).await;
            (h, p, engine_run().await)
        } else {
            let e = engine_run().await;
            let p = hand_written_apply(&f, previous_xmin, "dwh.items_c", true).await;
            (
                hand_written_apply(&f, previous_xmin, "dwh.items_b", false).await,
                p,
                e,
            )
        };
        previous_xmin = run.receipt.checkpoint.xmin as i64;
        hand_best = hand_best.min(hand);
        probing_best = probing_best.min(probing);
        engine_best = engine_best.min(engine);
        metrics.push(serde_json::json!({"round": round, "engine_secs": engine, "hand_written_secs": hand, "hand_written_probing_secs": probing, "engine_phase_secs": phases, "metrics": run.receipt.metrics}));
    }
    out["apply"] = serde_json::json!({
        "baseline_run_secs": baseline_secs,
        "engine_run_secs": engine_best,
        "hand_written_secs": hand_best,
        "ratio": engine_best / hand_best,
        "hand_written_probing_secs": probing_best,
        "ratio_to_probing": engine_best / probing_best,
        "target_ratio_at_most": 1.1,
        "rounds": metrics,
    });
    out["peak_rss_mib"] = peak_rss_mib().into();
    out["peak_rss_target_mib_at_most"] = 256.into();
    out
}

fn main() {
    let rows: u64 = arg("--rows")
        .or_else(|| std::env::var("DPONE_BENCH_ROWS").ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let skip_apply = std::env::args().any(|a| a == "--skip-apply");
    spans::install();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let result = rt.block_on(bench(rows, skip_apply));
    println!(
        "{}",
        serde_json::to_string_pretty(&result).unwrap_or_default()
    );
}
