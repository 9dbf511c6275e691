//! The reserved source bound on the XMin route's binary COPY: exactly N rows / N bytes pass,
//! N+1 is refused with its own code, the COPY is abandoned and no artifact (published or
//! temporary) is left; a bound that allows nothing is refused before the read. The expected
//! byte counts come from a first, unbounded read of the same snapshot contents. The attempt's
//! deadline: one already passed refuses before a connection, and a read held up past it is
//! abandoned at the deadline, leaving no artifact and no session.
//!
//! Tier: real PostgreSQL integration (the source adapter directly, and the engine for the
//! refused run's effect on the target).

mod support;

use dpone_adapter_postgres::source::{MIN_COPY_BYTES, PgSource, SourceBound, SourceMeasurement};
use dpone_engine_xmin::artifact::ArtifactStore;
use dpone_engine_xmin::engine::Phase;
use dpone_engine_xmin::envelope::SnapshotEnvelope;
use dpone_engine_xmin::ports::{ExtractRequest, SourcePort};
use dpone_engine_xmin::{ErrorCode, Result as XminResult, RunRequest};
use dpone_policy_model::guard::{Checkpoint, LoadKind};
use support::{Fixture, Options};

const ROWS: u64 = 20_000;

/// A fixture whose source holds `ROWS` rows (about 1.3 MB of COPY payload: more than one
/// 1 MiB write block, so a mid-stream refusal has already written to the temporary file).
async fn fixture(prefix: &str) -> Fixture {
    let f = Fixture::new(prefix, Options::default())
        .await
        .expect("fixture");
    f.src_sql(&format!(
        "INSERT INTO public.items \
         SELECT g, repeat('x', 40) || g::text, g % 1000, (g % 997)::numeric / 100 \
           FROM generate_series(1, {ROWS}) g"
    ))
    .await;
    f
}

/// Extracts once through the adapter with `source`.
async fn extract(
    f: &Fixture,
    source: &mut PgSource,
    previous: Option<Checkpoint>,
) -> XminResult<SnapshotEnvelope> {
    let keys = f.route.manifest.unique_key.clone();
    let business = f.route.manifest.business_columns();
    let req = ExtractRequest {
        endpoint: &f.route.resolved.source,
        authority: &f.route.resolved.source_authority,
        identity: &f.route.identity,
        unique_key: &keys,
        business_columns: &business,
        scope: &f.route.manifest.scope,
        load: if previous.is_some() {
            LoadKind::Incremental
        } else {
            LoadKind::FullBaseline
        },
        previous,
        max_replay_amplification_xids: None,
    };
    source.extract(&req, &f.store).await
}

/// Entries of the artifact directory (published artifacts and temporary files alike).
fn artifact_entries(f: &Fixture) -> usize {
    std::fs::read_dir(f.artifacts_dir.path())
        .expect("artifact dir")
        .count()
}

fn release(f: &Fixture, env: &SnapshotEnvelope) {
    f.store.remove(&env.rows.artifact.sha256).expect("remove");
    if let Some(k) = &env.keys {
        f.store.remove(&k.artifact.sha256).expect("remove");
    }
    assert_eq!(artifact_entries(f), 0);
}

/// Total rows and bytes of an envelope's payloads (delta and keys).
fn totals(env: &SnapshotEnvelope) -> (u64, u64) {
    let k = env.keys.as_ref();
    (
        env.rows.rows + k.map_or(0, |k| k.rows),
        env.rows.artifact.bytes + k.map_or(0, |k| k.artifact.bytes),
    )
}

/// A bounded read that must be refused with `code`, leaving no artifact.
async fn refused(
    f: &Fixture,
    bound: SourceBound,
    previous: Option<Checkpoint>,
    code: ErrorCode,
) -> Option<SourceMeasurement> {
    let mut source = PgSource::new().with_bound(bound);
    let err = extract(f, &mut source, previous)
        .await
        .expect_err("the bound must refuse the read");
    assert_eq!(err.code(), code, "{err}");
    assert_eq!(
        artifact_entries(f),
        0,
        "a refused read leaves no artifact and no temporary file"
    );
    let m = source.last_measurement();
    if let Some(m) = m {
        assert!(!m.complete, "a refused read is an incomplete observation");
    }
    m
}

/// Waits (at most 10 s) until the source database has no session of the XMin source: a
/// refused read closed its connection instead of leaving the COPY running.
async fn source_sessions_end(f: &Fixture) {
    for _ in 0..100 {
        let n: i64 =
            f.sc.query_one(
                "SELECT count(*) FROM pg_catalog.pg_stat_activity \
                  WHERE datname = $1 AND application_name = 'dpone-host xmin source'",
                &[&f.src.name],
            )
            .await
            .expect("activity")
            .get(0);
        if n == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the refused read's session is still open");
}

/// A bounded read that must pass and produce exactly the unbounded read's payloads.
async fn passes(f: &Fixture, bound: SourceBound, previous: Option<Checkpoint>) -> SnapshotEnvelope {
    let mut source = PgSource::new().with_bound(bound);
    let env = extract(f, &mut source, previous)
        .await
        .expect("within the bound");
    let (rows, bytes) = totals(&env);
    assert_eq!(
        source.last_measurement(),
        Some(SourceMeasurement {
            rows,
            source_bytes: bytes,
            complete: true
        })
    );
    env
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn baseline_exactly_n_rows_and_bytes_pass_and_n_plus_one_is_refused() {
    let f = fixture("bound_base").await;
    // Unbounded first: the measurement the bounds are computed from.
    let mut unbounded = PgSource::new();
    let base = extract(&f, &mut unbounded, None).await.expect("unbounded");
    assert!(base.complete);
    assert_eq!(base.rows.rows, ROWS);
    let bytes = base.rows.artifact.bytes;
    assert!(
        bytes > 1 << 20,
        "the payload spans more than one write block"
    );
    assert_eq!(
        unbounded.last_measurement(),
        Some(SourceMeasurement {
            rows: ROWS,
            source_bytes: bytes,
            complete: true
        }),
        "source bytes are the COPY payload, which is the artifact"
    );
    release(&f, &base);

    // Exactly N rows and N bytes: the same artifact as without a bound.
    let exact = SourceBound {
        max_rows: ROWS,
        max_bytes: bytes,
    };
    let env = passes(&f, exact, None).await;
    assert_eq!(env.rows, base.rows, "a bound never changes the payload");
    release(&f, &env);

    // One row fewer allowed: the N+1st row is refused.
    let m = refused(
        &f,
        SourceBound {
            max_rows: ROWS - 1,
            ..exact
        },
        None,
        ErrorCode::SourceRowBoundExceeded,
    )
    .await
    .expect("measured");
    assert_eq!(m.rows, ROWS, "refused on the tuple after the bound");

    // One byte fewer allowed: the last byte (in the trailer) is refused.
    let m = refused(
        &f,
        SourceBound {
            max_bytes: bytes - 1,
            ..exact
        },
        None,
        ErrorCode::SourceByteBoundExceeded,
    )
    .await
    .expect("measured");
    assert_eq!(
        m.source_bytes, bytes,
        "refused on the chunk carrying byte N+1"
    );

    // Mid-stream: half the bytes. The COPY is abandoned early, after a write block was
    // written to the temporary file, which is removed.
    let m = refused(
        &f,
        SourceBound {
            max_bytes: bytes / 2,
            ..exact
        },
        None,
        ErrorCode::SourceByteBoundExceeded,
    )
    .await
    .expect("measured");
    assert!(
        m.source_bytes > bytes / 2 && m.source_bytes < bytes,
        "{m:?}"
    );
    assert!(m.rows < ROWS, "{m:?}");
    source_sessions_end(&f).await;

    // The source is still readable afterwards (the abandoned COPY held nothing).
    let env = passes(&f, exact, None).await;
    assert_eq!(env.rows, base.rows);
    release(&f, &env);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_bound_that_allows_nothing_is_refused_before_the_read() {
    let f = fixture("bound_zero").await;
    let none = refused(
        &f,
        SourceBound {
            max_rows: 0,
            max_bytes: u64::MAX,
        },
        None,
        ErrorCode::SourceRowBoundExceeded,
    )
    .await;
    assert_eq!(none, None, "refused before any connection or read");
    let none = refused(
        &f,
        SourceBound {
            max_rows: u64::MAX,
            max_bytes: MIN_COPY_BYTES - 1,
        },
        None,
        ErrorCode::SourceByteBoundExceeded,
    )
    .await;
    assert_eq!(none, None, "refused before any connection or read");
    let none = refused(
        &f,
        SourceBound {
            max_rows: u64::MAX,
            max_bytes: 0,
        },
        None,
        ErrorCode::SourceByteBoundExceeded,
    )
    .await;
    assert_eq!(none, None);
}

/// An incremental read is two COPY statements (delta, then keys); the bound covers both
/// together, and a refusal in the second removes the first one's published artifact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn incremental_bound_covers_delta_and_keys_together() {
    let f = fixture("bound_incr").await;
    f.run().await.expect("unbounded baseline");
    f.src_sql("UPDATE public.items SET qty = qty + 1 WHERE id <= 10")
        .await;
    let cp = f.checkpoint().await.expect("checkpoint");

    let mut unbounded = PgSource::new();
    let base = extract(&f, &mut unbounded, Some(cp))
        .await
        .expect("unbounded incremental");
    // At least the 10 updated rows; more when another transaction on the server held the
    // baseline's safe checkpoint back (those rows are replayed). No write to the relation
    // happens between the reads below, so every read of this window has the same delta.
    assert!(base.rows.rows >= 10, "{}", base.rows.rows);
    assert_eq!(base.keys.as_ref().map(|k| k.rows), Some(ROWS));
    let (rows, bytes) = totals(&base);
    release(&f, &base);

    let exact = SourceBound {
        max_rows: rows,
        max_bytes: bytes,
    };
    let env = passes(&f, exact, Some(cp)).await;
    assert_eq!((env.rows.clone(), env.keys.clone()), (base.rows, base.keys));
    release(&f, &env);
    refused(
        &f,
        SourceBound {
            max_rows: rows - 1,
            ..exact
        },
        Some(cp),
        ErrorCode::SourceRowBoundExceeded,
    )
    .await;
    refused(
        &f,
        SourceBound {
            max_bytes: bytes - 1,
            ..exact
        },
        Some(cp),
        ErrorCode::SourceByteBoundExceeded,
    )
    .await;
}

/// Through the engine: a refused bounded extraction fails in the extraction phase, before any
/// target mutation, and the checkpoint does not move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_refused_bounded_run_changes_nothing_on_the_target() {
    let f = fixture("bound_run").await;
    let before = f.target_fingerprint().await;
    let mut source = PgSource::new().with_bound(SourceBound {
        max_rows: ROWS - 1,
        max_bytes: u64::MAX,
    });
    let req = RunRequest {
        invocation_id: support::new_invocation(),
        repair_authority_ref: None,
    };
    let err = dpone_engine_xmin::run(
        &f.route,
        &req,
        &mut source,
        &mut f.target(),
        &f.store,
        &support::NativePolicies,
    )
    .await
    .expect_err("refused");
    assert_eq!(err.code(), ErrorCode::SourceRowBoundExceeded, "{err}");
    assert_eq!(err.phase, Phase::Extraction);
    assert_eq!(artifact_entries(&f), 0);
    assert_eq!(f.target_fingerprint().await, before, "target untouched");
    assert_eq!(f.checkpoint().await, None, "no checkpoint");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_read_past_its_deadline_is_abandoned_and_leaves_nothing() {
    let f = fixture("srcdead").await;

    // Already passed: refused before a connection, nothing read.
    let mut source = PgSource::new().with_deadline(std::time::Instant::now());
    let err = extract(&f, &mut source, None)
        .await
        .expect_err("a passed deadline refuses the read");
    assert_eq!(err.code(), ErrorCode::AttemptDeadlineExceeded, "{err}");
    assert_eq!(source.last_measurement(), None, "nothing was read");
    assert_eq!(artifact_entries(&f), 0);

    // Held up by another session's ACCESS EXCLUSIVE lock: abandoned at the deadline, not when
    // the lock is released. (The deadline leaves the connection, a SCRAM login in a debug
    // build on a busy machine, ample time, so the read is the step it stops.)
    let holder = f.src.client().await;
    holder
        .batch_execute("BEGIN; LOCK TABLE public.items IN ACCESS EXCLUSIVE MODE")
        .await
        .expect("hold the relation");
    let started = std::time::Instant::now();
    let mut source = PgSource::new()
        .with_deadline(started + std::time::Duration::from_secs(5))
        .with_bound(SourceBound {
            max_rows: ROWS,
            max_bytes: 1 << 30,
        });
    let err = extract(&f, &mut source, None)
        .await
        .expect_err("the deadline abandons the read");
    let took = started.elapsed();
    assert_eq!(err.code(), ErrorCode::AttemptDeadlineExceeded, "{err}");
    assert!(
        took >= std::time::Duration::from_secs(5) && took < std::time::Duration::from_secs(15),
        "{took:?}"
    );
    assert_eq!(
        source.last_measurement(),
        Some(SourceMeasurement {
            rows: 0,
            source_bytes: 0,
            complete: false
        }),
        "{err} after {took:?}"
    );
    assert_eq!(artifact_entries(&f), 0, "no artifact, no temporary file");
    holder.batch_execute("ROLLBACK").await.expect("release");
    source_sessions_end(&f).await;

    // Without the lock the same deadline leaves the read alone.
    let mut source = PgSource::new()
        .with_deadline(std::time::Instant::now() + std::time::Duration::from_secs(60));
    let env = extract(&f, &mut source, None)
        .await
        .expect("within the deadline");
    assert_eq!(env.rows.rows, ROWS);
    release(&f, &env);
}
