//! WebAssembly export of [`crate::decide`]: generated bindings and conversions to the model.
// The canonical-ABI glue that wit-bindgen generates is unsafe by nature; nothing else here is.
#![allow(missing_docs, unsafe_code)]

use dpone_policy_model::guard as model;
use dpone_policy_model::types::Reason;

wit_bindgen::generate!({ path: "../../wit", world: "guard-policy" });

use exports::dpone::policy::guard as wit;
use exports::dpone::policy::types::Reason as WitReason;

struct Component;

impl wit::Guest for Component {
    fn decide(facts: wit::GuardFacts) -> wit::GuardDecision {
        crate::decide(&facts.into()).into()
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

impl From<wit::Checkpoint> for model::Checkpoint {
    fn from(c: wit::Checkpoint) -> Self {
        Self {
            xmin: c.xmin,
            revision: c.revision,
        }
    }
}

impl From<model::Checkpoint> for wit::Checkpoint {
    fn from(c: model::Checkpoint) -> Self {
        Self {
            xmin: c.xmin,
            revision: c.revision,
        }
    }
}

impl From<wit::TransferBinding> for model::TransferBinding {
    fn from(t: wit::TransferBinding) -> Self {
        Self {
            old_state_key: t.old_state_key,
            old_checkpoint: t.old_checkpoint.into(),
        }
    }
}

impl From<model::TransferBinding> for wit::TransferBinding {
    fn from(t: model::TransferBinding) -> Self {
        Self {
            old_state_key: t.old_state_key,
            old_checkpoint: t.old_checkpoint.into(),
        }
    }
}

impl From<wit::GuardFacts> for model::GuardFacts {
    fn from(f: wit::GuardFacts) -> Self {
        Self {
            now: f.now,
            state_key: f.state_key,
            scope_hash: f.scope_hash,
            checkpoint: f.checkpoint.map(Into::into),
            target_active_keys: f.target_active_keys,
            target_total_rows: f.target_total_rows,
            snapshot_keys: f.snapshot_keys,
            missing_keys: f.missing_keys,
            guards: model::DeleteGuards {
                max_delete_rows: f.guards.max_delete_rows,
                max_delete_ratio: f.guards.max_delete_ratio,
            },
            empty_snapshot: match f.empty_snapshot {
                wit::EmptySnapshotPolicy::Fail => model::EmptySnapshotPolicy::Fail,
                wit::EmptySnapshotPolicy::ApplyGuards => model::EmptySnapshotPolicy::ApplyGuards,
            },
            other_owner: f.other_owner.map(|o| model::ActiveOwner {
                state_key: o.state_key,
                checkpoint: o.checkpoint.into(),
            }),
            authority: f.authority.map(|a| model::RepairAuthority {
                authority_id: a.authority_id,
                recorded_digest: a.recorded_digest,
                observed_digest: a.observed_digest,
                state_key: a.state_key,
                scope_hash: a.scope_hash,
                checkpoint: a.checkpoint.map(Into::into),
                not_before: a.not_before,
                expires_at: a.expires_at,
                consumed: a.consumed,
                allow: model::AuthorityAllow {
                    full_baseline: a.allow.full_baseline,
                    max_delete_rows: a.allow.max_delete_rows,
                    max_delete_ratio: a.allow.max_delete_ratio,
                },
                transfer: a.transfer.map(Into::into),
            }),
        }
    }
}

impl From<model::GuardDecision> for wit::GuardDecision {
    fn from(d: model::GuardDecision) -> Self {
        match d {
            model::GuardDecision::Allow(a) => Self::Allow(wit::Allowed {
                load: match a.load {
                    model::LoadKind::Incremental => wit::LoadKind::Incremental,
                    model::LoadKind::FullBaseline => wit::LoadKind::FullBaseline,
                },
                authority_used: a.authority_used,
                transfer_from: a.transfer_from.map(Into::into),
                reason: a.reason.into(),
            }),
            model::GuardDecision::Deny(r) => Self::Deny(r.into()),
        }
    }
}
