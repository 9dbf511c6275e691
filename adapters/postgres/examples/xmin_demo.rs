//! Runs the XMin route end to end on the local PostgreSQL server with generated sample data and
//! prints the evidence of each run as JSON: baseline, change, delete, strict no-op.
//!
//! ```text
//! .ci/start-postgres && cargo run -p dpone-adapter-postgres --example xmin_demo
//! ```
//!
//! With `DPONE_HOST_BIN` (set by `cargo xtask demo`) every run is `dpone-host run` on the
//! demo's manifest and registry, so the guard and delete-mode decisions come from the pinned
//! WebAssembly components, as in production. Without it the engine is driven in process with
//! the policies' native cores, and the output says so. Both databases are created for the demo
//! and dropped afterwards.
#![allow(clippy::print_stdout, missing_docs)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use support::{Fixture, Options};

/// One run through the `dpone-host` binary: its JSON report, or its error.
fn run_with_host(bin: &Path, f: &Fixture, dir: &Path) -> serde_json::Value {
    let manifest = dir.join("manifest.yaml");
    let registry = dir.join("registry.yaml");
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&manifest, &f.manifest_yaml))
        .and_then(|()| std::fs::write(&registry, &f.registry_yaml));
    if let Err(e) = written {
        return serde_json::json!({"error": format!("cannot write the demo files: {:?}", e.kind())});
    }
    let out = std::process::Command::new(bin)
        .arg("run")
        .arg("--manifest")
        .arg(&manifest)
        .arg("--connections")
        .arg(&registry)
        .arg("--artifact-dir")
        .arg(dir.join("artifacts"))
        .envs(&f.env)
        .output();
    match out {
        // A refused run prints its evidence on stdout and the error on stderr.
        Ok(o) => serde_json::from_slice(&o.stdout)
            .or_else(|_| serde_json::from_slice(&o.stderr))
            .unwrap_or_else(|_| {
                serde_json::json!({"error": "dpone-host printed no JSON", "exit": o.status.code()})
            }),
        Err(e) => serde_json::json!({"error": format!("cannot start dpone-host: {:?}", e.kind())}),
    }
}

async fn demo() -> serde_json::Value {
    let Some(f) = Fixture::new("demo", Options::default()).await else {
        return serde_json::json!({"status": "skipped"});
    };
    let host = std::env::var_os("DPONE_HOST_BIN").map(PathBuf::from);
    let dir = f.artifacts_dir.path().join("demo");
    let mut runs = Vec::new();
    let mut step = async |name: &str, sql: &str| {
        if !sql.is_empty() {
            f.src_sql(sql).await;
        }
        let evidence = match &host {
            Some(bin) => tokio::task::block_in_place(|| run_with_host(bin, &f, &dir)),
            None => match f.run().await {
                Ok(out) => serde_json::to_value(&out).unwrap_or_default(),
                Err(e) => serde_json::to_value(&e).unwrap_or_default(),
            },
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
    let decisions = if host.is_some() {
        "pinned WebAssembly components, through dpone-host run"
    } else {
        "native policy cores, in process (set DPONE_HOST_BIN for the components)"
    };
    serde_json::json!({
        "decisions": decisions,
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
