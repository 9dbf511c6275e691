//! WebAssembly export of [`crate::admit_static`] and [`crate::admit_runtime`]: generated bindings
//! and conversions to the model.
// The canonical-ABI glue that wit-bindgen generates is unsafe by nature; nothing else here is.
#![allow(missing_docs, unsafe_code)]

use dpone_policy_model::admission as model;
use dpone_policy_model::types::Reason;

wit_bindgen::generate!({ path: "../../wit", world: "admission-policy" });

use exports::dpone::policy::admission as wit;
use exports::dpone::policy::types::Reason as WitReason;

struct Component;

impl wit::Guest for Component {
    fn admit_static(facts: wit::StaticFacts) -> wit::StaticDecision {
        crate::admit_static(&facts.into()).into()
    }

    fn admit_runtime(facts: wit::RuntimeFacts) -> wit::RuntimeDecision {
        crate::admit_runtime(&facts.into()).into()
    }
}

export!(Component);

impl From<Reason> for WitReason {
    fn from(r: Reason) -> Self {
        Self {
            code: r.code,
            message: r.message,
        }
    }
}

impl From<model::ReplicationMode> for wit::ReplicationMode {
    fn from(m: model::ReplicationMode) -> Self {
        match m {
            model::ReplicationMode::Internal => Self::Internal,
            model::ReplicationMode::External => Self::External,
            model::ReplicationMode::Local => Self::Local,
        }
    }
}

impl From<wit::StaticFacts> for model::StaticFacts {
    fn from(f: wit::StaticFacts) -> Self {
        Self {
            cluster_name: f.cluster_name,
            ddl_scope: f.ddl_scope,
            replication_mode: f.replication_mode,
            engine: f.engine,
            max_source_bytes: f.max_source_bytes,
            target_database: f.target_database,
            staging_database: f.staging_database,
            access_table_engine: f.access_table_engine,
        }
    }
}

impl From<wit::MemberFacts> for model::MemberFacts {
    fn from(m: wit::MemberFacts) -> Self {
        Self {
            member_id: m.member_id,
            shard_num: m.shard_num,
            replica_num: m.replica_num,
            internal_replication: m.internal_replication,
            database_engine: m.database_engine,
            target_engine: m.target_engine,
            keeper_map_available: m.keeper_map_available,
            direct_connection: m.direct_connection,
        }
    }
}

impl From<wit::RuntimeFacts> for model::RuntimeFacts {
    fn from(f: wit::RuntimeFacts) -> Self {
        Self {
            static_facts: f.static_facts.into(),
            members: f.members.into_iter().map(Into::into).collect(),
            inventory_complete: f.inventory_complete,
            columns: f
                .columns
                .into_iter()
                .map(|c| model::ColumnFacts {
                    name: c.name,
                    type_name: c.type_name,
                })
                .collect(),
            v1_authority: match f.v1_authority {
                wit::V1AuthorityState::Absent => model::V1AuthorityState::Absent,
                wit::V1AuthorityState::Completed => model::V1AuthorityState::Completed,
                wit::V1AuthorityState::Unresolved => model::V1AuthorityState::Unresolved,
            },
        }
    }
}

impl From<model::StaticDecision> for wit::StaticDecision {
    fn from(d: model::StaticDecision) -> Self {
        match d {
            model::StaticDecision::Admitted(r) => Self::Admitted(wit::ReplicationDecision {
                requested: r.requested,
                selected: r.selected,
                replication_mode: r.replication_mode.into(),
                runtime_admission_required: r.runtime_admission_required,
                no_fallback: r.no_fallback,
            }),
            model::StaticDecision::Blocked(reasons) => {
                Self::Blocked(reasons.into_iter().map(Into::into).collect())
            }
        }
    }
}

impl From<model::RuntimeDecision> for wit::RuntimeDecision {
    fn from(d: model::RuntimeDecision) -> Self {
        match d {
            model::RuntimeDecision::Admitted(a) => Self::Admitted(wit::RuntimeAdmission {
                replication_mode: a.replication_mode.into(),
                members: a
                    .members
                    .into_iter()
                    .map(|m| wit::AdmittedMember {
                        member_id: m.member_id,
                        shard_num: m.shard_num,
                        replica_num: m.replica_num,
                    })
                    .collect(),
            }),
            model::RuntimeDecision::Blocked(reasons) => {
                Self::Blocked(reasons.into_iter().map(Into::into).collect())
            }
        }
    }
}
