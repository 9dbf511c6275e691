//! The host's static admission rules for the ClickHouse route: what the WIT static facts of the
//! admission policy cannot carry, judged over the parsed manifest (pure, no I/O).
//!
//! `check`, `plan` and `run` (before it touches anything) ask the admission component for the
//! static decision, then [`assess`] combines that decision with these rules into one ordered
//! list of [`Blocker`]s. The composition root only wires: it supplies the component's decision
//! and the source adapter's [`SourceProfile`].
//!
//! | code | rule |
//! |---|---|
//! | `DPONE_CLICKHOUSE_CLUSTER_ADMISSION_INCONSISTENT` | an admitted decision must require runtime admission and forbid fallback |
//! | `DPONE_CLICKHOUSE_CLUSTER_UNSUPPORTED_COLUMN_TYPE` | every declared type is in the canonical content-digest profile |
//! | the source's code (e.g. `DPONE_PG_ROWBINARY_DECLARED_TYPE_UNSUPPORTED`) | the source can produce every declared type |
//! | `DPONE_CLICKHOUSE_CLUSTER_ENGINE_CONTENT_UNVERIFIABLE` | the engine is one whose content the canonical digest proves exactly ([`CONTENT_EXACT_ENGINES`]); not reported when the policy already refused the engine or the mode |
//! | `DPONE_CLICKHOUSE_ROUTE_ORDER_BY_NULLABLE` | no `Nullable` column in `order_by` (ClickHouse refuses nullable sorting keys) |
//!
//! The engine rule is also enforced by the coordinator itself ([`require_content_exact_engine`]
//! before any I/O), so a library caller cannot bypass it.

use dpone_policy_model::admission::{ReplicationDecision, StaticDecision};
use dpone_policy_model::types::Reason;
use serde::Serialize;

use crate::canonical::{Scalar, parse_type};
use crate::contracts::manifest::Manifest;
use crate::error::{EngineError, codes};

/// Host rule: a `Nullable` column in `ORDER BY` (ClickHouse refuses nullable sorting keys).
pub const ORDER_BY_NULLABLE: &str = "DPONE_CLICKHOUSE_ROUTE_ORDER_BY_NULLABLE";

/// Engines candidates are created with: those whose content the canonical digest proves exactly.
///
/// Only the plain `MergeTree` (external mode) and its replicated form `ReplicatedMergeTree`
/// (internal mode; the admission policy pairs each engine with its mode) keep every inserted
/// row as inserted. `ReplacingMergeTree`,
/// `SummingMergeTree` and `AggregatingMergeTree` may collapse or combine rows at insert
/// (`optimize_on_insert`) or at any later merge, so a candidate verified READY could hold other
/// content by publication time, and a published target could change under its receipt;
/// `CollapsingMergeTree` and `VersionedCollapsingMergeTree` additionally cannot be created
/// without their `(sign[, version])` arguments. They are refused before any I/O.
pub const CONTENT_EXACT_ENGINES: &[&str] = &["MergeTree", "ReplicatedMergeTree"];

/// Refuses an engine outside [`CONTENT_EXACT_ENGINES`].
pub fn require_content_exact_engine(engine: &str) -> Result<(), EngineError> {
    if CONTENT_EXACT_ENGINES.contains(&engine) {
        Ok(())
    } else {
        Err(EngineError::EngineContentUnverifiable {
            allowed: CONTENT_EXACT_ENGINES.join(", "),
        })
    }
}

/// What the source adapter can produce, supplied by the composition root.
#[derive(Clone, Copy)]
pub struct SourceProfile<'a> {
    /// The code reported for a declared type no source type maps to.
    pub code: &'static str,
    /// Whether some source type encodes as the scalar.
    pub producible: &'a dyn Fn(Scalar) -> bool,
}

/// One blocker and who raised it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Blocker {
    /// Stable code.
    pub code: String,
    /// Message (field paths and positions, never registry or environment values).
    pub message: String,
    /// `admission_policy` (the component) or `host` (these static rules).
    pub by: &'static str,
}

impl Blocker {
    /// A blocker the admission policy raised.
    pub fn policy(r: Reason) -> Self {
        Self {
            code: r.code,
            message: r.message,
            by: "admission_policy",
        }
    }

    /// A blocker these host rules raised.
    pub fn host(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            by: "host",
        }
    }
}

/// The static assessment of one manifest: the policy's decision (when it admitted) and every
/// blocker, the policy's first, in rule order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assessment {
    /// The replication decision, when the policy admitted.
    pub decision: Option<ReplicationDecision>,
    /// Every blocker; empty means admitted.
    pub blockers: Vec<Blocker>,
}

/// Combines the admission component's static `decision` with the host's rules over `manifest`.
pub fn assess(
    decision: StaticDecision,
    manifest: &Manifest,
    source: &SourceProfile<'_>,
) -> Assessment {
    let mut blockers = Vec::new();
    let decision = match decision {
        StaticDecision::Blocked(reasons) => {
            blockers.extend(reasons.into_iter().map(Blocker::policy));
            None
        }
        StaticDecision::Admitted(d) => {
            if !d.no_fallback || !d.runtime_admission_required {
                blockers.push(Blocker::host(
                    codes::ADMISSION_INCONSISTENT,
                    "the admission decision allows a fallback or skips runtime admission",
                ));
            }
            Some(d)
        }
    };
    let host = host_rules(manifest, &blockers, source);
    blockers.extend(host);
    Assessment { decision, blockers }
}

/// The host's rules alone; `earlier` are the blockers already raised (an engine or mode the
/// policy refused is reported once).
pub fn host_rules(m: &Manifest, earlier: &[Blocker], source: &SourceProfile<'_>) -> Vec<Blocker> {
    let mut out = Vec::new();
    let schema = m.schema();
    let outside: Vec<usize> = schema
        .columns
        .iter()
        .enumerate()
        .filter(|(_, c)| parse_type(&c.type_name).is_none())
        .map(|(i, _)| i)
        .collect();
    if !outside.is_empty() {
        out.push(Blocker::host(
            codes::UNSUPPORTED_COLUMN_TYPE,
            format!(
                "source.columns {outside:?}: the type is outside the canonical content-digest profile"
            ),
        ));
    }
    let unproducible: Vec<usize> = schema
        .columns
        .iter()
        .enumerate()
        .filter(|(_, c)| parse_type(&c.type_name).is_some_and(|t| !(source.producible)(t.scalar)))
        .map(|(i, _)| i)
        .collect();
    if !unproducible.is_empty() {
        out.push(Blocker::host(
            source.code,
            format!("source.columns {unproducible:?}: no source type maps to the declared type"),
        ));
    }
    let engine_blocked = earlier.iter().any(|b| {
        b.code.ends_with("_ENGINE_UNSUPPORTED") || b.code.ends_with("_ENGINE_MODE_MISMATCH")
    });
    if !engine_blocked && require_content_exact_engine(&m.clickhouse.engine).is_err() {
        out.push(Blocker::host(
            codes::ENGINE_CONTENT_UNVERIFIABLE,
            format!(
                "physical_design.storage.clickhouse.engine: candidates are created only with {} \
                 (no engine arguments), whose content the canonical digest proves exactly; \
                 replacing, summing, aggregating and collapsing engines may change rows at \
                 insert or merge",
                CONTENT_EXACT_ENGINES.join(", ")
            ),
        ));
    }
    let nullable_keys: Vec<&str> = m
        .clickhouse
        .order_by
        .iter()
        .filter(|k| {
            schema
                .columns
                .iter()
                .find(|c| &c.name == *k)
                .and_then(|c| parse_type(&c.type_name))
                .is_some_and(|t| t.nullable)
        })
        .map(String::as_str)
        .collect();
    if !nullable_keys.is_empty() {
        out.push(Blocker::host(
            ORDER_BY_NULLABLE,
            format!(
                "order_by names Nullable columns: {}",
                nullable_keys.join(", ")
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpone_policy_model::admission::{ReplicationDecision, ReplicationMode};

    const MANIFEST: &str = include_str!("../../../fixtures/clickhouse/manifest.yaml");
    const DECLARED: &str = "DPONE_TEST_DECLARED_TYPE_UNSUPPORTED";

    fn no_enums(s: Scalar) -> bool {
        !matches!(s, Scalar::Enum8 | Scalar::Enum16)
    }

    fn profile() -> SourceProfile<'static> {
        SourceProfile {
            code: DECLARED,
            producible: &no_enums,
        }
    }

    fn codes_of(m: &Manifest) -> Vec<String> {
        host_rules(m, &[], &profile())
            .into_iter()
            .map(|b| b.code)
            .collect()
    }

    fn external() -> StaticDecision {
        StaticDecision::Admitted(ReplicationDecision {
            requested: "cluster".into(),
            selected: "cluster_external".into(),
            replication_mode: ReplicationMode::External,
            runtime_admission_required: true,
            no_fallback: true,
        })
    }

    #[test]
    fn the_sample_passes_the_host_rules() {
        // Tier: unit.
        let m = Manifest::parse(MANIFEST).expect("sample");
        assert!(codes_of(&m).is_empty());
        let a = assess(external(), &m, &profile());
        assert!(a.blockers.is_empty());
        assert!(a.decision.is_some());
    }

    #[test]
    fn host_rules_name_what_the_policy_cannot_see() {
        // Tier: unit.
        let m = Manifest::parse(
            &MANIFEST
                .replace("type: UInt64", "type: Array(UInt64)")
                .replace("type: String\n", "type: Enum8('a' = 1)\n")
                .replace("engine: MergeTree", "engine: ReplacingMergeTree(id)")
                .replace("order_by: [id]", "order_by: [note]"),
        )
        .expect("parses");
        assert_eq!(
            codes_of(&m),
            [
                codes::UNSUPPORTED_COLUMN_TYPE,
                DECLARED,
                codes::ENGINE_CONTENT_UNVERIFIABLE,
                ORDER_BY_NULLABLE,
            ]
        );
    }

    #[test]
    fn only_engines_whose_content_the_digest_proves_are_admitted() {
        // Tier: unit. Every direct `*MergeTree` the policy admits for external mode, but only
        // the plain MergeTree keeps rows exactly as inserted (and the collapsing engines cannot
        // even be created without arguments).
        for engine in [
            "ReplacingMergeTree",
            "SummingMergeTree",
            "AggregatingMergeTree",
            "CollapsingMergeTree",
            "VersionedCollapsingMergeTree",
            "ReplacingMergeTree(version)",
            "MergeTree()",
            "GraphiteMergeTree",
        ] {
            let m = Manifest::parse(
                &MANIFEST.replace("engine: MergeTree", &format!("engine: '{engine}'")),
            )
            .expect("parses");
            let a = assess(external(), &m, &profile());
            assert_eq!(
                a.blockers
                    .iter()
                    .map(|b| b.code.as_str())
                    .collect::<Vec<_>>(),
                [codes::ENGINE_CONTENT_UNVERIFIABLE],
                "{engine}"
            );
            assert_eq!(a.blockers[0].by, "host");
            assert!(
                !a.blockers[0].message.contains(engine),
                "no echo of {engine}"
            );
            let e = require_content_exact_engine(engine).expect_err(engine);
            assert_eq!(e.code(), codes::ENGINE_CONTENT_UNVERIFIABLE);
            assert_eq!(e.recovery(), crate::RecoveryAction::FixManifest);
            assert!(!e.is_retryable());
        }
        assert!(require_content_exact_engine("MergeTree").is_ok());
        assert!(require_content_exact_engine("ReplicatedMergeTree").is_ok());
    }

    #[test]
    fn a_refused_engine_or_mode_is_reported_once_by_the_policy() {
        // Tier: unit.
        let m =
            Manifest::parse(&MANIFEST.replace("engine: MergeTree", "engine: Log")).expect("parses");
        let blocked = StaticDecision::Blocked(vec![Reason::new(
            "DPONE_CLICKHOUSE_CLUSTER_ENGINE_UNSUPPORTED",
            "engine",
        )]);
        let a = assess(blocked, &m, &profile());
        assert_eq!(a.blockers.len(), 1);
        assert_eq!(a.blockers[0].by, "admission_policy");
        assert!(a.decision.is_none());
        let internal = StaticDecision::Admitted(ReplicationDecision {
            requested: "cluster".into(),
            selected: "cluster_internal".into(),
            replication_mode: ReplicationMode::Internal,
            runtime_admission_required: true,
            no_fallback: true,
        });
        // Internal mode is admitted (the mode router runs it): no host blocker.
        let m =
            Manifest::parse(&MANIFEST.replace("engine: MergeTree", "engine: ReplicatedMergeTree"))
                .expect("parses");
        let a = assess(internal, &m, &profile());
        assert!(a.blockers.is_empty(), "{:?}", a.blockers);
        assert!(a.decision.is_some());
        let sloppy = StaticDecision::Admitted(ReplicationDecision {
            requested: "cluster".into(),
            selected: "cluster_external".into(),
            replication_mode: ReplicationMode::External,
            runtime_admission_required: false,
            no_fallback: true,
        });
        let m = Manifest::parse(MANIFEST).expect("sample");
        let a = assess(sloppy, &m, &profile());
        assert_eq!(
            a.blockers
                .iter()
                .map(|b| b.code.as_str())
                .collect::<Vec<_>>(),
            [codes::ADMISSION_INCONSISTENT]
        );
    }
}
