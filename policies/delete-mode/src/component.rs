//! WebAssembly export of [`crate::plan`]: generated bindings and conversions to the model.
// The canonical-ABI glue that wit-bindgen generates is unsafe by nature; nothing else here is.
#![allow(missing_docs, unsafe_code)]

use dpone_policy_model::delete_mode as model;
use dpone_policy_model::types::Reason;

wit_bindgen::generate!({ path: "../../wit", world: "delete-mode-policy" });

use exports::dpone::policy::delete_mode as wit;
use exports::dpone::policy::types::Reason as WitReason;

struct Component;

impl wit::Guest for Component {
    fn plan(facts: wit::DeleteModeFacts) -> wit::PlanDecision {
        crate::plan(&facts.into()).into()
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

impl From<wit::DeleteModeFacts> for model::DeleteModeFacts {
    fn from(f: wit::DeleteModeFacts) -> Self {
        Self {
            delete_policy: f.delete_policy,
            soft_delete_mode: f.soft_delete_mode,
            business_columns: f.business_columns,
        }
    }
}

impl From<model::Mode> for wit::Mode {
    fn from(m: model::Mode) -> Self {
        match m {
            model::Mode::TimestampOnly => Self::TimestampOnly,
            model::Mode::TimestampAndFlag => Self::TimestampAndFlag,
            model::Mode::FlagOnly => Self::FlagOnly,
            model::Mode::HardDelete => Self::HardDelete,
        }
    }
}

impl From<model::ColumnRole> for wit::ColumnRole {
    fn from(r: model::ColumnRole) -> Self {
        match r {
            model::ColumnRole::DeletedAt => Self::DeletedAt,
            model::ColumnRole::DeletedFlagComputed => Self::DeletedFlagComputed,
            model::ColumnRole::DeletedFlagStored => Self::DeletedFlagStored,
        }
    }
}

impl From<model::KeyState> for wit::KeyState {
    fn from(s: model::KeyState) -> Self {
        match s {
            model::KeyState::NewInSource => Self::NewInSource,
            model::KeyState::Changed => Self::Changed,
            model::KeyState::Identical => Self::Identical,
            model::KeyState::Reappeared => Self::Reappeared,
            model::KeyState::Missing => Self::Missing,
            model::KeyState::StillMissing => Self::StillMissing,
        }
    }
}

impl From<model::RowAction> for wit::RowAction {
    fn from(a: model::RowAction) -> Self {
        match a {
            model::RowAction::Insert => Self::Insert,
            model::RowAction::Update => Self::Update,
            model::RowAction::Reactivate => Self::Reactivate,
            model::RowAction::Unchanged => Self::Unchanged,
            model::RowAction::SoftDelete => Self::SoftDelete,
            model::RowAction::HardDelete => Self::HardDelete,
            model::RowAction::KeepDeleted => Self::KeepDeleted,
        }
    }
}

impl From<model::TimestampEffect> for wit::TimestampEffect {
    fn from(e: model::TimestampEffect) -> Self {
        match e {
            model::TimestampEffect::None => Self::None,
            model::TimestampEffect::SetDetectionTime => Self::SetDetectionTime,
            model::TimestampEffect::Keep => Self::Keep,
            model::TimestampEffect::Clear => Self::Clear,
        }
    }
}

impl From<model::FlagEffect> for wit::FlagEffect {
    fn from(e: model::FlagEffect) -> Self {
        match e {
            model::FlagEffect::None => Self::None,
            model::FlagEffect::SetTrue => Self::SetTrue,
            model::FlagEffect::SetFalse => Self::SetFalse,
            model::FlagEffect::Keep => Self::Keep,
        }
    }
}

impl From<model::ActivePredicate> for wit::ActivePredicate {
    fn from(p: model::ActivePredicate) -> Self {
        match p {
            model::ActivePredicate::DeletedAtIsNull => Self::DeletedAtIsNull,
            model::ActivePredicate::FlagIsFalse => Self::FlagIsFalse,
            model::ActivePredicate::EveryRow => Self::EveryRow,
        }
    }
}

impl From<model::Classification> for wit::Classification {
    fn from(c: model::Classification) -> Self {
        Self {
            state: c.state.into(),
            action: c.action.into(),
            write_business_columns: c.write_business_columns,
            deleted_at: c.deleted_at.into(),
            deleted_flag: c.deleted_flag.into(),
        }
    }
}

impl From<model::DeletePlan> for wit::DeletePlan {
    fn from(p: model::DeletePlan) -> Self {
        Self {
            mode: p.mode.into(),
            columns: p
                .columns
                .into_iter()
                .map(|c| wit::ReservedColumn {
                    name: c.name,
                    role: c.role.into(),
                })
                .collect(),
            active_predicate: p.active_predicate.into(),
            rules: p.rules.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<model::PlanDecision> for wit::PlanDecision {
    fn from(d: model::PlanDecision) -> Self {
        match d {
            model::PlanDecision::Plan(p) => Self::Plan(p.into()),
            model::PlanDecision::Reject(r) => Self::Reject(r.into()),
        }
    }
}
