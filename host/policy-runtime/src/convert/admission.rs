//! Conversions between the admission model (`dpone_policy_model::admission`) and the bindings
//! wasmtime generates for `dpone:policy/admission`. One-to-one, field for field; every match is
//! exhaustive so a WIT change fails to compile here rather than converting silently.

use crate::bindings::admission::exports::dpone::policy::admission as wit;
use crate::bindings::admission::exports::dpone::policy::types::Reason as WitReason;
use dpone_policy_model::admission as model;
use dpone_policy_model::types::Reason;

/// Static facts for `admit-static` (and inside runtime facts).
pub(crate) fn static_facts_to_wit(f: &model::StaticFacts) -> wit::StaticFacts {
    wit::StaticFacts {
        cluster_name: f.cluster_name.clone(),
        ddl_scope: f.ddl_scope.clone(),
        replication_mode: f.replication_mode.clone(),
        engine: f.engine.clone(),
        max_source_bytes: f.max_source_bytes,
        target_database: f.target_database.clone(),
        staging_database: f.staging_database.clone(),
        access_table_engine: f.access_table_engine.clone(),
    }
}

/// The decision `admit-static` returned.
pub(crate) fn static_decision_from_wit(d: wit::StaticDecision) -> model::StaticDecision {
    match d {
        wit::StaticDecision::Admitted(r) => {
            model::StaticDecision::Admitted(model::ReplicationDecision {
                requested: r.requested,
                selected: r.selected,
                replication_mode: mode_from_wit(r.replication_mode),
                runtime_admission_required: r.runtime_admission_required,
                no_fallback: r.no_fallback,
            })
        }
        wit::StaticDecision::Blocked(reasons) => {
            model::StaticDecision::Blocked(reasons.into_iter().map(reason_from_wit).collect())
        }
    }
}

/// Runtime facts for `admit-runtime`.
pub(crate) fn runtime_facts_to_wit(f: &model::RuntimeFacts) -> wit::RuntimeFacts {
    wit::RuntimeFacts {
        static_facts: static_facts_to_wit(&f.static_facts),
        members: f.members.iter().map(member_to_wit).collect(),
        inventory_complete: f.inventory_complete,
        columns: f
            .columns
            .iter()
            .map(|c| wit::ColumnFacts {
                name: c.name.clone(),
                type_name: c.type_name.clone(),
            })
            .collect(),
        v1_authority: match f.v1_authority {
            model::V1AuthorityState::Absent => wit::V1AuthorityState::Absent,
            model::V1AuthorityState::Completed => wit::V1AuthorityState::Completed,
            model::V1AuthorityState::Unresolved => wit::V1AuthorityState::Unresolved,
        },
    }
}

/// The decision `admit-runtime` returned.
pub(crate) fn runtime_decision_from_wit(d: wit::RuntimeDecision) -> model::RuntimeDecision {
    match d {
        wit::RuntimeDecision::Admitted(a) => {
            model::RuntimeDecision::Admitted(model::RuntimeAdmission {
                replication_mode: mode_from_wit(a.replication_mode),
                members: a
                    .members
                    .into_iter()
                    .map(|m| model::AdmittedMember {
                        member_id: m.member_id,
                        shard_num: m.shard_num,
                        replica_num: m.replica_num,
                    })
                    .collect(),
            })
        }
        wit::RuntimeDecision::Blocked(reasons) => {
            model::RuntimeDecision::Blocked(reasons.into_iter().map(reason_from_wit).collect())
        }
    }
}

fn member_to_wit(m: &model::MemberFacts) -> wit::MemberFacts {
    wit::MemberFacts {
        member_id: m.member_id.clone(),
        shard_num: m.shard_num,
        replica_num: m.replica_num,
        internal_replication: m.internal_replication,
        database_engine: m.database_engine.clone(),
        target_engine: m.target_engine.clone(),
        keeper_map_available: m.keeper_map_available,
        direct_connection: m.direct_connection,
    }
}

fn mode_from_wit(m: wit::ReplicationMode) -> model::ReplicationMode {
    match m {
        wit::ReplicationMode::Internal => model::ReplicationMode::Internal,
        wit::ReplicationMode::External => model::ReplicationMode::External,
        wit::ReplicationMode::Local => model::ReplicationMode::Local,
    }
}

fn reason_from_wit(r: WitReason) -> Reason {
    Reason {
        code: r.code,
        message: r.message,
    }
}
