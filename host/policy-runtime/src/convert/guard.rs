//! Conversions between the guard model (`dpone_policy_model::guard`) and the wasmtime bindings
//! of the `guard-policy` world.
//!
//! Every record is destructured exhaustively and rebuilt without `..`, so a field added to the
//! WIT contract or to the model breaks the build here instead of being dropped silently.

use crate::bindings::guard::exports::dpone::policy::guard as wit;
use crate::bindings::guard::exports::dpone::policy::types::Reason as WitReason;
use dpone_policy_model::guard as model;
use dpone_policy_model::types::Reason;

/// Model facts to the component's `guard-facts` record.
pub(crate) fn facts_to_wit(f: &model::GuardFacts) -> wit::GuardFacts {
    let model::GuardFacts {
        now,
        state_key,
        scope_hash,
        checkpoint,
        target_active_keys,
        target_total_rows,
        snapshot_keys,
        missing_keys,
        guards,
        empty_snapshot,
        other_owner,
        authority,
    } = f;
    wit::GuardFacts {
        now: *now,
        state_key: state_key.clone(),
        scope_hash: scope_hash.clone(),
        checkpoint: checkpoint.as_ref().map(checkpoint_to_wit),
        target_active_keys: *target_active_keys,
        target_total_rows: *target_total_rows,
        snapshot_keys: *snapshot_keys,
        missing_keys: *missing_keys,
        guards: guards_to_wit(guards),
        empty_snapshot: empty_snapshot_to_wit(*empty_snapshot),
        other_owner: other_owner.as_ref().map(owner_to_wit),
        authority: authority.as_ref().map(authority_to_wit),
    }
}

/// The component's `guard-decision` back to the model.
pub(crate) fn decision_from_wit(d: wit::GuardDecision) -> model::GuardDecision {
    match d {
        wit::GuardDecision::Allow(a) => model::GuardDecision::Allow(allowed_from_wit(a)),
        wit::GuardDecision::Deny(r) => model::GuardDecision::Deny(reason_from_wit(r)),
    }
}

fn checkpoint_to_wit(c: &model::Checkpoint) -> wit::Checkpoint {
    let model::Checkpoint { xmin, revision } = *c;
    wit::Checkpoint { xmin, revision }
}

fn checkpoint_from_wit(c: wit::Checkpoint) -> model::Checkpoint {
    let wit::Checkpoint { xmin, revision } = c;
    model::Checkpoint { xmin, revision }
}

fn guards_to_wit(g: &model::DeleteGuards) -> wit::DeleteGuards {
    let model::DeleteGuards {
        max_delete_rows,
        max_delete_ratio,
    } = *g;
    wit::DeleteGuards {
        max_delete_rows,
        max_delete_ratio,
    }
}

fn empty_snapshot_to_wit(p: model::EmptySnapshotPolicy) -> wit::EmptySnapshotPolicy {
    match p {
        model::EmptySnapshotPolicy::Fail => wit::EmptySnapshotPolicy::Fail,
        model::EmptySnapshotPolicy::ApplyGuards => wit::EmptySnapshotPolicy::ApplyGuards,
    }
}

fn owner_to_wit(o: &model::ActiveOwner) -> wit::ActiveOwner {
    let model::ActiveOwner {
        state_key,
        checkpoint,
    } = o;
    wit::ActiveOwner {
        state_key: state_key.clone(),
        checkpoint: checkpoint_to_wit(checkpoint),
    }
}

fn allow_to_wit(a: &model::AuthorityAllow) -> wit::AuthorityAllow {
    let model::AuthorityAllow {
        full_baseline,
        max_delete_rows,
        max_delete_ratio,
    } = *a;
    wit::AuthorityAllow {
        full_baseline,
        max_delete_rows,
        max_delete_ratio,
    }
}

fn transfer_to_wit(t: &model::TransferBinding) -> wit::TransferBinding {
    let model::TransferBinding {
        old_state_key,
        old_checkpoint,
    } = t;
    wit::TransferBinding {
        old_state_key: old_state_key.clone(),
        old_checkpoint: checkpoint_to_wit(old_checkpoint),
    }
}

fn transfer_from_wit(t: wit::TransferBinding) -> model::TransferBinding {
    let wit::TransferBinding {
        old_state_key,
        old_checkpoint,
    } = t;
    model::TransferBinding {
        old_state_key,
        old_checkpoint: checkpoint_from_wit(old_checkpoint),
    }
}

fn authority_to_wit(a: &model::RepairAuthority) -> wit::RepairAuthority {
    let model::RepairAuthority {
        authority_id,
        recorded_digest,
        observed_digest,
        state_key,
        scope_hash,
        checkpoint,
        not_before,
        expires_at,
        consumed,
        allow,
        transfer,
    } = a;
    wit::RepairAuthority {
        authority_id: authority_id.clone(),
        recorded_digest: recorded_digest.clone(),
        observed_digest: observed_digest.clone(),
        state_key: state_key.clone(),
        scope_hash: scope_hash.clone(),
        checkpoint: checkpoint.as_ref().map(checkpoint_to_wit),
        not_before: *not_before,
        expires_at: *expires_at,
        consumed: *consumed,
        allow: allow_to_wit(allow),
        transfer: transfer.as_ref().map(transfer_to_wit),
    }
}

fn load_from_wit(l: wit::LoadKind) -> model::LoadKind {
    match l {
        wit::LoadKind::Incremental => model::LoadKind::Incremental,
        wit::LoadKind::FullBaseline => model::LoadKind::FullBaseline,
    }
}

fn allowed_from_wit(a: wit::Allowed) -> model::Allowed {
    let wit::Allowed {
        load,
        authority_used,
        transfer_from,
        reason,
    } = a;
    model::Allowed {
        load: load_from_wit(load),
        authority_used,
        transfer_from: transfer_from.map(transfer_from_wit),
        reason: reason_from_wit(reason),
    }
}

fn reason_from_wit(r: WitReason) -> Reason {
    let WitReason { code, message } = r;
    Reason { code, message }
}
