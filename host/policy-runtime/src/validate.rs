//! Contract checks on policy outputs. A component can return anything its types allow; the host
//! accepts only decisions that are well formed for the input they answer. A violation is a
//! fail-closed `DPONE_POLICY_OUTPUT_INVALID`.

use dpone_policy_model::admission::{RuntimeDecision, RuntimeFacts, StaticDecision, StaticFacts};
use dpone_policy_model::delete_mode::{DeleteModeFacts, KeyState, PlanDecision};
use dpone_policy_model::guard::{GuardDecision, GuardFacts};
use dpone_policy_model::scope::{Limits, ScopeDecision, ScopeFacts};
use dpone_policy_model::types::Reason;

const MAX_CODE_BYTES: usize = 96;
const MAX_MESSAGE_BYTES: usize = 1024;

fn reason(r: &Reason) -> Result<(), String> {
    let code_ok = !r.code.is_empty()
        && r.code.len() <= MAX_CODE_BYTES
        && r.code
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
    if !code_ok {
        return Err("reason code must be 1..=96 characters of [A-Za-z0-9_.]".to_owned());
    }
    if r.message.len() > MAX_MESSAGE_BYTES {
        return Err(format!("reason message exceeds {MAX_MESSAGE_BYTES} bytes"));
    }
    Ok(())
}

fn reasons(list: &[Reason]) -> Result<(), String> {
    if list.is_empty() {
        return Err("a refusal must name at least one reason".to_owned());
    }
    list.iter().try_for_each(reason)
}

pub(crate) fn guard(facts: &GuardFacts, decision: &GuardDecision) -> Result<(), String> {
    match decision {
        GuardDecision::Deny(r) => reason(r),
        GuardDecision::Allow(allowed) => {
            reason(&allowed.reason)?;
            let offered = facts.authority.as_ref();
            if let Some(used) = &allowed.authority_used
                && offered.map(|a| &a.authority_id) != Some(used)
            {
                return Err("allow names an authority that was not offered".to_owned());
            }
            if let Some(transfer) = &allowed.transfer_from {
                let authorized = offered.and_then(|a| a.transfer.as_ref());
                if allowed.authority_used.is_none() || authorized != Some(transfer) {
                    return Err("allow names a transfer the authority does not carry".to_owned());
                }
            }
            Ok(())
        }
    }
}

pub(crate) fn delete_mode(_facts: &DeleteModeFacts, decision: &PlanDecision) -> Result<(), String> {
    match decision {
        PlanDecision::Reject(r) => reason(r),
        PlanDecision::Plan(plan) => {
            for state in KeyState::ALL {
                let count = plan.rules.iter().filter(|r| r.state == state).count();
                if count != 1 {
                    return Err(format!("plan has {count} rules for key state {state:?}"));
                }
            }
            if plan.rules.len() != KeyState::ALL.len() {
                return Err("plan has rules beyond the key states".to_owned());
            }
            if let Some(c) = plan
                .columns
                .iter()
                .find(|c| !c.name.starts_with("__dpone__"))
            {
                return Err(format!(
                    "reserved column {:?} lacks the __dpone__ prefix",
                    truncate(&c.name)
                ));
            }
            Ok(())
        }
    }
}

pub(crate) fn admission_static(
    _facts: &StaticFacts,
    decision: &StaticDecision,
) -> Result<(), String> {
    match decision {
        StaticDecision::Blocked(list) => reasons(list),
        StaticDecision::Admitted(d) => {
            if !d.no_fallback || !d.runtime_admission_required {
                return Err(
                    "cluster admission must require runtime admission and forbid fallback"
                        .to_owned(),
                );
            }
            Ok(())
        }
    }
}

pub(crate) fn admission_runtime(
    facts: &RuntimeFacts,
    decision: &RuntimeDecision,
) -> Result<(), String> {
    match decision {
        RuntimeDecision::Blocked(list) => reasons(list),
        RuntimeDecision::Admitted(admission) => {
            if !facts.inventory_complete {
                return Err("admitted an incomplete inventory".to_owned());
            }
            if admission.members.len() != facts.members.len() {
                return Err("admitted members differ from the inventory".to_owned());
            }
            for member in &admission.members {
                let known = facts.members.iter().any(|m| {
                    m.member_id == member.member_id
                        && m.shard_num == member.shard_num
                        && m.replica_num == member.replica_num
                });
                if !known {
                    return Err("admitted a member that is not in the inventory".to_owned());
                }
            }
            Ok(())
        }
    }
}

pub(crate) fn scope(facts: &ScopeFacts, decision: &ScopeDecision) -> Result<(), String> {
    match decision {
        ScopeDecision::Deny(r) => reason(r),
        ScopeDecision::Admit(admitted) => {
            reason(&admitted.reason)?;
            let e = &admitted.effective_limits;
            for bound in [
                &facts.policy.ceilings,
                &facts.grant.limits,
                &facts.request.limits,
            ] {
                if !within(e, bound) {
                    return Err(
                        "effective limits exceed a policy, grant or workload limit".to_owned()
                    );
                }
            }
            Ok(())
        }
    }
}

fn within(e: &Limits, bound: &Limits) -> bool {
    e.max_workloads <= bound.max_workloads
        && e.max_attempts <= bound.max_attempts
        && e.max_source_rows <= bound.max_source_rows
        && e.max_source_bytes <= bound.max_source_bytes
        && e.max_attempt_seconds <= bound.max_attempt_seconds
}

fn truncate(s: &str) -> &str {
    match s.char_indices().nth(32) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}
