//! Conversions between the delete-mode model (`dpone_policy_model::delete_mode`) and the
//! bindings wasmtime generates for the `delete-mode-policy` world. One-to-one, field for field;
//! every match is exhaustive so a WIT change fails to compile here instead of mis-mapping.

use crate::bindings::delete_mode::exports::dpone::policy::delete_mode as wit;
use crate::bindings::delete_mode::exports::dpone::policy::types::Reason as WitReason;
use dpone_policy_model::delete_mode as model;
use dpone_policy_model::types::Reason;

/// Model facts to the WIT record passed to `plan`.
pub(crate) fn facts_to_wit(f: &model::DeleteModeFacts) -> wit::DeleteModeFacts {
    wit::DeleteModeFacts {
        delete_policy: f.delete_policy.clone(),
        soft_delete_mode: f.soft_delete_mode.clone(),
        business_columns: f.business_columns.clone(),
    }
}

/// The WIT decision returned by `plan` to the model.
pub(crate) fn decision_from_wit(d: wit::PlanDecision) -> model::PlanDecision {
    match d {
        wit::PlanDecision::Plan(p) => model::PlanDecision::Plan(plan_from_wit(p)),
        wit::PlanDecision::Reject(r) => model::PlanDecision::Reject(reason_from_wit(r)),
    }
}

fn reason_from_wit(r: WitReason) -> Reason {
    Reason {
        code: r.code,
        message: r.message,
    }
}

fn plan_from_wit(p: wit::DeletePlan) -> model::DeletePlan {
    model::DeletePlan {
        mode: mode_from_wit(p.mode),
        columns: p
            .columns
            .into_iter()
            .map(|c| model::ReservedColumn {
                name: c.name,
                role: role_from_wit(c.role),
            })
            .collect(),
        active_predicate: predicate_from_wit(p.active_predicate),
        rules: p.rules.into_iter().map(classification_from_wit).collect(),
    }
}

fn mode_from_wit(m: wit::Mode) -> model::Mode {
    match m {
        wit::Mode::TimestampOnly => model::Mode::TimestampOnly,
        wit::Mode::TimestampAndFlag => model::Mode::TimestampAndFlag,
        wit::Mode::FlagOnly => model::Mode::FlagOnly,
        wit::Mode::HardDelete => model::Mode::HardDelete,
    }
}

fn role_from_wit(r: wit::ColumnRole) -> model::ColumnRole {
    match r {
        wit::ColumnRole::DeletedAt => model::ColumnRole::DeletedAt,
        wit::ColumnRole::DeletedFlagComputed => model::ColumnRole::DeletedFlagComputed,
        wit::ColumnRole::DeletedFlagStored => model::ColumnRole::DeletedFlagStored,
    }
}

fn predicate_from_wit(p: wit::ActivePredicate) -> model::ActivePredicate {
    match p {
        wit::ActivePredicate::DeletedAtIsNull => model::ActivePredicate::DeletedAtIsNull,
        wit::ActivePredicate::FlagIsFalse => model::ActivePredicate::FlagIsFalse,
        wit::ActivePredicate::EveryRow => model::ActivePredicate::EveryRow,
    }
}

fn classification_from_wit(c: wit::Classification) -> model::Classification {
    model::Classification {
        state: key_state_from_wit(c.state),
        action: action_from_wit(c.action),
        write_business_columns: c.write_business_columns,
        deleted_at: timestamp_effect_from_wit(c.deleted_at),
        deleted_flag: flag_effect_from_wit(c.deleted_flag),
    }
}

fn key_state_from_wit(s: wit::KeyState) -> model::KeyState {
    match s {
        wit::KeyState::NewInSource => model::KeyState::NewInSource,
        wit::KeyState::Changed => model::KeyState::Changed,
        wit::KeyState::Identical => model::KeyState::Identical,
        wit::KeyState::Reappeared => model::KeyState::Reappeared,
        wit::KeyState::Missing => model::KeyState::Missing,
        wit::KeyState::StillMissing => model::KeyState::StillMissing,
    }
}

fn action_from_wit(a: wit::RowAction) -> model::RowAction {
    match a {
        wit::RowAction::Insert => model::RowAction::Insert,
        wit::RowAction::Update => model::RowAction::Update,
        wit::RowAction::Reactivate => model::RowAction::Reactivate,
        wit::RowAction::Unchanged => model::RowAction::Unchanged,
        wit::RowAction::SoftDelete => model::RowAction::SoftDelete,
        wit::RowAction::HardDelete => model::RowAction::HardDelete,
        wit::RowAction::KeepDeleted => model::RowAction::KeepDeleted,
    }
}

fn timestamp_effect_from_wit(e: wit::TimestampEffect) -> model::TimestampEffect {
    match e {
        wit::TimestampEffect::None => model::TimestampEffect::None,
        wit::TimestampEffect::SetDetectionTime => model::TimestampEffect::SetDetectionTime,
        wit::TimestampEffect::Keep => model::TimestampEffect::Keep,
        wit::TimestampEffect::Clear => model::TimestampEffect::Clear,
    }
}

fn flag_effect_from_wit(e: wit::FlagEffect) -> model::FlagEffect {
    match e {
        wit::FlagEffect::None => model::FlagEffect::None,
        wit::FlagEffect::SetTrue => model::FlagEffect::SetTrue,
        wit::FlagEffect::SetFalse => model::FlagEffect::SetFalse,
        wit::FlagEffect::Keep => model::FlagEffect::Keep,
    }
}
