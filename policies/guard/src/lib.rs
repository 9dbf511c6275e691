//! The shipped guard policy: delete guards, baseline rules and one-shot repair authority for
//! XMin key reconciliation (spec 003).
//!
//! [`decide`] is the whole policy as plain Rust; it compiles natively (for decision-table parity
//! tests) and, on `wasm32`, is exported as the `dpone:policy/guard-policy` world by `component`.

use dpone_policy_model::guard::{GuardDecision, GuardFacts};
use dpone_policy_model::types::Reason;

#[cfg(target_arch = "wasm32")]
mod component;

/// Decides whether a reconciliation run may proceed.
pub fn decide(facts: &GuardFacts) -> GuardDecision {
    let _ = facts;
    GuardDecision::Deny(Reason::new("guard.not_written", "placeholder"))
}
