//! Tier: real engine, content attacks. A writer outside dpone changes one member's table after
//! its content was proven: one value of one row changed, or one row appended, either to a
//! READY candidate (after the staging barrier, before the publication permit) or to a
//! published target (after the publication, before COMMITTED). Equal row counts are never
//! proof: every attack must stop the run fail-closed, never READY-to-published or COMMITTED
//! with the changed content. Members are served concurrently (the default).
//!
//! Runs only when `DPONE_TEST_CLICKHOUSE_URL` is set at build time; otherwise every test is
//! reported ignored with its SKIP reason.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};

use dpone_adapter_clickhouse::{ClickHouseCluster, StoreArtifactSource};
use dpone_artifact_store::ArtifactStore;
use dpone_engine_clickhouse::contracts::{self, MemberId, Phase};
use dpone_engine_clickhouse::ports::{ProgressObserver, SystemEnvironment};
use dpone_engine_clickhouse::{Coordinator, CoordinatorConfig, Ports, codes};
use support::{Rows, Tier, gate, request, schema, tables_like, unique};

/// Runs `sql` on one member once, when the run reaches `at`.
struct Attack<'t> {
    tier: &'t Tier,
    at: Phase,
    replica: u32,
    sql: String,
    fired: AtomicBool,
}

impl ProgressObserver for Attack<'_> {
    fn member_step(&self, _: &MemberId, _: &'static str) {}

    fn phase(&self, phase: Phase) {
        if phase == self.at && !self.fired.swap(true, Ordering::SeqCst) {
            self.tier.sql(self.tier.member(self.replica), &self.sql);
        }
    }
}

/// What the attacker does to `table`.
#[derive(Clone, Copy, Debug)]
enum Change {
    /// One value of one row (same row count).
    OneValue,
    /// One more row (a copy of an existing row's key with other values).
    AppendedRow,
}

fn statement(tier: &Tier, table: &str, change: Change) -> String {
    let db = &tier.database;
    match change {
        Change::OneValue => format!(
            "ALTER TABLE `{db}`.`{table}` UPDATE name = concat(name, 'x') WHERE id = 7 \
             SETTINGS mutations_sync = 2"
        ),
        Change::AppendedRow => {
            format!("INSERT INTO `{db}`.`{table}` (id, name, amount) VALUES (7, 'n-7-x', 1.25)")
        }
    }
}

/// One publication of 500 rows with `change` applied to member 2's `candidate` (at STAGED)
/// or `target` (at PUBLICATION_DISPATCHING); returns the run's error code and the target.
fn attacked_run(change: Change, at: Phase) -> (String, String, Tier) {
    let tier = Tier::from_env();
    let cluster: ClickHouseCluster = tier.cluster();
    let target = unique("attack");
    let req = request(&tier, &target, &unique("attack-inv"), schema());
    let key = contracts::target_key(&tier.cluster, &tier.database, &target);
    let op = contracts::operation_id(&req.scheduler_invocation, &key, &req.plan_digest);
    let candidate = contracts::candidate_name(&target, &op);
    let attacked = if at == Phase::Staged {
        &candidate
    } else {
        &target
    };
    let attack = Attack {
        tier: &tier,
        at,
        replica: 2,
        sql: statement(&tier, attacked, change),
        fired: AtomicBool::new(false),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ArtifactStore::open_path(dir.path(), 1 << 30).expect("store");
    let source = Rows { rows: 500, salt: 3 };
    let artifacts = StoreArtifactSource::new(&store, &source);
    let gate = gate();
    let env = SystemEnvironment;
    let coordinator = Coordinator::new(
        Ports {
            authority: &cluster,
            inventory: &cluster,
            catalog: &cluster,
            ddl: &cluster,
            artifacts: &artifacts,
            admission: &gate,
            env: &env,
            progress: &attack,
        },
        CoordinatorConfig::default(),
    );
    let outcome = coordinator.run(&req);
    assert!(
        attack.fired.load(Ordering::SeqCst),
        "{change:?} at {at:?}: the attack did not run"
    );
    let code = match outcome {
        Ok(o) => panic!("{change:?} at {at:?}: the run went on with changed content: {o:?}"),
        Err(e) => e.code().to_owned(),
    };
    // Never COMMITTED: the slot holds no receipt.
    let status = coordinator.status(&req).expect("status");
    let json = serde_json::to_value(&status).expect("status encodes");
    assert!(
        json.to_string().find("\"committed_at\"").is_none(),
        "{change:?} at {at:?}: a receipt was written: {json}"
    );
    (code, target, tier)
}

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL is not set; start the real-engine tier with .ci/start-clickhouse"
)]
fn a_ready_candidate_changed_in_one_value_or_by_one_row_is_never_published() {
    for change in [Change::OneValue, Change::AppendedRow] {
        let (code, target, tier) = attacked_run(change, Phase::Staged);
        assert_eq!(code, codes::CANDIDATE_MISSING, "{change:?}");
        for replica in [1, 2] {
            assert!(
                !tables_like(&tier, replica, &target).contains(&target),
                "{change:?}: nothing published on member {replica}"
            );
        }
    }
}

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL is not set; start the real-engine tier with .ci/start-clickhouse"
)]
fn a_published_target_changed_in_one_value_or_by_one_row_is_never_committed() {
    for change in [Change::OneValue, Change::AppendedRow] {
        let (code, _, _) = attacked_run(change, Phase::PublicationDispatching);
        assert_eq!(code, codes::PUBLICATION_TERMINAL_MIXED, "{change:?}");
    }
}
