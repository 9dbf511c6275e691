//! Benchmark on the real-engine tier (`.ci/start-clickhouse`), in one run:
//!
//! - end-to-end publication of 1M rows (8 columns of mixed types) to the tier's members — seal,
//!   per-member create and load, content proof of each member, one fenced `ON CLUSTER` RENAME,
//!   commit — against the baseline of loading the same artifact into one member by hand with
//!   `INSERT … FORMAT RowBinary` (the median of three such loads, each into a fresh table; all
//!   three are printed); reports the ratio;
//! - the members' own floor, which no protocol can go below on this tier: the artifact loaded
//!   into every member at once (one thread per member, no proof), then the same loads each
//!   followed by that member's rowset-digest query (`floor_load_every_member_s`,
//!   `floor_load_and_member_digest_s`, each the median of three rounds);
//! - member read throughput: streaming the published table back as `RowBinary`;
//! - the same end-to-end publication (RENAME, then EXCHANGE on the same target) four ways in
//!   one run: the canonical proof (the host reads every table back) with every proof a full
//!   read and members one after another (the engine before physical fingerprints and
//!   concurrent members); the canonical proof with fingerprints and members concurrently; the
//!   rowset proof (each member computes its digest) one member after another; and the rowset
//!   proof with members concurrently (the default) — each with the run's phase breakdown
//!   ([`Coordinator::timings`]).
//!
//! Every measured publication also reports its time per row (`ns_per_row`) and the peak
//! resident memory of this (the host's) process during it (`peak_rss_mib`: the high-water mark
//! is reset by writing `5` to `/proc/self/clear_refs` before the run and `VmHWM` is read from
//! `/proc/self/status` after it; `null` where Linux's `/proc` does not allow it). The reset
//! brings the mark down to the RSS the process holds at that moment, so `rss_before_mib` (that
//! RSS, memory the allocator kept from earlier runs included) is reported beside it as its floor.
//!
//! **Source order.** The generated source returns its rows in the order PostgreSQL returns a
//! heap under a synchronized sequential scan, not in key order: the scan joins one already under
//! way, so it starts a third of the way into the table and wraps (ids `n/3..n`, then `0..n/3`),
//! and about 1% of the rows (a fixed pseudo-random choice of ids) were moved to the end of the
//! heap by updates that could not stay on their page (non-HOT), so they come after the last
//! block, before the wrap. Each id's values are the same as in key order; only the order differs.
//!
//! `DPONE_BENCH_MODE=scale` measures only the first publication (the RENAME path: no EXCHANGE,
//! no one-after-another comparison, no read-throughput pass) of the default configuration and of
//! the canonical proof (`DPONE_BENCH_SCALE=rowset`: the default alone), plus the hand-load
//! baseline, and prints one JSON line per configuration: rows, members, wall seconds,
//! ns per row, peak RSS, hand-load seconds, the ratio and the phase breakdown. A failed
//! publication (for example the canonical sort's memory budget) is reported in the line
//! (`"outcome":"error"`, with the error) rather than aborting. `DPONE_BENCH_EXCHANGE=1` adds,
//! for each configuration, a second operation on the same target (the EXCHANGE path, then the
//! predecessor's cleanup), one more JSON line (`"path":"exchange"`) measured against the same
//! floor.
//!
//! `DPONE_BENCH_UID=mixed` makes the `uid` column's low half pseudo-random, so that rows' encodings
//! end in every byte value (the default, the id, ends every row in `0x00`); the scale lines say
//! which and how many rows end in `0x0A`.
//!
//! `eval "$(bash .ci/start-clickhouse | tail -n 1 | sed 's/^/export /')"`, then
//! `cargo bench -p dpone-adapter-clickhouse --bench real_engine` (`DPONE_BENCH_ROWS` overrides
//! the row count; `DPONE_TEST_CLICKHOUSE_MEMBERS=4` before `.ci/start-clickhouse` gives four
//! members). Prints JSON; needs the tier's variables, and says so otherwise.
#![allow(clippy::print_stdout, clippy::print_stderr)] // the report is the output

use std::io::{Read, Write};
use std::time::Instant;

use dpone_adapter_clickhouse::{
    ClickHouseCluster, ClickHouseConfig, ClickHouseEndpoint, Credential, Extract,
    StoreArtifactSource,
};
use dpone_artifact_store::ArtifactStore;
use dpone_engine_clickhouse::canonical::{RowBinaryWriter, Value, column_types};
use dpone_engine_clickhouse::contracts::{ContentProof, Digest, Schema, member_id};
use dpone_engine_clickhouse::ports::{
    ArtifactSource, InventoryPort, MemberCatalog, NoProgress, PortError, SystemEnvironment,
};
use dpone_engine_clickhouse::synthetic::FnGate;
use dpone_engine_clickhouse::{
    Coordinator, CoordinatorConfig, OperationRequest, Ports, RunOutcome,
};
use dpone_policy_model::admission::StaticFacts;

fn schema() -> Schema {
    Schema::of(&[
        ("id", "UInt64"),
        ("name", "String"),
        ("amount", "Decimal(18, 2)"),
        ("day", "Date"),
        ("ts", "DateTime64(3)"),
        ("note", "Nullable(String)"),
        ("ratio", "Float64"),
        ("uid", "UUID"),
    ])
}

/// Whether the `uid` column's low half is mixed (`DPONE_BENCH_UID=mixed`) rather than the id:
/// with the id, a row's RowBinary encoding (the UUID is the last column; its last byte is the
/// low half's top byte) ends in `0x00` for every id below 2^56; mixed, it ends in every byte
/// value, `0x0A` (the newline `formatRowNoNewline` trims) about once in 256 rows.
fn mixed_uid() -> bool {
    static MIXED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *MIXED.get_or_init(|| match std::env::var("DPONE_BENCH_UID").as_deref() {
        Err(_) | Ok("" | "sequential") => false,
        Ok("mixed") => true,
        Ok(other) => {
            eprintln!("real_engine bench: DPONE_BENCH_UID is `mixed` or unset, not `{other}`");
            std::process::exit(2);
        }
    })
}

/// The `uid` value of id `i`.
fn uid(i: u64) -> [u8; 16] {
    let mut uid = [0u8; 16];
    let low = if mixed_uid() {
        // The SplitMix64 finalizer: every byte of the low half takes every value.
        let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    } else {
        i
    };
    uid[8..].copy_from_slice(&low.to_be_bytes());
    uid[6] = 0x40;
    uid
}

/// The row of id `i` (the same whatever order the source returns it in).
fn row(i: u64) -> [Value; 8] {
    let uid = uid(i);
    [
        Value::UInt(u128::from(i)),
        Value::Bytes(format!("name-{i}").into_bytes()),
        Value::Int(i128::from(i) * 37),
        Value::Int(i128::from(i % 20_000)),
        Value::Int(1_700_000_000_000 + i128::from(i)),
        if i.is_multiple_of(3) {
            Value::Null
        } else {
            Value::Bytes(format!("note {i}").into_bytes())
        },
        Value::Float(i as f64 / 7.0),
        Value::Raw16(uid),
    ]
}

/// Whether id `i` was moved to the end of the heap by a non-HOT update: a fixed pseudo-random
/// choice (`SplitMix64` finalizer) of about 1% of the ids, spread over the whole table.
fn displaced(i: u64) -> bool {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)).is_multiple_of(100)
}

/// The ids `0..n` in the order a synchronized sequential scan returns the heap: from a third of
/// the way in to the last block, then the displaced rows at the heap's end, then the wrap to the
/// first block. Constant memory, so it does not weigh on the measured peak RSS.
fn scan_order(n: u64) -> impl Iterator<Item = u64> {
    let start = n / 3;
    (start..n)
        .filter(|&i| !displaced(i))
        .chain((0..n).filter(|&i| displaced(i)))
        .chain((0..start).filter(|&i| !displaced(i)))
}

/// The generated source: `self.0` rows in [`scan_order`].
struct Generated(u64);

impl Extract for Generated {
    fn extract(&self, schema: &Schema, out: &mut dyn Write) -> Result<u64, PortError> {
        let types = column_types(schema).expect("bench schema is in the profile");
        let mut w = RowBinaryWriter::new(types.clone());
        let mut written = 0u64;
        for i in scan_order(self.0) {
            w.row(&row(i)).expect("row fits");
            written += 1;
            if written.is_multiple_of(65_536) {
                out.write_all(&w.finish())
                    .map_err(|_| PortError::rejected("DPONE_BENCH_WRITE"))?;
                w = RowBinaryWriter::new(types.clone());
            }
        }
        out.write_all(&w.finish())
            .map_err(|_| PortError::rejected("DPONE_BENCH_WRITE"))?;
        Ok(written)
    }
}

/// Resets this process's resident-set high-water mark (`VmHWM`) to its current RSS; false when
/// Linux's `/proc` does not allow it (the mark would then cover the whole process).
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// A `/proc/self/status` memory field (`VmHWM`, `VmRSS`) in MiB, when `/proc` has it.
fn status_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

/// What one measured publication cost: wall time, per row, and the host's memory.
struct Cost {
    wall_s: f64,
    ns_per_row: f64,
    /// Peak RSS during the run (`VmHWM` after a reset), MiB.
    peak_rss_mib: Option<f64>,
    /// RSS when the run started (what the process already held, allocator caches included):
    /// the floor of `peak_rss_mib`, MiB.
    rss_before_mib: Option<f64>,
}

fn mib_json(v: Option<f64>) -> String {
    v.map_or_else(|| "null".to_owned(), |m| format!("{m:.1}"))
}

impl Cost {
    /// Runs `f` with the peak RSS reset before it and read after it.
    fn measure<T>(rows: u64, f: impl FnOnce() -> T) -> (T, Self) {
        let reset = reset_peak_rss();
        let rss_before_mib = status_mib("VmRSS");
        let started = Instant::now();
        let out = f();
        let wall_s = started.elapsed().as_secs_f64();
        let cost = Self {
            wall_s,
            ns_per_row: wall_s * 1e9 / rows.max(1) as f64,
            peak_rss_mib: if reset { status_mib("VmHWM") } else { None },
            rss_before_mib,
        };
        (out, cost)
    }

    /// `"end_to_end_s":…,"ns_per_row":…,"peak_rss_mib":…,"rss_before_mib":…` (no braces).
    fn json_fields(&self) -> String {
        format!(
            "\"end_to_end_s\":{:.3},\"ns_per_row\":{:.0},\"peak_rss_mib\":{},\"rss_before_mib\":{}",
            self.wall_s,
            self.ns_per_row,
            mib_json(self.peak_rss_mib),
            mib_json(self.rss_before_mib)
        )
    }

    fn line(&self) -> String {
        format!(
            "{:.3} s end to end, {:.0} ns/row, peak RSS {} MiB (from {} MiB)",
            self.wall_s,
            self.ns_per_row,
            mib_json(self.peak_rss_mib),
            mib_json(self.rss_before_mib)
        )
    }
}

/// One coordinator configuration the bench measures. A further choice of the engine's (for
/// example how the content is proven) is one more field here, set in [`Variant::config`], and
/// one more entry in [`Variant::COMPARISON`] / [`Variant::SCALE`].
#[derive(Clone, Copy)]
struct Variant {
    /// The run's name in the report (`members_served` / `configuration`).
    label: &'static str,
    /// Members served at once (`CoordinatorConfig::member_parallelism`); 0 means the default.
    member_parallelism: usize,
    /// Physical fingerprints (the adapter as is); without, every proof is a full read.
    fingerprints: bool,
    /// The content proof: the member's rowset digest, or the canonical full read-back.
    content_proof: ContentProof,
}

impl Variant {
    /// The default configuration: what a deployment runs.
    const DEFAULT: Self = Self {
        label: "rowset_concurrent",
        member_parallelism: 0,
        fingerprints: true,
        content_proof: ContentProof::Rowset,
    };

    /// The canonical proof (full read-back by the host) with fingerprints, members concurrent:
    /// the engine before the rowset proof.
    const CANONICAL: Self = Self {
        label: "canonical_concurrent",
        member_parallelism: 0,
        fingerprints: true,
        content_proof: ContentProof::Canonical,
    };

    /// The default mode's before/after comparison, in run order.
    const COMPARISON: [Self; 4] = [
        Self {
            label: "full_reads_sequential",
            member_parallelism: 1,
            fingerprints: false,
            content_proof: ContentProof::Canonical,
        },
        Self::CANONICAL,
        Self {
            label: "rowset_sequential",
            member_parallelism: 1,
            fingerprints: true,
            content_proof: ContentProof::Rowset,
        },
        Self::DEFAULT,
    ];

    /// What `DPONE_BENCH_MODE=scale` measures: one JSON line each (`DPONE_BENCH_SCALE=rowset`
    /// measures the default alone).
    const SCALE: [Self; 2] = [Self::DEFAULT, Self::CANONICAL];

    fn config(&self) -> CoordinatorConfig {
        let default = CoordinatorConfig::default();
        CoordinatorConfig {
            member_parallelism: if self.member_parallelism == 0 {
                default.member_parallelism
            } else {
                self.member_parallelism
            },
            content_proof: self.content_proof,
            ..default
        }
    }
}

fn var(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

fn main() {
    let Some(url) = var("DPONE_TEST_CLICKHOUSE_URL") else {
        eprintln!(
            "real_engine bench: DPONE_TEST_CLICKHOUSE_URL is not set; start the tier with .ci/start-clickhouse (nothing measured)"
        );
        return;
    };
    let members = var("DPONE_TEST_CLICKHOUSE_MEMBER_URLS").expect("member URLs beside the URL");
    let rows: u64 = var("DPONE_BENCH_ROWS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let scale = match var("DPONE_BENCH_MODE").as_deref() {
        None | Some("default") => false,
        Some("scale") => true,
        Some(other) => {
            eprintln!("real_engine bench: DPONE_BENCH_MODE is `scale` or unset, not `{other}`");
            std::process::exit(2);
        }
    };
    let member_urls: std::collections::BTreeMap<(u32, u32), String> = members
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|item| {
            let (key, u) = item.split_once('=').expect("shard:replica=url");
            let (s, r) = key.split_once(':').expect("shard:replica");
            (
                (s.parse().expect("shard"), r.parse().expect("replica")),
                u.to_owned(),
            )
        })
        .collect();
    let member_ids: Vec<_> = member_urls.keys().map(|&(s, r)| member_id(s, r)).collect();
    let database = var("DPONE_TEST_CLICKHOUSE_DATABASE").unwrap_or_else(|| "dpone_test".into());
    let cluster_name =
        var("DPONE_TEST_CLICKHOUSE_CLUSTER").unwrap_or_else(|| "analytics_cluster".into());
    // The tier serves https:// only; its CA is pinned on every endpoint.
    let ca = var("DPONE_TEST_CLICKHOUSE_CA");
    let endpoint = |u: &str| ClickHouseEndpoint {
        url: u.to_owned(),
        sslrootcert: ca.clone(),
    };
    let config = ClickHouseConfig {
        coordinator_url: endpoint(&url),
        member_urls: member_urls.iter().map(|(k, u)| (*k, endpoint(u))).collect(),
        credential: Credential {
            user: var("DPONE_TEST_CLICKHOUSE_USER").unwrap_or_else(|| "default".into()),
            password: var("DPONE_TEST_CLICKHOUSE_PASSWORD").unwrap_or_default(),
        },
        authority_database: "dpone_test".into(),
        authority_table: "dpone_authority".into(),
        cluster: cluster_name.clone(),
        ddl_task_timeout_secs: 300,
        request_timeout_secs: 600,
    };
    let cluster = ClickHouseCluster::new(&config).expect("adapter");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ArtifactStore::open_path(dir.path(), 4 << 30).expect("store");
    let source = StoreArtifactSource::new(&store, Generated(rows));
    let tag = format!(
        "{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs()
    );

    // Baseline: the same artifact bytes loaded into one member by hand.
    let started = Instant::now();
    let identity = source.seal(&schema(), 4 << 30).expect("seal");
    let seal = started.elapsed().as_secs_f64();
    let hand_table = format!("bench_hand_{tag}");
    let member1 = member_id(1, 1);
    let uuid =
        dpone_engine_clickhouse::contracts::Uuid::parse("5e1ec7ed-0000-4000-8000-000000000001")
            .expect("uuid");
    let spec = dpone_engine_clickhouse::ports::CandidateSpec {
        database: &database,
        name: &hand_table,
        uuid,
        schema: &schema(),
        engine: "MergeTree",
        order_by: &["id".to_owned()],
    };
    // The median of three hand loads (a fresh table each time): one load alone swings with
    // this tier's noise more than any figure it is compared with.
    let mut hand_runs = Vec::new();
    for round in 0..3 {
        if round > 0 {
            cluster
                .drop_exact(&member1, &database, &hand_table, uuid)
                .expect("drop");
        }
        cluster.create_candidate(&member1, &spec).expect("create");
        let started = Instant::now();
        load_artifact(
            &cluster,
            &source,
            &identity,
            (&member1, &database, &hand_table, uuid),
            &format!("bench-hand-{tag}-{round}"),
        );
        hand_runs.push(started.elapsed().as_secs_f64());
    }
    let mut sorted = hand_runs.clone();
    sorted.sort_by(f64::total_cmp);
    let hand = sorted[1];
    let hand_runs_json = format!(
        "\"hand_load_runs_s\":[{}]",
        hand_runs
            .iter()
            .map(|r| format!("{r:.3}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    eprintln!("hand load into one member: median {hand:.3} s of {hand_runs:.3?}");

    // Member read throughput: the table streamed back as RowBinary (not in scale mode).
    let mut read_bytes = 0u64;
    let mut read = 0.0;
    if !scale {
        let started = Instant::now();
        let mut reader = cluster
            .read_rows(&member1, &database, &hand_table, uuid, &schema())
            .expect("read");
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = reader.read(&mut buf).expect("stream");
            if n == 0 {
                break;
            }
            read_bytes += n as u64;
        }
        read = started.elapsed().as_secs_f64();
    }
    cluster
        .drop_exact(&member1, &database, &hand_table, uuid)
        .expect("drop");

    // The floor no protocol can go below on this tier: the same artifact loaded into every
    // member at once (one thread per member, no proof), then the same plus each member's own
    // rowset query. Both are the members' work alone, with the host doing nothing else.
    let floor = Floor::measure(&cluster, &source, &identity, &member_ids, &database, &tag);
    eprintln!(
        "floor ({} members): load into every member at once {:.3} s; load then each member's rowset digest {:.3} s",
        member_ids.len(),
        floor.load_all_s,
        floor.load_and_digest_s
    );

    // End to end through the engine: seal, every member, digests, publication, commit; once
    // with members one after another, once concurrently.
    let gate = FnGate::new(
        "native-policy-core",
        dpone_policy_admission::admit_static,
        dpone_policy_admission::admit_runtime,
    );
    let env = SystemEnvironment;
    let full_reads = FullReads(&cluster);
    let coordinator = |variant: Variant| {
        Coordinator::new(
            Ports {
                authority: &cluster,
                inventory: &cluster,
                catalog: if variant.fingerprints {
                    &cluster
                } else {
                    &full_reads
                },
                ddl: &cluster,
                artifacts: &source,
                admission: &gate,
                env: &env,
                progress: &NoProgress,
            },
            variant.config(),
        )
    };
    let request = |label: &str, path: &str| OperationRequest {
        static_facts: StaticFacts {
            cluster_name: cluster_name.clone(),
            ddl_scope: Some("cluster".into()),
            replication_mode: Some("external".into()),
            engine: "MergeTree".into(),
            max_source_bytes: Some(4 << 30),
            target_database: database.clone(),
            staging_database: database.clone(),
            access_table_engine: None,
        },
        target_table: format!("bench_e2e_{label}_{tag}"),
        scheduler_invocation: format!("bench-{label}-{path}-{tag}"),
        plan_digest: Digest::of(b"bench plan"),
        schema: schema(),
        order_by: vec!["id".into()],
    };
    let member_count = cluster
        .observe(&cluster_name)
        .map(|(rows, _)| rows.len())
        .unwrap_or(0);
    if scale {
        // The default configuration's first publication (target absent: RENAME) only.
        let only_default = var("DPONE_BENCH_SCALE").as_deref() == Some("rowset");
        let paths: &[&str] = if var("DPONE_BENCH_EXCHANGE").as_deref() == Some("1") {
            &["rename", "exchange"]
        } else {
            &["rename"]
        };
        for variant in Variant::SCALE {
            if only_default && variant.label != Variant::DEFAULT.label {
                continue;
            }
            let c = coordinator(variant);
            for &path in paths {
                let req = request(variant.label, path);
                let (outcome, cost) = Cost::measure(rows, || c.run(&req));
                let timings = c.timings();
                let outcome = match outcome {
                    Ok(RunOutcome::Completed { receipt }) => {
                        assert_eq!(
                            receipt.publication.kind,
                            if path == "rename" {
                                dpone_engine_clickhouse::contracts::DdlKind::Rename
                            } else {
                                dpone_engine_clickhouse::contracts::DdlKind::Exchange
                            }
                        );
                        "\"outcome\":\"completed\"".to_owned()
                    }
                    Ok(RunOutcome::InProgress { phase, .. }) => format!(
                        "\"outcome\":\"in_progress\",\"phase\":{}",
                        serde_json::to_string(&format!("{phase:?}")).expect("encode")
                    ),
                    Err(e) => format!(
                        "\"outcome\":\"error\",\"error\":{}",
                        serde_json::to_string(&e.to_string()).expect("encode")
                    ),
                };
                eprintln!(
                    "{} {path} ({outcome}): {}; {}",
                    variant.label,
                    cost.line(),
                    breakdown(&timings)
                );
                println!(
                    "{{\"bench\":\"clickhouse_real_engine_scale\",\"rows\":{rows},\"members\":{member_count},\
\"configuration\":\"{}\",\"path\":\"{path}\",\"source_order\":\"synchronized_scan_wrapped_1pct_displaced\",\
\"uid\":\"{}\",\"rows_ending_0x0a\":{},\
{outcome},{},\"hand_load_one_member_s\":{hand:.3},{hand_runs_json},\"ratio_end_to_end_over_hand\":{:.2},\
\"seal_s\":{seal:.3},{},\"artifact_bytes\":{},\"phase_timings\":{}}}",
                    variant.label,
                    if mixed_uid() { "mixed" } else { "sequential" },
                    (0..rows).filter(|&i| uid(i)[8] == 0x0A).count(),
                    cost.json_fields(),
                    cost.wall_s / hand,
                    floor.json_fields(),
                    identity.byte_size,
                    serde_json::to_string(&timings).expect("timings encode")
                );
            }
        }
        return;
    }
    let mut runs = Vec::new();
    for variant in Variant::COMPARISON {
        let label = variant.label;
        let c = coordinator(variant);
        // First publication (target absent: RENAME), then a second operation on the same
        // target (EXCHANGE, then the predecessor's cleanup).
        for path in ["rename", "exchange"] {
            let req = request(label, path);
            let (outcome, cost) = Cost::measure(rows, || c.run(&req));
            let outcome = outcome.expect("publication");
            let e2e = cost.wall_s;
            let RunOutcome::Completed { receipt } = outcome else {
                panic!("the publication did not complete");
            };
            let expected = if path == "rename" {
                dpone_engine_clickhouse::contracts::DdlKind::Rename
            } else {
                dpone_engine_clickhouse::contracts::DdlKind::Exchange
            };
            assert_eq!(receipt.publication.kind, expected);
            let timings = c.timings();
            eprintln!("{label} {path}: {}; {}", cost.line(), breakdown(&timings));
            runs.push(format!(
                "{{\"members_served\":\"{label}\",\"path\":\"{path}\",{},\"ratio_end_to_end_over_hand\":{:.2},\"phase_timings\":{}}}",
                cost.json_fields(),
                e2e / hand,
                serde_json::to_string(&timings).expect("timings encode")
            ));
        }
    }
    println!(
        "{{\"bench\":\"clickhouse_real_engine\",\"rows\":{rows},\"columns\":8,\"artifact_bytes\":{},\
\"members\":{member_count},\"hand_load_one_member_s\":{hand:.3},{hand_runs_json},\"seal_s\":{seal:.3},{},\
\"member_read_mb_s\":{:.1},\"member_read_rows_s\":{:.0},\"runs\":[{}]}}",
        identity.byte_size,
        floor.json_fields(),
        read_bytes as f64 / read / 1e6,
        rows as f64 / read,
        runs.join(",")
    );
}

/// What the members alone take, with no protocol around them (seconds; each the median of
/// three rounds).
struct Floor {
    /// The sealed artifact loaded into every member concurrently.
    load_all_s: f64,
    /// The same loads, each followed on its member by that member's rowset-digest query.
    load_and_digest_s: f64,
}

impl Floor {
    fn measure(
        cluster: &ClickHouseCluster,
        source: &StoreArtifactSource<'_, Generated>,
        identity: &dpone_engine_clickhouse::contracts::ArtifactIdentity,
        members: &[dpone_engine_clickhouse::contracts::MemberId],
        database: &str,
        tag: &str,
    ) -> Self {
        let round = |round: &str, digest: bool| -> f64 {
            let tables: Vec<_> = members
                .iter()
                .enumerate()
                .map(|(i, member)| {
                    let name = format!("bench_floor_{round}_{i}_{tag}");
                    let uuid = dpone_engine_clickhouse::contracts::Uuid::parse(&format!(
                        "f1004000-0000-4000-8000-{:012x}",
                        i + if digest { 100 } else { 0 }
                    ))
                    .expect("uuid");
                    let spec = dpone_engine_clickhouse::ports::CandidateSpec {
                        database,
                        name: &name,
                        uuid,
                        schema: &schema(),
                        engine: "MergeTree",
                        order_by: &["id".to_owned()],
                    };
                    cluster.create_candidate(member, &spec).expect("create");
                    (member, name, uuid)
                })
                .collect();
            let started = Instant::now();
            std::thread::scope(|scope| {
                for (member, name, uuid) in &tables {
                    scope.spawn(move || {
                        load_artifact(
                            cluster,
                            source,
                            identity,
                            (member, database, name, *uuid),
                            &format!("bench-{name}"),
                        );
                        if digest {
                            let buckets = cluster
                                .rowset_buckets(member, database, name, *uuid, &schema())
                                .expect("floor digest");
                            assert!(!buckets.is_empty(), "a loaded table has rows");
                        }
                    });
                }
            });
            let elapsed = started.elapsed().as_secs_f64();
            for (member, name, uuid) in &tables {
                cluster
                    .drop_exact(member, database, name, *uuid)
                    .expect("drop");
            }
            elapsed
        };
        Self {
            load_all_s: median_of_three(|| round("load", false)),
            load_and_digest_s: median_of_three(|| round("digest", true)),
        }
    }

    fn json_fields(&self) -> String {
        format!(
            "\"floor_load_every_member_s\":{:.3},\"floor_load_and_member_digest_s\":{:.3}",
            self.load_all_s, self.load_and_digest_s
        )
    }
}

/// The sealed artifact loaded into one exact table of one member, with `token` as both the
/// query id and the deduplication token.
fn load_artifact(
    cluster: &ClickHouseCluster,
    source: &StoreArtifactSource<'_, Generated>,
    identity: &dpone_engine_clickhouse::contracts::ArtifactIdentity,
    (member, database, name, uuid): (
        &dpone_engine_clickhouse::contracts::MemberId,
        &str,
        &str,
        dpone_engine_clickhouse::contracts::Uuid,
    ),
    token: &str,
) {
    let mut bytes = source.open(identity).expect("open");
    cluster
        .load(
            member,
            database,
            name,
            uuid,
            &mut bytes,
            &dpone_engine_clickhouse::ports::LoadTokens {
                query_id: token.to_owned(),
                dedup_token: token.to_owned(),
            },
        )
        .expect("load");
}

/// The median of three runs of `f`.
fn median_of_three(mut f: impl FnMut() -> f64) -> f64 {
    let mut runs = [f(), f(), f()];
    runs.sort_by(f64::total_cmp);
    runs[1]
}

/// The adapter without physical fingerprints: every content proof reads the table in full
/// (the engine's behaviour before fingerprints), for a before/after in the same run.
struct FullReads<'a>(&'a ClickHouseCluster);

impl MemberCatalog for FullReads<'_> {
    fn probe(
        &self,
        member: &dpone_engine_clickhouse::contracts::MemberId,
        database: &str,
        target: &str,
    ) -> Result<dpone_engine_clickhouse::ports::MemberProbe, PortError> {
        self.0.probe(member, database, target)
    }

    fn observe_table(
        &self,
        member: &dpone_engine_clickhouse::contracts::MemberId,
        database: &str,
        name: &str,
    ) -> Result<Option<dpone_engine_clickhouse::ports::TableObservation>, PortError> {
        self.0.observe_table(member, database, name)
    }

    fn read_rows<'a>(
        &'a self,
        member: &dpone_engine_clickhouse::contracts::MemberId,
        database: &str,
        name: &str,
        uuid: dpone_engine_clickhouse::contracts::Uuid,
        schema: &Schema,
    ) -> Result<Box<dyn Read + 'a>, PortError> {
        self.0.read_rows(member, database, name, uuid, schema)
    }

    fn rowset_buckets(
        &self,
        member: &dpone_engine_clickhouse::contracts::MemberId,
        database: &str,
        name: &str,
        uuid: dpone_engine_clickhouse::contracts::Uuid,
        schema: &Schema,
    ) -> Result<Vec<dpone_engine_clickhouse::canonical::BucketDigest>, PortError> {
        self.0.rowset_buckets(member, database, name, uuid, schema)
    }

    fn create_candidate(
        &self,
        member: &dpone_engine_clickhouse::contracts::MemberId,
        spec: &dpone_engine_clickhouse::ports::CandidateSpec<'_>,
    ) -> Result<(), PortError> {
        self.0.create_candidate(member, spec)
    }

    fn load(
        &self,
        member: &dpone_engine_clickhouse::contracts::MemberId,
        database: &str,
        name: &str,
        uuid: dpone_engine_clickhouse::contracts::Uuid,
        artifact: &mut dyn Read,
        tokens: &dpone_engine_clickhouse::ports::LoadTokens,
    ) -> Result<(), PortError> {
        self.0.load(member, database, name, uuid, artifact, tokens)
    }

    fn drop_exact(
        &self,
        member: &dpone_engine_clickhouse::contracts::MemberId,
        database: &str,
        name: &str,
        uuid: dpone_engine_clickhouse::contracts::Uuid,
    ) -> Result<(), PortError> {
        self.0.drop_exact(member, database, name, uuid)
    }
}

/// One line: each phase, then each member's steps, in seconds.
fn breakdown(t: &dpone_engine_clickhouse::RunTimings) -> String {
    let mut out = format!(
        "seal {:.3}, artifact digest {:.3}, baseline {:.3}, stage {:.3}, authorize {:.3}, publish {:.3} (commit {:.3}), cleanup {:.3}; authority {:.3} in {} calls",
        t.seal_s,
        t.artifact_digest_s,
        t.baseline_s,
        t.stage_s,
        t.authorize_s,
        t.publish_s,
        t.commit_s,
        t.cleanup_s,
        t.authority_s,
        t.authority_calls
    );
    for m in &t.members {
        out.push_str(&format!(
            "; member {}: create {:.3}, load {:.3}, candidate proof {:.3}, authorize proof {:.3}, target proof {:.3}",
            m.member.0.hex_prefix(8),
            m.create_s,
            m.load_s,
            m.candidate_proof_s,
            m.authorize_proof_s,
            m.target_proof_s
        ));
    }
    out
}
