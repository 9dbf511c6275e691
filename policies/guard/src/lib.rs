//! The shipped guard policy: delete guards, baseline rules and one-shot repair authority for
//! XMin key reconciliation (spec 003).
//!
//! [`decide`] is the whole policy as plain Rust; it compiles natively (for decision-table parity
//! tests) and, on `wasm32`, is exported as the `dpone:policy/guard-policy` world by `component`.
//!
//! The policy is pure, deterministic and total: it reads only its facts, never panics and does
//! every ratio comparison exactly in `u128` without division. Checks run in one fixed order and
//! the first failing check decides; `docs/policies/guard.md` lists the order and every code.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::unreachable,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::as_conversions
)]

use dpone_policy_model::guard::{
    Allowed, EmptySnapshotPolicy, GuardDecision, GuardFacts, LoadKind, RepairAuthority,
};
use dpone_policy_model::types::{PPM_ONE, Ppm, Reason};

#[cfg(target_arch = "wasm32")]
mod component;

/// Stable reason codes. Deny codes name the first rule a run breaks; `ALLOWED_*` codes say why a
/// run may proceed. Codes never change meaning; new rules get new codes.
pub mod codes {
    /// The host's facts contradict each other (counts, empty identities, self-ownership).
    pub const FACTS_INCONSISTENT: &str = "DPONE_GUARD_FACTS_INCONSISTENT";
    /// A manifest ratio guard is above 1,000,000 ppm (100 %).
    pub const GUARDS_INVALID: &str = "DPONE_GUARD_GUARDS_INVALID";
    /// The authority cannot be interpreted: empty id or digest, empty validity window, or a
    /// ratio bound above 100 %.
    pub const AUTHORITY_MALFORMED: &str = "DPONE_GUARD_AUTHORITY_MALFORMED";
    /// The authority's bytes no longer hash to the digest recorded at creation.
    pub const AUTHORITY_DIGEST_DRIFT: &str = "DPONE_GUARD_AUTHORITY_DIGEST_DRIFT";
    /// The authority was already consumed by an earlier committed run (reuse).
    pub const AUTHORITY_ALREADY_CONSUMED: &str = "DPONE_GUARD_AUTHORITY_ALREADY_CONSUMED";
    /// `now` is before the authority's `not_before`.
    pub const AUTHORITY_NOT_YET_VALID: &str = "DPONE_GUARD_AUTHORITY_NOT_YET_VALID";
    /// `now` is at or after the authority's `expires_at`.
    pub const AUTHORITY_EXPIRED: &str = "DPONE_GUARD_AUTHORITY_EXPIRED";
    /// The authority is bound to another state key.
    pub const AUTHORITY_STATE_KEY_DRIFT: &str = "DPONE_GUARD_AUTHORITY_STATE_KEY_DRIFT";
    /// The authority is bound to another scope hash.
    pub const AUTHORITY_SCOPE_DRIFT: &str = "DPONE_GUARD_AUTHORITY_SCOPE_DRIFT";
    /// The authority is bound to another checkpoint (or to absent/present state in reverse).
    pub const AUTHORITY_CHECKPOINT_DRIFT: &str = "DPONE_GUARD_AUTHORITY_CHECKPOINT_DRIFT";
    /// The authority carries a transfer but this state key already has a checkpoint.
    pub const TRANSFER_REQUIRES_ABSENT_CHECKPOINT: &str =
        "DPONE_GUARD_TRANSFER_REQUIRES_ABSENT_CHECKPOINT";
    /// The authority carries a transfer without `allow.full_baseline`.
    pub const TRANSFER_REQUIRES_FULL_BASELINE: &str = "DPONE_GUARD_TRANSFER_REQUIRES_FULL_BASELINE";
    /// An empty key snapshot under `empty_snapshot.policy = fail` and no authority.
    pub const EMPTY_SNAPSHOT_REFUSED: &str = "DPONE_GUARD_EMPTY_SNAPSHOT_REFUSED";
    /// The authority does not cover the empty snapshot exactly.
    pub const AUTHORITY_EMPTY_SNAPSHOT_NOT_COVERED: &str =
        "DPONE_GUARD_AUTHORITY_EMPTY_SNAPSHOT_NOT_COVERED";
    /// A non-empty target with missing or new state and no authority.
    pub const BASELINE_REQUIRES_AUTHORITY: &str = "DPONE_GUARD_BASELINE_REQUIRES_AUTHORITY";
    /// A baseline needs authority and the selected one lacks `allow.full_baseline`.
    pub const AUTHORITY_BASELINE_NOT_ALLOWED: &str = "DPONE_GUARD_AUTHORITY_BASELINE_NOT_ALLOWED";
    /// An authority was selected but the run needs none: it is never consumed for nothing.
    pub const AUTHORITY_UNUSED: &str = "DPONE_GUARD_AUTHORITY_UNUSED";
    /// The run would delete more rows than the manifest's `max_delete_rows`.
    pub const MAX_DELETE_ROWS_EXCEEDED: &str = "DPONE_GUARD_MAX_DELETE_ROWS_EXCEEDED";
    /// The run would delete a larger share than the manifest's `max_delete_ratio`.
    pub const MAX_DELETE_RATIO_EXCEEDED: &str = "DPONE_GUARD_MAX_DELETE_RATIO_EXCEEDED";
    /// The run would delete more rows than the authority's `allow.max_delete_rows`.
    pub const AUTHORITY_MAX_DELETE_ROWS_EXCEEDED: &str =
        "DPONE_GUARD_AUTHORITY_MAX_DELETE_ROWS_EXCEEDED";
    /// The run would delete a larger share than the authority's `allow.max_delete_ratio`.
    pub const AUTHORITY_MAX_DELETE_RATIO_EXCEEDED: &str =
        "DPONE_GUARD_AUTHORITY_MAX_DELETE_RATIO_EXCEEDED";
    /// Another state key actively owns the target and no transfer was authorized.
    pub const TARGET_OWNED_BY_OTHER_STATE: &str = "DPONE_GUARD_TARGET_OWNED_BY_OTHER_STATE";
    /// The transfer does not name the active owner's exact state key and checkpoint.
    pub const TRANSFER_MISMATCH: &str = "DPONE_GUARD_TRANSFER_MISMATCH";
    /// The authority carries a transfer but no other state key owns the target.
    pub const TRANSFER_UNNECESSARY: &str = "DPONE_GUARD_TRANSFER_UNNECESSARY";

    /// Incremental run within the manifest's guards, no authority.
    pub const ALLOWED_WITHIN_GUARDS: &str = "DPONE_GUARD_ALLOWED_WITHIN_GUARDS";
    /// First baseline of a new state key into an empty target, no authority.
    pub const ALLOWED_FIRST_BASELINE: &str = "DPONE_GUARD_ALLOWED_FIRST_BASELINE";
    /// Empty snapshot judged by the ordinary guards (`policy = apply_guards`), no authority.
    pub const ALLOWED_EMPTY_SNAPSHOT_WITHIN_GUARDS: &str =
        "DPONE_GUARD_ALLOWED_EMPTY_SNAPSHOT_WITHIN_GUARDS";
    /// Incremental run whose deletions exceed the manifest's guards, covered by an authority.
    pub const ALLOWED_AUTHORIZED_DELETES: &str = "DPONE_GUARD_ALLOWED_AUTHORIZED_DELETES";
    /// Incremental all-delete from an empty snapshot, covered exactly by an authority.
    pub const ALLOWED_AUTHORIZED_ALL_DELETE: &str = "DPONE_GUARD_ALLOWED_AUTHORIZED_ALL_DELETE";
    /// Full (repair) baseline selected by an authority with `allow.full_baseline`.
    pub const ALLOWED_AUTHORIZED_FULL_BASELINE: &str =
        "DPONE_GUARD_ALLOWED_AUTHORIZED_FULL_BASELINE";
    /// Full baseline that also takes over the target from its old owner.
    pub const ALLOWED_AUTHORIZED_TRANSFER: &str = "DPONE_GUARD_ALLOWED_AUTHORIZED_TRANSFER";
}

/// Decides whether a reconciliation run may proceed, and as which kind of load.
///
/// Checks run in a fixed order (facts, manifest guards, authority admission, empty snapshot,
/// baseline, authority necessity, delete bounds, target ownership; ownership moves first when no
/// authority is selected); the first failure denies.
pub fn decide(facts: &GuardFacts) -> GuardDecision {
    match evaluate(facts) {
        Ok(allowed) => GuardDecision::Allow(allowed),
        Err(reason) => GuardDecision::Deny(reason),
    }
}

/// Outcome of one check: pass, or the reason that denies the run.
type Check = Result<(), Reason>;

/// Runs every check in precedence order and builds the allowance when all pass.
///
/// With an authority the spec's order holds: the authority is admitted completely (on its own,
/// then against what the run needs) before target ownership is checked. Without one, an ownership
/// conflict is reported first, because only an authority carrying a transfer can resolve it.
fn evaluate(f: &GuardFacts) -> Result<Allowed, Reason> {
    check_facts(f)?;
    check_manifest_guards(f)?;
    match &f.authority {
        Some(a) => {
            admit_authority(f, a)?;
            check_run_needs(f)?;
            check_ownership(f)?;
        }
        None => {
            check_ownership(f)?;
            check_run_needs(f)?;
        }
    }
    Ok(allowed(f))
}

/// What the run itself requires: empty snapshot, baseline, authority necessity, delete bounds.
fn check_run_needs(f: &GuardFacts) -> Check {
    check_empty_snapshot(f)?;
    check_baseline(f)?;
    check_authority_needed(f)?;
    check_delete_bounds(f)
}

/// Builds a deny reason.
fn deny(code: &str, message: impl Into<String>) -> Check {
    Err(Reason::new(code, message))
}

// ---------------------------------------------------------------------------------------------
// Ratio arithmetic
// ---------------------------------------------------------------------------------------------

/// `part / whole > limit_ppm / 1_000_000`, compared exactly as `part * 1e6 > limit * whole`.
///
/// With `whole = 0` the ratio of `part = 0` is 0 (nothing is deleted, so no ratio limit is
/// exceeded) and any `part > 0` exceeds every limit. Products of a `u64` and a `u32` fit in
/// `u128`, so the saturating multiplications never saturate.
fn ratio_exceeds(part: u64, whole: u64, limit_ppm: Ppm) -> bool {
    let lhs = u128::from(part).saturating_mul(u128::from(PPM_ONE));
    let rhs = u128::from(limit_ppm).saturating_mul(u128::from(whole));
    lhs > rhs
}

/// Whether `missing` deletions exceed an optional row limit (`None` = no limit).
fn rows_exceed(missing: u64, limit: Option<u64>) -> bool {
    limit.is_some_and(|l| missing > l)
}

/// Whether the deletion share exceeds an optional ratio limit (`None` = no limit).
fn share_exceeds(f: &GuardFacts, limit: Option<Ppm>) -> bool {
    limit.is_some_and(|l| ratio_exceeds(f.missing_keys, f.target_active_keys, l))
}

// ---------------------------------------------------------------------------------------------
// Steps 1-2: facts and manifest guards
// ---------------------------------------------------------------------------------------------

/// Rejects facts that cannot describe a real run: the host must never guess.
fn check_facts(f: &GuardFacts) -> Check {
    let bad = |what: &str| {
        deny(
            codes::FACTS_INCONSISTENT,
            format!("inconsistent facts: {what}"),
        )
    };
    if f.state_key.is_empty() || f.scope_hash.is_empty() {
        return bad("empty state key or scope hash");
    }
    if f.target_active_keys > f.target_total_rows {
        return bad("more active keys than target rows");
    }
    // Active keys still present in the snapshot; fails exactly when missing > active.
    let Some(present) = f.target_active_keys.checked_sub(f.missing_keys) else {
        return bad("more missing keys than active keys");
    };
    if present > f.snapshot_keys {
        return bad("more active keys present in the snapshot than the snapshot holds");
    }
    if f.other_owner
        .as_ref()
        .is_some_and(|o| o.state_key == f.state_key)
    {
        return bad("the other active owner has this run's own state key");
    }
    Ok(())
}

/// A manifest ratio guard must be a ratio: at most 1,000,000 ppm.
fn check_manifest_guards(f: &GuardFacts) -> Check {
    match f.guards.max_delete_ratio {
        Some(r) if r > PPM_ONE => deny(
            codes::GUARDS_INVALID,
            format!("max_delete_ratio of {r} ppm is above 1000000 ppm"),
        ),
        _ => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------------
// Step 3: authority admission (integrity, single use, validity window, binding, transfer shape)
// ---------------------------------------------------------------------------------------------

/// Admits the selected authority on its own merits, before asking whether the run needs it.
fn admit_authority(f: &GuardFacts, a: &RepairAuthority) -> Check {
    check_authority_shape(a)?;
    check_authority_digest(a)?;
    check_authority_unconsumed(a)?;
    check_authority_window(f, a)?;
    check_authority_binding(f, a)?;
    check_transfer_shape(f, a)
}

/// The authority must be interpretable: id, both digests, a non-empty window, ratio ≤ 100 %.
fn check_authority_shape(a: &RepairAuthority) -> Check {
    let bad = |what: &str| {
        deny(
            codes::AUTHORITY_MALFORMED,
            format!("authority malformed: {what}"),
        )
    };
    if a.authority_id.is_empty() {
        return bad("empty authority id");
    }
    if a.recorded_digest.is_empty() || a.observed_digest.is_empty() {
        return bad("empty digest");
    }
    if a.state_key.is_empty() || a.scope_hash.is_empty() {
        return bad("empty state key or scope hash binding");
    }
    if a.not_before >= a.expires_at {
        return bad("empty validity window");
    }
    if a.allow.max_delete_ratio.is_some_and(|r| r > PPM_ONE) {
        return bad("max_delete_ratio above 1000000 ppm");
    }
    Ok(())
}

/// The bytes read now must hash to the digest recorded at creation (exact, case-sensitive).
fn check_authority_digest(a: &RepairAuthority) -> Check {
    if a.observed_digest == a.recorded_digest {
        Ok(())
    } else {
        deny(
            codes::AUTHORITY_DIGEST_DRIFT,
            "authority content does not match its recorded digest",
        )
    }
}

/// One-shot: an authority with a consumption row is never admitted again.
fn check_authority_unconsumed(a: &RepairAuthority) -> Check {
    if a.consumed {
        deny(
            codes::AUTHORITY_ALREADY_CONSUMED,
            "authority was already consumed by an earlier run",
        )
    } else {
        Ok(())
    }
}

/// Valid on the half-open window `[not_before, expires_at)`.
fn check_authority_window(f: &GuardFacts, a: &RepairAuthority) -> Check {
    if f.now < a.not_before {
        deny(codes::AUTHORITY_NOT_YET_VALID, "authority is not yet valid")
    } else if f.now >= a.expires_at {
        deny(codes::AUTHORITY_EXPIRED, "authority has expired")
    } else {
        Ok(())
    }
}

/// State key, scope hash and checkpoint (absent binds absent; present binds exactly) must match.
fn check_authority_binding(f: &GuardFacts, a: &RepairAuthority) -> Check {
    if a.state_key != f.state_key {
        deny(
            codes::AUTHORITY_STATE_KEY_DRIFT,
            "authority is bound to another state key",
        )
    } else if a.scope_hash != f.scope_hash {
        deny(
            codes::AUTHORITY_SCOPE_DRIFT,
            "authority is bound to another scope hash",
        )
    } else if a.checkpoint != f.checkpoint {
        deny(
            codes::AUTHORITY_CHECKPOINT_DRIFT,
            "authority is bound to another checkpoint",
        )
    } else {
        Ok(())
    }
}

/// A transfer is valid only for an absent new checkpoint with `allow.full_baseline`.
fn check_transfer_shape(f: &GuardFacts, a: &RepairAuthority) -> Check {
    if a.transfer.is_none() {
        Ok(())
    } else if f.checkpoint.is_some() {
        deny(
            codes::TRANSFER_REQUIRES_ABSENT_CHECKPOINT,
            "a transfer is valid only for a state key without a checkpoint",
        )
    } else if !a.allow.full_baseline {
        deny(
            codes::TRANSFER_REQUIRES_FULL_BASELINE,
            "a transfer is valid only with allow.full_baseline",
        )
    } else {
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Steps 5-7: what the run needs an authority for
// ---------------------------------------------------------------------------------------------

/// `policy = fail` and the key snapshot is empty: only an exactly covering authority passes.
fn empty_snapshot_refused(f: &GuardFacts) -> bool {
    f.snapshot_keys == 0 && f.empty_snapshot == EmptySnapshotPolicy::Fail
}

/// A non-empty target (tombstones included) with missing or new state.
fn baseline_needs_authority(f: &GuardFacts) -> bool {
    f.checkpoint.is_none() && f.target_total_rows > 0
}

/// The deletions exceed the manifest's own guards.
fn manifest_guards_exceeded(f: &GuardFacts) -> bool {
    rows_exceed(f.missing_keys, f.guards.max_delete_rows)
        || share_exceeds(f, f.guards.max_delete_ratio)
}

/// Under `policy = fail` an empty snapshot needs an authority that covers it exactly.
///
/// With active keys it is an all-delete: explicit row bound ≥ active keys and explicit ratio bound
/// of 1,000,000 ppm. Without active keys it is an empty-target baseline: `allow.full_baseline`.
fn check_empty_snapshot(f: &GuardFacts) -> Check {
    if !empty_snapshot_refused(f) {
        return Ok(());
    }
    let Some(a) = &f.authority else {
        return deny(
            codes::EMPTY_SNAPSHOT_REFUSED,
            format!(
                "the key snapshot is empty ({} active target keys) and empty_snapshot.policy is fail",
                f.target_active_keys
            ),
        );
    };
    let covered = if f.target_active_keys == 0 {
        a.allow.full_baseline
    } else {
        a.allow
            .max_delete_rows
            .is_some_and(|r| r >= f.target_active_keys)
            && a.allow.max_delete_ratio.is_some_and(|r| r >= PPM_ONE)
    };
    if covered {
        Ok(())
    } else if f.target_active_keys == 0 {
        deny(
            codes::AUTHORITY_EMPTY_SNAPSHOT_NOT_COVERED,
            "an empty-target baseline from an empty snapshot needs allow.full_baseline",
        )
    } else {
        deny(
            codes::AUTHORITY_EMPTY_SNAPSHOT_NOT_COVERED,
            format!(
                "deleting all {} active keys needs explicit authority bounds of at least {} rows and 1000000 ppm",
                f.target_active_keys, f.target_active_keys
            ),
        )
    }
}

/// A non-empty target with missing or new state needs an authority with `allow.full_baseline`.
fn check_baseline(f: &GuardFacts) -> Check {
    if !baseline_needs_authority(f) {
        return Ok(());
    }
    match &f.authority {
        None => deny(
            codes::BASELINE_REQUIRES_AUTHORITY,
            format!(
                "the target holds {} rows but this state key has no checkpoint; a baseline needs a repair authority",
                f.target_total_rows
            ),
        ),
        Some(a) if !a.allow.full_baseline => deny(
            codes::AUTHORITY_BASELINE_NOT_ALLOWED,
            "the run is a baseline into a non-empty target but the authority lacks allow.full_baseline",
        ),
        Some(_) => Ok(()),
    }
}

/// Whether the run needs the selected authority for anything.
///
/// It does when the empty snapshot, the baseline or the manifest guards require it, when it selects
/// a repair baseline over an existing checkpoint, or when it carries a transfer (whose necessity
/// the ownership check judges).
fn authority_needed(f: &GuardFacts, a: &RepairAuthority) -> bool {
    empty_snapshot_refused(f)
        || baseline_needs_authority(f)
        || manifest_guards_exceeded(f)
        || (a.allow.full_baseline && f.checkpoint.is_some())
        || a.transfer.is_some()
}

/// An authority that the run does not need fails closed instead of being consumed for nothing.
fn check_authority_needed(f: &GuardFacts) -> Check {
    match &f.authority {
        Some(a) if !authority_needed(f, a) => deny(
            codes::AUTHORITY_UNUSED,
            "an authority was selected but the run needs none",
        ),
        _ => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------------
// Step 8: delete bounds
// ---------------------------------------------------------------------------------------------

/// Effective bound of one kind: the authority's explicit bound replaces the manifest's; without
/// one the manifest's guard stays in force. Returns the bound and whether the authority set it.
fn effective<T: Copy>(authority: Option<T>, manifest: Option<T>) -> Option<(T, bool)> {
    match authority {
        Some(v) => Some((v, true)),
        None => manifest.map(|v| (v, false)),
    }
}

/// Deletions must fit the effective row and ratio bounds, rows checked first.
fn check_delete_bounds(f: &GuardFacts) -> Check {
    let allow = f.authority.as_ref().map(|a| a.allow);
    let rows = effective(
        allow.and_then(|a| a.max_delete_rows),
        f.guards.max_delete_rows,
    );
    if let Some((limit, from_authority)) = rows
        && rows_exceed(f.missing_keys, Some(limit))
    {
        let (code, source) = if from_authority {
            (codes::AUTHORITY_MAX_DELETE_ROWS_EXCEEDED, "the authority")
        } else {
            (codes::MAX_DELETE_ROWS_EXCEEDED, "the manifest")
        };
        return deny(
            code,
            format!(
                "the run would delete {} rows; {source} allows at most {limit}",
                f.missing_keys
            ),
        );
    }
    let ratio = effective(
        allow.and_then(|a| a.max_delete_ratio),
        f.guards.max_delete_ratio,
    );
    if let Some((limit, from_authority)) = ratio
        && share_exceeds(f, Some(limit))
    {
        let (code, source) = if from_authority {
            (codes::AUTHORITY_MAX_DELETE_RATIO_EXCEEDED, "the authority")
        } else {
            (codes::MAX_DELETE_RATIO_EXCEEDED, "the manifest")
        };
        return deny(
            code,
            format!(
                "the run would delete {} of {} active keys; {source} allows at most {limit} ppm",
                f.missing_keys, f.target_active_keys
            ),
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Step 4 (no authority) or 9 (with one): target ownership and transfer
// ---------------------------------------------------------------------------------------------

/// Another active owner needs an exact transfer; a transfer needs another active owner.
fn check_ownership(f: &GuardFacts) -> Check {
    let transfer = f.authority.as_ref().and_then(|a| a.transfer.as_ref());
    match (&f.other_owner, transfer) {
        (None, None) => Ok(()),
        (Some(_), None) => deny(
            codes::TARGET_OWNED_BY_OTHER_STATE,
            "another state key actively owns this target; taking it over needs an authority with an exact transfer",
        ),
        (None, Some(_)) => deny(
            codes::TRANSFER_UNNECESSARY,
            "the authority carries a transfer but no other state key owns this target",
        ),
        (Some(owner), Some(t)) => {
            if t.old_state_key == owner.state_key && t.old_checkpoint == owner.checkpoint {
                Ok(())
            } else {
                deny(
                    codes::TRANSFER_MISMATCH,
                    "the transfer does not name the active owner's exact state key and checkpoint",
                )
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Allowance
// ---------------------------------------------------------------------------------------------

/// Full baseline without state or when an (admitted, needed) authority allows it; else incremental.
fn load_kind(f: &GuardFacts) -> LoadKind {
    let authority_selects = f.authority.as_ref().is_some_and(|a| a.allow.full_baseline);
    if f.checkpoint.is_none() || authority_selects {
        LoadKind::FullBaseline
    } else {
        LoadKind::Incremental
    }
}

/// Why an admitted run may proceed, most specific first.
fn allow_reason(f: &GuardFacts, load: LoadKind) -> Reason {
    let (code, message) = match &f.authority {
        Some(a) if a.transfer.is_some() => (
            codes::ALLOWED_AUTHORIZED_TRANSFER,
            "full baseline with an authorized transfer from the old owner",
        ),
        Some(a) if a.allow.full_baseline => (
            codes::ALLOWED_AUTHORIZED_FULL_BASELINE,
            "full baseline selected by the repair authority",
        ),
        Some(_) if empty_snapshot_refused(f) => (
            codes::ALLOWED_AUTHORIZED_ALL_DELETE,
            "all-delete from an empty snapshot, covered exactly by the authority",
        ),
        Some(_) => (
            codes::ALLOWED_AUTHORIZED_DELETES,
            "deletions beyond the manifest guards, covered by the authority",
        ),
        None if f.snapshot_keys == 0 => (
            codes::ALLOWED_EMPTY_SNAPSHOT_WITHIN_GUARDS,
            "empty snapshot within the manifest guards (empty_snapshot.policy is apply_guards)",
        ),
        None if load == LoadKind::FullBaseline => (
            codes::ALLOWED_FIRST_BASELINE,
            "first baseline into an empty target",
        ),
        None => (
            codes::ALLOWED_WITHIN_GUARDS,
            "incremental run within the manifest guards",
        ),
    };
    Reason::new(code, message)
}

/// The allowance for a run that passed every check.
fn allowed(f: &GuardFacts) -> Allowed {
    let load = load_kind(f);
    let authority = f.authority.as_ref();
    Allowed {
        load,
        authority_used: authority.map(|a| a.authority_id.clone()),
        transfer_from: authority.and_then(|a| a.transfer.clone()),
        reason: allow_reason(f, load),
    }
}
