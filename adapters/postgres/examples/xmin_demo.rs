//! Runs the XMin route end to end on the local PostgreSQL server with generated sample data and
//! prints the evidence of each run as JSON: baseline, change, delete, strict no-op.
//!
//! ```text
//! .ci/start-postgres && cargo run -p dpone-adapter-postgres --example xmin_demo
//! ```
//!
//! Decisions come from the guard and delete-mode cores natively through the policy port (the
//! CLI fills the same port with the pinned WebAssembly components). Both databases are created
//! for the demo and dropped afterwards.
#![allow(clippy::print_stdout, missing_docs)]

#[path = "../tests/support/mod.rs"]
mod support;

use support::{Fixture, Options};

async fn demo() -> serde_json::Value {
    let Some(f) = Fixture::new("demo", Options::default()).await else {
        return serde_json::json!({"status": "skipped"});
    };
    let mut runs = Vec::new();
    let mut step = async |name: &str, sql: &str| {
        if !sql.is_empty() {
            f.src_sql(sql).await;
        }
        let evidence = match f.run().await {
            Ok(out) => serde_json::to_value(&out).unwrap_or_default(),
            Err(e) => serde_json::to_value(&e).unwrap_or_default(),
        };
        runs.push(serde_json::json!({"step": name, "evidence": evidence}));
    };
    step(
        "baseline",
        "INSERT INTO public.items SELECT g, 'item-' || g, g % 7, g * 1.25 FROM generate_series(1, 1000) g",
    )
    .await;
    step(
        "change",
        "UPDATE public.items SET qty = qty + 1 WHERE id % 50 = 0",
    )
    .await;
    step("delete", "DELETE FROM public.items WHERE id % 100 = 1").await;
    step("no-op", "").await;
    serde_json::json!({
        "route": f.route.check_report(),
        "runs": runs,
        "parity": f.active_keys().await == f.source_keys().await,
    })
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let out = rt.block_on(demo());
    println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
}
