//! Wall-clock timings of one run, by phase and by member: evidence for operators and
//! benchmarks, never an input to any decision.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::contracts::MemberId;

/// The wall time of one run's phases, in seconds. A phase the run did not execute reports 0.
/// Members are served concurrently, so the per-member figures overlap in wall time and their
/// sum may exceed the phase's.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunTimings {
    /// Sealing the artifact (source extraction and store write).
    pub seal_s: f64,
    /// The canonical content digest of the sealed artifact.
    pub artifact_digest_s: f64,
    /// Observing (and proving, when present) every member's target before binding.
    pub baseline_s: f64,
    /// STAGING → STAGED: every member's create, load and content proof, then the barrier.
    pub stage_s: f64,
    /// STAGED → PUBLICATION_DISPATCHING: re-observation, pre-publication proofs, dispatch.
    pub authorize_s: f64,
    /// Reconciling the publication: queue, pair states, published-target proofs, commit.
    pub publish_s: f64,
    /// The COMMITTED authority write alone (included in `publish_s`).
    pub commit_s: f64,
    /// COMMITTED → COMPLETED: predecessor cleanup.
    pub cleanup_s: f64,
    /// Time spent in the authority store (every read and every write of the operation's
    /// record, summed over all phases and threads; overlaps the phases above).
    pub authority_s: f64,
    /// How many authority reads and writes the run made.
    pub authority_calls: u64,
    /// The whole run.
    pub total_s: f64,
    /// Per member, in member-id order.
    pub members: Vec<MemberTimings>,
}

/// One member's share of a run, in seconds (summed when a step repeats).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemberTimings {
    /// Member id.
    pub member: MemberId,
    /// Proving the existing target's content before binding.
    pub baseline_proof_s: f64,
    /// `CREATE TABLE … UUID`.
    pub create_s: f64,
    /// The artifact load (`INSERT … FORMAT RowBinary`), including the artifact's revalidation.
    pub load_s: f64,
    /// The candidate's content proof before READY.
    pub candidate_proof_s: f64,
    /// The candidate's content proof before the publication permit.
    pub authorize_proof_s: f64,
    /// The published target's content proof before COMMITTED.
    pub target_proof_s: f64,
}

impl MemberTimings {
    fn new(member: MemberId) -> Self {
        Self {
            member,
            baseline_proof_s: 0.0,
            create_s: 0.0,
            load_s: 0.0,
            candidate_proof_s: 0.0,
            authorize_proof_s: 0.0,
            target_proof_s: 0.0,
        }
    }
}

/// A run-level phase.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RunPhase {
    Seal,
    ArtifactDigest,
    Baseline,
    Stage,
    Authorize,
    Publish,
    Commit,
    Cleanup,
}

/// A member-level step.
#[derive(Clone, Copy, Debug)]
pub(crate) enum MemberStep {
    BaselineProof,
    Create,
    Load,
    CandidateProof,
    AuthorizeProof,
    TargetProof,
}

/// Accumulates timings from any thread.
#[derive(Debug, Default)]
pub(crate) struct Clock {
    inner: Mutex<RunTimings>,
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn round(s: f64) -> f64 {
    (s * 1e6).round() / 1e6
}

impl Clock {
    fn with<R>(&self, f: impl FnOnce(&mut RunTimings) -> R) -> R {
        let mut g = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut g)
    }

    pub(crate) fn reset(&self) {
        self.with(|t| *t = RunTimings::default());
    }

    pub(crate) fn add_total(&self, d: Duration) {
        self.with(|t| t.total_s += secs(d));
    }

    pub(crate) fn add(&self, phase: RunPhase, d: Duration) {
        let s = secs(d);
        self.with(|t| {
            let slot = match phase {
                RunPhase::Seal => &mut t.seal_s,
                RunPhase::ArtifactDigest => &mut t.artifact_digest_s,
                RunPhase::Baseline => &mut t.baseline_s,
                RunPhase::Stage => &mut t.stage_s,
                RunPhase::Authorize => &mut t.authorize_s,
                RunPhase::Publish => &mut t.publish_s,
                RunPhase::Commit => &mut t.commit_s,
                RunPhase::Cleanup => &mut t.cleanup_s,
            };
            *slot += s;
        });
    }

    /// Records one authority read or write that took `d`.
    pub(crate) fn add_authority(&self, d: Duration) {
        let s = secs(d);
        self.with(|t| {
            t.authority_s += s;
            t.authority_calls += 1;
        });
    }

    pub(crate) fn add_member(&self, member: &MemberId, step: MemberStep, d: Duration) {
        let s = secs(d);
        self.with(|t| {
            let i = match t.members.iter().position(|m| m.member == *member) {
                Some(i) => i,
                None => {
                    t.members.push(MemberTimings::new(*member));
                    t.members.sort_by_key(|a| a.member);
                    t.members
                        .iter()
                        .position(|m| m.member == *member)
                        .unwrap_or(0)
                }
            };
            let m = &mut t.members[i];
            let slot = match step {
                MemberStep::BaselineProof => &mut m.baseline_proof_s,
                MemberStep::Create => &mut m.create_s,
                MemberStep::Load => &mut m.load_s,
                MemberStep::CandidateProof => &mut m.candidate_proof_s,
                MemberStep::AuthorizeProof => &mut m.authorize_proof_s,
                MemberStep::TargetProof => &mut m.target_proof_s,
            };
            *slot += s;
        });
    }

    /// Times `f` as `phase`.
    pub(crate) fn phase<T>(&self, phase: RunPhase, f: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let out = f();
        self.add(phase, started.elapsed());
        out
    }

    /// Times `f` as `step` of `member`.
    pub(crate) fn member<T>(
        &self,
        member: &MemberId,
        step: MemberStep,
        f: impl FnOnce() -> T,
    ) -> T {
        let started = Instant::now();
        let out = f();
        self.add_member(member, step, started.elapsed());
        out
    }

    /// A copy, rounded to microseconds.
    pub(crate) fn snapshot(&self) -> RunTimings {
        self.with(|t| {
            let mut t = t.clone();
            for v in [
                &mut t.seal_s,
                &mut t.artifact_digest_s,
                &mut t.baseline_s,
                &mut t.stage_s,
                &mut t.authorize_s,
                &mut t.publish_s,
                &mut t.commit_s,
                &mut t.cleanup_s,
                &mut t.authority_s,
                &mut t.total_s,
            ] {
                *v = round(*v);
            }
            for m in &mut t.members {
                for v in [
                    &mut m.baseline_proof_s,
                    &mut m.create_s,
                    &mut m.load_s,
                    &mut m.candidate_proof_s,
                    &mut m.authorize_proof_s,
                    &mut m.target_proof_s,
                ] {
                    *v = round(*v);
                }
            }
            t
        })
    }
}
