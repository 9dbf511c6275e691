//! `dpone-host policy …`: the policy author's tools.

use crate::exit::{Failure, print_report};
use crate::input::InputKind;
use crate::scaffold;
use crate::shipped;
use clap::{Args, Subcommand};
use dpone_decision_table::DecisionTable;
use dpone_policy_build::{BuildEnv, BuildSpec, ComponentLock};
use dpone_policy_runtime::{
    Budget, PolicyKind, PolicyRuntime, SUPPORTED_WIT_PACKAGE, Sha256Digest, component_surface,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

mod report;

/// Policy subcommands.
#[derive(Subcommand)]
pub enum PolicyCommand {
    /// Scaffold a standalone policy crate of KIND in DIR (its own workspace, the `policy`
    /// profile, the model crate, the WIT, the shipped policy of the kind as a starting point,
    /// its decision tables and a README).
    New(NewArgs),
    /// Build a policy crate into a pure component (wasm32-unknown-unknown + component encoding).
    Build(BuildArgs),
    /// Pin components: write (or check) a lock file of their sha256 digests.
    Lock(LockArgs),
    /// Show a component's digest, size, imports, exports and which policy kinds it serves.
    Inspect(InspectArgs),
    /// Evaluate one decision and print it with its evidence.
    Eval(EvalArgs),
    /// Run a decision table against a component of the table's kind.
    Test(TestArgs),
    /// Measure load and decision times of a component.
    Bench(BenchArgs),
}

/// `policy new`.
#[derive(Args)]
pub struct NewArgs {
    /// Policy kind: admission, guard, delete-mode or scope.
    kind: PolicyKind,
    /// Cargo package name of the new crate.
    #[arg(long)]
    name: String,
    /// Directory to create (absent or empty).
    dir: PathBuf,
    /// The `dpone-policy-model` crate directory to depend on; defaults to the model crate of the
    /// checkout this binary was built from.
    #[arg(long, conflicts_with = "model_git")]
    model_path: Option<PathBuf>,
    /// Depend on `dpone-policy-model` from this git repository instead of a path.
    #[arg(long)]
    model_git: Option<String>,
    /// Revision of `--model-git` (commit, tag or branch).
    #[arg(long, requires = "model_git")]
    model_rev: Option<String>,
}

/// `policy build`.
#[derive(Args)]
pub struct BuildArgs {
    /// Cargo package of the policy crate; defaults to the only package of `--dir`.
    #[arg(long)]
    package: Option<String>,
    /// Directory of the crate or its workspace.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Where to write the component; defaults to `target/policy.wasm` under `--dir`.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Cargo's target directory; defaults to `target/dpone-policy` under `--dir` (from the
    /// environment: `CARGO_TARGET_DIR`).
    #[arg(long, env = "CARGO_TARGET_DIR")]
    target_dir: Option<PathBuf>,
}

/// `policy inspect`.
#[derive(Args)]
pub struct InspectArgs {
    /// The component file; with `--dir`, defaults to the crate's built component.
    component: Option<PathBuf>,
    /// A standalone policy crate (`policy new`) whose `target/policy.wasm` to inspect.
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// `policy lock`.
#[derive(Args)]
pub struct LockArgs {
    /// Component files; each is pinned under its file stem (e.g. `guard.wasm` → `guard`).
    #[arg(required = true)]
    components: Vec<PathBuf>,
    /// The lock file.
    #[arg(long)]
    lock: PathBuf,
    /// Verify the lock instead of writing it; exit 1 when a digest differs.
    #[arg(long)]
    check: bool,
}

/// `policy eval`.
#[derive(Args)]
pub struct EvalArgs {
    /// Policy kind: admission, guard, delete-mode or scope.
    kind: PolicyKind,
    /// JSON file with the facts record.
    #[arg(long)]
    input: PathBuf,
    /// Function to call (needed for admission: admit-static or admit-runtime).
    #[arg(long)]
    function: Option<String>,
    /// Component file; defaults to the shipped component of the kind at its embedded pin.
    #[arg(long, requires = "pin")]
    component: Option<PathBuf>,
    /// Pin of `--component` (sha256:<hex>).
    #[arg(long)]
    pin: Option<Sha256Digest>,
    /// Directory of the shipped components, overriding the copies embedded in the binary
    /// (still checked against the embedded pins).
    #[arg(long)]
    components_dir: Option<PathBuf>,
}

/// `policy test`.
#[derive(Args)]
pub struct TestArgs {
    /// The component under test; with `--dir`, defaults to the directory's built component
    /// (`target/policy.wasm`, what `policy build --dir` writes).
    component: Option<PathBuf>,
    /// Decision tables (JSON); with `--dir`, default to the directory's `tables/*.json`.
    tables: Vec<PathBuf>,
    /// A standalone policy crate (`policy new`): its component and tables are the defaults.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Also run the host's conformance tables for every kind the component serves (the
    /// tables the activation gate runs on every bundle).
    #[arg(long)]
    conformance: bool,
    /// Required digest of the component; when absent, the digest of the bytes read is used and
    /// reported.
    #[arg(long)]
    pin: Option<Sha256Digest>,
    /// Also write the results as JUnit XML to this file: one test case per table row (and per
    /// conformance row), written whether or not rows fail.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
}

/// `policy bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// Policy kind.
    kind: PolicyKind,
    /// JSON facts for the measured decision; defaults to the embedded sample of the kind.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Function (admission: admit-static or admit-runtime).
    #[arg(long)]
    function: Option<String>,
    /// Directory of the shipped components, overriding the copies embedded in the binary
    /// (still checked against the embedded pins).
    #[arg(long)]
    components_dir: Option<PathBuf>,
    /// Decisions to measure.
    #[arg(long, default_value_t = 10_000)]
    iterations: u32,
}

/// Runs a policy subcommand.
pub fn run(command: PolicyCommand, source: &shipped::PolicySourceArgs) -> Result<(), Failure> {
    match command {
        PolicyCommand::New(args) => new(args),
        PolicyCommand::Build(args) => build(args),
        PolicyCommand::Lock(args) => lock(args),
        PolicyCommand::Inspect(args) => inspect(args),
        PolicyCommand::Eval(args) => eval(args, source),
        PolicyCommand::Test(args) => test(args),
        PolicyCommand::Bench(args) => bench(args),
    }
}

fn new(args: NewArgs) -> Result<(), Failure> {
    let model = match (args.model_path, args.model_git) {
        (Some(path), _) => scaffold::ModelSource::Path(path),
        (None, Some(url)) => scaffold::ModelSource::Git {
            url,
            rev: args.model_rev,
        },
        (None, None) => scaffold::ModelSource::Default,
    };
    let files = scaffold::scaffold(args.kind, &args.name, &args.dir, &model)?;
    print_report(&report::Scaffolded {
        created: args.name,
        kind: args.kind,
        wit_package: SUPPORTED_WIT_PACKAGE,
        files,
    })
}

/// The only package of the workspace at `dir`, as `cargo metadata --no-deps` reports it.
fn only_package(dir: &Path) -> Result<String, Failure> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = std::process::Command::new(cargo)
        .current_dir(dir)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .output()
        .map_err(|e| {
            Failure::bad_input(
                "DPONE_BUILD_COMMAND_FAILED",
                format!("cargo metadata could not run: {}", e.kind()),
            )
        })?;
    if !output.status.success() {
        return Err(Failure::bad_input(
            "DPONE_BUILD_COMMAND_FAILED",
            "cargo metadata failed in --dir: is it a cargo crate?",
        ));
    }
    #[derive(serde::Deserialize)]
    struct Package {
        name: String,
    }
    #[derive(serde::Deserialize)]
    struct Metadata {
        packages: Vec<Package>,
    }
    let metadata: Metadata = serde_json::from_slice(&output.stdout).map_err(|_| {
        Failure::bad_input(
            "DPONE_BUILD_COMMAND_FAILED",
            "cargo metadata printed no package list",
        )
    })?;
    match metadata.packages.as_slice() {
        [only] => Ok(only.name.clone()),
        _ => Err(Failure::bad_input(
            "DPONE_CLI_PACKAGE_REQUIRED",
            format!(
                "--dir holds {} packages; choose one with --package",
                metadata.packages.len()
            ),
        )),
    }
}

fn build(args: BuildArgs) -> Result<(), Failure> {
    let dir = open_dir(&args.dir)?;
    let package = match args.package {
        Some(package) => package,
        None => only_package(&dir)?,
    };
    let target_dir = args
        .target_dir
        .unwrap_or_else(|| dir.join("target").join("dpone-policy"));
    let mut env = BuildEnv::new(&dir, &target_dir);
    env.locked = false;
    let spec = BuildSpec {
        name: package.clone(),
        package,
        feature: None,
    };
    let built = dpone_policy_build::build_components(&env, &[spec])
        .map_err(|e| Failure::bad_input(e.code(), e.to_string()))?;
    let (name, bytes) = built
        .into_iter()
        .next()
        .ok_or_else(|| Failure::internal("DPONE_CLI_BUILD_EMPTY", "the build produced nothing"))?;
    let out = args.out.unwrap_or_else(|| dir.join(DIR_COMPONENT));
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| {
            Failure::bad_input(
                "DPONE_CLI_OUTPUT_UNWRITABLE",
                format!("cannot write --out: {}", e.kind()),
            )
        })?;
    }
    std::fs::write(&out, &bytes).map_err(|e| {
        Failure::bad_input(
            "DPONE_CLI_OUTPUT_UNWRITABLE",
            format!("cannot write --out: {}", e.kind()),
        )
    })?;
    print_report(&report::Built {
        built: name,
        sha256: Sha256Digest::of(&bytes),
        size: bytes.len(),
        surface: component_surface(&bytes)?,
    })
}

fn lock(args: LockArgs) -> Result<(), Failure> {
    let mut components = BTreeMap::new();
    for path in &args.components {
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| {
                Failure::bad_input(
                    "DPONE_CLI_COMPONENT_NAME",
                    "a component file needs a UTF-8 file stem",
                )
            })?
            .to_owned();
        components.insert(name, shipped::read_input(path, InputKind::Component)?);
    }
    let built = ComponentLock::pin(SUPPORTED_WIT_PACKAGE, &components);
    if args.check {
        let text = shipped::read_input(&args.lock, InputKind::Lock)?;
        let pinned = ComponentLock::from_json(&String::from_utf8_lossy(&text))
            .map_err(|e| Failure::bad_input(e.code(), e.to_string()))?;
        let differing: Vec<String> = built
            .components
            .iter()
            .filter(|(name, c)| pinned.components.get(*name) != Some(*c))
            .map(|(name, _)| name.clone())
            .collect();
        print_report(&report::LockChecked {
            checked: built.components.len(),
            differing: differing.clone(),
        })?;
        if !differing.is_empty() {
            return Err(Failure::refused(
                "DPONE_POLICY_LOCK_MISMATCH",
                "components differ from the lock",
            ));
        }
        return Ok(());
    }
    std::fs::write(&args.lock, built.to_json()).map_err(|e| {
        Failure::bad_input(
            "DPONE_CLI_OUTPUT_UNWRITABLE",
            format!("cannot write --lock: {}", e.kind()),
        )
    })?;
    print_report(&report::LockWritten(built))
}

fn inspect(args: InspectArgs) -> Result<(), Failure> {
    let path = match (args.component, args.dir) {
        (Some(path), _) => path,
        (None, Some(dir)) => open_dir(&dir)?.join(DIR_COMPONENT),
        (None, None) => {
            return Err(Failure::bad_input(
                "DPONE_CLI_ARGUMENT",
                "name the component, or a policy crate with --dir",
            ));
        }
    };
    let bytes = shipped::read_input(&path, InputKind::Component)?;
    let surface = component_surface(&bytes)?;
    let serves = PolicyKind::ALL
        .into_iter()
        .filter(|k| surface.exports.contains(&k.export_name()))
        .collect();
    print_report(&report::Inspection {
        sha256: Sha256Digest::of(&bytes),
        size: bytes.len(),
        imports: surface.imports,
        exports: surface.exports,
        serves,
        wit_package: SUPPORTED_WIT_PACKAGE,
    })
}

/// The function to call: explicit, or the kind's only function.
fn function_for(kind: PolicyKind, function: Option<String>) -> Result<String, Failure> {
    match (function, kind.functions()) {
        (Some(f), functions) if functions.contains(&f.as_str()) => Ok(f),
        (None, [only]) => Ok((*only).to_owned()),
        (Some(f), functions) => Err(Failure::bad_input(
            "DPONE_POLICY_UNKNOWN_FUNCTION",
            format!("{kind} exports {functions:?}, not {f:?}"),
        )),
        (None, functions) => Err(Failure::bad_input(
            "DPONE_CLI_FUNCTION_REQUIRED",
            format!("{kind} exports {functions:?}; choose one with --function"),
        )),
    }
}

fn read_json(path: &Path, what: &str) -> Result<serde_json::Value, Failure> {
    let bytes = shipped::read_input(path, InputKind::Facts)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        Failure::bad_input(
            "DPONE_CLI_INPUT_MALFORMED",
            format!("{what} is not JSON: {e}"),
        )
    })
}

fn eval(args: EvalArgs, source: &shipped::PolicySourceArgs) -> Result<(), Failure> {
    let function = function_for(args.kind, args.function)?;
    let input = read_json(&args.input, "input")?;
    let runtime = shipped::runtime(None)?;
    let source = shipped::PolicySource::resolve(&runtime, args.components_dir.as_deref(), source)?;
    let loaded = match (&args.component, args.pin) {
        (Some(_), Some(_)) if source.bundle_evidence().is_some() => {
            return Err(Failure::refused(
                "DPONE_TRUST_BUNDLE_REQUIRED",
                "a trust policy is configured: --component cannot bypass the signed bundle",
            ));
        }
        (Some(path), Some(pin)) => {
            let bytes = shipped::read_input(path, InputKind::Component)?;
            shipped::Policy::Owned(Box::new(runtime.load(
                args.kind,
                &bytes,
                pin,
                Budget::default(),
            )?))
        }
        _ => source.policy(args.kind)?,
    };
    let decided = crate::telemetry::decide(args.kind, &function, || {
        loaded.decide_json(&function, &input)
    })?;
    print_report(&report::Evaluated {
        decision: decided.decision,
        evidence: decided.evidence,
        bundle: source.bundle_evidence().cloned(),
    })
}

/// The component a standalone policy crate's `policy build --dir` writes, relative to the crate.
pub const DIR_COMPONENT: &str = "target/policy.wasm";
/// Where a standalone policy crate keeps its decision tables, relative to the crate.
pub const DIR_TABLES: &str = "tables";
/// At most this many tables are read from a crate's `tables/` directory.
const MAX_DIR_TABLES: usize = 64;

fn open_dir(dir: &Path) -> Result<PathBuf, Failure> {
    std::fs::canonicalize(dir).map_err(|e| {
        Failure::bad_input(
            "DPONE_CLI_INPUT_UNREADABLE",
            format!("cannot open --dir: {}", e.kind()),
        )
    })
}

/// The `*.json` files of a crate's `tables/` directory, in byte order of their names.
fn dir_tables(dir: &Path) -> Result<Vec<PathBuf>, Failure> {
    let entries = std::fs::read_dir(dir.join(DIR_TABLES)).map_err(|e| {
        Failure::bad_input(
            "DPONE_CLI_INPUT_UNREADABLE",
            format!("cannot list the tables of --dir: {}", e.kind()),
        )
    })?;
    let mut tables = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| {
            Failure::bad_input(
                "DPONE_CLI_INPUT_UNREADABLE",
                format!("cannot list the tables of --dir: {}", e.kind()),
            )
        })?;
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "json") {
            tables.push(path);
        }
    }
    if tables.len() > MAX_DIR_TABLES {
        return Err(Failure::bad_input(
            "DPONE_CLI_TABLE_MALFORMED",
            format!("--dir holds more than {MAX_DIR_TABLES} tables"),
        ));
    }
    tables.sort();
    Ok(tables)
}

/// A table's name in reports: its file name, never its directory.
fn table_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn test(args: TestArgs) -> Result<(), Failure> {
    let dir = args.dir.as_deref().map(open_dir).transpose()?;
    let component = match (&args.component, &dir) {
        (Some(path), _) => path.clone(),
        (None, Some(dir)) => dir.join(DIR_COMPONENT),
        (None, None) => {
            return Err(Failure::bad_input(
                "DPONE_CLI_ARGUMENT",
                "name the component, or a policy crate with --dir",
            ));
        }
    };
    let table_paths = match (&dir, args.tables.is_empty()) {
        (Some(dir), true) => dir_tables(dir)?,
        _ => args.tables.clone(),
    };
    if table_paths.is_empty() && !args.conformance {
        return Err(Failure::bad_input(
            "DPONE_CLI_TABLE_REQUIRED",
            "nothing to test: name a decision table, or pass --conformance",
        ));
    }
    let bytes = shipped::read_input(&component, InputKind::Component)?;
    let mut tables = Vec::new();
    for path in &table_paths {
        let text = shipped::read_input(path, InputKind::DecisionTable)?;
        let table = DecisionTable::from_json(&String::from_utf8_lossy(&text))
            .map_err(|e| Failure::bad_input("DPONE_CLI_TABLE_MALFORMED", e.to_string()))?;
        table.check_expectations().map_err(|e| {
            Failure::bad_input(
                "DPONE_CLI_TABLE_EXPECTATION_EMPTY",
                format!("table {}: {e}", table_name(path)),
            )
        })?;
        let kind: PolicyKind = table
            .kind
            .parse()
            .map_err(|e: String| Failure::bad_input("DPONE_CLI_TABLE_MALFORMED", e))?;
        tables.push((table_name(path), kind, table));
    }
    let pin = args.pin.unwrap_or_else(|| Sha256Digest::of(&bytes));
    let runtime = shipped::runtime(None)?;
    let mut loaded = BTreeMap::new();
    let mut load = |kind: PolicyKind| -> Result<(), Failure> {
        if let std::collections::btree_map::Entry::Vacant(slot) = loaded.entry(kind) {
            slot.insert(runtime.load(kind, &bytes, pin, Budget::default())?);
        }
        Ok(())
    };
    for (_, kind, _) in &tables {
        load(*kind)?;
    }
    if args.conformance {
        let surface = component_surface(&bytes)?;
        let served: Vec<PolicyKind> = PolicyKind::ALL
            .into_iter()
            .filter(|k| surface.exports.contains(&k.export_name()))
            .collect();
        if served.is_empty() {
            // Loading as any kind reports why (world mismatch, version, imports).
            load(tables.first().map_or(PolicyKind::Guard, |(_, k, _)| *k))?;
        }
        for kind in served {
            load(kind)?;
        }
    }

    let mut table_reports = Vec::new();
    let mut failures = Vec::new();
    let mut suites = Vec::new();
    let mut rows = 0;
    for (name, kind, table) in &tables {
        let policy = loaded.get(kind).ok_or_else(|| {
            Failure::internal("DPONE_CLI_INTERNAL", "a table's kind was not loaded")
        })?;
        let mut times = Vec::with_capacity(table.rows.len());
        let outcomes = table.run(|input| {
            let started = Instant::now();
            let decided = policy
                .decide_json(&table.function, input)
                .map(|d| d.decision)
                .map_err(|e| e.code().to_owned());
            times.push(started.elapsed());
            decided
        });
        suites.push(crate::junit::Suite {
            name: name.clone(),
            cases: outcomes
                .iter()
                .zip(&times)
                .map(|(o, time)| crate::junit::Case {
                    name: o.name.clone(),
                    time: *time,
                    failure: o.mismatch.clone().filter(|_| !o.passed),
                })
                .collect(),
        });
        let failed: Vec<_> = outcomes.into_iter().filter(|o| !o.passed).collect();
        rows += table.rows.len();
        table_reports.push(report::TestedTable {
            table: name.clone(),
            kind: *kind,
            function: table.function.clone(),
            rows: table.rows.len(),
            failed: failed.len(),
        });
        failures.extend(failed);
    }

    let mut conformance_failed = 0;
    let conformance = if args.conformance {
        let mut evidence = Vec::new();
        for (kind, policy) in &loaded {
            let ran = crate::activation::host_conformance(*kind, policy)
                .map_err(|e| Failure::internal(e.code(), e.to_string()))?;
            for (table, outcomes) in ran {
                conformance_failed += outcomes.iter().filter(|o| !o.passed).count();
                suites.push(crate::junit::Suite {
                    name: format!("conformance/{}/{}", table.kind, table.function),
                    cases: outcomes
                        .iter()
                        .map(|o| crate::junit::Case {
                            name: o.id.clone(),
                            time: std::time::Duration::ZERO,
                            failure: if o.passed {
                                None
                            } else {
                                Some(o.failure.clone().unwrap_or_else(|| o.outcome.clone()))
                            },
                        })
                        .collect(),
                });
                evidence.push(crate::activation::conformance_evidence(&table, &outcomes));
            }
        }
        serde_json::json!({ "wit_package": SUPPORTED_WIT_PACKAGE, "tables": evidence })
    } else {
        serde_json::Value::Null
    };

    if let Some(path) = &args.junit {
        crate::junit::write(path, &suites)?;
    }
    let first = tables.first();
    let failed = failures.len();
    print_report(&report::Tested {
        component_sha256: pin,
        kind: first.map(|(_, k, _)| *k),
        function: first.map(|(_, _, t)| t.function.clone()),
        rows,
        passed: rows - failed,
        failed,
        failures,
        tables: table_reports,
        conformance,
        conformance_failed,
    })?;
    if failed > 0 {
        return Err(Failure::refused(
            "DPONE_POLICY_TABLE_FAILED",
            format!("{failed} of {rows} rows disagree"),
        ));
    }
    if conformance_failed > 0 {
        return Err(Failure::refused(
            "DPONE_POLICY_CONFORMANCE_FAILED",
            format!("{conformance_failed} host conformance rows fail"),
        ));
    }
    Ok(())
}

/// Percentile of sorted nanosecond samples.
fn percentile(sorted: &[u64], p: usize) -> u64 {
    let last = sorted.len().saturating_sub(1);
    sorted.get(last * p / 100).copied().unwrap_or(0)
}

fn bench(args: BenchArgs) -> Result<(), Failure> {
    let function = function_for(args.kind, args.function)?;
    let input = match &args.input {
        Some(path) => read_json(path, "input")?,
        None => crate::demo::sample_input(args.kind, &function)?,
    };
    let bytes = shipped::component_bytes(args.components_dir.as_deref(), args.kind)?;
    let pin = shipped::pin(args.kind)?;

    let cold = PolicyRuntime::new(Default::default())?;
    let started = Instant::now();
    cold.load(args.kind, &bytes, pin, Budget::default())?;
    let cold_compile_us = started.elapsed().as_secs_f64() * 1e6;

    // A temporary cache and its key under a fresh directory with a random name (mkdtemp, mode
    // 0700), removed when `scratch` drops.
    let scratch = tempfile::Builder::new()
        .prefix("dpone-bench-")
        .tempdir()
        .map_err(|e| {
            Failure::internal(
                "DPONE_CLI_CACHE_DIR",
                format!("cannot create a temporary cache: {}", e.kind()),
            )
        })?;
    let warm = shipped::runtime_with_cache(
        PolicyRuntime::new(Default::default())?,
        &scratch.path().join("cache"),
        &scratch.path().join("cache.key"),
    )?;
    warm.load(args.kind, &bytes, pin, Budget::default())?;
    let mut warm_samples = Vec::with_capacity(50);
    for _ in 0..50 {
        let t = Instant::now();
        let loaded = warm.load(args.kind, &bytes, pin, Budget::default());
        warm_samples.push(t.elapsed().as_nanos() as u64);
        loaded?;
    }
    drop(scratch);
    warm_samples.sort_unstable();

    let loaded = cold.load(args.kind, &bytes, pin, Budget::default())?;
    let mut samples = Vec::with_capacity(args.iterations as usize);
    let mut fuel = 0;
    for _ in 0..args.iterations {
        let t = Instant::now();
        let decided = crate::telemetry::decide(args.kind, &function, || {
            loaded.decide_json(&function, &input)
        });
        samples.push(t.elapsed().as_nanos() as u64);
        fuel = decided?.evidence.fuel_used;
    }
    samples.sort_unstable();
    print_report(&report::Bench {
        kind: args.kind,
        function,
        iterations: args.iterations,
        fresh_sandbox_decision_ns: report::DecisionTimes {
            p50: percentile(&samples, 50),
            p99: percentile(&samples, 99),
            min: samples.first().copied(),
            max: samples.last().copied(),
        },
        fuel_per_decision: fuel,
        cold_compile_us: cold_compile_us.round(),
        warm_cache_load_us: report::LoadTimes {
            p50: percentile(&warm_samples, 50) as f64 / 1e3,
            p99: percentile(&warm_samples, 99) as f64 / 1e3,
        },
        note: "decision time includes JSON parsing of the input; see the runtime bench for the typed path",
    })
}
