//! Tier: unit (SQL). Candidates are created only with the engines whose content the engine's
//! canonical digest proves exactly; the others never reach a statement.

use dpone_adapter_clickhouse::sql::{ENGINES, SqlError, create_candidate};
use dpone_engine_clickhouse::admission::CONTENT_EXACT_ENGINES;
use dpone_engine_clickhouse::contracts::{Schema, Uuid};
use dpone_engine_clickhouse::ports::CandidateSpec;

fn create(engine: &str) -> Result<String, SqlError> {
    let schema = Schema::of(&[("id", "UInt64")]);
    create_candidate(&CandidateSpec {
        database: "db",
        name: "t__dpone_ext_0123456789abcdef",
        uuid: Uuid::from_random([7; 16]),
        schema: &schema,
        engine,
        order_by: &["id".to_string()],
    })
    .map(|s| s.sql)
}

#[test]
fn candidates_are_created_only_with_engines_whose_content_the_digest_proves() {
    assert_eq!(ENGINES, CONTENT_EXACT_ENGINES);
    assert!(create("MergeTree").is_ok_and(|sql| sql.contains("ENGINE = MergeTree ORDER BY")));
    for engine in [
        "ReplacingMergeTree",
        "SummingMergeTree",
        "AggregatingMergeTree",
        "CollapsingMergeTree",
        "VersionedCollapsingMergeTree",
    ] {
        assert_eq!(create(engine), Err(SqlError::Engine), "{engine}");
    }
}
