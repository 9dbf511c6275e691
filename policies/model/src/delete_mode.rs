//! How a reconciliation run records deletions (`dpone:policy/delete-mode`).

use crate::types::Reason;
use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// Facts for one delete-mode plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteModeFacts {
    /// `reconciliation.delete_policy`: `soft_delete` or `hard_delete`; `None` means soft.
    pub delete_policy: Option<String>,
    /// `reconciliation.soft_delete_mode`; `None` means `timestamp_only`.
    pub soft_delete_mode: Option<String>,
    /// Business column names of the target, as declared.
    pub business_columns: Vec<String>,
}

/// The selected delete mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Nullable UTC `__dpone__deleted_at` (default).
    TimestampOnly,
    /// Timestamp plus a persisted flag computed from it.
    TimestampAndFlag,
    /// Stored non-null boolean flag.
    FlagOnly,
    /// Missing keys are deleted physically.
    HardDelete,
}

/// What a reserved column stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnRole {
    /// Nullable UTC timestamp of first detection of the current deletion.
    DeletedAt,
    /// Flag persisted as a function of `deleted_at`.
    DeletedFlagComputed,
    /// Stored non-null boolean flag.
    DeletedFlagStored,
}

/// A reserved `__dpone__` column of the plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReservedColumn {
    /// Column name.
    pub name: String,
    /// What it stores.
    pub role: ColumnRole,
}

/// Where a key stands when the run is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyState {
    /// In the snapshot and absent from the target.
    NewInSource,
    /// In the snapshot, active in the target, row hash changed.
    Changed,
    /// In the snapshot, active in the target, row hash equal.
    Identical,
    /// In the snapshot, deleted in the target.
    Reappeared,
    /// Absent from the snapshot, active in the target.
    Missing,
    /// Absent from the snapshot, already deleted in the target.
    StillMissing,
}

impl KeyState {
    /// Every key state, in declaration order.
    pub const ALL: [KeyState; 6] = [
        KeyState::NewInSource,
        KeyState::Changed,
        KeyState::Identical,
        KeyState::Reappeared,
        KeyState::Missing,
        KeyState::StillMissing,
    ];
}

/// What the host does with keys in one state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowAction {
    /// Insert the source row.
    Insert,
    /// Rewrite the business columns.
    Update,
    /// Rewrite and mark active again.
    Reactivate,
    /// Strict no-op: nothing is written, lineage timestamps stay.
    Unchanged,
    /// Mark deleted.
    SoftDelete,
    /// Delete physically.
    HardDelete,
    /// Leave the deletion as it is.
    KeepDeleted,
}

/// What happens to the deletion timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimestampEffect {
    /// The mode has no timestamp, or it is not touched.
    None,
    /// Set to the run's single detection timestamp.
    SetDetectionTime,
    /// Keep the stored first detection time.
    Keep,
    /// Clear it.
    Clear,
}

/// What happens to a stored deletion flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlagEffect {
    /// The mode stores no flag, or it is not touched.
    None,
    /// Set to true.
    SetTrue,
    /// Set to false.
    SetFalse,
    /// Keep the stored value.
    Keep,
}

/// One row of the classification table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Classification {
    /// The key state this rule covers.
    pub state: KeyState,
    /// The action taken.
    pub action: RowAction,
    /// Business columns are rewritten from the source row.
    pub write_business_columns: bool,
    /// Effect on the deletion timestamp.
    pub deleted_at: TimestampEffect,
    /// Effect on a stored deletion flag.
    pub deleted_flag: FlagEffect,
}

/// Which predicate selects active rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivePredicate {
    /// `__dpone__deleted_at IS NULL`.
    DeletedAtIsNull,
    /// The stored flag is false.
    FlagIsFalse,
    /// Every row is active (hard delete).
    EveryRow,
}

/// The plan the host executes as set-based SQL.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeletePlan {
    /// Selected mode.
    pub mode: Mode,
    /// Reserved columns the target must have.
    pub columns: Vec<ReservedColumn>,
    /// Predicate for active rows.
    pub active_predicate: ActivePredicate,
    /// Exactly one rule per key state.
    pub rules: Vec<Classification>,
}

/// The delete-mode policy's decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanDecision {
    /// The plan to execute.
    Plan(DeletePlan),
    /// The configuration is refused.
    Reject(Reason),
}
