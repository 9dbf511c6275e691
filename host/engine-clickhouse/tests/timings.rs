//! Tier: engine on in-process ports. The run's phase timings count exactly the authority
//! reads and writes the run made, and every phase it executed.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use common::{World, profile};
use dpone_engine_clickhouse::contracts::TargetKey;
use dpone_engine_clickhouse::ports::{AuthorityStore, NoProgress, PortError, Versioned};
use dpone_engine_clickhouse::{Coordinator, CoordinatorConfig, Ports, RunOutcome};

/// The in-process authority, counting every call that reaches it.
struct Counting<'a> {
    inner: &'a (dyn AuthorityStore + Sync),
    calls: AtomicU64,
}

impl AuthorityStore for Counting<'_> {
    fn read(&self, key: &TargetKey) -> Result<Option<Versioned>, PortError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.read(key)
    }

    fn insert(&self, key: &TargetKey, value: &str) -> Result<(), PortError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.insert(key, value)
    }

    fn update(&self, key: &TargetKey, expected_version: u64, value: &str) -> Result<(), PortError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.update(key, expected_version, value)
    }
}

#[test]
fn a_run_reports_every_authority_call_and_each_phase_it_executed() {
    let p = profile();
    let req = p.request();
    for (members, target_present) in [(2, false), (3, true)] {
        let w = World::new(&p, members, target_present);
        let authority = Counting {
            inner: &w.cluster,
            calls: AtomicU64::new(0),
        };
        let coordinator = Coordinator::new(
            Ports {
                authority: &authority,
                inventory: &w.cluster,
                catalog: &w.cluster,
                ddl: &w.cluster,
                artifacts: &w.artifacts,
                admission: &w.gate,
                env: &w.env,
                progress: &NoProgress,
            },
            CoordinatorConfig::default(),
        );
        assert!(matches!(
            coordinator.run(&req),
            Ok(RunOutcome::Completed { .. })
        ));
        let t = coordinator.timings();
        let calls = authority.calls.load(Ordering::SeqCst);
        assert_eq!(t.authority_calls, calls, "{members} members");
        // Lock, staging, one READY per member, staged, dispatching and committed: each a
        // write and its read-back, at the least.
        assert!(calls >= 2 * (5 + u64::from(members)), "{calls} calls");
        assert!(t.authority_s > 0.0 && t.authority_s <= t.total_s, "{t:?}");
        assert_eq!(t.members.len(), members as usize);
        assert!(
            t.stage_s > 0.0 && t.authorize_s > 0.0 && t.publish_s > 0.0 && t.commit_s > 0.0,
            "{t:?}"
        );
        // The baseline proves a present target only.
        assert_eq!(
            t.members.iter().any(|m| m.baseline_proof_s > 0.0),
            target_present,
            "{t:?}"
        );
        // A second run of the completed operation resets the figures and counts again.
        assert!(coordinator.run(&req).is_ok());
        let again = coordinator.timings();
        assert_eq!(
            again.authority_calls,
            authority.calls.load(Ordering::SeqCst) - calls
        );
        assert!(again.authority_calls < calls, "{again:?}");
    }
}
