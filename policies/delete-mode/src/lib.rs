//! The shipped delete-mode policy: how a reconciliation run records deletions (spec 003, "Soft
//! delete modes", "Manifest/schema", "Edge cases").
//!
//! [`plan`] is the whole policy as plain Rust; it compiles natively (for decision-table parity
//! tests) and, on `wasm32`, is exported as the `dpone:policy/delete-mode-policy` world by
//! `component`.
//!
//! The policy never sees rows. It validates the configuration and returns a [`DeletePlan`]: the
//! reserved `__dpone__` column contract, the predicate that selects active target rows, and a
//! classification table with exactly one rule per [`KeyState`], in [`KeyState::ALL`] order. The
//! host executes that table as set-based SQL. See `docs/policies/delete-mode.md`.

use dpone_policy_model::delete_mode::{
    ActivePredicate, Classification, ColumnRole, DeleteModeFacts, DeletePlan, FlagEffect, KeyState,
    Mode, PlanDecision, ReservedColumn, RowAction, TimestampEffect,
};
use dpone_policy_model::types::Reason;
use std::collections::BTreeSet;

#[cfg(target_arch = "wasm32")]
mod component;

/// Prefix reserved for dpone technical columns; no business column may start with it.
pub const RESERVED_PREFIX: &str = "__dpone__";
/// Nullable UTC timestamp of the first detection of the current deletion.
pub const DELETED_AT_COLUMN: &str = "__dpone__deleted_at";
/// Deletion flag: computed from the timestamp (`timestamp_and_flag`) or stored (`flag_only`).
pub const IS_DELETED_COLUMN: &str = "__dpone__is_deleted";

/// Reason codes of every reject this policy returns.
pub mod codes {
    /// `delete_policy` is neither exactly `soft_delete` nor exactly `hard_delete`.
    pub const UNKNOWN_DELETE_POLICY: &str = "DPONE_DELETE_MODE_UNKNOWN_DELETE_POLICY";
    /// `soft_delete_mode` is not one of the three canonical spellings.
    pub const UNKNOWN_SOFT_DELETE_MODE: &str = "DPONE_DELETE_MODE_UNKNOWN_SOFT_DELETE_MODE";
    /// A `soft_delete_mode` was configured together with `delete_policy: hard_delete`.
    pub const SOFT_DELETE_MODE_WITH_HARD_DELETE: &str =
        "DPONE_DELETE_MODE_SOFT_DELETE_MODE_WITH_HARD_DELETE";
    /// A business column name is empty (or only spaces, which SQL Server trims).
    pub const EMPTY_COLUMN_NAME: &str = "DPONE_DELETE_MODE_EMPTY_COLUMN_NAME";
    /// A business column name starts with the reserved `__dpone__` prefix.
    pub const RESERVED_COLUMN_PREFIX: &str = "DPONE_DELETE_MODE_RESERVED_COLUMN_PREFIX";
    /// Two business column names are equal as SQL Server identifiers.
    pub const DUPLICATE_COLUMN: &str = "DPONE_DELETE_MODE_DUPLICATE_COLUMN";
}

/// Longest piece of caller input (in characters) a message ever quotes.
const MAX_QUOTED_CHARS: usize = 64;

/// Returns the delete plan for a configuration, or a reject with a stable code.
///
/// Checks run in a fixed order and the first failure wins: `delete_policy`, then
/// `soft_delete_mode`, then the business columns in declared order (per column: empty, reserved
/// prefix, duplicate of an earlier column).
pub fn plan(facts: &DeleteModeFacts) -> PlanDecision {
    match select_mode(facts) {
        Ok(mode) => match check_columns(&facts.business_columns) {
            Ok(()) => PlanDecision::Plan(plan_for(mode)),
            Err(reason) => PlanDecision::Reject(reason),
        },
        Err(reason) => PlanDecision::Reject(reason),
    }
}

/// The full plan of a valid mode. Exposed so tests and documentation can enumerate every mode.
pub fn plan_for(mode: Mode) -> DeletePlan {
    let columns = match mode {
        Mode::TimestampOnly => vec![reserved(DELETED_AT_COLUMN, ColumnRole::DeletedAt)],
        Mode::TimestampAndFlag => vec![
            reserved(DELETED_AT_COLUMN, ColumnRole::DeletedAt),
            reserved(IS_DELETED_COLUMN, ColumnRole::DeletedFlagComputed),
        ],
        Mode::FlagOnly => vec![reserved(IS_DELETED_COLUMN, ColumnRole::DeletedFlagStored)],
        Mode::HardDelete => Vec::new(),
    };
    let active_predicate = match mode {
        Mode::TimestampOnly | Mode::TimestampAndFlag => ActivePredicate::DeletedAtIsNull,
        Mode::FlagOnly => ActivePredicate::FlagIsFalse,
        Mode::HardDelete => ActivePredicate::EveryRow,
    };
    DeletePlan {
        mode,
        columns,
        active_predicate,
        rules: KeyState::ALL
            .iter()
            .map(|&state| classify(mode, state))
            .collect(),
    }
}

fn reserved(name: &str, role: ColumnRole) -> ReservedColumn {
    ReservedColumn {
        name: name.into(),
        role,
    }
}

/// How the deletion marker of a mode is written.
#[derive(Clone, Copy)]
enum Marker {
    /// `__dpone__deleted_at` is written; a computed flag, if any, follows it.
    Timestamp,
    /// `__dpone__is_deleted` is stored and written.
    Flag,
    /// No marker: deletion is physical.
    Physical,
}

/// What a rule does to the marker, independent of how the mode stores it.
#[derive(Clone, Copy)]
enum MarkerOp {
    /// Not touched.
    Untouched,
    /// Written as "active" (timestamp NULL, flag false).
    Active,
    /// Written as "deleted now" (the run's detection timestamp, flag true).
    Deleted,
    /// Kept as stored (the first detection timestamp of the current deletion).
    Keep,
}

fn classify(mode: Mode, state: KeyState) -> Classification {
    let marker = match mode {
        Mode::TimestampOnly | Mode::TimestampAndFlag => Marker::Timestamp,
        Mode::FlagOnly => Marker::Flag,
        Mode::HardDelete => Marker::Physical,
    };
    let (action, write_business_columns, op) = match (state, marker) {
        (KeyState::NewInSource, _) => (RowAction::Insert, true, MarkerOp::Active),
        (KeyState::Changed, _) => (RowAction::Update, true, MarkerOp::Untouched),
        (KeyState::Identical, _) => (RowAction::Unchanged, false, MarkerOp::Untouched),
        // With hard delete the target holds no tombstones, so under `every_row` this population
        // is empty by construction; the rule is still total and amounts to an update.
        (KeyState::Reappeared, _) => (RowAction::Reactivate, true, MarkerOp::Active),
        (KeyState::Missing, Marker::Physical) => {
            (RowAction::HardDelete, false, MarkerOp::Untouched)
        }
        (KeyState::Missing, Marker::Timestamp | Marker::Flag) => {
            (RowAction::SoftDelete, false, MarkerOp::Deleted)
        }
        // Empty by construction with hard delete too; a no-op is the only harmless action.
        (KeyState::StillMissing, _) => (RowAction::KeepDeleted, false, MarkerOp::Keep),
    };
    let (deleted_at, deleted_flag) = match (marker, op) {
        (Marker::Physical, _) | (_, MarkerOp::Untouched) => {
            (TimestampEffect::None, FlagEffect::None)
        }
        (Marker::Timestamp, MarkerOp::Active) => (TimestampEffect::Clear, FlagEffect::None),
        (Marker::Timestamp, MarkerOp::Deleted) => {
            (TimestampEffect::SetDetectionTime, FlagEffect::None)
        }
        (Marker::Timestamp, MarkerOp::Keep) => (TimestampEffect::Keep, FlagEffect::None),
        (Marker::Flag, MarkerOp::Active) => (TimestampEffect::None, FlagEffect::SetFalse),
        (Marker::Flag, MarkerOp::Deleted) => (TimestampEffect::None, FlagEffect::SetTrue),
        (Marker::Flag, MarkerOp::Keep) => (TimestampEffect::None, FlagEffect::Keep),
    };
    Classification {
        state,
        action,
        write_business_columns,
        deleted_at,
        deleted_flag,
    }
}

/// Resolves `delete_policy` and `soft_delete_mode` to a mode. Spellings are exact: no case
/// folding, trimming or normalization.
fn select_mode(facts: &DeleteModeFacts) -> Result<Mode, Reason> {
    let hard = match facts.delete_policy.as_deref() {
        None | Some("soft_delete") => false,
        Some("hard_delete") => true,
        Some(other) => {
            return Err(Reason::new(
                codes::UNKNOWN_DELETE_POLICY,
                format!(
                    "delete_policy {} is not soft_delete or hard_delete",
                    quote(other)
                ),
            ));
        }
    };
    match (hard, facts.soft_delete_mode.as_deref()) {
        (true, None) => Ok(Mode::HardDelete),
        (true, Some(_)) => Err(Reason::new(
            codes::SOFT_DELETE_MODE_WITH_HARD_DELETE,
            "soft_delete_mode must not be set when delete_policy is hard_delete",
        )),
        (false, None | Some("timestamp_only")) => Ok(Mode::TimestampOnly),
        (false, Some("timestamp_and_flag")) => Ok(Mode::TimestampAndFlag),
        (false, Some("flag_only")) => Ok(Mode::FlagOnly),
        (false, Some(other)) => Err(Reason::new(
            codes::UNKNOWN_SOFT_DELETE_MODE,
            format!(
                "soft_delete_mode {} is not timestamp_only, timestamp_and_flag or flag_only",
                quote(other)
            ),
        )),
    }
}

/// Validates business column names as SQL Server identifiers.
fn check_columns(columns: &[String]) -> Result<(), Reason> {
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for (index, name) in columns.iter().enumerate() {
        let folded = fold_identifier(name);
        if folded.is_empty() {
            return Err(Reason::new(
                codes::EMPTY_COLUMN_NAME,
                format!("business column #{} has an empty name", index + 1),
            ));
        }
        if folded.starts_with(RESERVED_PREFIX) {
            return Err(Reason::new(
                codes::RESERVED_COLUMN_PREFIX,
                format!(
                    "business column {} uses the reserved {RESERVED_PREFIX} prefix",
                    quote(name)
                ),
            ));
        }
        if !seen.insert(folded) {
            return Err(Reason::new(
                codes::DUPLICATE_COLUMN,
                format!(
                    "business column {} is declared more than once (names compare case-insensitively)",
                    quote(name)
                ),
            ));
        }
    }
    Ok(())
}

/// The comparison form of a SQL Server identifier, conservative towards "equal":
/// trailing U+0020 are dropped (SQL Server pads identifier comparison and trims delimited
/// names), full-width ASCII forms map to ASCII (default collations are width-insensitive), and
/// letters are lower-cased (default collations are case-insensitive).
fn fold_identifier(name: &str) -> String {
    let mut folded = String::with_capacity(name.len());
    for c in name.trim_end_matches(' ').chars() {
        let c = match u32::from(c) {
            // U+FF01..=U+FF5E are the full-width forms of U+0021..=U+007E.
            code @ 0xFF01..=0xFF5E => char::from_u32(code - 0xFEE0).unwrap_or(c),
            _ => c,
        };
        folded.extend(c.to_lowercase());
    }
    folded
}

/// Quotes caller input for a message: escaped, and cut to [`MAX_QUOTED_CHARS`] characters.
fn quote(input: &str) -> String {
    match input.char_indices().nth(MAX_QUOTED_CHARS) {
        None => format!("{input:?}"),
        Some((cut, _)) => format!("{:?}… (truncated)", &input[..cut]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(policy: Option<&str>, mode: Option<&str>, columns: &[&str]) -> DeleteModeFacts {
        DeleteModeFacts {
            delete_policy: policy.map(Into::into),
            soft_delete_mode: mode.map(Into::into),
            business_columns: columns.iter().map(|c| (*c).into()).collect(),
        }
    }

    fn reject_code(d: &PlanDecision) -> Option<&str> {
        match d {
            PlanDecision::Reject(r) => Some(r.code.as_str()),
            PlanDecision::Plan(_) => None,
        }
    }

    #[test]
    fn every_mode_has_exactly_one_rule_per_key_state_in_order() {
        for mode in [
            Mode::TimestampOnly,
            Mode::TimestampAndFlag,
            Mode::FlagOnly,
            Mode::HardDelete,
        ] {
            let p = plan_for(mode);
            let states: Vec<KeyState> = p.rules.iter().map(|r| r.state).collect();
            assert_eq!(states, KeyState::ALL, "{mode:?}");
        }
    }

    #[test]
    fn effects_only_touch_columns_the_mode_has() {
        for mode in [
            Mode::TimestampOnly,
            Mode::TimestampAndFlag,
            Mode::FlagOnly,
            Mode::HardDelete,
        ] {
            let p = plan_for(mode);
            let has_ts = p.columns.iter().any(|c| c.role == ColumnRole::DeletedAt);
            let has_stored_flag = p
                .columns
                .iter()
                .any(|c| c.role == ColumnRole::DeletedFlagStored);
            for r in &p.rules {
                if !has_ts {
                    assert_eq!(r.deleted_at, TimestampEffect::None, "{mode:?} {r:?}");
                }
                if !has_stored_flag {
                    assert_eq!(r.deleted_flag, FlagEffect::None, "{mode:?} {r:?}");
                }
            }
        }
    }

    #[test]
    fn identical_is_a_strict_no_op_in_every_mode() {
        for mode in [
            Mode::TimestampOnly,
            Mode::TimestampAndFlag,
            Mode::FlagOnly,
            Mode::HardDelete,
        ] {
            let p = plan_for(mode);
            let r = &p.rules[2];
            assert_eq!(r.state, KeyState::Identical);
            assert_eq!(r.action, RowAction::Unchanged);
            assert!(!r.write_business_columns);
            assert_eq!(r.deleted_at, TimestampEffect::None);
            assert_eq!(r.deleted_flag, FlagEffect::None);
        }
    }

    #[test]
    fn defaults_are_soft_timestamp_only() {
        assert_eq!(
            plan(&facts(None, None, &["id"])),
            PlanDecision::Plan(plan_for(Mode::TimestampOnly))
        );
    }

    #[test]
    fn reserved_prefix_is_caught_through_case_width_and_trailing_spaces() {
        for name in [
            "__dpone__x",
            "__DPONE__deleted_at",
            "__DpOnE__",
            "\u{FF3F}\u{FF3F}\u{FF44}pone__x",
        ] {
            assert_eq!(
                reject_code(&plan(&facts(None, None, &["id", name]))),
                Some(codes::RESERVED_COLUMN_PREFIX),
                "{name}"
            );
        }
        assert_eq!(reject_code(&plan(&facts(None, None, &["_dpone__x"]))), None);
        assert_eq!(
            reject_code(&plan(&facts(None, None, &[" __dpone__x"]))),
            None
        );
    }

    #[test]
    fn duplicates_and_empty_names() {
        assert_eq!(
            reject_code(&plan(&facts(None, None, &["Id", "iD "]))),
            Some(codes::DUPLICATE_COLUMN)
        );
        assert_eq!(
            reject_code(&plan(&facts(None, None, &["Ä", "ä"]))),
            Some(codes::DUPLICATE_COLUMN)
        );
        assert_eq!(
            reject_code(&plan(&facts(None, None, &["id", "   "]))),
            Some(codes::EMPTY_COLUMN_NAME)
        );
    }

    #[test]
    fn messages_never_echo_long_input() {
        let long = "x".repeat(10_000);
        for d in [
            plan(&facts(Some(&long), None, &[])),
            plan(&facts(None, Some(&long), &[])),
            plan(&facts(None, None, &[&format!("__dpone__{long}")])),
            plan(&facts(None, None, &[&long, &long])),
        ] {
            match d {
                PlanDecision::Reject(r) => assert!(r.message.len() < 200, "{}", r.message),
                PlanDecision::Plan(_) => panic!("expected a reject"),
            }
        }
        // Multi-byte characters are cut on a character boundary.
        let wide = "é".repeat(100);
        assert!(matches!(
            plan(&facts(Some(&wide), None, &[])),
            PlanDecision::Reject(_)
        ));
    }
}
