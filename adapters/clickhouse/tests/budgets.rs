//! Tier: real engine. The verification-time budget: a member stops a content proof that runs
//! past it (`max_execution_time`), and the adapter reports that as the budget, never as an
//! outage to retry. Runs only when `DPONE_TEST_CLICKHOUSE_URL` was set at build time; otherwise
//! reported ignored with the SKIP reason.

mod support;

use dpone_adapter_clickhouse::ClickHouseCluster;
use dpone_engine_clickhouse::contracts::{Schema, member_id};
use dpone_engine_clickhouse::ports::{MemberCatalog, PROOF_BUDGET_EXCEEDED, PortErrorKind};
use std::time::Duration;
use support::{Tier, unique};

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL is not set; start the real-engine tier with .ci/start-clickhouse"
)]
fn a_proof_past_the_verification_budget_is_stopped_by_the_member_and_reported_as_the_budget() {
    let tier = Tier::from_env();
    let name = unique("budget");
    // 3,000,000 rows: the member's rowset query over them takes far longer than the 10 ms
    // budget below on any machine (it hashes every row), so the budget, not speed, decides.
    tier.sql(
        tier.member(1),
        &format!(
            "CREATE TABLE `{}`.`{name}` ENGINE = MergeTree ORDER BY tuple() AS \
             SELECT number AS id, toString(number) AS name, toDecimal64(number, 2) AS amount \
             FROM numbers(3000000)",
            tier.database
        ),
    );
    let schema = Schema::of(&[
        ("id", "UInt64"),
        ("name", "String"),
        ("amount", "Decimal(18, 2)"),
    ]);
    let id = member_id(1, 1);
    // A request timeout long enough for the proof: only the budget stops it.
    let mut c = ClickHouseCluster::new(&tier.config(180)).expect("adapter");
    let uuid = c
        .observe_table(&id, &tier.database, &name)
        .expect("observe")
        .expect("table")
        .uuid;
    c.set_proof_time_limit(Duration::from_millis(10));
    let e = c
        .rowset_buckets(&id, &tier.database, &name, uuid, &schema)
        .expect_err("stopped at the budget");
    assert_eq!(e.class, PROOF_BUDGET_EXCEEDED);
    assert_eq!(e.kind, PortErrorKind::Rejected, "not an outage to retry");
    // Within a budget that fits, the same proof completes.
    c.set_proof_time_limit(Duration::from_secs(120));
    let buckets = c
        .rowset_buckets(&id, &tier.database, &name, uuid, &schema)
        .expect("proof within the budget");
    assert_eq!(buckets.iter().map(|b| b.rows).sum::<u64>(), 3_000_000);
    tier.sql(
        tier.member(1),
        &format!("DROP TABLE `{}`.`{name}` SYNC", tier.database),
    );
}
